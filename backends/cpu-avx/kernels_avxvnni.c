/* AVX2 build with AVX-VNNI (Alder Lake and later clients, Zen 5): the AVX2
 * kernels with the 256-bit VEX vpdpbusd in place of vpmaddubsw + vpmaddwd. */
#define KERNELS_AVX512 0
#define KERNELS_VNNI 1
#define KERNELS_NAME "avxvnni"
#include "kernels_impl.h"
#include "gemv_iq_impl.h"
#include "gemv_iqgrid_impl.h"
#include "gemv_kq_impl.h"
#include "gemm_q8_impl.h"
#include "gemm_float_impl.h"

void kernels_init_avxvnni(cpu_kernels *k) {
    kernels_fill(k);
    gemv_iq_register(k);
    gemv_iqgrid_register(k);
    gemv_kq_register(k);
    gemm_q8_register(k);
    gemm_float_register(k);
}
