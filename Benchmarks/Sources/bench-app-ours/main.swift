// The app itself on our server, configured as `virtual-tourist serve` configures it (a pool of two
// connections per core, at least four, POOL=n to set it, and the handler slots serve gives that pool), with no album
// workers and round trips reported in Server-Timing. SLOWLOG=ms prints each request whose handler
// took longer (from the request's head to its response), to tell the server's stalls from the
// network's and the load generator's.
// Usage: bench-app-ours PORT DATABASE_URL REPOSITORY_ROOT   (migrates first)
import Dispatch
import Foundation
import HTTPServer
import Postgres
import VirtualTourist

let arguments = CommandLine.arguments
let port = Int(arguments[1]) ?? 8091
let url = arguments[2]
let root = arguments[3]

let connection = try PostgresConnection(url: url)
_ = try Migrator(directory: root + "/migrations").migrate(connection)
connection.close()

let poolSize = Int(ProcessInfo.processInfo.environment["POOL"] ?? "") ?? AppSettings.defaultDatabaseConnections
let pool = PostgresPool(url: url, maxConnections: poolSize)
var settings = AppSettings()
settings.publicDirectory = root + "/Public"
settings.migrationsDirectory = root + "/migrations"
settings.photoProvider = "fixture"
settings.serverTiming = true
// Benchmarks sign up many people through the page (script/bench.d/lib.sh's sign_up).
settings.signUp = .open
// The seeded album keeps its bytes in the rows, as the peer (which reads photos.bytes) needs: the
// store's upkeep would move them out of the database. Nothing is downloaded here.
settings.photoStore = "/tmp/bench-app-photos"
settings.photoStoreUpkeepDelay = 86_400
// No album workers (the peer has none), but the LISTEN link runs as in `virtual-tourist serve`:
// without it PhotoAccess stays off and /photos/:id would take the fallback's two round trips.
settings.workers.workers = 0
let app = App(pool: pool, settings: settings)
try app.startBackgroundWork()
var configuration = ServerConfiguration()
configuration.port = port
configuration.handlerConcurrency = settings.handlerSlots(databaseConnections: poolSize)
configuration.errorPage = App.errorPage
configuration.accessLog = nil
if let ms = Double(ProcessInfo.processInfo.environment["SLOWLOG"] ?? "") {
    let t0 = DispatchTime.now().uptimeNanoseconds
    configuration.accessLog = { e in
        if e.seconds * 1000 > ms { FileHandle.standardError.write(Data("\(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9) \(e.line)\n".utf8)) }
    }
}
let server = HTTPServer(configuration: configuration, handler: app.handler)
try server.start()
print("bench-app-ours listening on \(server.port)")
dispatchMain()
