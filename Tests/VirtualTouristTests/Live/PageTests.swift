import Foundation
import HTTPServer
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Every page with hostile and plentiful data, read by a real HTML parser; the no-JavaScript path;
/// database round trips per page; conditional requests; compression.
@Suite struct PageTests {
    /// Markup, quotes and closing tags that would end the list if they were not escaped.
    static let markup = #"<script>alert("x")</script> & 'q' </li></ul><b>bold"#
    /// Emoji (a ZWJ sequence), CJK, Arabic and a right-to-left override.
    static let scripts = "👩‍👩‍👧 ⛩️ 京都 مرحبا \u{202E}txet desrever\u{202C} ok"
    /// About 100 KB, mostly characters that need escaping.
    static let huge = String(repeating: "<i>\"&'</i> ü ", count: 100 * 1024 / 16)

    struct Saved: Encodable {
        let file: String
        let name: String
        let expect: [String]
        var fragment = false
        var forms: Int?
    }

    final class Pages {
        let directory: String
        var saved: [Saved] = []

        init() throws {
            let scratch = ProcessInfo.processInfo.environment["TEST_SCRATCH"] ?? NSTemporaryDirectory()
            directory = scratch + "/pages-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }

        func save(_ page: Browser.Page, _ name: String, status: Int = 200, expect: [String] = [], fragment: Bool = false,
                  forms: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(page.status == status, "\(name): \(page)", sourceLocation: sourceLocation)
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true, "\(name)", sourceLocation: sourceLocation)
            let file = directory + "/\(saved.count).html"
            _ = FileManager.default.createFile(atPath: file, contents: Data(page.bodyBytes))
            saved.append(Saved(file: file, name: name, expect: expect, fragment: fragment, forms: forms))
        }

        /// Runs Tests/HTML/check-pages.py over everything saved; its report becomes the failure.
        func check(sourceLocation: SourceLocation = #_sourceLocation) throws {
            let manifest = directory + "/manifest.json"
            try JSONEncoder().encode(saved).write(to: URL(fileURLWithPath: manifest))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", TestApp.repositoryRoot + "/Tests/HTML/check-pages.py", manifest]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(report)", sourceLocation: sourceLocation)
            #expect(report.contains("checked \(saved.count) pages"), "\(report)", sourceLocation: sourceLocation)
        }
    }

    static func userID(_ app: TestApp, email: String) throws -> Int64 {
        try app.pool.query("SELECT id FROM users WHERE email = $1", [email])[0].decode("id")
    }

    @discardableResult
    static func insertPin(_ app: TestApp, user: Int64, name: String?, lat: Double = 35, lon: Double = 135,
                          status: String = "ready", error: String? = nil) throws -> Int64 {
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, status, error, page, total_pages) VALUES ($1, $2, $3, $4, $5, $6, 2, 7)
            RETURNING id
            """, [user, lat, lon, name, status, error])[0].decode("id")
    }

    static let jpeg = try! Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg"))

    @discardableResult
    static func insertPhoto(_ app: TestApp, pin: Int64, position: Int, status: String, title: String, owner: String,
                            license: String) throws -> Int64 {
        let ready = status == "ready"
        try app.pool.query("INSERT INTO photo_licenses (name) VALUES ($1) ON CONFLICT DO NOTHING", [license])
        return try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, page_url, status,
                                content_type, bytes, width, height, title, owner_name, license_id, date_taken)
            SELECT id, user_id, generation, $2, 'fixture', 'r' || $2 || '-' || id, 'http://x/1.jpg', 'https://example.org/p?a=1&b="2"',
                   $3, $4, $5, $6, $7, $8, $9, (SELECT l.id FROM photo_licenses l WHERE l.name = $10 AND l.url = ''), $11
            FROM pins WHERE id = $1 RETURNING id
            """, [pin, position, status, ready ? "image/jpeg" : nil, ready ? jpeg : nil, ready ? 384 : nil, ready ? 303 : nil,
                  title, owner, license, "2020-01-02 <03>"])[0].decode("id")
    }

    // MARK: Every page, parsed

    @Test func everyPageParsesCleanlyWithHostileAndPlentifulData() throws {
        let app = try TestApp()
        let pages = try Pages()
        let name = Self.markup + " " + Self.scripts

        // Signed out: the account pages, an echoed hostile form, error pages.
        let visitor = app.browser()
        pages.save(try visitor.get("/sign-in"), "sign-in", forms: 1)
        pages.save(try visitor.get("/sign-in?next=/pins/1%22%3E%3Cb%3E"), "sign-in with next", forms: 1)
        let signUp = try visitor.get("/sign-up")
        pages.save(signUp, "sign-up", forms: 1)
        pages.save(try visitor.post("/sign-up", form: [
            ("_csrf", signUp.csrfToken ?? ""), ("email", Self.markup), ("display_name", String(Self.huge.prefix(150))),
            ("password", "x"), ("password_confirmation", "y"),
        ]), "sign-up with errors", status: 422, expect: [Self.markup], forms: 1)
        pages.save(try visitor.post("/sign-in", form: [("_csrf", signUp.csrfToken ?? ""), ("email", Self.markup), ("password", "x")]),
                   "sign-in refused", status: 422, expect: [Self.markup], forms: 1)
        pages.save(try visitor.get("/no-such-page-\(Self.markup.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"),
                   "404", status: 404)
        pages.save(try visitor.post("/sign-in", form: [("email", "a")]), "403 without CSRF", status: 403)

        // Signed in, with a hostile name (set in SQL: the form caps names at 100 characters).
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try Self.userID(app, email: email)
        try app.pool.query("UPDATE users SET display_name = $1 WHERE id = $2", [name, user])
        pages.save(try browser.get("/"), "map, 0 pins", expect: [name, "No pins yet."], forms: 3)

        let pin = try Self.insertPin(app, user: user, name: name)
        browser.setCookie("vt_flash", Browser.encode(Self.markup))
        pages.save(try browser.get("/"), "map, 1 pin, flash", expect: [name, Self.markup], forms: 4)
        pages.save(try browser.post("/pins", form: [("_csrf", try #require(try browser.get("/").csrfToken)), ("place", Self.markup)]),
                   "map, unknown place", status: 422, expect: [Self.markup])

        // The album in every state.
        let states: [(String, String?, [(String, String)])] = [
            ("downloading", nil, []),
            ("downloading", nil, [("pending", ""), ("ready", name), ("failed", Self.markup)]),
            ("ready", nil, [("ready", name), ("ready", ""), ("ready", Self.huge)]),
            ("ready", nil, []),
            ("empty", nil, []),
            ("failed", Self.markup + " (HTTP 500)", []),
        ]
        for (index, (status, error, photos)) in states.enumerated() {
            try app.pool.query("DELETE FROM photos WHERE pin_id = $1", [pin])
            try app.pool.query("UPDATE pins SET status = $1, error = $2 WHERE id = $3", [status, error, pin])
            for (position, photo) in photos.enumerated() {
                try Self.insertPhoto(app, pin: pin, position: position, status: photo.0, title: photo.1,
                                     owner: Self.scripts, license: Self.markup)
            }
            var expect = [name]
            if let error { expect.append(error) }
            if photos.contains(where: { $0.0 == "ready" && !$0.1.isEmpty }) { expect.append(Self.scripts + " · " + Self.markup) }
            pages.save(try browser.get("/pins/\(pin)"), "album \(index) \(status)", expect: expect, forms: 2)
            pages.save(try browser.get("/pins/\(pin)/album.html"), "album fragment \(index) \(status)",
                       expect: Array(expect.dropFirst()), fragment: true)
        }
        try app.pool.query("UPDATE pins SET status = 'ready', error = NULL WHERE id = $1", [pin])
        let readyPhoto = try Self.insertPhoto(app, pin: pin, position: 0, status: "ready", title: Self.huge, owner: Self.scripts,
                                              license: Self.markup)
        pages.save(try browser.get("/photos/\(readyPhoto)/view"), "photo page", expect: [Self.huge, Self.scripts, Self.markup, name])
        pages.save(try browser.get("/pins/\(pin)/picker"), "picker", expect: ["Choose photos near " + name], forms: 2)
        pages.save(try browser.get("/pins/999999999"), "404 signed in", status: 404)

        // Plentiful: a thousand pins, one of them named with 100 KB.
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, status)
            SELECT $1, -80 + (n % 160), -179 + (n * 7 % 358), $2 || ' #' || n, 'ready' FROM generate_series(1, 998) n
            """, [user, name])
        try Self.insertPin(app, user: user, name: Self.huge, lat: 10, lon: 10)
        for page in [1, 2, 20, 21] {
            pages.save(try browser.get("/?page=\(page)"), "map, 1,000 pins, page \(page)",
                       expect: page == 1 ? [Self.huge, "Page 1 of 20"] : page == 20 ? ["Page 20 of 20", name] : [])
        }
        try pages.check()
    }

    // MARK: Without JavaScript

    @Test func noJavaScriptPathListsPaginatesAddsAndDeletes() throws {
        let app = try TestApp()
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try Self.userID(app, email: email)
        let token = try #require(try browser.get("/").csrfToken)

        // Add by place name: the plain form, a redirect, the flash and the list.
        let added = try browser.post("/pins", form: [("_csrf", token), ("place", "Kyoto")])
        #expect(added.status == 303)
        #expect(added.header("Location") == "/")
        var page = try browser.get("/")
        #expect(page.body.contains("Pin added: Kyoto"))
        #expect(page.body.contains("Your pins (1)"))
        #expect(page.body.firstMatch(of: /<li class="pin-row" data-pin-id="\d+">\s*<a href="\/pins\/\d+"><strong>Kyoto/) != nil)
        #expect(!page.body.contains("pins-next"))

        // 120 pins: three pages of 50, newest first, with next and previous links.
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name) SELECT $1, n % 80, n, 'Place ' || n FROM generate_series(1, 119) n
            """, [user])
        page = try browser.get("/")
        #expect(page.body.contains("Your pins (120)"))
        #expect(page.body.matches(of: /class="pin-row"/).count == 50)
        #expect(page.body.contains("Place 119</strong>") && !page.body.contains("Place 69</strong>"))
        #expect(page.body.contains("Page 1 of 3"))
        let next = try #require(page.body.firstMatch(of: /id="pins-next" href="([^"]+)"/).map { String($0.1) })
        #expect(next == "/?page=2#pin-list")
        page = try browser.get(String(next.prefix { $0 != "#" }))
        #expect(page.body.contains("Page 2 of 3"))
        #expect(page.body.contains("Place 69</strong>") && !page.body.contains("Place 70</strong>") && page.body.contains("Place 20</strong>"))
        #expect(page.body.contains(#"id="pins-previous" href="/?page=1#pin-list""#))
        #expect(page.body.contains(#"id="pins-next" href="/?page=3#pin-list""#))
        let last = try browser.get("/?page=3")
        #expect(last.body.matches(of: /class="pin-row"/).count == 20)
        #expect(last.body.contains("Kyoto") && !last.body.contains("pins-next"))
        #expect(try browser.get("/?page=banana").body.contains("Page 1 of 3"))

        // Delete from page 2 with the form that page drew.
        let form = try #require(page.body.firstMatch(of: /<form method="post" action="(\/pins\/\d+\/delete)" class="inline">\s*<input type="hidden" name="_csrf" value="([^"]+)">/))
        let deleted = try browser.post(String(form.1), form: [("_csrf", String(form.2))])
        #expect(deleted.status == 303)
        page = try browser.get("/")
        #expect(page.body.contains("Pin deleted: Place"))
        #expect(page.body.contains("Your pins (119)"))
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [user]) == 119)
    }

    // MARK: Round trips, 304s, gzip

    @Test func signedInPagesTakeAtMostTwoDatabaseRoundTrips() throws {
        let app = try TestApp { $0.serverTiming = true }
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try Self.userID(app, email: email)
        let pin = try Self.insertPin(app, user: user, name: "Kyoto")
        var photo: Int64 = 0
        for position in 0..<30 {
            photo = try Self.insertPhoto(app, pin: pin, position: position, status: "ready", title: "t\(position)", owner: "o", license: "l")
        }
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, status) SELECT $1, n % 80, n % 180, 'P' || n, 'ready' FROM generate_series(1, 999) n
            """, [user])
        let token = try #require(try browser.get("/").csrfToken)
        let own = try RouteCoverageTests.ownPhoto(app, onPin: pin)
        let paths = ["/", "/?page=3", "/pins.json", "/pins.json?bbox=0,0,90,60", "/pins/\(pin)", "/pins/\(pin)/album.json",
                     "/pins/\(pin)/album.html", "/photos/\(photo)", "/photos/\(photo)/view", "/own-photos/\(own)/view"]
        for path in paths {
            let page = try browser.get(path)
            #expect(page.status == 200, "\(path)")
            #expect(page.roundTrips == 2, "\(path): \(page.header("Server-Timing") ?? "no Server-Timing")")
        }
        let region = try browser.post("/region", form: [("_csrf", token), ("lat", "1"), ("lon", "2"), ("zoom", "3")])
        #expect(region.status == 204)
        #expect(region.roundTrips == 2)
        // A pin dropped: the session, then the drop's transaction (BEGIN, the dropper's row locked,
        // the INSERT that also tells the map, the quota, the start that also tells the album,
        // COMMIT). It was 8 in the transaction when the two NOTIFYs were statements of their own.
        let drop = try browser.post("/pins", form: [("_csrf", token), ("lat", "35.01"), ("lon", "135.76")], headers: [("Accept", "application/json")])
        #expect(drop.status == 201 || drop.status == 200)
        #expect(drop.roundTrips == 1 + 6, "\(drop.header("Server-Timing") ?? "no Server-Timing")")
        // A session due for renewal still costs one round trip.
        try app.pool.query("UPDATE sessions SET last_seen_at = now() - interval '2 hours'")
        let renewed = try browser.get("/")
        #expect(renewed.roundTrips == 2)
        #expect(renewed.header("Set-Cookie")?.contains("vt_session=") == true)
        #expect(try app.count("SELECT count(*) FROM sessions WHERE last_seen_at > now() - interval '1 minute'") == 1)
    }

    @Test func unchangedPhotosPinsAndAlbumsAnswer304() throws {
        let app = try TestApp()
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try Self.userID(app, email: email)
        let pin = try Self.insertPin(app, user: user, name: "Kyoto")
        let photo = try Self.insertPhoto(app, pin: pin, position: 0, status: "ready", title: "t", owner: "o", license: "l")

        let image = try browser.get("/photos/\(photo)")
        #expect(image.status == 200 && image.bodyBytes == Array(Self.jpeg))
        let etag = try #require(image.header("ETag"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))  // strong
        #expect(image.header("Cache-Control") == "private, max-age=31536000, immutable")
        let again = try browser.get("/photos/\(photo)", headers: [("If-None-Match", "\"other\", \(etag)")])
        #expect(again.status == 304 && again.bodyBytes.isEmpty && again.header("ETag") == etag)
        #expect(try browser.get("/photos/\(photo)", headers: [("If-None-Match", "\"other\"")]).status == 200)
        // Someone else's photo is not found, whatever validator is sent.
        let other = try app.signedUp()
        #expect(try other.get("/photos/\(photo)", headers: [("If-None-Match", etag)]).status == 404)

        for path in ["/pins.json", "/pins/\(pin)/album.json", "/pins/\(pin)/album.html"] {
            let first = try browser.get(path)
            let tag = try #require(first.header("ETag"), "\(path)")
            let unchanged = try browser.get(path, headers: [("If-None-Match", tag)])
            #expect(unchanged.status == 304, "\(path)")
            #expect(unchanged.bodyBytes.isEmpty)
            // Gzip's own tag counts as the same content.
            let gzipped = try browser.get(path, headers: [("Accept-Encoding", "gzip")])
            if let gzTag = gzipped.header("ETag"), gzTag != tag {
                #expect(try browser.get(path, headers: [("If-None-Match", gzTag), ("Accept-Encoding", "gzip")]).status == 304)
            }
        }
        // A change answers 200 with a new tag.
        let before = try #require(try browser.get("/pins.json").header("ETag"))
        let albumBefore = try #require(try browser.get("/pins/\(pin)/album.json").header("ETag"))
        try Self.insertPin(app, user: user, name: "Osaka")
        try app.pool.query("UPDATE photos SET title = 'new title' WHERE id = $1", [photo])
        let changed = try browser.get("/pins.json", headers: [("If-None-Match", before)])
        #expect(changed.status == 200 && changed.header("ETag") != before && changed.body.contains("Osaka"))
        let albumChanged = try browser.get("/pins/\(pin)/album.json", headers: [("If-None-Match", albumBefore)])
        #expect(albumChanged.status == 200 && albumChanged.body.contains("new title"))
    }

    @Test func textIsGzippedWhenAcceptedAndTheMapPageStaysSmall() throws {
        let app = try TestApp()
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try Self.userID(app, email: email)
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, status)
            SELECT $1, -60 + (n * 13 % 130), -179 + (n * 7 % 358), 'Place number ' || n || ', Some Country', 'ready'
            FROM generate_series(1, 1000) n
            """, [user])
        _ = try browser.get("/")  // shows and clears the welcome flash
        let plain = try browser.get("/")
        let gzipped = try browser.get("/", headers: [("Accept-Encoding", "gzip, deflate, br")])
        #expect(gzipped.header("Content-Encoding") == "gzip")
        #expect(gzipped.headerValues("Vary").contains { $0.contains("Accept-Encoding") })
        #expect(plain.headerValues("Vary").contains { $0.contains("Accept-Encoding") })
        #expect(plain.header("Content-Encoding") == nil)
        let inflated = try #require(Gzip.decompress(gzipped.bodyBytes))
        #expect(inflated == plain.bodyBytes)
        #expect(gzipped.bodyBytes.count <= 40 * 1024, "map page with 1,000 pins: \(gzipped.bodyBytes.count) bytes gzipped")
        #expect(plain.body.matches(of: /class="pin-row"/).count == 50)

        // q=0 refuses gzip; small answers and images stay as they are.
        #expect(try browser.get("/", headers: [("Accept-Encoding", "gzip;q=0")]).header("Content-Encoding") == nil)
        #expect(try browser.get("/healthz", headers: [("Accept-Encoding", "gzip")]).header("Content-Encoding") == nil)
        let json = try browser.get("/pins.json", headers: [("Accept-Encoding", "gzip")])
        #expect(json.header("Content-Encoding") == "gzip")
        let pins = try #require(Gzip.decompress(json.bodyBytes))
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(pins)) as? [String: Any])
        #expect((decoded["pins"] as? [Any])?.count == 1000)
        let css = try browser.get("/css/app.css", headers: [("Accept-Encoding", "gzip")])
        #expect(css.header("Content-Encoding") == "gzip")
    }

    @Test func coordinatesReadAsPrintfWould() {
        for value in [0, 35.0116, -33.92, 135.76815, -179.99995, 90, -0.00004, 0.00005, 1e-7, 12.3456789, -85.0511287798, 0.03125, 0.09375, -0.03125, 179.96875] {
            #expect(Pin.fourDecimals(value) == String(format: "%.4f", value), "\(value)")
        }
        // Values near a half of the last digit, where rounding the product alone would differ.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let value = (Double(Int.random(in: -1_800_000...1_800_000, using: &generator)) + 0.5) / 10_000
                + Double.random(in: -1e-9...1e-9, using: &generator)
            #expect(Pin.fourDecimals(value) == String(format: "%.4f", value), "\(value)")
        }
    }

    @Test func handWrittenPinJSONMatchesTheEncoder() throws {
        let pins = [Pin(id: 7, lat: 35.0116, lon: -135.5, placeName: "Quote \" back\\slash \n tab\t \u{1} é 😀 </script>",
                        status: .ready, photoCount: 3, createdAt: Date()),
                    Pin(id: 8, lat: 0, lon: 1e-7, placeName: nil, status: .new, photoCount: 0, createdAt: Date())]
        var bytes: [UInt8] = []
        PinJSON.write(pins, to: &bytes)
        let ours = try JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]]
        let theirs = try JSONSerialization.jsonObject(with: MapPage.encoder.encode(pins.map(PinJSON.init))) as? [[String: Any]]
        #expect(ours.map { NSArray(array: $0) } == theirs.map { NSArray(array: $0) })
    }

    /// An error page shows the header of whoever is signed in, not the signed-out one.
    @Test func errorPagesKnowWhoIsSignedIn() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "lost@example.org", name: "Lost Person")
        let page = try browser.get("/no-such-page")
        #expect(page.status == 404)
        #expect(page.body.contains("Lost Person"))
        #expect(page.body.contains("Sign out"))
        let anonymous = try app.browser().get("/no-such-page")
        #expect(anonymous.status == 404)
        #expect(!anonymous.body.contains("Sign out"))
        #expect(anonymous.body.contains("Sign in"))
    }
}
