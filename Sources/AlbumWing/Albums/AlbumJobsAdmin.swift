import Postgres

/// The album jobs an administrator looks at (`virtual-tourist admin jobs`, admin_jobs in psql):
/// what is queued, running or waiting, and what failed or was parked, newest first.
public struct AlbumJobsAdmin: Sendable {
    package let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    public struct Job: Sendable {
        public let id: Int64
        public let email: String
        public let pinID: Int64
        public let state: String
        public let attempts: Int
        public let lapses: Int
        public let parked: Bool
        public let runAfter: String
        public let lastError: String?
    }

    /// Jobs not done or cancelled, and failed ones of the last `days` days.
    public func list(failedWithinDays days: Int = 7) throws -> [Job] {
        try pool.query("""
            SELECT id, email, pin_id, state, attempts, lapses, parked, last_error,
                   to_char(run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS run_after
            FROM admin_jobs
            WHERE state IN ('queued', 'running') OR (state = 'failed' AND finished_at > now() - make_interval(days => $1::int))
            ORDER BY state = 'failed', run_after, id
            """, [days]).map { row in
            Job(id: try row.decode("id"), email: try row.decode("email"), pinID: try row.decode("pin_id"), state: try row.decode("state"),
                attempts: try row.decode("attempts"), lapses: try row.decode("lapses"), parked: try row.decode("parked"),
                runAfter: try row.decode("run_after"), lastError: try row.decode("last_error"))
        }
    }
}
