#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Postgres

/// Packets to and from a loopback port dropped by the kernel (iptables, so root): a silent
/// partition as both ends see it. A proxy that merely stops forwarding cannot stand in for one:
/// its kernel still acknowledges the client's query and keepalive probes, so TCP sees a live peer.
struct PacketDrop {
    let port: Int

    static var available: Bool {
        getuid() == 0 && ["/usr/sbin/iptables", "/sbin/iptables"].contains { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private func rules(_ operation: String) -> [[String]] {
        ["--dport", "--sport"].map { ["iptables", "-w", operation, "INPUT", "-i", "lo", "-p", "tcp", $0, String(port), "-j", "DROP"] }
    }

    func start() throws {
        for rule in rules("-I") {
            let result = try runProcess(["/usr/bin/env"] + rule)
            guard result.status == 0 else { throw ProxyFailure(description: "iptables: \(result.output)") }
        }
    }

    /// Safe to call twice: a rule already gone is not an error here.
    func stop() {
        for rule in rules("-D") { _ = try? runProcess(["/usr/bin/env"] + rule) }
    }
}

@Suite(.tags(.fault)) struct PoolKeepaliveTests {
    /// A pooled connection whose database goes silent mid-query: the query fails as "database
    /// unavailable" within the keepalive bound (without keepalives it hangs for the kernel's 15
    /// minutes), a caller waiting for that connection meanwhile gets a pool timeout that also
    /// counts as unavailable, and once the network heals the pool serves again on a new connection.
    @Test(.enabled(if: PacketDrop.available, "dropping packets needs root and iptables"))
    func aSilentPartitionFailsTheQueryWithinTheKeepaliveBound() throws {
        let (socket, database) = try ListenLinkTests.unixSocketAndDatabase()
        let proxy = try BlackHoleProxy(unixSocket: socket)
        defer { proxy.stop() }
        let pool = PostgresPool(url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=\(database)",
                                maxConnections: 1, acquireTimeout: 2)
        defer { pool.close() }
        let bound = try #require(pool.options.keepalive, "pooled connections have keepalives by default").bound
        #expect(try pool.query("SELECT 1 AS one")[0].decode("one", as: Int.self) == 1)

        let cut = PacketDrop(port: proxy.port)
        try cut.start()
        defer { cut.stop() }
        let started = Date()
        let outcome = Mutex<(error: PostgresError?, seconds: Double)?>(nil)
        Thread.detachNewThread {
            var failure: PostgresError?
            do {
                _ = try pool.query("SELECT 1 AS one")
            } catch {
                failure = error as? PostgresError ?? .connection("\(error)")
            }
            outcome.withLock { $0 = (failure, Date().timeIntervalSince(started)) }
        }
        #expect(eventually { pool.statistics.inUse == 1 }, "the query holds the pool's only connection")

        do {
            try pool.query("SELECT 2")
            Issue.record("a second caller got a connection while the only one hung")
        } catch let error as PostgresError {
            guard case .poolTimeout = error else {
                Issue.record("expected a pool timeout, got \(error)")
                return
            }
            #expect(error.meansDatabaseUnavailable, "a pool wait that timed out counts as the database unavailable")
        }

        // Kernel timers decide this, not the machine's speed; the margin is for a loaded machine.
        let margin = 25.0
        #expect(eventually(timeout: bound + margin) { outcome.withLock { $0 != nil } },
                "the query was still waiting \(bound + margin)s after the cut")
        let result = try #require(outcome.withLock { $0 })
        let error = try #require(result.error, "the query succeeded through a cut network")
        #expect(error.meansDatabaseUnavailable, "\(error)")
        #expect(error.unavailableReason == "the database stopped answering (the connection timed out)", "\(error)")
        #expect(result.seconds < bound + margin)

        cut.stop()
        let healed = Date()
        #expect(eventually(timeout: 20) { (try? pool.query("SELECT 1 AS one")[0].decode("one", as: Int.self)) == 1 },
                "the pool did not serve again after the network healed")
        print("pool behind a silent partition: the query failed after \(String(format: "%.1f", result.seconds))s "
              + "(keepalive bound \(bound)s): \(error) (\"\(error.unavailableReason)\"); "
              + "served again \(String(format: "%.1f", Date().timeIntervalSince(healed)))s after healing")
    }
}
