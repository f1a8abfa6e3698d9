/* cpu_repack — Q4_K rows interleaved 16 at a time; see cpu_repack.h. */
#include "cpu_repack.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_blocks.h"

size_t cpu_x_group_bytes(int32_t dtype, int64_t K) {
    if (dtype != TSR_DTYPE_Q4_K || K <= 0 || K % 256 != 0) return 0;
    return (size_t)(K / 256) * sizeof(cpu_q4kx16);
}

/* Sub-block j's 6-bit scale and min from the 12 packed bytes q. */
static void q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void cpu_x_repack(int32_t dtype, const uint8_t *w, size_t row_stride, int64_t K, int64_t g0, int64_t g1,
                  uint8_t *out) {
    if (dtype != TSR_DTYPE_Q4_K) return;
    const int64_t nb = K / 256;
    for (int64_t gi = g0; gi < g1; gi++) {
        cpu_q4kx16 *o = (cpu_q4kx16 *)(void *)(out + (size_t)gi * cpu_x_group_bytes(dtype, K));
        for (int64_t ib = 0; ib < nb; ib++, o++)
            for (int r = 0; r < CPU_XROWS; r++) {
                const blk_q4_k *b = (const blk_q4_k *)(const void *)(w + (size_t)(CPU_XROWS * gi + r) * row_stride) + ib;
                o->d[r] = b->d;
                o->dmin[r] = b->dmin;
                for (int s = 0; s < 8; s++) q4k_scale_min(s, b->scales, &o->sc[s][r], &o->mn[s][r]);
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++) memcpy(o->qs[c][g][r], b->qs + 32 * c + 4 * g, 4);
            }
    }
}

static uint64_t hash_ptr(const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static int same_weight(const cpu_xentry *e, const tsr_tensor *t, const void *src) {
    return e->src == src && e->dtype == t->dtype && e->ne0 == t->ne[0] && e->ne1 == t->ne[1] && e->ne2 == t->ne[2] &&
           e->nb1 == t->nb[1];
}

static int grow(cpu_xcache *c) {
    const int64_t cap = c->cap ? 2 * c->cap : 256;
    cpu_xentry *s = calloc((size_t)cap, sizeof *s);
    if (!s) return -1;
    for (int64_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].src) continue;
        int64_t j = (int64_t)(hash_ptr(c->slots[i].src) & (uint64_t)(cap - 1));
        while (s[j].src) j = (j + 1) & (cap - 1);
        s[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = s;
    c->cap = cap;
    return 0;
}

cpu_xentry *cpu_xcache_get(cpu_xcache *c, const tsr_tensor *t, const void *src, int *fresh) {
    *fresh = 0;
    if (c->cap) {
        int64_t j = (int64_t)(hash_ptr(src) & (uint64_t)(c->cap - 1));
        for (; c->slots[j].src; j = (j + 1) & (c->cap - 1)) {
            cpu_xentry *e = &c->slots[j];
            /* the same address with another shape: a view of the weight
             * (not met in practice); keep probing for an exact entry */
            if (same_weight(e, t, src)) return e;
        }
    }
    if (2 * (c->n + 1) > c->cap && grow(c) != 0) return NULL;
    int64_t j = (int64_t)(hash_ptr(src) & (uint64_t)(c->cap - 1));
    while (c->slots[j].src) j = (j + 1) & (c->cap - 1);
    cpu_xentry *e = &c->slots[j];
    *e = (cpu_xentry){.src = src, .dtype = t->dtype, .ne0 = t->ne[0], .ne1 = t->ne[1], .ne2 = t->ne[2], .nb1 = t->nb[1],
                      .x = NULL};
    c->n++;
    *fresh = 1;
    return e;
}

void cpu_xcache_free(cpu_xcache *c) {
    for (int64_t i = 0; i < c->cap; i++) free(c->slots[i].x);
    free(c->slots);
    memset(c, 0, sizeof *c);
}
