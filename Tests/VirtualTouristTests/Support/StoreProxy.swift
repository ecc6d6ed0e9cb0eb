import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// A TCP proxy on 127.0.0.1 in front of an object store (moto), for outages the store itself
/// cannot stage. `forward` passes bytes both ways; `blackhole` keeps accepting connections and
/// reading requests but never answers, on new and open connections alike (a store that hangs);
/// `down` closes the listening socket and every open connection (a stopped store: connections
/// are refused) — the store behind it keeps running and keeps its data.
final class StoreProxy: @unchecked Sendable {
    enum Mode: String { case forward, blackhole, down }

    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }
    private let process = Process()
    private let commands = Pipe()
    private let answers = Pipe()

    init(target: Int) throws {
        port = try MotoServer.freePort()
        let python = ProcessInfo.processInfo.environment["S3_TEST_PYTHON"] ?? "python3"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [python, "-c", Self.script, String(port), String(target)]
        process.standardInput = commands
        process.standardOutput = answers
        try process.run()
        try requireAnswer(readLine(), "listening")
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Switches mode; returns once the proxy has.
    func set(_ mode: Mode) throws {
        commands.fileHandleForWriting.write(Data((mode.rawValue + "\n").utf8))
        try requireAnswer(readLine(), mode.rawValue)
    }

    private func readLine() -> String {
        var line = [UInt8]()
        while true {
            let byte = answers.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte[0] == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte[0])
        }
    }

    /// One thread per direction of each connection; the mode is read for every chunk, so a switch
    /// to blackhole also silences connections the client keeps open.
    static let script = """
        import os, sys, socket, threading, time, signal
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        port, target = int(sys.argv[1]), int(sys.argv[2])
        mode = "forward"
        live = set()
        lock = threading.Lock()
        listener = None
        parent = os.getppid()
        def watch():
            while True:
                time.sleep(0.5)
                if os.getppid() != parent: os._exit(0)
        def listen():
            global listener
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(512)
            s.settimeout(0.1)
            listener = s
        def close(s):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
            try: s.close()
            except OSError: pass
        def pump(a, b):
            while True:
                try: data = a.recv(65536)
                except OSError: break
                if not data: break
                if mode != "forward": continue
                try: b.sendall(data)
                except OSError: break
            for s in (a, b):
                with lock: live.discard(s)
                close(s)
        def swallow(client):
            with lock: live.add(client)
            while True:
                try: data = client.recv(65536)
                except OSError: break
                if not data: break
            with lock: live.discard(client)
            close(client)
        def serve(client):
            if mode == "blackhole":
                swallow(client); return
            try: upstream = socket.create_connection(("127.0.0.1", target))
            except OSError:
                close(client); return
            with lock: live.update([client, upstream])
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
            pump(client, upstream)
        def accept():
            while True:
                s = listener
                if s is None:
                    time.sleep(0.02); continue
                try: client, _ = s.accept()
                except (socket.timeout, OSError): continue
                client.settimeout(None)
                threading.Thread(target=serve, args=(client,), daemon=True).start()
        threading.Thread(target=watch, daemon=True).start()
        listen()
        threading.Thread(target=accept, daemon=True).start()
        print("listening", flush=True)
        for line in sys.stdin:
            wanted = line.strip()
            if wanted == "down":
                mode = "down"
                s, listener = listener, None
                if s is not None: close(s)
                with lock: open_ = list(live); live.clear()
                for c in open_: close(c)
            else:
                mode = wanted
                if listener is None: listen()
            print(wanted, flush=True)
        """
}

/// The proxy's answer, or a thrown failure naming what came instead.
private func requireAnswer(_ answer: String, _ expected: String) throws {
    guard answer == expected else { throw MotoError(description: "store proxy said \"\(answer)\", not \"\(expected)\"") }
}
