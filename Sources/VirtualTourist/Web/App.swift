import HTTPClient
import HTTPServer
import Log
import Postgres
import Synchronization
import Dispatch
import Foundation

/// Settings the app layer needs (the executable reads them from the environment).
public struct AppSettings: Sendable {
    public var publicDirectory = "Public"
    public var migrationsDirectory = "migrations"
    /// Lets /metrics be read on the public port with "Authorization: Bearer TOKEN"; without it,
    /// /metrics is only on the metrics port.
    public var metricsToken: String?
    /// The address people use (https://photos.example.org); https makes cookies Secure.
    public var publicURL: String?
    /// Force Secure cookies (behind a TLS-terminating proxy without PUBLIC_URL).
    public var secureCookies = false
    /// Raster tiles ({z}/{x}/{y}, {s}, {r}) or "none" for the built-in vector basemap.
    public var tileURL = "none"
    /// Shown on the map when raster tiles are used (their licence usually requires it).
    public var tileAttribution = ""
    /// A PMTiles archive to serve the map from (takes precedence over tileURL).
    public var tilesFile: String?
    /// Leaf directories kept decoded (each up to a few thousand entries); 1 makes every lookup
    /// read its leaf again, which script/bench tiles uses as the cold case.
    public var tileDirectoryCacheEntries = 4096
    /// Where the tile proxy keeps upstream tiles (shared by instances on one volume) and its size cap.
    public var tileCacheDirectory = "tile-cache"
    public var tileCacheBytes = 512 * 1024 * 1024
    /// Named in the proxy's User-Agent (tile servers' usage policies ask for a way to reach the operator).
    public var tileContact = ""
    /// flickr, commons (Wikimedia Commons, no key) or fixture (a Flickr-compatible server at flickrAPIURL).
    public var photoProvider = "flickr"
    public var flickrAPIKey = ""
    public var flickrAPIURL = FlickrProvider.defaultAPIURL
    public var commonsAPIURL = CommonsProvider.defaultAPIURL
    public var workers = AlbumWorkers.Settings()
    /// Photos older than this many days are deleted hourly (0: kept until removed).
    public var photoRetentionDays = 0
    /// Finished album jobs older than this many days are deleted hourly (0: kept).
    public var jobRetentionDays = 7
    /// Freed memory is handed back to the system this often (MemoryTrim; 0: never).
    public var memoryTrimSeconds: Double = 10
    /// Where images are kept: a directory (PHOTO_STORE; docs/architecture.md, PhotoStore).
    public var photoStore = ".data/photos"
    /// An S3-compatible object store instead of the directory (PHOTO_STORE=s3://…).
    public var s3: S3Settings?
    /// Blobs no row names are removed only once this old (a download may be about to name one).
    public var photoStoreGraceSeconds: Double = 3600
    /// When the first upkeep (move of old rows' bytes, then a sweep) runs after start; hourly after.
    public var photoStoreUpkeepDelay: Double = 1
    public var httpClient = HTTPClient.Options()
    /// The provider's shared call budget (ProviderBudget.Limits defaults when nil).
    public var providerCallsPerHour: Double?
    public var providerCallBurst: Double?
    /// Largest Commons original downloaded when no thumbnail step fits.
    public var commonsOriginalCap = 2 * 1024 * 1024
    /// How the operator can be reached; sent in the User-Agent (CONTACT_EMAIL).
    public var contactEmail: String?
    /// Report each request's database round trips in a Server-Timing header (SERVER_TIMING=1).
    public var serverTiming = false
    /// Defaults of the per-person quotas (users.max_* override them).
    public var quotas = Quotas()
    /// Live album pages (event streams) one person may have open at once.
    public var maxStreamsPerPerson = 8
    /// Provider searches for picker pages at once, and how long a page waits for one.
    public var pickerSlots = 4
    public var pickerTimeout: Double = 8
    /// Who may make an account (SIGN_UP). Invitations by default: an instance on the internet
    /// with open sign-up gives every stranger who finds it a photo quota and a share of the
    /// operator's provider budget (docs/admin.md, "Who may sign up").
    public var signUp = SignUpMode.invite

    public init() {}

    /// The database pool's size unless DATABASE_POOL_SIZE says otherwise: two connections per CPU
    /// core, at least four, PostgreSQL's rule of thumb for a database on the same machine, as in
    /// the Compose set-up. More do not add throughput: their backends queue for the CPU in the
    /// kernel instead of for a connection in the pool, and the kernel is not fair to them. With 16
    /// on two cores a page now and then waited 250–500 ms behind the others (p99 up to 8 times the
    /// mean); with 4, at about the same requests/s, the slowest of 20,000 took 50–90 ms
    /// (docs/architecture.md, "PostgreSQL").
    public static var defaultDatabaseConnections: Int { max(4, 2 * ProcessInfo.processInfo.activeProcessorCount) }

    /// Request handlers at once for a pool of `databaseConnections`: one per connection, and room
    /// for pages that wait on another service instead (a picker search, up to `pickerTimeout`; an
    /// upstream map tile), so that those can never hold every handler. Handlers beyond the pool
    /// wait for a connection in the pool's first-come line.
    public func handlerSlots(databaseConnections: Int) -> Int { databaseConnections + pickerSlots + 8 }

    var publicURLIsHTTPS: Bool { publicURL?.lowercased().hasPrefix("https://") ?? false }
    var cookiesAreSecure: Bool { secureCookies || publicURLIsHTTPS }
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
    public let metrics: Metrics
    /// Where /tiles comes from; nil: the built-in basemap only.
    public let tiles: (any TileSource)?
    private let listener: PostgresListener
    private let connectionCount = ConnectionGauge()
    /// Cookies are Secure and __Host- (the error page reads the session cookie by that name).
    private let secureCookies: Bool
    /// Open live album pages per person.
    let streamQuota: StreamQuota
    let downloadSlots: DownloadSlots
    /// Each person's last map page, while their map version stands.
    let mapPages: MapPageCache
    /// The picker's provider searches, on their own slots.
    let pickerSearches: PickerSearches
    private let housekeeping: Housekeeping
    private let memoryTrim: MemoryTrim

    public init(pool: PostgresPool, settings: AppSettings) {
        accounts = AccountStore(pool: pool)
        secureCookies = settings.cookiesAreSecure
        let photoStore: any PhotoStore
        if let s3 = settings.s3 {
            // Its advisory locks (put vs the collector, across instances) on a pool of their own:
            // a store that hangs can hold these, never the connections pages need.
            photoStore = S3Store(settings: s3, locks: PostgresPool(url: pool.url, maxConnections: 4, options: pool.options),
                                 client: settings.httpClient)
        } else {
            photoStore = FileStore(root: settings.photoStore)
        }
        albums = AlbumStore(pool: pool, quotas: settings.quotas, photos: photoStore)
        events = AlbumEvents()
        let metrics = Metrics()
        self.metrics = metrics
        var clientOptions = settings.httpClient
        clientOptions.userAgent = Self.userAgent(base: clientOptions.userAgent, publicURL: settings.publicURL, contact: settings.contactEmail)
        // The provider address the operator set may be on loopback or the LAN (the fixture); any
        // other address a provider's answer names may not (HTTPClient's address guard).
        clientOptions.internalOrigins += [settings.flickrAPIURL, settings.commonsAPIURL]
        let client = HTTPClient(options: clientOptions)
        let provider: any PhotoProvider
        if settings.photoProvider == "commons" {
            provider = CommonsProvider(apiURL: settings.commonsAPIURL, client: client)
        } else {
            var flickr = FlickrProvider(apiKey: settings.photoProvider == "fixture" && settings.flickrAPIKey.isEmpty ? "fixture" : settings.flickrAPIKey,
                                        apiURL: settings.flickrAPIURL, client: client)
            let lister = flickr
            flickr.licenses = LicenseStore(pool: pool, fetch: { try lister.licenseList() })
            provider = flickr
        }
        let (interactive, background) = Self.withBudget(provider, pool: pool, settings: settings)
        workers = AlbumWorkers(store: albums, provider: background, client: client, settings: settings.workers, metrics: metrics)
        listener = PostgresListener(url: pool.url)
        housekeeping = Housekeeping(pool: pool, photoDays: settings.photoRetentionDays, jobDays: settings.jobRetentionDays,
                                    collector: PhotoCollector(pool: pool, store: photoStore), grace: settings.photoStoreGraceSeconds,
                                    firstRunAfter: settings.photoStoreUpkeepDelay)
        memoryTrim = MemoryTrim(seconds: settings.memoryTrimSeconds)

        var web = WebRoutes(accounts: accounts, secureCookies: settings.cookiesAreSecure, reportRoundTrips: settings.serverTiming)
        web.plain("/healthz") { _ in .text("ok") }
        // Ready for traffic: the database answers and every migration is applied.
        let migrations = settings.migrationsDirectory
        let storeCheck = StoreCheck(store: photoStore)
        web.plain("/readyz") { _ in
            do {
                let upToDate = try pool.withConnection { try Migrator(directory: migrations).isUpToDate($0) }
                guard upToDate else { return .text("not ready: migrations are pending", status: .serviceUnavailable) }
                // The photo store is a dependency like the database: albums wait while it is down.
                if let problem = storeCheck.problem() {
                    var response = HTTPResponse.text("not ready: the photo store: \(problem)", status: .serviceUnavailable)
                    response.headers.set("Retry-After", "10")
                    return response
                }
                // A provider's trouble does not make the instance unready, but the operator reads it here.
                let note = interactive.budget?.recentProblem().map { "\n\(interactive.name): \($0)" } ?? ""
                return .text("ready" + note)
            } catch let error as PostgresError {
                var response = HTTPResponse.text("not ready: the database cannot be reached: \(error.unavailableReason)",
                                                 status: .serviceUnavailable)
                response.headers.set("Retry-After", String(DatabaseUnavailable.retryAfterSeconds))
                return response
            } catch {
                return .text("not ready: \(error)", status: .serviceUnavailable)
            }
        }
        let token = settings.metricsToken, counter = connectionCount
        let render: @Sendable () throws -> HTTPResponse = { try App.metricsResponse(pool: pool, metrics: metrics, openConnections: counter.read()) }
        // On the public port only with the token: behind a reverse proxy every request comes from
        // the proxy's (local) address, so no address can stand in for it. Without a token it is
        // served on METRICS_PORT alone (metricsHandler).
        web.plain("/metrics") { request in
            guard let token, !token.isEmpty, let sent = request.headers["Authorization"],
                  constantTimeEqual(Array(sent.utf8), Array("Bearer \(token)".utf8)) else { throw HTTPError.notFound }
            return try render()
        }
        web.addAccountRoutes(signUp: settings.signUp)
        let tiles = TileSources.make(settings: settings)
        self.tiles = tiles
        web.addTileRoutes(source: tiles)
        let placesPath = settings.publicDirectory + "/geo/places.tsv.gz"
        let mapPages = MapPageCache()
        self.mapPages = mapPages
        web.addMapRoutes(pins: PinStore(pool: pool, quotas: settings.quotas), albums: albums, places: { PlaceIndex.shared(path: placesPath) }, settings: settings, tiles: tiles?.info,
                         mapPages: mapPages)
        web.addImportRoutes(imports: PinImportStore(pool: pool, quotas: settings.quotas), places: { PlaceIndex.shared(path: placesPath) })
        streamQuota = StreamQuota(perPerson: settings.maxStreamsPerPerson)
        downloadSlots = DownloadSlots()
        pickerSearches = PickerSearches(slots: settings.pickerSlots, timeout: settings.pickerTimeout)
        web.addAlbumRoutes(albums: albums, events: events, provider: interactive, streams: streamQuota, searches: pickerSearches,
                           downloads: downloadSlots)
        web.fallback(StaticFiles(root: settings.publicDirectory))
        routes = web.router.routes
        // Tiles come from our own origin (/tiles), so img-src names no tile server.
        let headers = SecurityHeaders(imageSources: provider.imageOrigins, strictTransportSecurity: settings.publicURLIsHTTPS)
        handler = MiddlewareChain([Compression(), headers, DatabaseBusy(), DatabaseUnavailable()], handler: web.router)
    }

    /// Wikimedia's User-Agent policy (meta.wikimedia.org/wiki/User-Agent_policy): name the client,
    /// and give a way to reach whoever runs it — this instance's address and the operator's email:
    /// "VirtualTourist/1.0 (self-hosted photo map; +https://github.com/virtual-tourist) (instance:
    /// https://photos.example.org; ops@example.org)". Documented in docs/architecture.md, "Outbound HTTP".
    static func userAgent(base: String, publicURL: String?, contact: String?) -> String {
        let parts = [publicURL.map { "instance: \($0)" }, contact].compactMap { $0 }.filter { !$0.isEmpty }
        let safe = parts.joined(separator: "; ").filter { !$0.isNewline && $0 != "(" && $0 != ")" }
        return safe.isEmpty ? base : base + " (\(safe))"
    }

    /// /metrics as Prometheus text: counters, the pool, and album jobs by state.
    static func metricsResponse(pool: PostgresPool, metrics: Metrics, openConnections: Int) throws -> HTTPResponse {
        var jobs: [String: Int] = [:]
        for row in try pool.query("SELECT state, count(*) AS n FROM album_jobs GROUP BY state") {
            jobs[try row.decode("state")] = try row.decode("n")
        }
        let text = metrics.render(openConnections: openConnections, pool: pool.statistics, jobs: jobs)
        var response = HTTPResponse.text(text)
        response.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        return response
    }

    /// The handler of the separate metrics listener (METRICS_PORT): /metrics without a token, since
    /// only what can reach that port (loopback by default, or a private network) can ask.
    public func metricsHandler(pool: PostgresPool) -> any HTTPHandler {
        var router = Router()
        let metrics = metrics, counter = connectionCount
        router.get("/metrics") { _ in try App.metricsResponse(pool: pool, metrics: metrics, openConnections: counter.read()) }
        return router
    }

    /// Lets /metrics report the server's open connections, and counts every response.
    public func attach(to configuration: inout ServerConfiguration) {
        let metrics = metrics, log = configuration.accessLog
        configuration.accessLog = { entry in
            metrics.recordResponse(status: entry.status, seconds: entry.seconds)
            log?(entry)
        }
        // Error pages show the header of whoever is signed in (a 404 must not look like being
        // signed out). Only for 4xx: a 5xx may mean the database is away or the pool is busy, and
        // the error page must never wait for either. Not for 429 either: a refusal has to cost
        // nothing, or a client looping on it turns the refusals into the load (500 streams of one
        // account refused 1,100 times a second, each looking up the session again for its page,
        // and everyone else's requests queued behind those for the pool's connections).
        configuration.limits.uploads.append(WebRoutes.importUpload)
        let accounts = accounts, secure = secureCookies
        configuration.errorPage = { status, message, request in
            var session: Session?
            if (400..<500).contains(status.code), status.code != HTTPStatus.tooManyRequests.code, let request,
               let token = Cookies.parse(request, secure: secure)[Cookies.session] {
                session = try? accounts.session(token: token)
            }
            return App.errorResponse(status, message, session: session)
        }
    }

    public func attach(server: HTTPServer) {
        connectionCount.source.withLock { $0 = { server.openConnections } }
    }

    /// Starts the album workers and the LISTEN connection that wakes them and feeds live pages.
    public func startBackgroundWork() throws {
        try listener.start()
        let workers = workers, events = events
        try listener.listen(AlbumStore.jobsChannel) { _ in workers.notify() }
        try listener.listen(AlbumStore.eventsChannel) { payload in events.received(payload) }
        // Notifications sent while the connection was down are lost: look for work at once, and
        // every open album page re-reads its state.
        listener.onReconnect {
            workers.notify()
            events.everyoneReread()
        }
        workers.start()
        housekeeping.start()
        memoryTrim.start()
        // The licence list before the first album needs it (one call a day; see LicenseStore).
        if let licenses = (workers.provider as? FlickrProvider)?.licenses {
            DispatchQueue.global().async { _ = licenses.licenses() }
        }
    }

    public func stopBackgroundWork() {
        housekeeping.stop()
        memoryTrim.stop()
        workers.stop()
        listener.stop()
        workers.client.shutdown()  // closes the idle connections of the shared cache
    }

    /// Error pages in the site's look, with the same security headers as every other page.
    public static let errorPage: ErrorPageRenderer = { status, message, _ in errorResponse(status, message, session: nil) }

    static func errorResponse(_ status: HTTPStatus, _ message: String, session: Session?) -> HTTPResponse {
        let page = Layout.errorPage(code: status.code, reason: status.reason, message: message,
                                    chrome: Layout.Chrome(user: session?.user, csrfToken: session?.csrfToken))
        var response = HTTPResponse.page(page, status: status)
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

/// Where /metrics reads the open connection count (the server is made after the app).
final class ConnectionGauge: Sendable {
    let source = Mutex<(@Sendable () -> Int)?>(nil)
    func read() -> Int { source.withLock { $0?() ?? 0 } }
}

/// Hourly housekeeping. Photos past the retention period (Flickr asks that copies be kept only
/// "for reasonable periods"; PHOTO_RETENTION_DAYS, 0 keeps them); finished album jobs past
/// JOB_RETENTION_DAYS (older rows only weigh on the queue's table and its indexes); and the photo
/// store's upkeep: at the first run images still held in rows move into the store, then blobs no
/// row names any more are removed once past the grace period. Every instance may run it: the
/// DELETEs are idempotent, the move skips rows another instance holds, the sweep honours the grace.
final class Housekeeping: @unchecked Sendable {
    let pool: PostgresPool
    let photoDays: Int
    let jobDays: Int
    /// Nil: no store upkeep.
    let collector: PhotoCollector?
    let grace: Double
    let firstRunAfter: Double
    private let queue = DispatchQueue(label: "housekeeping")
    private var timer: (any DispatchSourceTimer)?
    private let logger = Logger(label: "photo-store")

    init(pool: PostgresPool, photoDays: Int, jobDays: Int = 7, collector: PhotoCollector? = nil, grace: Double = 3600,
         firstRunAfter: Double = 60) {
        self.pool = pool
        self.photoDays = photoDays
        self.jobDays = jobDays
        self.collector = collector
        self.grace = grace
        self.firstRunAfter = firstRunAfter
    }

    func start() {
        queue.sync {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + firstRunAfter, repeating: 3600)
            timer.setEventHandler { [weak self] in self?.run() }
            timer.resume()
            self.timer = timer
        }
    }

    func stop() { queue.sync { timer?.cancel(); timer = nil } }

    private func run() {
        purgePhotos()
        pruneJobs()
        guard let collector else { return }
        do {
            let moved = try collector.moveAllBytesToStore()
            if moved > 0 { logger.info("photo store: moved \(moved) images out of the database") }
            try collector.collect(grace: grace)
        } catch {
            logger.warning("photo store upkeep failed: \(error)")
        }
    }

    @discardableResult
    func purgePhotos() -> Int {
        guard photoDays > 0 else { return 0 }
        return (try? pool.query("DELETE FROM photos WHERE created_at < now() - make_interval(days => $1::int)", [photoDays]).affectedRows) ?? 0
    }

    /// Deletes done, failed and cancelled jobs that finished more than `jobDays` ago.
    @discardableResult
    func pruneJobs() -> Int {
        guard jobDays > 0 else { return 0 }
        return (try? pool.query("""
            DELETE FROM album_jobs
            WHERE state IN ('done', 'failed', 'cancelled') AND finished_at < now() - make_interval(days => $1::int)
            """, [jobDays]).affectedRows) ?? 0
    }
}

/// The photo store's answer to "can you take writes?", asked at most every few seconds: /readyz is
/// polled, and an object store that is down costs its connect timeout per question.
final class StoreCheck: Sendable {
    let store: any PhotoStore
    private let last = Mutex<(at: Date, problem: String?)?>(nil)
    static let seconds = 5.0

    init(store: any PhotoStore) {
        self.store = store
    }

    func problem() -> String? {
        if let kept = last.withLock({ $0 }), Date().timeIntervalSince(kept.at) < Self.seconds { return kept.problem }
        let problem = store.problem()
        last.withLock { $0 = (Date(), problem) }
        return problem
    }
}
