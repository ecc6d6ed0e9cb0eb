import Foundation
import HTTPServer
import Testing
import TestSupport
import Zlib
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The map page kept per person (MapPageCache) is served only while the person's map version
/// (migration 0097), region, list page and session are what it was rendered with.
@Suite struct MapPageCacheTests {
    static func signedIn(_ app: TestApp, email: String) throws -> Browser {
        let browser = app.browser()
        let form = try browser.get("/sign-in")
        let page = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", email), ("password", "correct horse battery")])
        guard page.status == 303 else { throw Browser.Failure(description: "sign-in failed: \(page)") }
        return browser
    }

    @Test func aKeptMapPageIsServedOnlyWhileNothingOnItChanged() throws {
        let app = try TestApp { $0.serverTiming = true }
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try PageTests.userID(app, email: email)
        let pin = try PageTests.insertPin(app, user: user, name: "Kyoto")
        _ = try browser.get("/")  // shows and clears the welcome flash: never kept
        let first = try browser.get("/")
        #expect(first.roundTrips == 2)
        #expect(first.body.contains("Kyoto") && first.body.contains("0 photos"))
        let again = try browser.get("/")
        #expect(again.roundTrips == 1)  // the session only
        #expect(again.body == first.body)
        // Compressed from the kept page, the same bytes once inflated.
        let gzipped = try browser.get("/", headers: [("Accept-Encoding", "gzip")])
        #expect(gzipped.header("Content-Encoding") == "gzip" && gzipped.roundTrips == 1)
        #expect(try #require(Gzip.decompress(gzipped.bodyBytes)) == first.bodyBytes)

        // Every change the page shows moves the version on, whoever makes it: here SQL.
        func expectFresh(_ check: (String) -> Bool, _ what: String) throws {
            let page = try browser.get("/")
            #expect(page.roundTrips == 2, "\(what)")
            #expect(check(page.body), "\(what)")
        }
        try app.pool.query("UPDATE pins SET place_name = 'Nara <b>' WHERE id = $1", [pin])
        try expectFresh({ $0.contains("Nara &lt;b&gt;") && !$0.contains("Kyoto") }, "renamed")
        try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, content_type, byte_size, hash)
            SELECT id, user_id, generation, 0, 'fixture', 'a', 'http://x/a.jpg', 'ready', 'image/jpeg', 1, decode(repeat('ab', 32), 'hex')
            FROM pins WHERE id = $1
            """, [pin])
        try expectFresh({ $0.contains("1 photo") }, "a photo became ready")
        try PageTests.insertPin(app, user: user, name: "Osaka")
        try expectFresh({ $0.contains("Osaka") }, "a pin added")
        try app.pool.query("DELETE FROM pins WHERE id = $1", [pin])
        try expectFresh({ !$0.contains("Nara") }, "a pin deleted")
        try app.pool.query("UPDATE users SET display_name = 'Anna' WHERE id = $1", [user])
        try expectFresh({ $0.contains("Anna") }, "a new display name")
        let token = try #require(try browser.get("/").csrfToken)
        #expect(try browser.post("/region", form: [("_csrf", token), ("lat", "10"), ("lon", "20"), ("zoom", "5")]).status == 204)
        try expectFresh({ $0.contains(#"data-lat="10"#) && $0.contains(#"data-lon="20"#) }, "the region moved")
        #expect((try browser.get("/?page=2")).roundTrips == 2)  // another list page
        #expect((try browser.get("/")).roundTrips == 2)  // the page the cache holds is page 2's

        // Another session of the same person never gets this session's page (its CSRF token).
        let phone = try Self.signedIn(app, email: email)
        _ = try phone.get("/")
        let phonePage = try phone.get("/")
        let laptopPage = try browser.get("/")
        #expect(phonePage.csrfToken != nil && phonePage.csrfToken != laptopPage.csrfToken)
        #expect(try phone.post("/region", form: [("_csrf", try #require(phonePage.csrfToken)), ("lat", "1"), ("lon", "2"), ("zoom", "3")]).status == 204)

        // Someone else's map never comes from Ann's kept page.
        let bob = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        _ = try bob.get("/")
        let bobsPage = try bob.get("/")
        #expect(!bobsPage.body.contains("Osaka") && bobsPage.body.contains("Bob"))
    }

    @Test func theCacheStaysWithinItsBytes() throws {
        let cache = MapPageCache(maxBytes: 64 * 1024)
        let html = [UInt8](repeating: UInt8(ascii: "a"), count: 6 * 1024)
        for id in 1...40 {
            let key = MapPageCache.Key(version: 1, region: .world, page: 1, csrfToken: "t",
                                       user: User(id: Int64(id), email: "\(id)@example.org", displayName: "P"))
            _ = cache.keep(html, for: key, acceptsGzip: id % 2 == 0)
            #expect(cache.bytes <= 64 * 1024)
        }
        #expect(cache.count >= 8)
        // The most recent page is still there; the first was dropped.
        let last = MapPageCache.Key(version: 1, region: .world, page: 1, csrfToken: "t", user: User(id: 40, email: "40@example.org", displayName: "P"))
        let firstKey = MapPageCache.Key(version: 1, region: .world, page: 1, csrfToken: "t", user: User(id: 1, email: "1@example.org", displayName: "P"))
        #expect(cache.response(for: last, acceptsGzip: true) != nil)
        #expect(cache.response(for: firstKey, acceptsGzip: true) == nil)
        // A page larger than an eighth of the budget is served but not kept.
        let big = MapPageCache.Key(version: 1, region: .world, page: 1, csrfToken: "t", user: User(id: 99, email: "99@example.org", displayName: "P"))
        _ = cache.keep([UInt8](repeating: 0x62, count: 9 * 1024), for: big, acceptsGzip: false)
        #expect(cache.response(for: big, acceptsGzip: false) == nil)
    }
}
