import Foundation
import HTTPServer
import Testing
import PhotoFixture
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Tests that enumerate the app's routes, so a route added later is covered without anyone
/// remembering to add it here.
@Suite struct RouteCoverageTests {
    /// A concrete path for a route pattern (parameters filled with a plausible id).
    static func path(for pattern: String, parameters: [String: String] = [:]) -> String {
        "/" + pattern.split(separator: "/").map { segment -> String in
            if segment.hasPrefix(":") || segment.hasPrefix("*") { return parameters[String(segment.dropFirst())] ?? "1" }
            return String(segment)
        }.joined(separator: "/")
    }

    @Test func everyStateChangingRouteRefusesAMissingOrWrongCSRFToken() throws {
        let app = try TestApp()
        let unsafeRoutes = app.app.routes.filter { WebPipeline.stateChanging.contains($0.method) }
        #expect(unsafeRoutes.count >= 3)  // sign-up, sign-in, sign-out at least
        let signedIn = try app.signedUp(email: "csrf@example.org")
        let anonymous = app.browser()
        _ = try anonymous.get("/sign-in")  // has a visitor CSRF cookie
        let before = try app.fingerprint()
        for route in unsafeRoutes {
            let path = Self.path(for: route.pattern)
            for browser in [signedIn, anonymous] {
                let form = [("email", "csrf@example.org"), ("password", "correct horse battery"),
                            ("display_name", "X"), ("password_confirmation", "correct horse battery")]
                let missing = try browser.request(route.method, path, body: Array(Self.encode(form).utf8),
                                                  headers: [("Content-Type", "application/x-www-form-urlencoded")])
                #expect(missing.status == 403, "\(route.method) \(route.pattern) without a token: \(missing.status)")
                let wrong = try browser.request(route.method, path, body: Array(Self.encode(form + [("_csrf", "A" + String(repeating: "b", count: 42))]).utf8),
                                                headers: [("Content-Type", "application/x-www-form-urlencoded")])
                #expect(wrong.status == 403, "\(route.method) \(route.pattern) with a wrong token: \(wrong.status)")
                let header = try browser.request(route.method, path, headers: [("X-CSRF-Token", "not-the-token")])
                #expect(header.status == 403, "\(route.method) \(route.pattern) with a wrong header: \(header.status)")
            }
        }
        #expect(try app.fingerprint() == before, "a refused request changed a row")
        // The same requests with the right token do get through (so the 403s above mean something).
        let token = try #require(try signedIn.get("/").csrfToken)
        let out = try signedIn.post("/sign-out", form: [("_csrf", token)])
        #expect(out.status == 303)
        // A signed-in person's token is not accepted from another session.
        let other = try app.signedUp(email: "other@example.org")
        let stolen = try other.post("/sign-out", form: [("_csrf", token)])
        #expect(stolen.status == 403)
    }

    /// Person B asks for each of person A's resource URLs and gets 404: not 403, which would tell
    /// B the resource exists. Every route with a parameter must be listed in `resourcePaths`, so
    /// adding a route without an isolation check fails this test.
    @Test func anotherPersonsResourcesAre404() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "owner@example.org", name: "Owen Owner")
        let intruder = try app.signedUp(email: "intruder@example.org", name: "Ida Intruder")
        let resources = try Self.resourcePaths(app: app, owner: owner)
        let parameterized = app.app.routes.filter {
            ($0.pattern.contains(":") || $0.pattern.contains("*")) && !Self.publicRoutes.contains("\($0.method) \($0.pattern)")
                // Share links (/s/TOKEN/…) open what the token opens, to anyone who has it, and
                // nothing without it: ShareLinkTests tries wrong, guessed, revoked and expired tokens.
                && !$0.pattern.hasPrefix("/s/")
                // Invitation links (/maps/join/CODE) are the same: the code is a bearer token that
                // makes whoever holds it a member, so a non-member with a live code rightly joins
                // and nobody without one reaches anything. SharedMapTests tries used, expired,
                // withdrawn and unknown codes.
                && !$0.pattern.hasPrefix("/maps/join/")
        }
        for route in parameterized {
            let key = "\(route.method) \(route.pattern)"
            guard let path = resources[key] else {
                Issue.record("\(key) has no entry in resourcePaths: say which of the owner's resources it reaches")
                continue
            }
            let token = try intruder.get("/").csrfToken ?? ""
            let before = try app.fingerprint()
            let method = Self.streamingRoutes.contains(key) ? "HEAD" : route.method
            let status = try Self.send(intruder, method, path, form: Self.resourceForms[key], token: token).status
            #expect(status == 404, "\(route.method) \(path) as another person: \(status)")
            #expect(try app.fingerprint() == before)
        }
        // Accepting an invitation shows its map to the owner: last, so it changes no other route's map.
        for route in parameterized.sorted(by: { !$0.pattern.hasPrefix("/maps/invitations/") && $1.pattern.hasPrefix("/maps/invitations/") }) {
            let key = "\(route.method) \(route.pattern)"
            guard let path = resources[key] else { continue }
            let ownerStatus = try Self.send(owner, Self.streamingRoutes.contains(key) ? "HEAD" : route.method, path,
                                            form: Self.resourceForms[key], token: try owner.get("/").csrfToken ?? "").status
            #expect(ownerStatus < 400, "\(key): the owner gets \(ownerStatus), so the 404 above proves nothing")
        }
        // The home page of each shows their own name only.
        // (The header shows the name, with the name as its title; it showed the email before.)
        let home = try intruder.get("/").body
        #expect(home.contains("Ida Intruder"))
        #expect(!home.contains("Owen Owner") && !home.contains("owner@example.org"))
    }

    /// For each parameterized route: a URL of one of `owner`'s resources (created here).
    static func resourcePaths(app: TestApp, owner: Browser) throws -> [String: String] {
        let token = try owner.get("/").csrfToken ?? ""
        func newPin() throws -> Int {
            let page = try owner.post("/pins", form: [("_csrf", token), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
            return (try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any])?["id"] as? Int ?? 0
        }
        // A ready photo of the owner's, with bytes.
        func newPhoto() throws -> Int64 { try readyPhoto(app, onPin: Int64(try newPin())) }
        // A share link of the owner's (its id; the token is not needed to revoke it).
        func newShareLink() throws -> Int64 {
            let pin = Int64(try newPin())
            let user: Int64 = try app.pool.query("SELECT user_id FROM pins WHERE id = $1", [pin])[0].decode("user_id")
            return try ShareLinks(pool: app.pool).create(.init(pinID: pin), userID: user, madeBy: user)?.link.id ?? 0
        }
        // A pending import of the owner's (each upload replaces the last, so these are made in SQL).
        func newImport() throws -> Int64 {
            try app.pool.query("""
                INSERT INTO pin_imports (user_id, file_name, format, contents, expires_at)
                SELECT user_id, 'a.kml', 'KML', '{"format":"KML","points":[{"lat":1,"lon":2}],"refused":[],"notes":[]}', now() + interval '1 hour'
                FROM pins WHERE id = $1 RETURNING id
                """, [try newPin()])[0].decode("id")
        }
        // A shared map the owner owns (not shown to them, so the pins above and below stay on their
        // own map), with a second member for the remove route; fresh where the route ends it.
        let maps = SharedMaps(pool: app.pool, quotas: Quotas())
        let ownerID = try Self.personID(app: app, owner)
        let member = try Self.personID(app: app, try app.signedUp(email: "member-\(UUID().uuidString.prefix(6))@example.org"))
        func newMap() throws -> Int64 {
            let id = try maps.create(name: "Club map", by: ownerID)
            try maps.show(nil, to: ownerID)
            try app.pool.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, 'editor')", [id, member])
            return id
        }
        let map = try newMap()
        // An open invitation to one of the owner's maps, made by them (its id).
        func newInvitation(_ map: Int64) throws -> Int64 {
            try app.pool.query("""
                INSERT INTO map_invitations (map_id, code_hash, role, created_by, expires_at)
                VALUES ($1, sha256(convert_to($2, 'UTF8')), 'viewer', $3, now() + interval '1 day') RETURNING id
                """, [map, Tokens.make(), ownerID])[0].decode("id")
        }
        // An invitation by email for the owner, to a map of another person's (each its own map: a
        // second invitation to one address replaces the first): nobody else accepts or declines it.
        let ownerEmail: String = try app.pool.query("SELECT email FROM users WHERE id = $1", [ownerID])[0].decode("email")
        func newInvitationByEmail() throws -> Int64 {
            let theirs = try maps.create(name: "Their map", by: member)
            try maps.inviteByEmail(ownerEmail, role: .viewer, to: theirs, by: member)
            return try app.pool.query("SELECT id FROM map_invitations WHERE map_id = $1", [theirs])[0].decode("id")
        }
        return [
            "POST /maps/invitations/:invitation/accept": "/maps/invitations/\(try newInvitationByEmail())/accept",
            "POST /maps/invitations/:invitation/decline": "/maps/invitations/\(try newInvitationByEmail())/decline",
            "GET /maps/:id": "/maps/\(map)",
            "POST /maps/:id/rename": "/maps/\(map)/rename",
            "POST /maps/:id/sharing": "/maps/\(map)/sharing",
            "POST /maps/:id/delete": "/maps/\(try newMap())/delete",
            "POST /maps/:id/members": "/maps/\(map)/members",
            "POST /maps/:id/invitations": "/maps/\(map)/invitations",
            "POST /maps/:id/invitations/withdraw": "/maps/\(map)/invitations/withdraw",
            "POST /maps/:id/invitations/:invitation/withdraw": "/maps/\(map)/invitations/\(try newInvitation(map))/withdraw",
            "POST /maps/:id/members/:member/role": "/maps/\(map)/members/\(ownerID)/role",
            "POST /maps/:id/members/:member/remove": "/maps/\(try newMap())/members/\(member)/remove",
            "POST /maps/:id/leave": "/maps/\(try newMap())/leave",
            "GET /import/:id": "/import/\(try newImport())",
            "POST /import/:id/confirm": "/import/\(try newImport())/confirm",
            "POST /import/:id/cancel": "/import/\(try newImport())/cancel",
            "GET /pins/:id": "/pins/\(try newPin())",
            "DELETE /pins/:id": "/pins/\(try newPin())",
            "POST /pins/:id/delete": "/pins/\(try newPin())/delete",
            "POST /pins/:id/rename": "/pins/\(try newPin())/rename",
            "GET /pins/:id/album.json": "/pins/\(try newPin())/album.json",
            "GET /pins/:id/album.html": "/pins/\(try newPin())/album.html",
            "GET /pins/:id/album.zip": "/pins/\(try newPin())/album.zip",
            "GET /pins/:id/events": "/pins/\(try newPin())/events",
            "POST /pins/:id/collection": "/pins/\(try newPin())/collection",
            "POST /pins/:id/retry": "/pins/\(try newPin())/retry",
            "GET /pins/:id/picker": "/pins/\(try newPin())/picker",
            "POST /pins/:id/picker": "/pins/\(try newPin())/picker",
            "GET /pins/:id/when": "/pins/\(try newPin())/when?when=1950s",
            "GET /pins/:id/decades": "/pins/\(try newPin())/decades",
            "GET /pins/:id/then-and-now": "/pins/\(try newPin())/then-and-now",
            "POST /pins/:id/own-photos": "/pins/\(try newPin())/own-photos",
            "GET /own-photos/:id": "/own-photos/\(try ownPhoto(app, onPin: Int64(try newPin())))",
            "GET /own-photos/:id/view": "/own-photos/\(try ownPhoto(app, onPin: Int64(try newPin())))/view",
            "DELETE /own-photos/:id": "/own-photos/\(try ownPhoto(app, onPin: Int64(try newPin())))",
            "POST /own-photos/:id/delete": "/own-photos/\(try ownPhoto(app, onPin: Int64(try newPin())))/delete",
            "GET /photos/:id": "/photos/\(try newPhoto())",
            "GET /photos/:id/view": "/photos/\(try newPhoto())/view",
            "DELETE /photos/:id": "/photos/\(try newPhoto())",
            "POST /photos/:id/delete": "/photos/\(try newPhoto())/delete",
            "GET /pins/:id/shares": "/pins/\(try newPin())/shares",
            "POST /pins/:id/shares": "/pins/\(try newPin())/shares",
            "POST /shares/:id/revoke": "/shares/\(try newShareLink())/revoke",
        ]
    }

    /// The form a route needs to get past checking its fields to the map it names (the same form
    /// for the owner and the intruder: the intruder's 404 is the map's, not the form's).
    static let resourceForms: [String: [(String, String)]] = [
        "POST /maps/:id/rename": [("name", "Renamed")],
        "POST /pins/:id/rename": [("name", "Renamed")],
        "POST /maps/:id/sharing": [("editors_share", "1")],
        "POST /maps/:id/delete": [("confirm", "1")],
        "POST /maps/:id/members": [("email", "nobody-here@example.org"), ("role", "viewer")],
        "POST /maps/:id/invitations": [("role", "viewer")],
        "POST /maps/:id/members/:member/role": [("role", "owner")],
    ]

    /// A request with the CSRF header, and `form` (with the token) as its body when given.
    static func send(_ browser: Browser, _ method: String, _ path: String, form: [(String, String)]?, token: String) throws -> Browser.Page {
        if method == "POST" && path.hasSuffix("/own-photos") {
            // A photo, as own-photos.js sends one.
            let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg")))
            return try browser.request(method, path, body: jpeg, headers: [("X-CSRF-Token", token), ("Content-Type", "image/jpeg"), ("Accept", "application/json")])
        }
        guard let form else { return try browser.request(method, path, headers: [("X-CSRF-Token", token)]) }
        return try browser.request(method, path, body: Array(encode(form + [("_csrf", token)]).utf8),
                                   headers: [("Content-Type", "application/x-www-form-urlencoded"), ("X-CSRF-Token", token)])
    }

    /// A ready photo with bytes on `pin`, whoever holds it.
    static func readyPhoto(_ app: TestApp, onPin pin: Int64) throws -> Int64 {
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg"))
        return try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, content_type, bytes, width, height)
            SELECT id, user_id, generation, 0, 'fixture', 'r' || id, 'http://x/1.jpg', 'ready', 'image/jpeg', $2, 384, 303
            FROM pins WHERE id = $1 RETURNING id
            """, [pin, jpeg])[0].decode("id")
    }

    /// A photo of someone's own on a pin, added by `addedBy` (the pin's holder when nil), its
    /// original and display version a stored blob (the photo fixture's coins).
    static func ownPhoto(_ app: TestApp, onPin pin: Int64, addedBy: Int64? = nil) throws -> Int64 {
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg")))
        let hash = try app.app.albums.photos.put(jpeg)
        return try app.pool.query("""
            INSERT INTO own_photos (pin_id, user_id, added_by, file_name, format, original, original_bytes, display, byte_size, width, height, placed)
            SELECT id, user_id, coalesce($3, user_id), 'coins.jpg', 'jpeg', decode($2, 'hex'), $4, decode($2, 'hex'), $4, 384, 303, 'person'
            FROM pins WHERE id = $1 RETURNING id
            """, [pin, hash, addedBy, Int64(jpeg.count)])[0].decode("id")
    }

    /// The person a browser is signed in as (by its session cookie).
    static func personID(app: TestApp, _ browser: Browser) throws -> Int64 {
        try app.pool.query("SELECT user_id FROM sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
                           [browser.cookies["vt_session"] ?? ""])[0].decode("user_id")
    }

    /// Long-lived responses: checked with HEAD, which answers with the head alone.
    static let streamingRoutes: Set<String> = ["GET /pins/:id/events", "GET /map/events"]

    /// Routes with parameters that reach no person's data (the same for everyone).
    /// Public, or opened by a bearer token in the path (a password reset link: MailTests tries it
    /// used, and as anyone but its mail's reader never has it).
    static let publicRoutes: Set<String> = ["GET /basemap/:level/:cell", "GET /tiles/:z/:x/:y",
                                            "GET /reset-password/:token", "POST /reset-password/:token"]

    static func encode(_ form: [(String, String)]) -> String {
        form.map { "\(Browser.encode($0.0))=\(Browser.encode($0.1))" }.joined(separator: "&")
    }
}
