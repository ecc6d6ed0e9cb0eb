import HTTPServer

/// A multipart/form-data body (RFC 7578, framed as RFC 2046 §5.1.1 says): the parts of a form
/// that uploads a file. Bounded: at most `maxParts` parts, each part's header section at most
/// 8 KiB; the body itself is already bounded by the server's limit for the route. A spooled body
/// (an upload of photos) is scanned where it lies, mapped, and its parts are ranges of its file.
struct MultipartForm {
    struct Part {
        let name: String
        let filename: String?
        let contentType: String?
        /// Where its bytes are in the body.
        let range: Range<Int>
    }

    /// The body the parts are ranges of.
    enum Source {
        case memory([UInt8])
        case spooled(SpooledBody)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let parts: [Part]
    let source: Source

    static let maxParts = 8
    static let maxPartHeaderBytes = 8 * 1024

    /// The request's form, or nil when it is not multipart/form-data.
    init?(_ request: HTTPRequest) throws(Failure) {
        guard let type = request.headers["Content-Type"], type.lowercased().hasPrefix("multipart/form-data") else { return nil }
        guard let boundary = Self.boundary(type) else { throw Failure(description: "the form names no boundary") }
        if let spooled = request.spooled {
            source = .spooled(spooled)
            let parsed: Result<[Part], Failure>
            do {
                parsed = try spooled.withMapped { raw in
                    do throws(Failure) { return .success(try Self.parse(raw, boundary: boundary)) } catch { return .failure(error) }
                }
            } catch {
                throw Failure(description: "the upload could not be read back (\(error))")
            }
            parts = try parsed.get()
        } else {
            source = .memory(request.body)
            parts = try Self.parse(request.body, boundary: boundary)
        }
    }

    func part(_ name: String) -> Part? { parts.first { $0.name == name } }

    /// A part's bytes, read into memory: for fields and small files (a photo's part is read from
    /// its file where it lies: `source`, `range`).
    func bytes(_ part: Part) -> [UInt8] {
        switch source {
        case .memory(let body): Array(body[part.range])
        case .spooled(let body): body.read(part.range)
        }
    }

    /// A text field's value (nil when absent, longer than 64 KiB or not UTF-8).
    func value(_ name: String) -> String? {
        guard let part = part(name), part.range.count <= 64 * 1024 else { return nil }
        return String(validating: bytes(part), as: UTF8.self)
    }

    /// RFC 2046 §5.1.1: 1 to 70 characters, quoted or not.
    static func boundary(_ contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingASCIISpaces() }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            var value = pair[1]
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return (1...70).contains(value.utf8.count) ? value : nil
        }
        return nil
    }

    static func parse<Body: RandomAccessCollection<UInt8>>(_ body: Body, boundary: String) throws(Failure) -> [Part] where Body.Index == Int {
        let delimiter = Array("--\(boundary)".utf8)
        let crlf: [UInt8] = [13, 10]
        // The preamble before the first delimiter is ignored (RFC 2046 §5.1.1).
        guard var position = body.firstRange(of: delimiter)?.upperBound else { throw Failure(description: "the form has no parts") }
        var parts: [Part] = []
        while true {
            if body[position...].starts(with: [0x2D, 0x2D]) { return parts }  // the close delimiter
            // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
            while position < body.endIndex, body[position] == 0x20 || body[position] == 0x09 { position += 1 }
            guard body[position...].starts(with: crlf) else { throw Failure(description: "a part's delimiter is not followed by a line break") }
            position += 2
            guard parts.count < maxParts else { throw Failure(description: "the form has more than \(maxParts) parts") }
            let headerWindow = body[position..<min(body.endIndex, position + maxPartHeaderBytes)]
            guard let headerEnd = headerWindow.firstRange(of: [13, 10, 13, 10] as [UInt8]) ?? (headerWindow.starts(with: crlf) ? position..<(position + 2) : nil) else {
                throw Failure(description: "a part's headers are too long or not ended")
            }
            let headerText = String(decoding: body[position..<headerEnd.lowerBound], as: UTF8.self)
            position = headerEnd.upperBound
            guard let end = body[position...].firstRange(of: crlf + delimiter) else {
                throw Failure(description: "the form ends before its closing boundary (the upload may be cut short)")
            }
            var name: String?, filename: String?, contentType: String?
            for line in headerText.split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let field = line[..<colon].lowercased(), value = String(line[line.index(after: colon)...])
                if field == "content-disposition" {
                    let parameters = Self.parameters(value)
                    name = parameters["name"]
                    filename = parameters["filename"]
                } else if field == "content-type" {
                    contentType = value.trimmingASCIISpaces()
                }
            }
            guard let name else { throw Failure(description: "a part has no name") }
            parts.append(Part(name: name, filename: filename, contentType: contentType, range: position..<end.lowerBound))
            position = end.upperBound
        }
    }

    /// `form-data; name="file"; filename="a.gpx"`: the parameters, quoted strings unquoted.
    static func parameters(_ value: String) -> [String: String] {
        var result: [String: String] = [:]
        var rest = Substring(value)
        // Skip the disposition type.
        guard let semicolon = rest.firstIndex(of: ";") else { return result }
        rest = rest[rest.index(after: semicolon)...]
        while !rest.isEmpty {
            rest = rest.drop(while: { $0 == " " || $0 == "\t" || $0 == ";" })
            guard let equals = rest.firstIndex(of: "=") else { break }
            let key = rest[..<equals].trimmingASCIISpaces().lowercased()
            rest = rest[rest.index(after: equals)...]
            var parsed = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                // Only \" is an escape: browsers send a Windows path's backslashes as they are.
                while let character = rest.first, character != "\"" {
                    if character == "\\", rest.dropFirst().first == "\"" { rest = rest.dropFirst() }
                    parsed.append(rest.first!)
                    rest = rest.dropFirst()
                }
                rest = rest.dropFirst()
            } else {
                let end = rest.firstIndex(of: ";") ?? rest.endIndex
                parsed = rest[..<end].trimmingASCIISpaces()
                rest = rest[end...]
            }
            result[key] = parsed
        }
        return result
    }
}

extension StringProtocol {
    fileprivate func trimmingASCIISpaces() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
