import CCrypt
import Foundation

/// Passwords in crypt(3) format through libxcrypt. New hashes use yescrypt ("$y$"); verification
/// accepts any format libxcrypt knows, so an administrator can set a password from psql with
/// pgcrypto's `crypt('new password', gen_salt('bf'))` and that sign-in works.
public enum Password {
    public static let minimumLength = 10
    /// libxcrypt refuses passphrases of 512 bytes or more (the hash then fails);
    /// 256 bytes is far above any passphrase a person types and well inside that limit.
    public static let maximumLength = 256

    /// Why a new password is refused, in words for the form.
    public static func problem(with password: String) -> String? {
        if password.count < minimumLength { return "Use at least \(minimumLength) characters." }
        if password.utf8.count > maximumLength { return "Use at most \(maximumLength) bytes." }
        if password.utf8.contains(0) { return "The password cannot contain a NUL character." }
        return nil
    }

    public static func hash(_ password: String) throws -> String {
        // crypt_gensalt_rn reads its random bytes from the OS when rbytes is NULL; count 0 asks for
        // yescrypt's default cost.
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        guard crypt_gensalt_rn("$y$", 0, nil, 0, &setting, Int32(setting.count)) != nil else {
            throw PasswordError.hashingFailed
        }
        return try crypt(password, setting: setting.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// Constant-time comparison of the recomputed hash; false for malformed stored hashes.
    public static func verify(_ password: String, against stored: String) -> Bool {
        guard !password.utf8.contains(0), let computed = try? crypt(password, setting: stored) else { return false }
        return constantTimeEqual(Array(computed.utf8), Array(stored.utf8))
    }

    /// A valid hash to check unknown emails against, so "no such account" costs the same time as
    /// "wrong password" and timing does not tell which emails exist.
    public static let decoyHash: String = (try? hash("decoy password that is never used")) ?? "$y$"

    private static func crypt(_ password: String, setting: String) throws -> String {
        var data = crypt_data()
        // libxcrypt returns a string starting with "*" on failure instead of NULL (crypt(3)).
        guard let result = crypt_r(password, setting, &data), result.pointee != 0x2A /* "*" */ else {
            throw PasswordError.hashingFailed
        }
        return String(cString: result)
    }
}

public enum PasswordError: Error {
    case hashingFailed
}

package func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
