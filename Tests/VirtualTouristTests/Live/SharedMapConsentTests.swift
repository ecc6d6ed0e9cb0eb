import Foundation
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

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

/// Invitations by email explored: seeded random sequences of invitations (to accounts and to an
/// address nobody has, which a stranger may sign up with later), acceptances and declines by the
/// right person and the wrong one, blocks, withdrawals, removals and the inviting owner's demotion,
/// against the real database, with invariants after every step: nobody is a member who did not
/// accept an invitation made for their own account while it was open (and while its maker could
/// invite); a person's list shows exactly the open invitations made for them, never a blocked map's;
/// the stranger never sees one made before they signed up.
@Suite(.serialized) struct ConsentExplorationTests {
    enum Event: CustomStringConvertible {
        /// Inviter 0 is the anchor owner, 1 a co-owner who may be demoted; target 0..<people, or
        /// `people` for the address nobody had.
        case invite(inviter: Int, target: Int)
        /// By person `by` (0..<people, or `people`: the stranger once signed up), the k-th invitation
        /// made so far (modulo).
        case accept(by: Int, k: Int)
        case decline(by: Int, k: Int, block: Bool)
        case withdraw(k: Int)
        case remove(person: Int)
        case demoteCoOwner
        case promoteCoOwner
        case strangerSignsUp

        var description: String {
            switch self {
            case .invite(let i, let t): "invite(by \(i == 0 ? "anchor" : "co-owner"), P\(t))"
            case .accept(let b, let k): "accept(P\(b), #\(k))"
            case .decline(let b, let k, let block): "decline(P\(b), #\(k)\(block ? ", block" : ""))"
            case .withdraw(let k): "withdraw(#\(k))"
            case .remove(let p): "remove(P\(p))"
            case .demoteCoOwner: "demote co-owner"
            case .promoteCoOwner: "promote co-owner"
            case .strangerSignsUp: "stranger signs up with the unused address"
            }
        }
    }

    static let people = 3

    static func generate(_ r: inout SeededGenerator) -> Event {
        switch Int.random(in: 0..<20, using: &r) {
        case 0..<6: .invite(inviter: Int.random(in: 0...1, using: &r), target: Int.random(in: 0...people, using: &r))
        case 6..<11: .accept(by: Int.random(in: 0...people, using: &r), k: Int.random(in: 0..<8, using: &r))
        case 11..<14: .decline(by: Int.random(in: 0...people, using: &r), k: Int.random(in: 0..<8, using: &r), block: r.chance(0.5))
        case 14: .withdraw(k: Int.random(in: 0..<8, using: &r))
        case 15..<17: .remove(person: Int.random(in: 0..<people, using: &r))
        case 17: .demoteCoOwner
        case 18: .promoteCoOwner
        default: .strangerSignsUp
        }
    }

    /// One sequence on a fresh map; why it broke an invariant, or nil.
    static func play(_ events: [Event], app: TestApp) throws -> String? {
        var quotas = Quotas()
        quotas.invitationsPerHour = 10_000
        let maps = SharedMaps(pool: app.pool, quotas: quotas)
        let tag = UUID().uuidString.prefix(8).lowercased()
        func account(_ email: String) throws -> Int64 {
            try app.pool.query("INSERT INTO users (email, display_name, password_hash) VALUES ($1, 'X', '!') RETURNING id", [email])[0].decode("id")
        }
        let anchor = try account("anchor-\(tag)@example.org"), coOwner = try account("co-\(tag)@example.org")
        let people = try (0..<Self.people).map { try account("p\($0)-\(tag)@example.org") }
        let unused = "Unused-\(tag)@Example.org"
        var stranger: Int64?
        let map = try maps.create(name: "Explored", by: anchor)
        _ = try maps.add(email: "co-\(tag)@example.org", role: .owner, to: map, by: anchor)
        // The model: invitations made (id, for whom: a person index or nil for the unused address,
        // its maker), which are open, who is a member, who blocked.
        struct Made { let id: Int64; let address: Int; let target: Int?; let byCoOwner: Bool; var open: Bool }
        var made: [Made] = []
        var members: Set<Int> = []
        var blocked: Set<Int> = []
        var coOwnerIsOwner = true
        func who(_ index: Int) -> Int64? { index < Self.people ? people[index] : stranger }

        for (step, event) in events.enumerated() {
            switch event {
            case .invite(let inviter, let target):
                let by = inviter == 0 ? anchor : coOwner
                let address = target < Self.people ? "P\(target)-\(tag)@EXAMPLE.org" : unused
                let done = (try? maps.inviteByEmail(address, role: .editor, to: map, by: by)) != nil
                let allowed = inviter == 0 || coOwnerIsOwner
                let member = members.contains(target)
                if done != (allowed && !member) { return "step \(step): invitation made \(done), expected \(allowed && !member)" }
                if done {
                    // Inviting the address again replaces its open invitation.
                    for i in made.indices where made[i].address == target && made[i].open { made[i].open = false }
                    let id: Int64 = try app.pool.query("SELECT max(id) AS id FROM map_invitations WHERE map_id = $1", [map])[0].decode("id")
                    // For the unused address: the stranger's only if they had signed up with it already.
                    let t: Int? = target < Self.people ? target : (stranger == nil ? nil : Self.people)
                    made.append(Made(id: id, address: target, target: t, byCoOwner: inviter == 1, open: true))
                }
            case .accept(let by, let k):
                guard !made.isEmpty, let person = who(by) else { break }
                let m = made[k % made.count]
                let joined = (try? maps.accept(invitation: m.id, person: person)) != nil
                let expected = m.open && m.target == by && !blocked.contains(by)
                if joined != expected { return "step \(step): accept by P\(by) of #\(k % made.count) gave \(joined), expected \(expected)" }
                if joined {
                    members.insert(by)
                    made[k % made.count].open = false
                }
            case .decline(let by, let k, let block):
                guard !made.isEmpty, let person = who(by) else { break }
                let m = made[k % made.count]
                let declined = try maps.decline(invitation: m.id, person: person, block: block)
                let expected = m.open && m.target == by
                if declined != expected { return "step \(step): decline by P\(by) gave \(declined), expected \(expected)" }
                if declined {
                    made[k % made.count].open = false
                    if block { blocked.insert(by) }
                }
            case .withdraw(let k):
                guard !made.isEmpty else { break }
                let m = made[k % made.count]
                _ = try maps.withdrawInvitation(m.id, of: map, by: anchor)
                made[k % made.count].open = false
            case .remove(let p):
                if (try? maps.remove(people[p], from: map, by: anchor)) != nil { members.remove(p) }
            case .demoteCoOwner:
                try maps.setRole(.editor, of: coOwner, on: map, by: anchor)
                coOwnerIsOwner = false
                // Their invitations die with their right.
                for i in made.indices where made[i].byCoOwner { made[i].open = false }
            case .promoteCoOwner:
                try maps.setRole(.owner, of: coOwner, on: map, by: anchor)
                coOwnerIsOwner = true
            case .strangerSignsUp:
                if stranger == nil { stranger = try account(unused.lowercased()) }
            }
            // Invariants.
            let inDB = Set(try app.pool.query("SELECT user_id FROM map_members WHERE map_id = $1", [map]).map { try $0.decode("user_id", as: Int64.self) })
            let expected = Set([anchor, coOwner] + members.filter { $0 < Self.people }.map { people[$0] } + (members.contains(Self.people) ? [stranger!] : []))
            if inDB != expected { return "step \(step): members \(inDB.sorted()), expected \(expected.sorted())" }
            for index in 0...Self.people {
                guard let person = who(index) else { continue }
                let shown = Set(try maps.invitations(for: person).map(\.id))
                let open = blocked.contains(index) || members.contains(index) ? [] : Set(made.filter { $0.open && $0.target == index }.map(\.id))
                if shown != open { return "step \(step): P\(index) sees \(shown.sorted()), expected \(open.sorted())" }
            }
        }
        return nil
    }

    @Test func seededInvitationSequencesKeepConsent() throws {
        let app = try TestApp()
        let failure = explore(seeds: 0..<150, length: 5...30, generate: Self.generate) { events in
            do { return try Self.play(events, app: app) } catch { return "threw \(error)" }
        }
        #expect(failure == nil, "\(failure ?? "")")
    }
}
