/* dotprod build of the kernels (-march from backends/cpu-neon/meson.build). */
#define KERNELS_DOTPROD 1
#define KERNELS_I8MM 0
#define KERNELS_INIT kernels_init_dotprod
#define KERNELS_NAME "dotprod"
#include "kernels_impl.h"
