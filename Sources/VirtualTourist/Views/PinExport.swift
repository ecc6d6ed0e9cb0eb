import Foundation
import WebText
import AlbumWing
import Domain

/// A person's pins as files other map software reads: GeoJSON (RFC 7946), GPX 1.1 waypoints and
/// KML 2.2 placemarks. Written straight into bytes, a batch of pins at a time, so the route can read
/// the pins in pages and never holds them all as values.
enum PinExport: String, CaseIterable, Sendable {
    case geojson, gpx, kml

    var contentType: String {
        switch self {
        case .geojson: "application/geo+json"  // RFC 7946 §12
        case .gpx: "application/gpx+xml; charset=utf-8"
        case .kml: "application/vnd.google-earth.kml+xml; charset=utf-8"
        }
    }

    var fileExtension: String { rawValue }

    /// Where each pin's album lives: PUBLIC_URL's address when set, so a file opened elsewhere
    /// links back; a relative path otherwise.
    struct Links: Sendable {
        let base: String

        init(publicURL: String?) {
            var base = publicURL?.trimmingCharacters(in: .whitespaces) ?? ""
            while base.hasSuffix("/") { base.removeLast() }
            self.base = base
        }

        func album(_ pin: Pin) -> String { base + "/pins/" + String(pin.id) }
        func ownPhoto(_ photo: OwnPhoto) -> String { base + "/own-photos/" + String(photo.id) }
    }

    func begin(exportedAt: Date, to out: inout [UInt8]) {
        switch self {
        case .geojson:
            // RFC 7946: no "crs" member; WGS 84 longitude, latitude is the only reference system.
            JSONWriter.raw(#"{"type":"FeatureCollection","features":["#, to: &out)
        case .gpx:
            // GPX 1.1 (topografix.com/GPX/1/1): metadata, then waypoints.
            Self.raw("""
                <?xml version="1.0" encoding="UTF-8"?>
                <gpx version="1.1" creator="Virtual Tourist" xmlns="http://www.topografix.com/GPX/1/1">
                <metadata><name>Virtual Tourist pins</name><time>
                """, to: &out)
            Self.append(Self.rfc3339(exportedAt), to: &out)
            Self.raw("</time></metadata>\n", to: &out)
        case .kml:
            // OGC KML 2.2 (OGC 07-147r2); the album link is an atom:link, as the schema has it.
            Self.raw("""
                <?xml version="1.0" encoding="UTF-8"?>
                <kml xmlns="http://www.opengis.net/kml/2.2" xmlns:atom="http://www.w3.org/2005/Atom">
                <Document><name>Virtual Tourist pins</name>

                """, to: &out)
        }
    }

    /// `first`: no pin was written before this batch (GeoJSON separates features with commas).
    /// `own`: the pins' own photos, by pin: listed in GeoJSON (name, who added it, when it was
    /// taken, its display version's address: never where it was taken), counted in GPX and KML.
    func append(_ pins: [Pin], first: Bool, links: Links, own: [Int64: [OwnPhoto]] = [:], to out: inout [UInt8]) {
        for (index, pin) in pins.enumerated() {
            let url = links.album(pin)
            let ownPhotos = own[pin.id] ?? []
            let ownCount = ownPhotos.isEmpty ? "" : ownPhotos.count == 1 ? " and 1 of the map's own" : " and \(ownPhotos.count) of the map's own"
            let lon = Self.longitude(pin.lon), lat = pin.lat
            switch self {
            case .geojson:
                if !(first && index == 0) { out.append(UInt8(ascii: ",")) }
                JSONWriter.raw(#"{"type":"Feature","geometry":{"type":"Point","coordinates":["#, to: &out)
                Self.append(Self.decimal(lon), to: &out)
                out.append(UInt8(ascii: ","))
                Self.append(Self.decimal(lat), to: &out)
                JSONWriter.raw(#"]},"properties":{"name":"#, to: &out)
                JSONWriter.string(pin.title, to: &out)
                JSONWriter.raw(#","created":"#, to: &out)
                JSONWriter.string(Self.rfc3339(pin.createdAt), to: &out)
                JSONWriter.raw(#","photos":"#, to: &out)
                JSONWriter.integer(pin.photoCount, to: &out)
                if let era = pin.era {
                    JSONWriter.raw(#","era":"#, to: &out)
                    JSONWriter.string(era.formValue, to: &out)
                }
                if !ownPhotos.isEmpty {
                    JSONWriter.raw(#","own_photos":["#, to: &out)
                    for (n, photo) in ownPhotos.enumerated() {
                        if n > 0 { out.append(UInt8(ascii: ",")) }
                        JSONWriter.raw(#"{"file":"#, to: &out)
                        JSONWriter.string(photo.fileName, to: &out)
                        JSONWriter.raw(#","added_by":"#, to: &out)
                        JSONWriter.string(photo.addedByName, to: &out)
                        if let taken = photo.takenLocal {
                            JSONWriter.raw(#","taken":"#, to: &out)
                            JSONWriter.string(taken, to: &out)
                        }
                        JSONWriter.raw(#","url":"#, to: &out)
                        JSONWriter.string(links.ownPhoto(photo), to: &out)
                        out.append(UInt8(ascii: "}"))
                    }
                    out.append(UInt8(ascii: "]"))
                }
                JSONWriter.raw(#","url":"#, to: &out)
                JSONWriter.string(url, to: &out)
                JSONWriter.raw("}}\n", to: &out)
            case .gpx:
                // wptType's order: time, name, desc, link (GPX 1.1 schema).
                Self.raw("<wpt lat=\"", to: &out)
                Self.append(Self.decimal(lat), to: &out)
                Self.raw("\" lon=\"", to: &out)
                Self.append(Self.decimal(lon), to: &out)
                Self.raw("\"><time>", to: &out)
                Self.append(Self.rfc3339(pin.createdAt), to: &out)
                Self.raw("</time><name>", to: &out)
                Self.xml(pin.title, to: &out)
                Self.raw("</name><desc>", to: &out)
                Self.xml(Self.photos(pin.photoCount) + ownCount + Self.taken(pin.era), to: &out)
                Self.raw("</desc><link href=\"", to: &out)
                Self.xml(url, to: &out)
                Self.raw("\"><text>Album</text></link></wpt>\n", to: &out)
            case .kml:
                // FeatureType's order: name, atom:link, description, TimeStamp; then the Point.
                Self.raw("<Placemark id=\"pin-", to: &out)
                TextBytes.appendDecimal(Int(pin.id), to: &out)
                Self.raw("\"><name>", to: &out)
                Self.xml(pin.title, to: &out)
                Self.raw("</name><atom:link href=\"", to: &out)
                Self.xml(url, to: &out)
                Self.raw("\"/><description>", to: &out)
                Self.xml(Self.photos(pin.photoCount) + ownCount + Self.taken(pin.era) + ". Album: " + url, to: &out)
                Self.raw("</description><TimeStamp><when>", to: &out)
                Self.append(Self.rfc3339(pin.createdAt), to: &out)
                Self.raw("</when></TimeStamp><Point><coordinates>", to: &out)
                Self.append(Self.decimal(lon), to: &out)
                out.append(UInt8(ascii: ","))
                Self.append(Self.decimal(lat), to: &out)
                Self.raw("</coordinates></Point></Placemark>\n", to: &out)
            }
        }
    }

    func end(to out: inout [UInt8]) {
        switch self {
        case .geojson: JSONWriter.raw("]}\n", to: &out)
        case .gpx: Self.raw("</gpx>\n", to: &out)
        case .kml: Self.raw("</Document>\n</kml>\n", to: &out)
        }
    }

    static func photos(_ count: Int) -> String { count == 1 ? "1 photo" : "\(count) photos" }

    /// ", taken in the 1950s" for a pin whose album has an era; nothing otherwise.
    static func taken(_ era: Era?) -> String { era.map { ", taken in \($0)" } ?? "" }

    /// GPX's longitude is [-180, 180) and GeoJSON and KML take any: 180 is written as -180.
    static func longitude(_ lon: Double) -> Double { lon >= 180 ? lon - 360 : lon }

    /// At most 7 decimals (about a centimetre; RFC 7946 §11.2), never an exponent (xsd:decimal
    /// has none), trailing zeros dropped.
    static func decimal(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e9 else { return "0" }
        let units = Int64((value * 10_000_000).rounded())
        let magnitude = units.magnitude
        let whole = magnitude / 10_000_000, fraction = magnitude % 10_000_000
        var text = (units < 0 ? "-" : "") + String(whole)
        if fraction > 0 {
            var digits = String(fraction)
            digits = String(repeating: "0", count: 7 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text
    }

    /// RFC 3339 in UTC, whole seconds: 2026-11-25T17:06:26Z (civil date from days: H. Hinnant's
    /// days_from_civil inverse), without a formatter object per call.
    static func rfc3339(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let ofDay = seconds - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0" + String(n) : String(n) }
        let year4 = String(year)
        return String(repeating: "0", count: max(0, 4 - year4.count)) + year4 + "-" + two(month) + "-" + two(day)
            + "T" + two(ofDay / 3600) + ":" + two(ofDay / 60 % 60) + ":" + two(ofDay % 60) + "Z"
    }

    static func raw(_ text: StaticString, to out: inout [UInt8]) { TextBytes.append(text, to: &out) }
    static func append(_ text: String, to out: inout [UInt8]) { out.append(contentsOf: text.utf8) }

    /// Text for XML 1.0 element content or a quoted attribute: the five markup characters as
    /// entities, CR, LF and tab as character references (a parser would otherwise normalise them:
    /// XML 1.0 §2.11, §3.3.3), and characters XML 1.0 does not allow at all (§2.2 Char: the C0
    /// controls but tab, LF and CR; U+FFFE, U+FFFF) left out, since no escape can carry them.
    static func xml(_ text: String, to out: inout [UInt8]) {
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x26: raw("&amp;", to: &out)
            case 0x3C: raw("&lt;", to: &out)
            case 0x3E: raw("&gt;", to: &out)
            case 0x22: raw("&quot;", to: &out)
            case 0x27: raw("&apos;", to: &out)
            case 0x09: raw("&#9;", to: &out)
            case 0x0A: raw("&#10;", to: &out)
            case 0x0D: raw("&#13;", to: &out)
            case 0x00..<0x20, 0xFFFE, 0xFFFF: continue
            default: out.append(contentsOf: String(scalar).utf8)
            }
        }
    }
}
