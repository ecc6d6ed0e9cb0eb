import HTTPServer

/// Headers every response carries. The Content-Security-Policy allows no inline script at all
/// (script-src 'self'), so an escaping mistake cannot become script execution; frame-ancestors
/// 'none' stops clickjacking of the pin and delete buttons.
struct SecurityHeaders: Middleware {
    let contentSecurityPolicy: String

    /// `imageSources`: origins images may come from besides our own (the raster tile server).
    init(imageSources: [String] = []) {
        contentSecurityPolicy = Self.policy(imageSources: imageSources)
    }

    /// The origin of a tile URL template for img-src; {s} subdomains become a wildcard.
    static func imageSource(forTileURL template: String) -> [String] {
        guard template != "none", let schemeEnd = template.range(of: "://") else { return [] }
        let rest = template[schemeEnd.upperBound...]
        let host = rest.prefix { $0 != "/" }.replacingOccurrences(of: "{s}", with: "*")
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || ".-*:".contains($0) }) else { return [] }
        return [String(template[..<schemeEnd.upperBound]) + host]
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
    }
}
