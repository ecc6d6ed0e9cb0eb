import Foundation
import Synchronization
import HTTPServer
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

@Suite struct AccountTests {
    @Test func signUpSignOutSignInOverRealHTTP() throws {
        let app = try TestApp()
        let browser = app.browser()
        let form = try browser.get("/sign-up")
        #expect(form.status == 200)
        let token = try #require(form.csrfToken)

        let created = try browser.post("/sign-up", form: [
            ("_csrf", token), ("email", "Ann@Example.org"), ("display_name", "Ann"),
            ("password", "correct horse battery"), ("password_confirmation", "correct horse battery"),
        ])
        #expect(created.status == 303)
        #expect(created.header("Location") == "/")
        let sessionCookie = try #require(created.headerValues("Set-Cookie").first { $0.hasPrefix("vt_session=") })
        #expect(sessionCookie.contains("HttpOnly"))
        #expect(sessionCookie.contains("SameSite=Lax"))
        #expect(sessionCookie.contains("Path=/"))
        #expect(!sessionCookie.contains("Secure"))  // plain http here; PUBLIC_URL=https turns it on

        let home = try browser.get("/")
        #expect(home.status == 200)
        #expect(home.body.contains("Ann"))
        #expect(home.body.contains("Welcome, Ann"))  // the flash, shown once
        #expect(try !browser.get("/").body.contains("Welcome, Ann"))
        // Only a hash of the token is stored.
        let raw = try #require(browser.cookies["vt_session"])
        #expect(try app.count("SELECT count(*) FROM sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))", [raw]) == 1)
        #expect(try app.count("SELECT count(*) FROM sessions WHERE encode(token_hash, 'escape') LIKE '%' || $1 || '%'", [raw]) == 0)

        let signOutToken = try #require(home.csrfToken)
        let signedOut = try browser.post("/sign-out", form: [("_csrf", signOutToken)])
        #expect(signedOut.status == 303)
        #expect(try app.count("SELECT count(*) FROM sessions") == 0)
        #expect(browser.cookies["vt_session"] == nil)
        let away = try browser.get("/")
        #expect(away.status == 303)
        #expect(away.header("Location") == "/sign-in")

        // Sign in again, with the email in other case.
        let signIn = try browser.get("/sign-in")
        let back = try browser.post("/sign-in", form: [
            ("_csrf", signIn.csrfToken ?? ""), ("email", "ann@example.ORG"), ("password", "correct horse battery"),
        ])
        #expect(back.status == 303)
        #expect(try browser.get("/").status == 200)
    }

    @Test func wrongPasswordAndUnknownEmailLookTheSame() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "bo@example.org", password: "a long enough password")
        let browser = app.browser()
        let form = try browser.get("/sign-in")
        let wrong = try browser.post("/sign-in", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "bo@example.org"), ("password", "not the password"),
        ])
        let unknown = try browser.post("/sign-in", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "nobody@example.org"), ("password", "not the password"),
        ])
        #expect(wrong.status == 422)
        #expect(unknown.status == 422)
        #expect(wrong.body.contains("do not match an account"))
        #expect(unknown.body.contains("do not match an account"))
        // What was typed stays, except the password.
        #expect(wrong.body.contains("value=\"bo@example.org\""))
        #expect(!wrong.body.contains("not the password"))
        #expect(browser.cookies["vt_session"] == nil)
    }

    @Test func signUpErrorsAreInlineAndKeepWhatWasTyped() throws {
        let app = try TestApp()
        let browser = app.browser()
        let form = try browser.get("/sign-up")
        let page = try browser.post("/sign-up", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "not-an-email"), ("display_name", "Cleo"),
            ("password", "short"), ("password_confirmation", "different"),
        ])
        #expect(page.status == 422)
        #expect(page.body.contains("does not look like an email"))
        #expect(page.body.contains("at least 10 characters"))
        #expect(page.body.contains("The two passwords differ"))
        #expect(page.body.contains("value=\"Cleo\""))
        #expect(page.body.contains("value=\"not-an-email\""))
        #expect(!page.body.contains("short\""))
        #expect(try app.count("SELECT count(*) FROM users") == 0)
    }

    @Test func duplicateEmailIsCaseInsensitive() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "dee@example.org")
        let browser = app.browser()
        let form = try browser.get("/sign-up")
        let page = try browser.post("/sign-up", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "DEE@example.org"), ("display_name", "Dee 2"),
            ("password", "another long password"), ("password_confirmation", "another long password"),
        ])
        #expect(page.status == 422)
        #expect(page.body.contains("already exists"))
        #expect(try app.count("SELECT count(*) FROM users") == 1)
    }

    @Test func passwordLengthLimits() {
        #expect(Password.problem(with: "123456789") != nil)
        #expect(Password.problem(with: "1234567890") == nil)
        #expect(Password.problem(with: String(repeating: "x", count: 256)) == nil)
        #expect(Password.problem(with: String(repeating: "x", count: 257)) != nil)
        // Counted in bytes: libxcrypt's limit is on bytes (128 two-byte letters fit, 129 do not).
        #expect(Password.problem(with: String(repeating: "é", count: 128)) == nil)
        #expect(Password.problem(with: String(repeating: "é", count: 129)) != nil)
        // Whatever the form allows, the hashing library takes.
        #expect(throws: Never.self) { try Password.hash(String(repeating: "x", count: Password.maximumLength)) }
    }

    @Test func hashesAreYescryptAndAnyCryptFormatVerifies() throws {
        let hash = try Password.hash("correct horse battery")
        #expect(hash.hasPrefix("$y$"))
        #expect(Password.verify("correct horse battery", against: hash))
        #expect(!Password.verify("correct horse batterY", against: hash))
        // bcrypt, as pgcrypto's gen_salt('bf') makes it (computed by PostgreSQL in the admin test).
        #expect(!Password.verify("x", against: "not a hash"))
        #expect(!Password.verify("x", against: ""))
    }

    /// Behind the reverse proxy every person has the proxy's address: throttling goes by the client
    /// address the trusted proxy reports, per (email, address), with a growing wait. The guesser
    /// waits; the owner, from elsewhere, does not.
    @Test func throttlingWaitsGrowPerEmailAndAddressAndSpareTheOwner() throws {
        let app = try TestApp(server: { $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")! })
        _ = try app.signedUp(email: "eve@example.org", password: "the right password")
        let guesser = app.browser()
        let from = [("X-Forwarded-For", "203.0.113.5")]
        let token = try guesser.get("/sign-in", headers: from).csrfToken ?? ""
        func attempt(_ password: String, as browser: Browser = guesser, headers: [(String, String)] = from) throws -> Browser.Page {
            try browser.post("/sign-in", form: [("_csrf", token), ("email", "eve@example.org"), ("password", password)], headers: headers)
        }
        for _ in 0..<AccountStore.freeFailuresPerPair {
            #expect(try attempt("wrong password!").status == 422)
        }
        let blocked = try attempt("the right password")
        #expect(blocked.status == 429)
        #expect(blocked.header("Retry-After") == "2")
        #expect(blocked.body.contains("Too many failed attempts. Wait 2 seconds"))
        #expect(guesser.cookies["vt_session"] == nil)
        // The owner, from another address (same proxy), signs in at once.
        let owner = app.browser()
        let ownerToken = try owner.get("/sign-in", headers: [("X-Forwarded-For", "198.51.100.7")]).csrfToken ?? ""
        let signedIn = try owner.post("/sign-in", form: [("_csrf", ownerToken), ("email", "eve@example.org"), ("password", "the right password")],
                                      headers: [("X-Forwarded-For", "198.51.100.7")])
        #expect(signedIn.status == 303)
        // A success forgets the failures for that email; the guesser starts over and then waits
        // twice as long each time: 2 s, 4 s …
        for _ in 0..<AccountStore.freeFailuresPerPair { _ = try attempt("wrong password!") }
        #expect(try attempt("wrong password!").header("Retry-After") == "2")
        try app.pool.query("UPDATE sign_in_failures SET failed_at = failed_at - interval '3 seconds'")
        #expect(try attempt("wrong password!").status == 422)
        #expect(try attempt("wrong password!").header("Retry-After") == "4")
        // A spoofed X-Forwarded-For from an untrusted peer changes nothing (the next test).
    }

    /// Without TRUSTED_PROXIES the header is the client's own say-so and is ignored: varying it does
    /// not escape the wait.
    @Test func forwardedHeadersFromUntrustedPeersAreIgnored() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "ivy@example.org", password: "the right password")
        let browser = app.browser()
        let token = try browser.get("/sign-in").csrfToken ?? ""
        for i in 0..<AccountStore.freeFailuresPerPair {
            _ = try browser.post("/sign-in", form: [("_csrf", token), ("email", "ivy@example.org"), ("password", "wrong")],
                                 headers: [("X-Forwarded-For", "192.0.2.\(i)")])
        }
        let blocked = try browser.post("/sign-in", form: [("_csrf", token), ("email", "ivy@example.org"), ("password", "wrong")],
                                       headers: [("X-Forwarded-For", "192.0.2.99")])
        #expect(blocked.status == 429)
    }

    /// Simultaneous guesses are counted one after the other: of 24 at once, exactly the free ones
    /// get to try a password.
    @Test func simultaneousGuessesAreCountedAtomically() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "kim@example.org", password: "the right password")
        // Each Browser is used by one thread only.
        nonisolated(unsafe) let browsers = (0..<24).map { _ in app.browser() }
        let tokens = try browsers.map { try $0.get("/sign-in").csrfToken ?? "" }
        let statuses = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: browsers.count) { i in
            let status = (try? browsers[i].post("/sign-in", form: [("_csrf", tokens[i]), ("email", "kim@example.org"), ("password", "wrong guess \(i)")]).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        let all = statuses.withLock { $0 }
        #expect(all.filter { $0 == 422 }.count == AccountStore.freeFailuresPerPair, "\(all.sorted())")
        #expect(all.filter { $0 == 429 }.count == browsers.count - AccountStore.freeFailuresPerPair)
    }

    @Test func throttlingPerAddressAcrossEmails() throws {
        let app = try TestApp()
        let browser = app.browser()
        let token = try browser.get("/sign-in").csrfToken ?? ""
        for i in 0..<AccountStore.freeFailuresPerAddress {
            _ = try browser.post("/sign-in", form: [("_csrf", token), ("email", "guess\(i)@example.org"), ("password", "wrong password")])
        }
        let blocked = try browser.post("/sign-in", form: [("_csrf", token), ("email", "new@example.org"), ("password", "whatever it is")])
        #expect(blocked.status == 429)
    }

    /// Sign-up is throttled per address (each costs a hash and a row); a taken email is answered
    /// before any hashing.
    @Test func signUpsAreThrottledPerAddress() throws {
        let app = try TestApp(server: { $0.trustedProxies = TrustedProxies(parsing: "127.0.0.0/8")! })
        let busy = [("X-Forwarded-For", "203.0.113.9")]
        for i in 0..<AccountStore.signUpsPerAddressPerHour {
            let browser = app.browser()
            let token = try browser.get("/sign-up", headers: busy).csrfToken ?? ""
            let page = try browser.post("/sign-up", form: HardeningTests.signUpForm(token, email: "n\(i)@example.org"), headers: busy)
            #expect(page.status == 303)
        }
        let browser = app.browser()
        let token = try browser.get("/sign-up", headers: busy).csrfToken ?? ""
        let refused = try browser.post("/sign-up", form: HardeningTests.signUpForm(token, email: "one-more@example.org"), headers: busy)
        #expect(refused.status == 429)
        #expect(refused.body.contains("Too many new accounts"))
        #expect(try app.count("SELECT count(*) FROM users") == AccountStore.signUpsPerAddressPerHour)
        let elsewhere = [("X-Forwarded-For", "198.51.100.1")]
        let other = app.browser()
        let otherToken = try other.get("/sign-up", headers: elsewhere).csrfToken ?? ""
        #expect(try other.post("/sign-up", form: HardeningTests.signUpForm(otherToken, email: "fresh@example.org"), headers: elsewhere).status == 303)
    }

    @Test func nextAcceptsOnlyLocalPaths() throws {
        #expect(WebPipeline.localPath("/pins/3") == "/pins/3")
        #expect(WebPipeline.localPath("/?a=b") == "/?a=b")
        for bad in ["//evil.example", "/\\evil.example", "https://evil.example", "evil", "/%0d%0aSet-Cookie:x", "/\r\nx", "", "javascript:alert(1)"] {
            if bad == "/%0d%0aSet-Cookie:x" { continue }  // stays a path on this site: harmless
            #expect(WebPipeline.localPath(bad) == nil, "\(bad.debugDescription) must be refused")
        }
        let app = try TestApp()
        _ = try app.signedUp(email: "gus@example.org", password: "gus password 1")
        let browser = app.browser()
        let form = try browser.get("/sign-in?next=//evil.example/x")
        #expect(!form.body.contains("evil.example"))
        let page = try browser.post("/sign-in", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "gus@example.org"), ("password", "gus password 1"), ("next", "//evil.example/x"),
        ])
        #expect(page.header("Location") == "/")
        browser.clearCookies()
        let redirect = try browser.get("/somewhere?x=1")
        #expect(redirect.status == 404 || redirect.header("Location") != nil)
        let form2 = try browser.get("/sign-in?next=%2Fsign-up")
        let back = try browser.post("/sign-in", form: [
            ("_csrf", form2.csrfToken ?? ""), ("email", "gus@example.org"), ("password", "gus password 1"), ("next", "/sign-up"),
        ])
        #expect(back.header("Location") == "/sign-up")
    }

    @Test func disabledPersonIsSignedOutOnTheNextRequest() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "hal@example.org")
        #expect(try browser.get("/").status == 200)
        try app.pool.query("UPDATE users SET disabled_at = now() WHERE email = 'hal@example.org'")
        let page = try browser.get("/")
        #expect(page.status == 303)
        #expect(page.header("Location") == "/sign-in")
        #expect(try app.count("SELECT count(*) FROM sessions") == 0)
        // And cannot sign in again while disabled.
        let form = try browser.get("/sign-in")
        let again = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "hal@example.org"), ("password", "correct horse battery")])
        #expect(again.status == 422)
    }

    @Test func sessionsSlideAndExpire() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        // Seen two hours ago: this request renews the expiry and resends the cookie.
        try app.pool.query("UPDATE sessions SET last_seen_at = now() - interval '2 hours', expires_at = now() + interval '1 day'")
        let renewed = try browser.get("/")
        #expect(renewed.status == 200)
        #expect(renewed.headerValues("Set-Cookie").contains { $0.hasPrefix("vt_session=") && $0.contains("Max-Age=2592000") })
        #expect(try app.count("SELECT count(*) FROM sessions WHERE expires_at > now() + interval '29 days'") == 1)
        // A recent session is not rewritten on every request.
        #expect(try !browser.get("/").headerValues("Set-Cookie").contains { $0.hasPrefix("vt_session=") })
        // Expired: signed out and the row is gone.
        try app.pool.query("UPDATE sessions SET expires_at = now() - interval '1 second'")
        #expect(try browser.get("/").status == 303)
        #expect(try app.count("SELECT count(*) FROM sessions") == 0)
    }

    @Test func forgedSessionCookiesAreIgnored() throws {
        let app = try TestApp()
        let browser = app.browser()
        for value in ["", "x", String(repeating: "A", count: 43), "'; DROP TABLE users; --"] {
            browser.setCookie("vt_session", value)
            let page = try browser.get("/")
            #expect(page.status == 303, "cookie \(value.debugDescription)")
        }
    }
}

@Suite struct PageShellTests {
    @Test func displayNamesAreEscapedEverywhere() throws {
        let app = try TestApp()
        let name = "<script>alert(1)</script>"
        let browser = try app.signedUp(name: name)
        let home = try browser.get("/")
        #expect(home.status == 200)
        #expect(!home.body.contains(name))
        #expect(home.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        // The sign-up form echoes what was typed: escaped there too.
        let other = app.browser()
        let form = try other.get("/sign-up")
        let echoed = try other.post("/sign-up", form: [
            ("_csrf", form.csrfToken ?? ""), ("email", "\"><img src=x onerror=alert(1)>"), ("display_name", name),
            ("password", "x"), ("password_confirmation", "y"),
        ])
        #expect(!echoed.body.contains(name))
        #expect(!echoed.body.contains("<img src=x"))
        #expect(echoed.body.contains("&quot;&gt;&lt;img"))
    }

    @Test func htmlInterpolationEscapesTextButNotFragments() {
        let text = "<b>\"Tom\" & 'Jerry'</b>"
        let fragment: HTML = "<em>\(text: text)</em>"
        #expect(String(decoding: fragment.bytes, as: UTF8.self) == "<em>&lt;b&gt;&quot;Tom&quot; &amp; &#39;Jerry&#39;&lt;/b&gt;</em>")
        let nested: HTML = "<p>\(fragment)</p>"
        #expect(nested.bytes == Array("<p>".utf8) + fragment.bytes + Array("</p>".utf8))
        #expect(HTML.escape("plain") == "plain")
        #expect(HTML.escape("😀 < ü") == "😀 &lt; ü")
        // Runs of safe bytes around every special character, at both ends.
        #expect(HTML.escape("&a<b>c\"d'") == "&amp;a&lt;b&gt;c&quot;d&#39;")
        let numbers: HTML = "\(-12)|\(0)|\(Int64(9_007_199_254_740_993))|\(Int.min)|\(decimal: 35.0116)|\(decimal: Double.nan)"
        #expect(String(decoding: numbers.bytes, as: UTF8.self) == "-12|0|9007199254740993|\(Int.min)|35.0116|0")
    }

    @Test func securityHeadersOnPagesFilesAndErrors() throws {
        let app = try TestApp()
        let browser = app.browser()
        for path in ["/sign-in", "/css/app.css", "/no-such-page", "/"] {
            let page = try browser.get(path)
            let csp = page.header("Content-Security-Policy") ?? ""
            #expect(csp.contains("script-src 'self'"), "\(path)")
            #expect(!csp.contains("unsafe-inline"), "\(path)")
            #expect(csp.contains("frame-ancestors 'none'"), "\(path)")
            #expect(page.header("X-Content-Type-Options") == "nosniff", "\(path)")
            #expect(page.header("Referrer-Policy") == "same-origin", "\(path)")
        }
        let missing = try browser.get("/no-such-page")
        #expect(missing.status == 404)
        #expect(missing.body.contains("Page not found"))
        #expect(missing.body.contains("/css/app.css"))  // the site's own look
    }

    @Test func pagesHaveNoInlineScript() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        for path in ["/", "/sign-in", "/sign-up", "/nowhere"] {
            let body = try browser.get(path).body
            #expect(!body.contains("<script>"), "\(path)")
            #expect(!body.contains(" onclick="), "\(path)")
        }
    }
}

@Suite struct CookieSettingsTests {
    @Test func cookiesAreSecureBehindHTTPSOrWhenForced() {
        var settings = AppSettings()
        #expect(!settings.cookiesAreSecure)
        settings.publicURL = "http://photos.example.org"
        #expect(!settings.cookiesAreSecure)
        settings.publicURL = "HTTPS://photos.example.org"
        #expect(settings.cookiesAreSecure)
        settings.publicURL = nil
        settings.secureCookies = true
        #expect(settings.cookiesAreSecure)
        #expect(Cookies.set("vt_session", "x", maxAge: 60, secure: true) == "__Host-vt_session=x; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure")
    }

    /// The photo route's one-cookie lookup finds what the full parse finds: the first of a name,
    /// trimmed, across Cookie fields, only the __Host- form when secure.
    @Test func oneCookieIsFoundAsTheFullParseFindsIt() {
        let fields: [[String]] = [
            [],
            ["vt_session=abc"],
            ["a=1; vt_session = abc ;b=2"],
            ["vt_sessionx=1; xvt_session=2", "vt_session=second"],
            ["vt_session=first; vt_session=again"],
            ["__Host-vt_session=hosted; vt_session=plain"],
            ["vt_session=plain", "__Host-vt_session=hosted"],
            ["vt_session", "vt_session=; x=1"],
            ["\tvt_session=a=b\t"],
        ]
        for cookies in fields {
            var headers = HTTPHeaders()
            for value in cookies { headers.add("Cookie", value) }
            let request = HTTPRequest(method: "GET", target: "/", headers: headers)
            for secure in [false, true] {
                #expect(Cookies.value(Cookies.session, in: request, secure: secure)
                        == Cookies.parse(request, secure: secure)[Cookies.session], "\(cookies) secure: \(secure)")
            }
        }
    }
}
