import Foundation

/// exiftool (Debian: libimage-exiftool-perl), the reference reader and writer of photo tags: the
/// tests write tags with it as cameras do and compare what Imaging reads with what it reads.
public enum ExifTool {
    public static let path = "/usr/bin/exiftool"

    @discardableResult
    public static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// The file with these tags written (`-TAG=value` arguments), as bytes.
    public static func writing(_ tags: [String], to bytes: [UInt8], suffix: String = "jpg") throws -> [UInt8] {
        let file = try temporary(bytes, suffix: suffix)
        defer { try? FileManager.default.removeItem(atPath: file) }
        try run(["-q", "-overwrite_original", "-n"] + tags + [file])
        return Array(try Data(contentsOf: URL(fileURLWithPath: file)))
    }

    /// exiftool's reading of these bytes: tag name → value, numbers as numbers (-n), groups named.
    public static func tags(of bytes: [UInt8], suffix: String = "jpg") throws -> [String: Any] {
        let file = try temporary(bytes, suffix: suffix)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let json = try run(["-j", "-n", "-G1", "-a", file])
        guard let list = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]], let first = list.first else {
            throw Failure(description: "exiftool read nothing: \(json.prefix(200))")
        }
        return first
    }

    public static func temporary(_ bytes: [UInt8], suffix: String) throws -> String {
        let file = NSTemporaryDirectory() + "imaging-\(UUID().uuidString).\(suffix)"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }
}
