// The app itself on our server, configured as `virtual-tourist serve` configures it (a pool of 16,
// as many handler slots), with no album workers and round trips reported in Server-Timing.
// Usage: bench-app-ours PORT DATABASE_URL REPOSITORY_ROOT   (migrates first)
import Dispatch
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

let poolSize = 16
let pool = PostgresPool(url: url, maxConnections: poolSize)
var settings = AppSettings()
settings.publicDirectory = root + "/Public"
settings.migrationsDirectory = root + "/migrations"
settings.photoProvider = "fixture"
settings.serverTiming = true
// The seeded album keeps its bytes in the rows, as the peer (which reads photos.bytes) needs: the
// store's upkeep would move them out of the database. Nothing is downloaded here.
settings.photoStore = "/tmp/bench-app-photos"
settings.photoStoreUpkeepDelay = 86_400
let app = App(pool: pool, settings: settings)
var configuration = ServerConfiguration()
configuration.port = port
configuration.handlerConcurrency = poolSize
configuration.errorPage = App.errorPage
configuration.accessLog = nil
let server = HTTPServer(configuration: configuration, handler: app.handler)
try server.start()
print("bench-app-ours listening on \(server.port)")
dispatchMain()
