import Foundation
import HTTPServer
import Log
import Synchronization
import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The release number is written once in code (Version.number); what operators read it from
/// elsewhere must say the same.
@Suite struct VersionTests {
    static func file(_ path: String) throws -> String {
        try String(contentsOfFile: TestApp.repositoryRoot + "/" + path, encoding: .utf8)
    }

    /// CHANGELOG.md's newest versioned section is this release (an "Unreleased" section may come
    /// first, what the next release will say), and names every migration the code ships: the
    /// upgrade notes cannot forget one. Which release shipped each: Tests/Docs/released-migrations.
    @Test func theChangelogsNewestSectionIsThisVersion() throws {
        let changelog = try Self.file("CHANGELOG.md")
        let headings = changelog.split(separator: "\n").filter { $0.hasPrefix("## ") && $0 != "## Unreleased" }
        let newest = try #require(headings.first)
        #expect(newest.hasPrefix("## \(Version.number) "), "CHANGELOG.md's newest section is \(newest), the code is \(Version.number)")
        let migrations = try FileManager.default.contentsOfDirectory(atPath: TestApp.repositoryRoot + "/migrations")
            .filter { $0.hasSuffix(".sql") }
        #expect(!migrations.isEmpty)
        for migration in migrations {
            #expect(changelog.contains(migration), "CHANGELOG.md names no \(migration)")
        }
    }

    /// docker-compose.yml tags the image it builds with this version and labels it so.
    @Test func theComposeFileBuildsThisVersion() throws {
        let compose = try Self.file("docker-compose.yml")
        #expect(compose.contains("virtual-tourist:\(Version.number)}"), "docker-compose.yml's default image tag is not \(Version.number)")
        #expect(compose.contains("APP_VERSION: \"\(Version.number)\""), "docker-compose.yml passes another APP_VERSION")
    }

    @Test func pagesAndHealthSayTheVersion() throws {
        let app = try TestApp()
        let browser = app.browser()
        #expect(try browser.get("/healthz").body == "ok \(Version.number)")
        #expect(try browser.get("/sign-in").body.contains("Virtual Tourist \(Version.number) —"))
    }

    /// Requests under another address than PUBLIC_URL: one warning naming both per address that
    /// arrived; X-Forwarded-* read only from TRUSTED_PROXIES.
    @Test func aRequestForAnotherAddressThanPublicURLIsLoggedOnce() throws {
        let publicURL = "https://photos-\(UUID().uuidString.prefix(8).lowercased()).example.org"
        let lines = Mutex<[String]>([])
        let stop = Logger.observe { line in if line.contains(publicURL) { lines.withLock { $0.append(line) } } }
        defer { stop() }
        let app = try TestApp(configure: { $0.publicURL = publicURL }, server: { $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")! })
        let browser = app.browser()
        // As it is named, through a proxy that says so: nothing; probes are never compared.
        let host = String(publicURL.dropFirst("https://".count))
        _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", host.uppercased() + ":443")])
        _ = try browser.get("/readyz")
        #expect(lines.withLock { $0 }.isEmpty)
        // Plain http on the app's own port (no proxy in front): one line, and only one.
        _ = try browser.get("/sign-in")
        _ = try browser.get("/sign-in")
        var logged = lines.withLock { $0 }
        #expect(logged.count == 1, "\(logged)")
        #expect(logged.first?.contains("a request arrived for http://127.0.0.1:") == true && logged.first?.contains("warning") == true, "\(logged)")
        // Another host under PUBLIC_URL's scheme (a stranger's odd Host through the proxy) has a line
        // of its own; another request under the wrong scheme, whatever its host, adds none.
        _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "elsewhere.example.org")])
        _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "http"), ("X-Forwarded-Host", "other.example.org")])
        logged = lines.withLock { $0 }
        #expect(logged.count == 2 && logged.last?.contains("https://elsewhere.example.org") == true, "\(logged)")
    }

    /// From a peer that is not a trusted proxy, X-Forwarded-* are the client's own words: they
    /// neither hide a wrong PUBLIC_URL nor spend its warning.
    @Test func forwardedHeadersFromAnUntrustedPeerAreNotRead() throws {
        let publicURL = "https://photos-\(UUID().uuidString.prefix(8).lowercased()).example.org"
        let lines = Mutex<[String]>([])
        let stop = Logger.observe { line in if line.contains(publicURL) { lines.withLock { $0.append(line) } } }
        defer { stop() }
        let app = try TestApp { $0.publicURL = publicURL }
        let browser = app.browser()
        let host = String(publicURL.dropFirst("https://".count))
        for forged in ["a.example.org", "b.example.org", "c.example.org", "d.example.org", "e.example.org", "f.example.org",
                       "g.example.org", "h.example.org", "i.example.org", host] {
            _ = try browser.get("/sign-in", headers: [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", forged)])
        }
        #expect(lines.withLock { $0 }.isEmpty)
        // The real misconfiguration (people reach it over plain http) is still said.
        _ = try browser.get("/sign-in")
        let logged = lines.withLock { $0 }
        #expect(logged.count == 1 && logged.first?.contains("a request arrived for http://127.0.0.1:") == true, "\(logged)")
    }

    /// Without PUBLIC_URL nothing is compared.
    @Test func withoutPublicURLNothingIsCompared() {
        #expect(PublicURLCheck(publicURL: nil) == nil)
        #expect(PublicURLCheck(publicURL: "") == nil)
        let check = PublicURLCheck(publicURL: "HTTPS://Photos.Example.org:443/")
        #expect(check?.scheme == "https" && check?.host == "photos.example.org")
        #expect(PublicURLCheck(publicURL: "http://localhost:8080")?.host == "localhost:8080")
    }
}
