import HTTPClient
import HTTPServer
import Log
import Postgres
import Synchronization
import Dispatch
import Foundation
import AlbumWing
import Domain
import Imaging

/// The whole web app as one HTTP handler (routes, static files, security headers, error pages),
/// plus the background work behind it: album workers and the LISTEN connection that wakes them.
public final class App: Sendable {
    /// The app's routes, for tests that must cover every route (CSRF, isolation).
    public let routes: [Router.Route]
    public let handler: any HTTPHandler
    public let accounts: AccountStore
    /// SIGN_UP: who may make an account (the first one of an empty instance needs a setup code).
    public let signUpMode: SignUpMode
    public let albums: AlbumStore
    public let workers: AlbumWorkers
    public let events: AlbumEvents
    public let metrics: Metrics
    /// Where /tiles comes from; nil: the built-in basemap only.
    public let tiles: (any TileSource)?
    private let listener: PostgresListener
    /// The LISTEN link, for tests that cut it.
    var listenLink: PostgresListener { listener }
    /// Sessions and photo owners kept for /photos/:id, emptied by NOTIFY photo_access.
    let photoAccess: PhotoAccess
    /// Sessions kept for every signed-in request, emptied by NOTIFY session_cache and photo_access.
    let sessions: SessionCache
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
    /// Delivers the mail outbox; nil without MAIL settings.
    public let mailSender: MailSender?
    /// The place index (pin names, place search), read in the background at start.
    private let placesPath: String
    private let memoryTrim: MemoryTrim
    /// The store's state for /readyz and /metrics.
    private let storeCheck: StoreCheck
    /// The own-photo upload route's body limit (attach).
    private let ownPhotoMaxBytes: Int
    private let uploadSpool: String
    /// The photo store as every part of the app uses it (its `base` is the store itself).
    public let storeBreaker: StoreBreaker

    public init(pool: PostgresPool, settings: AppSettings) {
        accounts = AccountStore(pool: pool)
        signUpMode = settings.signUp
        secureCookies = settings.cookiesAreSecure
        let bareStore: any PhotoStore
        if let s3 = settings.s3 {
            // Its advisory locks (put vs the collector, across instances) on a pool of their own:
            // a store that hangs can hold these, never the connections pages need.
            bareStore = S3Store(settings: s3, locks: PostgresPool(url: pool.url, maxConnections: 4, options: pool.options),
                                client: settings.httpClient)
        } else {
            bareStore = FileStore(root: settings.photoStore)
        }
        var breakerSettings = StoreBreakerStateMachine.Settings()
        breakerSettings.coolDown = .milliseconds(Int(settings.photoStoreCoolDown * 1000))
        breakerSettings.maxCoolDown = .milliseconds(Int(max(settings.photoStoreCoolDown, settings.photoStoreMaxCoolDown) * 1000))
        breakerSettings.readSlots = max(1, settings.photoStoreReadSlots)
        breakerSettings.readSlotWait = .milliseconds(Int(settings.photoStoreReadSlotWait * 1000))
        breakerSettings.writeDeadline = .milliseconds(Int(settings.photoStoreWriteDeadline * 1000))
        breakerSettings.readDeadline = .milliseconds(Int(settings.photoStoreReadDeadline * 1000))
        // Everything reaches the store through the breaker: pages, workers, upkeep.
        let photoStore = StoreBreaker(bareStore, settings: breakerSettings)
        storeBreaker = photoStore
        let listener = PostgresListener(url: pool.url)
        photoAccess = PhotoAccess(linkUp: { listener.isConnected })
        let sessions = SessionCache(linkUp: { listener.isConnected })
        self.sessions = sessions
        var albumStore = AlbumStore(pool: pool, quotas: settings.quotas, photos: photoStore)
        albumStore.access = photoAccess
        albums = albumStore
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
        workers = AlbumWorkers(store: AlbumJobQueue(pool: pool, photos: photoStore), provider: background, client: client, settings: settings.workers, metrics: metrics)
        self.listener = listener
        housekeeping = Housekeeping(pool: pool, photoDays: settings.photoRetentionDays, jobDays: settings.jobRetentionDays,
                                    collector: PhotoCollector(pool: pool, store: photoStore), grace: settings.photoStoreGraceSeconds,
                                    firstRunAfter: settings.photoStoreUpkeepDelay)
        memoryTrim = MemoryTrim(seconds: settings.memoryTrimSeconds)

        var web = WebPipeline(accounts: accounts, secureCookies: settings.cookiesAreSecure, reportRoundTrips: settings.serverTiming)
        web.photoAccess = photoAccess
        web.sessions = sessions
        let storeCheck = StoreCheck(store: photoStore)
        self.storeCheck = storeCheck
        let mapPages = MapPageCache()
        self.mapPages = mapPages
        let counter = connectionCount
        web.addOperationsRoutes(OperationsRoutes(pool: pool, migrations: settings.migrationsDirectory, storeCheck: storeCheck,
                                                 provider: interactive, token: settings.metricsToken) {
            try App.metricsResponse(pool: pool, metrics: metrics, openConnections: counter.read(), store: storeCheck,
                                    caches: App.cacheLines(sessions: sessions, mapPages: mapPages))
        })
        let mailSender = settings.mail.map { MailSender(pool: pool, client: SMTPClient($0), retryBase: settings.mailRetryBase, poll: settings.mailPoll) }
        self.mailSender = mailSender
        web.addAccountRoutes(AccountRoutes(accounts: accounts, mode: settings.signUp, photoAccess: photoAccess, secure: web.secureCookies))
        web.addPasswordResetRoutes(PasswordResetRoutes(resets: PasswordResets(pool: pool), mail: mailSender, base: settings.publicBase,
                                                       secure: web.secureCookies))
        let tiles = TileSources.make(settings: settings)
        self.tiles = tiles
        web.addTileRoutes(source: tiles)
        let placesPath = settings.publicDirectory + "/geo/places.tsv.gz"
        self.placesPath = placesPath
        web.addMapRoutes(MapRoutes(pins: PinStore(pool: pool, quotas: settings.quotas), places: { PlaceIndex.shared(path: placesPath) },
                                   settings: settings, tiles: tiles?.info, mapPages: mapPages, photoAccess: photoAccess,
                                   sessions: sessions))
        web.addImportRoutes(ImportRoutes(imports: PinImportStore(pool: pool, quotas: settings.quotas), places: { PlaceIndex.shared(path: placesPath) },
                                         secure: web.secureCookies))
        web.addMapsRoutes(MapsRoutes(maps: SharedMaps(pool: pool, quotas: settings.quotas), base: settings.publicBase, mail: mailSender,
                                     secure: web.secureCookies))
        streamQuota = StreamQuota(perPerson: settings.maxStreamsPerPerson)
        downloadSlots = DownloadSlots()
        pickerSearches = PickerSearches(slots: settings.pickerSlots, timeout: .seconds(settings.pickerTimeout))
        ownPhotoMaxBytes = settings.ownPhotoMaxBytes
        uploadSpool = settings.uploadSpool
        // Made and tried now: a spool that cannot be written is said in the log at start (and
        // by each upload it refuses), not first found by the people adding photos.
        try? FileStore.makeDirectories(uploadSpool)
        _ = try? SpooledBody(directory: uploadSpool)
        // A named spool file lives between its open and its unlink (where O_TMPFILE is not
        // supported); one a crash left there is removed once it is an hour old.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: uploadSpool)) ?? [] where name.hasPrefix(".tmp-upload-") {
            let path = uploadSpool + "/" + name
            if let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
               modified < Date().addingTimeInterval(-3600) { try? FileManager.default.removeItem(atPath: path) }
        }
        let ownPhotos = OwnPhotoStore(pool: pool, store: photoStore, quotas: settings.quotas,
                                      limits: PhotoVersions.Limits(maxPixels: settings.ownPhotoMaxPixels),
                                      processing: PhotoProcessing(slots: ProcessInfo.processInfo.activeProcessorCount))
        web.addAlbumRoutes(AlbumRoutes(albums: albums, events: events, provider: interactive, streams: streamQuota, searches: pickerSearches,
                                       downloads: downloadSlots, memberRecheck: settings.memberRecheck,
                                       ownPhotos: ownPhotos, ownPhotoMaxBytes: settings.ownPhotoMaxBytes, secure: web.secureCookies))
        web.addOwnPhotoRoutes(OwnPhotoRoutes(ownPhotos: ownPhotos, pins: PinStore(pool: pool, quotas: settings.quotas),
                                             places: { PlaceIndex.shared(path: placesPath) }, maxFileBytes: settings.ownPhotoMaxBytes,
                                             pinRadius: Double(settings.ownPhotoPinRadius), secure: web.secureCookies,
                                             spoolDirectory: uploadSpool))
        web.addShareRoutes(ShareRoutes(links: ShareLinks(pool: pool), albums: albums, pins: PinStore(pool: pool, quotas: settings.quotas),
                                       events: events, provider: interactive, ownPhotos: ownPhotos, limits: settings.shareLimits, base: settings.publicBase,
                                       places: { PlaceIndex.shared(path: placesPath) }, secure: web.secureCookies))
        web.fallback(StaticFiles(root: settings.publicDirectory))
        routes = web.router.routes
        // Tiles come from our own origin (/tiles), so img-src names no tile server.
        let headers = SecurityHeaders(imageSources: provider.imageOrigins, strictTransportSecurity: settings.publicURLIsHTTPS)
        // DatabaseBusy inside DatabaseUnavailable: a pool wait that timed out also means the
        // database is unavailable, but the person is told the server is busy.
        let middleware: [any Middleware] = [PublicURLCheck(publicURL: settings.publicURL)].compactMap { $0 }
            + [Compression(), headers, DatabaseUnavailable(), DatabaseBusy()]
        handler = MiddlewareChain(middleware, handler: web.router)
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
    static func metricsResponse(pool: PostgresPool, metrics: Metrics, openConnections: Int, store: StoreCheck,
                                caches: String) throws -> HTTPResponse {
        var jobs: [String: Int] = [:]
        for row in try pool.query("SELECT state, count(*) AS n FROM album_jobs GROUP BY state") {
            jobs[try row.decode("state")] = try row.decode("n")
        }
        // The newest backup script/backup recorded (migrations/0122_backups.sql).
        let backup = try pool.query("""
            SELECT extract(epoch FROM finished_at)::float8 AS finished, photos_missing::bigint AS photos_missing FROM backups ORDER BY finished_at DESC LIMIT 1
            """).first
        let text = "# HELP vt_build_info The release running.\n# TYPE vt_build_info gauge\nvt_build_info{version=\"\(Version.number)\"} 1\n"
            + metrics.render(openConnections: openConnections, pool: pool.statistics, jobs: jobs,
                             store: (store.breaker?.status, store.problem()))
            + Metrics.backupLines(lastSuccess: try backup?.decode("finished", as: Double.self),
                                  missing: try backup?.decode("photos_missing", as: Int.self))
            + caches
        var response = HTTPResponse.text(text)
        response.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        return response
    }

    /// What the in-memory tables that stand in for round trips hold, and their bounds.
    static func cacheLines(sessions: SessionCache, mapPages: MapPageCache) -> String {
        var out = "# HELP vt_session_cache_entries Sessions kept in memory by this instance (SessionCache); at most vt_session_cache_max_entries.\n"
        out += "# TYPE vt_session_cache_entries gauge\nvt_session_cache_entries \(sessions.count)\n"
        out += "# TYPE vt_session_cache_max_entries gauge\nvt_session_cache_max_entries \(sessions.maxCount)\n"
        out += "# HELP vt_session_cache_bytes The kept sessions' estimated size; at most vt_session_cache_max_bytes.\n"
        out += "# TYPE vt_session_cache_bytes gauge\nvt_session_cache_bytes \(sessions.bytes)\n"
        out += "# TYPE vt_session_cache_max_bytes gauge\nvt_session_cache_max_bytes \(sessions.maxBytes)\n"
        out += "# HELP vt_map_page_cache_pages Map pages kept by this instance (MapPageCache).\n"
        out += "# TYPE vt_map_page_cache_pages gauge\nvt_map_page_cache_pages \(mapPages.count)\n"
        out += "# HELP vt_map_page_cache_bytes The kept map pages' HTML and gzip; at most vt_map_page_cache_max_bytes.\n"
        out += "# TYPE vt_map_page_cache_bytes gauge\nvt_map_page_cache_bytes \(mapPages.bytes)\n"
        out += "# TYPE vt_map_page_cache_max_bytes gauge\nvt_map_page_cache_max_bytes \(mapPages.maxBytes)\n"
        return out
    }

    /// The handler of the separate metrics listener (METRICS_PORT): /metrics without a token, since
    /// only what can reach that port (loopback by default, or a private network) can ask.
    public func metricsHandler(pool: PostgresPool) -> any HTTPHandler {
        var router = Router()
        let metrics = metrics, counter = connectionCount, store = storeCheck, sessions = sessions, mapPages = mapPages
        router.get("/metrics") { _ in
            try App.metricsResponse(pool: pool, metrics: metrics, openConnections: counter.read(), store: store,
                                    caches: App.cacheLines(sessions: sessions, mapPages: mapPages))
        }
        return router
    }

    /// Lets /metrics report the server's open connections, and counts every response.
    public func attach(to configuration: inout ServerConfiguration) {
        let metrics = metrics, log = configuration.accessLog
        configuration.accessLog = { entry in
            metrics.recordResponse(status: entry.status, seconds: entry.seconds)
            log?(entry)
        }
        configuration.loggedPath = LoggedPath.redacted
        // Error pages show the header of whoever is signed in (a 404 must not look like being
        // signed out). Only for 4xx: a 5xx may mean the database is away or the pool is busy, and
        // the error page must never wait for either. Not for 429 either: a refusal has to cost
        // nothing, or a client looping on it turns the refusals into the load (docs/architecture.md,
        // "The HTTP server": refused event streams).
        configuration.limits.uploads.append(WebPipeline.importUpload)
        configuration.limits.uploads.append(WebPipeline.ownPhotoUpload(maxBytes: ownPhotoMaxBytes))
        configuration.limits.uploads.append(WebPipeline.mapPhotoUpload(maxBytes: ownPhotoMaxBytes))
        // Own photos' bodies go to files as they arrive; large bodies held at once on every
        // connection, in memory or there (UploadBudget): a few people's files at a time.
        configuration.limits.spoolDirectory = uploadSpool
        configuration.limits.uploadBudget = UploadBudget(bytes: max(256 << 20, 4 * (ownPhotoMaxBytes + (64 << 10))))
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
        try listener.listen(AlbumChange.jobsChannel) { _ in workers.notify() }
        try listener.listen(AlbumChange.channel) { payload in events.received(payload) }
        try listener.listen(AlbumChange.mapChannel) { payload in events.receivedForMap(payload) }
        let photoAccess = photoAccess, sessions = sessions
        let streams = streamQuota
        // Sessions first: a request that found its session kept takes the photo cache's mark
        // before looking, so its grant is refused if the photo cache forgets after the look.
        try listener.listen(PhotoAccess.channel) { payload in
            sessions.received(payload)
            photoAccess.received(payload)
            streams.received(payload)
        }
        try listener.listen(SessionCache.channel) { payload in sessions.received(payload) }
        // Notifications sent while the connection was down are lost: look for work at once, and
        // every open album page re-reads its state.
        listener.onReconnect {
            sessions.forgetEverything()
            photoAccess.forgetEverything()
            workers.notify()
            events.everyoneReread()
        }
        workers.start()
        housekeeping.start()
        memoryTrim.start()
        mailSender?.start()
        // The place index before the first pin drop needs it: read on first use, it would hold
        // up the first drop after a start by the whole read (script/bench pindrop).
        let placesPath = placesPath
        DispatchQueue.global().async { _ = PlaceIndex.shared(path: placesPath) }
        // The licence list before the first album needs it (one call a day; see LicenseStore).
        if let licenses = (workers.provider as? FlickrProvider)?.licenses {
            DispatchQueue.global().async { _ = licenses.licenses() }
        }
    }

    public func stopBackgroundWork() {
        mailSender?.stop()
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

/// Where /metrics reads the open connection count (the server is made after the app).
final class ConnectionGauge: Sendable {
    let source = Mutex<(@Sendable () -> Int)?>(nil)
    func read() -> Int { source.withLock { $0?() ?? 0 } }
}
