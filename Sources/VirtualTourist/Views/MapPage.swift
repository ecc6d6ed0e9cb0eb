import Foundation

/// The map page: a full-page canvas drawn by Public/js/map.js, with the saved region and the pins
/// in data attributes so the first frame is already right. Below it, the same pins as a plain list
/// with forms, which is the whole page when JavaScript is off.
enum MapPage {
    struct Model {
        var region: MapRegion
        var pins: [Pin]
        var totalPins: Int
        var tileURL: String
        var tileAttribution: String
        var addError: String?
        var addValue = ""
    }

    static func render(_ model: Model, chrome: Layout.Chrome) -> HTML {
        // Every pin given (the route chose how many to embed): the script draws them at once;
        // otherwise it asks for the pins in view.
        let pinsJSON = model.pins.count >= model.totalPins ? (try? String(decoding: Self.encoder.encode(model.pins.map(PinJSON.init)), as: UTF8.self)) ?? "[]" : ""
        let head: HTML = "<script type=\"module\" src=\"/js/app.js\"></script>"
        return Layout.page(title: "Your map", chrome: chrome, bodyClass: "map-page", head: head, main: """
            <div class="map" id="map"
                 data-lat="\(model.region.lat)" data-lon="\(model.region.lon)" data-zoom="\(model.region.zoom)"
                 data-tile-url="\(model.tileURL)" data-pins="\(pinsJSON)" data-total-pins="\(model.totalPins)"
                 data-csrf="\(chrome.csrfToken ?? "")">
            <canvas id="map-canvas" tabindex="0" role="application"
                    aria-label="World map. Press and hold to drop a pin. Arrow keys pan, plus and minus zoom."></canvas>
            <form class="map-search" role="search" action="/" method="get" autocomplete="off">
            <label for="place-search" class="visually-hidden">Search for a place</label>
            <input id="place-search" name="q" type="search" placeholder="Search for a place or “lat, lon”"
                   aria-autocomplete="list" aria-controls="place-suggestions" aria-expanded="false">
            <ul id="place-suggestions" class="suggestions" role="listbox" hidden></ul>
            </form>
            <div class="map-controls">
            <button type="button" id="zoom-in" aria-label="Zoom in">+</button>
            <button type="button" id="zoom-out" aria-label="Zoom out">−</button>
            </div>
            <p class="map-hint" id="map-hint">Press and hold anywhere to drop a pin</p>
            <div class="map-attribution" id="map-attribution">\(attribution(model))</div>
            <div id="pin-card" class="pin-card" role="dialog" aria-modal="false" aria-labelledby="pin-card-title" hidden></div>
            <div id="map-toast" class="toast" role="status" aria-live="polite" hidden></div>
            </div>
            \(list(model, csrf: chrome.csrfToken ?? ""))
            """)
    }

    /// The pins as a list with plain forms: works without JavaScript.
    static func list(_ model: Model, csrf: String) -> HTML {
        let items: [HTML] = model.pins.map { pin in
            """
            <li class="pin-row">
            <a href="/pins/\(Int(pin.id))"><strong>\(pin.title)</strong></a>
            <span class="muted">\(pin.coordinates) · \(photoCount(pin.photoCount))</span>
            <form method="post" action="/pins/\(Int(pin.id))/delete" class="inline">
            \(Layout.csrfField(csrf))
            <button type="submit" class="link-button danger-text">Delete<span class="visually-hidden"> pin \(pin.title)</span></button>
            </form>
            </li>
            """
        }
        let error: HTML = model.addError.map { "<p class=\"field-error\" id=\"add-pin-error\">\($0)</p>" } ?? .empty
        return """
            <section class="pin-list card" id="pin-list" aria-labelledby="pin-list-title">
            <h2 id="pin-list-title">Your pins (\(model.totalPins))</h2>
            \(items.isEmpty ? "<p class=\"muted\">No pins yet.</p>" : "<ul class=\"pins\">\(items)</ul>")
            <form method="post" action="/pins" class="add-pin">
            \(Layout.csrfField(csrf))
            <label for="add-pin-place">Add a pin by place name or “lat, lon”</label>
            <div class="row">
            <input id="add-pin-place" name="place" type="text" value="\(model.addValue)" required\(model.addError == nil ? HTML.empty : " aria-invalid=\"true\" aria-describedby=\"add-pin-error\"")>
            <button type="submit" class="button primary">Add pin</button>
            </div>
            \(error)
            </form>
            </section>
            """
    }

    /// The built-in map credits its sources; raster tiles credit whoever the operator configured.
    static func attribution(_ model: Model) -> HTML {
        let builtIn: HTML = "Map: <a href=\"https://www.naturalearthdata.com/\">Natural Earth</a> · Places: <a href=\"https://www.geonames.org/\">GeoNames</a>"
        if model.tileURL == "none" { return builtIn }
        return model.tileAttribution.isEmpty ? builtIn : "\(model.tileAttribution)"
    }

    static func photoCount(_ n: Int) -> String { n == 1 ? "1 photo" : "\(n) photos" }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}

/// The JSON shape of a pin for the map script.
struct PinJSON: Codable {
    let id: Int64
    let lat: Double
    let lon: Double
    let name: String
    let photos: Int
    let status: PinStatus

    init(_ pin: Pin) {
        id = pin.id
        lat = pin.lat
        lon = pin.lon
        name = pin.title
        photos = pin.photoCount
        status = pin.status
    }
}
