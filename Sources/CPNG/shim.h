// libpng (Debian: libpng-dev), its simplified API only (png_image_*): no setjmp/longjmp, which
// Swift cannot cross.
#include <png.h>
