import Foundation
import Testing
@testable import Imaging
import TestSupport

/// The camera's tags as Imaging reads them, against exiftool's reading of the same file, for tags
/// written the way cameras and phones write them.
@Suite struct CameraTagTests {
    /// Positions in every quarter of the globe, with fractions of seconds, written as degrees,
    /// minutes and seconds with their N/S and E/W references.
    @Test(arguments: [(48.858_37, 2.294_48), (-33.856_78, 151.215_29), (40.689_25, -74.044_5), (-22.951_92, -43.210_49), (64.1466, -21.9426)])
    func gpsIsReadAsExiftoolReadsIt(latitude: Double, longitude: Double) throws {
        let photo = try ExifTool.writing([
            "-GPSLatitude=\(abs(latitude))", "-GPSLatitudeRef=\(latitude < 0 ? "S" : "N")",
            "-GPSLongitude=\(abs(longitude))", "-GPSLongitudeRef=\(longitude < 0 ? "W" : "E")",
        ], to: try Samples.chelsea())
        let reference = try ExifTool.tags(of: photo)
        let expectedLatitude = try #require(reference["Composite:GPSLatitude"] as? Double)
        let expectedLongitude = try #require(reference["Composite:GPSLongitude"] as? Double)
        let tags = CameraTags.read(photo)
        #expect(abs(try #require(tags.latitude) - expectedLatitude) < 1e-7)
        #expect(abs(try #require(tags.longitude) - expectedLongitude) < 1e-7)
        #expect(abs(expectedLatitude - latitude) < 1e-5 && abs(expectedLongitude - longitude) < 1e-5)
    }

    /// A photo whose EXIF has no GPS but whose XMP does (an edit, an export): placed by its XMP,
    /// in every format that keeps one, read as exiftool reads it; EXIF's wins when both are there.
    @Test(arguments: [("chelsea.jpg", "jpg"), ("exif.png", "png"), ("flower.webp", "webp")])
    func xmpGivesThePositionWhenExifHasNone(sample: String, suffix: String) throws {
        for (latitude, longitude) in [(-22.951_92, -43.210_49), (64.1466, 21.9426)] {
            let photo = try ExifTool.writing(["-EXIF:all=", "-XMP-exif:GPSLatitude=\(latitude)", "-XMP-exif:GPSLongitude=\(longitude)"],
                                             to: try Samples.file(sample).bytes, suffix: suffix)
            #expect(!CameraTags.read(photo).hasPosition, "no EXIF position")
            let reference = try ExifTool.tags(of: photo, suffix: suffix)
            let expected = (try #require(reference["XMP-exif:GPSLatitude"] as? Double), try #require(reference["XMP-exif:GPSLongitude"] as? Double))
            let found = try #require(XMPPosition.position(in: photo), "\(sample)")
            #expect(abs(found.latitude - expected.0) < 1e-6 && abs(found.longitude - expected.1) < 1e-6, "\(found) vs \(expected)")
            let versions = try PhotoVersions.make(from: photo)
            #expect(versions.tags.latitude.map { abs($0 - latitude) < 1e-5 } == true && versions.tags.longitude.map { abs($0 - longitude) < 1e-5 } == true)
        }
        let both = try ExifTool.writing(["-GPSLatitude=10", "-GPSLatitudeRef=N", "-GPSLongitude=20", "-GPSLongitudeRef=E",
                                         "-XMP-exif:GPSLatitude=30", "-XMP-exif:GPSLongitude=40"], to: try Samples.chelsea())
        #expect(try PhotoVersions.make(from: both).tags.latitude == 10)
    }

    /// XMP's coordinate forms, and what is refused: out of range, the wrong letter, too many parts.
    @Test func xmpCoordinatesAreParsedIntoTheirRange() {
        #expect(XMPPosition.coordinate("48,51.5022N", positive: "N", negative: "S", limit: 90).map { abs($0 - 48.858_37) < 1e-6 } == true)
        #expect(XMPPosition.coordinate("22,57,6.912S", positive: "N", negative: "S", limit: 90).map { abs($0 + 22.951_92) < 1e-6 } == true)
        #expect(XMPPosition.coordinate("-43.21049", positive: "E", negative: "W", limit: 180) == -43.21049)
        for refused in ["91,0N", "48,61N", "48,51.5E", "1,2,3,4N", "", "N", "nan", "1e400", "48,-1N"] {
            #expect(XMPPosition.coordinate(refused, positive: "N", negative: "S", limit: 90) == nil, "\(refused)")
        }
        let element = "<x:xmpmeta><rdf:Description><exif:GPSLatitude>10,30N</exif:GPSLatitude><exif:GPSLongitude>20,15W</exif:GPSLongitude></rdf:Description></x:xmpmeta>"
        let found = XMPPosition.position(in: Array(element.utf8))
        #expect(found?.latitude == 10.5 && found?.longitude == -20.25)
    }

    @Test func timeTakenWithItsOffsetAndTheCamera() throws {
        let photo = try ExifTool.writing([
            "-DateTimeOriginal=2024:05:03 14:22:10", "-OffsetTimeOriginal=+02:00", "-Make=Apple", "-Model=iPhone 12 mini",
        ], to: try Samples.chelsea())
        let tags = CameraTags.read(photo)
        #expect(tags.takenLocal == "2024-05-03T14:22:10")
        #expect(tags.offsetMinutes == 120)
        #expect(tags.camera == "Apple iPhone 12 mini")
        #expect(!tags.hasPosition)

        let nikon = CameraTags.read(try ExifTool.writing(["-Make=NIKON CORPORATION", "-Model=NIKON D750", "-OffsetTimeOriginal=-05:30",
                                                          "-DateTimeOriginal=1999:12:31 23:59:59"], to: try Samples.chelsea()))
        #expect(nikon.camera == "NIKON D750")
        #expect(nikon.offsetMinutes == -330)
        #expect(nikon.takenLocal == "1999-12-31T23:59:59")
    }

    @Test func aFileWithoutTagsHasNone() throws {
        let tags = CameraTags.read(try Samples.chelsea())
        #expect(tags == CameraTags())
        #expect(CameraTags.read([UInt8]()) == CameraTags())
        #expect(CameraTags.read(Array("not a photo at all".utf8)) == CameraTags())
    }

    /// What a stranger's file may hold is parsed into range or dropped: the all-zero date some
    /// cameras write, month 13, an offset of 25 hours, latitude 91°, and 0,0 (no fix).
    @Test func valuesOutOfRangeAreDropped() throws {
        #expect(CameraTags.isoLocal("0000:00:00 00:00:00") == nil)
        #expect(CameraTags.isoLocal("2024:13:01 10:00:00") == nil)
        #expect(CameraTags.isoLocal("2023:02:29 10:00:00") == nil)
        #expect(CameraTags.isoLocal("2024:02:29 10:00:00") == "2024-02-29T10:00:00")
        #expect(CameraTags.isoLocal("    :  :     :  :  ") == nil)
        #expect(CameraTags.isoLocal("２０２４:05:03 14:22:10") == nil)
        #expect(CameraTags.offsetMinutes("+25:00") == nil)
        #expect(CameraTags.offsetMinutes("+14:00") == 840)
        #expect(CameraTags.offsetMinutes("+1:00") == nil)
        let north91 = try ExifTool.writing(["-GPSLatitude=91", "-GPSLatitudeRef=N", "-GPSLongitude=10", "-GPSLongitudeRef=E"], to: try Samples.chelsea())
        #expect(!CameraTags.read(north91).hasPosition)
        let noFix = try ExifTool.writing(["-GPSLatitude=0", "-GPSLatitudeRef=N", "-GPSLongitude=0", "-GPSLongitudeRef=E"], to: try Samples.chelsea())
        #expect(!CameraTags.read(noFix).hasPosition)
        let zeroDate = try ExifTool.writing(["-DateTimeOriginal=0000:00:00 00:00:00", "-OffsetTimeOriginal=+01:00"], to: try Samples.chelsea())
        #expect(CameraTags.read(zeroDate).takenLocal == nil && CameraTags.read(zeroDate).offsetMinutes == nil)
    }
}
