#if canImport(Glibc)
import Glibc
#endif
import HTTPClient
import HTTPServer
import Log
import VirtualTourist
import AlbumWing
import Domain

/// Settings from the environment, each overridable by a flag of the same name
/// (PORT=9000 or --port 9000). `settings` is their table; README's Configuration is made from it.
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
    /// SMTP_* and MAIL_FROM as read, checked together at the end (mail needs a host and a sender).
    var smtp: (host: String?, port: Int?, security: String?, user: String?, password: String?, from: String?) = (nil, nil, nil, nil, nil, nil)

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
            // Troubleshooting: TRUSTED_PROXIES names gateway, but this host has no default IPv4 route
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

    /// One setting: `help` prints these, and README's configuration table is this list as
    /// `help markdown` prints it (Tests/Docs/settings-table checks that they agree), so a default or a
    /// range is written here only. Text may hold `code` in backticks, left out on a terminal.
    struct Setting: Sendable {
        let name: String
        /// The value when unset, or what decides it; empty when there is none.
        let defaultValue: String
        /// What it takes: a number's range, a choice's words, a format; empty for any text.
        let values: String
        let meaning: String
        let apply: @Sendable (inout Configuration, String) throws -> Void
        /// A secret: NAME_FILE=/path (or --name-file) reads the value from that file, as Docker and
        /// Kubernetes secrets are given, so it need not sit in the environment or on a command line.
        var secret = false
    }

    /// A value as the table shows it: `8080`.
    static func code(_ value: some Any) -> String { "`\(plain(value))`" }

    static func text(_ name: String, _ meaning: String, default defaultValue: String = "", values: String = "",
                     _ apply: @escaping @Sendable (inout Configuration, String) throws -> Void) -> Setting {
        Setting(name: name, defaultValue: defaultValue, values: values, meaning: meaning, apply: apply)
    }

    /// A secret setting: also read from the file `NAME_FILE` names (`secretFile`); the table says so.
    static func secret(_ name: String, _ meaning: String, default defaultValue: String = "",
                       _ apply: @escaping @Sendable (inout Configuration, String) throws -> Void) -> Setting {
        Setting(name: name, defaultValue: defaultValue, values: "",
                meaning: meaning + "; or `\(name)_FILE`: a file holding it (docs/admin.md#secrets-in-files)", apply: apply, secret: true)
    }

    /// The most a secret's file may hold. Secrets are short: a bigger file is the wrong one, and a
    /// cap keeps a mistaken path (a log, /dev/zero) from being read without end.
    static let secretFileLimit = 64 * 1024

    /// The value in the file `NAME_FILE` names: a regular file of at most `secretFileLimit` bytes,
    /// UTF-8, one line; trailing line ends are dropped (`echo key > file` writes one).
    static func secretFile(_ name: String, path: String) throws -> String {
        let setting = "\(name)_FILE"
        // O_NONBLOCK: opening a FIFO nobody writes to would otherwise wait for ever.
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            // Troubleshooting: cannot be read
            throw Invalid(description: "\(setting)=\(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            // Troubleshooting: cannot be read
            throw Invalid(description: "\(setting)=\(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        let kind = info.st_mode & mode_t(S_IFMT)
        guard kind == mode_t(S_IFREG) else {
            let what = kind == mode_t(S_IFDIR) ? "a directory" : kind == mode_t(S_IFCHR) || kind == mode_t(S_IFBLK) ? "a device" : "not a regular file"
            // Troubleshooting: must name a file holding the value
            throw Invalid(description: "\(setting) must name a file holding the value, e.g. /run/secrets/\(name.lowercased()), not \(path) (\(what))")
        }
        // Read one byte past the limit: a file that grows after fstat is caught too.
        var bytes = [UInt8](repeating: 0, count: secretFileLimit + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else {
                // Troubleshooting: cannot be read
                throw Invalid(description: "\(setting)=\(path) cannot be read: \(String(cString: strerror(errno)))")
            }
            if got == 0 { break }
            count += got
        }
        guard count <= secretFileLimit else {
            // Troubleshooting: must name a file of at most 64 KiB
            throw Invalid(description: "\(setting) must name a file of at most 64 KiB holding the value, not \(path) (larger)")
        }
        guard var text = String(validating: bytes[..<count], as: UTF8.self) else {
            // Troubleshooting: must hold the value as one line of text
            throw Invalid(description: "\(setting)=\(path) must hold the value as one line of text (UTF-8)")
        }
        while text.hasSuffix("\n") || text.hasSuffix("\r") || text.hasSuffix("\r\n") { text.removeLast() }
        guard !text.isEmpty else {
            // Troubleshooting: names an empty file
            throw Invalid(description: "\(setting)=\(path) names an empty file: put the value in it, or unset \(setting)")
        }
        guard !text.contains(where: { $0.isNewline || $0 == "\0" }) else {
            // Troubleshooting: must hold the value as one line of text
            throw Invalid(description: "\(setting)=\(path) must hold the value as one line of text, not several lines")
        }
        return text
    }

    /// Why `value` is not an http(s) address with a host, or nil when it is one. `site`: the
    /// app's own address, PUBLIC_URL, which links are built on by appending paths (`/s/…`,
    /// `/sign-up?invite=…`) and whose cookies are `__Host-` (Path=/): it can be nothing more than
    /// scheme://host[:port], with a `/` at most.
    static func urlProblem(_ value: String, site: Bool = false) -> String? {
        let lower = value.lowercased()
        guard let scheme = ["http://", "https://"].first(where: { lower.hasPrefix($0) }) else { return "scheme" }
        guard !value.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } == true }) else { return "characters" }
        let rest = value.dropFirst(scheme.count)
        let authorityEnd = rest.firstIndex(where: { "/?#".contains($0) }) ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        let after = rest[authorityEnd...]
        if let at = authority.lastIndex(of: "@") {
            if site { return "userinfo" }
            authority = authority[authority.index(after: at)...]
        }
        var host = authority, port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return "host" }
            host = authority[...close]
            let tail = authority[authority.index(after: close)...]
            if !tail.isEmpty {
                guard tail.hasPrefix(":") else { return "host" }
                port = tail.dropFirst()
            }
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }), host.count > 2 else { return "host" }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = authority[..<colon]
                port = authority[authority.index(after: colon)...]
            }
            // Letters, digits and - . _ ~ %, and { } for TILE_URL's {s}.
            guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~%{}".contains($0)) }) else { return "host" }
        }
        if let port {
            guard port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port), (1...65_535).contains(number) else { return "port" }
        }
        if site && !(after.isEmpty || after == "/") { return "path" }
        return nil
    }

    /// Refuses `value` unless it is an http(s) address with a host, in the words every URL
    /// setting uses, with an example of one it would take.
    static func checkURL(_ name: String, _ value: String, example: String, site: Bool = false) throws {
        switch urlProblem(value, site: site) {
        case nil: return
        case "port":
            // Troubleshooting: must have a port of 1–65535
            throw Invalid(description: "\(name) must have a port of 1–65535, e.g. \(example), not \(value)")
        case "path":
            // Troubleshooting: must be the site's address alone
            throw Invalid(description: "\(name) must be the site's address alone, without a path, query or fragment (the app answers at /), e.g. \(example), not \(value)")
        case "userinfo":
            // Troubleshooting: must be the site's address alone
            throw Invalid(description: "\(name) must be the site's address alone, without a user or password, e.g. \(example), not \(value)")
        default:
            // Troubleshooting: must be an http:// or https:// address with a host
            throw Invalid(description: "\(name) must be an http:// or https:// address with a host, e.g. \(example), not \(value)")
        }
    }

    static let flagValues = "`1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`"

    /// A yes/no setting: every one takes the same words (in any letter case) and refuses others at
    /// start, so that no word a person might try (`on`) is silently read as no.
    static func flag(_ name: String, _ meaning: String, default defaultValue: Bool,
                     _ set: @escaping @Sendable (inout Configuration, Bool) -> Void) -> Setting {
        Setting(name: name, defaultValue: code(defaultValue ? 1 : 0), values: flagValues, meaning: meaning) { configuration, value in
            switch value.lowercased() {
            case "1", "true", "yes", "on": set(&configuration, true)
            case "0", "false", "no", "off": set(&configuration, false)
            // Troubleshooting: NAME must be 1, true, yes, on or 0, false, no, off, not V
            default: throw Invalid(description: "\(name) must be \(unmarked(flagValues)), not \(value)")
            }
        }
    }

    /// A setting that takes one of a few words.
    static func choice(_ name: String, _ meaning: String, _ choices: [String], default defaultValue: String,
                       _ set: @escaping @Sendable (inout Configuration, String) -> Void) -> Setting {
        let values = choices.dropLast().map(code).joined(separator: ", ") + " or " + code(choices.last!)
        return Setting(name: name, defaultValue: defaultValue, values: values, meaning: meaning) { configuration, value in
            guard let word = choices.first(where: { $0 == value.lowercased() }) else {
                // Troubleshooting: PHOTO_PROVIDER must be flickr, commons or fixture
                throw Invalid(description: "\(name) must be \(unmarked(values)), not \(value)")
            }
            set(&configuration, word)
        }
    }

    /// A number setting that must lie in `range`. Every number is parsed here, so each refuses a
    /// wrong value in the same words ("PORT must be 0–65535, not 70000") and none can skip its
    /// range: an unchecked number reaches SQL (`make_interval(days => $1::int)`) or arithmetic
    /// that fails or traps later, far from the setting that caused it. `values` replaces the
    /// bounds where they read badly (a bound just above 0).
    static func ranged<N: LosslessStringConvertible & Comparable & Sendable>(
        _ name: String, _ meaning: String, _ range: ClosedRange<N>, unit: String? = nil, values: String? = nil,
        default defaultValue: String, _ set: @escaping @Sendable (inout Configuration, N) -> Void
    ) -> Setting {
        let values = values ?? "\(plain(range.lowerBound))–\(plain(range.upperBound))\(unit.map { " " + $0 } ?? "")"
        return Setting(name: name, defaultValue: defaultValue, values: values, meaning: meaning) { configuration, value in
            guard let number = N(value), range.contains(number) else {
                // Troubleshooting: NAME must be A–B, not V
                throw Invalid(description: "\(name) must be \(values), not \(value)")
            }
            set(&configuration, number)
        }
    }

    /// A bound as people write it: 100000, not 100000.0.
    static func plain(_ bound: some Any) -> String {
        if let double = bound as? Double, double == double.rounded(), abs(double) < 1e15 { return String(Int64(double)) }
        return "\(bound)"
    }

    /// Text for a terminal: without the backticks that mark code in the README.
    static func unmarked(_ text: String) -> String { text.replacingOccurrences(of: "`", with: "") }

    /// Known settings: environment name → how to apply a value. The defaults are read from the
    /// types that hold them, so they are written down nowhere else.
    static let settings: [Setting] = {
        let d = Configuration()
        let flickr = ProviderBudget.Limits.flickr, commons = ProviderBudget.Limits.commons
        let mib = 1024 * 1024
        return [
        secret("DATABASE_URL", "PostgreSQL URL or conninfo, e.g. `postgresql://vt:secret@db/vt`", default: "private database (script/server)") { $0.databaseURL = $1 },
        text("HOST", "address to listen on (`0.0.0.0` in containers)", default: code(d.host)) { $0.host = $1 },
        ranged("PORT", "port to listen on (`0`: any free port)", 0...65_535, default: code(d.port)) { $0.port = $1 },
        text("PUBLIC_URL", "the address people use, e.g. `https://photos.example.org`; `https://…` makes cookies Secure and `__Host-` prefixed and sends HSTS", values: "`http(s)://host[:port]`") { c, v in
            try Self.checkURL("PUBLIC_URL", v, example: "https://photos.example.org", site: true)
            c.app.publicURL = v
        },
        text("TRUSTED_PROXIES", "addresses or CIDRs of your reverse proxies (`127.0.0.1`, `172.16.0.0/12`), or `gateway`, the default route's gateway (under Compose, the Docker host); only their `X-Forwarded-For` says who the client is (`Forwarded` is never read: docs/admin.md), for sign-in throttling, logs and limits per address. Tested Caddy and nginx files: docs/proxy/",
             default: "none (Compose: `gateway`)", values: "addresses, CIDRs or `gateway`, separated by commas") { c, v in
            let text = try Self.resolvingGateway(v)
            // Troubleshooting: TRUSTED_PROXIES must be addresses or CIDRs (or gateway)
            guard let proxies = TrustedProxies(parsing: text) else { throw Invalid(description: "TRUSTED_PROXIES must be addresses or CIDRs (or gateway) separated by commas, not \(v)") }
            c.trustedProxies = proxies
        },
        choice("SIGN_UP", "who may make an account: `invite` (single-use links from `virtual-tourist admin invite`), `open` (anyone who finds the address) or `closed`; with `invite` or `closed` the first account of a new instance needs the setup code the app logs at start (docs/admin.md#who-may-sign-up)",
               SignUpMode.allCases.map(\.rawValue), default: code(d.app.signUp.rawValue)) { c, v in c.app.signUp = SignUpMode(rawValue: v)! },
        ranged("CONNECTIONS_PER_ADDRESS", "connections one client address may have open at once; more are held, then reset; trusted proxies are not limited", 1...100_000, default: code(d.addressLimits.connections)) { $0.addressLimits.connections = $1 },
        ranged("NEW_CONNECTIONS_PER_SECOND", "new connections a second one client address may open after `NEW_CONNECTION_BURST`; past it they are answered `503` with `Retry-After` (`0`: no limit)", Double(0)...1_000_000, default: code(d.addressLimits.newPerSecond)) { $0.addressLimits.newPerSecond = $1 },
        ranged("NEW_CONNECTION_BURST", "new connections one client address may open at once before `NEW_CONNECTIONS_PER_SECOND` applies", Double(1)...1_000_000, default: code(d.addressLimits.burst)) { $0.addressLimits.burst = $1 },
        ranged("OVER_SHARE_HOLD_SECONDS", "how long a connection past `CONNECTIONS_PER_ADDRESS` is held unread (half to one and a half times this) before it is reset (`0`: at once)", Double(0)...300, default: code(d.addressLimits.hold)) { $0.addressLimits.hold = $1 },
        ranged("IPV6_PREFIX", "every per-address limit counts an IPv6 client by its network of this many bits (`64`: a household's or a host's /64; `128`: each address)", 32...128, unit: "bits", default: code(d.addressLimits.ipv6Prefix)) { $0.addressLimits.ipv6Prefix = $1 },
        flag("SECURE_COOKIES", "yes marks cookies Secure behind a TLS-terminating proxy when `PUBLIC_URL` is not `https://…`", default: d.app.secureCookies) { $0.app.secureCookies = $1 },
        choice("PHOTO_PROVIDER", "where albums come from: `flickr`, `commons` (Wikimedia Commons, no key needed), or `fixture`, the offline demo fixture at `FLICKR_API_URL`",
               ["flickr", "commons", "fixture"], default: "`flickr` when `FLICKR_API_KEY` is set, else `commons`") { $0.explicitPhotoProvider = $1 },
        text("CONTACT_EMAIL", "how the operator can be reached; sent with `PUBLIC_URL` in the User-Agent to photo providers, as Wikimedia's User-Agent policy asks", values: "an e-mail address") { c, v in
            guard v.contains("@"), !v.contains(where: { $0.isWhitespace || $0 == "(" || $0 == ")" || $0 == ";" }) else {
                // Troubleshooting: CONTACT_EMAIL must be an email address
                throw Invalid(description: "CONTACT_EMAIL must be an email address, not \(v)")
            }
            c.app.contactEmail = v
        },
        ranged("DOWNLOAD_SLOTS", "image downloads at once per instance, shared by all albums", 1...256, default: code(d.app.workers.downloadSlots)) { $0.app.workers.downloadSlots = $1 },
        secret("FLICKR_API_KEY", "your key from flickr.com/services/api/keys") { $0.app.flickrAPIKey = $1 },
        text("FLICKR_API_URL", "a Flickr-compatible endpoint, such as the fixture's", default: code(d.app.flickrAPIURL), values: "an `http(s)://` URL") { c, v in
            try Self.checkURL("FLICKR_API_URL", v, example: "http://fixture:8090/services/rest/")
            c.app.flickrAPIURL = v
        },
        text("COMMONS_API_URL", "a Commons-compatible endpoint, such as the fixture's `/w/api.php`", default: code(d.app.commonsAPIURL), values: "an `http(s)://` URL") { c, v in
            try Self.checkURL("COMMONS_API_URL", v, example: "https://commons.wikimedia.org/w/api.php")
            c.app.commonsAPIURL = v
        },
        ranged("WORKERS", "album download workers per instance (`0`: this instance collects no albums; another instance on the same database does, docs/scaling.md)", 0...64, default: code(d.app.workers.workers)) { $0.app.workers.workers = $1 },
        ranged("PROVIDER_CALLS_PER_HOUR", "API calls per hour to the photo provider, shared by all instances through PostgreSQL (docs/providers.md)", Double(1)...100_000,
               default: "flickr \(code(flickr.perHour)), commons \(code(commons.perHour))") { $0.app.providerCallsPerHour = $1 },
        ranged("PROVIDER_CALL_BURST", "API calls that may be made at once after a quiet spell", Double(1)...10_000,
               default: "flickr \(code(flickr.burst)), commons \(code(commons.burst))") { $0.app.providerCallBurst = $1 },
        ranged("PROVIDER_OUTAGE_HOURS", "how long an album waits out its provider's outage (errors, 5xx, 429, unreachable) before it fails with a Retry button; meanwhile it says when it tries next and resumes by itself (docs/providers.md)",
               Double.leastNonzeroMagnitude...720, values: "more than 0, at most 720", default: code(d.app.workers.providerOutageHorizon / 3600)) { $0.app.workers.providerOutageHorizon = $1 * 3600 },
        ranged("COMMONS_ORIGINAL_CAP", "largest Commons original (bytes) fetched when no thumbnail step fits", 10_000...8_388_608, unit: "bytes", default: code(d.app.commonsOriginalCap)) { $0.app.commonsOriginalCap = $1 },
        ranged("ALBUM_LEASE_SECONDS", "how long a worker holds an album job without news before another instance may take it over", 1...3600, default: code(d.app.workers.leaseSeconds)) { $0.app.workers.leaseSeconds = $1 },
        // 100 years: make_interval takes an int, and now() minus much more leaves PostgreSQL's timestamps.
        ranged("PHOTO_RETENTION_DAYS", "delete stored photos older than this many days, hourly (`0`: keep them)", 0...36_500, unit: "days", default: code(d.app.photoRetentionDays)) { $0.app.photoRetentionDays = $1 },
        ranged("JOB_RETENTION_DAYS", "delete finished album jobs older than this many days, hourly (`0`: keep them)", 0...36_500, unit: "days", default: code(d.app.jobRetentionDays)) { $0.app.jobRetentionDays = $1 },
        ranged("MEMORY_TRIM_SECONDS", "how often freed memory is handed back to the system (`0`: never)", Double(0)...3600, default: code(d.app.memoryTrimSeconds)) { $0.app.memoryTrimSeconds = $1 },
        text("PHOTO_STORE", "where downloaded photos are kept, one file per distinct image (by SHA-256); back it up with the database (docs/admin.md). Or `s3://bucket[/prefix]`: an S3-compatible object store (MinIO, Garage, Ceph RGW, AWS S3), for several hosts or more than one disk",
             default: "\(code(d.app.photoStore)) (`/data/photos` in the image)", values: "a folder, or `s3://bucket[/prefix]`") { c, v in
            guard v.hasPrefix("s3://") || !v.contains("://") else {
                // Troubleshooting: PHOTO_STORE must be a directory or s3://bucket[/prefix]
                throw Invalid(description: "PHOTO_STORE must be a directory or s3://bucket[/prefix], not \(v)")
            }
            c.app.photoStore = v
        },
        text("S3_ENDPOINT", "with `PHOTO_STORE=s3://…`: the store's address, e.g. `http://minio:9000`; requests are path-style (`endpoint/bucket/key`); `AWS_ENDPOINT_URL_S3` counts when unset",
             default: "AWS S3 of `S3_REGION`", values: "`http(s)://host[:port]`") { c, v in
            try Self.checkURL("S3_ENDPOINT", v, example: "http://minio:9000")
            c.s3.endpoint = v
        },
        text("S3_REGION", "the region signed into requests (MinIO and Garage accept their configured region, often `us-east-1` / `garage`); `AWS_REGION` counts when unset", default: code("us-east-1")) { $0.s3.region = $1 },
        secret("S3_ACCESS_KEY_ID", "the object store's access key; the key pair needs GetObject, PutObject, DeleteObject and ListBucket on the bucket; `AWS_ACCESS_KEY_ID` counts when unset") { $0.s3.accessKeyID = $1 },
        secret("S3_SECRET_ACCESS_KEY", "the object store's secret key; `AWS_SECRET_ACCESS_KEY` counts when unset") { $0.s3.secretAccessKey = $1 },
        text("SMTP_HOST", "the mail server the app sends password resets and invitations through (unset: no mail; people copy invitation links, and the operator resets passwords: docs/admin.md#mail)", values: "a host name or address") { $0.smtp.host = $1 },
        ranged("SMTP_PORT", "its port", 1...65_535, default: "`587` (`465` with `SMTP_SECURITY=implicit`)") { $0.smtp.port = $1 },
        choice("SMTP_SECURITY", "how the connection is secured: `starttls` (the submission port), `implicit` (TLS from the start, port 465) or `none` (a relay on this host or a private network)",
               SMTPClient.Security.allCases.map(\.rawValue), default: code("starttls")) { $0.smtp.security = $1 },
        text("SMTP_USER", "the account to sign in to the mail server with (unset: no sign-in)") { $0.smtp.user = $1 },
        secret("SMTP_PASSWORD", "its password") { $0.smtp.password = $1 },
        text("MAIL_FROM", "the sender of the app's mail, e.g. `Virtual Tourist <photos@example.org>` or `photos@example.org`", default: "`CONTACT_EMAIL`",
             values: "an address") { $0.smtp.from = $1 },
        text("TILES_FILE", "a PMTiles archive (vector or raster) to draw the map from, e.g. `/data/maps/region.pmtiles` (see \"Street-level maps\"); wins over `TILE_URL`", values: "a file") { $0.app.tilesFile = $1 },
        text("TILE_URL", "raster tiles `…/{z}/{x}/{y}.png` (`{s}` allowed), fetched and cached by the server, or `none` for the built-in map", default: code(d.app.tileURL), values: "an `http(s)://` URL, or `none`") { c, v in
            if v != "none" {
                try Self.checkURL("TILE_URL", v, example: "https://tile.openstreetmap.org/{z}/{x}/{y}.png")
                guard v.contains("{z}"), v.contains("{x}"), v.contains("{y}") else {
                    // Troubleshooting: TILE_URL must have {z}, {x} and {y}
                    throw Invalid(description: "TILE_URL must have {z}, {x} and {y} in it, e.g. https://tile.openstreetmap.org/{z}/{x}/{y}.png, or be none, not \(v)")
                }
            }
            c.app.tileURL = v
        },
        text("TILE_ATTRIBUTION", "the credit line your tiles require (an archive's own attribution wins)") { $0.app.tileAttribution = $1 },
        text("TILE_CONTACT", "an e-mail or URL sent in the tile proxy's User-Agent, as tile servers' usage policies ask", default: "`CONTACT_EMAIL`") { $0.app.tileContact = $1 },
        text("TILE_CACHE_DIR", "where the proxy keeps `TILE_URL` tiles; share it between instances", default: code(d.app.tileCacheDirectory), values: "a folder") { $0.app.tileCacheDirectory = $1 },
        ranged("TILE_CACHE_MB", "size cap of that cache (least recently used tiles go first)", 1...1_000_000, unit: "MB", default: code(d.app.tileCacheBytes / mib)) { $0.app.tileCacheBytes = $1 * mib },
        ranged("TILES_DIRECTORY_CACHE", "PMTiles leaf directories kept decoded in memory", 1...1_000_000, default: code(d.app.tileDirectoryCacheEntries)) { $0.app.tileDirectoryCacheEntries = $1 },
        ranged("QUOTA_PINS", "pins per person (`0`: none, except for people given a limit of their own in SQL: docs/admin.md#quotas)", 0...10_000_000, default: code(d.app.quotas.pins)) { $0.app.quotas.pins = $1 },
        ranged("QUOTA_COLLECTIONS_PER_HOUR", "New Collections per person per hour (`0`: none, except for people given a limit of their own)", 0...100_000, default: code(d.app.quotas.collectionsPerHour)) { $0.app.quotas.collectionsPerHour = $1 },
        ranged("QUOTA_PHOTO_MB", "stored photo megabytes per person; past it no new album starts (`0`: no albums, except for people given a limit of their own)", Int64(0)...100_000_000, unit: "MB",
               default: code(d.app.quotas.photoBytes / Int64(mib))) { $0.app.quotas.photoBytes = $1 * Int64(mib) },
        ranged("UPLOAD_MAX_MB", "the largest photo file a person may add (their own photos; the form without JavaScript sends its files together, at most this)", 1...2_000, unit: "MB",
               default: code(d.app.ownPhotoMaxBytes / mib)) { $0.app.ownPhotoMaxBytes = $1 * mib },
        ranged("UPLOAD_MAX_MEGAPIXELS", "the most pixels a photo a person adds may have, read from its header before it is decoded (a decompression bomb is refused unread); making its versions takes 3 to 6 bytes a pixel while it is decoded, one photo per core at a time", 1...200,
               default: code(d.app.ownPhotoMaxPixels / 1_000_000)) { $0.app.ownPhotoMaxPixels = $1 * 1_000_000 },
        text("UPLOAD_SPOOL_DIR", "where photos being added are written as they arrive, until they are stored (never held in memory): a local disk with room for a few uploads at once, not a tmpfs (memory) and not NFS", default: code(d.app.uploadSpool), values: "a folder") { $0.app.uploadSpool = $1 },
        ranged("UPLOAD_PIN_RADIUS_M", "a photo added on the map joins the map's nearest pin within this many metres of where it was taken, else makes a pin of its own", 10...100_000, unit: "m",
               default: code(d.app.ownPhotoPinRadius)) { $0.app.ownPhotoPinRadius = $1 },
        ranged("QUOTA_SHARED_MAPS", "shared maps a person may belong to, owned or joined (`0`: nobody shares maps)", 0...10_000, default: code(d.app.quotas.sharedMaps)) { $0.app.quotas.sharedMaps = $1 },
        ranged("QUOTA_MAP_MEMBERS", "members of one shared map, its owners included", 1...100_000, default: code(d.app.quotas.membersPerMap)) { $0.app.quotas.membersPerMap = $1 },
        ranged("QUOTA_INVITATIONS_PER_HOUR", "invitations by email a person may make per hour, withdrawn ones included (`0`: none; invitation links are not counted)", 0...100_000,
               default: code(d.app.quotas.invitationsPerHour)) { $0.app.quotas.invitationsPerHour = $1 },
        ranged("DATABASE_POOL_SIZE", "database connections per instance; requests that need one wait their turn (raise it for a database server with more cores than the app's)", 1...500,
               default: "2 per CPU core, at least `4`") { $0.databasePoolSize = $1 },
        secret("METRICS_TOKEN", "serves `/metrics` on the app's port to `Authorization: Bearer TOKEN` (unset: not served there)") { $0.app.metricsToken = $1 },
        ranged("METRICS_PORT", "a second port serving only `/metrics`, without a token, for a Prometheus on a private network (unset: none)", 1...65_535, default: "") { $0.metricsPort = $1 },
        text("METRICS_HOST", "the address of `METRICS_PORT` (keep it off the internet; under Compose the container's every address, published on the host's loopback only when asked: docs/admin.md#metrics)",
             default: "\(code(d.metricsHost)) (Compose: `0.0.0.0`)") { $0.metricsHost = $1 },
        // Before SHARE_PAGES_PER_MINUTE: the environment is read in this order, so the new name wins.
        ranged("SHARE_REQUESTS_PER_MINUTE", "the former name of `SHARE_PAGES_PER_MINUTE`, read as it is (`0`: no limit); `SHARE_PAGES_PER_MINUTE` wins when both are set", 0...1_000_000, default: "") { $0.app.shareLimits.pagesPerAddressPerMinute = $1 },
        ranged("SHARE_PAGES_PER_MINUTE", "pages a minute one client address may open under share links (`/s/…`: a link, an album, a photo, a password sent), with a burst of as many; the thumbnails and data those pages load have 20 times as much, one link takes 5 times both from everyone together, and 30 made-up tokens an hour refuse an address; past it a visitor gets a `429` page (`0`: no limit)",
               0...1_000_000, default: code(d.app.shareLimits.pagesPerAddressPerMinute)) { $0.app.shareLimits.pagesPerAddressPerMinute = $1 },
        flag("SERVER_TIMING", "yes adds `Server-Timing: db;desc=\"round trips\";dur=N` to app responses (tests, benchmarks)", default: d.app.serverTiming) { $0.app.serverTiming = $1 },
        text("PUBLIC_DIR", "where the static files are", default: code(d.app.publicDirectory), values: "a folder") { $0.app.publicDirectory = $1 },
        text("MIGRATIONS_DIR", "where the SQL migrations are", default: code(d.app.migrationsDirectory), values: "a folder") { $0.app.migrationsDirectory = $1 },
        choice("LOG_LEVEL", "the least important lines written", Logger.Level.allCases.map { "\($0)" }, default: code("\(d.logLevel)")) { c, v in c.logLevel = Logger.Level(name: v)! },
        ]
    }()

    /// Environment first, then flags; returns the arguments that were not flags.
    static func load(arguments: [String], environment: [String: String]) throws -> (Configuration, [String]) {
        var config = Configuration()
        for setting in settings {
            let value = environment[setting.name].flatMap { $0.isEmpty ? nil : $0 }
            // An empty NAME_FILE is unset, as an empty NAME is.
            guard let path = environment[setting.name + "_FILE"], !path.isEmpty else {
                if let value { try setting.apply(&config, value) }
                continue
            }
            guard setting.secret else {
                // Troubleshooting: only secrets are read from files
                throw Invalid(description: "\(setting.name)_FILE is set, but only secrets are read from files (\(secretNames)); set \(setting.name) itself")
            }
            guard value == nil else {
                // Troubleshooting: are both set
                throw Invalid(description: "\(setting.name) and \(setting.name)_FILE are both set: set one, either the value or the file that holds it (e.g. \(setting.name)_FILE=/run/secrets/\(setting.name.lowercased()))")
            }
            try setting.apply(&config, try secretFile(setting.name, path: path))
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
                // --name-file PATH: a secret read from a file, so that it is not on the command line.
                let fromFile = settings.first(where: { $0.secret && $0.name + "_FILE" == envName })
                guard let setting = fromFile ?? settings.first(where: { $0.name == envName }) else {
                    // Troubleshooting: unknown option --X
                    throw Invalid(description: "unknown option --\(name)")
                }
                if value == nil {
                    i += 1
                    // Troubleshooting: --X needs a value
                    guard i < arguments.count else { throw Invalid(description: "--\(name) needs a value") }
                    value = arguments[i]
                }
                try setting.apply(&config, fromFile == nil ? value! : try secretFile(setting.name, path: value!))
            } else {
                rest.append(arg)
            }
            i += 1
        }
        if config.app.photoStore.hasPrefix("s3://") {
            // The standard AWS names count when ours are unset, so credentials already in the
            // environment (or an instance profile's exported keys) work as they are.
            func aws(_ names: String...) -> String? { names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } }
            if config.s3.endpoint == nil, let endpoint = aws("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") {
                try checkURL("S3_ENDPOINT (here AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)", endpoint, example: "http://minio:9000")
            }
            do {
                config.app.s3 = try S3Settings.parse(
                    store: config.app.photoStore,
                    endpoint: config.s3.endpoint ?? aws("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
                    region: config.s3.region ?? aws("AWS_REGION", "AWS_DEFAULT_REGION"),
                    accessKeyID: config.s3.accessKeyID ?? aws("AWS_ACCESS_KEY_ID"),
                    secretAccessKey: config.s3.secretAccessKey ?? aws("AWS_SECRET_ACCESS_KEY"))
            } catch let error as S3Settings.Invalid {
                // Troubleshooting: PHOTO_STORE=s3://BUCKET…: the bucket name must be 3–63 characters
                throw Invalid(description: error.description)
            }
        }
        if let host = config.smtp.host, !host.isEmpty {
            guard let from = config.smtp.from ?? config.app.contactEmail, from.contains("@") else {
                // Troubleshooting: SMTP_HOST is set but the app has no sender
                throw Invalid(description: "SMTP_HOST is set but the app has no sender: set MAIL_FROM (or CONTACT_EMAIL) to an address")
            }
            guard config.app.publicURL != nil else {
                // Troubleshooting: SMTP_HOST needs PUBLIC_URL
                throw Invalid(description: "SMTP_HOST needs PUBLIC_URL: the links in the app's mail (password resets, invitations) point there")
            }
            let security = SMTPClient.Security(rawValue: config.smtp.security ?? "starttls") ?? .starttls
            // The bare address for MAIL FROM; the whole value (a name and <address>) for From:.
            config.app.mail = SMTPClient.Settings(host: host, port: config.smtp.port ?? (security == .implicit ? 465 : 587), security: security,
                                                  user: config.smtp.user, password: config.smtp.password, from: from)
        }
        return (config, rest)
    }

    /// The settings that may be read from files, for messages.
    static var secretNames: String { settings.filter(\.secret).map(\.name).joined(separator: ", ") }

    static var usage: String {
        var text = """
            usage: virtual-tourist [serve | migrate | admin <command> | healthcheck | help | --version] [--name value …]

            serve          migrate the database, then serve HTTP (the default)
            migrate        apply pending migrations and exit
            admin          people and invitations: `virtual-tourist admin --help`
            healthcheck    exit 0 when this host's server on PORT is ready (/readyz; Docker's HEALTHCHECK)
            help           this text (also -h, --help)
            help markdown  the settings below as the README's table
            --version      the release number (CHANGELOG.md)

            settings (environment variable, or --lowercase-with-dashes flag), with their default and values:

            """
        // As wide as the longest name: padding(toLength:) also cuts, and cut "DATABASE_POOL_SIZE".
        let width = settings.map(\.name.count).max() ?? 0
        for s in settings {
            let facts = [s.defaultValue.isEmpty ? nil : "default \(s.defaultValue)", s.values.isEmpty ? nil : s.values].compactMap { $0 }
            let line = s.meaning + (facts.isEmpty ? "" : " [\(facts.joined(separator: "; "))]")
            text += "  \(s.name.padding(toLength: width, withPad: " ", startingAt: 0)) \(unmarked(line))\n"
        }
        return text
    }

    /// The settings as the README's configuration table (`virtual-tourist help markdown`).
    static var markdownTable: String {
        func cell(_ text: String) -> String {
            // Paths into docs/ become links, so the code's text needs no Markdown of its own.
            text.replacingOccurrences(of: "|", with: "\\|")
                .replacing(/docs\/[\w\/-]*(\.md(#[\w-]+)?|\/)/) { "[\($0.output.0)](\($0.output.0))" }
        }
        var lines = ["| Variable | Default | Values | Meaning |", "|---|---|---|---|"]
        for s in settings {
            lines.append("| `\(s.name)` | \(cell(s.defaultValue)) | \(cell(s.values)) | \(cell(s.meaning)) |")
        }
        return lines.joined(separator: "\n")
    }
}
