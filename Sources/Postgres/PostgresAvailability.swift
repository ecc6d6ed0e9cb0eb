extension PostgresError {
    /// The database cannot be reached or is going away (stopped, restarting, crashed), as opposed
    /// to refusing a statement: worth waiting for, and answered 503 rather than 500. SQLSTATE class
    /// 08 is "connection exception"; 57P01–57P03 are admin/crash shutdown and "cannot connect now"
    /// (PostgreSQL manual, Appendix A).
    public var meansDatabaseUnavailable: Bool {
        switch self {
        case .connection, .poolClosed: return true
        case .server(let error):
            return error.sqlState.classCode == "08" || ["57P01", "57P02", "57P03"].contains(error.sqlState.rawValue)
        case .decoding, .poolTimeout: return false
        }
    }
}
