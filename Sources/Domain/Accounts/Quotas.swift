/// How much one person may hold and do: the instance's defaults (QUOTA_* settings), which an
/// administrator overrides per person in SQL (users.max_pins, max_collections_per_hour,
/// max_photo_bytes; docs/admin.md). A household shares one machine: without these, one account's
/// thousands of pins or endless New Collections fill the disk and the queue for everyone.
public struct Quotas: Sendable, Equatable {
    public var pins = 5_000
    public var collectionsPerHour = 60
    public var photoBytes: Int64 = 2 * 1024 * 1024 * 1024
    /// Shared maps a person may belong to (owned or joined).
    public var sharedMaps = 20
    /// Members of one shared map: a club of 200 fits.
    public var membersPerMap = 250
    /// Invitations by email a person may make per hour (withdrawn ones count).
    public var invitationsPerHour = 30

    public init() {}
}

/// A quota was reached: the sentence says which and what to do.
public struct QuotaReached: Error, Equatable, CustomStringConvertible {
    public let description: String

    package static func pins(_ limit: Int) -> QuotaReached {
        QuotaReached(description: "You have reached your limit of \(limit) pins. Delete a pin to drop a new one, or ask your administrator for more.")
    }
    package static func collections(_ limit: Int) -> QuotaReached {
        QuotaReached(description: "You have started \(limit) new collections in the past hour, your limit. Try again later.")
    }
    /// A shared map's pin opened by someone else while its dropper has no storage left.
    package static let droppersStorage = QuotaReached(description: "This album starts when the person who dropped the pin has room in their photo storage.")
    package static func photoBytes(_ limit: Int64) -> QuotaReached {
        QuotaReached(description: "Your photos use all of your \(limit / (1024 * 1024)) MB of storage. Delete a pin or some photos to make room, or ask your administrator for more.")
    }
}
