// libwebp (Debian: libwebp-dev): WebP photos, their size before decoding (WebPGetInfo).
#include <webp/decode.h>
