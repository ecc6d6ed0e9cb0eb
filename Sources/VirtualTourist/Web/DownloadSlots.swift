import Synchronization

/// Album zips being written. Each holds a handler slot for as long as its client takes to read it
/// (the writer waits for the socket), so without a cap a few slow downloads would hold the slots
/// pages need: at most `total` at once (half of the 8 slots kept beyond the pool and the picker,
/// `AppSettings.handlerSlots`) and `perPerson` of one person's.
final class DownloadSlots: Sendable {
    let total: Int
    let perPerson: Int
    private let state = Mutex<(all: Int, byPerson: [Int64: Int])>((0, [:]))

    init(total: Int = 4, perPerson: Int = 2) {
        self.total = total
        self.perPerson = perPerson
    }

    enum Refusal: Error { case busy, tooManyOfYours }

    /// A slot for `user`, given back when the ticket goes: after the download's writer returns, or
    /// with the response when the server never started it (a full executor answers 503).
    func admit(_ user: Int64) -> Result<Ticket, Refusal> {
        state.withLock { s -> Result<Ticket, Refusal> in
            if s.byPerson[user, default: 0] >= perPerson { return .failure(.tooManyOfYours) }
            if s.all >= total { return .failure(.busy) }
            s.all += 1
            s.byPerson[user, default: 0] += 1
            return .success(Ticket(slots: self, user: user))
        }
    }

    var inUse: Int { state.withLock { $0.all } }

    fileprivate func release(_ user: Int64) {
        state.withLock { s in
            s.all -= 1
            if let n = s.byPerson[user] { s.byPerson[user] = n > 1 ? n - 1 : nil }
        }
    }

    final class Ticket: Sendable {
        private let slots: DownloadSlots
        private let user: Int64
        fileprivate init(slots: DownloadSlots, user: Int64) {
            self.slots = slots
            self.user = user
        }
        deinit { slots.release(user) }
    }
}
