import Foundation
import AlbumWing
import Domain

/// The album page, the photo page and the picker.
enum AlbumPages {
    static let flickrNotice: HTML = "This product uses the Flickr API but is not endorsed or certified by Flickr."

    /// `view`: the owner's page unless a share link's visitor's (AlbumView); `extraHead` is added
    /// to the head (the visitor's noindex and preview tags).
    static func album(_ album: Album, chrome: Layout.Chrome, providerName: String, view: AlbumView? = nil, extraHead: HTML = .empty,
                      sortedByTaken: Bool = false, own: HTML = .empty) -> HTML {
        let pin = album.pin
        let id = pin.id
        let view = view ?? .owner(id)
        let csrf = chrome.csrfToken ?? ""
        let downloading = pin.status == .downloading
        let title = view.title(pin)
        let head: HTML = downloading
            ? "<noscript><meta http-equiv=\"refresh\" content=\"3\"></noscript><script type=\"module\" src=\"/js/album.js\"></script>"
            : "<script type=\"module\" src=\"/js/album.js\"></script>"
        let ownScript: HTML = own.isEmpty || view.isVisitor ? .empty : "<script type=\"module\" src=\"/js/own-photos.js\"></script>"
        let map: HTML = view.hideLocation ? .empty : """
            <canvas class="album-map" id="album-map" data-lat="\(decimal: pin.lat)" data-lon="\(decimal: pin.lon)" width="160" height="120"
                    role="img" aria-label="Where the pin is: \(text: pin.title)"></canvas>
            """
        let coordinates: HTML = view.hideLocation ? .empty : "\(text: pin.coordinates)"
        let back: HTML = view.back.map { "<nav class=\"breadcrumbs\" aria-label=\"Breadcrumb\"><a href=\"\(text: $0.href)\">\(text: $0.label)</a></nav>" } ?? .empty
        let readOnly: HTML = view.readOnly ? " data-read-only=\"true\" data-base=\"\(text: view.base)\"" : .empty
        return Layout.page(title: title, chrome: chrome, bodyClass: "album-page", head: head + ownScript + extraHead, main: """
            \(back)
            <section class="album" id="album" data-pin="\(id)" data-status="\(text: pin.status.rawValue)" data-csrf="\(text: view.readOnly ? "" : csrf)"\(readOnly)>
            <header class="album-head">
            \(map)
            <div class="album-title">
            <h1>\(text: title)</h1>
            <p class="muted">\(coordinates)<span id="album-page-info">\(text: pageInfo(album))</span></p>
            \(view.throughTime ? order(id, sortedByTaken: sortedByTaken) : HTML.empty)
            \(view.showsWho ? who(album) : .empty)
            \(view.readOnly ? HTML.empty : rename(album, csrf: csrf))
            </div>
            \(view.readOnly ? (view.downloads ? downloadOnly(id) : .empty) : actions(album, csrf: csrf, view: view))
            </header>
            \(own.isEmpty ? HTML.empty : "<h2 class=\"provider-photos-title\">From \(providerTitle(providerName))</h2>")
            \(fragment(album, csrf: csrf, view: view))
            </section>
            \(own)
            \(view.throughTime ? TimePages.strip(album, TimePages.Strip(counts: nil, canChoose: !view.readOnly), csrf: csrf) + TimePages.liveRegion : HTML.empty)
            <p class="attribution muted">Photos and their titles belong to their owners; each photo page links to its source.
            \(providerName == "flickr" ? flickrNotice : HTML.empty)</p>
            """)
    }

    /// The provider's section's heading beside people's own photos: where these came from.
    static func providerTitle(_ providerName: String) -> HTML {
        switch providerName {
        case "flickr": "Flickr"
        case "commons": "Wikimedia Commons"
        default: "the photo service"
        }
    }

    /// Who dropped the pin and when, and who took its collection (if someone else).
    static func who(_ album: Album) -> HTML {
        let day = album.pin.createdAt.formatted(.dateTime.day().month(.abbreviated).year())
        let dropped: HTML = "Dropped by \(text: album.droppedBy ?? "a former member") on \(text: day)"
        let collected: HTML = album.collectedBy.map { $0 == album.droppedBy ? .empty : " · New Collection by \(text: $0)" } ?? .empty
        return "<p class=\"muted album-who\" id=\"album-who\">\(dropped)\(collected)</p>"
    }

    /// Renaming the place, beside its name (for who may change the album).
    static func rename(_ album: Album, csrf: String) -> HTML {
        """
        <details class="rename-pin">
        <summary class="link-button">Rename</summary>
        <form method="post" action="/pins/\(album.pin.id)/rename" class="confirm-box">
        \(Layout.csrfField(csrf))
        <label for="pin-name">Name of this place</label>
        <input type="text" id="pin-name" name="name" required maxlength="\(PinStore.maxNameLength)" value="\(text: album.pin.title)">
        <button type="submit" class="button primary">Save</button>
        </form>
        </details>
        """
    }

    /// A viewer's one control: the album as a zip.
    static func downloadOnly(_ id: Int64) -> HTML {
        "<div class=\"album-actions\"><a class=\"button\" href=\"/pins/\(id)/album.zip\" download>Download album (zip)</a></div>"
    }

    /// The controls of the album page for whoever may change it (owner, editor).
    static func actions(_ album: Album, csrf: String, view: AlbumView = .owner(0)) -> HTML {
        let id = album.pin.id
        let downloading = album.pin.status == .downloading
        let share: HTML = view.shares ? "<a class=\"button\" href=\"/pins/\(id)/shares\" id=\"share-album\">Share…</a>" : .empty
        return """
            <div class="album-actions">
            <form method="post" action="/pins/\(id)/collection" id="new-collection-form">
            \(Layout.csrfField(csrf))
            <button type="submit" class="button primary" id="new-collection"\(downloading ? " disabled" : "")>New Collection</button>
            </form>
            \(share)
            \(eraForm(album, csrf: csrf))
            <button type="button" class="button" id="edit-toggle" aria-pressed="false" hidden>Edit</button>
            <a class="button" href="/pins/\(id)/picker">Choose photos</a>
            <a class="button" href="/pins/\(id)/album.zip" download>Download album (zip)</a>
            <details class="delete-pin">
            <summary class="button danger-outline">Delete pin</summary>
            <form method="post" action="/pins/\(id)/delete" class="confirm-box">
            \(Layout.csrfField(csrf))
            <p>Delete this pin and all its photos?</p>
            <button type="submit" class="button danger">Delete pin</button>
            </form>
            </details>
            </div>
            """
    }

    /// The part of the album page that changes while it downloads: the status banner and the grid.
    /// The page includes it and album.js fetches it (GET /pins/:id/album.html) to patch the page,
    /// so the grid has one renderer, this one.
    static func fragment(_ album: Album, csrf: String, view: AlbumView? = nil) -> HTML {
        let view = view ?? .owner(album.pin.id)
        return """
        <div id="album-status" role="status" aria-live="polite" data-status="\(text: album.pin.status.rawValue)"
             data-page-info="\(text: pageInfo(album))">\(statusBanner(album, csrf: csrf, readOnly: view.readOnly))</div>
        <ul class="photo-grid" id="photo-grid">\(HTML.each(album.photos) { photoItem($0, csrf: csrf, view: view) })</ul>
        """
    }

    /// The album's two orders: as collected (the provider's order) and by date taken. Links, so
    /// an order can be bookmarked; album.js keeps it while the album downloads.
    static func order(_ id: Int64, sortedByTaken: Bool) -> HTML {
        let collected: HTML = sortedByTaken ? "<a href=\"/pins/\(id)\">as collected</a>" : "<a href=\"/pins/\(id)\" aria-current=\"page\">as collected</a>"
        let taken: HTML = sortedByTaken ? "<a href=\"/pins/\(id)?sort=taken\" aria-current=\"page\">by date taken</a>"
            : "<a href=\"/pins/\(id)?sort=taken\">by date taken</a>"
        return "<nav class=\"album-order\" aria-label=\"Order of the photos\"><span class=\"muted\">Order:</span> \(collected) · \(taken)</nav>"
    }

    static func pageInfo(_ album: Album) -> String {
        let era = album.era.map { " · taken in \($0)" } ?? ""
        guard let page = album.page, let pages = album.totalPages, pages > 1 else { return era }
        return "\(era) · collection \(page) of \(pages)"
    }

    /// When the album's photos were taken: any time, a decade or a range of years. A plain GET
    /// form (it works without JavaScript, and the choice can be bookmarked): its page
    /// (`/pins/:id/when`) says what the choice will do and takes it with a POST carrying the CSRF
    /// token, as New Collection does, since the choice replaces the album's photos and a GET must
    /// change nothing a link or a prefetcher could ask for. album.js posts the choice at once.
    static func eraForm(_ album: Album, csrf: String) -> HTML {
        let id = album.pin.id, era = album.era, thisYear = Era.thisYear
        let offered = Era.decades(thisYear: thisYear)
        // An era the select does not offer (one an administrator wrote) shows as its years.
        let chosen = era.map { offered.contains($0) ? $0.formValue : "years" } ?? "any"
        func option(_ value: String, _ label: String) -> HTML {
            "<option value=\"\(text: value)\"\(value == chosen ? " selected" : "")>\(text: label)</option>"
        }
        let decades = offered.reversed().map { option($0.formValue, "\($0.from)s") }
        let range: (String, String) = era.flatMap { offered.contains($0) ? nil : (String($0.from), String($0.to)) } ?? ("", "")
        return """
            <form method="get" action="/pins/\(id)/when" class="album-era" id="era-form">
            <label for="era-when">When</label>
            <select id="era-when" name="when" aria-describedby="era-help">
            \(option("any", "Any time"))\(decades)\(option("years", "Years…"))
            </select>
            <span class="era-years">
            <label for="era-from">from</label>
            <input type="number" id="era-from" name="from" min="\(Era.earliest)" max="\(thisYear)" inputmode="numeric" value="\(text: range.0)">
            <label for="era-to">to</label>
            <input type="number" id="era-to" name="to" min="\(Era.earliest)" max="\(thisYear)" inputmode="numeric" value="\(text: range.1)">
            </span>
            <button type="submit" class="button" id="era-show"\(album.pin.status == .downloading ? " disabled" : "")>Show</button>
            <p class="muted" id="era-help">A new collection of photos taken then; the years are used with "Years…".</p>
            </form>
            """
    }

    /// The "When" form's answer without JavaScript: what the choice does, and the button that
    /// takes it (a POST with the CSRF token); a refused choice is said, with the form again.
    static func eraConfirmation(_ album: Album, choice: Result<Era?, Era.Refusal>, query: (when: String, from: String, to: String),
                                chrome: Layout.Chrome) -> HTML {
        let id = album.pin.id, csrf = chrome.csrfToken ?? ""
        let title = album.pin.title
        let body: HTML
        switch choice {
        case .failure(let refusal):
            body = """
                <p class="field-error" role="alert">\(text: refusal.description)</p>
                \(eraForm(album, csrf: csrf))
                """
        case .success(let era):
            let what: HTML = era.map { "photos taken in \(text: $0.description)" as HTML } ?? "photos from any time"
            body = """
                <p>A new collection of \(what) replaces this album’s photos (your own photos stay).</p>
                <form method="post" action="/pins/\(id)/collection" class="stacked">
                \(Layout.csrfField(csrf))
                <input type="hidden" name="when" value="\(text: query.when)">
                <input type="hidden" name="from" value="\(text: query.from)">
                <input type="hidden" name="to" value="\(text: query.to)">
                <button type="submit" class="button primary" id="era-confirm">Show \(what)</button>
                </form>
                """
        }
        return Layout.page(title: "When: \(title)", chrome: chrome, main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/pins/\(id)">\(text: title)</a></nav>
            <section class="card era-confirmation">
            <h1>When: \(text: title)</h1>
            \(body)
            </section>
            """)
    }

    static func statusBanner(_ album: Album, csrf: String, readOnly: Bool = false) -> HTML {
        switch album.pin.status {
        case .downloading:
            let total = album.photos.count
            let done = album.photos.filter { $0.status != .pending }.count
            if let waiting = album.waiting { return "<p class=\"banner waiting\">\(text: waiting)</p>" }
            if total == 0 { return "<p class=\"banner\">Searching for photos near this place…</p>" }
            return """
                <p class="banner">Downloading photos… <span id="progress-text">\(done) of \(total) photos downloaded</span>
                <progress id="album-progress" max="\(total)" value="\(done)" aria-hidden="true"></progress></p>
                """
        case .empty:
            return "<p class=\"banner empty\">No photos found near this place. Try a pin near a town or a landmark.</p>"
        case .failed:
            // The error is a fixed phrase (ProviderPhrases); no Retry when trying again cannot help.
            let retry: HTML = album.retryable && !readOnly ? """
                <form method="post" action="/pins/\(album.pin.id)/retry">\(Layout.csrfField(csrf))
                <button type="submit" class="button">Retry</button></form>
                """ : .empty
            return """
                <div class="banner error"><p>\(text: album.error ?? "The photos could not be downloaded.")</p>
                \(retry)</div>
                """
        default:
            if album.photos.isEmpty, let era = album.era {
                return readOnly ? "<p class=\"banner empty\">No photos taken in \(text: era.description) here.</p>"
                    : "<p class=\"banner empty\">No photos taken in \(text: era.description) were found in this collection. New Collection looks further; or choose another time above.</p>"
            }
            if album.photos.isEmpty {
                return readOnly ? "<p class=\"banner empty\">This album is empty.</p>"
                    : "<p class=\"banner empty\">This album is empty. Press New Collection for more photos.</p>"
            }
            // Said by the live region when a download finishes; nothing to see on the page.
            let ready = album.photos.filter { $0.status == .ready }.count
            return "<p class=\"visually-hidden\" id=\"album-ready\">Album ready: \(ready) photo\(ready == 1 ? "" : "s" as HTML).</p>"
        }
    }

    /// Photos (by position) loaded at once rather than lazily: the first rows on a wide screen.
    static let eagerPhotos = 12

    static func photoItem(_ photo: AlbumPhoto, csrf: String, view: AlbumView = AlbumView(base: "", photos: "/photos")) -> HTML {
        let id = photo.id
        let src = view.photoURL(id)
        let remove: HTML = view.readOnly ? .empty : """
            <form method="post" action="/photos/\(id)/delete" class="remove">\(Layout.csrfField(csrf))
            <button type="submit" aria-label="Remove \(text: photo.title.isEmpty ? "Untitled photo" : photo.title)" title="Remove">×</button></form>
            """
        let title = photo.title.isEmpty ? "Untitled photo" : photo.title
        switch photo.status {
        case .ready:
            let size: HTML = photo.width.flatMap { w in photo.height.map { h in " width=\"\(w)\" height=\"\(h)\"" as HTML } } ?? .empty
            let credit = [photo.ownerName, photo.license].filter { !$0.isEmpty }.joined(separator: " · ")
            // The first rows load as soon as they are in the page; lazy loading would wait a frame
            // for layout to say they are in view (script/bench pindrop). Lazy below them, for phones.
            let loading: HTML = photo.position < eagerPhotos ? .empty : " loading=\"lazy\""
            return """
                <li class="photo" data-id="\(id)" data-status="ready">
                <a href="\(text: view.photoPageURL(id))" title="\(text: title) — \(text: credit)"><img src="\(text: src)?w=256" srcset="\(text: src)?w=256 256w, \(text: src)?w=512 512w"
                     sizes="(max-width: 600px) 33vw, 180px" alt="\(text: title)"\(size)\(loading)>
                <span class="credit">\(text: credit)</span></a>
                \(remove)
                </li>
                """
        case .failed:
            return """
                <li class="photo failed" data-id="\(id)" data-status="failed"><div class="placeholder"><span>Could not download</span></div>
                \(remove)
                </li>
                """
        default:
            return "<li class=\"photo pending\" data-id=\"\(id)\" data-status=\"pending\"><div class=\"placeholder\" role=\"img\" aria-label=\"Photo loading\"></div></li>"
        }
    }

    static func photoPage(_ photo: AlbumPhoto, pin: Pin, previous: Int64?, next: Int64?, index: Int, count: Int,
                          chrome: Layout.Chrome, providerName: String, view: AlbumView? = nil, extraHead: HTML = .empty) -> HTML {
        let id = photo.id
        let view = view ?? .owner(pin.id)
        let title = photo.title.isEmpty ? "Untitled photo" : photo.title
        let pager = Pager(previous: previous.map { view.photoPageURL($0) }, next: next.map { view.photoPageURL($0) },
                          previousLabel: "← Previous", nextLabel: "Next →", previousID: "previous-photo", nextID: "next-photo")
        let remove: HTML = view.readOnly ? .empty : """
            <form method="post" action="/photos/\(id)/delete" class="photo-delete">\(Layout.csrfField(chrome.csrfToken ?? ""))
            <button type="submit" class="button danger-outline">Remove from album</button></form>
            """
        let source: HTML = ProviderLinks.safe(photo.pageURL).map { "<a href=\"\(text: $0)\" rel=\"noopener noreferrer\">View on \(providerName == "flickr" ? "Flickr" : "the source site" as HTML)</a>" } ?? .empty
        let owner: HTML = photo.ownerName.isEmpty ? .empty : "<dt>By</dt><dd>\(text: photo.ownerName)</dd>"
        let taken: HTML = "<dt>Taken</dt><dd>\(text: photo.dateTaken ?? "date unknown")</dd>"
        // The deed, as the provider's licence list links it (rel=license, HTML's link type for it).
        let license: HTML = ProviderLinks.safe(photo.licenseURL).map { "<a href=\"\(text: $0)\" rel=\"license noopener noreferrer\">\(text: photo.license)</a>" }
            ?? "\(text: photo.license)"
        return Layout.page(title: title, chrome: chrome, bodyClass: "photo-page",
                           head: "<script type=\"module\" src=\"/js/photo.js\"></script>" + extraHead, main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="\(text: view.base)" id="back-to-album">← \(text: view.title(pin))</a></nav>
            <figure class="photo-large">
            <img src="\(text: view.photoURL(id))" alt="\(text: title)"\(photo.width.map { w in " width=\"\(w)\" height=\"\(photo.height ?? w)\"" as HTML } ?? .empty)>
            <figcaption>
            <h1>\(text: title)</h1>
            <dl class="photo-facts">\(owner)<dt>Licence</dt><dd>\(license)</dd>\(taken)</dl>
            <p>\(source)</p>
            </figcaption>
            </figure>
            <div class="photo-nav">\(pager.previousLink)<span class="muted">\(index + 1) of \(count)</span>\(pager.nextLink)</div>
            \(remove)
            <p class="attribution muted">\(providerName == "flickr" ? flickrNotice : HTML.empty)</p>
            """)
    }

    static func picker(pin: Pin, result: PhotoSearchPage, saved: Set<String>, chrome: Layout.Chrome, providerName: String) -> HTML {
        let id = pin.id
        let items: [HTML] = result.photos.map { photo in
            let title = photo.title.isEmpty ? "Untitled photo" : photo.title
            let isSaved = saved.contains(photo.remoteID)
            let preview: HTML = ProviderLinks.safe(photo.imageURL).map { "<a href=\"\(text: $0)\" class=\"preview-link\" target=\"_blank\" rel=\"noopener noreferrer\">Preview<span class=\"visually-hidden\"> \(text: title)</span></a>" } ?? .empty
            return """
                <li class="pick\(isSaved ? " saved" : HTML.empty)">
                <label><input type="checkbox" name="photo" value="\(text: photo.remoteID)"\(isSaved ? " checked disabled" : HTML.empty)>
                <img src="\(text: ProviderLinks.safe(photo.thumbnailURL) ?? "")" alt="\(text: title)" width="150" height="150" loading="lazy">
                <span class="pick-title">\(text: title)\(isSaved ? " (in the album)" : HTML.empty)</span></label>
                \(preview)
                </li>
                """
        }
        let pager = Pager(previous: result.page > 1 ? "/pins/\(id)/picker?page=\(result.page - 1)" : nil,
                          next: result.page < result.pages ? "/pins/\(id)/picker?page=\(result.page + 1)" : nil,
                          previousLabel: "← Previous page", nextLabel: "Next page →")
        return Layout.page(title: "Choose photos", chrome: chrome, bodyClass: "picker-page",
                           head: "<script type=\"module\" src=\"/js/picker.js\"></script>", main: """
            <nav class="breadcrumbs"><a href="/pins/\(id)">← \(text: pin.title)</a></nav>
            <h1>Choose photos near \(text: pin.title)</h1>
            <div class="picker-nav">\(pager.previousLink)<span>Page \(result.page) of \(max(result.pages, 1))</span>\(pager.nextLink)</div>
            \(newCount(result, saved: saved))
            \(items.isEmpty ? "<p class=\"banner empty\">No photos on this page.</p>" : HTML.empty)
            <form method="post" action="/pins/\(id)/picker">
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            <input type="hidden" name="page" value="\(result.page)">
            <ul class="picker-grid">\(items)</ul>
            <button type="submit" class="button primary">Save chosen photos</button>
            </form>
            <p class="attribution muted">\(providerName == "flickr" ? flickrNotice : HTML.empty)</p>
            """)
    }

    /// How many photos on this page could still be added (those in the album are shown, marked).
    static func newCount(_ result: PhotoSearchPage, saved: Set<String>) -> HTML {
        guard !result.photos.isEmpty else { return .empty }
        let new = result.photos.filter { !saved.contains($0.remoteID) }.count
        let text = new == result.photos.count ? "" : new == 0
            ? "All \(result.photos.count) photos on this page are in the album already; try the next page."
            : "\(new) of the \(result.photos.count) photos on this page are not in the album yet."
        return text.isEmpty ? .empty : "<p class=\"muted\" id=\"picker-new-count\">\(text: text)</p>"
    }
}
