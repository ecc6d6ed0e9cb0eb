import CLibCrypto

/// SHA-256 (FIPS 180-4): the photo store names blobs by it. From libcrypto, which libcurl already
/// brings into both images and which uses the CPU's SHA instructions: hashing every photo must not
/// be a noticeable part of an album's CPU (docs/performance.md, "PhotoStore", has the figures).
public enum SHA256 {
    /// The digest as 64 lowercase hex digits.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    /// The digest of bytes where they are (an upload's mapped file).
    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = digest.withUnsafeMutableBufferPointer { target in
            EVP_Digest(bytes.baseAddress, bytes.count, target.baseAddress, &length, EVP_sha256(), nil)
        }
        // EVP_Digest fails only without memory for its context; a wrong name would lose the photo.
        precondition(ok == 1 && length == 32, "libcrypto could not compute SHA-256")
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 64)
        for (index, byte) in digest.enumerated() {
            out[2 * index] = digits[Int(byte >> 4)]
            out[2 * index + 1] = digits[Int(byte & 15)]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
