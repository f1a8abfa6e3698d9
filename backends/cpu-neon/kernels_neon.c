/* neon build of the kernels (-march from backends/cpu-neon/meson.build). */
#define KERNELS_DOTPROD 0
#define KERNELS_I8MM 0
#define KERNELS_INIT kernels_init_neon
#define KERNELS_NAME "neon"
#include "kernels_impl.h"
