import Foundation

/// What a Flickr answer says about a photo's date and licence, read without stating more than it
/// says (docs/providers.md).
package enum FlickrCredits {
    /// Shown when the answer has no licence, or one the licence list does not know.
    package static let unknownLicence = "see the photo page"

    /// The licence of a photo: its id from the answer, named by `names` (flickr.photos.licenses.getInfo).
    /// No `license` field, an empty one or an id `names` does not know is never guessed.
    package static func licence(_ raw: Any?, names: (Int) -> String?) -> String {
        if let text = raw as? String, text.trimmingCharacters(in: .whitespaces).isEmpty { return unknownLicence }
        guard let id = lenientInt(raw) else { return unknownLicence }
        return names(id) ?? unknownLicence
    }

    /// When the photo was taken, as precisely as Flickr knows it (flickr.com/services/api/misc.dates):
    /// granularity 0 is to the second, 4 the month, 6 the year, 8 "circa" that year. With
    /// `datetakenunknown` Flickr fills the date with the upload time: no date then.
    package static func taken(_ raw: Any?, granularity: Any?, unknown: Any?) -> String? {
        if lenientInt(unknown) == 1 { return nil }
        guard let text = lenientString(raw), text.count >= 4, let year = Int(text.prefix(4)), year > 0 else { return nil }
        switch lenientInt(granularity) ?? 0 {
        case 4:
            let month = text.count >= 7 ? Int(text.dropFirst(5).prefix(2)) : nil
            guard let month, (1...12).contains(month) else { return String(year) }
            return "\(monthNames[month - 1]) \(year)"
        case 6: return String(year)
        case 8: return "circa \(year)"
        default: return text
        }
    }

    /// The year it was taken, for an era (granularity does not widen it: Flickr files "circa
    /// 1962" and "1962" under 1962 alike); nil when Flickr does not know the date.
    package static func takenYears(_ raw: Any?, unknown: Any?) -> ClosedRange<Int>? {
        if lenientInt(unknown) == 1 { return nil }
        guard let text = lenientString(raw), text.count >= 4, let year = Int(text.prefix(4)), (1000...9999).contains(year) else { return nil }
        return year...year
    }

    package static let monthNames = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                             "October", "November", "December"]
}
