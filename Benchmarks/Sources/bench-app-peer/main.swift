// The peer for `script/bench app`: the app's five hot routes on Hummingbird 2 + PostgresNIO, pages
// through swift-mustache, gzip through compress-nio. It reads the same tables with the same SQL
// (copied from AccountStore, PinStore and AlbumStore) and checks the session the same way (the
// same statement, the same CSRF rule for POST), so the two differ in the server, the driver and the
// renderer only. It reports its round trips in Server-Timing too, counted by the handler.
// For `script/bench visits` it also answers /pins.json for a viewport (?bbox&zoom), thumbnails from
// the app's file store (PHOTO_STORE, ab/cd/abcd…, as FileStore keeps them) and POST /pins, all
// with the app's statements.
// Usage: [POOL=n] [DATABASE=name] [PHOTO_STORE=dir] bench-app-peer PORT POSTGRES_SOCKET_DIR
import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import PostgresNIO

let arguments = CommandLine.arguments
let port = Int(arguments[1]) ?? 8092
let socketDirectory = arguments[2]

var postgresConfiguration = PostgresClient.Configuration(
    unixSocketPath: socketDirectory + "/.s.PGSQL.5432", username: "postgres", password: nil,
    database: ProcessInfo.processInfo.environment["DATABASE"] ?? "virtual_tourist")
/// The app's file store, where photos moved out of their rows are (nil: photos are read from rows).
let photoStore = ProcessInfo.processInfo.environment["PHOTO_STORE"]
let fileIO = FileIO()
// As many connections as the app's pool (script/bench passes the same POOL to both). Fewer helped
// the peer as much as the app: on two cores its p99 for GET / went from 169-194 to 111-114 ms.
postgresConfiguration.options.maximumConnections = Int(ProcessInfo.processInfo.environment["POOL"] ?? "") ?? 16
// The app runs its map page's statements with generic plans: `SELECT set_config('plan_cache_mode',
// 'force_generic_plan', true)` first in the page's pipeline, local to the pipeline's one implicit
// transaction (PostgresStatement.genericPlans). Here that statement would do nothing: PostgresNIO
// ends every query with its own Sync, so each statement is its own transaction and a local setting
// is gone before the next one. So every connection of the peer starts with the setting instead (a
// startup parameter, no extra statement). It reaches the peer's other routes too, which is the same
// in effect: all of the peer's hot statements are index ranges on one person's rows (a session by
// its token's hash, pins by user_id, an album by pin id, a photo by id, a region by user_id), whose
// generic plans are the plans the values would get. PostgresNIO sends unnamed statements, which
// PostgreSQL plans on every call whatever this setting says: it gives the peer the app's plans, not
// the planning the app's named statements save.
postgresConfiguration.options.additionalStartupParameters = [("plan_cache_mode", "force_generic_plan")]
let client = PostgresClient(configuration: postgresConfiguration)
/// For the queries sent on a leased connection, which need a logger: none, as `client.query` logs.
let quiet = Logger(label: "bench-app-peer", factory: { _ in SwiftLogNoOpLogHandler() })

// MARK: SQL, as the app sends it

let sessionSQL = """
    WITH found AS (
        SELECT s.token_hash, s.user_id AS id, u.email, u.display_name, s.csrf_token,
               u.disabled_at IS NOT NULL AS disabled,
               s.expires_at <= now() AS expired,
               s.last_seen_at < now() - make_interval(secs => $2::int) AS stale,
               r.center_lat, r.center_lon, r.zoom
        FROM sessions s JOIN users u ON u.id = s.user_id LEFT JOIN map_regions r ON r.user_id = s.user_id
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
    SELECT id, email, display_name, csrf_token, disabled, expired, stale, center_lat, center_lon, zoom FROM found
    """

let pinColumns = """
    p.id, p.lat, p.lon, p.place_name, p.status, p.created_at,
    coalesce((SELECT c.ready FROM pin_photo_counts c WHERE c.pin_id = p.id AND c.generation = p.generation), 0) AS photo_count
    """

// The map page (PinStore.mapPage): the number of pins, one page of the list, and the first frame's
// view (viewStatements below).
let totalSQL = "SELECT coalesce(sum(pins), 0)::bigint AS n FROM pin_cells WHERE user_id = $1 AND level = 0"

let listedSQL = "SELECT \(pinColumns) FROM pins p WHERE p.user_id = $1 ORDER BY p.id DESC LIMIT $2 OFFSET $3"

let pinsSQL = "SELECT \(pinColumns) FROM pins p WHERE p.user_id = $1 ORDER BY p.id DESC LIMIT $2"

let albumSQL = """
    SELECT p.id, p.lat, p.lon, p.place_name, p.status, p.created_at, p.generation, p.error, p.page, p.total_pages,
           ph.id AS photo_id, ph.position, ph.status AS photo_status, ph.title, ph.owner_name,
           coalesce(l.name, '') AS license, nullif(l.url, '') AS license_url,
           ph.page_url, ph.date_taken, ph.width, ph.height, ph.remote_id
    FROM pins p
    LEFT JOIN photos ph ON ph.pin_id = p.id AND ph.user_id = p.user_id AND ph.generation = p.generation
    LEFT JOIN photo_licenses l ON l.id = ph.license_id
    WHERE p.id = $1 AND p.user_id = $2
    ORDER BY ph.position, ph.id
    """

let imageSQL = "SELECT bytes, content_type FROM photos WHERE id = $1 AND user_id = $2 AND status = 'ready'"

// AlbumStore.accessPhoto with AlbumStore.accessColumns: a ready photo's blobs in the store.
let accessSQL = """
    SELECT ph.pin_id, ph.status = 'ready' AS access_ready, ph.content_type AS access_type, encode(ph.hash, 'hex') AS access_hash,
           encode(ph.thumb_256, 'hex') AS access_256, encode(ph.thumb_512, 'hex') AS access_512,
           CASE WHEN ph.hash IS NULL THEN ph.bytes END AS row_bytes
    FROM photos ph WHERE ph.id = $1 AND ph.user_id = $2 AND ph.status = 'ready'
    """

// Dropping a pin: PinStore.create, then AlbumStore.startCollection(onlyIfNew: true) with its
// quota check and startCollections, each a transaction as in the app.
let pinLimitSQL = "SELECT coalesce(max_pins, $2) AS n FROM users WHERE id = $1 FOR UPDATE"
let createPinSQL = """
    INSERT INTO pins (user_id, lat, lon, place_name)
    SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM pins WHERE user_id = $1) < $5
    RETURNING id, lat, lon, place_name, status, created_at, 0::bigint AS photo_count
    """
let pinStatusSQL = "SELECT status FROM pins WHERE id = $1 AND user_id = $2 FOR UPDATE"
let quotaSQL = """
    SELECT coalesce(u.max_photo_bytes, $3) AS byte_limit,
           coalesce(u.max_collections_per_hour, $4) AS collection_limit,
           (SELECT coalesce(sum(byte_size), 0) FROM photos WHERE user_id = $1 AND pin_id <> $2)::bigint AS bytes,
           (SELECT count(*) FROM album_jobs WHERE user_id = $1 AND kind = 'collection' AND generation > 1
                AND created_at > now() - interval '1 hour') AS collections
    FROM users u WHERE u.id = $1
    """
// AlbumStore.startCollections: the new generation, the old photos and job, the new job, one statement.
let startSQL = """
    WITH started AS (
        UPDATE pins SET generation = generation + 1, status = 'downloading', error = NULL, updated_at = now()
        WHERE id = ANY($1::bigint[]) AND user_id = $2 RETURNING id, generation
    ), dropped AS (
        DELETE FROM photos WHERE pin_id IN (SELECT id FROM started) AND user_id = $2
    ), cancelled AS (
        UPDATE album_jobs SET state = 'cancelled', finished_at = now()
        WHERE pin_id IN (SELECT id FROM started) AND user_id = $2 AND state IN ('queued', 'running')
        RETURNING id
    ), queued AS (
        INSERT INTO album_jobs (pin_id, user_id, generation, kind)
        SELECT id, $2, generation, 'collection' FROM started WHERE (SELECT count(*) FROM cancelled) >= 0
    )
    SELECT id, pg_notify($3, '') FROM started
    """
let notifySQL = "SELECT pg_notify($1, $2)"

let regionSQL = """
    INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES ($1, $2, $3, $4)
    ON CONFLICT (user_id) DO UPDATE
    SET center_lat = EXCLUDED.center_lat, center_lon = EXCLUDED.center_lon, zoom = EXCLUDED.zoom, updated_at = now()
    """

// MARK: The map's view, as PinStore computes it (firstFrame, Normalized, ViewGrid, viewStatements)

/// The map page's region when none is saved (MapRegion.world).
let world = (lat: 25.0, lon: 10.0, zoom: 2.0)
/// Pins per page of the list, and at most this many pins embedded for the first frame (MapPage).
let listPageSize = 50, embedLimit = 300

/// A box in degrees; west > east when it crosses the antimeridian.
struct Box {
    var west, south, east, north: Double
}

/// The box the first frame of a 2560 × 1600 screen shows around the region's centre.
func firstFrame(lat: Double, lon: Double, zoom: Double) -> Box {
    let zoom = min(max(zoom, 0), 22)
    let dx = 1280 * 360 / (256 * pow(2, zoom))
    let dy = 800 * 2 * Double.pi / (256 * pow(2, zoom))
    let yc = log(tan(Double.pi / 4 + min(max(lat, -85), 85) * Double.pi / 360))
    func latitude(_ y: Double) -> Double { (2 * atan(exp(y)) - Double.pi / 2) * 180 / Double.pi }
    return Box(west: lon - dx, south: latitude(yc - dy), east: lon + dx, north: latitude(yc + dy))
}

/// A box with latitudes clamped and west in -180..<180; east = west + width (so past 180 when it
/// crosses the antimeridian).
struct Normalized {
    let west, south, east, north, width: Double
    init(_ box: Box) {
        var width = box.east >= box.west ? box.east - box.west : box.east + 360 - box.west
        if !width.isFinite || width >= 360 { width = 360 }
        var west = box.west.truncatingRemainder(dividingBy: 360)
        if west < -180 { west += 360 } else if west >= 180 { west -= 360 }
        if width >= 360 { west = -180 }
        let a = min(max(box.south, -90), 90), b = min(max(box.north, -90), 90)
        (self.west, self.east, self.width, self.south, self.north) = (west, west + width, width, min(a, b), max(a, b))
    }
}

/// The grid of pin_cells a view reads: cells of 360 / 2^level degrees, the level even and at most
/// 16; nil when the view wants cells finer than level 16 keeps.
struct ViewGrid {
    let level: Int
    let size: Double
    /// Columns; the second range is empty (1...0 as bounds) unless the view crosses the antimeridian.
    let columns: (ClosedRange<Int>, (lower: Int, upper: Int))
    let rows: ClosedRange<Int>
    let box: Box

    init?(_ asked: Box, zoom: Double) {
        let view = Normalized(asked)
        let wanted = max(360 / pow(2, min(max(zoom, 0), 22)) / 4, max(view.width, view.north - view.south) / 16, 1e-9)
        let finest = Int(floor(log2(360 / wanted)))
        let level = max(0, finest - finest % 2)
        guard level <= 16 else { return nil }
        let size = 360 / Double(1 << level)
        let last = 1 << level  // the column of lon = 180 exactly
        self.level = level
        self.size = size
        let x0 = Int(floor((view.west + 180) / size))
        let y0 = Int(floor((view.south + 90) / size)), y1 = Int(floor((view.north + 90) / size))
        rows = y0...y1
        let south = max(-90, Double(y0) * size - 90), north = min(90, Double(y1 + 1) * size - 90)
        if view.width >= 360 {
            columns = (0...last, (1, 0))
            box = Box(west: -180, south: south, east: 180, north: north)
        } else if view.east <= 180 {
            let x1 = Int(floor((view.east + 180) / size))
            columns = (x0...x1, (1, 0))
            box = Box(west: Double(x0) * size - 180, south: south, east: min(180, Double(x1 + 1) * size - 180), north: north)
        } else {
            let x1 = Int(floor((view.east - 360 + 180) / size))
            columns = (x0...last, (0, x1))
            box = Box(west: Double(x0) * size - 180, south: south, east: min(180, Double(x1 + 1) * size - 180), north: north)
        }
    }
}

/// The two statements that answer a view: the clusters (whose counts give the total), and the pins
/// themselves, which PostgreSQL fetches only when the total is at most `maxMarkers`. The same text
/// and the same parameters as the app (Int and Int64 go as int8, Double as float8 in both drivers).
func viewStatements(userID: Int64, box: Box, zoom: Double, maxMarkers: Int) -> (cells: PostgresQuery, pins: PostgresQuery) {
    if let grid = ViewGrid(box, zoom: zoom) {
        let cells = """
            SELECT pins::bigint AS n, sum_lat / pins AS lat, sum_lon / pins AS lon FROM pin_cells
            WHERE user_id = $1 AND level = $2 AND x BETWEEN $3 AND $4 AND y BETWEEN $5 AND $6
            UNION ALL
            SELECT pins::bigint, sum_lat / pins, sum_lon / pins FROM pin_cells
            WHERE user_id = $1 AND level = $2 AND x BETWEEN $7 AND $8 AND y BETWEEN $5 AND $6
            """
        let pins = """
            SELECT \(pinColumns) FROM pins p
            WHERE (SELECT coalesce(sum(pins), 0) FROM pin_cells
                   WHERE user_id = $1 AND level = $2 AND x BETWEEN $3 AND $4 AND y BETWEEN $5 AND $6)
                + (SELECT coalesce(sum(pins), 0) FROM pin_cells
                   WHERE user_id = $1 AND level = $2 AND x BETWEEN $7 AND $8 AND y BETWEEN $5 AND $6) <= $9
              AND p.user_id = $1 AND p.lat BETWEEN $10 AND $11
              AND floor((p.lat + 90) / $12) BETWEEN $5 AND $6
              AND (floor((p.lon + 180) / $12) BETWEEN $3 AND $4 OR floor((p.lon + 180) / $12) BETWEEN $7 AND $8)
            ORDER BY p.id DESC LIMIT $9
            """
        var common = PostgresBindings()
        common.append(userID)
        common.append(grid.level)
        common.append(grid.columns.0.lowerBound)
        common.append(grid.columns.0.upperBound)
        common.append(grid.rows.lowerBound)
        common.append(grid.rows.upperBound)
        common.append(grid.columns.1.lower)
        common.append(grid.columns.1.upper)
        var more = common
        more.append(maxMarkers)
        more.append(grid.box.south)
        more.append(grid.box.north)
        more.append(grid.size)
        return (PostgresQuery(unsafeSQL: cells, binds: common), PostgresQuery(unsafeSQL: pins, binds: more))
    }
    // Zoomed in past the finest cells: the pins inside grouped directly, on a grid of a quarter tile.
    let view = Normalized(box)
    let size = max(360 / pow(2, min(max(zoom, 0), 22)) / 4, max(view.width, view.north - view.south) / 16, 1e-9)
    let (w2, e2) = view.east > 180 ? (-180.0, view.east - 360) : (1.0, 0.0)
    let inside = """
        p.user_id = $1 AND p.lat BETWEEN $2 AND $3
        AND (p.lon BETWEEN $4 AND $5 OR p.lon BETWEEN $6 AND $7)
        """
    var parameters = PostgresBindings()
    parameters.append(userID)
    parameters.append(view.south)
    parameters.append(view.north)
    parameters.append(view.west)
    parameters.append(min(view.east, 180))
    parameters.append(w2)
    parameters.append(e2)
    var grouped = parameters, limited = parameters
    grouped.append(size)
    limited.append(maxMarkers)
    return (PostgresQuery(unsafeSQL: """
                SELECT count(*) AS n, avg(p.lat) AS lat, avg(p.lon) AS lon FROM pins p
                WHERE \(inside)
                GROUP BY floor(p.lat / $8), floor(p.lon / $8)
                """, binds: grouped),
            PostgresQuery(unsafeSQL: """
                SELECT \(pinColumns) FROM pins p
                WHERE (SELECT count(*) FROM pins p WHERE \(inside)) <= $8 AND \(inside)
                ORDER BY p.id DESC LIMIT $8
                """, binds: limited))
}

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
         data-tile-url="none" data-pins="{{pinsJSON}}" data-view-clusters="{{clustersJSON}}" data-pins-complete="{{complete}}"
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
    /// Where the person left the map (nil: never saved), read in the session's statement.
    let region: (lat: Double, lon: Double, zoom: Double)?
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
        var region: (lat: Double, lon: Double, zoom: Double)?
        if let lat = try r["center_lat"].decode(Double?.self) {
            region = (lat, try r["center_lon"].decode(Double.self), try r["zoom"].decode(Double.self))
        }
        return SignedIn(id: try r["id"].decode(Int64.self), email: try r["email"].decode(String.self),
                        name: try r["display_name"].decode(String.self), csrf: try r["csrf_token"].decode(String.self),
                        region: region)
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

/// A cluster as the app writes it: {"count":N,"lat":…,"lon":…} (sorted keys).
struct ClusterJSON: Codable {
    let count: Int
    let lat: Double
    let lon: Double
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
    let region = user.region ?? world
    let (lat, lon, zoom) = (region.lat, region.lon, region.zoom)
    let view = viewStatements(userID: user.id, box: firstFrame(lat: lat, lon: lon, zoom: zoom), zoom: zoom, maxMarkers: embedLimit)
    var totalBinds = PostgresBindings()
    totalBinds.append(user.id)
    var listedBinds = PostgresBindings()
    listedBinds.append(user.id)
    listedBinds.append(listPageSize)
    listedBinds.append((page - 1) * listPageSize)
    // The app's four statements, in its order, on one connection. PostgresNIO 1.33.2 does not
    // pipeline: it queues the queries issued on a connection and sends the next one only when the
    // previous one's ReadyForQuery has come back (ConnectionStateMachine.enqueue and
    // executeNextQueryFromQueue; every query is Parse, Describe, Bind, Execute and Sync). So they
    // are all queued at once, in order (the future-returning query, called without an await in
    // between, so nothing else can reorder them and each collects its rows, leaving no stream
    // waiting on a reader), which is as close to the app's one pipeline as this driver gets: the
    // connection goes straight from one statement to the next. That is still one round trip per
    // statement, and they are counted that way.
    trips.count += 4
    let results = try await client.withConnection { conn -> [PostgresQueryResult] in
        let queries = [PostgresQuery(unsafeSQL: totalSQL, binds: totalBinds), PostgresQuery(unsafeSQL: listedSQL, binds: listedBinds),
                       view.cells, view.pins]
        let futures = queries.map { query -> EventLoopFuture<PostgresQueryResult> in conn.query(query, logger: quiet) }
        var results: [PostgresQueryResult] = []
        for future in futures { results.append(try await future.get()) }
        return results
    }
    var total = 0
    for row in results[0] { total = Int(try row.decode(Int64.self)) }
    let listed = try results[1].map { try pin($0.makeRandomAccess()) }
    let clusters = try results[2].map { row -> ClusterJSON in
        let r = row.makeRandomAccess()
        return ClusterJSON(count: Int(try r["n"].decode(Int64.self)), lat: try r["lat"].decode(Double.self), lon: try r["lon"].decode(Double.self))
    }
    // The pins when the cells say few are inside (the gated statement then returned them), else
    // the clusters: PinStore.ViewStatements.read.
    let few = clusters.reduce(0) { $0 + $1.count } <= embedLimit
    let embedded = try few ? results[3].map { try pin($0.makeRandomAccess()).json } : []
    let shownClusters = few ? [] : clusters
    let pages = max(1, (total + 49) / 50)
    let object: [String: Any] = [
        "title": "Your map", "script": "app", "bodyClass": "map-page", "csrf": user.csrf,
        "user": ["email": user.email, "name": user.name],
        "lat": lat, "lon": lon, "zoom": zoom, "total": total,
        "complete": shownClusters.isEmpty && embedded.count == total ? "true" : "false",
        "pinsJSON": String(decoding: try pinsEncoder.encode(embedded), as: UTF8.self),
        "clustersJSON": String(decoding: try pinsEncoder.encode(shownClusters), as: UTF8.self),
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
    if let bbox = request.uri.queryParameters.get("bbox"), let zoom = request.uri.queryParameters.get("zoom").flatMap(Double.init) {
        let edges = bbox.split(separator: ",").compactMap { Double($0) }
        guard edges.count == 4 else { return Response(status: .badRequest) }
        return try await viewport(request, user: user, box: Box(west: edges[0], south: edges[1], east: edges[2], north: edges[3]),
                                  zoom: zoom, trips: trips)
    }
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
    if let photoStore {
        return try await storedPhoto(request, context, id: id, userID: user.id, store: photoStore, trips: trips)
    }
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

router.post("/pins") { request, _ -> Response in
    let trips = RoundTripCount()
    guard let user = try await session(request, trips) else { return Response(status: .unauthorized) }
    var request = request
    let form = try await formFields(&request)
    guard let sent = request.headers[HTTPField.Name("X-CSRF-Token")!] ?? form["_csrf"], sent == user.csrf else {
        return Response(status: .forbidden)
    }
    guard let lat = form["lat"].flatMap(Double.init), let lon = form["lon"].flatMap(Double.init), lat.isFinite, lon.isFinite,
          (-90...90).contains(lat), (-180...180).contains(lon) else {
        return Response(status: .unprocessableContent)
    }
    // The app names the pin after the nearest place in its GeoNames index (in memory, no
    // statement); the peer has no index and leaves the name empty, as the app does far from any place.
    let placeName: String? = nil
    trips.count += 2
    let created = try await client.withTransaction(logger: quiet) { conn -> PinRow? in
        var binds = PostgresBindings()
        binds.append(user.id)
        binds.append(5000)
        var limit = 5000
        for try await row in try await conn.query(PostgresQuery(unsafeSQL: pinLimitSQL, binds: binds), logger: quiet) {
            limit = Int(try row.decode(Int64.self))
        }
        var insert = PostgresBindings()
        insert.append(user.id)
        insert.append(lat)
        insert.append(lon)
        insert.append(placeName)
        insert.append(limit)
        for try await row in try await conn.query(PostgresQuery(unsafeSQL: createPinSQL, binds: insert), logger: quiet) {
            return try pin(row.makeRandomAccess())
        }
        return nil
    }
    guard let created else { return Response(status: .tooManyRequests) }
    // startCollection(onlyIfNew: true): the pin's row locked, the quotas, the start, the page's event.
    trips.count += 4
    try await client.withTransaction(logger: quiet) { conn in
        var ids = PostgresBindings()
        ids.append(created.json.id)
        ids.append(user.id)
        var status = ""
        for try await row in try await conn.query(PostgresQuery(unsafeSQL: pinStatusSQL, binds: ids), logger: quiet) {
            status = try row.decode(String.self)
        }
        guard status == "new" else { return }
        var quota = PostgresBindings()
        quota.append(user.id)
        quota.append(created.json.id)
        quota.append(Int64(2048) * 1024 * 1024)
        quota.append(60)
        for try await row in try await conn.query(PostgresQuery(unsafeSQL: quotaSQL, binds: quota), logger: quiet) {
            let r = row.makeRandomAccess()
            if try r["bytes"].decode(Int64.self) >= r["byte_limit"].decode(Int64.self) { return }
        }
        var start = PostgresBindings()
        start.append("{\(created.json.id)}")
        start.append(user.id)
        start.append("album_jobs")
        try await conn.query(PostgresQuery(unsafeSQL: startSQL, binds: start), logger: quiet)
        var notify = PostgresBindings()
        notify.append("album_events")
        notify.append("\(user.id):\(created.json.id)")
        try await conn.query(PostgresQuery(unsafeSQL: notifySQL, binds: notify), logger: quiet)
    }
    let body = String(decoding: try pinsEncoder.encode(created.json), as: UTF8.self)
    var response = try respond(request, body, type: textTypes[1], trips: trips)
    response.status = .created
    return response
}

/// A urlencoded form body (at most 16 KiB).
func formFields(_ request: inout Request) async throws -> [String: String] {
    let body = try await request.collectBody(upTo: 16 * 1024)
    var form: [String: String] = [:]
    for pair in String(buffer: body).split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
        if parts.count == 2 { form[parts[0]] = parts[1] }
    }
    return form
}

/// /pins.json?bbox&zoom: PinStore.viewport's two statements queued on one connection (as GET /
/// queues its four), then the app's answer: pins when few, else clusters; the total; the box.
func viewport(_ request: Request, user: SignedIn, box: Box, zoom: Double, trips: RoundTripCount) async throws -> Response {
    let view = viewStatements(userID: user.id, box: box, zoom: zoom, maxMarkers: embedLimit)
    trips.count += 2
    let results = try await client.withConnection { conn -> [PostgresQueryResult] in
        let futures = [view.cells, view.pins].map { conn.query($0, logger: quiet) }
        var results: [PostgresQueryResult] = []
        for future in futures { results.append(try await future.get()) }
        return results
    }
    let clusters = try results[0].map { row -> ClusterJSON in
        let r = row.makeRandomAccess()
        return ClusterJSON(count: Int(try r["n"].decode(Int64.self)), lat: try r["lat"].decode(Double.self), lon: try r["lon"].decode(Double.self))
    }
    let total = clusters.reduce(0) { $0 + $1.count }
    let few = total <= embedLimit
    let pins = try few ? results[1].map { try pin($0.makeRandomAccess()).json } : []
    let grown = ViewGrid(box, zoom: zoom)?.box ?? box
    struct Answer: Encodable {
        let pins: [PinJSON]
        let clusters: [ClusterJSON]
        let total: Int
        let bbox: [Double]
    }
    let answer = Answer(pins: pins, clusters: few ? [] : clusters, total: total, bbox: [grown.west, grown.south, grown.east, grown.north])
    let body = String(decoding: try pinsEncoder.encode(answer), as: UTF8.self)
    return try respond(request, body, type: textTypes[1], trips: trips)
}

/// GET /photos/:id from the file store: the app's statement, then the blob for the width asked
/// (?w=256 or 512: its thumbnail when there is one, else the original) read by Hummingbird's FileIO.
func storedPhoto(_ request: Request, _ context: some RequestContext, id: Int64, userID: Int64, store: String,
                 trips: RoundTripCount) async throws -> Response {
    var binds = PostgresBindings()
    binds.append(id)
    binds.append(userID)
    for try await row in try await client.query(PostgresQuery(unsafeSQL: accessSQL, binds: binds)) {
        let r = row.makeRandomAccess()
        let type = try r["access_type"].decode(String.self)
        guard let original = try r["access_hash"].decode(String?.self) else {
            return Response(status: .ok, headers: [.contentType: type], body: .init(byteBuffer: try r["row_bytes"].decode(ByteBuffer.self)))
        }
        let width = request.uri.queryParameters.get("w").flatMap { Int($0) }
        let hash = (width == nil ? nil : (width! <= 384 ? try r["access_256"].decode(String?.self) : try r["access_512"].decode(String?.self))) ?? original
        let etag = "\"\(hash)\""
        let headers: HTTPFields = [.contentType: type, .eTag: etag, .cacheControl: "private, max-age=31536000, immutable",
                                   HTTPField.Name("Server-Timing")!: "db;desc=\"round trips\";dur=\(trips.count)"]
        if request.headers[.ifNoneMatch] == etag { return Response(status: .notModified, headers: headers) }
        let path = "\(store)/\(hash.prefix(2))/\(hash.dropFirst(2).prefix(2))/\(hash)"
        return Response(status: .ok, headers: headers, body: try await fileIO.loadFile(path: path, context: context))
    }
    return Response(status: .notFound)
}

let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), services: [client])
print("bench-app-peer listening on \(port)")
try await app.runService()
