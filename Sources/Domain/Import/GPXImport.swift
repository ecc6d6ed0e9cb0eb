import Foundation

/// GPX 1.0 and 1.1 (topografix.com/GPX): waypoints (`<wpt lat lon><name>`) become pins. Route and
/// track points are the shape of a journey, not places someone marked, so they are counted and
/// left aside, and the preview says so.
package struct GPXImport: XMLImportReader {
    private var file = PinImport(format: .gpx)
    /// Elements open from the root down (local names).
    private var path: [String] = []
    private var waypoint: (lat: String?, lon: String?, name: String?)?
    private var nameText: String?
    private var waypoints = 0
    private var routePoints = 0
    private var trackPoints = 0

    package mutating func handle(_ event: XMLReader.Event) throws(PinImport.Refusal) {
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

    package var result: PinImport {
        var result = file
        if routePoints > 0 { result.notes.append("\(ImportNumber.count(routePoints, "route point")) left aside: only waypoints become pins.") }
        if trackPoints > 0 { result.notes.append("\(ImportNumber.count(trackPoints, "track point")) left aside: only waypoints become pins.") }
        return result
    }
}
