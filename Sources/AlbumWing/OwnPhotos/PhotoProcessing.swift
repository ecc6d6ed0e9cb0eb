import Waiting

/// Where own photos are decoded and their versions made: at most `slots` at once (one per core:
/// decoding is all CPU), at most one per person, at most `waiting` more of a person's in line and
/// `lineLimit` in all, and none waits longer than `patience`: a member who drops 500 files takes
/// one slot, everyone else's photo goes next, and the handler threads waiting here are bounded.
/// Work waits on a handler's thread, never on an event loop (Waitable, the one waiting primitive).
public final class PhotoProcessing: @unchecked Sendable {
    // @unchecked: all state is inside the Waitable, which locks it.
    public struct Busy: Error, CustomStringConvertible {
        public var description: String { "the server is busy making other photos' versions; try it again in a moment" }
    }

    struct State {
        var running = 0
        var runningPeople: Set<Int64> = []
        /// Tickets in turn order: the first whose person is not running goes next; a person who
        /// just had a turn goes to the back.
        var line: [(ticket: UInt64, person: Int64)] = []
        var next: UInt64 = 0
    }

    public let slots: Int
    public let waiting: Int
    public let lineLimit: Int
    public let patience: Duration
    private let state = Waitable(State())

    public init(slots: Int, waiting: Int = 4, lineLimit: Int? = nil, patience: Duration = .seconds(60)) {
        self.slots = max(1, slots)
        self.waiting = max(0, waiting)
        self.lineLimit = max(1, lineLimit ?? self.slots * 4)
        self.patience = patience
    }

    /// Runs `work` when a slot is free and it is this person's turn; Busy when they already have
    /// `waiting` photos in line (besides the one being made), the line is full, or the turn does
    /// not come within `patience`.
    public func run<T>(for person: Int64, _ work: () throws -> T) throws -> T {
        let ticket: UInt64? = state.change(wake: .none) { state in
            guard state.line.count < lineLimit, state.line.lazy.filter({ $0.person == person }).count < waiting else { return nil }
            state.next += 1
            state.line.append((state.next, person))
            return state.next
        }
        guard let ticket else { throw Busy() }
        let turn = state.wait(for: { state -> Bool? in
            guard state.running < slots, !state.runningPeople.contains(person),
                  state.line.first(where: { !state.runningPeople.contains($0.person) })?.ticket == ticket else { return nil }
            state.line.removeAll { $0.ticket == ticket }
            state.running += 1
            state.runningPeople.insert(person)
            return true
        }, timeout: patience)
        guard turn != nil else {
            // Out of the line, and whoever was behind this ticket may go now.
            state.change(wake: .all) { $0.line.removeAll { $0.ticket == ticket } }
            throw Busy()
        }
        defer {
            state.change(wake: .all) { state in
                state.running -= 1
                state.runningPeople.remove(person)
                // Round robin: the person's next photos go behind everyone who waited meanwhile.
                let theirs = state.line.filter { $0.person == person }
                state.line.removeAll { $0.person == person }
                state.line += theirs
            }
        }
        return try work()
    }

    /// Photos being processed and waiting now (/metrics).
    public var load: (running: Int, waiting: Int) {
        state.withLock { ($0.running, $0.line.count) }
    }
}
