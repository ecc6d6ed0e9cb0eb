import CZlib

/// gzip (RFC 1952) through zlib, for static files that are worth compressing.
public enum Gzip {
    public static func compress(_ input: [UInt8], level: Int32 = 6) -> [UInt8]? {
        var stream = z_stream()
        // windowBits 15 + 16 asks zlib for a gzip wrapper instead of a zlib one.
        guard deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status: Int32 = input.withUnsafeBufferPointer { inBuf in
            output.withUnsafeMutableBufferPointer { outBuf in
                stream.next_in = UnsafeMutablePointer(mutating: inBuf.baseAddress)
                stream.avail_in = uInt(inBuf.count)
                stream.next_out = outBuf.baseAddress
                stream.avail_out = uInt(outBuf.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.total_out)...)
        return output
    }

    /// For tests and for reading compressed data back.
    public static func decompress(_ input: [UInt8], limit: Int = 64 * 1024 * 1024) -> [UInt8]? {
        guard case .inflated(let output) = inflate(input[...], windowBits: 15 + 32, limit: limit) else { return nil }
        return output
    }

    /// How an inflate ended.
    public enum Inflated: Equatable {
        case inflated([UInt8])
        /// The output would pass the limit: stopped there, so a bomb costs at most the limit.
        case tooLarge
        /// The input ended before the stream did.
        case endsEarly
        case invalid
    }

    /// Inflates `input` (windowBits as for zlib's inflateInit2: 15 + 32 for zlib or gzip, -15 for
    /// raw deflate as zip holds it), never holding more than `limit` bytes of output.
    public static func inflate(_ input: ArraySlice<UInt8>, windowBits: Int32, limit: Int) -> Inflated {
        var stream = z_stream()
        guard inflateInit2_(&stream, windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return .invalid }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        return input.withUnsafeBufferPointer { inBuf -> Inflated in
            stream.next_in = UnsafeMutablePointer(mutating: inBuf.baseAddress)
            stream.avail_in = uInt(inBuf.count)
            while true {
                let status: Int32 = chunk.withUnsafeMutableBufferPointer { outBuf in
                    stream.next_out = outBuf.baseAddress
                    stream.avail_out = uInt(outBuf.count)
                    return zlibInflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard output.count + produced <= limit else { return .tooLarge }
                output.append(contentsOf: chunk[0..<produced])
                switch status {
                case Z_STREAM_END: return .inflated(output)
                case Z_OK: continue
                // No progress possible: the input ended before the deflate stream did.
                case Z_BUF_ERROR: return .endsEarly
                default: return .invalid
                }
            }
        }
    }
}

/// zlib's inflate, named apart from `Gzip.inflate`.
private func zlibInflate(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 { inflate(stream, flush) }

