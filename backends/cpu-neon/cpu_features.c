/* cpu_features — auxiliary-vector probing (see cpu_features.h). Compiled for
 * plain ARMv8.0: it must run on every aarch64 CPU. */
#include "cpu_features.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cpu_isa.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* Bit numbers from the Linux arm64 ABI (asm/hwcap.h); spelled out so the file
 * builds against old headers and Android's bionic alike. */
enum {
    HWCAP_BIT_ASIMD = 1,
    HWCAP_BIT_FPHP = 9,
    HWCAP_BIT_ASIMDHP = 10,
    HWCAP_BIT_ASIMDDP = 20,
    HWCAP_BIT_SVE = 22,
    HWCAP2_BIT_I8MM = 13,
    HWCAP2_BIT_BF16 = 14,
};

void cpu_features_detect(cpu_features *f) {
    memset(f, 0, sizeof *f);
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->asimd = (hw >> HWCAP_BIT_ASIMD) & 1;
    f->fphp = (hw >> HWCAP_BIT_FPHP) & 1;
    f->asimdhp = (hw >> HWCAP_BIT_ASIMDHP) & 1;
    f->asimddp = (hw >> HWCAP_BIT_ASIMDDP) & 1;
    f->sve = (hw >> HWCAP_BIT_SVE) & 1;
    f->i8mm = (hw2 >> HWCAP2_BIT_I8MM) & 1;
    f->bf16 = (hw2 >> HWCAP2_BIT_BF16) & 1;
}
#else
void cpu_features_detect(cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

neon_level cpu_features_best_level(const cpu_features *f) {
    if (!f->asimd) return NEON_LEVEL_NONE;
    if (!f->asimddp) return NEON_LEVEL_NEON;
    return f->i8mm ? NEON_LEVEL_I8MM : NEON_LEVEL_DOTPROD;
}

void cpu_features_string(const cpu_features *f, char *out, unsigned size) {
    static const cpu_feature_name names[] = {
        {offsetof(cpu_features, asimd), "asimd"},
        {offsetof(cpu_features, fphp), "fphp"},
        {offsetof(cpu_features, asimdhp), "asimdhp"},
        {offsetof(cpu_features, asimddp), "asimddp"},
        {offsetof(cpu_features, i8mm), "i8mm"},
        {offsetof(cpu_features, bf16), "bf16"},
        {offsetof(cpu_features, sve), "sve"},
    };
    cpu_feature_list(f, names, (int)(sizeof names / sizeof names[0]), out, size);
}
