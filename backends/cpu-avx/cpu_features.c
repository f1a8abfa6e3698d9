/* cpu_features — cpuid/xgetbv probing (see cpu_features.h). Compiled without
 * any ISA flags: it must run on every x86-64 CPU. */
#include "cpu_features.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void cpu_features_detect(cpu_features *f) {
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    unsigned max_leaf = (unsigned)__get_cpuid_max(0, NULL);
    if (max_leaf < 1) return;
    __cpuid(1, a, b, c, d);
    int osxsave = (c >> 27) & 1;
    f->avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f->os_ymm = (xcr0 & 0x6) == 0x6;             /* SSE + AVX state */
        f->os_zmm = f->os_ymm && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM hi */
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = (b >> 5) & 1;
        f->avx512f = (b >> 16) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
        if (a >= 1) { /* EAX of subleaf 0: the last valid subleaf */
            __cpuid_count(7, 1, a, b, c, d);
            f->avxvnni = (a >> 4) & 1;
            f->avx512bf16 = (a >> 5) & 1;
        }
    }
    if (!f->os_ymm) f->avx = f->avx2 = f->fma = f->f16c = f->avxvnni = 0;
    if (!f->os_zmm) f->avx512f = f->avx512bw = f->avx512vl = f->avx512vnni = f->avx512bf16 = 0;

    unsigned brand[12];
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __cpuid(0x80000002u + i, brand[4 * i], brand[4 * i + 1], brand[4 * i + 2], brand[4 * i + 3]);
        memcpy(f->brand, brand, 48);
        f->brand[48] = 0;
        /* trim leading spaces some vendors pad with */
        size_t lead = strspn(f->brand, " ");
        memmove(f->brand, f->brand + lead, sizeof f->brand - lead);
    }
}
#else
void cpu_features_detect(cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

avx_level cpu_features_best_level(const cpu_features *f) {
    if (!(f->avx && f->avx2 && f->fma && f->f16c)) return AVX_LEVEL_NONE;
    if (f->avx512f && f->avx512bw && f->avx512vl) return AVX_LEVEL_AVX512;
    return AVX_LEVEL_AVX2;
}

void cpu_features_string(const cpu_features *f, char *out, unsigned size) {
    static const cpu_feature_name names[] = {
        {offsetof(cpu_features, avx2), "avx2"},
        {offsetof(cpu_features, fma), "fma"},
        {offsetof(cpu_features, f16c), "f16c"},
        {offsetof(cpu_features, avxvnni), "avxvnni"},
        {offsetof(cpu_features, avx512f), "avx512f"},
        {offsetof(cpu_features, avx512bw), "avx512bw"},
        {offsetof(cpu_features, avx512vl), "avx512vl"},
        {offsetof(cpu_features, avx512vnni), "avx512vnni"},
        {offsetof(cpu_features, avx512bf16), "avx512bf16"},
    };
    cpu_feature_list(f, names, (int)(sizeof names / sizeof names[0]), out, size);
}
