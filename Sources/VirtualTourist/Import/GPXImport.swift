import Foundation

/// GPX 1.0 and 1.1 (topografix.com/GPX): waypoints (`<wpt lat lon><name>`) become pins. Route and
/// track points are the shape of a journey, not places someone marked, so they are counted and
/// left aside, and the preview says so.
struct GPXImport: XMLImportReader {
    private var file = PinImport(format: .gpx)
    /// Elements open from the root down (local names).
    private var path: [String] = []
    private var waypoint: (lat: String?, lon: String?, name: String?)?
    private var nameText: String?
    private var waypoints = 0
    private var routePoints = 0
    private var trackPoints = 0

    mutating func handle(_ event: XMLReader.Event) throws(PinImport.Refusal) {
        switch event {
        case .start(let element):
            path.append(element.localName)
            switch (path.count, element.localName) {
            case (2, "wpt"): waypoint = (element.attributes["lat"], element.attributes["lon"], nil)
            case (3, "name") where waypoint != nil: nameText = ""
            case (_, "rtept"): routePoints += 1
            case (_, "trkpt"): trackPoints += 1
            default: break
            }
        case .text(let text):
            if nameText != nil, path.count == 3 { nameText! += text }
        case .end(let localName):
            if path.count == 3, localName == "name", let name = nameText {
                waypoint?.name = name
                nameText = nil
            }
            if path.count == 2, localName == "wpt", let found = waypoint {
                waypoints += 1
                let label = PinImport.cleanName(found.name) ?? "waypoint \(waypoints)"
                try file.add(ImportNumber.point(name: found.name, lat: found.lat, lon: found.lon), label: label)
                waypoint = nil
            }
            path.removeLast()
        }
    }

    var result: PinImport {
        var result = file
        if routePoints > 0 { result.notes.append("\(ImportNumber.count(routePoints, "route point")) left aside: only waypoints become pins.") }
        if trackPoints > 0 { result.notes.append("\(ImportNumber.count(trackPoints, "track point")) left aside: only waypoints become pins.") }
        return result
    }
}

/// KML 2.2 (OGC 07-147r2): each `<Point>` inside a `<Placemark>` (directly or in a
/// `<MultiGeometry>`) becomes a pin named after the placemark. Placemarks with only lines or
/// polygons are listed as refused.
struct KMLImport: XMLImportReader {
    private var file = PinImport(format: .kml)
    private var path: [String] = []
    /// The open placemark: its name and the coordinates of its points, as text.
    private var placemark: (depth: Int, name: String?, points: [String], shapes: [String])?
    private var collecting: String?
    private var placemarks = 0

    mutating func handle(_ event: XMLReader.Event) throws(PinImport.Refusal) {
        switch event {
        case .start(let element):
            path.append(element.localName)
            if element.localName == "Placemark", placemark == nil {
                placemark = (path.count, nil, [], [])
            } else if let open = placemark {
                let parent = path.count >= 2 ? path[path.count - 2] : ""
                switch element.localName {
                case "name" where path.count == open.depth + 1: collecting = ""
                case "coordinates" where parent == "Point": collecting = ""
                case "LineString", "LinearRing", "Polygon", "Track", "MultiTrack", "Model":
                    if !path.dropLast().contains(where: { $0 == "Polygon" || $0 == "MultiTrack" }) { placemark?.shapes.append(element.localName) }
                default: break
                }
            }
        case .text(let text):
            if collecting != nil { collecting! += text }
        case .end(let localName):
            if let open = placemark {
                if localName == "name", path.count == open.depth + 1, let text = collecting {
                    placemark?.name = text
                    collecting = nil
                } else if localName == "coordinates", let text = collecting {
                    placemark?.points.append(text)
                    collecting = nil
                } else if localName == "Placemark", path.count == open.depth {
                    try finish(open)
                    placemark = nil
                }
            }
            path.removeLast()
        }
    }

    private mutating func finish(_ open: (depth: Int, name: String?, points: [String], shapes: [String])) throws(PinImport.Refusal) {
        placemarks += 1
        let label = PinImport.cleanName(open.name) ?? "placemark \(placemarks)"
        if open.points.isEmpty {
            let what = open.shapes.first.map { "it is a \($0), not a point" } ?? "it has no point"
            try file.add(.failure(PinImport.Reason(text: what + " (only points become pins)")), label: label)
            return
        }
        for text in open.points {
            // "lon,lat[,alt]": one tuple; more than one in a Point is not KML.
            let tuples = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" })
            guard tuples.count == 1 else {
                try file.add(.failure(tuples.isEmpty ? "its coordinates are empty" : "its point has \(tuples.count) coordinate tuples, not one"), label: label)
                continue
            }
            let numbers = tuples[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard numbers.count == 2 || numbers.count == 3 else {
                try file.add(.failure("its coordinates are not “longitude,latitude[,altitude]”"), label: label)
                continue
            }
            try file.add(ImportNumber.point(name: open.name, lat: numbers[1], lon: numbers[0]), label: label)
        }
    }

    var result: PinImport { file }
}

/// Numbers as the files write them.
enum ImportNumber {
    /// A decimal number, with an exponent allowed: "35.01", "-1.5e2". Nil for anything else,
    /// including "NaN", "inf" and hexadecimal, which Double(String) would take.
    static func decimal(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 40,
              trimmed.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2B || $0 == 0x2D || $0 == 0x65 || $0 == 0x45 }),
              trimmed.utf8.contains(where: { $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Double(trimmed)
    }

    /// A point from the texts of its latitude and longitude.
    static func point(name: String?, lat: String?, lon: String?) -> Result<PinImport.Point, PinImport.Reason> {
        guard let lat else { return .failure("it has no latitude") }
        guard let lon else { return .failure("it has no longitude") }
        guard let latitude = decimal(lat) else { return .failure("its latitude “\(lat.prefix(40))” is not a number") }
        guard let longitude = decimal(lon) else { return .failure("its longitude “\(lon.prefix(40))” is not a number") }
        return PinImport.point(name: name, lat: latitude, lon: longitude)
    }

    static func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n.formatted()) \(noun)s" }
}
