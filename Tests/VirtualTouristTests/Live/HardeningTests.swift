import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Testing
import TestSupport
import PhotoFixture
import Synchronization
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

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
        let source = try String(contentsOfFile: TestApp.repositoryRoot + "/Sources/AlbumWing/Albums/AlbumWorkers.swift", encoding: .utf8)
        // Every failure recorded for people goes through a phrase, never "\(error)".
        #expect(!source.contains("fail(job, reason:"))
    }
}

/// One account's live album pages cannot hold every connection: past eight, 429; closing one frees
/// its place; another person is unaffected.
@Suite struct StreamQuotaTests {
    /// Opens an event stream with `browser`'s session and returns the socket and the status line.
    static func openStream(_ app: TestApp, _ browser: Browser, pin: Int) throws -> (fd: Int32, status: String) {
        let (fd, head) = try openStreamHead(app, browser, pin: pin)
        return (fd, head.components(separatedBy: "\r\n").first ?? "")
    }

    static func openStreamHead(_ app: TestApp, _ browser: Browser, pin: Int) throws -> (fd: Int32, head: String) {
        let fd = try connectLoopback(port: app.port, receiveTimeout: 5)
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let request = Array("GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nCookie: \(cookie)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &buffer, buffer.count, 0)
        return (fd, String(decoding: buffer.prefix(max(0, n)), as: UTF8.self))
    }

    @Test func eventStreamsPerPersonAreCapped() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "streams@example.org")
        let pin = try AlbumTests.dropPin(ann)
        var open: [Int32] = []
        defer { open.forEach { close($0) } }
        for _ in 0..<8 {
            let (fd, status) = try Self.openStream(app, ann, pin: pin)
            open.append(fd)
            #expect(status == "HTTP/1.1 200 OK")
        }
        let annID = Int64(try app.count("SELECT id FROM users WHERE email = 'streams@example.org'"))
        #expect(eventually { app.app.streamQuota.count(annID) == 8 })
        let (refusedFD, refusedHead) = try Self.openStreamHead(app, ann, pin: pin)
        close(refusedFD)
        #expect(refusedHead.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"))
        // Refused before the album is read (the session's round trip only): at the cap any pin id
        // is refused alike, even one that does not exist (it was a 404 after reading the album).
        let (otherFD, other) = try Self.openStream(app, ann, pin: 999_999)
        close(otherFD)
        #expect(other == "HTTP/1.1 429 Too Many Requests")
        // Someone else's album page still opens.
        let bob = try app.signedUp(email: "other-streams@example.org")
        let (bobFD, bobStatus) = try Self.openStream(app, bob, pin: try AlbumTests.dropPin(bob))
        close(bobFD)
        #expect(bobStatus == "HTTP/1.1 200 OK")
        // Closing a tab frees its place.
        close(open.removeLast())
        #expect(eventually { app.app.streamQuota.count(annID) == 7 })
        let (againFD, again) = try Self.openStream(app, ann, pin: pin)
        open.append(againFD)
        #expect(again == "HTTP/1.1 200 OK")
        // A token holding streams at the cap is refused before its session is looked up (no round
        // trip for a client reopening refused streams in a loop): signed out in SQL, it still gets
        // 429 where a lookup would send it to sign in.
        #expect(eventually { app.app.streamQuota.count(annID) == 8 })
        try app.pool.query("DELETE FROM sessions WHERE user_id = $1", [annID])
        let lent = app.pool.statistics.lent
        let (earlyFD, early) = try Self.openStream(app, ann, pin: pin)
        close(earlyFD)
        #expect(early == "HTTP/1.1 429 Too Many Requests")
        // Not even its error page looks the session up: the refusal took no connection at all.
        #expect(app.pool.statistics.lent == lent)
    }
}

/// Picker pages call the provider; a slow provider must not take the handlers every other page needs.
@Suite struct PickerIsolationTests {
    /// `n` browsers carrying `person`'s cookies, each on connections of its own.
    static func copies(of person: Browser, _ n: Int, in app: TestApp) -> [Browser] {
        let browsers = (0..<n).map { _ in app.browser() }
        for b in browsers { for (name, value) in person.cookies { b.setCookie(name, value) } }
        return browsers
    }

    /// The slowest of `tries` visits of `person` to the map page, in seconds (a liveness bound).
    static func slowestMapPage(_ person: Browser, tries: Int) throws -> Double {
        var slowest = 0.0
        for _ in 0..<tries {
            let started = Date()
            #expect(try person.get("/").status == 200)
            slowest = max(slowest, Date().timeIntervalSince(started))
        }
        return slowest
    }

    /// The handler slots `virtual-tourist serve` gives a small pool: pages that wait on the
    /// provider (as many as the picker has slots, each up to its timeout) leave handlers for the
    /// pages that need only the database. With as many handlers as connections, as before, the map
    /// page below waited behind them for the picker's whole timeout.
    @Test func pagesWaitingOnAProviderLeaveHandlersForEveryoneElse() throws {
        var options = PhotoFixture.Options()
        // The bounds below leave a busy machine room, and stay under the picker's 2 s timeout, which
        // is how long a page stuck behind the picker would wait.
        options.latency = 3
        let app = try TestApp(fixture: options, databaseConnections: 4) {
            $0.pickerSlots = 4; $0.pickerTimeout = 2; $0.providerCallsPerHour = 100_000; $0.providerCallBurst = 1_000
        }
        #expect(app.server.configuration.handlerConcurrency > 4 + 4)
        let picker = try app.signedUp(email: "waiting@example.org")
        let pin = try AlbumTests.dropPin(picker)
        let other = try app.signedUp(email: "mapper@example.org")
        // As many picker pages as there are slots (and connections), each waiting on a 3 s provider.
        nonisolated(unsafe) let browsers = Self.copies(of: picker, 4, in: app)
        let group = DispatchGroup()
        for i in browsers.indices {
            // Threads of their own: Dispatch's global queue would run only a couple of these
            // blocking requests at once on two cores, and the rest after the first had finished.
            group.enter()
            Thread.detachNewThread {
                _ = try? browsers[i].get("/pins/\(pin)/picker?page=1")
                group.leave()
            }
        }
        let started = Date()
        #expect(eventually { app.app.pickerSearches.running == 4 })
        #expect(Date().timeIntervalSince(started) < 1.5, "the four picker pages did not wait on the provider together")
        let slowest = try Self.slowestMapPage(other, tries: 5)
        #expect(slowest < 1.5, "the map page took \(slowest) s while four picker pages waited on the provider")
        group.wait()
    }

    @Test func slowPickerPagesNeverStallOtherPages() throws {
        var options = PhotoFixture.Options()
        options.latency = 3
        let app = try TestApp(fixture: options) { $0.pickerSlots = 2; $0.pickerTimeout = 2; $0.providerCallsPerHour = 100_000; $0.providerCallBurst = 1_000 }
        let picker = try app.signedUp(email: "picker@example.org")
        let pin = try AlbumTests.dropPin(picker)
        let other = try app.signedUp(email: "bystander@example.org")
        // Twenty picker pages at once, each asking a provider that takes 3 s.
        let statuses = Mutex<[Int]>([])
        nonisolated(unsafe) let browsers = Self.copies(of: picker, 20, in: app)
        let group = DispatchGroup()
        for i in browsers.indices {
            DispatchQueue.global().async(group: group) {
                let status = (try? browsers[i].get("/pins/\(pin)/picker?page=1").status) ?? 0
                statuses.withLock { $0.append(status) }
            }
        }
        usleep(200_000)
        // Meanwhile another person's map page answers at once (a liveness bound, not a benchmark).
        let slowest = try Self.slowestMapPage(other, tries: 10)
        // Under the picker's 2 s timeout, which a page stuck behind the picker would wait.
        #expect(slowest < 1.5, "the map page took \(slowest) s while picker pages waited on the provider")
        group.wait()
        let all = statuses.withLock { $0 }
        // At most two searches ran; the rest were told "busy" (503) or "slow" (504), none hung.
        #expect(all.allSatisfy { [200, 503, 504].contains($0) }, "\(all.sorted())")
        #expect(all.filter { $0 == 503 }.count >= 15, "\(all.sorted())")
        #expect(app.fixture.searchCount <= 4)
        // The searches that timed out finished in the background: the reload is served from the cache.
        #expect(eventually { app.app.pickerSearches.running == 0 })
        let searches = app.fixture.searchCount
        let reload = try picker.get("/pins/\(pin)/picker?page=1")
        #expect(reload.status == 200)
        #expect(app.fixture.searchCount == searches)
    }
}

/// New Collections per hour and stored bytes: each refused with words, and nothing else lost.
@Suite struct QuotaTests {
    @Test func newCollectionsPerHourAndStoredBytes() throws {
        var quotas = Quotas()
        quotas.collectionsPerHour = 2
        let app = try TestApp(workers: true) { $0.quotas = quotas }
        let browser = try app.signedUp(email: "q@example.org")
        let pin = try AlbumTests.dropPin(browser)
        #expect(try AlbumTests.settled(browser, pin: pin).count("ready") == 30)
        let token = try browser.get("/").csrfToken ?? ""
        func newCollection() throws -> Browser.Page {
            try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)], headers: [("Accept", "application/json")])
        }
        for _ in 0..<2 {
            #expect(try newCollection().status == 202)
            _ = try AlbumTests.settled(browser, pin: pin)
        }
        let refused = try newCollection()
        #expect(refused.status == 429)
        #expect(refused.body.contains("2 new collections in the past hour"))
        // The album is untouched by the refusal.
        #expect(try AlbumTests.settled(browser, pin: pin).count("ready") == 30)
        // The form version says so on the album page.
        let form = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)])
        #expect(form.status == 303)
        #expect(try browser.get("/pins/\(pin)").body.contains("2 new collections in the past hour"))

        // Stored bytes: with a limit below what this album holds, a new pin's album does not start,
        // and its page says why.
        try app.pool.query("UPDATE users SET max_photo_bytes = 1000, max_collections_per_hour = 100")
        let second = try AlbumTests.dropPin(browser, lat: 48.85, lon: 2.35)
        let page = try browser.get("/pins/\(second)")
        #expect(page.body.contains("use all of your 0 MB of storage"))
        #expect(try app.count("SELECT count(*) FROM photos WHERE pin_id = $1", [second]) == 0)
        // New Collection on the first pin is not blocked by its own photos (they would be replaced).
        try app.pool.query("UPDATE users SET max_photo_bytes = 1")
        #expect(try newCollection().status == 202)
    }
}
