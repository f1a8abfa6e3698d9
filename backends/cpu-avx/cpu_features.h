/*
 * cpu_features — what the running x86-64 CPU and OS support, read with cpuid
 * and xgetbv (the OS must save the YMM/ZMM state for AVX/AVX-512 to be
 * usable), and which kernel level the plugin runs at.
 */
#ifndef TESSERA_CPU_AVX_FEATURES_H
#define TESSERA_CPU_AVX_FEATURES_H

typedef enum avx_level {
    AVX_LEVEL_NONE = 0,   /* no AVX2+FMA+F16C: the plugin offers no device */
    AVX_LEVEL_AVX2 = 1,   /* AVX2 + FMA + F16C */
    AVX_LEVEL_AVX512 = 2  /* plus AVX-512 F/BW/VL (VNNI used when present) */
} avx_level;

typedef struct cpu_features {
    int avx, avx2, fma, f16c;
    int avxvnni; /* AVX-VNNI: 256-bit VEX vpdpbusd (CPUID 7.1 EAX bit 4) */
    int avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    int os_ymm, os_zmm;   /* XCR0 says the OS saves YMM / ZMM state */
    char brand[49];
} cpu_features;

void cpu_features_detect(cpu_features *f);

/* The best level the CPU supports. */
avx_level cpu_features_best_level(const cpu_features *f);

/* "avx2 fma f16c avx512f ..." for the features detected (usable ones). */
void cpu_features_string(const cpu_features *f, char *out, unsigned size);

#endif
