import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The store breaker walked through long random event sequences (TestSupport/Exploration), its
/// rules checked after every step: what StoreBreakerStateMachineTests shows on chosen states,
/// here on whatever states the events lead to — calls finishing late, twice, out of order, the
/// clock jumping, outcomes seen outside a call.
enum StoreBreakerExploration {
    typealias Machine = StoreBreakerStateMachine

    /// The value tests' settings: cool-downs of 5 s up to 12 s, two read slots, a 2 s wait for one.
    static var settings: Machine.Settings { StoreBreakerStateMachineTests.settings }

    enum Outcome: CustomStringConvertible {
        case answered, outage, writeOutage
        var value: Machine.Outcome {
            switch self {
            case .answered: .answered
            case .outage: .outage("down")
            case .writeOutage: .writeOutage("full")
            }
        }
        var description: String {
            switch self {
            case .answered: "answered"
            case .outage: "outage"
            case .writeOutage: "writeOutage"
            }
        }
    }

    /// Tickets are named by position among those out (or already finished), modulo their count,
    /// so a sequence keeps its meaning when the shrinker drops events.
    enum Event: CustomStringConvertible {
        /// A call asks; a read that has been waiting for a slot asks again `waited` ms after it first did.
        case admit(Machine.Kind, waited: Int)
        case finish(Int, Outcome)
        /// A ticket finished already, finished again (a call given up at its deadline that ends later).
        case finishAgain(Int, Outcome)
        /// The file store read on the event loop, outside a call.
        case seen(Outcome)
        case tick(milliseconds: Int)
        case jump(seconds: Int)

        var description: String {
            switch self {
            case .admit(let kind, let waited): "admit \(kind)\(waited > 0 ? " waiting since \(waited) ms" : "")"
            case .finish(let i, let o): "finish #\(i) \(o)"
            case .finishAgain(let i, let o): "finish again #\(i) \(o)"
            case .seen(let o): "seen \(o)"
            case .tick(let ms): "+\(ms) ms"
            case .jump(let s): "+\(s) s"
            }
        }
    }

    static func generate(_ random: inout SeededGenerator) -> Event {
        func outcome() -> Outcome {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5: .answered
            case 5..<8: .outage
            default: .writeOutage
            }
        }
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<20: return .admit(.read, waited: 0)
        case 20..<26: return .admit(.read, waited: Int.random(in: 1...3000, using: &random))
        case 26..<40: return .admit(.write, waited: 0)
        case 40..<65: return .finish(Int.random(in: 0..<8, using: &random), outcome())
        case 65..<70: return .finishAgain(Int.random(in: 0..<8, using: &random), outcome())
        case 70..<76: return .seen(outcome())
        case 76..<95: return .tick(milliseconds: Int.random(in: 1...2500, using: &random))
        default: return .jump(seconds: Int.random(in: 5...60, using: &random))
        }
    }

    /// Plays `events` on a fresh machine; why it broke a rule, or nil.
    static func run(_ events: [Event]) -> String? {
        let t0 = ContinuousClock.now
        let settings = settings
        var machine = Machine(settings: settings)
        var now = t0
        var out: [Machine.Ticket] = []
        var done: [Machine.Ticket] = []
        let longest = max(settings.coolDown, settings.maxCoolDown)

        for (step, event) in events.enumerated() {
            func broken(_ rule: String) -> String { "step \(step) (\(event)): \(rule); state \(machine.state), reads in flight \(machine.readsInFlight)" }
            switch event {
            case .admit(let kind, let waited):
                let readsOut = out.filter { $0.kind == .read }.count
                let wasRefusingReads = machine.readsRefused
                let since = waited > 0 ? now - .milliseconds(waited) : nil
                let (admission, _) = machine.admit(kind, now: now, waitingSince: since)
                switch admission {
                case .call(let ticket):
                    if out.contains(where: { $0.probe }) && ticket.probe { return broken("a second probe while one is out") }
                    if kind == .read && !ticket.probe && !wasRefusingReads && readsOut >= settings.readSlots {
                        return broken("a read admitted with all \(settings.readSlots) read slots taken")
                    }
                    out.append(ticket)
                case .wait(let until):
                    if kind != .read { return broken("a write told to wait") }
                    if until <= now { return broken("told to wait until a time already past") }
                case .refuse(let retryAfter):
                    if retryAfter <= .zero { return broken("refused with Retry-After \(retryAfter)") }
                }
            case .finish(let i, let outcome):
                guard !out.isEmpty else { continue }
                let ticket = out.remove(at: i % out.count)
                _ = machine.finished(ticket, outcome.value, now: now)
                done.append(ticket)
                // "reads carry on, until one of them fails too"
                if case .outage = outcome, !machine.readsRefused {
                    return broken("an outage left reads flowing")
                }
            case .finishAgain(let i, let outcome):
                guard !done.isEmpty else { continue }
                let before = machine
                _ = machine.finished(done[i % done.count], outcome.value, now: now)
                if machine.state != before.state || machine.readsInFlight != before.readsInFlight {
                    return broken("a ticket finished a second time changed the breaker (was \(before.state), \(before.readsInFlight) reads)")
                }
            case .seen(let outcome):
                _ = machine.seen(outcome.value, now: now)
                if case .outage = outcome, !machine.readsRefused { return broken("an outage seen left reads flowing") }
            case .tick(let ms):
                now += .milliseconds(ms)
            case .jump(let s):
                now += .seconds(s)
            }

            // After every step:
            let readsOut = out.filter { $0.kind == .read }.count
            if machine.readsInFlight != readsOut { return broken("reads in flight \(machine.readsInFlight), but \(readsOut) read tickets are out") }
            if out.filter(\.probe).count > 1 { return broken("more than one probe out") }
            if machine.isClosed != (machine.outage == nil) { return broken("an outage reason \(machine.outage?.reason ?? "nil") while \(machine.state)") }
            if let left = machine.refusal(now: now) {
                if left <= .zero { return broken("the event loop refuses with Retry-After \(left)") }
                if !machine.readsRefused { return broken("the event loop refuses reads that flow") }
            }
            switch machine.state {
            case .closed:
                break
            case .open(let until, let coolDown, _):
                if coolDown > longest || until - now > longest { return broken("a cool-down longer than maxCoolDown") }
                if now >= until {
                    // The cool-down is over: the next call is the probe.
                    var copy = machine
                    guard case (.call(let probe), _) = copy.admit(.write, now: now), probe.probe else {
                        return broken("open past its cool-down, and a call is not let through as the probe")
                    }
                }
            case .probing(let coolDown, _):
                if coolDown > longest { return broken("a cool-down longer than maxCoolDown") }
                // The way back is the probe's answer: one must be out to give it.
                if !out.contains(where: \.probe) { return broken("probing with no probe out: no way back") }
            }
            // Every ticket out can be finished, whatever it ends in, and leaves the counts right.
            for ticket in out.prefix(3) {
                for outcome in [Outcome.answered, .outage, .writeOutage] {
                    var copy = machine
                    _ = copy.finished(ticket, outcome.value, now: now)
                    if copy.readsInFlight != readsOut - (ticket.kind == .read ? 1 : 0) {
                        return broken("finishing \(ticket) \(outcome) leaves \(copy.readsInFlight) reads in flight")
                    }
                }
            }
        }
        return nil
    }

    static func explore(_ seeds: Range<UInt64>) -> String? {
        TestSupport.explore(seeds: seeds, length: 1...120, generate: generate, run: run)
    }
}

/// The quick loop's share: ten thousand sequences.
@Suite struct StoreBreakerExplorationTests {
    @Test func tenThousandRandomSequencesKeepTheRules() {
        let failure = StoreBreakerExploration.explore(0..<10_000)
        #expect(failure == nil, "\(failure ?? "")")
    }
}

@Suite(.tags(.slow)) struct StoreBreakerLongExplorationTests {
    /// A million sequences, in ten parts run side by side.
    @Test(arguments: 0..<10) func aMillionRandomSequencesKeepTheRules(part: Int) {
        let start = 1_000_000 + UInt64(part) * 100_000
        let failure = StoreBreakerExploration.explore(start..<start + 100_000)
        #expect(failure == nil, "\(failure ?? "")")
    }
}
