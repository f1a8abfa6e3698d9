/*
 * kv_internal — what the kv/ files share about one cell set (kv_cells);
 * nothing outside kv/ includes it.
 */
#ifndef TESSERA_KV_INTERNAL_H
#define TESSERA_KV_INTERNAL_H

#include "kv/kv.h"

/* Cells in use; one past the highest cell in use (what attention reads). */
int32_t kv_cells_used(const kv_cells *c);
int32_t kv_cells_n_kv(const kv_cells *c);
/* The cells of sequence seq at positions >= pos become free. */
void kv_cells_forget(kv_cells *c, int32_t seq, int32_t pos);

/* The recurrent state (kv_rs.c): made from p's sizes (nothing when p has
 * none), freed; a sequence lets go of its slot (zeroed) or takes one (its
 * own if it holds one; -1 with the error set when all are taken). */
int kv_rs_init(kv_cache *kv, const kv_cache_params *p);
void kv_rs_free(kv_cache *kv);
void kv_rs_release(kv_cache *kv, int32_t seq);
int32_t kv_rs_acquire(kv_cache *kv, int32_t seq);
/* size bytes of zeros into buf of dev (kv.c) */
int kv_device_zero(tsr_device *dev, tsr_buffer *buf, uint64_t size);

#endif
