import Foundation

/// When the fixture's photos were taken: every photo a fixed date, spread over the decades since
/// the 1850s (half of them since 2000, as on the real services) and over Flickr's granularities
/// (flickr.com/services/api/misc.dates: 0 to the second, 4 the month, 6 the year, 8 circa), a few
/// with no known date. Flickr's search filters on them (min_taken_date, max_taken_date) and
/// Commons' extmetadata carries them (DateTimeOriginal), so an era album can be checked against
/// what the fixture holds.
public struct FixtureDate: Sendable, Equatable {
    /// As Flickr's datetaken gives it: "YYYY-MM-DD HH:MM:SS" (for a date Flickr does not know, the
    /// upload time, with datetakenunknown 1).
    public let datetaken: String
    public let granularity: Int
    public let unknown: Bool
    /// The year, or nil when unknown.
    public var year: Int? { unknown ? nil : Int(datetaken.prefix(4)) }

    public static func of(id: Int) -> FixtureDate {
        // splitmix64's finaliser: every digit of the id moves the date (a plain multiple left
        // photos of the same index on every page with the same date).
        var x = UInt64(truncatingIfNeeded: id) &+ 0x9E37_79B9_7F4A_7C15
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        let h = Int((x ^ (x >> 31)) % 1000)
        if h % 50 == 7 { return FixtureDate(datetaken: "2015-06-01 10:00:00", granularity: 0, unknown: true) }
        let month = 1 + (h / 26) % 12, day = 1 + h % 28
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : String(n) }
        if h < 500 {
            return FixtureDate(datetaken: "\(2000 + h % 26)-\(two(month))-\(two(day)) 12:00:00", granularity: 0, unknown: false)
        }
        let year = 1850 + 10 * ((h / 7) % 15) + h % 10
        switch h % 4 {
        case 0: return FixtureDate(datetaken: "\(year)-\(two(month))-\(two(day)) 12:00:00", granularity: 0, unknown: false)
        case 1: return FixtureDate(datetaken: "\(year)-\(two(month))-01 00:00:00", granularity: 4, unknown: false)
        case 2: return FixtureDate(datetaken: "\(year)-01-01 00:00:00", granularity: 6, unknown: false)
        default: return FixtureDate(datetaken: "\(year)-01-01 00:00:00", granularity: 8, unknown: false)
        }
    }

    /// The same date as a Commons file description writes it (DateTimeOriginal, after its
    /// templates are rendered); nil when unknown (no field).
    public var commonsText: String? {
        guard !unknown, let year else { return nil }
        switch granularity {
        case 4: return String(datetaken.prefix(7))
        case 6: return year % 3 == 0 ? "\(year / 10 * 10)s" : String(year)
        case 8: return "circa \(year)"
        default: return datetaken
        }
    }

    /// A min_taken_date or max_taken_date as Flickr takes it ("a mysql datetime or unix
    /// timestamp"), as a datetaken to compare with; nil when it is neither.
    static func bound(_ text: String?) -> String? {
        guard let text = text?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if text.allSatisfy(\.isNumber), let seconds = Double(text) {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
            return formatter.string(from: Date(timeIntervalSince1970: seconds))
        }
        guard text.firstMatch(of: /^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?$/) != nil else { return nil }
        return text.count == 10 ? text + " 00:00:00" : text
    }
}
