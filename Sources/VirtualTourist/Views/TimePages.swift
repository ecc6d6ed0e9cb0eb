import Foundation
import AlbumWing
import Domain

/// A place through time: the album page's strip of decades, and then and now.
enum TimePages {
    /// The strip as the album page shows it: the counts (nil: not counted yet) and whether the
    /// person may choose a decade (an editor or the owner; a viewer sees the counts only).
    struct Strip: Sendable {
        var counts: DecadeCounts?
        let canChoose: Bool
        /// Set when a count is under way or could not be made (the provider busy or failing).
        var note: String? = nil
        /// The album's own photos (people's) by the decade they were taken in, beside the provider's.
        var ours: [Int: Int] = [:]
    }

    /// Own photos by the first year of the decade they were taken in (those without a time: none).
    static func decadesOf(_ photos: [OwnPhoto]) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for photo in photos {
            guard let year = photo.takenLocal.flatMap({ Int($0.prefix(4)) }) else { continue }
            counts[year / 10 * 10, default: 0] += 1
        }
        return counts
    }

    /// A bar's height in five steps, by powers of ten (1, 10, 100, 1,000, 10,000+): a decade with
    /// 3 photos stays visible beside one with 30,000.
    static func level(_ count: Int) -> Int {
        count <= 0 ? 0 : min(5, 1 + Int(log10(Double(count))))
    }

    static func photos(_ count: Int) -> String {
        count == 1 ? "1 photo" : "\(count.formatted(.number.grouping(.automatic))) photos"
    }

    /// The strip: a list of decades, each a button that loads it (a POST, as New Collection is)
    /// with its count beside it; read as "1950s, 12 photos" by a screen reader, the album's
    /// decade marked current. Without counts yet: a link that counts (album.js follows it itself).
    /// Where album.js says how the count goes (a still-counting or failed note), kept outside the
    /// strip it replaces so that a screen reader hears it.
    static let liveRegion: HTML = "<p id=\"decades-status\" class=\"visually-hidden\" role=\"status\" aria-live=\"polite\"></p>"

    static func strip(_ album: Album, _ strip: Strip, csrf: String) -> HTML {
        let id = album.pin.id
        let heading: HTML = "<h2 id=\"decades-title\" class=\"decades-title\">This place through time</h2>"
        let thenAndNow: HTML = "<a class=\"button\" href=\"/pins/\(id)/then-and-now\" id=\"then-and-now-link\">Then and now</a>"
        guard let counts = strip.counts else {
            // Said by the page's live region (#decades-status, outside the strip album.js replaces).
            let note: HTML = strip.note.map { "<p class=\"muted decades-note\">\(text: $0)</p>" } ?? .empty
            return """
                <section class="decades" id="decades" aria-labelledby="decades-title" data-count="/pins/\(id)/decades?fragment=1">
                \(heading)
                \(note)
                <p><a href="/pins/\(id)/decades" id="count-decades">Count this place's photos by decade</a> \(thenAndNow)</p>
                </section>
                """
        }
        let items: [HTML] = Era.decades().map { decade in
            let count = counts.photos[decade.from] ?? 0
            let current = album.era == decade
            let ours = strip.ours[decade.from] ?? 0
            let own: HTML = ours > 0 ? "<span class=\"decade-own\">\(ours) of the album’s own</span>" : .empty
            let label: HTML = "<span class=\"decade-name\">\(decade.from)s</span><span class=\"decade-count\">\(text: photos(count))</span>\(own)"
            guard strip.canChoose, count > 0 else {
                let marked: HTML = current ? " aria-current=\"true\"" : .empty
                return "<li class=\"decade bar-\(level(count))\(current ? " current" : HTML.empty)\"\(marked)>\(label)</li>"
            }
            return """
                <li class="decade bar-\(level(count))\(current ? " current" : HTML.empty)">
                <form method="post" action="/pins/\(id)/collection">\(Layout.csrfField(csrf))<input type="hidden" name="when" value="\(decade.from)s">
                <button type="submit"\(current ? " aria-current=\"true\"" : HTML.empty)>\(label)</button></form></li>
                """
        }
        let day = counts.countedAt.formatted(.dateTime.day().month(.abbreviated).year())
        return """
            <section class="decades" id="decades" aria-labelledby="decades-title">
            \(heading)
            <ol class="decade-strip" aria-describedby="decades-help">\(items)</ol>
            <p class="muted" id="decades-help">Photos the provider holds around this pin, by the decade they were taken in
            (counted \(text: day)).\(strip.canChoose ? " Choose a decade for an album of it." : HTML.empty) \(thenAndNow)</p>
            </section>
            """
    }

    /// Then and now: an era's photos beside this decade's, in pairs, straight from the provider
    /// (as the picker shows them: nothing is downloaded), each with its date and credits.
    static func thenAndNow(pin: Pin, then: Era, now: Era, thenPhotos: [RemotePhoto], nowPhotos: [RemotePhoto], chrome: Layout.Chrome) -> HTML {
        let id = pin.id
        let options: [HTML] = Era.decades().dropLast().reversed().map { decade in
            "<option value=\"\(decade.from)s\"\(decade == then ? " selected" : HTML.empty)>\(decade.from)s</option>"
        }
        let pairs: [HTML] = zip(thenPhotos, nowPhotos).prefix(12).enumerated().map { index, pair in
            """
            <li class="pair" aria-label="Pair \(index + 1)">
            \(figure(pair.0, side: "Then", era: then))
            \(figure(pair.1, side: "Now", era: now))
            </li>
            """
        }
        let empty: HTML = pairs.isEmpty
            ? "<p class=\"banner empty\">\(text: thenPhotos.isEmpty ? "No photos taken in \(then) were found around this pin." : "No photos of \(now) were found around this pin.") Try another decade.</p>"
            : .empty
        return Layout.page(title: "Then and now: \(pin.title)", chrome: chrome, bodyClass: "then-now-page", main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/pins/\(id)">← \(text: pin.title)</a></nav>
            <h1>Then and now</h1>
            <p class="muted">Photos taken around \(text: pin.title) in \(text: then.description), each beside one taken in \(text: now.description).</p>
            <form method="get" action="/pins/\(id)/then-and-now" class="then-now-form">
            <label for="then-era">Then</label>
            <select id="then-era" name="then">\(options)</select>
            <button type="submit" class="button">Show</button>
            </form>
            \(empty)
            <ol class="pairs">\(pairs)</ol>
            """)
    }

    static func figure(_ photo: RemotePhoto, side: String, era: Era) -> HTML {
        let title = photo.title.isEmpty ? "Untitled photo" : photo.title
        let taken = photo.dateTaken ?? "date unknown"
        let link: HTML = ProviderLinks.safe(photo.pageURL).map {
            "<a href=\"\(text: $0)\" rel=\"noopener noreferrer\" target=\"_blank\">\(text: title)<span class=\"visually-hidden\"> (opens the photo's page)</span></a>"
        } ?? "\(text: title)"
        let author: HTML = photo.ownerName.isEmpty ? .empty : " · \(text: photo.ownerName)"
        return """
            <figure class="\(text: side.lowercased())">
            <img src="\(text: ProviderLinks.safe(photo.thumbnailURL) ?? "")" alt="\(text: title)" loading="lazy">
            <figcaption><strong>\(text: side)</strong> · \(text: taken)<br>\(link)\(author) · \(text: photo.license)</figcaption>
            </figure>
            """
    }
}
