import Foundation
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
import Zlib
@testable import AlbumWing
@testable import Domain

/// GET /pins.geojson, /pins.gpx and /pins.kml over loopback with a real PostgreSQL. The files are
/// also left in $TEST_SCRATCH/exports/ for Tests/Export/validate, which checks them against the
/// GPX 1.1 and OGC KML 2.2 schemas and the GeoJSON reference reader.
@Suite struct ExportTests {
    static let formats = ["geojson", "gpx", "kml"]

    /// Everything a place name can carry that breaks a careless writer: markup, entities, quotes,
    /// CDATA's end, controls XML cannot hold, CR/LF/tab, a non-character, and non-ASCII.
    static let hostile = "<script>alert(1)</script> & &amp; \"double\" 'single' ]]> \u{1}\u{8}\u{B}\u{C}\u{1F} tab\t cr\r lf\n \u{FFFE}é 😀 \\ /"

    /// The hostile name as XML 1.0 can carry it: the characters it does not allow left out.
    static var hostileInXML: String {
        String(String.UnicodeScalarView(hostile.unicodeScalars.filter {
            !(($0.value < 0x20 && ![0x9, 0xA, 0xD].contains($0.value)) || $0.value == 0xFFFE || $0.value == 0xFFFF)
        }))
    }

    func userID(_ app: TestApp, _ email: String) throws -> Int64 {
        Int64(try app.count("SELECT id FROM users WHERE email = $1", [email]))
    }

    static func exportDirectory() throws -> String {
        let base = ProcessInfo.processInfo.environment["TEST_SCRATCH"].flatMap { $0.isEmpty ? nil : $0 } ?? NSTemporaryDirectory()
        let directory = base + "/exports"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Names as Python's ElementTree (expat) reads them back: a reader that is not ours.
    func xmlNames(_ path: String, element: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", """
            import json, sys, xml.etree.ElementTree as ET
            root = ET.parse(sys.argv[1]).getroot()
            print(json.dumps([e.text or "" for e in root.iter() if e.tag.endswith("}" + sys.argv[2]) and e.text is not None]))
            """, path, element]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "ElementTree could not read \(path)")
        return try #require(JSONSerialization.jsonObject(with: data) as? [String])
    }

    func features(_ page: Browser.Page) throws -> [[String: Any]] {
        let json = try #require(JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any])
        #expect(json["type"] as? String == "FeatureCollection")
        #expect(json["crs"] == nil)
        return try #require(json["features"] as? [[String: Any]])
    }

    @Test func anExportHoldsOnlyTheOwnersPins() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-export@example.org")
        let bob = try app.signedUp(email: "bob-export@example.org")
        let annID = try userID(app, "ann-export@example.org"), bobID = try userID(app, "bob-export@example.org")
        try app.pool.query("INSERT INTO pins (user_id, lat, lon, place_name) SELECT $1, n, n, 'Ann place ' || n FROM generate_series(1, 3) n", [annID])
        try app.pool.query("INSERT INTO pins (user_id, lat, lon, place_name) SELECT $1, -n, -n, 'Bob secret ' || n FROM generate_series(1, 2) n", [bobID])
        let bobsIDs: [Int64] = try app.pool.query("SELECT id FROM pins WHERE user_id = $1", [bobID]).map { try $0.decode("id") }
        for format in Self.formats {
            let page = try ann.get("/pins.\(format)")
            #expect(page.status == 200, "\(format)")
            #expect(page.body.components(separatedBy: "Ann place ").count - 1 == 3, "\(format)")
            #expect(!page.body.contains("Bob secret"), "\(format)")
            for id in bobsIDs { #expect(!page.body.contains("/pins/\(id)\""), "\(format): Bob's pin \(id)") }
            let disposition = try #require(page.header("Content-Disposition"))
            #expect(disposition.hasPrefix("attachment; filename=\"virtual-tourist-pins-") && disposition.hasSuffix(".\(format)\""), "\(disposition)")
            #expect(page.header("Cache-Control")?.contains("no-store") == true)
        }
        #expect(try ann.get("/pins.geojson").header("Content-Type") == "application/geo+json")
        #expect(try ann.get("/pins.gpx").header("Content-Type") == "application/gpx+xml; charset=utf-8")
        #expect(try ann.get("/pins.kml").header("Content-Type") == "application/vnd.google-earth.kml+xml; charset=utf-8")
        #expect(try features(try bob.get("/pins.geojson")).count == 2)
        // Signed out: sign in first, nothing exported.
        for format in Self.formats {
            let page = try app.browser().get("/pins.\(format)")
            #expect(page.status == 303 && !page.body.contains("place"), "\(format): \(page.status)")
        }
    }

    @Test func hostileNamesRoundTripAndCoordinatesKeepSevenDecimals() throws {
        let app = try TestApp { $0.publicURL = "https://photos.example.org/" }
        let browser = try app.signedUp(email: "hostile-export@example.org")
        let id = try userID(app, "hostile-export@example.org")
        let pin: Int64 = try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, created_at)
            VALUES ($1, 12.123456789, -45.98765432, $2, '2026-03-04 05:06:07.89+00') RETURNING id
            """, [id, Self.hostile])[0].decode("id")
        // A pin with no place name is named by its coordinates; lon 180 is GPX's -180.
        try app.pool.query("INSERT INTO pins (user_id, lat, lon) VALUES ($1, -0.00000001, 180)", [id])
        // An own photo on the first pin, with a name a careless writer would break on and a
        // position of its own that no export may carry (only who may download the original sees it).
        let own: Int64 = try app.pool.query("""
            INSERT INTO own_photos (pin_id, user_id, added_by, file_name, format, original, original_bytes, display, byte_size, width, height,
                                    taken_local, lat, lon, placed)
            VALUES ($1, $2, $2, $3, 'jpeg', sha256('o'), 10, sha256('d'), 20, 4, 3, '2024-05-03 14:22:10', 48.8583701, 2.2944813, 'file')
            RETURNING id
            """, [pin, id, "\"</name>&{\"x\":1}\u{7}.jpg"])[0].decode("id")
        let directory = try Self.exportDirectory()
        var bodies: [String: String] = [:]
        for format in Self.formats {
            let page = try browser.get("/pins.\(format)")
            #expect(page.status == 200)
            bodies[format] = page.body
            try Data(page.body.utf8).write(to: URL(fileURLWithPath: "\(directory)/hostile.\(format)"))
        }

        let found = try features(try browser.get("/pins.geojson"))
        #expect(found.count == 2)
        let first = try #require(found.first)
        let properties = try #require(first["properties"] as? [String: Any])
        #expect(properties["name"] as? String == Self.hostile)
        #expect(properties["created"] as? String == "2026-03-04T05:06:07Z")
        #expect(properties["photos"] as? Int == 0)
        #expect(properties["url"] as? String == "https://photos.example.org/pins/\(pin)")
        let ownListed = try #require(properties["own_photos"] as? [[String: Any]])
        #expect(ownListed.count == 1 && ownListed[0]["file"] as? String == "\"</name>&{\"x\":1}\u{7}.jpg")
        #expect(ownListed[0]["url"] as? String == "https://photos.example.org/own-photos/\(own)" && ownListed[0]["taken"] as? String == "2024-05-03T14:22:10")
        for (format, body) in bodies { #expect(!body.contains("48.85837") && !body.contains("2.29448"), "\(format) carries an own photo's position") }
        let geometry = try #require(first["geometry"] as? [String: Any])
        #expect(geometry["type"] as? String == "Point")
        // Longitude first (RFC 7946 §3.1.1), rounded to 7 decimals, as written.
        #expect(bodies["geojson"]?.contains(#""coordinates":[-45.9876543,12.1234568]"#) == true)
        #expect(bodies["geojson"]?.contains(#""coordinates":[-180,0]"#) == true)
        #expect(bodies["gpx"]?.contains(#"<wpt lat="12.1234568" lon="-45.9876543">"#) == true)
        #expect(bodies["gpx"]?.contains(#"<wpt lat="0" lon="-180">"#) == true)
        #expect(bodies["kml"]?.contains("<coordinates>-45.9876543,12.1234568</coordinates>") == true)

        // Read back by a reader that is not ours: the name whole, less what XML 1.0 cannot hold.
        #expect(try xmlNames("\(directory)/hostile.gpx", element: "name") == ["Virtual Tourist pins", Self.hostileInXML, "-0.0000, 180.0000"])
        #expect(try xmlNames("\(directory)/hostile.kml", element: "name") == ["Virtual Tourist pins", Self.hostileInXML, "-0.0000, 180.0000"])
        #expect(try xmlNames("\(directory)/hostile.gpx", element: "desc") == ["0 photos and 1 of the map's own", "0 photos"])
        #expect(try xmlNames("\(directory)/hostile.kml", element: "when").first == "2026-03-04T05:06:07Z")
        #expect(bodies["gpx"]?.contains(#"<link href="https://photos.example.org/pins/\#(pin)">"#) == true)
        #expect(bodies["kml"]?.contains(#"<atom:link href="https://photos.example.org/pins/\#(pin)"/>"#) == true)
        #expect(bodies["gpx"]?.contains(#"xmlns="http://www.topografix.com/GPX/1/1""#) == true)
        #expect(bodies["kml"]?.contains(#"xmlns="http://www.opengis.net/kml/2.2""#) == true)
    }

    @Test func withoutPublicURLTheAlbumLinksAreRelative() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "relative-export@example.org")
        let id = try userID(app, "relative-export@example.org")
        let pin: Int64 = try app.pool.query("INSERT INTO pins (user_id, lat, lon) VALUES ($1, 1, 2) RETURNING id", [id])[0].decode("id")
        let properties = try #require(try features(try browser.get("/pins.geojson")).first?["properties"] as? [String: Any])
        #expect(properties["url"] as? String == "/pins/\(pin)")
    }

    @Test func tenThousandPinsExportEveryOneOnce() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "many-export@example.org")
        let id = try userID(app, "many-export@example.org")
        try app.pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name)
            SELECT $1, (n % 170) - 85 + n / 100000.0, (n % 359) - 179.5 + n / 1000000.0, 'Place ' || n FROM generate_series(1, 10000) n
            """, [id])
        let expected = Set(try app.pool.query("SELECT id FROM pins WHERE user_id = $1", [id]).map { (row: PostgresRow) -> Int64 in try row.decode("id") })
        #expect(expected.count == 10_000)
        let directory = try Self.exportDirectory()
        for format in Self.formats {
            let started = Date()
            let page = try browser.get("/pins.\(format)")
            let seconds = Date().timeIntervalSince(started)
            #expect(page.status == 200)
            let ids = page.body.components(separatedBy: "/pins/").dropFirst().compactMap { Int64($0.prefix { $0.isNumber }) }
            // GeoJSON names each album once; KML twice (link and description); GPX once.
            #expect(Set(ids) == expected, "\(format)")
            #expect(ids.count == (format == "kml" ? 20_000 : 10_000), "\(format)")
            // Structured-syntax types (+json, +xml) are text: a client that accepts gzip gets it.
            let gzipped = try browser.get("/pins.\(format)", headers: [("Accept-Encoding", "gzip")])
            #expect(gzipped.header("Content-Encoding") == "gzip", "\(format)")
            #expect(gzipped.header("Content-Type") == page.header("Content-Type"))
            // The same file once inflated, but for GPX's export time (its metadata), a second later.
            let inflated = String(decoding: try #require(Gzip.decompress(gzipped.bodyBytes)), as: UTF8.self)
            let exportTime = /<metadata>.*?<\/metadata>/
            let same = inflated.replacing(exportTime, with: "") == page.body.replacing(exportTime, with: "")
            #expect(same, "\(format): the gzipped export inflates to other bytes")
            print("export of 10,000 pins as \(format): \(page.body.utf8.count) bytes (\(gzipped.bodyBytes.count) gzipped) in \(String(format: "%.2f", seconds)) s")
            try Data(page.body.utf8).write(to: URL(fileURLWithPath: "\(directory)/pins-10000.\(format)"))
        }
    }

    @Test func theMapPageLinksToTheExportsWithoutScript() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "links-export@example.org")
        #expect(!(try browser.get("/").body.contains("/pins.gpx")))
        let id = try userID(app, "links-export@example.org")
        try app.pool.query("INSERT INTO pins (user_id, lat, lon) VALUES ($1, 1, 2)", [id])
        let page = try browser.get("/").body
        for format in Self.formats {
            #expect(page.contains("<a href=\"/pins.\(format)\" download>"), "\(format)")
        }
    }
}
