/// A SQLSTATE code (PostgreSQL manual, Appendix A), kept typed so that callers can react to the
/// condition ("that email is taken") rather than parse messages.
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The two-character class ("23" integrity constraint violation…).
    public var classCode: String { String(rawValue.prefix(2)) }

    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    public static let notNullViolation = SQLState(rawValue: "23502")
    public static let checkViolation = SQLState(rawValue: "23514")
    public static let exclusionViolation = SQLState(rawValue: "23P01")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let adminShutdown = SQLState(rawValue: "57P01")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let syntaxError = SQLState(rawValue: "42601")
    public static let invalidTextRepresentation = SQLState(rawValue: "22P02")
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    public static let featureNotSupported = SQLState(rawValue: "0A000")
}

public enum PostgresError: Error, CustomStringConvertible, Sendable {
    /// The server answered with an error.
    case server(ServerError)
    /// No connection could be made, or it broke.
    case connection(String)
    /// A value could not be decoded into the requested Swift type.
    case decoding(column: String, message: String)
    /// Every pooled connection stayed busy for the whole wait: the HTTP layer answers 503.
    case poolTimeout(waited: Double)
    case poolClosed

    public struct ServerError: Sendable, CustomStringConvertible {
        public let sqlState: SQLState
        public let severity: String
        public let message: String
        public let detail: String?
        public let hint: String?
        public let constraint: String?
        public let table: String?
        public let column: String?

        public var description: String {
            var text = "\(severity) \(sqlState): \(message)"
            if let detail { text += " (\(detail))" }
            return text
        }
    }

    public var sqlState: SQLState? {
        if case .server(let e) = self { return e.sqlState }
        return nil
    }

    /// The constraint a 23xxx error names, so callers can tell which rule was broken.
    public var constraint: String? {
        if case .server(let e) = self { return e.constraint }
        return nil
    }

    public var description: String {
        switch self {
        case .server(let e): return e.description
        case .connection(let m): return "connection: \(m)"
        case .decoding(let column, let m): return "column \(column): \(m)"
        case .poolTimeout(let waited): return "no database connection free after \(waited)s"
        case .poolClosed: return "the connection pool is closed"
        }
    }
}
