import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPClient
import HTTPServer
import Log
import PhotoFixture
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The object store (S3Store) against moto's S3 server with signatures and IAM policies checked
/// (MotoServer): the store alone, albums filling from it, a bucket that refuses writes, an
/// endpoint that goes away mid-album, and the collector with its races.
///
/// S3 keeps LastModified and cannot be told to backdate it, so "old" here means written a few
/// seconds ago and collected with a grace period of one second.
@Suite(.serialized, .tags(.fault)) struct S3StoreTests {
    static func moto() throws -> MotoServer { try MotoServer.shared.get() }

    /// An app on a fresh bucket with one finished album: the app, its S3Store and a collector over it.
    static func finishedAlbumOnS3() throws -> (app: TestApp, store: S3Store, collector: PhotoCollector) {
        let s3 = try moto().store()
        let app = try TestApp(workers: true) { $0.s3 = s3.settings }
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        let store = try #require(app.app.albums.photos.base as? S3Store)
        return (app, store, PhotoCollector(pool: app.pool, store: store, unreferencedGrace: 0))
    }

    /// Blobs old enough for `collect(grace: 1)` (Last-Modified has whole seconds; the store
    /// counts a blob a second younger than it reads).
    static func letBlobsAge() { usleep(3_200_000) }

    @Test func s3SettingsAreCheckedAtStart() throws {
        let ok = try S3Settings.parse(store: "s3://photos-bucket/vt/prod", endpoint: "http://127.0.0.1:9000/", region: nil,
                                      accessKeyID: "AK", secretAccessKey: "SK")
        #expect(ok == S3Settings(endpoint: "http://127.0.0.1:9000", bucket: "photos-bucket", prefix: "vt/prod", region: "us-east-1",
                                 accessKeyID: "AK", secretAccessKey: "SK"))
        let aws = try S3Settings.parse(store: "s3://photos-bucket", endpoint: nil, region: "eu-west-1", accessKeyID: "AK", secretAccessKey: "SK")
        #expect(aws.endpoint == "https://s3.eu-west-1.amazonaws.com" && aws.prefix == "")
        func refusal(_ store: String, endpoint: String? = "http://127.0.0.1:9000", key: String? = "AK", secret: String? = "SK") -> String {
            do {
                _ = try S3Settings.parse(store: store, endpoint: endpoint, region: nil, accessKeyID: key, secretAccessKey: secret)
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(refusal("s3://photos", key: nil).contains("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY"))
        #expect(refusal("s3://photos", secret: "").contains("S3_SECRET_ACCESS_KEY"))
        #expect(refusal("s3://photos", endpoint: "ftp://127.0.0.1").contains("S3_ENDPOINT must be an http:// or https://"))
        #expect(refusal("s3://photos", endpoint: "http://127.0.0.1:9000/bucket").contains("without a path"))
        #expect(refusal("s3://").contains("bucket name"))
        #expect(refusal("s3://Photos_Bucket").contains("bucket name"))
        #expect(refusal("s3://photos/a?b").contains("prefix"))
    }

    /// The binary refuses an s3:// store it could not use, before it touches anything.
    @Test(arguments: [
        (["PHOTO_STORE": "s3://photos"], "needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY"),
        (["PHOTO_STORE": "s3://photos", "S3_ACCESS_KEY_ID": "AK", "S3_SECRET_ACCESS_KEY": "SK", "S3_ENDPOINT": "ftp://minio:9000"],
         "S3_ENDPOINT must be an http:// or https:// address"),
        (["PHOTO_STORE": "gs://photos"], "PHOTO_STORE must be a directory or s3://bucket[/prefix]"),
    ])
    func s3BadSettingsStopTheBinaryWithAClearMessage(environment: [String: String], message: String) throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessTests.binary)
        process.arguments = ["migrate"]
        // Only these settings (and the AWS_* fallbacks unset): nothing from the test's environment.
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 2)
        #expect(output.contains(message), "\(output.prefix(300))")
    }

    @Test func s3StoreRoundTrip() throws {
        let store = try Self.moto().store()
        store.pageSize = 2  // five blobs: three pages, two continuation tokens
        let blobs = (0..<5).map { Array("blob \($0) \(UUID())".utf8) }
        let hashes = try blobs.map { try store.put($0) }
        #expect(hashes == blobs.map { SHA256.hex($0) })
        for (hash, blob) in zip(hashes, blobs) { #expect(try store.get(hash) == blob) }
        #expect(try store.get(String(repeating: "0", count: 64)) == nil)
        #expect(try store.get("../../etc/passwd") == nil)
        // An upload's photo goes from its spooled file, read by libcurl as it sends: 6 MB from an
        // offset; a part that runs past its file is refused, nothing stored.
        let file = (0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 13) }
        let body = try SpooledBody.holding(file, directory: NSTemporaryDirectory())
        let part = 333..<file.count
        let partHash = SHA256.hex(Array(file[part]))
        #expect(try store.put(BlobFile(body: body, offset: part.lowerBound, count: part.count, hash: partHash)) == partHash)
        #expect(try store.get(partHash) == Array(file[part]))
        let past = BlobFile(body: body, offset: file.count - 10, count: 20, hash: String(repeating: "b", count: 64))
        let pastError = #expect(throws: PhotoStoreError.self) { try store.put(past) }
        #expect(pastError?.outage == false, "the upload's file failing is not the store's outage")
        #expect(try store.get(past.hash) == nil)
        #expect(try store.delete(partHash, ifNotModifiedSince: Date().addingTimeInterval(60)))
        // Whatever else is in the bucket is not a blob: other names under the prefix, other prefixes.
        #expect(try store.send("PUT", key: "photos/notes.txt", body: Array("x".utf8)).status == 200)
        #expect(try store.send("PUT", key: "photos-old/\(hashes[0])", body: Array("y".utf8)).status == 200)
        #expect(try store.send("PUT", key: "photos/\(hashes[0].uppercased())", body: Array("z".utf8)).status == 200)
        let listed = try store.list()
        #expect(listed.map(\.hash).sorted() == hashes.sorted())
        #expect(listed.allSatisfy { abs($0.modified.timeIntervalSinceNow) < 60 })

        // A put of stored bytes moves LastModified on (the collector's grace counts from it).
        Self.letBlobsAge()
        let before = try #require(listed.first { $0.hash == hashes[0] }?.modified)
        let refreshedAt = Date()
        #expect(try store.put(blobs[0]) == hashes[0])
        let after = try #require(try store.list().first { $0.hash == hashes[0] }?.modified)
        #expect(after.timeIntervalSince(before) >= 3)
        #expect(try store.get(hashes[0]) == blobs[0])

        // delete: only when older than the cutoff, then gone.
        // (The cutoff is when the refresh began, not now: a slow moto must not age the refresh.)
        #expect(try store.delete(hashes[0], ifNotModifiedSince: refreshedAt) == false)  // just refreshed
        #expect(try store.delete(hashes[1], ifNotModifiedSince: refreshedAt) == true)
        #expect(try store.get(hashes[1]) == nil)
        #expect(try store.delete(hashes[1], ifNotModifiedSince: Date()) == false)
        #expect(try store.list().count == 4)
        #expect(store.problem() == nil)

        // For docs/performance.md, "PhotoStore" (printed, not asserted): a fresh put (HEAD + PUT),
        // a put of stored bytes (HEAD + lock + CopyObject), a get, of an album-sized image against
        // moto (mean of 10).
        let image = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) } + Array(UUID().uuidString.utf8)
        func millis(_ body: () throws -> Void) rethrows -> Double {
            let start = Date()
            for _ in 0..<10 { try body() }
            return Date().timeIntervalSince(start) * 100
        }
        var n = 0
        let fresh = try millis { n += 1; _ = try store.put(image + [UInt8(n)]) }
        let again = try millis { _ = try store.put(image) }
        let read = try millis { _ = try store.get(SHA256.hex(image)) }
        print(String(format: "S3 (moto) 200 KB: put new %.1f ms, put stored %.1f ms, get %.1f ms", fresh, again, read))
    }

    /// moto checks signatures (INITIAL_NO_AUTH_ACTION_COUNT): a wrong secret, an unknown key and a
    /// missing bucket each fail with S3's code and the setting to look at.
    @Test func s3WrongCredentialsAndMissingBucketsFailClearly() throws {
        let moto = try Self.moto()
        let good = try moto.store()
        func failure(_ settings: S3Settings) -> String {
            let store = S3Store(settings: settings, locks: nil)
            do { _ = try store.put(Array("a photo \(UUID())".utf8)); return "stored" } catch { return "\(error)" }
        }
        var wrongSecret = good.settings
        wrongSecret.secretAccessKey = "not-the-secret"
        let signature = failure(wrongSecret)
        #expect(signature.contains("HTTP 403") && signature.contains("SignatureDoesNotMatch") && signature.contains("S3_SECRET_ACCESS_KEY"), "\(signature)")
        var unknownKey = good.settings
        unknownKey.accessKeyID = "AKIANOSUCHKEY0000000"
        let key = failure(unknownKey)
        #expect(key.contains("InvalidAccessKeyId") && key.contains("S3_ACCESS_KEY_ID"), "\(key)")
        var missing = good.settings
        missing.bucket = "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())"
        let bucket = failure(missing)
        #expect(bucket.contains("NoSuchBucket") && bucket.contains(missing.bucket), "\(bucket)")
        #expect(throws: PhotoStoreError.self) { try S3Store(settings: missing, locks: nil).get(String(repeating: "a", count: 64)) }
        #expect(S3Store(settings: wrongSecret, locks: nil).problem()?.contains("403") == true)
        #expect(S3Store(settings: missing, locks: nil).problem()?.contains("does not exist") == true)
        #expect(good.problem() == nil)
    }

    /// PHOTO_PROVIDER=fixture, PHOTO_STORE=s3://…: the album fills, and every photo and thumbnail
    /// is served byte-identical from the bucket.
    @Test func s3AnAlbumFillsAndShowsFromTheObjectStore() throws {
        let store = try Self.moto().store()
        let app = try TestApp(workers: true) { $0.s3 = store.settings }
        #expect(app.app.albums.photos.base is S3Store)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        let fixturePhotos = Set(try Self.fixtureFiles().map { SHA256.hex($0) })
        for id in album.ids {
            let image = try browser.get("/photos/\(id)")
            #expect(image.status == 200)
            let hash = SHA256.hex(image.bodyBytes)
            #expect(fixturePhotos.contains(hash), "photo \(id) is not one of the fixture's images")
            #expect(try store.get(hash) == image.bodyBytes)
            #expect(image.header("ETag") == "\"\(hash)\"")
            let row = try app.pool.query("SELECT encode(hash, 'hex') AS hash, encode(thumb_256, 'hex') AS thumb_256 FROM photos WHERE id = $1", [Int64(id)])[0]
            #expect(try row.decode("hash", as: String.self) == hash)
            if let thumb = try row.decode("thumb_256", as: String?.self) {
                let small = try browser.get("/photos/\(id)?w=256")
                #expect(small.status == 200 && SHA256.hex(small.bodyBytes) == thumb)
                #expect(try store.get(thumb) == small.bodyBytes)
            }
        }
        #expect(try store.list().count == app.namedBlobCount())
    }

    /// Own photos in the object store: the original and every version put there before the row
    /// names them, served from it (the original byte for byte to who added it), kept by the
    /// collector while named and removed once the photo is.
    @Test func s3OwnPhotosAreStoredServedAndCollected() throws {
        let store = try Self.moto().store()
        let app = try TestApp { $0.s3 = store.settings }
        let s3 = try #require(app.app.albums.photos.base as? S3Store)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        let photo = try OwnPhotoTests.taggedPhoto()
        let added = try OwnPhotoTests.send(browser, pin: pin, photo, name: "s3.jpg", token: token)
        #expect(added.status == 201, "\(added)")
        let id = try #require(try OwnPhotoTests.json(added)["id"] as? Int)
        let row = try app.pool.query("""
            SELECT encode(original, 'hex') AS o, encode(display, 'hex') AS d, encode(thumb_256, 'hex') AS t FROM own_photos WHERE id = $1
            """, [Int64(id)])[0]
        let hashes: [String] = try ["o", "d", "t"].map { try row.decode($0) }
        #expect(try s3.get(hashes[0]) == photo, "the original, byte for byte, in the bucket")
        #expect(try hashes.allSatisfy { try s3.get($0) != nil })
        #expect(try browser.get("/own-photos/\(id)?original=1").bodyBytes == photo)
        let display = try browser.get("/own-photos/\(id)")
        #expect(display.status == 200 && SHA256.hex(display.bodyBytes) == hashes[1])
        #expect(try browser.get("/own-photos/\(id)?w=256").status == 200)
        Self.letBlobsAge()
        _ = try PhotoCollector(pool: app.pool, store: s3, unreferencedGrace: 0).collect(grace: 1)
        #expect(try hashes.allSatisfy { try s3.get($0) != nil }, "named: kept")
        #expect(try browser.post("/own-photos/\(id)/delete", form: [("_csrf", token)]).status == 303)
        _ = try PhotoCollector(pool: app.pool, store: s3, unreferencedGrace: 0).collect(grace: 1)
        #expect(try hashes.allSatisfy { try s3.get($0) == nil }, "removed: collected")
    }

    /// A bucket whose policy refuses some writes (PutObject denied for keys whose hash starts with
    /// 0–3): those photos fail with the reason in the log, the rest are stored, the album completes.
    @Test func s3ARefusedWriteFailsThatPhotoWithALoggedReasonAndTheAlbumCompletes() throws {
        let moto = try Self.moto()
        let store = try moto.store(credentials: moto.picky)
        // Which fixture images the policy refuses (the original or a thumbnail): some, not all.
        func refused(_ bytes: [UInt8]) -> Bool {
            ([bytes] + Thumbnailer.thumbnails(of: bytes).values).contains { MotoServer.refusedHashStarts.contains(SHA256.hex($0).first!) }
        }
        let files = try Self.fixtureFiles()
        let refusedFiles = files.filter(refused).count
        try #require(refusedFiles > 0 && refusedFiles < files.count, "the policy must refuse some fixture images, not all (\(refusedFiles))")

        let lines = Mutex<[String]>([])
        let stopObserving = Logger.observe { line in if line.contains(store.settings.bucket) { lines.withLock { $0.append(line) } } }
        defer { stopObserving() }
        let app = try TestApp(workers: true) { $0.s3 = store.settings }
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        #expect(album.count("pending") == 0)
        let failed = album.count("failed"), ready = album.count("ready")
        #expect(failed > 0 && ready > 0 && failed + ready == 30, "\(failed) failed, \(ready) ready")
        // Every stored photo is whole and served; none of them is one the policy refuses.
        for row in try app.pool.query("SELECT id, encode(hash, 'hex') AS hash FROM photos WHERE status = 'ready'") {
            let id: Int64 = try row.decode("id")
            let image = try browser.get("/photos/\(id)")
            let hash: String = try row.decode("hash")
            #expect(image.status == 200 && SHA256.hex(image.bodyBytes) == hash)
            #expect(!refused(image.bodyBytes))
        }
        // Each failed photo: a log line naming it and S3's reason.
        let logged = lines.withLock { $0 }
        for row in try app.pool.query("SELECT id, remote_url FROM photos WHERE status = 'failed'") {
            let id: Int64 = try row.decode("id"), url: String = try row.decode("remote_url")
            #expect(logged.contains { $0.contains("photo \(url) not stored") && $0.contains("HTTP 403 AccessDenied") },
                    "no logged reason for photo \(id) (\(url)): \(logged.prefix(3))")
        }
    }

    /// The object store goes away mid-album for 60 s (the workers' store backoff and the store
    /// breaker's cool-down capped at 6 s through the settings, 60 s and 30 s in production, so recovery is seen within seconds): the photos still to come stay pending, the
    /// album says it waits, /readyz stays ready and names the store as degraded (pages need no
    /// store), the log says so once, the server keeps answering (a stored photo is a quick 503
    /// with Retry-After); once the store is back the album completes by itself. moto keeps nothing across a restart, so the harness creates the bucket again (the
    /// blobs stored before the stop are gone with moto's memory; a real store keeps them).
    @Test func s3TheEndpointGoesAwayMidAlbumAndTheAlbumWaitsForIt() throws {
        // A server of its own (this one is stopped), without signature checks: a restarted moto
        // keeps no state, so the same keys would not exist any more.
        let moto = try MotoServer(authenticated: false)
        let store = try moto.store()
        var options = PhotoFixture.Options()
        options.imageStagger = 0.15  // 30 images over 4.5 s
        let lines = Mutex<[String]>([])
        let stopObserving = Logger.observe { line in if line.contains("photo store") { lines.withLock { $0.append(line) } } }
        defer { stopObserving() }
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.s3 = store.settings
            settings.workers.storeBackoffFirst = 0.1
            settings.workers.storeBackoffMax = 6
            settings.photoStoreMaxCoolDown = 6
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let someStored = eventually(timeout: 20) { ((try? AlbumTests.state(browser, pin: pin))?.count("ready") ?? 0) >= 3 }
        try #require(someStored)
        moto.stop()
        let stopped = Date()
        usleep(6_000_000)
        let during = try AlbumTests.state(browser, pin: pin)
        let page = try browser.get("/pins/\(pin)").body
        let readyz = try browser.get("/readyz")
        // The rest of the app carries on; a photo from the store is a prompt 503, not a hang.
        #expect(try browser.get("/").status == 200)
        #expect(try browser.get("/healthz").status == 200)
        let readyID = try #require(during.photos.first { $0["status"] as? String == "ready" }?["id"] as? Int)
        let asked = Date()
        let unavailable = try browser.get("/photos/\(readyID)")
        #expect(unavailable.status == 503 && Int(unavailable.header("Retry-After") ?? "") ?? 0 >= 1)
        #expect(Date().timeIntervalSince(asked) < 5)
        // A minute down, as a store's restart or failover takes; the app keeps trying meanwhile.
        let downFor = 60 - Date().timeIntervalSince(stopped)
        if downFor > 0 { usleep(UInt32(downFor * 1_000_000)) }

        try moto.start(authenticated: false)
        try store.createBucket()
        let restarted = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        let recovered = Date().timeIntervalSince(restarted)
        let logged = lines.withLock { $0 }
        // Those naming this test's bucket: other suites' stores fail in the same process meanwhile.
        let outageLines = logged.filter { $0.contains("the photo store is unavailable") && $0.contains(store.settings.bucket) }.count
        print("""
            object store stopped \(String(format: "%.1f", restarted.timeIntervalSince(stopped))) s mid-album: meanwhile \(during.status), \
            \(during.count("ready")) ready, \(during.count("pending")) pending, \(during.count("failed")) failed; /readyz \(readyz.status); \
            after the restart \(album.status) with \(album.count("ready")) ready, \(album.count("failed")) failed, \
            \(album.count("pending")) pending, \(String(format: "%.1f", recovered)) s later; outage logged \(outageLines) time(s)
            """)
        #expect(during.status == "downloading")
        #expect(during.count("failed") == 0 && during.count("pending") > 0)
        #expect(page.contains("Photos cannot be saved right now; trying again at "))
        #expect(readyz.status == 200 && readyz.body.contains("degraded") && readyz.body.contains("photo store s3://\(store.settings.bucket)"),
                "\(readyz.body)")
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30 && album.count("failed") == 0 && album.count("pending") == 0)
        #expect(outageLines == 1)
        #expect(logged.contains { $0.contains("the photo store is back after") })
        #expect(eventually(timeout: 10) { (try? browser.get("/readyz").body) == "ready" })
        // Photos stored after the restart are served from the store.
        let after = try app.pool.query("SELECT id FROM photos WHERE pin_id = $1 AND status = 'ready' ORDER BY id DESC LIMIT 3", [Int64(pin)])
        for row in after { #expect(try browser.get("/photos/\(try row.decode("id", as: Int64.self))").status == 200) }
    }

    /// The collector over S3: young blobs and named blobs stay, old unnamed ones go.
    @Test func s3TheCollectorRemovesOnlyUnnamedOldBlobs() throws {
        let (app, store, collector) = try Self.finishedAlbumOnS3()
        let orphan = try store.put(Array("not named by any row \(UUID())".utf8))
        #expect(try collector.collect(grace: 3600) == 0)
        #expect(try store.get(orphan) != nil)
        Self.letBlobsAge()
        #expect(try collector.collect(grace: 1) == 1)
        #expect(try store.get(orphan) == nil)
        #expect(try store.list().count == app.namedBlobCount())
        for row in try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos") { #expect(try store.get(try row.decode("hash")) != nil) }
    }

    /// PhotoStoreTests' narrowest race, over S3: a put and a row naming the blob between the mark
    /// and the sweep; the blob stays.
    @Test func s3ABlobNamedBetweenTheMarkAndTheSweepIsKept() throws {
        let (app, store, collector) = try Self.finishedAlbumOnS3()
        let id: Int64 = try app.pool.query("SELECT id FROM photos ORDER BY id LIMIT 1")[0].decode("id")
        let blob = Array("downloaded again \(UUID())".utf8)
        let stale = try store.put(blob)
        let unrelated = try store.put(Array("nobody's \(UUID())".utf8))
        Self.letBlobsAge()
        let removed = try collector.collect(grace: 1) {
            let hash = try store.put(blob)
            try app.pool.query("UPDATE photos SET status = 'ready', content_type = 'image/jpeg', hash = decode($2, 'hex') WHERE id = $1", [id, hash])
        }
        #expect(removed == 1)
        #expect(try store.get(unrelated) == nil)
        #expect(try store.get(stale) == blob)
    }

    /// PhotoStoreTests' loop race, over S3 with the advisory locks: downloads store old, unnamed
    /// blobs again and rows name them while sweeps run flat out; no row loses its blob.
    @Test func s3ASweepNeverRemovesABlobADownloadJustNamed() throws {
        let (app, store, collector) = try Self.finishedAlbumOnS3()
        let ids: [Int64] = try app.pool.query("SELECT id FROM photos ORDER BY id").map { try $0.decode("id") }
        let blobs = (0..<ids.count).map { i in Array("blob \(i) \(UUID())".utf8) }
        for blob in blobs { _ = try store.put(blob) }
        Self.letBlobsAge()

        let done = Atomic<Bool>(false)
        let sweeps = Atomic<Int>(0)
        let removed = Atomic<Int>(0)
        let sweeper = Thread {
            while !done.load(ordering: .relaxed) {
                if let n = try? collector.collect(grace: 1) { removed.add(n, ordering: .relaxed) }
                sweeps.add(1, ordering: .relaxed)
            }
        }
        sweeper.start()
        for (id, blob) in zip(ids, blobs) {
            let hash = try store.put(blob)  // as a download does: the blob, then the row
            try app.pool.query("UPDATE photos SET hash = decode($2, 'hex') WHERE id = $1", [id, hash])
            usleep(20_000)
        }
        done.store(true, ordering: .relaxed)
        while !sweeper.isFinished { usleep(10_000) }
        #expect(sweeps.load(ordering: .relaxed) > 1)
        print("S3 sweep race: \(sweeps.load(ordering: .relaxed)) sweeps removed \(removed.load(ordering: .relaxed)) blobs")
        for (id, blob) in zip(ids, blobs) {
            let hash: String = try app.pool.query("SELECT encode(hash, 'hex') AS hash FROM photos WHERE id = $1", [id])[0].decode("hash")
            #expect(try store.get(hash) == blob, "photo \(id) lost its blob")
        }
    }

    /// ListObjectsV2 answers are untrusted: only `prefix/` + 64 lowercase hex keys count, entities
    /// are decoded, and what is not a listing, or a page past the bounds, is an error.
    @Test func s3ListingsAreReadWithBounds() throws {
        let hash = String(repeating: "ab", count: 32)
        let body = """
            <?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>true</IsTruncated>
            <NextContinuationToken>1/a+b=&amp;c</NextContinuationToken>
            <Contents><Key>p/\(hash)</Key><LastModified>2026-11-24T21:17:56.000Z</LastModified></Contents>
            <Contents><Key>p/a&amp;b&lt;\(hash)</Key><LastModified>2026-11-24T21:17:56.000Z</LastModified></Contents>
            <Contents><Key>p/\(hash)</Key><LastModified>yesterday</LastModified></Contents>
            <Contents><Key>\(String(repeating: "k", count: 5000))</Key><LastModified>2026-11-24T21:17:56Z</LastModified></Contents>
            </ListBucketResult>
            """
        let page = try S3ListPage(parsing: Array(body.utf8))
        #expect(page.truncated && page.nextToken == "1/a+b=&c")
        #expect(page.objects.map(\.key) == ["p/\(hash)", "p/a&b<\(hash)"])
        #expect(page.objects[0].modified == Date(timeIntervalSince1970: 1_795_555_076))
        #expect(throws: PhotoStoreError.self) { try S3ListPage(parsing: Array("<Error><Code>AccessDenied</Code></Error>".utf8)) }
        let flood = "<ListBucketResult>" + String(repeating: "<Contents><Key>k</Key><LastModified>2026-01-01T00:00:00Z</LastModified></Contents>", count: 10_001)
        #expect(throws: PhotoStoreError.self) { try S3ListPage(parsing: Array(flood.utf8)) }
        #expect(S3Store.encode("a/b c=d~e_f.g-h") == "a%2Fb%20c%3Dd~e_f.g-h")
    }

    /// Against a loopback server playing S3: a 503 SlowDown is retried (twice at most), a 403 is
    /// not, and a listing that repeats its continuation token ends with an error, not a loop.
    @Test func s3TransientFailuresAreRetriedAndListingsCannotLoop() throws {
        let answers = Mutex<[Int]>([])
        let requests = Mutex(0)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.accessLog = nil
        let server = HTTPServer(configuration: configuration, handler: ClosureHandler { request in
            requests.withLock { $0 += 1 }
            if request.target.contains("list-type=2") {
                return HTTPResponse(status: .ok, body: Array("""
                    <ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>same</NextContinuationToken></ListBucketResult>
                    """.utf8))
            }
            let status = answers.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
            let error = "<Error><Code>\(status == 503 ? "SlowDown" : "AccessDenied")</Code><Message>no</Message></Error>"
            return HTTPResponse(status: HTTPStatus(status), body: status == 200 ? Array("stored".utf8) : Array(error.utf8))
        })
        try server.start()
        defer { server.shutdown(gracePeriod: 1) }
        let store = S3Store(settings: S3Settings(endpoint: "http://127.0.0.1:\(server.port)", bucket: "fake", prefix: "p",
                                                 accessKeyID: "AK", secretAccessKey: "SK"), locks: nil)
        store.retryDelays = [0.01, 0.01]
        let hash = String(repeating: "0", count: 64)
        answers.withLock { $0 = [503, 503] }
        #expect(try store.get(hash) == Array("stored".utf8))
        #expect(requests.withLock { $0 } == 3)
        answers.withLock { $0 = [503, 503, 503] }
        #expect(throws: PhotoStoreError.self) { try store.get(hash) }
        #expect(requests.withLock { $0 } == 6)
        answers.withLock { $0 = [403] }
        #expect(throws: PhotoStoreError.self) { try store.get(hash) }
        #expect(requests.withLock { $0 } == 7)
        do { _ = try store.list(); Issue.record("a repeating listing was accepted") } catch {
            #expect("\(error)".contains("without a new continuation token"))
        }
    }

    /// A store that writes NextContinuationToken after the <Contents> entries, as Ceph RGW up to
    /// Reef does (about 280 KB in for a page of 1,000 keys), played by a loopback server holding
    /// 3,000 blobs no row names: the listing reads all three pages and the collector removes all
    /// 3,000. Read from the first 64 KB, the first page had no token and the collector stopped.
    @Test func s3ListingWithTheTokenAfterTheContentsReadsEveryPage() throws {
        let blobs = Mutex(Set((0..<3000).map { SHA256.hex(Array("blob \($0)".utf8)) }))
        let pages = Mutex(0)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.accessLog = nil
        let server = HTTPServer(configuration: configuration, handler: ClosureHandler { request in
            if request.method == "GET", request.queryValue("list-type") == "2" {
                pages.withLock { $0 += 1 }
                let keys = blobs.withLock { $0.sorted() }
                let after = request.queryValue("continuation-token").flatMap { Int($0.dropFirst("after-".count)) } ?? 0
                let page = keys.dropFirst(after).prefix(1000)
                let truncated = after + page.count < keys.count
                var xml = """
                    <?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">\
                    <Name>ceph</Name><Prefix>p</Prefix><MaxKeys>1000</MaxKeys><IsTruncated>\(truncated)</IsTruncated>
                    """
                for key in page {
                    xml += """
                        <Contents><Key>p/\(key)</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>\
                        <ETag>&quot;\(key.prefix(32))&quot;</ETag><Size>48213</Size><StorageClass>STANDARD</StorageClass>\
                        <Owner><ID>virtual-tourist</ID><DisplayName>Virtual Tourist</DisplayName></Owner><Type>Normal</Type></Contents>
                        """
                }
                if truncated { xml += "<NextContinuationToken>after-\(after + page.count)</NextContinuationToken>" }
                xml += "<KeyCount>\(page.count)</KeyCount></ListBucketResult>"
                return HTTPResponse(status: .ok, headers: ["Content-Type": "application/xml"], body: Array(xml.utf8))
            }
            let hash = String(request.path.split(separator: "/").last ?? "")
            guard blobs.withLock({ $0.contains(hash) }) else { return HTTPResponse(status: .notFound) }
            if request.method == "DELETE" {
                blobs.withLock { _ = $0.remove(hash) }
                return HTTPResponse(status: HTTPStatus(204))
            }
            return HTTPResponse(status: .ok, headers: ["Last-Modified": "Thu, 01 Jan 2026 00:00:00 GMT"])
        })
        try server.start()
        defer { server.shutdown(gracePeriod: 1) }
        let store = S3Store(settings: S3Settings(endpoint: "http://127.0.0.1:\(server.port)", bucket: "ceph", prefix: "p",
                                                 accessKeyID: "AK", secretAccessKey: "SK"), locks: nil)
        let listed = try store.list()
        let firstPages = pages.withLock { $0 }
        let pool = PostgresPool(url: try TestDatabase.migrated("ceph"), maxConnections: 2)
        defer { pool.close() }
        let removed = try PhotoCollector(pool: pool, store: store, unreferencedGrace: 0).collect(grace: 60)
        let left = blobs.withLock { $0.count }
        print("listing with the token after the contents: \(listed.count) blobs in \(firstPages) pages; the collector removed \(removed), \(left) left")
        #expect(listed.count == 3000 && Set(listed.map(\.hash)).count == 3000)
        #expect(firstPages == 3)
        #expect(removed == 3000 && left == 0)
    }

    static func fixtureFiles() throws -> [[UInt8]] {
        let directory = TestApp.repositoryRoot + "/Sources/PhotoFixture/Photos"
        return try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".jpg") }.sorted().map {
            [UInt8](try #require(FileManager.default.contents(atPath: directory + "/" + $0)))
        }
    }
}
