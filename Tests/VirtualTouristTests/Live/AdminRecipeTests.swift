import Foundation
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Runs docs/admin.md's SQL exactly as written, against the real database, and checks that each
/// recipe does what the text says.
@Suite struct AdminRecipeTests {
    /// The ```sql blocks of docs/admin.md, in order.
    static func recipes() throws -> [String] {
        let text = try String(contentsOfFile: TestApp.repositoryRoot + "/docs/admin.md", encoding: .utf8)
        var blocks: [String] = []
        var current: [String]?
        for line in text.components(separatedBy: "\n") {
            if line.hasPrefix("```sql") { current = []; continue }
            if line.hasPrefix("```"), let block = current { blocks.append(block.joined(separator: "\n")); current = nil; continue }
            current?.append(line)
        }
        return blocks
    }

    /// The one recipe that contains `text`, with its example email in another letter case: people
    /// type addresses as they like, and a recipe that compared with `=` silently did nothing.
    static func recipe(containing text: String) throws -> String {
        let matches = try recipes().filter { $0.contains(text) }
        guard matches.count == 1 else { throw Browser.Failure(description: "\(matches.count) recipes contain \(text)") }
        return matches[0].replacingOccurrences(of: "person@example.org", with: "Person@Example.ORG")
    }

    func run(_ app: TestApp, _ sql: String) throws {
        try app.pool.withConnection { try $0.execute(sql) }
    }

    @Test func everyRecipeIsCovered() throws {
        // Adding a recipe to the doc without a check here fails: each block is claimed below.
        let claimed = ["ORDER BY u.created_at DESC", "UPDATE users SET password_hash", "SET disabled_at = now()",
                       "SET disabled_at = NULL", "DELETE FROM sessions", "DELETE FROM users",
                       "GROUP BY email_key", "DELETE FROM sign_in_failures", "ORDER BY photo_bytes DESC",
                       "DELETE FROM photos WHERE created_at", "FROM admin_jobs", "WITH retried", "WITH stopped",
                       "ORDER BY pins DESC", "max_pins = 20000", "max_pins = NULL", "AS still_in_rows",
                       "pin_cells_rebuild()", "INSERT INTO users (email", "WITH code AS", "FROM invitations i",
                       "DELETE FROM invitations", "FROM share_links s JOIN users", "THE-TOKEN-FROM-THE-LINK",
                       "share_links SET revoked_at = now()\nWHERE revoked_at IS NULL AND user_id",
                       "DELETE FROM pin_imports", "FROM users m JOIN map_members mm", "WITH heir AS",
                       "DELETE FROM map_members", "DELETE FROM map_invitation_blocks",
                       "WHERE p.era_from IS NOT NULL", "AS pins_counted", "DELETE FROM pin_decades",
                       "AS with_position", "DELETE FROM own_photos WHERE added_by"]
        let blocks = try Self.recipes()
        #expect(blocks.count == claimed.count)
        for block in blocks {
            #expect(claimed.contains { block.contains($0) }, "unchecked recipe:\n\(block)")
        }
    }

    /// Clearing old import previews removes only the expired ones.
    @Test func oldImportPreviewsCleared() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "late@example.org")
        _ = try app.signedUp(email: "soon@example.org")
        try app.pool.query("""
            INSERT INTO pin_imports (user_id, file_name, format, contents, expires_at)
            SELECT id, 'a.gpx', 'GPX', '{"format":"GPX","points":[],"refused":[],"notes":[]}',
                   CASE email WHEN 'late@example.org' THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END
            FROM users
            """)
        try run(app, try Self.recipe(containing: "DELETE FROM pin_imports"))
        #expect(try app.count("SELECT count(*) FROM pin_imports i JOIN users u ON u.id = i.user_id WHERE u.email = 'late@example.org'") == 0)
        #expect(try app.count("SELECT count(*) FROM pin_imports i JOIN users u ON u.id = i.user_id WHERE u.email = 'soon@example.org'") == 1)
    }

    /// The rebuild recipe puts stale map counts right.
    @Test func mapCountsRebuild() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "counts@example.org")
        let user = Int64(try app.count("SELECT id FROM users WHERE email = 'counts@example.org'"))
        try app.pool.query("INSERT INTO pins (user_id, lat, lon) SELECT $1, n % 80, n % 170 FROM generate_series(1, 200) n", [user])
        try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, hash, content_type, byte_size)
            SELECT id, user_id, generation, 0, 'flickr', id::text, 'https://example.org/', 'ready', decode(repeat('b', 64), 'hex'), 'image/jpeg', 1 FROM pins
            """)
        // What a restore without triggers could leave behind.
        try run(app, "DELETE FROM pin_cells; UPDATE pin_photo_counts SET ready = 7")
        #expect(try app.count("SELECT count(*) FROM pin_cells") == 0)
        let version = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        try run(app, try Self.recipe(containing: "pin_cells_rebuild()"))
        #expect(try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user]) > version)
        #expect(try app.count("SELECT sum(pins) FROM pin_cells WHERE level = 0 AND user_id = $1", [user]) == 200)
        #expect(try app.count("SELECT count(*) FROM pin_photo_counts WHERE ready <> 1") == 0)
        #expect(try app.count("SELECT count(*) FROM pin_photo_counts") == 200)
    }

    /// The quota recipes change what a person may do, at once, and back.
    @Test func quotasPerPerson() throws {
        var quotas = Quotas()
        quotas.pins = 2
        let app = try TestApp { $0.quotas = quotas }
        let browser = try app.signedUp(email: "person@example.org")
        let token = try browser.get("/").csrfToken ?? ""
        func drop() throws -> Browser.Page {
            try browser.post("/pins", form: [("_csrf", token), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
        }
        #expect(try drop().status == 201)
        #expect(try drop().status == 201)
        let refused = try drop()
        #expect(refused.status == 429)
        #expect(refused.body.contains("limit of 2 pins"))
        let usage = try app.pool.query(try Self.recipe(containing: "ORDER BY pins DESC"))
        #expect(try usage[0].decode("pins", as: Int.self) == 2)
        #expect(try usage[0].decode("max_pins", as: Int?.self) == nil)
        try run(app, try Self.recipe(containing: "max_pins = 20000"))
        #expect(try drop().status == 201)
        #expect(try app.count("SELECT max_photo_bytes FROM users") == 10 * 1024 * 1024 * 1024)
        try run(app, try Self.recipe(containing: "max_pins = NULL"))
        #expect(try drop().status == 429)
        #expect(try app.count("SELECT count(*) FROM pins") == 3)
    }

    @Test func followTheMoveOfImagesIntoTheStore() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp(email: "person@example.org")
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        let recipe = try Self.recipe(containing: "AS still_in_rows")
        #expect(try app.pool.query(recipe)[0].decode("still_in_rows", as: Int.self) == 0)
        try app.pool.query("UPDATE photos SET bytes = '\\xffd8ff'::bytea, hash = NULL WHERE position < 3")
        #expect(try app.pool.query(recipe)[0].decode("still_in_rows", as: Int.self) == 3)
        try PhotoCollector(pool: app.pool, store: app.app.albums.photos).moveAllBytesToStore()
        #expect(try app.pool.query(recipe)[0].decode("still_in_rows", as: Int.self) == 0)
    }

    @Test func listPeople() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "person@example.org", name: "Pat")
        _ = try app.signedUp(email: "quinn@example.org", name: "Quinn")
        let rows = try app.pool.query(try Self.recipe(containing: "ORDER BY u.created_at DESC"))
        #expect(rows.count == 2)
        #expect(try rows[0].decode("email", as: String.self) == "quinn@example.org")
        #expect(try rows[1].decode("pins", as: Int.self) == 0)
    }

    @Test func resetPasswordWithPgcryptoThenSignIn() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "person@example.org", password: "the original password")
        try run(app, try Self.recipe(containing: "UPDATE users SET password_hash"))
        #expect(try app.count("SELECT count(*) FROM users WHERE password_hash LIKE '$2a$%'") == 1)
        let browser = app.browser()
        let form = try browser.get("/sign-in")
        let old = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "person@example.org"), ("password", "the original password")])
        #expect(old.status == 422)
        let new = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "person@example.org"), ("password", "a temporary password")])
        #expect(new.status == 303)
        #expect(try browser.get("/").status == 200)
    }

    @Test func createAnAccountThenSignIn() throws {
        let app = try TestApp { $0.signUp = .closed }
        try run(app, try Self.recipe(containing: "INSERT INTO users (email"))
        let browser = app.browser()
        let form = try browser.get("/sign-in")
        let signedIn = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "Person@example.org"), ("password", "a temporary password")])
        #expect(signedIn.status == 303)
        #expect(try browser.get("/").body.contains("Person"))
    }

    /// An invitation made in SQL signs one person up; the listing shows who used it; withdrawing
    /// removes only the unused.
    @Test func invitationsInSQL() throws {
        let app = try TestApp { $0.signUp = .invite }
        _ = try app.signedUp(email: "owner@example.org")  // with the setup code (TestApp.signedUp)
        let link: String = try app.pool.query(try Self.recipe(containing: "WITH code AS"))[0].decode("link")
        let code = try #require(link.firstMatch(of: /^https:\/\/photos\.example\.org\/sign-up\?invite=([0-9a-f]{64})$/)).1
        #expect(try SignUpModeTests.signUp(app, email: "guest@example.org").status == 403)
        #expect(try SignUpModeTests.signUp(app, email: "guest@example.org", invitation: String(code), link: String(code)).status == 303)
        #expect(try SignUpModeTests.signUp(app, email: "other@example.org", invitation: String(code)).status == 403)
        let listed = try app.pool.query(try Self.recipe(containing: "FROM invitations i"))
        #expect(listed.count == 1)
        #expect(try listed[0].decode("used_by", as: String?.self) == "guest@example.org")
        #expect(try listed[0].decode("note", as: String?.self)?.lowercased() == "for person@example.org")

        _ = try app.pool.query(try Self.recipe(containing: "WITH code AS"))
        #expect(try app.count("SELECT count(*) FROM invitations WHERE used_at IS NULL") == 1)
        try run(app, try Self.recipe(containing: "DELETE FROM invitations"))
        #expect(try app.count("SELECT count(*) FROM invitations WHERE used_at IS NULL") == 0)
        #expect(try app.count("SELECT count(*) FROM invitations") == 1)
    }

    @Test func disableThenEnable() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "Person@Example.org", password: "pat's password")
        try run(app, try Self.recipe(containing: "SET disabled_at = now()"))
        #expect(try browser.get("/").status == 303)
        let form = try browser.get("/sign-in")
        let refused = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "person@example.org"), ("password", "pat's password")])
        #expect(refused.status == 422)
        try run(app, try Self.recipe(containing: "SET disabled_at = NULL"))
        let back = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "person@example.org"), ("password", "pat's password")])
        #expect(back.status == 303)
    }

    @Test func signOutEverywhere() throws {
        let app = try TestApp()
        let first = try app.signedUp(email: "person@example.org", password: "pat's password")
        let second = app.browser()
        let form = try second.get("/sign-in")
        _ = try second.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "person@example.org"), ("password", "pat's password")])
        let bystander = try app.signedUp(email: "someone.else@example.org")
        #expect(try app.count("SELECT count(*) FROM sessions") == 3)
        try run(app, try Self.recipe(containing: "DELETE FROM sessions"))
        #expect(try first.get("/").status == 303)
        #expect(try second.get("/").status == 303)
        #expect(try bystander.get("/").status == 200)
    }

    @Test func deleteAPersonAndEverythingTheyOwn() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "person@example.org")
        let keeper = try app.signedUp(email: "keeper@example.org")
        // Give both some data in every table that belongs to a person.
        for email in ["person@example.org", "keeper@example.org"] {
            try app.pool.query("""
                WITH u AS (SELECT id FROM users WHERE email = $1),
                     r AS (INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) SELECT id, 10, 20, 3 FROM u),
                     p AS (INSERT INTO pins (user_id, lat, lon) SELECT id, 1, 2 FROM u RETURNING id, user_id),
                     ph AS (INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url)
                            SELECT id, user_id, 0, 0, 'fixture', 'r1', 'http://x/1.jpg' FROM p)
                INSERT INTO album_jobs (pin_id, user_id, generation) SELECT id, user_id, 0 FROM p
                """, [email])
        }
        try run(app, try Self.recipe(containing: "DELETE FROM users"))
        for table in ["users", "sessions", "map_regions", "pins", "photos", "album_jobs"] {
            let column = table == "users" ? "id" : "user_id"
            #expect(try app.count("SELECT count(*) FROM \(table) t WHERE \(column) NOT IN (SELECT id FROM users)") == 0)
            #expect(try app.count("SELECT count(*) FROM \(table)") == 1, "\(table) keeps only the other person's row")
        }
        #expect(try keeper.get("/").status == 200)
    }

    /// The shared maps' recipes: list the members, hand a map to another owner, remove a member;
    /// and what deleting an account does to the maps it owned.
    @Test func sharedMapRecipes() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "owner@example.org", name: "Olga")
        _ = try app.signedUp(email: "person@example.org", name: "Pat")
        _ = try app.signedUp(email: "viewer@example.org", name: "Vic")
        let maps = SharedMaps(pool: app.pool, quotas: Quotas())
        func id(_ email: String) throws -> Int64 {
            try app.pool.query("SELECT id FROM users WHERE email = $1", [email])[0].decode("id")
        }
        let map = try maps.create(name: "Club walks", by: try id("owner@example.org"))
        _ = try maps.add(email: "person@example.org", role: .editor, to: map, by: try id("owner@example.org"))
        _ = try maps.add(email: "viewer@example.org", role: .viewer, to: map, by: try id("owner@example.org"))
        func recipe(_ text: String) throws -> String { try Self.recipe(containing: text).replacingOccurrences(of: "42", with: String(map)) }
        func role(_ email: String) throws -> String? {
            try app.pool.query("SELECT role FROM map_members WHERE map_id = $1 AND user_id = $2", [map, try id(email)]).first?.decode("role")
        }

        let listed = try app.pool.withConnection { try $0.query(try recipe("FROM users m JOIN map_members mm")) }
        #expect(listed.count == 3)
        #expect(try listed.map { try $0.decode("email", as: String.self) }.sorted() == ["owner@example.org", "person@example.org", "viewer@example.org"])

        // A block lifted: the map's invitations reach the person again.
        try app.pool.query("INSERT INTO map_invitation_blocks (person_id, map_id) VALUES ($1, $2)", [try id("person@example.org"), map])
        try run(app, try recipe("DELETE FROM map_invitation_blocks"))
        #expect(try app.count("SELECT count(*)::int FROM map_invitation_blocks") == 0)

        try run(app, try recipe("WITH heir AS"))
        #expect(try role("person@example.org") == "owner", "the heir owns it")
        #expect(try role("owner@example.org") == "editor", "the old owner stays on as an editor")
        #expect(try role("viewer@example.org") == "viewer")
        #expect(try app.count("SELECT count(*) FROM admin_maps WHERE owners = 'person@example.org'") == 1)

        // The old owner, now an editor, sees the map at once but can no longer manage it.
        #expect(try owner.get("/maps/\(map)").body.contains("You are an editor"))

        try run(app, try recipe("DELETE FROM map_members").replacingOccurrences(of: "Person@Example.ORG", with: "viewer@example.org"))
        #expect(try role("viewer@example.org") == nil)
        #expect(try app.count("SELECT count(*) FROM map_members WHERE map_id = $1", [map]) == 2)

        // Deleting the last owner's account hands the map to the longest-standing editor.
        try app.pool.query("DELETE FROM users WHERE email = 'person@example.org'")
        #expect(try role("owner@example.org") == "owner")
        // Deleting the only member's account deletes the map and its pins.
        try app.pool.query("INSERT INTO pins (user_id, lat, lon) VALUES ($1, 1, 2)", [map])
        try app.pool.query("DELETE FROM users WHERE email = 'owner@example.org'")
        #expect(try app.count("SELECT count(*) FROM users WHERE id = $1", [map]) == 0)
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [map]) == 0)
    }

    @Test func seeAndLiftLockOuts() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "person@example.org", password: "pat's password")
        let browser = app.browser()
        let token = try browser.get("/sign-in").csrfToken ?? ""
        for _ in 0..<AccountStore.freeFailuresPerPair {
            _ = try browser.post("/sign-in", form: [("_csrf", token), ("email", "Person@example.org"), ("password", "wrong guess")])
        }
        let list = try app.pool.query(try Self.recipe(containing: "GROUP BY email_key"))
        #expect(list.count == 1)
        #expect(try list[0].decode("failures", as: Int.self) == AccountStore.freeFailuresPerPair)
        #expect(try browser.post("/sign-in", form: [("_csrf", token), ("email", "person@example.org"), ("password", "pat's password")]).status == 429)
        try run(app, try Self.recipe(containing: "DELETE FROM sign_in_failures"))
        #expect(try browser.post("/sign-in", form: [("_csrf", token), ("email", "person@example.org"), ("password", "pat's password")]).status == 303)
    }

    @Test func storagePerPersonAndPurgingOldPhotos() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp(email: "person@example.org")
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        let rows = try app.pool.query(try Self.recipe(containing: "ORDER BY photo_bytes DESC"))
        #expect(try rows[0].decode("photos", as: Int.self) == 30)
        #expect(try rows[0].decode("stored", as: String.self).hasSuffix("kB") || rows[0].decode("stored", as: String.self).hasSuffix("MB"))
        try app.pool.query("UPDATE photos SET created_at = now() - interval '200 days' WHERE position < 10")
        try run(app, try Self.recipe(containing: "DELETE FROM photos WHERE created_at"))
        #expect(try app.count("SELECT count(*) FROM photos") == 20)
    }

    @Test func failedJobsAreListedRetriedAndStopped() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp(email: "person@example.org")
        app.fixture.setSearchFault(.invalidKey)
        let pin = try AlbumTests.dropPin(browser)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "failed")
        let listed = try app.pool.query(try Self.recipe(containing: "FROM admin_jobs"))
        #expect(listed.count == 1)
        #expect(try listed[0].decode("last_error", as: String.self).lowercased().contains("invalid flickr api key"))
        // The key is fixed; the retry recipe brings the album.
        app.fixture.setSearchFault(.none)
        try run(app, try Self.recipe(containing: "WITH retried"))
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        #expect(try app.pool.query(try Self.recipe(containing: "FROM admin_jobs")).isEmpty)
    }

    /// Eras and the strip's counts: listed, their cost seen, a pin's counts dropped for a recount.
    @Test func erasAndDecadeCounts() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "person@example.org")
        let pin = try AlbumTests.dropPin(browser)
        try app.pool.query("UPDATE pins SET era_from = 1950, era_to = 1959 WHERE id = $1", [pin])
        #expect(try browser.get("/pins/\(pin)/decades?fragment=1").status == 200)
        let eras = try app.pool.query(try Self.recipe(containing: "WHERE p.era_from IS NOT NULL"))
        let eraFrom = try eras[0].decode("era_from", as: Int.self), eraPin = try eras[0].decode("pin", as: Int.self)
        #expect(eras.count == 1 && eraFrom == 1950 && eraPin == pin)
        #expect(try app.pool.query(try Self.recipe(containing: "AS pins_counted"))[0].decode("pins_counted", as: Int64.self) == 1)
        try run(app, try Self.recipe(containing: "DELETE FROM pin_decades").replacingOccurrences(of: "301", with: String(pin)))
        #expect(try app.count("SELECT count(*) FROM pin_decades") == 0)
        let calls = app.fixture.searchCount
        #expect(try browser.get("/pins/\(pin)/decades?fragment=1").status == 200)
        #expect(app.fixture.searchCount - calls == Era.decades().count, "counted again at the next look")
    }

    /// Own photos: who added how much (and how many with a position), and all of one person's removed.
    @Test func ownPhotosListedAndRemoved() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "person@example.org")
        let other = try app.signedUp(email: "other@example.org")
        let token = try #require(try browser.get("/").csrfToken)
        let pin = try AlbumTests.dropPin(browser), otherPin = try AlbumTests.dropPin(other)
        #expect(try OwnPhotoTests.send(browser, pin: pin, try OwnPhotoTests.taggedPhoto(), name: "a.jpg", token: token).status == 201)
        _ = try RouteCoverageTests.ownPhoto(app, onPin: Int64(otherPin))
        let rows = try app.pool.query(try Self.recipe(containing: "AS with_position"))
        #expect(rows.count == 2)
        let first = try rows.first { try $0.decode("email", as: String.self) == "person@example.org" }
        let photos: Int64? = try first?.decode("photos"), positioned: Int64? = try first?.decode("with_position")
        #expect(photos == 1 && positioned == 1)
        try run(app, try Self.recipe(containing: "DELETE FROM own_photos WHERE added_by"))
        #expect(try app.count("SELECT count(*) FROM own_photos") == 1, "the other person's photo stays")
        #expect(!(try browser.get("/pins/\(pin)")).body.contains("class=\"photo own\""))
    }

    @Test func stoppingAPersonsAlbums() throws {
        // No workers: the job stays queued until the recipe stops it.
        let app = try TestApp(workers: false)
        let browser = try app.signedUp(email: "person@example.org")
        let other = try app.signedUp(email: "other@example.org")
        let pin = try AlbumTests.dropPin(browser)
        let otherPin = try AlbumTests.dropPin(other)
        try run(app, try Self.recipe(containing: "WITH stopped"))
        let album = try AlbumTests.state(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == "Stopped by the administrator.")
        #expect(try browser.get("/pins/\(pin)").body.contains("Retry"))
        #expect(try AlbumTests.state(other, pin: otherPin).status == "downloading")
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE state = 'cancelled'") == 1)
    }
}
