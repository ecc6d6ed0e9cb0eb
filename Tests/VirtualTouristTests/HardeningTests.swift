import Foundation
import HTTPServer
import Testing
import TestSupport
@testable import VirtualTourist

/// What one person's input can do to the server and to the others: each case from the field,
/// over loopback, with the rows compared before and after.
@Suite struct HardeningTests {
    static func signUpForm(_ token: String, email: String, name: String = "Ann", password: String = "correct horse battery") -> [(String, String)] {
        [("_csrf", token), ("email", email), ("display_name", name), ("password", password), ("password_confirmation", password)]
    }

    /// libxcrypt refuses passphrases of 512 bytes or more: a 600-character one was a 500.
    @Test func aTooLongPasswordIsAFormErrorNotA500() throws {
        let app = try TestApp()
        let browser = app.browser()
        let token = try #require(try browser.get("/sign-up").csrfToken)
        let long = String(repeating: "p", count: 600)
        let page = try browser.post("/sign-up", form: Self.signUpForm(token, email: "long@example.org", password: long))
        #expect(page.status == 422)
        #expect(page.body.contains("Use at most \(Password.maximumLength) bytes."))
        #expect(try app.count("SELECT count(*) FROM users") == 0)
        // Signing in with one is a plain mismatch, not an error.
        let signIn = try browser.post("/sign-in", form: [("_csrf", token), ("email", "long@example.org"), ("password", long)])
        #expect(signIn.status == 422)
        // The longest allowed password works end to end.
        let longest = String(repeating: "q", count: Password.maximumLength)
        #expect(try browser.post("/sign-up", form: Self.signUpForm(token, email: "longest@example.org", password: longest)).status == 303)
    }

    /// A NUL in a text field reached libpq (a 500); every control character is now refused by field name.
    @Test func controlCharactersInTextFieldsAre400WithTheFieldNamed() throws {
        let app = try TestApp()
        let browser = app.browser()
        let token = try #require(try browser.get("/sign-up").csrfToken)
        for bad in ["\u{0}", "a\u{1}b", "tab\u{7F}"] {
            let page = try browser.post("/sign-up", form: Self.signUpForm(token, email: "nul@example.org", name: "Ann" + bad))
            #expect(page.status == 400, "\(bad.unicodeScalars.map(\.value))")
            #expect(page.body.contains("display_name"))
        }
        #expect(try app.count("SELECT count(*) FROM users") == 0)
        // Query strings too, on signed-in routes.
        let person = try app.signedUp(email: "q@example.org")
        #expect(try person.get("/places/search?q=Rom%00e").status == 400)
        #expect(try person.get("/places/search?q=Rome").status == 200)
    }

    /// Over https: cookies are __Host- prefixed (a sibling subdomain cannot plant one) and every
    /// response carries HSTS; an unprefixed session cookie is not honoured.
    @Test func httpsSitesUseHostCookiesAndHSTS() throws {
        let app = try TestApp { $0.publicURL = "https://photos.example.org" }
        let browser = app.browser()
        let signUp = try browser.get("/sign-up")
        #expect(signUp.header("Strict-Transport-Security") == "max-age=31536000")
        #expect(signUp.headerValues("Set-Cookie").allSatisfy { $0.hasPrefix("__Host-") && $0.contains("; Secure") && !$0.contains("Domain") })
        let token = try #require(signUp.csrfToken)
        let created = try browser.post("/sign-up", form: Self.signUpForm(token, email: "tls@example.org"))
        #expect(created.status == 303)
        let session = try #require(browser.cookies["__Host-vt_session"])
        #expect(try browser.get("/").status == 200)
        // The same token without the prefix is ignored (as if a subdomain had set it).
        let planted = app.browser()
        planted.setCookie("vt_session", session)
        #expect(try planted.get("/").status == 303)
        // Plain http sites keep plain names and send no HSTS.
        let plain = try TestApp()
        let page = try plain.browser().get("/sign-up")
        #expect(page.header("Strict-Transport-Security") == nil)
        #expect(page.headerValues("Set-Cookie").allSatisfy { $0.hasPrefix("vt_") })
    }

    /// Album errors people read are fixed phrases: the detail of an unexpected error (a database
    /// message, a URL) goes to the log and album_jobs.last_error only.
    @Test func unexpectedAlbumFailuresShowAFixedPhrase() throws {
        #expect(AlbumWorkers.failedPhrase == "The photos could not be downloaded. Try again in a while.")
        let source = try String(contentsOfFile: TestApp.repositoryRoot + "/Sources/VirtualTourist/Albums/AlbumWorkers.swift", encoding: .utf8)
        // Every failure recorded for people goes through a phrase, never "\(error)".
        #expect(!source.contains("fail(job, reason:"))
    }
}
