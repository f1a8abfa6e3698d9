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

#endif
