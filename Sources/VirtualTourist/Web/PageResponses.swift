import HTTPServer

extension HTTPResponse {
    /// A redirect that shows `flash` on the next page.
    static func redirect(to location: String, flash: String, secure: Bool) -> HTTPResponse {
        var response = HTTPResponse.redirect(to: location)
        response.headers.add("Set-Cookie", Cookies.set(Cookies.flash, FormEncoding.encode(flash), maxAge: 60, secure: secure))
        return response
    }

    static func page(_ html: HTML, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/html; charset=utf-8"], body: html.bytes)
    }
}
