/// Thumbnails already made, by the original's hash. A thumbnail is a function of the original's
/// bytes (Thumbnailer's widths and qualities are fixed), so the same photo in a second album (a
/// neighbouring pin, a New Collection that finds it again) reuses the blobs instead of decoding
/// and encoding it again: that is most of an album's CPU (docs/architecture.md, PhotoStore).
///
/// Per process and bounded: at most `capacity` originals (about 250 bytes each), the least
/// recently used forgotten first. A hit is only used after the store refreshed every blob it names
/// (PhotoStore.refresh, as a put would), so the collector's grace period protects them exactly
/// as it protects a blob just written; a blob swept meanwhile makes it a miss.
package final class ThumbnailCache: Sendable {
    package let capacity: Int
    private let byOriginal: BoundedCache<String, [Int: String]>

    package init(capacity: Int = 4096) {
        self.capacity = max(0, capacity)
        byOriginal = BoundedCache(maxCount: self.capacity)
    }

    /// The thumbnails of `original` by width ([:] when it has none), made once per original.
    package func thumbnails(of original: String, bytes: [UInt8], store: any PhotoStore) throws -> [Int: String] {
        if let known = byOriginal.get(original), try known.values.allSatisfy({ try store.refresh($0) }) {
            return known
        }
        var made: [Int: String] = [:]
        for (width, small) in Thumbnailer.thumbnails(of: bytes) { made[width] = try store.put(small) }
        remember(original, made)
        return made
    }

    package func remember(_ original: String, _ thumbnails: [Int: String]) {
        guard capacity > 0 else { return }
        byOriginal.put(original, thumbnails)
    }

    package var count: Int { byOriginal.count }
}
