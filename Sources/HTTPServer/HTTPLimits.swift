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

    public init() {}
}
