import Foundation
import HTTPServer
#if canImport(Glibc)
import Glibc
import AlbumWing
#endif

/// A PMTiles version 3 archive read in place: the 127-byte header, then directories (root and
/// leaves) and tiles fetched with positional reads (`pread`), so a planet-sized file is never read
/// whole and any number of threads read it at once without sharing a file position.
/// Layout and encodings: docs/architecture.md ("Street-level maps") and the PMTiles v3 specification.
public final class PMTilesArchive: Sendable {
    public let path: String
    public let header: PMTilesHeader
    /// The metadata JSON object (name, attribution, vector_layers…), empty when the archive has none.
    public let metadata: [String: any Sendable]
    /// Identifies this archive's bytes for strong ETags: a hash of the header, the root directory and
    /// the file's size, so another archive at the same path gives other tags.
    public let fingerprint: String
    /// `"fingerprint-`: a tile's ETag is this and its offset (built once, used per request).
    let etagPrefix: String
    private let fd: Int32
    private let fileSize: UInt64
    private let root: PMTilesDirectory
    /// Decoded leaf directories by their offset, and recently served tiles by theirs.
    private let leaves: BoundedCache<UInt64, PMTilesDirectory>
    private let hot: BoundedCache<UInt64, [UInt8]>
    private let tileCacheBytes: Int

    /// Opens and checks the archive: everything the header points at must lie inside the file, the
    /// compressions must be ones we read (none or gzip for directories), and the root directory and
    /// metadata must decode. Any failure is a `PMTilesError` whose text says what is wrong.
    /// `tileCacheBytes`: recently served tiles kept in memory, so a hot tile costs neither a read
    /// nor a fresh buffer (the response shares the cached bytes).
    public init(path: String, directoryCacheEntries: Int = 4096, tileCacheBytes: Int = 64 * 1024 * 1024) throws {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PMTilesError.cannotOpen(path, String(cString: strerror(errno))) }
        do {
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw PMTilesError.cannotOpen(path, String(cString: strerror(errno))) }
            let size = UInt64(st.st_size)
            guard size >= UInt64(PMTilesHeader.size) else {
                throw PMTilesError.truncated("the file is shorter than the 127-byte header (\(size) bytes)")
            }
            let headerBytes = try Self.read(fd: fd, offset: 0, length: PMTilesHeader.size, fileSize: size, what: "header")
            let header = try PMTilesHeader(headerBytes)
            try header.check(fileSize: size)
            let rootBytes = try Self.read(fd: fd, offset: header.rootDirectoryOffset, length: Int(header.rootDirectoryLength), fileSize: size, what: "root directory")
            root = try PMTilesDirectory(Self.decompress(rootBytes, header.internalCompression, what: "root directory"))
            var metadata: [String: any Sendable] = [:]
            if header.metadataLength > 0 {
                let raw = try Self.read(fd: fd, offset: header.metadataOffset, length: Int(header.metadataLength), fileSize: size, what: "metadata")
                let json = try Self.decompress(raw, header.internalCompression, what: "metadata")
                guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else {
                    throw PMTilesError.corrupt("the metadata is not a JSON object")
                }
                metadata = object.compactMapValues { Self.sendable($0) }
            }
            self.metadata = metadata
            self.header = header
            self.fd = fd
            self.fileSize = size
            self.leaves = BoundedCache(maxCount: max(1, directoryCacheEntries))
            self.hot = BoundedCache(maxCost: max(0, tileCacheBytes), cost: { $0.count })
            self.tileCacheBytes = max(0, tileCacheBytes)
            var hash = FNV1a()
            hash.add(headerBytes)
            hash.add(rootBytes)
            hash.add(String(size).utf8)
            fingerprint = String(hash.value, radix: 36)
            etagPrefix = "\"" + fingerprint + "-"
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// The tile's bytes as stored (still compressed when `header.tileCompression` says so), or nil
    /// when the archive has no such tile. Throws when a directory on the way is broken.
    public func tile(z: Int, x: Int, y: Int) throws -> PMTilesTile? {
        guard let id = PMTilesTileID.id(z: z, x: x, y: y) else { return nil }
        var directory = root
        // The specification allows root + three levels of leaves; more means a loop or a broken file.
        for _ in 0..<4 {
            guard let entry = directory.find(id) else { return nil }
            if entry.runLength > 0 {
                if tileCacheBytes > 0, let bytes = hot.get(entry.offset) { return PMTilesTile(bytes: bytes, offset: entry.offset) }
                let offset = header.tileDataOffset + entry.offset
                guard entry.offset + UInt64(entry.length) <= header.tileDataLength else {
                    throw PMTilesError.corrupt("tile \(z)/\(x)/\(y) points past the tile data section")
                }
                let bytes = try Self.read(fd: fd, offset: offset, length: Int(entry.length), fileSize: fileSize, what: "tile")
                // A few huge tiles must not flush the rest.
                if bytes.count <= tileCacheBytes / 16 { hot.put(entry.offset, bytes) }
                return PMTilesTile(bytes: bytes, offset: entry.offset)
            }
            directory = try leaf(offset: entry.offset, length: entry.length)
        }
        throw PMTilesError.corrupt("directories nest deeper than the specification allows")
    }

    /// A leaf directory, from the cache or read and decoded once.
    func leaf(offset: UInt64, length: UInt32) throws -> PMTilesDirectory {
        if let cached = leaves.get(offset) { return cached }
        guard offset + UInt64(length) <= header.leafDirectoryLength else {
            throw PMTilesError.corrupt("a leaf directory points past the leaf directory section")
        }
        let raw = try Self.read(fd: fd, offset: header.leafDirectoryOffset + offset, length: Int(length), fileSize: fileSize, what: "leaf directory")
        let directory = try PMTilesDirectory(Self.decompress(raw, header.internalCompression, what: "leaf directory"))
        leaves.put(offset, directory)
        return directory
    }

    public var cachedLeafDirectories: Int { leaves.count }
    public var cachedTileBytes: Int { hot.totalCost }

    static func read(fd: Int32, offset: UInt64, length: Int, fileSize: UInt64, what: String) throws -> [UInt8] {
        guard length >= 0, offset + UInt64(length) <= fileSize else {
            throw PMTilesError.truncated("the \(what) (\(length) bytes at \(offset)) ends past the end of the file (\(fileSize) bytes)")
        }
        // Uninitialised: pread fills every byte or the read throws.
        var failedAt: UInt64?
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            var done = 0
            while done < length {
                let n = pread(fd, buffer.baseAddress! + done, length - done, off_t(offset) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { failedAt = offset + UInt64(done); break }
                done += n
            }
            count = failedAt == nil ? length : 0
        }
        if let failedAt { throw PMTilesError.truncated("reading the \(what) failed at byte \(failedAt)") }
        return bytes
    }

    static func decompress(_ bytes: [UInt8], _ compression: PMTilesHeader.Compression, what: String) throws -> [UInt8] {
        switch compression {
        case .none: return bytes
        case .gzip:
            guard let out = Gzip.decompress(bytes, limit: 256 * 1024 * 1024) else { throw PMTilesError.corrupt("the \(what) is not valid gzip") }
            return out
        default: throw PMTilesError.unsupported("\(what) compression \(compression) (only none and gzip are read)")
        }
    }

    /// JSON values as Sendable ones (JSONSerialization gives Any).
    static func sendable(_ value: Any) -> (any Sendable)? {
        switch value {
        case let s as String: return s
        case let n as NSNumber: return n.doubleValue
        case let a as [Any]: return a.compactMap { sendable($0) }
        case let d as [String: Any]: return d.compactMapValues { sendable($0) } as [String: any Sendable]
        default: return nil
        }
    }
}

public struct PMTilesTile: Sendable {
    public let bytes: [UInt8]
    /// Where the tile lies in the tile data section: with the archive's fingerprint, a strong ETag
    /// (deduplicated tiles share it, as they share bytes).
    public let offset: UInt64
}

/// 64-bit FNV-1a: a fingerprint for ETags, not a defence against anyone.
struct FNV1a {
    var value: UInt64 = 0xcbf2_9ce4_8422_2325
    mutating func add(_ bytes: some Sequence<UInt8>) {
        for b in bytes { value = (value ^ UInt64(b)) &* 0x100_0000_01b3 }
    }
}
