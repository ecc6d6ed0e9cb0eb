/// What a HEIF file's primary image is, read from its boxes (ISO/IEC 14496-12 and 23008-12)
/// before libheif decodes anything. libheif 1.15 (Debian 12's) checks only the size an image
/// claims (`ispe`), while a grid is decoded at the size its own `grid` box gives: a 130 KB file
/// claiming 64 × 64 decoded to 32,640 × 32,640 (9.6 GB). So the grid's output size is read here
/// and checked against the pixel limit like any other (docs/architecture.md, "Own photos").
enum HEIFLayout {
    struct Primary: Equatable {
        /// The item's type: "hvc1" (one coded image), "grid" (tiles), or another.
        let type: String
        /// For a grid: its output size.
        let width: Int?
        let height: Int?
    }

    /// A box: its type and where its payload is.
    private struct Box {
        let type: String
        let payload: Range<Int>
    }

    /// The boxes in `range` of `bytes`, at most `limit` of them; nil when one runs past the end.
    private static func boxes(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, limit: Int = 4096) -> [Box]? {
        var result: [Box] = []
        var at = range.lowerBound
        while at + 8 <= range.upperBound {
            guard result.count < limit else { return nil }
            var size = Int(read32(bytes, at))
            let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
            var header = 8
            if size == 1 {
                guard at + 16 <= range.upperBound else { return nil }
                let large = read64(bytes, at + 8)
                guard large <= UInt64(Int.max) else { return nil }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = range.upperBound - at
            }
            // A 64-bit size a stranger wrote: compared with what is left, never added to (Int.max traps).
            guard size >= header, size <= range.upperBound - at else { return nil }
            result.append(Box(type: type, payload: (at + header)..<(at + size)))
            at += size
        }
        return result
    }

    static func read32(_ b: UnsafeBufferPointer<UInt8>, _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    static func read64(_ b: UnsafeBufferPointer<UInt8>, _ at: Int) -> UInt64 {
        UInt64(read32(b, at)) << 32 | UInt64(read32(b, at + 4))
    }

    /// An unsigned big-endian number of `size` bytes (0, 2, 4 or 8) at `at`, moving `at` past it.
    private static func number(_ b: UnsafeBufferPointer<UInt8>, _ at: inout Int, _ size: Int, end: Int) -> Int? {
        guard at + size <= end else { return nil }
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(b[at + i]) }
        at += size
        return value <= UInt64(Int.max) ? Int(value) : nil
    }

    /// The primary image's type and, for a grid, its output size; nil when the boxes cannot be read.
    static func primary(_ bytes: UnsafeBufferPointer<UInt8>) -> Primary? {
        guard let children = metaChildren(bytes) else { return nil }
        // pitm: the primary item's id.
        guard let pitm = children.first(where: { $0.type == "pitm" }), pitm.payload.count >= 6 else { return nil }
        var at = pitm.payload.lowerBound
        let pitmVersion = Int(bytes[at])
        at += 4
        guard let primaryID = number(bytes, &at, pitmVersion == 0 ? 2 : 4, end: pitm.payload.upperBound),
              let type = items(bytes, children: children)?[primaryID] else { return nil }
        guard type == "grid" else { return Primary(type: type, width: nil, height: nil) }
        // The grid's description is the item's data: where iloc says (in the file, or in idat).
        guard let data = itemData(bytes, children: children, item: primaryID), data.count >= 8 else { return nil }
        at = data.lowerBound + 1
        let flags = bytes[at]
        at += 3  // flags, rows - 1, columns - 1
        let fieldSize = flags & 1 == 0 ? 2 : 4
        guard let width = number(bytes, &at, fieldSize, end: data.upperBound), let height = number(bytes, &at, fieldSize, end: data.upperBound) else { return nil }
        return Primary(type: type, width: width, height: height)
    }

    /// What decoding the file would cost: the pixels of every HEVC image in it, at the sizes
    /// their own sequence parameter sets code (what libde265 allocates), summed; nil when an
    /// image's size cannot be read, or the file holds an image of a kind we do not decode
    /// (AV1, JPEG, VVC and the like are refused, never handed to a library we did not choose).
    /// libheif 1.15 compares none of these with the size an image claims (`ispe`): a file
    /// claiming 64 × 64 whose HEVC codes 16,384 × 16,384, as a grid's tile or an alpha image,
    /// would be decoded in full.
    static func codedPixels(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let children = metaChildren(bytes), let items = items(bytes, children: children) else { return nil }
        let refused: Set<String> = ["av01", "avc1", "jpeg", "j2k1", "vvc1", "evc1", "unci", "hvt1", "lhv1", "mski"]
        guard !items.values.contains(where: { refused.contains($0) }) else { return nil }
        let hevc = items.filter { $0.value == "hvc1" }.map(\.key)
        guard !hevc.isEmpty else { return 0 }
        // ipco's properties (1-based) and which of them each item has (ipma).
        guard let iprp = children.first(where: { $0.type == "iprp" }), let inside = boxes(bytes, iprp.payload),
              let ipco = inside.first(where: { $0.type == "ipco" }), let properties = boxes(bytes, ipco.payload) else { return nil }
        var associations: [Int: [Int]] = [:]
        for ipma in inside where ipma.type == "ipma" {
            guard ipma.payload.count >= 8 else { return nil }
            var at = ipma.payload.lowerBound
            let version = Int(bytes[at]), wide = bytes[at + 3] & 1 == 1
            at += 4
            guard let count = number(bytes, &at, 4, end: ipma.payload.upperBound) else { return nil }
            for _ in 0..<min(count, 65_536) {
                guard let id = number(bytes, &at, version < 1 ? 2 : 4, end: ipma.payload.upperBound),
                      let n = number(bytes, &at, 1, end: ipma.payload.upperBound) else { return nil }
                for _ in 0..<n {
                    guard let entry = number(bytes, &at, wide ? 2 : 1, end: ipma.payload.upperBound) else { return nil }
                    associations[id, default: []].append(entry & (wide ? 0x7FFF : 0x7F))
                }
            }
        }
        var total = 0
        for id in hevc {
            // Every parameter set the decoder is given: the hvcC's, then any in the item's own data.
            var largest = 0
            for index in associations[id] ?? [] where index >= 1 && index <= properties.count && properties[index - 1].type == "hvcC" {
                guard let sizes = HEVCParameterSets.sizes(inConfiguration: UnsafeBufferPointer(rebasing: bytes[properties[index - 1].payload])) else { return nil }
                largest = max(largest, sizes.max() ?? 0)
            }
            guard let extents = itemExtents(bytes, children: children, item: id) else { return nil }
            for extent in extents {
                guard let sizes = HEVCParameterSets.sizes(inData: UnsafeBufferPointer(rebasing: bytes[extent])) else { return nil }
                largest = max(largest, sizes.max() ?? 0)
            }
            guard largest > 0 else { return nil }
            let (sum, overflow) = total.addingReportingOverflow(largest)
            guard !overflow else { return nil }
            total = sum
        }
        return total
    }

    /// The boxes inside the file's (first) meta box, past its version and flags.
    private static func metaChildren(_ bytes: UnsafeBufferPointer<UInt8>) -> [Box]? {
        guard let top = boxes(bytes, 0..<bytes.count), let meta = top.first(where: { $0.type == "meta" }),
              meta.payload.count > 4 else { return nil }
        return boxes(bytes, (meta.payload.lowerBound + 4)..<meta.payload.upperBound)
    }

    /// Every item's id and type (iinf's infe boxes, versions 2 and 3); an id given twice keeps its
    /// first type, as libheif does.
    private static func items(_ bytes: UnsafeBufferPointer<UInt8>, children: [Box]) -> [Int: String]? {
        guard let iinf = children.first(where: { $0.type == "iinf" }), iinf.payload.count >= 6 else { return nil }
        var at = iinf.payload.lowerBound
        let iinfVersion = Int(bytes[at])
        at += 4
        guard number(bytes, &at, iinfVersion == 0 ? 2 : 4, end: iinf.payload.upperBound) != nil,
              let entries = boxes(bytes, at..<iinf.payload.upperBound) else { return nil }
        var result: [Int: String] = [:]
        for infe in entries where infe.type == "infe" && infe.payload.count >= 12 {
            var p = infe.payload.lowerBound
            let version = Int(bytes[p])
            guard version >= 2 else { continue }
            p += 4
            guard let id = number(bytes, &p, version == 2 ? 2 : 4, end: infe.payload.upperBound), p + 6 <= infe.payload.upperBound else { return nil }
            p += 2  // item_protection_index
            if result[id] == nil { result[id] = String(decoding: bytes[p..<(p + 4)], as: UTF8.self) }
        }
        return result
    }

    /// Where an item's data is, when it is one extent (a grid description is a few bytes).
    private static func itemData(_ b: UnsafeBufferPointer<UInt8>, children: [Box], item: Int) -> Range<Int>? {
        guard let extents = itemExtents(b, children: children, item: item), extents.count == 1 else { return nil }
        return extents[0]
    }

    /// Where an item's data is: its extents, in the file or in idat; [] when iloc does not name it.
    private static func itemExtents(_ b: UnsafeBufferPointer<UInt8>, children: [Box], item: Int) -> [Range<Int>]? {
        guard let iloc = children.first(where: { $0.type == "iloc" }), iloc.payload.count >= 8 else { return nil }
        let end = iloc.payload.upperBound
        var at = iloc.payload.lowerBound
        let version = Int(b[at])
        at += 4
        guard at + 2 <= end else { return nil }
        let offsetSize = Int(b[at] >> 4), lengthSize = Int(b[at] & 0xF), baseOffsetSize = Int(b[at + 1] >> 4)
        let indexSize = version >= 1 ? Int(b[at + 1] & 0xF) : 0
        at += 2
        guard [0, 4, 8].contains(offsetSize), [0, 4, 8].contains(lengthSize), [0, 4, 8].contains(baseOffsetSize), [0, 4, 8].contains(indexSize),
              let count = number(b, &at, version < 2 ? 2 : 4, end: end) else { return nil }
        for _ in 0..<min(count, 65_536) {
            guard let id = number(b, &at, version < 2 ? 2 : 4, end: end) else { return nil }
            var method = 0
            if version >= 1 {
                guard let word = number(b, &at, 2, end: end) else { return nil }
                method = word & 0xF
            }
            guard number(b, &at, 2, end: end) != nil, let base = number(b, &at, baseOffsetSize, end: end),
                  let extentCount = number(b, &at, 2, end: end) else { return nil }
            var extents: [(offset: Int, length: Int)] = []
            for _ in 0..<extentCount {
                if indexSize > 0 { guard number(b, &at, indexSize, end: end) != nil else { return nil } }
                guard let offset = number(b, &at, offsetSize, end: end), let length = number(b, &at, lengthSize, end: end) else { return nil }
                extents.append((offset, length))
            }
            guard id == item else { continue }
            var ranges: [Range<Int>] = []
            for extent in extents {
                // Offsets are a stranger's 64-bit numbers: sums that overflow are refused, not trapped on.
                let (offset, overflow) = base.addingReportingOverflow(extent.offset)
                guard !overflow, offset <= b.count else { return nil }
                var start: Int, limit = b.count
                switch method {
                case 0: start = offset
                case 1:
                    guard let idat = children.first(where: { $0.type == "idat" }), offset <= idat.payload.count else { return nil }
                    start = idat.payload.lowerBound + offset
                    limit = idat.payload.upperBound
                default: return nil
                }
                let length = extent.length == 0 ? limit - start : extent.length
                guard start >= 0, length >= 0, start <= limit - length else { return nil }
                ranges.append(start..<(start + length))
            }
            return ranges
        }
        return []
    }
}
