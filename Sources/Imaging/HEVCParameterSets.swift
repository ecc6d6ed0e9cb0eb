/// The picture sizes an HEVC stream's sequence parameter sets code (ITU-T H.265, 7.3.2.2), read
/// before anything is decoded: what libde265 will allocate for a HEIF image, whatever size the
/// container claims for it (HEIFLayout.codedPixels). Only the fields up to the size are read.
enum HEVCParameterSets {
    static let spsType = 33

    /// The sizes (width × height) of the SPS NAL units in an hvcC box's payload (ISO/IEC
    /// 14496-15, 8.3.3.1: 22 bytes of configuration, then arrays of NAL units, each with a 16-bit
    /// length); nil when it does not parse, or an SPS in it does not.
    static func sizes(inConfiguration bytes: UnsafeBufferPointer<UInt8>) -> [Int]? {
        guard bytes.count >= 23 else { return nil }
        var at = 22
        let arrays = Int(bytes[at])
        at += 1
        var sizes: [Int] = []
        for _ in 0..<arrays {
            guard at + 3 <= bytes.count else { return nil }
            let count = Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            at += 3
            for _ in 0..<count {
                guard at + 2 <= bytes.count else { return nil }
                let length = Int(bytes[at]) << 8 | Int(bytes[at + 1])
                at += 2
                guard length <= bytes.count - at, collect(UnsafeBufferPointer(rebasing: bytes[at..<(at + length)]), into: &sizes) else { return nil }
                at += length
            }
        }
        return sizes
    }

    /// The sizes of the SPS NAL units in an item's data, as libheif hands it to libde265: each
    /// NAL unit after a 4-byte length. Nil when the lengths run past the data or an SPS does not
    /// parse.
    static func sizes(inData bytes: UnsafeBufferPointer<UInt8>) -> [Int]? {
        var at = 0
        var sizes: [Int] = []
        while at + 4 <= bytes.count {
            let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            at += 4
            guard length <= bytes.count - at, collect(UnsafeBufferPointer(rebasing: bytes[at..<(at + length)]), into: &sizes) else { return nil }
            at += length
        }
        return sizes
    }

    /// Adds a NAL unit's coded size to `sizes` when it is an SPS; false when it is one that does not parse.
    static func collect(_ nal: UnsafeBufferPointer<UInt8>, into sizes: inout [Int]) -> Bool {
        guard let size = nalSize(nal) else { return true }
        guard let pixels = size else { return false }
        sizes.append(pixels)
        return true
    }

    /// nil: not an SPS; .some(nil): an SPS that does not parse; else its width × height.
    static func nalSize(_ nal: UnsafeBufferPointer<UInt8>) -> Int?? {
        guard nal.count >= 2, Int(nal[0] >> 1) & 0x3F == spsType else { return nil }
        guard let (width, height) = spsSize(nal) else { return .some(nil) }
        return .some(width * height)
    }

    /// pic_width_in_luma_samples and pic_height_in_luma_samples of an SPS NAL unit (its 2-byte
    /// header first), emulation prevention bytes taken out as the decoder does (7.4.2).
    static func spsSize(_ nal: UnsafeBufferPointer<UInt8>) -> (width: Int, height: Int)? {
        // The RBSP: 00 00 03 → 00 00. Only the first 64 bytes are needed for the fields read here
        // (the profile_tier_level of 8 sub-layers is at most 48 bytes).
        var rbsp: [UInt8] = []
        var zeros = 0
        for byte in nal.dropFirst(2).prefix(96) {
            if zeros >= 2 && byte == 3 { zeros = 0; continue }
            rbsp.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        var bits = BitReader(rbsp)
        guard bits.skip(4), let maxSubLayersMinus1 = bits.read(3), bits.skip(1) else { return nil }
        // profile_tier_level(1, maxSubLayersMinus1): the general part is 88 bits and the level 8.
        guard bits.skip(96) else { return nil }
        var profilePresent: [Bool] = [], levelPresent: [Bool] = []
        for _ in 0..<maxSubLayersMinus1 {
            guard let profile = bits.read(1), let level = bits.read(1) else { return nil }
            profilePresent.append(profile == 1)
            levelPresent.append(level == 1)
        }
        if maxSubLayersMinus1 > 0 { guard bits.skip(2 * (8 - maxSubLayersMinus1)) else { return nil } }
        for i in 0..<maxSubLayersMinus1 {
            if profilePresent[i] { guard bits.skip(88) else { return nil } }
            if levelPresent[i] { guard bits.skip(8) else { return nil } }
        }
        guard bits.exponentialGolomb() != nil, let chroma = bits.exponentialGolomb(), chroma <= 3 else { return nil }
        if chroma == 3 { guard bits.skip(1) else { return nil } }
        guard let width = bits.exponentialGolomb(), let height = bits.exponentialGolomb(),
              width > 0, height > 0, width <= 65_535, height <= 65_535 else { return nil }
        return (width, height)
    }

    struct BitReader {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func read(_ count: Int) -> Int? {
            guard count <= 32, position + count <= bytes.count * 8 else { return nil }
            var value = 0
            for _ in 0..<count {
                value = value << 1 | Int(bytes[position >> 3] >> (7 - UInt8(position & 7)) & 1)
                position += 1
            }
            return value
        }

        mutating func skip(_ count: Int) -> Bool {
            guard position + count <= bytes.count * 8 else { return false }
            position += count
            return true
        }

        /// ue(v) (9.2): at most 31 leading zeros, as every value here fits in 32 bits.
        mutating func exponentialGolomb() -> Int? {
            var zeros = 0
            while true {
                guard let bit = read(1) else { return nil }
                if bit == 1 { break }
                zeros += 1
                guard zeros <= 31 else { return nil }
            }
            guard let rest = read(zeros) else { return nil }
            return (1 << zeros) - 1 + rest
        }
    }
}
