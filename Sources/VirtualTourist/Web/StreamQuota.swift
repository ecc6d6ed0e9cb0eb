import Synchronization

/// Live album pages (event streams) open per person. Each holds a connection and a watcher for as
/// long as the tab stays open; without a cap one account could hold every connection the server
/// has. The server ends every stream after its lifetime anyway (ServerConfiguration.maxStreamLifetime).
final class StreamQuota: Sendable {
    let perPerson: Int
    private let open = Mutex<[Int64: Int]>([:])

    init(perPerson: Int) { self.perPerson = perPerson }

    /// Takes a place for `user`; false when all of theirs are taken.
    func admit(_ user: Int64) -> Bool {
        open.withLock { counts in
            let n = counts[user, default: 0]
            guard n < perPerson else { return false }
            counts[user] = n + 1
            return true
        }
    }

    func release(_ user: Int64) {
        open.withLock { counts in
            if let n = counts[user] { counts[user] = n > 1 ? n - 1 : nil }
        }
    }

    func count(_ user: Int64) -> Int { open.withLock { $0[user, default: 0] } }
}
