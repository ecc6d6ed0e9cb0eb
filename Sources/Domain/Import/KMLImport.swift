/// KML 2.2 (OGC 07-147r2): each `<Point>` inside a `<Placemark>` (directly or in a
/// `<MultiGeometry>`) becomes a pin named after the placemark. Placemarks with only lines or
/// polygons are listed as refused.
package struct KMLImport: XMLImportReader {
    private var file = PinImport(format: .kml)
    private var path: [String] = []
    /// The open placemark: its name and the coordinates of its points, as text.
    private var placemark: (depth: Int, name: String?, points: [String], shapes: [String])?
    private var collecting: String?
    private var placemarks = 0

    package mutating func handle(_ event: XMLReader.Event) throws(PinImport.Refusal) {
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
            // More than three values (a measure, a time, as some apps write): the first two are
            // longitude and latitude and the rest is ignored, as GDAL's KML reader takes them.
            let numbers = tuples[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard numbers.count >= 2 else {
                try file.add(.failure("its coordinates are not “longitude,latitude[,altitude]”"), label: label)
                continue
            }
            try file.add(ImportNumber.point(name: open.name, lat: numbers[1], lon: numbers[0]), label: label)
        }
    }

    package var result: PinImport { file }
}
