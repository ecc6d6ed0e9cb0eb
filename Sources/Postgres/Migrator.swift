import Foundation
import Log

/// Applies migrations/NNNN_description.sql in order, each in its own transaction, and records each in
/// schema_migrations with a SHA-256 of its text. An applied file that later changes stops start-up:
/// the database would no longer match what the code believes. Instances that start together
/// serialise on an advisory lock, so every migration runs exactly once.
public struct Migrator: Sendable {
    public struct Migration: Sendable {
        public let version: Int
        public let name: String
        public let sql: String
    }

    public enum MigrationError: Error, CustomStringConvertible {
        case badFileName(String)
        case duplicateVersion(Int)
        case changedAfterApplying(version: Int, name: String)
        case failed(name: String, underlying: any Error)
        case unreadable(String)

        public var description: String {
            switch self {
            case .badFileName(let f):
                return "migration file \(f) is not named NNNN_description.sql"
            case .duplicateVersion(let v):
                return "two migration files have version \(v)"
            case .changedAfterApplying(let v, let name):
                return "migration \(String(format: "%04d", v))_\(name).sql was changed after it was applied. " +
                    "Applied migrations must never be edited: restore the file and add a new migration instead."
            case .failed(let name, let error):
                return "migration \(name) failed and was rolled back: \(error)"
            case .unreadable(let dir):
                return "cannot read the migrations folder \(dir)"
            }
        }
    }

    /// Any constant shared by every instance of the app; it only has to differ from other locks.
    static let advisoryLockKey: Int64 = 0x5654_4D49_4752 // "VTMIGR"

    public let migrations: [Migration]
    private let logger = Logger(label: "migrate")

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    public init(directory: String) throws {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw MigrationError.unreadable(directory)
        }
        var migrations: [Migration] = []
        for file in names.sorted() where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw MigrationError.badFileName(file)
            }
            guard !migrations.contains(where: { $0.version == version }) else {
                throw MigrationError.duplicateVersion(version)
            }
            guard let sql = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8) else {
                throw MigrationError.unreadable(file)
            }
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        self.init(migrations: migrations)
    }

    /// Applies what is pending; returns the versions applied by this call.
    @discardableResult
    public func migrate(_ connection: PostgresConnection) throws -> [Int] {
        try connection.query("SELECT pg_advisory_lock($1)", [Self.advisoryLockKey])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1)", [Self.advisoryLockKey]) }

        try connection.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE schema_migrations IS 'Migrations applied to this database, one row per migrations/NNNN_name.sql file. Written by virtual-tourist migrate; never edit.';
            COMMENT ON COLUMN schema_migrations.version IS 'The NNNN of the file name.';
            COMMENT ON COLUMN schema_migrations.name IS 'The description part of the file name.';
            COMMENT ON COLUMN schema_migrations.checksum IS 'SHA-256 (hex) of the file as applied; a changed file stops start-up.';
            COMMENT ON COLUMN schema_migrations.applied_at IS 'When it was applied.';
            """)
        var applied: [Int: String] = [:]
        for row in try connection.query("SELECT version, checksum FROM schema_migrations") {
            applied[try row.decode("version")] = try row.decode("checksum")
        }

        var done: [Int] = []
        for migration in migrations {
            let checksum: String = try connection.query(
                "SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex') AS sum", [migration.sql])[0].decode("sum")
            if let recorded = applied[migration.version] {
                guard recorded == checksum else {
                    throw MigrationError.changedAfterApplying(version: migration.version, name: migration.name)
                }
                continue
            }
            do {
                try connection.transaction { c in
                    try c.execute(migration.sql)
                    try c.query("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                                [migration.version, migration.name, checksum])
                }
            } catch {
                throw MigrationError.failed(name: "\(String(format: "%04d", migration.version))_\(migration.name).sql", underlying: error)
            }
            logger.notice("applied \(String(format: "%04d", migration.version))_\(migration.name).sql")
            done.append(migration.version)
        }
        let known = Set(migrations.map(\.version))
        for version in applied.keys where !known.contains(version) {
            // Troubleshooting: which this version of the app does not know
            logger.warning("the database has migration \(version), which this version of the app does not know")
        }
        return done
    }

    /// True when every known migration is applied (for /readyz).
    public func isUpToDate(_ connection: PostgresConnection) throws -> Bool {
        let exists: Bool = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS e")[0].decode("e")
        guard exists else { return migrations.isEmpty }
        let versions = Set(try connection.query("SELECT version FROM schema_migrations").map { try $0.decode("version", as: Int.self) })
        return migrations.allSatisfy { versions.contains($0.version) }
    }
}
