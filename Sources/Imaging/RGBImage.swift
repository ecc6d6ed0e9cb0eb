/// Decoded pixels, 8-bit RGB, three bytes a pixel, rows without padding: what every decoder hands
/// over and the JPEG encoder takes.
public struct RGBImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && pixels.count == width * height * 3, "RGBImage: \(width) × \(height) needs \(width * height * 3) bytes")
        (self.width, self.height, self.pixels) = (width, height, pixels)
    }

    /// The image made no larger than `longest` on its long side, its proportions kept; each new
    /// pixel the average of the area it covers (a box filter over fractional edges), so fine
    /// detail neither aliases nor turns to noise. Unchanged when it already fits.
    public func fitted(within longest: Int) -> RGBImage {
        let long = max(width, height)
        guard long > longest else { return self }
        let scale = Double(longest) / Double(long)
        return resized(width: max(1, Int((Double(width) * scale).rounded())), height: max(1, Int((Double(height) * scale).rounded())))
    }

    /// Area-averaged downscale to `newWidth` × `newHeight` (each at most the current size): done
    /// in two passes (rows, then columns), with per-output spans of source pixels and the
    /// partial coverage of their first and last.
    public func resized(width newWidth: Int, height newHeight: Int) -> RGBImage {
        precondition(newWidth > 0 && newHeight > 0 && newWidth <= width && newHeight <= height)
        if newWidth == width && newHeight == height { return self }
        let horizontal = Self.spans(from: width, to: newWidth)
        let vertical = Self.spans(from: height, to: newHeight)
        // Pass 1: each row to newWidth, in fixed point (weights × 256), kept as Float sums.
        var rows = [Float](repeating: 0, count: newWidth * height * 3)
        pixels.withUnsafeBufferPointer { source in
            rows.withUnsafeMutableBufferPointer { target in
                for y in 0..<height {
                    let row = y * width * 3, out = y * newWidth * 3
                    for (x, span) in horizontal.enumerated() {
                        var r: Float = 0, g: Float = 0, b: Float = 0
                        for (index, weight) in span {
                            let p = row + index * 3
                            r += Float(source[p]) * weight; g += Float(source[p + 1]) * weight; b += Float(source[p + 2]) * weight
                        }
                        target[out + x * 3] = r; target[out + x * 3 + 1] = g; target[out + x * 3 + 2] = b
                    }
                }
            }
        }
        // Pass 2: each column to newHeight.
        var out = [UInt8](repeating: 0, count: newWidth * newHeight * 3)
        rows.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                let stride = newWidth * 3
                for (y, span) in vertical.enumerated() {
                    let to = y * stride
                    for i in 0..<stride {
                        var sum: Float = 0
                        for (index, weight) in span { sum += source[index * stride + i] * weight }
                        target[to + i] = UInt8(min(255, max(0, sum + 0.5)))
                    }
                }
            }
        }
        return RGBImage(width: newWidth, height: newHeight, pixels: out)
    }

    /// For each of `count` outputs, the source pixels it covers and each one's share (the shares sum to 1).
    static func spans(from size: Int, to count: Int) -> [[(Int, Float)]] {
        let step = Double(size) / Double(count)
        return (0..<count).map { i in
            let start = Double(i) * step, end = min(Double(size), start + step)
            var span: [(Int, Float)] = []
            var position = Int(start)
            while Double(position) < end && position < size {
                let covered = min(end, Double(position + 1)) - max(start, Double(position))
                if covered > 1e-9 { span.append((position, Float(covered / step))) }
                position += 1
            }
            return span
        }
    }

    /// The image as a viewer shows it, given EXIF's Orientation (1–8, TIFF 6.0 and CIPA DC-008):
    /// where row 0 and column 0 of the stored pixels are. 5–8 swap width and height.
    public func oriented(_ orientation: Int) -> RGBImage {
        guard (2...8).contains(orientation) else { return self }
        let swaps = orientation >= 5
        let outWidth = swaps ? height : width, outHeight = swaps ? width : height
        var out = [UInt8](repeating: 0, count: pixels.count)
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<outHeight {
                    for x in 0..<outWidth {
                        // The stored pixel shown at (x, y).
                        let (sx, sy): (Int, Int)
                        switch orientation {
                        case 2: (sx, sy) = (width - 1 - x, y)                      // mirrored
                        case 3: (sx, sy) = (width - 1 - x, height - 1 - y)         // upside down
                        case 4: (sx, sy) = (x, height - 1 - y)                     // mirrored, upside down
                        case 5: (sx, sy) = (y, x)                                  // transposed
                        case 6: (sx, sy) = (y, height - 1 - x)                     // turned 90° clockwise to view
                        case 7: (sx, sy) = (width - 1 - y, height - 1 - x)         // transversed
                        default: (sx, sy) = (width - 1 - y, x)                     // 8: turned 90° anticlockwise to view
                        }
                        let from = (sy * width + sx) * 3, to = (y * outWidth + x) * 3
                        target[to] = source[from]; target[to + 1] = source[from + 1]; target[to + 2] = source[from + 2]
                    }
                }
            }
        }
        return RGBImage(width: outWidth, height: outHeight, pixels: out)
    }
}
