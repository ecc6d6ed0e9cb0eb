// libjpeg-turbo's TurboJPEG API (Debian: libturbojpeg0-dev): photo thumbnails, decoded at a
// reduced scale (tjDecompress2's scaling factors) and encoded again (tjCompress2).
#include <turbojpeg.h>
