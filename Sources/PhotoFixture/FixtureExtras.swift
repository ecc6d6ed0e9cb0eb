import Foundation
import HTTPServer

// The fixture's licence list and its hostile mode, kept apart from the search and image code.

extension PhotoFixture {
    /// flickr.photos.licenses.getInfo as Flickr answers it today, the CC 4.0 family (ids 11–16,
    /// added in June 2025) included. Names and URLs as in a recorded answer of the real service
    /// (Flickr-Foundation/flickr-photos-api, tests/fixtures/cassettes/TestLicenseMethods.test_get_licenses.yml,
    /// 19 June 2025). Photos of the fixture use ids 0–17; 17 is one the list does not know.
    public static let licenses: [(id: Int, name: String, url: String)] = [
        (0, "All Rights Reserved", "https://www.flickrhelp.com/hc/en-us/articles/10710266545556-Using-Flickr-images-shared-by-other-members"),
        (4, "CC BY 2.0", "https://creativecommons.org/licenses/by/2.0/"),
        (6, "CC BY-ND 2.0", "https://creativecommons.org/licenses/by-nd/2.0/"),
        (3, "CC BY-NC-ND 2.0", "https://creativecommons.org/licenses/by-nc-nd/2.0/"),
        (2, "CC BY-NC 2.0", "https://creativecommons.org/licenses/by-nc/2.0/"),
        (1, "CC BY-NC-SA 2.0", "https://creativecommons.org/licenses/by-nc-sa/2.0/"),
        (5, "CC BY-SA 2.0", "https://creativecommons.org/licenses/by-sa/2.0/"),
        (7, "No known copyright restrictions", "https://www.flickr.com/commons/usage/"),
        (8, "United States Government Work", "https://www.usa.gov/government-copyright"),
        (9, "Public Domain Dedication (CC0)", "https://creativecommons.org/publicdomain/zero/1.0/"),
        (10, "Public Domain Mark", "https://creativecommons.org/publicdomain/mark/1.0/"),
        (11, "CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/"),
        (12, "CC BY-SA 4.0", "https://creativecommons.org/licenses/by-sa/4.0/"),
        (13, "CC BY-ND 4.0", "https://creativecommons.org/licenses/by-nd/4.0/"),
        (14, "CC BY-NC 4.0", "https://creativecommons.org/licenses/by-nc/4.0/"),
        (15, "CC BY-NC-SA 4.0", "https://creativecommons.org/licenses/by-nc-sa/4.0/"),
        (16, "CC BY-NC-ND 4.0", "https://creativecommons.org/licenses/by-nc-nd/4.0/"),
    ]

    /// Flickr's JSON form of the list: ids as numbers.
    public static var licensesAnswer: String {
        let items = licenses.map { #"{"id":\#($0.id),"name":"\#($0.name)","url":"\#($0.url)"}"# }
        return #"{"licenses":{"license":[\#(items.joined(separator: ","))]},"stat":"ok"}"#
    }

    /// Image addresses a hostile or compromised provider might name, in the order the first photos
    /// of a page get them: loopback by number, by name, in IPv6 and v4-mapped form and in curl's
    /// short and decimal forms; a private and the cloud-metadata address; a redirect from the
    /// fixture's own (allowed) origin into loopback; file:// and gopher://.
    public static func hostileAddresses(canaryPort port: Int, origin: String, id: Int) -> [String] {
        [
            "http://127.0.0.1:\(port)/loopback.jpg",
            "http://localhost:\(port)/localhost.jpg",
            "http://[::1]:\(port)/ipv6-loopback.jpg",
            "http://[::ffff:127.0.0.1]:\(port)/v4-mapped.jpg",
            "http://127.1:\(port)/short-form.jpg",
            "http://2130706433:\(port)/decimal-form.jpg",
            "http://10.0.0.1:\(port)/private.jpg",
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
            "\(origin)/hostile-redirect/\(id)",
            "file:///etc/passwd",
            "gopher://127.0.0.1:\(port)/_GET%20/gopher.jpg",
        ]
    }

    func hostilePhoto(id: Int, index: Int, page: Int, canaryPort: Int, origin: String) -> String {
        let address = Self.hostileAddresses(canaryPort: canaryPort, origin: origin, id: id)[index]
        return """
            {"id":"\(id)","owner":"666@N06","secret":"h0st","server":"65535","farm":66,"title":"Hostile photo \(page)-\(index + 1)",\
            "ispublic":1,"isfriend":0,"isfamily":0,"license":"4","ownername":"Mallory","datetaken":"2019-01-01 12:00:00",\
            "datetakengranularity":"0","url_q":"\(address)","url_m":"\(address)","url_z":"\(address)"}
            """
    }

    /// From the allowed origin into loopback: only a client that checks every redirect refuses it.
    func hostileRedirect(_ request: HTTPRequest) throws -> HTTPResponse {
        guard let port = options.hostileCanaryPort else { throw HTTPError.notFound }
        return HTTPResponse(status: .found, headers: ["Location": "http://127.0.0.1:\(port)/redirected.jpg"])
    }
}
