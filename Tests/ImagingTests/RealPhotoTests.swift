import Foundation
import Testing
@testable import Imaging
import TestSupport

/// Files from real phones and cameras (Photos/SOURCES.md): their tags read as exiftool reads
/// them, and their versions made.
@Suite struct RealPhotoTests {
    static func file(_ name: String) throws -> (bytes: [UInt8], path: String) { try Samples.file(name) }

    /// exiftool's reading of a file on disk, by its path.
    static func reference(_ path: String) throws -> [String: Any] {
        let json = try ExifTool.run(["-j", "-n", "-G1", "-a", path])
        return try #require((try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])?.first)
    }

    /// `ultrahdr.jpg` is a Pixel 6 file cut short where Pillow's tests keep it (its image data ends
    /// without an EOI): its tags are read, and it is refused as incomplete, as a phone's file that a
    /// transfer cut short would be.
    @Test(arguments: ["pug.heic", "ultrahdr.jpg", "nikon-d2h.jpg"])
    func positionAndTimeAreReadAsExiftoolReadsThem(name: String) throws {
        let (bytes, path) = try Self.file(name)
        let reference = try Self.reference(path)
        if name == "ultrahdr.jpg" {
            #expect(throws: ImageRefusal.truncated(.jpeg)) { try PhotoVersions.make(from: bytes) }
        }
        let tags = name == "ultrahdr.jpg" ? CameraTags.read(bytes) : try PhotoVersions.make(from: bytes).tags
        let latitude = try #require(reference["Composite:GPSLatitude"] as? Double)
        let longitude = try #require(reference["Composite:GPSLongitude"] as? Double)
        #expect(abs(try #require(tags.latitude) - latitude) < 1e-7, "\(name)")
        #expect(abs(try #require(tags.longitude) - longitude) < 1e-7, "\(name)")
        let original = try #require(reference["ExifIFD:DateTimeOriginal"] as? String)
        #expect(tags.takenLocal == CameraTags.isoLocal(original), "\(name)")
        if let offset = reference["ExifIFD:OffsetTimeOriginal"] as? String {
            #expect(tags.offsetMinutes == CameraTags.offsetMinutes(offset), "\(name)")
        } else {
            #expect(tags.offsetMinutes == nil)
        }
        let make = reference["IFD0:Make"] as? String ?? ""
        #expect(tags.camera?.lowercased().contains((reference["IFD0:Model"] as? String ?? "?").lowercased()) == true, "\(name): \(tags.camera ?? "-") \(make)")
        guard name != "ultrahdr.jpg" else { return }
        // The versions: upright at the original's size as shown, no tags at all.
        let versions = try PhotoVersions.make(from: bytes)
        #expect(max(versions.displayWidth, versions.displayHeight) == min(2048, max(versions.width, versions.height)))
        #expect(!CameraTags.read(versions.display).hasPosition && CameraTags.read(versions.display).camera == nil)
    }

    /// The iPhone's HEIC: 4032 × 3024 from its grid of tiles, Apple's Display P3 profile carried
    /// into every version.
    @Test func theIPhonesHEICKeepsItsColourProfile() throws {
        let (bytes, _) = try Self.file("pug.heic")
        let versions = try PhotoVersions.make(from: bytes)
        #expect(versions.format == .heif && (versions.width, versions.height) == (4032, 3024))
        #expect((versions.displayWidth, versions.displayHeight) == (2048, 1536))
        #expect(versions.tags.camera == "Apple iPhone 13 Pro" && versions.tags.offsetMinutes == 180)
        let profile = try #require(ColourProfile.inJPEG(versions.display))
        let described = try ExifTool.tags(of: versions.display)
        #expect((described["ICC-header:ColorSpaceData"] as? String)?.hasPrefix("RGB") == true, "\(described.filter { $0.key.hasPrefix("ICC") })")
        #expect((described["ICC_Profile:ProfileDescription"] as? String) == "Display P3", "\(described.filter { $0.key.hasPrefix("ICC") })")
        for (_, thumbnail) in versions.thumbnails { #expect(ColourProfile.inJPEG(thumbnail) == profile) }
    }

    @Test func aWebPsAndAPNGsTagsAndPixels() throws {
        let webp = try PhotoVersions.make(from: try Self.file("flower.webp").bytes)
        #expect(webp.format == .webp && (webp.width, webp.height) == (480, 360))
        #expect(webp.tags.takenLocal == "2003-12-14T12:01:44" && webp.tags.camera == "Canon PowerShot S40")
        let png = try PhotoVersions.make(from: try Self.file("exif.png").bytes)
        #expect(png.format == .png && (png.width, png.height) == (512, 512))
    }
}
