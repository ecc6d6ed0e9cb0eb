// Time from "open pin" to a complete album of 30 photos, in multiples of the fixture's per-request
// latency R, with a per-connection cost of 2R (a TCP + TLS handshake): the first album of a fresh
// instance (cold) and a second one right after (warm), for the old client (a new connection per
// request) and the new one (a shared connection cache, warmed while the search runs), same run.
// Usage: bench-album DATABASE_URL R RUNS   → one line per client: "old cold=…R warm=…R …"
import Foundation
import PhotoFixture
import Postgres
import VirtualTourist
import Domain

let arguments = CommandLine.arguments
let url = arguments[1]
let latency = Double(arguments[2]) ?? 0.1
let runs = Int(arguments[3]) ?? 5

let pool = PostgresPool(url: url, maxConnections: AppSettings.defaultDatabaseConnections)

func album(_ app: App, _ user: Int64, lat: Double, lon: Double) throws -> Double {
    let pin = try PinStore(pool: pool).create(for: user, lat: lat, lon: lon, placeName: nil)
    let started = Date()
    _ = try app.albums.startCollection(pinID: pin.id, userID: user)
    while try pool.query("SELECT status FROM pins WHERE id = $1", [pin.id])[0].decode("status", as: String.self) == "downloading" {
        usleep(2_000)
    }
    let elapsed = Date().timeIntervalSince(started)
    let ready: Int = try pool.query("SELECT count(*) AS n FROM photos WHERE pin_id = $1 AND status = 'ready'", [pin.id])[0].decode("n")
    precondition(ready == 30, "only \(ready) photos arrived")
    return elapsed
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

for (label, reuse) in [("old", false), ("new", true)] {
    var cold: [Double] = [], warm: [Double] = [], connections: [Int] = []
    for run in 0..<runs {
        // A fresh fixture and app per run: nothing is warm at the start.
        var fixtureOptions = PhotoFixture.Options()
        fixtureOptions.latency = latency
        fixtureOptions.connectLatency = 2 * latency
        let fixture = try PhotoFixture(options: fixtureOptions)
        var settings = AppSettings()
        settings.photoProvider = "fixture"
        settings.flickrAPIURL = fixture.apiURL
        settings.workers.workers = 1
        settings.httpClient.reuseConnections = reuse
        let app = App(pool: pool, settings: settings)
        try app.startBackgroundWork()
        let user = try app.accounts.createUser(email: "bench-\(UUID().uuidString.prefix(8))@example.org", displayName: "Bench",
                                               password: "a bench password")
        cold.append(try album(app, user.id, lat: 10 + Double(run), lon: 20))
        warm.append(try album(app, user.id, lat: -10 - Double(run), lon: 40))
        connections.append(fixture.connectionCount)
        app.stopBackgroundWork()
        fixture.stop()
    }
    print(String(format: "%@ cold=%.2fR warm=%.2fR cold_s=%.3f warm_s=%.3f connections=%d runs=%d", label,
                 median(cold) / latency, median(warm) / latency, median(cold), median(warm), connections.sorted()[runs / 2], runs))
}
exit(0)
