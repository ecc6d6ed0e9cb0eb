import Foundation
import Postgres
import Synchronization
import Domain

/// Counters and a latency histogram in the Prometheus text format (version 0.0.4), kept by hand:
/// a dozen series do not need a metrics library.
public final class Metrics: Sendable {
    /// Upper bounds of the request latency buckets, in seconds.
    package static let buckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    private struct State {
        package var requests: [Int: Int] = [:]            // status → count
        package var latencyBuckets = [Int](repeating: 0, count: Metrics.buckets.count)
        package var latencyCount = 0
        package var latencySum = 0.0
        package var downloadsOK = 0
        package var downloadsFailed = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// Fed by the access log: one call per response.
    public func recordResponse(status: Int, seconds: Double) {
        state.withLock { s in
            s.requests[status, default: 0] += 1
            for (i, bound) in Self.buckets.enumerated() where seconds <= bound { s.latencyBuckets[i] += 1 }
            s.latencyCount += 1
            s.latencySum += seconds
        }
    }

    public func download(succeeded: Bool) {
        state.withLock { succeeded ? ($0.downloadsOK += 1) : ($0.downloadsFailed += 1) }
    }

    /// The exposition; `gauges` adds what is read at scrape time (connections, pool, jobs).
    public func render(openConnections: Int, pool: PostgresPool.Statistics, jobs: [String: Int],
                       store: (breaker: StoreBreaker.Status?, problem: String?) = (nil, nil)) -> String {
        let s = state.withLock { $0 }
        var out = ""
        out += "# HELP vt_http_requests_total HTTP responses by status code.\n# TYPE vt_http_requests_total counter\n"
        for (status, count) in s.requests.sorted(by: { $0.key < $1.key }) {
            out += "vt_http_requests_total{status=\"\(status)\"} \(count)\n"
        }
        out += "# HELP vt_http_request_duration_seconds Time from a request's arrival to its response.\n"
        out += "# TYPE vt_http_request_duration_seconds histogram\n"
        for (i, bound) in Self.buckets.enumerated() {
            out += "vt_http_request_duration_seconds_bucket{le=\"\(bound)\"} \(s.latencyBuckets[i])\n"
        }
        out += "vt_http_request_duration_seconds_bucket{le=\"+Inf\"} \(s.latencyCount)\n"
        out += "vt_http_request_duration_seconds_sum \(s.latencySum)\nvt_http_request_duration_seconds_count \(s.latencyCount)\n"
        out += "# HELP vt_http_open_connections Client connections open now.\n# TYPE vt_http_open_connections gauge\n"
        out += "vt_http_open_connections \(openConnections)\n"
        out += "# HELP vt_db_pool_connections Database connections of this instance by state.\n# TYPE vt_db_pool_connections gauge\n"
        out += "vt_db_pool_connections{state=\"in_use\"} \(pool.inUse)\nvt_db_pool_connections{state=\"idle\"} \(pool.idle)\n"
        out += "# HELP vt_db_pool_waiting Requests waiting for a database connection.\n# TYPE vt_db_pool_waiting gauge\n"
        out += "vt_db_pool_waiting \(pool.waiting)\n"
        out += "# HELP vt_album_jobs Album jobs in the database by state (all instances).\n# TYPE vt_album_jobs gauge\n"
        for state in JobState.allCases {
            out += "vt_album_jobs{state=\"\(state.rawValue)\"} \(jobs[state.rawValue] ?? 0)\n"
        }
        out += "# HELP vt_photo_downloads_total Image downloads by this instance by result.\n# TYPE vt_photo_downloads_total counter\n"
        out += "vt_photo_downloads_total{result=\"ok\"} \(s.downloadsOK)\nvt_photo_downloads_total{result=\"failed\"} \(s.downloadsFailed)\n"
        if let breaker = store.breaker {
            out += "# HELP vt_photo_store_available 1 while the photo store is used (its breaker closed and no problem reported), else 0.\n"
            out += "# TYPE vt_photo_store_available gauge\nvt_photo_store_available \(breaker.available && store.problem == nil ? 1 : 0)\n"
            out += "# HELP vt_photo_store_breaker The photo store's circuit breaker: 1 for its state now.\n# TYPE vt_photo_store_breaker gauge\n"
            for state in ["closed", "open", "probing"] {
                out += "vt_photo_store_breaker{state=\"\(state)\"} \(breaker.state == state ? 1 : 0)\n"
            }
            out += "# HELP vt_photo_store_refused_total Store calls answered by the breaker without asking the store.\n"
            out += "# TYPE vt_photo_store_refused_total counter\nvt_photo_store_refused_total \(breaker.refused)\n"
        }
        return out
    }

    /// The newest backup script/backup completed (the `backups` table), for an alert on its age:
    /// `time() - vt_backup_last_success_timestamp_seconds > 2 * 86400`. 0 before the first one.
    package static func backupLines(lastSuccess: Double?, missing: Int?) -> String {
        var out = "# HELP vt_backup_last_success_timestamp_seconds When the newest backup script/backup kept was complete (Unix time; 0: none yet).\n"
        out += "# TYPE vt_backup_last_success_timestamp_seconds gauge\n"
        out += "vt_backup_last_success_timestamp_seconds \(Int((lastSuccess ?? 0).rounded(.down)))\n"
        out += "# HELP vt_backup_last_photos_missing Photos the newest backup's dump named that the store no longer had.\n"
        out += "# TYPE vt_backup_last_photos_missing gauge\nvt_backup_last_photos_missing \(missing ?? 0)\n"
        return out
    }
}
