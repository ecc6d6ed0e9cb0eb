import Foundation
import Testing
@testable import Imaging
import TestSupport

/// Files made to hurt (docs/architecture.md, "Own photos"): each refused before it costs what it
/// asks for, with a sentence for the person. The files are in Photos/ with how each was made
/// (Photos/HOSTILE.md).
@Suite struct HostileFileTests {
    static func file(_ name: String) throws -> [UInt8] { try Samples.file(name).bytes }

    /// A plain HEIC (one HEVC image, made by libheif's heif-enc) is read and made into versions.
    @Test func aHEICIsRead() throws {
        let versions = try PhotoVersions.make(from: try Self.file("tile.heic"))
        #expect(versions.format == .heif)
        #expect((versions.width, versions.height) == (128, 128))
        #expect(versions.display.starts(with: [0xFF, 0xD8, 0xFF]))
    }

    /// A grid whose image claims 64 × 64 while its grid box makes 512 × 512 (four by four
    /// copies of one tile): the grid's size is what is checked, before decoding.
    @Test func aHEICGridIsCheckedAtTheSizeItDecodesTo() throws {
        let small = try Self.file("grid-small.heic")
        #expect(try small.withUnsafeBufferPointer { HEIFLayout.primary($0) } == HEIFLayout.Primary(type: "grid", width: 512, height: 512))
        #expect(throws: ImageRefusal.tooManyPixels(width: 512, height: 512, limit: 100_000)) {
            try PhotoVersions.make(from: small, limits: PhotoVersions.Limits(maxPixels: 100_000))
        }
        // 163.8 megapixels from 20 KB: refused at the default limit without decoding a tile.
        let big = try Self.file("grid-163mp.heic")
        #expect(throws: ImageRefusal.self) { try PhotoVersions.make(from: big) }
        if case .tooManyPixels(let width, let height, _)? = Self.refusal(big) { #expect(width * height > 160_000_000) } else { Issue.record("not refused for its pixels") }
    }

    static func refusal(_ bytes: [UInt8], limits: PhotoVersions.Limits = PhotoVersions.Limits()) -> ImageRefusal? {
        do throws(ImageRefusal) { _ = try PhotoVersions.make(from: bytes, limits: limits); return nil } catch { return error }
    }

    /// A HEIF is decoded by a child process (HEIFIsolation): the pixels, tags and profile come
    /// back whole; a file whose boxes claim sizes past the end (a 64-bit size of Int.max, which
    /// once trapped the parser) is a refusal of that file, and this process goes on.
    @Test func aHEIFIsDecodedInAProcessOfItsOwn() throws {
        #expect(HEIFIsolation.executable != nil, "the virtual-tourist binary beside the tests (swift build builds it)")
        let pug = try Self.file("pug.heic")
        let decoded = try PhotoDecoding.decode(pug, maxPixels: 100_000_000, atLeast: 2048)
        let here = try PhotoDecoding.decodeHEIFHere(pug, maxPixels: 100_000_000)
        #expect(decoded.image.pixels == here.image.pixels && (decoded.width, decoded.height) == (4032, 3024))
        #expect(decoded.profile == here.profile && decoded.profile != nil, "Display P3 comes back")
        #expect(decoded.tags.takenLocal == here.tags.takenLocal && decoded.tags.camera == here.tags.camera && decoded.tags.takenLocal != nil)
        let hostile = try Self.file("tile.heic") + [0, 0, 0, 1] + Array("free".utf8) + [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        #expect(Self.refusal(hostile) != nil)
        // Refusals cross the pipe as themselves.
        #expect(Self.refusal(try Self.file("grid-small.heic"), limits: PhotoVersions.Limits(maxPixels: 100_000))
                == .tooManyPixels(width: 512, height: 512, limit: 100_000))
    }

    static func coded(_ bytes: [UInt8]) -> Int? { bytes.withUnsafeBufferPointer { HEIFLayout.codedPixels($0) } }

    /// `bytes` with every `from` box or type (4 ASCII bytes) replaced by the same-sized `to`.
    static func patched(_ bytes: [UInt8], _ from: String, then count: Int = 0, with replacement: [UInt8]) -> [UInt8] {
        var out = bytes
        let needle = Array(from.utf8)
        var at = 0
        while at + needle.count + count <= out.count {
            if Array(out[at..<(at + needle.count)]) == needle {
                out.replaceSubrange((at + needle.count)..<(at + needle.count + replacement.count), with: replacement)
            }
            at += 1
        }
        return out
    }

    /// What libde265 will allocate is read from the HEVC streams' parameter sets before any
    /// decoding: real files code what they claim (a grid's tiles a little more, to whole tiles);
    /// an image claiming 8 × 8 whose stream codes 128 × 128 is refused before decoding (after,
    /// it would be refused for its pixels, too late for a stream coding 16,384²); an AV1 item
    /// (a decoder we did not choose) is refused outright.
    @Test func aHEICIsCheckedAtTheSizeItsStreamsCode() throws {
        let tile = try Self.file("tile.heic")
        #expect(Self.coded(tile) == 128 * 128)
        let pug = try Self.file("pug.heic")
        let pugCoded = try #require(Self.coded(pug))
        #expect(pugCoded >= 4032 * 3024 && pugCoded <= 4032 * 3024 * 3 / 2, "\(pugCoded): the tiles, the depth map, the gain map, the thumbnail")
        #expect(Self.coded(try Self.file("grid-small.heic")) == 128 * 128, "one tile item, referenced sixteen times")
        // ispe: version and flags (4 bytes), then width and height.
        let forged = Self.patched(tile, "ispe", with: [0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 8])
        #expect(forged != tile)
        #expect(Self.coded(forged) == 128 * 128)
        let refusal = Self.refusal(forged, limits: PhotoVersions.Limits(maxPixels: 1_000))
        #expect(refusal.map { if case .unreadable(.heif, _) = $0 { true } else { false } } == true, "\(String(describing: refusal))")
        #expect(Self.refusal(tile, limits: PhotoVersions.Limits(maxPixels: 20_000)) == nil, "as claimed, within the limit")
        let av1 = tile.replacing(Array("hvc1".utf8), with: Array("av01".utf8))
        #expect(Self.coded(av1) == nil)
        #expect(Self.refusal(av1) != nil)
    }

    /// A progressive JPEG repeating one scan a thousand times (a CPU bomb: each scan walks every
    /// block): refused past 500 scans.
    @Test func aJPEGOfEndlessScansIsRefused() throws {
        #expect(Self.refusal(try Self.file("scans-1000.jpg")).map { if case .unreadable(.jpeg, _) = $0 { true } else { false } } == true)
    }

    @Test func aCMYKJPEGIsRefusedBySayingWhat() throws {
        #expect(Self.refusal(try Self.file("cmyk.jpg")) == .cmyk)
        #expect(ImageRefusal.cmyk.description == "is a CMYK JPEG (made for printing); save it as an ordinary RGB JPEG and add it again")
    }

    /// Truncated at every length and damaged at random places, seeded: refused or made, never a
    /// crash, for each format.
    @Test(arguments: ["tile.heic", "grid-small.heic"])
    func damagedHEIFsNeverCrash(name: String) throws {
        let bytes = try Self.file(name)
        for length in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 60)) { _ = Self.refusal(Array(bytes.prefix(length))) }
        var generator = SeededGenerator(seed: 51)
        for _ in 0..<60 {
            var damaged = bytes
            for _ in 0..<4 { damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            _ = Self.refusal(damaged)
            _ = damaged.withUnsafeBufferPointer { HEIFLayout.primary($0) }
            _ = Self.coded(damaged)
        }
    }
}
