import Foundation
import Testing
@testable import HTTPClient

/// A message as SMTPClient writes it: CRLF line ends, no header broken by a CR or LF in a value
/// (no injected header), a non-ASCII subject as an encoded word, the body base64 so that no line
/// is long or a lone "." (SMTP's end of data).
@Suite struct SMTPMessageTests {
    static let date = Date(timeIntervalSince1970: 0)

    /// The rendered message as text and as its lines (split on CRLF).
    func render(_ message: SMTPClient.Message, from: String = "Virtual Tourist <photos@example.org>") -> (text: String, lines: [String]) {
        let text = String(decoding: message.rendered(from: from, date: Self.date), as: UTF8.self)
        return (text, text.components(separatedBy: "\r\n"))
    }

    /// The header lines (up to the first empty line).
    func headers(_ lines: [String]) -> [String] { Array(lines.prefix { !$0.isEmpty }) }

    /// The body, base64-decoded.
    func body(_ lines: [String]) -> String? {
        let encoded = lines.drop { !$0.isEmpty }.joined()
        return Data(base64Encoded: encoded).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func everyLineEndsInCRLF() {
        let (text, _) = render(.init(to: "a@example.org", subject: "Hi", body: "one\ntwo\r\nthree\rfour"))
        let bytes = Array(text.utf8)
        #expect(bytes.count > 0)
        for (index, byte) in bytes.enumerated() where byte == 0x0A { #expect(index > 0 && bytes[index - 1] == 0x0D) }
        for (index, byte) in bytes.enumerated() where byte == 0x0D { #expect(index + 1 < bytes.count && bytes[index + 1] == 0x0A) }
        #expect(text.hasSuffix("\r\n"))
    }

    @Test func theHeadersAreTheExpectedOnes() throws {
        let (_, lines) = render(.init(to: "Ann <ann@example.net>", subject: "Your album", body: "x"))
        let head = headers(lines)
        #expect(head.contains("Date: Thu, 01 Jan 1970 00:00:00 +0000"))
        #expect(head.contains("From: Virtual Tourist <photos@example.org>"))
        #expect(head.contains("To: Ann <ann@example.net>"))
        #expect(head.contains("Subject: Your album"))
        #expect(head.contains("MIME-Version: 1.0"))
        #expect(head.contains("Content-Type: text/plain; charset=utf-8"))
        #expect(head.contains("Content-Transfer-Encoding: base64"))
        // The ID's domain is the sender's, taken from the bare address (not "example.org>").
        let id = try #require(head.first { $0.hasPrefix("Message-ID: <") })
        #expect(id.hasSuffix("@example.org>"))
        #expect(id.dropFirst("Message-ID: <".count).dropLast().allSatisfy { $0 != "<" && $0 != ">" && $0 != " " })
        #expect(head.count == 8)
    }

    @Test func eachMessageHasItsOwnID() {
        let message = SMTPClient.Message(to: "a@example.org", subject: "s", body: "b")
        let ids = (0..<3).map { _ in headers(render(message).lines).first { $0.hasPrefix("Message-ID:") } }
        #expect(Set(ids).count == 3)
    }

    @Test(arguments: ["\r\n", "\n", "\r", "\r\r\n\n"])
    func aLineBreakInAHeaderValueInjectsNoHeader(breaking: String) {
        let message = SMTPClient.Message(to: "ann@example.net\(breaking)Bcc: all@example.com",
                                         subject: "Hello\(breaking)Bcc: everyone@example.com\(breaking)\(breaking)fake body",
                                         body: "real body")
        let (_, lines) = render(message, from: "me@example.org\(breaking)Reply-To: thief@example.com")
        let head = headers(lines)
        #expect(!head.contains { $0.hasPrefix("Bcc:") || $0.hasPrefix("Reply-To:") || $0 == "fake body" })
        #expect(head.count == 8)
        #expect(head.contains("To: ann@example.netBcc: all@example.com"))
        #expect(head.contains("Subject: HelloBcc: everyone@example.comfake body"))
        #expect(head.contains("From: me@example.orgReply-To: thief@example.com"))
        #expect(body(lines) == "real body")
    }

    @Test func aNonASCIISubjectIsAnEncodedWord() {
        let (_, lines) = render(.init(to: "a@example.org", subject: "Café in Zürich 🗺", body: "b"))
        let subject = headers(lines).first { $0.hasPrefix("Subject: ") }
        let word = subject.map { String($0.dropFirst("Subject: ".count)) } ?? ""
        #expect(word.hasPrefix("=?UTF-8?B?") && word.hasSuffix("?="))
        let payload = word.dropFirst("=?UTF-8?B?".count).dropLast(2)
        #expect(Data(base64Encoded: String(payload)).map { String(decoding: $0, as: UTF8.self) } == "Café in Zürich 🗺")
        #expect(word.unicodeScalars.allSatisfy { $0.isASCII })
    }

    @Test func theBodyIsBase64WithCRLFLinesAndNoLoneDot() {
        let text = "Hello\n.\n..leading dots\r\nend.\n" + String(repeating: "long line ", count: 40)
        let (_, lines) = render(.init(to: "a@example.org", subject: "s", body: text))
        let bodyLines = lines.drop { !$0.isEmpty }.dropFirst()
        #expect(bodyLines.allSatisfy { $0.count <= 76 })
        #expect(!lines.contains("."))
        #expect(!lines.contains { $0.hasPrefix(".") })
        // Bare LFs become CRLF; CRLFs stay single.
        #expect(body(lines) == text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n"))
    }

    @Test func unbrokenRemovesEveryCRAndLFByScalar() {
        // "\r\n" is one Character: a Character filter would keep it.
        #expect(SMTPClient.unbroken("a\r\nb\rc\nd\r\n\r\n") == "abcd")
        #expect(SMTPClient.unbroken("Zürich\u{2028}") == "Zürich\u{2028}")
        #expect(SMTPClient.unbroken("") == "")
    }

    @Test func theEnvelopeSenderIsTheBareAddress() {
        func envelope(_ from: String) -> String { SMTPClient.Settings(host: "h", port: 25, security: .none, from: from).envelopeFrom }
        #expect(envelope("Virtual Tourist <photos@example.org>") == "photos@example.org")
        #expect(envelope("photos@example.org") == "photos@example.org")
        #expect(envelope("\"A <b>\" <c@example.org>") == "c@example.org")
        #expect(envelope("broken > <") == "broken > <")
    }
}

/// What a loopback SMTP server saw: the commands, and the message between DATA and ".".
final class TestSMTPServer: Sendable {
    private let server: LoopbackServer
    private let seen = Locked<(commands: [String], data: [String])>(([], []))
    var port: Int { server.port }
    var commands: [String] { seen.value.commands }
    var data: [String] { seen.value.data }

    /// Answers RCPT TO with `recipientReply`; everything else is accepted.
    init(recipientReply: String = "250 OK") throws {
        let seen = seen
        server = try LoopbackServer { connection in
            connection.write("220 test ESMTP\r\n")
            while let line = connection.readLine() {
                seen.change { $0.commands.append(line) }
                switch line.prefix(4).uppercased() {
                case "EHLO": connection.write("250-test\r\n250 8BITMIME\r\n")
                case "HELO", "MAIL", "RSET", "NOOP": connection.write("250 OK\r\n")
                case "RCPT": connection.write(recipientReply + "\r\n")
                case "DATA":
                    connection.write("354 go ahead\r\n")
                    var lines: [String] = []
                    while let data = connection.readLine(), data != "." { lines.append(data) }
                    seen.change { $0.data = lines }
                    connection.write("250 queued\r\n")
                case "QUIT":
                    connection.write("221 bye\r\n")
                    return
                default: connection.write("502 unknown\r\n")
                }
            }
        }
    }

    func stop() { server.stop() }
}

/// One message sent through a loopback SMTP server: the envelope and the message arrive as
/// rendered, a recipient with a line break cannot add an SMTP command, and a refusal says whether
/// trying again can help (5xx: never; 4xx: later).
@Suite struct SMTPSendTests {
    func settings(_ server: TestSMTPServer) -> SMTPClient.Settings {
        var settings = SMTPClient.Settings(host: "127.0.0.1", port: server.port, security: .none, from: "Virtual Tourist <photos@example.org>")
        settings.connectTimeout = 5
        settings.timeout = 20
        return settings
    }

    @Test func aMessageArrivesWithItsEnvelope() throws {
        let server = try TestSMTPServer()
        defer { server.stop() }
        try SMTPClient(settings(server)).send(.init(to: "ann@example.net", subject: "Hello", body: "line one\n.\nline three"))
        let commands = server.commands
        #expect(commands.contains("MAIL FROM:<photos@example.org>"))
        #expect(commands.contains("RCPT TO:<ann@example.net>"))
        #expect(server.data.contains("Subject: Hello"))
        #expect(server.data.contains("To: ann@example.net"))
        #expect(server.data.contains("From: Virtual Tourist <photos@example.org>"))
        let encoded = server.data.drop { !$0.isEmpty }.joined()
        #expect(Data(base64Encoded: encoded).map { String(decoding: $0, as: UTF8.self) } == "line one\r\n.\r\nline three")
    }

    @Test func aRecipientWithALineBreakSendsNoExtraCommand() throws {
        let server = try TestSMTPServer()
        defer { server.stop() }
        // Sent or refused by curl as a strange address: either way, one recipient at most.
        _ = try? SMTPClient(settings(server)).send(.init(to: "ann@example.net\r\nRCPT TO:<all@example.com>", subject: "s", body: "b"))
        #expect(server.commands.contains { $0.uppercased().hasPrefix("EHLO") })
        let recipients = server.commands.filter { $0.uppercased().hasPrefix("RCPT") }
        #expect(recipients.count <= 1)
        #expect(!server.commands.contains("RCPT TO:<all@example.com>"))
    }

    @Test(arguments: [("550 no such mailbox", true), ("451 try again later", false)])
    func aRefusalSaysWhetherItIsForGood(reply: String, permanent: Bool) throws {
        let server = try TestSMTPServer(recipientReply: reply)
        defer { server.stop() }
        #expect {
            try SMTPClient(settings(server)).send(.init(to: "ann@example.net", subject: "s", body: "b"))
        } throws: { error in
            guard let failure = error as? SMTPClient.Failure else { return false }
            return failure.permanent == permanent && failure.description.contains(String(reply.prefix(3)))
        }
        #expect(server.data.isEmpty)
    }

    @Test func aServerThatIsNotThereIsATemporaryFailure() throws {
        let server = try TestSMTPServer()
        let settings = settings(server)
        server.stop()
        #expect {
            try SMTPClient(settings).send(.init(to: "ann@example.net", subject: "s", body: "b"))
        } throws: { error in
            (error as? SMTPClient.Failure)?.permanent == false
        }
    }
}
