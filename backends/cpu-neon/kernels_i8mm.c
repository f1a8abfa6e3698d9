/* i8mm build of the kernels (-march from backends/cpu-neon/meson.build). */
#define KERNELS_DOTPROD 1
#define KERNELS_I8MM 1
#define KERNELS_INIT kernels_init_i8mm
#define KERNELS_NAME "i8mm"
#include "kernels_impl.h"
