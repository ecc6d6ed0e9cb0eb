/// Bounds on what one request may cost the server. Every limit answers with its own status so that a
/// client learns which one it hit.
public struct HTTPLimits: Sendable {
    /// Longest request line (method, target, version). Past it: 414.
    public var maxRequestLineBytes = 8 * 1024
    /// Most header fields in one request (trailers included). Past it: 431.
    public var maxHeaderCount = 100
    /// Largest header section, request line excluded. Past it: 431.
    public var maxHeaderBytes = 32 * 1024
    /// Largest request body, decoded. Past it: 413.
    public var maxBodyBytes = 1024 * 1024
    /// Longest chunk-size line, extensions included (RFC 9112 §7.1.1 sets none; we ignore
    /// extensions, so they need no room). Past it: 400.
    public var maxChunkLineBytes = 256
    /// Chunked framing (size lines, extensions, CRLFs, trailers) allowed beyond the body's own
    /// size. Past it: 413, so framing can never cost more than about twice the body.
    public var maxChunkFramingBytes = 64 * 1024
    /// Routes that take a larger body than `maxBodyBytes` (a file upload form), by method and path
    /// (exact, or with `:name` segments that match any one segment, as the router's). Past their own limit the client reads their `refusal`, refused as soon as the
    /// Content-Length says so, before a byte of the body is read.
    public var uploads: [Upload] = []
    /// Bodies larger than `maxBodyBytes` being received at once, in bytes, on every connection
    /// (nil: no bound but each route's own).
    public var uploadBudget: UploadBudget?
    /// Where `spooled` uploads' bodies are written as they arrive (SpooledBody); nil keeps them in
    /// memory like any other body.
    public var spoolDirectory: String?

    public struct Upload: Sendable {
        public var method: String
        public var path: String
        public var maxBodyBytes: Int
        public var refusal: String
        /// The body goes to a file as it arrives (`spoolDirectory`, HTTPRequest.spooled), not into memory.
        public var spooled: Bool

        public init(method: String, path: String, maxBodyBytes: Int, refusal: String, spooled: Bool = false) {
            (self.method, self.path, self.maxBodyBytes, self.refusal, self.spooled) = (method, path, maxBodyBytes, refusal, spooled)
        }
    }

    public init() {}

    /// The upload route this request's head names, if any (nil: `maxBodyBytes` applies).
    func upload(method: String, path: String) -> Upload? {
        uploads.isEmpty ? nil : uploads.first { $0.method == method && Self.matches($0.path, path) }
    }

    /// "/pins/:id/own-photos" matches "/pins/12/own-photos", not "/pins//own-photos" or "/pins/1/2/own-photos".
    static func matches(_ pattern: String, _ path: String) -> Bool {
        guard pattern.contains(":") else { return pattern == path }
        let wanted = pattern.split(separator: "/", omittingEmptySubsequences: false)
        let given = path.split(separator: "/", omittingEmptySubsequences: false)
        return wanted.count == given.count && zip(wanted, given).allSatisfy { $0.hasPrefix(":") ? !$1.isEmpty : $0 == $1 }
    }

    /// Past the body limit: the upload's sentence, or the default one.
    func bodyRefusal(_ upload: Upload?) -> HTTPParseError {
        HTTPParseError(.contentTooLarge, upload?.refusal ?? "body larger than \(maxBodyBytes) bytes")
    }

    /// The largest body any request may have.
    var largestBody: Int { uploads.reduce(maxBodyBytes) { max($0, $1.maxBodyBytes) } }
}
