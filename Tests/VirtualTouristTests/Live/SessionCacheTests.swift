import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Sessions kept in memory (docs/architecture.md, "Sessions kept in memory"): the kept map page
/// with no round trip, and every change that ends or alters a session reaching every instance
/// within the bound — the notification's delay, far inside the cache's lifetime — never served
/// stale, the LISTEN link down included.
@Suite struct SessionCacheTests {
    /// The bound the tests hold the instances to: the NOTIFY's delay with room for a slow machine,
    /// well inside the entries' lifetime (10 s), so a pass cannot come from an entry expiring.
    static let bound: Double = 3

    /// Two instances on one database and photo store, round trips reported, listeners up.
    static func twoInstances() throws -> (TestApp, TestApp) {
        let first = try TestApp(workers: true) { $0.serverTiming = true }
        return (first, try PhotoAccessTests.secondInstance(of: first))
    }

    /// The map page viewed until it comes from memory: a view reads and keeps the session (and
    /// renders the page), the next costs nothing — once the map stands still: a new pin's album
    /// moves the map's version with every photo count, and each move is heard and ends the kept
    /// session, as it should.
    @discardableResult
    static func keptView(_ browser: Browser) throws -> Browser.Page {
        let start = Date()
        var page = try browser.get("/")
        while page.roundTrips != 0, Date().timeIntervalSince(start) < 30 {
            usleep(50_000)
            page = try browser.get("/")
        }
        #expect(page.status == 200)
        #expect(page.roundTrips == 0, "the kept map page took \(String(describing: page.roundTrips)) round trips")
        return page
    }

    /// Polls `browser`'s map page until `changed` holds; the seconds it took, or nil past twice the bound.
    static func secondsUntil(_ browser: Browser, _ path: String = "/", _ changed: (Browser.Page) -> Bool) throws -> Double? {
        let start = Date()
        while Date().timeIntervalSince(start) < 2 * bound {
            if changed(try browser.get(path)) { return Date().timeIntervalSince(start) }
            usleep(20_000)
        }
        return nil
    }

    static func expectWithinTheBound(_ seconds: Double?, _ what: String) {
        #expect(seconds != nil, "\(what): still served as before \(2 * bound) s later")
        if let seconds { #expect(seconds < bound, "\(what): took \(seconds) s (bound \(bound) s)") }
    }

    static func signedOut(_ page: Browser.Page) -> Bool {
        page.status == 303 && page.header("Location")?.hasPrefix("/sign-in") == true
    }

    @Test func theKeptMapPageTakesNoRoundTripAndPinsJSONOnlyItsOwn() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        // The album done first: while it fills, each photo count moves the map's version.
        _ = try AlbumTests.settled(ann, pin: try AlbumTests.dropPin(ann))
        let kept = try Self.keptView(ann)
        let again = try ann.get("/")
        #expect(again.roundTrips == 0 && again.body == kept.body)
        #expect(app.app.sessions.count == 1)
        #expect(app.app.sessions.bytes > 0)
        let text = App.cacheLines(sessions: app.app.sessions, mapPages: app.app.mapPages)
        #expect(text.contains("vt_session_cache_entries 1\n"))
        #expect(text.contains("vt_session_cache_max_entries \(app.app.sessions.maxCount)\n"))
        #expect(text.contains("vt_map_page_cache_pages 1\n"))
        // The session from memory: /pins.json asks only for its pins, and nothing at all when the
        // browser has the answer for this version of the map.
        let pins = try ann.get("/pins.json?bbox=100,0,170,60&zoom=5")
        #expect(pins.status == 200 && pins.roundTrips == 1)
        let etag = try #require(pins.header("ETag"))
        let unchanged = try ann.get("/pins.json?bbox=100,0,170,60&zoom=5", headers: [("If-None-Match", etag)])
        #expect(unchanged.status == 304 && unchanged.roundTrips == 0)
        #expect(try ann.get("/pins.json?bbox=100,0,170,61&zoom=5", headers: [("If-None-Match", etag)]).status == 200)
        #expect(try SharedMapTests.drop(ann, lat: 40, lon: 140).status == 201)
        let changed = try ann.get("/pins.json?bbox=100,0,170,60&zoom=5", headers: [("If-None-Match", etag)])
        #expect(changed.status == 200 && changed.body != pins.body)
    }

    /// What a person changes on the instance they use is theirs at once, with no wait for the
    /// notification: the map where they left it, their own new pin.
    @Test func theWritersOwnChangeIsSeenAtOnce() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        for step in 0..<5 {
            try Self.keptView(ann)
            #expect(try SharedMapTests.region(ann, lat: 10 + Double(step), lon: 20, zoom: 5).status == 204)
            #expect(try SharedMapTests.shownRegion(ann)[0] == 10 + Double(step))
            let dropped = try SharedMapTests.drop(ann, lat: -10 - Double(step), lon: 30)
            let id = try #require(dropped.body.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) })
            #expect(try ann.get("/").body.contains("href=\"/pins/\(id)\""))
        }
    }

    @Test func aSignOutReachesTheOtherInstanceWithinTheBound() throws {
        let (first, second) = try Self.twoInstances()
        let ann = try first.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        let elsewhere = PhotoAccessTests.copy(ann, port: second.port)
        try Self.keptView(elsewhere)
        let token = try #require(try ann.get("/").csrfToken)
        #expect(try ann.post("/sign-out", form: [("_csrf", token)]).status == 303)
        Self.expectWithinTheBound(try Self.secondsUntil(elsewhere, "/", Self.signedOut), "a signed-out session")
    }

    @Test func aPasswordSetAndADisabledAccountReachTheOtherInstanceWithinTheBound() throws {
        let (first, second) = try Self.twoInstances()
        let admin = PeopleAdmin(pool: first.pool)
        for change in ["password", "disabled"] {
            let email = "ann-\(change)-\(UUID().uuidString.prefix(6))@example.org"
            let ann = try first.signedUp(email: email)
            #expect(try SharedMapTests.drop(ann).status == 201)
            let elsewhere = PhotoAccessTests.copy(ann, port: second.port)
            try Self.keptView(elsewhere)
            try Self.keptView(ann)
            if change == "password" {
                try admin.setPassword(email: email, password: "another horse battery")
            } else {
                // As an administrator would, in SQL: the app hears it from the trigger.
                try first.pool.query("UPDATE users SET disabled_at = now() WHERE email = $1", [email])
            }
            Self.expectWithinTheBound(try Self.secondsUntil(elsewhere, "/", Self.signedOut), "\(change): the other instance")
            Self.expectWithinTheBound(try Self.secondsUntil(ann, "/", Self.signedOut), "\(change): the same instance")
        }
    }

    /// A shared map's members on two instances: another member's pin, a removal, a rename.
    /// Two instances; Olga's shared map "Club" with one pin, Ed its editor, signed in on the first
    /// and (the same cookie) on the second.
    struct SharedClub {
        let first: TestApp, second: TestApp
        let owner: Browser, ed: Browser, edElsewhere: Browser
        let map: Int64
    }

    static func sharedClub() throws -> SharedClub {
        let (first, second) = try twoInstances()
        let owner = try first.signedUp(email: "olga-\(UUID().uuidString.prefix(6))@example.org", name: "Olga")
        let edEmail = "ed-\(UUID().uuidString.prefix(6))@example.org"
        let ed = try first.signedUp(email: edEmail, name: "Ed")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: ed, email: edEmail)
        #expect(try SharedMapTests.drop(owner).status == 201)
        return SharedClub(first: first, second: second, owner: owner, ed: ed, edElsewhere: PhotoAccessTests.copy(ed, port: second.port), map: map)
    }

    @Test func aSharedMapsChangesReachTheOtherInstanceWithinTheBound() throws {
        let club = try Self.sharedClub()
        let (first, owner, ed, edElsewhere, map) = (club.first, club.owner, club.ed, club.edElsewhere, club.map)
        #expect(try Self.keptView(edElsewhere).body.contains(">Club</option>"))

        // Another member's pin, dropped on the first instance.
        let dropped = try SharedMapTests.drop(owner, lat: 48.85, lon: 2.35)
        let pin = try #require(dropped.body.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) })
        Self.expectWithinTheBound(try Self.secondsUntil(edElsewhere) { $0.body.contains("href=\"/pins/\(pin)\"") }, "another member's pin")

        // The map renamed by its owner.
        try Self.keptView(edElsewhere)
        #expect(try owner.post("/maps/\(map)/rename", form: [("_csrf", try SharedMapTests.csrf(owner)), ("name", "Ramblers")]).status == 303)
        Self.expectWithinTheBound(try Self.secondsUntil(edElsewhere) { $0.body.contains(">Ramblers</option>") }, "the map's new name")

        // Ed removed: his page on the other instance stops showing the map.
        try Self.keptView(edElsewhere)
        let edID = try RouteCoverageTests.personID(app: first, ed)
        #expect(try owner.post("/maps/\(map)/members/\(edID)/remove", form: [("_csrf", try SharedMapTests.csrf(owner))]).status == 303)
        Self.expectWithinTheBound(try Self.secondsUntil(edElsewhere) { !$0.body.contains("href=\"/pins/\(pin)\"") && !$0.body.contains(">Ramblers</option>") },
                                  "a removed member")
    }

    /// The region saved on one instance opens the map there on the other.
    @Test func aSavedRegionReachesTheOtherInstanceWithinTheBound() throws {
        let (first, second) = try Self.twoInstances()
        let ann = try first.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        let elsewhere = PhotoAccessTests.copy(ann, port: second.port)
        try Self.keptView(elsewhere)
        #expect(try SharedMapTests.region(ann, lat: -33.9, lon: 18.4, zoom: 9).status == 204)
        Self.expectWithinTheBound(try Self.secondsUntil(elsewhere) { $0.body.contains("data-lat=\"-33.9\"") }, "a saved region")
    }

    /// The LISTEN link cut and kept down (the database takes no new connections): every request
    /// asks the database, so a change made meanwhile, whose notification is lost, is never served
    /// stale; once the link is back the kept sessions are gone and the page is kept again.
    @Test func aDroppedLinkFallsBackToTheDatabaseAndNeverServesStale() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        try Self.keptView(ann)
        let database = try #require(try app.pool.query("SELECT current_database() AS name").first?.decode("name", as: String.self))
        let quoted = PostgresConnection.quoteIdentifier(database)
        // From another database: PostgreSQL will not close the one a session is connected to.
        var other = try #require(URLComponents(string: app.pool.url))
        other.path = "/postgres"
        let admin = try PostgresConnection(url: try #require(other.string))
        defer { admin.close() }
        try admin.execute("ALTER DATABASE \(quoted) WITH ALLOW_CONNECTIONS false")
        defer { _ = try? admin.execute("ALTER DATABASE \(quoted) WITH ALLOW_CONNECTIONS true") }
        let pid = app.app.listenLink.backendPID
        try app.pool.query("SELECT pg_terminate_backend($1::int)", [Int64(pid)])
        #expect(eventually(timeout: 10) { !app.app.listenLink.isConnected }, "the listener never saw its connection end")

        // Down: the session is read every time, and a change made now (its NOTIFY lost) is seen.
        let down = try ann.get("/")
        #expect(down.status == 200 && (down.roundTrips ?? 0) >= 1)
        let dropped = try SharedMapTests.drop(ann, lat: 12, lon: 34)
        let pin = try #require(dropped.body.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) })
        try app.pool.query("UPDATE pins SET place_name = 'Renamed while the link was down' WHERE id = $1", [Int64(pin)!])
        let meanwhile = try ann.get("/")
        #expect(meanwhile.body.contains("Renamed while the link was down"))
        #expect((meanwhile.roundTrips ?? 0) >= 1)
        #expect(app.app.sessions.count == 0, "a session was kept while the link was down")

        try admin.execute("ALTER DATABASE \(quoted) WITH ALLOW_CONNECTIONS true")
        #expect(eventually(timeout: 30) { app.app.listenLink.isConnected }, "the listener did not come back")
        try app.pool.query("UPDATE pins SET place_name = 'Renamed after the link came back' WHERE id = $1", [Int64(pin)!])
        #expect(try Self.secondsUntil(ann) { $0.body.contains("Renamed after the link came back") } != nil)
        try Self.keptView(ann)
    }
}
