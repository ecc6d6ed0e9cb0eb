import Foundation
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// A shared map, live, over loopback and real PostgreSQL: one member's drop, rename and delete reach
/// the other members' open map streams (and nobody else's), and a member removed while looking has
/// their open streams ended at once.
@Suite struct SharedMapLiveTests {
    /// An open event stream on a raw socket.
    final class Stream {
        let fd: Int32
        private(set) var received = ""

        init(_ app: TestApp, _ browser: Browser, path: String) throws {
            fd = try connectLoopback(port: app.port, receiveTimeout: 0.2)
            let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
            let request = Array("GET \(path) HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nCookie: \(cookie)\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        deinit { close(fd) }

        /// Reads until `text` has arrived or `timeout` passed; the seconds it took, or nil.
        func wait(for text: String, timeout: Double = 3) -> Double? {
            let start = Date()
            while Date().timeIntervalSince(start) < timeout {
                if received.contains(text) { return Date().timeIntervalSince(start) }
                guard read() != 0 else { return received.contains(text) ? Date().timeIntervalSince(start) : nil }
            }
            return received.contains(text) ? Date().timeIntervalSince(start) : nil
        }

        /// True once the server has closed the stream (within `timeout`).
        func closed(within timeout: Double) -> Bool {
            let start = Date()
            while Date().timeIntervalSince(start) < timeout {
                if read() == 0 { return true }
            }
            return false
        }

        /// One recv: bytes read, 0 at the end of the stream, -1 on the receive timeout.
        @discardableResult
        private func read() -> Int {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { received += String(decoding: buffer.prefix(n), as: UTF8.self) }
            return n
        }
    }

    struct Club {
        let app: TestApp
        let ann: Browser, bob: Browser, cy: Browser
        let map: Int64
        let bobID: Int64
    }

    /// Ann owns "Club walks" with Bob as an editor, both showing it; Cy is not a member.
    func club() throws -> Club {
        // With the background work: the LISTEN connection is what feeds live pages.
        let app = try TestApp(workers: true)
        let ann = try app.signedUp(email: "ann-live@example.org", name: "Ann")
        let bob = try app.signedUp(email: "bob-live@example.org", name: "Bob")
        let cy = try app.signedUp(email: "cy-live@example.org", name: "Cy")
        let map = try SharedMapTests.makeMap(ann, name: "Club walks", member: bob, email: "bob-live@example.org")
        #expect(try bob.get("/").body.contains("Club walks"))
        let bobID: Int64 = try app.pool.query("SELECT id FROM users WHERE email = 'bob-live@example.org'")[0].decode("id")
        return Club(app: app, ann: ann, bob: bob, cy: cy, map: map, bobID: bobID)
    }

    @Test func aMembersDropRenameAndDeleteReachTheOtherMembersOpenMap() throws {
        let club = try club()
        let bobsMap = try Stream(club.app, club.bob, path: "/map/events")
        let cysMap = try Stream(club.app, club.cy, path: "/map/events")
        #expect(bobsMap.wait(for: "200 OK") != nil && cysMap.wait(for: "200 OK") != nil)

        let pin = try AlbumTests.dropPin(club.ann, lat: 48.8566, lon: 2.3522)
        let heard = bobsMap.wait(for: "event: pins\ndata: \(pin)\n")
        #expect(heard != nil, "Bob's open map heard of Ann's pin: \(bobsMap.received)")
        #expect((heard ?? 99) < 1, "within a second: \(heard ?? -1) s")
        // What the page then reads holds the pin, with who dropped it.
        let view = try club.bob.get("/pins.json?bbox=0,46,5,50&zoom=8").body
        #expect(view.contains("\"id\":\(pin)"))
        #expect(try club.bob.get("/pins/\(pin)").body.contains("Dropped by Ann"))

        let bobToken = try #require(try club.bob.get("/").csrfToken)
        #expect(try club.bob.post("/pins/\(pin)/rename", form: [("_csrf", bobToken), ("name", "Le Marais")]).status == 303)
        let annsMap = try Stream(club.app, club.ann, path: "/map/events")
        #expect(annsMap.wait(for: "200 OK") != nil)
        #expect(try club.bob.post("/pins/\(pin)/delete", form: [("_csrf", bobToken)]).status == 303)
        #expect(annsMap.wait(for: "event: pins\ndata: \(pin)\n") != nil, "Ann's open map heard Bob delete it")
        // Cy, on his own map, heard none of it.
        #expect(cysMap.wait(for: "event: pins", timeout: 0.5) == nil, "\(cysMap.received)")
        #expect(try club.app.count("SELECT count(*) FROM pins WHERE user_id = $1", [club.map]) == 0)

        // The switcher's list is kept on each member's row (users.map_choices): a rename reaches it.
        let annToken = try #require(try club.ann.get("/maps/\(club.map)").csrfToken)
        #expect(try club.ann.post("/maps/\(club.map)/rename", form: [("_csrf", annToken), ("name", "Night walks")]).status == 303)
        let header = try club.bob.get("/").body
        #expect(header.contains(">Night walks</option>") && !header.contains("Club walks"), "\(header.prefix(2000))")
        // And a new member's: Cy, invited as a viewer, accepts and sees the map in his switcher at once.
        _ = annToken
        #expect(try SharedMapTests.add(club.ann, map: club.map, email: "cy-live@example.org", role: "viewer", person: club.cy).status == 303)
        #expect(try club.cy.get("/").body.contains(">Night walks</option>"))
    }

    @Test func aRemovedMembersOpenStreamsEndAndTheirNextRequestIsRefused() throws {
        let club = try club()
        let pin = try AlbumTests.dropPin(club.ann)
        let bobsMap = try Stream(club.app, club.bob, path: "/map/events")
        let bobsAlbum = try Stream(club.app, club.bob, path: "/pins/\(pin)/events")
        #expect(bobsMap.wait(for: "200 OK") != nil && bobsAlbum.wait(for: "200 OK") != nil)
        #expect(try club.bob.get("/pins/\(pin)").status == 200)

        let token = try #require(try club.ann.get("/maps/\(club.map)").csrfToken)
        let removed = try club.ann.post("/maps/\(club.map)/members/\(club.bobID)/remove", form: [("_csrf", token)])
        #expect(removed.status == 303)
        #expect(bobsMap.closed(within: 2), "Bob's open map stream ended")
        #expect(bobsAlbum.closed(within: 2), "Bob's open album stream ended")
        #expect(try club.bob.get("/pins/\(pin)").status == 404)
        #expect(try club.bob.get("/pins/\(pin)/album.html").status == 404)
        let home = try club.bob.get("/").body
        #expect(home.contains("Your pins") && !home.contains("Club walks"))
    }
}

/// On a shared map the fair queue takes turns by the person who asked, and pins count against whoever
/// drops them.
@Suite struct SharedMapFairnessTests {
    @Test func theQueueTakesTurnsByWhoAskedNotByMap() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-fair@example.org", name: "Ann")
        let bob = try app.signedUp(email: "bob-fair@example.org", name: "Bob")
        let map = try SharedMapTests.makeMap(ann, name: "Trip", member: bob, email: "bob-fair@example.org")
        // Ann drops five pins on the map, then Bob one: all six albums are the map's.
        for k in 0..<5 { _ = try AlbumTests.dropPin(ann, lat: Double(k), lon: 10) }
        let bobsPin = try AlbumTests.dropPin(bob, lat: 40, lon: 10)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE user_id = $1", [map]) == 6)
        let queue = app.app.workers.store
        let first = try #require(try queue.claimJob(worker: "w", leaseSeconds: 60))
        let second = try #require(try queue.claimJob(worker: "w", leaseSeconds: 60))
        #expect(first.pinID != Int64(bobsPin), "Ann asked first")
        #expect(second.pinID == Int64(bobsPin), "Bob's turn comes second, not after Ann's five")
        // Each person's pins are counted as theirs.
        let bobID: Int64 = try app.pool.query("SELECT id FROM users WHERE email = 'bob-fair@example.org'")[0].decode("id")
        #expect(try app.count("SELECT count(*) FROM pins WHERE dropped_by = $1 AND user_id = $2", [bobID, map]) == 1)
        try app.pool.query("UPDATE users SET max_pins = 1 WHERE id = $1", [bobID])
        let refused = try bob.post("/pins", form: [("_csrf", try #require(try bob.get("/").csrfToken)), ("lat", "1"), ("lon", "1")],
                                   headers: [("Accept", "application/json")])
        #expect(refused.status == 429 && refused.body.contains("limit of 1 pins"), "\(refused)")
        #expect(try AlbumTests.dropPin(ann, lat: 2, lon: 2) > 0, "Ann's own limit is hers")
    }

    /// Two editors importing onto one map: each preview is its uploader's alone.
    @Test func eachEditorsImportPreviewIsTheirOwn() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-import@example.org", name: "Ann")
        let bob = try app.signedUp(email: "bob-import@example.org", name: "Bob")
        let map = try SharedMapTests.makeMap(ann, name: "Atlas", member: bob, email: "bob-import@example.org")
        let annsPreview = try #require(try ImportTests.upload(ann, try ImportTests.fixture("gpxpy-gpx1.1_with_all_fields.gpx"), filename: "ann.gpx").header("Location"))
        let bobsPreview = try #require(try ImportTests.upload(bob, try ImportTests.fixture("gpxpy-gpx1.1_with_all_fields.gpx"), filename: "bob.gpx").header("Location"))
        #expect(try app.count("SELECT count(*) FROM pin_imports WHERE user_id = $1", [map]) == 2, "Bob's upload did not replace Ann's")
        #expect(try bob.get(annsPreview).status == 404, "Bob cannot see Ann's preview")
        let bobToken = try #require(try bob.get(bobsPreview).csrfToken)
        #expect(try bob.post(annsPreview + "/confirm", form: [("_csrf", bobToken)]).status == 404, "nor confirm it")
        #expect(try bob.post(annsPreview + "/cancel", form: [("_csrf", bobToken)]).status == 404, "nor cancel it")
        let annToken = try #require(try ann.get(annsPreview).csrfToken)
        #expect(try ann.post(annsPreview + "/confirm", form: [("_csrf", annToken)]).status == 303)
        let annID: Int64 = try app.pool.query("SELECT id FROM users WHERE email = 'ann-import@example.org'")[0].decode("id")
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1 AND dropped_by = $2", [map, annID]) > 0)
        #expect(try bob.get(bobsPreview).status == 200, "Bob's preview is still his")
    }

    /// A viewer's change is refused with 403 only for a thing they can see: any other id is a 404,
    /// as for everyone else.
    @Test func aViewerGets403ForWhatTheySeeAnd404ForAnythingElse() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-view@example.org", name: "Ann")
        let vic = try app.signedUp(email: "vic-view@example.org", name: "Vic")
        let map = try SharedMapTests.makeMap(ann, name: "Gallery", member: vic, email: "vic-view@example.org", role: "viewer")
        let pin = try AlbumTests.dropPin(ann)
        let elsewhere = try AlbumTests.dropPin(try app.signedUp(email: "other-view@example.org"))
        let token = try #require(try vic.get("/").csrfToken)
        for path in ["/pins/\(pin)/delete", "/pins/\(pin)/rename", "/pins/\(pin)/collection"] {
            #expect(try vic.post(path, form: [("_csrf", token), ("name", "x")]).status == 403, "\(path)")
        }
        #expect(try vic.request("DELETE", "/pins/\(pin)", headers: [("X-CSRF-Token", token)]).status == 403)
        for id in [elsewhere, 999_999] {
            for path in ["/pins/\(id)/delete", "/pins/\(id)/rename", "/pins/\(id)/collection", "/import/\(id)/confirm", "/import/\(id)/cancel"] {
                #expect(try vic.post(path, form: [("_csrf", token), ("name", "x")]).status == 404, "\(path)")
            }
            #expect(try vic.request("DELETE", "/pins/\(id)", headers: [("X-CSRF-Token", token)]).status == 404)
            #expect(try vic.get("/import/\(id)").status == 404)
        }
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [map]) == 1)
    }
}
