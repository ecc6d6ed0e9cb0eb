/// Where a photo was taken, from its XMP packet, for files whose EXIF has no GPS (edited photos,
/// exports from Lightroom or Photos, scans geotagged later): `exif:GPSLatitude` and
/// `exif:GPSLongitude` (XMP Specification Part 2, 1.2.7.4, "GPSCoordinate": "DDD,MM,SSk" or
/// "DDD,MM.mmk"). libexif reads no XMP and Debian's XMP libraries (exiv2, libexempi) are C++
/// for the whole of XMP; two properties of plain text need neither (docs/architecture.md, "Own
/// photos"). The packet is found by its own markers in the file's bytes, which every format keeps
/// it in as plain text: a JPEG's APP1, a PNG's iTXt, a WebP's "XMP " chunk, a HEIF's mime item.
enum XMPPosition {
    static let start = Array("<x:xmpmeta".utf8)
    static let end = Array("</x:xmpmeta>".utf8)
    /// A packet is a few KB; one larger than this is not read.
    static let maxPacket = 256 << 10

    /// Degrees, north and east positive; nil when the file has no packet, or its packet no
    /// position, or one that is not a coordinate in range.
    static func position<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes) -> (latitude: Double, longitude: Double)? where Bytes.Index == Int {
        guard let packet = packet(in: bytes) else { return nil }
        guard let latitude = value(of: "exif:GPSLatitude", in: packet).flatMap({ coordinate($0, positive: "N", negative: "S", limit: 90) }),
              let longitude = value(of: "exif:GPSLongitude", in: packet).flatMap({ coordinate($0, positive: "E", negative: "W", limit: 180) }),
              !(latitude == 0 && longitude == 0) else { return nil }
        return (latitude, longitude)
    }

    static func packet<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes) -> String? where Bytes.Index == Int {
        guard let from = find(start, in: bytes, from: bytes.startIndex) else { return nil }
        let limit = min(bytes.endIndex, from + maxPacket)
        guard let to = find(end, in: bytes[..<limit], from: from) else { return nil }
        return String(decoding: bytes[from..<to], as: UTF8.self)
    }

    static func find<Bytes: RandomAccessCollection<UInt8>>(_ needle: [UInt8], in bytes: Bytes, from: Int) -> Int? where Bytes.Index == Int {
        guard let first = needle.first, bytes.count >= needle.count else { return nil }
        var at = max(from, bytes.startIndex)
        while at + needle.count <= bytes.endIndex {
            guard let hit = bytes[at...].firstIndex(of: first), hit + needle.count <= bytes.endIndex else { return nil }
            if bytes[hit..<(hit + needle.count)].elementsEqual(needle) { return hit }
            at = hit + 1
        }
        return nil
    }

    /// The property's value, written as an attribute (`name="…"`, either quote) or an element
    /// (`<name>…</name>`), as RDF/XML allows both.
    static func value(of name: String, in packet: String) -> String? {
        for quote in ["\"", "'"] {
            if let range = packet.firstRange(of: name + "=" + quote), let close = packet[range.upperBound...].firstIndex(of: Character(quote)) {
                return String(packet[range.upperBound..<close])
            }
        }
        if let open = packet.firstRange(of: "<" + name + ">"), let close = packet[open.upperBound...].firstRange(of: "</" + name + ">") {
            return String(packet[open.upperBound..<close.lowerBound])
        }
        return nil
    }

    /// "48,51.5022N", "48,51,30.13N", or plain signed degrees ("-22.95192"), into degrees within ±`limit`.
    static func coordinate(_ text: String, positive: Character, negative: Character, limit: Double) -> Double? {
        var body = Substring(text.trimmingSpaces())
        guard body.count <= 40, !body.isEmpty else { return nil }
        var sign = 1.0
        if let last = body.last, last.isLetter {
            guard last == positive || last == negative else { return nil }
            sign = last == negative ? -1 : 1
            body = body.dropLast()
        }
        let parts = body.split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
        guard (1...3).contains(parts.count), parts.allSatisfy({ $0 != nil && $0!.isFinite }) else { return nil }
        let values = parts.map { $0! }
        if values.count > 1 { guard values[0] >= 0, values[1] >= 0, values[1] < 60, values.count < 3 || (values[2] >= 0 && values[2] < 60) else { return nil } }
        if values.count == 1 && values[0] < 0 { sign = -sign }
        let degrees = abs(values[0]) + (values.count > 1 ? values[1] / 60 : 0) + (values.count > 2 ? values[2] / 3600 : 0)
        guard degrees <= limit else { return nil }
        return sign * degrees
    }
}
