import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// GET /photos/:id on the hot path (docs/architecture.md, "Photos on the hot path"): answered from
/// PhotoAccess with no round trip after an album page, the file sent with sendfile, and every
/// right that ends (sign-out, a deleted pin or photo, a disabled person) ending for photos too.
@Suite struct PhotoAccessTests {
    /// An app with round trips reported, its listener up (workers on), and a person with a ready album.
    static func appWithAlbum(database: String? = nil) throws -> (TestApp, Browser, pin: Int, ids: [Int]) {
        let app = try TestApp(workers: true, database: database) { $0.serverTiming = true }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "ready")
        let ready = album.photos.filter { $0["status"] as? String == "ready" }.compactMap { $0["id"] as? Int }
        #expect(ready.count >= 3)
        return (app, browser, pin, ready)
    }

    /// Another instance on the same database and photo store.
    static func secondInstance(of first: TestApp) throws -> TestApp {
        let root = try #require(first.app.albums.photos.base as? FileStore).root
        return try TestApp(workers: true, database: first.pool.url) {
            $0.serverTiming = true
            $0.photoStore = root
        }
    }

    /// A browser on `port` carrying the same cookies (the same person, another instance or later).
    static func copy(_ browser: Browser, port: Int) -> Browser {
        let other = Browser(port: port)
        for (name, value) in browser.cookies { other.setCookie(name, value) }
        return other
    }

    /// The blob's file in the app's file store, by the ETag's hash.
    static func storedFile(_ app: TestApp, etag: String?) throws -> [UInt8] {
        let hash = try #require(etag?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
        let store = try #require(app.app.albums.photos.base as? FileStore)
        return try #require(FileManager.default.contents(atPath: store.path(hash).file).map { Array($0) })
    }

    /// Polls (the NOTIFY crosses the database) until the photo is refused, at most for the cache's
    /// lifetime and a margin: the bound the design states.
    static func refusedWithinTheBound(_ browser: Browser, _ path: String, app: TestApp) throws -> Bool {
        let deadline = Date(timeIntervalSinceNow: app.app.photoAccess.lifetime / .seconds(1) + 5)
        while Date() < deadline {
            if try browser.get(path).status != 200 { return true }
            usleep(50_000)
        }
        return try browser.get(path).status != 200
    }

    @Test func theAlbumPageAndItsThumbnailsCostAtMostTwoRoundTrips() throws {
        let (app, browser, pin, _) = try Self.appWithAlbum()
        let page = try browser.get("/pins/\(pin)")
        #expect(page.status == 200)
        let thumbnails = page.body.matches(of: /<img src="(\/photos\/\d+\?w=256)"/).map { String($0.1) }
        #expect(thumbnails.count >= 3)
        var roundTrips = try #require(page.roundTrips)
        for path in thumbnails {
            let photo = try browser.get(path)
            #expect(photo.status == 200)
            #expect(photo.header("Content-Type") == "image/jpeg")
            #expect(photo.header("Cache-Control") == "private, max-age=31536000, immutable")
            // The bytes sendfile sent are the stored file's.
            #expect(photo.bodyBytes == (try Self.storedFile(app, etag: photo.header("ETag"))))
            roundTrips += try #require(photo.roundTrips)
        }
        #expect(roundTrips <= 2, "the album page and its \(thumbnails.count) thumbnails took \(roundTrips) round trips")
    }

    @Test func originalsAndNotModifiedAnswers() throws {
        let (app, browser, _, ids) = try Self.appWithAlbum()
        let original = try browser.get("/photos/\(ids[0])")
        #expect(original.status == 200)
        let etag = try #require(original.header("ETag"))
        #expect(original.bodyBytes == (try Self.storedFile(app, etag: etag)))
        #expect(original.bodyBytes.count > 0)
        // A browser that has the bytes: 304 with the same validator, no body, no round trip.
        let again = try browser.get("/photos/\(ids[0])", headers: [("If-None-Match", etag)])
        #expect(again.status == 304)
        #expect(again.header("ETag") == etag)
        #expect(again.bodyBytes.isEmpty)
        #expect(again.roundTrips == 0)
        // Another validator: the bytes.
        let other = try browser.get("/photos/\(ids[0])", headers: [("If-None-Match", "\"0000\"")])
        #expect(other.status == 200)
        #expect(other.bodyBytes == original.bodyBytes)
        // The cache forgotten (a lost link, say): the 304 costs one statement, still no bytes.
        app.app.photoAccess.forgetEverything()
        let uncached = try browser.get("/photos/\(ids[0])", headers: [("If-None-Match", etag)])
        #expect(uncached.status == 304)
        #expect(uncached.bodyBytes.isEmpty)
    }

    @Test func anotherPersonsPhotoIsNeverServed() throws {
        let (app, ann, pin, ids) = try Self.appWithAlbum()
        _ = try ann.get("/pins/\(pin)")  // Ann's photos are in the cache now
        let bob = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        _ = try bob.get("/")  // and Bob's session
        for id in ids {
            #expect(try bob.get("/photos/\(id)?w=256").status == 404)
            #expect(try bob.get("/photos/\(id)").status == 404)
        }
        // Not even the validator: a 304 would tell Bob the photo exists.
        let etag = try #require(try ann.get("/photos/\(ids[0])").header("ETag"))
        #expect(try bob.get("/photos/\(ids[0])", headers: [("If-None-Match", etag)]).status == 404)
        // Ann still sees hers.
        #expect(try ann.get("/photos/\(ids[0])").status == 200)
    }

    @Test func signingOutEndsAccessHereAtOnceAndOnAnotherInstanceWithinTheBound() throws {
        let (first, ann, pin, ids) = try Self.appWithAlbum()
        let second = try Self.secondInstance(of: first)
        let onSecond = Self.copy(ann, port: second.port)
        let kept = Self.copy(ann, port: first.port)
        // Both instances have the session and the photos.
        _ = try onSecond.get("/pins/\(pin)")
        _ = try kept.get("/pins/\(pin)")
        let cached = try onSecond.get("/photos/\(ids[0])?w=256")
        #expect(cached.status == 200)
        #expect(cached.roundTrips == 0)
        #expect(try kept.get("/photos/\(ids[0])?w=256").roundTrips == 0)

        let token = try #require(try ann.get("/").csrfToken)
        #expect(try ann.post("/sign-out", form: [("_csrf", token)]).status == 303)
        // The same cookie, replayed: refused at once here (a redirect to sign-in)…
        let here = try kept.get("/photos/\(ids[0])?w=256")
        #expect(here.status == 303)
        #expect(here.header("Location")?.hasPrefix("/sign-in") == true)
        // …and on the other instance once it hears the NOTIFY, within the cache's lifetime at most.
        #expect(try Self.refusedWithinTheBound(onSecond, "/photos/\(ids[1])?w=256", app: second))
        #expect(try onSecond.get("/photos/\(ids[0])?w=256").status == 303)
    }

    @Test func aDeletedPhotoOrPinEndsAccess() throws {
        let (app, browser, pin, ids) = try Self.appWithAlbum()
        _ = try browser.get("/pins/\(pin)")
        #expect(try browser.get("/photos/\(ids[0])?w=256").roundTrips == 0)
        let token = try #require(try browser.get("/").csrfToken)
        #expect(try browser.request("DELETE", "/photos/\(ids[0])", headers: [("X-CSRF-Token", token)]).status == 204)
        #expect(try browser.get("/photos/\(ids[0])?w=256").status == 404)
        #expect(try browser.get("/photos/\(ids[1])?w=256").status == 200)
        #expect(try browser.request("DELETE", "/pins/\(pin)", headers: [("X-CSRF-Token", token)]).status == 204)
        for id in ids { #expect(try browser.get("/photos/\(id)").status == 404) }
        _ = app
    }

    /// Changes made behind the app's back (another instance, an administrator's SQL) arrive by NOTIFY.
    @Test func changesMadeElsewhereEndAccessWithinTheBound() throws {
        let (app, browser, pin, ids) = try Self.appWithAlbum()
        _ = try browser.get("/pins/\(pin)")
        #expect(try browser.get("/photos/\(ids[0])?w=256").roundTrips == 0)
        try app.pool.query("DELETE FROM photos WHERE id = $1", [Int64(ids[0])])
        #expect(try Self.refusedWithinTheBound(browser, "/photos/\(ids[0])?w=256", app: app))
        #expect(try browser.get("/photos/\(ids[1])?w=256").status == 200)
        try app.pool.query("UPDATE users SET disabled_at = now()")
        #expect(try Self.refusedWithinTheBound(browser, "/photos/\(ids[1])?w=256", app: app))
        #expect(try browser.get("/photos/\(ids[2])").status != 200)
    }

    @Test func aDeletedPinEndsAccessOnAnotherInstance() throws {
        let (first, ann, pin, ids) = try Self.appWithAlbum()
        let second = try Self.secondInstance(of: first)
        let onSecond = Self.copy(ann, port: second.port)
        _ = try onSecond.get("/pins/\(pin)")
        #expect(try onSecond.get("/photos/\(ids[0])?w=256").roundTrips == 0)
        let token = try #require(try ann.get("/").csrfToken)
        #expect(try ann.request("DELETE", "/pins/\(pin)", headers: [("X-CSRF-Token", token)]).status == 204)
        #expect(try Self.refusedWithinTheBound(onSecond, "/photos/\(ids[0])?w=256", app: second))
        #expect(try onSecond.get("/photos/\(ids[1])?w=256").status == 404)
    }

    /// What the triggers (migrations 0115, 0116) say, heard as another instance hears it: a New
    /// Collection names the pin and its ready photos, a sign-out the session's hash, and a pin's
    /// first collection (from generation 0, nothing to drop) nothing at all.
    @Test func theNotificationsNameExactlyWhatEnded() throws {
        let (app, ann, pin, ids) = try Self.appWithAlbum()
        let listener = PostgresListener(url: app.pool.url)
        try listener.start()
        defer { listener.stop() }
        let heard = Mutex<[String]>([])
        try listener.listen("photo_access") { payload in heard.withLock { $0.append(payload) } }
        /// Everything committed before a marker is delivered before it (notifications go out in
        /// commit order), so what was not heard by then was never sent.
        func heardUpTo(_ marker: String) -> [String] {
            try? app.pool.query("SELECT pg_notify('photo_access', $1)", [marker])
            #expect(eventually(timeout: 30) { heard.withLock { $0.contains(marker) } }, "\(marker) not heard")
            // Without the extra "ready" markers the wait below may have sent.
            return heard.withLock { all in defer { all.removeAll() }; return all.filter { $0 != "ready" } }
        }
        // The listener's LISTEN is in place once a marker comes back.
        #expect(eventually(timeout: 30) {
            try? app.pool.query("SELECT pg_notify('photo_access', 'ready')")
            return heard.withLock { $0.contains("ready") }
        })
        heard.withLock { $0.removeAll() }

        let token = try #require(try ann.get("/").csrfToken)
        let dropped = try ann.post("/pins", form: [("_csrf", token), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
        #expect(dropped.status == 201)
        #expect(heardUpTo("dropped") == ["dropped"], "a first collection revokes nothing")

        let userID: Int64 = try app.pool.query("SELECT user_id FROM pins WHERE id = $1", [Int64(pin)])[0].decode("user_id")
        #expect(try app.app.albums.startCollection(pinID: Int64(pin), userID: userID) == .started)
        let renewed = heardUpTo("renewed")
        #expect(renewed.contains("p:\(pin)"), "\(renewed)")
        let photos = Set(renewed.filter { $0.hasPrefix("ph:") }.flatMap { $0.dropFirst(3).split(separator: ",").map(String.init) })
        #expect(photos == Set(ids.map(String.init)), "\(renewed)")

        let cookie = try #require(ann.cookies["vt_session"])
        #expect(try ann.post("/sign-out", form: [("_csrf", token)]).status == 303)
        #expect(heardUpTo("signed out") == ["s:" + SHA256.hex(Array(cookie.utf8)), "signed out"])
    }
}
