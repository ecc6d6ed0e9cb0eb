import Testing
@testable import Postgres

/// The pool's rules on values: every event in every state, no database, no threads, no sleep.
@Suite struct PoolStateMachineTests {
    struct C: Equatable { let n: Int }
    typealias Machine = PoolStateMachine<C>
    static let t0 = ContinuousClock.now
    static let timeout = Duration.seconds(5)

    /// A state to start from, with the connections it has lent and the waiter it has in line.
    struct Start {
        let name: String
        var machine: Machine
        var lent: [C] = []
        var waiter: Machine.WaiterID?
    }

    /// Two places. room: one lent, one free. idle: one lent, one idle. full: both lent. line: both
    /// lent and one caller waiting. closed: both lent when the pool closed.
    static let names = ["room", "idle", "full", "line", "closed"]

    static func start(_ name: String) -> Start {
        func lending(_ count: Int) -> Start {
            var m = Machine(maxConnections: 2)
            for _ in 0..<count { #expect(m.acquire(now: t0, timeout: timeout) == .connect) }
            return Start(name: "", machine: m, lent: (0..<count).map { C(n: $0 + 1) })
        }
        var room = lending(1)
        room = Start(name: "room", machine: room.machine, lent: room.lent)
        var idle = lending(2)
        _ = idle.machine.released(C(n: 2), healthy: true)
        idle = Start(name: "idle", machine: idle.machine, lent: [C(n: 1)])
        var full = lending(2)
        full = Start(name: "full", machine: full.machine, lent: full.lent)
        var line = lending(2)
        guard case .wait(let id, _) = line.machine.acquire(now: t0, timeout: timeout) else { fatalError() }
        line = Start(name: "line", machine: line.machine, lent: line.lent, waiter: id)
        var closed = lending(2)
        _ = closed.machine.close()
        closed = Start(name: "closed", machine: closed.machine, lent: closed.lent)
        return [room, idle, full, line, closed].first { $0.name == name }!
    }

    @Test(arguments: names) func acquire(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        let before = (open: m.open, lent: m.lent, waiting: m.waiting, idle: m.idle.count)
        let answer = m.acquire(now: Self.t0, timeout: Self.timeout)
        switch start.name {
        case "room":
            #expect(answer == .connect)
            #expect(m.open == before.open + 1, "the new connection's place is counted before it connects")
        case "idle":
            #expect(answer == .use(C(n: 2)))
            #expect(m.idle.isEmpty)
            #expect(m.open == before.open)
        case "full", "line":
            guard case .wait(_, let deadline) = answer else { Issue.record("\(answer)"); return }
            #expect(deadline == Self.t0 + Self.timeout)
            #expect(m.waiting == before.waiting + 1, "at the end of the line")
            #expect(m.open == before.open)
        default:
            #expect(answer == .closed)
            #expect(m.lent == before.lent, "a refused caller borrowed nothing")
            return
        }
        #expect(m.lent == before.lent + 1)
    }

    @Test(arguments: names) func releasedHealthy(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        let open = m.open
        let handoff = m.released(start.lent[0], healthy: true)
        switch start.name {
        case "room", "idle", "full":
            #expect(handoff == .init())
            #expect(m.idle.last == start.lent[0])
            #expect(m.open == open)
        case "line":
            #expect(handoff == .init(wake: start.waiter), "straight to the longest waiter")
            #expect(m.idle.isEmpty)
            #expect(m.waiting == 0)
            #expect(m.waitEnded(start.waiter!) == .connection(start.lent[0]))
            #expect(m.open == open)
        default:
            #expect(handoff == .init(close: start.lent[0]), "a closed pool closes what comes back")
            #expect(m.open == open - 1)
            #expect(m.idle.isEmpty)
        }
    }

    @Test(arguments: names) func releasedBroken(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        let open = m.open, idle = m.idle
        let handoff = m.released(start.lent[0], healthy: false)
        if start.name == "line" {
            #expect(handoff == .init(wake: start.waiter, close: start.lent[0]))
            #expect(m.waitEnded(start.waiter!) == .place, "the waiter opens a connection in the broken one's place")
            #expect(m.open == open)
        } else {
            #expect(handoff == .init(close: start.lent[0]))
            #expect(m.open == open - 1, "the place is given up")
        }
        #expect(m.idle == idle, "a broken connection is never kept")
    }

    @Test(arguments: names) func connectFailed(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        let open = m.open
        let handoff = m.connectFailed()
        if start.name == "line" {
            #expect(handoff == .init(wake: start.waiter))
            #expect(m.waitEnded(start.waiter!) == .place, "the next in line tries for itself: the database may be back")
            #expect(m.open == open)
        } else {
            #expect(handoff == .init())
            #expect(m.open == open - 1)
        }
    }

    @Test(arguments: names) func idleConnectionBroken(_ name: String) {
        let start = Self.start(name)
        let m = start.machine
        let open = m.open
        #expect(m.idleConnectionBroken(C(n: 9)) == .init(close: C(n: 9)))
        #expect(m.open == open, "a new connection takes the broken one's place")
    }

    @Test(arguments: names) func waitEndedWithNothingHandedOver(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        guard let waiter = start.waiter else {
            // A waiter from elsewhere (already served): nothing changes.
            var other = Machine(maxConnections: 1)
            _ = other.acquire(now: Self.t0, timeout: Self.timeout)
            guard case .wait(let stranger, _) = other.acquire(now: Self.t0, timeout: Self.timeout) else { return }
            let (open, waiting, idle) = (m.open, m.waiting, m.idle)
            #expect(m.waitEnded(stranger) == nil)
            #expect(m.open == open && m.waiting == waiting && m.idle == idle)
            return
        }
        #expect(m.waitEnded(waiter) == nil, "timed out")
        #expect(m.waiting == 0, "and left the line")
        #expect(m.released(start.lent[0], healthy: true) == .init(), "nobody left to hand it to")
        #expect(m.idle == [start.lent[0]])
    }

    @Test(arguments: names) func close(_ name: String) {
        let start = Self.start(name)
        var m = start.machine
        let open = m.open, idle = m.idle
        let (closing, woken) = m.close()
        #expect(m.lifecycle == .closed)
        #expect(closing == (start.name == "closed" ? [] : idle))
        #expect(m.idle.isEmpty)
        #expect(m.open == open - closing.count, "lent connections still count until they come back")
        if let waiter = start.waiter {
            #expect(woken == [waiter])
            #expect(m.waitEnded(waiter) == .closed)
        } else {
            #expect(woken.isEmpty)
        }
        for connection in start.lent { _ = m.released(connection, healthy: true) }
        #expect(m.open == 0)
        #expect(m.acquire(now: Self.t0, timeout: Self.timeout) == .closed)
    }

    @Test func theLineIsServedInOrderAndNewcomersQueueBehindIt() {
        var m = Machine(maxConnections: 1)
        #expect(m.acquire(now: Self.t0, timeout: Self.timeout) == .connect)
        var line: [Machine.WaiterID] = []
        for i in 0..<3 {
            guard case .wait(let id, let deadline) = m.acquire(now: Self.t0 + .seconds(i), timeout: Self.timeout) else {
                Issue.record("expected to wait"); return
            }
            #expect(deadline == Self.t0 + .seconds(i) + Self.timeout)
            line.append(id)
        }
        #expect(Set(line).count == 3)
        #expect(m.released(C(n: 1), healthy: true) == .init(wake: line[0]))
        // A caller arriving before the woken one collects still waits behind the rest.
        guard case .wait(let late, _) = m.acquire(now: Self.t0, timeout: Self.timeout) else { Issue.record("jumped the line"); return }
        #expect(m.waitEnded(line[0]) == .connection(C(n: 1)))
        #expect(m.released(C(n: 1), healthy: true) == .init(wake: line[1]))
        #expect(m.waitEnded(line[2]) == nil, "the third gave up")
        #expect(m.waitEnded(line[1]) == .connection(C(n: 1)))
        #expect(m.released(C(n: 1), healthy: false) == .init(wake: late, close: C(n: 1)))
        #expect(m.waitEnded(late) == .place)
        #expect(m.connectFailed() == .init(), "nobody waits: the place is given up")
        #expect(m.open == 0)
        #expect(m.lent == 5, "every caller that was not refused counts, the one that timed out too")
    }

    @Test func aGrantThatRacesTheDeadlineWins() {
        var m = Machine(maxConnections: 1)
        _ = m.acquire(now: Self.t0, timeout: Self.timeout)
        guard case .wait(let id, _) = m.acquire(now: Self.t0, timeout: Self.timeout) else { Issue.record("expected to wait"); return }
        #expect(m.released(C(n: 1), healthy: true) == .init(wake: id))
        #expect(m.waitEnded(id) == .connection(C(n: 1)), "handed over as the wait timed out: the connection is used, never lost")
        #expect(m.waitEnded(id) == nil, "collected once")
        #expect(m.open == 1)
    }
}
