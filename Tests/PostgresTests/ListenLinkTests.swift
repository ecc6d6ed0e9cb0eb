#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Postgres

/// The LISTEN link's rules on values: backoff, deadlines and reconnects without a clock or a socket.
@Suite struct ListenLinkStateMachineTests {
    /// An instant `offset` after the test's start.
    static let t0 = ContinuousClock.now
    func at(_ offset: Duration) -> ContinuousClock.Instant { Self.t0 + offset }
    func machine() -> ListenLinkStateMachine {
        ListenLinkStateMachine(settings: .init(checkInterval: .seconds(15), checkDeadline: .seconds(3),
                                               firstBackoff: .milliseconds(100), maxBackoff: .seconds(2)))
    }

    @Test func aQuietLinkIsCheckedAndAMissedDeadlineIsALostConnection() {
        var m = machine()
        #expect(m.start() == .init(connect: true))
        #expect(m.connected(now: at(.zero)) == .init(wakeAt: at(.seconds(15))), "the first connection is no reconnect")
        #expect(m.isConnected)
        // Anything heard restarts the quiet period.
        #expect(m.heard(now: at(.seconds(10))) == .init())
        #expect(m.timerFired(now: at(.seconds(15))) == .init(wakeAt: at(.seconds(25))))
        #expect(m.timerFired(now: at(.seconds(25))) == .init(sendCheck: true, wakeAt: at(.seconds(28))))
        #expect(m.state == .checking(deadline: at(.seconds(28))))
        #expect(m.timerFired(now: at(.seconds(27))) == .init(wakeAt: at(.seconds(28))))
        // The answer in time: listening again.
        #expect(m.checkAnswered(now: at(.seconds(27))) == .init(wakeAt: at(.seconds(42))))
        #expect(m.timerFired(now: at(.seconds(42))).sendCheck)
        // No answer by the deadline: dropped, and the first retry comes quickly.
        #expect(m.timerFired(now: at(.seconds(45))) == .init(drop: true, wakeAt: at(.milliseconds(45_100))))
        #expect(!m.isConnected)
        #expect(m.checkAnswered(now: at(.seconds(46))) == .init(), "a late answer changes nothing")
        #expect(m.timerFired(now: at(.milliseconds(45_100))) == .init(connect: true))
        #expect(m.connected(now: at(.seconds(46))) == .init(announceReconnect: true, wakeAt: at(.seconds(61))),
                "after a reconnect, whoever listens re-reads what it shows")
    }

    @Test func failedAttemptsBackOffUpToTheCap() {
        var m = machine()
        _ = m.start()
        _ = m.connected(now: at(.zero))
        var now = at(.seconds(1))
        var actions = m.connectionLost(now: now)
        #expect(actions.drop)
        var delays: [Duration] = []
        for _ in 0..<7 {
            let at = actions.wakeAt!
            delays.append(at - now)
            now = at
            #expect(m.timerFired(now: now) == .init(connect: true))
            #expect(m.connectionLost(now: now) == .init(), "no connection to lose while connecting")
            actions = m.connectFailed(now: now)
        }
        #expect(delays.map { $0 / (.milliseconds(100)) } == [1, 2, 4, 8, 16, 20, 20] as [Double])
        #expect(m.connected(now: now) == .init(drop: true), "not connecting while it waits: a stray success is closed")
        now = actions.wakeAt!
        #expect(m.timerFired(now: now).connect)
        #expect(m.connected(now: now).announceReconnect)
    }

    @Test func lostAndStoppedInEveryState() {
        var m = machine()
        #expect(m.timerFired(now: at(.zero)) == .init(), "not started: nothing to do")
        _ = m.start()
        #expect(m.timerFired(now: at(.zero)) == .init(), "connecting: the attempt has its own timeout")
        #expect(m.stop() == .init())
        // An attempt that succeeds after stop is closed, not adopted.
        #expect(m.connected(now: at(.nanoseconds(1))) == .init(drop: true))
        #expect(m.connectFailed(now: at(.nanoseconds(1))) == .init())
        #expect(m.timerFired(now: at(.seconds(100))) == .init())

        var listening = machine()
        _ = listening.start()
        _ = listening.connected(now: at(.zero))
        #expect(listening.connectionLost(now: at(.nanoseconds(1))).drop)
        #expect(listening.stop() == .init(), "nothing left to drop")

        var checking = machine()
        _ = checking.start()
        _ = checking.connected(now: at(.zero))
        _ = checking.timerFired(now: at(.seconds(15)))
        #expect(checking.heard(now: at(.seconds(16))) == .init(), "a notification is not the check's answer")
        #expect(checking.stop() == .init(drop: true))
        #expect(checking.state == .stopped)
    }
}

struct ProxyFailure: Error, CustomStringConvertible { let description: String }

/// A loopback TCP proxy to the test cluster's unix socket that can stop forwarding without closing
/// anything: what a NAT or firewall that forgot the flow looks like from both ends.
final class BlackHoleProxy: @unchecked Sendable {
    let port: Int
    private let listenFD: Int32
    private let target: String
    private let blackHoled = Atomic<Bool>(false)
    private let open = Mutex<[Int32]>([])

    init(unixSocket target: String) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else { throw ProxyFailure(description: "proxy: cannot listen") }
        listenFD = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var isBlackHoled: Bool {
        get { blackHoled.load(ordering: .relaxed) }
        set { blackHoled.store(newValue, ordering: .relaxed) }
    }

    func stop() {
        shutdown(listenFD, Int32(SHUT_RDWR))
        for fd in open.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listenFD, nil, nil)
            if client < 0 { return }
            let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, byte) in target.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else { close(client); close(server); continue }
            open.withLock { $0 += [client, server] }
            Thread.detachNewThread { [self] in pump(from: client, to: server) }
            Thread.detachNewThread { [self] in pump(from: server, to: client) }
        }
    }

    /// While black-holed, what arrives is read and dropped: neither side sees an error or an EOF.
    private func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            if isBlackHoled { continue }
            var offset = 0
            while offset < n {
                let w = buffer.withUnsafeBytes { send(to, $0.baseAddress! + offset, n - offset, Int32(MSG_NOSIGNAL)) }
                if w <= 0 { break }
                offset += w
            }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}

@Suite(.tags(.fault)) struct ListenLinkTests {
    /// The test cluster's unix socket and database, from TEST_DATABASE_URL
    /// (postgresql:///NAME?host=DIR&user=postgres).
    static func unixSocketAndDatabase() throws -> (socket: String, database: String) {
        let url = try TestDatabase.adminURL()
        guard let components = URLComponents(string: url),
              let host = components.queryItems?.first(where: { $0.name == "host" })?.value else {
            throw ProxyFailure(description: "TEST_DATABASE_URL names no unix socket directory")
        }
        let port = components.port ?? 5432
        return ("\(host)/.s.PGSQL.\(port)", String(components.path.dropFirst()))
    }

    @Test func liveUpdatesResumeSoonAfterABlackHoledNetworkHeals() throws {
        let (socket, database) = try Self.unixSocketAndDatabase()
        let proxy = try BlackHoleProxy(unixSocket: socket)
        defer { proxy.stop() }
        let deadline = 1.0
        let listener = PostgresListener(url: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=\(database)",
                                        healthCheckInterval: .milliseconds(500), healthCheckDeadline: .seconds(deadline), maxBackoff: .milliseconds(500))
        let channel = "blackhole_\(UUID().uuidString.prefix(6).lowercased())"
        let received = Mutex<[String]>([])
        let reconnects = Mutex(0)
        try listener.listen(channel) { payload in received.withLock { $0.append(payload) } }
        listener.onReconnect { reconnects.withLock { $0 += 1 } }
        try listener.start()
        defer { listener.stop() }
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 2)

        try pool.notify(channel, payload: "before")
        #expect(eventually { received.withLock { $0 } == ["before"] })

        proxy.isBlackHoled = true
        try pool.notify(channel, payload: "lost")
        // The link notices within interval + deadline, and never blocks its queue meanwhile.
        var longestCall = 0.0
        let cut = Date()
        #expect(eventually(timeout: 10) {
            let start = Date()
            let connected = listener.isConnected
            longestCall = max(longestCall, Date().timeIntervalSince(start))
            return !connected
        })
        let noticedAfter = Date().timeIntervalSince(cut)
        // Stay cut a while: reconnect attempts hang in the proxy and must not block the listener.
        let hold = Date(timeIntervalSinceNow: 3)
        while Date() < hold {
            let start = Date()
            _ = listener.isConnected
            _ = listener.state
            longestCall = max(longestCall, Date().timeIntervalSince(start))
            usleep(50_000)
        }
        #expect(longestCall < deadline, "the listener's queue blocked for \(longestCall)s")
        #expect(reconnects.withLock { $0 } == 0)

        proxy.isBlackHoled = false
        let healed = Date()
        var recovered: Double?
        var n = 0
        while Date().timeIntervalSince(healed) < 15 {
            n += 1
            try pool.notify(channel, payload: "after \(n)")
            if received.withLock({ $0.contains { $0.hasPrefix("after") } }) {
                recovered = Date().timeIntervalSince(healed)
                break
            }
            usleep(100_000)
        }
        #expect(reconnects.withLock { $0 } >= 1, "pages are told to re-read after the reconnect")
        let recovery = try #require(recovered, "live updates never resumed")
        #expect(recovery < 10, "healthy again within a few health checks, with room for a busy machine")
        print("LISTEN black hole: noticed after \(String(format: "%.2f", noticedAfter))s, "
              + "updates resumed \(String(format: "%.2f", recovery))s after healing, "
              + "longest blocking call \(String(format: "%.3f", longestCall))s")
    }
}
