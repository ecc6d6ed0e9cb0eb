extension PostgresError {
    /// The database cannot be reached or is going away (stopped, restarting, crashed, cut off), as
    /// opposed to refusing a statement: worth waiting for, and answered 503 rather than 500. SQLSTATE
    /// class 08 is "connection exception"; 57P01–57P03 are admin/crash shutdown and "cannot connect
    /// now" (PostgreSQL manual, Appendix A). A pool wait that timed out counts too: every connection
    /// held past the wait is what a database that stopped answering looks like from here (each
    /// borrower stuck until keepalive notices), and an album worker must wait that out rather than
    /// spend its attempts on it.
    public var meansDatabaseUnavailable: Bool {
        switch self {
        case .connection, .poolClosed, .poolTimeout: return true
        case .server(let error):
            return error.sqlState.classCode == "08" || ["57P01", "57P02", "57P03"].contains(error.sqlState.rawValue)
        case .decoding: return false
        }
    }
}

extension PostgresError {
    /// Why the database is unavailable, in words for /readyz and the log: the kind of failure,
    /// without addresses or credentials.
    public var unavailableReason: String {
        switch self {
        case .connection(let message):
            let text = message.lowercased()
            if text.contains("starting up") { return "the database is starting up" }
            if text.contains("shutting down") { return "the database is shutting down" }
            // libpq's words when the socket failed under a query: a reset, or keepalive giving up on
            // a peer gone silent.
            if text.contains("could not receive data") || text.contains("could not send data") {
                return text.contains("timed out") ? "the database stopped answering (the connection timed out)"
                    : "the connection to the database broke"
            }
            if text.contains("timeout") || text.contains("timed out") { return "connecting to the database timed out" }
            if text.contains("no such file") || text.contains("connection refused") {
                return "the database is not running or refuses connections"
            }
            if text.contains("password") || text.contains("authentication") { return "the database refused our credentials" }
            return "the connection to the database failed or broke"
        case .server(let error):
            switch error.sqlState.rawValue {
            case "57P01": return "the database shut down (administrator command)"
            case "57P02": return "the database crashed and is restarting"
            case "57P03": return "the database is not accepting connections yet"
            default: return "the database connection failed (SQLSTATE \(error.sqlState))"
            }
        case .poolClosed: return "the connection pool is closed (shutting down)"
        case .poolTimeout: return "every database connection stayed busy (the database is slow or not answering)"
        case .decoding: return "the database answered something unreadable"
        }
    }
}
