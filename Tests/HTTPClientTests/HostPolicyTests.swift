import Testing
import HTTPClient

/// HostPolicy as a value: a wildcard covers the names below its domain and nothing else, the port
/// and scheme must be the declared ones, an address with userinfo is never admitted, and origins
/// are written one way so they compare equal.
@Suite struct HostPolicyTests {
    /// Flickr's image hosts as the provider declares them.
    static let flickr = HostPolicy([.init("*.staticflickr.com", schemes: ["https"])])

    @Test func aWildcardAdmitsTheNamesBelowItsDomain() {
        #expect(Self.flickr.admits("https://live.staticflickr.com/65535/1_abc_z.jpg"))
        #expect(Self.flickr.admits("https://farm66.staticflickr.com/1/2_b.jpg"))
        #expect(Self.flickr.admits("https://a.b.staticflickr.com/1.jpg"))
        // Names and schemes compare without case.
        #expect(Self.flickr.admits("HTTPS://LIVE.StaticFlickr.COM/1.jpg"))
        #expect(HostPolicy([.init("*.StaticFlickr.com")]).admits("https://live.staticflickr.com/1.jpg"))
    }

    @Test func aWildcardNeverAdmitsTheBareDomainOrALookAlike() {
        for address in ["https://staticflickr.com/1.jpg", "https://evilstaticflickr.com/1.jpg",
                        "https://staticflickr.com.evil.example/1.jpg", "https://live.staticflickr.com.evil.example/1.jpg",
                        "https://live-staticflickr.com/1.jpg", "https://.staticflickr.com/1.jpg"] {
            #expect(!Self.flickr.admits(address), "\(address)")
        }
    }

    @Test func onlyTheDeclaredSchemesAreAdmitted() {
        #expect(!Self.flickr.admits("http://live.staticflickr.com/1.jpg"))
        #expect(!Self.flickr.admits("ftp://live.staticflickr.com/1.jpg"))
        #expect(!Self.flickr.admits("file:///etc/passwd"))
        #expect(!Self.flickr.admits("live.staticflickr.com/1.jpg"))
        let both = HostPolicy([.init("upload.wikimedia.org", schemes: ["http", "https"])])
        #expect(both.admits("http://upload.wikimedia.org/x.jpg"))
        #expect(both.admits("https://upload.wikimedia.org/x.jpg"))
    }

    @Test func withoutAPortOnlyTheSchemesDefaultPortIsAdmitted() {
        #expect(Self.flickr.admits("https://live.staticflickr.com:443/1.jpg"))
        #expect(!Self.flickr.admits("https://live.staticflickr.com:8443/1.jpg"))
        #expect(!Self.flickr.admits("https://live.staticflickr.com:80/1.jpg"))
        let both = HostPolicy([.init("example.org", schemes: ["http", "https"])])
        #expect(both.admits("http://example.org:80/"))
        #expect(!both.admits("http://example.org:443/"))
    }

    @Test func aDeclaredPortIsTheOnlyPortAdmitted() {
        let fixture = HostPolicy([.init("127.0.0.1", schemes: ["http"], port: 8090)])
        #expect(fixture.admits("http://127.0.0.1:8090/photos/1.jpg"))
        #expect(!fixture.admits("http://127.0.0.1/photos/1.jpg"))
        #expect(!fixture.admits("http://127.0.0.1:8091/photos/1.jpg"))
        #expect(!fixture.admits("http://localhost:8090/photos/1.jpg"))
    }

    @Test func anAddressWithUserinfoIsNeverAdmitted() {
        #expect(!Self.flickr.admits("https://user@live.staticflickr.com/1.jpg"))
        #expect(!Self.flickr.admits("https://user:secret@live.staticflickr.com/1.jpg"))
        #expect(!Self.flickr.admits("https://live.staticflickr.com@evil.example/1.jpg"))
        #expect(!Self.flickr.admits("https://:@live.staticflickr.com/1.jpg"))
    }

    @Test func aTrailingDotNamesTheSameHost() {
        #expect(Self.flickr.admits("https://live.staticflickr.com./1.jpg"))
        let commons = HostPolicy([.init("upload.wikimedia.org")])
        #expect(commons.admits("https://upload.wikimedia.org./x.jpg"))
        #expect(!commons.admits("https://upload.wikimedia.org.evil.example./x.jpg"))
    }

    @Test func anEmptyPolicyOrAnAddressThatIsNotOneAdmitsNothing() {
        #expect(!HostPolicy([]).admits("https://live.staticflickr.com/1.jpg"))
        for address in ["", "not an address", "https://", "/relative/1.jpg", "https:///1.jpg"] {
            #expect(!Self.flickr.admits(address), "\(address)")
        }
    }

    @Test func originsWriteTheDefaultPortAndBracketIPv6() {
        #expect(HostPolicy.origin(of: "http://a.example") == "http://a.example:80")
        #expect(HostPolicy.origin(of: "http://a.example:80/x") == "http://a.example:80")
        #expect(HostPolicy.origin(of: "https://A.Example/x?y=1#z") == "https://a.example:443")
        #expect(HostPolicy.origin(of: "HTTPS://a.example:8443") == "https://a.example:8443")
        #expect(HostPolicy.origin(of: "http://[::1]:8080/x") == "http://[::1]:8080")
        #expect(HostPolicy.origin(of: "http://[::1]/") == "http://[::1]:80")
        #expect(HostPolicy.origin(of: "http://[2001:DB8::1]:81") == "http://[2001:db8::1]:81")
        #expect(HostPolicy.origin(of: "http://a.example") == HostPolicy.origin(of: "http://a.example:80/"))
        #expect(HostPolicy.origin(of: "http://a.example") != HostPolicy.origin(of: "https://a.example"))
        #expect(HostPolicy.origin(of: "not an address") == nil)
        #expect(HostPolicy.origin(of: "http://") == nil)
        #expect(HostPolicy.origin(of: "/relative") == nil)
    }

    @Test func sameOriginAdmitsExactlyThatOrigin() {
        let fixture = HostPolicy.sameOrigin(as: "http://127.0.0.1:9999/services/rest/")
        #expect(fixture.admits("http://127.0.0.1:9999/photos/1_z.jpg"))
        #expect(!fixture.admits("http://127.0.0.1:9998/photos/1_z.jpg"))
        #expect(!fixture.admits("https://127.0.0.1:9999/photos/1_z.jpg"))
        #expect(!fixture.admits("http://localhost:9999/photos/1_z.jpg"))
        #expect(!fixture.admits("http://127.0.0.1/photos/1_z.jpg"))

        let api = HostPolicy.sameOrigin(as: "HTTPS://API.Example.org/v1")
        #expect(api.admits("https://api.example.org:443/images/1.jpg"))
        #expect(!api.admits("https://images.api.example.org/1.jpg"))
        #expect(!api.admits("http://api.example.org/1.jpg"))

        let v6 = HostPolicy.sameOrigin(as: "http://[::1]:8080/api")
        #expect(v6.admits("http://[::1]:8080/1.jpg"))
        #expect(!v6.admits("http://[::1]:8081/1.jpg"))
        #expect(!v6.admits("http://127.0.0.1:8080/1.jpg"))

        #expect(HostPolicy.sameOrigin(as: "not an address") == HostPolicy([]))
        #expect(!HostPolicy.sameOrigin(as: "not an address").admits("http://not/"))
    }

    @Test func theDescriptionNamesEachHostWithItsSchemesAndPort() {
        let policy = HostPolicy([.init("*.staticflickr.com"), .init("127.0.0.1", schemes: ["https", "http"], port: 8090)])
        #expect(policy.description == "https://*.staticflickr.com, http|https://127.0.0.1:8090")
    }
}
