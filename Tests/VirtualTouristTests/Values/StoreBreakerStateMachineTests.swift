import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The store breaker's rules on values: every event in every state, no store, no threads, no sleep.
@Suite struct StoreBreakerStateMachineTests {
    typealias Machine = StoreBreakerStateMachine
    static let t0 = ContinuousClock.now

    static var settings: Machine.Settings {
        var s = Machine.Settings()
        s.coolDown = .seconds(5)
        s.maxCoolDown = .seconds(12)
        s.readSlots = 2
        s.readSlotWait = .seconds(2)
        return s
    }

    /// A state to start from at t0, with the tickets it has out.
    struct Start {
        var machine = Machine(settings: StoreBreakerStateMachineTests.settings)
        var tickets: [Machine.Ticket] = []
    }

    /// closed: nothing in flight. full: both read slots taken. open: an outage at t0 (cooling
    /// down until t0 + 5 s). probing: the cool-down over, one read probing, one read from before
    /// the outage still out.
    static let names = ["closed", "full", "open", "probing"]

    static func start(_ name: String) -> Start {
        var s = Start()
        func call(_ kind: Machine.Kind, at t: ContinuousClock.Instant = t0) -> Machine.Ticket {
            guard case (.call(let ticket), nil) = s.machine.admit(kind, now: t) else { fatalError("not admitted") }
            return ticket
        }
        switch name {
        case "closed": break
        case "full": s.tickets = [call(.read), call(.read)]
        case "open":
            let w = call(.write)
            #expect(s.machine.finished(w, .outage("S3 PUT: timed out"), now: t0) == .opened(reason: "S3 PUT: timed out", reads: true))
        case "probing":
            let old = call(.read)
            let w = call(.write)
            _ = s.machine.finished(w, .outage("EIO"), now: t0)
            let probe = call(.read, at: t0 + .seconds(5))
            #expect(probe.probe)
            s.tickets = [old, probe]
        default: fatalError()
        }
        return s
    }

    @Test(arguments: names) func aReadAsksNow(_ name: String) {
        var s = Self.start(name)
        let (admission, change) = s.machine.admit(.read, now: Self.t0 + .seconds(1))
        switch name {
        case "closed":
            guard case .call(let t) = admission else { Issue.record("\(admission)"); return }
            #expect(!t.probe && s.machine.readsInFlight == 1 && change == nil)
        case "full":
            #expect(admission == .wait(until: Self.t0 + .seconds(3)) && change == nil)
        case "open":
            #expect(admission == .refuse(retryAfter: .seconds(4)) && change == nil)
        case "probing":
            // The probe is out: everyone else is refused, the probe is not doubled.
            #expect(admission == .refuse(retryAfter: .seconds(5)) && change == nil)
        default: break
        }
    }

    @Test(arguments: names) func aWriteAsksNow(_ name: String) {
        var s = Self.start(name)
        let (admission, _) = s.machine.admit(.write, now: Self.t0 + .seconds(1))
        switch name {
        case "closed", "full":
            // Writes do not take read slots.
            guard case .call(let t) = admission else { Issue.record("\(name): \(admission)"); return }
            #expect(!t.probe)
        case "open": #expect(admission == .refuse(retryAfter: .seconds(4)))
        case "probing": #expect(admission == .refuse(retryAfter: .seconds(5)))
        default: break
        }
    }

    /// After the cool-down the first caller probes, the next is refused.
    @Test(arguments: names) func aCallAfterTheCoolDown(_ name: String) {
        var s = Self.start(name)
        let at = Self.t0 + .seconds(6)
        let first = s.machine.admit(.write, now: at).0, second = s.machine.admit(.write, now: at).0
        switch name {
        case "closed", "full":
            guard case .call(let a) = first, case .call(let b) = second else { Issue.record("\(first) \(second)"); return }
            #expect(!a.probe && !b.probe)
        case "open":
            guard case .call(let probe) = first else { Issue.record("\(first)"); return }
            #expect(probe.probe && s.machine.state == .probing(coolDown: .seconds(5), reads: true))
            #expect(second == .refuse(retryAfter: .seconds(5)))
        case "probing":
            #expect(first == .refuse(retryAfter: .seconds(5)) && second == first)
        default: break
        }
    }

    /// A read that waited the whole `readSlotWait` for a slot: the reads ahead hang.
    @Test(arguments: names) func aReadWaitedForASlot(_ name: String) {
        var s = Self.start(name)
        let asked = Self.t0 + .seconds(1)
        let (admission, change) = s.machine.admit(.read, now: asked + .seconds(2), waitingSince: asked)
        switch name {
        case "closed":
            guard case .call = admission else { Issue.record("\(admission)"); return }
        case "full":
            #expect(admission == .refuse(retryAfter: .seconds(5)))
            #expect(change == .opened(reason: "2 reads of the store did not end within 2 s", reads: true))
            #expect(s.machine.state == .open(until: asked + .seconds(7), coolDown: .seconds(5), reads: true))
            // The slot freed just before the deadline: no outage.
            var again = Self.start(name)
            _ = again.machine.finished(again.tickets[0], .answered, now: asked + .milliseconds(1999))
            guard case (.call, nil) = again.machine.admit(.read, now: asked + .seconds(2), waitingSince: asked) else {
                Issue.record("a freed slot must be taken"); return
            }
        case "open": #expect(admission == .refuse(retryAfter: .seconds(2)) && change == nil)
        case "probing": #expect(admission == .refuse(retryAfter: .seconds(5)) && change == nil)
        default: break
        }
    }

    @Test(arguments: names) func aCallEndsAnswered(_ name: String) {
        var s = Self.start(name)
        let at = Self.t0 + .seconds(7)
        switch name {
        case "closed":
            guard case (.call(let t), _) = s.machine.admit(.read, now: Self.t0) else { return }
            #expect(s.machine.finished(t, .answered, now: at) == nil)
            #expect(s.machine.isClosed && s.machine.readsInFlight == 0)
        case "full":
            #expect(s.machine.finished(s.tickets[0], .answered, now: at) == nil)
            #expect(s.machine.readsInFlight == 1)
        case "open":
            // Nothing is out; an answer seen outside a call (the file store's open) before the
            // cool-down ends changes nothing, after it closes the breaker.
            #expect(s.machine.seen(.answered, now: Self.t0 + .seconds(1)) == nil)
            #expect(s.machine.seen(.answered, now: at) == .closed(after: .seconds(7)))
            #expect(s.machine.isClosed && s.machine.outage == nil)
        case "probing":
            // An old read answering proves nothing about now; the probe's answer closes.
            #expect(s.machine.finished(s.tickets[0], .answered, now: at) == nil)
            #expect(s.machine.state == .probing(coolDown: .seconds(5), reads: true))
            #expect(s.machine.finished(s.tickets[1], .answered, now: at) == .closed(after: .seconds(7)))
            #expect(s.machine.isClosed && s.machine.readsInFlight == 0)
        default: break
        }
    }

    @Test(arguments: names) func aCallEndsInAnOutage(_ name: String) {
        var s = Self.start(name)
        let at = Self.t0 + .seconds(7)
        switch name {
        case "closed":
            guard case (.call(let t), _) = s.machine.admit(.write, now: Self.t0) else { return }
            #expect(s.machine.finished(t, .outage("HTTP 503 SlowDown"), now: at) == .opened(reason: "HTTP 503 SlowDown", reads: true))
            #expect(s.machine.state == .open(until: at + .seconds(5), coolDown: .seconds(5), reads: true))
        case "full":
            #expect(s.machine.finished(s.tickets[0], .outage("timed out"), now: at) == .opened(reason: "timed out", reads: true))
            // The other read ends in the same outage: already open, nothing new.
            #expect(s.machine.finished(s.tickets[1], .outage("timed out"), now: at + .seconds(1)) == nil)
            #expect(s.machine.state == .open(until: at + .seconds(5), coolDown: .seconds(5), reads: true) && s.machine.readsInFlight == 0)
        case "open":
            #expect(s.machine.seen(.outage("EIO"), now: at) == nil)
            #expect(s.machine.state == .open(until: Self.t0 + .seconds(5), coolDown: .seconds(5), reads: true))
        case "probing":
            #expect(s.machine.finished(s.tickets[0], .outage("old"), now: at) == nil)
            // The probe fails: twice the cool-down, then capped at maxCoolDown (12 s).
            #expect(s.machine.finished(s.tickets[1], .outage("still down"), now: at) == nil)
            #expect(s.machine.state == .open(until: at + .seconds(10), coolDown: .seconds(10), reads: true))
            #expect(s.machine.outage?.since == Self.t0 && s.machine.outage?.reason == "still down")
            guard case (.call(let probe), _) = s.machine.admit(.write, now: at + .seconds(10)) else { Issue.record("no probe"); return }
            _ = s.machine.finished(probe, .outage("still down"), now: at + .seconds(10))
            #expect(s.machine.state == .open(until: at + .seconds(22), coolDown: .seconds(12), reads: true))
        default: break
        }
    }

    /// What the event loop asks: never takes the probe's turn.
    @Test(arguments: names) func theEventLoopAsks(_ name: String) {
        let s = Self.start(name)
        let soon = s.machine.refusal(now: Self.t0 + .seconds(1)), later = s.machine.refusal(now: Self.t0 + .seconds(6))
        switch name {
        case "closed", "full": #expect(soon == nil && later == nil)
        case "open": #expect(soon == .seconds(4) && later == nil)
        case "probing": #expect(soon == .seconds(5) && later == .seconds(5))
        default: break
        }
        #expect(s.machine.state == Self.start(name).machine.state)
    }

    /// A full or read-only store: writes wait, photos are still read, until a read fails too.
    @Test func aStoreThatOnlyCannotWrite() {
        var m = Machine(settings: Self.settings)
        guard case (.call(let put), _) = m.admit(.write, now: Self.t0) else { Issue.record("no call"); return }
        #expect(m.finished(put, .writeOutage("EROFS"), now: Self.t0) == .opened(reason: "EROFS", reads: false))
        #expect(m.refusal(now: Self.t0 + .seconds(1)) == nil && !m.readsRefused && !m.isClosed)
        #expect(m.admit(.write, now: Self.t0 + .seconds(1)).0 == .refuse(retryAfter: .seconds(4)))
        guard case (.call(let read), nil) = m.admit(.read, now: Self.t0 + .seconds(1)) else { Issue.record("reads must go on"); return }
        #expect(!read.probe)
        // A read answering does not close it: only a write can tell the store takes writes again.
        #expect(m.finished(read, .answered, now: Self.t0 + .seconds(6)) == nil)
        #expect(m.state == .open(until: Self.t0 + .seconds(5), coolDown: .seconds(5), reads: false))
        guard case (.call(let probe), nil) = m.admit(.write, now: Self.t0 + .seconds(6)), probe.probe else { Issue.record("no probe"); return }
        #expect(m.finished(probe, .writeOutage("EROFS"), now: Self.t0 + .seconds(6)) == nil)
        #expect(m.state == .open(until: Self.t0 + .seconds(16), coolDown: .seconds(10), reads: false))
        // Now a read fails: reads are refused too, from the same outage.
        guard case (.call(let failing), nil) = m.admit(.read, now: Self.t0 + .seconds(7)) else { Issue.record("no read"); return }
        #expect(m.finished(failing, .outage("EIO"), now: Self.t0 + .seconds(7)) == .opened(reason: "EIO", reads: true))
        #expect(m.refusal(now: Self.t0 + .seconds(8)) == .seconds(8) && m.outage?.since == Self.t0)
        guard case (.call(let last), nil) = m.admit(.read, now: Self.t0 + .seconds(16)), last.probe else { Issue.record("no probe"); return }
        #expect(m.finished(last, .answered, now: Self.t0 + .seconds(17)) == .closed(after: .seconds(17)))
        #expect(m.isClosed && m.readsInFlight == 0)
    }

    // Found by StoreBreakerExplorationTests (the shrunk sequences, as tests).

    /// A call given up at its deadline is finished then, and again when it ends: counted once.
    @Test func aTicketFinishedTwiceCountsOnce() {
        var m = Machine(settings: Self.settings)
        guard case (.call(let read), _) = m.admit(.read, now: Self.t0) else { Issue.record("no call"); return }
        #expect(m.finished(read, .answered, now: Self.t0) == nil)
        #expect(m.finished(read, .outage("late"), now: Self.t0 + .seconds(1)) == nil)
        #expect(m.isClosed && m.readsInFlight == 0)
        // Not a slot freed twice: two reads fill the two slots, a third waits.
        _ = m.admit(.read, now: Self.t0 + .seconds(1))
        _ = m.admit(.read, now: Self.t0 + .seconds(1))
        #expect(m.admit(.read, now: Self.t0 + .seconds(1)).0 == .wait(until: Self.t0 + .seconds(3)))
    }

    /// Open for writes only and a write probing: a read that fails stops the reads now.
    @Test func aReadFailingWhileAWriteProbesStopsReads() {
        var m = Machine(settings: Self.settings)
        #expect(m.seen(.writeOutage("ENOSPC"), now: Self.t0) == .opened(reason: "ENOSPC", reads: false))
        guard case (.call(let probe), _) = m.admit(.write, now: Self.t0 + .seconds(5)), probe.probe,
              case (.call(let read), _) = m.admit(.read, now: Self.t0 + .seconds(5)) else { Issue.record("no calls"); return }
        #expect(m.finished(read, .outage("EIO"), now: Self.t0 + .seconds(6)) == .opened(reason: "EIO", reads: true))
        #expect(m.readsRefused && m.refusal(now: Self.t0 + .seconds(6)) == .seconds(5))
        #expect(m.finished(probe, .answered, now: Self.t0 + .seconds(7)) == .closed(after: .seconds(7)))
    }

    /// Open for writes only, a write probing, the read slots held past the wait: reads stop, and
    /// the probe out stays the only one (the breaker used to open afresh and let a second through).
    @Test func readsHangingWhileAWriteProbesKeepTheOneProbe() {
        var m = Machine(settings: Self.settings)
        _ = m.seen(.writeOutage("ENOSPC"), now: Self.t0)
        let at = Self.t0 + .seconds(16)
        guard case (.call, _) = m.admit(.read, now: at), case (.call, _) = m.admit(.read, now: at),
              case (.call(let probe), _) = m.admit(.write, now: at), probe.probe else { Issue.record("no calls"); return }
        let (admission, change) = m.admit(.read, now: at, waitingSince: at - .seconds(2))
        #expect(admission == .refuse(retryAfter: .seconds(5)))
        #expect(change == .opened(reason: "2 reads of the store did not end within 2 s", reads: true))
        #expect(m.state == .probing(coolDown: .seconds(5), reads: true))
        #expect(m.admit(.write, now: at + .seconds(60)).0 == .refuse(retryAfter: .seconds(5)))
    }

    @Test func retryAfterIsWholeSecondsRoundedUp() {
        #expect(Machine.retryAfter(.milliseconds(1)) == 1)
        #expect(Machine.retryAfter(.seconds(4)) == 4)
        #expect(Machine.retryAfter(.milliseconds(4001)) == 5)
        #expect(Machine.retryAfter(.zero) == 1)
    }
}
