import Foundation
import AlbumWing
import Domain

/// Share links: the visitor's password page and map list, the preview tags, and the owner's list
/// of links with the form that makes one. The visitor's album and photo pages are AlbumPages in
/// read-only mode (AlbumView.visitor).
enum SharePages {
    /// Every visitor page: not for search engines (the X-Robots-Tag header says it too).
    static let noindex: HTML = "<meta name=\"robots\" content=\"noindex, nofollow\">"
    static let stylesheet: HTML = "<link rel=\"stylesheet\" href=\"/css/share.css\">"

    /// Open Graph tags for link previews (ogp.me): title, description and, when the instance knows
    /// its public address, one thumbnail by absolute URL. Never for a link with a password.
    static func previewTags(title: String, description: String, image: String?) -> HTML {
        let image: HTML = image.map { "<meta property=\"og:image\" content=\"\(text: $0)\">" } ?? .empty
        return """
            <meta property="og:type" content="website">
            <meta property="og:title" content="\(text: title)">
            <meta property="og:description" content="\(text: description)">
            \(image)
            """
    }

    static func password(token: String, chrome: Layout.Chrome, error: String?) -> HTML {
        let problem: HTML = error.map { "<p class=\"form-error\" id=\"share-password-error\" role=\"alert\">\(text: $0)</p>" } ?? .empty
        let described: HTML = error == nil ? .empty : " aria-describedby=\"share-password-error\" aria-invalid=\"true\""
        return Layout.page(title: "Password needed", chrome: chrome, bodyClass: "share-password-page", head: noindex, main: """
            <section class="card narrow">
            <h1>This shared album has a password</h1>
            <p>Type the password the person who sent you the link gave you.</p>
            \(problem)
            <form method="post" action="/s/\(text: token)" class="stacked">
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            <label for="share-password">Password</label>
            <input type="password" id="share-password" name="password" autocomplete="current-password" required maxlength="\(Password.maximumLength)"\(described)>
            <button type="submit" class="button primary">Open the album</button>
            </form>
            </section>
            """)
    }

    /// A link to someone's whole map: their places as a list, each opening its album read-only.
    static func map(_ pins: [Pin], token: String, view: AlbumView, chrome: Layout.Chrome, extraHead: HTML) -> HTML {
        let hideLocation = view.hideLocation
        let items = HTML.each(pins) { pin in
            let count = pin.photoCount == 1 ? "1 photo" : "\(pin.photoCount) photos"
            let place: HTML = hideLocation ? .empty : " <span class=\"muted\">\(text: pin.coordinates)</span>"
            return "<li><a href=\"/s/\(text: token)/pins/\(pin.id)\">\(text: view.title(pin))</a>\(place) <span class=\"muted\">· \(text: count)</span></li>"
        }
        // The map only when the link shows locations; the list is the same places either way.
        let map: HTML
        if hideLocation || pins.isEmpty {
            map = .empty
        } else {
            struct Place: Encodable { let id: Int64; let lat: Double; let lon: Double }
            let json = (try? JSONEncoder().encode(pins.map { Place(id: $0.id, lat: $0.lat, lon: $0.lon) })).map { Array($0) } ?? Array("[]".utf8)
            map = """
                <canvas class="share-map" id="share-map" data-pins="\(text: json)" data-base="/s/\(text: token)" width="640" height="360"
                        role="img" aria-label="Map of the shared places (the list below links to each)"></canvas>
                """
        }
        let script: HTML = map.isEmpty ? .empty : "<script type=\"module\" src=\"/js/share-map.js\"></script>"
        return Layout.page(title: "Shared places", chrome: chrome, bodyClass: "share-map-page", head: noindex + stylesheet + script + extraHead, main: """
            <h1>Shared places</h1>
            \(map)
            \(pins.isEmpty ? "<p class=\"banner empty\">No places yet.</p>" as HTML : HTML.empty)
            <ul class="share-places">\(items)</ul>
            """)
    }

    /// The owner's share links of one album (pin) or of everything (pin nil), with the form for a
    /// new one. `created`: the link just made, shown this once (the table keeps only its hash).
    static func manage(pin: Pin?, links: [ShareLink], created: String?, chrome: Layout.Chrome, formError: String? = nil) -> HTML {
        let csrf = chrome.csrfToken ?? ""
        let action = pin.map { "/pins/\($0.id)/shares" } ?? "/shares"
        let heading = pin.map { "Share “\($0.title)”" } ?? "Your share links"
        let back: HTML = pin.map { "<nav class=\"breadcrumbs\"><a href=\"/pins/\($0.id)\">← \(text: $0.title)</a></nav>" }
            ?? "<nav class=\"breadcrumbs\"><a href=\"/\">← Your map</a></nav>"
        let fresh: HTML = created.map { url in """
            <section class="card share-created" aria-labelledby="share-created-heading">
            <h2 id="share-created-heading">Your new link</h2>
            <p>Copy it now: it is shown only this once (the server keeps only a fingerprint of it).</p>
            <p class="share-url"><label for="new-share-url" class="visually-hidden">The new share link</label>
            <input type="text" id="new-share-url" value="\(text: url)" readonly size="60">
            <button type="button" class="button" id="copy-share-url" hidden>Copy</button>
            <span id="copy-share-status" role="status"></span></p>
            </section>
            """ } ?? .empty
        let expiryOptions = HTML.each(ShareLinks.expiryChoices) { days in
            let name: HTML = days == 0 ? "Never" : days == 1 ? "1 day" : days == 365 ? "1 year" : "\(days) days"
            return "<option value=\"\(days)\"\(days == ShareLinks.defaultExpiryDays ? " selected" : "" as HTML)>\(name)</option>"
        }
        let problem: HTML = formError.map { "<p class=\"form-error\" role=\"alert\">\(text: $0)</p>" } ?? .empty
        let rows = HTML.each(links) { link in row(link, csrf: csrf, showPin: pin == nil) }
        let what: HTML = pin == nil
            ? "A link to your whole map shows every place and album, read-only, to anyone who has it."
            : "A link to this album shows its photos, credits and small map, read-only, to anyone who has it; no account needed."
        let table: HTML = links.isEmpty ? "<p class=\"muted\">No links yet.</p>" : """
            <table class="share-links">
            <thead><tr><th scope="col">Name</th>\(pin == nil ? "<th scope=\"col\">Shows</th>" as HTML : HTML.empty)<th scope="col">Made by</th><th scope="col">Made</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col">Options</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
            <tbody>\(rows)</tbody>
            </table>
            """
        return Layout.page(title: heading, chrome: chrome, bodyClass: "share-admin-page",
                           head: stylesheet + "<script type=\"module\" src=\"/js/share-admin.js\"></script>", main: """
            \(back)
            <h1>\(text: heading)</h1>
            \(fresh)
            <section class="card" aria-labelledby="new-share-heading">
            <h2 id="new-share-heading">New link</h2>
            <p class="muted">\(what)</p>
            \(problem)
            <form method="post" action="\(text: action)" class="stacked" id="new-share-form">
            \(Layout.csrfField(csrf))
            <label for="share-label">Name (for you, and the preview's title)</label>
            <input type="text" id="share-label" name="label" maxlength="\(ShareLinks.maxLabelLength)">
            <label for="share-expiry">Expires after</label>
            <select id="share-expiry" name="expires_days">\(expiryOptions)</select>
            <label for="share-new-password">Password (optional, at least \(Password.minimumLength) characters)</label>
            <input type="password" id="share-new-password" name="password" autocomplete="new-password" maxlength="\(Password.maximumLength)">
            <label class="checkbox"><input type="checkbox" name="own_photos" value="1"> Show the photos you added yourself too (without their location or file names; never the originals; other members’ stay private)</label>
            <label class="checkbox"><input type="checkbox" name="hide_location" value="1"> Hide the location (no coordinates, no map, no photo titles or links to the photos’ pages: only the country, and each photo’s author and licence)</label>
            <button type="submit" class="button primary">Make a link</button>
            </form>
            </section>
            <section aria-labelledby="share-list-heading">
            <h2 id="share-list-heading">Links</h2>
            \(table)
            \(pin == nil ? HTML.empty : "<p><a href=\"/shares\">All your share links, and a link to your whole map</a></p>")
            </section>
            """)
    }

    static func row(_ link: ShareLink, csrf: String, showPin: Bool) -> HTML {
        let now = Date()
        // Closed: its maker can no longer share this map (left, removed, demoted, disabled).
        let state: String = link.closedAt != nil ? "Closed (its maker can no longer share)" : link.revokedAt != nil ? "Revoked"
            : (link.expiresAt.map { $0 <= now } ?? false) ? "Expired" : "Active"
        let options = [link.hasPassword ? "password" : nil, link.hideLocation ? "location hidden" : nil, link.ownPhotos ? "own photos" : nil].compactMap { $0 }
        let revoke: HTML = state == "Active" ? """
            <form method="post" action="/shares/\(link.id)/revoke">\(Layout.csrfField(csrf))
            <button type="submit" class="button small danger-outline">Revoke<span class="visually-hidden"> \(text: link.label.isEmpty ? "link \(link.id)" : link.label)</span></button></form>
            """ : .empty
        let shows: HTML = showPin ? "<td>\(text: link.isMap ? "Whole map" : link.pinTitle ?? "An album")</td>" : .empty
        return """
            <tr data-share="\(link.id)"><td>\(text: link.label.isEmpty ? "(no name)" : link.label)</td>\(shows)
            <td>\(text: link.makerName ?? "—")</td><td>\(text: day(link.createdAt))</td><td>\(text: link.expiresAt.map(day) ?? "never")</td>
            <td>\(text: link.lastUsedAt.map(day) ?? "never")</td>
            <td>\(text: options.isEmpty ? "—" : options.joined(separator: ", "))</td><td>\(text: state)</td><td>\(revoke)</td></tr>
            """
    }

    static func day(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_GB")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "d MMM yyyy"
        return formatter.string(from: date)
    }
}
