/*
 * vk_fused — the plans where nodes and dispatches are not one to one
 * (vk_queue.c asks before planning each node):
 *
 * - MUL_MAT_ID of a prompt batch grouped by expert (GPUs; more than
 *   VK_MMV_MAX_COLS tokens): mul_mat_id_group.comp lists each expert's
 *   (token, slot) pairs in the queue's scratch buffer, then the tiled GEMM
 *   (mul_mat_tiled.comp built with MUL_MAT_ID) multiplies each expert's
 *   weights by its pairs' activations 64 at a time, as the dense product's
 *   prompt kernel does: an expert's weights are read once per 64 of its
 *   pairs, not once per pair as mul_mat_id.comp (one output per
 *   invocation) reads them. TESSERA_VULKAN_MATMUL=tiled groups at every
 *   size, matvec never.
 *
 * - DELTA_NET of a long prompt in chunks of tokens (CPU implementations):
 *   delta_net.comp runs, per token, three loops over Dk (each with its
 *   final test) and the token loop's iteration, Dk + 1 more before the
 *   first, and lavapipe ends an invocation's loops silently after 65535
 *   iterations in all (attn_fits in vk_ops.c), so a dispatch there takes at
 *   most (65535 - Dk - 16) / (3 Dk + 4) tokens (Dk 128: 168; measured: 168
 *   pass, 169 end early and fail); the next one
 *   continues from the state the last left in dst's state part. GPUs run
 *   every token in one dispatch. TESSERA_VULKAN_DELTA_NET_CHUNK=N forces
 *   chunks of at most N tokens (tests).
 *
 * - RMS_NORM (or NORM) followed by the MUL of its result by a weight, as
 *   every norm of a transformer block is, runs as one row_norm.comp
 *   dispatch: one pass over the row, no second dispatch, no barrier between
 *   them and no re-read of the normalized row. Exact: the same f32 multiply.
 *   The plugin sees one split, not who reads a tensor later, so the
 *   normalized rows are still stored unless the MUL overwrites them in
 *   place (the scheduler does that when nothing else reads them: then the
 *   unfused graph leaves the product there too).
 * - ROPE followed by the CPY of its result into the KV cache (the new K
 *   rows of a step: core/src/model/blocks.c makes rope(k) the node right
 *   before that copy) runs as one rope.comp dispatch that also stores each
 *   rotated value in the cache's dtype (F32, F16, BF16): no second
 *   dispatch, no barrier, no re-read of the rotated rows. Exact: the CPY's
 *   conversion of the same f32. The rotated rows are still stored (the
 *   plugin cannot know that no later split reads them). Quantized caches
 *   keep the two dispatches (quantize.comp works a block at a time).
 *   With profiling the pair's time counts as the ROPE's.
 * TESSERA_VULKAN_NO_FUSE=1 turns both fusions off (tests compare both).
 * - FLASH_ATTN split over its keys (flash_attn.comp with P.u[1] splits,
 *   then flash_attn_reduce.comp): decoding has n_q = 1, so one workgroup per
 *   (query, head) would be a few dozen workgroups on a GPU with a hundred or
 *   more compute units, each walking the whole cache. The partial states go
 *   through the queue's scratch buffer.
 * - FLASH_ATTN for prompts (8 queries or more, not split) by
 *   flash_attn_tiled.comp, 8 queries of a head sharing each K/V tile.
 * TESSERA_VULKAN_FLASH_ATTN=workgroup uses neither (one workgroup per
 * (query, head) over all keys); =split and =tiled force one at every size
 * (split: 16 keys a split), for tests.
 */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* t and u are the same tensor: same bytes, dtype, shape and strides. */
static bool same_tensor(const tsr_tensor *t, const tsr_tensor *u) {
    return t->buffer == u->buffer && t->offset == u->offset && t->dtype == u->dtype &&
           memcmp(t->ne, u->ne, sizeof t->ne) == 0 && memcmp(t->nb, u->nb, sizeof t->nb) == 0;
}

/* t and u share a byte of a device buffer. */
static bool overlap(const tsr_tensor *t, const tsr_tensor *u) {
    if (!t->buffer || t->buffer != u->buffer) return false;
    return t->offset < u->offset + vk_tensor_extent(u) && u->offset < t->offset + vk_tensor_extent(t);
}

bool vk_norm_mul_fusable(const vk_device *d, const tsr_node *norm, const tsr_node *mul, bool *keep_mid) {
    if (!d->fuse || (norm->op != TSR_OP_RMS_NORM && norm->op != TSR_OP_NORM) || mul->op != TSR_OP_MUL) return false;
    if (mul->n_src < 2 || !mul->src[0] || !mul->src[1] || !same_tensor(mul->src[0], norm->dst)) return false;
    const tsr_tensor *x = norm->src[0], *w = mul->src[1], *mid = norm->dst, *dst = mul->dst;
    if (mid->dtype != TSR_DTYPE_F32 || dst->dtype != TSR_DTYPE_F32 || x->dtype != TSR_DTYPE_F32) return false;
    if (memcmp(dst->ne, mid->ne, sizeof dst->ne) != 0) return false;
    /* Each element is read once and written once by one invocation: the
     * input must not be anything the pass writes, the product may only
     * replace the normalized rows exactly. */
    if (overlap(x, mid) || overlap(x, dst) || overlap(w, mid) || overlap(w, dst)) return false;
    const bool in_place = same_tensor(dst, mid);
    if (!in_place && overlap(dst, mid)) return false;
    if (!vk_op_supported(d, norm, NULL, 0) || !vk_op_supported(d, mul, NULL, 0)) return false;
    *keep_mid = !in_place;
    return true;
}

void vk_plan_norm_mul(const vk_device *d, const tsr_node *norm, const tsr_node *mul, bool keep_mid, vk_dispatch *out) {
    vk_op_plan(d, norm, out); /* row_norm: src0, eps, mode, grid by rows */
    vk_dispatch m;
    vk_op_plan(d, mul, &m);
    vk_params *p = &out->p;
    /* tensor 1: the weight, 2: the normalized rows, 4: the product */
    p->dt[1] = m.p.dt[1];
    memcpy(p->ne[1], m.p.ne[1], sizeof p->ne[1]);
    memcpy(p->nb[1], m.p.nb[1], sizeof p->nb[1]);
    memcpy(p->ne[2], out->p.ne[4], sizeof p->ne[2]);
    memcpy(p->nb[2], out->p.nb[4], sizeof p->nb[2]);
    p->dt[2] = out->p.dt[4];
    p->dt[4] = m.p.dt[4];
    memcpy(p->ne[4], m.p.ne[4], sizeof p->ne[4]);
    memcpy(p->nb[4], m.p.nb[4], sizeof p->nb[4]);
    p->u[1] = 1;
    p->u[2] = keep_mid;
}

bool vk_rope_cpy_fusable(const vk_device *d, const tsr_node *rope, const tsr_node *cpy) {
    if (!d->fuse || rope->op != TSR_OP_ROPE || cpy->op != TSR_OP_CPY) return false;
    if (cpy->n_src < 1 || !cpy->src[0] || !same_tensor(cpy->src[0], rope->dst)) return false;
    const tsr_tensor *x = rope->src[0], *mid = rope->dst, *cache = cpy->dst;
    /* The rotated value goes to the cache as the CPY would convert it: from
     * the f32 the rope stores, so no rounding is skipped or added. */
    if (mid->dtype != TSR_DTYPE_F32) return false;
    if (cache->dtype != TSR_DTYPE_F32 && cache->dtype != TSR_DTYPE_F16 && cache->dtype != TSR_DTYPE_BF16) return false;
    if (memcmp(mid->ne, x->ne, sizeof mid->ne) != 0 || tsr_tensor_nelements(cache) != tsr_tensor_nelements(mid))
        return false;
    /* Unfused, the CPY writes after the rope has read everything; fused,
     * the cache is written while other invocations still read: it must
     * share no byte with what the rope reads or writes. */
    for (int i = 0; i < rope->n_src; i++)
        if (rope->src[i] && overlap(cache, rope->src[i])) return false;
    if (overlap(cache, mid)) return false;
    return vk_op_supported(d, rope, NULL, 0) && vk_op_supported(d, cpy, NULL, 0);
}

void vk_plan_rope_cpy(const vk_device *d, const tsr_node *rope, const tsr_node *cpy, vk_dispatch *out) {
    vk_op_plan(d, rope, out); /* rope.comp: x, positions, factors, grid by rows */
    vk_params *p = &out->p;
    /* tensor 3: the rotated rows (the rope's dst), 4: the cache view */
    p->dt[3] = p->dt[4];
    memcpy(p->ne[3], p->ne[4], sizeof p->ne[3]);
    memcpy(p->nb[3], p->nb[4], sizeof p->nb[3]);
    const tsr_tensor *cache = cpy->dst;
    p->dt[4] = (uint32_t)cache->dtype;
    for (int i = 0; i < TSR_MAX_DIMS; i++) {
        p->ne[4][i] = (uint32_t)cache->ne[i];
        p->nb[4][i] = (uint32_t)cache->nb[i];
    }
    p->u[3] = 1;
}

enum {
    SPLIT_MAX = 256,          /* splits of one node at most */
    SPLIT_FORCED_KEYS = 16,   /* keys a split when forced (tests reach several splits) */
    SPLIT_MIN_KEYS = 256,     /* keys a split at least otherwise */
    SPLIT_WORKGROUPS = 256,   /* n_q * H below this: decoding, split */
    SPLIT_TARGET = 32,        /* splits the keys aim at (auto) */
};

uint32_t vk_attn_splits(const vk_device *d, const tsr_node *node, uint32_t *keys_per_split) {
    *keys_per_split = 0;
    if (node->op != TSR_OP_FLASH_ATTN || d->attn_per_invocation || d->attn_mode == VK_ATTN_WORKGROUP ||
        d->attn_mode == VK_ATTN_TILED)
        return 1;
    const uint64_t n_kv = (uint64_t)node->src[1]->ne[1];
    const uint64_t items = (uint64_t)(node->src[0]->ne[1] * node->src[0]->ne[2]);
    uint64_t kps;
    if (d->attn_mode == VK_ATTN_SPLIT) {
        kps = SPLIT_FORCED_KEYS;
    } else {
        /* Not measured yet (bench/GPU.md: to measure): enough workgroups to
         * fill a large GPU, each over a few hundred keys at least. */
        if (items >= SPLIT_WORKGROUPS) return 1;
        kps = (n_kv + SPLIT_TARGET - 1) / SPLIT_TARGET;
        kps = (kps + 63) / 64 * 64;
        if (kps < SPLIT_MIN_KEYS) kps = SPLIT_MIN_KEYS;
    }
    if ((n_kv + kps - 1) / kps > SPLIT_MAX) kps = (n_kv + SPLIT_MAX - 1) / SPLIT_MAX;
    const uint64_t splits = (n_kv + kps - 1) / kps;
    if (splits < 2) return 1;
    *keys_per_split = (uint32_t)kps;
    return (uint32_t)splits;
}

enum {
    TILED_QUERIES = 8,           /* flash_attn_tiled.comp's BQ; fewer: decoding */
    TILED_SHARED = 4 * (8 * 256 + 16 * 256 + 8 * 16), /* its shared memory */
};

bool vk_attn_tiled(const vk_device *d, const tsr_node *node) {
    if (node->op != TSR_OP_FLASH_ATTN || d->attn_per_invocation) return false;
    if (d->props.limits.maxComputeSharedMemorySize < TILED_SHARED) return false;
    if (d->attn_mode == VK_ATTN_TILED) return true;
    uint32_t keys;
    return d->attn_mode == VK_ATTN_AUTO && node->src[0]->ne[1] >= TILED_QUERIES && vk_attn_splits(d, node, &keys) == 1;
}

uint64_t vk_attn_scratch_bytes(const tsr_node *node, uint32_t splits) {
    const tsr_tensor *q = node->src[0];
    return (uint64_t)(q->ne[0] + 2) * splits * (uint64_t)q->ne[1] * (uint64_t)q->ne[2] * sizeof(float);
}

/* The scratch as tensor k of p: F32 [D + 2, S, n_q, H], contiguous. */
static void put_scratch(vk_params *p, int k, const tsr_node *node, uint32_t splits) {
    const tsr_tensor *q = node->src[0];
    const uint32_t ne[4] = {(uint32_t)q->ne[0] + 2, splits, (uint32_t)q->ne[1], (uint32_t)q->ne[2]};
    p->dt[k] = TSR_DTYPE_F32;
    uint32_t stride = sizeof(float);
    for (int i = 0; i < 4; i++) {
        p->ne[k][i] = ne[i];
        p->nb[k][i] = stride;
        stride *= ne[i];
    }
}

void vk_plan_attn_split(const vk_device *d, const tsr_node *node, uint32_t splits, uint32_t keys_per_split,
                        vk_dispatch *partial, vk_dispatch *reduce) {
    vk_op_plan(d, node, partial); /* q, k, v, mask, pipeline per k/v pair */
    partial->shader = d->subgroup_arith ? VK_SHADER_FLASH_ATTN_SG : VK_SHADER_FLASH_ATTN;
    const uint64_t items = (uint64_t)(node->src[0]->ne[1] * node->src[0]->ne[2]);
    partial->p.u[1] = splits;
    partial->p.u[2] = keys_per_split;
    put_scratch(&partial->p, 4, node, splits);
    vk_grid(items * splits, partial->groups);

    memset(reduce, 0, sizeof *reduce);
    reduce->shader = VK_SHADER_FLASH_ATTN_REDUCE;
    put_scratch(&reduce->p, 0, node, splits);
    const tsr_tensor *dst = node->dst;
    reduce->p.dt[4] = (uint32_t)dst->dtype;
    for (int i = 0; i < 4; i++) {
        reduce->p.ne[4][i] = (uint32_t)dst->ne[i];
        reduce->p.nb[4][i] = (uint32_t)dst->nb[i];
    }
    vk_grid(items, reduce->groups);
}

bool vk_moe_grouped(const vk_device *d, const tsr_node *node) {
    if (node->op != TSR_OP_MUL_MAT_ID || d->matmul_per_invocation) return false;
    if (node->src[0]->ne[2] > VK_MOE_MAX_EXPERTS) return false;
    const char *forced = getenv("TESSERA_VULKAN_MATMUL");
    if (forced && strcmp(forced, "tiled") == 0) return true;
    if (forced && strcmp(forced, "matvec") == 0) return false;
    return node->src[2]->ne[1] > VK_MMV_MAX_COLS;
}

uint64_t vk_moe_scratch_bytes(const tsr_node *node) {
    const tsr_tensor *ids = node->src[2];
    return (uint64_t)(node->src[0]->ne[2] + 1 + ids->ne[0] * ids->ne[1]) * sizeof(uint32_t);
}

void vk_plan_moe_grouped(const vk_device *d, const tsr_node *node, vk_dispatch *group, vk_dispatch *gemm) {
    vk_op_plan(d, node, group); /* P.u: [0] N, [1] n_used, [2] T, [3] K, [4] E, [5] n_b; tensors */
    const uint32_t N = group->p.u[0], n_used = group->p.u[1], T = group->p.u[2], K = group->p.u[3],
                   E = group->p.u[4], n_b = group->p.u[5];
    group->shader = VK_SHADER_MUL_MAT_ID_GROUP;
    group->spec[0] = 0;
    group->groups[0] = group->groups[1] = group->groups[2] = 1;

    *gemm = *group;
    gemm->shader = vk_shader_for_weights(VK_SHADER_MUL_MAT_ID_TILED, node->src[0]->dtype);
    gemm->spec[0] = (uint32_t)node->src[0]->dtype;
    gemm->spec[1] = (uint32_t)node->src[1]->dtype;
    vk_params *p = &gemm->p;
    const uint32_t pairs = n_used * T, row_tiles = (N + VK_TILE_M - 1) / VK_TILE_M,
                   col_tiles = (pairs + VK_TILE_N - 1) / VK_TILE_N;
    p->u[0] = N;
    p->u[1] = pairs;
    p->u[2] = row_tiles;
    p->u[3] = n_used;
    p->u[4] = E;
    p->u[5] = K;
    p->u[6] = n_b;
    p->u[7] = col_tiles;
    vk_grid((uint64_t)row_tiles * col_tiles * E, gemm->groups);
}

int64_t vk_delta_net_chunk_tokens(const vk_device *d, const tsr_node *node) {
    const int64_t Dk = node->src[0]->ne[1], T = node->src[1]->ne[1];
    int64_t n = T;
    const char *forced = getenv("TESSERA_VULKAN_DELTA_NET_CHUNK");
    if (forced && atoll(forced) > 0) n = atoll(forced);
    if (d && d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        const int64_t fit = (65535 - Dk - 16) / (3 * Dk + 4);
        if (fit < n) n = fit;
    }
    return n;
}

uint32_t vk_delta_net_chunks(const vk_device *d, const tsr_node *node) {
    if (node->op != TSR_OP_DELTA_NET) return 1;
    const int64_t per = vk_delta_net_chunk_tokens(d, node), T = node->src[1]->ne[1];
    return per < 1 || T <= per ? 1 : (uint32_t)((T + per - 1) / per);
}

void vk_plan_delta_net_chunk(const vk_device *d, const tsr_node *node, uint32_t chunk, vk_dispatch *out) {
    vk_op_plan(d, node, out); /* P.u[2], [3]: tokens 0..T-1 */
    const int64_t per = vk_delta_net_chunk_tokens(d, node), T = node->src[1]->ne[1];
    const int64_t t0 = (int64_t)chunk * per, t1 = t0 + per < T ? t0 + per : T;
    out->p.u[2] = (uint32_t)t0;
    out->p.u[3] = (uint32_t)t1;
}
