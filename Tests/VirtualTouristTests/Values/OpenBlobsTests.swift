import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// A blob kept open is sent from the event loop only while all its bytes are in the page cache
/// (cachestat asks the cache, never the file system): sendfile on the loop then cannot wait for a
/// disk or a network file system that stopped answering after the blob was opened. A blob whose
/// pages were evicted goes back to a handler slot, which reads it into the cache under the
/// store's read deadline before the loop sends it.
@Suite struct OpenBlobsTests {
    /// Drops `path`'s clean pages from the page cache, as memory pressure would.
    static func evict(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        fdatasync(fd)
        try #require(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
    }

    @Test func aKeptBlobIsOfferedToTheLoopOnlyWhileItIsInThePageCache() throws {
        // On disk (ext4 under .build), where pages can be evicted: tmpfs keeps them for good.
        let folder = TestApp.repositoryRoot + "/.build/open-blobs-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/blob"
        try Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: path))
        let blobs = OpenBlobs(lifetime: .seconds(60))

        try Self.evict(path)
        #expect(blobs.kept(at: path) == nil, "nothing kept yet")
        let opened = try #require(blobs.file(at: path), "opened and read on a thread that may block")
        #expect(opened.isCached, "file(at:) leaves every byte in the page cache")
        #expect(blobs.kept(at: path) === opened, "kept and cached: the loop may send it")

        try Self.evict(path)
        let cachedAfterEviction = opened.isCached
        print("a kept 3 MB blob after its pages were evicted: cached \(cachedAfterEviction), offered to the loop \(blobs.kept(at: path) != nil)")
        #expect(!cachedAfterEviction, "the kernel reports evicted pages (cachestat)")
        #expect(blobs.kept(at: path) == nil, "evicted: not sent from the loop, which could wait on the disk")
        #expect(blobs.file(at: path) === opened, "a handler slot reads it back into the cache, the same descriptor")
        #expect(blobs.kept(at: path) === opened)
    }
}
