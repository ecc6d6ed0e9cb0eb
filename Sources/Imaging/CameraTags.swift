import CExif

/// What the camera wrote about a photo, read with libexif (docs/architecture.md, "Own photos"):
/// where (GPS), when (DateTimeOriginal with OffsetTimeOriginal), with what, and which way up.
/// Every value is parsed into its range and dropped when outside it: a file is a stranger's text.
public struct CameraTags: Sendable, Equatable {
    /// Degrees, north and east positive, as exiftool -n prints them.
    public var latitude: Double?
    public var longitude: Double?
    /// The time taken as the camera's clock showed it, "YYYY-MM-DDTHH:MM:SS".
    public var takenLocal: String?
    /// OffsetTimeOriginal (EXIF 2.31) in minutes east of UTC, when the camera wrote it.
    public var offsetMinutes: Int?
    /// Make and model, "Apple iPhone 12 mini" (the make left out when the model starts with it).
    public var camera: String?
    /// EXIF Orientation, 1–8 (1 when absent or out of range).
    public var orientation: Int = 1

    public init() {}

    public var hasPosition: Bool { latitude != nil && longitude != nil }

    /// The tags of an Exif block: a JPEG's whole bytes (libexif finds APP1), or "Exif\0\0" and a
    /// TIFF header with its IFDs. Empty tags when there is none or it cannot be read.
    public static func read<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> CameraTags {
        var tags = CameraTags()
        let data = Array(bytes)
        guard !data.isEmpty, let exif = data.withUnsafeBufferPointer({ exif_data_new_from_data($0.baseAddress, UInt32(min(data.count, Int(UInt32.max)))) }) else { return tags }
        defer { exif_data_unref(exif) }
        let order = exif_data_get_byte_order(exif)
        let ifds = exif.pointee.ifd
        let (ifd0, exifIFD, gps) = (ifds.0, ifds.2, ifds.3)

        func entry(_ content: UnsafeMutablePointer<ExifContent>?, _ tag: UInt32) -> UnsafeMutablePointer<ExifEntry>? {
            guard let content, let found = exif_content_get_entry(content, ExifTag(rawValue: tag)), found.pointee.data != nil else { return nil }
            return found
        }
        func ascii(_ content: UnsafeMutablePointer<ExifContent>?, _ tag: UInt32) -> String? {
            guard let e = entry(content, tag), e.pointee.format == EXIF_FORMAT_ASCII, e.pointee.size > 0, e.pointee.size <= 256 else { return nil }
            let raw = UnsafeBufferPointer(start: e.pointee.data, count: Int(e.pointee.size))
            let text = String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            // Printable ASCII only; trailing spaces (fixed-width fields) trimmed.
            let clean = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.map(Character.init))
            let trimmed = clean.trimmingSpaces()
            return trimmed.isEmpty ? nil : trimmed
        }
        func rationals(_ content: UnsafeMutablePointer<ExifContent>?, _ tag: UInt32, count: Int) -> [Double]? {
            guard let e = entry(content, tag), e.pointee.format == EXIF_FORMAT_RATIONAL, Int(e.pointee.components) >= count,
                  Int(e.pointee.size) >= count * 8 else { return nil }
            var values: [Double] = []
            for i in 0..<count {
                let r = exif_get_rational(e.pointee.data + i * 8, order)
                guard r.denominator != 0 else { return nil }
                values.append(Double(r.numerator) / Double(r.denominator))
            }
            return values
        }

        // GPS: degrees, minutes, seconds and a reference letter (GPS IFD tags 1–4).
        func coordinate(value: UInt32, reference: UInt32, limit: Double, negative: String) -> Double? {
            guard let dms = rationals(gps, value, count: 3), dms.allSatisfy({ $0.isFinite && $0 >= 0 }),
                  dms[1] < 60, dms[2] < 60 else { return nil }
            let degrees = dms[0] + dms[1] / 60 + dms[2] / 3600
            guard degrees <= limit else { return nil }
            return ascii(gps, reference) == negative ? -degrees : degrees
        }
        if let lat = coordinate(value: 0x0002, reference: 0x0001, limit: 90, negative: "S"),
           let lon = coordinate(value: 0x0004, reference: 0x0003, limit: 180, negative: "W"),
           !(lat == 0 && lon == 0) {
            // 0,0 is what many cameras write when they had no fix.
            tags.latitude = lat
            tags.longitude = lon
        }
        if let original = ascii(exifIFD, 0x9003) ?? ascii(exifIFD, 0x9004) ?? ascii(ifd0, 0x0132) {
            tags.takenLocal = Self.isoLocal(original)
        }
        if tags.takenLocal != nil, let offset = ascii(exifIFD, 0x9011) ?? ascii(exifIFD, 0x9010) {
            tags.offsetMinutes = Self.offsetMinutes(offset)
        }
        let make = ascii(ifd0, 0x010F), model = ascii(ifd0, 0x0110)
        if let model {
            tags.camera = make.map { model.lowercased().hasPrefix($0.lowercased().split(separator: " ").first.map(String.init) ?? $0.lowercased()) ? model : "\($0) \(model)" } ?? model
        } else {
            tags.camera = make
        }
        if let e = entry(ifd0, 0x0112), e.pointee.format == EXIF_FORMAT_SHORT, e.pointee.size >= 2 {
            let value = Int(exif_get_short(e.pointee.data, order))
            if (1...8).contains(value) { tags.orientation = value }
        }
        return tags
    }

    /// "2024:05:03 14:22:10" (EXIF's form) → "2024-05-03T14:22:10"; nil for anything else,
    /// a date that cannot be (month 13) or the all-zero or blank date some cameras write.
    public static func isoLocal(_ text: String) -> String? {
        let u = Array(text.utf8)
        guard u.count >= 19 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range { guard u[i] >= 0x30 && u[i] <= 0x39 else { return nil }; value = value * 10 + Int(u[i] - 0x30) }
            return value
        }
        guard u[4] == 0x3A || u[4] == 0x2D, u[7] == 0x3A || u[7] == 0x2D, u[10] == 0x20 || u[10] == 0x54, u[13] == 0x3A, u[16] == 0x3A,
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1826...9999).contains(year), (1...12).contains(month), (1...daysIn(month, year)).contains(day),
              hour < 24, minute < 60, second < 61 else { return nil }
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(min(second, 59)))"
    }

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// "+02:00", "-05:30" → minutes east of UTC, within ±14 h; nil for anything else.
    public static func offsetMinutes(_ text: String) -> Int? {
        let u = Array(text.utf8)
        guard u.count == 6, u[0] == 0x2B || u[0] == 0x2D, u[3] == 0x3A,
              [1, 2, 4, 5].allSatisfy({ u[$0] >= 0x30 && u[$0] <= 0x39 }) else { return nil }
        let hours = Int(u[1] - 0x30) * 10 + Int(u[2] - 0x30), minutes = Int(u[4] - 0x30) * 10 + Int(u[5] - 0x30)
        guard minutes < 60, hours * 60 + minutes <= 14 * 60 else { return nil }
        return (u[0] == 0x2D ? -1 : 1) * (hours * 60 + minutes)
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while scalars.first == " " { scalars = scalars.dropFirst() }
        while scalars.last == " " { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
