import HTTPServer
import AlbumWing

/// Headers every response carries. The Content-Security-Policy allows no inline script at all
/// (script-src 'self'), so an escaping mistake cannot become script execution; frame-ancestors
/// 'none' stops clickjacking of the pin and delete buttons.
struct SecurityHeaders: Middleware {
    let contentSecurityPolicy: String
    /// Strict-Transport-Security when the public address is https: after one visit the browser never
    /// tries plain http again, so no one on the path can strip TLS from a later visit. A year, and
    /// not includeSubDomains: the other hosts of the domain are not ours to commit.
    let strictTransportSecurity: Bool

    /// `imageSources`: origins images may come from besides our own (a photo provider's image
    /// hosts; map tiles always come through our own /tiles).
    init(imageSources: [String] = [], strictTransportSecurity: Bool = false) {
        contentSecurityPolicy = Self.policy(imageSources: imageSources)
        self.strictTransportSecurity = strictTransportSecurity
    }

    static func policy(imageSources: [String]) -> String { [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        (["img-src 'self' data: blob:"] + imageSources).joined(separator: " "),
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ].joined(separator: "; ") }

    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        var response = try next(request)
        apply(to: &response)
        return response
    }

    func apply(to response: inout HTTPResponse) {
        response.headers.set("Content-Security-Policy", contentSecurityPolicy)
        response.headers.set("X-Content-Type-Options", "nosniff")
        response.headers.set("Referrer-Policy", "same-origin")
        response.headers.set("X-Frame-Options", "DENY")
        if strictTransportSecurity { response.headers.set("Strict-Transport-Security", "max-age=31536000") }
    }
}
