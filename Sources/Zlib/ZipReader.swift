import CZlib

/// A zip archive held in memory, read from its central directory (APPNOTE.TXT 4.3.12, PKWARE), for
/// files people upload: nothing in it is trusted. Every count, size and offset is checked against
/// the bytes at hand before use; only entries asked for are inflated, and never past the caller's
/// limit whatever their headers claim. Stored (method 0) and deflated (method 8) entries are read;
/// encrypted ones and other methods are refused. ZIP64 (4.3.14) is read only in an entry's extra
/// field, as streaming writers put it there whatever the size; an archive that needs a ZIP64 end
/// record (65,535 entries or more, 4 GiB) is refused, as no upload is that large. Nothing is ever
/// written to disk, so entry names are only ever compared, never used as paths.
public struct ZipReader: Sendable {
    public struct Entry: Sendable, Equatable {
        /// The name as stored (UTF-8 with bit 11; most tools write UTF-8 or ASCII either way).
        public let name: String
        public let method: UInt16
        /// General purpose flags (4.4.4): bit 0 and bit 6 mark encryption.
        public let flags: UInt16
        public let crc: UInt32
        public let compressedSize: Int
        /// What the central directory claims; checked against the bytes when the entry is read.
        public let uncompressedSize: Int
        let localHeaderOffset: Int

        public var isEncrypted: Bool { flags & 0x0001 != 0 || flags & 0x0040 != 0 || method == 99 }
        public var isDirectory: Bool { name.hasSuffix("/") }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// No end of central directory record, or a record or header that does not fit the file.
        case damaged(String)
        case zip64
        case tooManyEntries(count: Int, limit: Int)
        case encrypted(name: String)
        case unsupportedMethod(name: String, method: UInt16)
        /// The entry is, or would inflate to, more than the limit.
        case tooLarge(name: String, limit: Int)
        /// The entry's data is not what its headers say (size, CRC-32 or deflate stream).
        case corrupt(name: String, why: String)

        public var description: String {
            switch self {
            case .damaged(let why): "the zip archive is damaged (\(why))"
            case .zip64: "the zip archive needs a ZIP64 end record, which is not read"
            case .tooManyEntries(let count, let limit): "the zip archive has \(count) entries, more than \(limit)"
            case .encrypted(let name): "“\(name)” in the zip archive is encrypted"
            case .unsupportedMethod(let name, let method): "“\(name)” in the zip archive is compressed with method \(method); only stored (0) and deflated (8) entries are read"
            case .tooLarge(let name, let limit): "“\(name)” in the zip archive is larger than \(limit) bytes uncompressed"
            case .corrupt(let name, let why): "“\(name)” in the zip archive is damaged (\(why))"
            }
        }
    }

    public let entries: [Entry]
    private let bytes: [UInt8]
    /// Where the central directory starts: entry data must end before it.
    private let directoryStart: Int

    public static func isZip(_ bytes: [UInt8]) -> Bool { bytes.starts(with: [0x50, 0x4B, 0x03, 0x04]) }

    /// Reads the central directory; refuses an archive that lists more than `maxEntries` entries
    /// before reading any of them.
    public init(_ bytes: [UInt8], maxEntries: Int) throws(Failure) {
        self.bytes = bytes
        // 4.3.16: the end record is 22 bytes plus a comment of up to 65,535, so it starts in the
        // last 65,557 bytes. Searched from the end, as a comment may itself hold the signature.
        let lowest = max(0, bytes.count - 22 - 0xFFFF)
        var found: Int?
        var at = bytes.count - 22
        while at >= lowest {
            if bytes.le32(at) == 0x0605_4B50, at + 22 + Int(bytes.le16(at + 20)) == bytes.count { found = at; break }
            at -= 1
        }
        guard let end = found else { throw .damaged("no end of central directory record") }
        let disk = bytes.le16(end + 4), directoryDisk = bytes.le16(end + 6)
        let onDisk = Int(bytes.le16(end + 8)), count = Int(bytes.le16(end + 10))
        let size = Int(bytes.le32(end + 12)), offset = Int(bytes.le32(end + 16))
        if count == 0xFFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF { throw .zip64 }
        guard disk == 0, directoryDisk == 0, onDisk == count else { throw .damaged("it is split across disks") }
        guard count <= maxEntries else { throw .tooManyEntries(count: count, limit: maxEntries) }
        guard offset <= end, size <= end - offset else { throw .damaged("the central directory lies outside the file") }
        directoryStart = offset

        var entries: [Entry] = []
        entries.reserveCapacity(count)
        var cursor = offset
        let directoryEnd = offset + size
        for number in 0..<count {
            guard directoryEnd - cursor >= 46, bytes.le32(cursor) == 0x0201_4B50 else {
                throw .damaged("central directory entry \(number + 1) is missing")
            }
            let nameLength = Int(bytes.le16(cursor + 28)), extraLength = Int(bytes.le16(cursor + 30))
            let commentLength = Int(bytes.le16(cursor + 32))
            let recordLength = 46 + nameLength + extraLength + commentLength
            guard directoryEnd - cursor >= recordLength else { throw .damaged("central directory entry \(number + 1) runs past the directory") }
            var sizes = [UInt64(bytes.le32(cursor + 24)), UInt64(bytes.le32(cursor + 20)), UInt64(bytes.le32(cursor + 42))]
            if sizes.contains(0xFFFF_FFFF) {
                guard let wide = Self.zip64(sizes, extra: (cursor + 46 + nameLength)..<(cursor + 46 + nameLength + extraLength), in: bytes) else {
                    throw .damaged("central directory entry \(number + 1) has no ZIP64 sizes")
                }
                sizes = wide
            }
            // Past Int32 nothing can be in a 5 MB upload: such a size is refused when read, not trusted.
            let clamped = sizes.map { Int(min($0, UInt64(Int32.max))) }
            let name = String(decoding: bytes[(cursor + 46)..<(cursor + 46 + nameLength)], as: UTF8.self)
            entries.append(Entry(name: name, method: bytes.le16(cursor + 10), flags: bytes.le16(cursor + 8),
                                 crc: bytes.le32(cursor + 16), compressedSize: clamped[1],
                                 uncompressedSize: clamped[0], localHeaderOffset: clamped[2]))
            cursor += recordLength
        }
        self.entries = entries
    }

    /// 4.5.3: the ZIP64 extra field (id 1) holds, in this order, only those of the uncompressed
    /// size, compressed size and local header offset that are 0xFFFFFFFF in the directory entry.
    static func zip64(_ sizes: [UInt64], extra: Range<Int>, in bytes: [UInt8]) -> [UInt64]? {
        var at = extra.lowerBound
        while extra.upperBound - at >= 4 {
            let id = bytes.le16(at), length = Int(bytes.le16(at + 2))
            guard extra.upperBound - at - 4 >= length else { return nil }
            if id == 0x0001 {
                var field = at + 4
                var wide = sizes
                for index in sizes.indices where sizes[index] == 0xFFFF_FFFF {
                    guard at + 4 + length - field >= 8 else { return nil }
                    wide[index] = UInt64(bytes.le32(field)) | UInt64(bytes.le32(field + 4)) << 32
                    field += 8
                }
                return wide
            }
            at += 4 + length
        }
        return nil
    }

    /// The entry's bytes, inflated if need be: refused when encrypted, compressed otherwise than
    /// stored or deflated, larger than `maxBytes` by its header or by what actually inflates, or
    /// when its data disagrees with its size or CRC-32.
    public func contents(of entry: Entry, maxBytes: Int) throws(Failure) -> [UInt8] {
        guard !entry.isEncrypted else { throw .encrypted(name: entry.name) }
        guard entry.method == 0 || entry.method == 8 else { throw .unsupportedMethod(name: entry.name, method: entry.method) }
        guard entry.uncompressedSize <= maxBytes else { throw .tooLarge(name: entry.name, limit: maxBytes) }
        // 4.3.7: the local header repeats the name and has its own extra field, whose length may
        // differ from the central directory's; the data follows them.
        let header = entry.localHeaderOffset
        guard header <= directoryStart, directoryStart - header >= 30, bytes.le32(header) == 0x0403_4B50 else {
            throw .corrupt(name: entry.name, why: "its local header is missing")
        }
        let dataStart = header + 30 + Int(bytes.le16(header + 26)) + Int(bytes.le16(header + 28))
        guard dataStart <= directoryStart, entry.compressedSize <= directoryStart - dataStart else {
            throw .corrupt(name: entry.name, why: "its data runs past the end of the entries")
        }
        let data = bytes[dataStart..<(dataStart + entry.compressedSize)]
        let output: [UInt8]
        if entry.method == 0 {
            guard entry.compressedSize == entry.uncompressedSize else {
                throw .corrupt(name: entry.name, why: "a stored entry whose two sizes differ")
            }
            output = Array(data)
        } else {
            // Never more than the header claims (already within maxBytes): past it, the header lies.
            output = try Self.inflateRaw(data, maxBytes: entry.uncompressedSize, name: entry.name)
        }
        guard output.count == entry.uncompressedSize else {
            throw .corrupt(name: entry.name, why: "it inflates to \(output.count) bytes, not the \(entry.uncompressedSize) its header says")
        }
        guard ZipWriter.crc32(output) == entry.crc else { throw .corrupt(name: entry.name, why: "its CRC-32 does not match") }
        return output
    }

    /// Raw deflate (RFC 1951, no zlib or gzip wrapper, as zip holds it), stopped as soon as the
    /// output would pass `maxBytes` (the size the header claims), so a bomb costs at most that much
    /// memory and the time to inflate it.
    static func inflateRaw(_ input: ArraySlice<UInt8>, maxBytes: Int, name: String) throws(Failure) -> [UInt8] {
        switch Gzip.inflate(input, windowBits: -15, limit: maxBytes) {
        case .inflated(let output): return output
        case .tooLarge: throw .corrupt(name: name, why: "it inflates to more than the \(maxBytes) bytes its header says")
        case .endsEarly: throw .corrupt(name: name, why: "its deflate data ends early")
        case .invalid: throw .corrupt(name: name, why: "its deflate data is invalid")
        }
    }
}

extension [UInt8] {
    /// Little-endian fields (APPNOTE 4.4.1.1); callers have checked the bounds. Out of bounds reads
    /// as 0 rather than trapping, so a check that was missed refuses the file instead of the process.
    fileprivate func le16(_ at: Int) -> UInt16 {
        guard at >= 0, at + 2 <= count else { return 0 }
        return UInt16(self[at]) | UInt16(self[at + 1]) << 8
    }

    fileprivate func le32(_ at: Int) -> UInt32 {
        guard at >= 0, at + 4 <= count else { return 0 }
        return UInt32(self[at]) | UInt32(self[at + 1]) << 8 | UInt32(self[at + 2]) << 16 | UInt32(self[at + 3]) << 24
    }
}
