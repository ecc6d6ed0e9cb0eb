import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Log
import PhotoFixture
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The photo store as a dependency that fails or hangs, with real faults: moto behind a TCP proxy
/// that swallows every request (a store that accepts connections and never answers) or closes its
/// port (a store that is down, its data kept), and an ext4 file system on a loop device that is
/// remounted read-only or shut down (EIO). In each: what is lost (nothing), what people see
/// meanwhile, and the time to recover.
@Suite(.serialized, .tags(.fault)) struct StoreOutageTests {
    struct Sample: Sendable {
        let path: String
        let status: Int
        let retryAfter: String?
        let seconds: Double
        let body: [UInt8]
    }

    /// One GET over its own connection, as a browser tab with these cookies; status 0 when the
    /// request failed outright.
    static func fetch(_ port: Int, _ cookies: [String: String], _ path: String, headers: [(String, String)] = []) -> Sample {
        let browser = Browser(port: port)
        for (name, value) in cookies { browser.setCookie(name, value) }
        let start = Date()
        do {
            let page = try browser.get(path, headers: headers)
            return Sample(path: path, status: page.status, retryAfter: page.header("Retry-After"),
                          seconds: Date().timeIntervalSince(start), body: page.bodyBytes)
        } catch {
            return Sample(path: path, status: 0, retryAfter: nil, seconds: Date().timeIntervalSince(start), body: [])
        }
    }

    /// `body(i)` on `count` threads at once (a browser opens that many connections), in order.
    static func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        let results = ResultBox<T>()
        let group = DispatchGroup()
        for i in 0..<count {
            group.enter()
            Thread {
                let value = body(i)
                results.set(i, value)
                group.leave()
            }.start()
        }
        group.wait()
        return (0..<count).map { results.get($0)! }
    }

    final class ResultBox<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [Int: T] = [:]
        func set(_ i: Int, _ value: T) { lock.lock(); values[i] = value; lock.unlock() }
        func get(_ i: Int) -> T? { lock.lock(); defer { lock.unlock() }; return values[i] }
    }

    /// The ready photos of a pin with their blobs (original and 256-px thumbnail).
    static func readyPhotos(_ app: TestApp, pin: Int) throws -> [(id: Int64, hash: String, thumb: String?)] {
        try app.pool.query("""
            SELECT id, encode(hash, 'hex') AS hash, encode(thumb_256, 'hex') AS thumb FROM photos
            WHERE pin_id = $1 AND status = 'ready' ORDER BY id
            """, [Int64(pin)]).map { (try $0.decode("id"), try $0.decode("hash"), try $0.decode("thumb")) }
    }

    static func format(_ seconds: Double) -> String { String(format: "%.2f s", seconds) }

    /// The issue's case. Ann's album of 30 is ready; the store starts swallowing every request
    /// (new and kept connections); Ann's page asks for 45 thumbnails at once while Bob loads his
    /// map and pins. Bob's pages must not wait for the store, as they would behind thumbnails each
    /// holding a handler slot for the store's whole timeout. The thumbnails
    /// get 503 with Retry-After, at once once the breaker is open; when the store answers again
    /// every thumbnail reads back.
    @Test func aStoreThatHangsLeavesPagesServedAndPhotosAnswer503UntilItAnswers() throws {
        let moto = try S3StoreTests.moto()
        let direct = try moto.store()
        let proxy = try StoreProxy(target: moto.port)
        var s3 = direct.settings
        s3.endpoint = proxy.endpoint
        let app = try TestApp(workers: true) { settings in
            settings.s3 = s3
            settings.photoStoreCoolDown = 2
            settings.photoStoreMaxCoolDown = 2
            settings.metricsToken = "store-test"
        }
        let store = try #require(app.app.albums.photos.base as? S3Store)
        // The store's read timeout made long, so that a page waiting for it could not pass for one
        // that did not.
        store.readTimeout = 10
        let ann = try app.signedUp()
        let annPin = try AlbumTests.dropPin(ann)
        let bob = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        let bobPin = try AlbumTests.dropPin(bob, lat: 48.8566, lon: 2.3522)
        let album = try AlbumTests.settled(ann, pin: annPin)
        try #require(album.status == "ready" && album.count("ready") == 30)
        _ = try AlbumTests.settled(bob, pin: bobPin)
        #expect(try ann.get("/pins/\(annPin)").status == 200)
        let thumbnails = album.ids.map { "/photos/\($0)?w=256" } + album.ids.prefix(15).map { "/photos/\($0)?w=512" }
        let port = app.port, annCookies = ann.cookies, bobCookies = bob.cookies

        try proxy.set(.blackhole)
        // Ann's 45 thumbnails at once; Bob's map, pins and /readyz (as a balancer polls it) one
        // after another meanwhile (from 0.3 s,
        // so the thumbnails are ahead of him), for longer than the store's read timeout.
        let runs = Self.concurrently(thumbnails.count + 1) { i -> [Sample] in
            guard i == thumbnails.count else { return [Self.fetch(port, annCookies, thumbnails[i])] }
            usleep(300_000)
            var samples: [Sample] = []
            let until = Date(timeIntervalSinceNow: 12)
            while Date() < until {
                samples.append(Self.fetch(port, bobCookies, "/"))
                samples.append(Self.fetch(port, bobCookies, "/pins.json"))
                samples.append(Self.fetch(port, bobCookies, "/readyz"))
                usleep(100_000)
            }
            return samples
        }
        let photos = runs.dropLast().flatMap { $0 }, pages = runs.last!
        // The breaker open: photos are prompt 503s, answered without the store — all but the one
        // that probes it once a cool-down is over (the store still hangs, so it waits its timeout).
        let ids = album.ids
        let refused = Self.concurrently(5) { i in Self.fetch(port, annCookies, "/photos/\(ids[i])?w=256") }
        let prompt = refused.filter { $0.status == 503 && Int($0.retryAfter ?? "") ?? 0 >= 1 && $0.seconds < 2 }
        let readyz = try bob.get("/readyz")
        let metrics = try bob.get("/metrics", headers: [("Authorization", "Bearer store-test")]).body

        try proxy.set(.forward)
        let forwarded = Date()
        let readBack = eventually(timeout: 30) { Self.fetch(port, annCookies, "/photos/\(album.ids[0])?w=256").status == 200 }
        let recovered = Date().timeIntervalSince(forwarded)
        let rows = try Self.readyPhotos(app, pin: annPin)
        let after = Self.concurrently(rows.count) { i in Self.fetch(port, annCookies, "/photos/\(rows[i].id)?w=256") }

        let slowest = pages.map(\.seconds).max() ?? 0
        let waitedLong = photos.filter { $0.seconds > 5 }.count
        print("""
            S3 hanging under 45 thumbnail requests: Bob's pages \(pages.count) answered, slowest \(Self.format(slowest)) \
            (statuses \(Set(pages.map(\.status)).sorted())); thumbnails \(photos.filter { $0.status == 503 }.count) × 503, \
            \(photos.filter { $0.status == 200 }.count) × 200, \(waitedLong) waited over 5 s, slowest \
            \(Self.format(photos.map(\.seconds).max() ?? 0)); 5 photos with the breaker open: \(refused.map(\.status)) in \
            \(refused.map { Self.format($0.seconds) }); readyz \(readyz.status); read back \(Self.format(recovered)) after the store answered
            """)
        #expect(pages.count >= 4 && pages.allSatisfy { $0.status == 200 }, "\(pages.map(\.status))")
        // Well under the store's read timeout (10 s here): no page waited for the store.
        #expect(slowest < 5, "Bob's slowest page took \(slowest) s")
        #expect(photos.allSatisfy { $0.status == 503 && Int($0.retryAfter ?? "") ?? 0 >= 1 }, "\(photos.map(\.status))")
        // Only the reads that had a read slot waited for the store's timeout.
        #expect(waitedLong <= 6, "\(waitedLong) thumbnails waited for the store's timeout")
        #expect(refused.allSatisfy { $0.status == 503 } && prompt.count >= 4, "\(refused.map { ($0.status, $0.seconds) })")
        #expect(readyz.status == 200 && readyz.body.contains("degraded") && readyz.body.contains(s3.bucket), "\(readyz.body)")
        #expect(metrics.contains("vt_photo_store_available 0"))
        #expect(metrics.contains("vt_photo_store_breaker{state=\"open\"} 1") || metrics.contains("vt_photo_store_breaker{state=\"probing\"} 1"))
        #expect(readBack)
        #expect(after.count == 30)
        for (row, sample) in zip(rows, after) {
            #expect(sample.status == 200 && SHA256.hex(sample.body) == row.thumb, "photo \(row.id): \(sample.status)")
        }
        #expect(eventually(timeout: 10) { (try? bob.get("/readyz").body) == "ready" })
        #expect(try bob.get("/metrics", headers: [("Authorization", "Bearer store-test")]).body.contains("vt_photo_store_available 1"))
    }

    /// An album filling from moto behind a `StoreProxy` (30 images over 4.5 s, store backoff and
    /// breaker cool-down in seconds), once its first 3 photos are ready; `writeDeadline`: the
    /// store's put deadline, when not the default. `direct` asks moto past the proxy.
    static func albumBehindProxy(writeDeadline: Double? = nil) throws
        -> (direct: S3Store, proxy: StoreProxy, app: TestApp, browser: Browser, pin: Int) {
        let moto = try S3StoreTests.moto()
        let direct = try moto.store()
        let proxy = try StoreProxy(target: moto.port)
        var s3 = direct.settings
        s3.endpoint = proxy.endpoint
        var options = PhotoFixture.Options()
        options.imageStagger = 0.15  // 30 images over 4.5 s
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.s3 = s3
            if let writeDeadline { settings.photoStoreWriteDeadline = writeDeadline }
            settings.photoStoreCoolDown = 1
            settings.photoStoreMaxCoolDown = 2
            settings.workers.storeBackoffFirst = 0.1
            settings.workers.storeBackoffMax = 2
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        try #require(eventually(timeout: 20) { ((try? AlbumTests.state(browser, pin: pin))?.count("ready") ?? 0) >= 3 })
        return (direct, proxy, app, browser, pin)
    }

    /// The store goes down mid-album (its port closed: connections refused) and comes back with
    /// its data: moto's server (5.x) has no persistence, so it keeps running behind the proxy,
    /// which closes its port. The photos still to come wait, the ones stored before read back
    /// byte for byte afterwards, and the album completes by itself.
    @Test func aStoreCutOffMidAlbumKeepsItsBlobsAndTheAlbumCompletesWhenItReturns() throws {
        let (direct, proxy, app, browser, pin) = try Self.albumBehindProxy()

        try proxy.set(.down)
        let cut = Date()
        let before = try Self.readyPhotos(app, pin: pin)
        usleep(4_000_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let port = app.port, cookies = browser.cookies
        let photo = Self.fetch(port, cookies, "/photos/\(before[0].id)")
        let map = Self.fetch(port, cookies, "/")
        let readyz = try browser.get("/readyz")
        // Nothing lost in the store meanwhile (asked past the proxy).
        let kept = try before.allSatisfy { try direct.get($0.hash).map(SHA256.hex) == $0.hash }

        try proxy.set(.forward)
        let back = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        let recovered = Date().timeIntervalSince(back)
        let readBack = before.map { Self.fetch(port, cookies, "/photos/\($0.id)") }
        let all = try Self.readyPhotos(app, pin: pin)
        print("""
            S3 port closed \(Self.format(back.timeIntervalSince(cut))) mid-album (\(before.count) photos stored before): meanwhile \
            \(during.status), \(during.count("ready")) ready, \(during.count("pending")) pending, \(during.count("failed")) failed; \
            a photo \(photo.status) in \(Self.format(photo.seconds)), the map \(map.status) in \(Self.format(map.seconds)), readyz \
            \(readyz.status); back: \(album.status), \(album.count("ready")) ready, \(album.count("failed")) failed, \
            \(Self.format(recovered)) later; \(readBack.filter { $0.status == 200 }.count)/\(before.count) earlier photos read back
            """)
        #expect(during.status == "downloading" && during.count("failed") == 0 && during.count("pending") > 0)
        #expect(photo.status == 503 && Int(photo.retryAfter ?? "") ?? 0 >= 1 && photo.seconds < 2)
        #expect(map.status == 200)
        #expect(readyz.status == 200 && readyz.body.contains("degraded"))
        #expect(kept)
        #expect(album.status == "ready" && album.count("ready") == 30 && album.count("failed") == 0 && album.count("pending") == 0)
        for (row, sample) in zip(before, readBack) {
            #expect(sample.status == 200 && SHA256.hex(sample.body) == row.hash, "photo \(row.id) stored before the cut: \(sample.status)")
        }
        #expect(all.count == 30)
    }

    /// The store starts taking PUTs and never answering (the proxy swallows every request, on new
    /// and kept connections) mid-album, with the write deadline at 2 s (30 s in production): each
    /// hanging put is an outage at its deadline, never a worker held for curl's whole timeout; the
    /// breaker opens, the album's remaining photos stay pending (none failed), pages are served;
    /// when the store answers again the album completes by itself.
    @Test func aPutThatHangsIsAnOutageAtItsDeadlineAndTheAlbumCompletesWhenTheStoreAnswers() throws {
        let (_, proxy, app, browser, pin) = try Self.albumBehindProxy(writeDeadline: 2)

        try proxy.set(.blackhole)
        let hung = Date()
        let before = try Self.readyPhotos(app, pin: pin)
        var opened: TimeInterval?
        _ = eventually(timeout: 15) {
            guard (try? browser.get("/readyz"))?.body.contains("degraded") == true else { return false }
            opened = Date().timeIntervalSince(hung)
            return true
        }
        usleep(3_000_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let map = Self.fetch(app.port, browser.cookies, "/")

        try proxy.set(.forward)
        let back = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 90)
        let recovered = Date().timeIntervalSince(back)
        let readBack = before.map { Self.fetch(app.port, browser.cookies, "/photos/\($0.id)") }
        print("""
            S3 swallowing every request mid-album (\(before.count) photos stored before, write deadline 2 s): the breaker open \
            \(opened.map(Self.format) ?? "never") later; meanwhile \(during.status), \(during.count("ready")) ready, \
            \(during.count("pending")) pending, \(during.count("failed")) failed; the map \(map.status) in \(Self.format(map.seconds)); \
            answering again: \(album.status), \(album.count("ready")) ready, \(album.count("failed")) failed, \(Self.format(recovered)) later
            """)
        #expect(opened.map { $0 < 2 + 6 } == true, "a hanging put is an outage at its deadline (2 s), not at curl's timeout")
        #expect(during.status == "downloading" && during.count("failed") == 0 && during.count("pending") > 0)
        #expect(map.status == 200 && map.seconds < 2)
        #expect(album.status == "ready" && album.count("ready") == 30 && album.count("failed") == 0 && album.count("pending") == 0)
        for (row, sample) in zip(before, readBack) {
            #expect(sample.status == 200 && SHA256.hex(sample.body) == row.hash, "photo \(row.id) stored before: \(sample.status)")
        }
    }
}

/// An ext4 file system on a loop device, mounted for one test (root only). Faults are the
/// kernel's own: a remount read-only (EROFS, as ext4 does after an error with errors=remount-ro)
/// and FS_IOC_SHUTDOWN (every operation then fails with EIO, as on a disk that died).
/// device-mapper's error target would be the other way to get EIO; containers rarely have it.
final class LogLines: Sendable {
    let list = Mutex<[String]>([])
}

final class LoopFileSystem {
    let image: String
    let mount: String
    private(set) var devices: [String] = []

    /// Why loop-mounted ext4 cannot be used here, or nil.
    static let unavailable: String? = {
        guard getuid() == 0 else { return "loop devices and mounts need root" }
        guard let free = try? runProcess(["/sbin/losetup", "-f"]), free.status == 0 else {
            return "no loop device: `losetup -f` fails (the kernel or the container has none)"
        }
        guard FileManager.default.isExecutableFile(atPath: "/sbin/mkfs.ext4") else { return "mkfs.ext4 is not installed (e2fsprogs)" }
        return nil
    }()

    init(megabytes: Int = 64) throws {
        let base = TestApp.scratchDirectory("loop-ext4")
        image = base + ".img"
        mount = base
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let fd = open(image, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0, ftruncate(fd, off_t(megabytes) << 20) == 0 else { throw MotoError(description: "cannot make \(image)") }
        close(fd)
        try Self.run(["/sbin/mkfs.ext4", "-q", "-F", image])
        try attach()
    }

    deinit {
        _ = try? runProcess(["/bin/umount", "-l", mount])
        for device in devices { _ = try? runProcess(["/sbin/losetup", "-d", device]) }
        unlink(image)
    }

    /// A loop device on the image, mounted (a new device each time: a file system that was shut
    /// down keeps its superblock while anything holds it open, and a mount of the same device
    /// would find it again).
    private func attach() throws {
        let device = try Self.run(["/sbin/losetup", "-f", "--show", image]).trimmingCharacters(in: .whitespacesAndNewlines)
        devices.append(device)
        try Self.run(["/bin/mount", "-t", "ext4", device, mount])
    }

    /// A remount read-only is refused (EBUSY) while a file is open for writing, and the album
    /// writes photo after photo: tried again between two writes, for up to five seconds.
    func remount(readOnly: Bool) throws {
        let command = ["/bin/mount", "-o", readOnly ? "remount,ro" : "remount,rw", mount]
        for _ in 0..<250 {
            let result = try runProcess(command)
            if result.status == 0 { return }
            guard result.output.contains("busy") else { throw MotoError(description: "\(command.joined(separator: " ")): \(result.output)") }
            usleep(20_000)
        }
        try Self.run(command)
    }

    /// FS_IOC_SHUTDOWN without flushing the log (EXT4_GOING_FLAGS_NOLOGFLUSH): what was synced stays.
    func shutDown() throws {
        try Self.run(["/usr/bin/env", "python3", "-c", """
            import fcntl, os, struct, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            fcntl.ioctl(fd, 0x8004587D, struct.pack("I", 2))
            """, mount])
    }

    /// The disk replaced: the old mount detached, the image mounted again (its journal replayed).
    func remountAfterShutdown() throws {
        try Self.run(["/bin/umount", "-l", mount])
        try attach()
    }

    @discardableResult
    static func run(_ command: [String]) throws -> String {
        let result = try runProcess(command)
        guard result.status == 0 else { throw MotoError(description: "\(command.joined(separator: " ")): \(result.output)") }
        return result.output
    }
}

/// EROFS and EIO from a real file system under the file store, mid-album: the photos still to
/// come wait (none fails), the album completes once the disk is back, and what was stored before
/// reads back.
@Suite(.serialized, .tags(.fault),
       .disabled(if: LoopFileSystem.unavailable != nil, Comment(rawValue: "skipped: \(LoopFileSystem.unavailable ?? "")")))
struct FileSystemFaultTests {
    static func appOn(_ fs: LoopFileSystem) throws -> TestApp {
        var options = PhotoFixture.Options()
        options.imageStagger = 0.15
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.photoStore = fs.mount + "/photos"
            settings.photoStoreCoolDown = 1
            settings.photoStoreMaxCoolDown = 2
            settings.workers.storeBackoffFirst = 0.2
            settings.workers.storeBackoffMax = 1
        }
        return app
    }

    /// An album a few photos in, on `fs`; whether the store logged a line naming `fs` with some
    /// text; and the end of that watch.
    static func albumUnderWay(on fs: LoopFileSystem) throws
        -> (TestApp, Browser, Int, logged: @Sendable (String) -> Bool, stop: @Sendable () -> Void) {
        let lines = LogLines()
        let mount = fs.mount
        let stopObserving = Logger.observe { line in if line.contains("photo store") && line.contains(mount) { lines.list.withLock { $0.append(line) } } }
        let app = try Self.appOn(fs)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        try #require(eventually(timeout: 20) { ((try? AlbumTests.state(browser, pin: pin))?.count("ready") ?? 0) >= 3 })
        return (app, browser, pin, { text in lines.list.withLock { $0.contains { $0.contains(text) } } }, stopObserving)
    }

    @Test func aFileSystemRemountedReadOnlyKeepsPhotosServedAndTheAlbumWaits() throws {
        let fs = try LoopFileSystem()
        let (app, browser, pin, logged, stopObserving) = try Self.albumUnderWay(on: fs)
        defer { stopObserving() }

        try fs.remount(readOnly: true)
        let remounted = Date()
        #expect(eventually(timeout: 20) { logged("Read-only file system") })
        usleep(1_500_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let before = try StoreOutageTests.readyPhotos(app, pin: pin)
        let port = app.port, cookies = browser.cookies
        // Reads carry on: a read-only disk still has every photo.
        let served = before.map { StoreOutageTests.fetch(port, cookies, "/photos/\($0.id)") }
        let readyz = try browser.get("/readyz")

        try fs.remount(readOnly: false)
        let back = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        let recovered = Date().timeIntervalSince(back)
        let all = try StoreOutageTests.readyPhotos(app, pin: pin)
        let readBack = all.map { StoreOutageTests.fetch(port, cookies, "/photos/\($0.id)") }
        print("""
            ext4 read-only \(StoreOutageTests.format(back.timeIntervalSince(remounted))) mid-album: \(during.status), \
            \(during.count("ready")) ready, \(during.count("pending")) pending, \(during.count("failed")) failed; \
            \(served.filter { $0.status == 200 }.count)/\(before.count) stored photos served meanwhile; readyz \(readyz.status); \
            rw again: \(album.status), \(album.count("ready")) ready, \(album.count("failed")) failed, \(StoreOutageTests.format(recovered)) later
            """)
        #expect(during.status == "downloading" && during.count("failed") == 0 && during.count("pending") > 0)
        for (row, sample) in zip(before, served) { #expect(sample.status == 200 && SHA256.hex(sample.body) == row.hash) }
        #expect(readyz.status == 200 && readyz.body.contains("degraded") && readyz.body.contains("Read-only"), "\(readyz.body)")
        #expect(album.status == "ready" && album.count("ready") == 30 && album.count("failed") == 0)
        for (row, sample) in zip(all, readBack) { #expect(sample.status == 200 && SHA256.hex(sample.body) == row.hash) }
    }

    @Test func aFileSystemThatFailsWithEIOKeepsPhotosPendingAndResumesOnANewDisk() throws {
        let fs = try LoopFileSystem()
        let (app, browser, pin, logged, stopObserving) = try Self.albumUnderWay(on: fs)
        defer { stopObserving() }

        let before = try StoreOutageTests.readyPhotos(app, pin: pin)
        try fs.shutDown()
        let failed = Date()
        #expect(eventually(timeout: 20) { logged("Input/output error") })
        usleep(1_500_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let port = app.port, cookies = browser.cookies
        let photo = StoreOutageTests.fetch(port, cookies, "/photos/\(before[0].id)")
        let map = StoreOutageTests.fetch(port, cookies, "/")
        let readyz = try browser.get("/readyz")

        try fs.remountAfterShutdown()
        let back = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        let recovered = Date().timeIntervalSince(back)
        // OpenBlobs may keep a descriptor of the dead mount for its lifetime (10 s).
        usleep(10_500_000)
        let readBack = before.map { StoreOutageTests.fetch(port, cookies, "/photos/\($0.id)") }
        print("""
            ext4 shut down (EIO) \(StoreOutageTests.format(back.timeIntervalSince(failed))) mid-album: \(during.status), \
            \(during.count("ready")) ready, \(during.count("pending")) pending, \(during.count("failed")) failed; a photo \(photo.status) \
            in \(StoreOutageTests.format(photo.seconds)), the map \(map.status); readyz \(readyz.status); mounted again: \(album.status), \
            \(album.count("ready")) ready, \(album.count("failed")) failed, \(StoreOutageTests.format(recovered)) later; \
            \(readBack.filter { $0.status == 200 }.count)/\(before.count) earlier photos read back
            """)
        #expect(during.status == "downloading" && during.count("failed") == 0 && during.count("pending") > 0)
        #expect(photo.status == 503 && Int(photo.retryAfter ?? "") ?? 0 >= 1)
        #expect(map.status == 200)
        #expect(readyz.status == 200 && readyz.body.contains("degraded"), "\(readyz.body)")
        #expect(album.status == "ready" && album.count("ready") == 30 && album.count("failed") == 0)
        for (row, sample) in zip(before, readBack) {
            #expect(sample.status == 200 && SHA256.hex(sample.body) == row.hash, "photo \(row.id) stored before the fault: \(sample.status)")
        }
    }
}
