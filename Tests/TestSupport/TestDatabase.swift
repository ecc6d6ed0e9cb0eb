import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Postgres

/// Fresh databases on the test cluster that script/test starts (TEST_DATABASE_URL). Each test gets
/// its own database, so tests run in parallel without seeing each other's rows.
public enum TestDatabase {
    struct NotConfigured: Error, CustomStringConvertible {
        public let description = "TEST_DATABASE_URL is not set: run the tests with script/test, which starts a throwaway PostgreSQL"
    }

    public static func adminURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["TEST_DATABASE_URL"], !url.isEmpty else {
            throw NotConfigured()
        }
        return url
    }

    /// Creates an empty database and returns its URL.
    public static func create(_ label: String = "t") throws -> String {
        let admin = try adminURL()
        let name = "vt_\(label)_\(UUID().uuidString.prefix(8).lowercased())"
        let connection = try PostgresConnection(url: admin)
        defer { connection.close() }
        try connection.execute("CREATE DATABASE \(PostgresConnection.quoteIdentifier(name))")
        return url(admin, database: name)
    }

    /// The same server, another database: swaps the path of a postgresql:// URL.
    public static func url(_ url: String, database: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return "\(url) dbname=\(database)" }
        let afterScheme = url[schemeEnd.upperBound...]
        let pathStart = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let rest = url[pathStart...]
        let query = rest.firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        return String(url[..<pathStart]) + "/" + database + query
    }

    /// A fresh database with the project's migrations applied.
    public static func migrated(_ label: String = "m") throws -> String {
        let url = try create(label)
        let connection = try PostgresConnection(url: url)
        defer { connection.close() }
        try Migrator(directory: migrationsDirectory).migrate(connection)
        return url
    }

    public static var migrationsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations").path
    }
}

/// A PostgreSQL cluster of the test's own, for tests that restart the server. As root it runs as the
/// `postgres` OS user, as script/postgres.sh does.
public final class TemporaryCluster {
    public let directory: String
    let binDirectory: String
    public var url: String { "postgresql:///postgres?host=\(directory)&user=postgres" }

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// The newest installed PostgreSQL's programs (initdb, pg_ctl, pg_dump, pg_restore), as Debian lays them out.
    public static func binDirectory() throws -> String {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let version = versions.compactMap(Int.init).max() else { throw Failure(description: "no PostgreSQL server installed") }
        return "/usr/lib/postgresql/\(version)/bin"
    }

    public init() throws {
        binDirectory = try Self.binDirectory()
        directory = "/tmp/vt-cluster-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        if getuid() == 0 {
            try FileManager.default.setAttributes([.ownerAccountName: "postgres"], ofItemAtPath: directory)
        }
        try run("initdb", "-D", directory, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C")
        try start()
    }

    deinit {
        try? run("pg_ctl", "-D", directory, "-m", "immediate", "-w", "stop")
        try? FileManager.default.removeItem(atPath: directory)
    }

    public func start() throws {
        try run("pg_ctl", "-D", directory, "-l", directory + "/server.log", "-w",
                "-o", "-c listen_addresses='' -c unix_socket_directories='\(directory)' -c fsync=off", "start")
    }

    /// Stops the server the way an administrator would (fast: sessions are ended), for outage tests.
    public func stop() throws {
        try run("pg_ctl", "-D", directory, "-m", "fast", "-w", "stop")
    }

    public func restart() throws {
        try run("pg_ctl", "-D", directory, "-m", "fast", "-w",
                "-o", "-c listen_addresses='' -c unix_socket_directories='\(directory)' -c fsync=off", "restart")
    }

    private func run(_ tool: String, _ arguments: String...) throws {
        let command = getuid() == 0
            ? ["/usr/sbin/runuser", "-u", "postgres", "--", binDirectory + "/" + tool] + arguments
            : [binDirectory + "/" + tool] + arguments
        let (status, output) = try runProcess(command)
        guard status == 0 else { throw Failure(description: "\(tool) failed: \(output)") }
    }
}

/// Runs a command to completion; its exit code and output (stdout and stderr together).
public func runProcess(_ command: [String]) throws -> (status: Int32, output: String) {
    let logPath = "/tmp/vt-process-\(UUID().uuidString).log"
    defer { unlink(logPath) }
    let status = try ChildProcess(command, environment: [:], logPath: logPath).wait()
    let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    return (status, output)
}

/// Polls until `condition` holds or `timeout` passes.
public func eventually(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// A child process the test can kill: the app's own binary, say.
public final class ChildProcess {
    public let pid: pid_t

    /// Starts `command` with extra environment variables; output goes to `logPath`. Not Foundation's
    /// Process: its waitUntilExit can hang on Linux when the child has already exited (seen here
    /// with runuser + pg_ctl), and its pipe would be inherited by daemons the child leaves behind.
    public init(_ command: [String], environment: [String: String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, &argv, &envp)
        guard spawned == 0 else { throw TemporaryCluster.Failure(description: "cannot start \(command[0]): errno \(spawned)") }
        self.pid = pid
    }

    /// Waits for the process to end; its exit code (128 + the signal when killed by one).
    @discardableResult
    public func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS are macros Swift cannot import.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Sends a signal and reaps the process.
    public func kill(_ signal: Int32 = SIGKILL) {
        Glibc.kill(pid, signal)
        wait()
    }
}
