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

/// Attacks on the sessions kept in memory (issue 55): changes an administrator makes in SQL, or a
/// person makes on another instance, that must end or alter a kept session within the bound
/// (SessionCacheTests.bound, far inside the entries' 10 s lifetime), and what a kept session
/// must not allow after the right ended.
@Suite struct SessionCacheAttackTests {
    typealias T = SessionCacheTests

    // MARK: Found

    /// An UPDATE that moves a row off a person or a session (token_hash rewritten, a region handed
    /// to someone else) must name what the row was, not only what it became: the old token must
    /// stop working on every instance within the bound, not after the entry's lifetime.
    @Test func aRewrittenTokenHashEndsTheOldCookieWithinTheBound() throws {
        let (first, second) = try T.twoInstances()
        let ann = try first.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        let elsewhere = PhotoAccessTests.copy(ann, port: second.port)
        try T.keptView(elsewhere)
        try T.keptView(ann)
        // As an administrator revoking a cookie by rewriting its hash (no DELETE: no photo_access s:).
        try first.pool.query("UPDATE sessions SET token_hash = sha256(convert_to('revoked-' || $1, 'UTF8')) WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
                             [ann.cookies["vt_session"] ?? ""])
        T.expectWithinTheBound(try T.secondsUntil(elsewhere, "/", T.signedOut), "a rewritten token hash: the other instance")
        T.expectWithinTheBound(try T.secondsUntil(ann, "/", T.signedOut), "a rewritten token hash: the same instance")
    }

    @Test func aRegionHandedToSomeoneElseLeavesItsFormerOwnerWithinTheBound() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        let bob = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        #expect(try SharedMapTests.drop(ann).status == 201)
        #expect(try SharedMapTests.region(ann, lat: -33.9, lon: 18.4, zoom: 9).status == 204)
        #expect(try T.keptView(ann).body.contains("data-lat=\"-33.9\""))
        let bobID = try RouteCoverageTests.personID(app: app, bob)
        let annID = try RouteCoverageTests.personID(app: app, ann)
        try app.pool.query("DELETE FROM map_regions WHERE user_id = $1", [bobID])
        try app.pool.query("UPDATE map_regions SET user_id = $1 WHERE user_id = $2", [bobID, annID])
        T.expectWithinTheBound(try T.secondsUntil(ann) { !$0.body.contains("data-lat=\"-33.9\"") }, "a region moved to another person")
    }

    /// A session whose expires_at comes while it is kept: refused from then on, not up to the
    /// entry's lifetime later (an administrator shortening sessions: UPDATE … SET expires_at).
    @Test func aSessionExpiringWhileKeptIsRefusedOnceExpired() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        try T.keptView(ann)
        try app.pool.query("UPDATE sessions SET expires_at = now() + interval '1 second' WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
                           [ann.cookies["vt_session"] ?? ""])
        // Read again after the UPDATE's notification, and kept again, with its second to live.
        let start = Date()
        let csrf = try #require(try T.keptView(ann).csrfToken)
        guard Date().timeIntervalSince(start) < 1 else { return }  // a slow machine: it expired before it was kept
        usleep(1_200_000)
        // A write with it is refused (a copy of the cookie: a refusal clears it).
        let writer = PhotoAccessTests.copy(ann, port: app.port)
        let dropped = try writer.post("/pins", form: [("_csrf", csrf), ("lat", "1"), ("lon", "2")], headers: [("Accept", "application/json")])
        // 403: without a session the form's token is nobody's (as before the cache).
        #expect(dropped.status == 401 || dropped.status == 403, "a write with an expired session: \(dropped.status)")
        T.expectWithinTheBound(try T.secondsUntil(ann, "/", T.signedOut), "an expired session")
    }

    // MARK: Held

    /// An editor made a viewer in SQL: their writes from a kept session on either instance are
    /// refused within the bound.
    @Test func aDemotedEditorCannotWriteFromAKeptSessionPastTheBound() throws {
        let club = try T.sharedClub()
        let (first, ed, edElsewhere, map) = (club.first, club.ed, club.edElsewhere, club.map)
        try T.keptView(edElsewhere)
        try T.keptView(ed)
        let csrf = try #require(try edElsewhere.get("/").csrfToken)
        #expect(try T.keptView(edElsewhere).roundTrips == 0)
        let edID = try RouteCoverageTests.personID(app: first, ed)
        try first.pool.query("UPDATE map_members SET role = 'viewer' WHERE map_id = $1 AND user_id = $2", [map, edID])
        usleep(UInt32(T.bound * 1_000_000))
        for browser in [ed, edElsewhere] {
            let dropped = try browser.post("/pins", form: [("_csrf", csrf), ("lat", "1"), ("lon", "2")], headers: [("Accept", "application/json")])
            #expect(dropped.status == 403, "a demoted editor dropped a pin: \(dropped.status)")
        }
        // Removed outright, then a membership moved to someone else: the same.
        try first.pool.query("UPDATE map_members SET role = 'editor' WHERE map_id = $1 AND user_id = $2", [map, edID])
        usleep(UInt32(T.bound * 1_000_000))
        #expect(try T.keptView(edElsewhere).body.contains(">Club</option>"))
        let bob = try first.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        let bobID = try RouteCoverageTests.personID(app: first, bob)
        try first.pool.query("UPDATE map_members SET user_id = $1 WHERE map_id = $2 AND user_id = $3", [bobID, map, edID])
        T.expectWithinTheBound(try T.secondsUntil(edElsewhere) { !$0.body.contains(">Club</option>") }, "a membership moved to someone else")
        let dropped = try edElsewhere.post("/pins", form: [("_csrf", csrf), ("lat", "1"), ("lon", "2")], headers: [("Accept", "application/json")])
        #expect(dropped.status == 201 || dropped.status == 403)
        let holders = try first.pool.query("SELECT count(*) AS n FROM pins WHERE user_id = $1 AND lat = 1", [map])
        #expect(try holders[0].decode("n", as: Int64.self) == 0, "a pin landed on the shared map after the right ended")
    }

    /// TRUNCATE of the tables the session's statement reads ends every kept session on both
    /// instances within the bound; DELETE or TRUNCATE of map_versions (which moves every version)
    /// makes them forget their map's version, so no page is served from memory until one is read.
    @Test func truncatesAndVersionDeletesEndKeptSessionsWithinTheBound() throws {
        let (first, second) = try T.twoInstances()
        let ann = try first.signedUp()
        #expect(try SharedMapTests.drop(ann).status == 201)
        let elsewhere = PhotoAccessTests.copy(ann, port: second.port)
        for statement in ["DELETE FROM map_versions", "TRUNCATE map_versions", "TRUNCATE map_regions", "TRUNCATE pins CASCADE"] {
            try T.keptView(elsewhere)
            let before = second.app.sessions.count
            #expect(before >= 1)
            try first.pool.query(statement)
            let token = try #require(ann.cookies[Cookies.session])
            #expect(eventually(timeout: T.bound) { second.app.sessions.session(token: token)?.mapVersion == nil },
                    "\(statement): a kept session kept its version")
            #expect(try elsewhere.get("/").roundTrips ?? 0 >= 1, "\(statement): served from memory")
            if statement.hasPrefix("TRUNCATE pins") { #expect(try SharedMapTests.drop(ann).status == 201) }
        }
        try T.keptView(elsewhere)
        try first.pool.query("TRUNCATE sessions CASCADE")
        T.expectWithinTheBound(try T.secondsUntil(elsewhere, "/", T.signedOut), "TRUNCATE sessions")
    }

    /// The inline answer adds what `run` adds for a GET: no-store, the security headers, and
    /// nothing for someone else's or a bad cookie; a flash or a control character go to `run`.
    @Test func theInlineAnswerMatchesTheSlowOne() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let ann = try app.signedUp()
        let bob = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        #expect(try SharedMapTests.drop(ann).status == 201)
        #expect(try SharedMapTests.drop(bob, lat: 1, lon: 1).status == 201)
        let kept = try T.keptView(ann)
        try T.keptView(bob)
        let slow = try ann.get("/?page=1&x=1")
        #expect(kept.header("Cache-Control") == "no-store")
        for name in ["Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"] {
            #expect(kept.header(name) == slow.header(name), "\(name) differs inline")
        }
        #expect(kept.header("Set-Cookie") == nil)
        // Bob's cookie never gets Ann's page, and a cookie glued onto another is nobody's.
        #expect(try T.keptView(bob).body != kept.body)
        let glued = Browser(port: app.port)
        glued.setCookie("vt_session", (ann.cookies["vt_session"] ?? "") + "x")
        #expect(try glued.get("/").status == 303)
        let flashed = PhotoAccessTests.copy(ann, port: app.port)
        flashed.setCookie("vt_flash", "Pin%20deleted")
        let withFlash = try flashed.get("/")
        #expect((withFlash.roundTrips ?? 0) >= 1 && withFlash.body.contains("Pin deleted"))
        #expect(try ann.get("/?page=%01").status == 400)
    }
}
