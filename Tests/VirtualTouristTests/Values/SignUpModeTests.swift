import Foundation
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// SIGN_UP=closed and invite over real HTTP and PostgreSQL: who gets in, with what, and how often.
@Suite struct SignUpModeTests {
    static let password = "correct horse battery"

    /// Fetches the form (with `?invite=` when given) and posts it; the invitation field is sent
    /// only when `invitation` is not nil.
    static func signUp(_ app: TestApp, email: String, invitation: String? = nil, link: String? = nil) throws -> Browser.Page {
        try signUp(port: app.port, email: email, invitation: invitation, link: link)
    }

    static func signUp(port: Int, email: String, invitation: String? = nil, link: String? = nil) throws -> Browser.Page {
        let browser = Browser(port: port)
        let form = try browser.get(link.map { "/sign-up?invite=\($0)" } ?? "/sign-up")
        // A closed sign-up page has no form: the token of the sign-in form, so the refusal seen is
        // the gate's, not the CSRF check's.
        let token = try form.csrfToken ?? browser.get("/sign-in").csrfToken ?? ""
        var fields = [("_csrf", token), ("email", email), ("display_name", "Someone"),
                      ("password", password), ("password_confirmation", password)]
        if let invitation { fields.append(("invite", invitation)) }
        return try browser.post("/sign-up", form: fields)
    }

    /// The first account of an empty instance, which `serve` asks for in its log: without the
    /// setup code nobody takes it (whoever found the page first used to), with it one person does.
    static func setupCode(_ app: TestApp) throws -> String {
        try #require(try app.app.accounts.setupCode(mode: app.app.signUpMode))
    }

    @Test func closedLetsOnlyTheFirstAccountInWithTheSetupCode() throws {
        let app = try TestApp { $0.signUp = .closed }
        let code = try Self.setupCode(app)
        let empty = try app.browser().get("/sign-up")
        #expect(empty.status == 200)
        #expect(empty.body.contains("id=\"sign-up-first\"") && empty.body.contains("setup code"))
        #expect(empty.body.contains("name=\"invite\""), "the setup code's field")
        let without = try Self.signUp(app, email: "early@example.org")
        #expect(without.status == 403 && without.body.contains("Enter the setup code"), "\(without)")
        let wrong = try Self.signUp(app, email: "early@example.org", invitation: "not-the-code-not-the-code-not-the-code-00000")
        #expect(wrong.status == 403 && wrong.body.contains("not the setup code"))
        #expect(try app.count("SELECT count(*) FROM users") == 0)
        let first = try Self.signUp(app, email: "owner@example.org", invitation: code)
        #expect(first.status == 303, "\(first)")
        // Used: it opens nothing again, nor does any other setup code (they are deleted).
        #expect(try app.count("SELECT count(*) FROM invitations") == 0)

        let page = try app.browser().get("/sign-up")
        #expect(page.status == 200)
        #expect(page.body.contains("Sign-up is closed"))
        #expect(!page.body.contains("<form method=\"post\" action=\"/sign-up\""))
        let refused = try Self.signUp(app, email: "stranger@example.org")
        #expect(refused.status == 403)
        #expect(refused.body.contains("Sign-up is closed"))
        // An invitation does not open a closed instance.
        let invitation = try app.app.accounts.createInvitation()
        #expect(try Self.signUp(app, email: "stranger@example.org", invitation: invitation).status == 403)
        // Nor does it say whether an email has an account.
        let taken = try Self.signUp(app, email: "owner@example.org")
        #expect(taken.status == 403)
        #expect(!taken.body.contains("already exists"))
        #expect(try app.count("SELECT count(*) FROM users") == 1)
        #expect(try app.count("SELECT count(*) FROM invitations") == 1, "the setup code is gone; the invitation above stays unused")
        // Nothing to make once someone has an account.
        #expect(try app.app.accounts.setupCode(mode: .closed) == nil)
    }

    /// Each start makes a new code and drops the earlier ones; with SIGN_UP=open there is none.
    @Test func aNewSetupCodeAtEachStartAndNoneWhenOpen() throws {
        let app = try TestApp { $0.signUp = .invite }
        let old = try Self.setupCode(app)
        let new = try Self.setupCode(app)
        #expect(old != new)
        #expect(try Self.signUp(app, email: "owner@example.org", invitation: old).status == 403)
        #expect(try Self.signUp(app, email: "owner@example.org", invitation: new).status == 303)
        #expect(try app.app.accounts.setupCode(mode: .open) == nil)
        // Every account deleted: the next start asks for a code again.
        try app.pool.query("DELETE FROM users")
        #expect(try Self.signUp(app, email: "squatter@example.org").status == 403)
        #expect(try app.app.accounts.setupCode(mode: .invite) != nil)
    }

    @Test func inviteNeedsAValidInvitationAndUsesItOnce() throws {
        let app = try TestApp { $0.signUp = .invite }
        // The first account needs the setup code, not an invitation.
        let first = try app.browser().get("/sign-up")
        #expect(first.body.contains("id=\"sign-up-first\""))
        #expect(try Self.signUp(app, email: "owner@example.org").status == 403)
        #expect(try Self.signUp(app, email: "owner@example.org", invitation: try Self.setupCode(app)).status == 303)

        let page = try app.browser().get("/sign-up")
        #expect(page.status == 200)
        #expect(page.body.contains("Sign-up on this site is by invitation"))
        #expect(page.body.contains("name=\"invite\""))
        let without = try Self.signUp(app, email: "guest@example.org")
        #expect(without.status == 403)
        #expect(without.body.contains("Enter the invitation code"))
        let guessed = try Self.signUp(app, email: "guest@example.org", invitation: "not-a-real-invitation-code-at-all-000000000")
        #expect(guessed.status == 403)
        #expect(guessed.body.contains("cannot be used"))
        #expect(try app.count("SELECT count(*) FROM users") == 1)

        let code = try app.app.accounts.createInvitation(note: "for the guest")
        #expect(code.count == 43)
        // Only its hash is stored.
        #expect(try app.count("SELECT count(*) FROM invitations WHERE code_hash = sha256(convert_to($1, 'UTF8'))", [code]) == 1)
        #expect(try app.count("SELECT count(*) FROM invitations WHERE encode(code_hash, 'escape') LIKE '%' || $1 || '%'", [code]) == 0)
        // The link fills the field in.
        let linked = try app.browser().get("/sign-up?invite=\(code)")
        #expect(linked.body.contains("name=\"invite\" type=\"text\" value=\"\(code)\""))
        #expect(!linked.body.contains("cannot be used"))

        let accepted = try Self.signUp(app, email: "guest@example.org", invitation: code, link: code)
        #expect(accepted.status == 303, "\(accepted)")
        #expect(try app.count("""
            SELECT count(*) FROM invitations i JOIN users u ON u.id = i.used_by
            WHERE u.email = 'guest@example.org' AND i.used_at IS NOT NULL
            """) == 1)
        // Used once: the second person with the same link is refused, and the link says so at once.
        let again = try Self.signUp(app, email: "friend@example.org", invitation: code)
        #expect(again.status == 403)
        #expect(again.body.contains("cannot be used"))
        #expect(try app.browser().get("/sign-up?invite=\(code)").body.contains("cannot be used"))
        #expect(try app.count("SELECT count(*) FROM users") == 2)
    }

    @Test func anExpiredInvitationIsRefused() throws {
        let app = try TestApp { $0.signUp = .invite }
        _ = try app.app.accounts.createUser(email: "owner@example.org", displayName: "Owner", password: Self.password)
        let code = try app.app.accounts.createInvitation(days: 1)
        try app.pool.query("UPDATE invitations SET expires_at = now() - interval '1 second'")
        let refused = try Self.signUp(app, email: "late@example.org", invitation: code)
        #expect(refused.status == 403)
        #expect(refused.body.contains("cannot be used"))
        #expect(try app.count("SELECT count(*) FROM users WHERE email = 'late@example.org'") == 0)
        #expect(try app.count("SELECT count(*) FROM invitations WHERE used_at IS NULL") == 1)
    }

    /// Eight people with one invitation at the same moment (sign-up allows ten an hour per
    /// address): one account.
    @Test func simultaneousUsesOfOneInvitationMakeOneAccount() throws {
        let app = try TestApp { $0.signUp = .invite }
        _ = try app.app.accounts.createUser(email: "owner@example.org", displayName: "Owner", password: Self.password)
        let code = try app.app.accounts.createInvitation()
        let statuses = Mutex<[Int]>([]), port = app.port
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let status = (try? Self.signUp(port: port, email: "racer\(i)@example.org", invitation: code).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        #expect(statuses.withLock { $0.filter { $0 == 303 }.count } == 1)
        #expect(statuses.withLock { $0.filter { $0 == 403 }.count } == 7)
        #expect(try app.count("SELECT count(*) FROM users") == 2)
    }

    /// Eight people signing up with the setup code on an empty closed instance at once: only one
    /// is the first.
    @Test func onlyOneFirstAccount() throws {
        let app = try TestApp { $0.signUp = .closed }
        let code = try Self.setupCode(app)
        let statuses = Mutex<[Int]>([]), port = app.port
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let status = (try? Self.signUp(port: port, email: "first\(i)@example.org", invitation: code).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        #expect(statuses.withLock { $0.filter { $0 == 303 }.count } == 1)
        #expect(try app.count("SELECT count(*) FROM users") == 1)
    }

    @Test func openNeedsNothing() throws {
        let app = try TestApp { $0.signUp = .open }
        #expect(try Self.signUp(app, email: "a@example.org").status == 303)
        let page = try app.browser().get("/sign-up")
        #expect(!page.body.contains("name=\"invite\""))
        #expect(try Self.signUp(app, email: "b@example.org").status == 303)
    }

    /// Every state of the sign-up page, with a hostile invitation code in the link and the form,
    /// read by the HTML checker of PageTests (balanced, escaped once, CSRF in every POST form).
    @Test func signUpPagesOfEveryModeParseCleanly() throws {
        let pages = try PageTests.Pages()
        let hostile = PageTests.markup
        let closed = try TestApp { $0.signUp = .closed }
        let closedCode = try Self.setupCode(closed)
        pages.save(try closed.browser().get("/sign-up"), "closed, first account", expect: ["yours will be the first"], forms: 1)
        pages.save(try Self.signUp(closed, email: hostile, invitation: hostile), "closed, first account, wrong code", status: 403,
                   expect: [hostile, "not the setup code"], forms: 1)
        #expect(try Self.signUp(closed, email: "owner@example.org", invitation: closedCode).status == 303)
        pages.save(try closed.browser().get("/sign-up"), "closed", expect: ["Sign-up is closed"])
        pages.save(try Self.signUp(closed, email: "x@example.org"), "closed, refused", status: 403, expect: ["Sign-up is closed"])

        let invite = try TestApp { $0.signUp = .invite }
        _ = try invite.app.accounts.createUser(email: "owner@example.org", displayName: "Owner", password: Self.password)
        pages.save(try invite.browser().get("/sign-up"), "invite", expect: ["by invitation"], forms: 1)
        let link = "/sign-up?invite=" + hostile.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        pages.save(try invite.browser().get(link), "invite, hostile code in the link", expect: [hostile, "cannot be used"], forms: 1)
        pages.save(try Self.signUp(invite, email: hostile, invitation: hostile), "invite, hostile code refused", status: 403,
                   expect: [hostile, "cannot be used"], forms: 1)
        let code = try invite.app.accounts.createInvitation()
        pages.save(try invite.browser().get("/sign-up?invite=\(code)"), "invite, good link", expect: [code], forms: 1)
        try pages.check()
    }
}
