import Foundation
import Testing
@testable import VirtualTourist
import Zlib
@testable import AlbumWing
@testable import Domain

/// ZipReader and the KMZ import on bytes in memory: archives made here field by field (so a header
/// can lie), by Python's zipfile (a writer that is not ours), and libkml's own test KMZs.
@Suite struct KMZImportTests {
    /// A zip made entry by entry; every field is what the test says, true or not.
    struct TestZip {
        struct Entry {
            var name: String
            /// The bytes as they are in the archive: deflated already for method 8.
            var data: [UInt8]
            var method: UInt16 = 0
            var flags: UInt16 = 0
            var crc: UInt32
            var size: UInt32
        }

        static func stored(_ name: String, _ bytes: [UInt8]) -> Entry {
            Entry(name: name, data: bytes, crc: ZipWriter.crc32(bytes), size: UInt32(bytes.count))
        }

        static func deflated(_ name: String, _ bytes: [UInt8]) -> Entry {
            Entry(name: name, data: rawDeflate(bytes), method: 8, crc: ZipWriter.crc32(bytes), size: UInt32(bytes.count))
        }

        /// Raw deflate, as zip holds it: zlib's gzip output without its 10-byte header and 8-byte
        /// trailer (RFC 1952 2.3; zlib writes no optional fields unless asked).
        static func rawDeflate(_ bytes: [UInt8]) -> [UInt8] {
            let gzip = Gzip.compress(bytes, level: 9)!
            return Array(gzip[10..<(gzip.count - 8)])
        }

        /// `count` overrides the entry count written in the end record.
        static func archive(_ entries: [Entry], count: UInt16? = nil) -> [UInt8] {
            var out: [UInt8] = [], directory: [UInt8] = []
            for entry in entries {
                let name = Array(entry.name.utf8)
                let offset = UInt32(out.count)
                out.le32(0x0403_4B50); out.le16(20); out.le16(entry.flags); out.le16(entry.method); out.le16(0); out.le16(0)
                out.le32(entry.crc); out.le32(UInt32(entry.data.count)); out.le32(entry.size)
                out.le16(UInt16(name.count)); out.le16(0)
                out += name + entry.data
                directory.le32(0x0201_4B50); directory.le16(20); directory.le16(20); directory.le16(entry.flags); directory.le16(entry.method)
                directory.le16(0); directory.le16(0); directory.le32(entry.crc); directory.le32(UInt32(entry.data.count)); directory.le32(entry.size)
                directory.le16(UInt16(name.count)); directory.le16(0); directory.le16(0); directory.le16(0); directory.le16(0); directory.le32(0)
                directory.le32(offset)
                directory += name
            }
            let start = UInt32(out.count)
            out += directory
            out.le32(0x0605_4B50); out.le16(0); out.le16(0)
            out.le16(count ?? UInt16(entries.count)); out.le16(count ?? UInt16(entries.count))
            out.le32(UInt32(directory.count)); out.le32(start); out.le16(0)
            return out
        }
    }

    /// 100 MB of zeros, deflated to about 100 KB.
    static let zeros = 100 * 1024 * 1024
    static let bomb = TestZip.rawDeflate([UInt8](repeating: 0, count: zeros))

    static let kml = Array("""
        <?xml version="1.0" encoding="UTF-8"?>
        <kml xmlns="http://www.opengis.net/kml/2.2"><Document>
        <Placemark><name>Kyoto Station</name><Point><coordinates>135.7588,34.9858,0</coordinates></Point></Placemark>
        <Placemark><name>Fushimi Inari</name><Point><coordinates>135.7727,34.9671,12.5,1700000000</coordinates></Point></Placemark>
        </Document></kml>
        """.utf8)

    static func fixture(_ name: String) throws -> [UInt8] { try ImportTests.fixture(name) }

    func refusal(_ bytes: [UInt8]) -> String? {
        do { _ = try PinImport.read(bytes); return nil } catch { return error.description }
    }

    func zipFailure(_ bytes: [UInt8], entry: String? = nil, maxBytes: Int = PinImport.Limits.fileBytes) -> ZipReader.Failure? {
        do throws(ZipReader.Failure) {
            let archive = try ZipReader(bytes, maxEntries: 1_000)
            for found in archive.entries where entry == nil || found.name == entry { _ = try archive.contents(of: found, maxBytes: maxBytes) }
            return nil
        } catch {
            return error
        }
    }

    // MARK: ZipReader

    @Test func storedAndDeflatedEntriesReadBackAsWritten() throws {
        let photo = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }
        // Stored, by the app's own writer.
        var written: [UInt8] = []
        var writer = ZipWriter(modified: (2026, 11, 27, 6, 0, 0)) { written += $0; return true }
        try writer.add(name: "doc.kml", bytes: Self.kml)
        try writer.add(name: "images/photo.jpg", bytes: photo)
        writer.finish()
        let stored = try ZipReader(written, maxEntries: 10)
        #expect(stored.entries.map(\.name) == ["doc.kml", "images/photo.jpg"])
        #expect(try stored.contents(of: stored.entries[0], maxBytes: 1 << 20) == Self.kml)
        #expect(try stored.contents(of: stored.entries[1], maxBytes: 1 << 20) == photo)
        // Deflated, made here.
        let deflated = try ZipReader(TestZip.archive([TestZip.deflated("doc.kml", Self.kml), TestZip.stored("empty.txt", [])]), maxEntries: 10)
        #expect(deflated.entries[0].method == 8 && deflated.entries[0].compressedSize < Self.kml.count)
        #expect(try deflated.contents(of: deflated.entries[0], maxBytes: 1 << 20) == Self.kml)
        #expect(try deflated.contents(of: deflated.entries[1], maxBytes: 0) == [])
    }

    @Test func aSizeThatLiesIsCaughtByTheBytesThemselves() {
        let text = Array(String(repeating: "<Placemark/>", count: 100).utf8)
        var small = TestZip.deflated("doc.kml", text)
        small.size = 100  // inflates to 1,200
        #expect(zipFailure(TestZip.archive([small])) == .corrupt(name: "doc.kml", why: "it inflates to more than the 100 bytes its header says"))
        var large = TestZip.deflated("doc.kml", text)
        large.size = 5000
        #expect(zipFailure(TestZip.archive([large])) == .corrupt(name: "doc.kml", why: "it inflates to 1200 bytes, not the 5000 its header says"))
        var stored = TestZip.stored("doc.kml", text)
        stored.size = 10
        #expect(zipFailure(TestZip.archive([stored])) == .corrupt(name: "doc.kml", why: "a stored entry whose two sizes differ"))
        var crc = TestZip.deflated("doc.kml", text)
        crc.crc ^= 1
        #expect(zipFailure(TestZip.archive([crc])) == .corrupt(name: "doc.kml", why: "its CRC-32 does not match"))
        var cut = TestZip.deflated("doc.kml", text)
        cut.data.removeLast(4)
        #expect(zipFailure(TestZip.archive([cut])) == .corrupt(name: "doc.kml", why: "its deflate data ends early"))
        #expect(zipFailure(TestZip.archive([TestZip.Entry(name: "doc.kml", data: [0xFF, 0xFF, 0xFF], method: 8, crc: 0, size: 10)]))
                == .corrupt(name: "doc.kml", why: "its deflate data is invalid"))
    }

    /// 100 MB of zeros in about 100 KB: refused from its header before anything is inflated, and
    /// when the header lies, stopped at the size it claims.
    @Test func aZipBombIsRefusedWithoutInflatingIt() throws {
        #expect(Self.bomb.count < 200 * 1024, "\(Self.bomb.count)")
        let honest = TestZip.Entry(name: "doc.kml", data: Self.bomb, method: 8, crc: 0, size: UInt32(Self.zeros))
        #expect(zipFailure(TestZip.archive([honest])) == .tooLarge(name: "doc.kml", limit: PinImport.Limits.fileBytes))
        for claim in [1_000, PinImport.Limits.fileBytes] {
            var lying = honest
            lying.size = UInt32(claim)
            #expect(zipFailure(TestZip.archive([lying])) == .corrupt(name: "doc.kml", why: "it inflates to more than the \(claim) bytes its header says"))
        }
        // Through the import: a sentence, and the bomb beside a good KML is never inflated.
        #expect(refusal(TestZip.archive([honest]))?.contains("larger than 5 MB uncompressed") == true)
        let beside = TestZip.archive([TestZip.deflated("doc.kml", Self.kml), TestZip.Entry(name: "images/zeros.png", data: Self.bomb, method: 8, crc: 0, size: 1)])
        #expect(try PinImport.read(beside).points.count == 2)
    }

    @Test func encryptedEntriesOtherMethodsZIP64AndTooManyEntriesAreRefused() throws {
        var encrypted = TestZip.deflated("doc.kml", Self.kml)
        encrypted.flags = 1
        #expect(zipFailure(TestZip.archive([encrypted])) == .encrypted(name: "doc.kml"))
        encrypted.flags = 0x40  // strong encryption
        #expect(zipFailure(TestZip.archive([encrypted])) == .encrypted(name: "doc.kml"))
        var aes = TestZip.stored("doc.kml", Self.kml)
        aes.method = 99  // WinZip AES
        #expect(zipFailure(TestZip.archive([aes])) == .encrypted(name: "doc.kml"))
        var bzip2 = TestZip.stored("doc.kml", Self.kml)
        bzip2.method = 12
        #expect(zipFailure(TestZip.archive([bzip2])) == .unsupportedMethod(name: "doc.kml", method: 12))
        #expect(zipFailure(TestZip.archive([TestZip.stored("doc.kml", Self.kml)], count: 0xFFFF)) == .zip64)
        // A ZIP64 size in the directory with no ZIP64 extra field to give it.
        var large = TestZip.stored("doc.kml", Self.kml)
        large.size = 0xFFFF_FFFF
        #expect(zipFailure(TestZip.archive([large])) == .damaged("central directory entry 1 has no ZIP64 sizes"))

        let many = (0...PinImport.Limits.kmzEntries).map { TestZip.stored("images/\($0).png", []) }
        #expect(zipFailure(TestZip.archive(many)) == .tooManyEntries(count: PinImport.Limits.kmzEntries + 1, limit: 1_000))
        #expect(refusal(TestZip.archive(many))?.contains("holds 1,001 files; at most 1,000") == true)
        let enough = Array(many.dropLast().dropFirst()) + [TestZip.stored("doc.kml", Self.kml)]
        #expect(try PinImport.read(TestZip.archive(enough)).points.count == 2)

        #expect(refusal(TestZip.archive([encrypted]))?.contains("“doc.kml” in this KMZ file is encrypted") == true)
        #expect(refusal(TestZip.archive([bzip2]))?.contains("zip method 12") == true)
    }

    @Test func damagedArchivesAreRefusedNeverCrash() throws {
        #expect(zipFailure([0x50, 0x4B, 0x03, 0x04]) == .damaged("no end of central directory record"))
        var directoryOutside = TestZip.archive([TestZip.stored("doc.kml", Self.kml)])
        directoryOutside[directoryOutside.count - 3] = 0x7F  // the directory's offset, past the end
        #expect(zipFailure(directoryOutside) == .damaged("the central directory lies outside the file"))
        #expect(zipFailure(TestZip.archive([TestZip.stored("doc.kml", Self.kml)], count: 2)) == .damaged("central directory entry 2 is missing"))
        // Every prefix and random damage of a good KMZ: read, or refused with a sentence.
        let good = TestZip.archive([TestZip.stored("images/a.png", Array(repeating: 7, count: 50)), TestZip.deflated("doc.kml", Self.kml)])
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state }
        var outcomes = (read: 0, refused: 0)
        var inputs = (4...good.count).map { Array(good.prefix($0)) }
        for _ in 0..<2_000 {
            var damaged = good
            for _ in 0...(next() % 3) { damaged[4 + Int(next() % UInt64(damaged.count - 4))] = UInt8(truncatingIfNeeded: next()) }
            inputs.append(damaged)
        }
        for input in inputs {
            do {
                let file = try PinImport.read(input)
                #expect(file.points.allSatisfy { abs($0.lat) <= 90 && abs($0.lon) <= 180 })
                outcomes.read += 1
            } catch {
                #expect(!error.description.isEmpty)
                outcomes.refused += 1
            }
        }
        #expect(outcomes.read > 0 && outcomes.refused > 0, "\(outcomes)")
    }

    // MARK: Which KML, and what the import makes of it

    @Test func theKMLIsTheOneGoogleEarthOpens() throws {
        func chosen(_ names: [String]) throws -> String? {
            KMZImport.kmlEntry(try ZipReader(TestZip.archive(names.map { TestZip.stored($0, []) }), maxEntries: 100).entries)?.name
        }
        #expect(try chosen(["images/a.png", "a.kml", "doc.kml", "files/b.kml"]) == "doc.kml")
        #expect(try chosen(["files/b.kml", "a.KML", "doc/doc.kml"]) == "a.KML")
        #expect(try chosen(["images/a.png", "trips/2026/japan.kml", "trips/other.kml"]) == "trips/2026/japan.kml")
        #expect(try chosen(["./doc.kml"]) == "./doc.kml")
        // Names that climb out, start at a root or are macOS's AppleDouble copies are never taken.
        #expect(try chosen(["../doc.kml", "/doc.kml", "\\doc.kml", "C:/doc.kml", "a/../../doc.kml", "__MACOSX/._doc.kml", "._doc.kml", "doc\0.kml", "nested/real.kml"])
                == "nested/real.kml")
        #expect(try chosen(["doc.kmz", "places.kml/", "photo.jpg"]) == nil)

        // libkml's own test archives.
        func read(_ name: String) throws -> ZipReader { try ZipReader(try Self.fixture(name), maxEntries: 1_000) }
        #expect(KMZImport.kmlEntry(try read("libkml-doc.kmz").entries)?.name == "doc.kml")  // after a.kml
        #expect(KMZImport.kmlEntry(try read("libkml-multikml-nodoc.kmz").entries)?.name == "b.kml")  // z/c.kml is first, not at the root
        #expect(KMZImport.kmlEntry(try read("libkml-multikml-doc.kmz").entries)?.name == "b.kml")  // doc/doc.kml is not at the root
        #expect(refusal(try Self.fixture("libkml-nokml.kmz")) == "This zip archive holds no .kml file, so it is not a KMZ file that can be imported.")
    }

    @Test func aKMZIsReadAsTheKMLInsideAndSaysWhatItLeftAside() throws {
        let archive = TestZip.archive([TestZip.stored("images/photo.png", Array(repeating: 1, count: 300)),
                                       TestZip.deflated("a.kml", Array("<kml><Placemark><name>decoy</name><Point><coordinates>1,1</coordinates></Point></Placemark></kml>".utf8)),
                                       TestZip.deflated("doc.kml", Self.kml), TestZip.stored("files/", [])])
        let file = try PinImport.read(archive)
        #expect(file.format == .kml)
        #expect(file.points == [PinImport.Point(name: "Kyoto Station", lat: 34.9858, lon: 135.7588),
                                PinImport.Point(name: "Fushimi Inari", lat: 34.9671, lon: 135.7727)])
        #expect(file.notes == ["Read from “doc.kml” in the KMZ file; 2 other files in it (images and the like) left aside."])
        #expect(try PinImport.read(TestZip.archive([TestZip.deflated("doc.kml", Self.kml)])).notes == ["Read from “doc.kml” in the KMZ file."])

        // libkml's KMZ with an image: the placemark without a point is listed, the GIF left aside.
        let balloon = try PinImport.read(try Self.fixture("libkml-balloon-image-rel.kmz"))
        #expect(balloon.points.isEmpty && balloon.refused == [PinImport.Refused(label: "Image in balloon", reason: "it has no point (only points become pins)")])
        #expect(balloon.notes.first == "Read from “doc.kml” in the KMZ file; 1 other file in it (images and the like) left aside.")
        // Its sizes are in a ZIP64 extra field, the directory's set to 0xFFFFFFFF.
        let zip64 = try ZipReader(try Self.fixture("libkml-bad-pk-data.kmz"), maxEntries: 10)
        #expect(zip64.entries.map { [$0.compressedSize, $0.uncompressedSize] } == [[333, 511]])
        #expect(try PinImport.read(try Self.fixture("libkml-bad-pk-data.kmz")).points.count == 1)
    }

    @Test func whatIsInsideMustBeKMLAndOnlyOneArchiveDeep() throws {
        let inner = TestZip.archive([TestZip.deflated("doc.kml", Self.kml)])
        #expect(refusal(TestZip.archive([TestZip.stored("doc.kml", inner)])) == "“doc.kml” in this KMZ file is not KML: it does not start with “<”.")
        #expect(refusal(TestZip.archive([TestZip.stored("inner.kmz", inner)]))?.contains("holds no .kml file") == true)
        #expect(refusal(TestZip.archive([TestZip.stored("doc.kml", [])])) == "“doc.kml” in this KMZ file is empty.")
        #expect(refusal(TestZip.archive([TestZip.stored("doc.kml", Array("<gpx><wpt lat=\"1\" lon=\"2\"/></gpx>".utf8))])) == "“doc.kml” in this KMZ file is GPX, not KML.")
        #expect(refusal(TestZip.archive([TestZip.stored("doc.kml", Array("{\"type\":\"Point\",\"coordinates\":[1,2]}".utf8))]))?.contains("not KML") == true)
        let doctype = Array("<!DOCTYPE kml [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><kml/>".utf8)
        #expect(refusal(TestZip.archive([TestZip.deflated("doc.kml", doctype)]))?.hasPrefix("In “doc.kml” in this KMZ file: The file is not well-formed XML") == true)
        // A name that is markup or control characters is shown cleaned (the page escapes it).
        #expect(refusal(TestZip.archive([TestZip.stored("<b>\u{1}x.kml", [])])) == "“<b> x.kml” in this KMZ file is empty.")
    }

    /// Archives written by Python's zipfile, a writer that is not ours: deflated, stored, with a data
    /// descriptor (as a zip written to a pipe has) and with an archive comment.
    @Test func archivesWrittenByPythonAreRead() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kmz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(Self.kml).write(to: directory.appendingPathComponent("doc.kml"))
        let script = """
            import io, sys, zipfile
            d = sys.argv[1]
            kml = open(d + '/doc.kml', 'rb').read()
            with zipfile.ZipFile(d + '/plain.kmz', 'w') as z:
                z.comment = b'written by zipfile, PK\\x05\\x06 in the comment'
                z.writestr('images/icon.png', bytes(range(256)) * 4, compress_type=zipfile.ZIP_STORED)
                z.writestr('doc.kml', kml, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            class Pipe(io.RawIOBase):  # not seekable: zipfile writes data descriptors
                def __init__(self): self.out = bytearray()
                def writable(self): return True
                def write(self, b): self.out += b; return len(b)
            pipe = Pipe()
            with zipfile.ZipFile(pipe, 'w', compression=zipfile.ZIP_DEFLATED) as z:
                with z.open('doc.kml', 'w') as f: f.write(kml)
            open(d + '/streamed.kmz', 'wb').write(pipe.out)
            """
        let made = try AlbumZipTests.run(["python3", "-c", script, directory.path])
        #expect(made.status == 0, "\(made.output)")
        for name in ["plain.kmz", "streamed.kmz"] {
            let bytes = Array(try Data(contentsOf: directory.appendingPathComponent(name)))
            let file = try PinImport.read(bytes)
            #expect(file.points.map(\.name) == ["Kyoto Station", "Fushimi Inari"], "\(name)")
        }
        let streamed = try ZipReader(Array(try Data(contentsOf: directory.appendingPathComponent("streamed.kmz"))), maxEntries: 10)
        #expect(streamed.entries[0].flags & 0x08 != 0, "the data descriptor flag is set, so the sizes came from the directory")
    }

    /// libkml's hostile archives (found by fuzzing libkml's unzip): a sentence each.
    @Test func libkmlsBrokenArchivesAreRefused() throws {
        #expect(refusal(try Self.fixture("libkml-bad-too-large.kmz")) == "“hello.kml” in this KMZ file is larger than 5 MB uncompressed; KML files of up to 5 MB can be imported.")
        #expect(refusal(try Self.fixture("libkml-overflow_bad_offset.kmz")) == "“kmlsamples.kml” in this KMZ file is damaged: its local header is missing.")
        #expect(refusal(try Self.fixture("libkml-overflow_unzReadCurrentFile.kmz"))?.contains("in this KMZ file is damaged") == true)
    }
}

extension [UInt8] {
    fileprivate mutating func le16(_ value: UInt16) { append(UInt8(value & 0xFF)); append(UInt8(value >> 8)) }
    fileprivate mutating func le32(_ value: UInt32) { for shift in [0, 8, 16, 24] { append(UInt8((value >> UInt32(shift)) & 0xFF)) } }
}
