import Foundation

/// A PostgreSQL type OID (pg_type.oid), as sent in RowDescription and used for parameters.
public typealias TypeOID = UInt32

public enum PostgresType {
    public static let bool: TypeOID = 16
    public static let bytea: TypeOID = 17
    public static let char: TypeOID = 18
    public static let name: TypeOID = 19
    public static let int8: TypeOID = 20
    public static let int2: TypeOID = 21
    public static let int4: TypeOID = 23
    public static let text: TypeOID = 25
    public static let oid: TypeOID = 26
    public static let json: TypeOID = 114
    public static let float4: TypeOID = 700
    public static let float8: TypeOID = 701
    public static let unknown: TypeOID = 705
    public static let bpchar: TypeOID = 1042
    public static let varchar: TypeOID = 1043
    public static let date: TypeOID = 1082
    public static let timestamp: TypeOID = 1114
    public static let timestamptz: TypeOID = 1184
    public static let numeric: TypeOID = 1700
    public static let uuid: TypeOID = 2950
    public static let jsonb: TypeOID = 3802
}

/// One bound parameter: its type and its bytes in that type's wire format. Strings travel in text
/// format (identical bytes for text), everything else in binary, so nothing is ever spliced into SQL.
public struct PostgresBinding: Sendable {
    public let type: TypeOID
    public let bytes: [UInt8]?
    public let binary: Bool

    public static let null = PostgresBinding(type: 0, bytes: nil, binary: false)
}

public protocol PostgresEncodable: Sendable {
    var postgresBinding: PostgresBinding { get }
}

public protocol PostgresDecodable {
    /// `bytes` is nil for NULL. `column` names the column for error messages.
    static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Self
}

// MARK: - Wire helpers

@inline(__always)
func bigEndianBytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}

@inline(__always)
func readBigEndian<T: FixedWidthInteger>(_ bytes: ArraySlice<UInt8>, as: T.Type) -> T {
    var value: T = 0
    for b in bytes { value = value << 8 | T(b) }
    return value
}

func requireBytes(_ bytes: ArraySlice<UInt8>?, column: String, type: Any.Type) throws -> ArraySlice<UInt8> {
    guard let bytes else {
        throw PostgresError.decoding(column: column, message: "is NULL; decode it as \(type)? instead")
    }
    return bytes
}

func mismatch(_ column: String, _ type: TypeOID, _ swiftType: Any.Type) -> PostgresError {
    .decoding(column: column, message: "PostgreSQL type \(type) cannot be read as \(swiftType)")
}

/// PostgreSQL counts time from 2000-01-01 00:00:00 UTC.
let postgresEpoch: TimeInterval = 946_684_800

// MARK: - Conformances

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresBinding: PostgresBinding { self?.postgresBinding ?? .null }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Self {
        guard let bytes else { return nil }
        return try Wrapped.decode(bytes, type: type, column: column)
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.int8, bytes: bigEndianBytes(self), binary: true) }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Int64 {
        let b = try requireBytes(bytes, column: column, type: Int64.self)
        switch type {
        case PostgresType.int8 where b.count == 8: return readBigEndian(b, as: Int64.self)
        case PostgresType.int4 where b.count == 4: return Int64(readBigEndian(b, as: Int32.self))
        case PostgresType.int2 where b.count == 2: return Int64(readBigEndian(b, as: Int16.self))
        case PostgresType.oid where b.count == 4: return Int64(readBigEndian(b, as: UInt32.self))
        case PostgresType.numeric:
            guard let v = Int64(try NumericDecoder.string(b, column: column)) else { throw mismatch(column, type, Int64.self) }
            return v
        default: throw mismatch(column, type, Int64.self)
        }
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { Int64(self).postgresBinding }
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Int {
        Int(try Int64.decode(bytes, type: type, column: column))
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.int4, bytes: bigEndianBytes(self), binary: true) }
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Int32 {
        let v = try Int64.decode(bytes, type: type, column: column)
        guard let narrow = Int32(exactly: v) else { throw PostgresError.decoding(column: column, message: "\(v) does not fit Int32") }
        return narrow
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding {
        PostgresBinding(type: PostgresType.float8, bytes: bigEndianBytes(bitPattern), binary: true)
    }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Double {
        let b = try requireBytes(bytes, column: column, type: Double.self)
        switch type {
        case PostgresType.float8 where b.count == 8: return Double(bitPattern: readBigEndian(b, as: UInt64.self))
        case PostgresType.float4 where b.count == 4: return Double(Float(bitPattern: readBigEndian(b, as: UInt32.self)))
        case PostgresType.numeric:
            guard let v = Double(try NumericDecoder.string(b, column: column)) else { throw mismatch(column, type, Double.self) }
            return v
        case PostgresType.int8, PostgresType.int4, PostgresType.int2:
            return Double(try Int64.decode(bytes, type: type, column: column))
        default: throw mismatch(column, type, Double.self)
        }
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.bool, bytes: [self ? 1 : 0], binary: true) }
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Bool {
        let b = try requireBytes(bytes, column: column, type: Bool.self)
        guard type == PostgresType.bool, b.count == 1 else { throw mismatch(column, type, Bool.self) }
        return b.first! != 0
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.text, bytes: Array(utf8), binary: false) }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> String {
        let b = try requireBytes(bytes, column: column, type: String.self)
        switch type {
        case PostgresType.int8, PostgresType.int4, PostgresType.int2, PostgresType.oid:
            return String(try Int64.decode(bytes, type: type, column: column))
        case PostgresType.float8, PostgresType.float4:
            return String(try Double.decode(bytes, type: type, column: column))
        case PostgresType.numeric:
            return try NumericDecoder.string(b, column: column)
        case PostgresType.bool:
            return try Bool.decode(bytes, type: type, column: column) ? "true" : "false"
        case PostgresType.uuid:
            return try UUID.decode(bytes, type: type, column: column).uuidString.lowercased()
        case PostgresType.jsonb:
            // Binary jsonb is a version byte (1) and the JSON text.
            guard b.first == 1 else { throw mismatch(column, type, String.self) }
            return String(decoding: b.dropFirst(), as: UTF8.self)
        case PostgresType.bytea, PostgresType.timestamptz, PostgresType.timestamp, PostgresType.date:
            throw mismatch(column, type, String.self)
        default:
            // text, varchar, name, bpchar, json, unknown, and extension text types: their binary
            // form is the text itself.
            return String(decoding: b, as: UTF8.self)
        }
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.bytea, bytes: [UInt8](self), binary: true) }
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Data {
        Data(try [UInt8].decode(bytes, type: type, column: column))
    }
}

extension Array: PostgresEncodable, PostgresDecodable where Element == UInt8 {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType.bytea, bytes: self, binary: true) }
    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> [UInt8] {
        let b = try requireBytes(bytes, column: column, type: [UInt8].self)
        guard type == PostgresType.bytea else { throw mismatch(column, type, [UInt8].self) }
        return Array(b)
    }
}

extension Date: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding {
        let micros: Int64
        if self == .distantFuture { micros = .max }           // 'infinity'
        else if self == .distantPast { micros = .min }        // '-infinity'
        else { micros = Int64(((timeIntervalSince1970 - postgresEpoch) * 1_000_000).rounded()) }
        return PostgresBinding(type: PostgresType.timestamptz, bytes: bigEndianBytes(micros), binary: true)
    }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> Date {
        let b = try requireBytes(bytes, column: column, type: Date.self)
        switch type {
        case PostgresType.timestamptz where b.count == 8, PostgresType.timestamp where b.count == 8:
            let micros = readBigEndian(b, as: Int64.self)
            if micros == .max { return .distantFuture }
            if micros == .min { return .distantPast }
            return Date(timeIntervalSince1970: postgresEpoch + Double(micros) / 1_000_000)
        case PostgresType.date where b.count == 4:
            let days = readBigEndian(b, as: Int32.self)
            if days == .max { return .distantFuture }
            if days == .min { return .distantPast }
            return Date(timeIntervalSince1970: postgresEpoch + Double(days) * 86_400)
        default: throw mismatch(column, type, Date.self)
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresBinding: PostgresBinding {
        let u = uuid
        return PostgresBinding(type: PostgresType.uuid, bytes: [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7,
                                                               u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15], binary: true)
    }

    public static func decode(_ bytes: ArraySlice<UInt8>?, type: TypeOID, column: String) throws -> UUID {
        let b = Array(try requireBytes(bytes, column: column, type: UUID.self))
        guard type == PostgresType.uuid, b.count == 16 else { throw mismatch(column, type, UUID.self) }
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}

/// numeric's binary form: ndigits, weight, sign, dscale (int16 each), then base-10000 digits.
enum NumericDecoder {
    static func string(_ b: ArraySlice<UInt8>, column: String) throws -> String {
        let bytes = Array(b)
        guard bytes.count >= 8 else { throw PostgresError.decoding(column: column, message: "short numeric") }
        func int16(_ i: Int) -> Int { Int(Int16(bitPattern: UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]))) }
        let ndigits = int16(0), weight = int16(2), sign = UInt16(bytes[4]) << 8 | UInt16(bytes[5]), dscale = int16(6)
        if sign == 0xC000 { return "NaN" }
        if sign == 0xD000 { return "Infinity" }
        if sign == 0xF000 { return "-Infinity" }
        guard bytes.count >= 8 + ndigits * 2 else { throw PostgresError.decoding(column: column, message: "short numeric") }
        let digits = (0..<ndigits).map { int16(8 + $0 * 2) }
        var integer = ""
        if weight < 0 {
            integer = "0"
        } else {
            for i in 0...weight {
                let d = i < digits.count ? digits[i] : 0
                let s = String(d)
                integer += i == 0 ? s : String(repeating: "0", count: 4 - s.count) + s
            }
        }
        var fraction = ""
        if dscale > 0 {
            var i = weight + 1
            while fraction.count < dscale {
                let d = (i >= 0 && i < digits.count) ? digits[i] : 0
                let s = String(d)
                fraction += String(repeating: "0", count: 4 - s.count) + s
                i += 1
            }
            fraction = "." + fraction.prefix(dscale)
        }
        return (sign == 0x4000 ? "-" : "") + integer + fraction
    }
}
