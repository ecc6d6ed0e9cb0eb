import Foundation

enum FormEncoding {
    /// Percent-encodes everything but unreserved characters (RFC 3986 §2.3), for query values and
    /// cookie values.
    static func encode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

