import Foundation
import Testing
import PhotoFixture
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Tile-sized copies of album photos, made at download and served at /photos/ID?w=256|512.
@Suite struct TileThumbnailTests {
    static func photo(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/" + name)))
    }

    /// The tile-sized copies are small enough for the page's image bytes to fall to a quarter.
    @Test func thumbnailQualityIsChosenPerWidth() throws {
        #expect(Thumbnailer.quality(forWidth: 256) == 65)
        #expect(Thumbnailer.quality(forWidth: 512) == 72)
        for name in ["astronaut.jpg", "rocket.jpg", "hubble_deep_field.jpg"] {
            let original = try Self.photo(name)
            let small = try #require(Thumbnailer.thumbnails(of: original)[256], "\(name)")
            #expect(small.count * 2 < original.count, "\(name): \(small.count) of \(original.count) bytes")
        }
    }

    @Test func albumTilesComeFromThumbnails() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        // Every photo stored, with and without thumbnails (the fixture's photos are 300–640 px:
        // the wider get the 256 px copy, none is wide enough for a 512 px one).
        #expect(try AlbumTests.settled(browser, pin: pin).count("ready") == 30)
        #expect(try app.count("SELECT count(*) FROM photos WHERE thumb_256 IS NOT NULL AND thumb_512 IS NULL") > 0)
        #expect(try app.count("SELECT count(*) FROM photos WHERE thumb_512 IS NOT NULL") == 0)
        let page = try browser.get("/pins/\(pin)")
        #expect(page.body.contains("?w=256 256w, /photos/"))
        // The live region says the album is ready (the progress bar itself is hidden from readers).
        #expect(page.body.contains("Album ready: 30 photos."))
        let id = try app.count("SELECT min(id) FROM photos WHERE thumb_256 IS NOT NULL")
        let full = try browser.get("/photos/\(id)")
        let tile = try browser.get("/photos/\(id)?w=256")
        let large = try browser.get("/photos/\(id)?w=512")
        #expect(tile.status == 200 && tile.header("Content-Type") == "image/jpeg")
        #expect(tile.body.utf8.count < full.body.utf8.count)
        #expect(tile.header("ETag") != full.header("ETag"))
        #expect(large.header("ETag") != tile.header("ETag"))
        // Each variant answers 304 to its own ETag.
        let again = try browser.get("/photos/\(id)?w=256", headers: [("If-None-Match", tile.header("ETag") ?? "")])
        #expect(again.status == 304)
        // Widths outside the two are read into range; garbage is the photo itself.
        #expect(try browser.get("/photos/\(id)?w=100").header("ETag") == tile.header("ETag"))
        #expect(try browser.get("/photos/\(id)?w=1e308").header("ETag") == full.header("ETag"))
        #expect(try browser.get("/photos/\(id)?w=abc").header("ETag") == full.header("ETag"))
        // The photo's own bytes left the row for the store.
        #expect(try app.count("SELECT count(*) FROM photos WHERE bytes IS NOT NULL") == 0)
    }
}

/// The picker opens on photos that can still be added, and the album's "collection N of M"
/// follows a New Collection.
@Suite struct PickerAndCounterTests {
    @Test func pickerOpensPastTheAlbumsOwnPageAndCountsWhatIsNew() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.page == 1)
        let opened = try browser.get("/pins/\(pin)/picker")
        #expect(opened.body.contains("Page 2 of"))
        #expect(!opened.body.contains("(in the album)"))
        let first = try browser.get("/pins/\(pin)/picker?page=1")
        #expect(first.body.contains("All 30 photos on this page are in the album already"))
        // The album's page counter is in the fragment the page patches itself with.
        let token = try browser.get("/").csrfToken ?? ""
        _ = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)])
        let next = try AlbumTests.settled(browser, pin: pin)
        let fragment = try browser.get("/pins/\(pin)/album.html")
        #expect(fragment.body.contains("data-page-info=\" · collection \(next.page ?? 0) of"))
    }
}
