import Foundation
import HTTPServer
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Shared maps over loopback against a real PostgreSQL (migration 0120): who may do what on a
/// map as a table checked route by route, invitations, the last owner, the caps, whose quota a pin
/// counts against, each member's region, the switcher, a member removed mid-visit, and an import.
@Suite struct SharedMapTests {
    // MARK: The permission matrix

    /// Who asks. `removed` was an editor (and had the map shown) until the owner removed them;
    /// `outsider` never joined, so their shown map cannot be the shared one: both act on their own
    /// map and are handed the shared map's URLs.
    enum Asker: String, CaseIterable, Sendable {
        case owner, editor, viewer, removed, outsider, signedOut
    }

    /// Every route that reads or changes a map's data (a map, pin, album, photo, export, import or
    /// share link) or manages a shared map, with the least role it needs: reads are `viewer`. A
    /// route in neither this table nor `notAboutAMap` fails the matrix, so a new route needs a line.
    static let minimumRole: [String: MapRole] = [
        // The map the session shows (no id in the URL).
        "GET /": .viewer,
        "GET /pins.json": .viewer,
        "GET /pins.geojson": .viewer,
        "GET /pins.gpx": .viewer,
        "GET /pins.kml": .viewer,
        "POST /pins": .editor,
        "GET /import": .editor,
        "POST /import": .editor,
        "GET /shares": .owner,
        "POST /shares": .owner,
        // A thing of the map, by id.
        "GET /pins/:id": .viewer,
        "GET /pins/:id/album.json": .viewer,
        "GET /pins/:id/album.html": .viewer,
        "GET /pins/:id/album.zip": .viewer,
        "GET /pins/:id/events": .viewer,
        "GET /map/events": .viewer,
        "GET /photos/:id": .viewer,
        "GET /photos/:id/view": .viewer,
        "DELETE /pins/:id": .editor,
        "POST /pins/:id/delete": .editor,
        "POST /pins/:id/rename": .editor,
        "POST /pins/:id/collection": .editor,
        "POST /pins/:id/retry": .editor,
        "GET /pins/:id/picker": .editor,
        "POST /pins/:id/picker": .editor,
        "GET /pins/:id/when": .editor,
        "GET /pins/:id/decades": .viewer,
        "GET /pins/:id/then-and-now": .viewer,
        // Own photos: every member sees them; editors and owners add them; who added one removes
        // it (the club's are added by the editor), owners remove any.
        "POST /pins/:id/own-photos": .editor,
        "POST /own-photos": .editor,
        "GET /own-photos/:id": .viewer,
        "GET /own-photos/:id/view": .viewer,
        "DELETE /own-photos/:id": .editor,
        "POST /own-photos/:id/delete": .editor,
        "DELETE /photos/:id": .editor,
        "POST /photos/:id/delete": .editor,
        "GET /import/:id": .editor,
        "POST /import/:id/confirm": .editor,
        "POST /import/:id/cancel": .editor,
        "GET /pins/:id/shares": .owner,
        "POST /pins/:id/shares": .owner,
        "POST /shares/:id/revoke": .owner,
        // The shared map itself.
        "GET /maps/:id": .viewer,
        "POST /maps/:id/leave": .viewer,
        "POST /maps/:id/rename": .owner,
        "POST /maps/:id/sharing": .owner,
        "POST /maps/:id/delete": .owner,
        "POST /maps/:id/members": .owner,
        "POST /maps/:id/invitations": .owner,
        "POST /maps/:id/invitations/withdraw": .owner,
        "POST /maps/:id/invitations/:invitation/withdraw": .owner,
        "POST /maps/:id/members/:member/role": .owner,
        "POST /maps/:id/members/:member/remove": .owner,
    ]

    /// Routes outside the matrix, and why.
    static let notAboutAMap: [String: String] = [
        "GET /sign-up": "accounts", "POST /sign-up": "accounts", "GET /sign-in": "accounts", "POST /sign-in": "accounts",
        "POST /sign-out": "accounts",
        "GET /forgot-password": "accounts", "POST /forgot-password": "accounts (MailTests)",
        "GET /reset-password/:token": "accounts (MailTests)", "POST /reset-password/:token": "accounts (MailTests)",
        "GET /healthz": "operations", "GET /readyz": "operations", "GET /metrics": "operations",
        "GET /places/search": "the place index, the same for everyone", "GET /places/nearest": "the place index",
        "GET /basemap/:level/:cell": "public basemap", "GET /tiles.json": "public tiles", "GET /tiles/:z/:x/:y": "public tiles",
        "GET /maps": "the person's own list of maps", "POST /maps": "makes a new map (caps: sharedMapCapsHold)",
        "POST /maps/switch": "switcher (theSwitcherRefusesAMapThePersonIsNotOn)",
        "GET /maps/join/:code": "bearer invitation code (invitationsAreSingleUseAndExpire)",
        "POST /maps/join/:code": "bearer invitation code (invitationsAreSingleUseAndExpire)",
        "POST /region": "the person's own view of the map (eachMemberKeepsTheirOwnRegionPerMap)",
        "POST /maps/invitations/:invitation/accept": "the person's own invitations by email (SharedMapConsentTests)",
        "POST /maps/invitations/:invitation/decline": "the person's own invitations by email (SharedMapConsentTests)",
    ]

    @Test func permissionMatrix() throws {
        let app = try TestApp()
        let club = try Club(app)
        let signedOut = app.browser()
        let anonymousToken = try #require(try signedOut.get("/sign-in").csrfToken)
        let browsers: [Asker: Browser] = [.owner: club.owner, .editor: club.editor, .viewer: club.viewer,
                                          .removed: club.removed, .outsider: club.outsider, .signedOut: signedOut]
        let tokens: [Asker: String] = try browsers.mapValues { $0 === signedOut ? anonymousToken : try club.csrf($0) }
        let roles: [Asker: MapRole] = [.owner: .owner, .editor: .editor, .viewer: .viewer]

        let keys = Array(Set(app.app.routes.map { "\($0.method) \($0.pattern)" })).sorted()
        var checked: [String] = []
        var cells = 0
        var table: [String] = []
        for key in keys {
            let pattern = String(key.split(separator: " ")[1])
            if Self.notAboutAMap[key] != nil || pattern.hasPrefix("/s/") { continue }
            guard let need = Self.minimumRole[key] else {
                Issue.record("\(key) is not in SharedMapTests.minimumRole: say which role it needs (or why it is not about a map)")
                continue
            }
            checked.append(key)
            var row: [String] = []
            for actor in Asker.allCases {
                cells += 1
                let browser = browsers[actor]!, token = tokens[actor]!
                let path = try club.path(for: key)
                let byID = pattern.contains(":")
                let mayDo: Bool? = roles[actor].map { $0 >= need }
                let refusalExpected = actor == .signedOut || mayDo == false || (byID && (actor == .removed || actor == .outsider))
                let before = refusalExpected ? try app.fingerprint() : ""
                let sharedBefore = try club.sharedDigest()
                let page = try club.send(browser, token: token, key: key, path: path)
                row.append("\(actor.rawValue)=\(page.status)")
                let what = "\(actor.rawValue): \(key) as \(path)"
                switch actor {
                case .signedOut:
                    let toSignIn = page.status == 303 && (page.header("Location") ?? "").hasPrefix("/sign-in")
                    #expect(page.status == 401 || toSignIn, "\(what): \(page.status) \(page.header("Location") ?? "")")
                case .removed, .outsider:
                    if byID {
                        #expect(page.status == 404, "\(what): \(page.status), not 404")
                    } else {
                        // Their own map: whatever it answers, nothing of the shared map in it or changed.
                        #expect(page.status < 400, "\(what) on their own map: \(page)")
                        #expect(!page.body.contains(Club.marker), "\(what): the shared map's pins in the answer")
                        #expect(try club.sharedDigest() == sharedBefore, "\(what) changed the shared map")
                    }
                default:
                    if mayDo == true {
                        #expect((200..<400).contains(page.status), "\(what): \(page)")
                        #expect(!(page.header("Location") ?? "").hasPrefix("/sign-in"), "\(what): sent to sign in")
                    } else {
                        #expect(page.status == 403, "\(what): \(page.status), not 403")
                    }
                }
                if refusalExpected {
                    #expect(try app.fingerprint() == before, "\(what): a refused request changed a row")
                }
            }
            table.append("\(key) [\(need.rawValue)]: " + row.joined(separator: " "))
        }
        for key in Self.minimumRole.keys where !keys.contains(key) {
            Issue.record("\(key) is in minimumRole but no longer a route")
        }
        #expect(cells == checked.count * Asker.allCases.count)
        #expect(checked.count == Self.minimumRole.count)
        print("SharedMapTests permission matrix: \(checked.count) routes × \(Asker.allCases.count) actors = \(cells) cells\n"
              + table.joined(separator: "\n"))
    }

    // MARK: Invitations, owners, members

    @Test func invitationsAreSingleUseAndExpire() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let bob = try app.signedUp(email: "bob@example.org", name: "Bob")
        let map = try Self.makeMap(owner, name: "Kyoto trip")
        let (annID, bobID) = (try RouteCoverageTests.personID(app: app, ann), try RouteCoverageTests.personID(app: app, bob))

        let code = try Self.invite(owner, map: map, role: "editor")
        // Looking at the invitation changes nothing; joining uses it up.
        let before = try app.fingerprint()
        let look = try ann.get("/maps/join/\(code)")
        #expect(look.status == 200 && look.body.contains("Kyoto trip"))
        #expect(try app.fingerprint() == before)
        let joined = try ann.post("/maps/join/\(code)", form: [("_csrf", try Self.csrf(ann))])
        #expect(joined.status == 303 && joined.header("Location") == "/")
        #expect(try Self.role(app, map: map, person: annID) == "editor")
        #expect(try app.count("SELECT count(*)::int FROM users WHERE id = $1 AND shown_map = $2", [annID, map]) == 1)
        // Single use: the next person gets 404 and is not in.
        #expect(try bob.get("/maps/join/\(code)").status == 404)
        #expect(try bob.post("/maps/join/\(code)", form: [("_csrf", try Self.csrf(bob))]).status == 404)
        #expect(try Self.role(app, map: map, person: bobID) == nil)

        // Expired: refused on both methods.
        let late = try Self.invite(owner, map: map, role: "viewer")
        try app.pool.query("UPDATE map_invitations SET expires_at = now() - interval '1 second' WHERE used_at IS NULL")
        #expect(try bob.get("/maps/join/\(late)").status == 404)
        #expect(try bob.post("/maps/join/\(late)", form: [("_csrf", try Self.csrf(bob))]).status == 404)
        #expect(try Self.role(app, map: map, person: bobID) == nil)

        // Withdrawn, unknown and malformed codes open nothing.
        let withdrawn = try Self.invite(owner, map: map, role: "viewer")
        #expect(try owner.post("/maps/\(map)/invitations/withdraw", form: [("_csrf", try Self.csrf(owner))]).status == 303)
        for dead in [withdrawn, Tokens.make(), "x"] {
            #expect(try bob.post("/maps/join/\(dead)", form: [("_csrf", try Self.csrf(bob))]).status == 404, "\(dead)")
        }
        #expect(try Self.role(app, map: map, person: bobID) == nil)

        // A live viewer invitation makes a viewer; an invitation never makes an owner.
        let fresh = try Self.invite(owner, map: map, role: "viewer")
        #expect(try bob.post("/maps/join/\(fresh)", form: [("_csrf", try Self.csrf(bob))]).status == 303)
        #expect(try Self.role(app, map: map, person: bobID) == "viewer")
        let asOwner = try owner.post("/maps/\(map)/invitations", form: [("_csrf", try Self.csrf(owner)), ("role", "owner")])
        #expect(asOwner.status == 303)
        #expect(try app.count("SELECT count(*)::int FROM map_invitations WHERE role NOT IN ('editor', 'viewer')") == 0)
    }

    @Test func theLastOwnerCannotLeaveOrDemoteThemselvesWhileOthersAreMembers() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let map = try Self.makeMap(owner, name: "Household")
        let ownerID = try RouteCoverageTests.personID(app: app, owner), annID = try RouteCoverageTests.personID(app: app, ann)
        let token = try Self.csrf(owner)
        #expect(try Self.add(owner, map: map, email: "ann@example.org", role: "editor", person: ann).status == 303)

        let before = try app.fingerprint()
        for (path, form) in [("/maps/\(map)/leave", [(String, String)]()),
                             ("/maps/\(map)/members/\(ownerID)/role", [("role", "editor")]),
                             ("/maps/\(map)/members/\(ownerID)/role", [("role", "viewer")]),
                             ("/maps/\(map)/members/\(ownerID)/remove", [])] {
            let page = try owner.post(path, form: [("_csrf", token)] + form)
            #expect(page.status == 303 && page.header("Location") == "/maps/\(map)", "\(path): \(page)")
            // The refusal is said on the page it goes back to.
            #expect(try owner.get("/maps/\(map)").body.contains("A map needs an owner"), "\(path)")
        }
        #expect(try app.fingerprint() == before, "the last owner's refused step changed a row")
        #expect(try Self.role(app, map: map, person: ownerID) == "owner")

        // With a second owner, the first may step down and then leave.
        #expect(try owner.post("/maps/\(map)/members/\(annID)/role", form: [("_csrf", token), ("role", "owner")]).status == 303)
        #expect(try owner.post("/maps/\(map)/members/\(ownerID)/role", form: [("_csrf", token), ("role", "viewer")]).status == 303)
        #expect(try Self.role(app, map: map, person: ownerID) == "viewer")
        #expect(try owner.post("/maps/\(map)/leave", form: [("_csrf", token)]).header("Location") == "/maps")
        #expect(try Self.role(app, map: map, person: ownerID) == nil)
        // The only member left cannot leave either: they delete the map instead.
        let left = try ann.post("/maps/\(map)/leave", form: [("_csrf", try Self.csrf(ann))])
        #expect(left.status == 303 && left.header("Location") == "/maps/\(map)")
        #expect(try Self.role(app, map: map, person: annID) == "owner")
        #expect(try ann.post("/maps/\(map)/delete", form: [("_csrf", try Self.csrf(ann)), ("confirm", "1")]).header("Location") == "/maps")
        #expect(try app.count("SELECT count(*)::int FROM users WHERE id = $1", [map]) == 0)
    }

    @Test func anOwnerRemovesAnyoneAndOthersRemoveNobodyButThemselves() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let people = try ["co", "ed", "vi"].map { try app.signedUp(email: "\($0)@example.org", name: $0) }
        let ids = try people.map { try RouteCoverageTests.personID(app: app, $0) }
        let map = try Self.makeMap(owner, name: "Club")
        for (person, (email, role)) in zip(people, [("co@example.org", "editor"), ("ed@example.org", "editor"), ("vi@example.org", "viewer")]) {
            #expect(try Self.add(owner, map: map, email: email, role: role, person: person).status == 303)
        }
        // An invitation makes no owner: the owner promotes a member.
        #expect(try owner.post("/maps/\(map)/members/\(ids[0])/role", form: [("_csrf", try Self.csrf(owner)), ("role", "owner")]).status == 303)
        let (editor, viewer) = (people[1], people[2])
        // Editors and viewers remove nobody else (403: they can see the map), and change no roles.
        for browser in [editor, viewer] {
            let before = try app.fingerprint()
            #expect(try browser.post("/maps/\(map)/members/\(ids[0])/remove", form: [("_csrf", try Self.csrf(browser))]).status == 403)
            #expect(try browser.post("/maps/\(map)/members/\(ids[2])/role", form: [("_csrf", try Self.csrf(browser)), ("role", "owner")]).status == 403)
            #expect(try app.fingerprint() == before)
        }
        // The viewer leaves by themselves.
        #expect(try viewer.post("/maps/\(map)/leave", form: [("_csrf", try Self.csrf(viewer))]).status == 303)
        #expect(try Self.role(app, map: map, person: ids[2]) == nil)
        // The owner removes an editor and another owner.
        let token = try Self.csrf(owner)
        for id in [ids[1], ids[0]] {
            #expect(try owner.post("/maps/\(map)/members/\(id)/remove", form: [("_csrf", token)]).status == 303)
            #expect(try Self.role(app, map: map, person: id) == nil)
        }
        // Removed: their next look at the map is a 404.
        #expect(try editor.get("/maps/\(map)").status == 404)
    }

    @Test func sharedMapCapsHold() throws {
        let app = try TestApp { $0.quotas.sharedMaps = 2; $0.quotas.membersPerMap = 3 }
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let people = try ["bob", "cai", "dee"].map { try app.signedUp(email: "\($0)@example.org", name: $0) }
        let first = try Self.makeMap(ann, name: "One"), second = try Self.makeMap(ann, name: "Two")
        // A third map is past QUOTA_SHARED_MAPS: said on the form, nothing made.
        let third = try ann.post("/maps", form: [("_csrf", try Self.csrf(ann)), ("name", "Three")])
        #expect(third.status == 422 && third.body.contains("the limit"))
        #expect(try app.count("SELECT count(*)::int FROM users WHERE kind = 'map'") == 2)

        // Three members at most (QUOTA_MAP_MEMBERS), by the members form and by invitation.
        #expect(try Self.add(ann, map: first, email: "bob@example.org", role: "viewer", person: people[0]).status == 303)
        #expect(try Self.add(ann, map: first, email: "cai@example.org", role: "viewer", person: people[1]).status == 303)
        let full = try Self.add(ann, map: first, email: "dee@example.org", role: "viewer", person: people[2])
        #expect(full.status == 303 && full.header("Location") == "/maps")
        #expect(try people[2].get("/maps").body.contains("This map has 3 members, the limit."))
        let dee = try RouteCoverageTests.personID(app: app, people[2])
        #expect(try Self.role(app, map: first, person: dee) == nil)
        let code = try Self.invite(ann, map: first, role: "viewer")
        #expect(try people[2].post("/maps/join/\(code)", form: [("_csrf", try Self.csrf(people[2]))]).status == 404)
        #expect(try Self.role(app, map: first, person: dee) == nil)
        #expect(try app.count("SELECT count(*)::int FROM map_invitations WHERE used_at IS NOT NULL AND invitee_email IS NULL") == 0,
                "a refused join used the code")

        // A person on two maps is added to no third.
        let bob = try RouteCoverageTests.personID(app: app, people[0])
        #expect(try Self.add(ann, map: second, email: "bob@example.org", role: "viewer", person: people[0]).status == 303)
        let other = try Self.makeMap(people[1], name: "Cai's")
        let refused = try Self.add(people[1], map: other, email: "bob@example.org", role: "viewer", person: people[0])
        #expect(refused.status == 303 && refused.header("Location") == "/maps")
        #expect(try people[0].get("/maps").body.contains("You belong to 2 shared maps, the limit."))
        #expect(try Self.role(app, map: other, person: bob) == nil)
    }

    @Test func pinsCountAgainstWhoDropsThemNotTheMap() throws {
        let app = try TestApp { $0.quotas.pins = 2 }
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let map = try Self.makeMap(owner, name: "Club")
        let annID = try RouteCoverageTests.personID(app: app, ann), ownerID = try RouteCoverageTests.personID(app: app, owner)
        #expect(try Self.add(owner, map: map, email: "ann@example.org", role: "editor", person: ann).status == 303)
        #expect(try Self.switchTo(ann, "\(map)").status == 303)

        #expect(try Self.drop(ann).status == 201)
        #expect(try Self.drop(ann).status == 201)
        #expect(try app.count("SELECT count(*)::int FROM pins WHERE user_id = $1 AND dropped_by = $2", [map, annID]) == 2)
        let third = try Self.drop(ann)
        #expect(third.status == 429 && third.body.contains("limit of 2 pins"), "\(third)")
        // The map holds 2 pins, which are Ann's: the owner still drops 2 of their own on it.
        #expect(try Self.drop(owner).status == 201)
        #expect(try Self.drop(owner).status == 201)
        #expect(try Self.drop(owner).status == 429)
        #expect(try app.count("SELECT count(*)::int FROM pins WHERE user_id = $1", [map]) == 4)
        // The quota is the person's on every map: Ann's own map has no room either.
        #expect(try Self.switchTo(ann, "own").status == 303)
        #expect(try Self.drop(ann).status == 429)
        #expect(try app.count("SELECT count(*)::int FROM pins WHERE user_id IN ($1, $2)", [annID, ownerID]) == 0)
        // Deleting one of hers on the shared map makes room on her own.
        let hers: Int64 = try app.pool.query("SELECT min(id) AS id FROM pins WHERE dropped_by = $1", [annID])[0].decode("id")
        #expect(try Self.switchTo(ann, "\(map)").status == 303)
        #expect(try ann.request("DELETE", "/pins/\(hers)", headers: [("X-CSRF-Token", try Self.csrf(ann))]).status == 204)
        #expect(try Self.switchTo(ann, "own").status == 303)
        #expect(try Self.drop(ann).status == 201)
    }

    @Test func eachMemberKeepsTheirOwnRegionPerMap() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ann = try app.signedUp(email: "ann@example.org", name: "Ann")
        let map = try Self.makeMap(owner, name: "Club")
        let annID = try RouteCoverageTests.personID(app: app, ann)
        #expect(try Self.add(owner, map: map, email: "ann@example.org", role: "viewer", person: ann).status == 303)
        #expect(try Self.switchTo(ann, "own").status == 303)  // accepting showed her the map

        // On her own map, then on the shared one (a viewer may keep her view: it is hers).
        #expect(try Self.region(ann, lat: 30, lon: 40, zoom: 3).status == 204)
        #expect(try Self.switchTo(ann, "\(map)").status == 303)
        #expect(try Self.shownRegion(ann) != [30, 40, 3], "the shared map opened at her own map's view")
        #expect(try Self.region(ann, lat: 10, lon: 20, zoom: 5).status == 204)
        #expect(try Self.shownRegion(ann) == [10, 20, 5])
        #expect(try app.count("SELECT count(*)::int FROM map_members WHERE map_id = $1 AND user_id = $2 AND center_lat = 10 AND zoom = 5",
                              [map, annID]) == 1)
        // The owner's view of the same map is their own.
        #expect(try Self.shownRegion(owner) != [10, 20, 5])
        #expect(try Self.region(owner, lat: -10, lon: -20, zoom: 7).status == 204)
        #expect(try Self.shownRegion(owner) == [-10, -20, 7])
        #expect(try Self.shownRegion(ann) == [10, 20, 5])
        // Back on her own map: her own map's view, untouched by the shared one.
        #expect(try Self.switchTo(ann, "own").status == 303)
        #expect(try Self.shownRegion(ann) == [30, 40, 3])
        #expect(try Self.switchTo(ann, "\(map)").status == 303)
        #expect(try Self.shownRegion(ann) == [10, 20, 5])
    }

    @Test func theSwitcherRefusesAMapThePersonIsNotOn() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ida = try app.signedUp(email: "ida@example.org", name: "Ida")
        let map = try Self.makeMap(owner, name: "Private club")
        let idaID = try RouteCoverageTests.personID(app: app, ida)
        let before = try app.fingerprint()
        for value in ["\(map)", "0", "-1", "x", "", "99999999"] {
            #expect(try Self.switchTo(ida, value).status == 404, "map=\(value)")
        }
        #expect(try app.fingerprint() == before)
        #expect(try app.count("SELECT count(*)::int FROM users WHERE id = $1 AND shown_map IS NULL", [idaID]) == 1)
        let home = try ida.get("/").body
        // On no shared map: their own map, the header's link to /maps in place of the switcher.
        #expect(home.contains("Your pins") && home.contains("class=\"maps-link\">Shared maps</a>") && !home.contains("Private club"))
        // A member switches both ways.
        #expect(try Self.switchTo(owner, "own").status == 303)
        #expect(try owner.get("/").body.contains("<option value=\"own\" selected>My map</option>"))
        #expect(try Self.switchTo(owner, "\(map)").status == 303)
        #expect(try owner.get("/").body.contains("<option value=\"\(map)\" selected>Private club</option>"))
    }

    // MARK: A member removed mid-visit

    /// The editor has the shared map open and has loaded a photo (held in PhotoAccess, answered
    /// with no round trip); the owner removes them. Their very next requests answer as for their
    /// own map: the trigger map_members_gone NOTIFYs photo_access with their sessions, so the
    /// cached grant goes at once, not after PhotoAccess's lifetime.
    @Test(.tags(.slow)) func aMemberRemovedMidVisitLosesTheMapAtTheirNextRequest() throws {
        let app = try TestApp(workers: true) { $0.serverTiming = true }
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let map = try Self.makeMap(owner, name: "Club", member: ed, email: "ed@example.org")
        let edID = try RouteCoverageTests.personID(app: app, ed)
        let pin = try AlbumTests.dropPin(ed)
        let album = try AlbumTests.settled(ed, pin: pin)
        #expect(album.status == "ready")
        let photo = try #require(album.photos.first { $0["status"] as? String == "ready" }?["id"] as? Int)

        #expect(try ed.get("/pins/\(pin)").status == 200)
        #expect(try ed.get("/photos/\(photo)?w=256").status == 200)
        let cached = try ed.get("/photos/\(photo)?w=256")
        #expect(cached.status == 200 && cached.roundTrips == 0, "the photo is not answered from PhotoAccess: \(cached.status) \(String(describing: cached.roundTrips))")
        #expect(try ed.get("/pins.json").body.contains("\"id\":\(pin)"))

        let removed = try owner.post("/maps/\(map)/members/\(edID)/remove", form: [("_csrf", try Self.csrf(owner))])
        #expect(removed.status == 303)
        let start = Date()
        // The photo first, the request the cache would answer: refused within a second (the
        // NOTIFY), far inside PhotoAccess's 10 s lifetime.
        var first = try ed.get("/photos/\(photo)?w=256").status
        let firstWasRefused = first == 404
        while first == 200, Date().timeIntervalSince(start) < 15 {
            usleep(20_000)
            first = try ed.get("/photos/\(photo)?w=256").status
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(first == 404)
        #expect(elapsed < 1, "the photo was served \(elapsed) s after the removal (PhotoAccess lifetime \(app.app.photoAccess.lifetime))")
        print("SharedMapTests: removed member's cached photo refused \(firstWasRefused ? "at the first request" : "after \(elapsed) s")")

        let pins = try ed.get("/pins.json")
        #expect(pins.status == 200 && !pins.body.contains("\"id\":\(pin)"))
        #expect(try ed.get("/pins/\(pin)").status == 404)
        #expect(try ed.get("/photos/\(photo)").status == 404)
        #expect(try ed.get("/photos/\(photo)/view").status == 404)
        let home = try ed.get("/")
        #expect(home.status == 200 && home.body.contains("Your pins") && home.body.contains("class=\"maps-link\">Shared maps</a>"))
        #expect(!home.body.contains(">Club</option>"))
        // Still the map's for the owner.
        #expect(try owner.get("/photos/\(photo)?w=256").status == 200)
    }

    /// An album page left open: its event stream carries the album's fragment on every change.
    /// Once its member is removed it carries no more of the album (it ends at the next change).
    @Test(.tags(.slow)) func aRemovedMembersOpenAlbumStreamGetsNoMoreOfTheAlbum() throws {
        let app = try TestApp(workers: true)
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let map = try Self.makeMap(owner, name: "Club", member: ed, email: "ed@example.org")
        let edID = try RouteCoverageTests.personID(app: app, ed)
        let pin = try AlbumTests.dropPin(ed)
        _ = try AlbumTests.settled(ed, pin: pin)
        let cookie = ed.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let client = try RawStream(port: app.port, request: "GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n")
        defer { client.close() }
        let open = client.read(until: { $0.contains("</ul>\n\n") }, timeout: 10)
        #expect(open.contains("event: change\ndata: <div id=\"album-status\""), "\(open.prefix(300))")

        #expect(try owner.post("/maps/\(map)/members/\(edID)/remove", form: [("_csrf", try Self.csrf(owner))]).status == 303)
        // The owner takes a New Collection: the album changes, photo by photo.
        #expect(try owner.post("/pins/\(pin)/collection", form: [("_csrf", try Self.csrf(owner))]).status == 303)
        let after = client.read(until: { $0.contains("photo-grid") }, timeout: 5)
        #expect(!after.contains("photo-grid"), "the removed member's open stream still carries the album: \(after.prefix(300))")
        // The stream ended (the catch-up above passed the same membership check while Ed was in).
        #expect(eventually(timeout: 5) { app.app.events.watcherCount == 0 })
        _ = try AlbumTests.settled(owner, pin: pin)
    }

    // MARK: Import

    @Test func aKMZImportedByAnEditorLandsOnTheSharedMapAsTheirs() throws {
        let app = try TestApp { $0.quotas.pins = 3 }
        let owner = try app.signedUp(email: "olga@example.org", name: "Olga")
        let ed = try app.signedUp(email: "ed@example.org", name: "Ed")
        let vi = try app.signedUp(email: "vi@example.org", name: "Vi")
        let map = try Self.makeMap(owner, name: "Club")
        let edID = try RouteCoverageTests.personID(app: app, ed)
        #expect(try Self.add(owner, map: map, email: "ed@example.org", role: "editor", person: ed).status == 303)
        #expect(try Self.add(owner, map: map, email: "vi@example.org", role: "viewer", person: vi).status == 303)
        #expect(try Self.switchTo(ed, "\(map)").status == 303)
        #expect(try Self.switchTo(vi, "\(map)").status == 303)
        // The map holds as many pins as one person may drop, all the owner's: Ed still has room.
        try app.pool.query("INSERT INTO pins (user_id, lat, lon, dropped_by) SELECT $1, n, n, $2 FROM generate_series(1, 3) n",
                           [map, try RouteCoverageTests.personID(app: app, owner)])
        #expect(try ed.get("/import").body.contains("You have 0 of 3 pins"))
        let kmz = KMZImportTests.TestZip.archive([KMZImportTests.TestZip.deflated("doc.kml", KMZImportTests.kml)])

        // A viewer may not import.
        let before = try app.fingerprint()
        #expect(try ImportTests.upload(vi, kmz, filename: "trip.kmz", token: try Self.csrf(vi)).status == 403)
        #expect(try app.fingerprint() == before)

        let uploaded = try ImportTests.upload(ed, kmz, filename: "trip.kmz")
        #expect(uploaded.status == 303)
        let preview = try #require(uploaded.header("Location"))
        #expect(try ed.get(preview).status == 200)
        #expect(try app.count("SELECT count(*)::int FROM pin_imports WHERE user_id = $1", [map]) == 1)
        let confirmed = try ed.post(preview + "/confirm", form: [("_csrf", try Self.csrf(ed))])
        #expect(confirmed.status == 303 && confirmed.header("Location") == "/")
        let rows = try app.pool.query("SELECT place_name, user_id, dropped_by FROM pins WHERE place_name IS NOT NULL ORDER BY place_name")
        #expect(try rows.map { try $0.decode("place_name", as: String.self) } == ["Fushimi Inari", "Kyoto Station"])
        #expect(try rows.allSatisfy { try $0.decode("user_id", as: Int64.self) == map && $0.decode("dropped_by", as: Int64.self) == edID })
        // Every member sees them on the map; Ed's own map has none.
        #expect(try owner.get("/pins.json").body.contains("Kyoto Station"))
        #expect(try vi.get("/pins.json").body.contains("Fushimi Inari"))
        #expect(try Self.switchTo(ed, "own").status == 303)
        #expect(!(try ed.get("/pins.json").body.contains("Kyoto Station")))
    }

    // MARK: Helpers

    static func csrf(_ browser: Browser) throws -> String {
        try #require(try browser.get("/maps").csrfToken)
    }

    /// A new shared map of `owner`'s (shown to them), by its form.
    static func makeMap(_ owner: Browser, name: String) throws -> Int64 {
        let page = try owner.post("/maps", form: [("_csrf", try csrf(owner)), ("name", name)])
        guard page.status == 303, let location = page.header("Location"), let id = Int64(location.dropFirst("/maps/".count)) else {
            throw Browser.Failure(description: "making a map: \(page)")
        }
        return id
    }

    /// "Add by email": an invitation for the address (the answer never says whether it has an account).
    static func inviteByEmail(_ owner: Browser, map: Int64, email: String, role: String) throws -> Browser.Page {
        try owner.post("/maps/\(map)/members", form: [("_csrf", try csrf(owner)), ("email", email), ("role", role)])
    }

    /// The invitation by email to `map` on `person`'s Maps page, if one is shown.
    static func invitationID(_ person: Browser, map: Int64) throws -> Int64? {
        let body = try person.get("/maps").body
        return body.firstMatch(of: try! Regex("data-invitation=\"([0-9]+)\" data-map=\"\(map)\"")).flatMap { Int64($0.output[1].substring ?? "") }
    }

    /// `person` (with `email`) made a member as people do it: the owner invites by email, the person
    /// accepts on their Maps page. The answer to the acceptance (303 to the map when joined; back to
    /// /maps with the refusal's sentence otherwise), or the invitation's when none reached them.
    static func add(_ owner: Browser, map: Int64, email: String, role: String, person: Browser) throws -> Browser.Page {
        let invited = try inviteByEmail(owner, map: map, email: email, role: role)
        guard invited.status == 303, let id = try invitationID(person, map: map) else { return invited }
        return try person.post("/maps/invitations/\(id)/accept", form: [("_csrf", try csrf(person))])
    }

    /// An invitation link's code, from the page that shows it once.
    static func invite(_ owner: Browser, map: Int64, role: String) throws -> String {
        let page = try owner.post("/maps/\(map)/invitations", form: [("_csrf", try csrf(owner)), ("role", role)])
        guard page.status == 201, let match = page.body.firstMatch(of: /\/maps\/join\/([A-Za-z0-9_-]+)/) else {
            throw Browser.Failure(description: "inviting: \(page)")
        }
        return String(match.1)
    }

    static func switchTo(_ browser: Browser, _ value: String) throws -> Browser.Page {
        try browser.post("/maps/switch", form: [("_csrf", try csrf(browser)), ("map", value)])
    }

    /// `owner`'s new map `name` with `member` (by `email`) added as `role` and shown the map (an
    /// owner: invited as an editor, then given the role).
    static func makeMap(_ owner: Browser, name: String, member: Browser, email: String, role: String = "editor") throws -> Int64 {
        let map = try makeMap(owner, name: name)
        let added = try add(owner, map: map, email: email, role: role == "owner" ? "editor" : role, person: member)
        guard added.status == 303 else { throw Browser.Failure(description: "adding \(email): \(added)") }
        if role == "owner" {
            let page = try owner.get("/maps/\(map)").body
            guard let row = page.split(separator: "<li class=\"member\">").first(where: { $0.contains(email) }),
                  let match = row.firstMatch(of: /\/members\/([0-9]+)\/role/) else { throw Browser.Failure(description: "no member row for \(email)") }
            let promoted = try owner.post("/maps/\(map)/members/\(match.1)/role", form: [("_csrf", try csrf(owner)), ("role", "owner")])
            guard promoted.status == 303 else { throw Browser.Failure(description: "promoting \(email): \(promoted)") }
        }
        let shown = try switchTo(member, "\(map)")
        guard shown.status == 303 else { throw Browser.Failure(description: "showing the map to \(email): \(shown)") }
        return map
    }

    static func role(_ app: TestApp, map: Int64, person: Int64) throws -> String? {
        try app.pool.query("SELECT role FROM map_members WHERE map_id = $1 AND user_id = $2", [map, person]).first?.decode("role")
    }

    static func drop(_ browser: Browser, lat: Double = 35, lon: Double = 135) throws -> Browser.Page {
        try browser.post("/pins", form: [("_csrf", try csrf(browser)), ("lat", String(lat)), ("lon", String(lon))],
                         headers: [("Accept", "application/json")])
    }

    static func region(_ browser: Browser, lat: Double, lon: Double, zoom: Double) throws -> Browser.Page {
        try browser.post("/region", form: [("_csrf", try csrf(browser)), ("lat", String(lat)), ("lon", String(lon)), ("zoom", String(zoom))])
    }

    /// The region the map page opens at: [lat, lon, zoom].
    static func shownRegion(_ browser: Browser) throws -> [Double] {
        let body = try browser.get("/").body
        return ["lat", "lon", "zoom"].map { name in
            body.firstMatch(of: try! Regex("data-\(name)=\"([^\"]*)\"")).flatMap { Double($0.output[1].substring ?? "") } ?? .nan
        }
    }

    /// A shared map with one person of each kind, and fresh resources of the map for the matrix.
    final class Club {
        static let marker = "Sharedmarker Atoll"
        let app: TestApp
        let owner, editor, viewer, removed, outsider: Browser
        let map: Int64
        let ownerID: Int64
        private var getPin: Int64 = 0, getPhoto: Int64 = 0, getOwnPhoto: Int64 = 0
        private var sent = 0
        private var extra = 0
        /// The person the next POST /maps/:id/members adds.
        private var candidate = ""

        init(_ app: TestApp) throws {
            let owner = try app.signedUp(email: "owner@example.org", name: "Olga Owner")
            let editor = try app.signedUp(email: "editor@example.org", name: "Ed Editor")
            let viewer = try app.signedUp(email: "viewer@example.org", name: "Vi Viewer")
            let removed = try app.signedUp(email: "removed@example.org", name: "Rem Removed")
            let outsider = try app.signedUp(email: "outsider@example.org", name: "Ida Outsider")
            let map = try SharedMapTests.makeMap(owner, name: "Club map")
            for (person, email, role) in [(editor, "editor@example.org", "editor"), (viewer, "viewer@example.org", "viewer"),
                                          (removed, "removed@example.org", "editor")] {
                let added = try SharedMapTests.add(owner, map: map, email: email, role: role, person: person)
                guard added.status == 303 else { throw Browser.Failure(description: "adding \(email): \(added)") }
            }
            for member in [editor, viewer, removed] {
                guard try SharedMapTests.switchTo(member, "\(map)").status == 303 else { throw Browser.Failure(description: "switching") }
            }
            let removedID = try RouteCoverageTests.personID(app: app, removed)
            let gone = try owner.post("/maps/\(map)/members/\(removedID)/remove", form: [("_csrf", try SharedMapTests.csrf(owner))])
            guard gone.status == 303 else { throw Browser.Failure(description: "removing: \(gone)") }
            // The removed member's shown map still names the map; the outsider cannot make theirs.
            guard try app.count("SELECT count(*)::int FROM users WHERE id = $1 AND shown_map = $2", [removedID, map]) == 1,
                  try SharedMapTests.switchTo(outsider, "\(map)").status == 404 else {
                throw Browser.Failure(description: "the removed member's or the outsider's shown map")
            }
            self.app = app
            (self.owner, self.editor, self.viewer, self.removed, self.outsider, self.map) = (owner, editor, viewer, removed, outsider, map)
            ownerID = try RouteCoverageTests.personID(app: app, owner)
            getPin = try newPin()
            getPhoto = try newPhoto()
            getOwnPhoto = try newOwnPhoto()
        }

        func csrf(_ browser: Browser) throws -> String { try SharedMapTests.csrf(browser) }

        /// A pin on the shared map, dropped by the owner (who has it shown), named with the marker.
        func newPin() throws -> Int64 {
            let page = try SharedMapTests.drop(owner, lat: 10, lon: 20)
            let id = try #require((try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any])?["id"] as? Int)
            try app.pool.query("UPDATE pins SET place_name = $2 WHERE id = $1 AND user_id = $3", [Int64(id), Self.marker, map])
            return Int64(id)
        }

        /// A photo of the editor's own on a new pin of the map (the editor may remove it, as may the owner).
        func newOwnPhoto() throws -> Int64 {
            try RouteCoverageTests.ownPhoto(app, onPin: try newPin(), addedBy: try RouteCoverageTests.personID(app: app, editor))
        }

        /// A ready photo with bytes on a new pin of the map.
        func newPhoto() throws -> Int64 {
            try RouteCoverageTests.readyPhoto(app, onPin: Int64(try newPin()))
        }

        func newShareLink() throws -> Int64 {
            try #require(try ShareLinks(pool: app.pool).create(.init(pinID: try newPin()), userID: map, madeBy: ownerID)?.link.id)
        }

        func newImport() throws -> Int64 {
            try app.pool.query("""
                INSERT INTO pin_imports (user_id, file_name, format, contents, expires_at)
                VALUES ($1, 'a.kml', 'KML', '{"format":"KML","points":[{"lat":1,"lon":2}],"refused":[],"notes":[]}', now() + interval '1 hour')
                RETURNING id
                """, [map])[0].decode("id")
        }

        /// An open invitation to the map, made by its owner (its id), for the withdraw route.
        func newInvitation() throws -> Int64 {
            try app.pool.query("""
                INSERT INTO map_invitations (map_id, code_hash, role, created_by, expires_at)
                VALUES ($1, sha256(convert_to($2, 'UTF8')), 'viewer', $3, now() + interval '1 day') RETURNING id
                """, [map, Tokens.make(), ownerID])[0].decode("id")
        }

        /// A person with an account (made in SQL: no sign-up needed), for the member routes.
        func newPerson() throws -> (id: Int64, email: String) {
            extra += 1
            let email = "extra-\(extra)@example.org"
            let id: Int64 = try app.pool.query("INSERT INTO users (email, display_name, password_hash) VALUES ($1, 'Extra', '!') RETURNING id",
                                               [email])[0].decode("id")
            return (id, email)
        }

        /// Another map with the same members (the removed one removed), for the routes that end one.
        func newMap() throws -> Int64 {
            let id: Int64 = try app.pool.query("INSERT INTO users (kind, display_name, password_hash) VALUES ('map', 'Spare', '!') RETURNING id")[0].decode("id")
            for (browser, role) in [(owner, "owner"), (editor, "editor"), (viewer, "viewer"), (removed, "editor")] {
                try app.pool.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, $3)",
                                   [id, try RouteCoverageTests.personID(app: app, browser), role])
            }
            try app.pool.query("DELETE FROM map_members WHERE map_id = $1 AND user_id = $2", [id, try RouteCoverageTests.personID(app: app, removed)])
            return id
        }

        /// The URL of one of the map's things for a route pattern: fresh where the route may end
        /// or change it, shared for reads.
        func path(for key: String) throws -> String {
            let pattern = String(key.split(separator: " ")[1])
            var parameters: [String: String] = [:]
            // Anything but a GET may end or change the thing: each such request gets its own.
            let fresh = !key.hasPrefix("GET ")
            if pattern.hasPrefix("/pins/:id") {
                parameters["id"] = "\(fresh ? try newPin() : getPin)"
            } else if pattern.hasPrefix("/photos/:id") {
                parameters["id"] = "\(fresh ? try newPhoto() : getPhoto)"
            } else if key == "POST /own-photos" {
                // Dropped at the club's pins (10, 20): it joins one, whoever's map it is.
                return "/own-photos?lat=10&lon=20"
            } else if pattern.hasPrefix("/own-photos/:id") {
                parameters["id"] = "\(fresh ? try newOwnPhoto() : getOwnPhoto)"
            } else if pattern.hasPrefix("/shares/:id") {
                parameters["id"] = "\(try newShareLink())"
            } else if pattern.hasPrefix("/import/:id") {
                parameters["id"] = "\(try newImport())"
            } else if pattern.hasPrefix("/maps/:id") {
                // Made before the request (and its fingerprint), asked for by send.
                if key == "POST /maps/:id/members" { candidate = try newPerson().email }
                parameters["id"] = "\(pattern.hasSuffix("/delete") || pattern.hasSuffix("/leave") ? try newMap() : map)"
                if pattern.contains(":invitation") {
                    parameters["invitation"] = "\(try newInvitation())"
                }
                if pattern.contains(":member") {
                    let person = try newPerson()
                    try app.pool.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, 'viewer')", [map, person.id])
                    parameters["member"] = "\(person.id)"
                }
            }
            return RouteCoverageTests.path(for: pattern, parameters: parameters)
        }

        /// The route asked as its page would ask it (the form it needs to pass its own checks).
        func send(_ browser: Browser, token: String, key: String, path: String) throws -> Browser.Page {
            let method = String(key.split(separator: " ")[0])
            if RouteCoverageTests.streamingRoutes.contains(key) { return try browser.request("HEAD", path) }
            if method == "GET" { return try browser.get(path) }
            if key == "POST /import" {
                let geojson = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"Imported"},"geometry":{"type":"Point","coordinates":[20,10]}}]}"#
                return try browser.request("POST", path, body: ImportTests.multipart(Array(geojson.utf8), filename: "a.geojson", token: token),
                                           headers: [("Content-Type", "multipart/form-data; boundary=----VirtualTouristTest7MA4YWxkTrZu0gW"),
                                                     ("X-CSRF-Token", token)])
            }
            var form: [(String, String)] = [("_csrf", token)]
            var headers: [(String, String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("X-CSRF-Token", token)]
            switch key {
            case "POST /pins/:id/own-photos", "POST /own-photos":
                // As own-photos.js sends a file: a new one each time (the same file twice is one photo).
                sent += 1
                let jpeg = try ExifTool.writing(["-Comment=matrix \(sent)"], to: Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg"))))
                return try browser.request(method, path, body: jpeg, headers: [("X-CSRF-Token", token), ("Accept", "application/json"),
                                                                                ("Content-Type", "image/jpeg"), ("X-File-Name", "coins.jpg")])
            case "POST /pins":
                form += [("lat", "10"), ("lon", "20")]
                headers.append(("Accept", "application/json"))
            case "POST /maps/:id/rename": form.append(("name", "Club map"))
            case "POST /pins/:id/rename": form.append(("name", "Renamed place"))
            // Unticked: the owner keeps share links to owners, so the editor's 403s below still hold.
            case "POST /maps/:id/sharing": break
            case "POST /maps/:id/delete": form.append(("confirm", "1"))
            case "POST /maps/:id/members": form += [("email", candidate), ("role", "viewer")]
            case "POST /maps/:id/invitations": form.append(("role", "viewer"))
            case "POST /maps/:id/members/:member/role": form.append(("role", "editor"))
            default: break
            }
            return try browser.request(method, path, body: Array(RouteCoverageTests.encode(form).utf8), headers: headers)
        }

        /// Every row of the shared map's (its data, members, invitations, its own row), as one digest.
        func sharedDigest() throws -> String {
            try app.pool.query("""
                SELECT md5(concat_ws('|',
                    (SELECT string_agg(p::text, ',' ORDER BY p::text) FROM pins p WHERE p.user_id = $1),
                    (SELECT string_agg(ph.id || ':' || ph.status, ',' ORDER BY ph.id) FROM photos ph WHERE ph.user_id = $1),
                    (SELECT string_agg(s::text, ',' ORDER BY s::text) FROM share_links s WHERE s.user_id = $1),
                    (SELECT string_agg(i::text, ',' ORDER BY i::text) FROM pin_imports i WHERE i.user_id = $1),
                    (SELECT string_agg(j::text, ',' ORDER BY j::text) FROM album_jobs j WHERE j.user_id = $1),
                    (SELECT string_agg(m::text, ',' ORDER BY m::text) FROM map_members m WHERE m.map_id = $1),
                    (SELECT string_agg(v::text, ',' ORDER BY v::text) FROM map_invitations v WHERE v.map_id = $1),
                    (SELECT u::text FROM users u WHERE u.id = $1))) AS d
                """, [map])[0].decode("d")
        }
    }
}
