// OpenSSL's libcrypto (Debian: libssl-dev; libssl3 is already in the runtime image as libcurl's
// TLS library): SHA-256 for the photo store's content addresses, through the EVP interface, which
// uses the CPU's SHA instructions where there are some.
#include <openssl/evp.h>
