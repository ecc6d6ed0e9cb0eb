import HTTPServer

/// Cookie names and the Set-Cookie lines the app sends.
enum Cookies {
    static let session = "vt_session"
    /// The CSRF token of a visitor who is not signed in (sign-in and sign-up forms): double submit,
    /// the form field must equal the cookie.
    static let anonymousCSRF = "vt_csrf"
    static let flash = "vt_flash"

    /// Over https every cookie is named `__Host-…`: browsers then accept it only with Secure, Path=/
    /// and no Domain, so a neighbouring subdomain cannot plant or shadow a session or CSRF cookie.
    static let securePrefix = "__Host-"

    /// Cookies of a request (RFC 6265 §5.4: "name=value" pairs separated by "; "), by their names
    /// without the prefix. When secure, cookies without the prefix are ignored: anyone could have set them.
    static func parse(_ request: HTTPRequest, secure: Bool = false) -> [String: String] {
        var cookies: [String: String] = [:]
        for header in request.headers.values("Cookie") {
            for pair in header.split(separator: ";") {
                guard let eq = pair.firstIndex(of: "=") else { continue }
                var name = pair[..<eq].trimmingSpaces()
                if secure {
                    guard name.hasPrefix(securePrefix) else { continue }
                    name = String(name.dropFirst(securePrefix.count))
                }
                let value = pair[pair.index(after: eq)...].trimmingSpaces()
                // The first wins: browsers send the most specific path first.
                if cookies[name] == nil { cookies[name] = value }
            }
        }
        return cookies
    }

    /// The one cookie `name` (without the prefix) as `parse` would find it: the first wins, and when
    /// secure only its `__Host-` form counts. No table and no String per other cookie: the photo
    /// route asks for the session cookie on every request.
    static func value(_ name: String, in request: HTTPRequest, secure: Bool = false) -> String? {
        let wanted = secure ? securePrefix + name : name
        for header in request.headers.values("Cookie") {
            for pair in header.utf8.split(separator: UInt8(ascii: ";")) {
                guard let eq = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
                guard pair[..<eq].trimmingSpaces().elementsEqual(wanted.utf8) else { continue }
                return String(Substring(pair[pair.index(after: eq)...].trimmingSpaces()))
            }
        }
        return nil
    }

    /// HttpOnly and SameSite=Lax always; Secure and the `__Host-` prefix when the site is served over https.
    static func set(_ name: String, _ value: String, maxAge: Int?, secure: Bool) -> String {
        var line = "\(secure ? securePrefix : "")\(name)=\(value); Path=/; HttpOnly; SameSite=Lax"
        if let maxAge { line += "; Max-Age=\(maxAge)" }
        if secure { line += "; Secure" }
        return line
    }

    static func clear(_ name: String, secure: Bool) -> String {
        set(name, "", maxAge: 0, secure: secure)
    }
}
