/*
 * api_state — tessera_state_*: a context's tokens, KV cells and last logits
 * (and a sampler's PRNG and penalty window) to bytes and back. The format
 * is in state.h; the cells go through kv/ (kv_table.c: the cell table, kv_cells.c: their K/V
 * bytes).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/public.h"
#include "tensor/dtype.h"
#include "state/state.h"
#include "util/error.h"
#include "util/grow.h"

/* The model's identity beyond its shape: the GGUF's metadata and tensor
 * infos (every byte before the data section). */
static uint64_t gguf_header_hash(const gguf_file *f) {
    uint64_t n = gguf_data_offset(f);
    const uint8_t *base = (const uint8_t *)gguf_data(f) - n;
    return state_checksum(base, (size_t)n);
}

static uint64_t model_gguf_hash(const tessera_model *tm) { return gguf_header_hash(tm->m->file); }

/* The model's hash with the LoRA adapters in use folded in (each file's
 * header hash and its scale, in order): a state computed with other
 * adapters or scales is another model's. No adapter: the model's alone,
 * so files saved without adapters read as before. */
static uint64_t context_model_hash(const tessera_context *ctx) {
    uint64_t h = model_gguf_hash(ctx->model);
    for (int32_t i = 0; i < ctx->lora.n; i++) {
        float scale = ctx->lora.use[i].scale;
        uint64_t part[3] = {h, gguf_header_hash(ctx->lora.use[i].lora->file), 0};
        memcpy(&part[2], &scale, sizeof scale);
        h = state_checksum(part, sizeof part);
    }
    return h;
}

static void header_of_context(const tessera_context *ctx, state_header *h) {
    const model *m = ctx->model->m;
    const kv_cache *kv = ctx->kv;
    memset(h, 0, sizeof *h);
    h->version = STATE_VERSION;
    snprintf(h->arch, sizeof h->arch, "%s", ctx->model->arch);
    h->n_layer = (uint32_t)m->hp.n_layer;
    h->n_embd = (uint32_t)m->hp.n_embd;
    h->n_vocab = (uint32_t)m->hp.n_vocab;
    h->gguf_hash = context_model_hash(ctx);
    h->n_ctx = (uint32_t)kv->n_ctx;
    h->k_dtype = (uint32_t)kv->dtype_k;
    h->v_dtype = (uint32_t)kv->dtype_v;
    h->n_embd_k = (uint32_t)kv->n_embd_k;
    h->n_embd_v = (uint32_t)kv->n_embd_v;
    h->flags = (kv->flash_attn ? 0 : STATE_FLAG_V_TRANS) /* informative: cells are packed alike */
               | (kv->rot_k ? STATE_FLAG_K_ROT : 0) | (kv->rot_v ? STATE_FLAG_V_ROT : 0);
    h->n_sets = (uint32_t)kv->n_sets;
    for (int32_t il = 0; il < kv->n_layer; il++)
        h->n_layer_swa += kv_cache_layer_has_kv(kv, il) && kv->layers[il].set != 0;
    h->rs_bytes = kv_cache_rs_seq_bytes(kv);
    h->n_layer_kv = (uint32_t)kv_cache_n_layer_kv(kv);
}

/* The sequences whose recurrent state a save of seq (-1: all) holds. */
static uint32_t rs_saved_seqs(const kv_cache *kv, int32_t seq, int32_t *out) {
    uint32_t n = 0;
    for (int32_t q = 0; q < KV_MAX_SEQ; q++)
        if ((seq < 0 || q == seq) && kv_cache_rs_held(kv, q)) out[n++] = q;
    return n;
}

static int seq_check(int32_t seq) {
    if (seq < -1 || seq >= TESSERA_MAX_SEQ)
        return error_set("sequence %d is not -1 (all) or 0..%d", seq, TESSERA_MAX_SEQ - 1);
    return 0;
}

/* The cells of set s and their count as the header says. */
static uint64_t set_cells_off(const state_header *h, int32_t s) { return s ? h->off_cells_swa : h->off_cells; }
static uint32_t set_n_cells(const state_header *h, int32_t s) { return s ? h->n_cells_swa : h->n_cells; }

/* Whether the file holds layer il's K/V: a layer with K/V, or any layer in
 * a file from before version 3, whose recurrent layers' K/V (zeros: never
 * written) are skipped when read. */
static bool file_has_kv(const state_header *h, const kv_cache *kv, int32_t il) {
    return h->version < 3 || kv_cache_layer_has_kv(kv, il);
}

/* Offset of layer il's K in the payload (its V follows its K). */
static uint64_t layer_off(const state_header *h, const kv_cache *kv, int32_t il) {
    uint64_t off = h->off_kv;
    for (int32_t l = 0; l < il; l++)
        if (file_has_kv(h, kv, l)) off += set_n_cells(h, kv->layers[l].set) * (h->k_cell_bytes + h->v_cell_bytes);
    return off;
}

/* seq's cells (every sequence's for -1) into out: each set's cell records
 * and dropped positions, then every layer's K and V rows of those cells.
 * cells and recs: room for each set's cells. */
static int save_cache(uint8_t *out, const state_header *h, const kv_cache *kv, int32_t seq, int32_t *cells[2],
                      kv_cell_rec *recs[2]) {
    for (int32_t s = 0; s < kv->n_sets; s++) {
        int32_t n = kv_cache_cells_list(kv, s, seq, recs[s]);
        for (int32_t c = 0; c < n; c++) {
            uint8_t *p = out + set_cells_off(h, s) + STATE_CELL_BYTES * (size_t)c;
            cells[s][c] = recs[s][c].cell;
            state_put(p, (uint32_t)recs[s][c].cell, 4);
            state_put(p + 4, (uint32_t)recs[s][c].pos, 4);
            state_put(p + 8, recs[s][c].seq_mask, 8);
        }
        for (int32_t q = 0; q < STATE_SEQS; q++)
            state_put(out + h->off_dropped + 4 * ((uint64_t)s * STATE_SEQS + (uint64_t)q),
                      (uint32_t)(seq < 0 || q == seq ? kv_cache_dropped(kv, s, q) : -1), 4);
    }
    for (int32_t il = 0; il < kv->n_layer; il++) {
        int32_t s = kv->layers[il].set;
        if (!kv_cache_layer_has_kv(kv, il)) continue; /* a recurrent layer: its state is saved apart */
        uint8_t *k = out + layer_off(h, kv, il);
        if (kv_cache_cells_get(kv, il, cells[s], (int32_t)set_n_cells(h, s), k,
                               k + set_n_cells(h, s) * h->k_cell_bytes) != 0)
            return -1;
    }
    return 0;
}

void *tessera_state_save(tessera_context *ctx, int32_t seq, const tessera_token *tokens, int32_t n_tokens,
                         const tessera_sampler *sampler, size_t *len) {
    if (!ctx || !len || n_tokens < 0 || (n_tokens > 0 && !tokens)) {
        error_set("state save: %s", !ctx ? "no context" : !len ? "len is NULL" : "bad token list");
        return NULL;
    }
    if (seq_check(seq) != 0) {
        error_wrap("state save");
        return NULL;
    }
    if (mrope_has_marks(&ctx->mrope, seq)) {
        error_set("state save: the sequence holds an image with M-RoPE grid positions, which a state does not "
                  "keep yet");
        return NULL;
    }
    const kv_cache *kv = ctx->kv;
    state_header h;
    header_of_context(ctx, &h);
    h.seq = seq;
    h.n_tokens = (uint32_t)n_tokens;
    h.n_cells = (uint32_t)kv_cache_cells_list(kv, 0, seq, NULL);
    if (kv->n_sets > 1) h.n_cells_swa = (uint32_t)kv_cache_cells_list(kv, 1, seq, NULL);
    const float *logits = seq < 0 && ctx->n_last > 0 ? tessera_logits(ctx, -1) : NULL;
    h.n_logits = logits ? h.n_vocab : 0;
    size_t sbytes = sampler ? tessera_sampler_state_size(sampler) : 0;
    h.sampler_bytes = (uint32_t)sbytes;
    int32_t rs_seqs[KV_MAX_SEQ];
    h.n_rs = rs_saved_seqs(kv, seq, rs_seqs);
    uint8_t *out = NULL;
    int32_t *cells[2] = {NULL, NULL};
    kv_cell_rec *recs[2] = {NULL, NULL};
    if (state_header_sizes(&h) != 0) {
        error_wrap("state save");
        return NULL;
    }
    out = malloc((size_t)h.total);
    bool oom = !out;
    for (int32_t s = 0; s < 2; s++) {
        cells[s] = malloc(((size_t)set_n_cells(&h, s) + 1) * sizeof *cells[s]);
        recs[s] = malloc(((size_t)set_n_cells(&h, s) + 1) * sizeof *recs[s]);
        oom = oom || !cells[s] || !recs[s];
    }
    if (oom) {
        error_set("state save: out of memory for %llu bytes", (unsigned long long)h.total);
        goto fail;
    }
    state_header_write(&h, out);
    for (int32_t i = 0; i < n_tokens; i++) state_put(out + h.off_tokens + 4 * (size_t)i, (uint32_t)tokens[i], 4);
    if (logits) memcpy(out + h.off_logits, logits, (size_t)h.n_logits * 4); /* little-endian hosts only */
    if (sampler && tessera_sampler_state_get(sampler, out + h.off_sampler, sbytes) != 0) {
        error_wrap("state save");
        goto fail;
    }
    if (save_cache(out, &h, kv, seq, cells, recs) != 0) {
        error_wrap("state save");
        goto fail;
    }
    for (uint32_t i = 0; i < h.n_rs; i++) {
        uint8_t *p = out + h.off_rs + (4 + h.rs_bytes) * i;
        state_put(p, (uint32_t)rs_seqs[i], 4);
        kv_cache_rs_get(kv, rs_seqs[i], p + 4);
    }
    state_put(out + h.off_checksum, state_checksum(out, (size_t)h.off_checksum), 8);
    *len = (size_t)h.total;
    goto done;
fail:
    free(out);
    out = NULL;
done:
    for (int32_t s = 0; s < 2; s++) {
        free(cells[s]);
        free(recs[s]);
    }
    return out;
}

static const char *kv_type_name(uint32_t t) {
    return t <= INT32_MAX && kv_dtype_supported((int32_t)t) ? dtype_name((int32_t)t) : "unknown";
}

/* The saved model and settings against the context's; names what differs. */
static int state_check_identity(const tessera_context *ctx, const state_header *h, const char *label) {
    state_header me;
    header_of_context(ctx, &me);
    if (strcmp(h->arch, me.arch) != 0)
        return error_set("state file %s was saved for a %s model, this model is %s", label, h->arch, me.arch);
    const struct {
        const char *what;
        uint32_t saved, here;
    } model_fields[] = {{"n_layer", h->n_layer, me.n_layer},
                        {"n_embd", h->n_embd, me.n_embd},
                        {"n_vocab", h->n_vocab, me.n_vocab}};
    for (size_t i = 0; i < 3; i++)
        if (model_fields[i].saved != model_fields[i].here)
            return error_set("state file %s was saved for another model: %s %u there, %u here", label,
                             model_fields[i].what, model_fields[i].saved, model_fields[i].here);
    if (h->gguf_hash != me.gguf_hash) {
        if (ctx->lora.n > 0 && h->gguf_hash == model_gguf_hash(ctx->model))
            return error_set("state file %s was saved without the LoRA adapters this context uses (--lora)", label);
        return error_set("state file %s was saved for another model file or with other LoRA adapters or scales "
                         "(GGUF metadata/tensor hash %016llx there, %016llx here)",
                         label, (unsigned long long)h->gguf_hash, (unsigned long long)me.gguf_hash);
    }
    const struct {
        const char *what;
        uint32_t saved, here;
    } settings[] = {{"K cache type", h->k_dtype, me.k_dtype},
                    {"V cache type", h->v_dtype, me.v_dtype},
                    {"n_embd_k", h->n_embd_k, me.n_embd_k},
                    {"n_embd_v", h->n_embd_v, me.n_embd_v},
                    {"cell sets (2: a sliding-window set; --swa-full has 1)", h->n_sets, me.n_sets},
                    {"sliding-window layers", h->n_layer_swa, me.n_layer_swa}};
    for (size_t i = 0; i < 6; i++)
        if (settings[i].saved != settings[i].here)
            return i < 2 ? error_set("state file %s has other settings: %s %s there, %s here (-ctk/-ctv)", label,
                                     settings[i].what, kv_type_name(settings[i].saved), kv_type_name(settings[i].here))
                         : error_set("state file %s has other settings: %s %u there, %u here", label,
                                     settings[i].what, settings[i].saved, settings[i].here);
    if (h->version >= 3 && h->n_layer_kv != me.n_layer_kv)
        return error_set("state file %s has K/V for %u layers, this context has K/V for %u (its attention layers)",
                         label, h->n_layer_kv, me.n_layer_kv);
    if (h->n_rs && h->rs_bytes != me.rs_bytes)
        return error_set("state file %s has recurrent states of %llu bytes a sequence, this context's are %llu",
                         label, (unsigned long long)h->rs_bytes, (unsigned long long)me.rs_bytes);
    if (!h->n_rs && me.rs_bytes && h->n_cells)
        return error_set("state file %s holds positions but no recurrent state, which this model needs", label);
    /* The cache types decide the rotation, so this differs only when one was
     * forced (kv_rotation): the bytes would be read in the wrong basis. */
    for (uint32_t bit = STATE_FLAG_K_ROT; bit <= STATE_FLAG_V_ROT; bit <<= 1)
        if ((h->flags & bit) != (me.flags & bit))
            return error_set("state file %s has other settings: the %s cache's heads are %s there, %s here", label,
                             bit == STATE_FLAG_K_ROT ? "K" : "V", h->flags & bit ? "Hadamard-rotated" : "not rotated",
                             me.flags & bit ? "rotated" : "not");
    return 0;
}

/* One set's saved cells: indices below the saved set's size (at most the
 * saved n_ctx) and distinct, positions sane, masks of the saved sequence. */
static int check_cells(const state_header *h, const uint8_t *data, int32_t set, const char *label) {
    uint32_t n = set_n_cells(h, set);
    if (n > h->n_ctx) return error_set("state file %s: %u cells of set %d in a context of %u", label, n, set, h->n_ctx);
    uint8_t *seen = calloc((size_t)h->n_ctx / 8 + 1, 1);
    if (!seen) return error_set("state file %s: out of memory", label);
    int rc = 0;
    for (uint32_t c = 0; c < n && rc == 0; c++) {
        const uint8_t *p = data + set_cells_off(h, set) + STATE_CELL_BYTES * c;
        uint32_t idx = (uint32_t)state_get(p, 4);
        int32_t pos = (int32_t)(uint32_t)state_get(p + 4, 4);
        uint64_t mask = state_get(p + 8, 8);
        if (idx >= h->n_ctx || (seen[idx / 8] >> (idx % 8)) & 1)
            rc = error_set("state file %s: cell %u of set %d has index %u (%s)", label, c, set, idx,
                           idx >= h->n_ctx ? "outside the context" : "a duplicate");
        else if (pos < 0 || pos >= (1 << 30))
            rc = error_set("state file %s: cell %u of set %d has position %d", label, c, set, pos);
        else if (!mask || (h->seq >= 0 && mask != (uint64_t)1 << h->seq))
            rc = error_set("state file %s: cell %u of set %d has sequence mask %016llx", label, c, set,
                           (unsigned long long)mask);
        if (rc == 0) seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
    }
    free(seen);
    return rc;
}

/* The payload's values: tokens, logits, cells. Nothing is changed. */
static int state_check_payload(const state_header *h, const uint8_t *data, int32_t load_seq, const char *label) {
    if (h->seq < -1 || h->seq >= TESSERA_MAX_SEQ)
        return error_set("state file %s: sequence %d is not -1 or 0..%d", label, h->seq, TESSERA_MAX_SEQ - 1);
    if (load_seq >= 0 && h->seq < 0)
        return error_set("state file %s holds the whole cache, not one sequence: load it with sequence -1", label);
    if (h->n_logits != 0 && h->n_logits != h->n_vocab)
        return error_set("state file %s: %u logits, not 0 or n_vocab %u", label, h->n_logits, h->n_vocab);
    if (h->n_ctx == 0 || h->n_ctx > (1u << 24))
        return error_set("state file %s: a context of %u cells", label, h->n_ctx);
    for (uint32_t i = 0; i < h->n_tokens; i++) {
        /* a negative token is a medium's row (tessera.h): kept as it is */
        uint32_t t = (uint32_t)state_get(data + h->off_tokens + 4 * (uint64_t)i, 4);
        if (t >= h->n_vocab && (int32_t)t >= 0)
            return error_set("state file %s: token %u at index %u is outside the vocabulary", label, t, i);
    }
    for (uint32_t i = 0; i < h->n_logits; i++) {
        float v;
        memcpy(&v, data + h->off_logits + 4 * (uint64_t)i, 4);
        if (!isfinite(v)) return error_set("state file %s: logit %u is not finite", label, i);
    }
    for (int32_t set = 0; set < (int32_t)h->n_sets; set++)
        if (check_cells(h, data, set, label) != 0) return -1;
    for (uint32_t i = 0; i < h->n_rs; i++) {
        const int32_t q = (int32_t)(uint32_t)state_get(data + h->off_rs + (4 + h->rs_bytes) * i, 4);
        if (q < 0 || q >= STATE_SEQS || (h->seq >= 0 && q != h->seq))
            return error_set("state file %s: recurrent state %u is of sequence %d", label, i, q);
    }
    for (uint64_t i = 0; i < (uint64_t)h->n_sets * STATE_SEQS; i++) {
        int32_t d = (int32_t)(uint32_t)state_get(data + h->off_dropped + 4 * i, 4);
        if (d < -1 || d >= (1 << 30))
            return error_set("state file %s: dropped position %d of set %llu", label, d,
                             (unsigned long long)(i / STATE_SEQS));
    }
    return 0;
}

/* Set `set`'s saved cells as records; with load_seq >= 0 they go to that
 * sequence (the file holds one sequence's cells, check_cells saw to it). */
static void saved_cells(const state_header *h, const uint8_t *data, int32_t set, int32_t load_seq,
                        kv_cell_rec *recs) {
    for (uint32_t c = 0; c < set_n_cells(h, set); c++) {
        const uint8_t *p = data + set_cells_off(h, set) + STATE_CELL_BYTES * c;
        recs[c] = (kv_cell_rec){.cell = (int32_t)(uint32_t)state_get(p, 4),
                                .pos = (int32_t)(uint32_t)state_get(p + 4, 4),
                                .seq_mask = load_seq >= 0 ? (uint64_t)1 << load_seq : state_get(p + 8, 8)};
    }
}

/* The saved per-sequence dropped positions of set s: every sequence's for
 * a whole cache, else the saved sequence's, given to seq. */
static void load_dropped(kv_cache *kv, const state_header *h, const uint8_t *d, int32_t s, int32_t seq) {
    for (int32_t q = 0; q < KV_MAX_SEQ; q++) {
        if (seq >= 0 && q != seq) continue;
        int32_t from = seq >= 0 ? h->seq : q;
        uint64_t at = h->off_dropped + 4 * ((uint64_t)s * STATE_SEQS + (uint64_t)from);
        kv_cache_set_dropped(kv, s, q, (int32_t)(uint32_t)state_get(d + at, 4));
    }
}

/* Place the saved cells of every set (recs) in the cache (their cells into
 * dst), set the sampler's state, then write every layer's K and V rows: a
 * refusal before the writes leaves the cache's bytes as they were. */
static int load_cache(kv_cache *kv, const state_header *h, const uint8_t *d, kv_cell_rec *recs[2], int32_t *dst[2],
                      tessera_sampler *sampler, const char *label) {
    for (int32_t s = 0; s < kv->n_sets; s++)
        if (kv_cache_cells_place(kv, s, recs[s], (int32_t)set_n_cells(h, s), dst[s]) != 0)
            return error_wrap("state file %s", label);
    if (sampler && h->sampler_bytes > 0 && tessera_sampler_state_set(sampler, d + h->off_sampler, h->sampler_bytes) != 0)
        return error_wrap("state file %s", label);
    for (int32_t il = 0; il < kv->n_layer; il++) {
        int32_t s = kv->layers[il].set;
        if (!kv_cache_layer_has_kv(kv, il)) continue; /* (an older file's zeros for it are skipped) */
        const uint8_t *k = d + layer_off(h, kv, il);
        if (kv_cache_cells_set(kv, il, dst[s], (int32_t)set_n_cells(h, s), k, k + set_n_cells(h, s) * h->k_cell_bytes) !=
            0)
            return error_wrap("state load %s", label);
    }
    return 0;
}

/* A whole cache's saved logits become the context's last ones (a
 * sequence's state carries none). */
static int load_logits(tessera_context *ctx, const state_header *h, const uint8_t *d, int32_t seq, const char *label) {
    ctx->n_last = 0;
    if (seq >= 0 || h->n_logits == 0) return 0;
    if (ctx->logits_cap < 1) {
        float *l = realloc(ctx->logits, (size_t)h->n_vocab * sizeof *l);
        if (!l) return error_set("state load %s: out of memory for the logits", label);
        ctx->logits = l;
        ctx->logits_cap = 1;
    }
    memcpy(ctx->logits, d + h->off_logits, (size_t)h->n_vocab * 4);
    ctx->n_last = 1;
    ctx->last_all = false;
    return 0;
}

int tessera_state_load(tessera_context *ctx, int32_t seq, const void *data, size_t len, const char *label,
                       tessera_token *tokens, int32_t max_tokens, int32_t *n_tokens, tessera_sampler *sampler) {
    if (!label) label = "(memory)";
    if (!ctx || !data) return error_set("state load %s: %s is NULL", label, ctx ? "data" : "context");
    if (ctx->embeddings) /* its rows are hidden states, not the saved logits */
        return error_set("state load %s: an embedding context keeps no saved state", label);
    if (seq_check(seq) != 0) return error_wrap("state load %s", label);
    state_header h;
    if (state_header_read(&h, data, len, label) != 0) return -1;
    if (state_check_identity(ctx, &h, label) != 0) return -1;
    if (state_check_payload(&h, data, seq, label) != 0) return -1;
    if ((int64_t)h.n_tokens > (int64_t)(max_tokens > 0 ? max_tokens : 0))
        return error_set("state file %s holds %u tokens, room was given for %d", label, h.n_tokens, max_tokens);
    const uint8_t *d = data;
    kv_cache *kv = ctx->kv;
    const int32_t n_sets = kv->n_sets; /* == h.n_sets (identity) */
    int32_t *dst[2] = {NULL, NULL};
    kv_cell_rec *recs[2] = {NULL, NULL};
    kv_cells_backup *bk = NULL;
    int rc = -1;
    bool oom = false;
    for (int32_t s = 0; s < n_sets; s++) {
        dst[s] = malloc(((size_t)set_n_cells(&h, s) + 1) * sizeof *dst[s]);
        recs[s] = malloc(((size_t)set_n_cells(&h, s) + 1) * sizeof *recs[s]);
        oom = oom || !dst[s] || !recs[s];
        if (!oom) saved_cells(&h, d, s, seq, recs[s]);
    }
    if (oom) {
        error_set("state load %s: out of memory", label);
        goto done;
    }
    /* Place the cells after clearing what they replace; an error puts the
     * cell tables back (the K/V bytes of free cells may have changed). */
    if (!(bk = kv_cache_cells_backup(kv))) {
        error_wrap("state load %s", label);
        goto done;
    }
    kv_cache_seq_clear(kv, seq);
    mrope_forget(&ctx->mrope, seq, 0); /* a state holds no M-RoPE grid (tessera_state_save refuses one) */
    if (load_cache(kv, &h, d, recs, dst, sampler, label) != 0) goto restore;
    for (int32_t s = 0; s < n_sets; s++) {
        kv_cache_cells_fill(kv, s, recs[s], dst[s], (int32_t)set_n_cells(&h, s));
        load_dropped(kv, &h, d, s, seq);
    }
    for (uint32_t i = 0; i < h.n_rs; i++) { /* a state goes to its own sequence, or to seq */
        const uint8_t *p = d + h.off_rs + (4 + h.rs_bytes) * i;
        const int32_t q = seq >= 0 ? seq : (int32_t)(uint32_t)state_get(p, 4);
        if (kv_cache_rs_set(kv, q, p + 4) != 0) {
            error_wrap("state load %s", label);
            kv_cache_seq_clear(kv, seq); /* no positions without their state */
            goto done;
        }
    }
    if (load_logits(ctx, &h, d, seq, label) != 0) goto done;
    for (uint32_t i = 0; i < h.n_tokens; i++)
        tokens[i] = (tessera_token)(uint32_t)state_get(d + h.off_tokens + 4 * (uint64_t)i, 4);
    if (n_tokens) *n_tokens = (int32_t)h.n_tokens;
    rc = 0;
    goto done;
restore:
    kv_cache_cells_restore(kv, bk);
    bk = NULL;
    /* the cleared sequences' recurrent states are gone: so are their positions */
    if (kv_cache_is_recurrent(kv)) kv_cache_seq_clear(kv, seq);
done:
    kv_cells_backup_free(bk);
    for (int32_t s = 0; s < 2; s++) {
        free(dst[s]);
        free(recs[s]);
    }
    return rc;
}

int tessera_state_save_file(tessera_context *ctx, int32_t seq, const char *path, const tessera_token *tokens,
                            int32_t n_tokens, const tessera_sampler *sampler) {
    if (!path) return error_set("state save: no path");
    size_t len = 0;
    void *buf = tessera_state_save(ctx, seq, tokens, n_tokens, sampler, &len);
    if (!buf) return error_wrap("%s", path);
    /* Written beside the target and renamed over it: a reader never sees a
     * half-written file. */
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    int rc = -1;
    if (!tmp) {
        error_set("state save %s: out of memory", path);
        goto done;
    }
    snprintf(tmp, tlen, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        error_set("state save %s: cannot create %s: %s", path, tmp, strerror(errno));
        goto done;
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        error_set("state save %s: cannot write it: %s", path, strerror(errno));
        remove(tmp);
        goto done;
    }
    rc = 0;
done:
    free(tmp);
    free(buf);
    return rc;
}

int tessera_state_load_file(tessera_context *ctx, int32_t seq, const char *path, tessera_token *tokens,
                            int32_t max_tokens, int32_t *n_tokens, tessera_sampler *sampler) {
    if (!path) return error_set("state load: no path");
    FILE *f = fopen(path, "rb");
    if (!f) return error_set("state file %s: cannot open it: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;
    for (;;) {
        if (ARRAY_GROW(buf, cap, len + 1, 1 << 16) < 0) {
            error_set("state file %s: out of memory reading it", path);
            goto done;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        error_set("state file %s: read error", path);
        goto done;
    }
    rc = tessera_state_load(ctx, seq, buf, len, path, tokens, max_tokens, n_tokens, sampler);
done:
    fclose(f);
    free(buf);
    return rc;
}
