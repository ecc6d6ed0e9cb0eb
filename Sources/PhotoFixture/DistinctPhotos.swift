import CTurboJPEG
import Synchronization

/// `--distinct N`: every photo id gets one of N distinct images at the size the app asks Flickr
/// for, instead of one of the ten sample photos. The app downloads `url_z` (or `url_m` where a photo
/// has no `url_z`), and Flickr's size suffixes are documented as z = 640 px on the longest side
/// (m = 240): so every image is 640 × 480 (landscape 4:3), also for `_m`, where it is larger than
/// Flickr's and so never kinder.
/// With only ten images nearly every download is a hit in the app's thumbnail cache and its
/// store's dedup, which flatters the album benchmark (script/bench albums reports both).
///
/// Encoding a fresh JPEG per request would make the fixture the bottleneck (it shares one
/// core with the clients in the benchmark), so each image is spliced from pre-encoded pieces
/// instead: every sample photo is scaled up, cropped, flipped and tinted into a few variants, and
/// each 16-pixel row of MCUs of a variant is encoded `alternatives` times, each time with other
/// noise, as a JPEG of its own. The pieces share their tables, so an image is one header with a
/// restart interval of one MCU row (DRI, ITU T.81 B.2.4.4: prediction restarts at each row) followed
/// by one piece's entropy-coded data per row, separated by RSTn markers: a valid baseline JPEG,
/// assembled by copying bytes, whose pixels differ from every other image's. Which piece each row
/// takes comes from the image's number through a bijection, so two numbers never give the same image.
final class DistinctPhotos: Sendable {
    /// Distinct images; a photo id is mapped onto 0..<count by a mixing hash (so ids of nearby
    /// pins and pages spread evenly).
    let count: Int
    /// Encoded pieces per MCU row: the image's number picks one for each row.
    static let alternatives = 4
    static let quality: Int32 = 90
    /// Added to each sample, ±: film grain. It makes neighbouring images differ in every row and
    /// gives the entropy-coded data the weight of a real photo's detail.
    static let noise = 6

    /// How each sample photo is turned into a larger picture: the width wanted (4:3, height from
    /// it), where the crop sits in what the scaling leaves over, mirrored or not, and a tint (red,
    /// green, blue in thousandths).
    struct Variant {
        let width: Int
        let offset: (x: Double, y: Double)
        let mirrored: Bool
        let tint: (Int, Int, Int)
    }

    static let variants = [
        Variant(width: 640, offset: (0.5, 0.5), mirrored: false, tint: (1060, 1000, 940)),
        Variant(width: 640, offset: (0.2, 0.8), mirrored: true, tint: (950, 1000, 1070)),
        Variant(width: 640, offset: (0.9, 0.1), mirrored: false, tint: (1000, 1040, 960)),
        Variant(width: 640, offset: (0.1, 0.4), mirrored: true, tint: (1030, 990, 1010)),
    ]

    /// One variant of one sample photo, in pieces: the header (up to and with SOS) and each MCU
    /// row's entropy-coded data in every alternative.
    struct Pieces: Sendable {
        let header: [UInt8]
        let rows: [[[UInt8]]]
        let width: Int
        let height: Int
    }

    private let samples: [[UInt8]]
    private let prepared: Mutex<[Int: Pieces]>

    init(count: Int, samples: [[UInt8]]) {
        self.count = max(1, count)
        self.samples = samples
        prepared = Mutex([:])
    }

    /// Every variant of every sample, ahead of the first request (the fixture's executable does
    /// this before it listens; tests make only what they ask for).
    func prepareAll() {
        for key in 0..<(samples.count * Self.variants.count) { _ = pieces(key) }
    }

    /// The image number a photo id shows (0..<count).
    func number(forID id: Int) -> Int {
        Int(Self.mix64(UInt64(bitPattern: Int64(id))) % UInt64(count))
    }

    /// The image of a photo id: the same id always gets the same bytes.
    func image(forID id: Int) -> [UInt8]? { image(number: number(forID: id)) }

    /// Image `number` (0..<count); nil only when the sample photo cannot be decoded.
    func image(number: Int) -> [UInt8]? {
        let key = number % (samples.count * Self.variants.count)
        guard let pieces = pieces(key) else { return nil }
        // Row choices: base-`alternatives` digits of a bijection of what is left of the number,
        // 2 bits a row; past the first 30 rows (a 480 px image has 30), of a second mix.
        var choices = Self.mix60(UInt64(number / (samples.count * Self.variants.count)))
        var output = pieces.header
        output.reserveCapacity(pieces.rows.reduce(pieces.header.count + 2 * pieces.rows.count + 2) { $0 + $1[0].count + 4096 })
        for (row, alternatives) in pieces.rows.enumerated() {
            if row > 0 && row % 30 == 0 { choices = Self.mix64(choices &+ UInt64(row)) }
            output += alternatives[Int(choices & 3)]
            choices >>= 2
            if row < pieces.rows.count - 1 { output += [0xFF, 0xD0 + UInt8(row % 8)] }
        }
        output += [0xFF, 0xD9]
        return output
    }

    private func pieces(_ key: Int) -> Pieces? {
        prepared.withLock { cache in
            if let known = cache[key] { return known }
            let made = Self.make(sample: samples[key % samples.count], variant: Self.variants[key / samples.count], seed: UInt64(key))
            cache[key] = made
            return made
        }
    }

    // MARK: Making the pieces

    private static func make(sample: [UInt8], variant: Variant, seed: UInt64) -> Pieces? {
        guard var (pixels, width, height) = scaledUp(sample, toCover: variant.width) else { return nil }
        // Crop to 4:3 at the variant's width, or as much of it as the scaled photo holds.
        let cropWidth = min(variant.width, width, height * 4 / 3)
        let cropHeight = cropWidth * 3 / 4
        let left = Int(Double(width - cropWidth) * variant.offset.x), top = Int(Double(height - cropHeight) * variant.offset.y)
        var picture = [UInt8](repeating: 0, count: cropWidth * cropHeight * 3)
        pixels.withUnsafeMutableBufferPointer { source in
            picture.withUnsafeMutableBufferPointer { target in
                let tint = [variant.tint.0, variant.tint.1, variant.tint.2]
                for y in 0..<cropHeight {
                    for x in 0..<cropWidth {
                        let from = ((top + y) * width + left + (variant.mirrored ? cropWidth - 1 - x : x)) * 3
                        let to = (y * cropWidth + x) * 3
                        for c in 0..<3 { target[to + c] = UInt8(min(255, Int(source[from + c]) * tint[c] / 1000)) }
                    }
                }
            }
        }
        (width, height) = (cropWidth, cropHeight)
        guard let compressor = tjInitCompress() else { return nil }
        defer { tjDestroy(compressor) }
        let rowCount = (height + 15) / 16
        var rows = [[[UInt8]]](repeating: [], count: rowCount)
        var header: [UInt8]?
        var random = SplitMix(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        for _ in 0..<alternatives {
            var noisy = picture
            noisy.withUnsafeMutableBufferPointer { samples in
                // Eight grains from each random number (a byte each, modulo the grain's range).
                var bits: UInt64 = 0
                for i in 0..<samples.count {
                    if i % 8 == 0 { bits = random.next() }
                    let grain = Int(bits & 0xFF) % (2 * noise + 1) - noise
                    bits >>= 8
                    samples[i] = UInt8(clamping: Int(samples[i]) + grain)
                }
            }
            for row in 0..<rowCount {
                let y = row * 16, rowHeight = min(16, height - y)
                guard let strip = noisy.withUnsafeBufferPointer({
                    encode(compressor, $0.baseAddress! + y * width * 3, width: width, height: rowHeight)
                }), let parts = split(strip) else { return nil }
                rows[row].append(parts.data)
                if header == nil { header = withRestarts(parts.header, height: height, mcusPerRow: (width + 15) / 16) }
            }
        }
        guard let header else { return nil }
        return Pieces(header: header, rows: rows, width: width, height: height)
    }

    /// The sample decoded at the smallest of libjpeg-turbo's scales (n/8, up to 2×) that covers
    /// `width` × 3/4 of it, or at 2× when none does.
    private static func scaledUp(_ jpeg: [UInt8], toCover width: Int) -> ([UInt8], Int, Int)? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var w: Int32 = 0, h: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        guard jpeg.withUnsafeBufferPointer({ tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &w, &h, &subsampling, &colorspace) }) == 0
        else { return nil }
        var scale = 16
        for eighths in 8...16 where Int(w) * eighths / 8 >= width && Int(h) * eighths / 8 >= width * 3 / 4 {
            scale = eighths
            break
        }
        let sw = (Int(w) * scale + 7) / 8, sh = (Int(h) * scale + 7) / 8
        var pixels = [UInt8](repeating: 0, count: sw * sh * 3)
        let decoded = jpeg.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                tjDecompress2(handle, source.baseAddress, UInt(source.count), target.baseAddress, Int32(sw), Int32(sw * 3), Int32(sh),
                              Int32(TJPF_RGB.rawValue), 0)
            }
        }
        return decoded == 0 ? (pixels, sw, sh) : nil
    }

    private static func encode(_ compressor: tjhandle, _ rgb: UnsafePointer<UInt8>, width: Int, height: Int) -> [UInt8]? {
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let encoded = tjCompress2(compressor, rgb, Int32(width), Int32(width * 3), Int32(height), Int32(TJPF_RGB.rawValue), &output, &size,
                                  Int32(TJSAMP_420.rawValue), quality, 0)
        defer { if let output { tjFree(output) } }
        guard encoded == 0, let output else { return nil }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    /// A JPEG as TurboJPEG writes it (markers, SOS, entropy-coded data, EOI): everything up to and
    /// with the SOS segment, the entropy-coded data, and where the frame's height sits in the header.
    static func split(_ jpeg: [UInt8]) -> (header: [UInt8], data: [UInt8])? {
        var i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF {
            let marker = jpeg[i + 1], length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if marker == 0xDA {
                let start = i + 2 + length
                guard jpeg.count >= start + 2, jpeg[jpeg.count - 2] == 0xFF, jpeg[jpeg.count - 1] == 0xD9 else { return nil }
                return (Array(jpeg[0..<start]), Array(jpeg[start..<(jpeg.count - 2)]))
            }
            i += 2 + length
        }
        return nil
    }

    /// A strip's header made the whole image's: the frame's height set (SOF0: FF C0, length,
    /// precision, height, width) and a DRI segment of one MCU row put before the SOS.
    static func withRestarts(_ header: [UInt8], height: Int, mcusPerRow: Int) -> [UInt8]? {
        var header = header
        var i = 2, sos: Int?
        while i + 4 <= header.count, header[i] == 0xFF {
            let marker = header[i + 1], length = Int(header[i + 2]) << 8 | Int(header[i + 3])
            if marker == 0xC0 {
                header[i + 5] = UInt8(height >> 8)
                header[i + 6] = UInt8(height & 0xFF)
            }
            if marker == 0xDA { sos = i; break }
            i += 2 + length
        }
        guard let sos else { return nil }
        header.insert(contentsOf: [0xFF, 0xDD, 0x00, 0x04, UInt8(mcusPerRow >> 8), UInt8(mcusPerRow & 0xFF)], at: sos)
        return header
    }

    // MARK: Numbers

    /// SplitMix64's finaliser: a bijection of 64-bit numbers.
    static func mix64(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A bijection of 60-bit numbers (odd multipliers and xor-shifts modulo 2^60), so the first 30
    /// rows' choices (2 bits each) differ for any two numbers below 2^60.
    static func mix60(_ value: UInt64) -> UInt64 {
        let mask: UInt64 = (1 << 60) - 1
        var z = value & mask
        z = (z &* 0xBF58_476D_1CE4_E5B9) & mask
        z ^= z >> 29
        z = (z &* 0x94D0_49BB_1331_11EB) & mask
        z ^= z >> 32
        return z
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            return DistinctPhotos.mix64(state &- 0x9E37_79B9_7F4A_7C15)
        }
    }
}
