#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Log
import VirtualTourist

/// Settings from the environment, each overridable by a flag of the same name
/// (PORT=9000 or --port 9000). docs/configuration in the README lists them.
struct Configuration {
    // What the process itself needs; everything the app needs is `app`, whose defaults are the
    // app's own (AppSettings), so no default is written down twice.
    var host = "127.0.0.1"
    var port = 8080
    /// A second listener for /metrics alone, without a token (nil: none).
    var metricsPort: Int?
    var metricsHost = "127.0.0.1"
    var trustedProxies = TrustedProxies()
    /// Per-address limits of the server, ServerConfiguration's defaults unless set.
    var addressLimits = (connections: ServerConfiguration().maxConnectionsPerAddress,
                         newPerSecond: ServerConfiguration().newConnectionsPerSecond,
                         burst: ServerConfiguration().newConnectionBurst,
                         hold: ServerConfiguration().overShareHold,
                         ipv6Prefix: ServerConfiguration().ipv6PrefixLength)
    var databaseURL: String?
    var logLevel = Logger.Level.info
    var databasePoolSize = AppSettings.defaultDatabaseConnections
    var app = AppSettings()
    /// nil: flickr when FLICKR_API_KEY is set, commons (keyless) otherwise.
    var explicitPhotoProvider: String?
    var photoProvider: String { explicitPhotoProvider ?? (app.flickrAPIKey.isEmpty ? "commons" : "flickr") }
    /// The S3_* settings as given; checked together with PHOTO_STORE once everything is read.
    var s3: (endpoint: String?, region: String?, accessKeyID: String?, secretAccessKey: String?) = (nil, nil, nil, nil)

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// `gateway` in TRUSTED_PROXIES stands for the default route's gateway. Under Compose that is the
    /// bridge network's gateway, the address every connection from the Docker host arrives from
    /// (a proxy on the host, or a browser there); its subnet differs from host to host.
    static func resolvingGateway(_ text: String, routes: String? = try? String(contentsOfFile: "/proc/net/route", encoding: .utf8)) throws -> String {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.contains(where: { $0.lowercased() == "gateway" }) else { return text }
        guard let gateway = routes.flatMap(defaultGateway) else {
            throw Invalid(description: "TRUSTED_PROXIES names gateway, but this host has no default IPv4 route (/proc/net/route)")
        }
        return parts.map { $0.lowercased() == "gateway" ? gateway : $0 }.joined(separator: ",")
    }

    /// The gateway of the default route in /proc/net/route: hexadecimal, in the kernel's byte order
    /// (little-endian on every platform we build for).
    static func defaultGateway(_ routes: String) -> String? {
        for line in routes.split(separator: "\n").dropFirst() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count > 2, fields[1] == "00000000", let value = UInt32(fields[2], radix: 16), value != 0 else { continue }
            return (0..<4).map { String((value >> (8 * $0)) & 0xff) }.joined(separator: ".")
        }
        return nil
    }

    typealias Setting = (name: String, help: String, apply: @Sendable (inout Configuration, String) throws -> Void)

    /// A yes/no setting: every one takes the same words (1, true, yes, on / 0, false, no, off, in
    /// any letter case) and refuses others at start, where `on` used to mean off, silently.
    static func flag(_ name: String, _ help: String, _ set: @escaping @Sendable (inout Configuration, Bool) -> Void) -> Setting {
        (name, help, { configuration, value in
            switch value.lowercased() {
            case "1", "true", "yes", "on": set(&configuration, true)
            case "0", "false", "no", "off": set(&configuration, false)
            default: throw Invalid(description: "\(name) must be 1, true, yes or on, or 0, false, no or off, not \(value)")
            }
        })
    }

    /// A number setting that must lie in `range`. Every ranged setting is parsed here, so each
    /// refuses a wrong value in the same words ("PORT must be 0–65535, not 70000"; `expected`
    /// replaces the bounds where people think of the value otherwise, "a number of days"), and
    /// none can forget the range: an unchecked number from outside can trap the process later.
    static func ranged<N: LosslessStringConvertible & Comparable & Sendable>(
        _ name: String, _ help: String, _ range: ClosedRange<N>, unit: String? = nil, expected: String? = nil,
        _ set: @escaping @Sendable (inout Configuration, N) -> Void
    ) -> Setting {
        (name, help, { configuration, value in
            guard let number = N(value), range.contains(number) else {
                let bounds = "\(plain(range.lowerBound))–\(plain(range.upperBound))\(unit.map { " " + $0 } ?? "")"
                throw Invalid(description: "\(name) must be \(expected ?? bounds), not \(value)")
            }
            set(&configuration, number)
        })
    }

    /// A bound as people write it: 100000, not 100000.0.
    static func plain(_ bound: some Any) -> String {
        if let double = bound as? Double, double == double.rounded(), abs(double) < 1e15 { return String(Int64(double)) }
        return "\(bound)"
    }

    /// Known settings: environment name → how to apply a value.
    static let settings: [Setting] = [
        ("HOST", "address to listen on (127.0.0.1; 0.0.0.0 in containers)", { $0.host = $1 }),
        ranged("PORT", "port to listen on (8080)", 0...65_535) { $0.port = $1 },
        ("PUBLIC_DIR", "folder of static files (Public)", { $0.app.publicDirectory = $1 }),
        ("MIGRATIONS_DIR", "folder of SQL migrations (migrations)", { $0.app.migrationsDirectory = $1 }),
        ("DATABASE_URL", "PostgreSQL connection URL or conninfo", { $0.databaseURL = $1 }),
        ("PUBLIC_URL", "address people use, e.g. https://photos.example.org (https makes cookies Secure)", { $0.app.publicURL = $1 }),
        flag("SECURE_COOKIES", "1 to mark cookies Secure behind a TLS proxy (0)") { $0.app.secureCookies = $1 },
        ranged("DATABASE_POOL_SIZE", "database connections per instance (2 per CPU core, at least 4: \(AppSettings.defaultDatabaseConnections) here)", 1...500) { $0.databasePoolSize = $1 },
        ("TILE_URL", "raster map tiles, e.g. https://tile.openstreetmap.org/{z}/{x}/{y}.png, or none for the built-in map (none)", { $0.app.tileURL = $1 }),
        ("TILES_FILE", "a PMTiles archive (vector or raster) to serve the map from, e.g. /data/region.pmtiles; wins over TILE_URL", { $0.app.tilesFile = $1 }),
        ("TILE_CACHE_DIR", "where TILE_URL tiles are cached; share it between instances (tile-cache)", { $0.app.tileCacheDirectory = $1 }),
        ranged("TILE_CACHE_MB", "size cap of the tile cache in MB, least recently used out first (512)", 1...1_000_000) { $0.app.tileCacheBytes = $1 * 1024 * 1024 },
        ranged("TILES_DIRECTORY_CACHE", "PMTiles leaf directories kept in memory (4096)", 1...1_000_000) { $0.app.tileDirectoryCacheEntries = $1 },
        ("TILE_CONTACT", "an e-mail or URL for the tile server's operators, sent in the proxy's User-Agent (CONTACT_EMAIL)", { $0.app.tileContact = $1 }),
        ("TILE_ATTRIBUTION", "credit line the tile provider requires, e.g. © OpenStreetMap contributors", { $0.app.tileAttribution = $1 }),
        ("PHOTO_PROVIDER", "flickr, commons (Wikimedia Commons, no key needed), or fixture for the offline fixture (flickr when FLICKR_API_KEY is set, commons otherwise)", { c, v in
            guard ["flickr", "commons", "fixture"].contains(v) else { throw Invalid(description: "PHOTO_PROVIDER must be flickr, commons or fixture, not \(v)") }
            c.explicitPhotoProvider = v
        }),
        ("FLICKR_API_KEY", "your Flickr API key (flickr.com/services/api/keys)", { $0.app.flickrAPIKey = $1 }),
        ("FLICKR_API_URL", "Flickr's REST endpoint, or a Flickr-compatible one such as the fixture", { $0.app.flickrAPIURL = $1 }),
        ("COMMONS_API_URL", "Wikimedia Commons' API, or a compatible one such as the fixture's /w/api.php", { $0.app.commonsAPIURL = $1 }),
        ranged("PROVIDER_CALLS_PER_HOUR", "API calls per hour to the photo provider, shared by all instances (flickr \(Int(ProviderBudget.Limits.flickr.perHour)), commons \(Int(ProviderBudget.Limits.commons.perHour)); docs/providers.md)", Double(1)...100_000) { $0.app.providerCallsPerHour = $1 },
        ranged("PROVIDER_CALL_BURST", "API calls that may be made at once after a quiet spell (flickr \(Int(ProviderBudget.Limits.flickr.burst)), commons \(Int(ProviderBudget.Limits.commons.burst)))", Double(1)...10_000) { $0.app.providerCallBurst = $1 },
        ranged("COMMONS_ORIGINAL_CAP", "largest Commons original (bytes) downloaded when no thumbnail step fits (2097152)", 10_000...8_388_608, unit: "bytes") { $0.app.commonsOriginalCap = $1 },
        ("CONTACT_EMAIL", "how the operator can be reached, sent in the User-Agent to photo providers (Wikimedia's User-Agent policy asks for it)", { c, v in
            guard v.contains("@"), !v.contains(where: { $0.isWhitespace || $0 == "(" || $0 == ")" || $0 == ";" }) else {
                throw Invalid(description: "CONTACT_EMAIL must be an email address, not \(v)")
            }
            c.app.contactEmail = v
        }),
        ranged("DOWNLOAD_SLOTS", "image downloads at once per instance, shared by all albums (32)", 1...256) { $0.app.workers.downloadSlots = $1 },
        ranged("WORKERS", "album download workers per instance (2)", 0...64) { $0.app.workers.workers = $1 },
        ranged("PROVIDER_OUTAGE_HOURS", "how long an album waits out its photo provider's outage (or its requests to wait) before it fails (24)", Double.leastNonzeroMagnitude...720,
               expected: "more than 0 and at most 720") { $0.app.workers.providerOutageHorizon = $1 * 3600 },
        ranged("ALBUM_LEASE_SECONDS", "how long a worker holds an album job without news before another instance may take it over (60)", 1...3600) { $0.app.workers.leaseSeconds = $1 },
        ranged("PHOTO_RETENTION_DAYS", "delete stored photos older than this many days, hourly; 0 keeps them (0)", 0...Int.max, expected: "a number of days") { $0.app.photoRetentionDays = $1 },
        ranged("JOB_RETENTION_DAYS", "delete finished album jobs older than this many days, hourly; 0 keeps them (7)", 0...36_500, expected: "a number of days") { $0.app.jobRetentionDays = $1 },
        ranged("MEMORY_TRIM_SECONDS", "hand freed memory back to the system this often; 0 never (10)", Double(0)...3600) { $0.app.memoryTrimSeconds = $1 },
        ("PHOTO_STORE", "where downloaded images are kept, content-addressed by SHA-256: a directory, or s3://bucket[/prefix] for an S3-compatible object store (.data/photos)", { c, v in
            guard v.hasPrefix("s3://") || !v.contains("://") else {
                throw Invalid(description: "PHOTO_STORE must be a directory or s3://bucket[/prefix], not \(v)")
            }
            c.app.photoStore = v
        }),
        ("S3_ENDPOINT", "the object store's address for an s3:// PHOTO_STORE, e.g. http://127.0.0.1:9000 for MinIO (AWS_ENDPOINT_URL_S3; AWS S3 of S3_REGION when unset)", { $0.s3.endpoint = $1 }),
        ("S3_REGION", "the region signed into requests (AWS_REGION; us-east-1)", { $0.s3.region = $1 }),
        ("S3_ACCESS_KEY_ID", "the object store's access key (AWS_ACCESS_KEY_ID)", { $0.s3.accessKeyID = $1 }),
        ("S3_SECRET_ACCESS_KEY", "the object store's secret key (AWS_SECRET_ACCESS_KEY)", { $0.s3.secretAccessKey = $1 }),
        ranged("SHARE_REQUESTS_PER_MINUTE", "the former name of SHARE_PAGES_PER_MINUTE, read as it is; SHARE_PAGES_PER_MINUTE wins when both are set", 0...1_000_000) { $0.app.shareLimits.pagesPerAddressPerMinute = $1 },
        ranged("SHARE_PAGES_PER_MINUTE", "pages a minute one address may open under share links (/s/…): a link, an album, a photo, a password sent; what those pages go on to load (thumbnails, photos, data) has 20 times as much, and one link 5 times both from everyone (300; 0: no limit)", 0...1_000_000) { $0.app.shareLimits.pagesPerAddressPerMinute = $1 },
        flag("SERVER_TIMING", "1 to report each request's database round trips in a Server-Timing header, for tests and benchmarks (0)") { $0.app.serverTiming = $1 },
        ("METRICS_TOKEN", "serves /metrics on the public port to requests with Authorization: Bearer TOKEN (unset: not there)", { $0.app.metricsToken = $1 }),
        ranged("METRICS_PORT", "a separate port serving /metrics without a token, on METRICS_HOST (unset: none)", 1...65_535) { $0.metricsPort = $1 },
        ranged("QUOTA_PINS", "pins per person, unless users.max_pins says otherwise (5000)", 0...10_000_000) { $0.app.quotas.pins = $1 },
        ranged("QUOTA_COLLECTIONS_PER_HOUR", "New Collections per person per hour, unless users.max_collections_per_hour says otherwise (60)", 0...100_000) { $0.app.quotas.collectionsPerHour = $1 },
        ranged("QUOTA_PHOTO_MB", "stored photo megabytes per person, unless users.max_photo_bytes says otherwise (2048)", Int64(0)...100_000_000) { $0.app.quotas.photoBytes = $1 * 1024 * 1024 },
        ("SIGN_UP", "who may make an account: open, invite (with a link from `virtual-tourist admin invite`) or closed; the first account of an empty instance always may (invite)", { c, v in
            guard let mode = SignUpMode(rawValue: v.lowercased()) else { throw Invalid(description: "SIGN_UP must be open, invite or closed, not \(v)") }
            c.app.signUp = mode
        }),
        ("TRUSTED_PROXIES", "addresses or CIDRs of your reverse proxies (e.g. 127.0.0.1, 172.16.0.0/12), or gateway (this host's default gateway: the Docker host under Compose): only their X-Forwarded-For says who the client is (Forwarded is never read)", { c, v in
            let text = try Self.resolvingGateway(v)
            guard let proxies = TrustedProxies(parsing: text) else { throw Invalid(description: "TRUSTED_PROXIES must be addresses or CIDRs (or gateway) separated by commas, not \(v)") }
            c.trustedProxies = proxies
        }),
        ranged("CONNECTIONS_PER_ADDRESS", "connections one client address may have open at once; trusted proxies are not limited (256)", 1...100_000) { $0.addressLimits.connections = $1 },
        ranged("NEW_CONNECTIONS_PER_SECOND", "new connections a second one client address may open after NEW_CONNECTION_BURST, past which it is answered 503 with Retry-After; 0: no limit (100)", Double(0)...1_000_000) { $0.addressLimits.newPerSecond = $1 },
        ranged("NEW_CONNECTION_BURST", "new connections one client address may open at once before NEW_CONNECTIONS_PER_SECOND applies (500)", Double(1)...1_000_000) { $0.addressLimits.burst = $1 },
        ranged("OVER_SHARE_HOLD_SECONDS", "a connection past CONNECTIONS_PER_ADDRESS is held unread about this long (half to one and a half times), then reset; 0: reset at once (10)", Double(0)...300) { $0.addressLimits.hold = $1 },
        ranged("IPV6_PREFIX", "per-address limits count an IPv6 client by its network of this many bits (64: a household's or a host's /64; 128: each address)", 32...128) { $0.addressLimits.ipv6Prefix = $1 },
        ("METRICS_HOST", "address of the metrics port; keep it private (127.0.0.1)", { $0.metricsHost = $1 }),
        ("LOG_LEVEL", "debug, info, notice, warning or error (info)", { c, v in
            guard let level = Logger.Level(name: v) else { throw Invalid(description: "LOG_LEVEL must be debug, info, notice, warning or error") }
            c.logLevel = level
        }),
    ]

    /// Environment first, then flags; returns the arguments that were not flags.
    static func load(arguments: [String], environment: [String: String]) throws -> (Configuration, [String]) {
        var config = Configuration()
        for setting in settings {
            if let value = environment[setting.name], !value.isEmpty { try setting.apply(&config, value) }
        }
        var rest: [String] = []
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            if arg.hasPrefix("--") {
                var name = String(arg.dropFirst(2))
                var value: String?
                if let eq = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                let envName = name.uppercased().replacingOccurrences(of: "-", with: "_")
                guard let setting = settings.first(where: { $0.name == envName }) else {
                    throw Invalid(description: "unknown option --\(name)")
                }
                if value == nil {
                    i += 1
                    guard i < arguments.count else { throw Invalid(description: "--\(name) needs a value") }
                    value = arguments[i]
                }
                try setting.apply(&config, value!)
            } else {
                rest.append(arg)
            }
            i += 1
        }
        if config.app.photoStore.hasPrefix("s3://") {
            // The standard AWS names count when ours are unset, so credentials already in the
            // environment (or an instance profile's exported keys) work as they are.
            func aws(_ names: String...) -> String? { names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } }
            do {
                config.app.s3 = try S3Settings.parse(
                    store: config.app.photoStore,
                    endpoint: config.s3.endpoint ?? aws("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
                    region: config.s3.region ?? aws("AWS_REGION", "AWS_DEFAULT_REGION"),
                    accessKeyID: config.s3.accessKeyID ?? aws("AWS_ACCESS_KEY_ID"),
                    secretAccessKey: config.s3.secretAccessKey ?? aws("AWS_SECRET_ACCESS_KEY"))
            } catch let error as S3Settings.Invalid {
                throw Invalid(description: error.description)
            }
        }
        return (config, rest)
    }

    static var usage: String {
        var text = """
            usage: virtual-tourist [serve | migrate | admin <command> | healthcheck | help] [--name value …]

            serve        migrate the database, then serve HTTP (the default)
            migrate      apply pending migrations and exit
            admin        people and invitations: `virtual-tourist admin --help`
            healthcheck  exit 0 when this host's server on PORT answers /healthz (Docker's HEALTHCHECK)
            help         this text (also -h, --help)

            settings (environment variable, or --lowercase-with-dashes flag):

            """
        // As wide as the longest name: padding(toLength:) also cuts, and cut "DATABASE_POOL_SIZE".
        let width = settings.map(\.name.count).max() ?? 0
        for s in settings {
            text += "  \(s.name.padding(toLength: width, withPad: " ", startingAt: 0)) \(s.help)\n"
        }
        return text
    }
}
