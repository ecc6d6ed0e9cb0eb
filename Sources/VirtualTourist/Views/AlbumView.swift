import Foundation

/// Who an album page is drawn for, and so where its links point and what it may show: the owner
/// (/pins/ID, /photos/ID, every control) or a share link's visitor (/s/TOKEN/…, read-only, and
/// with a link that hides the location no coordinates, no small map and only the country of the
/// place name). One album view, two modes: the visitor's page is the owner's with less in it.
struct AlbumView: Sendable {
    /// The album's own URLs (the page, album.html, events): "/pins/12" or "/s/TOKEN[/pins/12]".
    var base: String
    /// Where photos are: "/photos" or "/s/TOKEN/photos".
    var photos: String
    var readOnly = false
    var hideLocation = false
    /// The breadcrumb above the album (nil: none).
    var back: (href: String, label: String)? = ("/", "← Your map")

    static func owner(_ pinID: Int64) -> AlbumView { AlbumView(base: "/pins/\(pinID)", photos: "/photos") }

    static func visitor(token: String, pinID: Int64?, hideLocation: Bool) -> AlbumView {
        let root = "/s/" + token
        return AlbumView(base: pinID.map { root + "/pins/\($0)" } ?? root, photos: root + "/photos", readOnly: true,
                         hideLocation: hideLocation, back: pinID == nil ? nil : (root, "← All places"))
    }

    /// The pin's name as this page may show it: with the location hidden, only the last part of
    /// the place name (its country), and no coordinates at all.
    func title(_ pin: Pin) -> String {
        guard hideLocation else { return pin.title }
        return Self.coarsePlace(pin.placeName) ?? "A shared album"
    }

    static func coarsePlace(_ placeName: String?) -> String? {
        guard let last = placeName?.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty else { return nil }
        // A place name is made of names; anything with a digit could be a coordinate.
        guard !last.contains(where: \.isNumber) else { return nil }
        return last
    }

    func photoURL(_ id: Int64) -> String { photos + "/\(id)" }
    func photoPageURL(_ id: Int64) -> String { photos + "/\(id)/view" }
}
