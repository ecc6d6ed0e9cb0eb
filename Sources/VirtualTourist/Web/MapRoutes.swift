import Foundation
import HTTPServer
import AlbumWing
import Domain

/// The map page, pins, the saved region, place search and the built-in basemap.
extension WebPipeline {
    mutating func addMapRoutes(_ routes: MapRoutes) {
        signedInKept("/", kept: routes.keptMapPage, routes.mapPage)
        signedIn("GET", "/pins.json", routes.pinsJSON)
        for format in PinExport.allCases {
            signedIn("GET", "/pins.\(format.fileExtension)") { context in try routes.export(format, context) }
        }
        signedIn("POST", "/pins", routes.dropPin)
        signedIn("DELETE", "/pins/:id", routes.deletePin)
        signedIn("POST", "/pins/:id/delete", routes.deletePinForm)
        signedIn("POST", "/pins/:id/rename", routes.renamePin)
        signedIn("POST", "/region", routes.saveRegion)
        signedIn("GET", "/places/search", routes.searchPlaces)
        signedIn("GET", "/places/nearest", routes.nearestPlace)
        plain("/basemap/:level/:cell", routes.basemapCell)
    }

    static func pinID(_ request: HTTPRequest) -> Int64? {
        request.parameters["id"].flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil }
    }

    static func mapWithError(_ message: String, value: String, context: SignedInContext, pins: PinStore,
                             settings: AppSettings) throws -> HTTPResponse {
        var model = try mapModel(context, pins: pins, settings: settings, page: 1).model
        model.addError = message
        model.addValue = value
        return .page(MapPage.render(model, chrome: context.chrome), status: .unprocessableContent)
    }

    /// ?page=N of the plain list: 1 up to a bound, anything else is page 1.
    static func listPage(_ request: HTTPRequest) -> Int {
        // No upper bound needed past the offset's range: a page past the end lists nothing.
        InputNumber.page(request.queryValue("page"), last: 1_000_000)
    }

    /// The page's model and the map version it shows (nil: the person has no version row).
    static func mapModel(_ context: SignedInContext, pins: PinStore, settings: AppSettings,
                         page: Int) throws -> (model: MapPage.Model, version: Int64?) {
        let region = context.mapRegion ?? .world
        let data = try pins.mapPage(of: context.map.forReading, region: region, listOffset: (page - 1) * MapPage.listPageSize,
                                    listLimit: MapPage.listPageSize, maxMarkers: MapPage.embedLimit)
        var model = MapPage.Model(region: region, listed: data.listed, page: page, totalPins: data.total,
                                  embedded: data.view.pins, clusters: data.view.clusters,
                                  tileURL: settings.tileURL, tileAttribution: settings.tileAttribution)
        if context.map.sharedID != nil {
            model.title = context.map.name
            model.live = true
        }
        model.readOnly = context.map.role < .editor
        return (model, data.version)
    }
}

/// The grid of the built-in basemap (must match LEVELS in script/tools/convert-geo.py).
enum Basemap {
    /// Cell size in degrees per level.
    static let cellDegrees = [360, 360, 30, 10]
    /// Every cell response carries the grid, so Public/js/map.js never writes it down again.
    static let gridHeader = "Basemap-Cell-Degrees"
    static let gridHeaderValue = cellDegrees.map(String.init).joined(separator: ",")

    struct Cell {
        let level: Int, x: Int, y: Int

        init?(level: String, name: String) {
            guard let level = Int(level), Basemap.cellDegrees.indices.contains(level), name.hasSuffix(".json") else { return nil }
            let parts = name.dropLast(5).split(separator: "_", omittingEmptySubsequences: false)
            guard parts.count == 2, let x = Int(parts[0]), let y = Int(parts[1]),
                  parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else { return nil }
            let size = Basemap.cellDegrees[level]
            guard (0..<(360 / size)).contains(x), (0..<max(1, 180 / size)).contains(y) else { return nil }
            (self.level, self.x, self.y) = (level, x, y)
        }
    }
}

struct NearestJSON: Codable {
    let place: Place
    let kilometres: Double
}

enum Coordinates {
    /// "35.0116, 135.7681" (or separated by a space or semicolon) → a point, when in range.
    static func parse(_ text: String) -> (lat: Double, lon: Double)? {
        let parts = text.split(whereSeparator: { $0 == "," || $0 == ";" || $0 == " " }).map(String.init)
        guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]),
              (-90...90).contains(lat), (-180...180).contains(lon) else { return nil }
        return (lat, lon)
    }
}

extension HTTPResponse {
    /// JSON from Codable values: strings are escaped by the encoder, never concatenated.
    static func jsonValue<T: Encodable>(_ value: T, status: HTTPStatus = .ok) -> HTTPResponse {
        let data = (try? MapPage.encoder.encode(value)) ?? Data("{}".utf8)
        var response = HTTPResponse(status: status, body: Array(data))
        response.headers.set("Content-Type", "application/json; charset=utf-8")
        return response
    }
}

/// The map page, pins and their exports, the saved region, place search and the built-in
/// basemap: one handler per route (the table is `WebPipeline.addMapRoutes`).
struct MapRoutes: Sendable {
    let pins: PinStore
    let places: @Sendable () -> PlaceIndex
    /// The settings the map page shows: it names only our own tile route; the script learns the
    /// rest from /tiles.json.
    let settings: AppSettings
    let mapPages: MapPageCache
    let photoAccess: PhotoAccess?
    /// Told the version a rendered page read, so the next view is served from memory.
    let sessions: SessionCache?
    let secure: Bool
    let links: PinExport.Links
    let files: StaticFiles

    init(pins: PinStore, places: @escaping @Sendable () -> PlaceIndex, settings: AppSettings, tiles: TileInfo? = nil,
         mapPages: MapPageCache, photoAccess: PhotoAccess?, sessions: SessionCache? = nil) {
        var page = settings
        page.tileURL = tiles == nil ? "none" : "/tiles/{z}/{x}/{y}"
        page.tileAttribution = tiles?.attribution ?? ""
        self.pins = pins
        self.places = places
        self.settings = page
        self.mapPages = mapPages
        self.photoAccess = photoAccess
        self.sessions = sessions
        secure = settings.cookiesAreSecure
        links = PinExport.Links(publicURL: settings.publicURL)
        files = StaticFiles(root: settings.publicDirectory)
    }

    /// The person's pins as a file for other map software (GeoJSON, GPX, KML): read 1,000 at a
    /// time along the primary key and written into one body, so memory is the file's bytes, never
    /// every pin as values at once.
    func export(_ format: PinExport, _ context: SignedInContext) throws -> HTTPResponse {
        var body: [UInt8] = []
        let now = Date()
        format.begin(exportedAt: now, to: &body)
        var after: Int64 = 0
        var first = true
        while true {
            let batch = try pins.pins(of: context.map.forReading, after: after, limit: 1000)
            let own = try OwnPhotoStore.byPin(batch.map(\.id), holder: context.map.forReading, pool: pins.pool)
            format.append(batch, first: first, links: links, own: own, to: &body)
            guard let last = batch.last, batch.count == 1000 else { break }
            after = last.id
            first = false
        }
        format.end(to: &body)
        let day = String(PinExport.rfc3339(now).prefix(10))
        var response = HTTPResponse(status: .ok, headers: ["Content-Type": format.contentType], body: body)
        response.headers.set("Content-Disposition", "attachment; filename=\"virtual-tourist-pins-\(day).\(format.fileExtension)\"")
        response.headers.set("Cache-Control", "private, no-store")
        return response
    }

    /// The session and then one round trip for the page (docs/architecture.md, "Pages"); only the
    /// session while the person's map version says the page kept from the last visit is right.
    func mapPage(_ context: SignedInContext) throws -> HTTPResponse {
        let page = WebPipeline.listPage(context.request)
        let gzip = Compression.acceptsGzip(context.request.headers["Accept-Encoding"])
        // A page showing a flash message is shown once, never kept; nor is one without a
        // version row, since no number would name its state.
        func key(_ version: Int64?) -> MapPageCache.Key? {
            guard context.flash == nil, let version else { return nil }
            return MapPageCache.Key(version: version, region: context.mapRegion ?? .world, page: page,
                                    csrfToken: context.csrfToken, user: context.user, map: context.map, mapsJSON: context.mapsJSON)
        }
        if let known = key(context.mapVersion), let kept = mapPages.response(for: known, acceptsGzip: gzip) { return kept }
        let mark = sessions?.mark()
        let fresh = try WebPipeline.mapModel(context, pins: pins, settings: settings, page: page)
        // A kept session whose map moved on forgot its version (SessionCache): it learns the one
        // read with these pins, under which the page is kept, and the next view needs nothing.
        if let sessions, let mark, let version = fresh.version, let token = context.sessionToken {
            sessions.learn(version: version, holder: context.map.holder, token: token, since: mark)
        }
        let html = MapPage.render(fresh.model, chrome: context.chrome)
        // Kept under the version read with the pins, not the session's: the two may differ.
        guard let rendered = key(fresh.version) else { return .page(html) }
        return mapPages.keep(html.bytes, for: rendered, acceptsGzip: gzip)
    }

    /// The kept page for a kept session, answered on the event loop with no round trip (the
    /// session's version is current: SessionCache drops it when the map's version moves); nil when
    /// there is none, or when it would have to be compressed first.
    func keptMapPage(_ request: HTTPRequest, _ session: Session) -> HTTPResponse? {
        guard let version = session.mapVersion else { return nil }
        let key = MapPageCache.Key(version: version, region: session.mapRegion ?? .world, page: WebPipeline.listPage(request),
                                   csrfToken: session.csrfToken, user: session.user, map: session.map, mapsJSON: session.mapsJSON)
        return mapPages.response(for: key, acceptsGzip: Compression.acceptsGzip(request.headers["Accept-Encoding"]), compress: false)
    }

    /// Pins in a box, for maps with more pins than the page embeds.
    func pinsJSON(_ context: SignedInContext) throws -> HTTPResponse {
        // The answer follows from the map, its version and the question: with the version known
        // (the session's, kept in memory) the ETag names those, and the same question asked again
        // at the same version — a pan back, a reload — is answered 304 before any query.
        let tag = context.mapVersion.map { ETag.of(Array("pins.json \(context.map.forReading) \($0) \(context.request.target)".utf8)) }
        if let tag, ETag.matches(context.request.headers["If-None-Match"], tag) {
            return HTTPResponse(status: .notModified, headers: ["ETag": tag, "Cache-Control": "private, no-cache"])
        }
        var box: PinStore.Box?
        if let text = context.request.queryValue("bbox") {
            let numbers = text.split(separator: ",", omittingEmptySubsequences: false)
                .compactMap { InputNumber.decimal(String($0), in: -1000...1000) }
            guard numbers.count == 4 else {
                throw HTTPError(.badRequest, "bbox must be west,south,east,north in degrees.")
            }
            box = PinStore.Box(west: numbers[0], south: numbers[1], east: numbers[2], north: numbers[3])
        }
        var body: [UInt8] = Array(#"{"pins":"#.utf8)
        if let box, let zoom = InputNumber.decimal(context.request.queryValue("zoom"), in: 0...22) {
            // The map's view: at most a few hundred markers, clusters where pins crowd, and
            // how many pins are inside the box the answer counted (the asked box grown to the
            // grid's cells), so nothing is left out without saying so.
            let view = try pins.viewport(of: context.map.forReading, box: box, zoom: zoom)
            body.reserveCapacity(view.pins.count * 96 + view.clusters.count * 48 + 128)
            PinJSON.write(view.pins, to: &body)
            body.append(contentsOf: Array(#","clusters":"#.utf8))
            PinJSON.write(view.clusters, to: &body)
            body.append(contentsOf: Array(#","total":"#.utf8))
            JSONWriter.integer(view.total, to: &body)
            body.append(contentsOf: Array(#","bbox":["#.utf8))
            for (index, edge) in [view.box.west, view.box.south, view.box.east, view.box.north].enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                JSONWriter.number(edge, to: &body)
            }
            body.append(UInt8(ascii: "]"))
        } else {
            let found = try pins.pins(of: context.map.forReading, in: box, limit: 2000)
            body.reserveCapacity(found.count * 96 + 16)
            PinJSON.write(found, to: &body)
        }
        body.append(UInt8(ascii: "}"))
        // Cheap to ask again: the same pins answer 304 (the ETag is the body's checksum).
        var response = HTTPResponse(status: .ok, headers: ["Content-Type": "application/json; charset=utf-8"], body: body)
        response.headers.set("Cache-Control", "private, no-cache")
        if let tag { response.headers.set("ETag", tag) }
        return ETag.conditional(context.request, response)
    }

    /// Drop a pin: from the map script (lat, lon; answers JSON) or the plain form (place name
    /// or "lat, lon"; answers with a redirect).
    func dropPin(_ context: SignedInContext) throws -> HTTPResponse {
        let request = context.request
        let wantsJSON = request.headers["Accept"]?.contains("application/json") ?? false
        var lat = InputNumber.decimal(request.formValue("lat"), in: -90...90)
        var lon = InputNumber.decimal(request.formValue("lon"), in: -180...180)
        var placeName: String?
        if lat == nil || lon == nil, let text = request.formValue("place")?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            if let point = Coordinates.parse(text) {
                (lat, lon) = (point.lat, point.lon)
            } else if let place = places().search(text, limit: 1).first {
                (lat, lon, placeName) = (place.lat, place.lon, place.label)
            } else {
                return try WebPipeline.mapWithError("No place called “\(text)” is known. Try a larger town nearby, or “lat, lon”.",
                                             value: text, context: context, pins: pins, settings: settings)
            }
        }
        guard let lat, let lon, lat.isFinite, lon.isFinite, (-90...90).contains(lat), (-180...180).contains(lon) else {
            if wantsJSON { throw HTTPError(.unprocessableContent, "A pin needs a latitude (−90…90) and a longitude (−180…180).") }
            return try WebPipeline.mapWithError("Enter a place name or coordinates such as “35.01, 135.77”.",
                                         value: request.formValue("place") ?? "", context: context, pins: pins, settings: settings)
        }
        if placeName == nil { placeName = places().nearest(lat: lat, lon: lon).map { $0.place.label } }
        // The album starts downloading at once, so it is often ready by the time it is opened.
        let pin: Pin
        do {
            pin = try pins.drop(for: try context.map.forChanging(), by: context.user.id, lat: lat, lon: lon, placeName: placeName)
        } catch let reached as QuotaReached {
            if wantsJSON { throw HTTPError(.tooManyRequests, reached.description) }
            return try WebPipeline.mapWithError(reached.description, value: request.formValue("place") ?? "", context: context,
                                         pins: pins, settings: settings)
        }
        if wantsJSON { return .jsonValue(PinJSON(pin), status: .created) }
        return .redirect(to: "/", flash: "Pin added: \(pin.title).", secure: secure)
    }

    /// Deletes a pin and its album (the map script).
    func deletePin(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try pins.pin(id, of: $0) != nil }
        guard try pins.delete(id, of: holder) else { throw HTTPError.notFound }
        photoAccess?.forget(pin: id)
        return HTTPResponse(status: .noContent)
    }

    /// The form version (HTML forms cannot send DELETE).
    func deletePinForm(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try pins.pin(id, of: $0) != nil }
        guard let pin = try pins.pin(id, of: holder),
              try pins.delete(id, of: holder) else { throw HTTPError.notFound }
        photoAccess?.forget(pin: id)
        return .redirect(to: "/", flash: "Pin deleted: \(pin.title).", secure: secure)
    }

    /// A pin's name (the album page's Rename): 1 to 100 characters, control characters refused
    /// by the pipeline.
    func renamePin(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try pins.pin(id, of: $0) != nil }
        let name = (context.request.formValue("name") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.count <= PinStore.maxNameLength else {
            return .redirect(to: "/pins/\(id)", flash: "A pin's name is 1 to \(PinStore.maxNameLength) characters; it was not changed.", secure: secure)
        }
        guard try pins.rename(id, of: holder, to: name) else { throw HTTPError.notFound }
        return .redirect(to: "/pins/\(id)", flash: "Renamed to “\(name)”.", secure: secure)
    }

    /// Where the map was left. POST with a form body, so navigator.sendBeacon can send it on pagehide.
    func saveRegion(_ context: SignedInContext) throws -> HTTPResponse {
        let form = context.request
        guard let lat = InputNumber.decimal(form.formValue("lat"), in: -90...90),
              let lon = InputNumber.decimal(form.formValue("lon"), in: -180...180),
              let zoom = InputNumber.decimal(form.formValue("zoom"), in: 0...30) else {
            throw HTTPError(.unprocessableContent, "lat, lon and zoom are required.")
        }
        let region = MapRegion(lat: lat, lon: lon, zoom: zoom)
        guard region.isValid else { throw HTTPError(.unprocessableContent, "That region is outside the map.") }
        try pins.saveRegion(region, of: context.user.id, sharedMap: context.map.sharedID)
        return HTTPResponse(status: .noContent)
    }

    /// Places whose name starts with the query, for the map's search box.
    func searchPlaces(_ context: SignedInContext) throws -> HTTPResponse {
        let query = context.request.queryValue("q") ?? ""
        guard query.count <= 100 else { throw HTTPError(.badRequest, "The search is too long.") }
        return .jsonValue(["places": places().search(query, limit: 8)])
    }

    /// The place nearest a point, to name a pin before it is dropped.
    func nearestPlace(_ context: SignedInContext) throws -> HTTPResponse {
        guard let lat = InputNumber.decimal(context.request.queryValue("lat"), in: -90...90),
              let lon = InputNumber.decimal(context.request.queryValue("lon"), in: -180...180) else {
            throw HTTPError(.badRequest, "lat and lon are required, in degrees.")
        }
        guard let found = places().nearest(lat: lat, lon: lon) else {
            return .jsonValue(["place": nil as Place?])
        }
        return .jsonValue(NearestJSON(place: found.place, kilometres: (found.kilometres * 10).rounded() / 10))
    }

    /// The built-in vector basemap: per zoom band ("level") a grid of cells, each a small JSON file
    /// made by script/tools/convert-geo.py (docs/architecture.md says why). Public data, the same
    /// for everyone: cacheable, with ETag and gzip from StaticFiles.
    func basemapCell(_ request: HTTPRequest) throws -> HTTPResponse {
        guard let cell = Basemap.Cell(level: request.parameters["level"] ?? "", name: request.parameters["cell"] ?? "") else {
            throw HTTPError(.badRequest, "No such basemap cell: levels are 0–3, cells X_Y.json inside the level's grid.")
        }
        var file = request
        file.path = "/basemap/\(cell.level)/\(cell.x)_\(cell.y).json"
        var response: HTTPResponse
        do {
            response = try files.handle(file)
        } catch let error as HTTPError where error.status == .notFound {
            // Open sea: no file, nothing to draw.
            response = .json(#"{"quantum":1,"fills":[],"lines":[],"labels":[]}"#)
        }
        response.headers.set("Cache-Control", "public, max-age=86400")
        // The grid is the server's to know: the script learns it from the first cell it loads.
        response.headers.set(Basemap.gridHeader, Basemap.gridHeaderValue)
        return response
    }
}
