import CTurboJPEG

/// Smaller JPEG copies of a photo for the album grid (`/photos/ID?w=256|512`), made once at
/// download with libjpeg-turbo: the JPEG is decoded straight at a reduced scale (its DCT scaling
/// factors, n/8, so a 2048 px photo decodes at 512 px without ever being decoded at full size),
/// then encoded again. Timings are in docs/architecture.md (PhotoStore).
public enum Thumbnailer {
    /// The widths served; any other ?w= is mapped to the nearest.
    public static let widths = [256, 512]

    /// JPEG quality by width: a 170 px tile shows no difference at 65, and the bytes fall with it
    /// (docs/performance.md, "PhotoStore"); the 512 px copy (for 2× screens) keeps a little more.
    public static func quality(forWidth width: Int) -> Int32 { width <= 256 ? 65 : 72 }

    /// Thumbnails of a JPEG, by width: only those at most three quarters as wide as the original
    /// (otherwise the original is served for that width). Empty for anything but a decodable JPEG.
    /// Each copy is at least as wide as its target (a DCT scale's width, or half a wider copy's).
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
        // The copies worth making: each at the smallest DCT scale at least as wide as its target,
        // and only at most three quarters as wide as the original: a 640 px photo's "512" copy
        // would be decoded at 7/8 (560 px) and re-encoded, nearly the whole cost of a full decode,
        // for a file not much smaller; the original serves that width instead. Making thumbnails
        // is most of an album's CPU (docs/performance.md, "PhotoStore").
        let plans: [(target: Int, scale: tjscalingfactor)] = widths.sorted(by: >).compactMap { target in
            guard Int(width) > target, let scale = scales.first(where: { scaled(width, $0) >= target }),
                  scaled(width, scale) * 4 <= Int(width) * 3 else { return nil }
            return (target, scale)
        }
        guard !plans.isEmpty else { return [:] }
        func keep(_ small: [UInt8]?, for target: Int, into result: inout [Int: [UInt8]]) {
            if let small, small.count < jpeg.count { result[target] = small }
        }
        var result: [Int: [UInt8]] = [:]
        if subsampling == TJSAMP_420.rawValue {
            // 4:2:0 (nearly every photo): decoded once, at the widest copy's scale, into its YUV
            // planes, and encoded from them: no colour conversion or chroma resampling either
            // way. A narrower copy is that image halved (2 × 2 averages) while half is still at
            // least as wide as its target, so the photo's entropy-coded data is read once.
            var current: PlanarImage?
            for plan in plans {
                let planned = (width: scaled(width, plan.scale), height: scaled(height, plan.scale))
                while let image = current, image.width > planned.width, image.width / 2 >= plan.target { current = image.halved() }
                if current == nil || current!.width > planned.width {
                    current = PlanarImage.decode(jpeg, handle: handle, width: planned.width, height: planned.height)
                }
                guard let image = current else { break }
                keep(image.encoded(quality: fixed ?? quality(forWidth: plan.target)), for: plan.target, into: &result)
            }
            return result
        }
        for plan in plans {
            keep(decodeAndEncode(jpeg, handle: handle, width: Int32(scaled(width, plan.scale)), height: Int32(scaled(height, plan.scale)),
                                 quality: fixed ?? quality(forWidth: plan.target)), for: plan.target, into: &result)
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
    package static func encode(rgb pixels: [UInt8], width: Int32, height: Int32, quality: Int32) -> [UInt8]? {
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

/// A 4:2:0 image as TurboJPEG's unified planar YUV (Y, then Cb, then Cr, rows unpadded): what a
/// JPEG decodes to before colour conversion and what an encoder takes after it.
package struct PlanarImage {
    package let width: Int
    package let height: Int
    package var planes: [UInt8]

    package static let subsampling = Int32(TJSAMP_420.rawValue)

    package static func planeSize(_ component: Int32, width: Int, height: Int) -> (width: Int, height: Int) {
        (Int(tjPlaneWidth(component, Int32(width), subsampling)), Int(tjPlaneHeight(component, Int32(height), subsampling)))
    }

    /// The JPEG decoded at the DCT scale that gives `width` × `height` (one of TurboJPEG's).
    package static func decode(_ jpeg: [UInt8], handle: tjhandle, width: Int, height: Int) -> PlanarImage? {
        var planes = [UInt8](repeating: 0, count: Int(tjBufSizeYUV2(Int32(width), 1, Int32(height), subsampling)))
        let decoded = jpeg.withUnsafeBufferPointer { source in
            planes.withUnsafeMutableBufferPointer { target in
                tjDecompressToYUV2(handle, source.baseAddress, UInt(source.count), target.baseAddress, Int32(width), 1, Int32(height),
                                   TJFLAG_FASTDCT)
            }
        }
        return decoded == 0 ? PlanarImage(width: width, height: height, planes: planes) : nil
    }

    /// Half as wide and high (rounded down), each sample the average of the 2 × 2 it covers; the
    /// last row or column of an odd plane is repeated.
    package func halved() -> PlanarImage {
        let width = self.width / 2, height = self.height / 2
        var out = [UInt8](repeating: 0, count: Int(tjBufSizeYUV2(Int32(width), 1, Int32(height), Self.subsampling)))
        planes.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                var from = 0, to = 0
                for component: Int32 in 0..<3 {
                    let big = Self.planeSize(component, width: self.width, height: self.height)
                    let small = Self.planeSize(component, width: width, height: height)
                    for y in 0..<small.height {
                        let top = from + min(2 * y, big.height - 1) * big.width, bottom = from + min(2 * y + 1, big.height - 1) * big.width
                        let row = to + y * small.width
                        for x in 0..<small.width {
                            let left = min(2 * x, big.width - 1), right = min(2 * x + 1, big.width - 1)
                            let sum = Int(source[top + left]) + Int(source[top + right]) + Int(source[bottom + left]) + Int(source[bottom + right])
                            target[row + x] = UInt8((sum + 2) >> 2)
                        }
                    }
                    from += big.width * big.height
                    to += small.width * small.height
                }
            }
        }
        return PlanarImage(width: width, height: height, planes: out)
    }

    /// A 4:2:0 JPEG of the planes.
    package func encoded(quality: Int32) -> [UInt8]? {
        guard let compressor = tjInitCompress() else { return nil }
        defer { tjDestroy(compressor) }
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let encoded = planes.withUnsafeBufferPointer {
            tjCompressFromYUV(compressor, $0.baseAddress, Int32(width), 1, Int32(height), Self.subsampling, &output, &size, quality, TJFLAG_FASTDCT)
        }
        defer { if let output { tjFree(output) } }
        guard encoded == 0, let output else { return nil }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }
}
