/*
 * strmap — a fixed-capacity hash map from byte strings to int32 values.
 *
 * Keys are not copied: they must outlive the map (the vocabulary keeps them
 * in its own arena). The capacity is chosen at init for the number of keys
 * the caller will insert, so lookups never see a full table.
 */
#ifndef TESSERA_VOCAB_STRMAP_H
#define TESSERA_VOCAB_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct strmap_slot {
    const char *key; /* NULL: empty */
    uint32_t len;
    uint32_t hash;
    int32_t value;
} strmap_slot;

typedef struct strmap {
    strmap_slot *slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t count;
    size_t max_count;
} strmap;

/* Room for max_count keys. 0 or -1 (out of memory). */
int strmap_init(strmap *m, size_t max_count);
void strmap_free(strmap *m);

/* Insert key -> value. Returns 1 when inserted, 0 when the key was already
 * there (its value left as is and stored in *existing), -1 when the map is
 * full (more keys than max_count). */
int strmap_insert(strmap *m, const char *key, size_t len, int32_t value, int32_t *existing);

/* The value of key, or -1 when absent. */
int32_t strmap_get(const strmap *m, const char *key, size_t len);

uint32_t strmap_hash(const char *key, size_t len);

#endif
