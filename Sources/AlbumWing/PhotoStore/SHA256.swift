import CLibCrypto
import Foundation
import HTTPServer

/// SHA-256 (FIPS 180-4): the photo store names blobs by it. From libcrypto, which libcurl already
/// brings into both images and which uses the CPU's SHA instructions: hashing every photo must not
/// be a noticeable part of an album's CPU (docs/performance.md, "PhotoStore", has the figures).
public enum SHA256 {
    /// The digest as 64 lowercase hex digits.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    /// The digest of bytes where they are.
    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = digest.withUnsafeMutableBufferPointer { target in
            EVP_Digest(bytes.baseAddress, bytes.count, target.baseAddress, &length, EVP_sha256(), nil)
        }
        // EVP_Digest fails only without memory for its context; a wrong name would lose the photo.
        precondition(ok == 1 && length == 32, "libcrypto could not compute SHA-256")
        return hexDigits(digest)
    }

    static func hexDigits(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 64)
        for (index, byte) in digest.enumerated() {
            out[2 * index] = digits[Int(byte >> 4)]
            out[2 * index + 1] = digits[Int(byte & 15)]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The digest of bytes `range` of an upload's file, read a megabyte at a time: hashing a
    /// 40 MB photo costs a megabyte of memory, not its size (nor its pages mapped).
    public static func hex(of body: SpooledBody, _ range: Range<Int>) throws -> String {
        guard let context = EVP_MD_CTX_new() else { throw PhotoStoreError(description: "libcrypto has no memory for a digest") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw PhotoStoreError(description: "libcrypto could not start SHA-256") }
        try BlobFile(body: body, offset: range.lowerBound, count: range.count, hash: "").pieces { piece in
            guard EVP_DigestUpdate(context, piece.baseAddress, piece.count) == 1 else { throw PhotoStoreError(description: "libcrypto could not hash") }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard digest.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(context, $0.baseAddress, &length) }) == 1, length == 32 else {
            throw PhotoStoreError(description: "libcrypto could not finish SHA-256")
        }
        return hexDigits(digest)
    }
}
