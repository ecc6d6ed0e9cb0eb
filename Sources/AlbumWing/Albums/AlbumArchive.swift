import Foundation
import Zlib
import Domain

/// One ready photo of an album as the zip download lists it: what names the entry and credits it,
/// and where its bytes are (the blob's hash, or none while they are still in the row).
public struct ArchivedPhoto: Sendable {
    public let id: Int64
    public let hash: String?
    public let contentType: String
    public let title: String
    public let ownerName: String
    public let license: String
    public let licenseURL: String?
    public let pageURL: String?
    /// When it was taken, at the provider's precision (the credits say it); nil: unknown.
    public var dateTaken: String? = nil
}

/// The album as a zip (GET /pins/:id/album.zip): each ready photo's original bytes as
/// `NN-title.ext`, then credits.csv. Written entry by entry into a sink that waits for the
/// client, so the server holds one photo at a time, never the archive.
package enum AlbumArchive {
    /// Writes the archive; `bytes` reads one photo's original (nil: gone since the list was
    /// read, left out). Returns false when the sink closed early.
    package static func write(_ photos: [ArchivedPhoto], now: Date = Date(), bytes: (ArchivedPhoto) throws -> [UInt8]?,
                      sink: @escaping ([UInt8]) -> Bool) throws -> Bool {
        let parts = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: now)
        var archive = ZipWriter(modified: (parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!), sink: sink)
        let names = fileNames(photos)
        var credits = "file,title,author,license,license_url,source_page,taken\r\n"
        for (photo, name) in zip(photos, names) {
            guard archive.isOpen else { return false }
            guard let original = try bytes(photo) else { continue }
            try archive.add(name: name, bytes: original)
            credits += [name, photo.title, photo.ownerName, photo.license, photo.licenseURL ?? "", photo.pageURL ?? "", photo.dateTaken ?? "date unknown"]
                .map(csvField).joined(separator: ",") + "\r\n"
        }
        try archive.add(name: "credits.csv", bytes: Array(credits.utf8))
        archive.finish()
        return archive.isOpen
    }

    /// `NN-title.ext`: the number makes names unique and keeps the album's order; the title keeps
    /// letters, digits, symbols such as emoji, spaces, `-` and `_` of any script and turns every other run into one `-`,
    /// so no path separator, dot, `..` or control character survives; at most 60 characters.
    package static func fileNames(_ photos: [ArchivedPhoto]) -> [String] {
        let width = max(2, String(photos.count).count)
        var taken = Set<String>()
        return photos.enumerated().map { index, photo in
            let number = String(index + 1)
            let stem = String(repeating: "0", count: width - number.count) + number + "-" + safeTitle(photo.title)
            var name = stem + "." + fileExtension(photo.contentType)
            var n = 2
            while !taken.insert(name.lowercased()).inserted {
                name = stem + "-\(n)." + fileExtension(photo.contentType)
                n += 1
            }
            return name
        }
    }

    package static func safeTitle(_ title: String) -> String {
        var out = ""
        var pendingDash = false
        for scalar in title.unicodeScalars {
            let keep = scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                || scalar.properties.generalCategory == .otherSymbol || scalar == " " || scalar == "_" || scalar == "-"
            if keep && scalar.properties.generalCategory != .format {
                if pendingDash && !out.isEmpty { out += "-" }
                pendingDash = false
                out.unicodeScalars.append(scalar)
            } else {
                pendingDash = true
            }
        }
        var trimmed = String(out.trimmingCharacters(in: CharacterSet(charactersIn: " -_")).prefix(60))
        trimmed = trimmed.trimmingCharacters(in: CharacterSet(charactersIn: " -_"))
        return trimmed.isEmpty ? "photo" : trimmed
    }

    package static func fileExtension(_ contentType: String) -> String {
        switch contentType {
        case "image/jpeg": "jpg"
        case "image/png": "png"
        case "image/gif": "gif"
        case "image/webp": "webp"
        case "image/heic", "image/heif": "heic"
        default: "bin"
        }
    }

    /// RFC 4180, every field quoted; a field a spreadsheet would run as a formula (= + - @, tab,
    /// CR at the start) gets a leading apostrophe (OWASP's advice on CSV injection).
    package static func csvField(_ value: String) -> String {
        var value = value
        if let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { value = "'" + value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Content-Disposition for the download (RFC 6266): an ASCII name for old clients and the
    /// place's name in `filename*` (RFC 8187).
    /// The file's name: the place's, and the album's era when it has one ("Kyoto 1950s.zip").
    package static func contentDisposition(pinID: Int64, placeName: String?, era: Era? = nil) -> String {
        let ascii = "attachment; filename=\"album-\(pinID)\(era.map { "-" + $0.formValue } ?? "").zip\""
        // A pin without a place is named by its coordinates, which make a poor file name.
        guard let placeName, !placeName.isEmpty else { return ascii }
        let safe = safeTitle(placeName + (era.map { " " + $0.formValue } ?? ""))
        var encoded = ""
        for byte in (safe + ".zip").utf8 {
            if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || "-._".utf8.contains(byte) {
                encoded.append(Character(UnicodeScalar(byte)))
            } else {
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded()
            }
        }
        return ascii + "; filename*=UTF-8''\(encoded)"
    }
}

extension String {
    fileprivate func leftPadded() -> String { count < 2 ? "0" + self : self }
}
