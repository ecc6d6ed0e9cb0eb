import Foundation
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
@testable import AlbumWing
@testable import Domain
#endif

/// /import over loopback with a real PostgreSQL: real files from other software in, a preview,
/// pins and queued albums out; hostile files refused with a clear 4xx while the server keeps serving.
@Suite struct ImportTests {
    static let fixtures = ImportReaderTests.fixtures

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: fixtures + "/" + name)))
    }

    /// The form as a browser sends it: the token, then the file.
    static func multipart(_ bytes: [UInt8], filename: String, token: String, boundary: String = "----VirtualTouristTest7MA4YWxkTrZu0gW") -> [UInt8] {
        var body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\n\(token)\r\n".utf8)
        body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(filename)\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
        body += bytes
        body += Array("\r\n--\(boundary)--\r\n".utf8)
        return body
    }

    static func upload(_ browser: Browser, _ bytes: [UInt8], filename: String, token: String? = nil) throws -> Browser.Page {
        let csrf = try token ?? (try browser.get("/import").csrfToken ?? "")
        return try browser.request("POST", "/import", body: multipart(bytes, filename: filename, token: csrf),
                                   headers: [("Content-Type", "multipart/form-data; boundary=----VirtualTouristTest7MA4YWxkTrZu0gW")])
    }

    func userID(_ app: TestApp, _ email: String) throws -> Int64 {
        Int64(try app.count("SELECT id FROM users WHERE email = $1", [email]))
    }

    @Test func theImportPageStatesTheLimitsAndTheMapLinksToIt() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let page = try ann.get("/import")
        #expect(page.status == 200)
        #expect(page.body.contains("enctype=\"multipart/form-data\"") && page.body.contains("name=\"_csrf\""))
        #expect(page.body.contains("5 MB") && page.body.contains("2,000 points") && page.body.contains("64 levels"))
        #expect(page.body.contains("DOCTYPE"))
        #expect(page.body.contains("<strong>KMZ</strong>") && page.body.contains("accept=\".geojson,.json,.gpx,.kml,.kmz,"))
        #expect(page.body.contains("You have 0 of 5000 pins, so up to 2000 can be imported now"))
        // The link is on the empty map page, and later with the exports under the list.
        #expect(try ann.get("/").body.contains("<a href=\"/import\">Import pins</a> from a GeoJSON"))
        _ = try ann.post("/pins", form: [("_csrf", page.csrfToken ?? ""), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
        #expect(try ann.get("/").body.contains("<a href=\"/import\">Import pins</a>"))
        #expect(try app.browser().get("/import").status == 303)  // signed out: to sign-in
    }

    /// The import pages through Tests/HTML/check-pages.py, with names and a file name that are markup.
    @Test func importPagesParseCleanlyWithHostileNames() throws {
        let app = try TestApp()
        let pages = try PageTests.Pages()
        let ann = try app.signedUp()
        pages.save(try ann.get("/import"), "import", forms: 2)
        func xml(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        let markup = PageTests.markup, scripts = PageTests.scripts
        let gpx = "<gpx><wpt lat=\"1\" lon=\"2\"><name>\(xml(markup))</name></wpt><wpt lat=\"3\" lon=\"4\"><name>\(xml(scripts))</name></wpt>"
            + "<wpt lat=\"95\" lon=\"1\"><name>\(xml(markup)) far</name></wpt><rte><rtept lat=\"1\" lon=\"1\"/></rte></gpx>"
        let fileName = "<i>trip & 'q'.gpx"  // no slash: a name is cut to what follows its last slash
        let location = try #require(try Self.upload(ann, Array(gpx.utf8), filename: fileName).header("Location"))
        pages.save(try ann.get(location), "import preview", expect: [markup, scripts, markup + " far", fileName], forms: 3)
        let refused = "<gpx><wpt lat=\"95\" lon=\"1\"><name>\(xml(markup))</name></wpt></gpx>"
        pages.save(try Self.upload(ann, Array(refused.utf8), filename: fileName), "import refused", status: 422, expect: [markup], forms: 2)
        pages.save(try Self.upload(ann, Array("<gpx>&\(markup);</gpx>".utf8), filename: fileName), "import, not XML", status: 422, forms: 2)
        try pages.check()
    }

    @Test func aGPXFileBecomesPinsWithTheirNamesAndQueuedAlbums() throws {
        let app = try TestApp()
        let email = "importer-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        let uploaded = try Self.upload(ann, try Self.fixture("gpxpy-unicode.gpx"), filename: "C:\\trips\\unicode.gpx")
        #expect(uploaded.status == 303, "\(uploaded)")
        let location = try #require(uploaded.header("Location"))
        #expect(location.hasPrefix("/import/"))
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 0, "nothing before Confirm")

        let preview = try ann.get(location)
        #expect(preview.status == 200)
        #expect(preview.body.contains("unicode.gpx (GPX): 6 pins to add"))
        #expect(!preview.body.contains("C:\\trips"))
        for name in ["šđčćž", "BIRDS NEST", "FAGGIO", "RAKOV12", "RAKV SKCJN", "VANSHNG LK"] { #expect(preview.body.contains(name), "\(name)") }
        #expect(preview.body.contains("45.757933259, 14.294899916"))
        #expect(!preview.body.contains("name=\"lat\""), "the points stay on the server, not in hidden fields")

        let token = try #require(preview.csrfToken)
        let confirmed = try ann.post(location + "/confirm", form: [("_csrf", token)])
        #expect(confirmed.status == 303 && confirmed.header("Location") == "/")
        let names: [String] = try app.pool.query("SELECT place_name FROM pins WHERE user_id = $1 ORDER BY id", [annID]).map { try $0.decode("place_name") }
        #expect(names == ["šđčćž", "BIRDS NEST", "FAGGIO", "RAKOV12", "RAKV SKCJN", "VANSHNG LK"])
        #expect(try app.count("SELECT count(*) FROM pin_imports WHERE user_id = $1", [annID]) == 0)
        let map = try ann.get("/")
        #expect(map.body.contains("Imported 6 pins from unicode.gpx"))
        // Each album queued exactly as a dropped pin's: the same pin state and the same one job.
        let dropped = try ann.post("/pins", form: [("_csrf", token), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
        #expect(dropped.status == 201)
        let shapes: [String] = try app.pool.query("""
            SELECT p.status || ' g' || p.generation || ' ' || string_agg(j.kind || ' ' || j.state || ' g' || j.generation, ',') AS shape
            FROM pins p LEFT JOIN album_jobs j ON j.pin_id = p.id WHERE p.user_id = $1 GROUP BY p.id ORDER BY p.id
            """, [annID]).map { try $0.decode("shape") }
        #expect(shapes.count == 7 && Set(shapes) == ["downloading g1 collection queued g1"], "\(shapes)")
        #expect(try ann.get(location).status == 404, "a confirmed import is gone")
        #expect(try ann.post(location + "/confirm", form: [("_csrf", token)]).status == 404, "and cannot add the pins twice")
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 7)
    }

    /// With the workers running, the imported pins' albums fill from the photo fixture; past the
    /// person's photo storage they stay new, as a dropped pin does.
    @Test func importedAlbumsAreCollectedAndTheStorageQuotaHolds() throws {
        let app = try TestApp(workers: true)
        let email = "collect-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        let location = try #require(try Self.upload(ann, try Self.fixture("gpxpy-gpx1.1_with_all_fields.gpx"), filename: "two.gpx").header("Location"))
        #expect(try ann.post(location + "/confirm", form: [("_csrf", try #require(try ann.get(location).csrfToken))]).status == 303)
        #expect(eventually(timeout: 60) {
            (try? app.count("SELECT count(*) FROM pins WHERE user_id = $1 AND status IN ('ready', 'empty')", [annID])) == 2
        }, "both albums were collected")
        #expect(try app.count("SELECT count(*) FROM photos WHERE user_id = $1 AND status = 'ready'", [annID]) > 0)

        let bob = try app.signedUp(email: "full-" + email)
        let bobID = try userID(app, "full-" + email)
        try app.pool.query("UPDATE users SET max_photo_bytes = 0 WHERE id = $1", [bobID])
        let full = try #require(try Self.upload(bob, try Self.fixture("libkml-ge-point.kml"), filename: "a.kml").header("Location"))
        #expect(try bob.post(full + "/confirm", form: [("_csrf", try #require(try bob.get(full).csrfToken))]).status == 303)
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1 AND status = 'new' AND generation = 0", [bobID]) == 1)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE user_id = $1", [bobID]) == 0)
    }

    @Test func kmlAndGeoJSONFilesToo() throws {
        let app = try TestApp()
        let email = "kml-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        for (file, count) in [("libkml-gnis-ak-first-101.kml", 101), ("libkml-kmlsamples.kml", 4), ("geojsonhint-good-featurecollection.geojson", 1)] {
            let before = try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID])
            let uploaded = try Self.upload(ann, try Self.fixture(file), filename: file)
            #expect(uploaded.status == 303, "\(file): \(uploaded)")
            let location = try #require(uploaded.header("Location"))
            let preview = try ann.get(location)
            #expect(preview.body.contains("\(count) pin"), "\(file)")
            let confirmed = try ann.post(location + "/confirm", form: [("_csrf", preview.csrfToken ?? "")])
            #expect(confirmed.status == 303, "\(file)")
            #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == before + count, "\(file)")
        }
        // Refused points are listed with their reasons on the preview.
        let samples = try ann.get(try #require(try Self.upload(ann, try Self.fixture("libkml-kmlsamples.kml"), filename: "s.kml").header("Location")))
        #expect(samples.body.contains("Left out (16)") && samples.body.contains("it is a LineString, not a point"))
        // An unnamed point is named after the nearest place, as a dropped pin is.
        let unnamed = try Self.upload(ann, try Self.fixture("geojsonhint-good-point-3d.geojson"), filename: "p.geojson")
        let preview = try ann.get(try #require(unnamed.header("Location")))
        #expect(preview.body.contains("named after the nearest place"))
    }

    /// A KMZ as Google Earth and My Maps write one, made by Python's zipfile: an image, a decoy
    /// .kml and the doc.kml that is read (one of its points has four values). The preview shows the
    /// pins and what was left aside; Confirm creates them.
    @Test func aKMZFileIsReadAsTheKMLInsideAndBecomesPins() throws {
        let app = try TestApp()
        let email = "kmz-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kmz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("trip.kmz").path
        let made = try AlbumZipTests.run(["python3", "-c", """
            import sys, zipfile
            kml = '''<?xml version="1.0" encoding="UTF-8"?>
            <kml xmlns="http://www.opengis.net/kml/2.2"><Document><name>Trip</name>
            <Placemark><name>Kyoto Station</name><Point><coordinates>135.7588,34.9858,0</coordinates></Point></Placemark>
            <Placemark><name>Fushimi Inari</name><Point><coordinates>135.7727,34.9671,12.5,1700000000</coordinates></Point></Placemark>
            <Placemark><name>The walk</name><LineString><coordinates>135.7588,34.9858 135.7727,34.9671</coordinates></LineString></Placemark>
            </Document></kml>'''
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                z.writestr('images/icon.png', bytes(range(256)) * 8, compress_type=zipfile.ZIP_STORED)
                z.writestr('a.kml', '<kml><Placemark><name>decoy</name><Point><coordinates>1,1</coordinates></Point></Placemark></kml>', compress_type=zipfile.ZIP_DEFLATED)
                z.writestr('doc.kml', kml, compress_type=zipfile.ZIP_DEFLATED)
            """, path])
        #expect(made.status == 0, "\(made.output)")
        let kmz = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(kmz.starts(with: [0x50, 0x4B, 0x03, 0x04]))

        let uploaded = try Self.upload(ann, kmz, filename: "trip.kmz")
        #expect(uploaded.status == 303, "\(uploaded)")
        let location = try #require(uploaded.header("Location"))
        let preview = try ann.get(location)
        #expect(preview.status == 200)
        #expect(preview.body.contains("trip.kmz (KML): 2 pins to add, 1 left out"))
        #expect(preview.body.contains("Kyoto Station") && preview.body.contains("Fushimi Inari") && !preview.body.contains("decoy"))
        #expect(preview.body.contains("34.9671, 135.7727"))
        #expect(preview.body.contains("Read from “doc.kml” in the KMZ file; 2 other files in it (images and the like) left aside."))
        #expect(preview.body.contains("it is a LineString, not a point"))
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 0, "nothing before Confirm")

        let confirmed = try ann.post(location + "/confirm", form: [("_csrf", try #require(preview.csrfToken))])
        #expect(confirmed.status == 303 && confirmed.header("Location") == "/")
        let pins: [String] = try app.pool.query("SELECT place_name || ' ' || lat || ' ' || lon AS pin FROM pins WHERE user_id = $1 ORDER BY id", [annID])
            .map { try $0.decode("pin") }
        #expect(pins == ["Kyoto Station 34.9858 135.7588", "Fushimi Inari 34.9671 135.7727"], "\(pins)")
        #expect(try ann.get("/").body.contains("Imported 2 pins from trip.kmz"))
    }

    @Test func cancelAddsNothingAndANewUploadReplacesTheLast() throws {
        let app = try TestApp()
        let email = "cancel-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        let first = try #require(try Self.upload(ann, try Self.fixture("libkml-ge-point.kml"), filename: "a.kml").header("Location"))
        let second = try #require(try Self.upload(ann, try Self.fixture("gpxpy-gpx1.1_with_all_fields.gpx"), filename: "b.gpx").header("Location"))
        #expect(try ann.get(first).status == 404)
        #expect(try app.count("SELECT count(*) FROM pin_imports WHERE user_id = $1", [annID]) == 1)
        let token = try #require(try ann.get(second).csrfToken)
        let cancelled = try ann.post(second + "/cancel", form: [("_csrf", token)])
        #expect(cancelled.status == 303 && cancelled.header("Location") == "/import")
        #expect(try ann.get("/import").body.contains("Import cancelled"))
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 0)
        #expect(try app.count("SELECT count(*) FROM pin_imports WHERE user_id = $1", [annID]) == 0)
        // An expired preview cannot be confirmed.
        let third = try #require(try Self.upload(ann, try Self.fixture("libkml-ge-point.kml"), filename: "a.kml").header("Location"))
        try app.pool.query("UPDATE pin_imports SET expires_at = now() - interval '1 second' WHERE user_id = $1", [annID])
        #expect(try ann.post(third + "/confirm", form: [("_csrf", token)]).status == 404)
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 0)
    }

    @Test func anotherPersonCannotSeeOrConfirmAnImport() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let bob = try app.signedUp()
        let location = try #require(try Self.upload(ann, try Self.fixture("libkml-ge-point.kml"), filename: "mine.kml").header("Location"))
        let token = try #require(try bob.get("/").csrfToken)
        #expect(try bob.get(location).status == 404)
        #expect(try bob.post(location + "/confirm", form: [("_csrf", token)]).status == 404)
        #expect(try bob.post(location + "/cancel", form: [("_csrf", token)]).status == 404)
        #expect(try app.count("SELECT count(*) FROM pins") == 0)
        #expect(try ann.get(location).status == 200)
    }

    @Test func theUploadNeedsTheCSRFToken() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        #expect(try Self.upload(ann, try Self.fixture("libkml-ge-point.kml"), filename: "a.kml", token: "").status == 403)
        #expect(try Self.upload(ann, try Self.fixture("libkml-ge-point.kml"), filename: "a.kml", token: String(repeating: "A", count: 43)).status == 403)
        #expect(try app.count("SELECT count(*) FROM pin_imports") == 0)
    }

    @Test func thePinQuotaHoldsForImports() throws {
        let app = try TestApp()
        let email = "quota-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        try app.pool.query("UPDATE users SET max_pins = 5 WHERE id = $1", [annID])
        let refused = try Self.upload(ann, try Self.fixture("gpxpy-unicode.gpx"), filename: "six.gpx")
        #expect(refused.status == 422)
        #expect(refused.body.contains("room for 5 more pins"))
        // Room at upload, none left at Confirm: nothing is added.
        let location = try #require(try Self.upload(ann, try Self.fixture("gpxpy-gpx1.1_with_all_fields.gpx"), filename: "two.gpx").header("Location"))
        // Pins count against who dropped them (pins.dropped_by, migration 0120).
        try app.pool.query("INSERT INTO pins (user_id, lat, lon, dropped_by) SELECT $1, n, n, $1 FROM generate_series(1, 4) n", [annID])
        let preview = try ann.get(location)
        #expect(preview.body.contains("room for 1 more pins") && !preview.body.contains("id=\"import-confirm\""))
        let confirmed = try ann.post(location + "/confirm", form: [("_csrf", preview.csrfToken ?? "")])
        #expect(confirmed.status == 422 && confirmed.body.contains("limit of 5 pins"))
        #expect(try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [annID]) == 4)
    }

    // MARK: Hostile files

    /// A TCP listener on loopback that must never see a connection.
    final class Tripwire {
        let fd: Int32
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            guard bound, listen(fd, 16) == 0 else {
                close(fd)
                throw Browser.Failure(description: "tripwire: errno \(errno)")
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        /// Connections that arrived (and were completed by the kernel) so far.
        func connections() -> Int {
            var count = 0
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return count }
                close(client)
                count += 1
            }
        }

        deinit { close(fd) }
    }

    /// Each hostile file: a 4xx with a sentence that says what was wrong, and the server serving
    /// the next request.
    @Test func hostileFilesAreRefusedClearlyAndTheServerKeepsServing() throws {
        let app = try TestApp()
        let email = "hostile-\(UUID().uuidString.prefix(6))@example.org"
        let ann = try app.signedUp(email: email)
        let annID = try userID(app, email)
        let tripwire = try Tripwire()
        let laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE gpx [\n<!ENTITY lol \"lol\">\n"
            + (1...9).map { "<!ENTITY lol\($0) \"" + String(repeating: "&lol\($0 == 1 ? "" : String($0 - 1));", count: 10) + "\">\n" }.joined()
            + "]>\n<gpx><wpt lat=\"1\" lon=\"2\"><name>&lol9;</name></wpt></gpx>\n"
        let deepXML = String(repeating: "<gpx>", count: 100_000)
        let manyPoints = "{\"type\":\"MultiPoint\",\"coordinates\":[" + Array(repeating: "[1.5,2.5]", count: 100_000).joined(separator: ",") + "]}"
        typealias Zip = KMZImportTests.TestZip
        let bomb = Zip.archive([Zip.Entry(name: "doc.kml", data: KMZImportTests.bomb, method: 8, crc: 0, size: UInt32(KMZImportTests.zeros))])
        let lyingBomb = Zip.archive([Zip.Entry(name: "doc.kml", data: KMZImportTests.bomb, method: 8, crc: 0, size: UInt32(PinImport.Limits.fileBytes))])
        var locked = Zip.deflated("doc.kml", KMZImportTests.kml)
        locked.flags = 1
        let encrypted = Zip.archive([locked])
        let nested = Zip.archive([Zip.stored("doc.kml", Zip.archive([Zip.deflated("doc.kml", KMZImportTests.kml)]))])
        let cases: [(name: String, bytes: [UInt8], status: Int, says: String)] = [
            ("billion-laughs.gpx", Array(laughs.utf8), 422, "DOCTYPE"),
            ("xxe-file.gpx", Array("<?xml version=\"1.0\"?><!DOCTYPE gpx [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]><gpx><wpt lat=\"1\" lon=\"2\"><name>&xxe;</name></wpt></gpx>".utf8), 422, "DOCTYPE"),
            ("xxe-http.kml", Array("<?xml version=\"1.0\"?><!DOCTYPE kml SYSTEM \"http://127.0.0.1:\(tripwire.port)/kml.dtd\"><kml><Placemark><name>x</name></Placemark></kml>".utf8), 422, "DOCTYPE"),
            ("xxe-parameter.kml", Array("<!DOCTYPE kml [<!ENTITY % remote SYSTEM \"http://127.0.0.1:\(tripwire.port)/p\">%remote;]><kml/>".utf8), 422, "DOCTYPE"),
            ("undefined-entity.gpx", Array("<gpx><wpt lat=\"1\" lon=\"2\"><name>&xxe;</name></wpt></gpx>".utf8), 422, "not defined"),
            ("deep.gpx", Array(deepXML.utf8), 422, "nested more than 64"),
            ("deep.geojson", Array(("{\"type\":\"Point\",\"coordinates\":" + String(repeating: "[", count: 100_000)).utf8), 422, "nested more than 64"),
            ("hundred-thousand-points.geojson", Array(manyPoints.utf8), 422, "more than 2,000 points"),
            ("nan.geojson", Array("{\"type\":\"Point\",\"coordinates\":[NaN, 1]}".utf8), 422, "not valid JSON"),
            ("truncated.gpx", Array(try Self.fixture("gpxpy-unicode.gpx").prefix(700)), 422, "ends inside"),
            ("truncated.geojson", Array(try Self.fixture("geojsonhint-good-featurecollection.geojson").prefix(300)), 422, "not valid JSON"),
            ("photo.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13], 422, "not a GeoJSON, GPX, KML or KMZ file"),
            ("page.html", Array("<!doctype html><html><body>hi</body></html>".utf8), 422, "DOCTYPE"),
            ("feed.xml", Array("<rss><channel/></rss>".utf8), 422, "neither GPX"),
            ("places.kmz", [0x50, 0x4B, 0x03, 0x04, 0x14, 0, 0, 0], 422, "could not be read: it is damaged"),
            ("bomb.kmz", bomb, 422, "larger than 5 MB uncompressed"),
            ("lying-bomb.kmz", lyingBomb, 422, "its header says"),
            ("encrypted.kmz", encrypted, 422, "is encrypted"),
            ("nested.kmz", nested, 422, "is not KML"),
            ("no-kml.kmz", try Self.fixture("libkml-nokml.kmz"), 422, "holds no .kml file"),
            ("bad-too-large.kmz", try Self.fixture("libkml-bad-too-large.kmz"), 422, "larger than 5 MB uncompressed"),
            ("overflow.kmz", try Self.fixture("libkml-overflow_bad_offset.kmz"), 422, "is damaged"),
            ("empty.gpx", [], 422, "empty"),
            ("only-bad-points.gpx", Array("<gpx><wpt lat=\"NaN\" lon=\"1\"/><wpt lat=\"91\" lon=\"1\"/><wpt lat=\"1\" lon=\"-181\"/><wpt lat=\"1e400\" lon=\"1\"/><wpt lat=\"1\" lon=\"inf\"/></gpx>".utf8), 422, "None of its points"),
            ("too-large.gpx", Array(repeating: UInt8(ascii: " "), count: PinImport.Limits.fileBytes + 1), 413, "up to 5 MB"),
        ]
        for hostile in cases {
            let page = try Self.upload(ann, hostile.bytes, filename: hostile.name)
            #expect(page.status == hostile.status, "\(hostile.name): \(page.status)")
            #expect(page.body.contains(hostile.says), "\(hostile.name): \(page.body.firstMatch(of: /id="import-error">\s*<p>([^<]*<[^<]*<[^<]*)/)?.1 ?? "")")
            #expect(page.body.contains("What can be imported"), "\(hostile.name): the page says what is accepted")
            #expect(!page.body.contains("root:x:0"), "\(hostile.name)")
            #expect(try app.browser().get("/healthz").body == "ok \(Version.number)", "\(hostile.name): the server keeps serving")
        }
        #expect(tripwire.connections() == 0, "an external entity made the server connect")
        #expect(try app.count("SELECT count(*) FROM pin_imports WHERE user_id = $1", [annID]) == 0)

        // Out-of-range and non-numeric points among good ones: listed with their reasons, the good one kept.
        let mixed = "<gpx><wpt lat=\"NaN\" lon=\"1\"><name>nan</name></wpt><wpt lat=\"91\" lon=\"1\"><name>north</name></wpt><wpt lat=\"1\" lon=\"-181\"><name>west</name></wpt><wpt lat=\"1e400\" lon=\"1\"><name>huge</name></wpt><wpt lat=\"10\" lon=\"20\"><name>good</name></wpt></gpx>"
        let location = try #require(try Self.upload(ann, Array(mixed.utf8), filename: "mixed.gpx").header("Location"))
        let preview = try ann.get(location)
        #expect(preview.body.contains("1 pin to add, 4 left out"))
        for reason in ["its latitude “NaN” is not a number", "its latitude 91.0 is outside −90…90", "its longitude -181.0 is outside −180…180", "its coordinates are not finite numbers"] {
            #expect(preview.body.contains(HTML.escape(reason)), "\(reason)")
        }
    }

    /// A 100 MB upload is refused from its Content-Length, before its body is read, and a body past
    /// the route's limit for any other path is refused at the server's own limit.
    @Test func aHundredMegabyteUploadIsRefusedBeforeItsBody() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let token = try #require(try ann.get("/import").csrfToken)
        for (path, length) in [("/import", 100 * 1024 * 1024), ("/import", PinImport.Limits.fileBytes + 64 * 1024 + 1), ("/pins", 2 * 1024 * 1024)] {
            let fd = try connectLoopback(port: app.port, receiveTimeout: 30)
            defer { close(fd) }
            let cookies = ann.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
            let head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookies)\r\nX-CSRF-Token: \(token)\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: \(length)\r\n\r\n"
            _ = head.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            // Only the head was sent: the answer comes without the body.
            var response: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                response += buffer[0..<n]
            }
            let text = String(decoding: response, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 413"), "\(path) \(length): \(text.prefix(80))")
            if path == "/import" { #expect(text.contains("files of up to 5 MB can be imported"), "\(text.suffix(600))") }
        }
        #expect(try app.browser().get("/healthz").body == "ok \(Version.number)")
        // A million points would need more than 5 MB: refused as too large.
        let million = "{\"type\":\"MultiPoint\",\"coordinates\":[" + Array(repeating: "[0,0]", count: 1_000_000).joined(separator: ",") + "]}"
        let fd = try connectLoopback(port: app.port, receiveTimeout: 30)
        defer { close(fd) }
        let body = Self.multipart(Array(million.utf8), filename: "million.geojson", token: token)
        let cookies = ann.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let head = "POST /import HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookies)\r\nContent-Type: multipart/form-data; boundary=----VirtualTouristTest7MA4YWxkTrZu0gW\r\nContent-Length: \(body.count)\r\n\r\n"
        _ = head.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(String(decoding: buffer[0..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 413"))
    }

    @Test func aBrokenOrWrongFormIsRefused() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let token = try #require(try ann.get("/import").csrfToken)
        let urlencoded = try ann.post("/import", form: [("_csrf", token), ("file", "<gpx/>")])
        #expect(urlencoded.status == 415 && urlencoded.body.contains("multipart/form-data"))
        var cut = Self.multipart(Array("<gpx/>".utf8), filename: "a.gpx", token: token)
        cut.removeLast(10)
        // The token part is whole, so the request passes the CSRF check and the file part is refused.
        let broken = try ann.request("POST", "/import", body: cut, headers: [("Content-Type", "multipart/form-data; boundary=----VirtualTouristTest7MA4YWxkTrZu0gW"), ("X-CSRF-Token", token)])
        #expect(broken.status == 400 && broken.body.contains("closing boundary"))
        let noFile = "--b\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\n\(token)\r\n--b--\r\n"
        let missing = try ann.request("POST", "/import", body: Array(noFile.utf8), headers: [("Content-Type", "multipart/form-data; boundary=b")])
        #expect(missing.status == 422 && missing.body.contains("No file was chosen"))
    }
}
