// libcurl for Swift. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call,
// so these typed wrappers pass each kind of argument through (the same approach as
// swift-corelibs-foundation's CFURLSessionInterface.c).
#include <curl/curl.h>

typedef size_t (*vt_curl_write_callback)(char *data, size_t size, size_t count, void *userdata);

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
static inline CURLcode vt_curl_get_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}
static inline CURLcode vt_curl_get_string(CURL *curl, CURLINFO info, char **value) {
    return curl_easy_getinfo(curl, info, value);
}
