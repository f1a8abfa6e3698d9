/* AVX-512 (F/BW/VL, VNNI when the build allows) build of the kernels. */
#define KERNELS_AVX512 1
#define KERNELS_INIT kernels_init_avx512
#define KERNELS_NAME "avx512"
#include "kernels_impl.h"
