import Foundation
import PhotoFixture

/// Answers the real services gave other open-source clients, kept byte for byte under
/// Tests/Fixtures/recorded (SOURCES.md names each origin, commit and licence).
enum RecordedAnswers {
    static var directory: String { TestApp.repositoryRoot + "/Tests/Fixtures/recorded" }

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + path)))
    }

    struct Response {
        let status: Int
        let contentType: String
        let body: String
    }

    /// The responses of a VCR.py cassette (YAML), in order. The bodies are YAML quoted scalars folded
    /// over several lines; this reads exactly the forms VCR.py writes.
    static func cassette(_ path: String) throws -> [Response] {
        let lines = String(decoding: try bytes(path), as: UTF8.self).components(separatedBy: "\n")
        var responses: [Response] = []
        var index = 0
        var inResponse = false
        var body: String?
        var contentType = ""
        var status = 200
        func flush() {
            if let body { responses.append(Response(status: status, contentType: contentType, body: body)) }
            body = nil; contentType = ""; status = 200
        }
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("- request:") { if inResponse { flush() }; inResponse = false }
            if line.hasPrefix("  response:") { inResponse = true }
            if inResponse {
                if trimmed.hasPrefix("content: ") || trimmed.hasPrefix("string: ") {
                    let start = trimmed.hasPrefix("content: ") ? "content: ".count : "string: ".count
                    let (value, next) = scalar(lines, index, String(trimmed.dropFirst(start)))
                    body = value
                    index = next
                    continue
                }
                if trimmed.lowercased() == "content-type:", index + 1 < lines.count {
                    contentType = lines[index + 1].trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "- ", with: "")
                }
                if trimmed.hasPrefix("status_code:") { status = Int(trimmed.dropFirst("status_code:".count).trimmingCharacters(in: .whitespaces)) ?? 200 }
            }
            index += 1
        }
        if inResponse { flush() }
        return responses
    }

    /// A YAML quoted scalar starting with `first` on line `index`: its value and the line after it.
    private static func scalar(_ lines: [String], _ index: Int, _ first: String) -> (String, Int) {
        guard let quote = first.first, quote == "\"" || quote == "'" else { return (first, index + 1) }
        var raw = String(first.dropFirst())
        var next = index + 1
        func closed(_ text: String) -> Bool {
            var escaped = false, chars = Array(text), i = 0
            while i < chars.count {
                let c = chars[i]
                if quote == "\"" {
                    if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { return true }
                } else if c == "'" {
                    if i + 1 < chars.count && chars[i + 1] == "'" { i += 1 } else { return true }
                }
                i += 1
            }
            return false
        }
        var pieces = [raw]
        while !closed(raw), next < lines.count {
            raw = lines[next].trimmingCharacters(in: .whitespaces)
            pieces.append(raw)
            next += 1
        }
        // Folding: a line break is a space, unless the line ends with an escaped break ("\").
        var joined = ""
        for (i, piece) in pieces.enumerated() {
            if i > 0 {
                if quote == "\"" && joined.hasSuffix("\\") && !joined.hasSuffix("\\\\") { joined.removeLast() } else { joined += " " }
            }
            joined += piece
        }
        // Drop the closing quote and anything after it.
        var value = ""
        var chars = Array(joined), i = 0
        while i < chars.count {
            let c = chars[i]
            if quote == "'" {
                if c == "'" { if i + 1 < chars.count && chars[i + 1] == "'" { value.append("'"); i += 2; continue } else { break } }
                value.append(c)
            } else {
                if c == "\"" { break }
                if c == "\\", i + 1 < chars.count {
                    let e = chars[i + 1]
                    switch e {
                    case "n": value.append("\n")
                    case "t": value.append("\t")
                    case "r": value.append("\r")
                    case "\"": value.append("\"")
                    case "\\": value.append("\\")
                    case "/": value.append("/")
                    case " ": value.append(" ")
                    case "u" where i + 5 < chars.count:
                        if let code = UInt32(String(chars[(i + 2)...(i + 5)]), radix: 16), let scalar = Unicode.Scalar(code) {
                            value.unicodeScalars.append(scalar)
                        }
                        i += 6
                        continue
                    default: value.append(e)
                    }
                    i += 2
                    continue
                }
                value.append(c)
            }
            i += 1
        }
        chars = []
        return (value, next)
    }

    /// Flickr's JSON form of photos in an XML answer: each `<photo>`'s attributes become string
    /// members, as format=json gives them (`<description>` is dropped: the app does not ask for it).
    static func flickrJSON(fromXML xml: String, photosTag: String = "photos") -> [UInt8] {
        func attributes(_ text: Substring) -> [String: String] {
            var result: [String: String] = [:]
            for match in text.matches(of: /([a-z_]+)="([^"]*)"/) { result[String(match.1)] = unescapeXML(String(match.2)) }
            return result
        }
        let head = xml.firstMatch(of: /<photos ([^>]*)>/).map { attributes($0.1) } ?? [:]
        let photos = xml.matches(of: /<photo ([^>]*?)\/?>/).map { attributes($0.1) }
        let object: [String: Any] = [
            "photos": ["page": Int(head["page"] ?? "1") ?? 1, "pages": Int(head["pages"] ?? "1") ?? 1,
                       "perpage": Int(head["perpage"] ?? "0") ?? 0, "total": head["total"] ?? "0", "photo": photos],
            "stat": "ok",
        ]
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// One search result made from a flickr.photos.getInfo answer plus its getSizes answer, with the
    /// fields photos.search gives for extras=url_m,owner_name,license,date_taken.
    static func flickrSearchEntry(getInfo xml: String, sizes: String) -> [String: String] {
        func attribute(_ tag: String, _ name: String) -> String? {
            guard let element = xml.firstMatch(of: try! Regex("<\(tag) ([^>]*)>")) else { return nil }
            let text = String(xml[element.range])
            return text.firstMatch(of: try! Regex("\\b\(name)=\"([^\"]*)\"")).flatMap { $0.output[1].substring.map(String.init) }.map(unescapeXML)
        }
        let title = xml.firstMatch(of: /<title>([^<]*)<\/title>/).map { unescapeXML(String($0.1)) } ?? ""
        let medium = sizes.firstMatch(of: /label="Medium"[^>]*source="([^"]+)"/).map { String($0.1) }
            ?? sizes.firstMatch(of: /source="([^"]+)"/).map { String($0.1) } ?? ""
        return [
            "id": attribute("photo", "id") ?? "", "owner": attribute("owner", "nsid") ?? "", "title": title,
            "license": attribute("photo", "license") ?? "", "ownername": attribute("owner", "username") ?? "",
            "datetaken": attribute("dates", "taken") ?? "", "datetakengranularity": attribute("dates", "takengranularity") ?? "0",
            "datetakenunknown": attribute("dates", "takenunknown") ?? "0", "url_m": medium,
        ]
    }

    static func unescapeXML(_ text: String) -> String {
        text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#039;", with: "'")
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
