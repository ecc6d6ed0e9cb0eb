import CTurboJPEG

/// What is made of a person's own photo: a display version for the viewer and two thumbnails
/// for the grid, all JPEG, the right way up, in the original's colours (its ICC profile) and
/// carrying nothing else of it: no EXIF, no XMP, so no location. The original itself is kept
/// byte for byte beside them (docs/architecture.md, "Own photos").
public struct PhotoVersions: Sendable {
    public let format: ImageFormat
    /// The original's size as shown.
    public let width: Int
    public let height: Int
    public let tags: CameraTags
    public let display: [UInt8]
    public let displayWidth: Int
    public let displayHeight: Int
    /// By width (256, 512): only those narrower than the display version.
    public let thumbnails: [Int: [UInt8]]

    /// The display version's long side: sharp on a 2× laptop screen, a few hundred KB.
    public static let displayLongest = 2048
    public static let thumbnailWidths = [256, 512]

    public struct Limits: Sendable {
        /// Pixels an original may have (its header's width × height), checked before decoding.
        public var maxPixels: Int
        public init(maxPixels: Int = 100_000_000) { self.maxPixels = maxPixels }
    }

    public static func make(from original: [UInt8], limits: Limits = Limits()) throws(ImageRefusal) -> PhotoVersions {
        try original.withUnsafeBufferPointer { (bytes) throws(ImageRefusal) -> PhotoVersions in try make(from: bytes, limits: limits) }
    }

    /// From the bytes where they lie: an upload's file, mapped (no copy of it is made here).
    public static func make(from original: UnsafeBufferPointer<UInt8>, limits: Limits = Limits()) throws(ImageRefusal) -> PhotoVersions {
        let decoded = try PhotoDecoding.decode(original, maxPixels: limits.maxPixels, atLeast: displayLongest)
        let display = decoded.image.fitted(within: displayLongest)
        guard let displayJPEG = encode(display, quality: 85, profile: decoded.profile) else { throw .unreadable(decoded.format, "encoding") }
        var thumbnails: [Int: [UInt8]] = [:]
        var source = display
        for width in thumbnailWidths.sorted(by: >) where width < source.width {
            let height = max(1, Int((Double(source.height) * Double(width) / Double(source.width)).rounded()))
            source = source.resized(width: width, height: min(height, source.height))
            if let jpeg = encode(source, quality: width <= 256 ? 70 : 75, profile: decoded.profile) { thumbnails[width] = jpeg }
        }
        return PhotoVersions(format: decoded.format, width: decoded.width, height: decoded.height, tags: decoded.tags,
                             display: displayJPEG, displayWidth: display.width, displayHeight: display.height, thumbnails: thumbnails)
    }

    /// RGB as a 4:2:0 JPEG (TurboJPEG), with the colour profile when there is one.
    static func encode(_ image: RGBImage, quality: Int32, profile: [UInt8]?) -> [UInt8]? {
        guard let compressor = tjInitCompress() else { return nil }
        defer { tjDestroy(compressor) }
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let encoded = image.pixels.withUnsafeBufferPointer {
            tjCompress2(compressor, $0.baseAddress, Int32(image.width), Int32(image.width * 3), Int32(image.height), Int32(TJPF_RGB.rawValue),
                        &output, &size, Int32(TJSAMP_420.rawValue), quality, 0)
        }
        defer { if let output { tjFree(output) } }
        guard encoded == 0, let output else { return nil }
        return ColourProfile.embedding(profile, in: Array(UnsafeBufferPointer(start: output, count: Int(size))))
    }
}
