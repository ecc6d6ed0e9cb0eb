import Domain
/// Sign-in and sign-up forms. Errors appear next to their field and what the person typed stays,
/// except passwords.
enum AccountViews {
    struct SignUpForm {
        var email = ""
        var displayName = ""
        var errors: [String: String] = [:]
        /// SIGN_UP, and what it means for this visitor now (AccountStore.signUpGate).
        var mode = SignUpMode.open
        var gate = AccountStore.SignUpGate.open
        /// The invitation code from the link (?invite=) or the form.
        var invitation: String?
    }

    struct SignInForm {
        var email = ""
        var next = ""
        var error: String?
    }

    static func signUp(_ form: SignUpForm, chrome: Layout.Chrome) -> HTML {
        if form.mode == .closed && form.gate == .refused {
            return Layout.page(title: "Sign-up is closed", chrome: chrome, bodyClass: "account-page", main: """
                <section class="card narrow">
                <h1>Sign-up is closed</h1>
                <p class="lead" id="sign-up-closed">This site does not take new accounts. If you know the person who runs it, ask them to make an account for you.</p>
                <p class="alternative">Already have an account? <a href="/sign-in">Sign in</a></p>
                </section>
                """)
        }
        let gate: HTML
        switch form.gate {
        case .firstAccount, .setupCodeNeeded:
            gate = """
                <p class="flash" id="sign-up-first">Nobody has an account here yet: yours will be the first. It needs the \
                setup code the server wrote in its log when it started (the line with “setup code”; with Docker Compose: \
                <code>docker compose logs app | grep "setup code"</code>). Or make the account on the server with \
                <code>virtual-tourist admin create-person</code>.</p>
                """
        case .invited, .refused:
            gate = """
                <p class="flash" id="sign-up-invite">Sign-up on this site is by invitation. Ask the person who runs it for an invitation link.</p>
                """
        case .open:
            gate = .empty
        }
        let first = form.gate == .firstAccount || form.gate == .setupCodeNeeded
        let invitationField: HTML = first
            ? field("invite", label: "Setup code", type: "text", value: form.invitation ?? "", autocomplete: "off",
                    error: form.errors["invite"], hint: "From the server's log: the line that says “setup code”.")
            : form.mode == .invite
            ? field("invite", label: "Invitation code", type: "text", value: form.invitation ?? "", autocomplete: "off",
                    error: form.errors["invite"], hint: "Filled in for you when you follow an invitation link.")
            : .empty
        return Layout.page(title: "Create your account", chrome: chrome, bodyClass: "account-page", main: """
            <section class="card narrow">
            <h1>Create your account</h1>
            <p class="lead">Drop pins anywhere in the world and see photos taken there.</p>
            \(gate)
            <form method="post" action="/sign-up" class="stacked" novalidate>
            \(errorSummary(form.errors))
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            \(invitationField)
            \(field("email", label: "Email", type: "email", value: form.email, autocomplete: "email", error: form.errors["email"]))
            \(field("display_name", label: "Your name", type: "text", value: form.displayName, autocomplete: "nickname", error: form.errors["display_name"], hint: "Shown at the top of your pages."))
            \(field("password", label: "Password", type: "password", value: "", autocomplete: "new-password", error: form.errors["password"], hint: "At least \(Password.minimumLength) characters."))
            \(field("password_confirmation", label: "Password again", type: "password", value: "", autocomplete: "new-password", error: form.errors["password_confirmation"]))
            <button type="submit" class="button primary">Create account</button>
            </form>
            <p class="alternative">Already have an account? <a href="/sign-in">Sign in</a></p>
            </section>
            """)
    }

    static func signIn(_ form: SignInForm, chrome: Layout.Chrome) -> HTML {
        let error: HTML = form.error.map { "<p class=\"form-error\" role=\"alert\" id=\"sign-in-error\">\(text: $0)</p>" } ?? .empty
        let nextField: HTML = form.next.isEmpty ? .empty : "<input type=\"hidden\" name=\"next\" value=\"\(text: form.next)\">"
        return Layout.page(title: "Sign in", chrome: chrome, bodyClass: "account-page", main: """
            <section class="card narrow">
            <h1>Sign in</h1>
            \(error)
            <form method="post" action="/sign-in" class="stacked" novalidate>
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            \(nextField)
            \(field("email", label: "Email", type: "email", value: form.email, autocomplete: "username", error: nil))
            \(field("password", label: "Password", type: "password", value: "", autocomplete: "current-password", error: nil))
            <button type="submit" class="button primary">Sign in</button>
            </form>
            <p class="alternative"><a href="/forgot-password">Forgot your password?</a></p>
            <p class="alternative">New here? <a href="/sign-up">Create an account</a></p>
            </section>
            """)
    }

    static let deadResetLink = "This link has expired or has been used already. Ask for a new one on the “Forgot your password?” page."

    /// Asking for a reset link; without mail, whom to ask instead.
    static func forgotPassword(mails: Bool, chrome: Layout.Chrome, email: String = "", error: String? = nil) -> HTML {
        let form: HTML = mails ? """
            <p>Enter the address of your account. If an account has it, we mail it a link to choose a new password.</p>
            \(error.map { "<p class=\"form-error\" role=\"alert\" id=\"email-error\">\(text: $0)</p>" as HTML } ?? .empty)
            <form method="post" action="/forgot-password" class="stacked" novalidate>
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            \(field("email", label: "Email", type: "email", value: email, autocomplete: "username", error: nil))
            <button type="submit" class="button primary">Mail me a link</button>
            </form>
            """ : """
            <p>This server does not send mail, so it cannot mail you a link. Ask the person who runs it to set a new password for you
            (they run <code>virtual-tourist admin reset-password</code>).</p>
            """
        return Layout.page(title: "Forgot your password?", chrome: chrome, bodyClass: "account-page", main: """
            <section class="card narrow">
            <h1>Forgot your password?</h1>
            \(form)
            <p class="alternative"><a href="/sign-in">Back to sign in</a></p>
            </section>
            """)
    }

    /// Choosing a new password with a link from a reset mail.
    static func resetPassword(token: String, chrome: Layout.Chrome, error: String? = nil) -> HTML {
        Layout.page(title: "Choose a new password", chrome: chrome, bodyClass: "account-page", main: """
            <section class="card narrow">
            <h1>Choose a new password</h1>
            \(error.map { "<p class=\"form-error\" role=\"alert\" id=\"password-error-summary\">\(text: $0)</p>" as HTML } ?? .empty)
            <form method="post" action="/reset-password/\(text: token)" class="stacked" novalidate>
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            \(field("password", label: "New password", type: "password", value: "", autocomplete: "new-password", error: error,
                    hint: "At least \(Password.minimumLength) characters."))
            \(field("password_confirmation", label: "New password again", type: "password", value: "", autocomplete: "new-password", error: nil))
            <button type="submit" class="button primary">Set the new password</button>
            </form>
            <p class="muted">Setting it signs you out everywhere, this browser included.</p>
            </section>
            """)
    }

    /// Announced as the page arrives (role=alert): how many fields need attention; each field's own
    /// message is tied to it with aria-describedby.
    static func errorSummary(_ errors: [String: String]) -> HTML {
        guard !errors.isEmpty else { return .empty }
        let count = errors.count == 1 ? "One field needs" : "\(errors.count) fields need"
        return "<p class=\"form-error\" role=\"alert\" id=\"sign-up-errors\">\(text: count) your attention: \(text: errors.values.sorted().joined(separator: " "))</p>"
    }

    static func field(_ name: String, label: String, type: String, value: String, autocomplete: String,
                      error: String?, hint: String? = nil) -> HTML {
        let describedBy = [error.map { _ in "\(name)-error" }, hint.map { _ in "\(name)-hint" }].compactMap { $0 }
        let aria: HTML = describedBy.isEmpty ? .empty : " aria-describedby=\"\(text: describedBy.joined(separator: " "))\""
        let invalid: HTML = error == nil ? .empty : " aria-invalid=\"true\""
        let hintHTML: HTML = hint.map { "<small id=\"\(text: name)-hint\" class=\"hint\">\(text: $0)</small>" } ?? .empty
        let errorHTML: HTML = error.map { "<small id=\"\(text: name)-error\" class=\"field-error\">\(text: $0)</small>" } ?? .empty
        return """
            <div class="field\(error == nil ? HTML.empty : " has-error")">
            <label for="\(text: name)">\(text: label)</label>
            <input id="\(text: name)" name="\(text: name)" type="\(text: type)" value="\(text: value)" autocomplete="\(text: autocomplete)" required\(aria)\(invalid)>
            \(hintHTML)\(errorHTML)
            </div>
            """
    }
}
