import Foundation
@testable import HTTPClient
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// A real SMTP server for the tests: aiosmtpd (.venv) writing every message it accepts to a
/// maildir, on a loopback port. Not a mock: the app's mail goes through libcurl's SMTP to it.
final class SMTPSink {
    let port: Int
    let maildir: String
    private var process: Process?

    /// `handler`: aiosmtpd's Mailbox, or "refusing.Refusing" (Tests/Fixtures/smtp/refusing.py:
    /// refuses gone@ for good and busy@ twice).
    let handler: String

    init(port: Int? = nil, handler: String = "aiosmtpd.handlers.Mailbox") throws {
        self.port = try port ?? MotoServer.freePort()
        self.handler = handler
        maildir = TestApp.scratchDirectory("maildir")
        try start()
    }

    deinit { stop() }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let python = ProcessInfo.processInfo.environment["S3_TEST_PYTHON"] ?? "python3"
        process.arguments = [python, "-m", "aiosmtpd", "-n", "-l", "127.0.0.1:\(port)", "-c", handler, maildir]
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONPATH"] = TestApp.repositoryRoot + "/Tests/Fixtures/smtp"
        process.environment = environment
        let log = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        // Ready when it greets.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let fd = try? connectLoopback(port: port, receiveTimeout: 1) {
                var buffer = [UInt8](repeating: 0, count: 256)
                let n = recv(fd, &buffer, buffer.count, 0)
                close(fd)
                if n > 3, buffer[0] == UInt8(ascii: "2") { return }
            }
            usleep(100_000)
        }
        throw Browser.Failure(description: "aiosmtpd did not start on \(port) (is it in .venv? script/python-env)")
    }

    /// aiosmtpd does not end on SIGTERM: SIGKILL.
    func stop() {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        process = nil
    }

    /// A received message: its headers and its text (the base64 body decoded).
    struct Mail {
        let headers: [String: String]
        let text: String
        var to: String { headers["to"] ?? "" }
        var subject: String { headers["subject"] ?? "" }
    }

    var received: [Mail] {
        let folder = maildir + "/new"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        return names.compactMap { name in
            guard let raw = try? String(contentsOfFile: folder + "/" + name, encoding: .utf8) else { return nil }
            let normalized = raw.replacingOccurrences(of: "\r\n", with: "\n")
            guard let split = normalized.range(of: "\n\n") else { return nil }
            var headers: [String: String] = [:]
            for line in normalized[..<split.lowerBound].split(separator: "\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let body = normalized[split.upperBound...].filter { !$0.isWhitespace }
            let text = Data(base64Encoded: String(body)).map { String(decoding: $0, as: UTF8.self) } ?? String(normalized[split.upperBound...])
            return Mail(headers: headers, text: text)
        }
    }

    /// Waits until `count` messages have arrived (or `timeout`); returns what arrived.
    func wait(for count: Int, timeout: Double = 10) -> [Mail] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let mails = received
            if mails.count >= count { return mails }
            usleep(100_000)
        }
        return received
    }
}

@Suite(.serialized) struct MailTests {
    /// An app whose mail goes to `port`, its mail sender running (the tests' apps start no
    /// background work by themselves).
    static func app(port: Int, timeout: Int = 5) throws -> TestApp {
        let app = try TestApp {
            $0.publicURL = "http://photos.example.org"
            var mail = SMTPClient.Settings(host: "127.0.0.1", port: port, security: .none, from: "Virtual Tourist <photos@example.org>")
            mail.connectTimeout = timeout
            mail.timeout = timeout
            $0.mail = mail
            $0.mailRetryBase = 0.5
            $0.mailPoll = 0.2
        }
        app.app.mailSender?.start()
        return app
    }

    static func askForReset(_ app: TestApp, _ email: String) throws -> Browser.Page {
        let browser = app.browser()
        // (Without mail the page has no form: the token from the sign-in page, as a hand-made request would.)
        let token = try browser.get("/forgot-password").csrfToken ?? browser.get("/sign-in").csrfToken ?? ""
        return try browser.post("/forgot-password", form: [("_csrf", token), ("email", email)])
    }

    static func token(in mail: SMTPSink.Mail) -> String? {
        mail.text.firstMatch(of: /\/reset-password\/([A-Za-z0-9_-]{43})/).map { String($0.1) }
    }

    @Test func aPasswordIsResetByMailOnceAndEverySessionEnds() throws {
        let sink = try SMTPSink()
        let app = try Self.app(port: sink.port)
        let bob = try app.signedUp(email: "bob@example.org", name: "Bob", password: "the old password")
        let (laptop, _) = try AdminCommandTests.signIn(app, "bob@example.org", "the old password")

        // A known address and an unknown one: the same answer.
        let known = try Self.askForReset(app, "BOB@example.org"), unknown = try Self.askForReset(app, "nobody@example.org")
        #expect(known.status == 303 && known.header("Location") == "/sign-in")
        #expect(unknown.status == known.status && unknown.header("Location") == known.header("Location"))
        let mails = sink.wait(for: 1)
        #expect(mails.count == 1, "\(mails.map(\.to))")
        let mail = try #require(mails.first)
        #expect(mail.to == "bob@example.org" && mail.subject == "Reset your Virtual Tourist password")
        #expect(mail.headers["from"] == "Virtual Tourist <photos@example.org>")
        #expect(mail.text.contains("Hello Bob") && mail.text.contains("http://photos.example.org/reset-password/"))
        let token = try #require(Self.token(in: mail))
        // Delivered: the outbox keeps no link. The row is marked once the mail server has said
        // so, a moment after the mail reached it: waited for, as the sink's arrival may come first.
        #expect(eventually(timeout: 10) { (try? app.count("SELECT count(*)::int FROM mail_outbox WHERE sent_at IS NOT NULL AND body = ''")) == 1 })

        let visitor = app.browser()
        let form = try visitor.get("/reset-password/\(token)")
        // Not cached; never sent as a referrer to another site (Referrer-Policy same-origin on every page).
        #expect(form.status == 200 && form.header("Cache-Control") == "no-store" && form.header("Referrer-Policy") == "same-origin")
        let csrf = form.csrfToken ?? ""
        let differ = try visitor.post("/reset-password/\(token)", form: [("_csrf", csrf), ("password", "a brand new password"), ("password_confirmation", "another one entirely")])
        #expect(differ.status == 422 && differ.body.contains("The two passwords differ."))
        let done = try visitor.post("/reset-password/\(token)", form: [("_csrf", csrf), ("password", "a brand new password"), ("password_confirmation", "a brand new password")])
        #expect(done.status == 303 && done.header("Location") == "/sign-in")
        // Every session ended; the old password no longer works, the new one does.
        #expect(try bob.get("/").status == 303 && laptop.get("/").status == 303)
        #expect(try AdminCommandTests.signIn(app, "bob@example.org", "the old password").1 == 422)
        #expect(try AdminCommandTests.signIn(app, "bob@example.org", "a brand new password").1 == 303)
        // Once: the link opens nothing more.
        #expect(try app.browser().get("/reset-password/\(token)").status == 404)
        let again = try visitor.post("/reset-password/\(token)", form: [("_csrf", csrf), ("password", "a third password!"), ("password_confirmation", "a third password!")])
        #expect(again.status == 404)

        // At most three links an hour to one account, whoever asks: two more after the first.
        for _ in 0..<4 { #expect(try Self.askForReset(app, "bob@example.org").status == 303) }
        #expect(sink.wait(for: 3, timeout: 5).count == 3)
        Thread.sleep(forTimeInterval: 1)
        #expect(sink.received.count == 3)
        #expect(try app.count("SELECT count(*)::int FROM password_resets") == 3)
    }

    @Test func aMailServerThatIsDownOrHangsLosesNoMailAndBlocksNoRequest() throws {
        // Nothing listens on the port yet.
        let port = try MotoServer.freePort()
        let app = try Self.app(port: port, timeout: 2)
        _ = try app.signedUp(email: "bob@example.org", name: "Bob")
        let start = Date()
        #expect(try Self.askForReset(app, "bob@example.org").status == 303)
        #expect(Date().timeIntervalSince(start) < 1, "the request waited for the mail server")
        // Tried, failed, kept.
        var waited = 0
        while try app.count("SELECT count(*)::int FROM mail_outbox WHERE attempts >= 2 AND last_error IS NOT NULL") == 0, waited < 100 {
            usleep(100_000); waited += 1
        }
        #expect(try app.count("SELECT count(*)::int FROM mail_outbox WHERE attempts >= 2 AND sent_at IS NULL AND failed_at IS NULL") == 1)
        // The server comes back on that port: the mail arrives by itself.
        let sink = try SMTPSink(port: port)
        let mails = sink.wait(for: 1, timeout: 15)
        #expect(mails.count == 1 && mails.first.flatMap(Self.token) != nil)

        // A server that accepts and never speaks: the try times out, the request did not wait.
        sink.stop()
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var reuse: Int32 = 1
        setsockopt(silent, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(bound == 0 && listen(silent, 8) == 0)
        try app.pool.query("DELETE FROM password_resets")
        let asked = Date()
        #expect(try Self.askForReset(app, "bob@example.org").status == 303)
        #expect(Date().timeIntervalSince(asked) < 1)
        waited = 0
        while try app.count("SELECT count(*)::int FROM mail_outbox WHERE sent_at IS NULL AND attempts >= 1 AND last_error IS NOT NULL") == 0, waited < 100 {
            usleep(100_000); waited += 1
        }
        let error: String? = try app.pool.query("SELECT last_error FROM mail_outbox WHERE sent_at IS NULL ORDER BY id DESC LIMIT 1").first?.decode("last_error")
        #expect(error?.lowercased().contains("timeout") == true || error?.lowercased().contains("timed out") == true, "\(error ?? "none")")
        #expect(try app.browser().get("/sign-in").status == 200)
    }

    /// A server that refuses: for good (550) the mail is given up at once, said in the log, and the
    /// queue goes on; for a while (451) it is tried again and arrives.
    @Test func aMailServerThatRefusesForGoodOrForAWhile() throws {
        let sink = try SMTPSink(handler: "refusing.Refusing")
        let app = try Self.app(port: sink.port)
        for email in ["gone@example.org", "busy@example.org", "bob@example.org"] {
            _ = try app.signedUp(email: email, name: "Someone")
            #expect(try Self.askForReset(app, email).status == 303)
        }
        let mails = sink.wait(for: 2, timeout: 20)
        #expect(Set(mails.map(\.to)) == ["busy@example.org", "bob@example.org"], "\(mails.map(\.to))")
        // The server keeps a message before the sender has marked it sent: wait for all three to end.
        #expect(eventually(timeout: 10) { (try? app.count("SELECT count(*)::int FROM mail_outbox WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL")) == 3 })
        let rows = try app.pool.query("SELECT to_address, attempts, sent_at IS NOT NULL AS sent, failed_at IS NOT NULL AS failed, coalesce(last_error, '') AS error FROM mail_outbox ORDER BY id")
        let byAddress = try Dictionary(uniqueKeysWithValues: rows.map { row in
            (try row.decode("to_address", as: String.self),
             (attempts: try row.decode("attempts", as: Int.self), sent: try row.decode("sent", as: Bool.self),
              failed: try row.decode("failed", as: Bool.self), error: try row.decode("error", as: String.self)))
        })
        let gone = try #require(byAddress["gone@example.org"]), busy = try #require(byAddress["busy@example.org"])
        #expect(gone.failed && !gone.sent && gone.attempts == 1 && gone.error.contains("550"), "\(gone)")
        #expect(busy.sent && busy.attempts == 3 && busy.error.contains("451"), "\(busy)")
        #expect(byAddress["bob@example.org"]?.sent == true && byAddress["bob@example.org"]?.attempts == 1)
        // Given up means given up: no further try.
        Thread.sleep(forTimeInterval: 1.5)
        #expect(try app.count("SELECT attempts FROM mail_outbox WHERE to_address = 'gone@example.org'") == 1)
    }

    /// One network asking for many addresses' resets (walking a list, filling the outbox) is
    /// refused after ten an hour, with a clear page; nothing more is queued.
    @Test func resetRequestsFromOneNetworkAreLimited() throws {
        let sink = try SMTPSink()
        let app = try Self.app(port: sink.port)
        for n in 0..<10 { #expect(try Self.askForReset(app, "someone\(n)@example.org").status == 303) }
        let refused = try Self.askForReset(app, "someone10@example.org")
        #expect(refused.status == 429 && refused.header("Retry-After") == "3600")
        #expect(refused.body.contains("Many password resets were asked for from your network this hour"))
        #expect(try app.count("SELECT count(*)::int FROM password_resets") == 0)
    }

    @Test func anInvitationIsMailedToTheAccountItIsForOnly() throws {
        let sink = try SMTPSink()
        let app = try Self.app(port: sink.port)
        let olga = try app.signedUp(email: "olga@example.org", name: "Olga")
        _ = try app.signedUp(email: "bob@example.org", name: "Bob")
        let map = try SharedMapTests.makeMap(olga, name: "Club walks")
        #expect(try SharedMapTests.inviteByEmail(olga, map: map, email: "Bob@Example.org", role: "viewer").status == 303)
        #expect(try SharedMapTests.inviteByEmail(olga, map: map, email: "nobody@example.org", role: "viewer").status == 303)
        let mails = sink.wait(for: 1)
        Thread.sleep(forTimeInterval: 1)
        #expect(sink.received.count == 1)
        let mail = try #require(mails.first)
        #expect(mail.to == "bob@example.org" && mail.subject == "Olga invited you to a shared map on Virtual Tourist")
        #expect(mail.text.contains("“Club walks” as a viewer") && mail.text.contains("http://photos.example.org/maps"))
    }

    @Test func withoutMailThePageSaysWhomToAsk() throws {
        let app = try TestApp()
        _ = try app.signedUp(email: "bob@example.org", name: "Bob")
        let page = try app.browser().get("/forgot-password")
        #expect(page.status == 200 && page.body.contains("This server does not send mail") && !page.body.contains("name=\"email\""))
        #expect(try Self.askForReset(app, "bob@example.org").status == 200)
        #expect(try app.count("SELECT count(*)::int FROM mail_outbox") == 0 && app.count("SELECT count(*)::int FROM password_resets") == 0)
        #expect(try app.browser().get("/sign-in").body.contains("href=\"/forgot-password\""))
    }

    /// The message as written: no header takes a line break from a value, a non-ASCII subject is
    /// an encoded word, the body base64 with CRLF lines.
    @Test func messagesAreWrittenSafely() throws {
        let message = SMTPClient.Message(to: "bob@example.org\r\nBcc: eve@example.org", subject: "Zoë's map\r\nX-Evil: 1", body: "Line one\nLine two")
        let text = String(decoding: message.rendered(from: "photos@example.org"), as: UTF8.self)
        let headers = text.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n")
        #expect(!headers.contains { $0.hasPrefix("Bcc:") || $0.hasPrefix("X-Evil:") }, "\(headers)")
        #expect(headers.contains("Subject: =?UTF-8?B?\(Data("Zoë's mapX-Evil: 1".utf8).base64EncodedString())?="))
        let body = text.components(separatedBy: "\r\n\r\n")[1].filter { !$0.isWhitespace }
        #expect(Data(base64Encoded: body).map { String(decoding: $0, as: UTF8.self) } == "Line one\r\nLine two")
        #expect(SMTPClient.Settings(host: "h", port: 1, security: .none, from: "Virtual Tourist <a@b.org>").envelopeFrom == "a@b.org")
    }
}
