import CTurboJPEG

/// Small copies of a JPEG for album tiles (a tile shows at about 170 CSS px; the stored photo is
/// often 640 px or more). Made once, when the photo is downloaded.
///
/// Why libjpeg-turbo's TurboJPEG API: it decodes straight at a reduced scale (the inverse DCT
/// computes 1/2, 3/8, 1/4 … of the image, so a 640 px photo is never decoded at full size), which
/// is several times faster than decoding and resampling, and it is one small Debian library.
/// The result is at least `width` wide and less than twice that (the next scaling step up), which
/// `srcset` handles; libvips would resample exactly but brings a large dependency tree.
public enum Thumbnails {
    /// The widths kept per photo, for `srcset` (GET /photos/ID?w=256 or 512).
    public static let widths = [256, 512]

    /// JPEG quality by width. Measured on the fixture's ten photos (512–640 px, 523 KB): 256 px
    /// copies at quality 80 were 32 % of the originals' bytes, at 70 25 %, at 65 23 %. A 170 px
    /// tile shows no difference at 65; the 512 px copy (for 2× screens) keeps a little more.
    public static func quality(forWidth width: Int) -> Int32 { width <= 256 ? 65 : 72 }

    /// A JPEG at least `width` pixels wide, or nil when `jpeg` is not a JPEG or is already that
    /// small (the original then serves).
    public static func jpeg(_ jpeg: [UInt8], width target: Int, quality: Int32? = nil) -> [UInt8]? {
        let quality = quality ?? Self.quality(forWidth: target)
        guard jpeg.count > 3, jpeg[0] == 0xFF, jpeg[1] == 0xD8,
              let decoder = tjInitDecompress() else { return nil }
        defer { tjDestroy(decoder) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        guard tjDecompressHeader3(decoder, jpeg, UInt(jpeg.count), &width, &height, &subsampling, &colorspace) == 0,
              width > Int32(target), height > 0, width <= 20_000, height <= 20_000 else { return nil }

        // The smallest scaling factor that still gives at least `target` pixels across.
        var count: Int32 = 0
        guard let factors = tjGetScalingFactors(&count) else { return nil }
        var best: (w: Int32, h: Int32)?
        for i in 0..<Int(count) {
            let f = factors[i]
            let w = (width * f.num + f.denom - 1) / f.denom, h = (height * f.num + f.denom - 1) / f.denom
            guard w >= Int32(target), w < width else { continue }
            if best == nil || w < best!.w { best = (w, h) }
        }
        guard let (w, h) = best else { return nil }

        var pixels = [UInt8](repeating: 0, count: Int(w) * Int(h) * 3)
        let pitch = w * 3
        guard tjDecompress2(decoder, jpeg, UInt(jpeg.count), &pixels, w, pitch, h, Int32(TJPF_RGB.rawValue),
                            Int32(TJFLAG_FASTDCT)) == 0 else { return nil }

        guard let encoder = tjInitCompress() else { return nil }
        defer { tjDestroy(encoder) }
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        guard tjCompress2(encoder, pixels, w, pitch, h, Int32(TJPF_RGB.rawValue), &output, &size,
                          Int32(TJSAMP_420.rawValue), quality, Int32(TJFLAG_FASTDCT)) == 0, let output else { return nil }
        defer { tjFree(output) }
        let result = Array(UnsafeBufferPointer(start: output, count: Int(size)))
        // A "thumbnail" no smaller than the original is no use.
        return result.count < jpeg.count ? result : nil
    }
}
