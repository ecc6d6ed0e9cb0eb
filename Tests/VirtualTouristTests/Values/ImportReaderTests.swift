import Foundation
import HTTPServer
import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The import's readers on bytes in memory: the XML reader, the GeoJSON, GPX and KML readers, the
/// multipart parser. The real files of other software are compared with what Python's own XML and
/// JSON readers find in them, so our reader is checked against one that is not ours.
@Suite struct ImportReaderTests {
    static let fixtures = TestApp.repositoryRoot + "/Tests/Fixtures/import"

    func events(_ xml: String) throws -> [String] {
        var out: [String] = []
        try XMLReader.read(Array(xml.utf8)) { event in
            switch event {
            case .start(let element):
                let attributes = element.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                out.append("<\(element.namespace)|\(element.localName)\(attributes.isEmpty ? "" : " " + attributes)>")
            case .end(let name): out.append("</\(name)>")
            case .text(let text): out.append("'\(text)'")
            }
        }
        return out
    }

    func refusal(_ xml: String, maxDepth: Int = 64) -> String? {
        do {
            try XMLReader.read(Array(xml.utf8), maxDepth: maxDepth) { _ in }
            return nil
        } catch {
            return (error as? XMLReader.Failure)?.description ?? "\(error)"
        }
    }

    @Test func theXMLReaderReadsElementsAttributesNamespacesTextCDATAAndReferences() throws {
        let xml = """
            \u{FEFF}<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <!-- a comment -->
            <?xml-stylesheet href="a.css"?>
            <kml xmlns="http://www.opengis.net/kml/2.2" xmlns:gx='http://www.google.com/kml/ext/2.2'>
            <gx:Tour a="1 &amp; 2" b='&lt;&gt;&quot;&apos;' c="x\ty"/><name>A &amp; B &#233;&#xE9; &#x1F600;<![CDATA[<not markup> & ]]>end</name><!-- c --><?pi data?>
            </kml>
            """
        let seen = try events(String(xml.dropFirst()))
        #expect(seen == [
            "<http://www.opengis.net/kml/2.2|kml>", "'\n'",
            "<http://www.google.com/kml/ext/2.2|Tour a=1 & 2,b=<>\"',c=x y>", "</Tour>",
            "<http://www.opengis.net/kml/2.2|name>", "'A & B éé 😀<not markup> & end'", "</name>",
            "'\n'", "</kml>",
        ])
    }

    @Test func theXMLReaderRefusesDTDsEntitiesAndMalformedDocuments() {
        let laughs = "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;\">]><lolz>&lol2;</lolz>"
        #expect(refusal(laughs)?.contains("DOCTYPE") == true)
        #expect(refusal("<!DOCTYPE gpx SYSTEM \"file:///etc/passwd\"><gpx/>")?.contains("DOCTYPE") == true)
        #expect(refusal("<gpx>&xxe;</gpx>")?.contains("not defined") == true)
        #expect(refusal("<gpx><!ENTITY x \"y\"></gpx>")?.contains("ENTITY") == true)
        #expect(refusal("<gpx><a></b></gpx>")?.contains("</b> ends <a>") == true)
        #expect(refusal("<gpx><wpt lat=\"1\"")?.contains("ends") == true)
        #expect(refusal("<gpx><wpt>")?.contains("ends inside <wpt>") == true)
        #expect(refusal("<gpx/><gpx/>")?.contains("second root") == true)
        #expect(refusal("<x:gpx/>")?.contains("not declared") == true)
        #expect(refusal("<gpx a=\"1\" a=\"2\"/>")?.contains("twice") == true)
        #expect(refusal("<gpx>&#0;</gpx>")?.contains("not a character") == true)
        #expect(refusal("<gpx>&#xD800;</gpx>")?.contains("not a character") == true)
        #expect(refusal("<gpx>a & b</gpx>")?.contains("bare “&”") == true)
        #expect(refusal("<gpx>\u{1}</gpx>")?.contains("control character") == true)
        #expect(refusal("<gpx a=1/>")?.contains("quotes") == true)
        #expect(refusal("text<gpx/>")?.contains("outside the root") == true)
        #expect(refusal("<?xml version=\"1.0\" encoding=\"Shift_JIS\"?><gpx/>")?.contains("Shift_JIS") == true)
        #expect(refusal("<gpx><!-- never closed </gpx>")?.contains("comment") == true)
        #expect(refusal("") != nil)
        let deep = String(repeating: "<a>", count: 65) + String(repeating: "</a>", count: 65)
        #expect(refusal(deep)?.contains("more than 64 deep") == true)
        #expect(refusal(String(repeating: "<a>", count: 64) + String(repeating: "</a>", count: 64)) == nil)
    }

    @Test func latin1DocumentsAreReadAsLatin1() throws {
        var bytes = Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><gpx><wpt lat=\"1\" lon=\"2\"><name>Z".utf8)
        bytes += [0xFC, 0x72, 0x69, 0x63, 0x68]  // "ürich" in Latin-1
        bytes += Array("</name></wpt></gpx>".utf8)
        let file = try PinImport.read(bytes)
        #expect(file.points == [PinImport.Point(name: "Zürich", lat: 1, lon: 2)])
    }

    @Test func numbersAreDecimalsInRange() {
        #expect(ImportNumber.decimal("35.01") == 35.01)
        #expect(ImportNumber.decimal(" -1.5e2 ") == -150)
        for text in ["NaN", "nan", "inf", "-Infinity", "0x1p3", "", "1,5", "--1", "e"] {
            #expect(ImportNumber.decimal(text) == nil, "\(text)")
        }
        #expect(ImportNumber.point(name: nil, lat: "1e400", lon: "0") == .failure("its coordinates are not finite numbers"))
        #expect(ImportNumber.point(name: nil, lat: "90.0001", lon: "0") == .failure("its latitude 90.0001 is outside −90…90"))
        #expect(ImportNumber.point(name: nil, lat: "0", lon: "-180.5") == .failure("its longitude -180.5 is outside −180…180"))
        #expect(ImportNumber.point(name: nil, lat: "NaN", lon: "0") == .failure("its latitude “NaN” is not a number"))
        #expect(ImportNumber.point(name: " a\u{0}\n b ", lat: "-90", lon: "180") == .success(PinImport.Point(name: "a b", lat: -90, lon: 180)))
        let long = String(repeating: "é", count: 500)
        #expect(PinImport.cleanName(long)?.count == PinImport.Limits.nameCharacters)
    }

    @Test func geoJSONPointsAndRefusals() throws {
        let json = """
            {"type":"FeatureCollection","features":[
             {"type":"Feature","properties":{"name":"Kyoto"},"geometry":{"type":"Point","coordinates":[135.7681,35.0116]}},
             {"type":"Feature","properties":{"title":"Two"},"geometry":{"type":"MultiPoint","coordinates":[[1,2],[3,4,5]]}},
             {"type":"Feature","properties":null,"geometry":{"type":"LineString","coordinates":[[1,2],[3,4]]}},
             {"type":"Feature","properties":{"name":"North"},"geometry":{"type":"Point","coordinates":[0,91]}},
             {"type":"Feature","properties":{"name":"Bool"},"geometry":{"type":"Point","coordinates":[true,1]}},
             {"type":"Feature","properties":{},"geometry":null},
             {"type":"Feature","geometry":{"type":"Point","coordinates":[1]}},
             "not a feature"
            ]}
            """
        let file = try PinImport.read(Array(json.utf8))
        #expect(file.format == .geoJSON)
        #expect(file.points == [PinImport.Point(name: "Kyoto", lat: 35.0116, lon: 135.7681),
                                PinImport.Point(name: "Two", lat: 2, lon: 1), PinImport.Point(name: "Two", lat: 4, lon: 3)])
        #expect(file.refused.map(\.label) == ["feature 3", "North", "Bool", "feature 6", "feature 7", "feature 8"])
        #expect(file.refused[0].reason.contains("LineString"))
        #expect(file.refused[1].reason.contains("latitude 91"))
        #expect(file.refused[2].reason.contains("not numbers"))
    }

    @Test func geoJSONThatIsNotJSONOrTooDeepIsRefused() {
        func reason(_ text: String) -> String? {
            do { _ = try PinImport.read(Array(text.utf8)); return nil } catch { return error.description }
        }
        #expect(reason(#"{"type":"Point","coordinates":[NaN,1]}"#)?.contains("not valid JSON") == true)
        #expect(reason(#"{"type":"Point","coordinates":[1e400,1]}"#)?.contains("not valid JSON") == true)
        #expect(reason(String(repeating: "[", count: 100_000))?.contains("nested more than 64") == true)
        #expect(reason(#"{"type":"Point","coordinates":[1,2],"x":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#) == nil)
        #expect(reason(#"{"type":"Topology"}"#)?.contains("not a GeoJSON type") == true)
        #expect(reason(#"{"a":1}"#)?.contains("“type”") == true)
        #expect(reason("hello")?.contains("neither") == true)
        #expect(reason("PK\u{3}\u{4}rest")?.contains("zip") == true)
        #expect(reason("")?.contains("empty") == true)
        #expect(reason("<html><body/></html>")?.contains("<html>") == true)
    }

    @Test func moreThanTheLimitOfPointsRefusesTheWholeFile() throws {
        func multiPoint(_ n: Int) -> [UInt8] {
            Array(("{\"type\":\"MultiPoint\",\"coordinates\":[" + Array(repeating: "[1,2]", count: n).joined(separator: ",") + "]}").utf8)
        }
        #expect(try PinImport.read(multiPoint(PinImport.Limits.points)).points.count == PinImport.Limits.points)
        #expect(throws: PinImport.Refusal.self) { try PinImport.read(multiPoint(PinImport.Limits.points + 1)) }
        let waypoints = "<gpx>" + String(repeating: "<wpt lat=\"1\" lon=\"2\"/>", count: PinImport.Limits.points + 1) + "</gpx>"
        #expect(throws: PinImport.Refusal.self) { try PinImport.read(Array(waypoints.utf8)) }
    }

    @Test func gpxKeepsWaypointsAndCountsRouteAndTrackPoints() throws {
        let gpx = """
            <gpx xmlns="http://www.topografix.com/GPX/1/1" version="1.1">
            <wpt lat="12.5" lon="-45"><name>Camp</name><extensions><name>not this</name></extensions></wpt>
            <wpt lat="NaN" lon="1"><name>Bad</name></wpt>
            <wpt lon="1"/>
            <rte><rtept lat="1" lon="1"/><rtept lat="2" lon="2"/></rte>
            <trk><trkseg><trkpt lat="1" lon="1"/></trkseg></trk>
            </gpx>
            """
        let file = try PinImport.read(Array(gpx.utf8))
        #expect(file.format == .gpx)
        #expect(file.points == [PinImport.Point(name: "Camp", lat: 12.5, lon: -45)])
        #expect(file.refused == [PinImport.Refused(label: "Bad", reason: "its latitude “NaN” is not a number"),
                                 PinImport.Refused(label: "waypoint 3", reason: "it has no latitude")])
        #expect(file.notes == ["2 route points left aside: only waypoints become pins.", "1 track point left aside: only waypoints become pins."])
    }

    @Test func kmlReadsPointsOfPlacemarksAndRefusesOtherShapes() throws {
        let kml = """
            <kml:kml xmlns:kml="http://www.opengis.net/kml/2.2"><kml:Document><kml:Folder>
            <kml:Placemark><kml:name>One</kml:name><kml:Point><kml:coordinates>
              135.5,35.25,0
            </kml:coordinates></kml:Point></kml:Placemark>
            <kml:Placemark><kml:name>Multi</kml:name><kml:MultiGeometry><kml:Point><kml:coordinates>1,2</kml:coordinates></kml:Point>
            <kml:Point><kml:coordinates>3,4</kml:coordinates></kml:Point><kml:LineString><kml:coordinates>1,2 3,4</kml:coordinates></kml:LineString></kml:MultiGeometry></kml:Placemark>
            <kml:Placemark><kml:name>Line</kml:name><kml:LineString><kml:coordinates>1,2 3,4</kml:coordinates></kml:LineString></kml:Placemark>
            <kml:Placemark><kml:Point><kml:coordinates>200,1</kml:coordinates></kml:Point></kml:Placemark>
            </kml:Folder></kml:Document></kml:kml>
            """
        let file = try PinImport.read(Array(kml.utf8))
        #expect(file.format == .kml)
        #expect(file.points == [PinImport.Point(name: "One", lat: 35.25, lon: 135.5), PinImport.Point(name: "Multi", lat: 2, lon: 1),
                                PinImport.Point(name: "Multi", lat: 4, lon: 3)])
        #expect(file.refused == [PinImport.Refused(label: "Line", reason: "it is a LineString, not a point (only points become pins)"),
                                 PinImport.Refused(label: "placemark 4", reason: "its longitude 200.0 is outside −180…180")])
    }

    @Test func aPointWithMoreThanThreeValuesIsLongitudeLatitudeAndTheRestIgnored() throws {
        func read(_ coordinates: String) throws -> PinImport {
            try PinImport.read(Array("<kml><Placemark><name>p</name><Point><coordinates>\(coordinates)</coordinates></Point></Placemark></kml>".utf8))
        }
        #expect(try read("135.5,35.25,0,1700000000").points == [PinImport.Point(name: "p", lat: 35.25, lon: 135.5)])
        #expect(try read(" -70.1,-33.4,10,2,3,4 ").points == [PinImport.Point(name: "p", lat: -33.4, lon: -70.1)])
        #expect(try read("1,2,,").points == [PinImport.Point(name: "p", lat: 2, lon: 1)])
        #expect(try read("1,2,x,y").points == [PinImport.Point(name: "p", lat: 2, lon: 1)])
        #expect(try read("135.5").refused == [PinImport.Refused(label: "p", reason: "its coordinates are not “longitude,latitude[,altitude]”")])
        #expect(try read("a,35,0,0").refused == [PinImport.Refused(label: "p", reason: "its longitude “a” is not a number")])
        #expect(try read("1,NaN,0,0").refused == [PinImport.Refused(label: "p", reason: "its latitude “NaN” is not a number")])
        #expect(try read("200,1,0,0").refused == [PinImport.Refused(label: "p", reason: "its longitude 200.0 is outside −180…180")])
        #expect(try read("1,95,0,0").refused == [PinImport.Refused(label: "p", reason: "its latitude 95.0 is outside −90…90")])
        #expect(try read("1,2,0,0 3,4,0,0").refused == [PinImport.Refused(label: "p", reason: "its point has 2 coordinate tuples, not one")])
    }

    /// Each real file as Python reads it: the points (name, lat, lon) in order.
    func pythonPoints(_ path: String) throws -> [PinImport.Point] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", """
            import json, sys, xml.etree.ElementTree as ET
            path = sys.argv[1]
            out = []
            def local(tag): return tag.rsplit('}', 1)[-1]
            def child(e, name): return next((c for c in e if local(c.tag) == name), None)
            if path.endswith('.geojson'):
                doc = json.load(open(path, encoding='utf-8'))
                def geometry(g, name):
                    if g is None: return
                    if g['type'] == 'Point': out.append((name, g['coordinates']))
                    elif g['type'] == 'MultiPoint': out.extend((name, c) for c in g['coordinates'])
                    elif g['type'] == 'GeometryCollection':
                        for m in g['geometries']: geometry(m, name)
                features = doc['features'] if doc['type'] == 'FeatureCollection' else [doc] if doc['type'] == 'Feature' else None
                if features is None: geometry(doc, None)
                else:
                    for f in features: geometry(f['geometry'], (f.get('properties') or {}).get('name'))
                out = [{'name': n, 'lat': c[1], 'lon': c[0]} for n, c in out]
            else:
                root = ET.parse(path).getroot()
                if local(root.tag) == 'gpx':
                    for w in root:
                        if local(w.tag) != 'wpt': continue
                        n = child(w, 'name')
                        out.append({'name': n.text if n is not None else None, 'lat': float(w.get('lat')), 'lon': float(w.get('lon'))})
                else:
                    for p in root.iter():
                        if local(p.tag) != 'Placemark': continue
                        n = child(p, 'name')
                        for point in p.iter():
                            if local(point.tag) != 'Point': continue
                            lon, lat = child(point, 'coordinates').text.strip().split(',')[:2]
                            out.append({'name': n.text if n is not None else None, 'lat': float(lat), 'lon': float(lon)})
            print(json.dumps(out))
            """, path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "Python could not read \(path)")
        let list = try #require(JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        return list.map { PinImport.Point(name: PinImport.cleanName($0["name"] as? String), lat: ($0["lat"] as? NSNumber)?.doubleValue ?? .nan,
                                          lon: ($0["lon"] as? NSNumber)?.doubleValue ?? .nan) }
    }

    @Test(arguments: [
        ("gpxpy-gpx1.0_with_all_fields.gpx", 2), ("gpxpy-gpx1.1_with_all_fields.gpx", 2), ("gpxpy-unicode.gpx", 6),
        ("gpxpy-unicode_with_bom.gpx", 1), ("gpxpy-route.gpx", 0), ("gpxpy-gpx-with-node-with-comments.gpx", 0),
        ("libkml-ge-point.kml", 1), ("libkml-kmlsamples.kml", 4), ("libkml-gnis-ak-first-101.kml", 101), ("libkml-badcoords.kml", 0),
        ("geojsonhint-good-featurecollection.geojson", 1), ("geojsonhint-good-multipoint.geojson", 1),
        ("geojsonhint-good-geometrycollection.geojson", 1), ("geojsonhint-good-point-3d.geojson", 1), ("geojsonhint-nullproperties.geojson", 1),
    ])
    func realFilesReadAsPythonReadsThem(name: String, points: Int) throws {
        let path = Self.fixtures + "/" + name
        let file = try PinImport.read(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(file.points.count == points, "\(name)")
        #expect(file.points == (try pythonPoints(path)), "\(name)")
    }

    @Test func realFilesSayWhatTheyLeftAside() throws {
        func read(_ name: String) throws -> PinImport {
            try PinImport.read(Array(try Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/" + name))))
        }
        #expect(try read("gpxpy-route.gpx").notes.first?.hasPrefix("55 route points") == true)
        #expect(try read("gpxpy-unicode.gpx").points.first?.name == "šđčćž")
        #expect(try read("libkml-badcoords.kml").refused == [PinImport.Refused(label: "Continental Convergent Boundary",
                                                                               reason: "it is a LineString, not a point (only points become pins)")])
        let samples = try read("libkml-kmlsamples.kml")
        #expect(samples.refused.allSatisfy { $0.reason.contains("not a point") || $0.reason.contains("has no point") })
    }

    /// Every prefix of real files, and real files with bytes changed (a fixed-seed generator, so a
    /// failure repeats), either read or are refused with a sentence: never a crash, never a hang.
    @Test func cutAndDamagedFilesAreReadOrRefused() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        let interesting: [UInt8] = Array("<>&;\"'/=![]{},:-.0123456789eE#x?\u{0}".utf8)
        for name in ["gpxpy-unicode.gpx", "libkml-ge-point.kml", "geojsonhint-good-featurecollection.geojson"] {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/" + name)))
            var outcomes = (read: 0, refused: 0)
            func attempt(_ input: [UInt8]) {
                do {
                    let file = try PinImport.read(input)
                    #expect(file.points.allSatisfy { $0.lat.isFinite && $0.lon.isFinite && abs($0.lat) <= 90 && abs($0.lon) <= 180 })
                    outcomes.read += 1
                } catch {
                    #expect(!error.description.isEmpty)
                    outcomes.refused += 1
                }
            }
            for length in stride(from: 0, through: bytes.count, by: 3) { attempt(Array(bytes.prefix(length))) }
            for _ in 0..<300 {
                var damaged = bytes
                for _ in 0...(next() % 4) {
                    let at = Int(next() % UInt64(damaged.count))
                    damaged[at] = interesting[Int(next() % UInt64(interesting.count))]
                }
                attempt(damaged)
            }
            #expect(outcomes.read > 0 && outcomes.refused > 0, "\(name): \(outcomes)")
        }
    }

    @Test func multipartFormsAreParsedWithinBounds() throws {
        func request(_ body: String, type: String = "multipart/form-data; boundary=\"b-1\"") -> HTTPRequest {
            HTTPRequest(method: "POST", target: "/import", headers: ["Content-Type": type], body: Array(body.utf8))
        }
        let body = "preamble\r\n--b-1\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\ntoken\r\n--b-1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".gpx\"\r\nContent-Type: application/gpx+xml\r\n\r\n<gpx>\r\n--b-</gpx>\r\n--b-1--\r\nepilogue"
        // In memory, and spooled to a file as photo uploads are (the same parts, read from the file).
        var spooled = request(body)
        spooled.spooled = try SpooledBody.holding(Array(body.utf8), directory: NSTemporaryDirectory())
        spooled.body = []
        for form in [try #require(try MultipartForm(request(body))), try #require(try MultipartForm(spooled))] {
            #expect(form.value("_csrf") == "token")
            let file = try #require(form.part("file"))
            #expect(file.filename == "a \"b\".gpx")
            #expect(file.contentType == "application/gpx+xml")
            #expect(String(decoding: form.bytes(file), as: UTF8.self) == "<gpx>\r\n--b-</gpx>")
        }
        #expect(try MultipartForm(request("a=b", type: "application/x-www-form-urlencoded")) == nil)
        #expect(throws: MultipartForm.Failure.self) { try MultipartForm(request("--b-1\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ncut short")) }
        #expect(throws: MultipartForm.Failure.self) { try MultipartForm(request(body, type: "multipart/form-data")) }
        let many = String(repeating: "--b-1\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n", count: 9) + "--b-1--"
        #expect(throws: MultipartForm.Failure.self) { try MultipartForm(request(many)) }
    }
}
