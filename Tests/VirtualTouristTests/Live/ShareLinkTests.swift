import Foundation
import Testing
import PhotoFixture
import Log
import Postgres
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Share links over loopback against a real PostgreSQL: what a visitor without an account gets,
/// what every refused request gets (and that it carries no photo bytes), the password cookie on
/// every resource, hide-location, the stored hash, owner isolation and the rate limits.
@Suite struct ShareLinkTests {
    /// Lyon's coordinates: none of these digits may reach a visitor of a link that hides them.
    static let lat = 45.7640, lon = 4.8357
    static let coordinateTexts = ["45.76", "4.835", "4.836", "45,76", "4,83"]
    static let placeName = "Lyon, Auvergne-Rhône-Alpes, France"

    /// A JPEG with the metadata a provider original can carry: EXIF (with a GPS-looking text) and
    /// XMP in APP1, IPTC in APP13, and a comment.
    static let jpegWithMetadata: [UInt8] = {
        let plain = Array(try! Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg")))
        func segment(_ marker: UInt8, _ text: String) -> [UInt8] {
            let payload = Array(text.utf8)
            let length = payload.count + 2
            return [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
        }
        let exif = segment(0xE1, "Exif\0\0GPSLatitude 45.7640 N GPSLongitude 4.8357 E")
        let xmp = segment(0xE1, "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><exif:GPSLatitude>45,45.84N</exif:GPSLatitude></x:xmpmeta>")
        let iptc = segment(0xED, "Photoshop 3.0\0Sub-location: Lyon")
        let comment = segment(0xFE, "taken at 45.7640, 4.8357")
        return [0xFF, 0xD8] + exif + xmp + iptc + comment + plain[2...]
    }()

    struct Album {
        let owner: Browser
        let pin: Int64
        let photos: [Int64]
    }

    /// An owner with a pin at Lyon holding two ready photos (bytes in the row, no thumbnails: every
    /// width is the original with its metadata).
    static func album(_ app: TestApp, email: String = "sharer-\(UUID().uuidString.prefix(6))@example.org", photos count: Int = 2) throws -> Album {
        let owner = try app.signedUp(email: email, name: "Sam Sharer")
        let token = try #require(try owner.get("/").csrfToken)
        let created = try owner.post("/pins", form: [("_csrf", token), ("lat", String(lat)), ("lon", String(lon))],
                                     headers: [("Accept", "application/json")])
        let pin = try #require((try JSONSerialization.jsonObject(with: Data(created.body.utf8)) as? [String: Any])?["id"] as? Int)
        try app.pool.query("UPDATE pins SET place_name = $2, status = 'ready' WHERE id = $1", [pin, placeName])
        var photos: [Int64] = []
        for position in 0..<count {
            photos.append(try app.pool.query("""
                INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, content_type, bytes,
                                    width, height, title, owner_name)
                SELECT id, user_id, generation, $3, 'fixture', 'r' || id || '-' || $3, 'http://x/1.jpg', 'ready', 'image/jpeg', $2, 384, 303,
                       'Coins ' || $3, 'Pat Photographer'
                FROM pins WHERE id = $1 RETURNING id
                """, [pin, jpegWithMetadata, position])[0].decode("id"))
        }
        return Album(owner: owner, pin: Int64(pin), photos: photos)
    }

    /// Makes a link through the owner's form; its URL as the page shows it once.
    static func share(_ owner: Browser, path: String, password: String? = nil, hide: Bool = false, label: String = "",
                      ownPhotos: Bool = false) throws -> String {
        let token = try #require(try owner.get(path).csrfToken)
        var form = [("_csrf", token), ("label", label), ("expires_days", "30")]
        if let password { form.append(("password", password)) }
        if hide { form.append(("hide_location", "1")) }
        if ownPhotos { form.append(("own_photos", "1")) }
        let page = try owner.post(path, form: form)
        #expect(page.status == 201, "\(page)")
        let url = try #require(page.body.firstMatch(of: /id="new-share-url" value="([^"]*)"/).map { String($0.1) })
        return String(url[try #require(url.range(of: "/s/")).lowerBound...])
    }

    /// A page's text with its random tokens (the link's, a cookie's: 43 characters of base64url)
    /// taken out: four of them hold "Rue" by chance in about one run in 1,600, which is no leak.
    static func withoutTokens(_ text: String) -> String {
        text.replacing(/[A-Za-z0-9_-]{40,}/, with: "<token>")
    }

    static func isImage(_ page: Browser.Page) -> Bool {
        page.header("Content-Type")?.hasPrefix("image/") == true || Array(page.body.utf8.prefix(2)) == [0xFF, 0xD8]
            || page.body.contains("JFIF") || page.body.contains("Exif")
    }

    /// Every URL a visitor's page uses, under the link.
    static func resources(_ link: String, photo: Int64) -> [String] {
        [link, link + "/album.json", link + "/album.html", link + "/photos/\(photo)", link + "/photos/\(photo)?w=256",
         link + "/photos/\(photo)?w=512", link + "/photos/\(photo)/view", link + "/preview.jpg"]
    }

    @Test func aVisitorWithoutAnAccountSeesTheAlbumReadOnly() throws {
        let app = try TestApp()
        let album = try Self.album(app, email: "sam@example.org")
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", label: "For Grandma")
        #expect(link.count == 3 + Tokens.length)
        let visitor = app.browser()
        let page = try visitor.get(link)
        #expect(page.status == 200)
        #expect(page.body.contains("<meta name=\"robots\" content=\"noindex"))
        #expect(page.header("X-Robots-Tag")?.contains("noindex") == true)
        #expect(page.body.contains("src=\"\(link)/photos/\(album.photos[0])?w=256\""))
        #expect(page.body.contains("href=\"\(link)/photos/\(album.photos[0])/view\""))
        #expect(page.body.contains("Pat Photographer"))
        #expect(page.body.contains("id=\"album-map\""), "the small map")
        #expect(page.body.contains("data-base=\"\(link)\""))
        // Read-only: no form at all, no owner's controls, nobody's name or email.
        #expect(!page.body.contains("method=\"post\""))
        for control in ["New Collection", "Choose photos", "Delete pin", "Remove", "album.zip", "/pins/\(album.pin)"] {
            #expect(!page.body.contains(control), "\(control)")
        }
        #expect(!page.body.contains("sam@example.org") && !page.body.contains("Sam Sharer"))
        // Preview tags, without an image: the instance has no PUBLIC_URL for an absolute one.
        #expect(page.body.contains("<meta property=\"og:title\" content=\"For Grandma\">"))
        #expect(page.body.contains("og:description") && !page.body.contains("og:image"))

        let json = try visitor.get(link + "/album.json")
        #expect(json.status == 200 && json.body.contains("\"Coins 0\"") && !json.body.contains("sam@example.org"))
        let fragment = try visitor.get(link + "/album.html")
        #expect(fragment.status == 200 && fragment.body.contains("\(link)/photos/\(album.photos[1])?w=256") && !fragment.body.contains("method=\"post\""))
        let photo = try visitor.get(link + "/photos/\(album.photos[0])")
        #expect(photo.status == 200 && photo.header("Content-Type") == "image/jpeg")
        #expect(photo.header("Cache-Control") == "private, no-cache")
        #expect(photo.bodyBytes == Self.jpegWithMetadata, "without hide-location the original as stored")
        let view = try visitor.get(link + "/photos/\(album.photos[0])/view")
        #expect(view.status == 200 && view.body.contains("id=\"next-photo\" href=\"\(link)/photos/\(album.photos[1])/view\""))
        #expect(view.body.contains("id=\"back-to-album\"") && !view.body.contains("method=\"post\"") && view.body.contains("noindex"))
        let events = try visitor.request("HEAD", link + "/events")
        #expect(events.status == 200 && events.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        let preview = try visitor.get(link + "/preview.jpg")
        #expect(preview.status == 200 && preview.header("Content-Type") == "image/jpeg")

        // The link opens this album only: the owner's other photos and routes stay closed.
        let other = try Self.album(app)
        #expect(try visitor.get(link + "/photos/\(other.photos[0])").status == 404)
        #expect(try visitor.get(link + "/pins/\(album.pin)").status == 404)
        #expect(try visitor.get("/photos/\(album.photos[0])").status == 303, "the owner's route wants a sign-in")
        #expect(try visitor.get("/pins/\(album.pin)/album.json").status == 303)
    }

    @Test func wrongRevokedAndExpiredLinksGetTheirPageAndNoPhotoBytes() throws {
        // Forty guesses from one address: past what the limiter lets one address guess.
        let app = try TestApp(configure: { $0.shareLimits.missesPerAddressPerHour = 0 })
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares")
        let token = String(link.dropFirst(3))
        let visitor = app.browser()
        #expect(try visitor.get(link).status == 200)

        // Guesses from the token: every one fails like a made-up token.
        let last = token.last == "A" ? "B" : "A"
        let guesses = [Tokens.make(), String(token.dropLast()) + last, String(token.prefix(20)), String(token.dropLast()), token + "A",
                       token.lowercased() == token ? token.uppercased() : token.lowercased()]
        for guess in guesses where guess != token {
            for url in Self.resources("/s/" + guess, photo: album.photos[0]) {
                let page = try visitor.get(url)
                #expect(page.status == 404, "\(url): \(page.status)")
                #expect(page.body.contains("does not exist") && !Self.isImage(page), "\(url)")
            }
        }

        // Expired: every resource is 410 with the expiry page.
        try app.pool.query("UPDATE share_links SET created_at = now() - interval '31 days', expires_at = now() - interval '1 second'")
        for url in Self.resources(link, photo: album.photos[0]) {
            let page = try visitor.get(url)
            #expect(page.status == 410 && page.body.contains("has expired") && !Self.isImage(page), "\(url): \(page.status)")
        }
        try app.pool.query("UPDATE share_links SET expires_at = now() + interval '1 day'")
        #expect(try visitor.get(link).status == 200)

        // Revoked by the owner from the list: at once, everywhere.
        let list = try album.owner.get("/pins/\(album.pin)/shares")
        let id = try #require(list.body.firstMatch(of: /action="\/shares\/(\d+)\/revoke"/).map { String($0.1) })
        let revoked = try album.owner.post("/shares/\(id)/revoke", form: [("_csrf", try #require(list.csrfToken))])
        #expect(revoked.status == 303 && revoked.header("Location") == "/pins/\(album.pin)/shares")
        for url in Self.resources(link, photo: album.photos[0]) {
            let page = try visitor.get(url)
            #expect(page.status == 410 && page.body.contains("withdrawn") && !Self.isImage(page), "\(url): \(page.status)")
        }
        #expect(try album.owner.get("/pins/\(album.pin)/shares").body.contains("Revoked"))
    }

    @Test func aPasswordIsAskedOnceThenEveryResourceWantsTheCookie() throws {
        let app = try TestApp(configure: { $0.publicURL = "http://photos.example.org" })
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", password: "open sesame, please")
        let visitor = app.browser()
        let ask = try visitor.get(link)
        #expect(ask.status == 403 && ask.body.contains("type=\"password\"") && ask.body.contains("noindex"))
        #expect(!ask.body.contains("/photos/") && !ask.body.contains("og:"), "no photo and no preview before the password")
        for url in Self.resources(link, photo: album.photos[0]).dropFirst() + [link + "/events"] {
            let page = try visitor.request(url.hasSuffix("/events") ? "HEAD" : "GET", "\(url)")
            #expect([403, 404].contains(page.status) && !Self.isImage(page), "\(url) without the cookie: \(page.status)")
        }
        // A wrong password, a forged cookie, another link's cookie: still asked.
        let csrf = try #require(ask.csrfToken)
        let wrong = try visitor.post(link, form: [("_csrf", csrf), ("password", "open sesame, pretty please")])
        #expect(wrong.status == 403 && wrong.body.contains("not right"))
        visitor.setCookie(ShareGate.cookie, String(repeating: "a", count: 64))
        #expect(try visitor.get(link + "/photos/\(album.photos[0])").status == 403)
        let otherLink = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", password: "another password")
        let other = app.browser()
        _ = try other.get(otherLink)
        let unlocked = try other.post(otherLink, form: [("_csrf", try #require(try other.get(otherLink).csrfToken)), ("password", "another password")])
        #expect(unlocked.status == 303)
        let otherCookie = try #require(unlocked.headerValues("Set-Cookie").first { $0.hasPrefix(ShareGate.cookie + "=") })
        visitor.setCookie(ShareGate.cookie, String(try #require(otherCookie.firstMatch(of: /=([0-9a-f]+);/)).1))
        #expect(try visitor.get(link + "/album.json").status == 403)

        // The right one: a cookie for this link's path only, then everything opens.
        let right = try visitor.post(link, form: [("_csrf", csrf), ("password", "open sesame, please")])
        #expect(right.status == 303 && right.header("Location") == link)
        let cookie = try #require(right.headerValues("Set-Cookie").first { $0.hasPrefix(ShareGate.cookie + "=") })
        #expect(cookie.contains("Path=\(link);") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && !cookie.contains("Secure"))
        for url in Self.resources(link, photo: album.photos[0]).dropLast() {
            #expect(try visitor.get(url).status == 200, "\(url) with the cookie")
        }
        #expect(try visitor.request("HEAD", link + "/events").status == 200)
        let page = try visitor.get(link)
        #expect(!page.body.contains("og:"), "a link with a password has no preview tags")
        #expect(try visitor.get(link + "/preview.jpg").status == 404, "nor a preview image")
        // The owner's new password (a new hash) ends the old cookies.
        try app.pool.query("UPDATE share_links SET password_hash = $1", [try Password.hash("a brand new password")])
        #expect(try visitor.get(link + "/photos/\(album.photos[0])").status == 403)
    }

    @Test func secureSitesScopeTheCookieSecurely() throws {
        let app = try TestApp(configure: { $0.publicURL = "https://photos.example.org" })
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", password: "open sesame, please")
        #expect(link.hasPrefix("/s/"))
        let visitor = app.browser()
        let csrf = try #require(try visitor.get(link).csrfToken)
        let right = try visitor.post(link, form: [("_csrf", csrf), ("password", "open sesame, please")])
        let cookie = try #require(right.headerValues("Set-Cookie").first { $0.hasPrefix("__Secure-" + ShareGate.cookie + "=") })
        #expect(cookie.contains("Path=\(link);") && cookie.hasSuffix("; Secure"))
        #expect(try visitor.get(link + "/album.json").status == 200)
    }

    @Test func hideLocationLeavesNoCoordinateAnywhere() throws {
        let app = try TestApp(configure: { $0.publicURL = "https://photos.example.org" })
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", hide: true)
        let visitor = app.browser()
        var texts: [(String, String)] = []
        for url in [link, link + "/album.json", link + "/album.html", link + "/photos/\(album.photos[0])/view"] {
            let page = try visitor.get(url)
            #expect(page.status == 200, "\(url)")
            texts.append((url, page.body + page.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")))
        }
        let page = texts[0].1
        #expect(page.contains("<h1>France</h1>"), "the country, no finer")
        #expect(!page.contains("album-map") && !page.contains("data-lat"), "no small map")
        #expect(page.contains("og:image\" content=\"https://photos.example.org\(link)/preview.jpg\""))
        #expect(page.contains("og:title\" content=\"France\""))
        for (url, text) in texts {
            for secret in Self.coordinateTexts + ["Lyon", "Auvergne"] {
                #expect(!Self.withoutTokens(text).contains(secret), "\(url) shows \(secret)")
            }
        }
        // The image bytes: every width and the preview, without the metadata segments, and still a
        // JPEG that decodes. The owner's own copy keeps them (so this could fail).
        let owners = try album.owner.get("/photos/\(album.photos[0])")
        #expect(ImageMetadata.hasMetadata(owners.bodyBytes) && owners.body.contains("GPSLatitude"))
        for url in [link + "/photos/\(album.photos[0])", link + "/photos/\(album.photos[0])?w=256", link + "/preview.jpg"] {
            let image = try visitor.get(url)
            #expect(image.status == 200 && image.header("Content-Type") == "image/jpeg", "\(url)")
            #expect(!ImageMetadata.hasMetadata(image.bodyBytes), "\(url)")
            let text = String(decoding: image.bodyBytes, as: UTF8.self)
            for secret in Self.coordinateTexts + ["Lyon", "Exif", "GPS", "ns.adobe.com", "Photoshop"] {
                #expect(!text.contains(secret), "\(url) carries \(secret)")
            }
            #expect(!Thumbnailer.thumbnails(of: image.bodyBytes).isEmpty, "\(url) still decodes")
        }
    }

    /// `admin disable` closes every link of that person at once, photos included, as links that
    /// do not exist; `enable` does not open them again (migration 0123: a link dies with its
    /// maker's right; made again, it opens); deleting the person deletes them.
    @Test func aDisabledPersonsLinksCloseForGood() throws {
        let app = try TestApp()
        let album = try Self.album(app, email: "Sam.Sharer@example.org")
        let albumLink = try Self.share(album.owner, path: "/pins/\(album.pin)/shares")
        let mapLink = try Self.share(album.owner, path: "/shares")
        let urls = Self.resources(albumLink, photo: album.photos[0]) + [mapLink, mapLink + "/pins/\(album.pin)/album.json"]
        let visitor = app.browser()
        for url in urls { #expect(try visitor.get(url).status == 200, "\(url)") }
        let people = PeopleAdmin(pool: app.pool)
        try people.disable(email: "sam.sharer@EXAMPLE.org")
        let unknown = try visitor.get("/s/" + Tokens.make())
        for url in urls {
            let page = try visitor.get(url)
            #expect(page.status == 404 && page.body.contains("does not exist") && !Self.isImage(page), "\(url): \(page.status)")
        }
        #expect(try visitor.get(mapLink).body == unknown.body)
        try people.enable(email: "SAM.SHARER@example.org")
        for url in urls { #expect(try visitor.get(url).status == 404, "\(url)") }
        try people.delete(email: "sam.sharer@example.org")
        #expect(try visitor.get(albumLink).status == 404)
        #expect(try app.count("SELECT count(*) FROM share_links") == 0)
    }

    /// An imported pin is named by its file: a hidden link shows none of that name anywhere under
    /// the link (album and map links, every page, the preview tags), only the country our place
    /// index puts it in, or the label the owner wrote for an album link.
    @Test func hideLocationShowsNoNameTheOwnerDidNotWriteForTheLink() throws {
        let app = try TestApp(configure: { $0.publicURL = "https://photos.example.org" })
        let album = try Self.album(app)
        let fileName = "Grandma's house Rue Mercière"
        try app.pool.query("UPDATE pins SET place_name = $2 WHERE id = $1", [album.pin, fileName])
        let albumLink = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", hide: true)
        let mapLink = try Self.share(album.owner, path: "/shares", hide: true)
        let labelled = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", hide: true, label: "Summer 2026")
        let visitor = app.browser()
        let photo = album.photos[0]
        var urls = Self.resources(albumLink, photo: photo).filter { !$0.contains("/photos/\(photo)?") && !$0.hasSuffix("/photos/\(photo)") && !$0.hasSuffix(".jpg") }
        urls += [mapLink, mapLink + "/pins/\(album.pin)", mapLink + "/pins/\(album.pin)/album.json", mapLink + "/pins/\(album.pin)/album.html",
                 labelled, labelled + "/photos/\(photo)/view"]
        for url in urls {
            let page = try visitor.get(url)
            #expect(page.status == 200, "\(url)")
            let text = Self.withoutTokens(page.body + page.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n"))
            for secret in ["Grandma", "Mercière", "Merci&#232;re", "Rue", "house"] + Self.coordinateTexts {
                #expect(!text.contains(secret), "\(url) shows \(secret)")
            }
        }
        let page = try visitor.get(albumLink).body
        #expect(page.contains("<h1>France</h1>") && page.contains("og:title\" content=\"France\""), "the country from the place index")
        #expect(try visitor.get(mapLink).body.contains(">France</a>"))
        let named = try visitor.get(labelled).body
        #expect(named.contains("<h1>Summer 2026</h1>"), "the owner's label for the link")
        // Without hiding, the owner's name for the place is the album's title, as before.
        let open = try Self.share(album.owner, path: "/pins/\(album.pin)/shares")
        #expect(try visitor.get(open).body.contains("Grandma&#39;s house") || (try visitor.get(open).body.contains("Grandma&#x27;s house")))
    }

    @Test func metadataStrippingKeepsTheImage() throws {
        let stripped = try #require(ImageMetadata.strippedJPEG(Self.jpegWithMetadata))
        let plain = Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/coins.jpg")))
        #expect(ImageMetadata.hasMetadata(Self.jpegWithMetadata) && !ImageMetadata.hasMetadata(stripped))
        #expect(ImageInspector.inspect(stripped) == ImageInspector.inspect(plain))
        #expect(stripped.count <= plain.count)
        #expect(ImageMetadata.strippedJPEG(Array("not a jpeg".utf8)) == nil)
        #expect(ImageMetadata.strippedJPEG([0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xFF]) == nil, "a segment longer than the file")
    }

    @Test func theLinkTableHoldsNoUsableToken() throws {
        let app = try TestApp()
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", password: "open sesame, please", label: "table")
        let token = String(link.dropFirst(3))
        let row = try app.pool.query("SELECT share_links::text AS whole, encode(token_hash, 'hex') AS hex, password_hash FROM share_links")[0]
        let whole: String = try row.decode("whole"), hex: String = try row.decode("hex")
        #expect(!whole.contains(token) && !whole.contains(String(token.prefix(12))))
        #expect(!whole.contains("open sesame"))
        #expect(hex == SHA256.hex(Array(token.utf8)), "the SHA-256 of the token")
        #expect(try row.decode("password_hash", as: String.self).hasPrefix("$y$"))
        // Nothing in the row opens the link when used as a token.
        let digest = stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
        let base64 = Data(digest).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        for candidate in [hex, base64, String(hex.prefix(43))] {
            #expect(try app.browser().get("/s/" + candidate).status == 404)
        }
    }

    @Test func anotherPersonCannotListMakeOrRevokeYourLinks() throws {
        let app = try TestApp()
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", label: "Only mine")
        let intruder = try app.signedUp(email: "nosy@example.org")
        let csrf = try #require(try intruder.get("/shares").csrfToken)
        var before = try app.fingerprint()
        #expect(try intruder.get("/pins/\(album.pin)/shares").status == 404)
        #expect(try intruder.post("/pins/\(album.pin)/shares", form: [("_csrf", csrf), ("label", "mine now")]).status == 404)
        let id: Int64 = try app.pool.query("SELECT id FROM share_links")[0].decode("id")
        #expect(try intruder.post("/shares/\(id)/revoke", form: [("_csrf", csrf)]).status == 404)
        #expect(try app.fingerprint() == before, "nothing changed")
        let theirs = try intruder.get("/shares")
        #expect(theirs.status == 200 && !theirs.body.contains("Only mine") && theirs.body.contains("No links yet"))
        #expect(try app.browser().get(link).status == 200, "still open")
        // The visit is the link's last use, kept on its row.
        before = try app.fingerprint()
        let mine = try album.owner.get("/shares")
        #expect(mine.body.contains("Only mine") && mine.body.contains("action=\"/shares/\(id)/revoke\""))
        // Without a CSRF token nothing is made or revoked.
        #expect(try album.owner.post("/shares/\(id)/revoke", form: []).status == 403)
        #expect(try album.owner.post("/pins/\(album.pin)/shares", form: [("label", "x")]).status == 403)
        #expect(try app.fingerprint() == before)
    }

    @Test func aMapLinkShowsThePlacesAndTheirAlbumsOnly() throws {
        let app = try TestApp()
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/shares", label: "Everything")
        let stranger = try Self.album(app)
        let visitor = app.browser()
        let page = try visitor.get(link)
        #expect(page.status == 200 && page.body.contains("href=\"\(link)/pins/\(album.pin)\"") && page.body.contains("noindex"))
        #expect(!page.body.contains("method=\"post\""))
        // The places on a map as well (the script's data: ids and coordinates).
        #expect(page.body.contains("id=\"share-map\"") && page.body.contains("&quot;id&quot;:\(album.pin)"))
        let albumPage = try visitor.get(link + "/pins/\(album.pin)")
        #expect(albumPage.status == 200 && albumPage.body.contains("\(link)/photos/\(album.photos[0])?w=256"))
        #expect(albumPage.body.contains("data-base=\"\(link)/pins/\(album.pin)\""))
        #expect(try visitor.get(link + "/pins/\(album.pin)/album.json").status == 200)
        #expect(try visitor.get(link + "/photos/\(album.photos[1])").status == 200)
        // Someone else's album and photos are not the owner's map.
        #expect(try visitor.get(link + "/pins/\(stranger.pin)").status == 404)
        #expect(try visitor.get(link + "/pins/\(stranger.pin)/album.json").status == 404)
        #expect(try visitor.request("HEAD", link + "/pins/\(stranger.pin)/events").status == 404)
        #expect(try visitor.get(link + "/photos/\(stranger.photos[0])").status == 404)

        // Hiding the location: no map, no coordinates, the country only, on the list and the albums.
        let hidden = try Self.share(album.owner, path: "/shares", hide: true)
        for url in [hidden, hidden + "/pins/\(album.pin)", hidden + "/pins/\(album.pin)/album.json"] {
            let text = try visitor.get(url).body
            #expect(!text.contains("id=\"share-map\"") && !text.contains("album-map"), "\(url)")
            for secret in Self.coordinateTexts + ["Lyon", "Auvergne"] { #expect(!text.contains(secret), "\(url) shows \(secret)") }
        }
        #expect(try visitor.get(hidden).body.contains(">France</a>"))
    }

    @Test func visitsAreRateLimitedPerAddressAndPasswordTriesPerLink() throws {
        let app = try TestApp(configure: {
            $0.shareLimits.pagesPerAddressPerMinute = 6
            $0.shareLimits.passwordTriesPer10Minutes = 2
        })
        let album = try Self.album(app)
        let link = try Self.share(album.owner, path: "/pins/\(album.pin)/shares", password: "open sesame, please")
        let visitor = app.browser()
        let csrf = try #require(try visitor.get(link).csrfToken)
        for _ in 0..<2 {
            #expect(try visitor.post(link, form: [("_csrf", csrf), ("password", "a wrong guess")]).status == 403)
        }
        let locked = try visitor.post(link, form: [("_csrf", csrf), ("password", "open sesame, please")])
        #expect(locked.status == 429 && locked.body.contains("Too many wrong passwords") && locked.header("Retry-After") != nil)
        // Four requests used of six; made-up tokens count too (a crawler pays per guess).
        for _ in 0..<2 { _ = try visitor.get("/s/" + Tokens.make()) }
        let refused = try visitor.get(link)
        #expect(refused.status == 429 && refused.body.contains("Wait a minute") && refused.header("Retry-After") == "60")
        #expect(!Self.isImage(try visitor.get(link + "/photos/\(album.photos[0])")))
    }

    /// The limiter's table stays bounded whatever number of addresses come, and what it forgets
    /// first is the address seen longest ago.
    @Test func theLimitersTableStaysBoundedUnderAHundredThousandAddresses() {
        var limits = ShareRateLimit.Limits()
        limits.tableLimit = 50_000
        let limit = ShareRateLimit(limits)
        let now = ContinuousClock.now
        var refused = 0
        for n in 0..<100_000 where !limit.allowVisit(.load, from: "10.\(n >> 16).\((n >> 8) & 255).\(n & 255)", now: now) { refused += 1 }
        #expect(refused == 0 && limit.count == 50_000)
        // A fresh bucket for an address dropped long ago: full again.
        #expect(limit.allowVisit(.load, from: "10.0.0.0", now: now))
    }
}

/// The share limits with their defaults, over loopback: what a household gets, what a crawler
/// gets. Hundreds of requests each (tens of seconds in a debug build), so tagged slow.
@Suite(.tags(.slow)) struct ShareLimitTests {
    /// A household behind one router, with the default limits: six people each open the three
    /// albums a friend shared (30 thumbnails each, the data the page loads, a photo, a reload)
    /// within the minute. Visits are counted, not the thumbnails they bring: nobody is refused.
    @Test func sixPeopleBehindOneAddressOpeningThreeAlbumsOfThirtyAreNeverRefused() throws {
        // TestApp has the connection rate off (its client opens a connection a request where a
        // browser keeps a few): only the share limits are measured here.
        let app = try TestApp()
        let albums = try (0..<3).map { _ in try ShareLinkTests.album(app, photos: 30) }
        let links = try albums.map { try ShareLinkTests.share($0.owner, path: "/pins/\($0.pin)/shares") }
        var statuses: [Int: Int] = [:]
        for _ in 0..<6 {
            let visitor = app.browser()
            for (album, link) in zip(albums, links) {
                var urls = [link, link + "/album.json", link + "/album.html"]
                urls += album.photos.map { link + "/photos/\($0)?w=256" }
                urls += [link + "/photos/\(album.photos[3])/view", link + "/photos/\(album.photos[3])", link]
                for url in urls { statuses[try visitor.get(url).status, default: 0] += 1 }
                statuses[try visitor.request("HEAD", link + "/events").status, default: 0] += 1
            }
        }
        #expect(statuses == [200: 6 * 3 * 37], "\(statuses)")
    }

    /// A crawler guessing tokens from one address: a few dozen guesses reach the database, then
    /// every guess is refused before the lookup, and a real link from that address too.
    @Test func aCrawlerGuessingTokensIsRefusedAfterAFewDozen() throws {
        // TestApp has the connection rate off: what refuses the crawler here is the share limit alone.
        let app = try TestApp()
        let album = try ShareLinkTests.album(app)
        let link = try ShareLinkTests.share(album.owner, path: "/pins/\(album.pin)/shares")
        let crawler = app.browser()
        var statuses: [Int] = []
        for n in 0..<1000 {
            statuses.append(try crawler.get(n % 2 == 0 ? "/s/" + Tokens.make() : "/s/\(Tokens.make())/photos/\(n)").status)
        }
        let misses = statuses.filter { $0 == 404 }.count
        #expect(misses == ShareRateLimit.Limits().missesPerAddressPerHour, "\(misses) guesses reached the database")
        #expect(statuses.dropFirst(misses).allSatisfy { $0 == 429 } && statuses.count == 1000,
                "\(Dictionary(statuses.map { ($0, 1) }, uniquingKeysWith: +)), first refusal at \(statuses.firstIndex(of: 429) ?? -1)")
        #expect(try crawler.get(link).status == 429, "the guessing address is refused on real links too")
    }
}

/// docs/admin.md's share-link SQL, run as written.
@Suite struct ShareLinkAdminRecipeTests {
    @Test func theAdminListsAndRevokesLinksWithSQL() throws {
        let app = try TestApp()
        let album = try ShareLinkTests.album(app, email: "person@example.org")
        let reported = try ShareLinkTests.share(album.owner, path: "/pins/\(album.pin)/shares", label: "reported")
        let other = try ShareLinkTests.share(album.owner, path: "/shares", label: "the map")
        let someoneElse = try ShareLinkTests.album(app)
        let kept = try ShareLinkTests.share(someoneElse.owner, path: "/pins/\(someoneElse.pin)/shares")
        let list = try app.pool.query(try AdminRecipeTests.recipe(containing: "FROM share_links s JOIN users"))
        #expect(list.count == 3)
        #expect(try list.map { try $0.decode("shows", as: String.self) }.sorted()
                == [ShareLinkTests.placeName, ShareLinkTests.placeName, "whole map"].sorted())
        #expect(try list.allSatisfy { try $0.decode("state", as: String.self) == "open" })

        let byToken = try AdminRecipeTests.recipe(containing: "THE-TOKEN-FROM-THE-LINK")
            .replacingOccurrences(of: "THE-TOKEN-FROM-THE-LINK", with: String(reported.dropFirst(3)))
        try app.pool.withConnection { try $0.execute(byToken) }
        #expect(try app.browser().get(reported).status == 410)
        #expect(try app.browser().get(other).status == 200)

        try app.pool.withConnection { try $0.execute(try AdminRecipeTests.recipe(containing: "share_links SET revoked_at = now()\nWHERE revoked_at IS NULL AND user_id")) }
        #expect(try app.browser().get(other).status == 410)
        #expect(try app.browser().get(kept).status == 200, "another person's link stays open")
        let states = try app.pool.query(try AdminRecipeTests.recipe(containing: "FROM share_links s JOIN users"))
            .map { try $0.decode("state", as: String.self) }
        #expect(states.sorted() == ["open", "revoked", "revoked"])
    }
}

/// The share pages with hostile names, through the same HTML parser as every other page.
@Suite struct SharePageMarkupTests {
    @Test func everySharePageEscapesWhatItShows() throws {
        let app = try TestApp()
        let album = try ShareLinkTests.album(app)
        let hostile = PageTests.markup
        try app.pool.query("UPDATE photos SET title = $1, owner_name = $2", [hostile, PageTests.scripts])
        try app.pool.query("UPDATE pins SET place_name = $1", [hostile + ", " + PageTests.scripts])
        let pages = try PageTests.Pages()
        let owner = album.owner
        let token = try #require(try owner.get("/pins/\(album.pin)/shares").csrfToken)
        let made = try owner.post("/pins/\(album.pin)/shares", form: [("_csrf", token), ("label", hostile), ("expires_days", "7")])
        pages.save(made, "share page with the new link", status: 201, expect: [hostile])
        let link = try #require(made.body.firstMatch(of: /id="new-share-url" value="([^"]*)"/).map { String($0.1) })
        let refused = try owner.post("/pins/\(album.pin)/shares", form: [("_csrf", token), ("label", hostile), ("password", "short")])
        pages.save(refused, "share page, password too short", status: 422, expect: [hostile])
        // A label past the limit in code points (each family emoji is five): cut, not a 500.
        let long = try owner.post("/shares", form: [("_csrf", token), ("label", String(repeating: "👩‍👩‍👧", count: 60))])
        #expect(long.status == 201)
        #expect(try app.count("SELECT max(length(label)) FROM share_links") == ShareLinks.maxLabelLength)
        let mapLink = try owner.post("/shares", form: [("_csrf", token), ("label", PageTests.scripts), ("password", "long enough password")])
        pages.save(mapLink, "all share links", status: 201, expect: [hostile, PageTests.scripts])
        let map = try #require(mapLink.body.firstMatch(of: /id="new-share-url" value="([^"]*)"/).map { String($0.1) })

        let visitor = app.browser()
        pages.save(try visitor.get(link), "shared album", expect: [hostile, PageTests.scripts])
        pages.save(try visitor.get(link + "/album.html"), "shared album fragment", expect: [hostile], fragment: true)
        pages.save(try visitor.get(link + "/photos/\(album.photos[0])/view"), "shared photo", expect: [hostile, PageTests.scripts])
        let ask = try visitor.get(map)
        pages.save(ask, "share password page", status: 403)
        let wrong = try visitor.post(map, form: [("_csrf", try #require(ask.csrfToken)), ("password", "not the one")])
        pages.save(wrong, "share password page, wrong password", status: 403)
        #expect(try visitor.post(map, form: [("_csrf", try #require(ask.csrfToken)), ("password", "long enough password")]).status == 303)
        pages.save(try visitor.get(map), "shared map", expect: [hostile])
        pages.save(try visitor.get(map + "/pins/\(album.pin)"), "shared map's album", expect: [hostile])
        try pages.check()
    }
}

/// Share tokens never reach the access log whole.
@Suite struct ShareLinkLogTests {
    final class Lines: @unchecked Sendable {
        let lock = NSLock()
        var lines: [String] = []
        func add(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
    }

    @Test func theAccessLogShowsOnlyATokensFirstCharacters() throws {
        let lines = Lines()
        let app = try TestApp(server: { $0.accessLog = { lines.add($0.line) } })
        let album = try ShareLinkTests.album(app)
        let link = try ShareLinkTests.share(album.owner, path: "/pins/\(album.pin)/shares")
        let token = String(link.dropFirst(3))
        #expect(try app.browser().get(link + "/photos/\(album.photos[0])?w=256").status == 200)
        #expect(try app.browser().get(link).status == 200)
        let logged = lines.all
        #expect(logged.contains { $0.contains("GET /s/\(token.prefix(4))…/photos/\(album.photos[0])") && $0.contains(" 200 ") }, "\(logged)")
        #expect(logged.contains { $0.contains("GET /s/\(token.prefix(4))… 200") }, "\(logged)")
        #expect(!logged.contains { $0.contains(String(token.prefix(8))) })
        #expect(logged.contains { $0.contains("/pins/\(album.pin)/shares") }, "other paths as they are")
        #expect(LoggedPath.redacted("/s/ab") == "/s/ab" && LoggedPath.redacted("/sign-in") == "/sign-in")
    }
}

/// Every line the server logs about share requests that fail, errors and outages included, keeps
/// the token cut as the access log does (one redaction: `ServerConfiguration.loggedPath`).
@Suite(.tags(.fault)) struct SecretsInLogsTests {
    @Test func noLogLineCarriesAShareTokenAfterA500OrADatabaseOutage() throws {
        let cluster = try TemporaryCluster()
        let connection = try PostgresConnection(url: cluster.url)
        _ = try Migrator(directory: TestDatabase.migrationsDirectory).migrate(connection)
        connection.close()
        let lines = ShareLinkLogTests.Lines()
        let stop = Logger.observe { lines.add($0) }
        defer { stop() }
        let app = try TestApp(database: cluster.url, server: { $0.accessLog = { lines.add($0.line) } })
        let album = try ShareLinkTests.album(app)
        let link = try ShareLinkTests.share(album.owner, path: "/pins/\(album.pin)/shares")
        let token = String(link.dropFirst(3))
        let visitor = app.browser()

        // A photo whose blob is missing from the store: a 500, logged as an error.
        try app.pool.query("UPDATE photos SET bytes = NULL, hash = decode(repeat('ab', 32), 'hex') WHERE id = $1", [album.photos[0]])
        let broken = try visitor.get(link + "/photos/\(album.photos[0])")
        #expect(broken.status >= 500, "\(broken.status)")
        // The database away: every share request 503, each logged.
        try cluster.stop()
        for url in [link, link + "/album.json", link + "/photos/\(album.photos[1])"] {
            #expect(try visitor.get(url).status == 503, "\(url)")
        }
        try cluster.start()
        #expect(eventually(timeout: 30) { (try? visitor.get(link).status) == 200 })

        let logged = lines.all
        #expect(logged.contains { $0.contains("/s/\(token.prefix(4))…/photos/\(album.photos[0])") && !$0.contains(" 500 ") },
                "the error itself is logged, with the token cut: \(logged.suffix(20))")
        #expect(logged.contains { $0.contains("503") && $0.contains("/s/\(token.prefix(4))…") }, "\(logged.suffix(20))")
        let leaks = logged.filter { $0.contains(String(token.prefix(8))) }
        #expect(leaks.isEmpty, "\(leaks)")
    }
}
