import Foundation
import HTTPServer
import Log
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// A helper session's attacks on shared maps' consent, per-person quotas and the PUBLIC_URL warning
/// (issue 50), kept as tests: each failed on the first version and states the promise it holds.
@Suite(.serialized) struct ConsentAttackTests {
    static func accept(_ person: Browser, _ id: Int64) throws -> Browser.Page {
        try person.post("/maps/invitations/\(id)/accept", form: [("_csrf", try SharedMapTests.csrf(person))])
    }

    /// "Only the person with that address can accept": an invitation for an address with no
    /// account is taken by whoever signs up with that address first (addresses are never verified).
    @Test func aStrangerWhoSignsUpWithTheAddressTakesTheInvitation() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let map = try SharedMapTests.makeMap(olga, name: "Family")
        #expect(try SharedMapTests.inviteByEmail(olga, map: map, email: "carol@example.org", role: "editor").status == 303)
        // Mallory is not Carol: she only typed Carol's address at sign-up.
        let mallory = try app.signedUp(email: "carol@example.org", name: "Mallory")
        let malloryID = try RouteCoverageTests.personID(app: app, mallory)
        if let id = try SharedMapTests.invitationID(mallory, map: map) { _ = try Self.accept(mallory, id) }
        #expect(try SharedMapTests.role(app, map: map, person: malloryID) == nil, "a stranger became an editor of Olga's map")
    }

    /// The address is lower-cased by Swift (SharedMaps.inviteByEmail) but matched against
    /// lower(users.email) in SQL: outside ASCII (C or ICU/glibc rules) they differ, so the
    /// invitation misses the account with the typed address and can reach another account.
    @Test func aNonASCIICaseVariantReachesAnotherAccount() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let emile = try app.signedUp(email: "ÉMILE@example.org", name: "Émile")
        let mallory = try app.signedUp(email: "émile@example.org", name: "Mallory")
        let map = try SharedMapTests.makeMap(olga, name: "Club")
        // Olga types Émile's address exactly as his account has it.
        #expect(try SharedMapTests.inviteByEmail(olga, map: map, email: "ÉMILE@example.org", role: "editor").status == 303)
        #expect(try SharedMapTests.invitationID(emile, map: map) != nil, "Émile never sees the invitation for his own address")
        #expect(try SharedMapTests.invitationID(mallory, map: map) == nil, "another account sees (and can accept) Émile's invitation")
    }

    /// Lower-casing can lengthen an address past the column's 320-octet CHECK: a 500, not an answer.
    @Test func anAddressThatGrowsWhenLowerCasedIsA500() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let map = try SharedMapTests.makeMap(olga, name: "Club")
        let email = String(repeating: "İ", count: 150) + "@example.org"   // 312 octets; 462 lower-cased
        #expect(email.utf8.count <= 320)
        let page = try SharedMapTests.inviteByEmail(olga, map: map, email: email, role: "viewer")
        #expect(page.status == 303, "\(page.status)")
    }

    /// "Photo storage counts against the person who asked": the picker checks no quota at all and
    /// its photos are charged to whoever last collected the pin, not to the member who picked them.
    @Test func pickerPhotosPassTheQuotaAndAreChargedToAnotherMember() throws {
        let app = try TestApp(workers: true)
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let mallory = try app.signedUp(email: "mallory@example.org", name: "Mallory")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: mallory, email: "mallory@example.org")
        let olgaID = try RouteCoverageTests.personID(app: app, olga), malloryID = try RouteCoverageTests.personID(app: app, mallory)
        #expect(try SharedMapTests.switchTo(olga, "\(map)").status == 303)
        let pin = try AlbumTests.dropPin(olga)
        _ = try AlbumTests.settled(olga, pin: pin)
        let charged = { (who: Int64) throws -> Int64 in
            try app.pool.query("SELECT coalesce(sum(ph.byte_size), 0)::bigint AS n FROM pins p JOIN photos ph ON ph.pin_id = p.id WHERE coalesce(p.collected_by, p.dropped_by, p.user_id) = $1", [who])[0].decode("n")
        }
        let olgaBefore = try charged(olgaID)
        // Mallory has no storage left at all.
        try app.pool.query("UPDATE users SET max_photo_bytes = 0 WHERE id = $1", [malloryID])
        let token = try SharedMapTests.csrf(mallory)
        let picker = try mallory.get("/pins/\(pin)/picker?page=2")
        let ids = picker.body.matches(of: /name="photo" value="(\d+)"/).map { String($0.1) }
        let saved = try mallory.post("/pins/\(pin)/picker", form: [("_csrf", token), ("page", "2")] + ids.prefix(5).map { ("photo", $0) })
        #expect(saved.status == 303)
        _ = try AlbumTests.settled(mallory, pin: pin)
        let flash = try mallory.get("/pins/\(pin)").body
        #expect(!flash.contains("photos added"), "Mallory, with 0 bytes allowed, added photos")
        let olgaAfter = try charged(olgaID)
        #expect(olgaAfter == olgaBefore, "Mallory's picks were charged to Olga: \(olgaBefore) -> \(olgaAfter)")
    }

    /// A member past their storage drops pins on a shared map (no album: quota); a viewer who merely
    /// opens one starts its album, charged to the viewer. Storage is shifted onto people who asked nothing.
    @Test func anOverQuotaMembersPinsAreChargedToWhoeverLooks() throws {
        let app = try TestApp(workers: true)
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let mallory = try app.signedUp(email: "mallory@example.org", name: "Mallory")
        let vera = try app.signedUp(email: "vera@example.org", name: "Vera")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: mallory, email: "mallory@example.org")
        #expect(try SharedMapTests.add(olga, map: map, email: "vera@example.org", role: "viewer", person: vera).status == 303)
        #expect(try SharedMapTests.switchTo(vera, "\(map)").status == 303)
        let malloryID = try RouteCoverageTests.personID(app: app, mallory), veraID = try RouteCoverageTests.personID(app: app, vera)
        try app.pool.query("UPDATE users SET max_photo_bytes = 0 WHERE id = $1", [malloryID])
        let pin = try AlbumTests.dropPin(mallory)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1", [pin]) == 0)
        // Vera, a viewer, looks at it.
        _ = try vera.get("/pins/\(pin)")
        _ = try AlbumTests.settled(vera, pin: pin)
        #expect(try app.count("SELECT count(*) FROM pins WHERE id = $1 AND collected_by = $2", [pin, veraID]) == 0,
                "Vera (a viewer who only looked) now pays for Mallory's over-quota pin")
    }

    /// "A stranger's odd Host cannot use up the line a real misconfiguration needs": eight odd
    /// hosts (through the proxy, which forwards the client's Host) fill PublicURLCheck.maxOrigins.
    @Test func eightOddHostsSilenceTheRealPublicURLWarning() throws {
        let publicURL = "https://photos-\(UUID().uuidString.prefix(8).lowercased()).example.org"
        let lines = Mutex<[String]>([])
        let stop = Logger.observe { line in if line.contains(publicURL) { lines.withLock { $0.append(line) } } }
        defer { stop() }
        let app = try TestApp(configure: { $0.publicURL = publicURL }, server: { $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")! })
        let browser = app.browser()
        for n in 0..<8 {
            _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "scan\(n).example.net")])
        }
        let before = lines.withLock { $0.count }
        // The real misconfiguration: people reach it over plain http.
        _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "http"), ("X-Forwarded-Host", String(publicURL.dropFirst("https://".count)))])
        #expect(lines.withLock { $0.count } == before + 1, "the real misconfiguration was never logged")
    }
}
