/*
 * api_state — tessera_state_*: a context's tokens, KV cells and last logits
 * (and a sampler's PRNG and penalty window) to bytes and back. The format
 * is in state.h; the cells' K/V bytes go through kv/ (kv_cells.c).
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

/* The model's identity beyond its shape: the GGUF's metadata and tensor
 * infos (every byte before the data section). */
static uint64_t model_gguf_hash(const tessera_model *tm) {
    const gguf_file *f = tm->m->file;
    uint64_t n = gguf_data_offset(f);
    const uint8_t *base = (const uint8_t *)gguf_data(f) - n;
    return state_checksum(base, (size_t)n);
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
    h->gguf_hash = model_gguf_hash(ctx->model);
    h->n_ctx = (uint32_t)kv->n_ctx;
    h->k_dtype = (uint32_t)kv->dtype_k;
    h->v_dtype = (uint32_t)kv->dtype_v;
    h->n_embd_k = (uint32_t)kv->n_embd_k;
    h->n_embd_v = (uint32_t)kv->n_embd_v;
    h->v_trans = kv->flash_attn ? 0 : 1; /* informative: cells are packed alike */
}

static int seq_check(int32_t seq) {
    if (seq < -1 || seq >= TESSERA_MAX_SEQ)
        return error_set("sequence %d is not -1 (all) or 0..%d", seq, TESSERA_MAX_SEQ - 1);
    return 0;
}

static bool cell_selected(const kv_cache *kv, int32_t j, int32_t seq) {
    return seq < 0 ? kv->cell_seq[j] != 0 : (kv->cell_seq[j] >> seq) & 1;
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
    const kv_cache *kv = ctx->kv;
    state_header h;
    header_of_context(ctx, &h);
    h.seq = seq;
    h.n_tokens = (uint32_t)n_tokens;
    for (int32_t j = 0; j < kv->n_ctx; j++) h.n_cells += cell_selected(kv, j, seq);
    const float *logits = seq < 0 && ctx->n_last > 0 ? tessera_logits(ctx, -1) : NULL;
    h.n_logits = logits ? h.n_vocab : 0;
    size_t sbytes = sampler ? tessera_sampler_state_size(sampler) : 0;
    h.sampler_bytes = (uint32_t)sbytes;
    uint8_t *out = NULL;
    int32_t *cells = NULL;
    if (state_header_sizes(&h) != 0) {
        error_wrap("state save");
        return NULL;
    }
    out = malloc((size_t)h.total);
    cells = malloc(((size_t)h.n_cells + 1) * sizeof *cells);
    if (!out || !cells) {
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
    uint32_t c = 0;
    for (int32_t j = 0; j < kv->n_ctx; j++) {
        if (!cell_selected(kv, j, seq)) continue;
        uint8_t *p = out + h.off_cells + STATE_CELL_BYTES * c;
        state_put(p, (uint32_t)j, 4);
        state_put(p + 4, (uint32_t)kv->cell_pos[j], 4);
        state_put(p + 8, seq < 0 ? kv->cell_seq[j] : (uint64_t)1 << seq, 8);
        cells[c++] = j;
    }
    uint64_t layer_bytes = h.n_cells * (h.k_cell_bytes + h.v_cell_bytes);
    for (int32_t il = 0; il < kv->n_layer; il++) {
        uint8_t *k = out + h.off_kv + layer_bytes * (uint64_t)il;
        if (kv_cache_cells_get(kv, il, cells, (int32_t)h.n_cells, k, k + h.n_cells * h.k_cell_bytes) != 0) {
            error_wrap("state save");
            goto fail;
        }
    }
    state_put(out + h.off_checksum, state_checksum(out, (size_t)h.off_checksum), 8);
    free(cells);
    *len = (size_t)h.total;
    return out;
fail:
    free(out);
    free(cells);
    return NULL;
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
    if (h->gguf_hash != me.gguf_hash)
        return error_set("state file %s was saved for another model file (GGUF metadata/tensor hash %016llx "
                         "there, %016llx here)",
                         label, (unsigned long long)h->gguf_hash, (unsigned long long)me.gguf_hash);
    const struct {
        const char *what;
        uint32_t saved, here;
    } settings[] = {{"K cache type", h->k_dtype, me.k_dtype},
                    {"V cache type", h->v_dtype, me.v_dtype},
                    {"n_embd_k", h->n_embd_k, me.n_embd_k},
                    {"n_embd_v", h->n_embd_v, me.n_embd_v}};
    for (size_t i = 0; i < 4; i++)
        if (settings[i].saved != settings[i].here)
            return i < 2 ? error_set("state file %s has other settings: %s %s there, %s here (-ctk/-ctv)", label,
                                     settings[i].what, kv_type_name(settings[i].saved), kv_type_name(settings[i].here))
                         : error_set("state file %s has other settings: %s %u there, %u here", label,
                                     settings[i].what, settings[i].saved, settings[i].here);
    return 0;
}

/* The payload's values: tokens, logits, cells. Nothing is changed. */
static int state_check_payload(const tessera_context *ctx, const state_header *h, const uint8_t *data,
                               int32_t load_seq, const char *label) {
    if (h->seq < -1 || h->seq >= TESSERA_MAX_SEQ)
        return error_set("state file %s: sequence %d is not -1 or 0..%d", label, h->seq, TESSERA_MAX_SEQ - 1);
    if (load_seq >= 0 && h->seq < 0)
        return error_set("state file %s holds the whole cache, not one sequence: load it with sequence -1", label);
    if (h->n_logits != 0 && h->n_logits != h->n_vocab)
        return error_set("state file %s: %u logits, not 0 or n_vocab %u", label, h->n_logits, h->n_vocab);
    if (h->n_ctx == 0 || h->n_ctx > (1u << 24) || h->n_cells > h->n_ctx)
        return error_set("state file %s: %u cells of a context of %u", label, h->n_cells, h->n_ctx);
    for (uint32_t i = 0; i < h->n_tokens; i++) {
        uint32_t t = (uint32_t)state_get(data + h->off_tokens + 4 * (uint64_t)i, 4);
        if (t >= h->n_vocab)
            return error_set("state file %s: token %u at index %u is outside the vocabulary", label, t, i);
    }
    for (uint32_t i = 0; i < h->n_logits; i++) {
        float v;
        memcpy(&v, data + h->off_logits + 4 * (uint64_t)i, 4);
        if (!isfinite(v)) return error_set("state file %s: logit %u is not finite", label, i);
    }
    uint8_t *seen = calloc((size_t)h->n_ctx / 8 + 1, 1);
    if (!seen) return error_set("state file %s: out of memory", label);
    int rc = 0;
    for (uint32_t c = 0; c < h->n_cells && rc == 0; c++) {
        const uint8_t *p = data + h->off_cells + STATE_CELL_BYTES * c;
        uint32_t idx = (uint32_t)state_get(p, 4);
        int32_t pos = (int32_t)(uint32_t)state_get(p + 4, 4);
        uint64_t mask = state_get(p + 8, 8);
        if (idx >= h->n_ctx || (seen[idx / 8] >> (idx % 8)) & 1)
            rc = error_set("state file %s: cell %u has index %u (%s)", label, c, idx,
                           idx >= h->n_ctx ? "outside the context" : "a duplicate");
        else if (pos < 0 || pos >= (1 << 30))
            rc = error_set("state file %s: cell %u has position %d", label, c, pos);
        else if (!mask || (h->seq >= 0 && mask != (uint64_t)1 << h->seq))
            rc = error_set("state file %s: cell %u has sequence mask %016llx", label, c, (unsigned long long)mask);
        if (rc == 0) seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
    }
    free(seen);
    (void)ctx;
    return rc;
}

/* Cells of the context the saved cells go to: the saved index when it is
 * free (so a reloaded whole cache is laid out as it was), else the lowest
 * free cell. -1 when they do not fit. */
static int place_cells(const kv_cache *kv, const state_header *h, const uint8_t *data, int32_t *dst,
                       const char *label) {
    uint8_t *taken = calloc((size_t)kv->n_ctx, 1);
    if (!taken) return error_set("state file %s: out of memory", label);
    for (int32_t j = 0; j < kv->n_ctx; j++) taken[j] = kv->cell_seq[j] != 0;
    for (uint32_t c = 0; c < h->n_cells; c++) {
        uint32_t idx = (uint32_t)state_get(data + h->off_cells + STATE_CELL_BYTES * c, 4);
        dst[c] = idx < (uint32_t)kv->n_ctx && !taken[idx] ? (int32_t)idx : -1;
        if (dst[c] >= 0) taken[dst[c]] = 1;
    }
    int32_t next = 0;
    for (uint32_t c = 0; c < h->n_cells; c++) {
        if (dst[c] >= 0) continue;
        while (next < kv->n_ctx && taken[next]) next++;
        if (next == kv->n_ctx) {
            free(taken);
            return error_set("state file %s: %u cells do not fit in the context's %d free cells (-c)", label,
                             h->n_cells, kv->n_ctx);
        }
        dst[c] = next;
        taken[next] = 1;
    }
    free(taken);
    return 0;
}

static void seq_clear(kv_cache *kv, int32_t seq) {
    for (int32_t j = 0; j < kv->n_ctx; j++) {
        if (seq >= 0) kv->cell_seq[j] &= ~((uint64_t)1 << seq);
        else kv->cell_seq[j] = 0;
        if (!kv->cell_seq[j]) kv->cell_pos[j] = -1;
    }
}

int tessera_state_load(tessera_context *ctx, int32_t seq, const void *data, size_t len, const char *label,
                       tessera_token *tokens, int32_t max_tokens, int32_t *n_tokens, tessera_sampler *sampler) {
    if (!label) label = "(memory)";
    if (!ctx || !data) return error_set("state load %s: %s is NULL", label, ctx ? "data" : "context");
    if (seq_check(seq) != 0) return error_wrap("state load %s", label);
    state_header h;
    if (state_header_read(&h, data, len, label) != 0) return -1;
    if (state_check_identity(ctx, &h, label) != 0) return -1;
    if (state_check_payload(ctx, &h, data, seq, label) != 0) return -1;
    if ((int64_t)h.n_tokens > (int64_t)(max_tokens > 0 ? max_tokens : 0))
        return error_set("state file %s holds %u tokens, room was given for %d", label, h.n_tokens, max_tokens);
    const uint8_t *d = data;
    kv_cache *kv = ctx->kv;
    int32_t *dst = malloc(((size_t)h.n_cells + 1) * sizeof *dst);
    uint64_t *old_seq = malloc((size_t)kv->n_ctx * sizeof *old_seq);
    int32_t *old_pos = malloc((size_t)kv->n_ctx * sizeof *old_pos);
    int rc = -1;
    if (!dst || !old_seq || !old_pos) {
        error_set("state load %s: out of memory", label);
        goto done;
    }
    /* Place the cells on a copy of the cell table, so an error leaves the
     * context as it was (up to the K/V bytes of free cells). */
    memcpy(old_seq, kv->cell_seq, (size_t)kv->n_ctx * sizeof *old_seq);
    memcpy(old_pos, kv->cell_pos, (size_t)kv->n_ctx * sizeof *old_pos);
    seq_clear(kv, seq < 0 ? -1 : seq);
    if (place_cells(kv, &h, d, dst, label) != 0) goto restore;
    if (sampler && h.sampler_bytes > 0 &&
        tessera_sampler_state_set(sampler, d + h.off_sampler, h.sampler_bytes) != 0) {
        error_wrap("state file %s", label);
        goto restore;
    }
    uint64_t layer_bytes = h.n_cells * (h.k_cell_bytes + h.v_cell_bytes);
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const uint8_t *k = d + h.off_kv + layer_bytes * (uint64_t)il;
        if (kv_cache_cells_set(kv, il, dst, (int32_t)h.n_cells, k, k + h.n_cells * h.k_cell_bytes) != 0) {
            error_wrap("state load %s", label);
            goto restore;
        }
    }
    for (uint32_t c = 0; c < h.n_cells; c++) {
        const uint8_t *p = d + h.off_cells + STATE_CELL_BYTES * c;
        kv->cell_pos[dst[c]] = (int32_t)(uint32_t)state_get(p + 4, 4);
        kv->cell_seq[dst[c]] = seq >= 0 ? (uint64_t)1 << seq : state_get(p + 8, 8);
    }
    ctx->n_last = 0;
    if (seq < 0 && h.n_logits > 0) {
        if (ctx->logits_cap < 1) {
            float *l = realloc(ctx->logits, (size_t)h.n_vocab * sizeof *l);
            if (!l) {
                error_set("state load %s: out of memory for the logits", label);
                goto done;
            }
            ctx->logits = l;
            ctx->logits_cap = 1;
        }
        memcpy(ctx->logits, d + h.off_logits, (size_t)h.n_vocab * 4);
        ctx->n_last = 1;
        ctx->last_all = false;
    }
    for (uint32_t i = 0; i < h.n_tokens; i++)
        tokens[i] = (tessera_token)(uint32_t)state_get(d + h.off_tokens + 4 * (uint64_t)i, 4);
    if (n_tokens) *n_tokens = (int32_t)h.n_tokens;
    rc = 0;
    goto done;
restore:
    memcpy(kv->cell_seq, old_seq, (size_t)kv->n_ctx * sizeof *old_seq);
    memcpy(kv->cell_pos, old_pos, (size_t)kv->n_ctx * sizeof *old_pos);
done:
    free(dst);
    free(old_seq);
    free(old_pos);
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
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                error_set("state file %s: out of memory reading it", path);
                goto done;
            }
            buf = nb;
            cap = ncap;
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
