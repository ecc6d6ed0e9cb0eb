import Foundation

/// Numbers as the files write them.
package enum ImportNumber {
    /// A decimal number, with an exponent allowed: "35.01", "-1.5e2". Nil for anything else,
    /// including "NaN", "inf" and hexadecimal, which Double(String) would take.
    package static func decimal(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 40,
              trimmed.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2B || $0 == 0x2D || $0 == 0x65 || $0 == 0x45 }),
              trimmed.utf8.contains(where: { $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Double(trimmed)
    }

    /// A point from the texts of its latitude and longitude.
    package static func point(name: String?, lat: String?, lon: String?) -> Result<PinImport.Point, PinImport.Reason> {
        guard let lat else { return .failure("it has no latitude") }
        guard let lon else { return .failure("it has no longitude") }
        guard let latitude = decimal(lat) else { return .failure("its latitude “\(lat.prefix(40))” is not a number") }
        guard let longitude = decimal(lon) else { return .failure("its longitude “\(lon.prefix(40))” is not a number") }
        return PinImport.point(name: name, lat: latitude, lon: longitude)
    }

    package static func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n.formatted()) \(noun)s" }
}
