import Foundation
import HTTPClient
import AlbumWing
import Domain

/// Settings the app layer needs (the executable reads them from the environment).
public struct AppSettings: Sendable {
    public var publicDirectory = "Public"
    public var migrationsDirectory = "migrations"
    /// Lets /metrics be read on the public port with "Authorization: Bearer TOKEN"; without it,
    /// /metrics is only on the metrics port.
    public var metricsToken: String?
    /// The address people use (https://photos.example.org); https makes cookies Secure.
    public var publicURL: String?
    /// PUBLIC_URL without a trailing slash, for links made by appending a path; nil when unset.
    public var publicBase: String? { publicURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } }
    /// The SMTP server mail goes through (password resets, invitations); nil: no mail, links to copy.
    public var mail: SMTPClient.Settings?
    /// The mail sender's first retry wait in seconds (doubling to an hour) and its idle poll.
    public var mailRetryBase: Double = 30
    public var mailPoll: Double = 5
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
    /// The store's circuit breaker (StoreBreaker): how long the store is skipped after an outage
    /// before one call probes it (doubling while it stays down, at most `photoStoreMaxCoolDown`),
    /// how many photo reads may wait on the store at once (of the handler slots past the database
    /// connections: `handlerSlots` keeps 8), and how long a read waits for one of those before the
    /// store counts as hanging.
    public var photoStoreCoolDown: Double = 5
    public var photoStoreMaxCoolDown: Double = 30
    public var photoStoreReadSlots = 6
    public var photoStoreReadSlotWait: Double = 2
    /// The longest a write (put, refresh, delete) and a read of the store may take before it
    /// counts as an outage (StoreBreaker): a store that hangs instead of failing is noticed too.
    public var photoStoreWriteDeadline: Double = 30
    public var photoStoreReadDeadline: Double = 6
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
    /// How often a shared map's live map page checks its person is still a member, besides the
    /// NOTIFY that ends it at once: the bound when this instance missed that NOTIFY.
    public var memberRecheck: Duration = .seconds(60)
    /// Provider searches for picker pages at once, and how long a page waits for one.
    public var pickerSlots = 4
    public var pickerTimeout: Double = 8
    /// Who may make an account (SIGN_UP). Invitations by default: an instance on the internet
    /// with open sign-up gives every stranger who finds it a photo quota and a share of the
    /// operator's provider budget (docs/admin.md, "Who may sign up").
    public var signUp = SignUpMode.invite
    /// A person's own photo: the largest file (UPLOAD_MAX_MB) and the most pixels its header may
    /// claim (UPLOAD_MAX_MEGAPIXELS), checked before anything is decoded.
    public var ownPhotoMaxBytes = 40 * 1024 * 1024
    public var ownPhotoMaxPixels = 100_000_000
    /// The map's "Add photos": a photo joins the nearest pin within this many metres
    /// (UPLOAD_PIN_RADIUS_M), else makes its own, so a trip's batch makes a handful of pins.
    public var ownPhotoPinRadius = 1_000
    /// Where own photos' uploads are written as they arrive (UPLOAD_SPOOL_DIR): a local disk of
    /// this host's, apart from the photo store (which may be NFS, whose stalls would stall the
    /// event loops that write here), and not a tmpfs (memory).
    public var uploadSpool = ".data/uploads"
    /// Rates of share-link visits (SHARE_REQUESTS_PER_MINUTE).
    public var shareLimits = ShareRateLimit.Limits()

    public init() {}

    /// The database pool's size unless DATABASE_POOL_SIZE says otherwise: two connections per CPU
    /// core, at least four, PostgreSQL's rule of thumb for a database on the same machine. More do
    /// not add throughput: their backends queue for the CPU in the kernel, which is not fair to
    /// them, instead of in the pool's first-come line (docs/architecture.md, "PostgreSQL").
    public static var defaultDatabaseConnections: Int { max(4, 2 * ProcessInfo.processInfo.activeProcessorCount) }

    /// Request handlers at once for a pool of `databaseConnections`: one per connection, and room
    /// for pages that wait on another service instead (a picker search, up to `pickerTimeout`; an
    /// upstream map tile), so that those can never hold every handler. Handlers beyond the pool
    /// wait for a connection in the pool's first-come line.
    public func handlerSlots(databaseConnections: Int) -> Int { databaseConnections + pickerSlots + 8 }

    var publicURLIsHTTPS: Bool { publicURL?.lowercased().hasPrefix("https://") ?? false }
    var cookiesAreSecure: Bool { secureCookies || publicURLIsHTTPS }
}
