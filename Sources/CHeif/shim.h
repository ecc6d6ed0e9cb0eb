// libheif (Debian: libheif-dev, decoding HEVC with libde265): the HEIC/HEIF photos iPhones and
// many Android phones write, their size before decoding, their Exif block and colour profile.
#include <libheif/heif.h>
