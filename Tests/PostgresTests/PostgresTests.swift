import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Postgres

@Suite struct ValueTests {
    @Test func everySupportedTypeRoundTrips() throws {
        let c = try PostgresConnection(url: try TestDatabase.adminURL())
        func roundTrip<T: PostgresEncodable & PostgresDecodable & Equatable>(_ value: T, as sqlType: String) throws -> T {
            try c.query("SELECT $1::\(sqlType) AS v", [value])[0].decode("v", as: T.self)
        }
        for v in [0, 1, -1, Int.max, Int.min, 42] { #expect(try roundTrip(v, as: "bigint") == v) }
        for v in [Int64.max, Int64.min] { #expect(try roundTrip(v, as: "int8") == v) }
        for v in [Int32.max, Int32.min] { #expect(try roundTrip(v, as: "int4") == v) }
        for v in [0.0, -1.5, 1e300, -1e-300, .infinity, -.infinity, .pi] { #expect(try roundTrip(v, as: "float8") == v) }
        #expect(try roundTrip(Double.nan, as: "float8").isNaN)
        for v in [true, false] { #expect(try roundTrip(v, as: "boolean") == v) }
        for v in ["", "plain", "Zürich 東京 🗾", "quote ' and \" and \\ backslash", String(repeating: "x", count: 100_000), "line\nbreak\ttab"] {
            #expect(try roundTrip(v, as: "text") == v)
        }
        let uuid = UUID()
        #expect(try roundTrip(uuid, as: "uuid") == uuid)
        #expect(try c.query("SELECT $1::uuid::text AS v", [uuid])[0].decode("v", as: String.self) == uuid.uuidString.lowercased())

        // Microsecond precision, both sides of the 2000 epoch, and the extremes PostgreSQL allows.
        let dates = [
            Date(timeIntervalSince1970: 1_795_000_000.123456),
            Date(timeIntervalSince1970: -1_000_000_000.5),
            Date(timeIntervalSince1970: -62_135_596_800),      // 0001-01-01
            Date(timeIntervalSince1970: 253_402_300_799),      // 9999-12-31 23:59:59
            Date(timeIntervalSince1970: 9_214_646_400_000),    // year 294,000-ish: near PostgreSQL's maximum
        ]
        for d in dates {
            let back = try roundTrip(d, as: "timestamptz")
            #expect(abs(back.timeIntervalSince1970 - d.timeIntervalSince1970) < 0.000_002, "\(d) came back as \(back)")
        }
        #expect(try roundTrip(Date.distantFuture, as: "timestamptz") == .distantFuture)
        #expect(try c.query("SELECT $1::timestamptz::text AS v", [Date.distantPast])[0].decode("v", as: String.self) == "-infinity")
        let year2000: Date = try c.query("SELECT '2000-01-01 00:00:00+00'::timestamptz AS v")[0].decode("v")
        #expect(year2000.timeIntervalSince1970 == 946_684_800)

        // 5 MB of bytea, every byte value.
        let blob = Data((0..<(5 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let back: Data = try c.query("SELECT $1::bytea AS v", [blob])[0].decode("v")
        #expect(back == blob)
        #expect(try c.query("SELECT octet_length($1::bytea) AS n", [blob])[0].decode("n", as: Int.self) == blob.count)
        #expect(try roundTrip([UInt8](), as: "bytea") == [])
    }

    @Test func nullsAndOptionals() throws {
        let c = try PostgresConnection(url: try TestDatabase.adminURL())
        let none: String? = nil
        let row = try c.query("SELECT $1::text AS missing, $2::bigint AS present, NULL::timestamptz AS never", [none, Optional(7)])[0]
        #expect(try row.decode("missing", as: String?.self) == nil)
        #expect(try row.decode("present", as: Int?.self) == 7)
        #expect(try row.decode("never", as: Date?.self) == nil)
        #expect(row.isNull("missing"))
        do {
            _ = try row.decode("missing", as: String.self)
            Issue.record("decoding NULL as String should throw")
        } catch let PostgresError.decoding(column, message) {
            #expect(column == "missing")
            #expect(message.contains("NULL"))
        }
        #expect(throws: PostgresError.self) { try row.decode("no_such_column", as: Int.self) }
        #expect(throws: PostgresError.self) { try row.decode("present", as: Date.self) }
    }

    @Test func numericAndOtherTypesDecode() throws {
        let c = try PostgresConnection(url: try TestDatabase.adminURL())
        let row = try c.query("""
            SELECT 12345.6789::numeric AS n, (-0.00012)::numeric AS small, 10000000000000000::numeric AS big,
                   2::smallint AS s, 1.5::real AS r, '{"a":1}'::jsonb AS j, 'x'::varchar AS v, 'NaN'::numeric AS nan
            """)[0]
        #expect(try row.decode("n", as: String.self) == "12345.6789")
        #expect(try row.decode("n", as: Double.self) == 12345.6789)
        #expect(try row.decode("small", as: String.self) == "-0.00012")
        #expect(try row.decode("big", as: Int64.self) == 10_000_000_000_000_000)
        #expect(try row.decode("s", as: Int.self) == 2)
        #expect(try row.decode("r", as: Double.self) == 1.5)
        #expect(try row.decode("j", as: String.self) == "{\"a\": 1}")
        #expect(try row.decode("v", as: String.self) == "x")
        #expect(try row.decode("nan", as: String.self) == "NaN")
    }

    @Test func injectionThroughAParameterStaysData() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("inj"))
        try c.execute("CREATE TABLE notes (body text NOT NULL)")
        let attack = "x'); DROP TABLE notes; --"
        try c.query("INSERT INTO notes (body) VALUES ($1)", [attack])
        let rows = try c.query("SELECT body FROM notes WHERE body = $1", [attack])
        #expect(rows.count == 1)
        #expect(try rows[0].decode("body", as: String.self) == attack)
        #expect(try c.query("SELECT count(*) AS n FROM notes WHERE body = $1", ["' OR '1'='1"])[0].decode("n", as: Int.self) == 0)
    }
}

@Suite struct TransactionAndErrorTests {
    @Test func rollbackOnThrowCommitOnReturn() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("tx"))
        try c.execute("CREATE TABLE t (v int)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try c.transaction { tx in
                try tx.query("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try c.query("SELECT count(*) AS n FROM t")[0].decode("n", as: Int.self) == 0)
        let value = try c.transaction { tx -> Int in
            try tx.query("INSERT INTO t VALUES (2)")
            return 2
        }
        #expect(value == 2)
        #expect(try c.query("SELECT count(*) AS n FROM t")[0].decode("n", as: Int.self) == 1)
        // A failed statement inside: the transaction is rolled back and the connection stays usable.
        #expect(throws: PostgresError.self) {
            try c.transaction { tx in
                try tx.query("INSERT INTO t VALUES (3)")
                try tx.query("SELECT * FROM missing_table")
            }
        }
        #expect(try c.query("SELECT count(*) AS n FROM t")[0].decode("n", as: Int.self) == 1)
    }

    @Test func uniqueViolationKeepsItsSQLStateAndConstraint() throws {
        let c = try PostgresConnection(url: try TestDatabase.migrated("uv"))
        try c.query("INSERT INTO users (email, display_name, password_hash) VALUES ($1, 'A', 'x')", ["Ann@Example.org"])
        do {
            try c.query("INSERT INTO users (email, display_name, password_hash) VALUES ($1, 'B', 'x')", ["ann@example.ORG"])
            Issue.record("a duplicate email in another case must be refused")
        } catch let error as PostgresError {
            #expect(error.sqlState == .uniqueViolation)
            #expect(error.constraint == "users_email_key")
        }
        do {
            try c.query("SELECT 1/0")
        } catch let error as PostgresError {
            #expect(error.sqlState == SQLState(rawValue: "22012"))
            #expect(error.sqlState?.classCode == "22")
        }
    }

    @Test func aPipelineIsOneRoundTripWithResultsInOrderAndSurvivesAFailure() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("pipe"))
        try c.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
        let statements = [
            PostgresStatement("INSERT INTO t VALUES ($1, $2)", [1, "one"]),
            PostgresStatement("SELECT name FROM t WHERE id = $1", [1]),
            PostgresStatement("SELECT count(*) AS n, $1::text AS tag FROM t", ["x"]),
        ]
        var before = RoundTrips.onThisThread
        var results = try c.pipeline(statements)
        #expect(RoundTrips.onThisThread - before == 1)
        #expect(results.count == 3)
        #expect(try results[1][0].decode("name") == "one")
        #expect(try results[2][0].decode("n") == 1 && results[2][0].decode("tag") == "x")
        // Again, now that all three are prepared: the same answers, still one round trip.
        before = RoundTrips.onThisThread
        results = try c.pipeline([statements[1], statements[2], statements[1]])
        #expect(RoundTrips.onThisThread - before == 1)
        #expect(try results[2][0].decode("name") == "one" && results[1][0].decode("n") == 1)
        // The second statement fails: its error is thrown, the first is rolled back with it (one
        // implicit transaction), and the connection goes on.
        #expect(throws: PostgresError.self) {
            try c.pipeline([PostgresStatement("INSERT INTO t VALUES ($1, $2)", [2, "two"]),
                            PostgresStatement("SELECT 1 / $1 AS x", [0]),
                            PostgresStatement("SELECT name FROM t WHERE id = $1", [1])])
        }
        #expect(c.isHealthy)
        #expect(try c.query("SELECT count(*) AS n FROM t WHERE id > $1", [0])[0].decode("n") == 1)
        #expect(try c.pipeline([statements[1], statements[1]]).map { try $0[0].decode("name", as: String.self) } == ["one", "one"])
        // Generic plans hold for the rest of the pipeline only: the setting is local to its transaction.
        let setting = PostgresStatement("SELECT current_setting($1) AS v", ["plan_cache_mode"])
        #expect(try c.pipeline([.genericPlans, setting])[1][0].decode("v") == "force_generic_plan")
        #expect(try c.query(setting.sql, setting.parameters)[0].decode("v") == "auto")
        #expect(try c.pipeline([setting, setting]).map { try $0[0].decode("v", as: String.self) } == ["auto", "auto"])
    }

    @Test func preparedStatementsCostOneRoundTripAndSurviveErrorsAndSchemaChanges() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("prep"))
        try c.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
        try c.query("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
        // First use prepares and runs in one pipeline: one round trip, as every later use.
        for _ in 0..<3 {
            let before = RoundTrips.onThisThread
            #expect(try c.query("SELECT name FROM t WHERE id = $1", [2])[0].decode("name") == "two")
            #expect(RoundTrips.onThisThread - before == 1)
        }
        // The same text with other parameter types is another statement.
        #expect(try c.query("SELECT $1::text AS v", ["a"])[0].decode("v") == "a")
        #expect(try c.query("SELECT $1::text AS v", [Int64(7)])[0].decode("v") == "7")
        // A statement that cannot be prepared reports its own error, and the connection goes on.
        #expect(throws: PostgresError.self) { try c.query("SELEC 1") }
        #expect(throws: PostgresError.self) { try c.query("SELECT nope FROM t WHERE id = $1", [1]) }
        #expect(c.isHealthy)
        #expect(try c.query("SELECT name FROM t WHERE id = $1", [1])[0].decode("name") == "one")
        // Inside a transaction, an aborted one included.
        #expect(throws: PostgresError.self) {
            try c.transaction { db in
                try db.query("INSERT INTO t VALUES ($1, 'three')", [3])
                try db.query("SELECT 1/0 AS x WHERE $1", [true])
            }
        }
        #expect(try c.query("SELECT count(*) AS n FROM t WHERE id > $1", [0])[0].decode("n") == 2)
        // The schema changes under a prepared statement: one clear error at most, then it works again.
        try c.execute("ALTER TABLE t ALTER COLUMN name TYPE varchar(10)")
        _ = try? c.query("SELECT * FROM t WHERE id = $1", [1])
        try c.execute("ALTER TABLE t ADD COLUMN extra int")
        _ = try? c.query("SELECT * FROM t WHERE id = $1", [1])
        #expect(try c.query("SELECT * FROM t WHERE id = $1", [1]).columns.count == 3)
    }

    /// A statement outside a transaction commits at the sync that ends its pipeline (the first use
    /// of a statement, and `pipeline`): a deferred trigger failing there (or a deadlock it meets)
    /// rolls everything back although every statement answered OK. That error used to be read and
    /// dropped, so the caller believed the write was kept.
    @Test func aFailureAtCommitIsThrownHoweverTheStatementWasSent() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("commit"))
        try c.execute("""
            CREATE TABLE t (id int PRIMARY KEY);
            CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.id < 0 THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '40P01'; END IF; RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
            """)
        let insert = "INSERT INTO t VALUES ($1)"
        var failures: [SQLState?] = []
        for id in [-1, -2] {  // prepared and run in one pipeline, then run prepared
            do { try c.query(insert, [id]) } catch let error as PostgresError { failures.append(error.sqlState) }
        }
        do {
            _ = try c.pipeline([PostgresStatement(insert, [-3]), PostgresStatement("SELECT count(*) AS n FROM t WHERE id <> $1", [0])])
        } catch let error as PostgresError { failures.append(error.sqlState) }
        #expect(failures == [.deadlockDetected, .deadlockDetected, .deadlockDetected])
        #expect(c.isHealthy)
        try c.query(insert, [1])
        #expect(try c.pipeline([PostgresStatement(insert, [2]), PostgresStatement("SELECT count(*) AS n FROM t WHERE id <> $1", [0])])[1][0].decode("n") == 2)
        #expect(try c.query("SELECT count(*) AS n FROM t WHERE id < $1", [0])[0].decode("n") == 0)
    }

    @Test func affectedRowsAreCounted() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("aff"))
        try c.execute("CREATE TABLE t (v int)")
        #expect(try c.query("INSERT INTO t SELECT generate_series(1, 5)").affectedRows == 5)
        #expect(try c.query("DELETE FROM t WHERE v > $1", [2]).affectedRows == 3)
    }

    @Test func connectingToNowhereIsAClearError() {
        do {
            _ = try PostgresConnection(url: "postgresql:///nope?host=/nonexistent-dir&connect_timeout=2")
            Issue.record("expected a connection error")
        } catch let PostgresError.connection(message) {
            #expect(message.contains("nonexistent-dir"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

@Suite struct PoolTests {
    /// Waits until the backends pg_terminate_backend was sent to have exited (it only signals
    /// them): a fixed pause was too short on a busy machine.
    static func backendsGone(_ connection: PostgresConnection, _ name: String) -> Bool {
        eventually(timeout: 10) {
            (try? connection.query("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", [name])[0].decode("n", as: Int.self)) == 0
        }
    }

    /// Lends the pool's one connection to a thread of its own and returns once it is lent; the
    /// thread keeps it until the returned semaphore is signalled, runs `whileHeld` with it just
    /// before giving it back, and `afterwards` once it has.
    private func holdTheOnlyConnection(_ pool: PostgresPool,
                                       whileHeld: @escaping @Sendable (PostgresConnection) -> Void = { _ in },
                                       afterwards: @escaping @Sendable () -> Void = {}) -> DispatchSemaphore {
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? pool.withConnection { connection in
                holding.signal()
                release.wait()
                whileHeld(connection)
            }
            afterwards()
        }
        holding.wait()
        return release
    }

    @Test func exhaustionTimesOutWithoutDeadlock() throws {
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 1, acquireTimeout: 0.3)
        let release = holdTheOnlyConnection(pool)
        let started = Date()
        do {
            try pool.query("SELECT 1")
            Issue.record("expected poolTimeout")
        } catch PostgresError.poolTimeout {
            #expect(Date().timeIntervalSince(started) >= 0.25)
        }
        #expect(pool.statistics.inUse == 1)
        release.signal()
        #expect(try pool.query("SELECT 1 AS one")[0].decode("one", as: Int.self) == 1)
    }

    /// A pipeline that opens a transaction and fails before its COMMIT leaves the transaction open
    /// and aborted; the pool rolls it back before lending the connection again.
    @Test func aTransactionLeftOpenIsRolledBackBeforeTheNextBorrower() throws {
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 1)
        defer { pool.close() }
        let backend: Int32 = try pool.withConnection { $0.backendPID }
        #expect(throws: PostgresError.self) {
            try pool.pipeline([PostgresStatement("BEGIN"), PostgresStatement("SELECT 1 / 0"), PostgresStatement("COMMIT")])
        }
        let (pid, inTransaction, one) = try pool.withConnection { connection in
            (connection.backendPID, connection.isInTransaction, try connection.query("SELECT 1 AS one")[0].decode("one", as: Int.self))
        }
        #expect(pid == backend, "the same connection, kept")
        #expect(!inTransaction)
        #expect(one == 1)
    }

    /// Waits until `n` callers stand in the pool's line (so the next one to start comes after them).
    private func waitForLine(_ pool: PostgresPool, _ n: Int) {
        let deadline = Date().addingTimeInterval(10)
        while pool.statistics.waiting < n && Date() < deadline { usleep(1_000) }
        #expect(pool.statistics.waiting == n)
    }

    @Test func waitersAreServedInTheOrderTheyCame() throws {
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 1, acquireTimeout: 10)
        let order = Mutex<[String]>([])
        let group = DispatchGroup()
        group.enter()
        let release = holdTheOnlyConnection(pool, afterwards: {
            // Gives it back and asks again at once: behind everyone already waiting, who were
            // woken for it (with the old condition variable this caller took it back first).
            try? pool.withConnection { _ in order.withLock { $0.append("holder again") } }
            group.leave()
        })
        for (i, name) in ["a", "b", "c"].enumerated() {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    try pool.withConnection { _ in order.withLock { $0.append(name) } }
                } catch {
                    Issue.record("\(name): \(error)")
                }
            }
            waitForLine(pool, i + 1)
        }
        release.signal()
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 } == ["a", "b", "c", "holder again"])
        #expect(pool.statistics.open == 1)
    }

    @Test func closingSendsAwayWhoeverWaits() throws {
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 1, acquireTimeout: 30)
        let release = holdTheOnlyConnection(pool)
        let outcome = Mutex<String>("still waiting")
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                try pool.query("SELECT 1")
                outcome.withLock { $0 = "served" }
            } catch PostgresError.poolClosed {
                outcome.withLock { $0 = "closed" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            done.signal()
        }
        waitForLine(pool, 1)
        pool.close()
        // At once, not after the 30 s acquire timeout.
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(outcome.withLock { $0 } == "closed")
        release.signal()
    }

    @Test func aConnectionThatBreaksInUseGivesItsPlaceToTheNextInLine() throws {
        let name = "vt-test-\(UUID().uuidString.prefix(6))"
        var options = PostgresConnection.Options()
        options.applicationName = name
        let admin = try TestDatabase.adminURL()
        let pool = PostgresPool(url: admin, maxConnections: 1, acquireTimeout: 10, options: options)
        let release = holdTheOnlyConnection(pool, whileHeld: { connection in
            _ = try? connection.query("SELECT 1")  // fails: its backend is gone
        })
        let answer = Mutex<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            answer.withLock { $0 = try? pool.query("SELECT 7 AS v")[0].decode("v", as: Int.self) }
            done.signal()
        }
        waitForLine(pool, 1)
        let killer = try PostgresConnection(url: admin)
        _ = try killer.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [name])
        #expect(Self.backendsGone(killer, name))
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(answer.withLock { $0 } == 7)
        #expect(pool.statistics.open == 1)
    }

    @Test func fiftyConcurrentQueriesThroughAPoolOfFive() throws {
        let pool = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 5, acquireTimeout: 10)
        let results = Mutex<[Int]>([])
        let peak = Mutex(0)
        let group = DispatchGroup()
        for i in 0..<50 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    let v: Int = try pool.query("SELECT $1::int + 0 * pg_backend_pid() AS v FROM pg_sleep(0.02)", [i])[0].decode("v")
                    results.withLock { $0.append(v) }
                    let open = pool.statistics.open
                    peak.withLock { $0 = max($0, open) }
                } catch {
                    Issue.record("query \(i) failed: \(error)")
                }
            }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(results.withLock { $0.sorted() } == Array(0..<50))
        #expect(peak.withLock { $0 } <= 5)
    }

    @Test func terminatedBackendsAreReplaced() throws {
        let name = "vt-test-\(UUID().uuidString.prefix(6))"
        var options = PostgresConnection.Options()
        options.applicationName = name
        let admin = try TestDatabase.adminURL()
        let pool = PostgresPool(url: admin, maxConnections: 3, options: options)
        // Open three connections at once.
        let group = DispatchGroup()
        for _ in 0..<3 {
            group.enter()
            Thread.detachNewThread {
                _ = try? pool.query("SELECT pg_sleep(0.05)")
                group.leave()
            }
        }
        group.wait()
        #expect(pool.statistics.open == 3)

        let killer = try PostgresConnection(url: admin)
        let killed: Int = try killer.query("SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE application_name = $1", [name])[0].decode("n")
        #expect(killed == 3)
        #expect(Self.backendsGone(killer, name))
        // Every connection is dead; each query below still succeeds on a fresh one.
        for i in 0..<5 {
            #expect(try pool.query("SELECT $1::int AS v", [i])[0].decode("v", as: Int.self) == i)
        }
        #expect(pool.statistics.open <= 3)
    }

    @Test func listenNotifyAndResumeAfterTheConnectionIsKilled() throws {
        let url = try TestDatabase.adminURL()
        let listener = PostgresListener(url: url)
        try listener.start()
        defer { listener.stop() }
        let received = Mutex<[String]>([])
        let reconnects = Mutex(0)
        let channel = "test_\(UUID().uuidString.prefix(6).lowercased())"
        try listener.listen(channel) { payload in received.withLock { $0.append(payload) } }
        listener.onReconnect { reconnects.withLock { $0 += 1 } }
        let pool = PostgresPool(url: url, maxConnections: 2)

        try pool.notify(channel, payload: "first")
        #expect(eventually { received.withLock { $0 } == ["first"] })

        let pid = listener.backendPID
        try pool.query("SELECT pg_terminate_backend($1::int)", [Int(pid)])
        #expect(eventually { reconnects.withLock { $0 } == 1 })
        #expect(listener.backendPID != pid)
        try pool.notify(channel, payload: "second")
        #expect(eventually { received.withLock { $0 } == ["first", "second"] })
    }

    @Test func poolAndListenerSurviveADatabaseRestart() throws {
        let cluster = try TemporaryCluster()
        let pool = PostgresPool(url: cluster.url, maxConnections: 2, acquireTimeout: 5)
        let listener = PostgresListener(url: cluster.url)
        try listener.start()
        defer { listener.stop() }
        let received = Mutex<[String]>([])
        try listener.listen("restarts") { payload in received.withLock { $0.append(payload) } }

        let before: Int = try pool.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
        try cluster.restart()
        // The pooled connection died with the server; the pool notices and connects anew.
        var after = 0
        #expect(eventually(timeout: 10) {
            after = (try? pool.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)) ?? 0
            return after != 0
        })
        #expect(after != before)
        // The listener reconnects by itself and hears notifications again.
        #expect(eventually(timeout: 15) {
            try? pool.notify("restarts", payload: "hello again")
            return received.withLock { !$0.isEmpty }
        })
    }
}

@Suite struct MigratorTests {
    /// 0095 rewrites photos in place: rows written before it keep their image (hash and thumbnail
    /// as the same 32 bytes), their licence (now in photo_licenses) and their album key; a ready
    /// row lets its image URL go, a pending one keeps it for the download.
    @Test func smallerPhotoRowsKeepWhatOldRowsSaid() throws {
        let url = try TestDatabase.create("m95")
        let c = try PostgresConnection(url: url)
        defer { c.close() }
        let all = try Migrator(directory: TestDatabase.migrationsDirectory)
        _ = try Migrator(migrations: all.migrations.filter { $0.version < 95 }).migrate(c)
        let hash = String(repeating: "0123456789abcdef", count: 4)
        let thumb = String(repeating: "fedcba9876543210", count: 4)
        try c.execute("""
            INSERT INTO users (email, display_name, password_hash) VALUES ('old@example.org', 'Old', 'x');
            INSERT INTO pins (user_id, lat, lon) SELECT id, 1, 2 FROM users;
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, license, license_url,
                                status, hash, thumb_256, content_type, byte_size)
            SELECT p.id, p.user_id, p.generation, 0, 'flickr', '42', 'https://live.staticflickr.com/1/42_z.jpg', 'CC BY 4.0',
                   'https://creativecommons.org/licenses/by/4.0/', 'ready', '\(hash)', '\(thumb)', 'image/jpeg', 10 FROM pins p;
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, license)
            SELECT p.id, p.user_id, p.generation, 1, 'flickr', '43', 'https://live.staticflickr.com/1/43_z.jpg', 'CC BY 4.0' FROM pins p;
            """)
        #expect(try all.migrate(c).contains(95))
        let rows = try c.query("""
            SELECT ph.remote_id, encode(ph.hash, 'hex') AS hash, encode(ph.thumb_256, 'hex') AS thumb, ph.remote_url, l.name, l.url
            FROM photos ph LEFT JOIN photo_licenses l ON l.id = ph.license_id ORDER BY ph.position
            """)
        #expect(rows.count == 2)
        #expect(try rows[0].decode("hash", as: String?.self) == hash)
        #expect(try rows[0].decode("thumb", as: String?.self) == thumb)
        #expect(try rows[0].decode("remote_url", as: String?.self) == nil)
        #expect(try rows[0].decode("url", as: String.self) == "https://creativecommons.org/licenses/by/4.0/")
        #expect(try rows[1].decode("remote_url", as: String?.self) == "https://live.staticflickr.com/1/43_z.jpg")
        #expect(try rows.map { try $0.decode("name", as: String.self) } == ["CC BY 4.0", "CC BY 4.0"])
        #expect(try c.query("SELECT count(*) AS n FROM photo_licenses")[0].decode("n", as: Int.self) == 2)
        // The album key still refuses the same provider photo twice on a pin.
        #expect(throws: PostgresError.self) {
            try c.execute("INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url) SELECT pin_id, user_id, generation, 2, provider, remote_id, 'x' FROM photos WHERE remote_id = '42'")
        }
    }

    @Test func projectMigrationsApplyOnceAndDocumentEveryColumn() throws {
        let url = try TestDatabase.create("mig")
        let c = try PostgresConnection(url: url)
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory)
        #expect(!migrator.migrations.isEmpty)
        #expect(try migrator.isUpToDate(c) == false)
        #expect(try migrator.migrate(c) == migrator.migrations.map(\.version))
        #expect(try migrator.migrate(c) == [])
        #expect(try migrator.isUpToDate(c))
        // SQL is the admin interface: every table and column says what it is.
        let undocumented = try c.query("""
            SELECT c.relname AS name
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v') AND obj_description(c.oid, 'pg_class') IS NULL
            UNION ALL
            SELECT c.relname || '.' || a.attname
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v') AND col_description(c.oid, a.attnum) IS NULL
            """).map { try $0.decode("name", as: String.self) }
        #expect(undocumented == [])
    }

    @Test func changedMigrationStopsStartUp() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("chg"))
        let original = Migrator(migrations: [.init(version: 1, name: "first", sql: "CREATE TABLE a (v int);")])
        try original.migrate(c)
        let edited = Migrator(migrations: [.init(version: 1, name: "first", sql: "CREATE TABLE a (v bigint);")])
        do {
            try edited.migrate(c)
            Issue.record("an edited migration must be refused")
        } catch let error as Migrator.MigrationError {
            #expect(error.description.contains("changed after it was applied"))
        }
    }

    @Test func failedMigrationRollsBackCompletely() throws {
        let c = try PostgresConnection(url: try TestDatabase.create("fail"))
        let migrator = Migrator(migrations: [
            .init(version: 1, name: "good", sql: "CREATE TABLE good (v int);"),
            .init(version: 2, name: "bad", sql: "CREATE TABLE half (v int); SELECT * FROM missing;"),
        ])
        #expect(throws: Migrator.MigrationError.self) { try migrator.migrate(c) }
        #expect(try c.query("SELECT to_regclass('good') IS NOT NULL AS e")[0].decode("e", as: Bool.self))
        #expect(try c.query("SELECT to_regclass('half') IS NULL AS e")[0].decode("e", as: Bool.self))
        #expect(try c.query("SELECT array_agg(version)::text AS v FROM schema_migrations")[0].decode("v", as: String.self) == "{1}")
    }

    @Test func instancesStartingTogetherMigrateExactlyOnce() throws {
        let url = try TestDatabase.create("conc")
        // CREATE TABLE fails if run twice, and pg_sleep widens the window for a race.
        let migrator = Migrator(migrations: [
            .init(version: 1, name: "slow", sql: "SELECT pg_sleep(0.3); CREATE TABLE once (v int);"),
            .init(version: 2, name: "next", sql: "CREATE TABLE twice_guard (v int);"),
        ])
        let applied = Mutex<[[Int]]>([])
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    let c = try PostgresConnection(url: url)
                    let done = try migrator.migrate(c)
                    applied.withLock { $0.append(done) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        #expect(applied.withLock { $0.flatMap { $0 }.sorted() } == [1, 2])
    }

    @Test func schemaKeepsEachPersonsRowsTogether() throws {
        let c = try PostgresConnection(url: try TestDatabase.migrated("cascade"))
        let ann: Int = try c.query("INSERT INTO users (email, display_name, password_hash) VALUES ('ann@x.org', 'Ann', 'h') RETURNING id")[0].decode("id")
        let bob: Int = try c.query("INSERT INTO users (email, display_name, password_hash) VALUES ('bob@x.org', 'Bob', 'h') RETURNING id")[0].decode("id")
        let pin: Int = try c.query("INSERT INTO pins (user_id, lat, lon) VALUES ($1, 35.0, 135.7) RETURNING id", [ann])[0].decode("id")
        try c.query("INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url) VALUES ($1, $2, 1, 0, 'fixture', 'p1', 'http://x/1.jpg')", [pin, ann])
        // A photo can never point at another person's pin.
        do {
            try c.query("INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url) VALUES ($1, $2, 1, 1, 'fixture', 'p2', 'http://x/2.jpg')", [pin, bob])
            Issue.record("cross-user photo accepted")
        } catch let error as PostgresError {
            #expect(error.sqlState == .foreignKeyViolation)
        }
        try c.query("INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES ($1, 1, 2, 3)", [ann])
        try c.query("INSERT INTO album_jobs (pin_id, user_id, generation) VALUES ($1, $2, 1)", [pin, ann])
        try c.query("DELETE FROM users WHERE id = $1", [ann])
        for table in ["pins", "photos", "map_regions", "album_jobs", "sessions"] {
            #expect(try c.query("SELECT count(*) AS n FROM \(table)")[0].decode("n", as: Int.self) == 0, "\(table) kept rows")
        }
    }
}
