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

    public init() {}
}
