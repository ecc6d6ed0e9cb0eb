import CLibPQ
#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// One libpq connection. Not thread-safe, like the PGconn it wraps: the pool lends it to one caller
/// at a time, and nothing else should share it. (`@unchecked Sendable` lets it move between threads
/// under that rule.)
public final class PostgresConnection: @unchecked Sendable {
    private var conn: OpaquePointer?
    public let url: String
    /// Statements prepared on this connection, by SQL text and parameter types (the types are
    /// fixed at PREPARE). The app's SQL is a fixed set of literals, so this stays small; the cap
    /// keeps a caller that builds SQL text from growing it without end.
    private var prepared: [PreparedKey: String] = [:]
    private static let maxPrepared = 200
    private var preparedCount = 0

    private struct PreparedKey: Hashable {
        let sql: String
        let types: [Oid]
    }

    /// Connection options applied to every connection of a pool.
    public struct Options: Sendable {
        /// Shown in pg_stat_activity, so an administrator can tell the app's connections apart.
        public var applicationName = "virtual-tourist"
        /// Milliseconds a statement may run before the server cancels it; 0 for no limit.
        public var statementTimeoutMilliseconds = 30_000
        public var connectTimeoutSeconds = 10
        /// TCP keepalive probes and tcp_user_timeout, on every connection (pooled ones and the LISTEN
        /// link alike): a peer that vanished without a FIN (a silent partition, a NAT or firewall
        /// that forgot the flow, a failover that sent no reset) is noticed within `Keepalive.bound`
        /// instead of the kernel's retransmission time (about 15 minutes on Linux), and the query
        /// waiting on it fails as a broken connection. nil turns them off. Ignored on unix sockets.
        public var keepalive: Keepalive? = Keepalive()
        public init() {}
    }

    /// libpq's keepalives_idle, keepalives_interval, keepalives_count and tcp_user_timeout.
    public struct Keepalive: Sendable {
        /// Seconds of silence before the first probe.
        public var idleSeconds = 10
        public var intervalSeconds = 5
        public var count = 3
        /// How long sent data (a query, or a probe) may stay unacknowledged before the kernel drops
        /// the connection. On Linux it also cuts the probes short: a connection that heard nothing
        /// for this long is dropped at the next probe.
        public var userTimeoutMilliseconds = 30_000
        public init() {}

        /// Seconds within which a dead peer is noticed: a query in flight after tcp_user_timeout,
        /// an idle connection after its unanswered probes (on Linux at the first probe past
        /// tcp_user_timeout), plus one interval of slack for the kernel's timers. 35 s with the
        /// defaults.
        public var bound: Double {
            max(Double(userTimeoutMilliseconds) / 1000, Double(idleSeconds + intervalSeconds * count)) + Double(intervalSeconds)
        }
    }

    /// Connects with a postgresql:// URL or a conninfo string ("host=/tmp dbname=x").
    public init(url: String, options: Options = Options()) throws {
        self.url = url
        // expand_dbname=1 lets `dbname` carry a whole URL or conninfo; the keywords after it override
        // what it says, so our session settings always apply. TimeZone=UTC keeps timestamptz text
        // output (psql, logs) unambiguous; binary values do not depend on it.
        var keywords = ["dbname", "application_name", "options", "connect_timeout"]
        var values = [url, options.applicationName,
                      "-c statement_timeout=\(options.statementTimeoutMilliseconds) -c TimeZone=UTC -c client_min_messages=warning",
                      String(options.connectTimeoutSeconds)]
        if let k = options.keepalive {
            keywords += ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"]
            values += ["1", String(k.idleSeconds), String(k.intervalSeconds), String(k.count), String(k.userTimeoutMilliseconds)]
        }
        conn = withArrayOfCStrings(keywords) { k in
            withArrayOfCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let message = conn.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            PQfinish(conn)
            self.conn = nil
            throw PostgresError.connection(message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    deinit { PQfinish(conn) }

    public func close() {
        PQfinish(conn)
        conn = nil
    }

    /// False once the server or the network dropped the connection.
    public var isHealthy: Bool {
        guard let conn else { return false }
        return PQstatus(conn) == CONNECTION_OK
    }

    /// Whether an idle connection still looks alive, without a round trip: an idle connection should
    /// have nothing to read, so anything readable (a FATAL from pg_terminate_backend, EOF from a
    /// restart) means it is gone.
    func looksAliveWhileIdle() -> Bool {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { return false }
        var pfd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        let n = poll(&pfd, 1, 0)
        if n == 0 { return true }
        return false
    }

    /// Whether the server has closed its end. A FATAL message and the FIN often arrive together;
    /// libpq reads the message and stops, so the EOF would otherwise go unnoticed until the next
    /// query — fatal for a LISTEN connection that never sends one.
    func peerHasClosed() -> Bool {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { return true }
        var byte: UInt8 = 0
        let n = recv(PQsocket(conn), &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    /// Inside a transaction block (open, or aborted by an error and waiting for ROLLBACK).
    var isInTransaction: Bool {
        guard let conn else { return false }
        let status = PQtransactionStatus(conn)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The backend's process id, for pg_terminate_backend in tests and for logs.
    public var backendPID: Int32 { conn.map { PQbackendPID($0) } ?? 0 }

    var socket: Int32 { conn.map { PQsocket($0) } ?? -1 }

    // MARK: Queries

    /// Runs one statement with bound parameters ($1, $2, …). Parameters are never spliced into the
    /// SQL text: strings go as text values, everything else in binary.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        guard let conn else { throw PostgresError.connection("connection is closed") }
        let encoded = EncodedParameters(parameters)
        // The values point into `encoded`'s storage: it must outlive every libpq call below.
        defer { withExtendedLifetime(encoded) {} }
        let (values, lengths, formats) = (encoded.values, encoded.lengths, encoded.formats)
        // Named prepared statements: the server parses and plans a statement once per connection
        // instead of on every call (the map page's statement took longer to plan than to run). The
        // first use sends PREPARE and EXECUTE together in libpq's pipeline mode, so it is still one
        // round trip.
        let key = PreparedKey(sql: sql, types: encoded.types)
        RoundTrips.count()
        let result: OpaquePointer?
        if let name = prepared[key] {
            result = PQexecPrepared(conn, name, Int32(values.count), values, lengths, formats, 1)
        } else if prepared.count < Self.maxPrepared, PQpipelineStatus(conn) == PQ_PIPELINE_OFF {
            preparedCount += 1
            let name = "vt_\(preparedCount)"
            return try prepareAndRun(conn, name: name, key: key, values: values, lengths: lengths, formats: formats)
        } else {
            result = PQexecParams(conn, sql, Int32(values.count), encoded.types, values, lengths, formats, 1)
        }
        do {
            return try consume(result)
        } catch let error as PostgresError where error.sqlState == .featureNotSupported {
            // "cached plan must not change result type": the schema changed under a prepared
            // statement. Forget it; the next call prepares it again.
            prepared[key] = nil
            throw error
        }
    }

    /// Several statements in one round trip (libpq's pipeline mode): all are sent, then one sync,
    /// then the results are read in order. They run one after another on the server in one implicit
    /// transaction, committed at the sync (each still takes its own snapshot, as under READ
    /// COMMITTED); a statement that fails aborts the ones after it and rolls back the ones before,
    /// and the first error is thrown once every result has been read, so the connection stays usable.
    /// For a page that needs a few independent simple statements: each is cheap to plan (a single
    /// statement joining them all with CTEs was planned anew on every call, which cost more than
    /// running it).
    public func pipeline(_ statements: [PostgresStatement]) throws -> [PostgresResult] {
        guard let conn else { throw PostgresError.connection("connection is closed") }
        if statements.count == 1 { return [try query(statements[0].sql, statements[0].parameters)] }
        guard PQpipelineStatus(conn) == PQ_PIPELINE_OFF, PQenterPipelineMode(conn) == 1 else {
            return try statements.map { try query($0.sql, $0.parameters) }
        }
        defer { PQexitPipelineMode(conn) }
        RoundTrips.count()
        let encoded = statements.map { EncodedParameters($0.parameters) }
        defer { withExtendedLifetime(encoded) {} }
        // Per statement: the name it was just prepared under (its PREPARE result comes first).
        var preparing: [(key: PreparedKey, name: String)?] = []
        var sent = true
        for (statement, parameters) in zip(statements, encoded) where sent {
            let key = PreparedKey(sql: statement.sql, types: parameters.types)
            let count = Int32(parameters.values.count)
            if let name = prepared[key] {
                preparing.append(nil)
                sent = PQsendQueryPrepared(conn, name, count, parameters.values, parameters.lengths, parameters.formats, 1) == 1
            } else if prepared.count + preparing.count < Self.maxPrepared {
                preparedCount += 1
                let name = "vt_\(preparedCount)"
                preparing.append((key, name))
                sent = PQsendPrepare(conn, name, statement.sql, count, parameters.types) == 1
                    && PQsendQueryPrepared(conn, name, count, parameters.values, parameters.lengths, parameters.formats, 1) == 1
            } else {
                preparing.append(nil)
                sent = PQsendQueryParams(conn, statement.sql, count, parameters.types, parameters.values, parameters.lengths,
                                         parameters.formats, 1) == 1
            }
        }
        guard sent, PQpipelineSync(conn) == 1 else {
            throw PostgresError.connection(String(cString: PQerrorMessage(conn)))
        }
        // Every command's result is followed by a NULL; the sync's result ends the pipeline.
        func nextCommandResult() -> OpaquePointer? {
            let result = PQgetResult(conn)
            if result != nil { _ = PQgetResult(conn) }
            return result
        }
        var results: [PostgresResult] = []
        var firstError: Error?
        for (index, statement) in preparing.enumerated() {
            if let statement {
                if let preparation = nextCommandResult() {
                    if PQresultStatus(preparation) == PGRES_COMMAND_OK { prepared[statement.key] = statement.name }
                    PQclear(preparation)
                }
            }
            let execution = nextCommandResult()
            do {
                if let execution, PQresultStatus(execution) == PGRES_PIPELINE_ABORTED {
                    PQclear(execution)
                    throw PostgresError.connection("statement \(index + 1) of a pipeline did not run: an earlier one failed")
                }
                results.append(try consume(execution))
            } catch {
                if let error = error as? PostgresError, error.sqlState == .featureNotSupported {
                    prepared[PreparedKey(sql: statements[index].sql, types: encoded[index].types)] = nil
                }
                if firstError == nil { firstError = error }
            }
        }
        let commitError = readToSync(conn)
        if let error = firstError ?? commitError { throw error }
        return results
    }

    /// Reads what is left up to the pipeline's sync point. An error there is the implicit
    /// transaction failing at commit (a deferred trigger, a deadlock it met, a serialization
    /// failure): every statement answered OK, yet nothing was kept. It was read and dropped, so a
    /// worker's batch counted as written was rolled back unseen.
    private func readToSync(_ conn: OpaquePointer) -> Error? {
        var failure: Error?
        var emptyReads = 0
        // A NULL ends each command's results; two in a row mean nothing more is coming.
        while emptyReads < 2 {
            guard let current = PQgetResult(conn) else {
                emptyReads += 1
                continue
            }
            emptyReads = 0
            let status = PQresultStatus(current)
            if status == PGRES_PIPELINE_SYNC {
                PQclear(current)
                break
            }
            if failure == nil, status == PGRES_FATAL_ERROR {
                failure = serverError(current)
            }
            PQclear(current)
        }
        return failure
    }

    /// PREPARE and EXECUTE in one pipeline (libpq ≥ 14), then back to normal mode.
    private func prepareAndRun(_ conn: OpaquePointer, name: String, key: PreparedKey, values: [UnsafePointer<CChar>?],
                               lengths: [Int32], formats: [Int32]) throws -> PostgresResult {
        guard PQenterPipelineMode(conn) == 1 else {
            return try consume(PQexecParams(conn, key.sql, Int32(values.count), key.types, values, lengths, formats, 1))
        }
        defer { PQexitPipelineMode(conn) }
        guard PQsendPrepare(conn, name, key.sql, Int32(key.types.count), key.types) == 1,
              PQsendQueryPrepared(conn, name, Int32(values.count), values, lengths, formats, 1) == 1,
              PQpipelineSync(conn) == 1 else {
            throw PostgresError.connection(String(cString: PQerrorMessage(conn)))
        }
        // Results: the PREPARE's, a NULL; the EXECUTE's, a NULL; the sync point.
        let preparation = PQgetResult(conn)
        _ = PQgetResult(conn)
        let execution = PQgetResult(conn)
        if execution != nil { _ = PQgetResult(conn) }
        if let commitError = readToSync(conn) {
            if let preparation, PQresultStatus(preparation) == PGRES_COMMAND_OK { prepared[key] = name }
            [preparation, execution].compactMap { $0 }.forEach { PQclear($0) }
            throw commitError
        }
        guard let preparation else {
            if let execution { PQclear(execution) }
            throw PostgresError.connection(String(cString: PQerrorMessage(conn)))
        }
        if PQresultStatus(preparation) != PGRES_COMMAND_OK {
            if let execution { PQclear(execution) }
            _ = try consume(preparation)  // throws the server's error
            throw PostgresError.connection("PREPARE failed")
        }
        PQclear(preparation)
        prepared[key] = name
        return try consume(execution)
    }

    /// Runs SQL text through the simple query protocol: several statements allowed, no parameters.
    /// For migrations and fixed administrative statements only.
    public func execute(_ sql: String) throws {
        guard let conn else { throw PostgresError.connection("connection is closed") }
        RoundTrips.count()
        _ = try consume(PQexec(conn, sql))
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body(self)
            try execute("COMMIT")
            return value
        } catch {
            if isHealthy { try? execute("ROLLBACK") }
            throw error
        }
    }

    private func consume(_ result: OpaquePointer?) throws -> PostgresResult {
        guard let result else {
            throw PostgresError.connection(conn.map { String(cString: PQerrorMessage($0)) } ?? "no connection")
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            break
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            throw serverError(result)
        default:
            throw PostgresError.connection("unexpected result status \(PQresultStatus(result))")
        }
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var columns: [PostgresResult.Column] = []
        columns.reserveCapacity(columnCount)
        for c in 0..<columnCount {
            columns.append(.init(name: String(cString: PQfname(result, Int32(c))), type: TypeOID(PQftype(result, Int32(c)))))
        }
        var starts: [Int] = [], lengths: [Int] = []
        starts.reserveCapacity(rowCount * columnCount)
        lengths.reserveCapacity(rowCount * columnCount)
        var total = 0
        for r in 0..<Int32(rowCount) {
            for c in 0..<Int32(columnCount) {
                if PQgetisnull(result, r, c) == 1 {
                    starts.append(-1)
                    lengths.append(0)
                } else {
                    let length = Int(PQgetlength(result, r, c))
                    starts.append(total)
                    lengths.append(length)
                    total += length
                }
            }
        }
        var storage: [UInt8] = []
        storage.reserveCapacity(total)
        for r in 0..<Int32(rowCount) {
            for c in 0..<Int32(columnCount) where PQgetisnull(result, r, c) == 0 {
                let length = Int(PQgetlength(result, r, c))
                storage.append(contentsOf: UnsafeRawBufferPointer(start: UnsafeRawPointer(PQgetvalue(result, r, c)!), count: length))
            }
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresResult(columns: columns, storage: storage, starts: starts, lengths: lengths, affectedRows: affected)
    }

    private func serverError(_ result: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let p = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: p)
        }
        guard let state = field("C") else {
            // No SQLSTATE: the error came from libpq itself (the connection broke mid-query).
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            return .connection(message.isEmpty ? "connection lost" : message)
        }
        return .server(.init(sqlState: SQLState(rawValue: state), severity: field("V") ?? field("S") ?? "ERROR",
                             message: field("M") ?? "", detail: field("D"), hint: field("H"),
                             constraint: field("n"), table: field("t"), column: field("c")))
    }

    // MARK: Notifications (used by PostgresListener)

    /// Reads what arrived on the socket; false when the connection is gone.
    func consumeInput() -> Bool {
        guard let conn else { return false }
        return PQconsumeInput(conn) == 1 && PQstatus(conn) == CONNECTION_OK
    }

    /// Sends a query without waiting for its answer; the answer is collected by `pollResult` after
    /// `consumeInput`. False when it could not be sent.
    func sendQuery(_ sql: String) -> Bool {
        guard let conn else { return false }
        return PQsendQuery(conn, sql) == 1
    }

    /// After `sendQuery`: nil while the answer is incomplete, true once it arrived and succeeded,
    /// false when it failed. Never blocks (it reads only what `consumeInput` already took in).
    func pollResult() -> Bool? {
        guard let conn else { return false }
        var ok = true
        while true {
            if PQisBusy(conn) == 1 { return nil }
            guard let result = PQgetResult(conn) else { return ok }
            let status = PQresultStatus(result)
            if status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK { ok = false }
            PQclear(result)
        }
    }

    func nextNotification() -> (channel: String, payload: String, pid: Int32)? {
        guard let conn, let n = PQnotifies(conn) else { return nil }
        defer { PQfreemem(n) }
        return (String(cString: n.pointee.relname), String(cString: n.pointee.extra), n.pointee.be_pid)
    }

    /// Quotes an identifier (a channel name) for statements that cannot take parameters (LISTEN).
    public static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// One statement of a pipeline.
public struct PostgresStatement {
    public let sql: String
    public let parameters: [any PostgresEncodable]
    public init(_ sql: String, _ parameters: [any PostgresEncodable] = []) {
        self.sql = sql
        self.parameters = parameters
    }

    /// First in a pipeline: the statements after it run with their generic plans, made once per
    /// connection, instead of being planned for every call's parameter values (the setting is local
    /// to the pipeline's implicit transaction). PostgreSQL keeps planning a prepared statement anew
    /// while a plan for the average parameter looks costlier than one for the values at hand, which
    /// for a LIMIT or a person's pins is always: on the map page the planning cost as much as the
    /// execution. Only for statements whose generic plan is right for every value: an index range
    /// on the person's own rows, whatever their number.
    public static var genericPlans: PostgresStatement { PostgresStatement("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)") }
}

/// Parameters as libpq takes them, kept alive as long as this value. libpq reads text-format values
/// up to a NUL (it ignores their length), so every value gets one after its bytes.
private final class EncodedParameters {
    let types: [Oid]
    let lengths: [Int32]
    let formats: [Int32]
    private let storage: [UnsafeMutableRawPointer?]
    var values: [UnsafePointer<CChar>?] { storage.map { $0.map { UnsafePointer<CChar>($0.assumingMemoryBound(to: CChar.self)) } } }

    init(_ parameters: [any PostgresEncodable]) {
        let bindings = parameters.map(\.postgresBinding)
        types = bindings.map { Oid($0.type) }
        lengths = bindings.map { Int32($0.bytes?.count ?? 0) }
        formats = bindings.map { Int32($0.binary ? 1 : 0) }
        storage = bindings.map { binding -> UnsafeMutableRawPointer? in
            guard let bytes = binding.bytes else { return nil }
            let p = UnsafeMutableRawPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
            bytes.withUnsafeBytes { if let base = $0.baseAddress { p.copyMemory(from: base, byteCount: bytes.count) } }
            p.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
            return p
        }
    }

    deinit { storage.forEach { $0?.deallocate() } }
}

private func withArrayOfCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { pointers.forEach { free($0) } }
    return pointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress!) }
}
