import Foundation
import HTTPServer
import Synchronization
#if canImport(Glibc)
import Glibc
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
    private let leaves: DirectoryCache
    private let hot: TileCache

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
            self.leaves = DirectoryCache(capacity: directoryCacheEntries)
            self.hot = TileCache(capacity: tileCacheBytes)
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
                if let bytes = hot.get(entry.offset) { return PMTilesTile(bytes: bytes, offset: entry.offset) }
                let offset = header.tileDataOffset + entry.offset
                guard entry.offset + UInt64(entry.length) <= header.tileDataLength else {
                    throw PMTilesError.corrupt("tile \(z)/\(x)/\(y) points past the tile data section")
                }
                let bytes = try Self.read(fd: fd, offset: offset, length: Int(entry.length), fileSize: fileSize, what: "tile")
                hot.put(entry.offset, bytes)
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
    public var cachedTileBytes: Int { hot.bytes }

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

public enum PMTilesError: Error, Equatable, CustomStringConvertible {
    case cannotOpen(String, String)
    case notPMTiles
    case unsupportedVersion(Int)
    case truncated(String)
    case corrupt(String)
    case unsupported(String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let why): "cannot open \(path): \(why)"
        case .notPMTiles: "not a PMTiles archive (the file does not start with \"PMTiles\")"
        case .unsupportedVersion(let v): "PMTiles version \(v) is not supported (only version 3 is read; convert older archives with `pmtiles convert`)"
        case .truncated(let what): "truncated archive: \(what)"
        case .corrupt(let what): "broken archive: \(what)"
        case .unsupported(let what): "unsupported archive: \(what)"
        }
    }
}

/// The fixed 127-byte header (little-endian).
public struct PMTilesHeader: Sendable, Equatable {
    public static let size = 127

    public enum Compression: UInt8, Sendable { case unknown = 0, none, gzip, brotli, zstd }
    public enum TileType: UInt8, Sendable {
        case unknown = 0, mvt, png, jpeg, webp, avif
        public var contentType: String {
            switch self {
            case .mvt: "application/vnd.mapbox-vector-tile"
            case .png: "image/png"
            case .jpeg: "image/jpeg"
            case .webp: "image/webp"
            case .avif: "image/avif"
            case .unknown: "application/octet-stream"
            }
        }
        /// What the map script calls it.
        public var name: String {
            switch self {
            case .mvt: "mvt"
            case .png: "png"
            case .jpeg: "jpg"
            case .webp: "webp"
            case .avif: "avif"
            case .unknown: "unknown"
            }
        }
    }

    public var rootDirectoryOffset: UInt64
    public var rootDirectoryLength: UInt64
    public var metadataOffset: UInt64
    public var metadataLength: UInt64
    public var leafDirectoryOffset: UInt64
    public var leafDirectoryLength: UInt64
    public var tileDataOffset: UInt64
    public var tileDataLength: UInt64
    public var addressedTiles: UInt64
    public var tileEntries: UInt64
    public var tileContents: UInt64
    public var clustered: Bool
    public var internalCompression: Compression
    public var tileCompression: Compression
    public var tileType: TileType
    public var minZoom: Int
    public var maxZoom: Int
    /// west, south, east, north in degrees.
    public var bounds: (Double, Double, Double, Double)
    public var centerZoom: Int
    public var center: (lon: Double, lat: Double)

    public init(_ b: [UInt8]) throws {
        guard b.count >= Self.size else { throw PMTilesError.truncated("the file is shorter than the 127-byte header") }
        guard Array(b[0..<7]) == Array("PMTiles".utf8) else {
            throw PMTilesError.notPMTiles
        }
        guard b[7] == 3 else { throw PMTilesError.unsupportedVersion(Int(b[7])) }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) } }
        func i32(_ at: Int) -> Double {
            Double(Int32(bitPattern: (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[at + $1]) << (8 * UInt32($1)) })) / 10_000_000
        }
        rootDirectoryOffset = u64(8); rootDirectoryLength = u64(16)
        metadataOffset = u64(24); metadataLength = u64(32)
        leafDirectoryOffset = u64(40); leafDirectoryLength = u64(48)
        tileDataOffset = u64(56); tileDataLength = u64(64)
        addressedTiles = u64(72); tileEntries = u64(80); tileContents = u64(88)
        clustered = b[96] == 1
        guard let internalCompression = Compression(rawValue: b[97]), let tileCompression = Compression(rawValue: b[98]),
              let tileType = TileType(rawValue: b[99]) else {
            throw PMTilesError.unsupported("compression or tile type codes \(b[97]), \(b[98]), \(b[99]) are not defined by version 3")
        }
        self.internalCompression = internalCompression
        self.tileCompression = tileCompression
        self.tileType = tileType
        minZoom = Int(b[100]); maxZoom = Int(b[101])
        bounds = (i32(102), i32(106), i32(110), i32(114))
        centerZoom = Int(b[118])
        center = (i32(119), i32(123))
    }

    /// Every section the header names lies inside the file.
    func check(fileSize: UInt64) throws {
        let sections: [(String, UInt64, UInt64)] = [
            ("root directory", rootDirectoryOffset, rootDirectoryLength),
            ("metadata", metadataOffset, metadataLength),
            ("leaf directories", leafDirectoryOffset, leafDirectoryLength),
            ("tile data", tileDataOffset, tileDataLength),
        ]
        for (name, offset, length) in sections {
            let (end, overflow) = offset.addingReportingOverflow(length)
            guard !overflow, end <= fileSize else {
                throw PMTilesError.truncated("the \(name) (\(length) bytes at \(offset)) ends past the end of the file (\(fileSize) bytes)")
            }
        }
        guard rootDirectoryLength > 0 else { throw PMTilesError.corrupt("the root directory is empty") }
        guard minZoom <= maxZoom, maxZoom <= PMTilesTileID.maxZoom else { throw PMTilesError.corrupt("zoom range \(minZoom)–\(maxZoom) is not valid") }
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.rootDirectoryOffset == b.rootDirectoryOffset && a.tileDataOffset == b.tileDataOffset && a.tileType == b.tileType
            && a.minZoom == b.minZoom && a.maxZoom == b.maxZoom
    }
}

/// One decoded directory: entries sorted by tile id, stored column-wise.
struct PMTilesDirectory: Sendable {
    struct Entry { let tileID: UInt64; let offset: UInt64; let length: UInt32; let runLength: UInt32 }
    let tileIDs: [UInt64]
    let offsets: [UInt64]
    let lengths: [UInt32]
    let runLengths: [UInt32]

    /// Varint count, then four varint columns: tile ids as deltas, run lengths, lengths, and offsets
    /// where 0 means "right after the previous entry" and any other value is offset + 1.
    init(_ bytes: [UInt8]) throws {
        var reader = VarintReader(bytes: bytes)
        let count = try reader.next()
        // Every entry takes at least 4 bytes, which also bounds what a hostile count could allocate.
        guard count <= UInt64(bytes.count) else { throw PMTilesError.corrupt("a directory claims \(count) entries in \(bytes.count) bytes") }
        let n = Int(count)
        var ids = [UInt64](repeating: 0, count: n), runs = [UInt32](repeating: 0, count: n)
        var lengths = [UInt32](repeating: 0, count: n), offsets = [UInt64](repeating: 0, count: n)
        var last: UInt64 = 0
        for i in 0..<n {
            let (sum, overflow) = last.addingReportingOverflow(try reader.next())
            guard !overflow else { throw PMTilesError.corrupt("directory tile ids overflow") }
            last = sum; ids[i] = sum
        }
        for i in 0..<n { runs[i] = try reader.next32() }
        for i in 0..<n {
            lengths[i] = try reader.next32()
            guard lengths[i] > 0 else { throw PMTilesError.corrupt("a directory entry has length 0") }
        }
        for i in 0..<n {
            let value = try reader.next()
            if value == 0 {
                guard i > 0 else { throw PMTilesError.corrupt("the first directory entry has no offset") }
                offsets[i] = offsets[i - 1] + UInt64(lengths[i - 1])
            } else {
                offsets[i] = value - 1
            }
        }
        tileIDs = ids; runLengths = runs; self.lengths = lengths; self.offsets = offsets
    }

    var count: Int { tileIDs.count }

    /// The entry covering `id`: a tile run containing it, or the leaf directory whose range may.
    func find(_ id: UInt64) -> Entry? {
        // The last entry whose tile id is <= id.
        var lo = 0, hi = tileIDs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if tileIDs[mid] <= id { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0 else { return nil }
        let i = lo - 1
        let entry = Entry(tileID: tileIDs[i], offset: offsets[i], length: lengths[i], runLength: runLengths[i])
        if entry.runLength == 0 { return entry }               // a leaf: its tiles start at tileID
        return id - entry.tileID < UInt64(entry.runLength) ? entry : nil
    }
}

struct VarintReader {
    let bytes: [UInt8]
    var position = 0

    mutating func next() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < bytes.count else { throw PMTilesError.corrupt("a directory ends inside a number") }
            let byte = bytes[position]
            position += 1
            guard shift < 64 else { throw PMTilesError.corrupt("a directory number is longer than 64 bits") }
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    mutating func next32() throws -> UInt32 {
        let v = try next()
        guard v <= UInt64(UInt32.max) else { throw PMTilesError.corrupt("a directory length exceeds 32 bits") }
        return UInt32(v)
    }
}

/// Tile ids: tiles of all lower zooms first, then the zoom's tiles along a Hilbert curve.
public enum PMTilesTileID {
    public static let maxZoom = 26

    public static func id(z: Int, x: Int, y: Int) -> UInt64? {
        guard (0...maxZoom).contains(z) else { return nil }
        let n = 1 << z
        guard (0..<n).contains(x), (0..<n).contains(y) else { return nil }
        // Tiles in zooms 0..<z: (4^z - 1) / 3.
        let before = ((UInt64(1) << (2 * UInt64(z))) - 1) / 3
        var tx = UInt64(x), ty = UInt64(y), d: UInt64 = 0
        var s = UInt64(n) >> 1
        while s > 0 {
            let rx: UInt64 = tx & s > 0 ? 1 : 0
            let ry: UInt64 = ty & s > 0 ? 1 : 0
            d += s * s * ((3 * rx) ^ ry)
            // Rotate the quadrant so the curve continues (only bits below s matter from here on).
            if ry == 0 {
                if rx == 1 { tx = s &- 1 &- tx; ty = s &- 1 &- ty }
                swap(&tx, &ty)
            }
            tx &= s &- 1; ty &= s &- 1
            s >>= 1
        }
        return before + d
    }
}

/// Leaf directories, least recently used out first. A lock, not a queue: lookups are quick and
/// come from the handler threads.
final class DirectoryCache: Sendable {
    private struct State {
        var entries: [UInt64: (directory: PMTilesDirectory, used: UInt64)] = [:]
        var clock: UInt64 = 0
    }
    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func get(_ key: UInt64) -> PMTilesDirectory? {
        state.withLock { s in
            guard let hit = s.entries[key] else { return nil }
            s.clock += 1
            s.entries[key] = (hit.directory, s.clock)
            return hit.directory
        }
    }

    func put(_ key: UInt64, _ directory: PMTilesDirectory) {
        state.withLock { s in
            s.clock += 1
            s.entries[key] = (directory, s.clock)
            if s.entries.count > capacity {
                // Drop the oldest eighth at once so eviction's scan is paid rarely.
                let victims = s.entries.sorted { $0.value.used < $1.value.used }.prefix(max(1, capacity / 8))
                for victim in victims { s.entries[victim.key] = nil }
            }
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
}

/// Tile bytes by their offset in the tile data, up to `capacity` bytes, least recently used out
/// first (the oldest eighth of the budget at once, so the scan is paid rarely).
final class TileCache: Sendable {
    private struct State {
        var entries: [UInt64: (bytes: [UInt8], used: UInt64)] = [:]
        var clock: UInt64 = 0
        var bytes = 0
    }
    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int) { self.capacity = max(0, capacity) }

    func get(_ key: UInt64) -> [UInt8]? {
        guard capacity > 0 else { return nil }
        return state.withLock { s in
            guard let hit = s.entries[key] else { return nil }
            s.clock += 1
            s.entries[key]!.used = s.clock
            return hit.bytes
        }
    }

    func put(_ key: UInt64, _ bytes: [UInt8]) {
        guard bytes.count <= capacity / 16 else { return }   // a few huge tiles must not flush the rest
        state.withLock { s in
            s.clock += 1
            if let old = s.entries.updateValue((bytes, s.clock), forKey: key) { s.bytes -= old.bytes.count }
            s.bytes += bytes.count
            guard s.bytes > capacity else { return }
            let target = capacity - capacity / 8
            for victim in s.entries.sorted(by: { $0.value.used < $1.value.used }) {
                guard s.bytes > target else { break }
                s.entries[victim.key] = nil
                s.bytes -= victim.value.bytes.count
            }
        }
    }

    var bytes: Int { state.withLock { $0.bytes } }
}

/// 64-bit FNV-1a: a fingerprint for ETags, not a defence against anyone.
struct FNV1a {
    var value: UInt64 = 0xcbf2_9ce4_8422_2325
    mutating func add(_ bytes: some Sequence<UInt8>) {
        for b in bytes { value = (value ^ UInt64(b)) &* 0x100_0000_01b3 }
    }
}
