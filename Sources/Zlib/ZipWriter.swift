import CZlib

/// A zip archive written front to back into a sink, one entry at a time, so an archive of any size
/// is never held whole (APPNOTE.TXT 6.3.10, PKWARE). Entries are STORED: the photos it carries are
/// JPEGs, which deflate does not shrink. Each entry's bytes are in hand when it is added, so its
/// CRC-32 and size go into the local header and no data descriptor is needed — readers that walk
/// the local headers (streaming unzippers) read it as well as those that start from the central
/// directory. ZIP64 (4.5.3) is written only when an offset, the directory or the entry count no
/// longer fits the classic fields; an entry itself is refused at 4 GiB or more.
public struct ZipWriter {
    public struct TooLarge: Error {}

    private struct Entry {
        let name: [UInt8]
        let crc: UInt32
        let size: UInt64
        let offset: UInt64
    }

    private let sink: ([UInt8]) -> Bool
    private var entries: [Entry] = []
    private var offset: UInt64 = 0
    private let dosTime: UInt16
    private let dosDate: UInt16
    /// False once the sink refused a write (the client went away): stop.
    public private(set) var isOpen = true

    /// `sink` takes each piece in order and answers false when nothing more can be written.
    /// `modified` (year, month, day, hour, minute, second) is every entry's MS-DOS time.
    public init(modified: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int),
                sink: @escaping ([UInt8]) -> Bool) {
        self.sink = sink
        let year = min(max(modified.year, 1980), 2107)
        dosDate = UInt16((year - 1980) << 9 | modified.month << 5 | modified.day)
        dosTime = UInt16(modified.hour << 11 | modified.minute << 5 | modified.second / 2)
    }

    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { buffer in
            var crc = CZlib.crc32(0, nil, 0)
            var rest = UnsafeBufferPointer(rebasing: buffer[...])
            while !rest.isEmpty {  // zlib takes a uInt length: feed it in slices
                let piece = UnsafeBufferPointer(rebasing: rest.prefix(1 << 30))
                crc = CZlib.crc32(crc, piece.baseAddress, uInt(piece.count))
                rest = UnsafeBufferPointer(rebasing: rest.dropFirst(piece.count))
            }
            return UInt32(crc)
        }
    }

    /// Adds one stored entry. `name` must already be safe (the caller's rules); it is written as
    /// UTF-8 with general purpose bit 11 set. The bytes go out in slices of `slice`, so a sink
    /// that waits for the socket waits between them.
    public mutating func add(name: String, bytes: [UInt8], slice: Int = 64 * 1024) throws {
        guard isOpen else { return }
        guard bytes.count < 0xFFFF_FFFF else { throw TooLarge() }
        let nameBytes = Array(name.utf8)
        let crc = Self.crc32(bytes)
        var header: [UInt8] = []
        header.reserveCapacity(30 + nameBytes.count)
        header.le32(0x0403_4B50)
        header.le16(20)  // version needed: 2.0
        header.le16(0x0800)  // bit 11: name in UTF-8
        header.le16(0)  // stored
        header.le16(dosTime)
        header.le16(dosDate)
        header.le32(crc)
        header.le32(UInt32(bytes.count))
        header.le32(UInt32(bytes.count))
        header.le16(UInt16(nameBytes.count))
        header.le16(0)
        header += nameBytes
        entries.append(Entry(name: nameBytes, crc: crc, size: UInt64(bytes.count), offset: offset))
        guard write(header) else { return }
        var start = 0
        while start < bytes.count {
            let end = min(start + slice, bytes.count)
            guard write(Array(bytes[start..<end])) else { return }
            start = end
        }
    }

    /// The central directory and its end record(s).
    public mutating func finish() {
        guard isOpen else { return }
        let directoryStart = offset
        var directory: [UInt8] = []
        for entry in entries {
            let needsZip64 = entry.offset >= 0xFFFF_FFFF
            directory.le32(0x0201_4B50)
            directory.le16(3 << 8 | 45)  // made by: Unix, 4.5
            directory.le16(needsZip64 ? 45 : 20)
            directory.le16(0x0800)
            directory.le16(0)
            directory.le16(dosTime)
            directory.le16(dosDate)
            directory.le32(entry.crc)
            directory.le32(UInt32(entry.size))
            directory.le32(UInt32(entry.size))
            directory.le16(UInt16(entry.name.count))
            directory.le16(needsZip64 ? 12 : 0)
            directory.le16(0)  // comment
            directory.le16(0)  // disk
            directory.le16(0)  // internal attributes
            directory.le32(0o100644 << 16)  // a regular file, rw-r--r--
            directory.le32(needsZip64 ? 0xFFFF_FFFF : UInt32(entry.offset))
            directory += entry.name
            if needsZip64 {  // 4.5.3: only the fields set to 0xFFFFFFFF, in order
                directory.le16(0x0001)
                directory.le16(8)
                directory.le64(entry.offset)
            }
            if directory.count >= 64 * 1024 {
                guard write(directory) else { return }
                directory = []
            }
        }
        guard write(directory) else { return }
        let directorySize = offset - directoryStart
        var end: [UInt8] = []
        let zip64 = entries.count >= 0xFFFF || directoryStart >= 0xFFFF_FFFF || directorySize >= 0xFFFF_FFFF
        if zip64 {
            let recordOffset = offset
            end.le32(0x0606_4B50)
            end.le64(44)
            end.le16(3 << 8 | 45)
            end.le16(45)
            end.le32(0)
            end.le32(0)
            end.le64(UInt64(entries.count))
            end.le64(UInt64(entries.count))
            end.le64(directorySize)
            end.le64(directoryStart)
            end.le32(0x0706_4B50)
            end.le32(0)
            end.le64(recordOffset)
            end.le32(1)
        }
        end.le32(0x0605_4B50)
        end.le16(0)
        end.le16(0)
        end.le16(zip64 ? 0xFFFF : UInt16(entries.count))
        end.le16(zip64 ? 0xFFFF : UInt16(entries.count))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(directorySize))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(directoryStart))
        end.le16(0)
        _ = write(end)
    }

    private mutating func write(_ bytes: [UInt8]) -> Bool {
        guard isOpen else { return false }
        offset += UInt64(bytes.count)
        isOpen = sink(bytes)
        return isOpen
    }
}

extension [UInt8] {
    fileprivate mutating func le16(_ value: UInt16) {
        append(UInt8(value & 0xFF)); append(UInt8(value >> 8))
    }

    fileprivate mutating func le32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }

    fileprivate mutating func le64(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { append(UInt8((value >> UInt64(shift)) & 0xFF)) }
    }
}
