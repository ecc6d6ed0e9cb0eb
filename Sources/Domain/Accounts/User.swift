/// A person with an account. Every row of theirs in the database carries `id` as user_id.
public struct User: Sendable, Equatable {
    public let id: Int64
    public let email: String
    public let displayName: String

    /// Why an email cannot be an account's, in words for a form or the admin CLI; nil when it can.
    public static func emailProblem(_ email: String) -> String? {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        if email.isEmpty { return "Enter your email address." }
        if parts.count != 2 || parts[0].isEmpty || parts[1].isEmpty || email.contains(where: \.isWhitespace) {
            return "That does not look like an email address."
        }
        if email.utf8.count > 320 { return "That email address is too long." }
        return nil
    }
}

/// A signed-in browser: the person and the CSRF token its forms must carry.
public struct Session: Sendable {
    public let user: User
    public let csrfToken: String
    /// The raw token from the cookie (never stored; the database keeps only its SHA-256).
    package let token: String
    /// The expiry was just pushed forward: the cookie is sent again with the new lifetime.
    package let renewed: Bool
    /// Where the person left the map, read in the session's own statement: the map page needs it
    /// to know which pins its first frame shows, and it costs the session's lookup one more row by
    /// primary key instead of the page a round trip (docs/architecture.md, "Pages").
    public var mapRegion: MapRegion? = nil
    /// The person's map version (migration 0097): it changes whenever anything the map page shows
    /// does, so a page rendered at the same version, region and session is still right (MapPageCache).
    /// Nil while they have no version row (no pin yet): no kept page matches it.
    public var mapVersion: Int64? = nil
    /// The map this session works on: a shared map the person switched to while they are still its
    /// member, else their own (read in the same statement: a member removed loses the map at their
    /// next request).
    public var map: MapAccess
    /// The shared maps the person is a member of, for the switcher (same statement), as the JSON
    /// it came in (MapChoice.list reads it when a page needs it); nil: none.
    public var mapsJSON: String? = nil
    /// Seconds until expires_at when it was read (nil: renewed just now, a full lifetime): a session
    /// kept in memory (SessionCache) is never used past it.
    package var secondsLeft: Double? = nil

    package init(user: User, csrfToken: String, token: String, renewed: Bool) {
        self.user = user
        self.csrfToken = csrfToken
        self.token = token
        self.renewed = renewed
        map = .own(user)
    }

    /// The same session as kept in memory for later requests (the web's SessionCache): its renewal,
    /// if any, went out with the request that read it.
    package var kept: Session {
        var kept = Session(user: user, csrfToken: csrfToken, token: token, renewed: false)
        kept.mapRegion = mapRegion
        kept.mapVersion = mapVersion
        kept.map = map
        kept.mapsJSON = mapsJSON
        kept.secondsLeft = secondsLeft
        return kept
    }
}
