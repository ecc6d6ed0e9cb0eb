import Foundation
import Domain

/// The import pages: the upload form (with the reason when a file was refused) and the preview of
/// what a file will add, with Confirm and Cancel. Plain forms: no script needed.
enum ImportPages {
    /// Points listed on the preview; the rest are counted.
    static let listed = 500

    static let head: HTML = "<link rel=\"stylesheet\" href=\"/css/import.css\">"

    /// A refused file: what was wrong, and the points it refused when that is why.
    struct Problem {
        var message: String
        var refused: [PinImport.Refused] = []
    }

    static func form(room: PinImportStore.PinRoom, problem: Problem? = nil, chrome: Layout.Chrome) -> HTML {
        let error: HTML
        if let problem {
            let refused: HTML = problem.refused.isEmpty ? .empty : """
                <ul class="import-refused">\(refusedItems(problem.refused))</ul>
                """
            error = """
                <div class="form-error" role="alert" id="import-error">
                <p><strong>This file was not imported.</strong> \(text: problem.message)</p>
                \(refused)
                </div>
                """
        } else {
            error = .empty
        }
        let roomText: HTML = room.left == 0
            ? "<p class=\"form-error\" id=\"import-room\">You have \(room.pins) pins, your limit: delete some before importing more.</p>"
            : "<p class=\"hint\" id=\"import-room\">You have \(room.pins) of \(room.limit) pins, so up to \(min(room.left, PinImport.Limits.points)) can be imported now.</p>"
        return Layout.page(title: "Import pins", chrome: chrome, bodyClass: "import-page", head: head, main: """
            <section class="card import">
            <p class="breadcrumbs"><a href="/">← \(text: onto(chrome))</a></p>
            <h1>Import pins\(chrome.map?.sharedID == nil ? HTML.empty : " onto “\(text: onto(chrome))”" as HTML)</h1>
            <p class="lead">Bring in places saved in another map app. Each point in the file becomes a pin with its name, and its album is collected as when you drop a pin. You see what will be added before anything is.</p>
            \(error)
            <form method="post" action="/import" enctype="multipart/form-data" class="stacked">
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            <div class="field">
            <label for="import-file">A GeoJSON, GPX, KML or KMZ file</label>
            <input id="import-file" name="file" type="file" required accept=".geojson,.json,.gpx,.kml,.kmz,application/geo+json,application/gpx+xml,application/vnd.google-earth.kml+xml,application/vnd.google-earth.kmz" aria-describedby="import-room\(problem == nil ? HTML.empty : " import-error")">
            \(roomText)
            </div>
            <button type="submit" class="button primary">Read the file</button>
            </form>
            \(accepted)
            </section>
            """)
    }

    /// What the page and README promise; PinImport.Limits enforces it.
    static let accepted: HTML = """
        <h2>What can be imported</h2>
        <ul class="import-formats" id="import-accepted">
        <li><strong>GeoJSON</strong> (RFC 7946): Point and MultiPoint geometries, in features or alone, named by the feature’s <code>name</code> (or <code>title</code>) property. Lines and polygons are left out.</li>
        <li><strong>GPX</strong> 1.0 and 1.1: waypoints (<code>&lt;wpt&gt;</code>) with their names. Route and track points are the shape of a trip, not places, so they are left out.</li>
        <li><strong>KML</strong> 2.2: placemarks with a point (also inside a MultiGeometry), named after the placemark. Coordinates with more than three values are read as longitude, latitude and the rest left aside.</li>
        <li><strong>KMZ</strong>: the KML inside is read as above (<code>doc.kml</code>, else the first .kml file); its images are left aside.</li>
        </ul>
        <h2>Limits</h2>
        <ul class="import-limits" id="import-limits">
        <li>Files of up to 5 MB, in UTF-8 (or ISO-8859-1 for XML). In a KMZ, the KML too is held to 5 MB uncompressed, and the KMZ to 1,000 files; an encrypted one cannot be read.</li>
        <li>Up to 2,000 points per file, and no more than your pin limit leaves room for.</li>
        <li>Nesting up to 64 levels deep (elements, arrays, objects).</li>
        <li>Coordinates must be numbers: latitude −90 to 90, longitude −180 to 180. Points outside are listed and left out.</li>
        <li>XML files may not have a DOCTYPE or entity declarations (GPX and KML never need them), and nothing they name is ever fetched.</li>
        <li>A preview is kept for 60 minutes, until you confirm or cancel it.</li>
        </ul>
        """

    static func preview(_ pending: PinImportStore.Pending, room: PinImportStore.PinRoom, chrome: Layout.Chrome) -> HTML {
        let file = pending.file
        let count = file.points.count
        let csrf = Layout.csrfField(chrome.csrfToken ?? "")
        let points = HTML.each(file.points.prefix(listed)) { point in
            let name: HTML = point.name.map { "<strong>\(text: $0)</strong>" } ?? "<strong class=\"muted\">No name</strong> <span class=\"muted\">(named after the nearest place)</span>"
            return "<li>\(name) <span class=\"coordinates\">\(decimal: point.lat), \(decimal: point.lon)</span></li>"
        }
        let more: HTML = count > listed ? "<p class=\"muted\">…and \(count - listed) more, which will be added too.</p>" : .empty
        let notes = HTML.each(file.notes) { "<p class=\"hint\">\(text: $0)</p>" }
        let refused: HTML = file.refused.isEmpty ? .empty : """
            <h2 id="import-refused-title">Left out (\(file.refused.count))</h2>
            <ul class="import-refused" aria-labelledby="import-refused-title">\(refusedItems(file.refused))</ul>
            """
        let fits = count <= room.left
        let confirm: HTML = fits ? """
            <form method="post" action="/import/\(pending.id)/confirm" class="inline">
            \(csrf)
            <button type="submit" class="button primary" id="import-confirm">Add \(pinCount(count))</button>
            </form>
            """ : "<p class=\"form-error\" id=\"import-room\">You have room for \(room.left) more pins (your limit is \(room.limit)): delete some pins, or import a smaller file.</p>"
        return Layout.page(title: "Import preview", chrome: chrome, bodyClass: "import-page", head: head, main: """
            <section class="card import">
            <p class="breadcrumbs"><a href="/import">← Import pins</a></p>
            <h1>Add these pins\(chrome.map?.sharedID == nil ? HTML.empty : " to “\(text: onto(chrome))”" as HTML)?</h1>
            <p class="lead" id="import-summary">\(text: pending.fileName) (\(text: file.format.rawValue)): \(pinCount(count)) to add\(file.refused.isEmpty ? HTML.empty : ", \(file.refused.count) left out" as HTML).</p>
            \(notes)
            <div class="card-actions import-actions">
            \(confirm)
            <form method="post" action="/import/\(pending.id)/cancel" class="inline">
            \(csrf)
            <button type="submit" class="button" id="import-cancel">Cancel</button>
            </form>
            </div>
            <h2 id="import-points-title">To add (\(count))</h2>
            <ol class="import-points" aria-labelledby="import-points-title">\(points)</ol>
            \(more)
            \(refused)
            <p class="hint">Nothing is added until you confirm. This preview is kept for \(PinImport.Limits.previewMinutes) minutes.</p>
            </section>
            """)
    }

    static func refusedItems(_ refused: [PinImport.Refused]) -> HTML {
        HTML.each(refused.prefix(listed)) { "<li><strong>\(text: $0.label)</strong>: \(text: $0.reason).</li>" }
            + (refused.count > listed ? "<li>…and \(refused.count - listed) more.</li>" : HTML.empty)
    }

    static func pinCount(_ n: Int) -> HTML { n == 1 ? "1 pin" : "\(n) pins" }

    /// The map the pins go onto: "Your map", or a shared map's name.
    static func onto(_ chrome: Layout.Chrome) -> String {
        chrome.map.flatMap { $0.sharedID == nil ? nil : $0.name } ?? "Your map"
    }
}
