#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import HTTPClient
import HTTPServer
import Log
import Postgres
import VirtualTourist
import AlbumWing
import Domain
import Imaging

let log = Logger(label: "virtual-tourist")

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("virtual-tourist: \(message)\n".utf8))
    exit(code)
}

let configuration: Configuration
let commandArguments: [String]
// `admin` takes options of its own (--email, --help …): only what comes before it are settings.
let arguments = Array(CommandLine.arguments.dropFirst())
// A HEIF photo decoded in a process of its own (Imaging's HEIFIsolation): before anything else.
if arguments.first == HEIFIsolation.command { HEIFIsolation.childMain(arguments) }
// Before the settings are read: a wrong setting in the environment must not hide the version.
if arguments == ["--version"] || arguments == ["version"] {
    print("virtual-tourist \(Version.number)")
    exit(0)
}
let adminAt = arguments.firstIndex(of: "admin")
do {
    (configuration, commandArguments) = try Configuration.load(
        arguments: adminAt.map { Array(arguments[..<$0]) } ?? arguments, environment: ProcessInfo.processInfo.environment)
} catch {
    // Troubleshooting: a setting or command it does not accept
    fail("\(error)\n\n\(Configuration.usage)", code: 2)
}
Logger.level = configuration.logLevel
if let adminAt {
    // Troubleshooting: unknown command
    guard commandArguments.isEmpty else { fail("unknown command \(commandArguments[0])\n\n\(Configuration.usage)", code: 2) }
    // Library lines (the pool's) would mix with the command's own output.
    Logger.level = max(configuration.logLevel, .warning)
    Admin.main(Array(arguments[(adminAt + 1)...]), configuration: configuration)
}

switch commandArguments.first ?? "serve" {
case "serve":
    serve(configuration)
case "migrate":
    let applied = migrate(configuration)
    print(applied.isEmpty ? "the database is up to date" : "applied \(applied.count) migration(s)")
case "healthcheck":
    // For Docker's HEALTHCHECK: the slim image has no curl, so the binary asks itself. Readiness
    // (database reachable, migrations applied, photo store writable) rather than /healthz: a
    // container that cannot serve pages should show as unhealthy in `docker compose ps`.
    var options = HTTPClient.Options()
    options.totalTimeout = 3
    options.internalOrigins = ["http://127.0.0.1:\(configuration.port)"]  // the address guard would refuse loopback
    let response = try? HTTPClient(options: options).get("http://127.0.0.1:\(configuration.port)/readyz")
    exit(response?.status == 200 ? 0 : 1)
case "help", "-h", "--help":
    print(commandArguments.dropFirst().first == "markdown" ? Configuration.markdownTable : Configuration.usage)
default:
    // Troubleshooting: unknown command
    fail("unknown command \(commandArguments[0])\n\n\(Configuration.usage)", code: 2)
}

/// Applies pending migrations; exits with a clear message when it cannot.
func migrate(_ configuration: Configuration) -> [Int] {
    guard let url = configuration.databaseURL else {
        // Troubleshooting: DATABASE_URL is not set.
        fail("DATABASE_URL is not set. script/server starts a private database and sets it for you.")
    }
    do {
        let migrator = try Migrator(directory: configuration.app.migrationsDirectory)
        let connection = try PostgresConnection(url: url)
        defer { connection.close() }
        return try migrator.migrate(connection)
    } catch {
        // Troubleshooting: migration stopped:
        fail("migration stopped: \(error)")
    }
}

func serve(_ configuration: Configuration) -> Never {
    _ = migrate(configuration)

    // Troubleshooting: DATABASE_URL is not set.
    guard let url = configuration.databaseURL else { fail("DATABASE_URL is not set.") }
    var serverConfiguration = ServerConfiguration()
    serverConfiguration.host = configuration.host
    serverConfiguration.trustedProxies = configuration.trustedProxies
    serverConfiguration.maxConnectionsPerAddress = configuration.addressLimits.connections
    serverConfiguration.newConnectionsPerSecond = configuration.addressLimits.newPerSecond
    serverConfiguration.newConnectionBurst = configuration.addressLimits.burst
    serverConfiguration.overShareHold = configuration.addressLimits.hold
    serverConfiguration.ipv6PrefixLength = configuration.addressLimits.ipv6Prefix
    serverConfiguration.port = configuration.port
    serverConfiguration.handlerConcurrency = configuration.app.handlerSlots(databaseConnections: configuration.databasePoolSize)
    serverConfiguration.errorPage = App.errorPage
    let pool = PostgresPool(url: url, maxConnections: configuration.databasePoolSize)
    var settings = configuration.app
    settings.photoProvider = configuration.photoProvider
    if settings.photoProvider == "flickr" && settings.flickrAPIKey.isEmpty {
        // Troubleshooting: FLICKR_API_KEY is not set
        log.warning("FLICKR_API_KEY is not set: albums will fail until it is (or leave PHOTO_PROVIDER unset for Wikimedia Commons)")
    }
    if configuration.explicitPhotoProvider == nil {
        log.notice("photos from \(settings.photoProvider == "flickr" ? "Flickr (FLICKR_API_KEY is set)" : "Wikimedia Commons (no FLICKR_API_KEY)")")
    }
    if settings.photoProvider == "commons" && settings.contactEmail == nil && settings.publicURL == nil {
        // Troubleshooting: set CONTACT_EMAIL (or PUBLIC_URL)
        log.warning("set CONTACT_EMAIL (or PUBLIC_URL): Wikimedia's User-Agent policy asks clients to say how to reach their operator")
    }
    let app = App(pool: pool, settings: settings)
    if let s3 = settings.s3, let store = app.albums.photos.base as? S3Store {
        log.notice("photos in the object store: bucket \(s3.bucket)\(s3.prefix.isEmpty ? "" : ", prefix \(s3.prefix)/") at \(s3.endpoint)")
        // Said at start rather than at the first album; the server starts anyway (the store may
        // only be slow to come up).
        DispatchQueue.global().async {
            // Troubleshooting: photo store: …
            if let problem = store.problem() { log.warning("photo store: \(problem)") }
        }
    }
    // A new instance with SIGN_UP=invite or closed: the first account needs a code only the
    // operator can read, here, so whoever reaches the page first cannot take the instance.
    do {
        if let code = try AccountStore(pool: pool).setupCode(mode: settings.signUp) {
            // Troubleshooting: nobody has an account yet
            log.warning("""
                nobody has an account yet: the first one needs this setup code: \(code) \
                (enter it on \(settings.publicBase ?? "")/sign-up; single use; a new one at each start). \
                Or: virtual-tourist admin create-person --email E --name N
                """)
        }
    } catch {
        // Troubleshooting: could not make a setup code
        log.warning("could not make a setup code for the first account (\(error)); make it with virtual-tourist admin create-person instead")
    }
    do {
        try app.startBackgroundWork()
    } catch {
        // Troubleshooting: cannot start the album workers
        fail("cannot start the album workers: \(error)")
    }
    app.attach(to: &serverConfiguration)
    let server = HTTPServer(configuration: serverConfiguration, handler: app.handler)
    app.attach(server: server)
    do {
        try server.start()
    } catch {
        // Troubleshooting: cannot listen on HOST:PORT
        fail("cannot listen on \(configuration.host):\(configuration.port): \(error)")
    }
    // /metrics without a token, on a port only Prometheus should reach (docs/operations in README).
    var metricsServer: HTTPServer?
    if let port = configuration.metricsPort {
        var metricsConfiguration = ServerConfiguration()
        metricsConfiguration.host = configuration.metricsHost
        metricsConfiguration.port = port
        metricsConfiguration.handlerConcurrency = 2
        metricsConfiguration.accessLog = nil
        let server = HTTPServer(configuration: metricsConfiguration, handler: app.metricsHandler(pool: pool))
        do {
            try server.start()
        } catch {
            // Troubleshooting: cannot listen for metrics on
            fail("cannot listen for metrics on \(configuration.metricsHost):\(port): \(error)")
        }
        metricsServer = server
    }

    // SIGTERM (docker stop) and SIGINT (Ctrl-C): stop accepting, finish what is in flight, exit.
    let signalQueue = DispatchQueue(label: "signals")
    var sources: [any DispatchSourceSignal] = []
    for sig in [SIGTERM, SIGINT] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: signalQueue)
        source.setEventHandler {
            log.notice("received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
            app.stopBackgroundWork()
            metricsServer?.shutdown(gracePeriod: 1)
            server.shutdown()
            exit(0)
        }
        source.resume()
        sources.append(source)
    }
    withExtendedLifetime(sources) { dispatchMain() }
}
