import Foundation
import Log
import Synchronization
import Waiting

/// The photo store behind a circuit breaker (StoreBreakerStateMachine holds the rules): once the
/// store is down or hangs, reads and writes are refused at once with an outage error instead of
/// each waiting for the store's timeout, so photo requests cannot fill the handler slots pages
/// need, and the album workers wait (they treat `PhotoStoreError.outage` as "wait for the store").
/// One call at a time probes the store after each cool-down.
///
/// A store can also hang instead of failing (an NFS or FUSE mount that stops answering, an object
/// store that accepts and never answers), which no error would tell: every put and get has a
/// deadline (`writeDeadline`, `readDeadline`). The call runs on a thread of `calls` and the caller
/// waits for it at most that long; past it the call is an outage, to the caller and to the breaker.
/// That bounds the threads a hung store can hold: the first overdue call opens the breaker, after
/// which calls are refused without asking the store, and only one probe per cool-down reaches it
/// (DeadlineCalls caps the rest).
public final class StoreBreaker: PhotoStore, Sendable {
    public let base: any PhotoStore
    /// The breaker; its waiters are reads waiting for a read slot, woken when a read ends.
    private let machine: Waitable<StoreBreakerStateMachine>
    private let refusals = Atomic<Int>(0)
    /// Reads go to the store (the breaker is closed, or open for writes only): read without the
    /// lock on the hot path (every photo).
    private let readsFlow = Atomic<Bool>(true)
    private let logger = Logger(label: "photo-store")
    /// Where calls with a deadline run.
    package let calls = DeadlineCalls()
    private let writeDeadline: Duration
    private let readDeadline: Duration

    package init(_ base: any PhotoStore, settings: StoreBreakerStateMachine.Settings = .init()) {
        self.base = base
        machine = Waitable(StoreBreakerStateMachine(settings: settings))
        writeDeadline = settings.writeDeadline
        readDeadline = settings.readDeadline
    }

    /// The breaker as /readyz and /metrics report it.
    public struct Status: Sendable {
        /// Calls go to the store (the breaker is closed).
        public let available: Bool
        /// closed, open or probing.
        public let state: String
        /// Photos are read from the store (false: they answer 503 at once).
        public let reads: Bool
        /// Why it opened, and how long ago; nil while closed.
        public let reason: String?
        public let seconds: Double?
        /// Calls refused without asking the store, since start.
        public let refused: Int
    }

    public var status: Status {
        let now = ContinuousClock.now
        return machine.withLock { m in
            let state = switch m.state { case .closed: "closed"; case .open: "open"; case .probing: "probing" }
            let seconds = m.outage.map { Double((now - $0.since).components.seconds) }
            return Status(available: m.isClosed, state: state, reads: !m.readsRefused, reason: m.outage?.reason, seconds: seconds,
                          refused: refusals.load(ordering: .relaxed))
        }
    }

    /// Reads of the store under way (tests).
    package var readsInFlight: Int { machine.withLock { $0.readsInFlight } }

    /// Retry-After seconds when a read would be refused now; nil when it may go to the store.
    /// Never waits and never takes the probe's turn: the event loop asks it.
    package func refusal() -> Int? {
        guard !readsFlow.load(ordering: .acquiring) else { return nil }
        let now = ContinuousClock.now
        guard let left = machine.withLock({ $0.refusal(now: now) }) else { return nil }
        refusals.add(1, ordering: .relaxed)
        return StoreBreakerStateMachine.retryAfter(left)
    }

    /// `body` as one call of `kind`, refused, waited for or admitted by the breaker, and given up
    /// as an outage after the deadline of its kind (none for `deadline: false`: the collector's
    /// listing of a whole bucket).
    package func call<T>(_ kind: StoreBreakerStateMachine.Kind, deadline: Bool = true, _ body: @escaping () throws -> T) throws -> T {
        let asked = ContinuousClock.now
        // Asked again whenever a read ends, until a slot is free, the breaker refuses, or the
        // wait the machine allows is over.
        var changes: [StoreBreakerStateMachine.Change] = []
        func admit(_ m: inout StoreBreakerStateMachine) -> StoreBreakerStateMachine.Admission {
            let (answer, change) = m.admit(kind, now: .now, waitingSince: asked)
            if let change {
                changes.append(change)
                readsFlow.store(!m.readsRefused, ordering: .releasing)
            }
            return answer
        }
        var admission = machine.withLock { admit(&$0) }
        while case .wait(let until) = admission {
            admission = machine.wait(for: { m -> StoreBreakerStateMachine.Admission? in
                let answer = admit(&m)
                if case .wait = answer { return nil }
                return answer
            }, timeout: until - .now) ?? machine.withLock { admit(&$0) }
        }
        changes.forEach(log)
        let ticket: StoreBreakerStateMachine.Ticket
        switch admission {
        case .call(let admitted):
            ticket = admitted
        case .refuse(let retryAfter):
            refusals.add(1, ordering: .relaxed)
            throw PhotoStoreError.refused(retryAfter: StoreBreakerStateMachine.retryAfter(retryAfter),
                                          reason: machine.withLock { $0.outage?.reason })
        case .wait:
            preconditionFailure("the loop above ends only on a call or a refusal")
        }
        let admitted = ticket
        var outcome = StoreBreakerStateMachine.Outcome.answered
        defer {
            let now = ContinuousClock.now
            log(update(wake: kind == .read ? .all : .none) { $0.finished(admitted, outcome, now: now) })
        }
        do {
            guard deadline else { return try body() }
            let limit = kind == .read ? readDeadline : writeDeadline
            switch calls.run(within: limit, body) {
            case .returned(let result):
                return try result.get()
            case .overdue:
                let error = PhotoStoreError(description: "the photo store did not answer a \(kind == .read ? "read" : "write") within \(StoreBreakerStateMachine.seconds(limit))",
                                            outage: true)
                // Troubleshooting: the photo store did not answer a
                logger.warning("\(error)")
                throw error
            }
        } catch let error as PhotoStoreError {
            outcome = Self.outcome(error)
            throw error
        }
    }

    package static func outcome(_ error: PhotoStoreError) -> StoreBreakerStateMachine.Outcome {
        guard error.outage else { return .answered }
        return error.writesOnly ? .writeOutage(error.description) : .outage(error.description)
    }

    /// An event given to the machine; `readsFlow` follows its state under the same lock. Reads
    /// waiting for a slot are woken as `wake` says, and always when the breaker changed (a write's
    /// outage that opens it refuses them now, not at the end of their wait).
    private func update(wake: Waitable<StoreBreakerStateMachine>.Wake = .none,
                        _ event: (inout StoreBreakerStateMachine) -> StoreBreakerStateMachine.Change?) -> StoreBreakerStateMachine.Change? {
        let change = machine.change(wake: wake) { m in
            let change = event(&m)
            if change != nil { readsFlow.store(!m.readsRefused, ordering: .releasing) }
            return change
        }
        if change != nil, wake != .all { machine.change(wake: .all) { _ in } }
        return change
    }

    private func log(_ change: StoreBreakerStateMachine.Change?) {
        switch change {
        case .opened(let reason, let reads)?:
            let coolDown = machine.withLock { StoreBreakerStateMachine.seconds($0.settings.coolDown) }
            // Troubleshooting: photo store breaker open
            logger.warning("photo store breaker open: \(reason); \(reads ? "photos answer 503 and " : "")writes wait, the store is tried again in \(coolDown)")
        case .closed(let after)?:
            logger.info("photo store breaker closed: the store answers again after \(StoreBreakerStateMachine.seconds(.seconds(after.components.seconds)))")
        case nil:
            break
        }
    }


    // MARK: PhotoStore

    public func put(_ bytes: [UInt8]) throws -> String { try call(.write) { [base] in try base.put(bytes) } }
    public func put(_ file: BlobFile) throws -> String { try call(.write) { [base] in try base.put(file) } }
    public func refresh(_ hash: String) throws -> Bool { try call(.write) { [base] in try base.refresh(hash) } }
    public func get(_ hash: String) throws -> [UInt8]? { try call(.read) { [base] in try base.get(hash) } }
    public func list() throws -> [(hash: String, modified: Date)] { try call(.write, deadline: false) { [base] in try base.list() } }
    public func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool {
        try call(.write) { [base] in try base.delete(hash, ifNotModifiedSince: olderThan) }
    }

    /// The breaker's reason while it refuses (asking the store then would wait for its timeout),
    /// else the store's own answer.
    public func problem() -> String? {
        let status = status
        guard !status.available else { return base.problem() }
        return "unavailable for \(Int(status.seconds ?? 0)) s: \(status.reason ?? "the store did not answer")"
    }
}
