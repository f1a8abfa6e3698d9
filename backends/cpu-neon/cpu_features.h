/*
 * cpu_features — what the running aarch64 CPU offers, as the kernel reports
 * it through the auxiliary vector (getauxval(AT_HWCAP/AT_HWCAP2); works on
 * Linux and Android without reading system registers), and which kernel
 * level the plugin runs at.
 */
#ifndef TESSERA_CPU_NEON_FEATURES_H
#define TESSERA_CPU_NEON_FEATURES_H

typedef enum neon_level {
    NEON_LEVEL_NONE = 0,    /* no Advanced SIMD: the plugin offers no device */
    NEON_LEVEL_NEON = 1,    /* ARMv8.0 Advanced SIMD */
    NEON_LEVEL_DOTPROD = 2, /* plus sdot/udot (ARMv8.2 dotprod, "asimddp") */
    NEON_LEVEL_I8MM = 3     /* plus smmla (int8 matrix multiply, "i8mm") */
} neon_level;

typedef struct cpu_features {
    int asimd;   /* Advanced SIMD (NEON) */
    int fphp;    /* scalar fp16 arithmetic */
    int asimdhp; /* vector fp16 arithmetic */
    int asimddp; /* sdot/udot */
    int i8mm;    /* smmla/ummla/usmmla */
    int bf16;    /* bfdot/bfmmla */
    int sve;
} cpu_features;

void cpu_features_detect(cpu_features *f);

/* The best level the CPU supports. */
neon_level cpu_features_best_level(const cpu_features *f);

/* "asimd asimdhp asimddp i8mm ..." for the features detected. */
void cpu_features_string(const cpu_features *f, char *out, unsigned size);

#endif
