/// The PMTiles version 3 format as bytes decode to values: the fixed header, directories of
/// varint columns and the Hilbert-curve tile ids (docs/architecture.md, "Street-level maps").
/// Nothing here reads a file; PMTilesArchive does, and hands the bytes over.

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
