#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// Issue 53, settings that refuse nonsense: the URL settings take only http(s) addresses with a
/// host (PUBLIC_URL nothing more), and the secrets may come from files (NAME_FILE), refused at
/// start when that cannot be what was meant. The built binary is run as an operator would.
@Suite struct SettingsRefusalTests {
    /// The binary with only these settings (`env -i`: nothing of the test's environment).
    static func run(_ settings: [String: String], arguments: [String] = ["migrate"]) throws -> (status: Int32, output: String) {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let environment = settings.merging(["PATH": "/usr/bin:/bin", "MIGRATIONS_DIR": TestApp.repositoryRoot + "/migrations"]) { a, _ in a }
        return try runProcess(["/usr/bin/env", "-i"] + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                              + [ProcessTests.binary] + arguments)
    }

    /// A folder of the test's own, removed at the end.
    final class Folder {
        let path = NSTemporaryDirectory() + "vt-settings-\(UUID().uuidString)"
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        func file(_ name: String, _ bytes: [UInt8]) throws -> String {
            let file = path + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            return file
        }
        func file(_ name: String, _ text: String) throws -> String { try file(name, Array(text.utf8)) }
    }

    @Test(arguments: [
        // The case: no scheme, so invitations read photos.example.org/sign-up?… and nothing is compared.
        ("PUBLIC_URL", "photos.example.org", "PUBLIC_URL must be an http:// or https:// address with a host, e.g. https://photos.example.org, not photos.example.org"),
        ("PUBLIC_URL", "javascript:alert(1)", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "http://", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "ftp://x", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "http:///path", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "https://photos example.org", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "http://[zz]:80", "PUBLIC_URL must be an http:// or https:// address with a host"),
        ("PUBLIC_URL", "https://host:99999", "PUBLIC_URL must have a port of 1–65535"),
        ("PUBLIC_URL", "https://host:", "PUBLIC_URL must have a port of 1–65535"),
        ("PUBLIC_URL", "https://host:+443", "PUBLIC_URL must have a port of 1–65535"),
        ("PUBLIC_URL", "https://host:0", "PUBLIC_URL must have a port of 1–65535"),
        // Links are PUBLIC_URL + /s/…, and the app answers at /: a path would be kept in links it cannot serve.
        ("PUBLIC_URL", "https://example.org/photos", "PUBLIC_URL must be the site's address alone, without a path, query or fragment"),
        ("PUBLIC_URL", "https://example.org/?x=1", "PUBLIC_URL must be the site's address alone"),
        ("PUBLIC_URL", "https://example.org#top", "PUBLIC_URL must be the site's address alone"),
        ("PUBLIC_URL", "https://example.org//", "PUBLIC_URL must be the site's address alone"),
        ("PUBLIC_URL", "https://admin:secret@example.org", "PUBLIC_URL must be the site's address alone, without a user or password"),
        ("FLICKR_API_URL", "ftp://fixture:8090/services/rest/", "FLICKR_API_URL must be an http:// or https:// address with a host, e.g. http://fixture:8090/services/rest/"),
        ("FLICKR_API_URL", "fixture:8090/services/rest/", "FLICKR_API_URL must be an http:// or https:// address with a host"),
        ("COMMONS_API_URL", "commons.wikimedia.org/w/api.php", "COMMONS_API_URL must be an http:// or https:// address with a host"),
        ("COMMONS_API_URL", "https://commons.wikimedia.org:70000/w/api.php", "COMMONS_API_URL must have a port of 1–65535"),
        ("TILE_URL", "tile.openstreetmap.org/{z}/{x}/{y}.png", "TILE_URL must be an http:// or https:// address with a host"),
        ("TILE_URL", "https://tile.openstreetmap.org/", "TILE_URL must have {z}, {x} and {y} in it"),
        ("TILE_URL", "None", "TILE_URL must be an http:// or https:// address with a host"),
        ("S3_ENDPOINT", "minio:9000", "S3_ENDPOINT must be an http:// or https:// address with a host"),
        ("S3_ENDPOINT", "http://minio:99999", "S3_ENDPOINT must have a port of 1–65535"),
    ])
    func urlSettingsRefuseWhatIsNoAddress(name: String, value: String, message: String) throws {
        let (status, output) = try Self.run([name: value])
        #expect(status == 2, "\(output)")
        #expect(output.contains(message), "\(output)")
        #expect(output.contains("not \(value)"), "the message names the value: \(output)")
    }

    /// What people write passes: the binary goes on to want a database.
    @Test(arguments: [
        ("PUBLIC_URL", "https://photos.example.org"), ("PUBLIC_URL", "https://photos.example.org/"),
        ("PUBLIC_URL", "HTTPS://Photos.Example.org:443/"), ("PUBLIC_URL", "http://localhost:8080"),
        ("PUBLIC_URL", "http://127.0.0.1:8080"), ("PUBLIC_URL", "http://[::1]:8080"),
        ("FLICKR_API_URL", "http://fixture:8090/services/rest/"), ("COMMONS_API_URL", "https://commons.wikimedia.org/w/api.php?"),
        ("TILE_URL", "https://{s}.tile.example.org/{z}/{x}/{y}.png"), ("TILE_URL", "http://127.0.0.1:9/{z}/{x}/{y}.png?key=k"),
        ("TILE_URL", "none"), ("S3_ENDPOINT", "http://minio:9000"),
    ])
    func goodAddressesPass(name: String, value: String) throws {
        let (status, output) = try Self.run([name: value])
        #expect(status == 1, "\(output)")
        #expect(output.contains("DATABASE_URL is not set"), "\(output)")
    }

    /// AWS_ENDPOINT_URL stands in for S3_ENDPOINT with an s3:// store, and is held to the same words.
    @Test func theAWSEndpointIsCheckedAsS3Endpoint() throws {
        let (status, output) = try Self.run(["PHOTO_STORE": "s3://photos", "AWS_ENDPOINT_URL": "http://",
                                             "S3_ACCESS_KEY_ID": "AK", "S3_SECRET_ACCESS_KEY": "SK"])
        #expect(status == 2, "\(output)")
        #expect(output.contains("S3_ENDPOINT (here AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) must be an http:// or https:// address with a host"), "\(output)")
    }

    // MARK: secrets from files

    /// DATABASE_URL from a file, its trailing newline dropped (with it, the user would be
    /// "postgres\n" and the connection refused): `migrate` reaches the database.
    @Test(arguments: ["\n", "\r\n", "", "\n\n"])
    func aSecretIsReadFromItsFileWithoutTheLineEnd(ending: String) throws {
        let database = try TestDatabase.migrated("secretfile")
        let folder = try Folder()
        let path = try folder.file("database_url", database + ending)
        let (status, output) = try Self.run(["DATABASE_URL_FILE": path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("the database is up to date"), "\(output)")
        // The flag form, for a command line that should not show the secret.
        let flag = try Self.run([:], arguments: ["--database-url-file", path, "migrate"])
        #expect(flag.status == 0 && flag.output.contains("the database is up to date"), "\(flag.output)")
    }

    /// Every secret setting takes NAME_FILE, and only those do.
    @Test func theSecretsAreTheOnesReadFromFiles() throws {
        let folder = try Folder()
        let path = try folder.file("value", "x\n")
        for name in ["DATABASE_URL", "FLICKR_API_KEY", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "SMTP_PASSWORD", "METRICS_TOKEN"] {
            let (status, output) = try Self.run([name + "_FILE": path])
            #expect(status == 1 || status == 0, "\(name)_FILE: \(output)")
            #expect(!output.contains("_FILE"), "\(name)_FILE: \(output)")
        }
        let (status, output) = try Self.run(["PUBLIC_URL_FILE": path])
        #expect(status == 2, "\(output)")
        #expect(output.contains("PUBLIC_URL_FILE is set, but only secrets are read from files (DATABASE_URL, FLICKR_API_KEY, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, SMTP_PASSWORD, METRICS_TOKEN)"), "\(output)")
        // An empty NAME_FILE is unset, as an empty NAME is (Compose passes .env's empty lines).
        let empty = try Self.run(["FLICKR_API_KEY_FILE": "", "FLICKR_API_KEY": ""])
        #expect(empty.status == 1 && empty.output.contains("DATABASE_URL is not set"), "\(empty.output)")
    }

    @Test func bothTheValueAndItsFileAreRefused() throws {
        let folder = try Folder()
        let path = try folder.file("key", "from-file\n")
        let (status, output) = try Self.run(["FLICKR_API_KEY": "from-env", "FLICKR_API_KEY_FILE": path])
        #expect(status == 2, "\(output)")
        #expect(output.contains("FLICKR_API_KEY and FLICKR_API_KEY_FILE are both set: set one"), "\(output)")
        #expect(!output.contains("from-file") && !output.contains("from-env"), "a secret is never shown: \(output)")
    }

    /// What a NAME_FILE may not name, each refused at start with the path and the reason; none
    /// hangs (a FIFO nobody writes to, /dev/zero) or is read without end.
    @Test func filesThatHoldNoSecretAreRefused() throws {
        let folder = try Folder()
        let fifo = folder.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let cases: [(String, String)] = [
            (folder.path + "/missing", "METRICS_TOKEN_FILE=\(folder.path)/missing cannot be read: No such file or directory"),
            (folder.path, "METRICS_TOKEN_FILE must name a file holding the value, e.g. /run/secrets/metrics_token, not \(folder.path) (a directory)"),
            ("/dev/zero", "METRICS_TOKEN_FILE must name a file holding the value, e.g. /run/secrets/metrics_token, not /dev/zero (a device)"),
            (fifo, "METRICS_TOKEN_FILE must name a file holding the value, e.g. /run/secrets/metrics_token, not \(fifo) (not a regular file)"),
            (try folder.file("empty", ""), "names an empty file"),
            (try folder.file("newlines", "\n\n"), "names an empty file"),
            (try folder.file("lines", "token\nsecond line\n"), "must hold the value as one line of text, not several lines"),
            (try folder.file("binary", [0xff, 0xfe, 0x00]), "must hold the value as one line of text (UTF-8)"),
            (try folder.file("nul", "tok\u{0}en"), "must hold the value as one line of text, not several lines"),
            (try folder.file("big", String(repeating: "k", count: 64 * 1024 + 1)), "METRICS_TOKEN_FILE must name a file of at most 64 KiB holding the value"),
        ]
        for (path, message) in cases {
            let started = Date()
            let (status, output) = try Self.run(["METRICS_TOKEN_FILE": path])
            #expect(status == 2, "\(path): \(output)")
            #expect(output.contains(message), "\(path): \(output)")
            #expect(Date().timeIntervalSince(started) < 10, "\(path) held the start")
        }
        // Exactly the limit is taken.
        let limit = try folder.file("limit", String(repeating: "k", count: 64 * 1024))
        let (status, output) = try Self.run(["METRICS_TOKEN_FILE": limit])
        #expect(status == 1 && output.contains("DATABASE_URL is not set"), "\(output.prefix(300))")
    }
}
