import Foundation
import HTTPServer
import AlbumWing
import Domain

/// Sign up, sign in, sign out.
extension WebPipeline {
    mutating func addAccountRoutes(_ routes: AccountRoutes) {
        page("GET", "/sign-up", routes.signUpPage)
        page("POST", "/sign-up", routes.signUp)
        page("GET", "/sign-in", routes.signInPage)
        page("POST", "/sign-in", routes.signIn)
        page("POST", "/sign-out", routes.signOut)
    }

    static let invitationNotValid = "This invitation cannot be used: it has expired or has been used already. Ask for a new one."
    static let setupCodeNeeded = "Enter the setup code from the server's log."
    static let setupCodeNotValid = "This is not the setup code the server wrote in its log at its last start. Copy it again, or restart the server for a new one."

    /// An invitation code as typed or linked: trimmed, nil when empty; at most 200 bytes (ours are
    /// 43), so a pasted essay is not hashed and looked up.
    static func invitationCode(_ value: String?) -> String? {
        guard let code = value?.trimmingCharacters(in: .whitespacesAndNewlines), !code.isEmpty else { return nil }
        return String(decoding: code.utf8.prefix(200), as: UTF8.self)
    }

    static func sessionCookie(_ session: Session, secure: Bool) -> String {
        Cookies.set(Cookies.session, session.token, maxAge: AccountStore.sessionLifetimeDays * 86400, secure: secure)
    }

    static func emailProblem(_ email: String) -> String? { User.emailProblem(email) }

    /// `next=` accepts only a path on this site: "/x" but not "//evil.example", "/\evil", a scheme,
    /// or control characters (an open redirect would make our sign-in page a phishing tool).
    static func localPath(_ value: String?) -> String? {
        guard let value, value.hasPrefix("/"), !value.hasPrefix("//"), !value.hasPrefix("/\\"),
              !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" }),
              value.utf8.count <= 2048 else { return nil }
        return value
    }
}

/// Sign up, sign in, sign out: one handler per route (the table is `WebPipeline.addAccountRoutes`).
struct AccountRoutes: Sendable {
    let accounts: AccountStore
    /// Who may sign up: anyone, with an invitation, or nobody (SIGN_UP).
    var mode: SignUpMode = .open
    let photoAccess: PhotoAccess?
    let secure: Bool

    func signUpPage(_ context: RequestContext) throws -> HTTPResponse {
        if context.session != nil { return .redirect(to: "/") }
        var form = AccountViews.SignUpForm(mode: mode, invitation: WebPipeline.invitationCode(context.request.queryValue("invite")))
        form.gate = try accounts.signUpGate(mode: mode, invitation: form.invitation)
        // A link whose invitation is no longer good says so before anyone fills in the form.
        if form.gate == .refused, mode == .invite, form.invitation != nil {
            form.errors["invite"] = WebPipeline.invitationNotValid
        }
        if form.gate == .setupCodeNeeded, form.invitation != nil { form.errors["invite"] = WebPipeline.setupCodeNotValid }
        return .page(AccountViews.signUp(form, chrome: context.chrome))
    }

    func signUp(_ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        var form = AccountViews.SignUpForm(
            email: (request.formValue("email") ?? "").trimmingCharacters(in: .whitespacesAndNewlines),
            displayName: (request.formValue("display_name") ?? "").trimmingCharacters(in: .whitespacesAndNewlines),
            mode: mode, invitation: WebPipeline.invitationCode(request.formValue("invite")))
        // Refused before anything else is looked at: without the right to sign up, which fields
        // are wrong (or which emails are taken) is nobody's business.
        form.gate = try accounts.signUpGate(mode: mode, invitation: form.invitation)
        if form.gate == .refused {
            if mode == .invite {
                form.errors["invite"] = form.invitation == nil ? "Enter the invitation code from your invitation link." : WebPipeline.invitationNotValid
            }
            return .page(AccountViews.signUp(form, chrome: context.chrome), status: .forbidden)
        }
        if form.gate == .setupCodeNeeded {
            form.errors["invite"] = form.invitation == nil ? WebPipeline.setupCodeNeeded : WebPipeline.setupCodeNotValid
            return .page(AccountViews.signUp(form, chrome: context.chrome), status: .forbidden)
        }
        let password = request.formValue("password") ?? ""
        let confirmation = request.formValue("password_confirmation") ?? ""
        if let problem = WebPipeline.emailProblem(form.email) { form.errors["email"] = problem }
        if form.displayName.isEmpty { form.errors["display_name"] = "Tell us what to call you." }
        if form.displayName.count > 100 { form.errors["display_name"] = "Use at most 100 characters." }
        if let problem = Password.problem(with: password) { form.errors["password"] = problem }
        if password != confirmation { form.errors["password_confirmation"] = "The two passwords differ." }
        if form.errors.isEmpty, try !accounts.allowSignUp(from: request.remoteNetwork) {
            form.errors["email"] = "Too many new accounts from your network this hour. Try again later."
            var response = HTTPResponse.page(AccountViews.signUp(form, chrome: context.chrome), status: .tooManyRequests)
            response.waitFor(.seconds(3600))
            return response
        }
        if form.errors.isEmpty {
            do {
                let user = try accounts.signUp(email: form.email, displayName: form.displayName, password: password,
                                               mode: mode, invitation: form.invitation)
                let session = try accounts.createSession(for: user)
                var response = HTTPResponse.redirect(to: "/", flash: "Welcome, \(user.displayName)! Press and hold anywhere on the map to drop a pin.", secure: secure)
                response.headers.add("Set-Cookie", WebPipeline.sessionCookie(session, secure: secure))
                return response
            } catch AccountStore.SignUpError.emailTaken {
                form.errors["email"] = "An account with this email already exists. Sign in instead?"
            } catch let refusal as AccountStore.SignUpError {
                // Someone else used the invitation (or made the first account) meanwhile.
                form.gate = try accounts.signUpGate(mode: mode, invitation: nil)
                if form.gate == .setupCodeNeeded {
                    form.errors["invite"] = WebPipeline.setupCodeNotValid
                } else if refusal != .closed {
                    form.gate = .refused
                    form.errors["invite"] = WebPipeline.invitationNotValid
                }
                return .page(AccountViews.signUp(form, chrome: context.chrome), status: .forbidden)
            }
        }
        return .page(AccountViews.signUp(form, chrome: context.chrome), status: .unprocessableContent)
    }

    func signInPage(_ context: RequestContext) throws -> HTTPResponse {
        let next = WebPipeline.localPath(context.request.queryValue("next"))
        if context.session != nil { return .redirect(to: next ?? "/") }
        return .page(AccountViews.signIn(.init(next: next ?? ""), chrome: context.chrome))
    }

    func signIn(_ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        let email = (request.formValue("email") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let password = request.formValue("password") ?? ""
        let next = WebPipeline.localPath(request.formValue("next"))
        var form = AccountViews.SignInForm(email: email, next: next ?? "")
        switch try accounts.signIn(email: email, password: password, clientAddress: request.remoteNetwork) {
        case .signedIn(let user):
            // A fresh token at sign-in: a token planted before sign-in is worthless after it.
            let session = try accounts.createSession(for: user)
            var response = HTTPResponse.redirect(to: next ?? "/")
            response.headers.add("Set-Cookie", WebPipeline.sessionCookie(session, secure: secure))
            return response
        case .wrongCredentials:
            form.error = "That email and password do not match an account."
            return .page(AccountViews.signIn(form, chrome: context.chrome), status: .unprocessableContent)
        case .throttled(let seconds):
            let wait = seconds < 90 ? "\(seconds) seconds" : "\((seconds + 59) / 60) minutes"
            form.error = "Too many failed attempts. Wait \(wait), then try again."
            var response = HTTPResponse.page(AccountViews.signIn(form, chrome: context.chrome), status: .tooManyRequests)
            response.waitFor(.seconds(seconds))
            return response
        }
    }

    func signOut(_ context: RequestContext) throws -> HTTPResponse {
        if let session = context.session {
            try accounts.deleteSession(token: session.token)
            // At once here; other instances hear NOTIFY photo_access.
            photoAccess?.forget(PhotoAccess.key(sessionToken: session.token))
        }
        var response = HTTPResponse.redirect(to: "/sign-in", flash: "You are signed out.", secure: secure)
        response.headers.add("Set-Cookie", Cookies.clear(Cookies.session, secure: secure))
        return response
    }
}
