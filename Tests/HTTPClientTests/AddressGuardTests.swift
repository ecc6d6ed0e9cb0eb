import CCurl
import Testing
import HTTPClient

/// The address guard (the C shim's open-socket callback, docs/architecture.md "Outbound HTTP"):
/// loopback, private, link-local, metadata, multicast and their IPv6 spellings are internal;
/// whatever name or spelling leads there, the client opens no connection to one unless the
/// operator configured that exact origin. A loopback server counts what reaches it.
@Suite struct AddressGuardTests {
    @Test(arguments: [
        ("127.0.0.1", 1), ("127.255.0.9", 1), ("10.1.2.3", 1), ("172.16.0.1", 1), ("172.31.255.255", 1), ("192.168.1.1", 1),
        ("169.254.169.254", 1), ("100.64.0.1", 1), ("0.0.0.0", 1), ("224.0.0.1", 1), ("255.255.255.255", 1),
        ("::", 1), ("::1", 1), ("fe80::1", 1), ("fc00::1", 1), ("fd12:3456::1", 1), ("ff02::1", 1),
        ("::ffff:127.0.0.1", 1), ("::ffff:10.0.0.1", 1), ("::ffff:169.254.169.254", 1), ("64:ff9b::7f00:1", 1), ("::127.0.0.1", 1),
        ("8.8.8.8", 0), ("172.32.0.1", 0), ("151.101.1.140", 0), ("2a04:4e42::644", 0), ("::ffff:8.8.8.8", 0), ("2001:db8::1", 0),
        ("not an address", -1),
    ])
    func internalAddressesAreRecognised(address: String, expected: Int32) {
        #expect(vt_address_text_is_internal(address) == expected, "\(address)")
    }

    /// Independently of names and policies: whatever address a name resolves to, the client does
    /// not connect to an internal one.
    @Test func theClientNeverConnectsToAnInternalAddressThatWasNotConfigured() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = HTTPClient()
        let port = server.port
        for address in ["http://127.0.0.1:\(port)/", "http://localhost:\(port)/", "http://[::1]:\(port)/",
                        "http://[::ffff:127.0.0.1]:\(port)/", "http://127.1:\(port)/", "http://2130706433:\(port)/"] {
            #expect {
                _ = try client.get(address)
            } throws: { error in
                guard case HTTPClientError.refused(let reason) = error else { return false }
                return reason.contains("internal address")
            }
            #expect {
                _ = try client.send("GET", address)
            } throws: { error in
                guard case HTTPClientError.refused(let reason) = error else { return false }
                return reason.contains("internal address")
            }
        }
        #expect(server.connections == 0)
        #expect(server.requests.isEmpty)
    }

    @Test func aConfiguredOriginIsFetchedAndOnlyThatOrigin() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        var options = HTTPClient.Options()
        options.internalOrigins = ["http://127.0.0.1:\(server.port)"]
        let client = HTTPClient(options: options)
        let response = try client.get("http://127.0.0.1:\(server.port)/x")
        #expect(response.status == 200)
        #expect(response.body == Array("ok".utf8))
        #expect(server.connections == 1)
        // The same server by another name (or the same name on another port) is another origin.
        #expect(throws: HTTPClientError.self) { _ = try client.get("http://localhost:\(server.port)/x") }
        #expect(throws: HTTPClientError.self) { _ = try client.send("GET", "http://127.1:\(server.port)/x") }
        #expect(server.connections == 1)
    }

    /// The configured origins are compared as origins: a trailing path or the default port
    /// written out changes nothing.
    @Test func configuredOriginsAreComparedAsOrigins() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        var options = HTTPClient.Options()
        options.internalOrigins = ["HTTP://127.0.0.1:\(server.port)/some/path"]
        #expect(try HTTPClient(options: options).send("GET", "http://127.0.0.1:\(server.port)/y").status == 200)
        #expect(server.connections == 1)
    }
}
