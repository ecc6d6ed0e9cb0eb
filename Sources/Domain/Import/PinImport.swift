import Foundation
import Zlib

/// What a file from another map app holds for us: its points (each a pin to be) and the points or
/// features it had that cannot become pins, each with the reason. GeoJSON, GPX, KML and KMZ are
/// told apart by their content, never by the file's name. A KMZ is read as the KML inside it.
package struct PinImport: Sendable, Codable, Equatable {
    package enum Format: String, Sendable, Codable {
        case geoJSON = "GeoJSON", gpx = "GPX", kml = "KML"
    }

    package struct Point: Sendable, Codable, Equatable {
        package var name: String?
        package var lat: Double
        package var lon: Double
    }

    package struct Refused: Sendable, Codable, Equatable {
        /// The point's name, or where it is in the file ("feature 3").
        package var label: String
        package var reason: String
    }

    package var format: Format
    package var points: [Point] = []
    package var refused: [Refused] = []
    /// Things the file holds that are not points and so were left aside (GPX route and track points).
    package var notes: [String] = []

    /// The limits an import is held to; the import page and README state the same.
    package enum Limits {
        package static let fileBytes = 5 * 1024 * 1024
        /// Points and refused points together: a file past this is refused whole.
        package static let points = 2_000
        /// Files (images and all) in a KMZ; its KML, inflated, is held to `fileBytes` too.
        package static let kmzEntries = 1_000
        /// Elements or arrays and objects inside one another.
        package static let depth = 64
        /// Characters of a name kept; longer ones are cut.
        package static let nameCharacters = 200
        /// How long an unconfirmed preview is kept.
        package static let previewMinutes = 60
    }

    /// Why one point was refused ("its latitude 91 is outside −90…90").
    package struct Reason: Error, Equatable, ExpressibleByStringInterpolation {
        package let text: String
        package init(text: String) { self.text = text }
        package init(stringLiteral value: String) { text = value }
    }

    /// Why a whole file was refused: a sentence for the person, and the HTTP status.
    package struct Refusal: Error, Equatable, CustomStringConvertible {
        package enum Kind: Equatable { case tooLarge, unreadable }
        package let kind: Kind
        package let description: String

        package static func unreadable(_ text: String) -> Refusal { Refusal(kind: .unreadable, description: text) }
    }

    /// Reads a file of any accepted format; a zip is taken for a KMZ.
    package static func read(_ bytes: [UInt8]) throws(Refusal) -> PinImport {
        guard !bytes.isEmpty else { throw .unreadable("The file is empty.") }
        guard bytes.count <= Limits.fileBytes else {
            throw Refusal(kind: .tooLarge, description: "The file is \(megabytes(bytes.count)); files of up to \(megabytes(Limits.fileBytes)) can be imported.")
        }
        if ZipReader.isZip(bytes) { return try KMZImport.read(bytes) }
        if bytes.starts(with: [0x1F, 0x8B]) { throw .unreadable("This file is gzip-compressed. Uncompress it and import the file inside.") }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
            throw .unreadable("This file is in UTF-16. Save it as UTF-8 and import it again.")
        }
        var start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while start < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[start]) { start += 1 }
        switch bytes[safe: start] {
        case UInt8(ascii: "{"), UInt8(ascii: "["): return try GeoJSONImport.read(bytes)
        case UInt8(ascii: "<"): return try xml(bytes)
        default: throw .unreadable("This is not a GeoJSON, GPX, KML or KMZ file: it starts with neither “{” nor “<”.")
        }
    }

    /// GPX or KML, by the root element.
    package static func xml(_ bytes: [UInt8]) throws(Refusal) -> PinImport {
        var reader: XMLImportReader?
        do {
            try XMLReader.read(bytes, maxDepth: Limits.depth) { event in
                if reader == nil, case .start(let root) = event {
                    switch root.localName {
                    case "gpx": reader = GPXImport()
                    case "kml": reader = KMLImport()
                    default:
                        throw Refusal.unreadable("This XML file is neither GPX (its root element would be <gpx>) nor KML (<kml>); its root element is <\(root.localName)>.")
                    }
                }
                try reader?.handle(event)
            }
        } catch let refusal as Refusal {
            throw refusal
        } catch let failure as XMLReader.Failure {
            throw .unreadable("The file is not well-formed XML: \(failure.description) (line \(failure.line)).")
        } catch {
            throw .unreadable("The file could not be read.")
        }
        guard let reader else { throw .unreadable("The file holds no XML element.") }
        return reader.result
    }

    /// A point from two numbers read from the file: in range and finite, or the reason it is not.
    package static func point(name: String?, lat: Double?, lon: Double?) -> Result<Point, Reason> {
        guard let lat, let lon else { return .failure("its coordinates are missing or not numbers") }
        guard lat.isFinite, lon.isFinite else { return .failure("its coordinates are not finite numbers") }
        guard (-90...90).contains(lat) else { return .failure("its latitude \(lat) is outside −90…90") }
        guard (-180...180).contains(lon) else { return .failure("its longitude \(lon) is outside −180…180") }
        return .success(Point(name: cleanName(name), lat: lat, lon: lon))
    }

    /// A name as a pin keeps it: whitespace runs made one space, controls left out, at most
    /// `Limits.nameCharacters` characters; nil when nothing is left.
    package static func cleanName(_ name: String?) -> String? {
        guard let name else { return nil }
        let scalars = name.unicodeScalars.map { $0.properties.generalCategory == .control || $0 == "\u{2028}" || $0 == "\u{2029}" ? " " : $0 }
        let words = String(String.UnicodeScalarView(scalars)).split(whereSeparator: \.isWhitespace)
        let joined = words.joined(separator: " ")
        guard !joined.isEmpty else { return nil }
        return joined.count > Limits.nameCharacters ? String(joined.prefix(Limits.nameCharacters - 1)) + "…" : joined
    }

    /// Adds a point read from the file, or its refusal; past the point limit the whole file is refused.
    package mutating func add(_ result: Result<Point, Reason>, label: String) throws(Refusal) {
        guard points.count + refused.count < Limits.points else {
            throw .unreadable("The file has more than \(Limits.points.formatted()) points; at most \(Limits.points.formatted()) can be imported at once. Split it into smaller files.")
        }
        switch result {
        case .success(let point): points.append(point)
        case .failure(let reason): refused.append(Refused(label: label, reason: reason.text))
        }
    }

    package static func megabytes(_ bytes: Int) -> String {
        let tenths = (Double(bytes) / (1024 * 1024) * 10).rounded(.up) / 10
        return tenths == tenths.rounded() ? "\(Int(tenths)) MB" : "\(tenths) MB"
    }
}

/// GPX and KML read event by event.
package protocol XMLImportReader {
    mutating func handle(_ event: XMLReader.Event) throws(PinImport.Refusal)
    var result: PinImport { get }
}

fileprivate extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
