import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct LoopbackError: Error, CustomStringConvertible {
    public let description: String
}

/// A TCP connection to 127.0.0.1:`port` with a receive timeout, for the raw test clients. A
/// `receiveBuffer` (bytes) is set before connecting, where it bounds the window the server sees:
/// a small one makes the server's sends block, as a slow client's would.
public func connectLoopback(port: Int, receiveTimeout: Double, receiveBuffer: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw LoopbackError(description: "socket: \(String(cString: strerror(errno)))") }
    if var size = receiveBuffer {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let message = String(cString: strerror(errno))
        close(fd)
        throw LoopbackError(description: "connect to \(port): \(message)")
    }
    return fd
}
