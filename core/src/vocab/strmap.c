#include "vocab/strmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, then a final avalanche so the low bits used for the slot index
 * depend on every byte. Keys are short (tokens, merges). */
uint32_t strmap_hash(const char *key, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)key[i];
        h *= 16777619u;
    }
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    return h;
}

int strmap_init(strmap *m, size_t max_count) {
    size_t cap = 16;
    while (cap < max_count * 2) cap *= 2; /* load factor at most 1/2 */
    memset(m, 0, sizeof *m);
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return -1;
    m->mask = cap - 1;
    m->max_count = max_count;
    return 0;
}

void strmap_free(strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

int strmap_insert(strmap *m, const char *key, size_t len, int32_t value, int32_t *existing) {
    uint32_t h = strmap_hash(key, len);
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        strmap_slot *s = &m->slots[i];
        if (!s->key) {
            if (m->count >= m->max_count) return -1;
            s->key = key;
            s->len = (uint32_t)len;
            s->hash = h;
            s->value = value;
            m->count++;
            return 1;
        }
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
            if (existing) *existing = s->value;
            return 0;
        }
    }
}

int32_t strmap_get(const strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    uint32_t h = strmap_hash(key, len);
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const strmap_slot *s = &m->slots[i];
        if (!s->key) return -1;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->value;
    }
}
