// Pool round trips: the same query pgbench -S runs (one row of pgbench_accounts by key), through
// PostgresPool from CALLERS threads for SECONDS. Usage: bench-db URL CALLERS SECONDS
// Prints "tps=N p99_ms=N" so script/bench can set it beside pgbench in the same run.
import Foundation
import Postgres
import Synchronization

let arguments = CommandLine.arguments
let url = arguments[1]
let callers = Int(arguments[2]) ?? 1
let seconds = Double(arguments[3]) ?? 10

let pool = PostgresPool(url: url, maxConnections: callers, acquireTimeout: 30)
let accounts: Int = try pool.query("SELECT count(*)::int AS n FROM pgbench_accounts")[0].decode("n")
let deadline = Date(timeIntervalSinceNow: seconds)
let latencies = Mutex<[Double]>([])
let group = DispatchGroup()
for caller in 0..<callers {
    group.enter()
    Thread.detachNewThread {
        var mine: [Double] = []
        var generator = SystemRandomNumberGenerator()
        while Date() < deadline {
            let started = DispatchTime.now().uptimeNanoseconds
            do {
                _ = try pool.query("SELECT abalance FROM pgbench_accounts WHERE aid = $1",
                                   [Int.random(in: 1...accounts, using: &generator)])
            } catch {
                FileHandle.standardError.write(Data("caller \(caller): \(error)\n".utf8))
                break
            }
            mine.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
        }
        latencies.withLock { $0 += mine }
        group.leave()
    }
}
group.wait()
let all = latencies.withLock { $0.sorted() }
let p99 = all.isEmpty ? 0 : all[min(all.count - 1, Int(Double(all.count) * 0.99))]
print(String(format: "tps=%.0f p99_ms=%.2f", Double(all.count) / seconds, p99))
