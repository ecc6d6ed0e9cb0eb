import Foundation
import Domain

/// The map page: a full-page canvas drawn by Public/js/map.js, with the saved region and the pins
/// in data attributes so the first frame is already right. Below it, the same pins as a plain list
/// with forms, which is the whole page when JavaScript is off.
enum MapPage {
    /// Pins per page of the plain list.
    static let listPageSize = 50
    /// At most this many pins travel inside the page, for the first frame; the script asks
    /// /pins.json for the rest as the map moves.
    static let embedLimit = 300

    struct Model {
        var region: MapRegion
        /// This page of the plain list, newest first.
        var listed: [Pin]
        /// 1-based page of the list.
        var page = 1
        var totalPins: Int
        /// The pins the first frame shows (those in the saved view, newest first), or none when
        /// the view is crowded and comes as clusters.
        var embedded: [Pin]
        /// The first frame's clusters, when more pins are in view than the page embeds.
        var clusters: [PinStore.Cluster] = []
        var tileURL: String
        var tileAttribution: String
        var addError: String?
        var addValue = ""
        /// The map's name ("Your map" on one's own) and whether this person may change it.
        var title = "Your map"
        var readOnly = false
        /// A shared map: the page listens for other members' pins (/map/events).
        var live = false

        var pageCount: Int { max(1, (totalPins + MapPage.listPageSize - 1) / MapPage.listPageSize) }
        /// Every pin is in the page: the script needs no /pins.json.
        var embedsAll: Bool { clusters.isEmpty && embedded.count == totalPins }
    }

    static func render(_ model: Model, chrome: Layout.Chrome) -> HTML {
        var pinsJSON: [UInt8] = []
        pinsJSON.reserveCapacity(model.embedded.count * 96 + 2)
        PinJSON.write(model.embedded, to: &pinsJSON)
        var clustersJSON: [UInt8] = []
        PinJSON.write(model.clusters, to: &clustersJSON)
        let head: HTML = model.readOnly ? "<script type=\"module\" src=\"/js/app.js\"></script>"
            : "<script type=\"module\" src=\"/js/app.js\"></script><script type=\"module\" src=\"/js/own-photos.js\"></script>"
        let flags: HTML = (model.readOnly ? " data-read-only=\"true\"" : .empty) + (model.live ? " data-live=\"true\"" : .empty)
        let hint: HTML = model.readOnly
            ? "<p class=\"map-hint\" id=\"map-hint\">You are a viewer on this map: open a pin to see its album</p>"
            : "<p class=\"map-hint\" id=\"map-hint\">Press and hold anywhere to drop a pin</p>"
        let drop: HTML = model.readOnly ? .empty : "<button type=\"button\" id=\"drop-pin\" aria-label=\"Drop a pin at the centre of the map\"><svg width=\"22\" height=\"22\" viewBox=\"0 0 22 22\" aria-hidden=\"true\" focusable=\"false\"><circle cx=\"11\" cy=\"11\" r=\"6\" fill=\"none\" stroke=\"currentColor\" stroke-width=\"2\"></circle><path d=\"M11 1v6M11 15v6M1 11h6M15 11h6\" stroke=\"currentColor\" stroke-width=\"2\"></path></svg></button>"
        let keys: HTML = model.readOnly
            ? "Arrow keys pan, plus and minus zoom. Tab steps through the pins in view; Enter opens one."
            : "Press and hold to drop a pin, or press Enter to drop one at the centre. Arrow keys pan, plus and minus zoom. Tab steps through the pins in view; Enter opens one, Delete deletes it."
        return Layout.page(title: model.title, chrome: chrome, bodyClass: "map-page", head: head, main: """
            <h1 class="visually-hidden">\(text: model.title)</h1>
            <div class="map" id="map"
                 data-lat="\(decimal: model.region.lat)" data-lon="\(decimal: model.region.lon)" data-zoom="\(decimal: model.region.zoom)"
                 data-tile-url="\(text: model.tileURL)" data-pins="\(text: pinsJSON)" data-view-clusters="\(text: clustersJSON)" data-pins-complete="\(model.embedsAll ? "true" : "false" as HTML)"
                 data-total-pins="\(model.totalPins)" data-csrf="\(text: chrome.csrfToken ?? "")"\(flags)>
            <canvas id="map-canvas" tabindex="0" role="application" aria-describedby="map-keys"
                    aria-label="World map"></canvas>
            <p id="map-keys" class="visually-hidden">\(keys)</p>
            <p id="map-announcer" class="visually-hidden" aria-live="polite"></p>
            <form class="map-search" role="search" action="/" method="get" autocomplete="off">
            <label for="place-search" class="visually-hidden">Search for a place</label>
            <input id="place-search" name="q" type="search" placeholder="Search for a place or “lat, lon”"
                   role="combobox" aria-autocomplete="list" aria-controls="place-suggestions" aria-expanded="false">
            <ul id="place-suggestions" class="suggestions" role="listbox" hidden></ul>
            </form>
            <div class="map-controls">
            <button type="button" id="zoom-in" aria-label="Zoom in">+</button>
            <button type="button" id="zoom-out" aria-label="Zoom out">−</button>
            \(drop)
            </div>
            \(hint)
            <div class="map-attribution" id="map-attribution">\(attribution(model))</div>
            <div id="pin-card" class="pin-card" role="dialog" aria-modal="false" aria-labelledby="pin-card-title" hidden></div>
            <div id="map-toast" class="toast" role="status" aria-live="polite" hidden></div>
            </div>
            \(list(model, csrf: chrome.csrfToken ?? "", mapKey: chrome.map.map { $0.sharedID.map(String.init) ?? "own" } ?? "own"))
            """)
    }

    /// "Your pins" on one's own map; on a shared map, the map's.
    static func listTitle(_ model: Model) -> HTML {
        model.live ? "Pins on \(text: model.title) (\(model.totalPins))" : "Your pins (\(model.totalPins))"
    }

    /// The pins as a list with plain forms, a page at a time: works without JavaScript.
    static func list(_ model: Model, csrf: String, mapKey: String = "own") -> HTML {
        let items = HTML.each(model.listed) { pin in
            """
            <li class="pin-row" data-pin-id="\(pin.id)">
            <a href="/pins/\(pin.id)"><strong>\(text: pin.title)</strong></a>
            <span class="muted">\(text: pin.coordinates) · \(photoCount(pin.photoCount))</span>
            \(model.readOnly ? HTML.empty : deleteForm(pin, csrf: csrf))
            </li>
            """
        }
        let error: HTML = model.addError.map { "<p class=\"field-error\" id=\"add-pin-error\">\(text: $0)</p>" } ?? .empty
        return """
            <section class="pin-list card" id="pin-list" aria-labelledby="pin-list-title">
            <details id="pin-list-details" open>
            <summary><h2 id="pin-list-title" data-total="\(model.totalPins)">\(listTitle(model))</h2></summary>
            \(model.listed.isEmpty ? "<p class=\"muted\" id=\"no-pins\">No pins yet.</p>" : HTML.empty)
            <ul class="pins" id="pins">\(items)</ul>
            \(pagination(model))
            \(model.totalPins > 0 ? (model.readOnly ? exportsOnly : exports) : (model.readOnly ? HTML.empty : importOnly))
            \(model.readOnly ? HTML.empty : addForm(model, csrf: csrf, error: error))
            \(model.readOnly ? HTML.empty : photosForm(csrf: csrf, mapKey: mapKey))
            </details>
            </section>
            """
    }

    /// "Add photos": a person's own photos go where they were taken (own-photos.js sends each on
    /// its own; without it the form sends them together).
    /// `mapKey` names the map the form was drawn for ("own", or the shared map's id): a batch still
    /// arriving after the person switched maps in another tab is refused, never put on the other map.
    static func photosForm(csrf: String, mapKey: String) -> HTML {
        """
        <form method="post" action="/own-photos" enctype="multipart/form-data" class="own-upload map-photos" id="own-upload" data-target="map">
        \(Layout.csrfField(csrf))
        <input type="hidden" name="map" value="\(text: mapKey)">
        <label for="own-files">Add photos</label>
        <input type="file" id="own-files" name="file" multiple accept="image/jpeg,image/heic,image/heif,image/png,image/webp,.heic,.heif" aria-describedby="own-files-hint">
        <label class="checkbox"><input type="checkbox" name="estimate" value="1" id="own-estimate"> Put a photo without a position beside my photos taken within \(OwnPhotoRoutes.estimateMinutes) minutes of it (marked “estimated”)</label>
        <button type="submit" class="button">Add photos</button>
        <p class="muted" id="own-files-hint">JPEG, HEIC, PNG or WebP. Each goes where it was taken (its GPS), to a pin nearby or a new one; drop a photo without a position on the map where you took it.</p>
        <div id="own-upload-progress" class="own-progress" role="status" aria-live="polite"></div>
        </form>
        """
    }

    static func deleteForm(_ pin: Pin, csrf: String) -> HTML {
        """
        <form method="post" action="/pins/\(pin.id)/delete" class="inline">
        \(Layout.csrfField(csrf))
        <button type="submit" class="link-button danger-text">Delete<span class="visually-hidden"> pin \(text: pin.title)</span></button>
        </form>
        """
    }

    static func addForm(_ model: Model, csrf: String, error: HTML) -> HTML {
        """
            <form method="post" action="/pins" class="add-pin">
            \(Layout.csrfField(csrf))
            <label for="add-pin-place">Add a pin by place name or “lat, lon”</label>
            <div class="row">
            <input id="add-pin-place" name="place" type="text" value="\(text: model.addValue)" required\(model.addError == nil ? HTML.empty : " aria-invalid=\"true\" aria-describedby=\"add-pin-error\"")>
            <button type="submit" class="button primary">Add pin</button>
            </div>
            \(error)
            </form>
            """
    }

    /// The person's pins as files for other map software (plain links: no script needed).
    static let exports: HTML = """
        <p class="exports" id="pin-exports">Download all pins: <a href="/pins.geojson" download>GeoJSON</a> · <a href="/pins.gpx" download>GPX</a> · <a href="/pins.kml" download>KML</a>. <a href="/import">Import pins</a></p>
        """

    /// A viewer downloads, but imports nothing.
    static let exportsOnly: HTML = """
        <p class="exports" id="pin-exports">Download all pins: <a href="/pins.geojson" download>GeoJSON</a> · <a href="/pins.gpx" download>GPX</a> · <a href="/pins.kml" download>KML</a>.</p>
        """

    /// With no pins yet there is nothing to download, but pins can come from another app.
    static let importOnly: HTML = """
        <p class="exports" id="pin-exports"><a href="/import">Import pins</a> from a GeoJSON, GPX, KML or KMZ file</p>
        """

    /// Previous and next links under the list, when there is more than one page.
    static func pagination(_ model: Model) -> HTML {
        guard model.pageCount > 1 else { return .empty }
        let pager = Pager(previous: model.page > 1 ? "/?page=\(model.page - 1)#pin-list" : nil,
                          next: model.page < model.pageCount ? "/?page=\(model.page + 1)#pin-list" : nil,
                          previousLabel: "← Newer", nextLabel: "Older →", previousID: "pins-previous", nextID: "pins-next",
                          buttonClass: "button small")
        return """
            <nav class="pin-pages" aria-label="Pages of pins">\(pager.previousLink) <span class="muted">Page \(model.page) of \(model.pageCount)</span> \(pager.nextLink)</nav>
            """
    }

    /// The built-in map credits its sources; raster tiles credit whoever the operator configured.
    static func attribution(_ model: Model) -> HTML {
        let builtIn: HTML = "Map: <a href=\"https://www.naturalearthdata.com/\">Natural Earth</a> · Places: <a href=\"https://www.geonames.org/\">GeoNames</a>"
        if model.tileURL == "none" { return builtIn }
        return model.tileAttribution.isEmpty ? builtIn : "\(text: model.tileAttribution)"
    }

    static func photoCount(_ n: Int) -> HTML { n == 1 ? "1 photo" : "\(n) photos" }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}
