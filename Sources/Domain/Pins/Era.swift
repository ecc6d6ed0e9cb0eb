import Foundation

/// The years an album's photos were taken in (issue "a place through time"): a decade ("the
/// 1950s") or a range of years, both ends included. No era is any time, as albums were before.
/// Kept per pin (pins.era_from, era_to, migration 0127) so New Collection keeps it.
public struct Era: Sendable, Hashable, CustomStringConvertible {
    public let from: Int
    public let to: Int

    /// The first decade offered: photography's first decades are in the archives, not before.
    public static let earliest = 1850

    /// The current year (UTC): the last an era can reach.
    public static var thisYear: Int { Calendar(identifier: .gregorian).component(.year, from: Date()) }

    /// Nil when the years are outside 1850…this year or the wrong way round. A decade is always
    /// its ten years, this one too (so an album of the 2020s stays one after New Year).
    public init?(from: Int, to: Int, thisYear: Int = Era.thisYear) {
        let wholeDecade = from % 10 == 0 && to == from + 9
        guard Self.earliest <= from, from <= to, from <= thisYear, to <= thisYear || wholeDecade else { return nil }
        self.from = from
        self.to = to
    }

    /// An era as a row holds it (`era_from`, `era_to`; the table's check keeps them 1850–2100): nil
    /// unless both are there. Read without the clock (pins are read by the thousand), so one an
    /// administrator set beyond this year still reads back.
    public static func stored(from: Int?, to: Int?) -> Era? {
        guard let from, let to else { return nil }
        return Era(from: from, to: to, thisYear: to)
    }

    /// The decade starting at `start` (1950: 1950–1959).
    public static func decade(_ start: Int, thisYear: Int = Era.thisYear) -> Era? {
        guard start % 10 == 0 else { return nil }
        return Era(from: start, to: start + 9, thisYear: thisYear)
    }

    /// Every decade offered, oldest first.
    public static func decades(thisYear: Int = Era.thisYear) -> [Era] {
        stride(from: earliest, through: thisYear, by: 10).compactMap { decade($0, thisYear: thisYear) }
    }

    public var isDecade: Bool { from % 10 == 0 && to == from + 9 }

    /// As people say it: "the 1950s", "1962", "1950–1965".
    public var description: String {
        if isDecade { return "the \(from)s" }
        return from == to ? String(from) : "\(from)–\(to)"
    }

    /// The form's value, which `parse` reads back: "1950s" or "1950-1965".
    public var formValue: String { isDecade ? "\(from)s" : "\(from)-\(to)" }

    public func contains(year: Int) -> Bool { (from...to).contains(year) }

    /// What a person can be told about a choice that is not an era.
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// The era a form names: `when` is "any" (or empty: no era), a decade ("1950s") or "years"
    /// with `from` and `to` (or a range written "1950-1965"). Every number is read into 1850…this
    /// year, never trusted.
    public static func parse(when: String?, from: String? = nil, to: String? = nil, thisYear: Int = Era.thisYear) -> Result<Era?, Refusal> {
        let when = (when ?? "").trimmingCharacters(in: .whitespaces).lowercased()
        func year(_ text: Substring?) -> Int? {
            guard let text = text?.trimmingCharacters(in: .whitespaces), (1...4).contains(text.count),
                  text.allSatisfy(\.isASCII), let value = Int(text) else { return nil }
            return value
        }
        let outside = Refusal(description: "Choose years between \(earliest) and \(thisYear), the first no later than the last.")
        switch when {
        case "", "any":
            return .success(nil)
        case "years":
            guard let first = year(from.map { Substring($0) }), let last = year(to.map { Substring($0) }) else {
                return .failure(Refusal(description: "Give the first and the last year, such as 1950 and 1965."))
            }
            return Era(from: first, to: last, thisYear: thisYear).map { .success($0) } ?? .failure(outside)
        default:
            if when.hasSuffix("s"), let start = year(when.dropLast()) {
                return decade(start, thisYear: thisYear).map { .success($0) } ?? .failure(outside)
            }
            let parts = when.split(separator: "-", maxSplits: 1)
            if parts.count == 2, let first = year(parts[0]), let last = year(parts[1]) {
                return Era(from: first, to: last, thisYear: thisYear).map { .success($0) } ?? .failure(outside)
            }
            return .failure(Refusal(description: "That is not a time to choose: pick a decade or give a range of years."))
        }
    }
}
