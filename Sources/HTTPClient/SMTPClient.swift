import CCurl
import Foundation

/// Mail out through an SMTP server, with libcurl (its SMTP support: STARTTLS, implicit TLS, AUTH),
/// one message per call on the calling thread. Used by the app's mail outbox, which retries; this
/// only says how one attempt went.
public struct SMTPClient: Sendable {
    /// How the connection is secured: STARTTLS on the submission port (587), TLS from the first
    /// byte (465), or none (a relay on the same host or a private network).
    public enum Security: String, Sendable, CaseIterable {
        case starttls, implicit, none
    }

    public struct Settings: Sendable, Equatable {
        public var host: String
        public var port: Int
        public var security: Security
        public var user: String?
        public var password: String?
        /// The sender's address (MAIL FROM and the From: header).
        public var from: String
        /// The bare address of `from` ("Virtual Tourist <photos@example.org>" → photos@example.org).
        public var envelopeFrom: String { SMTPClient.bareAddress(from) }
        /// Seconds to connect, and for the whole exchange.
        public var connectTimeout: Int = 10
        public var timeout: Int = 30

        public init(host: String, port: Int, security: Security, user: String? = nil, password: String? = nil, from: String) {
            self.host = host
            self.port = port
            self.security = security
            self.user = user
            self.password = password
            self.from = from
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// The server answered for good (5xx): trying again will not help.
        public let permanent: Bool
    }

    public let settings: Settings

    public init(_ settings: Settings) { self.settings = settings }

    /// A message: plain text in UTF-8. Header values lose any line break (no header injection).
    public struct Message: Sendable {
        public var to: String
        public var subject: String
        public var body: String

        public init(to: String, subject: String, body: String) {
            self.to = to
            self.subject = subject
            self.body = body
        }

        /// RFC 5322 with MIME (RFC 2045/2047): the subject as an encoded word when it is not ASCII,
        /// the body base64 so no line is too long and no byte is misread; CRLF line ends.
        func rendered(from: String, date: Date = Date()) -> [UInt8] {
            // By scalar: "\r\n" is one Character in Swift, which a Character filter would keep.
            func clean(_ value: String) -> String { SMTPClient.unbroken(value) }
            let subject = clean(self.subject)
            let encodedSubject = subject.unicodeScalars.allSatisfy({ $0.isASCII })
                ? subject : "=?UTF-8?B?\(Data(subject.utf8).base64EncodedString())?="
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
            // Of the bare address: "Name <a@example.org>" would give "example.org>".
            let domain = SMTPClient.bareAddress(from).split(separator: "@").last.map(String.init) ?? "localhost"
            let body = Data(self.body.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n").utf8)
                .base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn, .endLineWithLineFeed])
            let text = [
                "Date: \(formatter.string(from: date))",
                "From: \(clean(from))",
                "To: \(clean(to))",
                "Subject: \(encodedSubject)",
                "Message-ID: <\(UUID().uuidString.lowercased())@\(clean(domain))>",
                "MIME-Version: 1.0",
                "Content-Type: text/plain; charset=utf-8",
                "Content-Transfer-Encoding: base64",
                "",
                body,
                "",
            ].joined(separator: "\r\n")
            return Array(text.utf8)
        }
    }

    /// Sends one message; throws `Failure` with the server's or curl's words.
    public func send(_ message: Message) throws {
        _ = HTTPClient.globalInit
        guard let curl = curl_easy_init() else { throw Failure(description: "libcurl could not start", permanent: false) }
        defer { curl_easy_cleanup(curl) }
        let scheme = settings.security == .implicit ? "smtps" : "smtp"
        let host = settings.host.contains(":") ? "[\(settings.host)]" : settings.host
        vt_curl_set_string(curl, CURLOPT_URL, "\(scheme)://\(host):\(settings.port)")
        vt_curl_set_long(curl, CURLOPT_USE_SSL, Int(settings.security == .starttls ? CURLUSESSL_ALL.rawValue : CURLUSESSL_NONE.rawValue))
        vt_curl_set_long(curl, CURLOPT_NOSIGNAL, 1)
        vt_curl_set_long(curl, CURLOPT_CONNECTTIMEOUT, settings.connectTimeout)
        vt_curl_set_long(curl, CURLOPT_TIMEOUT, settings.timeout)
        // Only SMTP: never another protocol by accident of a setting.
        vt_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps")
        if let user = settings.user, !user.isEmpty {
            vt_curl_set_string(curl, CURLOPT_USERNAME, user)
            vt_curl_set_string(curl, CURLOPT_PASSWORD, settings.password ?? "")
        }
        vt_curl_set_string(curl, CURLOPT_MAIL_FROM, "<\(settings.envelopeFrom)>")
        let recipients = curl_slist_append(nil, "<\(Self.unbroken(message.to).filter { $0 != "<" && $0 != ">" })>")
        defer { curl_slist_free_all(recipients) }
        vt_curl_set_pointer(curl, CURLOPT_MAIL_RCPT, recipients)
        vt_curl_set_long(curl, CURLOPT_UPLOAD, 1)
        let upload = Upload(message.rendered(from: settings.from))
        let unmanaged = Unmanaged.passRetained(upload)
        defer { unmanaged.release() }
        vt_curl_set_read_function(curl, CURLOPT_READFUNCTION) { buffer, size, count, userdata in
            guard let buffer, let userdata else { return 0 }
            return Unmanaged<Upload>.fromOpaque(userdata).takeUnretainedValue().read(into: buffer, capacity: size * count)
        }
        vt_curl_set_pointer(curl, CURLOPT_READDATA, unmanaged.toOpaque())
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code = errorBuffer.withUnsafeMutableBufferPointer { buffer -> CURLcode in
            vt_curl_set_pointer(curl, CURLOPT_ERRORBUFFER, buffer.baseAddress)
            return curl_easy_perform(curl)
        }
        guard code != CURLE_OK else { return }
        var response = 0
        vt_curl_get_long(curl, CURLINFO_RESPONSE_CODE, &response)
        let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let words = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        throw Failure(description: response > 0 ? "\(words) (the server said \(response))" : words, permanent: (500..<600).contains(response))
    }

    /// The address inside the last "<…>" of `from`, or `from` itself when there is none.
    static func bareAddress(_ from: String) -> String {
        guard let open = from.lastIndex(of: "<"), let close = from.lastIndex(of: ">"), open < close else { return from }
        return String(from[from.index(after: open)..<close])
    }

    /// `value` without any CR or LF (by Unicode scalar), for a header or an SMTP command.
    static func unbroken(_ value: String) -> String {
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: value.unicodeScalars.filter { $0 != "\r" && $0 != "\n" })
        return String(scalars)
    }

    /// The message handed to curl as it reads.
    private final class Upload {
        let bytes: [UInt8]
        var offset = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
            let n = min(capacity, bytes.count - offset)
            guard n > 0 else { return 0 }
            bytes.withUnsafeBufferPointer { source in
                UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + offset, byteCount: n)
            }
            offset += n
            return n
        }
    }
}
