import Foundation
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// AlbumDownload explored, not sampled: long random sequences of everything that can happen to an
/// album (answers in any order, late or refused, stray answers, outages, a stop, time jumping up
/// to two leases), replayed against the machine by a model of its driver (AlbumDriver.swift:
/// writes answered in order on the driver's thread, the search, fetches and puts on other
/// threads in any order), with the invariants checked after every step:
///
/// - no spin: when `handle` returns no action, the deadline is in the future, or nil with an
///   answer still to come;
/// - nothing is written after an end, and no write is asked for that the album may not do;
/// - a photo's row is written once, and a photo written is never fetched again;
/// - a renewal or a batch never outlives its answer;
/// - `.finished` only with every photo written; at most one end, and nothing after it;
/// - every sequence reaches an end once its inputs stop.
@Suite struct AlbumExplorationTests {
    @Test func tenThousandSequences() {
        let failure = explore(seeds: 1..<10_001, length: 1...80, generate: AlbumWalk.Step.random, run: AlbumWalk.run(seed:_:))
        #expect(failure == nil, "\(failure ?? "")")
    }

    /// The walk can fail: a deadline in the past with nothing to do is a spin; and a broken
    /// rule is reported with its seed and shrunk to the steps that matter.
    @Test func aBrokenRuleIsFoundAndShrunk() {
        #expect(AlbumWalk.violation(deadline: AlbumWalk.t0, now: AlbumWalk.t0 + .seconds(1), ended: false, inFlight: 1) != nil)
        #expect(AlbumWalk.violation(deadline: nil, now: AlbumWalk.t0, ended: false, inFlight: 0) != nil)
        let failure = explore(seeds: 0..<1_000, length: 1...80, generate: AlbumWalk.Step.random) { (_: UInt64, steps: [AlbumWalk.Step]) in
            steps.contains { if case .stopping = $0 { return true } else { return false } } ? "stopped" : nil
        }
        #expect(failure?.contains("shrunk to 1:\n  0: stopping") == true, "\(failure ?? "no failure")")
    }
}

@Suite(.tags(.slow)) struct AlbumExplorationMillionTests {
    @Test func aMillionSequences() {
        let failure = explore(seeds: 1_000_001..<2_000_001, length: 1...80, generate: AlbumWalk.Step.random, run: AlbumWalk.run(seed:_:))
        #expect(failure == nil, "\(failure ?? "")")
    }
}

enum AlbumWalk {
    typealias Machine = AlbumDownload<TestPayloads>
    static let t0 = ContinuousClock.now

    enum Step: CustomStringConvertible {
        /// Answer the in-flight action at this position (modulo their count) with this outcome.
        case answer(Int, Int)
        /// Time passes (milliseconds), then the driver ticks.
        case wait(Int)
        /// The next write is answered this late (milliseconds): a slow statement, a renewal
        /// answered after its lease.
        case slowWrite(Int)
        /// An answer delivered again (a duplicate or a late one), or a write's late success.
        case stray(Int, Int)
        case stopping

        static func random(_ g: inout SeededGenerator) -> Step {
            switch Int.random(in: 0..<100, using: &g) {
            case 0..<62: return .answer(Int.random(in: 0..<64, using: &g), Int.random(in: 0..<100, using: &g))
            case 62..<80: return .wait([0, 5, 300, 1_100, 21_000, 61_000, 130_000].randomElement(using: &g)!)
            case 80..<90: return .slowWrite([1_000, 21_000, 65_000].randomElement(using: &g)!)
            case 90..<99: return .stray(Int.random(in: 0..<8, using: &g), Int.random(in: 0..<100, using: &g))
            default: return .stopping
            }
        }

        var description: String {
            switch self {
            case .answer(let i, let o): return "answer #\(i) outcome \(o)"
            case .wait(let ms): return "wait \(ms) ms"
            case .slowWrite(let ms): return "next write answered after \(ms) ms"
            case .stray(let i, let o): return "an answer again: #\(i) outcome \(o)"
            case .stopping: return "stopping"
            }
        }
    }

    /// The "no spin" rule where the driver waits (every action asked for done or in flight).
    static func violation(deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant, ended: Bool, inFlight: Int) -> String? {
        guard !ended else { return nil }
        if let deadline, deadline <= now { return "spin: no action and a deadline \(now - deadline) in the past" }
        if deadline == nil && inFlight == 0 { return "wedged: no deadline, nothing in flight, not ended" }
        return nil
    }

    static func settings(_ variant: Int) -> Machine.Settings {
        var s = Machine.Settings()
        s.width = [1, 3, 30][variant % 3]
        s.batchSize = [1, 2, 6][variant % 3]
        s.batchAge = .milliseconds(250)
        s.renewEvery = .seconds(20)
        s.lease = .seconds(60)
        s.firstGate = variant % 2 == 0 ? .seconds(1) : .zero
        return s
    }

    /// Replays `steps`; the first invariant broken, or nil.
    static func run(seed: UInt64, _ steps: [Step]) -> String? {
        // The seed picks the album's kind and settings, so shrinking keeps them.
        let variant = Int(seed % 1_000)
        var now = t0
        var album: Machine
        var photos: Int
        var actions: [Machine.Action]
        if variant % 4 == 3 {
            photos = variant % 5
            album = Machine(resuming: (0..<photos).map { Int64(100 + $0) }, settings: settings(variant), clearsWaiting: variant % 2 == 0,
                            held: variant % 3, failedBefore: (0..<photos).map { (variant + $0) % 4 }, now: now)
        } else {
            photos = 0
            album = Machine(searching: settings(variant), now: now)
        }
        actions = album.start(now: now)
        var inFlight: [Machine.Action] = []  // the search, fetches and puts, answered in any order
        var written = Set<Int>(), ends = 0, ended = false
        var writeDelay = Duration.zero
        var withdrawnDrops = 0
        var answered: [Machine.Event] = []  // the search's, fetches' and puts' answers so far
        var rows: [Int64?]? = variant % 4 == 3 ? (0..<photos).map { Int64(100 + $0) } : nil

        /// Performs `actions` as the driver does: other threads' work goes in flight, writes are
        /// answered in order here; every answer's actions join the queue.
        func perform(_ first: [Machine.Action], outcome: Int) -> String? {
            // Threads first, so images download while the rows are written (as the driver does).
            var queue = (first.filter(\.runsElsewhere) + first.filter { !$0.runsElsewhere })[...]
            while let action = queue.popFirst() {
                if ended { return "an action after the end: \(action)" }
                if case .end(let end) = action {
                    ends += 1
                    ended = true
                    if end == .finished && album.unwritten != 0 { return "finished with \(album.unwritten) photos unwritten" }
                    if end == .finished && withdrawnDrops > 0 { return "finished with a refused photo's drop not done (it stays pending)" }
                    continue
                }
                guard album.permits(action) else {
                    if case .drop = action { withdrawnDrops += 1 }
                    queue.append(contentsOf: album.handle(.withdrawn(action), now: now))
                    continue
                }
                let event: Machine.Event
                let o = (outcome &+ queue.count) % 100
                switch action {
                case .search, .fetch, .fetchAndPut, .put:
                    if case .fetch(let index, _) = action, written.contains(index) { return "photo \(index) fetched again after it was written" }
                    if case .fetchAndPut(let index, _) = action, written.contains(index) { return "photo \(index) fetched again after it was written" }
                    // Each action carries its own photo's payload: the driver joins nothing.
                    switch action {
                    case .fetch(let index, let source), .fetchAndPut(let index, let source):
                        if source != "u\(index)" { return "photo \(index) fetched from \(source)" }
                    case .put(let index, let image):
                        if image != index { return "photo \(index) stored with image \(image)" }
                    default: break
                    }
                    inFlight.append(action)
                    continue
                case .writePlaceholders:
                    now += writeDelay
                    switch o {
                    case 0..<5: event = .databaseDown
                    case 5..<8: event = .writeRefused
                    case 8..<12: event = .superseded
                    default:
                        let ids: [Int64?] = (0..<photos).map { o % 3 == 0 && $0 % 2 == 1 ? nil : Int64(100 + $0) }
                        rows = ids
                        event = .rowsWritten(ids)
                    }
                case .writeBatch(let items):
                    now += writeDelay
                    switch o {
                    case 0..<5: event = .databaseDown
                    case 5..<8: event = .writeRefused
                    case 8..<11: event = .batchWritten(false)
                    default:
                        for item in items {
                            if written.contains(item.index) { return "photo \(item.index) written twice" }
                            if rows?[item.index] != item.rowID { return "photo \(item.index) written under row \(item.rowID)" }
                            if case .stored(let stored) = item.outcome, stored != item.index {
                                return "photo \(item.index) written with image \(stored)'s result"
                            }
                            written.insert(item.index)
                        }
                        event = .batchWritten(true)
                    }
                case .renewLease:
                    now += writeDelay
                    switch o {
                    case 0..<5: event = .databaseDown
                    case 5..<10: event = .writeRefused
                    case 10..<14: event = .leaseRenewed(false)
                    default: event = .leaseRenewed(true)
                    }
                case .drop, .clearWaiting, .noteHostFailures:
                    now += writeDelay
                    switch o {
                    case 0..<3: event = .databaseDown
                    case 3..<5: event = .writeRefused
                    default: event = .written(action)
                    }
                case .end: continue
                }
                writeDelay = .zero
                let next = album.handle(event, now: now)
                // A renewal or batch still awaited is one just asked for, never the one answered.
                let asked = Array(queue) + next
                if album.isRenewing && !asked.contains(.renewLease) { return "a renewal outlived its answer (\(event))" }
                if album.isWriting && !asked.contains(where: { if case .writeBatch = $0 { return true } else { return false } }) {
                    return "a batch outlived its answer (\(event))"
                }
                for later in next {
                    switch later {
                    case .writeBatch, .drop, .clearWaiting, .noteHostFailures, .renewLease, .writePlaceholders:
                        if !album.permits(later) { return "asked for a write it may not do: \(later)" }
                    default: break
                    }
                }
                queue.append(contentsOf: next)
            }
            // The driver waits now: for an answer in flight, or until the deadline.
            if let broken = violation(deadline: album.deadline(), now: now, ended: album.phase.isEnded, inFlight: inFlight.count) {
                if getenv("WALK_DEBUG") != nil { dump(album) }
                return "\(broken) where the driver waits"
            }
            return nil
        }

        func answer(_ action: Machine.Action, outcome o: Int) -> Machine.Event? {
            switch action {
            case .search:
                if o < 10 { return .searchFailed }
                photos = o % 7
                return .searched("answer", photoSources(photos))
            case .fetch(let i, _), .fetchAndPut(let i, _):
                switch o {
                case 0..<8: return .fetched(i, .failed("HTTP 404"))
                case 8..<12: return .fetched(i, .refused("internal address"))
                case 12..<22: return .fetched(i, .hostDown(retryAfter: nil, reason: "HTTP 503"))
                case 22..<25: return .fetched(i, .hostDown(retryAfter: 30))
                case 25..<32:
                    // Stored on its own slot (as the driver does): the machine is not handed the image.
                    if case .fetchAndPut = action { inFlight.append(.put(i, i)); return .fetched(i, .imageAfterRetry(nil)) }
                    return .fetched(i, .imageAfterRetry(i))
                default:
                    if case .fetchAndPut = action { inFlight.append(.put(i, i)); return .fetched(i, .image(nil)) }
                    return .fetched(i, .image(i))
                }
            case .put(let i, _):
                switch o {
                case 0..<6: return .put(i, .storeDown)
                case 6..<9: return .put(i, .failed("EIO"))
                default: return .put(i, .stored(i))
                }
            default: return nil
            }
        }

        func deliver(_ event: Machine.Event, outcome: Int) -> String? {
            let next = album.handle(event, now: now)
            if ended && !next.isEmpty { return "acted after the end: \(next)" }
            if let broken = perform(next, outcome: outcome) { return "\(broken) (after \(event))" }
            return nil
        }

        if let broken = perform(actions, outcome: 50) { return broken }
        for step in steps {
            switch step {
            case .answer(let position, let outcome):
                guard !inFlight.isEmpty else { continue }
                let action = inFlight.remove(at: position % inFlight.count)
                if let event = answer(action, outcome: outcome) {
                    answered.append(event)
                    if let broken = deliver(event, outcome: outcome) { return broken }
                }
            case .wait(let ms):
                now += .milliseconds(ms)
                if let broken = deliver(.tick, outcome: ms % 100) { return broken }
            case .slowWrite(let ms):
                writeDelay = .milliseconds(ms)
            case .stray(let index, let outcome):
                // A late or repeated answer: one delivered before, or a write's answered twice.
                let stray: [Machine.Event] = answered + [.batchWritten(true), .leaseRenewed(true)]
                if let broken = deliver(stray[(index &+ outcome) % stray.count], outcome: outcome) { return broken }
            case .stopping:
                if let broken = deliver(.stopping, outcome: 0) { return broken }
            }
        }
        // The inputs stop: whatever is in flight is answered, and time runs on.
        var rounds = 0
        while !album.phase.isEnded {
            rounds += 1
            if rounds > 400 { return "no end once the inputs stopped (\(album.phase), \(inFlight.count) in flight)" }
            if !inFlight.isEmpty {
                let action = inFlight.removeFirst()
                if let event = answer(action, outcome: 50), let broken = deliver(event, outcome: 50) { return broken }
            } else {
                now += album.deadline().map { max(.zero, $0 - now) } ?? .seconds(60)
                if let broken = deliver(.tick, outcome: 50) { return broken }
            }
        }
        if ends != 1 { return "\(ends) ends" }
        if !album.handle(.tick, now: now).isEmpty { return "acted after the end" }
        return nil
    }
}

extension AlbumDownload.Phase {
    var isEnded: Bool { if case .ended = self { return true } else { return false } }
}
