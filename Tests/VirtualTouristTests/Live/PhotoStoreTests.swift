import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The photo store: content-addressed files, serving from them, moving old rows' bytes into the
/// store, and the collector. Real files, real PostgreSQL, real HTTP.
@Suite struct PhotoStoreTests {
    @Test func sha256MatchesTheStandardVectors() {
        #expect(SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex([UInt8](repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // Every length around the block and padding boundaries hashes differently.
        let lengths = Array(50...130)
        #expect(Set(lengths.map { SHA256.hex([UInt8](repeating: 7, count: $0)) }).count == lengths.count)
    }

    @Test func theSameBytesAreStoredOnceUnderTheirHash() throws {
        let store = FileStore(root: TestApp.scratchDirectory("store"))
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hash = try store.put(bytes)
        #expect(hash == SHA256.hex(bytes))
        #expect(try store.put(bytes) == hash)
        #expect(try store.get(hash) == bytes)
        let fanned = store.root + "/" + hash.prefix(2) + "/" + hash.dropFirst(2).prefix(2) + "/" + hash
        #expect(FileManager.default.fileExists(atPath: fanned))
        #expect(try store.list().map(\.hash) == [hash])
        // No temp file is left behind, and a name that is not a hash reads nothing.
        let names = try FileManager.default.contentsOfDirectory(atPath: (fanned as NSString).deletingLastPathComponent)
        #expect(names == [hash])
        #expect(try store.get("../../etc/passwd") == nil)
        #expect(try store.get(String(repeating: "0", count: 64)) == nil)
    }

    /// An upload's photo is stored from its spooled file (sendfile), never read into memory: the
    /// blob is exactly the part's bytes, wherever in the file the part lies; a second put only
    /// refreshes it; a part that runs past its file fails rather than store less.
    @Test func anUploadIsStoredFromItsFile() throws {
        let store = FileStore(root: TestApp.scratchDirectory("store"))
        let file = (0..<(5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 11) }
        let body = try SpooledBody.holding(file, directory: NSTemporaryDirectory())
        let part = 1_001..<(file.count - 77)
        let hash = SHA256.hex(Array(file[part]))
        #expect(try store.put(BlobFile(body: body, offset: part.lowerBound, count: part.count, hash: hash)) == hash)
        #expect(try store.get(hash) == Array(file[part]))
        #expect(try store.put(BlobFile(body: body, offset: part.lowerBound, count: part.count, hash: hash)) == hash)
        #expect(try store.list().map(\.hash) == [hash])
        let past = BlobFile(body: body, offset: file.count - 10, count: 20, hash: String(repeating: "a", count: 64))
        // The upload's file failing is that upload's failure, never the store's outage.
        let pastError = #expect(throws: PhotoStoreError.self) { try store.put(past) }
        #expect(pastError?.outage == false && pastError?.unavailable == true)
        #expect(try store.get(past.hash) == nil, "nothing is stored for it")
        // A store without files of its own (a test's) is handed the bytes.
        let bytes = try BytesOnly().put(BlobFile(body: body, offset: 0, count: 3, hash: SHA256.hex(Array(file[0..<3]))))
        #expect(bytes == SHA256.hex(Array(file[0..<3])))
    }

    final class BytesOnly: PhotoStore {
        func put(_ bytes: [UInt8]) throws -> String { SHA256.hex(bytes) }
        func refresh(_ hash: String) throws -> Bool { false }
        func get(_ hash: String) throws -> [UInt8]? { nil }
        func list() throws -> [(hash: String, modified: Date)] { [] }
        func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool { false }
    }

    @Test func photosAreServedFromTheStoreWithTheirHashAsETag() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        #expect(try app.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL") == 0)
        for id in album.ids.prefix(5) {
            let image = try browser.get("/photos/\(id)")
            #expect(image.status == 200)
            let hash = SHA256.hex(image.bodyBytes)
            #expect(image.header("ETag") == "\"\(hash)\"")
            #expect(image.header("Cache-Control") == "private, max-age=31536000, immutable")
            let stored: String = try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos WHERE id = $1", [Int64(id)])[0].decode("hash")
            #expect(stored == hash)
            let again = try browser.get("/photos/\(id)", headers: [("If-None-Match", "\"\(hash)\"")])
            #expect(again.status == 304)
            #expect(again.header("ETag") == "\"\(hash)\"")
            #expect(try browser.get("/photos/\(id)", headers: [("If-None-Match", "\"other\"")]).status == 200)
        }
        // Someone else gets nothing, with or without the ETag.
        let other = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        let first = album.ids[0]
        let etag = try #require(try browser.get("/photos/\(first)").header("ETag"))
        #expect(try other.get("/photos/\(first)").status == 404)
        #expect(try other.get("/photos/\(first)", headers: [("If-None-Match", etag)]).status == 404)
    }

    /// Rows from before the store (bytes in the row): served from the row, then moved batch by
    /// batch; a move stopped after one batch is carried on by the next run, and every photo is
    /// served byte-identical throughout.
    @Test func movingBytesIntoTheStoreResumesAfterAStop() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        var original: [Int: [UInt8]] = [:]
        for id in album.ids { original[id] = try browser.get("/photos/\(id)").bodyBytes }
        // Back to the old shape: the bytes in the rows, no hash, an empty store.
        let store = app.app.albums.photos
        for row in try app.pool.query("SELECT id, encode(hash, 'hex') AS hash FROM photos") {
            let hash: String = try row.decode("hash")
            let bytes = try #require(try store.get(hash))
            try app.pool.query("UPDATE photos SET bytes = $2, hash = NULL, byte_size = NULL WHERE id = $1", [try row.decode("id", as: Int64.self), bytes])
        }
        try FileManager.default.removeItem(atPath: (store.base as! FileStore).root)
        for id in album.ids { #expect(try browser.get("/photos/\(id)").bodyBytes == original[id]) }

        // One batch, then the process "dies".
        #expect(try PhotoCollector(pool: app.pool, store: store).moveBytesToStore(batch: 12) == 12)
        #expect(try app.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL") == 18)
        for id in album.ids { #expect(try browser.get("/photos/\(id)").bodyBytes == original[id]) }
        // A new run carries on.
        #expect(try PhotoCollector(pool: app.pool, store: store).moveAllBytesToStore() == 18)
        #expect(try app.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL OR hash IS NULL") == 0)
        for id in album.ids {
            let image = try browser.get("/photos/\(id)")
            #expect(image.bodyBytes == original[id])
            #expect(image.header("ETag") == "\"\(SHA256.hex(original[id]!))\"")
        }
    }

    /// The app itself moves old rows' bytes soon after it starts (and sweeps).
    @Test func theAppMovesOldRowsAtStart() throws {
        let first = try TestApp(workers: true)
        let browser = try first.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        let store = first.app.albums.photos.base as! FileStore
        var original: [Int: [UInt8]] = [:]
        for id in album.ids { original[id] = try browser.get("/photos/\(id)").bodyBytes }
        for row in try first.pool.query("SELECT id, encode(hash, 'hex') AS hash FROM photos") {
            let bytes = try #require(try store.get(try row.decode("hash")))
            try first.pool.query("UPDATE photos SET bytes = $2, hash = NULL, thumb_256 = NULL, thumb_512 = NULL WHERE id = $1",
                                 [try row.decode("id", as: Int64.self), bytes])
        }
        try FileManager.default.removeItem(atPath: store.root)
        let second = try TestApp(workers: true, database: first.pool.url) {
            $0.photoStore = store.root
            $0.photoStoreUpkeepDelay = 0.1
        }
        let moved = eventually(timeout: 20) { (try? second.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL")) == 0 }
        #expect(moved)
        for id in album.ids { #expect(try browser.get("/photos/\(id)").bodyBytes == original[id]) }
        #expect(try store.list().count == second.count("SELECT count(DISTINCT hash) FROM photos"))
    }

    /// After 50 New Collections on one pin only the current album is kept: replaced rows are
    /// deleted and their blobs collected.
    @Test func fiftyNewCollectionsKeepOneAlbum() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        _ = try AlbumTests.settled(browser, pin: pin)
        let store = app.app.albums.photos
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 0)
        let albumBytes = try app.count("SELECT sum(byte_size)::int FROM photos")
        func storeSize() throws -> Int { try store.list().reduce(0) { total, blob in total + (try store.get(blob.hash)?.count ?? 0) } }
        func databaseSize() throws -> Int { try app.count("SELECT pg_total_relation_size('photos')::int") }
        let token = try #require(try browser.get("/").csrfToken)
        // The fixture serves the same ten images every time (stored once); a real provider's next
        // collection has other photos. Each collection's rows are pointed at bytes of their own
        // (the image plus a trailer JPEG readers ignore), as a download of them would store.
        func makeDistinct() throws {
            for row in try app.pool.query("SELECT id, encode(hash, 'hex') AS hash FROM photos") {
                let bytes = try #require(try store.get(try row.decode("hash"))) + Array("\(UUID())".utf8)
                try app.pool.query("UPDATE photos SET hash = decode($2, 'hex') WHERE id = $1", [try row.decode("id", as: Int64.self), try store.put(bytes)])
            }
        }
        try makeDistinct()
        let before = try storeSize() + databaseSize()
        for _ in 0..<50 {
            let started = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)], headers: [("Accept", "application/json")])
            #expect(started.status == 202)
            #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")
            try makeDistinct()
        }
        #expect(try store.list().count > 50 * 30)  // before the sweep: every collection's blobs
        #expect(try app.count("SELECT count(*) FROM photos") == 30)
        try collector.collect(grace: 0)
        let storeBytes = try store.list().reduce(0) { total, blob in total + (try store.get(blob.hash)?.count ?? 0) }
        #expect(storeBytes <= 2 * albumBytes, "store \(storeBytes) bytes, one album \(albumBytes)")
        // Database and store together (the rows of 50 replaced albums included, before any vacuum).
        let growth = try storeSize() + databaseSize() - before
        #expect(growth <= 2 * albumBytes, "grew \(growth) bytes, one album \(albumBytes)")
        print("50 New Collections: one album \(albumBytes) B, store \(storeBytes) B, database + store grew \(growth) B")
        // Nothing the album names was collected.
        for row in try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos") {
            #expect(try store.get(try row.decode("hash")) != nil)
        }
    }

    @Test func theCollectorKeepsYoungAndNamedBlobsAndRemovesTheRest() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        _ = try AlbumTests.settled(browser, pin: pin)
        let store = app.app.albums.photos.base as! FileStore
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 0)
        let orphan = try store.put(Array("not named by any row".utf8))
        // Young: kept however unreferenced.
        #expect(try collector.collect(grace: 3600) == 0)
        #expect(try store.get(orphan) != nil)
        // Old: removed; the album's blobs, just as old, stay.
        try age(store, by: 7200)
        #expect(try collector.collect(grace: 3600) == 1)
        #expect(try store.get(orphan) == nil)
        // Originals and thumbnails: every blob a row names, and nothing else.
        #expect(try store.list().count == app.namedBlobCount())
    }

    /// The race at its narrowest: the sweep has listed an old unnamed blob and read which hashes
    /// rows name; then a download stores the same bytes and its row names them; then the sweep runs.
    @Test func aBlobNamedBetweenTheMarkAndTheSweepIsKept() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        let store = app.app.albums.photos.base as! FileStore
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 0)
        let id: Int64 = try app.pool.query("SELECT id FROM photos ORDER BY id LIMIT 1")[0].decode("id")
        let blob = Array("downloaded again \(UUID())".utf8)
        let stale = try store.put(blob)
        let unrelated = try store.put(Array("nobody's \(UUID())".utf8))
        try age(store, by: 7200)
        let removed = try collector.collect(grace: 3600) {
            let hash = try store.put(blob)
            try app.pool.query("UPDATE photos SET status = 'ready', content_type = 'image/jpeg', hash = decode($2, 'hex') WHERE id = $1", [id, hash])
        }
        // The album's own blobs are as old, but named.
        #expect(removed == 1)
        #expect(try store.get(unrelated) == nil)
        #expect(try store.get(stale) == blob)
    }

    /// The race: a download stores a blob that already exists, old and unnamed (the sweep's
    /// candidate), and a row names it while sweeps run flat out. The row never loses its blob.
    @Test func aSweepNeverRemovesABlobADownloadJustNamed() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        _ = try AlbumTests.settled(browser, pin: pin)
        let store = app.app.albums.photos.base as! FileStore
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 0)
        let ids: [Int64] = try app.pool.query("SELECT id FROM photos ORDER BY id").map { try $0.decode("id") }
        let blobs = (0..<ids.count).map { i in Array("blob \(i) \(UUID())".utf8) }
        for blob in blobs { _ = try store.put(blob) }
        try age(store, by: 7200)

        let done = Atomic<Bool>(false)
        let sweeps = Atomic<Int>(0)
        let sweeper = Thread {
            while !done.load(ordering: .relaxed) {
                _ = try? collector.collect(grace: 60)
                sweeps.add(1, ordering: .relaxed)
            }
        }
        sweeper.start()
        for (id, blob) in zip(ids, blobs) {
            let hash = try store.put(blob)  // as a download does: the blob, then the row
            try app.pool.query("UPDATE photos SET hash = decode($2, 'hex') WHERE id = $1", [id, hash])
            usleep(2_000)
        }
        // At least two sweeps overlapped the puts, however slowly a sweep runs on a busy machine.
        #expect(eventually(timeout: 30) { sweeps.load(ordering: .relaxed) > 1 })
        done.store(true, ordering: .relaxed)
        while !sweeper.isFinished { usleep(10_000) }
        for (id, blob) in zip(ids, blobs) {
            let hash: String = try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos WHERE id = $1", [id])[0].decode("hash")
            #expect(try store.get(hash) == blob, "photo \(id) lost its blob")
        }
    }

    /// A backup dumps the database, then archives the store. A photo deleted between the two is
    /// named by the dump, so its blob — written long ago — must outlive the archive: the wait
    /// counts from when the collector first saw the blob unreferenced, not from its last write.
    @Test func aBlobThatJustLostItsLastRowOutlivesABackup() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        let store = app.app.albums.photos.base as! FileStore
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 2)
        try age(store, by: 7200)
        // The dump ran; then the photos showing one image are deleted, the last rows naming its blob.
        let hash: String = try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos WHERE hash IS NOT NULL ORDER BY id LIMIT 1")[0].decode("hash")
        try app.pool.query("DELETE FROM photos WHERE encode(hash, 'hex') = $1", [hash])
        let stillNamed = try app.count("SELECT count(*) FROM photos WHERE encode(hash, 'hex') = $1 OR encode(thumb_256, 'hex') = $1 OR encode(thumb_512, 'hex') = $1", [hash])
        try #require(stillNamed == 0)
        // Hours old on disk, unreferenced for a moment: kept, so the archive after the dump has it.
        #expect(try collector.collect(grace: 3600) == 0)
        #expect(try store.get(hash) != nil)
        // Once unreferenced for the whole wait, removed (with the deleted photo's thumbnails).
        Thread.sleep(forTimeInterval: 2.1)
        #expect(try collector.collect(grace: 3600) >= 1)
        #expect(try store.get(hash) == nil)
        #expect(try store.list().count == app.namedBlobCount())
    }

    /// A blob that is named again meanwhile starts its wait afresh when it is unreferenced again.
    @Test func aBlobNamedAgainWaitsAfresh() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        let store = app.app.albums.photos.base as! FileStore
        let collector = PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 2)
        let orphan = try store.put(Array("unreferenced \(UUID())".utf8))
        try age(store, by: 7200)
        #expect(try collector.collect(grace: 3600) == 0)
        let id: Int64 = try app.pool.query("SELECT id FROM photos ORDER BY id LIMIT 1")[0].decode("id")
        let previous: String = try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos WHERE id = $1", [id])[0].decode("hash")
        try app.pool.query("UPDATE photos SET hash = decode($2, 'hex') WHERE id = $1", [id, orphan])
        Thread.sleep(forTimeInterval: 2.1)
        #expect(try collector.collect(grace: 3600) == 0)  // named now; the row's old blob only just lost it
        try app.pool.query("UPDATE photos SET hash = decode($2, 'hex') WHERE id = $1", [id, previous])
        #expect(try collector.collect(grace: 3600) == 0)  // unreferenced again, a moment ago
        #expect(try store.get(orphan) != nil)
    }

    /// Sets every blob's last write `seconds` into the past.
    private func age(_ store: FileStore, by seconds: Int) throws {
        var times = [timespec(tv_sec: time(nil) - seconds, tv_nsec: 0), timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)]
        for blob in try store.list() {
            let hash = blob.hash
            let file = store.path(hash).file
            #expect(utimensat(AT_FDCWD, file, &times, 0) == 0)
        }
    }
}

/// Thumbnails: made at download with libjpeg-turbo, stored in the same store, served by ?w=.
@Suite struct ThumbnailTests {
    @Test func albumPhotosHaveThumbnailsServedByWidth() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        // A copy of a width exactly when a decode at three quarters of the photo or less reaches it
        // (n/8 scales: 342 px and wider for 256, 683 px and wider for 512; the fixture's photos are
        // 300–640 px, so their widest get the 256 px copy only and serve themselves for 512).
        #expect(try app.count("SELECT count(*) FROM photos WHERE thumb_256 IS NOT NULL") == app.count("SELECT count(*) FROM photos WHERE width >= 342"))
        #expect(try app.count("SELECT count(*) FROM photos WHERE thumb_512 IS NOT NULL") == app.count("SELECT count(*) FROM photos WHERE width >= 683"))
        let id: Int64 = try app.pool.query("SELECT id FROM photos WHERE thumb_256 IS NOT NULL AND thumb_512 IS NULL ORDER BY width DESC, id LIMIT 1")[0].decode("id")
        let original = try browser.get("/photos/\(id)")
        let originalInfo = try #require(ImageInspector.inspect(original.bodyBytes))
        #expect(originalInfo.width > 512)
        for asked in ["384", "512", "4000"] {
            #expect(try browser.get("/photos/\(id)?w=\(asked)").bodyBytes == original.bodyBytes, "w=\(asked): the original")
        }
        for (asked, served) in [("256", 256), ("200", 256), ("383", 256), ("-5", 256)] {
            let image = try browser.get("/photos/\(id)?w=\(asked)")
            #expect(image.status == 200)
            #expect(image.header("Content-Type") == "image/jpeg")
            let info = try #require(ImageInspector.inspect(image.bodyBytes), "w=\(asked)")
            // The smallest n/8 scale at least that wide: within an eighth of the original above it.
            #expect(info.width >= served && info.width < served + originalInfo.width / 8 + 1, "w=\(asked): \(info.width) px")
            #expect(image.bodyBytes.count < original.bodyBytes.count)
            let etag = try #require(image.header("ETag"))
            #expect(etag == "\"\(SHA256.hex(image.bodyBytes))\"" && etag != original.header("ETag"))
            #expect(try browser.get("/photos/\(id)?w=\(asked)", headers: [("If-None-Match", etag)]).status == 304)
        }
        // Not a number, or out of Int's range: the original.
        for asked in ["abc", "99999999999999999999999", ""] {
            #expect(try browser.get("/photos/\(id)?w=\(asked)").bodyBytes == original.bodyBytes, "w=\(asked)")
        }
        // The collector keeps thumbnails: rows name them.
        #expect(try PhotoCollector(pool: app.pool, store: app.app.albums.photos).collect(grace: 0) == 0)
        #expect(try browser.get("/photos/\(id)?w=256").status == 200)
        // Someone else: 404 for thumbnails too.
        let other = try app.signedUp(email: "bob-\(UUID().uuidString.prefix(6))@example.org", name: "Bob")
        #expect(try other.get("/photos/\(id)?w=256").status == 404)
    }

    @Test func onlyJPEGsWiderThanTheTargetGetThumbnails() throws {
        let photos = TestApp.repositoryRoot + "/Sources/PhotoFixture/Photos/"
        let jpeg = try #require(FileManager.default.contents(atPath: photos + "astronaut.jpg"))
        let info = try #require(ImageInspector.inspect([UInt8](jpeg)))
        let made = Thumbnailer.thumbnails(of: [UInt8](jpeg))
        #expect(Set(made.keys) == Set(Thumbnailer.widths.filter { $0 * 4 <= info.width * 3 }))
        // A 1024 × 768 photo gets both copies, decoded at 2/8 and 4/8; a 640 px one only the first
        // (its 512 copy would be a 7/8 decode, nearly the original).
        for (width, expected) in [(1024, [256: 256, 512: 512]), (640, [256: 320])] {
            let height = width * 3 / 4
            var pixels = [UInt8](repeating: 0, count: width * height * 3)
            for index in pixels.indices { pixels[index] = UInt8((index / 3 % width + index / (3 * width) + index % 3 * 40) & 0xFF) }
            let big = try #require(Thumbnailer.encode(rgb: pixels, width: Int32(width), height: Int32(height), quality: 90))
            let copies = Thumbnailer.thumbnails(of: big)
            #expect(Set(copies.keys) == Set(expected.keys), "\(width) px")
            for (target, copyWidth) in expected {
                let copy = try #require(copies[target])
                #expect(ImageInspector.inspect(copy)?.width == copyWidth, "\(width) px → \(target)")
            }
        }
        #expect(Thumbnailer.thumbnails(of: Array("not an image".utf8)).isEmpty)
        #expect(Thumbnailer.thumbnails(of: [0xFF, 0xD8, 0xFF, 0xE0, 0, 0]).isEmpty)  // a truncated JPEG
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 40)
        #expect(Thumbnailer.thumbnails(of: png).isEmpty)
    }

    /// A photo seen again reuses its thumbnails: the store refreshes their age (as a put would, so
    /// the collector keeps them), a swept one is made again, and the cache stays within its bound.
    @Test func thumbnailsAreMadeOncePerOriginal() throws {
        let store = FileStore(root: NSTemporaryDirectory() + "vt-thumbs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: store.root) }
        let jpeg = [UInt8](try #require(FileManager.default.contents(atPath: TestApp.repositoryRoot + "/Sources/PhotoFixture/Photos/astronaut.jpg")))
        let cache = ThumbnailCache(capacity: 2)
        let original = try store.put(jpeg)
        let first = try cache.thumbnails(of: original, bytes: jpeg, store: store)
        let thumb = try #require(first[256])
        #expect(try store.get(thumb) == Thumbnailer.thumbnails(of: jpeg)[256])
        func modified(_ hash: String) -> Int {
            var info = stat()
            return stat(store.path(hash).file, &info) == 0 ? info.st_mtim.tv_sec : -1
        }
        var old = [timespec(tv_sec: time(nil) - 7200, tv_nsec: 0), timespec(tv_sec: time(nil) - 7200, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, store.path(thumb).file, &old, 0) == 0)
        // Known: the bytes are not even looked at (a non-JPEG would give no thumbnails), the blob
        // is younger again.
        #expect(try cache.thumbnails(of: original, bytes: Array("not an image".utf8), store: store) == first)
        #expect(modified(thumb) > time(nil) - 60)
        // Swept meanwhile: made and stored again.
        #expect(try store.delete(thumb, ifNotModifiedSince: Date().addingTimeInterval(60)))
        #expect(try cache.thumbnails(of: original, bytes: jpeg, store: store) == first)
        #expect(try store.get(thumb) != nil)
        // Bounded: the oldest original is forgotten first.
        cache.remember(String(repeating: "1", count: 64), [:])
        cache.remember(String(repeating: "2", count: 64), [:])
        #expect(cache.count == 2)
        #expect(try cache.thumbnails(of: original, bytes: Array("not an image".utf8), store: store).isEmpty)
    }
}
