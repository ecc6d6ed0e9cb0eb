// libcurl for Swift. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call,
// so these typed wrappers pass each kind of argument through (the same approach as
// swift-corelibs-foundation's CFURLSessionInterface.c).
#include <curl/curl.h>

typedef size_t (*vt_curl_write_callback)(char *data, size_t size, size_t count, void *userdata);
typedef size_t (*vt_curl_read_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*vt_curl_seek_callback)(void *userdata, curl_off_t offset, int origin);

static inline CURLcode vt_curl_set_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_offset(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_write_function(CURL *curl, CURLoption option, vt_curl_write_callback value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_read_function(CURL *curl, CURLoption option, vt_curl_read_callback value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_set_seek_function(CURL *curl, CURLoption option, vt_curl_seek_callback value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode vt_curl_get_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}
static inline CURLcode vt_curl_get_string(CURL *curl, CURLINFO info, char **value) {
    return curl_easy_getinfo(curl, info, value);
}

// ---------------------------------------------------------------------------------------------
// Address guard (docs/architecture.md, "Outbound HTTP"): refuses connections to the server's own
// networks by checking the address curl is about to connect to, whatever name or redirect led
// there. CURLOPT_OPENSOCKETFUNCTION runs after name resolution and before connect(2), once per
// address tried, so a host name that resolves to 127.0.0.1 is caught as surely as a literal.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/// One per easy handle. allow_internal is set per request for origins the operator configured.
typedef struct vt_address_guard {
    int allow_internal;
    int refused;
    char refused_address[INET6_ADDRSTRLEN];
} vt_address_guard;

/// Loopback, private (RFC 1918), shared (RFC 6598), link-local (incl. 169.254.169.254, the cloud
/// metadata address), "this network", multicast, reserved and broadcast IPv4 addresses.
static inline int vt_ipv4_is_internal(const unsigned char *a) {
    if (a[0] == 0 || a[0] == 10 || a[0] == 127) return 1;
    if (a[0] == 169 && a[1] == 254) return 1;
    if (a[0] == 172 && (a[1] & 0xf0) == 16) return 1;
    if (a[0] == 192 && a[1] == 168) return 1;
    if (a[0] == 100 && (a[1] & 0xc0) == 64) return 1;
    if (a[0] == 192 && a[1] == 0 && a[2] == 0) return 1;  // IETF protocol assignments (RFC 6890)
    if (a[0] >= 224) return 1;                             // multicast, reserved, broadcast
    return 0;
}

/// Unspecified, loopback, link-local (fe80::/10), unique-local (fc00::/7), site-local (fec0::/10)
/// and multicast IPv6 addresses; v4-mapped (::ffff:a.b.c.d), v4-compatible (::a.b.c.d) and
/// NAT64 (64:ff9b::a.b.c.d) addresses are judged by the IPv4 address inside.
static inline int vt_ipv6_is_internal(const unsigned char *a) {
    static const unsigned char zeros[12] = {0};
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(a, zeros, 12) == 0) {
        // :: and ::1, then the deprecated v4-compatible form.
        if (a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1) return 1;
        return vt_ipv4_is_internal(a + 12);
    }
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0) return vt_ipv4_is_internal(a + 12);
    if ((a[0] & 0xfe) == 0xfc) return 1;                  // unique local
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return 1;  // link-local
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return 1;  // site-local (deprecated)
    if (a[0] == 0xff) return 1;                           // multicast
    return 0;
}

static inline int vt_sockaddr_is_internal(const struct sockaddr *address) {
    if (address->sa_family == AF_INET) {
        return vt_ipv4_is_internal((const unsigned char *)&((const struct sockaddr_in *)address)->sin_addr);
    }
    if (address->sa_family == AF_INET6) {
        return vt_ipv6_is_internal(((const struct sockaddr_in6 *)address)->sin6_addr.s6_addr);
    }
    return 1;  // anything else (AF_UNIX…) is never a photo host
}

/// For tests: the same judgement on a numeric address ("::ffff:127.0.0.1"); -1 if it is not one.
static inline int vt_address_text_is_internal(const char *text) {
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, text, &v4) == 1) return vt_ipv4_is_internal((const unsigned char *)&v4);
    if (inet_pton(AF_INET6, text, &v6) == 1) return vt_ipv6_is_internal(v6.s6_addr);
    return -1;
}

static curl_socket_t vt_guarded_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    vt_address_guard *guard = (vt_address_guard *)clientp;
    if (purpose == CURLSOCKTYPE_IPCXN && guard && !guard->allow_internal && vt_sockaddr_is_internal(&address->addr)) {
        guard->refused = 1;
        const void *raw = address->family == AF_INET6
            ? (const void *)&((const struct sockaddr_in6 *)&address->addr)->sin6_addr
            : (const void *)&((const struct sockaddr_in *)&address->addr)->sin_addr;
        if (!inet_ntop(address->family, raw, guard->refused_address, sizeof guard->refused_address)) {
            guard->refused_address[0] = 0;
        }
        return CURL_SOCKET_BAD;  // curl tries the next address, then fails with COULDNT_CONNECT
    }
    // Close-on-exec, as curl's own sockets are: child processes (pg_ctl, the app in tests) must not
    // inherit idle connections from the shared cache.
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static inline void vt_curl_set_address_guard(CURL *curl, vt_address_guard *guard) {
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, vt_guarded_open_socket);
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, guard);
}

// ---------------------------------------------------------------------------------------------
// One share handle for every transfer: connection cache, DNS cache and TLS sessions, so downloads
// from one host reuse warm connections whichever thread runs them. libcurl asks for a lock per
// kind of shared data when handles on several threads use one share (curl_share_setopt(3)).
typedef struct vt_curl_share {
    CURLSH *share;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
} vt_curl_share;

static void vt_share_lock(CURL *handle, curl_lock_data data, curl_lock_access access, void *userptr) {
    (void)handle; (void)access;
    pthread_mutex_lock(&((vt_curl_share *)userptr)->locks[data]);
}

static void vt_share_unlock(CURL *handle, curl_lock_data data, void *userptr) {
    (void)handle;
    pthread_mutex_unlock(&((vt_curl_share *)userptr)->locks[data]);
}

static inline vt_curl_share *vt_curl_share_create(void) {
    vt_curl_share *shared = calloc(1, sizeof(vt_curl_share));
    if (!shared) return NULL;
    shared->share = curl_share_init();
    if (!shared->share) { free(shared); return NULL; }
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&shared->locks[i], NULL);
    curl_share_setopt(shared->share, CURLSHOPT_LOCKFUNC, vt_share_lock);
    curl_share_setopt(shared->share, CURLSHOPT_UNLOCKFUNC, vt_share_unlock);
    curl_share_setopt(shared->share, CURLSHOPT_USERDATA, shared);
    curl_share_setopt(shared->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(shared->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(shared->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return shared;
}

static inline void vt_curl_use_share(CURL *curl, vt_curl_share *shared) {
    curl_easy_setopt(curl, CURLOPT_SHARE, shared ? shared->share : NULL);
}

static inline void vt_curl_share_destroy(vt_curl_share *shared) {
    curl_share_cleanup(shared->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&shared->locks[i]);
    free(shared);
}
