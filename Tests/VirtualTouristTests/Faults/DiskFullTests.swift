import Foundation
import Log
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
@testable import AlbumWing
@testable import Domain
#endif

/// The photo store's disk fills up mid-album (a 4 MB tmpfs the harness mounts and fills): the log
/// says why once, /readyz stays ready and says the store is full (degraded), nothing half-written stays behind, the photos
/// wait as pending, and the album completes by itself once space returns. Mounting needs root
/// (script/test runs as root in CI and in the container).
@Suite(.enabled(if: getuid() == 0, "mounting a tmpfs needs root"), .tags(.fault)) struct DiskFullTests {
    @Test func aFullDiskKeepsPhotosPendingAndTheAlbumCompletesWhenSpaceReturns() throws {
        let mount = TestApp.scratchDirectory("full-disk")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let mounted = try runProcess(["/bin/mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mount])
        try #require(mounted.status == 0, "mount: \(mounted.output)")
        defer { _ = try? runProcess(["/bin/umount", "-l", mount]) }
        let root = mount + "/photos"
        // Filled up to the last byte by the harness, before the album starts.
        let filler = mount + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0)
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        var filled = 0
        while true {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            if n <= 0 { break }
            filled += n
        }
        close(fd)

        let lines = Mutex<[String]>([])
        // Lines naming this test's store only: other suites' stores fail in the same process meanwhile.
        let stopObserving = Logger.observe { line in if line.contains("photo store") && line.contains(mount) { lines.withLock { $0.append(line) } } }
        defer { stopObserving() }
        let app = try TestApp(workers: true) { settings in
            settings.photoStore = root
            settings.workers.storeBackoffFirst = 0.2
            settings.workers.storeBackoffMax = 0.5
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        #expect(eventually(timeout: 20) { lines.withLock { $0.contains { $0.contains("the photo store is unavailable") } } })
        usleep(1_500_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let readyz = try browser.get("/readyz")
        // Nothing half-written: no temporary file left, every blob whole under its own name.
        func storeFiles() -> (temporary: Int, blobs: Int, wrong: Int) {
            var temporary = 0, blobs = 0, wrong = 0
            for relative in FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? [] {
                let name = (relative as NSString).lastPathComponent
                if name.hasPrefix(".tmp-") { temporary += 1 }
                guard isPhotoHash(name), let data = FileManager.default.contents(atPath: root + "/" + relative) else { continue }
                blobs += 1
                if SHA256.hex([UInt8](data)) != name { wrong += 1 }
            }
            return (temporary, blobs, wrong)
        }
        let full = storeFiles()

        unlink(filler)
        let freed = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 30)
        let recovered = Date().timeIntervalSince(freed)
        let after = storeFiles()
        let logged = lines.withLock { $0 }
        print("""
            photo store's disk full (\(filled / 1024) KB of filler): album \(during.status) with \(during.count("pending")) pending, \
            \(during.count("failed")) failed; /readyz \(readyz.status); \(full.temporary) temporary files, \(full.blobs) blobs \
            (\(full.wrong) not matching their name); space back: \(album.status), \(album.count("ready")) ready, \
            \(String(format: "%.1f", recovered)) s later, \(after.blobs) blobs (\(after.wrong) wrong, \(after.temporary) temporary); \
            outage logged \(logged.filter { $0.contains("the photo store is unavailable") }.count) time(s)
            """)
        #expect(during.status == "downloading" && during.count("failed") == 0)
        #expect(readyz.status == 200 && readyz.body.contains("degraded") && readyz.body.contains("full"), "\(readyz.body)")
        #expect(logged.contains { $0.contains("No space left on device") })
        #expect(logged.filter { $0.contains("the photo store is unavailable") }.count == 1)
        #expect(full.temporary == 0 && full.wrong == 0)
        #expect(album.status == "ready" && album.count("ready") == 30 && album.count("failed") == 0)
        #expect(after.temporary == 0 && after.wrong == 0 && after.blobs >= 10)
        #expect(eventually(timeout: 10) { (try? browser.get("/readyz").body) == "ready" })
    }
}
