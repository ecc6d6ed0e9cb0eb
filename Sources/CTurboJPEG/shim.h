// libjpeg-turbo's TurboJPEG API (Debian: libturbojpeg0-dev): album thumbnails, decoded straight
// at a reduced scale (the DCT does the downscaling) and encoded again.
#include <turbojpeg.h>
