import Foundation
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist

/// Shared maps' trust (issue 50), over loopback against a real PostgreSQL: nobody is added without
/// consent and "Add by email" tells nobody who has an account; invitations per hour; storage and New
/// Collections counted against the person who asked on every map; members' addresses for owners
/// only; a link that hides the location shows no titles or source links; a removed member's live
/// map page ends on the timer when the NOTIFY was missed.
@Suite(.serialized) struct SharedMapConsentTests {
    /// The owner's view of an "Add by email" answer: where it goes and the sentence it says there.
    static func answer(_ owner: Browser, _ page: Browser.Page, map: Int64) throws -> String {
        let location = page.header("Location") ?? ""
        let body = try owner.get(location.isEmpty ? "/maps/\(map)" : location).body
        let flash = body.firstMatch(of: /<div class="flash"[^>]*>([^<]*)</).map { String($0.1) } ?? ""
        return "\(page.status) \(location) \(flash)"
    }

    @Test func addingByEmailInvitesAndTellsNobodyWhoHasAnAccount() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let bob = try app.signedUp(email: "bob@example.org", name: "Bob")
        let map = try SharedMapTests.makeMap(olga, name: "Club")
        let bobID = try RouteCoverageTests.personID(app: app, bob)

        // An account's address and one nobody has: the same answer, word for word.
        let known = try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "BOB@example.org", role: "editor"), map: map)
        let unknown = try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "nobody@example.org", role: "editor"), map: map)
        #expect(known == unknown.replacingOccurrences(of: "nobody", with: "bob"), "\(known) | \(unknown)")
        #expect(known.contains("If someone on this server has that address"), "\(known)")
        // Nobody was added; both are listed for the owners, with the address each is for.
        #expect(try SharedMapTests.role(app, map: map, person: bobID) == nil)
        let owners = try olga.get("/maps/\(map)").body
        #expect(owners.contains(">bob@example.org</td>") && owners.contains(">nobody@example.org</td>"), "\(owners)")
        // Bob sees his and accepts: a member, the map shown.
        let id = try #require(try SharedMapTests.invitationID(bob, map: map))
        #expect(try bob.get("/maps").body.contains("<strong>Olga</strong> invited you to “Club”"))
        let accepted = try bob.post("/maps/invitations/\(id)/accept", form: [("_csrf", try SharedMapTests.csrf(bob))])
        #expect(accepted.status == 303 && accepted.header("Location") == "/")
        #expect(try SharedMapTests.role(app, map: map, person: bobID) == "editor")
        #expect(try app.count("SELECT count(*)::int FROM users WHERE id = $1 AND shown_map = $2", [bobID, map]) == 1)
        // Used: it is gone from his list and cannot be accepted twice.
        #expect(try SharedMapTests.invitationID(bob, map: map) == nil)
        #expect(try bob.post("/maps/invitations/\(id)/accept", form: [("_csrf", try SharedMapTests.csrf(bob))]).status == 404)

        // The address nobody had: an account made with it later does not inherit the invitation
        // (addresses are not verified: anyone may type one at sign-up).
        let late = try app.signedUp(email: "Nobody@example.org", name: "Nora")
        #expect(try SharedMapTests.invitationID(late, map: map) == nil)
        // An invitation never makes an owner.
        let owner = try SharedMapTests.inviteByEmail(olga, map: map, email: "x@example.org", role: "owner")
        #expect(try Self.answer(olga, owner, map: map).contains("make an owner from the members list"))
    }

    @Test func nobodyElseAcceptsOrDeclinesAnInvitationAndADeclineCanBlockTheMap() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let bob = try app.signedUp(email: "bob@example.org", name: "Bob")
        let eve = try app.signedUp(email: "eve@example.org", name: "Eve")
        let map = try SharedMapTests.makeMap(olga, name: "Your account is suspended — see evil.example")
        #expect(try SharedMapTests.inviteByEmail(olga, map: map, email: "bob@example.org", role: "viewer").status == 303)
        let id = try #require(try SharedMapTests.invitationID(bob, map: map))

        // Eve knows the id: 404 for both, nothing changed.
        let before = try app.fingerprint()
        for action in ["accept", "decline"] {
            #expect(try eve.post("/maps/invitations/\(id)/\(action)", form: [("_csrf", try SharedMapTests.csrf(eve)), ("block", "1")]).status == 404)
        }
        #expect(try app.fingerprint() == before)
        // Nor does its code open it for anyone but Bob (an invitation by email is his alone).
        #expect(try app.count("SELECT count(*)::int FROM map_members WHERE map_id = $1", [map]) == 1)

        // Bob declines and blocks: gone, and the owners' next invitation is recorded, answered the
        // same, and never shown to him.
        let declined = try bob.post("/maps/invitations/\(id)/decline", form: [("_csrf", try SharedMapTests.csrf(bob)), ("block", "1")])
        #expect(declined.status == 303 && declined.header("Location") == "/maps")
        let again = try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "bob@example.org", role: "viewer"), map: map)
        #expect(again.contains("If someone on this server has that address"), "\(again)")
        #expect(try SharedMapTests.invitationID(bob, map: map) == nil)
        #expect(try app.count("SELECT count(*)::int FROM map_invitations WHERE map_id = $1 AND invitee_email = 'bob@example.org'", [map]) == 1)
        // A decline without blocking leaves the door open.
        let other = try SharedMapTests.makeMap(olga, name: "Walks")
        #expect(try SharedMapTests.inviteByEmail(olga, map: other, email: "bob@example.org", role: "viewer").status == 303)
        let second = try #require(try SharedMapTests.invitationID(bob, map: other))
        #expect(try bob.post("/maps/invitations/\(second)/decline", form: [("_csrf", try SharedMapTests.csrf(bob))]).status == 303)
        #expect(try SharedMapTests.inviteByEmail(olga, map: other, email: "bob@example.org", role: "viewer").status == 303)
        #expect(try SharedMapTests.invitationID(bob, map: other) != nil)
    }

    @Test func invitationsPerHourAreCappedAndWithdrawingGivesNoneBack() throws {
        let app = try TestApp { $0.quotas.invitationsPerHour = 3 }
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let map = try SharedMapTests.makeMap(olga, name: "Club")
        for n in 1...3 {
            #expect(try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "p\(n)@example.org", role: "viewer"), map: map)
                .contains("If someone on this server has that address"))
        }
        let token = try SharedMapTests.csrf(olga)
        #expect(try olga.post("/maps/\(map)/invitations/withdraw", form: [("_csrf", token)]).status == 303)
        let refused = try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "p4@example.org", role: "viewer"), map: map)
        #expect(refused.contains("You have sent 3 invitations in the past hour, the limit."), "\(refused)")
        #expect(try app.count("SELECT count(*)::int FROM map_invitations WHERE map_id = $1", [map]) == 0)
        // An hour later there is room again.
        try app.pool.query("UPDATE invitations_sent SET sent_at = sent_at - interval '61 minutes'")
        #expect(try Self.answer(olga, try SharedMapTests.inviteByEmail(olga, map: map, email: "p4@example.org", role: "viewer"), map: map)
            .contains("If someone on this server has that address"))
        #expect(try app.count("SELECT count(*)::int FROM invitations_sent") == 1, "old rows are deleted as new ones are made")
    }

    @Test func membersAddressesAreShownToOwnersOnly() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let vi = try app.signedUp(email: "vi@example.org", name: "Vi")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: vi, email: "vi@example.org", role: "viewer")
        #expect(try SharedMapTests.add(olga, map: map, email: "ed@example.org", role: "editor", person: ed).status == 303)
        let owners = try olga.get("/maps/\(map)").body
        #expect(["olga@", "vi@", "ed@"].allSatisfy { owners.contains($0 + "example.org") })
        for (browser, own) in [(vi, "vi@"), (ed, "ed@")] {
            let page = try browser.get("/maps/\(map)").body
            #expect(page.contains(own + "example.org"), "their own address")
            let others = ["olga@", "vi@", "ed@"].filter { $0 != own }
            #expect(others.allSatisfy { !page.contains($0 + "example.org") }, "\(own) sees another member's address")
        }
    }

    /// Storage and New Collections count against the person who asked, whatever map the pin is on.
    @Test func photoStorageAndCollectionsCountAgainstWhoAskedOnEveryMap() throws {
        let app = try TestApp(workers: true)
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: ann, email: "ann@example.org")
        let annID = try RouteCoverageTests.personID(app: app, ann), olgaID = try RouteCoverageTests.personID(app: app, olga)
        // Ann drops a pin on the shared map: its album is charged to her.
        let pin = try AlbumTests.dropPin(ann)
        #expect(try AlbumTests.settled(ann, pin: pin).count("ready") > 0)
        let held: Int64 = try app.pool.query("SELECT coalesce(sum(byte_size), 0)::bigint AS n FROM photos WHERE pin_id = $1", [pin])[0].decode("n")
        #expect(held > 0)
        let listed = try PeopleAdmin(pool: app.pool).list()
        #expect(listed.first { $0.id == annID }?.chargedBytes == held)
        #expect(listed.first { $0.id == olgaID }?.chargedBytes == 0)
        #expect(try MapsAdmin(pool: app.pool).list().first { $0.id == map }?.photoBytes == held)

        // Her storage limit below what she holds: her next pin on the shared map waits; Olga's does not.
        try app.pool.query("UPDATE users SET max_photo_bytes = $2 WHERE id = $1", [annID, held - 1])
        let second = try AlbumTests.dropPin(ann, lat: 48.85, lon: 2.35)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1", [second]) == 0, "Ann's album started past her storage")
        #expect(try ann.get("/pins/\(second)").body.contains("use all of your"))
        #expect(try SharedMapTests.switchTo(olga, "\(map)").status == 303)
        let olgas = try AlbumTests.dropPin(olga, lat: 40.4, lon: -3.7)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1", [olgas]) == 1)

        // New Collections: Ann's hourly limit spent on her own map stops her on the shared one.
        try app.pool.query("UPDATE users SET max_photo_bytes = NULL, max_collections_per_hour = 1 WHERE id = $1", [annID])
        _ = try AlbumTests.settled(olga, pin: olgas)
        let token = try SharedMapTests.csrf(ann)
        let first = try ann.post("/pins/\(olgas)/collection", form: [("_csrf", token)], headers: [("Accept", "application/json")])
        #expect(first.status == 202, "\(first)")
        _ = try AlbumTests.settled(ann, pin: olgas)
        let refused = try ann.post("/pins/\(pin)/collection", form: [("_csrf", token)], headers: [("Accept", "application/json")])
        #expect(refused.status == 429 && refused.body.contains("1 new collections in the past hour"), "\(refused)")
        // Olga's own limit is untouched by Ann's.
        let olgasTurn = try olga.post("/pins/\(pin)/collection", form: [("_csrf", try SharedMapTests.csrf(olga))], headers: [("Accept", "application/json")])
        #expect(olgasTurn.status == 202, "\(olgasTurn)")
        // The collection Ann took is now charged to her, the pin Olga took over to Olga.
        #expect(try app.count("SELECT count(*) FROM pins WHERE id = $1 AND collected_by = $2", [olgas, annID]) == 1)
        #expect(try app.count("SELECT count(*) FROM pins WHERE id = $1 AND collected_by = $2", [pin, olgaID]) == 1)
    }

    /// A removal this instance did not hear (its LISTEN link was down, simulated by a removal that
    /// fires no trigger): the live map page ends at the next timed check.
    @Test func aRemovedMembersLiveMapPageEndsOnTheTimerWhenTheNotifyWasMissed() throws {
        let app = try TestApp { $0.memberRecheck = .seconds(1) }
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let bob = try app.signedUp(email: "bob@example.org", name: "Bob")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: bob, email: "bob@example.org")
        let bobID = try RouteCoverageTests.personID(app: app, bob)
        let stream = try SharedMapLiveTests.Stream(app, bob, path: "/map/events")
        #expect(stream.wait(for: "200 OK") != nil)
        // Still a member: the checks keep it open.
        #expect(!stream.closed(within: 2.5))
        try app.pool.withConnection { db in
            try db.query("SET session_replication_role = replica")  // no trigger, no NOTIFY
            try db.query("DELETE FROM map_members WHERE map_id = $1 AND user_id = $2", [map, bobID])
            try db.query("SET session_replication_role = origin")
        }
        #expect(stream.closed(within: 5), "the removed member's map stream stayed open")
    }

    /// A link that hides the location: no photo titles and no links to the photos' pages on any
    /// page or answer the visitor gets; author and licence stay.
    @Test func aLinkThatHidesTheLocationShowsNoTitlesOrSourceLinks() throws {
        let app = try TestApp(workers: true)
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let pin = try AlbumTests.dropPin(olga)
        _ = try AlbumTests.settled(olga, pin: pin)
        try app.pool.query("UPDATE photos SET title = 'Sunset over Kiyomizu-dera', page_url = 'https://www.flickr.com/photos/someone/123' WHERE pin_id = $1", [pin])
        for hidden in [false, true] {
            let link = try ShareLinkTests.share(olga, path: "/pins/\(pin)/shares", hide: hidden)
            let visitor = app.browser()
            let photo: Int64 = try app.pool.query("SELECT id FROM photos WHERE pin_id = $1 AND status = 'ready' ORDER BY position LIMIT 1", [pin])[0].decode("id")
            let bodies = try [link, link + "/album.json", link + "/album.html", link + "/photos/\(photo)/view"].map { try visitor.get($0).body }
            for body in bodies {
                #expect(body.contains("Kiyomizu") != hidden, "hidden \(hidden): \(body.prefix(300))")
                if hidden { #expect(!body.contains("flickr.com/photos/someone")) }
            }
            // The photo's page links the source only when the location is not hidden.
            #expect(bodies[3].contains("flickr.com/photos/someone") != hidden)
            #expect(bodies[3].contains("Licence"), "the credits keep the licence")
        }
    }
}
