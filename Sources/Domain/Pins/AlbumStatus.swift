import Postgres

/// The album's states, each written as its SQL text exactly once: the raw value is what the
/// columns hold (their CHECK constraints list the same words; a test compares them), `sql` is the
/// quoted literal for statements. JSON for the page scripts carries the raw value too.
public protocol SQLTextEnum: RawRepresentable, CaseIterable, Sendable, Codable, PostgresDecodable, PostgresEncodable
    where RawValue == String {}

extension SQLTextEnum {
    /// The quoted SQL literal ('ready'): a constant of ours, never anything from outside.
    public var sql: String { "'\(rawValue)'" }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Self {
        let text = try String.decode(bytes, type: type, column: column)
        guard let value = Self(rawValue: text) else {
            throw PostgresError.decoding(column: column, message: "unknown \(Self.self) '\(text)'")
        }
        return value
    }

    public var postgresBinding: PostgresBinding { rawValue.postgresBinding }
}

/// pins.status: where the pin's album stands.
public enum PinStatus: String, SQLTextEnum {
    /// No album yet (dropped before workers ran, say): one is started when the pin is opened.
    case new
    case downloading
    case ready
    /// The provider has no photos here.
    case empty
    case failed
}

/// photos.status: a placeholder waits for its image, has it, or could not get it.
public enum PhotoStatus: String, SQLTextEnum {
    case pending
    case ready
    case failed
}

/// album_jobs.state: the job queue.
public enum JobState: String, SQLTextEnum {
    case queued
    case running
    case done
    case failed
    case cancelled
}

/// album_jobs.kind: what a job does.
public enum JobKind: String, SQLTextEnum {
    /// Search the provider for a page and download it (the first album, New Collection).
    case collection
    /// Download photos chosen in the picker; no search.
    case photos
}
