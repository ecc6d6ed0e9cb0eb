import Foundation
import Postgres

/// Password resets by mail (migration 0125): a person who forgot their password asks at
/// /forgot-password with their address; if an account has it (and is not disabled), a link with a
/// single-use token good for `minutes` is mailed to it. The answer is the same either way (no
/// account enumeration), and at most `perHour` links an hour go to one account (no mail bombing).
/// Using the link sets the new password and ends every session of the account, on every instance
/// (deleting the sessions NOTIFYs photo_access, as signing out does).
public struct PasswordResets: Sendable {
    package let pool: PostgresPool
    public static let minutes = 30
    package static let perHour = 3
    /// Reset requests an hour from one client network (IPv6: its /64), whatever the address asked.
    package static let perNetworkPerHour = 10

    public init(pool: PostgresPool) { self.pool = pool }

    /// Queues the mail for the account with `email`, if there is one; never says whether there is.
    /// `link`: the page's address without the token ("https://photos.example.org/reset-password/").
    public func request(email: String, link: String) throws {
        let token = Tokens.make()
        try pool.transaction { db in
            // The account's row locked: two requests at once cannot both pass the hourly count.
            guard let row = try db.query("""
                SELECT id, email, display_name,
                       (SELECT count(*) FROM password_resets r WHERE r.user_id = u.id AND r.created_at > now() - interval '1 hour')::int AS recent
                FROM users u WHERE lower(email) = lower($1) AND kind = 'person' AND disabled_at IS NULL
                FOR UPDATE
                """, [email]).first else { return }
            guard try row.decode("recent", as: Int.self) < Self.perHour else { return }
            let id: Int64 = try row.decode("id"), address: String = try row.decode("email"), name: String = try row.decode("display_name")
            try db.query("""
                INSERT INTO password_resets (user_id, token_hash, expires_at)
                VALUES ($1, sha256(convert_to($2, 'UTF8')), now() + make_interval(mins => $3::int))
                """, [id, token, Self.minutes])
            try MailOutbox.enqueue(db, .passwordReset, to: address, subject: "Reset your Virtual Tourist password", body: """
                Hello \(name),

                Someone (we hope you) asked to reset the password of your Virtual Tourist account.
                To choose a new one, open this link within \(Self.minutes) minutes:

                \(link)\(token)

                It works once. Choosing a new password signs you out everywhere.
                If you did not ask, ignore this mail: your password stays as it is.
                """, discardAfter: Self.minutes * 60)
        }
    }

    /// Whether a token opens a reset now.
    public func isOpen(_ token: String) throws -> Bool {
        guard Tokens.isWellFormed(token) else { return false }
        return try !pool.query("""
            SELECT 1 FROM password_resets r JOIN users u ON u.id = r.user_id
            WHERE r.token_hash = sha256(convert_to($1, 'UTF8')) AND r.used_at IS NULL AND r.expires_at > now() AND u.disabled_at IS NULL
            """, [token]).isEmpty
    }

    /// Sets the password with the token (used up, with every other open link of the account) and
    /// ends every session of the account. False when the token opens nothing.
    public func reset(_ token: String, password: String) throws -> Bool {
        guard Tokens.isWellFormed(token) else { return false }
        let hash = try Password.hash(password)
        return try pool.transaction { db in
            guard let row = try db.query("""
                UPDATE password_resets r SET used_at = now()
                FROM users u
                WHERE r.token_hash = sha256(convert_to($1, 'UTF8')) AND r.used_at IS NULL AND r.expires_at > now()
                  AND u.id = r.user_id AND u.disabled_at IS NULL
                RETURNING r.user_id
                """, [token]).first else { return false }
            let id: Int64 = try row.decode("user_id")
            try db.query("UPDATE password_resets SET used_at = now() WHERE user_id = $1 AND used_at IS NULL", [id])
            try db.query("UPDATE users SET password_hash = $2 WHERE id = $1", [id, hash])
            try db.query("DELETE FROM sessions WHERE user_id = $1", [id])
            return true
        }
    }
}
