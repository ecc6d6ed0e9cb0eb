import Foundation
import Testing
import CTurboJPEG
@testable import Imaging
import TestSupport

/// The versions made of a person's photo: the right way up, small, in the original's colours, and
/// with nothing else of the original in them (no location).
@Suite struct PhotoVersionTests {
    static let red: [UInt8] = [220, 30, 30], green: [UInt8] = [30, 200, 40], blue: [UInt8] = [30, 40, 220], white: [UInt8] = [245, 245, 245]

    /// An image of four coloured quarters.
    static func quarters(width: Int, height: Int, _ topLeft: [UInt8], _ topRight: [UInt8], _ bottomLeft: [UInt8], _ bottomRight: [UInt8]) -> RGBImage {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                pixels += y < height / 2 ? (x < width / 2 ? topLeft : topRight) : (x < width / 2 ? bottomLeft : bottomRight)
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    /// The colour at a point of a JPEG, decoded by TurboJPEG.
    static func decode(_ jpeg: [UInt8]) throws -> RGBImage {
        let handle = try #require(tjInitDecompress())
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        _ = jpeg.withUnsafeBufferPointer { tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace) }
        var pixels = [UInt8](repeating: 0, count: Int(width * height * 3))
        let result = jpeg.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { tjDecompress2(handle, source.baseAddress, UInt(source.count), $0.baseAddress, width, 0, height, Int32(TJPF_RGB.rawValue), 0) }
        }
        #expect(result == 0)
        return RGBImage(width: Int(width), height: Int(height), pixels: pixels)
    }

    static func colour(_ image: RGBImage, x: Int, y: Int) -> [UInt8] {
        let at = (y * image.width + x) * 3
        return Array(image.pixels[at..<(at + 3)])
    }

    static func near(_ a: [UInt8], _ b: [UInt8]) -> Bool { zip(a, b).allSatisfy { abs(Int($0) - Int($1)) <= 40 } }

    /// Where each corner of the picture as seen sits in the stored pixels, for each EXIF
    /// Orientation, from TIFF 6.0's words ("the 0th row represents the visual right-hand side, the
    /// 0th column the visual top" for 6, …), not from the code under test: stored top-left,
    /// top-right, bottom-left, bottom-right, with R G B W the seen image's TL TR BL BR.
    static let stored: [Int: (String, String, String, String)] = [
        1: ("R", "G", "B", "W"), 2: ("G", "R", "W", "B"), 3: ("W", "B", "G", "R"), 4: ("B", "W", "R", "G"),
        5: ("R", "B", "G", "W"), 6: ("G", "W", "R", "B"), 7: ("W", "G", "B", "R"), 8: ("B", "R", "W", "G"),
    ]

    @Test(arguments: 1...8)
    func everyOrientationComesOutUpright(orientation: Int) throws {
        let colours = ["R": Self.red, "G": Self.green, "B": Self.blue, "W": Self.white]
        let corners = try #require(Self.stored[orientation])
        // Seen as 320 × 240; stored as 240 × 320 when the orientation turns it.
        let turned = orientation >= 5
        let image = Self.quarters(width: turned ? 240 : 320, height: turned ? 320 : 240, colours[corners.0]!, colours[corners.1]!, colours[corners.2]!, colours[corners.3]!)
        let jpeg = try ExifTool.writing(["-Orientation=\(orientation)"], to: try #require(PhotoVersions.encode(image, quality: 95, profile: nil)))
        #expect(CameraTags.read(jpeg).orientation == orientation)

        let versions = try PhotoVersions.make(from: jpeg)
        #expect((versions.width, versions.height) == (320, 240))
        let display = try Self.decode(versions.display)
        #expect((display.width, display.height) == (320, 240))
        for (x, y, expected) in [(40, 30, Self.red), (280, 30, Self.green), (40, 210, Self.blue), (280, 210, Self.white)] {
            #expect(Self.near(Self.colour(display, x: x, y: y), expected), "orientation \(orientation) at \(x),\(y): \(Self.colour(display, x: x, y: y))")
        }
        // The thumbnails too (256 wide: the display is narrower than 512).
        let thumbnail = try Self.decode(try #require(versions.thumbnails[256]))
        #expect((thumbnail.width, thumbnail.height) == (256, 192))
        #expect(Self.near(Self.colour(thumbnail, x: 20, y: 20), Self.red) && Self.near(Self.colour(thumbnail, x: 236, y: 172), Self.white))
        #expect(versions.thumbnails[512] == nil)
    }

    /// The location in EXIF and in XMP, the time, the camera, a comment: none of it in the display
    /// version or the thumbnails, as exiftool reads them. The colour profile is carried.
    @Test func versionsCarryNoLocationAndKeepTheColourProfile() throws {
        // A profile's bytes with an ICC header: its size (bytes 0–3), colour space "RGB " (16–19)
        // and signature "acsp" (36–39).
        var profile = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        profile.replaceSubrange(0..<4, with: [0, 0, 2, 0x58])
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        profile.replaceSubrange(36..<40, with: Array("acsp".utf8))
        // Without a consistent header, or past 64 KB: not carried.
        var unsigned = profile
        unsigned.replaceSubrange(36..<40, with: Array("xxxx".utf8))
        #expect(!ColourProfile.isRGB(unsigned) && !ColourProfile.isRGB(profile + [0]) && ColourProfile.isRGB(profile))
        let withProfile = ColourProfile.embedding(profile, in: try Samples.chelsea())
        #expect(ColourProfile.inJPEG(withProfile) == profile)
        let photo = try ExifTool.writing([
            "-GPSLatitude=48.85837", "-GPSLatitudeRef=N", "-GPSLongitude=2.29448", "-GPSLongitudeRef=E",
            "-XMP-exif:GPSLatitude=48.85837", "-XMP-exif:GPSLongitude=2.29448", "-XMP-dc:Description=our house",
            "-DateTimeOriginal=2024:05:03 14:22:10", "-Make=Apple", "-Model=iPhone 12 mini", "-Comment=a secret",
        ], to: withProfile)
        let original = try ExifTool.tags(of: photo)
        #expect(original["GPS:GPSLatitude"] != nil && original["XMP-exif:GPSLatitude"] != nil)
        let versions = try PhotoVersions.make(from: photo)
        #expect(versions.tags.hasPosition && versions.tags.camera == "Apple iPhone 12 mini")
        for (name, bytes) in [("display", versions.display)] + versions.thumbnails.map({ ("thumbnail \($0.key)", $0.value) }) {
            let tags = try ExifTool.tags(of: bytes)
            let leaked = tags.keys.filter { $0.contains("GPS") || $0.hasPrefix("XMP") || $0.hasPrefix("IFD0") || $0.hasPrefix("ExifIFD") || $0 == "File:Comment" }
            #expect(leaked.isEmpty, "\(name) carries \(leaked)")
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("our house") && !text.contains("secret") && !text.contains("Apple"), "\(name)")
            #expect(ColourProfile.inJPEG(bytes) == profile, "\(name) lost the colour profile")
        }
    }

    /// A CMYK or grey profile on RGB pixels would make the colours wrong: only RGB ones are carried.
    @Test func onlyRGBProfilesAreCarried() throws {
        var cmyk = [UInt8](repeating: 1, count: 300)
        cmyk.replaceSubrange(16..<20, with: Array("CMYK".utf8))
        #expect(ColourProfile.inJPEG(ColourProfile.embedding(cmyk, in: try Samples.chelsea())) == nil)
        #expect(!ColourProfile.isRGB(Array(cmyk.prefix(100))))
    }

    @Test func aTruncatedOrCorruptJPEGIsRefusedAndNothingCrashes() throws {
        let jpeg = try Samples.chelsea()
        #expect(throws: ImageRefusal.truncated(.jpeg)) { try PhotoVersions.make(from: Array(jpeg.prefix(jpeg.count / 2))) }
        // Only the header survives: still refused, not shown grey.
        #expect(throws: ImageRefusal.self) { try PhotoVersions.make(from: Array(jpeg.prefix(700))) }
        // Random damage after the header, seeded: refused or made, never a crash.
        var generator = SeededGenerator(seed: 52)
        for _ in 0..<40 {
            var damaged = jpeg
            for _ in 0..<20 { damaged[Int.random(in: 700..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            _ = try? PhotoVersions.make(from: damaged)
        }
        #expect(throws: ImageRefusal.notAnImage) { try PhotoVersions.make(from: Array("<html><body>hello</body></html>".utf8)) }
        #expect(throws: ImageRefusal.notAnImage) { try PhotoVersions.make(from: []) }
    }

    /// A JPEG whose header claims 32,768 × 32,768 (1.07 gigapixels, 3 GB decoded) is refused from
    /// its header, before any decoding (the refusal is thrown before a pixel buffer is made).
    @Test func aPixelBombIsRefusedFromItsHeader() throws {
        var bomb = try Samples.chelsea()
        // SOF0: FF C0, length, precision, then height and width.
        let sof = try #require((0..<(bomb.count - 9)).first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC0 })
        bomb[sof + 5] = 0x80; bomb[sof + 6] = 0x00; bomb[sof + 7] = 0x80; bomb[sof + 8] = 0x00
        #expect(throws: ImageRefusal.tooManyPixels(width: 32_768, height: 32_768, limit: 100_000_000)) { try PhotoVersions.make(from: bomb) }
        #expect(ImageRefusal.tooManyPixels(width: 32_768, height: 32_768, limit: 100_000_000).description
                == "is 32768 × 32768 pixels, more than the 100 megapixels a photo may have here")
    }

    /// An HTML page inside a JPEG's comment (a polyglot): the versions are new pixels, so nothing
    /// of it is served to anyone but as the original, which the routes send as a download.
    @Test func aPolyglotsHTMLIsNotInItsVersions() throws {
        let html = Array("<html><script>alert(document.cookie)</script></html>".utf8)
        var polyglot = try Samples.chelsea()
        let segment: [UInt8] = [0xFF, 0xFE, UInt8((html.count + 2) >> 8), UInt8((html.count + 2) & 0xFF)] + html
        polyglot.insert(contentsOf: segment, at: 2)
        let versions = try PhotoVersions.make(from: polyglot)
        for bytes in [versions.display] + versions.thumbnails.values {
            #expect(!String(decoding: bytes, as: UTF8.self).contains("<script"))
        }
    }

    @Test func largePhotosAreMadeSmallAndSmallOnesKeepTheirSize() throws {
        let big = Self.quarters(width: 4032, height: 3024, Self.red, Self.green, Self.blue, Self.white)
        let versions = try PhotoVersions.make(from: try #require(PhotoVersions.encode(big, quality: 90, profile: nil)))
        #expect((versions.width, versions.height) == (4032, 3024))
        #expect((versions.displayWidth, versions.displayHeight) == (2048, 1536))
        #expect(Set(versions.thumbnails.keys) == [256, 512])
        let thumbnail = try Self.decode(try #require(versions.thumbnails[512]))
        #expect((thumbnail.width, thumbnail.height) == (512, 384))
        let small = try PhotoVersions.make(from: try Samples.chelsea())
        #expect((small.displayWidth, small.displayHeight) == (451, 300))
        #expect(Set(small.thumbnails.keys) == [256])
    }
}
