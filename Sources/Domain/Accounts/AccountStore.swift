import Foundation
import Postgres

/// Accounts, sessions and sign-in throttling in SQL. Session tokens are stored only as their
/// SHA-256 (computed by PostgreSQL's sha256()), so a leaked sessions table signs nobody in.
public struct AccountStore: Sendable {
    package let pool: PostgresPool

    /// Sessions last this long after the last request (sliding expiry).
    public static let sessionLifetimeDays = 30
    /// The expiry is pushed forward at most this often, so most requests do not write.
    package static let renewalIntervalSeconds = 3600
    /// Throttling counts the failures of the last hour. Per email *and* address: past
    /// `freeFailuresPerPair` each further attempt waits twice as long as the one before (2 s, 4 s, …
    /// up to `maxDelaySeconds`) — a guesser slows to a crawl while the owner, from another address,
    /// signs in as usual. Per address across all emails the same from `freeFailuresPerAddress` on
    /// (a household or a club may share one address, so it is higher).
    public static let throttleWindowMinutes = 60
    public static let freeFailuresPerPair = 5
    public static let freeFailuresPerAddress = 50
    public static let maxDelaySeconds = 900
    /// Sign-ups per address per hour before the next one is refused.
    public static let signUpsPerAddressPerHour = 10

    /// The wait after `failures` failures with `free` of them free: 0, then 2, 4, 8 … seconds.
    package static func delay(failures: Int, free: Int) -> Int {
        guard failures >= free else { return 0 }
        let exponent = min(failures - free + 1, 20)
        return min(maxDelaySeconds, 1 << exponent)
    }

    public init(pool: PostgresPool) { self.pool = pool }

    // MARK: Users

    public enum SignUpError: Error, Equatable {
        case emailTaken
        /// SIGN_UP=closed and the instance has people already.
        case closed
        /// SIGN_UP=invite, people already, and no code given.
        case invitationNeeded
        /// The code is unknown, used or expired (which one is not said: the page offers no oracle).
        case invitationNotValid
        /// SIGN_UP=invite or closed, nobody has an account yet, and the setup code was not given
        /// (or is not valid).
        case setupCodeNeeded
    }

    /// Makes an account with no gate at all: the admin CLI and tests. Sign-up from the web goes
    /// through `signUp`, which applies SIGN_UP.
    public func createUser(email: String, displayName: String, password: String) throws -> User {
        try signUp(email: email, displayName: displayName, password: password, mode: .open, invitation: nil)
    }

    /// Makes an account if `mode` lets this sign-up in: always with `.open`; with `.invite` only
    /// with a valid invitation, which it uses up; with `.closed` never — except the first account
    /// of an empty instance, which needs the setup code the server logs at start (`setupCode`):
    /// whoever reaches a new instance first must not be the one who takes it.
    public func signUp(email: String, displayName: String, password: String, mode: SignUpMode, invitation: String?) throws -> User {
        let code = invitation.flatMap { $0.isEmpty ? nil : $0 }
        // A refused gate and a taken email are answered before the (deliberately slow) hash is
        // computed; the transaction below checks the gate again, under the lock. The gate first:
        // someone without an invitation learns nothing about which emails have accounts.
        if mode != .open {
            switch try signUpGate(mode: mode, invitation: code) {
            case .refused: throw mode == .closed ? SignUpError.closed : code == nil ? SignUpError.invitationNeeded : SignUpError.invitationNotValid
            case .setupCodeNeeded: throw SignUpError.setupCodeNeeded
            case .open, .firstAccount, .invited: break
            }
        }
        if try !pool.query("SELECT 1 FROM users WHERE lower(email) = lower($1)", [email]).isEmpty {
            throw SignUpError.emailTaken
        }
        let hash = try Password.hash(password)
        do {
            return try pool.transaction { db in
                var invitationID: Int64?
                if mode != .open {
                    try Self.lockSignUps(db)
                    let first = try Self.nobodySignedUp(db)
                    guard first || mode == .invite else { throw SignUpError.closed }
                    guard let code else { throw first ? SignUpError.setupCodeNeeded : SignUpError.invitationNeeded }
                    // The row lock makes the use single: a second use of the same code waits for
                    // this one and then finds used_at set. The first account's setup code is an
                    // invitation too (then deleted with any other setup codes).
                    let rows = try db.query("""
                        UPDATE invitations SET used_at = now()
                        WHERE code_hash = sha256(convert_to($1, 'UTF8')) AND used_at IS NULL AND expires_at > now()
                        RETURNING id
                        """, [code])
                    guard let row = rows.first else { throw first ? SignUpError.setupCodeNeeded : SignUpError.invitationNotValid }
                    let used: Int64 = try row.decode("id")
                    invitationID = used
                    // The setup codes have done their work: none is left to list or to use (the
                    // one just used among them, when it was one).
                    if first {
                        let deleted: [Int64] = try db.query("DELETE FROM invitations WHERE note = $1 RETURNING id", [Self.setupCodeNote])
                            .map { try $0.decode("id") }
                        if deleted.contains(used) { invitationID = nil }
                    }
                }
                let row = try db.query("""
                    INSERT INTO users (email, display_name, password_hash) VALUES ($1, $2, $3)
                    RETURNING id, email, display_name
                    """, [email, displayName, hash])[0]
                let user = try user(from: row)
                if let invitationID {
                    try db.query("UPDATE invitations SET used_by = $1 WHERE id = $2", [user.id, invitationID])
                }
                return user
            }
        } catch let error as PostgresError where error.sqlState == .uniqueViolation && error.constraint == "users_email_key" {
            throw SignUpError.emailTaken
        }
    }

    public enum SignUpGate: Sendable, Equatable {
        /// Anyone may sign up (SIGN_UP=open).
        case open
        /// Nobody has an account yet, and the setup code given is valid: this one may be made.
        case firstAccount
        /// Nobody has an account yet: the first needs the setup code from the server's log.
        case setupCodeNeeded
        /// SIGN_UP=invite and the code given (if any) is valid now.
        case invited
        /// Closed, or an invitation is needed and the one given (if any) is not valid.
        case refused
    }

    /// What the sign-up page may offer, without changing anything: one statement.
    public func signUpGate(mode: SignUpMode, invitation: String?) throws -> SignUpGate {
        if mode == .open { return .open }
        let row = try pool.query("""
            SELECT EXISTS (SELECT 1 FROM users) AS anyone,
                   EXISTS (SELECT 1 FROM invitations
                           WHERE code_hash = sha256(convert_to($1, 'UTF8')) AND used_at IS NULL AND expires_at > now()) AS valid
            """, [invitation ?? ""])[0]
        let valid = try invitation != nil && row.decode("valid", as: Bool.self)
        if try !row.decode("anyone", as: Bool.self) { return valid ? .firstAccount : .setupCodeNeeded }
        if mode == .invite, valid { return .invited }
        return .refused
    }

    // MARK: Invitations

    /// How long an invitation works unless the administrator says otherwise.
    public static let invitationDays = 7

    /// One gated sign-up (or setup code) at a time, so two people on an empty instance cannot both
    /// be "the first account"; the lock ends with the transaction.
    private static func lockSignUps(_ db: PostgresConnection) throws {
        try db.query("SELECT pg_advisory_xact_lock(hashtextextended('virtual-tourist sign-up', 0))")
    }

    private static func nobodySignedUp(_ db: PostgresConnection) throws -> Bool {
        try db.query("SELECT 1 FROM users LIMIT 1").isEmpty
    }

    /// The note of the setup codes `setupCode` makes (admin list shows them as invitations).
    package static let setupCodeNote = "setup code for the first account"

    /// With SIGN_UP=invite or closed and nobody signed up yet: a new single-use code for the first
    /// account, for the server to write in its log at start (each start makes a new one and
    /// drops the earlier ones; they all go once the first account exists). nil when not needed.
    public func setupCode(mode: SignUpMode) throws -> String? {
        guard mode != .open else { return nil }
        return try pool.transaction { db in
            try Self.lockSignUps(db)
            try db.query("DELETE FROM invitations WHERE note = $1 AND used_at IS NULL", [Self.setupCodeNote])
            guard try Self.nobodySignedUp(db) else { return nil }
            let code = Tokens.make()
            try db.query("""
                INSERT INTO invitations (code_hash, expires_at, note)
                VALUES (sha256(convert_to($1, 'UTF8')), now() + interval '30 days', $2)
                """, [code, Self.setupCodeNote])
            return code
        }
    }

    /// Makes a single-use invitation valid for `days`; returns its code (256 random bits, stored
    /// only as its SHA-256), to be sent as PUBLIC_URL/sign-up?invite=CODE.
    public func createInvitation(days: Int = invitationDays, note: String? = nil) throws -> String {
        let code = Tokens.make()
        try pool.query("""
            INSERT INTO invitations (code_hash, expires_at, note)
            VALUES (sha256(convert_to($1, 'UTF8')), now() + make_interval(days => $2::int), $3)
            """, [code, days, note])
        return code
    }

    public enum SignInResult: Sendable, Equatable {
        case signedIn(User)
        case wrongCredentials
        /// Too many recent failures for this email from this address (or from this address at all):
        /// try again after this many seconds.
        case throttled(seconds: Int)
    }

    /// Checks a password. Unknown emails are hashed against a decoy so they take as long as a
    /// wrong password; disabled accounts fail like a wrong password (no hint either way).
    public func signIn(email: String, password: String, clientAddress: String) throws -> SignInResult {
        let key = email.lowercased()
        // Check and count in one transaction under a lock on (email, address): simultaneous guesses
        // are counted one after the other, never all against the same old count. The attempt is
        // recorded as a failure before the password is checked (and forgotten if it was right), so
        // the slow hash runs without the lock and without a database connection held.
        let wait: Int = try pool.transaction { db in
            try db.query("SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $2, 0))", [key, clientAddress])
            let counts = try db.query("""
                SELECT count(*) FILTER (WHERE email_key = $1) AS pair,
                       extract(epoch FROM now() - max(failed_at) FILTER (WHERE email_key = $1))::float8 AS pair_since,
                       count(*) AS address,
                       extract(epoch FROM now() - max(failed_at))::float8 AS address_since
                FROM sign_in_failures WHERE client_address = $2 AND failed_at > now() - make_interval(mins => $3::int)
                """, [key, clientAddress, Self.throttleWindowMinutes])[0]
            let pairWait = Self.delay(failures: try counts.decode("pair"), free: Self.freeFailuresPerPair)
                - Int((try counts.decode("pair_since", as: Double?.self) ?? 1e9).rounded(.down))
            let addressWait = Self.delay(failures: try counts.decode("address"), free: Self.freeFailuresPerAddress)
                - Int((try counts.decode("address_since", as: Double?.self) ?? 1e9).rounded(.down))
            let wait = max(pairWait, addressWait)
            if wait > 0 { return wait }
            try db.query("""
                WITH old AS (DELETE FROM sign_in_failures WHERE failed_at < now() - interval '1 day')
                INSERT INTO sign_in_failures (email_key, client_address) VALUES ($1, $2)
                """, [key, clientAddress])
            return 0
        }
        if wait > 0 { return .throttled(seconds: wait) }

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
        return .wrongCredentials
    }

    /// Counts a sign-up attempt from `clientAddress`; false when the address made too many this
    /// hour. One statement, so concurrent attempts cannot all slip under the limit.
    public func allowSignUp(from clientAddress: String) throws -> Bool {
        let row = try pool.query("""
            WITH old AS (DELETE FROM sign_up_attempts WHERE attempted_at < now() - interval '1 day'),
                 counted AS (
                     INSERT INTO sign_up_attempts (client_address, attempts, window_start) VALUES ($1, 1, now())
                     ON CONFLICT (client_address) DO UPDATE SET
                         attempts = CASE WHEN sign_up_attempts.window_start < now() - interval '1 hour' THEN 1
                                         ELSE sign_up_attempts.attempts + 1 END,
                         window_start = CASE WHEN sign_up_attempts.window_start < now() - interval '1 hour' THEN now()
                                             ELSE sign_up_attempts.window_start END,
                         attempted_at = now()
                     RETURNING attempts)
            SELECT attempts FROM counted
            """, [clientAddress])[0]
        return try row.decode("attempts", as: Int.self) <= Self.signUpsPerAddressPerHour
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
                       extract(epoch FROM s.expires_at - now())::float8 AS seconds_left,
                       s.last_seen_at < now() - make_interval(secs => $2::int) AS stale,
                       mm.map_id, mm.role AS map_role, mu.display_name AS map_name, mu.editors_share,
                       coalesce(mm.center_lat, r.center_lat) AS center_lat, coalesce(mm.center_lon, r.center_lon) AS center_lon,
                       coalesce(mm.zoom, r.zoom) AS zoom, v.version AS map_version,
                       u.map_choices AS maps
                FROM sessions s JOIN users u ON u.id = s.user_id
                -- The shared map shown, only while the person is still its member (else their own).
                LEFT JOIN map_members mm ON mm.map_id = u.shown_map AND mm.user_id = s.user_id
                LEFT JOIN users mu ON mu.id = mm.map_id
                LEFT JOIN map_regions r ON r.user_id = s.user_id AND mm.map_id IS NULL
                LEFT JOIN map_versions v ON v.user_id = coalesce(mm.map_id, s.user_id)
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
            SELECT id, email, display_name, csrf_token, disabled, expired, stale, seconds_left, center_lat, center_lon, zoom, map_version,
                   map_id, map_role, map_name, editors_share, maps FROM found
            """, [token, Self.renewalIntervalSeconds, Self.sessionLifetimeDays])
        guard let row = rows.first else { return nil }
        if try row.decode("disabled", as: Bool.self) || row.decode("expired", as: Bool.self) { return nil }
        let user = try user(from: row)
        var session = Session(user: user, csrfToken: try row.decode("csrf_token"), token: token,
                              renewed: try row.decode("stale", as: Bool.self))
        session.mapVersion = try row.decode("map_version")
        // A renewed session lives the full lifetime from now; any other until its expires_at.
        if !session.renewed { session.secondsLeft = try row.decode("seconds_left") }
        if !row.isNull("center_lat") {
            session.mapRegion = MapRegion(lat: try row.decode("center_lat"), lon: try row.decode("center_lon"), zoom: try row.decode("zoom"))
        }
        if !row.isNull("map_id"), let role = MapRole(parsing: try row.decode("map_role")) {
            session.map = .shared(id: try row.decode("map_id"), name: try row.decode("map_name"), role: role,
                                  editorsShare: try row.decode("editors_share"))
        } else {
            session.map = .own(user)
        }
        session.mapsJSON = try row.decode("maps")
        return session
    }

    public func deleteSession(token: String) throws {
        try pool.query("DELETE FROM sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))", [token])
    }

    private func user(from row: PostgresRow) throws -> User {
        User(id: try row.decode("id"), email: try row.decode("email"), displayName: try row.decode("display_name"))
    }
}
