import Foundation
import Synchronization
import HTTPClient
import HTTPServer
import Log
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Share links and invitations die with their maker's right (issue 50, migration 0123): every
/// link records who made it; a link closes (answers exactly as one that does not exist) when its
/// maker leaves, is removed, is demoted below the right to share, loses it as editors stop
/// sharing, or is disabled, and opens again only if made again; an invitation dies when its maker
/// is no longer an owner. Over loopback for the defects as reported, then the makers' matrix and a
/// seeded exploration against the real database.
@Suite struct LinkMakerTests {
    // MARK: The defects as reported

    /// What a visitor sees for a token nobody ever made: a closed link must answer the same.
    static func unknownAnswer(_ app: TestApp) throws -> (Int, String) {
        let page = try app.browser().get("/s/" + Tokens.make())
        return (page.status, page.body)
    }

    static func visit(_ app: TestApp, _ link: String) throws -> (Int, String) {
        let page = try app.browser().get(link)
        return (page.status, page.body)
    }

    static func setEditorsShare(_ owner: Browser, map: Int64, _ on: Bool) throws {
        let page = try owner.post("/maps/\(map)/sharing", form: [("_csrf", try SharedMapTests.csrf(owner))] + (on ? [("editors_share", "1")] : []))
        #expect(page.status == 303, "\(page)")
    }

    @Test func aRemovedEditorsWholeMapLinkClosesAndStaysClosed() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: ed, email: "ed@example.org")
        try Self.setEditorsShare(owner, map: map, true)
        let pin = try #require((try JSONSerialization.jsonObject(with: Data(try SharedMapTests.drop(ed).body.utf8)) as? [String: Any])?["id"] as? Int)
        let link = try ShareLinkTests.share(ed, path: "/shares", label: "never expires")
        #expect(try Self.visit(app, link).0 == 200)
        let edID = try RouteCoverageTests.personID(app: app, ed)
        // The owners' list names the maker.
        let list = try owner.get("/shares")
        #expect(list.status == 200 && list.body.contains("<td>Ed</td>") && list.body.contains("Last used"), "\(list.body)")

        #expect(try owner.post("/maps/\(map)/members/\(edID)/remove", form: [("_csrf", try SharedMapTests.csrf(owner))]).status == 303)
        #expect(try ed.get("/pins/\(pin)").status == 404)
        let unknown = try Self.unknownAnswer(app)
        #expect(try Self.visit(app, link) == unknown, "the removed editor's link answers as one that does not exist")
        for tail in ["/album.json", "/pins/\(pin)", "/pins/\(pin)/album.json", "/preview.jpg"] {
            #expect(try app.browser().get(link + tail).status == 404, "\(tail)")
        }
        #expect(try owner.get("/shares").body.contains("Closed"))
        // Back on the map, even as an owner: the old link stays closed; a new one opens.
        #expect(try SharedMapTests.add(owner, map: map, email: "ed@example.org", role: "editor", person: ed).status == 303)
        #expect(try owner.post("/maps/\(map)/members/\(edID)/role", form: [("_csrf", try SharedMapTests.csrf(owner)), ("role", "owner")]).status == 303)
        #expect(try Self.visit(app, link) == unknown)
        #expect(try Self.visit(app, try ShareLinkTests.share(ed, path: "/shares")).0 == 200)
    }

    @Test func aDemotedOrDisabledMakersLinksCloseAndAReturnDoesNotReopenThem() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: ed, email: "ed@example.org")
        try Self.setEditorsShare(owner, map: map, true)
        let edID = try RouteCoverageTests.personID(app: app, ed)
        let unknown = try Self.unknownAnswer(app)

        // Demoted to viewer and promoted again.
        let first = try ShareLinkTests.share(ed, path: "/shares")
        let role = { (to: String) in
            try owner.post("/maps/\(map)/members/\(edID)/role", form: [("_csrf", try SharedMapTests.csrf(owner)), ("role", to)]).status
        }
        #expect(try role("viewer") == 303)
        #expect(try Self.visit(app, first) == unknown)
        #expect(try role("editor") == 303)
        #expect(try Self.visit(app, first) == unknown, "re-promoted: the link stays closed")

        // Editors no longer share: an editor's link closes; an owner's stays open.
        let second = try ShareLinkTests.share(ed, path: "/shares")
        let owners = try ShareLinkTests.share(owner, path: "/shares")
        try Self.setEditorsShare(owner, map: map, false)
        #expect(try Self.visit(app, second) == unknown)
        #expect(try Self.visit(app, owners).0 == 200)
        try Self.setEditorsShare(owner, map: map, true)
        #expect(try Self.visit(app, second) == unknown)

        // Disabled (by the administrator's command), then enabled: closed for good. The shared
        // map's holder is never disabled; the maker is what counts. Their own map's links too.
        let third = try ShareLinkTests.share(ed, path: "/shares")
        #expect(try SharedMapTests.switchTo(ed, "own").status == 303)
        let own = try ShareLinkTests.share(ed, path: "/shares")
        #expect(try Self.visit(app, third).0 == 200 && Self.visit(app, own).0 == 200)
        try PeopleAdmin(pool: app.pool).disable(email: "ed@example.org")
        #expect(try Self.visit(app, third) == unknown)
        #expect(try Self.visit(app, own) == unknown)
        try PeopleAdmin(pool: app.pool).enable(email: "ed@example.org")
        #expect(try Self.visit(app, third) == unknown && Self.visit(app, own) == unknown)
        #expect(try Self.visit(app, owners).0 == 200)
    }

    @Test func anInvitationDiesWithItsMakersRoleAndOwnersSeeAndWithdrawEach() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let omar = try app.signedUp(email: "omar@example.org", name: "Omar")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: omar, email: "omar@example.org", role: "owner")
        let omarID = try RouteCoverageTests.personID(app: app, omar)
        // Omar makes an editor invitation, is demoted and removed, and tries to rejoin with it.
        let code = try SharedMapTests.invite(omar, map: map, role: "editor")
        let other = try SharedMapTests.invite(omar, map: map, role: "viewer")
        let page = try olga.get("/maps/\(map)")
        #expect(page.body.contains("data-invitation=") && page.body.contains("<td data-label=\"Made by\">Omar</td>") && page.body.contains("<td data-label=\"Role\">Editor</td>"), "\(page.body)")
        let csrf = try SharedMapTests.csrf(olga)
        #expect(try olga.post("/maps/\(map)/members/\(omarID)/role", form: [("_csrf", csrf), ("role", "viewer")]).status == 303)
        #expect(try olga.post("/maps/\(map)/members/\(omarID)/remove", form: [("_csrf", csrf)]).status == 303)
        #expect(try omar.get("/maps/join/\(code)").status == 404)
        #expect(try omar.post("/maps/join/\(code)", form: [("_csrf", try SharedMapTests.csrf(omar))]).status == 404)
        #expect(try SharedMapTests.role(app, map: map, person: omarID) == nil)
        #expect(try app.count("SELECT count(*)::int FROM map_invitations WHERE map_id = $1 AND used_at IS NULL", [map]) == 0, "deleted with the role")
        _ = other

        // Olga's invitations: listed with maker, role and expiry; one withdrawn, the other still works.
        let keep = try SharedMapTests.invite(olga, map: map, role: "viewer")
        let drop = try SharedMapTests.invite(olga, map: map, role: "editor")
        let dropID: Int64 = try app.pool.query("SELECT id FROM map_invitations WHERE code_hash = sha256(convert_to($1, 'UTF8'))", [drop])[0].decode("id")
        #expect(try olga.post("/maps/\(map)/invitations/\(dropID)/withdraw", form: [("_csrf", csrf)]).status == 303)
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        #expect(try ann.get("/maps/join/\(drop)").status == 404)
        #expect(try ann.get("/maps/join/\(keep)").status == 200)
        // Only an owner's page lists them, and only owners withdraw.
        #expect(try ann.post("/maps/join/\(keep)", form: [("_csrf", try SharedMapTests.csrf(ann))]).status == 303)
        let another = try SharedMapTests.invite(olga, map: map, role: "viewer")
        let anotherID: Int64 = try app.pool.query("SELECT id FROM map_invitations WHERE code_hash = sha256(convert_to($1, 'UTF8'))", [another])[0].decode("id")
        #expect(!(try ann.get("/maps/\(map)").body.contains("data-invitation=")))
        #expect(try ann.post("/maps/\(map)/invitations/\(anotherID)/withdraw", form: [("_csrf", try SharedMapTests.csrf(ann))]).status == 403)
    }

    // MARK: The makers' matrix

    enum Change: String, CaseIterable {
        case none, toOwner, toEditor, toViewer, removed, left, disabled, editorsStopSharing
    }

    /// A link and an invitation per role that may make them, then each change of the maker's
    /// membership: the link (and the invitation) must close exactly when the maker loses the
    /// right, and stay closed when it comes back.
    @Test func makersMatrix() throws {
        let app = try TestApp()
        let world = try World(app)
        var cells = 0
        var table: [String] = []
        for makerRole in MapRole.allCases {
            for editorsShare in [false, true] {
                for change in Change.allCases {
                    let cell = try world.fresh(makerRole: makerRole, editorsShare: editorsShare)
                    let mayShare = makerRole == .owner || (makerRole == .editor && editorsShare)
                    let link = try world.links.create(.init(pinID: nil), userID: cell.map, madeBy: cell.maker)
                    #expect((link != nil) == mayShare, "\(makerRole) share=\(editorsShare) making a link")
                    var code: String?
                    do { code = try world.maps.invite(to: cell.map, role: .viewer, by: cell.maker) } catch {}
                    #expect((code != nil) == (makerRole == .owner), "\(makerRole) making an invitation")

                    try world.apply(change, to: cell)
                    // The right after the change.
                    let role: MapRole? = switch change {
                    case .none, .disabled, .editorsStopSharing: makerRole
                    case .toOwner: .owner
                    case .toEditor: .editor
                    case .toViewer: .viewer
                    case .removed, .left: nil
                    }
                    let disabled = change == .disabled
                    let share = editorsShare && change != .editorsStopSharing
                    let keepsLink = !disabled && (role == .owner || (role == .editor && share))
                    let keepsInvitation = !disabled && role == .owner
                    if let link {
                        cells += 1
                        let open = try world.isOpen(link.token)
                        #expect(open == keepsLink, "link of a\(makerRole == .owner ? "n" : "") \(makerRole) (editors share: \(editorsShare)), then \(change): open \(open)")
                        table.append("link \(makerRole.rawValue)\(editorsShare ? "+share" : "") \(change.rawValue): \(open ? "open" : "closed")")
                    }
                    if let code {
                        cells += 1
                        let open = try world.maps.invitation(code: code, person: 0) != nil
                        #expect(open == keepsInvitation, "invitation of a \(makerRole), then \(change): open \(open)")
                        table.append("invitation \(makerRole.rawValue) \(change.rawValue): \(open ? "open" : "closed")")
                    }
                    // The right given back in full: nothing closed opens again.
                    try world.restore(cell, makerRole: makerRole, editorsShare: editorsShare)
                    if let link, !keepsLink {
                        #expect(try !world.isOpen(link.token), "\(makerRole) \(change): reopened when the right came back")
                    }
                    if let code, !keepsInvitation {
                        #expect(try world.maps.invitation(code: code, person: 0) == nil, "\(makerRole) \(change): invitation back")
                    }
                }
            }
        }
        // owner (×2 editors_share) makes both, editor with share makes a link: 8 changes each.
        #expect(cells == Change.allCases.count * (2 * 2 + 1))
        print("LinkMakerTests makers' matrix: \(cells) cells\n" + table.joined(separator: "\n"))
    }

    /// A map with an owner who never changes (the anchor) and the people of one cell.
    final class World {
        let app: TestApp
        let maps: SharedMaps
        let links: ShareLinks
        private var people = 0
        /// The owner who makes every change and never changes.
        private(set) var anchorID: Int64 = 0

        init(_ app: TestApp) throws {
            self.app = app
            var quotas = Quotas()
            quotas.sharedMaps = 100_000  // the anchor owns every cell's map
            maps = SharedMaps(pool: app.pool, quotas: quotas)
            links = ShareLinks(pool: app.pool)
            anchorID = try person()
        }

        func person() throws -> Int64 {
            people += 1
            return try app.pool.query("INSERT INTO users (email, display_name, password_hash) VALUES ($1, $2, '!') RETURNING id",
                                      ["p\(people)-\(UUID().uuidString.prefix(6))@example.org", "P\(people)"])[0].decode("id")
        }

        func email(_ id: Int64) throws -> String { try app.pool.query("SELECT email FROM users WHERE id = $1", [id])[0].decode("email") }

        struct Cell { let map: Int64; let maker: Int64 }

        func fresh(makerRole: MapRole, editorsShare: Bool) throws -> Cell {
            let map = try maps.create(name: "Cell", by: anchorID)
            let maker = try person()
            _ = try maps.add(email: try email(maker), role: makerRole, to: map, by: anchorID)
            try maps.setEditorsShare(editorsShare, on: map, by: anchorID)
            return Cell(map: map, maker: maker)
        }

        func apply(_ change: Change, to cell: Cell) throws {
            switch change {
            case .none: break
            case .toOwner: try maps.setRole(.owner, of: cell.maker, on: cell.map, by: anchorID)
            case .toEditor: try maps.setRole(.editor, of: cell.maker, on: cell.map, by: anchorID)
            case .toViewer: try maps.setRole(.viewer, of: cell.maker, on: cell.map, by: anchorID)
            case .removed: try maps.remove(cell.maker, from: cell.map, by: anchorID)
            case .left: try maps.remove(cell.maker, from: cell.map, by: cell.maker)
            case .disabled: try PeopleAdmin(pool: app.pool).disable(email: try email(cell.maker))
            case .editorsStopSharing: try maps.setEditorsShare(false, on: cell.map, by: anchorID)
            }
        }

        func restore(_ cell: Cell, makerRole: MapRole, editorsShare: Bool) throws {
            try PeopleAdmin(pool: app.pool).enable(email: try email(cell.maker))
            try maps.setEditorsShare(editorsShare, on: cell.map, by: anchorID)
            if try app.pool.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2", [cell.map, cell.maker]).isEmpty {
                _ = try maps.add(email: try email(cell.maker), role: makerRole, to: cell.map, by: anchorID)
            } else {
                try maps.setRole(makerRole, of: cell.maker, on: cell.map, by: anchorID)
            }
        }

        func isOpen(_ token: String) throws -> Bool {
            if case .open = try links.lookup(token: token) { return true }
            return false
        }
    }

    // MARK: As a malicious member would

    /// A member races the making of a link (and an invitation) with their own removal, then is let
    /// back in: whichever came first, nothing they made before the removal may open afterwards.
    @Test(.tags(.slow)) func aLinkMadeWhileTheMakerIsRemovedNeverOpensAfterTheirReturn() throws {
        let app = try TestApp(databaseConnections: 8)
        let world = try World(app)
        let (links, maps, anchorID) = (world.links, world.maps, world.anchorID)
        var opened: [String] = []
        for round in 0..<60 {
            let cell = try world.fresh(makerRole: .owner, editorsShare: round % 2 == 0)
            let made = Mutex<(link: String?, code: String?)>((nil, nil))
            let removal = Mutex<String?>(nil)
            DispatchQueue.concurrentPerform(iterations: 3) { i in
                switch i {
                case 0: if let link = try? links.create(.init(pinID: nil), userID: cell.map, madeBy: cell.maker) { made.withLock { $0.link = link.token } }
                case 1: if let code = try? maps.invite(to: cell.map, role: .editor, by: cell.maker) { made.withLock { $0.code = code } }
                default:
                    do { try maps.remove(cell.maker, from: cell.map, by: anchorID) } catch { removal.withLock { $0 = "\(error)" } }
                }
            }
            if let failed = removal.withLock({ $0 }) { opened.append("round \(round): the removal failed: \(failed)"); continue }
            try world.restore(cell, makerRole: .owner, editorsShare: true)
            let (link, code) = made.withLock { $0 }
            if let link, try world.isOpen(link) { opened.append("round \(round): link") }
            if let code, try world.maps.invitation(code: code, person: 0) != nil { opened.append("round \(round): invitation") }
        }
        #expect(opened.isEmpty, "\(opened)")
    }

    /// An invitation made by an owner removed a second ago lets nobody in, by GET or POST, even
    /// when the trigger's deletion is bypassed (rows put back by hand): the use checks the right.
    @Test func anInvitationOfAMakerRemovedASecondAgoLetsNobodyIn() throws {
        let app = try TestApp()
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        let omar = try app.signedUp(email: "omar@example.org", name: "Omar")
        let eve = try app.signedUp(email: "eve@example.org", name: "Eve")
        let map = try SharedMapTests.makeMap(olga, name: "Club", member: omar, email: "omar@example.org", role: "owner")
        let omarID = try RouteCoverageTests.personID(app: app, omar)
        let code = try SharedMapTests.invite(omar, map: map, role: "editor")
        #expect(try olga.post("/maps/\(map)/members/\(omarID)/remove", form: [("_csrf", try SharedMapTests.csrf(olga))]).status == 303)
        #expect(try eve.get("/maps/join/\(code)").status == 404)
        // Put back as if the trigger had missed it: still refused at use.
        try app.pool.query("""
            INSERT INTO map_invitations (map_id, code_hash, role, created_by, expires_at)
            VALUES ($1, sha256(convert_to($2, 'UTF8')), 'editor', $3, now() + interval '1 day')
            """, [map, code, omarID])
        #expect(try eve.get("/maps/join/\(code)").status == 404)
        #expect(try eve.post("/maps/join/\(code)", form: [("_csrf", try SharedMapTests.csrf(eve))]).status == 404)
        #expect(try SharedMapTests.role(app, map: map, person: try RouteCoverageTests.personID(app: app, eve)) == nil)
        // A link row put back the same way (closed_at cleared) is refused by the lookup itself.
        #expect(try SharedMapTests.add(olga, map: map, email: "omar@example.org", role: "editor", person: omar).status == 303)
        let link = try #require(try world(app).links.create(.init(pinID: nil), userID: map, madeBy: try RouteCoverageTests.personID(app: app, olga)))
        try app.pool.query("UPDATE share_links SET made_by = $2 WHERE id = $1", [link.link.id, omarID])
        #expect(try app.browser().get("/s/" + link.token).status == 404, "an editor's link while editors do not share")
    }

    private func world(_ app: TestApp) throws -> World { try World(app) }

    // MARK: Exploring membership sequences

    enum Event: CustomStringConvertible {
        case add(person: Int, role: MapRole)
        case setRole(person: Int, role: MapRole)
        case remove(person: Int)
        case leave(person: Int)
        case disable(person: Int)
        case enable(person: Int)
        case editorsShare(Bool)
        case makeLink(person: Int)
        case makeInvitation(person: Int)
        case revoke(link: Int)
        case join(invitation: Int, person: Int)

        var description: String {
            switch self {
            case .add(let p, let r): "add P\(p) as \(r)"
            case .setRole(let p, let r): "P\(p) becomes \(r)"
            case .remove(let p): "remove P\(p)"
            case .leave(let p): "P\(p) leaves"
            case .disable(let p): "disable P\(p)"
            case .enable(let p): "enable P\(p)"
            case .editorsShare(let on): "editors share: \(on)"
            case .makeLink(let p): "P\(p) makes a link"
            case .makeInvitation(let p): "P\(p) makes an invitation"
            case .revoke(let i): "revoke link #\(i)"
            case .join(let i, let p): "P\(p) joins with invitation #\(i)"
            }
        }
    }

    static let explorationPeople = 4

    static func generate(_ random: inout SeededGenerator) -> Event {
        let person = Int.random(in: 0..<explorationPeople, using: &random)
        let role = MapRole.allCases.randomElement(using: &random)!
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<3: return .add(person: person, role: role)
        case 3..<6: return .setRole(person: person, role: role)
        case 6: return .remove(person: person)
        case 7: return .leave(person: person)
        case 8: return .disable(person: person)
        case 9: return .enable(person: person)
        case 10: return .editorsShare(random.chance(0.5))
        case 11..<15: return .makeLink(person: person)
        case 15..<17: return .makeInvitation(person: person)
        case 17: return .revoke(link: Int.random(in: 0..<8, using: &random))
        default: return .join(invitation: Int.random(in: 0..<4, using: &random), person: person)
        }
    }

    /// After every step of a random sequence of membership events, against the real database:
    /// a link (an invitation) is usable iff it was made, its maker has had the right without a
    /// break since (and has it now), and it was not revoked (used).
    @Test(.tags(.slow)) func explorationLinksAndInvitationsLiveExactlyAsLongAsTheirMakersRight() throws {
        let app = try TestApp()
        let world = try World(app)
        let failure = explore(seeds: 0..<250, length: 4...24, generate: Self.generate) { events in
            do { return try Self.play(events, world: world) } catch { return "threw \(error)" }
        }
        #expect(failure == nil, "\(failure ?? "")")
    }

    static func play(_ events: [Event], world: World) throws -> String? {
        let map = try world.maps.create(name: "Explored", by: world.anchorID)
        let people = try (0..<explorationPeople).map { _ in try world.person() }
        var role: [Int: MapRole] = [:]
        var disabled: Set<Int> = []
        var editorsShare = false
        struct Made { let maker: Int; let secret: String; let id: Int64; var alive: Bool }
        var links: [Made] = [], invitations: [Made] = []
        func mayShare(_ p: Int) -> Bool {
            !disabled.contains(p) && (role[p] == .owner || (role[p] == .editor && editorsShare))
        }
        func mayInvite(_ p: Int) -> Bool { !disabled.contains(p) && role[p] == .owner }

        for (step, event) in events.enumerated() {
            switch event {
            case .add(let p, let r):
                let added = try? world.maps.add(email: try world.email(people[p]), role: r, to: map, by: world.anchorID)
                if case .added? = added { role[p] = r }
            case .setRole(let p, let r):
                if (try? world.maps.setRole(r, of: people[p], on: map, by: world.anchorID)) != nil { role[p] = r }
            case .remove(let p):
                if (try? world.maps.remove(people[p], from: map, by: world.anchorID)) != nil { role[p] = nil }
            case .leave(let p):
                if (try? world.maps.remove(people[p], from: map, by: people[p])) != nil { role[p] = nil }
            case .disable(let p):
                try PeopleAdmin(pool: world.app.pool).disable(email: try world.email(people[p]))
                disabled.insert(p)
            case .enable(let p):
                try PeopleAdmin(pool: world.app.pool).enable(email: try world.email(people[p]))
                disabled.remove(p)
            case .editorsShare(let on):
                try world.maps.setEditorsShare(on, on: map, by: world.anchorID)
                editorsShare = on
            case .makeLink(let p):
                let made = try world.links.create(.init(pinID: nil), userID: map, madeBy: people[p])
                if (made != nil) != mayShare(p) { return "step \(step): P\(p) making a link: \(made != nil), right \(mayShare(p))" }
                if let made { links.append(Made(maker: p, secret: made.token, id: made.link.id, alive: true)) }
            case .makeInvitation(let p):
                let code = try? world.maps.invite(to: map, role: .viewer, by: people[p])
                if (code != nil) != mayInvite(p) { return "step \(step): P\(p) making an invitation: \(code != nil), right \(mayInvite(p))" }
                if let code { invitations.append(Made(maker: p, secret: code, id: 0, alive: true)) }
            case .revoke(let i):
                guard !links.isEmpty else { break }
                let k = i % links.count
                _ = try world.links.revoke(links[k].id, userID: map)
                links[k].alive = false
            case .join(let i, let p):
                guard !invitations.isEmpty else { break }
                let k = i % invitations.count
                let joined = try? world.maps.join(code: invitations[k].secret, person: people[p])
                let wasMember = role[p] != nil
                if case .joined? = joined {
                    if !invitations[k].alive { return "step \(step): P\(p) joined with a dead invitation #\(k)" }
                    invitations[k].alive = false
                    role[p] = .viewer
                } else if invitations[k].alive && !wasMember && !disabled.contains(p) {
                    return "step \(step): P\(p) could not join with a live invitation #\(k): \(String(describing: joined))"
                }
            }
            // Rights lost are lost for good.
            for k in links.indices where links[k].alive && !mayShare(links[k].maker) { links[k].alive = false }
            for k in invitations.indices where invitations[k].alive && !mayInvite(invitations[k].maker) { invitations[k].alive = false }
            for (k, link) in links.enumerated() {
                let open = try world.isOpen(link.secret)
                if open != link.alive { return "after step \(step) (\(event)): link #\(k) of P\(link.maker) open \(open), expected \(link.alive)" }
            }
            for (k, invitation) in invitations.enumerated() {
                let open = try world.maps.invitation(code: invitation.secret, person: 0) != nil
                if open != invitation.alive {
                    return "after step \(step) (\(event)): invitation #\(k) of P\(invitation.maker) open \(open), expected \(invitation.alive)"
                }
            }
        }
        return nil
    }
}

/// Secrets in paths never reach a log line whole, however the path is spelled (LoggedPath's one
/// rule, after the router's reading of the path): share tokens, map invitation codes, sign-up
/// invitations and setup codes, through a real server over loopback, access log and every other
/// line the process logs.
@Suite struct SecretSpellingLogTests {
    @Test func theRuleReadsPathsAsTheRouterDoes() {
        let token = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"
        #expect(LoggedPath.redacted("/s/\(token)") == "/s/AbCd…")
        #expect(LoggedPath.redacted("//s//\(token)//album.json/") == "/s/AbCd…/album.json")
        #expect(LoggedPath.redacted("/s%2F\(token)") == "/s%2FAbCd…")
        #expect(LoggedPath.redacted("/%41bCd\(token.dropFirst(4))") == "/AbCd…")
        #expect(LoggedPath.redacted("/maps/join/\(token)%0AGET%20/x") == "/maps/join/AbCd…%0AGET%20/x")
        #expect(LoggedPath.redacted("/pins/12/shares") == "/pins/12/shares")
        #expect(LoggedPath.redacted("/") == "/" && LoggedPath.redacted("") == "/")
        #expect(LoggedPath.redacted("/js/share-admin.js") == "/js/share-admin.js")
        #expect(LoggedPath.redacted("/s/ab%zz") == "/s/ab%25zz")
    }

    @Test func noSecretReachesTheLogWhateverItsSpelling() throws {
        let lines = ShareLinkLogTests.Lines()
        let stop = Logger.observe { lines.add($0) }
        defer { stop() }
        // Mail set up (never sent: no sender runs), so a reset link is made; its token read from the outbox.
        let app = try TestApp(configure: {
            $0.publicURL = "http://photos.example.org"
            $0.mail = SMTPClient.Settings(host: "127.0.0.1", port: 9, security: .none, from: "photos@example.org")
        }, server: { $0.accessLog = { lines.add($0.line) } })
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        #expect(try MailTests.askForReset(app, "olga@example.org").status == 303)
        let mailed: String = try #require(try app.pool.query("SELECT body FROM mail_outbox").first?.decode("body"))
        let reset = try #require(mailed.firstMatch(of: /\/reset-password\/([A-Za-z0-9_-]{43})/).map { String($0.1) })
        let map = try SharedMapTests.makeMap(owner, name: "Club")
        let invitation = try SharedMapTests.invite(owner, map: map, role: "viewer")
        #expect(try SharedMapTests.switchTo(owner, "own").status == 303)
        let share = String(try ShareLinkTests.share(owner, path: "/shares").dropFirst(3))
        let signUp = try app.app.accounts.createInvitation(note: "test")
        // The setup code of an instance nobody has signed up to yet (SIGN_UP=invite).
        let empty = try TestApp(configure: { $0.signUp = .invite }, server: { $0.accessLog = { lines.add($0.line) } })
        let setup = try #require(try empty.app.accounts.setupCode(mode: .invite))
        let secrets = [share, invitation, signUp, setup, reset]

        /// Every spelling of a path holding `secret` after `prefix` ("s", "maps/join").
        func spellings(_ prefix: String, _ secret: String) -> [String] {
            let upper = prefix.uppercased(), first = prefix.prefix(1).uppercased() + prefix.dropFirst()
            let encodedSlashes = prefix.replacingOccurrences(of: "/", with: "%2F")
            let escapedFirst = "%" + String(secret.utf8.first!, radix: 16, uppercase: true) + secret.dropFirst()
            var paths = [
                "/\(prefix)/\(secret)", "//\(prefix)/\(secret)", "/\(prefix)//\(secret)", "//\(prefix)//\(secret)//",
                "/\(prefix)/\(secret)/", "/\(upper)/\(secret)", "/\(first)/\(secret)", "/\(encodedSlashes)%2F\(secret)",
                "/\(encodedSlashes)%2f\(secret)", "/\(prefix)%2F\(secret)", "/\(prefix)/\(escapedFirst)", "/\(prefix)/\(secret)?x=1&y=\(secret)",
                "/\(prefix)/\(secret)%2Falbum.json", "/\(prefix)/\(secret)/album.json", "/\(prefix)/\(secret)/photos/1?w=256",
                "/\(prefix)/\(secret)/preview.jpg", "/\(prefix)/\(secret)/pins/1/events", "/\(prefix)/\(secret)%00", "/\(prefix)/\(secret)%25",
                "/\(prefix)/.%2E/\(prefix)/\(secret)", "/\(prefix)/\(secret.prefix(20))/\(secret.dropFirst(20))",
            ]
            paths += paths.map { $0.replacingOccurrences(of: "/\(prefix)/", with: "/\(prefix.lowercased())/") }
            return paths
        }
        var sent = 0
        let visitor = app.browser()
        let csrf = try SharedMapTests.csrf(owner)
        for (prefix, secret) in [("s", share), ("maps/join", invitation), ("sign-up", signUp), ("s", invitation), ("maps/join", share),
                                 ("reset-password", reset), ("RESET-password", reset)] {
            for path in spellings(prefix, secret) {
                for (browser, method) in [(visitor, "GET"), (owner, "GET"), (owner, "POST"), (visitor, "HEAD")] {
                    let body = Array("_csrf=\(csrf)".utf8)
                    _ = try browser.request(method, path, body: method == "POST" ? body : [],
                                            headers: method == "POST" ? [("Content-Type", "application/x-www-form-urlencoded")] : [])
                    sent += 1
                }
            }
        }
        for path in ["/sign-up?invite=\(signUp)"] + spellings("sign-up", setup) + spellings("s", setup) {
            _ = try (path.contains(setup) ? empty.browser() : visitor).get(path.contains("?") ? path : path + "?invite=\(setup)")
            sent += 1
        }
        #expect(eventually(timeout: 10) { lines.all.count >= sent }, "every request logged: \(lines.all.count) of \(sent)")
        let logged = lines.all
        for secret in secrets {
            let leaks = logged.filter { $0.contains(String(secret.prefix(8))) || $0.contains(String(secret.suffix(8))) }
            #expect(leaks.isEmpty, "\(leaks.prefix(5))")
        }
        #expect(logged.contains { $0.contains("/s/\(share.prefix(4))…") } && logged.contains { $0.contains("/maps/join/\(invitation.prefix(4))…") })
        #expect(logged.contains { $0.contains("/reset-password/\(reset.prefix(4))…") })
    }
}
