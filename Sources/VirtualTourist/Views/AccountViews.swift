/// Sign-in and sign-up forms. Errors appear next to their field and what the person typed stays,
/// except passwords.
enum AccountViews {
    struct SignUpForm {
        var email = ""
        var displayName = ""
        var errors: [String: String] = [:]
    }

    struct SignInForm {
        var email = ""
        var next = ""
        var error: String?
    }

    static func signUp(_ form: SignUpForm, chrome: Layout.Chrome) -> HTML {
        Layout.page(title: "Create your account", chrome: chrome, bodyClass: "account-page", main: """
            <section class="card narrow">
            <h1>Create your account</h1>
            <p class="lead">Drop pins anywhere in the world and see photos taken there.</p>
            <form method="post" action="/sign-up" class="stacked" novalidate>
            \(errorSummary(form.errors))
            \(Layout.csrfField(chrome.csrfToken ?? ""))
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
            <p class="alternative">New here? <a href="/sign-up">Create an account</a></p>
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
