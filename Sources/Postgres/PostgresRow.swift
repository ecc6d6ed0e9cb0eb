/// The rows of one result, copied out of libpq so they outlive it and may cross threads.
public struct PostgresResult: Sendable, RandomAccessCollection {
    public struct Column: Sendable {
        public let name: String
        public let type: TypeOID
    }

    public let columns: [Column]
    /// Every value's bytes, one after another: one allocation per result, not one per value.
    let storage: [UInt8]
    /// Row-major, columns.count per row: where each value starts in `storage`, -1 for NULL.
    let starts: [Int]
    let lengths: [Int]
    let columnIndex: [String: Int]
    /// Rows touched by INSERT/UPDATE/DELETE (PQcmdTuples), 0 otherwise.
    public let affectedRows: Int

    init(columns: [Column], storage: [UInt8], starts: [Int], lengths: [Int], affectedRows: Int) {
        self.columns = columns
        self.storage = storage
        self.starts = starts
        self.lengths = lengths
        self.affectedRows = affectedRows
        var index: [String: Int] = [:]
        for (i, c) in columns.enumerated() where index[c.name] == nil { index[c.name] = i }
        self.columnIndex = index
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : starts.count / columns.count }

    func cell(_ index: Int) -> ArraySlice<UInt8>? {
        let start = starts[index]
        return start < 0 ? nil : storage[start..<(start + lengths[index])]
    }
    public subscript(position: Int) -> PostgresRow { PostgresRow(result: self, row: position) }
}

public struct PostgresRow: Sendable {
    let result: PostgresResult
    let row: Int

    public var columns: [PostgresResult.Column] { result.columns }

    /// The value of column `name`, decoded. A NULL read as a non-optional throws, naming the column.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let index = result.columnIndex[name] else {
            throw PostgresError.decoding(column: name, message: "no such column in the result")
        }
        return try decode(at: index, as: type)
    }

    public func decode<T: PostgresDecodable>(at index: Int, as type: T.Type = T.self) throws -> T {
        let column = result.columns[index]
        return try T.decode(result.cell(row * result.columns.count + index), type: column.type, column: column.name)
    }

    public func isNull(_ name: String) -> Bool {
        guard let index = result.columnIndex[name] else { return true }
        return result.starts[row * result.columns.count + index] < 0
    }
}
