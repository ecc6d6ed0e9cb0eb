import Foundation
import HTTPServer
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The PMTiles reader against archives written by other software (the specification's samples,
/// and archives made by script/tools/make-tiles.py with Python's pmtiles writer).
@Suite struct PMTilesTests {
    static let fixtures = TestApp.repositoryRoot + "/Tests/Fixtures/tiles"

    /// "z x y length fnv1a64" lines written by `make-tiles.py manifest` (Python's reader).
    func manifest(_ name: String) throws -> [(z: Int, x: Int, y: Int, length: Int, hash: String)] {
        let text = try String(contentsOfFile: "\(Self.fixtures)/\(name).tiles.txt", encoding: .utf8)
        return text.split(separator: "\n").map { line in
            let f = line.split(separator: " ")
            return (Int(f[0])!, Int(f[1])!, Int(f[2])!, Int(f[3])!, String(f[4]))
        }
    }

    func fnv(_ bytes: [UInt8]) -> String {
        var h = FNV1a()
        h.add(bytes)
        let hex = String(h.value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Every addressed tile returns exactly its bytes; every other tile of the zoom range is absent.
    func readsExactly(_ name: String, archive: PMTilesArchive) throws {
        let tiles = try manifest(name)
        var present = Set<String>()
        for t in tiles {
            let tile = try #require(try archive.tile(z: t.z, x: t.x, y: t.y), "\(t.z)/\(t.x)/\(t.y)")
            #expect(tile.bytes.count == t.length && fnv(tile.bytes) == t.hash, "\(t.z)/\(t.x)/\(t.y)")
            present.insert("\(t.z)/\(t.x)/\(t.y)")
        }
        let h = archive.header
        for z in h.minZoom...min(h.maxZoom, 9) {
            for x in 0..<(1 << z) { for y in 0..<(1 << z) where !present.contains("\(z)/\(x)/\(y)") {
                #expect(try archive.tile(z: z, x: x, y: y) == nil, "\(z)/\(x)/\(y) should be absent")
            } }
        }
        #expect(try archive.tile(z: h.maxZoom + 1, x: 0, y: 0) == nil)
        #expect(try archive.tile(z: 2, x: 4, y: 0) == nil)       // outside the grid
        #expect(try archive.tile(z: -1, x: 0, y: 0) == nil)
        #expect(try archive.tile(z: 40, x: 0, y: 0) == nil)
    }

    @Test func readsTheStamenPNGArchive() throws {
        let archive = try PMTilesArchive(path: "\(Self.fixtures)/stamen-toner-z0-3.pmtiles")
        let h = archive.header
        #expect(h.tileType == .png && h.tileCompression == .none && h.internalCompression == .gzip)
        #expect(h.minZoom == 0 && h.maxZoom == 3 && h.addressedTiles == 85 && h.tileEntries == 84 && h.tileContents == 80)
        #expect(h.bounds.0 == -180 && h.bounds.1 == -85 && h.bounds.2 == 180 && h.bounds.3 == 85)
        #expect(archive.metadata.isEmpty)
        try readsExactly("stamen-toner-z0-3", archive: archive)
    }

    @Test func readsTheUSGSWebPArchiveAndItsMetadata() throws {
        // A memory cache smaller than the archive (2 MB of tiles): tiles keep coming back exact
        // while it evicts, and it stays within its budget.
        let archive = try PMTilesArchive(path: "\(Self.fixtures)/usgs-mt-whitney-z8-15-webp.pmtiles", tileCacheBytes: 1_000_000)
        let h = archive.header
        #expect(h.tileType == .webp && h.minZoom == 8 && h.maxZoom == 15 && h.addressedTiles == 50)
        #expect(abs(h.bounds.0 - -118.31982) < 1e-6 && abs(h.bounds.3 - 36.59301) < 1e-6)
        #expect(h.centerZoom == 12 && abs(h.center.lat - 36.577) < 1e-6)
        #expect(archive.metadata["attribution"] as? String == "Created by QGIS algorithm: Generate XYZ tiles (Directory)")
        #expect(archive.metadata["tileSize"] as? String == "512")
        try readsExactly("usgs-mt-whitney-z8-15-webp", archive: archive)
        try readsExactly("usgs-mt-whitney-z8-15-webp", archive: archive)
        #expect(archive.cachedTileBytes > 0 && archive.cachedTileBytes <= 1_000_000)
    }

    /// make-tiles.py leaves: the content of tile 8/x/y, or nil (the same rule as leaf_tile there).
    static func leafTile(x: Int, y: Int) -> [UInt8]? {
        let h = (UInt64(x) * 73_856_093 ^ UInt64(y) * 19_349_663 ^ 8 * 83_492_791) & 0xffff_ffff
        guard h % 2 == 0 else { return nil }
        let k = Int((h >> 8) % 300)
        let letter = Array("abcdefghijklmnopqrstuvwxyz")[k % 26]
        return Array("\(k):\(String(repeating: letter, count: k + 1))".utf8)
    }

    /// 32,768 tiles whose directory the pmtiles writer had to split into leaves; a directory cache
    /// of two leaves keeps evicting while every tile of the zoom is asked for.
    @Test func followsLeafDirectoriesThroughABoundedCache() throws {
        let archive = try PMTilesArchive(path: "\(Self.fixtures)/leaves.pmtiles", directoryCacheEntries: 2)
        #expect(archive.header.leafDirectoryLength > 0 && archive.header.rootDirectoryLength < 1000)
        var present = 0
        for x in 0..<256 { for y in 0..<256 {
            let expected = Self.leafTile(x: x, y: y)
            let tile = try archive.tile(z: 8, x: x, y: y)
            if tile?.bytes != expected { Issue.record("8/\(x)/\(y): \(tile?.bytes.count ?? -1) bytes, expected \(expected?.count ?? -1)") }
            if expected != nil { present += 1 }
        } }
        #expect(present == 32768 && archive.header.addressedTiles == 32768)
        #expect(try archive.tile(z: 7, x: 0, y: 0) == nil && archive.tile(z: 9, x: 0, y: 0) == nil)
        #expect(archive.cachedLeafDirectories <= 2 && archive.cachedLeafDirectories > 0)
        #expect(archive.metadata["attribution"] as? String == "test pattern")
    }

    @Test func readsTheGeneratedVectorArchive() throws {
        let archive = try PMTilesArchive(path: "\(Self.fixtures)/naples.pmtiles")
        #expect(archive.header.tileType == .mvt && archive.header.tileCompression == .gzip)
        #expect(archive.header.maxZoom == 14)
        let tile = try #require(try archive.tile(z: 0, x: 0, y: 0))
        #expect(Array(tile.bytes.prefix(2)) == [0x1f, 0x8b])     // gzip, as the header says
        #expect((archive.metadata["attribution"] as? String)?.contains("Natural Earth") == true)
    }

    /// Hilbert ids against values from the specification's reference implementation.
    @Test func tileIDsFollowTheHilbertCurve() {
        #expect(PMTilesTileID.id(z: 0, x: 0, y: 0) == 0)
        #expect(PMTilesTileID.id(z: 1, x: 0, y: 0) == 1)
        #expect(PMTilesTileID.id(z: 1, x: 0, y: 1) == 2)
        #expect(PMTilesTileID.id(z: 1, x: 1, y: 1) == 3)
        #expect(PMTilesTileID.id(z: 1, x: 1, y: 0) == 4)
        #expect(PMTilesTileID.id(z: 2, x: 0, y: 0) == 5)
        #expect(PMTilesTileID.id(z: 3, x: 0, y: 0) == 21)
        #expect(PMTilesTileID.id(z: 20, x: 0, y: 0) == 366503875925)
    }

    // ----- broken archives: a clear error when opening -----

    func brokenCopy(_ name: String, _ change: (inout [UInt8]) -> Void) throws -> String {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(Self.fixtures)/stamen-toner-z0-3.pmtiles")))
        change(&bytes)
        let dir = ProcessInfo.processInfo.environment["TEST_SCRATCH"] ?? NSTemporaryDirectory()
        let path = "\(dir)/\(name)-\(UUID().uuidString.prefix(8)).pmtiles"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    func openError(_ path: String) -> PMTilesError? {
        do { _ = try PMTilesArchive(path: path); return nil } catch { return error as? PMTilesError }
    }

    @Test func brokenArchivesAreRefusedWithAClearError() throws {
        let truncatedHeader = try brokenCopy("short") { $0 = Array($0.prefix(100)) }
        #expect(openError(truncatedHeader)?.description.contains("shorter than the 127-byte header") == true)
        let truncated = try brokenCopy("truncated") { $0 = Array($0.prefix(300_000)) }
        #expect(openError(truncated)?.description.contains("tile data") == true)
        let magic = try brokenCopy("magic") { $0[0] = UInt8(ascii: "X") }
        #expect(openError(magic) == .notPMTiles)
        let version2 = try brokenCopy("v2") { $0[7] = 2 }
        #expect(openError(version2) == .unsupportedVersion(2))
        #expect(openError(version2)?.description.contains("version 2 is not supported") == true)
        // The root directory's length field (bytes 16…23) now reaches past the end of the file.
        let pastEnd = try brokenCopy("past-end") { b in
            let length = UInt64(b.count)
            for i in 0..<8 { b[16 + i] = UInt8((length >> (8 * UInt64(i))) & 0xff) }
        }
        #expect(openError(pastEnd)?.description.contains("root directory") == true)
        let garbage = try brokenCopy("garbage-root") { b in for i in 127..<200 { b[i] = 0xff } }
        #expect(openError(garbage)?.description.contains("broken archive") == true)
        #expect(openError("/nonexistent/x.pmtiles")?.description.contains("cannot open") == true)
    }

    /// A sparse 6 GiB file whose tile data starts past 5 GiB: offsets above 32 bits, read in place
    /// (the file takes a few KB of disk; reading it whole would take seconds and 6 GiB of memory).
    @Test func readsTilesPastFourGigabytesWithoutReadingTheFile() throws {
        func varint(_ v: UInt64) -> [UInt8] {
            var v = v, out: [UInt8] = []
            while v >= 0x80 { out.append(UInt8(v & 0x7f) | 0x80); v >>= 7 }
            return out + [UInt8(v)]
        }
        func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8((v >> (8 * UInt64($0))) & 0xff) } }
        let tiles: [(z: Int, x: Int, y: Int, bytes: [UInt8])] = [(0, 0, 0, Array("world".utf8)), (1, 1, 0, Array("north-east".utf8)), (2, 3, 3, Array("south-east".utf8))]
        let sorted = tiles.map { (PMTilesTileID.id(z: $0.z, x: $0.x, y: $0.y)!, $0.bytes) }.sorted { $0.0 < $1.0 }
        var directory = varint(UInt64(sorted.count))
        var last: UInt64 = 0
        for (id, _) in sorted { directory += varint(id - last); last = id }
        for _ in sorted { directory += varint(1) }
        for (_, bytes) in sorted { directory += varint(UInt64(bytes.count)) }
        directory += varint(1)                                   // first offset 0, stored as 0 + 1
        for _ in sorted.dropFirst() { directory += varint(0) }   // the rest follow on
        let root = try #require(Gzip.compress(directory))
        let data = sorted.flatMap { $0.1 }
        let tileDataOffset: UInt64 = 5 << 30 + 12345
        var header = Array("PMTiles".utf8) + [3]
        header += le(127, 8) + le(UInt64(root.count), 8)                  // root directory
        header += le(127 + UInt64(root.count), 8) + le(0, 8)              // metadata: none
        header += le(127 + UInt64(root.count), 8) + le(0, 8)              // leaves: none
        header += le(tileDataOffset, 8) + le(UInt64(data.count), 8)
        header += le(3, 8) + le(3, 8) + le(3, 8) + [1, 2, 1, 2, 0, 2]     // counts, clustered, gzip dirs, raw PNG tiles, z0-2
        header += le(UInt64(UInt32(bitPattern: -1_800_000_000)), 4) + le(UInt64(UInt32(bitPattern: -850_000_000)), 4)
        header += le(1_800_000_000, 4) + le(850_000_000, 4) + [0] + le(0, 4) + le(0, 4)
        #expect(header.count == 127)
        let dir = ProcessInfo.processInfo.environment["TEST_SCRATCH"] ?? NSTemporaryDirectory()
        let path = "\(dir)/sparse-\(UUID().uuidString.prefix(8)).pmtiles"
        defer { unlink(path) }
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        try #require(fd >= 0)
        _ = (header + root).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        _ = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(tileDataOffset)) }
        #expect(ftruncate(fd, off_t(6) << 30) == 0)
        close(fd)

        let archive = try PMTilesArchive(path: path)
        for t in tiles { #expect(try archive.tile(z: t.z, x: t.x, y: t.y)?.bytes == t.bytes) }
        #expect(try archive.tile(z: 1, x: 0, y: 0) == nil)
        #expect(try archive.tile(z: 2, x: 3, y: 3)?.offset == UInt64("worldnorth-east".utf8.count))
    }
}
