/* AVX-512 build with VNNI: u8 x s8 dot products in one vpdpbusd. */
#define KERNELS_AVX512 1
#define KERNELS_VNNI 1
#define KERNELS_INIT kernels_init_avx512vnni
#define KERNELS_NAME "avx512vnni"
#include "kernels_impl.h"
