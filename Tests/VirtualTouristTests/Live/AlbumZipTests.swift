import Foundation
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
@testable import AlbumWing
@testable import Domain
#endif

/// GET /pins/:id/album.zip over loopback with a real PostgreSQL and the file store. The archive is
/// read by tools that are not ours: Debian's `unzip -t` and Python's zipfile.
@Suite(.serialized, .tags(.slow)) struct AlbumZipTests {
    /// Titles a careless writer would turn into paths, controls, formulas or clashes.
    static let hostileTitles = [
        "../../etc/passwd", "..", "a/b\\c:d", "C:\\Windows\\evil", "ctrl\u{1}\u{7}\n\r\t\u{7F}end", "\u{202E}gpj.exe",
        "=HYPERLINK(\"http://x\")", "-2+3", "@cmd", "Café 😀 東京", String(repeating: "long ", count: 80), "", "same", "same",
        "\"quoted\", with comma",
    ]

    static func userID(_ app: TestApp, _ email: String) throws -> Int64 {
        Int64(try app.count("SELECT id FROM users WHERE email = $1", [email]))
    }

    /// A pin with `titles.count` ready photos whose blobs are `blobs` (cycled), inserted as the
    /// worker leaves them.
    static func album(_ app: TestApp, user: Int64, titles: [String], blobs: [[UInt8]]) throws -> Int64 {
        let pin: Int64 = try app.pool.query(
            "INSERT INTO pins (user_id, lat, lon, place_name, status) VALUES ($1, 35, 135, 'Kyoto / \"Gion\"', 'ready') RETURNING id",
            [user])[0].decode("id")
        let hashes = try blobs.map { try app.app.albums.photos.put($0) }
        let license: Int64 = try app.pool.query("""
            INSERT INTO photo_licenses (name, url) VALUES ('CC BY 2.0', 'https://creativecommons.org/licenses/by/2.0/')
            ON CONFLICT (name, url) DO UPDATE SET name = EXCLUDED.name RETURNING id
            """)[0].decode("id")
        for (index, title) in titles.enumerated() {
            let blob = index % blobs.count
            try app.pool.query("""
                INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status, hash, content_type,
                                    byte_size, title, owner_name, license_id, page_url)
                SELECT id, user_id, generation, $2, 'flickr', $2::text, 'https://example.org/' || $2, 'ready', decode($3, 'hex'),
                       'image/jpeg', $4, $5, $6, $7, $8
                FROM pins WHERE id = $1
                """, [pin, index, hashes[blob], blobs[blob].count, title, "Owner \(index) <b>", license,
                      "https://www.flickr.com/photos/x/\(index)"])
        }
        return pin
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func scratchFile(_ name: String) -> String {
        TestApp.scratchDirectory("zip") + "-" + name
    }

    /// Python's zipfile: every CRC checked (testzip), the names as a list, the flags, and the
    /// credits rows. Prints one JSON object.
    static let zipfileCheck = """
        import csv, io, json, sys, zipfile
        z = zipfile.ZipFile(sys.argv[1])
        bad = z.testzip()
        infos = z.infolist()
        names = [i.filename for i in infos]
        credits = list(csv.reader(io.StringIO(z.read("credits.csv").decode("utf-8"), newline="")))
        print(json.dumps({"bad": bad, "names": names, "utf8": all(i.flag_bits & 0x800 for i in infos),
                          "stored": all(i.compress_type == zipfile.ZIP_STORED for i in infos),
                          "sizes": [i.file_size for i in infos], "credits": credits}))
        """

    @Test func anotherPersonsAlbumIsNotFound() throws {
        let app = try TestApp()
        let ann = try app.signedUp(email: "ann-zip@example.org")
        let bob = try app.signedUp(email: "bob-zip@example.org")
        let pin = try Self.album(app, user: try Self.userID(app, "bob-zip@example.org"), titles: ["Bob's secret"], blobs: [Array(PageTests.jpeg)])
        let refused = try ann.get("/pins/\(pin)/album.zip")
        #expect(refused.status == 404)
        #expect(!refused.body.contains("Bob's secret") && !refused.bodyBytes.starts(with: [0x50, 0x4B]))
        let stranger = try app.browser().get("/pins/\(pin)/album.zip")
        #expect([303, 401, 404].contains(stranger.status) && !stranger.bodyBytes.starts(with: [0x50, 0x4B]), "\(stranger)")
        let own = try bob.get("/pins/\(pin)/album.zip")
        #expect(own.status == 200)
        #expect(own.bodyBytes.starts(with: [0x50, 0x4B, 0x03, 0x04]))
    }

    @Test func theZipPassesUnzipAndPythonsZipfileWithSafeNamesAndCredits() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "zip-check@example.org")
        let user = try Self.userID(app, "zip-check@example.org")
        let blobs = [Array(PageTests.jpeg), Array(Array(PageTests.jpeg).reversed())]
        let pin = try Self.album(app, user: user, titles: Self.hostileTitles, blobs: blobs)
        // A photo still pending is left out.
        try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, title)
            SELECT id, user_id, generation, 99, 'flickr', 'pending', 'https://example.org/p', 'Not yet' FROM pins WHERE id = $1
            """, [pin])
        let page = try browser.get("/pins/\(pin)/album.zip")
        #expect(page.status == 200)
        #expect(page.header("Content-Type") == "application/zip")
        let disposition = try #require(page.header("Content-Disposition"))
        #expect(disposition.hasPrefix("attachment; filename=\"album-\(pin).zip\"; filename*=UTF-8''"), "\(disposition)")
        #expect(!disposition.dropFirst(12).contains("/") && !disposition.contains("\"Gion"), "\(disposition)")
        let path = Self.scratchFile("album.zip")
        try Data(page.bodyBytes).write(to: URL(fileURLWithPath: path))

        let unzip = try Self.run(["unzip", "-t", path])
        print("unzip -t:\n\(unzip.output)")
        #expect(unzip.status == 0, "\(unzip.output)")
        #expect(unzip.output.contains("No errors detected"))

        let python = try Self.run(["python3", "-c", Self.zipfileCheck, path])
        print("zipfile: \(python.output)")
        #expect(python.status == 0, "\(python.output)")
        let result = try #require(JSONSerialization.jsonObject(with: Data(python.output.utf8)) as? [String: Any])
        #expect(result["bad"] is NSNull, "testzip found a bad CRC: \(result["bad"] ?? "")")
        #expect(result["utf8"] as? Bool == true)
        #expect(result["stored"] as? Bool == true)
        let names = try #require(result["names"] as? [String])
        #expect(names.count == Self.hostileTitles.count + 1)
        #expect(names.last == "credits.csv")
        #expect(Set(names.map { $0.lowercased() }).count == names.count, "names are not unique: \(names)")
        for name in names {
            #expect(!name.contains("/") && !name.contains("\\") && !name.contains("..") && !name.contains(":"), "\(name)")
            #expect(!name.unicodeScalars.contains { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }, "\(name.debugDescription)")
            #expect(name.count <= 72 && !name.hasPrefix(".") && !name.hasPrefix("-"), "\(name)")
        }
        #expect(names[0] == "01-etc-passwd.jpg", "\(names[0])")
        #expect(names[9] == "10-Café 😀 東京.jpg", "\(names[9])")
        #expect(names[11] == "12-photo.jpg", "\(names[11])")
        let sizes = try #require(result["sizes"] as? [Int])
        for (index, size) in sizes.dropLast().enumerated() { #expect(size == blobs[index % blobs.count].count) }

        // The credits: a header, then one row per photo in order, naming its file.
        let credits = try #require(result["credits"] as? [[String]])
        #expect(credits.first == ["file", "title", "author", "license", "license_url", "source_page", "taken"])
        #expect(credits.count == Self.hostileTitles.count + 1)
        for (index, row) in credits.dropFirst().enumerated() {
            let title = Self.hostileTitles[index]
            let spreadsheetSafe = "=+-@\t\r".contains(where: { title.hasPrefix(String($0)) }) ? "'" + title : title
            #expect(row == [names[index], spreadsheetSafe, "Owner \(index) <b>", "CC BY 2.0", "https://creativecommons.org/licenses/by/2.0/",
                            "https://www.flickr.com/photos/x/\(index)", "date unknown"], "\(row)")
        }
    }

    @Test func theAlbumPageLinksTheDownload() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "zip-link@example.org")
        let pin = try Self.album(app, user: try Self.userID(app, "zip-link@example.org"), titles: ["One"], blobs: [Array(PageTests.jpeg)])
        let page = try browser.get("/pins/\(pin)")
        #expect(page.body.contains("<a class=\"button\" href=\"/pins/\(pin)/album.zip\" download>Download album (zip)</a>"))
    }

    /// 65,536 entries do not fit the end record's 16-bit count: the ZIP64 end record and its
    /// locator are written, and the outside readers take them. (The other ZIP64 case, offsets past
    /// 4 GiB, needs an archive that size and is not run here.)
    @Test func moreThan65535EntriesGetZip64Records() throws {
        let photos = (0..<65_535).map {
            ArchivedPhoto(id: Int64($0), hash: nil, contentType: "image/png", title: "p", ownerName: "o", license: "", licenseURL: nil, pageURL: nil)
        }
        let path = Self.scratchFile("zip64.zip")
        FileManager.default.createFile(atPath: path, contents: nil)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        #expect(try AlbumArchive.write(photos, bytes: { [UInt8]("\($0.id)".utf8) }, sink: { file.write(Data($0)); return true }))
        try file.close()
        let python = try Self.run(["python3", "-c", """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1]); i = z.infolist()
            print(len(i), z.testzip(), i[-2].filename, z.read(i[-2]).decode())
            """, path])
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "65536 None 65535-p.png 65534", "\(python.output)")
        let unzip = try Self.run(["unzip", "-tq", path])
        print("zip64 by count: zipfile \(python.output)unzip -tq: \(unzip.output)")
        #expect(unzip.status == 0, "\(unzip.output)")
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Offsets past 4 GiB: 70 entries of 65 MB (4.55 GB on disk, about a minute), so the last
    /// entries' local headers are named through ZIP64 extra fields in the central directory.
    /// Run with ZIP64_LARGE=1; too big for every run.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ZIP64_LARGE"] == "1"))
    func offsetsPast4GiBGetZip64ExtraFields() throws {
        let block = [UInt8](repeating: 0x5A, count: 65_000_000)
        let photos = (0..<70).map {
            ArchivedPhoto(id: Int64($0), hash: nil, contentType: "image/jpeg", title: "big", ownerName: "o", license: "", licenseURL: nil, pageURL: nil)
        }
        let path = Self.scratchFile("zip64-large.zip")
        FileManager.default.createFile(atPath: path, contents: nil)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        #expect(try AlbumArchive.write(photos, bytes: { _ in block }, sink: { file.write(Data($0)); return true }))
        try file.close()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let python = try Self.run(["python3", "-c", """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1]); i = z.infolist()
            print(len(i), z.testzip(), i[-2].header_offset > 0xFFFFFFFF, i[-2].filename)
            """, path])
        print("zip64 by offset: zipfile \(python.output)")
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "71 None True 70-big.jpg", "\(python.output)")
        let unzip = try Self.run(["unzip", "-tq", path])
        print("unzip -tq: \(unzip.output)")
        #expect(unzip.status == 0, "\(unzip.output)")
    }

    /// A download holds a handler slot while its client reads: a third of one person's at once
    /// is 429, and the slot comes back when a client hangs up.
    /// A person with an album of 150 photos of 200 KB, a 30 MB zip: more than the kernel's loopback
    /// buffers take, so a client that does not read (or reads slowly) keeps its writer waiting.
    struct LargeAlbum {
        let browser: Browser
        let pin: Int64
        let cookie: String
        let port: Int

        init(_ app: TestApp, email: String) throws {
            browser = try app.signedUp(email: email)
            var generator = SystemRandomNumberGenerator()
            let blob = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
            pin = try AlbumZipTests.album(app, user: try AlbumZipTests.userID(app, email), titles: (1...150).map { "P\($0)" }, blobs: [blob])
            cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
            port = app.port
        }

        /// A download of the zip started on a raw socket, which the test reads as it likes.
        func openDownload(receiveTimeout: Double) throws -> Int32 {
            let fd = try connectLoopback(port: port, receiveTimeout: receiveTimeout)
            let head = Array("GET /pins/\(pin)/album.zip HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n".utf8)
            _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            return fd
        }
    }

    @Test func aPersonsConcurrentDownloadsAreCapped() throws {
        let app = try TestApp()
        let large = try LargeAlbum(app, email: "zip-slots@example.org")
        let browser = large.browser, pin = large.pin
        func open() throws -> Int32 { try large.openDownload(receiveTimeout: 10) }
        func status(_ fd: Int32) -> String {
            var buffer = [UInt8](repeating: 0, count: 12)
            let n = recv(fd, &buffer, 12, Int32(MSG_WAITALL))
            return String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
        }
        let started = Date()
        func mark(_ what: String) { print("slots: \(what) at \(String(format: "%.2f", Date().timeIntervalSince(started))) s") }
        let first = try open(), second = try open()
        #expect(status(first) == "HTTP/1.1 200")
        #expect(status(second) == "HTTP/1.1 200")
        #expect(eventually { app.app.downloadSlots.inUse == 2 })
        let third = try browser.get("/pins/\(pin)/album.zip")
        #expect(third.status == 429, "\(third)")
        #expect(third.header("Retry-After") == "30")
        mark("third refused")
        close(first)
        #expect(eventually { app.app.downloadSlots.inUse == 1 }, "the slot did not come back after the client left")
        mark("first's slot back")
        // Read with recv and dropped: Browser keeps the body, and its parsing of 30 MB in a debug
        // build is what would be timed.
        let fourth = try open()
        defer { close(fourth) }
        #expect(status(fourth) == "HTTP/1.1 200")
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received = 12
        while true {
            let n = recv(fourth, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            received += n
        }
        mark("fourth read, \(received) bytes")
        #expect(received > 30_000_000)
        close(second)
        #expect(eventually { app.app.downloadSlots.inUse == 0 })
    }

    /// A client that reads 1 KiB a second keeps the write from ever stalling for the write
    /// timeout, but falls below the send-rate floor: cut within a window (2 s here, 30 by default)
    /// and its download slot freed, where before it held the slot for as long as it liked.
    @Test func aZipReaderAtOneKiBASecondIsCutAndItsSlotFreed() throws {
        let app = try TestApp(server: { $0.sendRateWindow = 2 })
        let fd = try LargeAlbum(app, email: "zip-trickle@example.org").openDownload(receiveTimeout: 5)
        defer { close(fd) }
        #expect(eventually { app.app.downloadSlots.inUse == 1 })
        let started = Date()
        var buffer = [UInt8](repeating: 0, count: 1024)
        var cut: Double?
        // Drain what the kernel's buffers already hold at 1 KiB a second would take hours: read
        // 1 KiB, wait a second, and watch the slot.
        while Date().timeIntervalSince(started) < 60 {
            _ = recv(fd, &buffer, buffer.count, 0)
            if app.app.downloadSlots.inUse == 0 { cut = Date().timeIntervalSince(started); break }
            usleep(1_000_000)
        }
        let seconds = try #require(cut, "the trickling reader still held its slot after 60 s")
        #expect(seconds < 30, "cut after \(seconds) s (window 2 s)")
        print("zip trickle: cut and slot freed after \(String(format: "%.1f", seconds)) s at 1 KiB/s (window 2 s, floor 16 KiB/s)")
    }

    /// VmRSS of this process (the server runs in it), in bytes.
    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else { return 0 }
        return kb * 1024
    }

    /// 500 photos of 200 KB: a 100 MB archive. The client reads 2 MB, then stops reading for two
    /// seconds while the server's memory is measured, then reads the rest straight to a file.
    /// A server that made the archive before sending (or queued it without waiting for the
    /// socket) holds it all during the pause; one that waits for the socket holds one photo and
    /// the socket's backlog.
    @Test func a500PhotoAlbumIsStreamedWithoutHoldingTheArchive() throws {
        let app = try TestApp()
        let browser = try app.signedUp(email: "zip-memory@example.org")
        let user = try Self.userID(app, "zip-memory@example.org")
        var generator = SystemRandomNumberGenerator()
        let blobs = (0..<5).map { _ in (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        let count = 500
        let pin = try Self.album(app, user: user, titles: (1...count).map { "Photo \($0)" }, blobs: blobs)
        let albumBytes = (0..<count).reduce(0) { $0 + blobs[$1 % blobs.count].count }

        let before = Self.residentBytes()
        let fd = try connectLoopback(port: app.port, receiveTimeout: 30)
        defer { close(fd) }
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let head = Array("GET /pins/\(pin)/album.zip HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookie)\r\nConnection: close\r\n\r\n".utf8)
        #expect(head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == head.count)
        let path = Self.scratchFile("big.zip")
        FileManager.default.createFile(atPath: path, contents: nil)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received = 0
        var headEnd: Int?
        var peak = before
        var during = 0
        let started = Date()
        var paused = false
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            var chunk = buffer[0..<n]
            if headEnd == nil, let end = Array(chunk).firstRange(of: [13, 10, 13, 10]) {
                let headText = String(decoding: chunk[..<end.lowerBound], as: UTF8.self)
                #expect(headText.hasPrefix("HTTP/1.1 200"), "\(headText)")
                headEnd = end.upperBound
                chunk = chunk[(chunk.startIndex + end.upperBound)...]
            }
            file.write(Data(chunk))
            received += chunk.count
            if !paused && received > 2_000_000 {
                paused = true
                // Stop reading: the server either waits or piles the archive up.
                for _ in 0..<20 {
                    Thread.sleep(forTimeInterval: 0.1)
                    during = max(during, Self.residentBytes())
                }
            }
            if received % (8 << 20) < n { peak = max(peak, Self.residentBytes()) }
        }
        try file.close()
        let seconds = Date().timeIntervalSince(started)
        let after = Self.residentBytes()
        peak = max(peak, during)
        print("album.zip: \(count) photos, \(albumBytes) bytes of photos, \(received) bytes received in \(String(format: "%.2f", seconds)) s; "
              + "VmRSS before \(before / 1_000_000) MB, during the pause \(during / 1_000_000) MB, peak \(peak / 1_000_000) MB, after \(after / 1_000_000) MB")
        #expect(received > albumBytes)
        // The archive is 100 MB; the server may hold a photo, the socket's backlog and the list.
        // Buffering the archive grew this process by 104 MB; the bounds leave room for the other
        // suites running in the same process meanwhile.
        #expect(during - before < 60_000_000, "grew \(during - before) bytes while the client paused")
        #expect(peak - before < 70_000_000, "grew \(peak - before) bytes")

        let python = try Self.run(["python3", "-c", """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1]); print(len(z.infolist()), z.testzip())
            """, path])
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count + 1) None", "\(python.output)")
        let unzip = try Self.run(["unzip", "-tq", path])
        print("unzip -tq: \(unzip.output)")
        #expect(unzip.status == 0, "\(unzip.output)")
        try? FileManager.default.removeItem(atPath: path)
    }
}
