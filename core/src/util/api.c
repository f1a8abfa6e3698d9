/* Public entry points that belong to no module in particular. */
#include <tessera/tessera.h>

#include "util/error.h"

const char *tessera_last_error(void) { return error_get(); }

const char *tessera_version(void) { return TESSERA_VERSION; }
