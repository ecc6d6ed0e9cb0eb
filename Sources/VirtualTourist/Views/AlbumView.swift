import Foundation
import Domain

/// Who an album page is drawn for, and so where its links point and what it may show: the owner
/// (/pins/ID, /photos/ID, every control) or a share link's visitor (/s/TOKEN/…, read-only, and
/// with a link that hides the location no coordinates, no small map and no name but the link's
/// label or the country). One album view, two modes: the visitor's page is the owner's with less in it.
struct AlbumView: Sendable {
    /// The album's own URLs (the page, album.html, events): "/pins/12" or "/s/TOKEN[/pins/12]".
    var base: String
    /// Where photos are: "/photos" or "/s/TOKEN/photos".
    var photos: String
    var readOnly = false
    var hideLocation = false
    /// On a shared map: who dropped the pin and who took its collection.
    var showsWho = false
    /// A read-only member (a viewer) still downloads the album.
    var downloads = false
    /// The Share… button (owners; editors when the owners allow it).
    var shares = true
    /// The breadcrumb above the album (nil: none).
    var back: (href: String, label: String)? = ("/", "← Your map")
    /// What a link that hides the location calls a place (`WebPipeline.visitorView`).
    var hiddenName: @Sendable (Pin) -> String = { _ in AlbumView.unnamedPlace }
    /// The strip of decades and then and now (members only: a share link shows the album alone).
    var throughTime: Bool { base.hasPrefix("/pins/") }
    /// A share link's visitor's page (nothing on it changes anything).
    var isVisitor: Bool { base.hasPrefix("/s/") }
    /// A hidden place with no label and no country to go by.
    static let unnamedPlace = "A shared album"

    static func owner(_ pinID: Int64) -> AlbumView { AlbumView(base: "/pins/\(pinID)", photos: "/photos") }

    /// A member of the map the pin is on: the owner's page, read-only for a viewer, and back to
    /// the map by its name.
    static func member(_ pinID: Int64, map: MapAccess) -> AlbumView {
        var view = owner(pinID)
        view.readOnly = map.role < .editor
        view.downloads = view.readOnly
        view.shares = map.mayShare
        if map.sharedID != nil {
            view.back = ("/", "← " + map.name)
            view.showsWho = true
        }
        return view
    }

    static func visitor(token: String, pinID: Int64?, hideLocation: Bool,
                        hiddenName: @escaping @Sendable (Pin) -> String) -> AlbumView {
        let root = "/s/" + token
        return AlbumView(base: pinID.map { root + "/pins/\($0)" } ?? root, photos: root + "/photos", readOnly: true,
                         hideLocation: hideLocation, back: pinID == nil ? nil : (root, "← All places"), hiddenName: hiddenName)
    }

    /// The pin's name as this page may show it: with the location hidden, never the pin's own
    /// text (an imported pin is named by its file) and no coordinates at all.
    func title(_ pin: Pin) -> String {
        hideLocation ? hiddenName(pin) : pin.title
    }

    func photoURL(_ id: Int64) -> String { photos + "/\(id)" }
    func photoPageURL(_ id: Int64) -> String { photos + "/\(id)/view" }
}
