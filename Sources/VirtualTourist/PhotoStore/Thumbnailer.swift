import CTurboJPEG

/// Smaller JPEG copies of a photo for the album grid (`/photos/ID?w=256|512`), made once at
/// download with libjpeg-turbo: the JPEG is decoded straight at a reduced scale (its DCT scaling
/// factors, n/8, so a 2048 px photo decodes at 512 px without ever being decoded at full size),
/// then encoded again. Timings are in docs/architecture.md (PhotoStore).
public enum Thumbnailer {
    /// The widths served; any other ?w= is mapped to the nearest.
    public static let widths = [256, 512]

    /// JPEG quality by width. Measured on the fixture's ten photos (512–640 px, 523 KB): 256 px
    /// copies at quality 80 were 32 % of the originals' bytes, at 70 25 %, at 65 23 %. A 170 px
    /// tile shows no difference at 65; the 512 px copy (for 2× screens) keeps a little more.
    public static func quality(forWidth width: Int) -> Int32 { width <= 256 ? 65 : 72 }

    /// Thumbnails of a JPEG, by width: only those at most three quarters as wide as the original
    /// (otherwise the original is served for that width). Empty for anything but a decodable JPEG.
    public static func thumbnails(of jpeg: [UInt8], quality fixed: Int32? = nil) -> [Int: [UInt8]] {
        guard jpeg.starts(with: [0xFF, 0xD8, 0xFF]), let handle = tjInitDecompress() else { return [:] }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = jpeg.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0, width > 0, height > 0 else { return [:] }
        var count: Int32 = 0
        guard let factors = tjGetScalingFactors(&count), count > 0 else { return [:] }
        // Smallest first, so the first factor at least as wide as the target is the cheapest.
        func ratio(_ factor: tjscalingfactor) -> Double { Double(factor.num) / Double(factor.denom) }
        let scales: [tjscalingfactor] = (0..<Int(count)).map { factors[$0] }.sorted { ratio($0) < ratio($1) }
        var result: [Int: [UInt8]] = [:]
        for target in widths where Int(width) > target {
            // Only a copy at most three quarters as wide as the original: a 640 px photo's "512"
            // copy would be decoded at 7/8 (560 px) and re-encoded, nearly the whole cost of a
            // full decode, for a file not much smaller; the original serves that width instead.
            // Making thumbnails was 57 % of an album's CPU (script/bench albums, perf).
            guard let scale = scales.first(where: { scaled(width, $0) >= target }), scaled(width, scale) * 4 <= Int(width) * 3,
                  let small = decodeAndEncode(jpeg, handle: handle, width: Int32(scaled(width, scale)),
                                              height: Int32(scaled(height, scale)), quality: fixed ?? quality(forWidth: target)),
                  small.count < jpeg.count else { continue }
            result[target] = small
        }
        return result
    }

    /// TJSCALED: ceil(dimension × num / denom).
    private static func scaled(_ dimension: Int32, _ factor: tjscalingfactor) -> Int {
        (Int(dimension) * Int(factor.num) + Int(factor.denom) - 1) / Int(factor.denom)
    }

    private static func decodeAndEncode(_ jpeg: [UInt8], handle: tjhandle, width: Int32, height: Int32, quality: Int32) -> [UInt8]? {
        let pitch = Int(width) * 3
        var pixels = [UInt8](repeating: 0, count: pitch * Int(height))
        let decoded = jpeg.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                tjDecompress2(handle, source.baseAddress, UInt(source.count), target.baseAddress, width, Int32(pitch), height,
                              Int32(TJPF_RGB.rawValue), TJFLAG_FASTDCT)
            }
        }
        guard decoded == 0 else { return nil }
        return encode(rgb: pixels, width: width, height: height, quality: quality)
    }

    /// RGB pixels (3 bytes each, rows without padding) as a 4:2:0 JPEG.
    static func encode(rgb pixels: [UInt8], width: Int32, height: Int32, quality: Int32) -> [UInt8]? {
        let pitch = Int(width) * 3
        guard pixels.count == pitch * Int(height), let compressor = tjInitCompress() else { return nil }
        defer { tjDestroy(compressor) }
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let encoded = pixels.withUnsafeBufferPointer {
            tjCompress2(compressor, $0.baseAddress, width, Int32(pitch), height, Int32(TJPF_RGB.rawValue), &output, &size,
                        Int32(TJSAMP_420.rawValue), quality, TJFLAG_FASTDCT)
        }
        defer { if let output { tjFree(output) } }
        guard encoded == 0, let output else { return nil }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }
}
