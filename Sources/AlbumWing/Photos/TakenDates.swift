import Domain

/// When a photo was taken, read from what a provider writes, without stating more than it says:
/// the words shown ("1962", "circa 1920s", "May 1975") and the years it can be in, which decide
/// whether it belongs in an era album. A date that cannot be read has no years: it is shown as
/// written and never counted in an era.
package struct TakenDate: Equatable, Sendable {
    package let label: String
    package let years: ClosedRange<Int>?

    /// A Commons file's DateTimeOriginal (its plain text): "2012-05-03 14:22:10", "2012-05-03",
    /// "1975-05", "1962", "1920s", "circa 1930", "c. 1900", "between 1950 and 1955", "1950–1955".
    package static func commons(_ text: String) -> TakenDate {
        let words = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let lower = words.lowercased()
        func year(_ s: Substring) -> Int? { Int(s).flatMap { (1000...9999).contains($0) ? $0 : nil } }
        if let m = lower.wholeMatch(of: /(\d{4})-(\d{2})-(\d{2})([ t]\d{2}:\d{2}(:\d{2})?)?/), let y = year(m.1),
           let month = Int(m.2), (1...12).contains(month), let day = Int(m.3), (1...31).contains(day) {
            return TakenDate(label: words, years: y...y)
        }
        if let m = lower.wholeMatch(of: /(\d{4})-(\d{2})/), let y = year(m.1), let month = Int(m.2), (1...12).contains(month) {
            return TakenDate(label: "\(FlickrCredits.monthNames[month - 1]) \(y)", years: y...y)
        }
        if let m = lower.wholeMatch(of: /(circa|ca\.?|c\.|about|around)?\s*(\d{4})(s)?/), let y = year(m.2) {
            let circa = m.1 != nil ? "circa " : ""
            if m.3 != nil {
                guard y % 10 == 0 else { return TakenDate(label: words, years: nil) }
                return TakenDate(label: "\(circa)\(y)s", years: m.1 == nil ? y...(y + 9) : nil)
            }
            return TakenDate(label: "\(circa)\(y)", years: y...y)
        }
        if let m = lower.wholeMatch(of: /(?:between\s+)?(\d{4})\s*(?:and|-|–|—|to)\s*(\d{4})/), let a = year(m.1), let b = year(m.2), a <= b {
            return TakenDate(label: "\(a)–\(b)", years: a...b)
        }
        // As people write them: "19 July 2014", "July 2014", "July 19, 2014", "14:22, 3 May 2012".
        if let m = lower.wholeMatch(of: /(?:\d{1,2}:\d{2}(?::\d{2})?,?\s+)?(?:\d{1,2}\s+)?([a-z]+)\.?\s+(?:\d{1,2},?\s+)?(\d{4})/),
           Self.months.contains(where: { $0.hasPrefix(String(m.1)) && m.1.count >= 3 }), let y = year(m.2) {
            return TakenDate(label: words, years: y...y)
        }
        return TakenDate(label: words, years: nil)
    }

    static let months = FlickrCredits.monthNames.map { $0.lowercased() }

    /// Where a photo goes when an album is ordered by date taken: by its first possible year, then
    /// its month where the words give one, then its words; a photo of unknown date goes last.
    package static func sortKey(_ label: String?) -> (year: Int, month: Int, text: String) {
        guard let label, !label.isEmpty else { return (Int.max, 0, "") }
        let lower = label.lowercased()
        let year = commons(label).years?.lowerBound
            ?? lower.firstMatch(of: /(\d{4})/).flatMap { Int($0.1) }
            ?? Int.max
        // Undated: all alike, so they keep the album's order among themselves.
        if year == Int.max { return (Int.max, 0, "") }
        var month = 0
        if let iso = lower.firstMatch(of: /^\d{4}-(\d{2})/), let m = Int(iso.1) { month = m }
        else if let index = months.firstIndex(where: { lower.contains($0) }) { month = index + 1 }
        return (year, month, lower)
    }

    /// Whether a photo taken in `years` belongs in `era`: all of its possible years inside it (a
    /// photo of "1948–1952" is not one of the 1950s). Unknown years never belong to an era.
    package static func belongs(_ years: ClosedRange<Int>?, in era: Era?) -> Bool {
        guard let era else { return true }
        guard let years else { return false }
        return era.from <= years.lowerBound && years.upperBound <= era.to
    }
}

extension Album {
    /// The album with its photos ordered by when they were taken, oldest first; photos of unknown
    /// date last, each group in the album's own order.
    public func sortedByTaken() -> Album {
        var album = self
        album.photos = photos.enumerated().map { (key: TakenDate.sortKey($0.element.dateTaken), index: $0.offset, photo: $0.element) }
            .sorted { $0.key != $1.key ? $0.key < $1.key : $0.index < $1.index }
            .map(\.photo)
        return album
    }
}
