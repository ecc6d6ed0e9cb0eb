// libxcrypt (Debian: libcrypt-dev): crypt_r to hash and verify in any crypt(3) format,
// crypt_gensalt_rn for new yescrypt settings.
#include <crypt.h>
