#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Statements sent to the server by this thread, for counting a request's database round trips
/// (a request's handler runs on one thread from start to end). Every call of
/// `PostgresConnection.query` or `execute` is one round trip.
public enum RoundTrips {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    public static var onThisThread: Int { Int(bitPattern: pthread_getspecific(key)) }

    static func count() {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: onThisThread &+ 1))
    }
}
