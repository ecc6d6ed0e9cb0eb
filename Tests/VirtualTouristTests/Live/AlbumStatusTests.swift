import Foundation
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The statuses are written once in Swift (`PinStatus`, `PhotoStatus`, `JobState`) and once in the
/// schema's CHECK constraints; this keeps the two the same words.
@Suite struct AlbumStatusTests {
    /// The quoted words of the CHECK constraint on `table.column`.
    func checkedWords(_ c: PostgresConnection, table: String, column: String) throws -> Set<String> {
        let definitions: [String] = try c.query("""
            SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
            WHERE conrelid = $1::regclass AND contype = 'c'
            """, [table]).map { try $0.decode("def") }
        guard let def = definitions.first(where: { $0.contains("(\(column) = ANY") }) else { return [] }
        var words = Set<String>()
        var rest = Substring(def)
        while let open = rest.firstIndex(of: "'") {
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: "'") else { break }
            words.insert(String(after[..<close]))
            rest = after[after.index(after: close)...]
        }
        return words
    }

    @Test func everyStatusIsTheSameWordInSwiftAndInTheSchema() throws {
        let c = try PostgresConnection(url: try TestDatabase.migrated("status"))
        defer { c.close() }
        #expect(try checkedWords(c, table: "pins", column: "status") == Set(PinStatus.allCases.map(\.rawValue)))
        #expect(try checkedWords(c, table: "photos", column: "status") == Set(PhotoStatus.allCases.map(\.rawValue)))
        #expect(try checkedWords(c, table: "album_jobs", column: "state") == Set(JobState.allCases.map(\.rawValue)))
        #expect(try checkedWords(c, table: "album_jobs", column: "kind") == Set(JobKind.allCases.map(\.rawValue)))
        #expect(try c.query("SELECT 'ready'::text AS s")[0].decode("s", as: PhotoStatus.self) == .ready)
        #expect(throws: PostgresError.self) { try c.query("SELECT 'gone'::text AS s")[0].decode("s", as: PinStatus.self) }
    }

    @Test func theNotifyPayloadIsWrittenAndReadByOneType() {
        let change = AlbumChange(userID: 7, pinID: 42)
        #expect(change.payload == "7:42")
        #expect(AlbumChange(payload: change.payload) == change)
        for stray in ["", "7", "7:", ":42", "7:42:1", "a:b", "7 :42"] { #expect(AlbumChange(payload: stray) == nil) }
    }
}
