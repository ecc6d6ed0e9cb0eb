import Testing
import TestSupport
@testable import HTTPServer

/// AdmissionStateMachine explored, not sampled: long random sequences of everything its driver
/// (`HTTPServer`) reports — connections arriving from eight addresses (two of them one IPv4
/// client, one as IPv4-mapped IPv6; two in one IPv6 /64; a trusted proxy, also mapped), rate
/// answers sent (late, after a stop), connections going idle and busy and closing (reclaimed ones
/// too), closes again and for ids never handed out, sweeps, clients hanging up, time jumping up to
/// 15 s, descriptors running out, resumes (late, stray), stops (twice) — replayed by a model of
/// the driver that owns the descriptors as the kernel does (lowest free first, so a descriptor
/// handed back twice would close someone else's), with settings drawn from the seed. After every
/// step, from the machine's doc comments:
///
/// - each arrival gets the rule the doc's order gives it (stopping; the address's share: held
///   with its jittered hold, or reset; its rate: answered, or reset; the full table: an idle one
///   reclaimed, never one at work or one already reclaimed, or busy); a trusted proxy and the
///   per-address rules, an IPv6 /64 and an IPv4-mapped address counted as documented;
/// - never more open than `maxConnections` beyond the reclaimed ones still closing, never more
///   than `maxConnectionsPerAddress` from an address, never more held or answered than the cap;
/// - an id is admitted once (fresh each time); `isIdle` is asked only when the table is full;
/// - what the machine keeps (held, answered) is exactly what it was given, handed back once,
///   by the sweep when due (held: its hold ended; answered: hung up or its linger ended) and
///   never before, or by the stop; the sweep asks about every answered connection;
/// - no spin: after a sweep, nothing kept is overdue (every `until` is in the future);
/// - refusals are reported at most once an interval, with the count since the last report;
/// - the lifecycle: a pause only from accepting, a resume only from paused, the listener resumed
///   exactly once for each suspension (by the resume or by the stop: Dispatch cannot cancel a
///   suspended source), nothing admitted, kept or paused after the stop, a second stop is nil;
/// - once the inputs stop (every connection closed, time past every hold and linger, a sweep),
///   nothing is open, held, answered or suspended, every descriptor is back, and the machine is
///   idle again: each address is admitted anew (refused as busy if it stopped).
@Suite struct AdmissionExplorationTests {
    @Test func tenThousandSequences() {
        Self.everyRuleHolds(seeds: 1..<10_001, "10,000")
    }

    /// Walks the seeds, expects every rule to hold and every path to be reached.
    static func everyRuleHolds(seeds: Range<UInt64>, _ count: String) {
        var hits = AdmissionWalk.Hits()
        let failure = explore(seeds: seeds, length: 1...60, generate: AdmissionWalk.Step.random) { seed, steps in
            AdmissionWalk.run(seed: seed, steps, hits: &hits)
        }
        #expect(failure == nil, "\(failure ?? "")")
        print("AdmissionExploration: sequences reaching each path of \(count): \(hits)")
        for path in AdmissionWalk.Path.allCases {
            #expect(hits[path] > 0, "no sequence reached \(path)")
        }
    }

    /// The walk can fail: a hand-made state past each limit is a violation, and a machine more
    /// lenient than its settings (one more place, one more per address) is caught and shrunk.
    @Test func aBrokenRuleIsFoundAndShrunk() {
        var settings = AdmissionStateMachine.Settings()
        settings.maxConnections = 3
        settings.maxConnectionsPerAddress = 2
        func limits(open: Int = 3, reclaiming: Int = 0, perAddress: [Int] = [2], held: Int = 2, answered: Int = 2) -> String? {
            AdmissionWalk.limitViolation(settings: settings, heldCap: 2, open: open, reclaiming: reclaiming,
                                         perAddress: perAddress, held: held, answered: answered)
        }
        #expect(limits() == nil)
        #expect(limits(open: 4, reclaiming: 1) == nil, "a reclaimed one counts until it closes")
        #expect(limits(open: 4) != nil)
        #expect(limits(perAddress: [1, 3]) != nil)
        #expect(limits(held: 3) != nil)
        #expect(limits(answered: 3) != nil)

        var hits = AdmissionWalk.Hits()
        let failure = explore(seeds: 1..<1_001, length: 1...120, generate: AdmissionWalk.Step.random) { seed, steps in
            AdmissionWalk.run(seed: seed, steps, hits: &hits, lenientMachine: true)
        }
        #expect(failure?.contains("shrunk to") == true, "\(failure ?? "no failure")")
    }
}

@Suite(.tags(.slow)) struct AdmissionExplorationMillionTests {
    @Test func aMillionSequences() {
        AdmissionExplorationTests.everyRuleHolds(seeds: 1_000_001..<2_000_001, "1,000,000")
    }
}

enum AdmissionWalk {
    typealias Machine = AdmissionStateMachine
    static let t0 = ContinuousClock.now

    /// Where connections come from, and what the doc says each counts as.
    struct Source {
        let address: String
        /// The per-address limit it counts against; nil for a trusted proxy (exempt).
        let group: Int?
    }

    static let sources: [Source] = [
        Source(address: "192.0.2.1", group: 0),
        Source(address: "::ffff:192.0.2.1", group: 0),  // IPv4-mapped: the IPv4 address
        Source(address: "192.0.2.2", group: 1),
        Source(address: "2001:db8:1:2::1", group: 2),
        Source(address: "2001:db8:1:2:ffff::9", group: 2),  // one /64
        Source(address: "2001:db8:1:3::1", group: 3),
        Source(address: "10.0.0.1", group: nil),  // the trusted proxy
        Source(address: "::ffff:10.0.0.1", group: nil),
    ]
    static let groups = 4

    enum Step: CustomStringConvertible {
        /// A connection arrives from `sources[i % count]`.
        case arrive(Int)
        /// The pending rate answer was sent: `answeredPastRate` (late when the stop came first).
        case answer
        /// Time passes (milliseconds; multiples of 1/8 s, so token arithmetic is exact).
        case wait(Int)
        /// The sweep timer ticks.
        case tick
        /// The client of the k-th answered connection hangs up.
        case hangUp(Int)
        /// The k-th open connection goes idle between requests, or back to work.
        case toggle(Int)
        /// The k-th open connection closes.
        case close(Int)
        /// A close reported again, or for an id never handed out.
        case strayClose(Int)
        /// Accepting ran out of descriptors.
        case outOfDescriptors
        /// The pause is over (or a stray resume when nothing is paused).
        case resumeDue
        case stop

        static func random(_ g: inout SeededGenerator) -> Step {
            switch Int.random(in: 0..<100, using: &g) {
            case 0..<34: return .arrive(Int.random(in: 0..<64, using: &g))
            case 34..<42: return .answer
            case 42..<54: return .wait([0, 125, 250, 500, 1_000, 2_000, 5_000, 15_000].randomElement(using: &g)!)
            case 54..<66: return .tick
            case 66..<71: return .hangUp(Int.random(in: 0..<16, using: &g))
            case 71..<80: return .toggle(Int.random(in: 0..<16, using: &g))
            case 80..<91: return .close(Int.random(in: 0..<16, using: &g))
            case 91..<94: return .strayClose(Int.random(in: 0..<16, using: &g))
            case 94..<96: return .outOfDescriptors
            case 96..<99: return .resumeDue
            default: return .stop
            }
        }

        var description: String {
            switch self {
            case .arrive(let i): return "arrive from \(AdmissionWalk.sources[i % AdmissionWalk.sources.count].address)"
            case .answer: return "rate answer sent"
            case .wait(let ms): return "wait \(ms) ms"
            case .tick: return "tick"
            case .hangUp(let k): return "answered #\(k) hangs up"
            case .toggle(let k): return "open #\(k) idle/busy"
            case .close(let k): return "open #\(k) closes"
            case .strayClose(let k): return "stray close #\(k)"
            case .outOfDescriptors: return "out of descriptors"
            case .resumeDue: return "resume due"
            case .stop: return "stop"
            }
        }
    }

    /// The paths worth reaching; `Hits` counts the sequences that reach each.
    enum Path: Int, CaseIterable {
        case admitted, full, reclaimed, held, heldPastCap, noHoldReset, pastRate, pastRateCap, holdEnded,
             hungUpClosed, lingerEnded, reportedMany, trustedPastShare, sharedV6Prefix, sharedMappedV4,
             paused, stoppedWhilePaused, stopHandedBack, lateAnswer, refusedStopping, strayClose
    }

    struct Hits: CustomStringConvertible {
        var counts = [Int](repeating: 0, count: Path.allCases.count)
        subscript(path: Path) -> Int { counts[path.rawValue] }
        var description: String {
            Path.allCases.map { "\($0) \(counts[$0.rawValue])" }
                .joined(separator: ", ")
        }
    }

    /// The hold jitter, drawn from the seed: the ends of its range often, anything between otherwise.
    final class Jitter: @unchecked Sendable {
        var random: SeededGenerator
        var last = 1.0
        var draws = 0
        init(seed: UInt64) { random = SeededGenerator(seed: seed) }
        func next() -> Double {
            draws += 1
            switch Int.random(in: 0..<4, using: &random) {
            case 0: last = 0.5
            case 1: last = 1.5
            default: last = Double.random(in: 0.5...1.5, using: &random)
            }
            return last
        }
    }

    /// The limits the doc promises, on counts alone (so a hand-made bad state can be checked).
    static func limitViolation(settings: Machine.Settings, heldCap: Int, open: Int, reclaiming: Int,
                               perAddress: [Int], held: Int, answered: Int) -> String? {
        if open - reclaiming > settings.maxConnections {
            return "\(open) open (\(reclaiming) reclaimed, closing) past maxConnections \(settings.maxConnections)"
        }
        if let most = perAddress.max(), most > settings.maxConnectionsPerAddress {
            return "\(most) open from one address past maxConnectionsPerAddress \(settings.maxConnectionsPerAddress)"
        }
        if held > heldCap { return "\(held) held past the cap \(heldCap)" }
        if answered > heldCap { return "\(answered) answered past the cap \(heldCap)" }
        return nil
    }

    struct Connection {
        let id: Int
        let fd: Int32
        let address: String
        let group: Int?
        var idle = false
        /// Handed back as `reclaim`: the driver closes it soon and never offers it again.
        var reclaiming = false
    }

    /// Replays `steps` with settings drawn from `seed`, then drains; the first rule broken, or nil.
    /// `lenientMachine` gives the machine one more place and one more per address than the model
    /// expects (only to show the walk catches it).
    static func run(seed: UInt64, _ steps: [Step], hits: inout Hits, lenientMachine: Bool = false) -> String? {
        var draw = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ 0x5EED)
        var settings = Machine.Settings()
        settings.maxConnections = [1, 2, 3, 5].randomElement(using: &draw)!
        settings.maxConnectionsPerAddress = [1, 1, 2, 2, 3, 3, 0].randomElement(using: &draw)!
        settings.newConnectionsPerSecond = [0, 1, 2, 4].randomElement(using: &draw)!
        settings.newConnectionBurst = [1, 2, 3].randomElement(using: &draw)!
        settings.overShareHold = [.zero, .seconds(1), .seconds(10)].randomElement(using: &draw)!
        settings.maxHeldOverShare = [1, 2, 4096].randomElement(using: &draw)!
        settings.answeredLinger = [.seconds(2), .milliseconds(500), .zero].randomElement(using: &draw)!
        settings.refusalReportInterval = [.seconds(1), .milliseconds(250)].randomElement(using: &draw)!
        settings.trustedProxies = TrustedProxies([AddressRange("10.0.0.0/8")!])
        let descriptorCap = [0, 2, 3, 4096].randomElement(using: &draw)!
        let ticksPerTimeoutCheck = [0, 1, 2, 5].randomElement(using: &draw)!
        let jitter = Jitter(seed: seed)
        settings.holdJitter = { jitter.next() }
        let heldCap = min(settings.maxHeldOverShare, descriptorCap)

        var machineSettings = settings
        if lenientMachine {
            machineSettings.maxConnections += 1
            machineSettings.maxConnectionsPerAddress += 1
        }
        var m = Machine(settings: machineSettings)
        m.started(descriptorCap: descriptorCap, ticksPerTimeoutCheck: ticksPerTimeoutCheck)

        // The model: what the driver and the kernel hold, and what the doc says the machine does.
        var now = t0
        var reached = [Bool](repeating: false, count: Path.allCases.count)
        func reach(_ path: Path) { reached[path.rawValue] = true }
        defer { for (i, r) in reached.enumerated() where r { hits.counts[i] += 1 } }

        var descriptors = Set<Int32>()  // open in the process: the kernel hands out the lowest free
        var connections: [Connection] = []
        var closedIDs: [Int] = []
        var lastID = 0
        var accepted = 0
        var held: [(fd: Int32, until: ContinuousClock.Instant)] = []
        var answered: [(fd: Int32, until: ContinuousClock.Instant)] = []
        var hungUp = Set<Int32>()
        var pendingAnswer: Int32?
        var lifecycle = Machine.Lifecycle.accepting
        var suspended = false
        var pendingResumes = 0
        var ticks = 0
        var refusals = 0
        var lastReport: ContinuousClock.Instant?
        var tokens: [Int: (tokens: Double, at: Double)] = [:]
        let period = max(1, ticksPerTimeoutCheck)

        func openDescriptor() -> Int32 {
            var fd: Int32 = 3
            while descriptors.contains(fd) { fd += 1 }
            descriptors.insert(fd)
            return fd
        }
        func closeDescriptor(_ fd: Int32, _ by: String) -> String? {
            guard descriptors.remove(fd) != nil else { return "\(by) closes descriptor \(fd), which is not open" }
            return nil
        }
        func seconds(_ instant: ContinuousClock.Instant) -> Double { (instant - t0) / .seconds(1) }
        /// One token from the group's bucket (burst at once, the rate a second after that).
        func takeToken(_ group: Int) -> Bool {
            guard settings.newConnectionsPerSecond > 0 else { return true }
            let capacity = max(1, settings.newConnectionBurst), at = seconds(now)
            var bucket = tokens[group] ?? (capacity, at)
            bucket.tokens = min(capacity, bucket.tokens + max(0, at - bucket.at) * settings.newConnectionsPerSecond)
            bucket.at = max(at, bucket.at)
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            tokens[group] = bucket
            return allowed
        }
        func refused(_ reason: Machine.Refusal.Reason, _ answer: Machine.Refusal.Answer) -> Machine.Arrival {
            refusals += 1
            var refusal = Machine.Refusal(reason: reason, answer: answer)
            if lastReport.map({ now - $0 >= settings.refusalReportInterval }) ?? true {
                refusal.report = refusals
                if refusals > 1 { reach(.reportedMany) }
                refusals = 0
                lastReport = now
            }
            return .refuse(refusal)
        }
        func count(_ group: Int) -> Int { connections.count(where: { $0.group == group }) }

        func answer(_ fd: Int32) -> String? {
            pendingAnswer = nil
            let kept = m.answeredPastRate(fd: fd, now: now)
            guard kept == (lifecycle != .stopping) else { return "answeredPastRate \(kept) while \(lifecycle)" }
            if kept {
                answered.append((fd, now + settings.answeredLinger))
            } else {
                reach(.lateAnswer)
                return closeDescriptor(fd, "a late answer's reset")
            }
            return nil
        }

        func arrive(_ source: Source) -> String? {
            if let fd = pendingAnswer {  // the driver sends it before it accepts again
                if let broken = answer(fd) { return broken }
            }
            let fd = openDescriptor()
            let drawsBefore = jitter.draws
            var askedIdle = false
            let snapshot = connections
            let arrival = m.arrived(fd: fd, from: source.address, now: now) { id in
                askedIdle = true
                return snapshot.first { $0.id == id }.map { $0.idle && !$0.reclaiming } ?? false
            }
            // The doc's order.
            let expected: Machine.Arrival
            var idleOnes: [Int] = []
            var reachesTable = false
            if lifecycle == .stopping {
                expected = refused(.full, .busy)
                reach(.refusedStopping)
            } else if let group = source.group, count(group) >= settings.maxConnectionsPerAddress {
                if settings.overShareHold > .zero && held.count < heldCap {
                    expected = refused(.perAddress, .held)
                    reach(.held)
                } else {
                    expected = refused(.perAddress, .reset)
                    reach(settings.overShareHold > .zero ? .heldPastCap : .noHoldReset)
                }
            } else if let group = source.group, !takeToken(group) {
                expected = refused(.rate, answered.count < heldCap ? .pastRate : .reset)
                reach(answered.count < heldCap ? .pastRate : .pastRateCap)
            } else if connections.count >= settings.maxConnections {
                reachesTable = true
                idleOnes = connections.filter { $0.idle && !$0.reclaiming }.map(\.id)
                if let first = idleOnes.first {
                    expected = .admit(lastID + 1, reclaim: first)  // any idle one will do (checked below)
                } else {
                    expected = refused(.full, .busy)
                    reach(.full)
                }
            } else {
                expected = .admit(lastID + 1, reclaim: nil)
            }
            if source.group == nil && connections.count(where: { $0.group == nil }) >= settings.maxConnectionsPerAddress,
               case .admit = arrival { reach(.trustedPastShare) }
            if let group = source.group, case .admit = arrival, connections.contains(where: { $0.group == group }) {
                if group == 2, source.address != connections.last(where: { $0.group == 2 })?.address { reach(.sharedV6Prefix) }
                if group == 0, source.address != connections.last(where: { $0.group == 0 })?.address { reach(.sharedMappedV4) }
            }
            if askedIdle && !reachesTable { return "isIdle asked before the table's rule (or with the table not full)" }
            let jittered = jitter.draws - drawsBefore
            switch (expected, arrival) {
            case (.admit(let id, let wanted), .admit(let got, let reclaim)):
                guard got == id else { return "admitted as \(got), not the fresh id \(id) (one admitted twice?)" }
                if let reclaim {
                    guard wanted != nil, idleOnes.contains(reclaim) else {
                        return "reclaimed \(reclaim), not an idle connection (idle: \(idleOnes)), with \(connections.count) open"
                    }
                    connections[connections.firstIndex { $0.id == reclaim }!].reclaiming = true
                    reach(.reclaimed)
                } else if wanted != nil {
                    return "the table is full: admitted without reclaiming one of \(idleOnes)"
                }
                lastID = got
                accepted += 1
                connections.append(Connection(id: got, fd: fd, address: source.address, group: source.group))
                reach(.admitted)
            case (.refuse(let want), .refuse(let got)) where want == got:
                switch got.answer {
                case .busy, .reset:
                    if let broken = closeDescriptor(fd, "a refusal") { return broken }
                case .pastRate:
                    pendingAnswer = fd
                case .held:
                    guard jittered == 1 else { return "a hold drew its jitter \(jittered) times" }
                    let until = now + settings.overShareHold * jitter.last
                    let hold = until - now
                    guard hold >= settings.overShareHold * 0.5, hold <= settings.overShareHold * 1.5 else {
                        return "a hold of \(hold), outside half to one and a half of \(settings.overShareHold)"
                    }
                    held.append((fd, until))
                }
            default:
                return "from \(source.address): \(arrival), the doc's rules say \(expected)"
            }
            if case .refuse(let r) = arrival, r.answer != .held, jittered != 0 { return "a \(r.answer) drew a hold's jitter" }
            if case .admit = arrival, jittered != 0 { return "an admission drew a hold's jitter" }
            return nil
        }

        func tick() -> String? {
            var asked: [Int32] = []
            let sweep = m.tick(now: now) { fd in
                asked.append(fd)
                return hungUp.contains(fd)
            }
            guard asked == answered.map(\.fd) else { return "the sweep asked about \(asked), not every answered one \(answered.map(\.fd))" }
            ticks += 1
            var expected = Machine.Sweep()
            expected.reset = held.filter { $0.until <= now }.map(\.fd)
            expected.close = answered.filter { hungUp.contains($0.fd) || $0.until <= now }.map(\.fd)
            expected.checkTimeouts = ticks % period == 0
            guard sweep == expected else { return "the sweep \(sweep), the doc's rules say \(expected)" }
            if !sweep.reset.isEmpty { reach(.holdEnded) }
            for fd in sweep.close { reach(hungUp.contains(fd) ? .hungUpClosed : .lingerEnded) }
            held.removeAll { $0.until <= now }
            answered.removeAll { hungUp.contains($0.fd) || $0.until <= now }
            for fd in sweep.reset + sweep.close {
                hungUp.remove(fd)
                if let broken = closeDescriptor(fd, "the sweep") { return broken }
            }
            // No spin: what is still kept is not yet due.
            if let overdue = (m.held + m.answered).first(where: { $0.until <= now }) {
                return "descriptor \(overdue.fd) kept past its time after a sweep"
            }
            return nil
        }

        func close(_ index: Int) -> String? {
            let connection = connections.remove(at: index)
            m.closed(connection.id)
            closedIDs.append(connection.id)
            return closeDescriptor(connection.fd, "a connection's close")
        }

        func stop() -> String? {
            let result = m.stop()
            guard lifecycle != .stopping else { return result == nil ? nil : "a second stop: \(result!)" }
            let expected = Machine.Stop(resumeListener: lifecycle == .paused, reset: (held + answered).map(\.fd))
            guard result == expected else { return "stop \(String(describing: result)), the doc's rules say \(expected)" }
            if expected.resumeListener { reach(.stoppedWhilePaused); suspended = false }
            if !expected.reset.isEmpty { reach(.stopHandedBack) }
            lifecycle = .stopping
            for fd in expected.reset {
                hungUp.remove(fd)
                if let broken = closeDescriptor(fd, "the stop") { return broken }
            }
            held = []
            answered = []
            return nil
        }

        func check() -> String? {
            if let broken = limitViolation(settings: settings, heldCap: heldCap, open: m.openConnections,
                                           reclaiming: connections.count(where: { $0.reclaiming }),
                                           perAddress: (0..<groups).map(count), held: m.held.count, answered: m.answered.count) {
                return broken
            }
            if m.openConnections != connections.count { return "\(m.openConnections) open, the driver has \(connections.count)" }
            if m.accepted != accepted { return "accepted \(m.accepted), admitted \(accepted)" }
            if m.lifecycle != lifecycle { return "lifecycle \(m.lifecycle), expected \(lifecycle)" }
            if suspended != (lifecycle == .paused) { return "the listener is \(suspended ? "" : "not ")suspended while \(lifecycle)" }
            if m.heldCap != heldCap { return "heldCap \(m.heldCap), expected \(heldCap)" }
            if !m.held.elementsEqual(held, by: { $0.fd == $1.fd && $0.until == $1.until }) {
                return "held \(m.held), given \(held)"
            }
            if !m.answered.elementsEqual(answered, by: { $0.fd == $1.fd && $0.until == $1.until }) {
                return "answered \(m.answered), given \(answered)"
            }
            if lifecycle == .stopping && !(m.held.isEmpty && m.answered.isEmpty) { return "descriptors kept after the stop" }
            return nil
        }

        func step(_ step: Step) -> String? {
            switch step {
            case .arrive(let i):
                return arrive(sources[i % sources.count])
            case .answer:
                if let fd = pendingAnswer { return answer(fd) }
            case .wait(let ms):
                now += .milliseconds(ms)
            case .tick:
                return tick()
            case .hangUp(let k):
                if !answered.isEmpty { hungUp.insert(answered[k % answered.count].fd) }
            case .toggle(let k):
                let open = connections.indices.filter { !connections[$0].reclaiming }
                if !open.isEmpty { connections[open[k % open.count]].idle.toggle() }
            case .close(let k):
                if !connections.isEmpty { return close(k % connections.count) }
            case .strayClose(let k):
                let id = k % 2 == 0 && !closedIDs.isEmpty ? closedIDs[k / 2 % closedIDs.count] : [0, -1, lastID + 1 + k][k % 3]
                let open = m.openConnections
                m.closed(id)
                reach(.strayClose)
                if m.openConnections != open { return "a stray close of \(id) changed the open count" }
            case .outOfDescriptors:
                let paused = m.outOfDescriptors()
                guard paused == (lifecycle == .accepting) else { return "outOfDescriptors \(paused) while \(lifecycle)" }
                if paused {
                    if suspended { return "suspended twice" }
                    suspended = true
                    pendingResumes += 1
                    lifecycle = .paused
                    reach(.paused)
                }
            case .resumeDue:
                guard pendingResumes > 0 || lifecycle != .paused else { return nil }  // only a scheduled one ends a pause
                if pendingResumes > 0 { pendingResumes -= 1 }
                let resumed = m.resumeDue()
                guard resumed == (lifecycle == .paused) else { return "resumeDue \(resumed) while \(lifecycle)" }
                if resumed {
                    if !suspended { return "resumed a listener that is not suspended" }
                    suspended = false
                    lifecycle = .accepting
                }
            case .stop:
                return stop()
            }
            return nil
        }

        for (n, s) in steps.enumerated() {
            if let broken = step(s) ?? check() { return "step \(n) (\(s)): \(broken)" }
        }

        // The inputs stop: the answer is sent, the pause ends, every connection closes, time
        // passes every hold and linger, the sweep runs.
        var drain: [Step] = [.answer]
        drain += Array(repeating: .resumeDue, count: pendingResumes)
        drain += Array(repeating: .close(0), count: connections.count)
        drain += [.wait(20_000), .tick]
        for s in drain {
            if let broken = step(s) ?? check() { return "draining (\(s)): \(broken)" }
        }
        if m.openConnections != 0 { return "drained: \(m.openConnections) still open" }
        if !m.held.isEmpty || !m.answered.isEmpty { return "drained: \(m.held.count) held, \(m.answered.count) answered still kept" }
        if suspended || lifecycle == .paused { return "drained: the listener is still suspended" }
        if !descriptors.isEmpty { return "drained: descriptors \(descriptors.sorted()) never closed" }
        // Idle again: every address is admitted anew (a second apart, for the rate), or refused
        // as busy once stopped.
        for source in sources.indices {
            let before = accepted
            if let broken = step(.arrive(source)) ?? check() { return "idle again (\(sources[source].address)): \(broken)" }
            let admittable = sources[source].group == nil || settings.maxConnectionsPerAddress > 0
            if lifecycle != .stopping && admittable && accepted != before + 1 {
                return "idle again: \(sources[source].address) was not admitted"
            }
            for s in [Step.answer, .close(0), .wait(1_000), .tick] {
                if let broken = step(s) ?? check() { return "idle again (\(s)): \(broken)" }
            }
        }
        return nil
    }
}
