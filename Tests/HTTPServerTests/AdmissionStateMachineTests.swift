import Testing
@testable import HTTPServer

/// The admission rules on values: shares, rates, holds, the full table and the lifecycle, without a
/// socket or a clock (instants move only when a test says so).
@Suite struct AdmissionStateMachineTests {
    typealias Machine = AdmissionStateMachine
    let t0 = ContinuousClock.now
    static let second = Duration.seconds(1)

    /// Three places, two per address, no rate unless a test sets one, holds of exactly 10 s, and room
    /// for two held and two answered connections.
    func machine(_ configure: (inout Machine.Settings) -> Void = { _ in }) -> Machine {
        var settings = Machine.Settings()
        settings.maxConnections = 3
        settings.maxConnectionsPerAddress = 2
        settings.overShareHold = .seconds(10)
        settings.holdJitter = { 1 }
        settings.trustedProxies = TrustedProxies([AddressRange("10.0.0.1")!])
        configure(&settings)
        var m = Machine(settings: settings)
        m.started(descriptorCap: 2, ticksPerTimeoutCheck: 2)
        return m
    }

    static func refused(_ reason: Machine.Refusal.Reason, _ answer: Machine.Refusal.Answer, report: Int? = nil) -> Machine.Arrival {
        .refuse(Machine.Refusal(reason: reason, answer: answer, report: report))
    }

    @Test func anAddressPastItsShareIsHeldThenReset() {
        var m = machine()
        let busy: (Int) -> Bool = { _ in false }
        #expect(m.arrived(fd: 10, from: "192.0.2.1", now: t0, isIdle: busy) == .admit(1, reclaim: nil))
        #expect(m.arrived(fd: 11, from: "192.0.2.1", now: t0, isIdle: busy) == .admit(2, reclaim: nil))
        #expect(m.arrived(fd: 12, from: "192.0.2.1", now: t0, isIdle: busy) == Self.refused(.perAddress, .held, report: 1))
        #expect(m.arrived(fd: 13, from: "192.0.2.1", now: t0, isIdle: busy) == Self.refused(.perAddress, .held))
        #expect(m.held.map(\.fd) == [12, 13])
        #expect(m.held.allSatisfy { $0.until == t0 + .seconds(10) })
        #expect(m.arrived(fd: 14, from: "192.0.2.1", now: t0, isIdle: busy) == Self.refused(.perAddress, .reset),
                "past the cap of held connections: a reset")
        // Another address has its own share; a trusted proxy has none.
        #expect(m.arrived(fd: 15, from: "192.0.2.2", now: t0, isIdle: busy) == .admit(3, reclaim: nil))
        #expect(m.openConnections == 3)
        #expect(m.accepted == 3)
        // The hold ends: reset, a few at a time as their holds differ.
        #expect(m.tick(now: t0 + .seconds(9)) { _ in false } == .init())
        #expect(m.tick(now: t0 + .seconds(10)) { _ in false } == .init(reset: [12, 13], checkTimeouts: true))
        #expect(m.held.isEmpty)
    }

    @Test func holdsAreJitteredAndNoHoldMeansAReset() {
        for (jitter, seconds) in [(0.5, 5), (1.5, 15)] {
            var m = machine { $0.maxConnectionsPerAddress = 0; $0.holdJitter = { jitter } }
            #expect(m.arrived(fd: 1, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.perAddress, .held, report: 1))
            #expect(m.held.map(\.until) == [t0 + .seconds(seconds)])
        }
        var none = machine { $0.maxConnectionsPerAddress = 0; $0.overShareHold = .zero }
        #expect(none.arrived(fd: 1, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.perAddress, .reset, report: 1))
        #expect(none.held.isEmpty)
    }

    @Test func aTrustedProxyAndOneIPv6NetworkAreCountedAsConfigured() {
        var m = machine { $0.maxConnections = 10 }
        for fd: Int32 in 1...4 {
            if case .refuse = m.arrived(fd: fd, from: "10.0.0.1", now: t0, isIdle: { _ in false }) {
                Issue.record("a trusted proxy carries everyone behind it: no share")
            }
        }
        #expect(m.arrived(fd: 5, from: "2001:db8:1:2::1", now: t0) { _ in false } == .admit(5, reclaim: nil))
        #expect(m.arrived(fd: 6, from: "2001:db8:1:2::2", now: t0) { _ in false } == .admit(6, reclaim: nil))
        #expect(m.arrived(fd: 7, from: "2001:db8:1:2::3", now: t0) { _ in false } == Self.refused(.perAddress, .held, report: 1),
                "one /64 is one address")
        #expect(m.arrived(fd: 8, from: "2001:db8:1:3::1", now: t0) { _ in false } == .admit(7, reclaim: nil))
    }

    @Test func pastTheRateIsAnsweredAndDrainedUntilTheClientHangsUp() {
        var m = machine { $0.newConnectionsPerSecond = 1; $0.newConnectionBurst = 2; $0.maxConnectionsPerAddress = 100; $0.maxConnections = 100 }
        #expect(m.arrived(fd: 1, from: "192.0.2.1", now: t0) { _ in false } == .admit(1, reclaim: nil))
        #expect(m.arrived(fd: 2, from: "192.0.2.1", now: t0) { _ in false } == .admit(2, reclaim: nil))
        #expect(m.arrived(fd: 3, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.rate, .pastRate, report: 1))
        #expect(m.answeredPastRate(fd: 3, now: t0) == true)
        #expect(m.arrived(fd: 4, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.rate, .pastRate))
        #expect(m.answeredPastRate(fd: 4, now: t0 + Self.second / 2) == true)
        #expect(m.arrived(fd: 5, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.rate, .reset),
                "past the cap of answered connections: a reset")
        #expect(m.arrived(fd: 6, from: "192.0.2.9", now: t0) { _ in false } == .admit(3, reclaim: nil), "another address has its own rate")
        // A second later one more token.
        #expect(m.arrived(fd: 7, from: "192.0.2.1", now: t0 + Self.second) { _ in false } == .admit(4, reclaim: nil))
        // Every answered connection is drained each tick; closed once its client hung up, or at its time.
        var asked: [Int32] = []
        #expect(m.tick(now: t0 + Self.second) { asked.append($0); return $0 == 4 } == .init(close: [4]))
        #expect(asked == [3, 4])
        #expect(m.tick(now: t0 + .seconds(2)) { _ in false } == .init(close: [3], checkTimeouts: true))
        #expect(m.answered.isEmpty)
    }

    @Test func aFullTableReclaimsAnIdleConnectionOrRefusesAsBusy() {
        var m = machine()
        for (fd, address) in [(1, "192.0.2.1"), (2, "192.0.2.2"), (3, "192.0.2.3")] {
            #expect(m.arrived(fd: Int32(fd), from: address, now: t0) { _ in false } == .admit(fd, reclaim: nil))
        }
        var asked: Set<Int> = []
        #expect(m.arrived(fd: 4, from: "192.0.2.4", now: t0) { asked.insert($0); return false } == Self.refused(.full, .busy, report: 1))
        #expect(asked == [1, 2, 3], "every open connection was considered")
        #expect(m.arrived(fd: 5, from: "192.0.2.4", now: t0) { $0 == 2 } == .admit(4, reclaim: 2), "never one at work")
        #expect(m.openConnections == 4, "the reclaimed one counts until it closes")
        m.closed(2)
        #expect(m.openConnections == 3)
    }

    @Test func aClosedConnectionFreesItsPlaceAndItsAddressShareOnce() {
        var m = machine()
        _ = m.arrived(fd: 1, from: "192.0.2.1", now: t0) { _ in false }
        _ = m.arrived(fd: 2, from: "192.0.2.1", now: t0) { _ in false }
        m.closed(1)
        m.closed(1)
        m.closed(99)
        #expect(m.openConnections == 1)
        #expect(m.arrived(fd: 3, from: "192.0.2.1", now: t0) { _ in false } == .admit(3, reclaim: nil))
        #expect(m.arrived(fd: 4, from: "192.0.2.1", now: t0) { _ in false } == Self.refused(.perAddress, .held, report: 1),
                "closing twice freed one place, not two")
    }

    @Test func refusalsAreReportedOnceAnInterval() {
        var m = machine { $0.maxConnectionsPerAddress = 0; $0.overShareHold = .zero }
        func report(at now: ContinuousClock.Instant) -> Int?? {
            guard case .refuse(let refusal) = m.arrived(fd: 1, from: "192.0.2.1", now: now, isIdle: { _ in false }) else { return nil }
            return .some(refusal.report)
        }
        #expect(report(at: t0) == .some(1), "the first is reported at once")
        #expect(report(at: t0 + .milliseconds(100)) == .some(nil))
        #expect(report(at: t0 + .milliseconds(900)) == .some(nil))
        #expect(report(at: t0 + Self.second) == .some(3), "with the count since the last report")
        #expect(report(at: t0 + Self.second * 3 / 2) == .some(nil))
    }

    @Test func timeoutsAreCheckedEveryFewTicks() {
        var m = machine()
        let checks = (1...6).map { i in m.tick(now: t0 + .milliseconds(100 * i)) { _ in false }.checkTimeouts }
        #expect(checks == [false, true, false, true, false, true])
    }

    /// Every event in each lifecycle state: accepting, paused (out of descriptors), stopping.
    @Test(arguments: ["accepting", "paused", "stopping"]) func everyEventInEveryLifecycleState(_ name: String) {
        func start() -> Machine {
            var m = machine { $0.maxConnectionsPerAddress = 1; $0.newConnectionsPerSecond = 1; $0.newConnectionBurst = 1 }
            _ = m.arrived(fd: 1, from: "192.0.2.1", now: t0) { _ in false }
            _ = m.arrived(fd: 2, from: "192.0.2.1", now: t0) { _ in false }  // held
            _ = m.arrived(fd: 3, from: "192.0.2.2", now: t0) { _ in false }
            _ = m.arrived(fd: 4, from: "192.0.2.2", now: t0) { _ in false }  // held
            m.closed(2)
            _ = m.arrived(fd: 5, from: "192.0.2.2", now: t0) { _ in false }  // answered past the rate
            _ = m.answeredPastRate(fd: 5, now: t0)
            switch name {
            case "paused": #expect(m.outOfDescriptors() == true)
            case "stopping": #expect(m.stop() == .init(resumeListener: false, reset: [2, 4, 5]))
            default: break
            }
            return m
        }
        let stopping = name == "stopping"
        var m = start()
        #expect(m.lifecycle == (stopping ? .stopping : name == "paused" ? .paused : .accepting))

        // A connection arrives: admitted unless stopping (then refused as busy).
        #expect(m.arrived(fd: 6, from: "192.0.2.3", now: t0) { _ in false }
                == (stopping ? Self.refused(.full, .busy) : .admit(3, reclaim: nil)))
        // A rate answer sent: kept unless stopping (then reset).
        m = start()
        #expect(m.answeredPastRate(fd: 7, now: t0) == !stopping)
        // Out of descriptors: a pause only from accepting.
        m = start()
        #expect(m.outOfDescriptors() == (name == "accepting"))
        #expect(m.lifecycle == (stopping ? .stopping : .paused))
        // The pause is over: a resume only from paused.
        m = start()
        #expect(m.resumeDue() == (name == "paused"))
        #expect(m.lifecycle == (stopping ? .stopping : .accepting))
        // Stop: held and answered handed back for a reset, the listener resumed if it was paused.
        m = start()
        #expect(m.stop() == (stopping ? nil : .init(resumeListener: name == "paused", reset: [2, 4, 5])))
        #expect(m.lifecycle == .stopping)
        #expect(m.held.isEmpty && m.answered.isEmpty)
        // A tick: held and answered come back when due (none are left once stopping).
        m = start()
        #expect(m.tick(now: t0 + .seconds(10)) { _ in false } == .init(reset: stopping ? [] : [2, 4], close: stopping ? [] : [5]))
        // A connection closes: its place is free in every state.
        m = start()
        let open = m.openConnections
        m.closed(1)
        #expect(m.openConnections == open - 1)
    }
}
