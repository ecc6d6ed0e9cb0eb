import Foundation
import HTTPServer
import Synchronization
import Domain

/// Forgotten passwords: /forgot-password asks for the address and mails a link when mail is set up
/// (the answer is the same whether or not an account has the address); /reset-password/TOKEN
/// chooses a new password once, ending every session of the account. Without mail the page says
/// whom to ask (the operator's `virtual-tourist admin reset-password`).
extension WebPipeline {
    mutating func addPasswordResetRoutes(_ routes: PasswordResetRoutes) {
        page("GET", "/forgot-password", routes.forgotPage)
        page("POST", "/forgot-password", routes.forgot)
        page("GET", "/reset-password/:token", routes.resetPage)
        page("POST", "/reset-password/:token", routes.reset)
    }
}

/// One handler per route (the table is `WebPipeline.addPasswordResetRoutes`). A class: it holds the
/// per-network limiter's state, one for the process.
final class PasswordResetRoutes: Sendable {
    let resets: PasswordResets
    let mail: MailSender?
    /// The address people reach the app at, which links in mail need.
    let base: String?
    let secure: Bool
    /// Per client network as well as per account (PasswordResets.perHour): one address cannot walk
    /// a list of addresses and fill the outbox. In memory, per instance, bounded.
    private let askers = Mutex(TokenBuckets<String>(limit: 10_000))
    private let askRule = TokenBuckets<String>.Rule(PasswordResets.perNetworkPerHour, per: 3600)

    init(resets: PasswordResets, mail: MailSender?, base: String?, secure: Bool) {
        (self.resets, self.mail, self.base, self.secure) = (resets, mail, base, secure)
    }

    private var mails: Bool { mail != nil && base != nil }

    func forgotPage(_ context: RequestContext) throws -> HTTPResponse {
        .page(AccountViews.forgotPassword(mails: mails, chrome: context.chrome))
    }

    func forgot(_ context: RequestContext) throws -> HTTPResponse {
        guard mails, let base else { return .page(AccountViews.forgotPassword(mails: false, chrome: context.chrome)) }
        let email = (context.request.formValue("email") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if let problem = User.emailProblem(email) {
            return .page(AccountViews.forgotPassword(mails: true, chrome: context.chrome, email: email, error: problem),
                         status: .unprocessableContent)
        }
        let network = context.request.remoteNetwork
        guard askers.withLock({ $0.take(network, askRule, now: .now) }) else {
            throw HTTPError.tooManyRequests("Many password resets were asked for from your network this hour. Try again in an hour, or ask the person who runs this server.",
                                            retryAfter: .seconds(3600))
        }
        try resets.request(email: email, link: base + "/reset-password/")
        mail?.wake()
        return .redirect(to: "/sign-in", flash: "If an account has that address, a link to choose a new password is on its way. It works for \(PasswordResets.minutes) minutes, once.", secure: secure)
    }

    func resetPage(_ context: RequestContext) throws -> HTTPResponse {
        let token = context.request.parameters["token"] ?? ""
        guard try resets.isOpen(token) else { throw HTTPError(.notFound, AccountViews.deadResetLink) }
        return Self.noStore(.page(AccountViews.resetPassword(token: token, chrome: context.chrome)))
    }

    func reset(_ context: RequestContext) throws -> HTTPResponse {
        let token = context.request.parameters["token"] ?? ""
        let password = context.request.formValue("password") ?? ""
        var problem = Password.problem(with: password)
        if problem == nil, password != context.request.formValue("password_confirmation") { problem = "The two passwords differ." }
        if let problem {
            guard try resets.isOpen(token) else { throw HTTPError(.notFound, AccountViews.deadResetLink) }
            return Self.noStore(.page(AccountViews.resetPassword(token: token, chrome: context.chrome, error: problem), status: .unprocessableContent))
        }
        guard try resets.reset(token, password: password) else { throw HTTPError(.notFound, AccountViews.deadResetLink) }
        var response = HTTPResponse.redirect(to: "/sign-in", flash: "Your password is changed and you are signed out everywhere. Sign in with the new one.", secure: secure)
        response.headers.add("Set-Cookie", Cookies.clear(Cookies.session, secure: secure))
        return response
    }

    /// The reset pages carry the token in their address: never kept by a cache. (Referrer-Policy is
    /// same-origin on every page: the token never leaves as a referrer.)
    private static func noStore(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.set("Cache-Control", "no-store")
        return response
    }
}
