import Postgres

/// "This person's album on this pin changed": the payload of NOTIFY album_events and map_events,
/// written (in Swift, or in SQL by `sqlPayload`) and read only here. The text is "userID:pinID" — ids, never content, so a payload carries nothing a
/// listener on another instance should not see.
public struct AlbumChange: Hashable, Sendable {
    public let userID: Int64
    public let pinID: Int64

    public init(userID: Int64, pinID: Int64) {
        self.userID = userID
        self.pinID = pinID
    }

    /// Nil for anything that is not two ids (a payload from a stray NOTIFY).
    public init?(payload: String) {
        let parts = payload.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let userID = Int64(parts[0]), let pinID = Int64(parts[1]) else { return nil }
        self.init(userID: userID, pinID: pinID)
    }

    public var payload: String { "\(userID):\(pinID)" }

    /// The same payload written by a statement: SQL for `user`:`pin` from two expressions of it
    /// ("$2", "id"), for the NOTIFYs that ride inside the statement that made the change.
    package static func sqlPayload(user: String, pin: String) -> String { "(\(user)::text || ':' || \(pin)::text)" }

    /// The channel album pages listen on (LISTEN album_events).
    package static let channel = "album_events"

    /// The channel open map pages listen on (LISTEN map_events): a pin was dropped, imported or
    /// deleted on the map of `userID` (its holder), with the same payload. Album progress is not
    /// sent there: a club's every open map would re-read its pins for every batch of photos.
    package static let mapChannel = "map_events"

    /// Announces a change of the map's pins when the transaction commits.
    package func announceToMap(_ db: PostgresConnection) throws {
        try db.query("SELECT pg_notify($1, $2)", [Self.mapChannel, payload])
    }

    /// The channel workers listen on (LISTEN album_jobs): a job was queued.
    package static let jobsChannel = "album_jobs"

    /// Announces the change when the transaction commits (identical ones are delivered once).
    package func announce(_ db: PostgresConnection) throws {
        try db.query("SELECT pg_notify($1, $2)", [Self.channel, payload])
    }

    /// Announces it at once (outside a transaction).
    package func announce(_ pool: PostgresPool) throws {
        try pool.query("SELECT pg_notify($1, $2)", [Self.channel, payload])
    }
}
