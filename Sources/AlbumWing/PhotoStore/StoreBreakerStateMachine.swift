/// The photo store's circuit breaker, as a value: no store, no locks, no clock of its own. The
/// driver (`StoreBreaker`) asks before every call to the store, reports how each call ended, and
/// does what the answers say.
///
/// Rules. Closed: calls go to the store, reads at most `readSlots` at once (the rest of the
/// server's handler slots stay free for pages). A call that fails as an outage (`PhotoStoreError
/// .outage`: timeouts, refused connections, 5xx/429, EIO…), or a read that waited `readSlotWait` for
/// a slot (the reads ahead of it hang), opens the breaker. Open: every call is refused at once, with
/// the time left, for `coolDown`. After it the next call is the probe — one at a time, the others
/// still refused; the store answering it (found or not, refused or not) closes the breaker, another
/// outage opens it again for twice as long, up to `maxCoolDown`. A store that only cannot write
/// (full, read-only) opens it for writes: reads carry on, until one of them fails too.
/// Calls that started before the breaker opened and end while it is open change nothing. A ticket
/// counts once: finished again (the driver gave the call up at its deadline, and it ended later)
/// it changes nothing.
package struct StoreBreakerStateMachine {
    package struct Settings: Sendable, Equatable {
        package var coolDown: Duration = .seconds(5)
        package var maxCoolDown: Duration = .seconds(30)
        /// Reads of the store in flight at once (GET /photos/:id and thumbnails hold a handler slot
        /// while they read).
        package var readSlots = 6
        /// How long a read may wait for a read slot before the store counts as hanging.
        package var readSlotWait: Duration = .seconds(2)
        /// The driver's (StoreBreaker): how long a write or a read may take before it is given up
        /// and counts as an outage. Above S3Store's own timeouts (20 s for a request, 5 s for a
        /// read), which name the failure better when they come first.
        package var writeDeadline: Duration = .seconds(30)
        package var readDeadline: Duration = .seconds(6)

        package init() {}
    }

    package enum State: Equatable {
        case closed
        /// Refusing until `until` (reads too when `reads`); the next cool-down after a failed probe
        /// is twice `coolDown`.
        case open(until: ContinuousClock.Instant, coolDown: Duration, reads: Bool)
        /// One call is trying the store.
        case probing(coolDown: Duration, reads: Bool)
    }

    package enum Kind: Sendable { case read, write }

    /// One admitted call, reported back with `finished`.
    package struct Ticket: Hashable, Sendable {
        fileprivate let number: Int
        package let kind: Kind
        package let probe: Bool
    }

    package enum Admission: Equatable {
        /// Call the store (as the probe when `ticket.probe`), then report `finished`.
        case call(Ticket)
        /// Every read slot is taken: wait to be woken (a read finished) or until `until`, then ask
        /// again with the same `waitingSince`.
        case wait(until: ContinuousClock.Instant)
        /// Do not call the store; the caller may try again after `retryAfter`.
        case refuse(retryAfter: Duration)
    }

    /// How a call ended, as far as the store's health goes.
    package enum Outcome: Equatable {
        /// The store answered: a blob, none, or a refusal of this one request.
        case answered
        /// The store is down or hangs (`PhotoStoreError.outage`).
        case outage(String)
        /// The store cannot take writes and still reads (`PhotoStoreError.writesOnly`: a full disk,
        /// a file system remounted read-only).
        case writeOutage(String)
    }

    /// What changed, for the log and the gauges.
    package enum Change: Equatable {
        case opened(reason: String, reads: Bool)
        case closed(after: Duration)
    }

    package let settings: Settings
    private(set) var state: State = .closed
    private(set) var readsInFlight = 0
    /// The outage's start and the reason that opened it; nil while closed.
    private(set) var outage: (since: ContinuousClock.Instant, reason: String)?
    private var nextTicket = 0
    /// The tickets out: a ticket not among them was finished already.
    private var out: Set<Int> = []

    package init(settings: Settings = Settings()) {
        precondition(settings.readSlots > 0)
        self.settings = settings
    }

    // MARK: Events

    /// A call of `kind` asks at `now`; `waitingSince` is when a read first asked, when it is asking
    /// again after a `wait`.
    package mutating func admit(_ kind: Kind, now: ContinuousClock.Instant, waitingSince: ContinuousClock.Instant? = nil) -> (Admission, Change?) {
        if kind == .read && !readsRefused { return admitRead(now: now, since: waitingSince ?? now) }
        switch state {
        case .closed:
            return (.call(ticket(kind, probe: false)), nil)
        case .open(let until, let coolDown, let reads):
            guard now >= until else { return (.refuse(retryAfter: until - now), nil) }
            state = .probing(coolDown: coolDown, reads: reads)
            return (.call(ticket(kind, probe: true)), nil)
        case .probing:
            return (.refuse(retryAfter: settings.coolDown), nil)
        }
    }

    /// A read while reads are not refused: a slot, a wait for one, or — when the reads ahead held
    /// every slot for the whole wait — the store counts as hanging. Those reads still end by their
    /// own timeout; nothing new joins them.
    private mutating func admitRead(now: ContinuousClock.Instant, since: ContinuousClock.Instant) -> (Admission, Change?) {
        guard readsInFlight >= settings.readSlots else { return (.call(ticket(.read, probe: false)), nil) }
        guard now - since >= settings.readSlotWait else { return (.wait(until: since + settings.readSlotWait), nil) }
        let reason = "\(readsInFlight) reads of the store did not end within \(Self.seconds(settings.readSlotWait))"
        // As a read's outage: open while closed, and while open or probing for writes only, reads
        // stop too — the probe out, if any, stays the only one.
        let change = seen(.outage(reason), now: now, probeTurn: false)
        return (.refuse(retryAfter: refusal(now: now) ?? settings.coolDown), change)
    }

    /// A call admitted with `ticket` ended at `now`.
    package mutating func finished(_ ticket: Ticket, _ outcome: Outcome, now: ContinuousClock.Instant) -> Change? {
        guard out.remove(ticket.number) != nil else { return nil }
        if ticket.kind == .read { readsInFlight -= 1 }
        guard ticket.probe else { return seen(outcome, now: now, probeTurn: false) }
        guard case .probing(let coolDown, _) = state else { return nil }
        let next = min(coolDown * 2, settings.maxCoolDown)
        switch outcome {
        case .answered:
            return close(now: now)
        case .outage(let reason):
            state = .open(until: now + next, coolDown: next, reads: true)
            outage = (outage?.since ?? now, reason)
        case .writeOutage(let reason):
            state = .open(until: now + next, coolDown: next, reads: false)
            outage = (outage?.since ?? now, reason)
        }
        return nil
    }

    /// The store was read without asking for a slot (the machine's tests; StoreBreaker itself
    /// always asks): an outage opens the breaker as a call's would, and an answer in the probe's
    /// turn closes it as the probe's would.
    package mutating func seen(_ outcome: Outcome, now: ContinuousClock.Instant) -> Change? {
        seen(outcome, now: now, probeTurn: true)
    }

    private mutating func seen(_ outcome: Outcome, now: ContinuousClock.Instant, probeTurn: Bool) -> Change? {
        switch (state, outcome) {
        case (.closed, .outage(let reason)):
            return open(now: now, reason: reason, reads: true)
        case (.closed, .writeOutage(let reason)):
            return open(now: now, reason: reason, reads: false)
        case (.open(let until, let coolDown, false), .outage(let reason)):
            // Writes were already refused; now reads fail too.
            state = .open(until: until, coolDown: coolDown, reads: true)
            outage = (outage?.since ?? now, reason)
            return .opened(reason: reason, reads: true)
        case (.probing(let coolDown, false), .outage(let reason)):
            // The same while a write probes: the reads stop now, not when the probe ends.
            state = .probing(coolDown: coolDown, reads: true)
            outage = (outage?.since ?? now, reason)
            return .opened(reason: reason, reads: true)
        case (.open(let until, _, true), .answered) where probeTurn && now >= until:
            return close(now: now)
        default:
            return nil
        }
    }

    // MARK: Reading

    /// Whether a read at `now` would be refused, without taking the probe's turn (the event loop
    /// asks this: it answers refusals itself and leaves the probe to a handler slot).
    package func refusal(now: ContinuousClock.Instant) -> Duration? {
        switch state {
        case .open(let until, _, true): return now < until ? until - now : nil
        case .probing(_, true): return settings.coolDown
        default: return nil
        }
    }

    package var isClosed: Bool { state == .closed }

    /// Reads are refused (not only writes).
    package var readsRefused: Bool {
        switch state {
        case .closed: false
        case .open(_, _, let reads), .probing(_, let reads): reads
        }
    }

    // MARK: Helpers

    private mutating func ticket(_ kind: Kind, probe: Bool) -> Ticket {
        nextTicket += 1
        out.insert(nextTicket)
        if kind == .read { readsInFlight += 1 }
        return Ticket(number: nextTicket, kind: kind, probe: probe)
    }

    private mutating func open(now: ContinuousClock.Instant, reason: String, reads: Bool) -> Change {
        state = .open(until: now + settings.coolDown, coolDown: settings.coolDown, reads: reads)
        outage = (now, reason)
        return .opened(reason: reason, reads: reads)
    }

    private mutating func close(now: ContinuousClock.Instant) -> Change {
        let since = outage?.since ?? now
        state = .closed
        outage = nil
        return .closed(after: now - since)
    }

    package static func seconds(_ duration: Duration) -> String {
        let value = duration.inSeconds
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// Whole seconds for Retry-After (RFC 9110 §10.2.3), rounded up, at least 1.
    package static func retryAfter(_ duration: Duration) -> Int {
        let c = duration.components
        return max(1, Int(c.seconds) + (c.attoseconds > 0 ? 1 : 0))
    }
}
