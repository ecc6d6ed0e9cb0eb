#if canImport(Glibc)
import Glibc
#endif

/// HEIF is decoded in a child process (`virtual-tourist decode-heif MAXPIXELS`), never in the
/// server's. libheif 1.15 and libde265 trust a file's boxes and streams in more ways than a
/// reader of ours can mirror (a stream coding more than its item claims, derived images decoded
/// wherever they are referenced, boxes read first-wins or last-wins), and a decoder's crash
/// would take every person's requests with it. The child reads the file from its stdin, limits
/// its own memory (RLIMIT_DATA), CPU time (RLIMIT_CPU) and core dumps, decodes, and writes the
/// pixels to its stdout; whatever kills it (a bomb past its memory, a decoder's crash, an endless
/// loop) is a refusal of that file alone (docs/architecture.md, "Own photos").
public enum HEIFIsolation {
    public static let command = "decode-heif"
    /// Seconds of CPU a decode may take (an iPhone's 12 MP HEIC takes about 0.5 s).
    static let cpuSeconds: rlim_t = 60
    static let maxInput = 64 << 20

    /// The binary that decodes: the server itself, found beside the running binary (under
    /// `swift test`, the one the build put beside the tests).
    public static let executable: String? = {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let candidate = String(path[..<slash]) + "/virtual-tourist"
        return access(candidate, X_OK) == 0 ? candidate : nil
    }()

    /// Memory the child may allocate: the pixels several times over (the decoder's planes, its
    /// RGB image, our copy) and the file.
    static func dataLimit(maxPixels: Int) -> rlim_t { rlim_t(maxPixels) * 12 + (512 << 20) }

    // MARK: The server's side

    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, maxPixels: Int) throws(ImageRefusal) -> DecodedPhoto {
        guard let executable else { throw .unreadable(.heif, "no decoder process (the virtual-tourist binary is not beside this one)") }
        guard bytes.count <= maxInput else { throw .unreadable(.heif, "larger than the decoder takes") }
        // A child that stops reading early must not kill us with SIGPIPE (the server ignores it
        // already; a test process may not).
        signal(SIGPIPE, SIG_IGN)
        var input: [Int32] = [0, 0], output: [Int32] = [0, 0]
        // Close-on-exec at once (Glibc's module has no pipe2): another thread's child must not
        // hold these ends open, or this child would never see its input end.
        guard pipe(&input) == 0 else { throw .unreadable(.heif, "no pipe") }
        guard pipe(&output) == 0 else {
            close(input[0]); close(input[1])
            throw .unreadable(.heif, "no pipe")
        }
        for end in input + output { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on 0 and 1; every other descriptor of ours stays shut to it.
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup(command), strdup(String(maxPixels)), nil]
        defer { for argument in argv { free(argument) } }
        let environment: [UnsafeMutablePointer<CChar>?] = [nil]
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environment)
        close(input[0])
        close(output[1])
        guard spawned == 0 else {
            close(input[1]); close(output[0])
            throw .unreadable(.heif, "the decoder process did not start (errno \(spawned))")
        }
        // The child reads all of its input before it writes: write everything, then read.
        do {
            var at = 0
            while at < bytes.count {
                let written = write(input[1], bytes.baseAddress! + at, bytes.count - at)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }  // EPIPE: it stopped reading (and will say why, or die)
                at += written
            }
        }
        close(input[1])
        var answer: [UInt8] = []
        let most = maxPixels * 3 + maxInput
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var tooLong = false
        while true {
            let count = chunk.withUnsafeMutableBytes { read(output[0], $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            answer.append(contentsOf: chunk[..<count])
            if answer.count > most { tooLong = true; kill(pid, SIGKILL); break }
        }
        close(output[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7F == 0, code = (status >> 8) & 0xFF, signal = status & 0x7F
        guard !tooLong else { throw .unreadable(.heif, "the decoder's answer was too long") }
        guard exited, code == 0 else {
            throw .unreadable(.heif, exited ? "the decoder exited with \(code)" : "the decoder was stopped by signal \(signal)")
        }
        return try Answer.read(&answer, maxPixels: maxPixels)
    }

    // MARK: The child's side

    /// `virtual-tourist decode-heif MAXPIXELS`: the file on stdin, the answer on stdout.
    public static func childMain(_ arguments: [String]) -> Never {
        guard arguments.count == 2, let maxPixels = Int(arguments[1]), maxPixels > 0, maxPixels <= 1_000_000_000 else { exit(2) }
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)  // a crash leaves no core file of a stranger's photo
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maxInput else { exit(3) }
        }
        limit = rlimit(rlim_cur: dataLimit(maxPixels: maxPixels), rlim_max: dataLimit(maxPixels: maxPixels))
        setrlimit(__rlimit_resource_t(RLIMIT_DATA.rawValue), &limit)
        limit = rlimit(rlim_cur: cpuSeconds, rlim_max: cpuSeconds + 1)
        setrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &limit)
        var out: [UInt8]
        do throws(ImageRefusal) {
            out = Answer.write(try PhotoDecoding.decodeHEIFHere(bytes, maxPixels: maxPixels))
        } catch {
            out = Answer.write(error)
        }
        var at = 0
        while at < out.count {
            let written = out.withUnsafeBytes { write(1, $0.baseAddress! + at, $0.count - at) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { exit(4) }
            at += written
        }
        exit(0)
    }

    /// The child's answer: "VTH1", the size, the tags, the profile, the pixels; or "VTHR", the
    /// refusal. Numbers are little-endian; strings and blocks carry their length first.
    enum Answer {
        static func write(_ photo: DecodedPhoto) -> [UInt8] {
            var out = Array("VTH1".utf8)
            out.reserveCapacity(photo.image.pixels.count + 4096)
            number(photo.image.width, &out)
            number(photo.image.height, &out)
            let tags = photo.tags
            block(tags.latitude.map { Array(String($0).utf8) } ?? [], &out)
            block(tags.longitude.map { Array(String($0).utf8) } ?? [], &out)
            block(Array((tags.takenLocal ?? "").utf8), &out)
            block(tags.offsetMinutes.map { Array(String($0).utf8) } ?? [], &out)
            block(Array((tags.camera ?? "").utf8), &out)
            block(photo.profile ?? [], &out)
            out += photo.image.pixels
            return out
        }

        static func write(_ refusal: ImageRefusal) -> [UInt8] {
            var out = Array("VTHR".utf8)
            switch refusal {
            case .tooManyPixels(let width, let height, _): out.append(1); number(width, &out); number(height, &out)
            case .truncated: out.append(2)
            case .unreadable(_, let detail): out.append(3); block(Array(detail.utf8.prefix(500)), &out)
            case .notAnImage, .cmyk: out.append(3); block(Array("not HEIF".utf8), &out)
            }
            return out
        }

        /// `bytes` becomes the pixels (the header taken off in place: no second copy of 36 MB).
        static func read(_ bytes: inout [UInt8], maxPixels: Int) throws(ImageRefusal) -> DecodedPhoto {
            var at = 4
            guard bytes.count >= 4 else { throw .unreadable(.heif, "the decoder said nothing") }
            let magic = String(decoding: bytes[0..<4], as: UTF8.self)
            func number() throws(ImageRefusal) -> Int {
                guard at + 4 <= bytes.count else { throw .unreadable(.heif, "the decoder's answer was cut short") }
                defer { at += 4 }
                return Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
            }
            func block() throws(ImageRefusal) -> [UInt8] {
                let length = try number()
                guard length <= bytes.count - at else { throw .unreadable(.heif, "the decoder's answer was cut short") }
                defer { at += length }
                return Array(bytes[at..<(at + length)])
            }
            func text() throws(ImageRefusal) -> String? {
                let value = try block()
                return value.isEmpty ? nil : String(decoding: value, as: UTF8.self)
            }
            if magic == "VTHR" {
                guard at < bytes.count else { throw .unreadable(.heif, "the decoder's answer was cut short") }
                let kind = bytes[at]
                at += 1
                switch kind {
                case 1: throw .tooManyPixels(width: try number(), height: try number(), limit: maxPixels)
                case 2: throw .truncated(.heif)
                default: throw .unreadable(.heif, try text() ?? "")
                }
            }
            guard magic == "VTH1" else { throw .unreadable(.heif, "the decoder's answer was not one") }
            let width = try number(), height = try number()
            var tags = CameraTags()
            tags.latitude = try text().flatMap { Double($0) }
            tags.longitude = try text().flatMap { Double($0) }
            tags.takenLocal = try text()
            tags.offsetMinutes = try text().flatMap { Int($0) }
            tags.camera = try text()
            let profile = try block()
            guard width > 0, height > 0, width <= 65_535, height <= 65_535, bytes.count - at == width * height * 3 else {
                throw .unreadable(.heif, "the decoder's pixels did not match its size")
            }
            bytes.removeSubrange(..<at)
            let pixels = bytes
            bytes = []
            let image = RGBImage(width: width, height: height, pixels: pixels)
            return DecodedPhoto(format: .heif, width: width, height: height, image: image, tags: tags, profile: profile.isEmpty ? nil : profile)
        }

        static func number(_ value: Int, _ out: inout [UInt8]) {
            let value = UInt32(truncatingIfNeeded: value)
            out += [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)]
        }

        static func block(_ value: [UInt8], _ out: inout [UInt8]) {
            number(value.count, &out)
            out += value
        }
    }
}
