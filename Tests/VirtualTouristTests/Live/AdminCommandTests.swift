#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotoFixture
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// `virtual-tourist admin …`: the built binary run as an administrator would, against a real
/// database that a running app (TestApp, same database) serves at the same time.
@Suite struct AdminCommandTests {
    struct Run: CustomStringConvertible {
        let status: Int32
        let output: String
        var description: String { "exit \(status): \(output)" }
    }

    /// Runs the binary with `arguments` after `admin`; `input` becomes standard input. Only the
    /// settings given are set (plus what the test process has, which sets none of them).
    static func admin(_ arguments: [String], database: String?, input: String? = nil,
                      settings: [String: String] = [:]) throws -> Run {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let inputPath = NSTemporaryDirectory() + "vt-admin-\(UUID().uuidString).in"
        defer { try? FileManager.default.removeItem(atPath: inputPath) }
        try (input ?? "").write(toFile: inputPath, atomically: true, encoding: .utf8)
        var environment = settings
        environment["MIGRATIONS_DIR"] = TestApp.repositoryRoot + "/migrations"
        if let database { environment["DATABASE_URL"] = database }
        let command = ["/bin/sh", "-c", "exec \"$@\" < \"$0\"", inputPath, "/usr/bin/env", "-u", "DATABASE_URL"]
            + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + [ProcessTests.binary, "admin"] + arguments
        let (status, output) = try runProcess(command)
        return Run(status: status, output: output)
    }

    static func signIn(_ app: TestApp, _ email: String, _ password: String) throws -> (Browser, Int) {
        let browser = app.browser()
        let form = try browser.get("/sign-in")
        let page = try browser.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", email), ("password", password)])
        return (browser, page.status)
    }

    @Test func helpAndUsageErrors() throws {
        let none = try Self.admin([], database: nil)
        #expect(none.status == 2, "\(none)")
        #expect(none.output.contains("which command?"))
        let help = try Self.admin(["--help"], database: nil)
        #expect(help.status == 0)
        for name in ["create-person", "reset-password", "invite", "list", "jobs", "disable", "enable", "delete"] {
            #expect(help.output.contains("  \(name) "), "\(name) missing from the help")
            let own = try Self.admin([name, "--help"], database: nil)
            #expect(own.status == 0, "\(own)")
            #expect(own.output.hasPrefix("usage: virtual-tourist admin \(name)"), "\(own)")
        }
        let unknown = try Self.admin(["promote", "--email", "a@example.org"], database: nil)
        #expect(unknown.status == 2)
        #expect(unknown.output.contains("unknown admin command promote"))
        let option = try Self.admin(["disable", "--email", "a@example.org", "--force"], database: nil)
        #expect(option.status == 2)
        #expect(option.output.contains("disable has no option --force"))
        let missing = try Self.admin(["disable"], database: nil)
        #expect(missing.status == 2)
        #expect(missing.output.contains("disable needs --email"))
        let noValue = try Self.admin(["disable", "--email"], database: nil)
        #expect(noValue.status == 2)
        #expect(noValue.output.contains("--email needs a value"))
        let stray = try Self.admin(["list", "everyone"], database: nil)
        #expect(stray.status == 2)
        #expect(stray.output.contains("unexpected argument everyone"))
        // A well-formed command without a database to work on.
        let nowhere = try Self.admin(["list"], database: nil)
        #expect(nowhere.status == 1)
        #expect(nowhere.output.contains("DATABASE_URL is not set"))
        let unmigrated = try Self.admin(["list"], database: try TestDatabase.create("bare"))
        #expect(unmigrated.status == 1)
        #expect(unmigrated.output.contains("migrations pending"))
    }

    @Test func createPersonThenTheySignIn() throws {
        let database = try TestDatabase.migrated("admin")
        let app = try TestApp(database: database) { $0.signUp = .closed }
        let piped = try Self.admin(["create-person", "--email", "Ann@Example.org", "--name", "Ann", "--password-stdin"],
                                   database: database, input: "a password from stdin\n")
        #expect(piped.status == 0, "\(piped)")
        #expect(piped.output.contains("created person"))
        #expect(!piped.output.contains("temporary password"))
        #expect(try Self.signIn(app, "ann@example.org", "a password from stdin").1 == 303)

        let made = try Self.admin(["create-person", "--email=bo@example.org", "--name=Bo"], database: database)
        #expect(made.status == 0, "\(made)")
        let password = try #require(made.output.firstMatch(of: /temporary password: (\S+)/)).1
        #expect(password.count == 20)
        #expect(try Self.signIn(app, "bo@example.org", String(password)).1 == 303)
        #expect(try app.count("SELECT count(*) FROM users WHERE password_hash LIKE '$y$%'") == 2)

        let taken = try Self.admin(["create-person", "--email", "ANN@example.org", "--name", "Other"], database: database)
        #expect(taken.status == 1)
        #expect(taken.output.contains("exists already"))
        for (arguments, input, message) in [
            (["create-person", "--email", "not-an-email", "--name", "X"], "", "does not look like an email"),
            (["create-person", "--email", "c@example.org"], "", "create-person needs --name"),
            (["create-person", "--email", "c@example.org", "--name", "C\u{1B}[2J"], "", "without control characters"),
            (["create-person", "--email", "c@example.org", "--name", "C", "--password-stdin"], "short\n", "at least 10 characters"),
            (["create-person", "--email", "c@example.org", "--name", "C", "--password-stdin"], "", "nothing on standard input"),
        ] {
            let refused = try Self.admin(arguments, database: database, input: input)
            #expect(refused.status == 2, "\(arguments): \(refused)")
            #expect(refused.output.contains(message), "\(arguments): \(refused)")
        }
        #expect(try app.count("SELECT count(*) FROM users") == 2)
    }

    /// A job whose worker dies every time it holds it (the lease lapses again and again) is parked
    /// after three takeovers: no longer claimed, the album failed with Retry, `admin jobs` and
    /// admin_jobs say so; Retry starts it again.
    @Test func aJobThatKeepsKillingItsWorkerIsParked() throws {
        let database = try TestDatabase.migrated("admin")
        let app = try TestApp(database: database)
        let browser = try app.signedUp(email: "lee@example.org", name: "Lee")
        let pin = try AlbumTests.dropPin(browser)
        let queue = app.app.workers.store
        var claims = 0
        while let job = try queue.claimJob(worker: "dies-\(claims)", leaseSeconds: 60) {
            claims += 1
            #expect(claims <= 4)
            // The worker dies holding it: the lease runs out.
            try app.pool.query("UPDATE album_jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [job.id])
            if claims > 4 { break }
        }
        #expect(claims == 4, "claimed once, then taken over three times, then parked")
        let album = try AlbumTests.state(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == AlbumJobQueue.parkedPhrase)
        #expect(try browser.get("/pins/\(pin)").body.contains(">Retry</button>"))
        #expect(try app.count("SELECT count(*) FROM admin_jobs WHERE parked AND lapses = 3") == 1)
        let listed = try Self.admin(["jobs"], database: database)
        #expect(listed.status == 0, "\(listed)")
        #expect(listed.output.contains("parked"), "\(listed)")
        #expect(listed.output.contains("lee@example.org"), "\(listed)")
        #expect(listed.output.contains("its worker stopped 3 times"), "\(listed)")
        // Retry: a new job, claimable.
        let token = try browser.get("/pins/\(pin)").csrfToken ?? ""
        _ = try browser.post("/pins/\(pin)/retry", form: [("_csrf", token)])
        #expect(try AlbumTests.state(browser, pin: pin).status == "downloading")
        #expect(try queue.claimJob(worker: "healthy", leaseSeconds: 60) != nil)
    }

    @Test func listShowsPinsPhotosAndBytes() throws {
        let database = try TestDatabase.migrated("admin")
        #expect(try Self.admin(["list"], database: database).output.contains("nobody has an account yet"))
        let app = try TestApp(database: database)
        _ = try app.signedUp(email: "pat@example.org", name: "Pat")
        _ = try app.signedUp(email: "quinn@example.org", name: "Quinn")
        // The page refuses control characters; SQL does not.
        try app.pool.query("UPDATE users SET display_name = 'Pat' || chr(7) WHERE email = 'pat@example.org'")
        try app.pool.query("""
            WITH u AS (SELECT id FROM users WHERE email = 'pat@example.org'),
                 p AS (INSERT INTO pins (user_id, lat, lon) SELECT id, n, n FROM u, generate_series(1, 2) n RETURNING id, user_id)
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, hash, content_type, byte_size)
            SELECT p.id, p.user_id, 0, n, 'flickr', p.id || '-' || n, 'https://example.org/', 'ready', decode(repeat('b', 64), 'hex'), 'image/jpeg', 1000 + n
            FROM p, generate_series(1, 3) n
            """)
        // One photo of their own, 5,000 bytes with its versions: OWN, and in CHARGED too.
        try app.pool.query("""
            INSERT INTO own_photos (pin_id, user_id, added_by, file_name, format, original, original_bytes, display, byte_size, width, height, placed)
            SELECT p.id, p.user_id, p.user_id, 'IMG_0001.HEIC', 'heif', decode(repeat('c', 64), 'hex'), 4000, decode(repeat('d', 64), 'hex'), 5000, 4032, 3024, 'person'
            FROM pins p JOIN users u ON u.id = p.user_id WHERE u.email = 'pat@example.org' LIMIT 1
            """)
        let listed = try Self.admin(["list"], database: database)
        #expect(listed.status == 0, "\(listed)")
        let lines = listed.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(lines.first == ["ID", "EMAIL", "NAME", "PINS", "PHOTOS", "BYTES", "CHARGED", "OWN", "CREATED", "LAST", "SEEN", "STATUS"])
        let pat = try #require(lines.first { $0.contains("pat@example.org") })
        // Six photos of 1001–1003 bytes, on two pins; the bell in the name is shown as "?".
        // Their own map's pins: charged to them too.
        let photoBytes = 2 * (1001 + 1002 + 1003)
        let expected: [String] = ["pat@example.org", "Pat?", "2", "6", String(photoBytes), String(photoBytes + 5000), "5000"]
        #expect(Array(pat[1...7]) == expected)
        #expect(pat.last == "active")
        let quinn = try #require(lines.first { $0.contains("quinn@example.org") })
        #expect(Array(quinn[3...7]) == ["0", "0", "0", "0", "0"])
    }

    @Test func resetPasswordEndsTheirSessions() throws {
        let database = try TestDatabase.migrated("admin")
        let app = try TestApp(database: database)
        let browser = try app.signedUp(email: "pat@example.org", password: "the first password")
        let bystander = try app.signedUp(email: "quinn@example.org")
        let reset = try Self.admin(["reset-password", "--email", "PAT@example.org", "--password-stdin"], database: database,
                                   input: "the second password\n")
        #expect(reset.status == 0, "\(reset)")
        #expect(try browser.get("/").status == 303)
        #expect(try bystander.get("/").status == 200)
        #expect(try Self.signIn(app, "pat@example.org", "the first password").1 == 422)
        #expect(try Self.signIn(app, "pat@example.org", "the second password").1 == 303)
        let made = try Self.admin(["reset-password", "--email", "pat@example.org"], database: database)
        let password = try #require(made.output.firstMatch(of: /temporary password: (\S+)/)).1
        #expect(try Self.signIn(app, "pat@example.org", String(password)).1 == 303)
        let nobody = try Self.admin(["reset-password", "--email", "nobody@example.org"], database: database)
        #expect(nobody.status == 1)
        #expect(nobody.output.contains("nobody has the email nobody@example.org"))
    }

    @Test func inviteMakesALinkThatWorksOnce() throws {
        let database = try TestDatabase.migrated("admin")
        let app = try TestApp(database: database) { $0.signUp = .invite }
        _ = try app.signedUp(email: "owner@example.org")
        let made = try Self.admin(["invite", "--days", "2", "--note", "for the guest"], database: database,
                                  settings: ["PUBLIC_URL": "https://photos.example.org/", "SIGN_UP": "invite"])
        #expect(made.status == 0, "\(made)")
        #expect(!made.output.contains("SIGN_UP is"))
        let code = String(try #require(made.output.firstMatch(of: /^https:\/\/photos\.example\.org\/sign-up\?invite=([A-Za-z0-9_-]{43})$/.anchorsMatchLineEndings())).1)
        #expect(try app.count("SELECT count(*) FROM invitations WHERE note = 'for the guest' AND expires_at BETWEEN now() + interval '47 hours' AND now() + interval '49 hours'") == 1)
        #expect(try SignUpModeTests.signUp(app, email: "guest@example.org", invitation: code, link: code).status == 303)
        #expect(try SignUpModeTests.signUp(app, email: "second@example.org", invitation: code).status == 403)

        // Without PUBLIC_URL the path, and a word about it; with SIGN_UP other than invite, a warning.
        let bare = try Self.admin(["invite"], database: database, settings: ["SIGN_UP": "closed"])
        #expect(bare.status == 0)
        #expect(bare.output.contains("\n/sign-up?invite=") || bare.output.hasPrefix("/sign-up?invite="))
        #expect(bare.output.contains("PUBLIC_URL is not set"))
        #expect(bare.output.contains("SIGN_UP is closed here"))
        for days in ["0", "366", "a week", "-1"] {
            let refused = try Self.admin(["invite", "--days", days], database: database)
            #expect(refused.status == 2, "\(days): \(refused)")
            #expect(refused.output.contains("--days must be"))
        }
        #expect(try app.count("SELECT count(*) FROM invitations") == 2)
    }

    @Test func disableEnableAndDelete() throws {
        let database = try TestDatabase.migrated("admin")
        let app = try TestApp(database: database)
        let browser = try app.signedUp(email: "pat@example.org", password: "pat's password")
        let bystander = try app.signedUp(email: "quinn@example.org")
        try app.pool.query("INSERT INTO pins (user_id, lat, lon) SELECT id, 1, 2 FROM users")

        let disabled = try Self.admin(["disable", "--email", "Pat@Example.org"], database: database)
        #expect(disabled.status == 0, "\(disabled)")
        // Their session ends at once, not at its next use.
        #expect(try app.count("SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = 'pat@example.org'") == 0)
        #expect(try browser.get("/").status == 303)
        #expect(try Self.signIn(app, "pat@example.org", "pat's password").1 == 422)
        #expect(try bystander.get("/").status == 200)
        #expect(try Self.admin(["list"], database: database).output.contains("disabled"))
        #expect(try Self.admin(["enable", "--email", "pat@example.org"], database: database).status == 0)
        #expect(try Self.signIn(app, "pat@example.org", "pat's password").1 == 303)

        let unconfirmed = try Self.admin(["delete", "--email", "pat@example.org"], database: database)
        #expect(unconfirmed.status == 2)
        #expect(unconfirmed.output.contains("add --yes"))
        #expect(try app.count("SELECT count(*) FROM users") == 2)
        let deleted = try Self.admin(["delete", "--email", "pat@example.org", "--yes"], database: database)
        #expect(deleted.status == 0, "\(deleted)")
        #expect(try app.count("SELECT count(*) FROM users WHERE email = 'pat@example.org'") == 0)
        #expect(try app.count("SELECT count(*) FROM pins") == 1)
        #expect(try bystander.get("/").status == 200)
        for command in ["disable", "enable"] {
            let nobody = try Self.admin([command, "--email", "pat@example.org"], database: database)
            #expect(nobody.status == 1, "\(command): \(nobody)")
            #expect(nobody.output.contains("nobody has the email"))
        }
        #expect(try Self.admin(["delete", "--email", "pat@example.org", "--yes"], database: database).status == 1)
        let flagValue = try Self.admin(["delete", "--email", "quinn@example.org", "--yes=no"], database: database)
        #expect(flagValue.status == 2)
        #expect(try app.count("SELECT count(*) FROM users") == 1)
    }
}

/// The settings of issue 29 reach the server they configure, and bad values stop the binary.
@Suite struct AddressLimitSettingTests {
    @Test func theConnectionRateIsASettingAndItsRefusalsAre503() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("limits")
        var environment = ProcessTests.environment(database: database, fixture: fixture)
        environment["WORKERS"] = "0"
        environment["LOG_LEVEL"] = "notice"
        environment["NEW_CONNECTIONS_PER_SECOND"] = "0.2"  // one every 5 s: none comes back during the test
        environment["NEW_CONNECTION_BURST"] = "3"
        let log = NSTemporaryDirectory() + "vt-limits-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = try ChildProcess([ProcessTests.binary, "serve"], environment: environment, logPath: log)
        defer { process.kill(SIGTERM) }
        // The port from the log: probing it would spend the connections this test counts.
        var port: Int?
        #expect(eventually(timeout: 30) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            port = text.firstMatch(of: /listening on http:\/\/127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) }
            return port != nil
        })
        let browser = Browser(port: try #require(port))
        let pages = try (0..<6).map { _ in try browser.get("/healthz") }
        #expect(pages.map(\.status) == [200, 200, 200, 503, 503, 503], "\(pages.map(\.status))")
        #expect(pages.last?.header("Retry-After") == "5")
        #expect(pages.last?.body.contains("Too many new connections") == true)
    }

    @Test(arguments: [("SIGN_UP", "maybe", "SIGN_UP must be open, invite or closed"),
                      ("IPV6_PREFIX", "12", "IPV6_PREFIX must be 32–128"),
                      ("CONNECTIONS_PER_ADDRESS", "0", "CONNECTIONS_PER_ADDRESS must be"),
                      ("NEW_CONNECTIONS_PER_SECOND", "lots", "NEW_CONNECTIONS_PER_SECOND must be"),
                      ("NEW_CONNECTION_BURST", "0", "NEW_CONNECTION_BURST must be"),
                      ("OVER_SHARE_HOLD_SECONDS", "-1", "OVER_SHARE_HOLD_SECONDS must be"),
                      ("SECURE_COOKIES", "maybe", "SECURE_COOKIES must be 1, true, yes, on or 0, false, no, off, not maybe"),
                      ("SERVER_TIMING", "enabled", "SERVER_TIMING must be 1, true, yes, on or 0, false, no, off"),
                      // Past 2^31 SQL's int would refuse it hourly, and retention would stop unsaid.
                      ("PHOTO_RETENTION_DAYS", "2147483648", "PHOTO_RETENTION_DAYS must be 0–36500 days, not 2147483648"),
                      ("PHOTO_RETENTION_DAYS", "36501", "PHOTO_RETENTION_DAYS must be 0–36500 days"),
                      ("PHOTO_RETENTION_DAYS", "-1", "PHOTO_RETENTION_DAYS must be 0–36500 days"),
                      ("DATABASE_POOL_SIZE", "501", "DATABASE_POOL_SIZE must be 1–500"),
                      ("WORKERS", "65", "WORKERS must be 0–64"),
                      ("LOG_LEVEL", "loud", "LOG_LEVEL must be debug, info, notice, warning or error, not loud")])
    func badSettingsStopTheBinary(name: String, value: String, message: String) throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let (status, output) = try runProcess(["/usr/bin/env", "\(name)=\(value)", ProcessTests.binary, "migrate"])
        #expect(status == 2, "\(output)")
        #expect(output.contains(message), "\(output)")
    }

    /// The edges of the ranges and every yes/no word pass: the binary goes on to want a database.
    @Test(arguments: [("PHOTO_RETENTION_DAYS", "36500"), ("PHOTO_RETENTION_DAYS", "0"), ("WORKERS", "0"),
                      ("SECURE_COOKIES", "On"), ("SECURE_COOKIES", "off"), ("SERVER_TIMING", "YES"), ("SERVER_TIMING", "false")])
    func goodSettingsPass(name: String, value: String) throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let (status, output) = try runProcess(["/usr/bin/env", "\(name)=\(value)", ProcessTests.binary, "migrate"])
        #expect(status == 1, "\(output)")
        #expect(output.contains("DATABASE_URL is not set"), "\(output)")
    }

    /// `on` and `off` mean what they say, in any letter case: a word taken for the other is a silent
    /// misconfiguration (Secure cookies off behind TLS).
    @Test(arguments: [("on", "YES", true), ("Off", "0", false)])
    func yesAndNoWordsMeanWhatTheySay(secureCookies: String, serverTiming: String, yes: Bool) throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        var environment = ProcessTests.environment(database: try TestDatabase.migrated("words"), fixture: fixture)
        let port = OperationsTests.freePort()
        environment["PORT"] = String(port)
        environment["WORKERS"] = "0"
        environment["SECURE_COOKIES"] = secureCookies
        environment["SERVER_TIMING"] = serverTiming
        let log = NSTemporaryDirectory() + "vt-words-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let server = try ChildProcess([ProcessTests.binary, "serve"], environment: environment, logPath: log)
        defer { server.kill(SIGTERM) }
        #expect(eventually(timeout: 20) { (try? Browser(port: port).get("/readyz").status) == 200 })
        let page = try Browser(port: port).get("/sign-up")
        let cookies = page.headerValues("Set-Cookie")
        #expect(!cookies.isEmpty)
        #expect(cookies.allSatisfy { $0.contains("; Secure") == yes }, "\(cookies)")
        #expect((page.header("Server-Timing") != nil) == yes)
    }
}
