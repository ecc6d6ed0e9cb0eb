import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import PhotoFixture
import TestSupport
import AlbumWing
@testable import Domain
@testable import Imaging
@testable import VirtualTourist

/// People's own photos over loopback on a real database: added to an album, served without their
/// location to everyone but who may download the original, kept out of New Collection's way,
/// counted against the quota, removed by who may, and their blobs kept by the collector.
@Suite(.serialized) struct OwnPhotoTests {
    static let paris = (lat: 48.858_37, lon: 2.294_48)

    /// A real photo with a position, a time with its offset, a camera and an XMP location.
    static func taggedPhoto(comment: String = "") throws -> [UInt8] {
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))
        return try ExifTool.writing([
            "-GPSLatitude=\(paris.lat)", "-GPSLatitudeRef=N", "-GPSLongitude=\(paris.lon)", "-GPSLongitudeRef=E",
            "-XMP-exif:GPSLatitude=\(paris.lat)", "-XMP-exif:GPSLongitude=\(paris.lon)",
            "-DateTimeOriginal=2024:05:03 14:22:10", "-OffsetTimeOriginal=+02:00", "-Make=Apple", "-Model=iPhone 12 mini",
        ] + (comment.isEmpty ? [] : ["-Comment=\(comment)"]), to: jpeg)
    }

    /// As own-photos.js sends a file: the bytes as the body, the name percent-encoded.
    static func send(_ browser: Browser, pin: Int, _ bytes: [UInt8], name: String, token: String) throws -> Browser.Page {
        try browser.request("POST", "/pins/\(pin)/own-photos", body: bytes, headers: [
            ("X-CSRF-Token", token), ("Accept", "application/json"), ("Content-Type", "image/jpeg"),
            ("X-File-Name", name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name),
        ])
    }

    static func json(_ page: Browser.Page) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any], "\(page)")
    }

    static func ownIDs(_ page: Browser.Page) -> [Int] {
        page.body.matches(of: /<li class="photo own" data-id="([0-9]+)">/).map { Int($0.1)! }
    }

    @Test func anAddedPhotoIsShownWithoutItsLocationAndTheOriginalOnlyToWhoMayDownloadIt() throws {
        let app = try TestApp()
        let (owner, viewer, pin) = try AlbumEraTests.clubWithAViewer(app)
        let page = try owner.get("/pins/\(pin)")
        #expect(page.body.contains("Add your photos here") && page.body.contains("enctype=\"multipart/form-data\""))
        #expect(page.body.contains("/js/own-photos.js"))
        let token = try #require(page.csrfToken)
        let photo = try Self.taggedPhoto()

        let added = try Self.send(owner, pin: pin, photo, name: "IMG_0042 <b>.JPG", token: token)
        #expect(added.status == 201, "\(added)")
        let answer = try Self.json(added)
        #expect(answer["added"] as? Bool == true && answer["message"] as? String == "IMG_0042 <b>.JPG added.")
        let id = try #require(answer["id"] as? Int)
        #expect((answer["figure"] as? String)?.contains("IMG_0042 &lt;b&gt;.JPG") == true)

        // The row: the file's tags, kept; its place was chosen by the person (this pin).
        let row = try #require(try app.pool.query("""
            SELECT lat, lon, to_char(taken_local, 'YYYY-MM-DD HH24:MI:SS') AS taken, taken_offset, camera, placed, format, original_bytes
            FROM own_photos WHERE id = $1
            """, [Int64(id)]).first)
        let lat: Double = try row.decode("lat"), lon: Double = try row.decode("lon")
        #expect(abs(lat - Self.paris.lat) < 1e-6 && abs(lon - Self.paris.lon) < 1e-6)
        let taken: String = try row.decode("taken"), offset: Int = try row.decode("taken_offset")
        #expect(taken == "2024-05-03 14:22:10" && offset == 120)
        let camera: String = try row.decode("camera"), placed: String = try row.decode("placed")
        #expect(camera == "Apple iPhone 12 mini" && placed == "person")
        let format: String = try row.decode("format"), size: Int64 = try row.decode("original_bytes")
        #expect(format == "jpeg" && size == Int64(photo.count))

        // Both members see it, with who added it and when it was taken; the viewer cannot add.
        for browser in [owner, viewer] {
            let album = try browser.get("/pins/\(pin)")
            #expect(Self.ownIDs(album) == [id])
            #expect(album.body.contains("Members’ photos") && album.body.contains("Olga · 3 May 2024, 14:22"))
        }
        #expect(!(try viewer.get("/pins/\(pin)")).body.contains("Add your photos here"))
        let viewerToken = try #require(try viewer.get("/pins/\(pin)").csrfToken)
        let refused = try Self.send(viewer, pin: pin, photo, name: "mine.jpg", token: viewerToken)
        #expect(refused.status == 403, "\(refused)")

        // Every version the viewer gets: no GPS, no XMP, no EXIF at all, as exiftool reads them.
        for path in ["/own-photos/\(id)", "/own-photos/\(id)?w=256", "/own-photos/\(id)?w=512"] {
            let served = try viewer.get(path)
            #expect(served.status == 200 && served.header("Content-Type") == "image/jpeg", "\(path): \(served.status)")
            #expect(served.header("X-Content-Type-Options") == "nosniff")
            let tags = try ExifTool.tags(of: served.bodyBytes)
            let leaked = tags.keys.filter { $0.contains("GPS") || $0.hasPrefix("XMP") || $0.hasPrefix("IFD0") || $0.hasPrefix("ExifIFD") }
            #expect(leaked.isEmpty, "\(path) carries \(leaked)")
            #expect(!CameraTags.read(served.bodyBytes).hasPosition)
        }
        // The original: to who added it, byte for byte, as a download; not to the viewer.
        let original = try owner.get("/own-photos/\(id)?original=1")
        #expect(original.status == 200 && original.bodyBytes == photo)
        #expect(original.header("Content-Disposition") == "attachment; filename=\"photo.jpg\"")
        #expect(original.header("Cache-Control") == "private, no-store", "the location stays out of the browser's cache")
        #expect(try viewer.get("/own-photos/\(id)?original=1").status == 403)
        // Another map's person: nothing at all.
        let stranger = try app.signedUp()
        #expect(try stranger.get("/own-photos/\(id)").status == 404)
        #expect(try stranger.get("/own-photos/\(id)?original=1").status == 404)
    }

    /// A share link shows its maker's own photos only when they ticked so (never another
    /// member's), then only their versions (no GPS, no XMP, no EXIF, as exiftool reads the served bytes) and no file names,
    /// with the location hidden or not; never an original, never another album's photo.
    @Test func aShareLinkShowsOwnPhotosOnlyWhenTickedAndNeverTheirLocation() throws {
        let app = try TestApp()
        let (owner, _, pin) = try AlbumEraTests.clubWithAViewer(app)
        let token = try #require(try owner.get("/pins/\(pin)").csrfToken)
        let added = try Self.send(owner, pin: pin, try Self.taggedPhoto(), name: "Grandma's house Rue Mercière.jpg", token: token)
        let id = try #require(try Self.json(added)["id"] as? Int)
        let other = try #require(try SharedMapTests.drop(owner, lat: 40, lon: 3).body.firstMatch(of: /"id":([0-9]+)/).map { Int($0.1)! })
        let elsewhere = try #require(try Self.json(try Self.send(owner, pin: other, try Self.taggedPhoto(comment: "b"), name: "b.jpg", token: token))["id"] as? Int)

        let visitor = app.browser()
        let without = try ShareLinkTests.share(owner, path: "/pins/\(pin)/shares")
        let page = try visitor.get(without)
        #expect(page.status == 200 && Self.ownIDs(page).isEmpty && !page.body.contains("own-photos"))
        #expect(try visitor.get(without + "/own-photos/\(id)").status == 404, "not ticked: not served either")

        for hide in [false, true] {
            let link = try ShareLinkTests.share(owner, path: "/pins/\(pin)/shares", hide: hide, ownPhotos: true)
            let page = try visitor.get(link)
            #expect(page.status == 200 && Self.ownIDs(page) == [id], "hide \(hide)")
            #expect(page.body.contains("Their own photos") && page.body.contains("Olga · 3 May 2024, 14:22"))
            #expect(!page.body.contains("Grandma") && !page.body.contains("Mercière"), "no file name")
            #expect(!page.body.contains("/own-photos.js") && !page.body.contains("method=\"post\""))
            #expect(page.body.contains("src=\"\(link)/own-photos/\(id)?w=256\""))
            for path in ["", "?w=256", "?w=512", "?original=1"] {
                let served = try visitor.get(link + "/own-photos/\(id)" + path)
                #expect(served.status == 200 && served.header("Content-Type") == "image/jpeg", "\(path): \(served)")
                #expect(served.header("Cache-Control") == "private, no-cache")
                let tags = try ExifTool.tags(of: served.bodyBytes)
                let leaked = tags.keys.filter { $0.contains("GPS") || $0.hasPrefix("XMP") || $0.hasPrefix("IFD0") || $0.hasPrefix("ExifIFD") }
                #expect(leaked.isEmpty, "\(path) carries \(leaked)")
            }
            #expect(try visitor.get(link + "/own-photos/\(elsewhere)").status == 404, "another album's photo")
        }
        // A map link with them: each album's own photos, on that album's page only.
        let map = try ShareLinkTests.share(owner, path: "/shares", ownPhotos: true)
        #expect(Self.ownIDs(try visitor.get(map + "/pins/\(other)")) == [elsewhere])
        #expect(try visitor.get(map + "/own-photos/\(id)").status == 200)
        #expect(try owner.get("/shares").body.contains("own photos"), "the owner's list says which links show them")
        // Another member's photo: never through someone else's link.
        try app.pool.query("UPDATE own_photos SET added_by = (SELECT id FROM users WHERE display_name = 'Vic') WHERE id = $1", [Int64(elsewhere)])
        #expect(Self.ownIDs(try visitor.get(map + "/pins/\(other)")).isEmpty)
        #expect(try visitor.get(map + "/own-photos/\(elsewhere)").status == 404)
        // A revoked link stops showing them at once.
        let revoke = try #require(try owner.get("/shares").body.matches(of: /action="\/shares\/([0-9]+)\/revoke"/).first.map { String($0.1) })
        _ = try owner.post("/shares/\(revoke)/revoke", form: [("_csrf", token)])
        #expect(try app.count("SELECT count(*) FROM share_links WHERE own_photos AND revoked_at IS NOT NULL AND pin_id IS NULL") == 1)
        #expect(try visitor.get(map + "/own-photos/\(id)").status == 410)
    }

    /// The album's zip holds the own photos beside the provider's: the original (its location in
    /// it) for who added it and the owners, the display version (none) for anyone else.
    @Test func theAlbumZipHoldsOwnPhotosOriginalsOnlyForWhoMayHaveThem() throws {
        let app = try TestApp()
        let (owner, viewer, pin) = try AlbumEraTests.clubWithAViewer(app)
        let token = try #require(try owner.get("/pins/\(pin)").csrfToken)
        let photo = try Self.taggedPhoto()
        #expect(try Self.send(owner, pin: pin, photo, name: "IMG_0042.JPG", token: token).status == 201)
        for (browser, original) in [(owner, true), (viewer, false)] {
            let zip = try browser.get("/pins/\(pin)/album.zip")
            #expect(zip.status == 200)
            let path = AlbumZipTests.scratchFile("own-\(original).zip")
            try Data(zip.bodyBytes).write(to: URL(fileURLWithPath: path))
            let listing = try AlbumZipTests.run(["python3", "-c", """
                import json, sys, zipfile
                z = zipfile.ZipFile(sys.argv[1])
                assert z.testzip() is None
                name = [n for n in z.namelist() if "IMG_0042" in n][0]
                open(sys.argv[1] + ".jpg", "wb").write(z.read(name))
                print(json.dumps({"name": name, "credits": z.read("credits.csv").decode()}))
                """, path])
            #expect(listing.status == 0, "\(listing.output)")
            #expect(listing.output.contains("01-IMG_0042.jpg") && listing.output.contains("Olga") && listing.output.contains("own photo"), "\(listing.output)")
            let entry = Array(try Data(contentsOf: URL(fileURLWithPath: path + ".jpg")))
            #expect((entry == photo) == original)
            let tags = try ExifTool.tags(of: entry)
            #expect(tags.keys.contains { $0.contains("GPS") } == original, "GPS only in the original")
        }
    }

    @Test func theSameFileTwiceIsOnePhotoAndNewCollectionLeavesThemAlone() throws {
        let app = try TestApp(workers: true)
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        _ = try AlbumTests.settled(ann, pin: pin)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let photo = try Self.taggedPhoto()
        #expect(try Self.send(ann, pin: pin, photo, name: "a.jpg", token: token).status == 201)
        let again = try Self.send(ann, pin: pin, photo, name: "copy of a.jpg", token: token)
        let message = try Self.json(again)["message"] as? String
        #expect(again.status == 200 && message == "copy of a.jpg is already in this album.")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 1)
        #expect(try ann.get("/pins/\(pin)").body.contains("<h2 id=\"own-photos-title\">Yours <span class=\"muted\">(1)</span></h2>"))

        #expect(try ann.post("/pins/\(pin)/collection", form: [("_csrf", token)]).status == 303)
        _ = try AlbumTests.settled(ann, pin: pin)
        #expect(try app.count("SELECT count(*) FROM own_photos") == 1)
        // The collector keeps every blob a row names: the original, the display version, the thumbnail.
        let store = try #require(app.app.albums.photos.base as? FileStore)
        let hashes = try app.pool.query("SELECT encode(original, 'hex') AS o, encode(display, 'hex') AS d, encode(thumb_256, 'hex') AS t FROM own_photos")[0]
        _ = try PhotoCollector(pool: app.pool, store: store).collect(grace: 0)
        for column in ["o", "d", "t"] {
            let hash: String = try hashes.decode(column)
            #expect(try store.get(hash) != nil, "blob \(column) collected")
        }
    }

    /// Each refusal names the file and says why; nothing is stored for it.
    @Test func refusalsNameTheFile() throws {
        let app = try TestApp(configure: { $0.ownPhotoMaxBytes = 1024 * 1024; $0.ownPhotoMaxPixels = 1_000_000 })
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))

        func refusal(_ bytes: [UInt8], _ name: String) throws -> (Int, String) {
            let page = try Self.send(ann, pin: pin, bytes, name: name, token: token)
            return (page.status, (try? Self.json(page))?["message"] as? String ?? page.body)
        }
        #expect(try refusal(Array("<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>".utf8), "x.svg")
                == (422, "x.svg is not a photo Virtual Tourist can read: it takes JPEG, HEIC, PNG and WebP files."))
        #expect(try refusal(Array(jpeg.prefix(jpeg.count / 2)), "half.jpg")
                == (422, "half.jpg is an incomplete JPEG file: it was cut short (try copying it again)."))
        var bomb = jpeg
        let sof = try #require((0..<(bomb.count - 9)).first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC0 })
        bomb[sof + 5] = 0x80; bomb[sof + 6] = 0x00; bomb[sof + 7] = 0x80; bomb[sof + 8] = 0x00
        #expect(try refusal(bomb, "bomb.jpg") == (413, "bomb.jpg is 32768 × 32768 pixels, more than the 1 megapixels a photo may have here."))
        #expect(try refusal(jpeg + [UInt8](repeating: 0, count: 1024 * 1024), "big.jpg")
                == (413, "big.jpg is larger than 1 MB, the most a photo may be."))
        #expect(try refusal([], "empty.jpg") == (422, "empty.jpg is empty."))
        // Past the route's limit (the file and the form around it): refused from the Content-Length.
        let fd = try connectLoopback(port: app.port, receiveTimeout: 30)
        defer { close(fd) }
        let cookies = ann.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let head = "POST /pins/\(pin)/own-photos HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookies)\r\nX-CSRF-Token: \(token)\r\nContent-Type: image/jpeg\r\nContent-Length: \(1024 * 1024 + 65 * 1024)\r\n\r\n"
        _ = head.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 413") && text.contains("photos of up to 1 MB can be added"), "\(text.suffix(400))")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 0)
        // Not the person's pin, no pin, and no CSRF token.
        let bob = try app.signedUp()
        #expect(try Self.send(bob, pin: pin, jpeg, name: "a.jpg", token: try #require(try bob.get("/").csrfToken)).status == 404)
        #expect(try Self.send(ann, pin: 999_999_999, jpeg, name: "a.jpg", token: token).status == 404)
        #expect(try Self.send(ann, pin: pin, jpeg, name: "a.jpg", token: "forged").status == 403)
        #expect(try Self.send(ann, pin: pin, jpeg, name: "a.jpg", token: token).status == 201)
    }

    @Test func ownPhotosCountAgainstTheQuotaOfWhoAddedThem() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-quota@example.org")
        let pin = try AlbumTests.dropPin(ann)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let photo = try Self.taggedPhoto()
        #expect(try Self.send(ann, pin: pin, photo, name: "first.jpg", token: token).status == 201)
        let used = try app.count("SELECT byte_size FROM own_photos")
        #expect(used > photo.count)
        #expect(try app.count("SELECT charged_bytes FROM admin_users WHERE email = 'ann-quota@example.org'") == used)
        // Room for less than one more: the next one is refused, saying so.
        try app.pool.query("UPDATE users SET max_photo_bytes = $1 WHERE email = 'ann-quota@example.org'", [Int64(used + 1000)])
        let refused = try Self.send(ann, pin: pin, try Self.taggedPhoto(comment: "another"), name: "second.jpg", token: token)
        #expect(refused.status == 422)
        #expect((try Self.json(refused))["message"] as? String
                == "second.jpg was not added: Your photos use all of your 0 MB of storage. Delete a pin or some photos to make room, or ask your administrator for more.")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 1)

        // Two files both checked before either was stored (two uploads at once): the second is
        // refused when it is stored, under the person's row lock, not let past the quota.
        let annID = Int64(try app.count("SELECT id FROM users WHERE email = 'ann-quota@example.org'"))
        let holder = annID
        try app.pool.query("UPDATE users SET max_photo_bytes = $1 WHERE id = $2", [Int64(used * 2 + used / 2), annID])
        let store = OwnPhotoStore(pool: app.pool, store: app.app.albums.photos, quotas: Quotas(), limits: PhotoVersions.Limits(),
                                  processing: PhotoProcessing(slots: 1))
        var ready: [OwnPhotoStore.Prepared] = []
        for n in 0..<2 {
            guard case .ready(let prepared) = try store.prepare(try Self.taggedPhoto(comment: "race \(n)"), by: annID) else {
                Issue.record("photo \(n) not prepared"); return
            }
            ready.append(prepared)
        }
        let limit = QuotaReached.photoBytes(Int64(used * 2 + used / 2))
        let first = try store.store(ready[0], fileName: "a.jpg", pinID: Int64(pin), holder: holder, by: annID, placed: .person)
        let second = try store.store(ready[1], fileName: "b.jpg", pinID: Int64(pin), holder: holder, by: annID, placed: .person)
        #expect(first != .quotaReached(limit) && second == .quotaReached(limit), "\(first), \(second)")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 2)
    }

    /// A name decomposed as macOS writes it, 250 combining accents long, is kept (NFC, cut at the
    /// table's 200 code points), not a 500 after the work; the original's download is named with
    /// its format's extension, never the uploader's (.hta, .html).
    @Test func namesAreCleanedAndTheDownloadTakesTheFormatsExtension() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let long = "a" + String(repeating: "\u{301}", count: 250) + ".jpg"
        let added = try Self.send(ann, pin: pin, try Self.taggedPhoto(comment: "long"), name: long, token: token)
        #expect(added.status == 201, "\(added)")
        let stored: String = try app.pool.query("SELECT file_name FROM own_photos")[0].decode("file_name")
        #expect(stored.unicodeScalars.count <= 200 && stored.unicodeScalars.first == "\u{E1}", "composed (NFC), then cut")
        for (name, download) in [("IMG 0001.hta", "IMG 0001.jpg"), ("x.html", "x.jpg"), ("../../etc/passwd", "passwd.jpg"), ("noextension", "noextension.jpg"), ("<b>.jpg", "photo.jpg")] {
            let page = try Self.send(ann, pin: pin, try Self.taggedPhoto(comment: name), name: name, token: token)
            let id = try #require(try Self.json(page)["id"] as? Int, "\(page)")
            #expect(try ann.get("/own-photos/\(id)?original=1").header("Content-Disposition") == "attachment; filename=\"\(download)\"", "\(name)")
        }
    }

    /// A photo tagged at a place, as a phone writes it (GPS in EXIF), different from every other.
    static func photo(at lat: Double, _ lon: Double, _ n: Int) throws -> [UInt8] {
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))
        return try ExifTool.writing(["-GPSLatitude=\(abs(lat))", "-GPSLatitudeRef=\(lat < 0 ? "S" : "N")", "-GPSLongitude=\(abs(lon))",
                                     "-GPSLongitudeRef=\(lon < 0 ? "W" : "E")", "-Comment=\(n)"], to: jpeg)
    }

    static func sendToMap(_ browser: Browser, _ bytes: [UInt8], name: String, token: String, query: String = "") throws -> Browser.Page {
        try browser.request("POST", "/own-photos\(query)", body: bytes, headers: [
            ("X-CSRF-Token", token), ("Accept", "application/json"), ("Content-Type", "image/jpeg"), ("X-File-Name", name),
        ])
    }

    /// A trip's batch on the map: each photo goes where its GPS says, to the nearest pin within
    /// the radius, else a new pin named after the nearest place: three places, three pins.
    @Test func aTripsPhotosMakeAHandfulOfPins() throws {
        let app = try TestApp(workers: true)
        let ann = try app.signedUp()
        let token = try #require(try ann.get("/").csrfToken)
        #expect(try ann.get("/").body.contains("action=\"/own-photos\" enctype=\"multipart/form-data\""))
        // Paris (the tower, then 300 m away), Versailles (17 km), Rouen (110 km): twelve photos.
        let places = [(48.858_37, 2.294_48), (48.860_5, 2.297_1), (48.804_9, 2.120_4), (49.443_2, 1.099_9)]
        var pinsSeen: [Int: Int] = [:]
        for n in 0..<12 {
            let (lat, lon) = places[n % places.count]
            let page = try Self.sendToMap(ann, try Self.photo(at: lat, lon, n), name: "IMG_\(n).JPG", token: token)
            #expect(page.status == 201, "\(page)")
            let pin = try #require(try Self.json(page)["pin"] as? [String: Any])
            pinsSeen[try #require(pin["id"] as? Int), default: 0] += 1
        }
        #expect(pinsSeen.count == 3, "\(pinsSeen)")
        #expect(try app.count("SELECT count(*) FROM pins") == 3)
        #expect(try app.count("SELECT count(*) FROM own_photos WHERE placed = 'file'") == 12)
        let names = try app.pool.query("SELECT place_name FROM pins ORDER BY id").map { try $0.decode("place_name", as: String?.self) ?? "" }
        #expect(names.count == 3 && names.allSatisfy { !$0.isEmpty }, "\(names)")
        // Their albums fill with the world's photos, as a dropped pin's.
        let first = try #require(pinsSeen.keys.min())
        #expect(try AlbumTests.settled(ann, pin: first).status == "ready")
        #expect(Self.ownIDs(try ann.get("/pins/\(first)")).count == 6)
    }

    /// A photo with no position: refused by the button (saying what to do), placed where it was
    /// dropped on the map; a viewer cannot add any.
    @Test func aPhotoWithoutAPositionGoesWhereItWasDropped() throws {
        let app = try TestApp()
        let (owner, viewer, pin) = try AlbumEraTests.clubWithAViewer(app)
        let token = try #require(try owner.get("/").csrfToken)
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))
        let store = try #require(app.app.albums.photos.base as? FileStore)
        let blobsBefore = try store.list().count
        let refused = try Self.sendToMap(owner, jpeg, name: "scan.jpg", token: token)
        #expect(refused.status == 422)
        #expect(try store.list().count == blobsBefore, "a photo with nowhere to go stores nothing")
        #expect(try Self.json(refused)["message"] as? String == "scan.jpg has no position in it: drop it on the map where it was taken, or add it from the album of a pin.")
        let (lat, lon) = (AlbumEraTests.lat, AlbumEraTests.lon)
        let placed = try Self.sendToMap(owner, jpeg, name: "scan.jpg", token: token, query: "?lat=\(lat)&lon=\(lon)")
        #expect(placed.status == 201, "\(placed)")
        #expect(try #require(try Self.json(placed)["pin"] as? [String: Any])["id"] as? Int == pin, "joined the pin dropped there")
        #expect(try app.count("SELECT count(*) FROM own_photos WHERE placed = 'person'") == 1)
        // A batch meant for another map (the person switched maps in another tab) lands nowhere.
        #expect(try owner.get("/").body.contains("<input type=\"hidden\" name=\"map\" value=\""))
        let switched = try Self.sendToMap(owner, try Self.photo(at: lat, lon, 2), name: "late.jpg", token: token, query: "?map=own")
        #expect(switched.status == 409, "\(switched)")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 1)
        let viewerToken = try #require(try viewer.get("/").csrfToken)
        #expect(try Self.sendToMap(viewer, try Self.photo(at: lat, lon, 1), name: "v.jpg", token: viewerToken).status == 403)
        #expect(!(try viewer.get("/")).body.contains("action=\"/own-photos\""))
    }

    /// "Estimated": a photo without a position, when asked, joins the pin of the person's photo
    /// with a position taken nearest in time within ten minutes, its clocks compared in UTC where
    /// the files give offsets; farther apart it waits for the rest of its batch (`later`), then is
    /// refused saying why; without the choice it is refused at once; another person's photos
    /// never place it. The plain form's checkbox asks the same.
    @Test func aPhotoWithoutAPositionMayStandBesideTheOnesTakenMinutesApart() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let token = try #require(try ann.get("/").csrfToken)
        #expect(try ann.get("/").body.contains("name=\"estimate\" value=\"1\""))
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))
        func shot(_ time: String, offset: String?, gps: Bool, _ n: Int) throws -> [UInt8] {
            try ExifTool.writing(["-DateTimeOriginal=2024:05:03 \(time)", "-Comment=\(n)"] + (offset.map { ["-OffsetTimeOriginal=\($0)"] } ?? [])
                + (gps ? ["-GPSLatitude=48.85837", "-GPSLatitudeRef=N", "-GPSLongitude=2.29448", "-GPSLongitudeRef=E"] : []), to: jpeg)
        }
        let tower = try Self.sendToMap(ann, try shot("14:22:00", offset: "+02:00", gps: true, 0), name: "tower.jpg", token: token)
        let towerPin = try #require(try Self.json(tower)["pin"] as? [String: Any])
        let pin = try #require(towerPin["id"] as? Int)
        // 12:25 UTC is 14:25 in Paris: three minutes later.
        let near = try Self.sendToMap(ann, try shot("12:25:00", offset: "+00:00", gps: false, 1), name: "lunch.jpg", token: token, query: "?estimate=1")
        #expect(near.status == 201, "\(near)")
        #expect(try Self.json(near)["message"] as? String == "lunch.jpg added to \(try Self.pinTitle(app, pin)) (its place estimated from your photos taken minutes apart).")
        #expect(try #require(try Self.json(near)["pin"] as? [String: Any])["id"] as? Int == pin)
        // No offset on one side: taken to be on the other's clock.
        #expect(try Self.sendToMap(ann, try shot("14:30:00", offset: nil, gps: false, 2), name: "b.jpg", token: token, query: "?estimate=1").status == 201)
        // 14:25 UTC is two hours off; without a time there is nothing to go by.
        let far = try Self.sendToMap(ann, try shot("14:25:00", offset: "+00:00", gps: false, 3), name: "far.jpg", token: token, query: "?estimate=1")
        let farAnswer = try Self.json(far)
        #expect(far.status == 422 && farAnswer["later"] as? Bool == true, "\(far)")
        #expect(try Self.json(far)["message"] as? String == "far.jpg has no position in it, and none of your photos with one was taken within 10 minutes of it: drop it on the map where it was taken, or add it from the album of a pin.")
        let timeless = try Self.sendToMap(ann, jpeg, name: "scan.jpg", token: token, query: "?estimate=1")
        let timelessAnswer = try Self.json(timeless)
        #expect(timeless.status == 422 && timelessAnswer["later"] == nil)
        let unasked = try Self.sendToMap(ann, try shot("14:23:00", offset: "+02:00", gps: false, 4), name: "c.jpg", token: token)
        let unaskedAnswer = try Self.json(unasked)
        #expect(unasked.status == 422 && unaskedAnswer["later"] == nil)
        // The plain form's checkbox.
        let form = try Self.postForm(ann, "/own-photos", fields: [("_csrf", token), ("estimate", "1")],
                                     files: [("d.jpg", try shot("14:24:00", offset: "+02:00", gps: false, 5))])
        #expect(form.status == 303, "\(form)")
        #expect(try ann.get("/").body.contains("1 photo added to the map."))
        #expect(try app.count("SELECT count(*) FROM own_photos WHERE placed = 'estimated' AND pin_id = $1", [Int64(pin)]) == 3)
        #expect(try ann.get("/pins/\(pin)").body.contains("· place estimated"))
        // Another person's photos on their own map place nothing of Ann's, and Ann's nothing of theirs.
        let bob = try app.signedUp()
        let bobs = try #require(try bob.get("/").csrfToken)
        #expect(try Self.sendToMap(bob, try shot("14:23:00", offset: "+02:00", gps: false, 6), name: "e.jpg", token: bobs, query: "?estimate=1").status == 422)
    }

    /// As the plain form sends its fields and files: multipart/form-data.
    static func postForm(_ browser: Browser, _ path: String, fields: [(String, String)], files: [(String, [UInt8])]) throws -> Browser.Page {
        let boundary = "----OwnPhotos7MA4YWxkTrZu0gW"
        var body: [UInt8] = []
        for (name, value) in fields { body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8) }
        for (name, bytes) in files {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
            body += bytes + Array("\r\n".utf8)
        }
        body += Array("--\(boundary)--\r\n".utf8)
        return try browser.request("POST", path, body: body, headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")])
    }

    /// The nearest pin within the radius is found across the antimeridian, and not past the radius.
    @Test func theNearestPinIsFoundAcrossTheAntimeridian() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "fiji@example.org")
        let user = Int64(try app.count("SELECT id FROM users WHERE email = 'fiji@example.org'"))
        let pin = Int64(try AlbumTests.dropPin(ann, lat: -16.5, lon: 179.9995))
        let store = OwnPhotoStore(pool: app.pool, store: app.app.albums.photos, quotas: Quotas(), limits: PhotoVersions.Limits(),
                                  processing: PhotoProcessing(slots: 1))
        #expect(try store.nearestPin(holder: user, lat: -16.5, lon: -179.9995, within: 1000) == pin, "106 m the short way round")
        #expect(try store.nearestPin(holder: user, lat: -16.5, lon: -179.99, within: 1000) == nil, "1.1 km")
        #expect(try store.nearestPin(holder: user, lat: -16.5, lon: 179.999, within: 1000) == pin)
        #expect(try store.nearestPin(holder: user, lat: -16.5, lon: 0.0005, within: 1000) == nil, "the far side of the world")
    }

    /// Seeded random sequences of what a club does with its own photos (add to an album, add on
    /// the map, remove, delete a pin, New Collection, an editor removed and let back in, a viewer
    /// trying), with invariants after every step: no 5xx; every row's pin is the map's and every
    /// blob a row names is in the store; nobody's photo stays after they left; one row per file
    /// and pin; each album page shows exactly its rows.
    @Test(arguments: [51, 52, 53])
    func randomClubSequencesKeepTheInvariants(seed: UInt64) throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga-\(seed)@example.org", name: "Olga")
        let eddie = try app.signedUp(email: "eddie-\(seed)@example.org", name: "Eddie")
        let vic = try app.signedUp(email: "vic-\(seed)@example.org", name: "Vic")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: eddie, email: "eddie-\(seed)@example.org", role: "editor")
        #expect(try SharedMapTests.add(owner, map: map, email: "vic-\(seed)@example.org", role: "viewer", person: vic).status == 303)
        _ = try SharedMapTests.switchTo(vic, "\(map)")
        let eddieID = Int64(try app.count("SELECT id FROM users WHERE email = $1", ["eddie-\(seed)@example.org"]))
        let files = try (0..<5).map { n in n < 3 ? try Self.photo(at: 48.85 + Double(n) * 0.05, 2.29, n) : try Self.taggedPhoto(comment: "r\(n)") }
        let store = try #require(app.app.albums.photos.base as? FileStore)
        var generator = SeededGenerator(seed: seed)
        var eddieIn = true
        var pins = [try AlbumTests.dropPin(owner)]
        func token(_ browser: Browser) throws -> String { try #require(try browser.get("/").csrfToken) }
        for step in 0..<40 {
            let roll = Int.random(in: 0..<100, using: &generator)
            let actor = Bool.random(using: &generator) ? owner : eddie
            let file = files[Int.random(in: 0..<files.count, using: &generator)]
            var status = 0
            switch roll {
            case 0..<30 where !pins.isEmpty:
                let pin = pins[Int.random(in: 0..<pins.count, using: &generator)]
                status = try Self.send(actor, pin: pin, file, name: "s\(step).jpg", token: try token(actor)).status
            case 0..<50:
                // As the map page's form sends it: naming the map it was drawn for.
                let page = try Self.sendToMap(actor, file, name: "m\(step).jpg", token: try token(actor), query: "?map=\(map)")
                status = page.status
                if page.status == 201, let pin = (try? Self.json(page))?["pin"] as? [String: Any], let id = pin["id"] as? Int, !pins.contains(id) { pins.append(id) }
            case 50..<65:
                let ids = try app.pool.query("SELECT id FROM own_photos ORDER BY id").map { try $0.decode("id", as: Int.self) }
                if let id = ids.randomElement(using: &generator) {
                    status = try actor.post("/own-photos/\(id)/delete", form: [("_csrf", try token(actor))]).status
                }
            case 65..<72 where pins.count > 1:
                let pin = pins.remove(at: Int.random(in: 0..<pins.count, using: &generator))
                status = try owner.post("/pins/\(pin)/delete", form: [("_csrf", try token(owner))]).status
            case 72..<80 where !pins.isEmpty:
                let pin = pins[Int.random(in: 0..<pins.count, using: &generator)]
                status = try owner.post("/pins/\(pin)/collection", form: [("_csrf", try token(owner))]).status
            case 80..<90:
                // The editor removed, or let back in (as the admin recipe does it).
                if eddieIn {
                    try app.pool.query("DELETE FROM map_members WHERE map_id = $1 AND user_id = $2", [map, eddieID])
                } else {
                    try app.pool.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, 'editor')", [map, eddieID])
                    _ = try SharedMapTests.switchTo(eddie, "\(map)")
                }
                eddieIn.toggle()
            default:
                if let pin = pins.first { status = try Self.send(vic, pin: pin, file, name: "v.jpg", token: try token(vic)).status }
                #expect(status == 0 || status == 403 || status == 404, "step \(step): a viewer added a photo (\(status))")
            }
            #expect(status < 500, "seed \(seed) step \(step) roll \(roll): \(status)")
            // The invariants.
            #expect(try app.count("""
                SELECT count(*) FROM own_photos o WHERE o.user_id <> $1
                   OR NOT EXISTS (SELECT 1 FROM pins p WHERE p.id = o.pin_id AND p.user_id = o.user_id)
                   OR NOT EXISTS (SELECT 1 FROM map_members m WHERE m.map_id = $1 AND m.user_id = o.added_by)
                """, [map]) == 0, "seed \(seed) step \(step): a photo off the map or of someone not on it")
            #expect(try app.count("SELECT count(*) - count(DISTINCT (pin_id, original)) FROM own_photos") == 0)
            let named = try app.pool.query("""
                SELECT encode(h, 'hex') AS hash FROM own_photos, unnest(ARRAY[original, display, thumb_256, thumb_512]) h WHERE h IS NOT NULL
                """).map { try $0.decode("hash", as: String.self) }
            #expect(try named.allSatisfy { try store.get($0) != nil }, "seed \(seed) step \(step): a row names a missing blob")
            if let pin = pins.randomElement(using: &generator) {
                let rows = Set(try app.pool.query("SELECT id FROM own_photos WHERE pin_id = $1", [Int64(pin)]).map { try $0.decode("id", as: Int.self) })
                #expect(Set(Self.ownIDs(try owner.get("/pins/\(pin)"))) == rows, "seed \(seed) step \(step): the album shows its rows")
            }
        }
        print("seed \(seed): \(try app.count("SELECT count(*) FROM own_photos")) own photos on \(pins.count) pins after 40 steps")
    }

    static func pinTitle(_ app: TestApp, _ pin: Int) throws -> String {
        let row = try app.pool.query("SELECT coalesce(place_name, '') AS name FROM pins WHERE id = $1", [Int64(pin)])[0]
        return try row.decode("name")
    }

    /// Own photos take their place in the strip of decades by the time they were taken.
    @Test func ownPhotosAreInTheStripOfDecades() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg")))
        for (n, taken) in ["1957:06:01 10:00:00", "1959:08:02 11:00:00", "2024:05:03 14:22:10"].enumerated() {
            let photo = try ExifTool.writing(["-DateTimeOriginal=\(taken)", "-Comment=\(n)"], to: jpeg)
            #expect(try Self.send(ann, pin: pin, photo, name: "\(n).jpg", token: token).status == 201)
        }
        let strip = try ann.get("/pins/\(pin)/decades?fragment=1").body
        #expect(strip.contains("<span class=\"decade-name\">1950s</span><span class=\"decade-count\">"), "\(strip.prefix(400))")
        #expect(strip.contains("<span class=\"decade-own\">2 of the album’s own</span>"))
        #expect(strip.contains("<span class=\"decade-own\">1 of the album’s own</span>"))
        #expect(strip.components(separatedBy: "decade-own").count == 3)
    }

    /// Without JavaScript: several files in one form, the album back with a message for each refusal.
    @Test func thePlainFormAddsSeveralFilesAndNamesTheOnesItRefused() throws {
        let app = try TestApp()
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let boundary = "----OwnPhotos7MA4YWxkTrZu0gW"
        var body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\n\(token)\r\n".utf8)
        for (name, bytes) in [("one.jpg", try Self.taggedPhoto()), ("two.jpg", try Self.taggedPhoto(comment: "two")), ("notes.txt", Array("hello".utf8))] {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
            body += bytes + Array("\r\n".utf8)
        }
        body += Array("--\(boundary)--\r\n".utf8)
        let posted = try ann.request("POST", "/pins/\(pin)/own-photos", body: body, headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")])
        #expect(posted.status == 303 && posted.header("Location") == "/pins/\(pin)#own-photos", "\(posted)")
        let album = try ann.get("/pins/\(pin)")
        #expect(album.body.contains("2 photos added. notes.txt is not a photo Virtual Tourist can read"))
        #expect(Self.ownIDs(album).count == 2)
    }

    /// A member's own photos leave the map with them (they could neither see nor remove them any
    /// more, and the owners could still download their originals): removed, or leaving, their
    /// photos go; the others' stay, and so do the pins.
    @Test func aMembersOwnPhotosLeaveTheMapWithThem() throws {
        let app = try TestApp()
        let owner = try app.signedUp(email: "olga-leave@example.org", name: "Olga")
        let eddie = try app.signedUp(email: "eddie-leave@example.org", name: "Eddie")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: eddie, email: "eddie-leave@example.org", role: "editor")
        let pin = try #require(try SharedMapTests.drop(owner, lat: AlbumEraTests.lat, lon: AlbumEraTests.lon).body.firstMatch(of: /"id":([0-9]+)/).map { Int($0.1)! })
        let ownerToken = try #require(try owner.get("/pins/\(pin)").csrfToken)
        let eddieToken = try #require(try eddie.get("/pins/\(pin)").csrfToken)
        #expect(try Self.send(owner, pin: pin, try Self.taggedPhoto(comment: "olga"), name: "o.jpg", token: ownerToken).status == 201)
        #expect(try Self.send(eddie, pin: pin, try Self.taggedPhoto(comment: "eddie"), name: "e.jpg", token: eddieToken).status == 201)
        #expect(Self.ownIDs(try owner.get("/pins/\(pin)")).count == 2)
        let eddieID = try app.count("SELECT id FROM users WHERE email = 'eddie-leave@example.org'")
        #expect(try owner.get("/maps/\(map)").body.contains("Their own photos on this map go with them"), "the owner is told")
        let removed = try owner.post("/maps/\(map)/members/\(eddieID)/remove", form: [("_csrf", ownerToken)])
        #expect(removed.status == 303, "\(removed)")
        #expect(try app.count("SELECT count(*) FROM own_photos WHERE added_by = $1", [Int64(eddieID)]) == 0)
        #expect(Self.ownIDs(try owner.get("/pins/\(pin)")).count == 1)
        #expect(try app.count("SELECT count(*) FROM pins WHERE id = $1", [Int64(pin)]) == 1)
        // A file made while they were still a member and stored after their removal adds nothing.
        let store = OwnPhotoStore(pool: app.pool, store: app.app.albums.photos, quotas: Quotas(), limits: PhotoVersions.Limits(),
                                  processing: PhotoProcessing(slots: 1))
        guard case .ready(let late) = try store.prepare(try Self.taggedPhoto(comment: "late"), by: Int64(eddieID)) else {
            Issue.record("not prepared"); return
        }
        #expect(try store.store(late, fileName: "late.jpg", pinID: Int64(pin), holder: map, by: Int64(eddieID), placed: .person) == .notAMember)
        #expect(try app.count("SELECT count(*) FROM own_photos WHERE added_by = $1", [Int64(eddieID)]) == 0)
    }

    /// Who added a photo and the map's owners remove it; another editor and a viewer cannot.
    @Test func theUploaderOrAnOwnerRemovesAPhoto() throws {
        let app = try TestApp()
        let owner = try app.signedUp(name: "Olga")
        let editorEmail = "ed-\(UUID().uuidString.prefix(6))@example.org", otherEmail = "eve-\(UUID().uuidString.prefix(6))@example.org"
        let editor = try app.signedUp(email: editorEmail, name: "Ed")
        let other = try app.signedUp(email: otherEmail, name: "Eve")
        let map = try SharedMapTests.makeMap(owner, name: "Club", member: editor, email: editorEmail, role: "editor")
        #expect(try SharedMapTests.add(owner, map: map, email: otherEmail, role: "editor", person: other).status == 303)
        #expect(try SharedMapTests.switchTo(other, "\(map)").status == 303)
        let dropped = try SharedMapTests.drop(owner)
        let pin = try #require(dropped.body.firstMatch(of: /"id":([0-9]+)/).map { Int($0.1)! })
        let edToken = try #require(try editor.get("/pins/\(pin)").csrfToken)
        let first = try #require(try Self.json(try Self.send(editor, pin: pin, try Self.taggedPhoto(), name: "ed1.jpg", token: edToken))["id"] as? Int)
        let second = try #require(try Self.json(try Self.send(editor, pin: pin, try Self.taggedPhoto(comment: "2"), name: "ed2.jpg", token: edToken))["id"] as? Int)

        let eveToken = try #require(try other.get("/pins/\(pin)").csrfToken)
        #expect(try other.request("DELETE", "/own-photos/\(first)", headers: [("X-CSRF-Token", eveToken)]).status == 403)
        #expect(!(try other.get("/pins/\(pin)")).body.contains("action=\"/own-photos/\(first)/delete\""))
        #expect(try editor.request("DELETE", "/own-photos/\(first)", headers: [("X-CSRF-Token", edToken)]).status == 204)
        let ownerToken = try #require(try owner.get("/pins/\(pin)").csrfToken)
        #expect(try owner.get("/pins/\(pin)").body.contains("action=\"/own-photos/\(second)/delete\""))
        let removed = try owner.post("/own-photos/\(second)/delete", form: [("_csrf", ownerToken)])
        #expect(removed.status == 303 && removed.header("Location") == "/pins/\(pin)#own-photos")
        #expect(try app.count("SELECT count(*) FROM own_photos") == 0)
    }
}
