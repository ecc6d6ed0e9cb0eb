import CTurboJPEG
import CHeif
import CPNG
import CWebP

/// Why a file is not taken as a photo: each a sentence for the person, naming what to do.
public enum ImageRefusal: Error, Equatable, CustomStringConvertible {
    case notAnImage
    case tooManyPixels(width: Int, height: Int, limit: Int)
    case unreadable(ImageFormat, String)
    case truncated(ImageFormat)
    case cmyk

    public var description: String {
        switch self {
        case .notAnImage:
            "is not a photo Virtual Tourist can read: it takes JPEG, HEIC, PNG and WebP files"
        case .tooManyPixels(let width, let height, let limit):
            "is \(width) × \(height) pixels, more than the \(limit / 1_000_000) megapixels a photo may have here"
        case .unreadable(let format, _):
            "could not be read as a \(format.name) file: it may be damaged"
        case .cmyk:
            "is a CMYK JPEG (made for printing); save it as an ordinary RGB JPEG and add it again"
        case .truncated(let format):
            "is an incomplete \(format.name) file: it was cut short (try copying it again)"
        }
    }
}

/// A photo decoded for its versions: the pixels turned the right way up (and, for a large JPEG,
/// decoded straight at a reduced scale), with what the file said about itself.
public struct DecodedPhoto: Sendable {
    public let format: ImageFormat
    /// The original's size as a viewer shows it (after orientation).
    public let width: Int
    public let height: Int
    public let image: RGBImage
    public var tags: CameraTags
    public let profile: [UInt8]?
}

public enum PhotoDecoding {
    /// The photo's pixels, at least `longest` pixels on their long side where the original has
    /// them. The size is read from the header and checked against `maxPixels` before anything is
    /// decoded, so a small file claiming a huge image (a decompression bomb) costs nothing.
    public static func decode(_ bytes: [UInt8], maxPixels: Int, atLeast longest: Int) throws(ImageRefusal) -> DecodedPhoto {
        try bytes.withUnsafeBufferPointer { (buffer) throws(ImageRefusal) -> DecodedPhoto in try decode(buffer, maxPixels: maxPixels, atLeast: longest) }
    }

    public static func decode(_ bytes: UnsafeBufferPointer<UInt8>, maxPixels: Int, atLeast longest: Int) throws(ImageRefusal) -> DecodedPhoto {
        guard let format = ImageFormat.sniff(bytes) else { throw .notAnImage }
        let check = checker(format, maxPixels: maxPixels)
        var decoded: DecodedPhoto
        switch format {
        case .jpeg: decoded = try jpeg(bytes, check: check, atLeast: longest)
        // In a process of its own (HEIFIsolation), which calls decodeHEIFHere.
        case .heif: decoded = try HEIFIsolation.decode(bytes, maxPixels: maxPixels)
        case .png: decoded = try png(bytes, check: check)
        case .webp: decoded = try webp(bytes, check: check)
        }
        // No GPS in its EXIF: the position its XMP gives, if any (an edited or exported photo).
        if !decoded.tags.hasPosition, let position = XMPPosition.position(in: bytes) {
            (decoded.tags.latitude, decoded.tags.longitude) = (position.latitude, position.longitude)
        }
        return decoded
    }

    /// The size check every format makes from its header before decoding.
    static func checker(_ format: ImageFormat, maxPixels: Int) -> (Int, Int) throws(ImageRefusal) -> Void {
        { (width: Int, height: Int) throws(ImageRefusal) in
            guard width > 0, height > 0 else { throw .unreadable(format, "no size") }
            guard width <= 65_535, height <= 65_535, width * height <= maxPixels else {
                throw .tooManyPixels(width: width, height: height, limit: maxPixels)
            }
        }
    }

    /// A HEIF decoded in this process: only the decoder's child process (HEIFIsolation) calls it.
    static func decodeHEIFHere(_ bytes: [UInt8], maxPixels: Int) throws(ImageRefusal) -> DecodedPhoto {
        try heif(bytes, check: checker(.heif, maxPixels: maxPixels), maxCoded: maxPixels * 2)
    }

    // MARK: JPEG (libjpeg-turbo)

    static func jpeg(_ bytes: UnsafeBufferPointer<UInt8>, check: (Int, Int) throws(ImageRefusal) -> Void, atLeast longest: Int) throws(ImageRefusal) -> DecodedPhoto {
        guard let handle = tjInitDecompress() else { throw .unreadable(.jpeg, "no decoder") }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = tjDecompressHeader3(handle, bytes.baseAddress, UInt(bytes.count), &width, &height, &subsampling, &colorspace)
        guard header == 0 else { throw .unreadable(.jpeg, String(cString: tjGetErrorStr2(handle))) }
        try check(Int(width), Int(height))
        // CMYK and YCCK (print workflows) do not convert to RGB in TurboJPEG: said so, not "damaged".
        if colorspace == Int32(TJCS_CMYK.rawValue) || colorspace == Int32(TJCS_YCCK.rawValue) { throw .cmyk }
        // The smallest DCT scale (n/8) still at least `longest` on the long side.
        var count: Int32 = 0
        var scaledWidth = width, scaledHeight = height
        if let factors = tjGetScalingFactors(&count) {
            let long = max(width, height)
            var best = (num: Int32(1), denom: Int32(1))
            for factor in (0..<Int(count)).map({ factors[$0] }) where factor.num * 8 <= factor.denom * 8 {
                let side = (long * factor.num + factor.denom - 1) / factor.denom
                if side >= Int32(longest), factor.num * best.denom < best.num * factor.denom { best = (factor.num, factor.denom) }
            }
            scaledWidth = (width * best.num + best.denom - 1) / best.denom
            scaledHeight = (height * best.num + best.denom - 1) / best.denom
        }
        var pixels = [UInt8](repeating: 0, count: Int(scaledWidth) * Int(scaledHeight) * 3)
        let decoded = pixels.withUnsafeMutableBufferPointer { target in
            // TJFLAG_LIMITSCANS: a progressive JPEG of more than 500 scans is refused (one that
            // repeats a scan thousands of times holds a core for an hour).
            tjDecompress2(handle, bytes.baseAddress, UInt(bytes.count), target.baseAddress, scaledWidth, scaledWidth * 3, scaledHeight,
                          Int32(TJPF_RGB.rawValue), TJFLAG_LIMITSCANS)
        }
        if decoded != 0 {
            let message = String(cString: tjGetErrorStr2(handle))
            // A warning leaves a whole image, except when the data ran out: then the rest is grey.
            if tjGetErrorCode(handle) != Int32(TJERR_WARNING.rawValue) { throw .unreadable(.jpeg, message) }
            if message.contains("Premature end") { throw .truncated(.jpeg) }
        }
        // libexif is handed the Exif segment only (it copies what it is given).
        let tags = ColourProfile.exifSegment(bytes).map { CameraTags.read($0) } ?? CameraTags()
        let image = RGBImage(width: Int(scaledWidth), height: Int(scaledHeight), pixels: pixels).oriented(tags.orientation)
        let swaps = tags.orientation >= 5
        return DecodedPhoto(format: .jpeg, width: Int(swaps ? height : width), height: Int(swaps ? width : height), image: image,
                            tags: tags, profile: ColourProfile.inJPEG(bytes))
    }

    // MARK: HEIF (libheif)

    /// libheif reads the bytes where they are, so all of it runs while they are pinned.
    /// `maxCoded`: the pixels the file's HEVC images may code together: the primary's (or its
    /// grid's tiles, coded to whole tiles) with its thumbnail, depth map and HDR gain map, which
    /// add a third to an iPhone's photo; twice the limit.
    static func heif(_ bytes: [UInt8], check: (Int, Int) throws(ImageRefusal) -> Void, maxCoded: Int) throws(ImageRefusal) -> DecodedPhoto {
        try bytes.withUnsafeBufferPointer { (buffer) throws(ImageRefusal) -> DecodedPhoto in try heif(buffer, check: check, maxCoded: maxCoded) }
    }

    static func heif(_ bytes: UnsafeBufferPointer<UInt8>, check: (Int, Int) throws(ImageRefusal) -> Void,
                     maxCoded: Int) throws(ImageRefusal) -> DecodedPhoto {
        guard let context = heif_context_alloc() else { throw .unreadable(.heif, "no decoder") }
        defer { heif_context_free(context) }
        // Tiles decoded on this thread: the processing queue already runs one photo per core.
        heif_context_set_max_decoding_threads(context, 0)
        let read = heif_context_read_from_memory_without_copy(context, bytes.baseAddress, bytes.count, nil)
        guard read.code == heif_error_Ok else { throw refusal(read) }
        var handle: OpaquePointer?
        let primary = heif_context_get_primary_image_handle(context, &handle)
        guard primary.code == heif_error_Ok, let handle else { throw refusal(primary) }
        defer { heif_image_handle_release(handle) }
        // The size as shown, after the container's rotation and mirroring (irot, imir), which
        // libheif applies when decoding; EXIF's Orientation does not apply to a HEIF (its spec).
        try check(Int(heif_image_handle_get_width(handle)), Int(heif_image_handle_get_height(handle)))
        // A grid decodes at its own box's size, whatever the image claims (HEIFLayout): checked too.
        guard let layout = HEIFLayout.primary(bytes) else { throw .unreadable(.heif, "its boxes") }
        switch layout.type {
        case "hvc1": break
        case "grid": try check(layout.width ?? 0, layout.height ?? 0)
        default: throw .unreadable(.heif, "a primary image of type \(layout.type)")
        }
        // And every HEVC image at the size its stream codes, which libheif 1.15 decodes whatever
        // the container claims (HEIFLayout.codedPixels): more than the limit is a forged file.
        guard let coded = HEIFLayout.codedPixels(bytes) else { throw .unreadable(.heif, "its coded images") }
        guard coded <= maxCoded else { throw .unreadable(.heif, "it codes \(coded) pixels") }
        var tags = CameraTags.read(exifBlock(handle))
        tags.orientation = 1
        var profile: [UInt8]?
        let profileSize = heif_image_handle_get_raw_color_profile_size(handle)
        if profileSize > 0 && profileSize <= ColourProfile.maxBytes {
            var raw = [UInt8](repeating: 0, count: profileSize)
            if raw.withUnsafeMutableBytes({ heif_image_handle_get_raw_color_profile(handle, $0.baseAddress) }).code == heif_error_Ok, ColourProfile.isRGB(raw) { profile = raw }
        }
        var image: OpaquePointer?
        let decoded = heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, nil)
        guard decoded.code == heif_error_Ok, let image else { throw refusal(decoded) }
        defer { heif_image_release(image) }
        let width = Int(heif_image_get_width(image, heif_channel_interleaved)), height = Int(heif_image_get_height(image, heif_channel_interleaved))
        try check(width, height)
        var stride: Int32 = 0
        guard width > 0, height > 0, let plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride), Int(stride) >= width * 3 else {
            throw .unreadable(.heif, "no RGB plane")
        }
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        pixels.withUnsafeMutableBufferPointer { target in
            for y in 0..<height { (target.baseAddress! + y * width * 3).update(from: plane + y * Int(stride), count: width * 3) }
        }
        return DecodedPhoto(format: .heif, width: width, height: height, image: RGBImage(width: width, height: height, pixels: pixels),
                            tags: tags, profile: profile)
    }

    /// The Exif block of a HEIF image as libexif reads it: "Exif\0\0" and the TIFF header. In
    /// the file the block starts with a 4-byte offset to that header (ISO/IEC 23008-12 A.2.1).
    static func exifBlock(_ handle: OpaquePointer) -> [UInt8] {
        var id: heif_item_id = 0
        guard heif_image_handle_get_list_of_metadata_block_IDs(handle, "Exif", &id, 1) == 1 else { return [] }
        let size = heif_image_handle_get_metadata_size(handle, id)
        guard size > 4, size <= 1 << 20 else { return [] }
        var block = [UInt8](repeating: 0, count: size)
        guard block.withUnsafeMutableBytes({ heif_image_handle_get_metadata(handle, id, $0.baseAddress) }).code == heif_error_Ok else { return [] }
        let offset = Int(block[0]) << 24 | Int(block[1]) << 16 | Int(block[2]) << 8 | Int(block[3])
        guard offset >= 0, 4 + offset < block.count else { return [] }
        let tiff = block[(4 + offset)...]
        // Some writers put "Exif\0\0" before the TIFF header inside the block too.
        return tiff.starts(with: Array("Exif".utf8) + [0, 0]) ? Array(tiff) : Array("Exif".utf8) + [0, 0] + tiff
    }

    static func refusal(_ error: heif_error) -> ImageRefusal {
        let message = error.message.map { String(cString: $0) } ?? "error \(error.code.rawValue)"
        if error.code == heif_error_Invalid_input && (message.contains("end of file") || message.contains("nsufficient")) { return .truncated(.heif) }
        if error.code == heif_error_Unsupported_filetype || error.code == heif_error_Unsupported_feature { return .unreadable(.heif, message) }
        return .unreadable(.heif, message)
    }

    // MARK: PNG (libpng's simplified API)

    /// libpng reads the bytes where they are, from begin_read to finish_read: pinned throughout.
    static func png(_ bytes: [UInt8], check: (Int, Int) throws(ImageRefusal) -> Void) throws(ImageRefusal) -> DecodedPhoto {
        try bytes.withUnsafeBufferPointer { (buffer) throws(ImageRefusal) -> DecodedPhoto in try png(buffer, check: check) }
    }

    static func png(_ bytes: UnsafeBufferPointer<UInt8>, check: (Int, Int) throws(ImageRefusal) -> Void) throws(ImageRefusal) -> DecodedPhoto {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        defer { png_image_free(&image) }
        let begun = png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count)
        guard begun != 0 else { throw .unreadable(.png, message(image)) }
        try check(Int(image.width), Int(image.height))
        image.format = 2  // PNG_FORMAT_RGB: 8-bit RGB, alpha composited onto the background below
        let width = Int(image.width), height = Int(image.height)
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var white = png_color(red: 255, green: 255, blue: 255)
        let finished = pixels.withUnsafeMutableBytes { png_image_finish_read(&image, &white, $0.baseAddress, Int32(width * 3), nil) }
        guard finished != 0 else {
            let text = message(image)
            throw text.contains("EOF") || text.contains("end") ? .truncated(.png) : .unreadable(.png, text)
        }
        return DecodedPhoto(format: .png, width: width, height: height, image: RGBImage(width: width, height: height, pixels: pixels),
                            tags: CameraTags(), profile: nil)
    }

    static func message(_ image: png_image) -> String {
        withUnsafeBytes(of: image.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    // MARK: WebP (libwebp)

    static func webp(_ bytes: UnsafeBufferPointer<UInt8>, check: (Int, Int) throws(ImageRefusal) -> Void) throws(ImageRefusal) -> DecodedPhoto {
        var width: Int32 = 0, height: Int32 = 0
        guard WebPGetInfo(bytes.baseAddress, bytes.count, &width, &height) != 0 else {
            throw .unreadable(.webp, "no WebP header")
        }
        try check(Int(width), Int(height))
        // Straight into the pixels' own array: one copy of the image, not libwebp's and ours.
        let stride = Int(width) * 3
        var pixels = [UInt8](repeating: 0, count: stride * Int(height))
        let written = pixels.withUnsafeMutableBufferPointer { target in
            WebPDecodeRGBInto(bytes.baseAddress, bytes.count, target.baseAddress, target.count, Int32(stride))
        }
        guard written != nil else {
            throw RIFF.declaredSize(bytes).map { $0 > bytes.count } == true ? .truncated(.webp) : .unreadable(.webp, "the image data")
        }
        let chunks = RIFF.chunks(bytes)
        let tags = chunks["EXIF"].map { CameraTags.read($0.starts(with: Array("Exif".utf8) + [0, 0]) ? Array($0) : Array("Exif".utf8) + [0, 0] + $0) } ?? CameraTags()
        let image = RGBImage(width: Int(width), height: Int(height), pixels: pixels).oriented(tags.orientation)
        return DecodedPhoto(format: .webp, width: image.width, height: image.height, image: image, tags: tags,
                            profile: chunks["ICCP"].map(Array.init).flatMap { ColourProfile.isRGB($0) ? $0 : nil })
    }
}

/// The chunks of a RIFF file (WebP's container): four letters, a little-endian size, the data
/// padded to an even length.
enum RIFF {
    static func declaredSize<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes) -> Int? where Bytes.Index == Int {
        guard bytes.count >= 8 else { return nil }
        let b = bytes.startIndex
        return 8 + (Int(bytes[b + 4]) | Int(bytes[b + 5]) << 8 | Int(bytes[b + 6]) << 16 | Int(bytes[b + 7]) << 24)
    }

    static func chunks<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes) -> [String: Bytes.SubSequence] where Bytes.Index == Int {
        var found: [String: Bytes.SubSequence] = [:]
        var at = bytes.startIndex + 12
        while at + 8 <= bytes.endIndex, found.count < 64 {
            let name = String(decoding: bytes[at..<(at + 4)], as: UTF8.self)
            let size = Int(bytes[at + 4]) | Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]) << 16 | Int(bytes[at + 7]) << 24
            guard size >= 0, at + 8 + size <= bytes.endIndex else { break }
            if found[name] == nil { found[name] = bytes[(at + 8)..<(at + 8 + size)] }
            at += 8 + size + (size & 1)
        }
        return found
    }
}
