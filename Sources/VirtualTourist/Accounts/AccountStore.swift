import Foundation
import Postgres

/// Accounts, sessions and sign-in throttling in SQL. Session tokens are stored only as their
/// SHA-256 (computed by PostgreSQL's sha256()), so a leaked sessions table signs nobody in.
public struct AccountStore: Sendable {
    let pool: PostgresPool

    /// Sessions last this long after the last request (sliding expiry).
    public static let sessionLifetimeDays = 30
    /// The expiry is pushed forward at most this often, so most requests do not write.
    static let renewalIntervalSeconds = 3600
    /// Throttling: this many failures inside the window make sign-in wait.
    public static let throttleWindowMinutes = 15
    public static let maxFailuresPerEmail = 10
    /// Higher than per email: a household or a club may share one address.
    public static let maxFailuresPerAddress = 50

    public init(pool: PostgresPool) { self.pool = pool }

    // MARK: Users

    public enum SignUpError: Error, Equatable {
        case emailTaken
    }

    public func createUser(email: String, displayName: String, password: String) throws -> User {
        let hash = try Password.hash(password)
        do {
            let row = try pool.query("""
                INSERT INTO users (email, display_name, password_hash) VALUES ($1, $2, $3)
                RETURNING id, email, display_name
                """, [email, displayName, hash])[0]
            return try user(from: row)
        } catch let error as PostgresError where error.sqlState == .uniqueViolation && error.constraint == "users_email_key" {
            throw SignUpError.emailTaken
        }
    }

    public enum SignInResult: Sendable, Equatable {
        case signedIn(User)
        case wrongCredentials
        /// Too many recent failures for this email or address.
        case throttled
    }

    /// Checks a password. Unknown emails are hashed against a decoy so they take as long as a
    /// wrong password; disabled accounts fail like a wrong password (no hint either way).
    public func signIn(email: String, password: String, clientAddress: String) throws -> SignInResult {
        let key = email.lowercased()
        let counts = try pool.query("""
            SELECT (SELECT count(*) FROM sign_in_failures
                    WHERE email_key = $1 AND failed_at > now() - make_interval(mins => $3::int)) AS by_email,
                   (SELECT count(*) FROM sign_in_failures
                    WHERE client_address = $2 AND failed_at > now() - make_interval(mins => $3::int)) AS by_address
            """, [key, clientAddress, Self.throttleWindowMinutes])[0]
        let byEmail: Int = try counts.decode("by_email")
        let byAddress: Int = try counts.decode("by_address")
        if byEmail >= Self.maxFailuresPerEmail || byAddress >= Self.maxFailuresPerAddress {
            return .throttled
        }

        let rows = try pool.query("""
            SELECT id, email, display_name, password_hash, disabled_at IS NOT NULL AS disabled
            FROM users WHERE lower(email) = $1
            """, [key])
        let stored: String = try rows.first?.decode("password_hash") ?? Password.decoyHash
        let matches = Password.verify(password, against: stored)
        if let row = rows.first, matches, try !row.decode("disabled", as: Bool.self) {
            try pool.query("DELETE FROM sign_in_failures WHERE email_key = $1", [key])
            return .signedIn(try user(from: row))
        }
        try pool.query("""
            WITH old AS (DELETE FROM sign_in_failures WHERE failed_at < now() - interval '1 day')
            INSERT INTO sign_in_failures (email_key, client_address) VALUES ($1, $2)
            """, [key, clientAddress])
        return .wrongCredentials
    }

    // MARK: Sessions

    /// Starts a session; returns the raw token for the cookie.
    public func createSession(for user: User) throws -> Session {
        let token = Tokens.make()
        let csrf = Tokens.make()
        try pool.query("""
            INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at)
            VALUES (sha256(convert_to($1, 'UTF8')), $2, $3, now() + make_interval(days => $4::int))
            """, [token, user.id, csrf, Self.sessionLifetimeDays])
        return Session(user: user, csrfToken: csrf, token: token, renewed: true)
    }

    /// The session behind a cookie token, or nil. Expired sessions and every session of a disabled
    /// person are deleted on sight, so disabling an account from SQL signs them out at their next
    /// request.
    ///
    /// One statement, so a page costs one round trip for its session: the lookup, the sliding
    /// renewal (at most once per renewal interval) and the deletions run as data-modifying CTEs.
    public func session(token: String) throws -> Session? {
        guard Tokens.isWellFormed(token) else { return nil }
        let rows = try pool.query("""
            WITH found AS (
                SELECT s.token_hash, s.user_id AS id, u.email, u.display_name, s.csrf_token,
                       u.disabled_at IS NOT NULL AS disabled,
                       s.expires_at <= now() AS expired,
                       s.last_seen_at < now() - make_interval(secs => $2::int) AS stale
                FROM sessions s JOIN users u ON u.id = s.user_id
                WHERE s.token_hash = sha256(convert_to($1, 'UTF8'))),
            renewed AS (
                UPDATE sessions SET last_seen_at = now(), expires_at = now() + make_interval(days => $3::int)
                FROM found
                WHERE sessions.token_hash = found.token_hash AND found.stale AND NOT found.expired AND NOT found.disabled
                RETURNING 1),
            removed AS (
                DELETE FROM sessions
                WHERE user_id IN (SELECT id FROM found WHERE disabled)
                   OR token_hash IN (SELECT token_hash FROM found WHERE expired)
                RETURNING 1)
            SELECT id, email, display_name, csrf_token, disabled, expired, stale FROM found
            """, [token, Self.renewalIntervalSeconds, Self.sessionLifetimeDays])
        guard let row = rows.first else { return nil }
        if try row.decode("disabled", as: Bool.self) || row.decode("expired", as: Bool.self) { return nil }
        return Session(user: try user(from: row), csrfToken: try row.decode("csrf_token"), token: token,
                       renewed: try row.decode("stale", as: Bool.self))
    }

    public func deleteSession(token: String) throws {
        try pool.query("DELETE FROM sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))", [token])
    }

    private func user(from row: PostgresRow) throws -> User {
        User(id: try row.decode("id"), email: try row.decode("email"), displayName: try row.decode("display_name"))
    }
}
