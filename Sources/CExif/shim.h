// libexif (Debian: libexif-dev): the camera's tags of a person's own photo (GPS, the time taken
// and its offset, the camera, the orientation), read from a JPEG's APP1 or the Exif block libheif
// hands over for a HEIC.
#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>
#include <libexif/exif-loader.h>
