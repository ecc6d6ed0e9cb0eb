import HTTPClient
import HTTPServer
import Log
import Postgres

/// Settings the app layer needs (the executable reads them from the environment).
public struct AppSettings: Sendable {
    public var publicDirectory = "Public"
    /// The address people use (https://photos.example.org); https makes cookies Secure.
    public var publicURL: String?
    /// Force Secure cookies (behind a TLS-terminating proxy without PUBLIC_URL).
    public var secureCookies = false
    /// Raster tiles ({z}/{x}/{y}, {s}, {r}) or "none" for the built-in vector basemap.
    public var tileURL = "none"
    /// Shown on the map when raster tiles are used (their licence usually requires it).
    public var tileAttribution = ""
    /// flickr or fixture (a Flickr-compatible server at flickrAPIURL).
    public var photoProvider = "flickr"
    public var flickrAPIKey = ""
    public var flickrAPIURL = FlickrProvider.defaultAPIURL
    public var workers = AlbumWorkers.Settings()
    public var httpClient = HTTPClient.Options()

    public init() {}

    var cookiesAreSecure: Bool { secureCookies || (publicURL?.lowercased().hasPrefix("https://") ?? false) }
}

/// The whole web app as one HTTP handler (routes, static files, security headers, error pages),
/// plus the background work behind it: album workers and the LISTEN connection that wakes them.
public final class App: Sendable {
    /// The app's routes, for tests that must cover every route (CSRF, isolation).
    public let routes: [Router.Route]
    public let handler: any HTTPHandler
    public let accounts: AccountStore
    public let albums: AlbumStore
    public let workers: AlbumWorkers
    public let events: AlbumEvents
    private let listener: PostgresListener

    public init(pool: PostgresPool, settings: AppSettings) {
        accounts = AccountStore(pool: pool)
        albums = AlbumStore(pool: pool)
        events = AlbumEvents()
        let client = HTTPClient(options: settings.httpClient)
        let provider: any PhotoProvider = FlickrProvider(
            apiKey: settings.photoProvider == "fixture" && settings.flickrAPIKey.isEmpty ? "fixture" : settings.flickrAPIKey,
            apiURL: settings.flickrAPIURL, client: client)
        workers = AlbumWorkers(store: albums, provider: provider, client: client, settings: settings.workers)
        listener = PostgresListener(url: pool.url)

        var web = WebRoutes(accounts: accounts, secureCookies: settings.cookiesAreSecure)
        web.plain("/healthz") { _ in .text("ok") }
        web.addAccountRoutes()
        let placesPath = settings.publicDirectory + "/geo/places.tsv.gz"
        web.addMapRoutes(pins: PinStore(pool: pool), albums: albums, places: { PlaceIndex.shared(path: placesPath) }, settings: settings)
        web.addAlbumRoutes(albums: albums, events: events, provider: provider)
        web.fallback(StaticFiles(root: settings.publicDirectory))
        routes = web.router.routes
        let headers = SecurityHeaders(imageSources: SecurityHeaders.imageSource(forTileURL: settings.tileURL) + provider.imageOrigins)
        handler = MiddlewareChain([headers, DatabaseBusy()], handler: web.router)
    }

    /// Starts the album workers and the LISTEN connection that wakes them and feeds live pages.
    public func startBackgroundWork() throws {
        try listener.start()
        let workers = workers, events = events
        try listener.listen(AlbumStore.jobsChannel) { _ in workers.notify() }
        try listener.listen(AlbumStore.eventsChannel) { payload in events.received(payload) }
        // Notifications sent while the connection was down are lost: look for work at once.
        listener.onReconnect { workers.notify() }
        workers.start()
    }

    public func stopBackgroundWork() {
        workers.stop()
        listener.stop()
    }

    /// Error pages in the site's look, with the same security headers as every other page.
    public static let errorPage: ErrorPageRenderer = { status, message, _ in
        var response = HTTPResponse.page(Layout.errorPage(status: status, message: message), status: status)
        SecurityHeaders().apply(to: &response)
        response.headers.set("Cache-Control", "no-store")
        return response
    }
}

/// Every pooled connection busy for the whole wait: 503 with Retry-After rather than a 500, since
/// trying again shortly will work.
struct DatabaseBusy: Middleware {
    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        do {
            return try next(request)
        } catch PostgresError.poolTimeout {
            throw HTTPError(.serviceUnavailable, "The server is busy right now. Please try again in a moment.",
                            headers: ["Retry-After": "2"])
        }
    }
}
