import Foundation
import AlbumWing

/// The album's section of people's own photos: theirs beside the provider's, with who added each
/// and when it was taken, and (for editors and owners) "Add your photos here".
enum OwnPhotoPages {
    /// The section, below the provider's photos. `canAdd`: editors and owners; `shared`: on a
    /// shared map the heading names the members, on one's own map it says "Yours".
    static func section(_ photos: [OwnPhoto], pinID: Int64, csrf: String, canAdd: Bool, shared: Bool,
                        mayRemove: (OwnPhoto) -> Bool, maxFileMB: Int) -> HTML {
        guard canAdd || !photos.isEmpty else { return .empty }
        let heading: HTML = shared ? "Members’ photos" : "Yours"
        let count: HTML = photos.isEmpty ? .empty : " <span class=\"muted\">(\(photos.count))</span>"
        let empty: HTML = photos.isEmpty ? "<p class=\"muted\" id=\"own-photos-empty\">None yet. Photos you add here stay in this album, beside the ones collected for it.</p>" : .empty
        return """
            <section class="own-photos" id="own-photos" aria-labelledby="own-photos-title">
            <h2 id="own-photos-title">\(heading)\(count)</h2>
            \(empty)
            <ul class="photo-grid own-grid" id="own-grid">\(HTML.each(photos) { "<li class=\"photo own\" data-id=\"\($0.id)\">\(figure($0, csrf: csrf, mayRemove: mayRemove($0)))</li>" })</ul>
            \(canAdd ? uploadForm(pinID: pinID, csrf: csrf, maxFileMB: maxFileMB) : HTML.empty)
            </section>
            """
    }

    /// The section as a share link's visitor sees it (a link whose maker ticked "own photos"):
    /// the display versions from the link's own path, who added each and when, and no file
    /// names (a file's name can say where it was taken, which a link may hide).
    static func visitorSection(_ photos: [OwnPhoto], token: String) -> HTML {
        guard !photos.isEmpty else { return .empty }
        return """
            <section class="own-photos" id="own-photos" aria-labelledby="own-photos-title">
            <h2 id="own-photos-title">Their own photos <span class="muted">(\(photos.count))</span></h2>
            <ul class="photo-grid own-grid" id="own-grid">\(HTML.each(photos) { photo in
                let src = "/s/\(token)/own-photos/\(photo.id)"
                let who = photo.addedByShown
                let when = takenLabel(photo)
                return """
                    <li class="photo own" data-id="\(photo.id)"><a href="\(text: src)">\(thumbnail(photo, src: src, alt: "A photo by " + who + (when.isEmpty ? "" : ", taken " + when)))
                    <span class="credit">\(text: who)\(when.isEmpty ? "" : " · ")\(text: when)</span></a></li>
                    """
            })</ul>
            </section>
            """
    }

    /// A photo as the grid shows it: the thumbnail (no location in it), who added it and when it
    /// was taken, and Remove for who may.
    static func figure(_ photo: OwnPhoto, csrf: String, mayRemove: Bool) -> HTML {
        let src = "/own-photos/\(photo.id)"
        let who = photo.addedByShown
        let when = takenLabel(photo)
        let remove: HTML = mayRemove ? """
            <form method="post" action="/own-photos/\(photo.id)/delete" class="remove">\(Layout.csrfField(csrf))
            <button type="submit" aria-label="Remove \(text: photo.fileName)" title="Remove">×</button></form>
            """ : .empty
        return """
            <a href="\(text: src)/view" title="\(text: photo.fileName) — added by \(text: who)">\(thumbnail(photo, src: src, alt: photo.fileName + ", added by " + who))
            <span class="credit">\(text: who)\(when.isEmpty ? "" : " · ")\(text: when)\(photo.placed == .estimated ? " · place estimated" : "")</span></a>
            \(remove)
            """
    }

    /// The grid's image of an own photo served from `src` (the member's route or a link's): the
    /// 256 px thumbnail, and 512 px for dense screens, where the photo has them.
    static func thumbnail(_ photo: OwnPhoto, src: String, alt: String) -> HTML {
        let small = photo.thumb256 != nil ? "?w=256" : ""
        let srcset: HTML = photo.thumb512 != nil ? " srcset=\"\(text: src)?w=256 256w, \(text: src)?w=512 512w\" sizes=\"(max-width: 600px) 33vw, 180px\"" : .empty
        return "<img src=\"\(text: src + small)\"\(srcset) alt=\"\(text: alt)\" loading=\"lazy\">"
    }

    /// A member's own photo on a page of its own, as a provider's photo has: large, who added it,
    /// when and with what it was taken and how it came to its pin, the previous and next of the
    /// album's own photos (arrow keys too: photo.js), the original for who may have it, Remove
    /// for who may.
    static func viewer(_ photo: OwnPhoto, pinTitle: String, previous: Int64?, next: Int64?, index: Int, count: Int,
                       mayDownload: Bool, mayRemove: Bool, chrome: Layout.Chrome) -> HTML {
        let id = photo.id
        let pager = Pager(previous: previous.map { "/own-photos/\($0)/view" }, next: next.map { "/own-photos/\($0)/view" },
                          previousLabel: "← Previous", nextLabel: "Next →", previousID: "previous-photo", nextID: "next-photo")
        let who = photo.addedByShown
        let when = takenLabel(photo)
        let placed: String = switch photo.placed {
        case .file: "where its GPS says"
        case .person: "by hand"
        case .estimated: "estimated, beside photos taken minutes apart"
        }
        let camera: HTML = photo.camera.map { "<dt>Camera</dt><dd>\(text: $0)</dd>" } ?? .empty
        let download: HTML = mayDownload
            ? "<a class=\"button\" href=\"/own-photos/\(id)?original=1\" download>Download the original<span class=\"muted\"> (with its location)</span></a>" : .empty
        let remove: HTML = mayRemove ? """
            <form method="post" action="/own-photos/\(id)/delete" class="photo-delete">\(Layout.csrfField(chrome.csrfToken ?? ""))
            <button type="submit" class="button danger-outline">Remove from album</button></form>
            """ : .empty
        return Layout.page(title: photo.fileName, chrome: chrome, bodyClass: "photo-page",
                           head: "<script type=\"module\" src=\"/js/photo.js\"></script>", main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/pins/\(photo.pinID)#own-photos" id="back-to-album">← \(text: pinTitle)</a></nav>
            <figure class="photo-large">
            <img src="/own-photos/\(id)" alt="\(text: photo.fileName), added by \(text: who)" width="\(photo.width)" height="\(photo.height)">
            <figcaption>
            <h1>\(text: photo.fileName)</h1>
            <dl class="photo-facts"><dt>Added by</dt><dd>\(text: who)</dd><dt>Taken</dt><dd>\(text: when.isEmpty ? "date unknown" : when)</dd>\(camera)<dt>Placed</dt><dd>\(text: placed)</dd></dl>
            </figcaption>
            </figure>
            <div class="photo-nav">\(pager.previousLink)<span class="muted">\(index + 1) of \(count)</span>\(pager.nextLink)</div>
            <div class="album-actions">\(download)</div>
            \(remove)
            """)
    }

    /// "3 May 2024, 14:22" on the camera's clock (as the person saw it there), or "" when unknown.
    static func takenLabel(_ photo: OwnPhoto) -> String {
        guard let local = photo.takenLocal, local.count >= 16 else { return "" }
        let parts = local.split(whereSeparator: { $0 == "-" || $0 == "T" || $0 == ":" }).compactMap { Int($0) }
        guard parts.count >= 5, (1...12).contains(parts[1]) else { return local }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts[2]) \(months[parts[1] - 1]) \(parts[0]), \(two(parts[3])):\(two(parts[4]))"
    }

    /// Several files at once without JavaScript; with it, own-photos.js sends each on its own,
    /// takes dropped files, and shows each file's progress.
    static func uploadForm(pinID: Int64, csrf: String, maxFileMB: Int) -> HTML {
        """
        <form method="post" action="/pins/\(pinID)/own-photos" enctype="multipart/form-data" class="own-upload" id="own-upload"
              data-pin="\(pinID)" data-max-bytes="\(maxFileMB * 1024 * 1024)">
        \(Layout.csrfField(csrf))
        <label for="own-files">Add your photos here</label>
        <input type="file" id="own-files" name="file" multiple accept="image/jpeg,image/heic,image/heif,image/png,image/webp,.heic,.heif" aria-describedby="own-files-hint">
        <button type="submit" class="button">Add photos</button>
        <p class="muted" id="own-files-hint">JPEG, HEIC, PNG or WebP, up to \(maxFileMB) MB each; or drop them on this album. Members see them without their location; the original, with it, is for you and the map’s owners.</p>
        <div id="own-upload-progress" class="own-progress" role="status" aria-live="polite"></div>
        </form>
        """
    }
}
