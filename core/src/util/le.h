/*
 * le — little-endian integers in byte buffers, for the saved-state formats
 * (sampler chain, grammar). n is the width in bytes, 1 to 8.
 */
#ifndef TESSERA_UTIL_LE_H
#define TESSERA_UTIL_LE_H

#include <stdint.h>

static inline void le_put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t le_get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
