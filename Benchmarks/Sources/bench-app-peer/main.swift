// The peer for `script/bench app`: the app's five hot routes on Hummingbird 2 + PostgresNIO, pages
// through swift-mustache, gzip through compress-nio. It reads the same tables with the same SQL
// (copied from AccountStore, PinStore and AlbumStore) and checks the session the same way (the
// same statement, the same CSRF rule for POST), so the two differ in the server, the driver and the
// renderer only. It reports its round trips in Server-Timing too, counted by the handler.
// Usage: bench-app-peer PORT POSTGRES_SOCKET_DIR
import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore
import PostgresNIO

let arguments = CommandLine.arguments
let port = Int(arguments[1]) ?? 8092
let socketDirectory = arguments[2]

var postgresConfiguration = PostgresClient.Configuration(
    unixSocketPath: socketDirectory + "/.s.PGSQL.5432", username: "postgres", password: nil, database: "virtual_tourist")
postgresConfiguration.options.maximumConnections = 16
let client = PostgresClient(configuration: postgresConfiguration)

// MARK: SQL, as the app sends it

let sessionSQL = """
    WITH found AS (
        SELECT s.token_hash, s.user_id AS id, u.email, u.display_name, s.csrf_token,
               u.disabled_at IS NOT NULL AS disabled,
               s.expires_at <= now() AS expired,
               s.last_seen_at < now() - make_interval(secs => $2::int) AS stale
        FROM sessions s JOIN users u ON u.id = s.user_id
        WHERE s.token_hash = sha256(convert_to($1, 'UTF8'))),
    renewed AS (
        UPDATE sessions SET last_seen_at = now(), expires_at = now() + make_interval(days => $3::int)
        FROM found
        WHERE sessions.token_hash = found.token_hash AND found.stale AND NOT found.expired AND NOT found.disabled
        RETURNING 1),
    removed AS (
        DELETE FROM sessions
        WHERE user_id IN (SELECT id FROM found WHERE disabled)
           OR token_hash IN (SELECT token_hash FROM found WHERE expired)
        RETURNING 1)
    SELECT id, email, display_name, csrf_token, disabled, expired, stale FROM found
    """

let pinColumns = """
    p.id, p.lat, p.lon, p.place_name, p.status, p.created_at,
    (SELECT count(*) FROM photos ph WHERE ph.pin_id = p.id AND ph.generation = p.generation AND ph.status = 'ready') AS photo_count
    """

let mapPageSQL = """
    WITH region AS (
        SELECT r.user_id IS NOT NULL AS saved, coalesce(r.center_lat, $5) AS lat,
               coalesce(r.center_lon, $6) AS lon, coalesce(r.zoom, $7) AS zoom
        FROM (SELECT 1) one LEFT JOIN map_regions r ON r.user_id = $1),
    box AS (
        SELECT lon, 1280 * 360 / (256 * power(2, zoom)) AS dx,
               degrees(2 * atan(exp(yc - dy)) - pi() / 2) AS south, degrees(2 * atan(exp(yc + dy)) - pi() / 2) AS north
        FROM (SELECT lon, zoom, ln(tan(pi() / 4 + radians(lat) / 2)) AS yc,
                     800 * 2 * pi() / (256 * power(2, zoom)) AS dy FROM region) v),
    listed AS (SELECT id FROM pins WHERE user_id = $1 ORDER BY id DESC LIMIT $3 OFFSET $2),
    shown AS (
        SELECT p.id FROM pins p, box
        WHERE p.user_id = $1 AND p.lat BETWEEN box.south AND box.north
          AND (box.dx >= 180 OR abs(p.lon - box.lon - 360 * round((p.lon - box.lon) / 360)) <= box.dx)
        ORDER BY p.id DESC LIMIT $4),
    chosen AS (
        SELECT id, bool_or(in_list) AS in_list, bool_or(in_view) AS in_view
        FROM (SELECT id, true AS in_list, false AS in_view FROM listed
              UNION ALL SELECT id, false, true FROM shown) both_parts
        GROUP BY id)
    SELECT region.saved, region.lat AS region_lat, region.lon AS region_lon, region.zoom AS region_zoom,
           (SELECT count(*) FROM pins WHERE user_id = $1) AS total, x.*
    FROM region LEFT JOIN (
        SELECT c.in_list, c.in_view, \(pinColumns)
        FROM chosen c JOIN pins p ON p.id = c.id AND p.user_id = $1) x ON true
    ORDER BY x.id DESC
    """

let pinsSQL = "SELECT \(pinColumns) FROM pins p WHERE p.user_id = $1 ORDER BY p.id DESC LIMIT $2"

let albumSQL = """
    SELECT p.id, p.lat, p.lon, p.place_name, p.status, p.created_at, p.generation, p.error, p.page, p.total_pages,
           ph.id AS photo_id, ph.position, ph.status AS photo_status, ph.title, ph.owner_name, ph.license,
           ph.page_url, ph.date_taken, ph.width, ph.height, ph.remote_id
    FROM pins p
    LEFT JOIN photos ph ON ph.pin_id = p.id AND ph.user_id = p.user_id AND ph.generation = p.generation
    WHERE p.id = $1 AND p.user_id = $2
    ORDER BY ph.position, ph.id
    """

let imageSQL = "SELECT bytes, content_type FROM photos WHERE id = $1 AND user_id = $2 AND status = 'ready'"

let regionSQL = """
    INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES ($1, $2, $3, $4)
    ON CONFLICT (user_id) DO UPDATE
    SET center_lat = EXCLUDED.center_lat, center_lon = EXCLUDED.center_lon, zoom = EXCLUDED.zoom, updated_at = now()
    """

// MARK: Templates (the same markup as the app's views)

let layout = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>{{title}} · Virtual Tourist</title>
    <link rel="stylesheet" href="/css/app.css">
    <link rel="icon" href="/favicon.svg" type="image/svg+xml">
    <script type="module" src="/js/{{script}}.js"></script>
    </head>
    <body class="{{bodyClass}}">
    <a class="skip-link" href="#main">Skip to content</a>
    <header class="site-header">
    <a class="brand" href="/"><img src="/favicon.svg" alt="" width="24" height="24"> Virtual Tourist</a>
    <div class="account">
    <span class="who" title="{{user.email}}">{{user.name}}</span>
    <form method="post" action="/sign-out" class="inline">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <button type="submit" class="link-button">Sign out</button>
    </form>
    </div>
    </header>
    <main id="main">
    {{$main}}{{/main}}
    </main>
    <footer class="site-footer"><p>Virtual Tourist — your places, your photos, your server.</p></footer>
    </body>
    </html>
    """

let mapPage = """
    {{<layout}}{{$main}}
    <div class="map" id="map"
         data-lat="{{lat}}" data-lon="{{lon}}" data-zoom="{{zoom}}"
         data-tile-url="none" data-pins="{{pinsJSON}}" data-pins-complete="{{complete}}"
         data-total-pins="{{total}}" data-csrf="{{csrf}}">
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
    <div class="map-attribution" id="map-attribution">Map: <a href="https://www.naturalearthdata.com/">Natural Earth</a> · Places: <a href="https://www.geonames.org/">GeoNames</a></div>
    <div id="pin-card" class="pin-card" role="dialog" aria-modal="false" aria-labelledby="pin-card-title" hidden></div>
    <div id="map-toast" class="toast" role="status" aria-live="polite" hidden></div>
    </div>
    <section class="pin-list card" id="pin-list" aria-labelledby="pin-list-title">
    <h2 id="pin-list-title">Your pins ({{total}})</h2>
    {{^listed}}<p class="muted">No pins yet.</p>{{/listed}}{{#hasListed}}<ul class="pins">{{#listed}}
    <li class="pin-row">
    <a href="/pins/{{id}}"><strong>{{title}}</strong></a>
    <span class="muted">{{coordinates}} · {{photos}}</span>
    <form method="post" action="/pins/{{id}}/delete" class="inline">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <button type="submit" class="link-button danger-text">Delete<span class="visually-hidden"> pin {{title}}</span></button>
    </form>
    </li>{{/listed}}</ul>{{/hasListed}}
    {{#paged}}<nav class="pin-pages" aria-label="Pages of pins">{{#previous}}<a class="button small" rel="prev" id="pins-previous" href="/?page={{.}}#pin-list">← Newer</a>{{/previous}}{{^previous}}<span class="button small disabled" aria-disabled="true">← Newer</span>{{/previous}} <span class="muted">Page {{page}} of {{pages}}</span> {{#next}}<a class="button small" rel="next" id="pins-next" href="/?page={{.}}#pin-list">Older →</a>{{/next}}{{^next}}<span class="button small disabled" aria-disabled="true">Older →</span>{{/next}}</nav>{{/paged}}
    <form method="post" action="/pins" class="add-pin">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <label for="add-pin-place">Add a pin by place name or “lat, lon”</label>
    <div class="row">
    <input id="add-pin-place" name="place" type="text" value="" required>
    <button type="submit" class="button primary">Add pin</button>
    </div>
    </form>
    </section>
    {{/main}}{{/layout}}
    """

let albumPage = """
    {{<layout}}{{$main}}
    <nav class="breadcrumbs"><a href="/">← Your map</a></nav>
    <section class="album" id="album" data-pin="{{id}}" data-status="{{status}}" data-csrf="{{csrf}}">
    <header class="album-head">
    <canvas class="album-map" id="album-map" data-lat="{{lat}}" data-lon="{{lon}}" width="160" height="120"
            role="img" aria-label="Where the pin is: {{title}}"></canvas>
    <div class="album-title">
    <h1>{{title}}</h1>
    <p class="muted">{{coordinates}}{{pageInfo}}</p>
    </div>
    <div class="album-actions">
    <form method="post" action="/pins/{{id}}/collection" id="new-collection-form">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <button type="submit" class="button primary" id="new-collection"{{#downloading}} disabled{{/downloading}}>New Collection</button>
    </form>
    <button type="button" class="button" id="edit-toggle" aria-pressed="false" hidden>Edit</button>
    <a class="button" href="/pins/{{id}}/picker">Choose photos</a>
    <details class="delete-pin">
    <summary class="button danger-outline">Delete pin</summary>
    <form method="post" action="/pins/{{id}}/delete" class="confirm-box">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <p>Delete this pin and all its photos?</p>
    <button type="submit" class="button danger">Delete pin</button>
    </form>
    </details>
    </div>
    </header>
    <div id="album-status" role="status" aria-live="polite" data-status="{{status}}">{{^photos}}<p class="banner empty">This album is empty. Press New Collection for more photos.</p>{{/photos}}</div>
    <ul class="photo-grid" id="photo-grid">{{#photos}}
    <li class="photo" data-id="{{id}}" data-status="ready">
    <a href="/photos/{{id}}/view" title="{{title}} — {{credit}}"><img src="/photos/{{id}}" alt="{{title}}" width="{{width}}" height="{{height}}" loading="lazy">
    <span class="credit">{{credit}}</span></a>
    <form method="post" action="/photos/{{id}}/delete" class="remove"><input type="hidden" name="_csrf" value="{{csrf}}">
    <button type="submit" aria-label="Remove {{title}}" title="Remove">×</button></form>
    </li>{{/photos}}</ul>
    </section>
    <p class="attribution muted">Photos and their titles belong to their owners; each photo page links to its source.
    </p>
    {{/main}}{{/layout}}
    """

var library = MustacheLibrary()
try library.register(layout, named: "layout")
try library.register(mapPage, named: "map")
try library.register(albumPage, named: "album")
let templates = library

// MARK: Requests

struct SignedIn: Sendable {
    let id: Int64
    let email: String
    let name: String
    let csrf: String
}

/// Statements sent for this request, reported like the app reports its own.
final class RoundTripCount: @unchecked Sendable {
    var count = 0
}

func cookie(_ name: String, in request: Request) -> String? {
    guard let header = request.headers[.cookie] else { return nil }
    for part in header.split(separator: ";") {
        let pair = part.trimmingCharacters(in: .whitespaces)
        if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
    }
    return nil
}

func wellFormed(_ token: String) -> Bool {
    token.utf8.count == 43 && token.utf8.allSatisfy {
        ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
    }
}

func session(_ request: Request, _ trips: RoundTripCount) async throws -> SignedIn? {
    guard let token = cookie("vt_session", in: request), wellFormed(token) else { return nil }
    var binds = PostgresBindings()
    binds.append(token)
    binds.append(3600)
    binds.append(30)
    trips.count += 1
    let rows = try await client.query(PostgresQuery(unsafeSQL: sessionSQL, binds: binds))
    for try await row in rows {
        let r = row.makeRandomAccess()
        if try r["disabled"].decode(Bool.self) || r["expired"].decode(Bool.self) { return nil }
        return SignedIn(id: try r["id"].decode(Int64.self), email: try r["email"].decode(String.self),
                        name: try r["display_name"].decode(String.self), csrf: try r["csrf_token"].decode(String.self))
    }
    return nil
}

let textTypes = ["text/html; charset=utf-8", "application/json; charset=utf-8"]

/// gzip at level 1 (as the app) for text of 1 KiB or more when the request accepts it.
func respond(_ request: Request, _ body: String, type: String, trips: RoundTripCount,
             headers extra: HTTPFields = [:]) throws -> Response {
    var buffer = ByteBuffer(string: body)
    var headers: HTTPFields = [.contentType: type, .cacheControl: "no-store"]
    headers.append(contentsOf: extra)
    headers[HTTPField.Name("Server-Timing")!] = "db;desc=\"round trips\";dur=\(trips.count)"
    if buffer.readableBytes >= 1024 {
        headers[.vary] = "Accept-Encoding"
        if let accept = request.headers[.acceptEncoding], accept.contains("gzip") {
            buffer = try buffer.compress(with: .gzip(configuration: .init(compressionLevel: 1)))
            headers[.contentEncoding] = "gzip"
        }
    }
    return Response(status: .ok, headers: headers, body: .init(byteBuffer: buffer))
}

let pinsEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

struct PinJSON: Codable {
    let id: Int64
    let lat: Double
    let lon: Double
    let name: String
    let photos: Int
    let status: String
}

struct PinRow {
    let json: PinJSON
    var coordinates: String { String(format: "%.4f, %.4f", json.lat, json.lon) }
    var title: String { json.name }
}

func pin(_ r: PostgresRandomAccessRow) throws -> PinRow {
    let lat = try r["lat"].decode(Double.self), lon = try r["lon"].decode(Double.self)
    let name = try r["place_name"].decode(String?.self) ?? String(format: "%.4f, %.4f", lat, lon)
    _ = try r["created_at"].decode(Date.self)
    return PinRow(json: PinJSON(id: try r["id"].decode(Int64.self), lat: lat, lon: lon, name: name,
                                photos: Int(try r["photo_count"].decode(Int64.self)), status: try r["status"].decode(String.self)))
}

let router = Router()

router.get("/") { request, _ -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .seeOther, headers: [.location: "/sign-in"]) }
    let page = max(1, Int(request.uri.queryParameters.get("page") ?? "1") ?? 1)
    var binds = PostgresBindings()
    binds.append(user.id)
    binds.append((page - 1) * 50)
    binds.append(50)
    binds.append(300)
    binds.append(25.0)
    binds.append(10.0)
    binds.append(2.0)
    trips.count += 1
    let rows = try await client.query(PostgresQuery(unsafeSQL: mapPageSQL, binds: binds))
    var total = 0, lat = 25.0, lon = 10.0, zoom = 2.0, first = true
    var listed: [PinRow] = [], inView: [PinJSON] = []
    for try await row in rows {
        let r = row.makeRandomAccess()
        if first {
            first = false
            total = Int(try r["total"].decode(Int64.self))
            if try r["saved"].decode(Bool.self) {
                lat = try r["region_lat"].decode(Double.self)
                lon = try r["region_lon"].decode(Double.self)
                zoom = try r["region_zoom"].decode(Double.self)
            }
        }
        guard try r["id"].decode(Int64?.self) != nil else { continue }
        let p = try pin(r)
        if try r["in_list"].decode(Bool.self) { listed.append(p) }
        if try r["in_view"].decode(Bool.self) { inView.append(p.json) }
    }
    let pages = max(1, (total + 49) / 50)
    let object: [String: Any] = [
        "title": "Your map", "script": "app", "bodyClass": "map-page", "csrf": user.csrf,
        "user": ["email": user.email, "name": user.name],
        "lat": lat, "lon": lon, "zoom": zoom, "total": total, "complete": inView.count == total ? "true" : "false",
        "pinsJSON": String(decoding: try pinsEncoder.encode(inView), as: UTF8.self),
        "hasListed": !listed.isEmpty,
        "listed": listed.map { p -> [String: Any] in
            ["id": p.json.id, "title": p.title, "coordinates": p.coordinates,
             "photos": p.json.photos == 1 ? "1 photo" : "\(p.json.photos) photos", "csrf": user.csrf]
        },
        "paged": pages > 1, "page": page, "pages": pages,
        "previous": page > 1 ? (page - 1) as Any : false as Any, "next": page < pages ? (page + 1) as Any : false as Any,
    ]
    return try respond(request, templates.render(object, withTemplate: "map") ?? "", type: textTypes[0], trips: trips)
}

router.get("/pins.json") { request, _ -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .unauthorized) }
    var binds = PostgresBindings()
    binds.append(user.id)
    binds.append(2000)
    trips.count += 1
    var pins: [PinJSON] = []
    for try await row in try await client.query(PostgresQuery(unsafeSQL: pinsSQL, binds: binds)) {
        pins.append(try pin(row.makeRandomAccess()).json)
    }
    let body = String(decoding: try pinsEncoder.encode(["pins": pins]), as: UTF8.self)
    return try respond(request, body, type: textTypes[1], trips: trips)
}

router.get("/pins/:id") { request, context -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .seeOther, headers: [.location: "/sign-in"]) }
    guard let id = context.parameters.get("id", as: Int64.self), id > 0 else { return Response(status: .notFound) }
    var binds = PostgresBindings()
    binds.append(id)
    binds.append(user.id)
    trips.count += 1
    var object: [String: Any] = [:]
    var photos: [[String: Any]] = []
    for try await row in try await client.query(PostgresQuery(unsafeSQL: albumSQL, binds: binds)) {
        let r = row.makeRandomAccess()
        if object.isEmpty {
            let lat = try r["lat"].decode(Double.self), lon = try r["lon"].decode(Double.self)
            let coordinates = String(format: "%.4f, %.4f", lat, lon)
            let status = try r["status"].decode(String.self)
            let page = try r["page"].decode(Int?.self), pages = try r["total_pages"].decode(Int?.self)
            _ = try r["error"].decode(String?.self)
            object = [
                "title": try r["place_name"].decode(String?.self) ?? coordinates, "script": "album", "bodyClass": "album-page",
                "csrf": user.csrf, "user": ["email": user.email, "name": user.name], "id": id, "lat": lat, "lon": lon,
                "coordinates": coordinates, "status": status, "downloading": status == "downloading",
                "pageInfo": (page != nil && (pages ?? 0) > 1) ? " · collection \(page!) of \(pages!)" : "",
            ]
        }
        guard let photoID = try r["photo_id"].decode(Int64?.self) else { continue }
        let title = try r["title"].decode(String.self)
        let credit = [try r["owner_name"].decode(String.self), try r["license"].decode(String.self)].filter { !$0.isEmpty }
            .joined(separator: " · ")
        _ = (try r["page_url"].decode(String?.self), try r["date_taken"].decode(String?.self), try r["remote_id"].decode(String.self),
             try r["position"].decode(Int.self), try r["photo_status"].decode(String.self))
        photos.append(["id": photoID, "title": title.isEmpty ? "Untitled photo" : title, "credit": credit, "csrf": user.csrf,
                       "width": try r["width"].decode(Int?.self) ?? 0, "height": try r["height"].decode(Int?.self) ?? 0])
    }
    guard !object.isEmpty else { return Response(status: .notFound) }
    object["photos"] = photos
    return try respond(request, templates.render(object, withTemplate: "album") ?? "", type: textTypes[0], trips: trips)
}

router.get("/photos/:id") { request, context -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .seeOther, headers: [.location: "/sign-in"]) }
    guard let id = context.parameters.get("id", as: Int64.self), id > 0 else { return Response(status: .notFound) }
    var binds = PostgresBindings()
    binds.append(id)
    binds.append(user.id)
    trips.count += 1
    for try await row in try await client.query(PostgresQuery(unsafeSQL: imageSQL, binds: binds)) {
        let r = row.makeRandomAccess()
        let bytes = try r["bytes"].decode(ByteBuffer.self)
        let type = try r["content_type"].decode(String.self)
        return Response(status: .ok, headers: [
            .contentType: type, .eTag: "\"photo-\(id)\"", .cacheControl: "private, max-age=31536000, immutable",
            HTTPField.Name("Server-Timing")!: "db;desc=\"round trips\";dur=\(trips.count)",
        ], body: .init(byteBuffer: bytes))
    }
    return Response(status: .notFound)
}

router.post("/region") { request, _ -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .unauthorized) }
    var request = request
    let body = try await request.collectBody(upTo: 16 * 1024)
    var form: [String: String] = [:]
    for pair in String(buffer: body).split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
        if parts.count == 2 { form[parts[0]] = parts[1] }
    }
    guard let sent = request.headers[HTTPField.Name("X-CSRF-Token")!] ?? form["_csrf"], sent == user.csrf else {
        return Response(status: .forbidden)
    }
    guard let lat = form["lat"].flatMap(Double.init), let lon = form["lon"].flatMap(Double.init),
          let zoom = form["zoom"].flatMap(Double.init), lat.isFinite, lon.isFinite, zoom.isFinite,
          (-85.06...85.06).contains(lat), (-180...180).contains(lon), (0...18).contains(zoom) else {
        return Response(status: .unprocessableContent)
    }
    var binds = PostgresBindings()
    binds.append(user.id)
    binds.append(lat)
    binds.append(lon)
    binds.append(zoom)
    trips.count += 1
    try await client.query(PostgresQuery(unsafeSQL: regionSQL, binds: binds))
    return Response(status: .noContent, headers: [HTTPField.Name("Server-Timing")!: "db;desc=\"round trips\";dur=\(trips.count)"])
}

let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), services: [client])
print("bench-app-peer listening on \(port)")
try await app.runService()
