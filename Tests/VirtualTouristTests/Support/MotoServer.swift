import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPClient
import Postgres
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// An S3-compatible server for the object-store tests: moto's server mode (PyPI `moto[server]`,
/// which script/test installs), started by the tests on a free loopback port.
///
/// Why moto: it installs from PyPI alone (CI has PyPI and Debian, nothing else: no MinIO binary,
/// no Docker), starts in about two seconds, and — with INITIAL_NO_AUTH_ACTION_COUNT — checks SigV4
/// signatures and IAM policies like the real service, so a wrong secret or a denied write is
/// refused as S3 would refuse it. Its state is in memory: a restarted server has no buckets.
///
/// When moto cannot start, the test fails with the reason (never skips): a test of the object
/// store that silently did not run would read as a pass.
final class MotoServer: @unchecked Sendable {
    struct Credentials { let accessKeyID: String; let secretAccessKey: String }

    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }
    private var process: Process?
    private let log: String
    /// With signatures checked: `admin` may do anything in S3; `picky` may do anything but
    /// PutObject (and so CopyObject) on keys whose hash starts with 0–3 — a bucket that refuses
    /// some writes. nil when started without authentication.
    private(set) var admin: Credentials?
    private(set) var picky: Credentials?
    static let refusedHashStarts: Set<Character> = ["0", "1", "2", "3"]

    /// One server with signatures checked, shared by the tests of this process (each test uses a
    /// bucket of its own).
    static let shared: Result<MotoServer, Error> = Result { try MotoServer(authenticated: true) }

    init(authenticated: Bool, port: Int? = nil) throws {
        self.port = try port ?? Self.freePort()
        log = TestApp.scratchDirectory("moto") + ".log"
        try start(authenticated: authenticated)
    }

    deinit { stop() }

    func start(authenticated: Bool) throws {
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let python = ProcessInfo.processInfo.environment["S3_TEST_PYTHON"] ?? "python3"
        process.arguments = [python, "-c", Self.launcher, "-H", "127.0.0.1", "-p", String(port)]
        var environment = ProcessInfo.processInfo.environment
        // The first six requests (the IAM set-up below) go unchecked; every later one must be
        // signed by a key that exists, with a policy that allows it.
        environment["INITIAL_NO_AUTH_ACTION_COUNT"] = authenticated ? "6" : nil
        process.environment = environment
        process.standardOutput = output
        process.standardError = output
        do { try process.run() } catch {
            throw MotoError(description: "cannot run \(python) -m moto.server: \(error). Install it: python3 -m pip install \"moto[server]\" (script/test does)")
        }
        self.process = process
        let deadline = Date(timeIntervalSinceNow: 30)
        while true {
            if let fd = try? connectLoopback(port: port, receiveTimeout: 1) { close(fd); break }
            if !process.isRunning || Date() > deadline {
                let tail = (try? String(contentsOfFile: log, encoding: .utf8)).map { String($0.suffix(1500)) } ?? ""
                stop()
                throw MotoError(description: "moto's server did not start on port \(port) (\(python) -c <moto.server launcher>). "
                                    + "Install it: python3 -m pip install \"moto[server]\" (script/test does). Its output:\n\(tail)")
            }
            usleep(100_000)
        }
        if authenticated {
            admin = try createUser("vt-admin", deny: [])
            picky = try createUser("vt-picky", deny: Self.refusedHashStarts.sorted().map { "arn:aws:s3:::*/*/\($0)*" })
        }
    }

    /// Terminates the server (the endpoint goes away: connections are refused).
    func stop() {
        guard let process, process.isRunning else { return }
        // SIGKILL: moto keeps nothing worth a clean exit.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// A store on a new bucket of this server (created with `admin`, or unsigned-checked when
    /// started without authentication), signing with `credentials`.
    func store(credentials: Credentials? = nil, prefix: String = "photos") throws -> S3Store {
        let bucket = "t-" + UUID().uuidString.prefix(13).lowercased()
        let creator = S3Store(settings: settings(bucket: bucket, prefix: prefix, credentials: admin), locks: nil)
        try creator.createBucket()
        return S3Store(settings: settings(bucket: bucket, prefix: prefix, credentials: credentials ?? admin),
                       locks: PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 4))
    }

    func settings(bucket: String, prefix: String = "photos", credentials: Credentials?) -> S3Settings {
        S3Settings(endpoint: endpoint, bucket: bucket, prefix: prefix, region: "us-east-1",
                   accessKeyID: credentials?.accessKeyID ?? "test", secretAccessKey: credentials?.secretAccessKey ?? "test")
    }

    /// CreateUser, PutUserPolicy (allow s3:*, deny PutObject on `deny`), CreateAccessKey: three
    /// unchecked requests.
    private func createUser(_ name: String, deny: [String]) throws -> Credentials {
        var statements: [[String: Any]] = [["Effect": "Allow", "Action": "s3:*", "Resource": "*"]]
        if !deny.isEmpty { statements.append(["Effect": "Deny", "Action": "s3:PutObject", "Resource": deny]) }
        let policy = String(decoding: try JSONSerialization.data(withJSONObject: ["Version": "2012-10-17", "Statement": statements]), as: UTF8.self)
        _ = try iam(["Action": "CreateUser", "UserName": name])
        _ = try iam(["Action": "PutUserPolicy", "UserName": name, "PolicyName": "s3", "PolicyDocument": policy])
        let answer = try iam(["Action": "CreateAccessKey", "UserName": name])
        guard let key = S3ListPage.element("AccessKeyId", in: answer[...], limit: 128),
              let secret = S3ListPage.element("SecretAccessKey", in: answer[...], limit: 128) else {
            throw MotoError(description: "moto: no access key in \(answer)")
        }
        return Credentials(accessKeyID: key, secretAccessKey: secret)
    }

    private func iam(_ parameters: [String: String]) throws -> String {
        var form = parameters
        form["Version"] = "2010-05-08"
        let body = form.map { "\($0.key)=\(S3Store.encode($0.value))" }.joined(separator: "&")
        // Unchecked, but moto routes by the service named in the credential scope.
        let response = try HTTPClient.trusting(endpoint).send("POST", endpoint + "/", headers: [
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
        ], body: Array(body.utf8))
        let text = String(decoding: response.body, as: UTF8.self)
        guard response.status == 200 else { throw MotoError(description: "moto IAM \(parameters["Action"] ?? ""): HTTP \(response.status) \(text)") }
        return text
    }

    /// `python3 -m moto.server`, plus two things a child of the test process needs: the signals
    /// the test process blocks unblocked (a child inherits the mask), and an exit when the test
    /// process is gone (a crashed or killed run leaves no server behind).
    static let launcher = """
        import os, sys, threading, time, signal, runpy
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        parent = os.getppid()
        def watch():
            while True:
                time.sleep(0.5)
                if os.getppid() != parent: os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
        sys.argv = ["moto.server"] + sys.argv[1:]
        runpy.run_module("moto.server", run_name="__main__")
        """

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw MotoError(description: "no free port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct MotoError: Error, CustomStringConvertible {
    let description: String
}
