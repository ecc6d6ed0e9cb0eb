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

    static func refusal(_ bytes: [UInt8]) -> ImageRefusal? {
        do throws(ImageRefusal) { _ = try PhotoVersions.make(from: bytes); return nil } catch { return error }
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
        }
    }
}
