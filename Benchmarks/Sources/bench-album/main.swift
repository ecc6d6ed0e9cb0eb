// Time from "open pin" to a complete album: the fixture answers every request after LATENCY
// seconds with 30 photos per page; the workers download with DOWNLOADS images at once.
// Usage: bench-album DATABASE_URL LATENCY DOWNLOADS RUNS   → prints "median_s=… runs=…"
import Foundation
import PhotoFixture
import Postgres
import VirtualTourist

let arguments = CommandLine.arguments
let url = arguments[1]
let latency = Double(arguments[2]) ?? 0.2
let downloads = Int(arguments[3]) ?? 6
let runs = Int(arguments[4]) ?? 5

var fixtureOptions = PhotoFixture.Options()
fixtureOptions.latency = latency
let fixture = try PhotoFixture(options: fixtureOptions)
let pool = PostgresPool(url: url, maxConnections: 8)
var settings = AppSettings()
settings.photoProvider = "fixture"
settings.flickrAPIURL = fixture.apiURL
settings.workers.workers = 1
settings.workers.downloadsPerAlbum = downloads
settings.httpClient.perHostConcurrency = max(downloads, 1)
let app = App(pool: pool, settings: settings)
try app.startBackgroundWork()

let user = try app.accounts.createUser(email: "bench-\(UUID().uuidString.prefix(8))@example.org", displayName: "Bench",
                                       password: "a bench password")
var times: [Double] = []
for run in 0..<runs {
    let pin = try PinStore(pool: pool).create(for: user.id, lat: 10 + Double(run), lon: 20, placeName: nil)
    let started = Date()
    _ = try app.albums.startCollection(pinID: pin.id, userID: user.id)
    while try pool.query("SELECT status FROM pins WHERE id = $1", [pin.id])[0].decode("status", as: String.self) == "downloading" {
        usleep(5_000)
    }
    times.append(Date().timeIntervalSince(started))
    let ready: Int = try pool.query("SELECT count(*) AS n FROM photos WHERE pin_id = $1 AND status = 'ready'", [pin.id])[0].decode("n")
    precondition(ready == 30, "only \(ready) photos arrived")
}
times.sort()
print(String(format: "median_s=%.3f min_s=%.3f max_s=%.3f runs=%d", times[times.count / 2], times[0], times[times.count - 1], runs))
app.stopBackgroundWork()
exit(0)
