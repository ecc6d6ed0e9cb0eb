import Synchronization

/// What /photos/:id needs to answer without the database: who may see which photo (grants) and
/// where each photo's bytes are (docs/architecture.md, "Photos on the hot path"). Filled by what the
/// pages already read (a page's session, an album's rows) and on a miss by one query; emptied by
/// NOTIFY photo_access (migration 0115) on every instance, and by the route that revoked the right
/// at once on its own. An entry lives at most `lifetime`, and the cache is used only while the
/// LISTEN link is up: a notification that could be lost is bounded by that lifetime.
package final class PhotoAccess: Sendable {
    /// Who is asking: a session by its cookie token itself, or later a share link's token hash once
    /// its gate has checked the link's password cookie. The token, not its SHA-256: hashing it on
    /// every photo request was work the cache exists to save; the hash (what NOTIFY names) is kept
    /// in the grant for revocation, which is rare and may scan.
    package enum Key: Hashable, Sendable {
        case session(token: String)
        case shareLink(String)
    }

    /// A right to see photos: every photo of `userID`, or only those of `pinID` (a share link).
    package struct Grant: Sendable {
        package let userID: Int64
        package let pinID: Int64?
        package let expires: ContinuousClock.Instant
        /// For a session: sessions.token_hash, as NOTIFY photo_access names it.
        package var sessionHash: String? = nil
    }

    /// A ready photo's owner and blobs (hex SHA-256 per width; the original's content type).
    package struct Photo: Sendable {
        package let userID: Int64
        package let pinID: Int64
        package let contentType: String
        package let original: String
        package let thumb256: String?
        package let thumb512: String?
        package var expires: ContinuousClock.Instant = .now

        /// The blob for a width from Thumbnailer.widths (nil: the original) and its type.
        package func blob(width: Int?) -> (hash: String, contentType: String) {
            let thumb = width == 256 ? thumb256 : width == 512 ? thumb512 : nil
            if let thumb { return (thumb, "image/jpeg") }
            return (original, contentType)
        }
    }

    package static let channel = "photo_access"

    package let lifetime: Duration
    private let grants: BoundedCache<Key, Grant>
    private let photos: BoundedCache<Int64, Photo>
    /// Whether notifications are being heard now (the LISTEN link's state).
    private let linkUp: @Sendable () -> Bool
    /// Counts revocations, so a fill that read the database before one is not kept after it.
    private let revocations = Atomic<UInt64>(0)

    package init(lifetime: Duration = .seconds(10), maxGrants: Int = 20_000, maxPhotos: Int = 100_000,
         linkUp: @escaping @Sendable () -> Bool) {
        self.lifetime = lifetime
        grants = BoundedCache(maxCount: maxGrants)
        photos = BoundedCache(maxCount: maxPhotos)
        self.linkUp = linkUp
    }

    package static func key(sessionToken token: String) -> Key { .session(token: token) }

    // MARK: Reading

    /// The grant behind `key`, when the cache may be used and holds a live one.
    package func grant(_ key: Key) -> Grant? {
        guard let grant = grants.get(key), grant.expires > .now, linkUp() else { return nil }
        return grant
    }

    /// The photo, when `grant` covers it; `.unknown` when the cache cannot say (then ask the database).
    package enum Lookup { case allowed(Photo), unknown }

    package func photo(_ id: Int64, for grant: Grant) -> Lookup {
        guard let photo = photos.get(id), photo.expires > .now, photo.userID == grant.userID,
              grant.pinID == nil || grant.pinID == photo.pinID else { return .unknown }
        return .allowed(photo)
    }

    // MARK: Filling

    /// Taken before reading what will be kept: `remember…(since:)` keeps nothing when a revocation
    /// arrived in between (it may concern what was read).
    package func mark() -> UInt64 { revocations.load(ordering: .acquiring) }

    package func remember(_ key: Key, userID: Int64, pinID: Int64? = nil, since mark: UInt64) {
        guard linkUp() else { return }
        var grant = Grant(userID: userID, pinID: pinID, expires: .now + lifetime)
        if case .session(let token) = key { grant.sessionHash = SHA256.hex(Array(token.utf8)) }
        guard revocations.load(ordering: .acquiring) == mark else { return }
        grants.put(key, grant)
        // A revocation that raced the put: drop it again rather than decide who won.
        if revocations.load(ordering: .acquiring) != mark { grants.remove(key) }
    }

    package func remember(photos found: [(id: Int64, photo: Photo)], since mark: UInt64) {
        guard !found.isEmpty, linkUp() else { return }
        let expires = ContinuousClock.now + lifetime
        guard revocations.load(ordering: .acquiring) == mark else { return }
        for (id, photo) in found {
            var photo = photo
            photo.expires = expires
            self.photos.put(id, photo)
        }
        if revocations.load(ordering: .acquiring) != mark {
            for (id, _) in found { self.photos.remove(id) }
        }
    }

    // MARK: Revoking

    package func forget(_ key: Key) {
        revoked()
        grants.remove(key)
    }

    /// A session named by its token's hash (NOTIFY photo_access): O(grants), like the other
    /// revocations that scan.
    package func forget(sessionHash hash: String) {
        revoked()
        grants.removeAll { _, grant in grant.sessionHash == hash }
    }

    package func forget(photo id: Int64) {
        revoked()
        photos.remove(id)
    }

    package func forget(pin id: Int64) {
        revoked()
        photos.removeAll { _, photo in photo.pinID == id }
        grants.removeAll { _, grant in grant.pinID == id }
    }

    package func forget(user id: Int64) {
        revoked()
        grants.removeAll { _, grant in grant.userID == id }
        photos.removeAll { _, photo in photo.userID == id }
    }

    /// Notifications may have been lost (the link was down): nothing kept can be trusted.
    package func forgetEverything() {
        revoked()
        grants.removeAll()
        photos.removeAll()
    }

    /// A NOTIFY photo_access payload (migration 0115): KIND:id,id,…
    package func received(_ payload: String) {
        guard let colon = payload.firstIndex(of: ":") else { return forgetEverything() }
        let kind = payload[..<colon]
        let ids = payload[payload.index(after: colon)...].split(separator: ",")
        switch kind {
        case "s": for hash in ids { forget(sessionHash: String(hash)) }
        case "u": for id in ids.compactMap({ Int64($0) }) { forget(user: id) }
        case "p": for id in ids.compactMap({ Int64($0) }) { forget(pin: id) }
        case "ph": for id in ids.compactMap({ Int64($0) }) { forget(photo: id) }
        default: forgetEverything()
        }
    }

    private func revoked() { revocations.add(1, ordering: .acquiringAndReleasing) }

    package var grantCount: Int { grants.count }
    package var photoCount: Int { photos.count }
}
