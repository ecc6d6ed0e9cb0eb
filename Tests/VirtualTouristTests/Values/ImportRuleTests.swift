import Foundation
import Testing
@testable import AlbumWing
@testable import Domain

/// The layering rule of docs/architecture.md ("What each folder may import"), checked: every
/// Swift file under Sources/ is read, its `import` lines collected, and each import must be one
/// its folder is allowed. A new folder fails until it is given a rule here and a paragraph there.
@Suite struct ImportRuleTests {
    /// What any folder may use from the platform, unless its rule says less.
    static let platform: Set<String> = ["Foundation", "Dispatch", "Synchronization", "Glibc", "Darwin", "Waiting"]

    /// Folder (relative to Sources/) → the modules its files may import. Keep in step with the
    /// table in docs/architecture.md.
    static let allowed: [String: Set<String>] = [
        "Log": ["Glibc", "Darwin", "Synchronization"],
        "WebText": [],
        // The one waiting primitive: pthreads only, so HTTPServer can use it too.
        "Waiting": ["Glibc", "Darwin"],
        "LRU": [],
        "Zlib": ["CZlib"],
        // Glibc for its decoder process (HEIFIsolation): posix_spawn, pipes, rlimits; still no Foundation.
        "Imaging": ["CTurboJPEG", "CExif", "CHeif", "CPNG", "CWebP", "Glibc"],
        "HTTPClient": platform.union(["CCurl"]),
        // Sockets and HTTP only, and no Foundation: the server stays small and reusable.
        "HTTPServer": ["Glibc", "Darwin", "Dispatch", "Synchronization", "Waiting", "Log", "Zlib", "CZlib", "CEpoll", "WebText", "LRU"],
        "Postgres": platform.union(["CLibPQ", "Log"]),
        // CTurboJPEG: the never-seen photos of --distinct are cut from JPEGs it encodes.
        "PhotoFixture": platform.union(["HTTPServer", "CTurboJPEG"]),
        "photo-fixture": platform.union(["PhotoFixture"]),
        "virtual-tourist": platform.union(["VirtualTourist", "AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Postgres", "Log", "Imaging"]),
        // The app is three targets, each above the one before (docs/architecture.md, "Layers"); the
        // compiler refuses an import upward, these rules say what else each folder may use.
        // Domain: people, maps, pins and mail. SQL and outbound mail, never HTTP.
        "Domain/Accounts": platform.union(["Postgres", "CCrypt"]),
        "Domain/Pins": platform.union(["Postgres"]),
        "Domain/Maps": platform.union(["Postgres"]),
        "Domain/Import": platform.union(["Postgres", "Zlib"]),
        // The mail outbox and its sender: SQL and libcurl's SMTP, never the server's types.
        "Domain/Mail": platform.union(["Postgres", "HTTPClient", "Log"]),
        "Domain/Time": platform,
        // AlbumWing: albums, providers, the photo store, and the jobs that keep them.
        "AlbumWing/Caching": platform.union(["LRU", "Domain"]),
        "AlbumWing/Albums": platform.union(["Domain", "Postgres", "HTTPClient", "Zlib", "Log"]),
        "AlbumWing/Photos": platform.union(["Domain", "Postgres", "HTTPClient", "Log", "WebText"]),
        "AlbumWing/Sharing": platform.union(["Domain", "Postgres"]),
        // HTTPServer for its HTTP-date parser (S3's Last-Modified) only.
        "AlbumWing/OwnPhotos": platform.union(["Domain", "Postgres", "Imaging"]),
        "AlbumWing/PhotoStore": platform.union(["Domain", "Postgres", "HTTPClient", "HTTPServer", "Log", "CLibCrypto", "CTurboJPEG"]),
        "AlbumWing/Jobs": platform.union(["Domain", "Postgres", "Log"]),
        "AlbumWing/Operations": platform.union(["Domain", "Postgres"]),
        // VirtualTourist, the web: the only folders that speak HTTP to the browser.
        "VirtualTourist/App": platform.union(["AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Postgres", "Log", "Imaging"]),
        "VirtualTourist/Web": platform.union(["AlbumWing", "Domain", "HTTPServer", "Postgres", "Log", "WebText", "LRU", "Imaging"]),
        "VirtualTourist/Middleware": platform.union(["AlbumWing", "Domain", "HTTPServer", "Postgres", "Log"]),
        // Pages and JSON are written from values: no database, no HTTP, no threads.
        "VirtualTourist/Views": ["Foundation", "WebText", "AlbumWing", "Domain"],
        "VirtualTourist/JSON": ["Foundation", "WebText", "AlbumWing", "Domain"],
        "VirtualTourist/Places": platform.union(["Zlib"]),
        // Tiles answer /tiles themselves (ETags, 304s), so they build responses.
        "VirtualTourist/Tiles": platform.union(["AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Log", "Zlib", "WebText"]),
    ]

    /// The module an import line names: `import X`, `@testable import X`, `import struct X.Y`,
    /// `@preconcurrency import X`; nil for any other line.
    static func importedModule(_ line: Substring) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
        while let first = words.first, first.hasPrefix("@") { words = words.dropFirst() }
        guard words.first == "import" else { return nil }
        words = words.dropFirst()
        let kinds: Set<Substring> = ["struct", "class", "enum", "protocol", "typealias", "func", "let", "var"]
        if let kind = words.first, kinds.contains(kind) { words = words.dropFirst() }
        return words.first.map { String($0.split(separator: ".")[0]) }
    }

    /// Every import under `root` that its folder's rule does not allow, as "folder/file: import X".
    static func violations(root: String) throws -> [String] {
        var found: [String] = []
        let files = FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        for file in files.sorted() {
            let folder = (file as NSString).deletingLastPathComponent
            let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
            let modules = text.split(separator: "\n").compactMap { importedModule($0.drop(while: { $0 == " " })) }
            guard let rule = allowed[folder] else {
                found.append("\(file): the folder \(folder) has no import rule (add it to ImportRuleTests and docs/architecture.md)")
                continue
            }
            found += modules.filter { !rule.contains($0) }.map { "\(file): import \($0) is not allowed in \(folder)" }
        }
        return found
    }

    @Test func everyFolderImportsOnlyWhatItsRuleAllows() throws {
        let sources = TestApp.repositoryRoot + "/Sources"
        let files = FileManager.default.enumerator(atPath: sources)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        #expect(files.count > 50, "the sources were not found at \(sources)")
        let violations = try Self.violations(root: sources)
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// The check itself can fail: a Views file that imports Postgres, and a folder with no rule,
    /// are both reported.
    @Test func aForbiddenImportIsReported() throws {
        let root = NSTemporaryDirectory() + "vt-imports-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/VirtualTourist/Views", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/VirtualTourist/Elsewhere", withIntermediateDirectories: true)
        try "import Foundation\n@preconcurrency import Postgres\n".write(toFile: root + "/VirtualTourist/Views/Page.swift", atomically: true, encoding: .utf8)
        try "import Foundation\n".write(toFile: root + "/VirtualTourist/Elsewhere/Thing.swift", atomically: true, encoding: .utf8)
        let violations = try Self.violations(root: root)
        #expect(violations.count == 2)
        #expect(violations.contains("VirtualTourist/Views/Page.swift: import Postgres is not allowed in VirtualTourist/Views"))
        #expect(violations.contains { $0.hasPrefix("VirtualTourist/Elsewhere/Thing.swift: the folder VirtualTourist/Elsewhere has no import rule") })
    }

    @Test func readsEveryFormOfImportLine() {
        #expect(Self.importedModule("import Foundation") == "Foundation")
        #expect(Self.importedModule("@testable import VirtualTourist") == "VirtualTourist")
        #expect(Self.importedModule("@_exported import Zlib") == "Zlib")
        #expect(Self.importedModule("import struct Foundation.Date") == "Foundation")
        #expect(Self.importedModule("let important = 1") == nil)
        #expect(Self.importedModule("// import Postgres") == nil)
    }
}
