/*
 * kv_ops_tests — the KV cache ops of the CPU plugins' op test
 * (test_cpu_ops.c includes it after its helpers: tensor,
 * tensor_new/free, tensor_bytes, view_swap, roundtrip_activations,
 * make_node, check_node, device, queue; checks with harness.h):
 *   - FLASH_ATTN with every KV cache type (and a mixed K/V pair) and the
 *     models' shapes: device vs ref, and both vs the plain f32 formula over
 *     the dequantized K/V, so a wrong oracle is caught too;
 *   - CPY of f32 rows into the cache's block types: ref's bytes.
 */
#ifndef TESSERA_TESTS_KV_OPS_TESTS_H
#define TESSERA_TESTS_KV_OPS_TESTS_H

/* FLASH_ATTN as the plain formula: q [D, n_q, H], k and v [D, n_kv, H_kv],
 * mask [n_kv, n_q] (NULL: none) as contiguous f32, n_kv <= 512; out
 * [D, H, n_q] is the result to judge. Returns max |out - plain| / max |plain|. */
static double fa_plain_rel_err(const float *q, const float *k, const float *v, const float *mask, int64_t D,
                               int64_t n_q, int64_t n_kv, int64_t H, int64_t H_kv, float scale, const float *out) {
    double err = 0.0, big = 1e-6;
    for (int64_t i = 0; i < n_q; i++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / (H / H_kv);
            double s[512], mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < n_kv && j < 512; j++) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; d++) dot += (double)q[(h * n_q + i) * D + d] * k[(g * n_kv + j) * D + d];
                s[j] = scale * dot + (mask ? mask[i * n_kv + j] : 0.0f);
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < n_kv; j++) {
                s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
                sum += s[j];
            }
            for (int64_t d = 0; d < D; d++) {
                double o = 0.0;
                for (int64_t j = 0; j < n_kv; j++) o += s[j] * v[(g * n_kv + j) * D + d];
                o = sum > 0.0 ? o / sum : 0.0;
                double e = fabs(o - out[(i * H + h) * D + d]);
                if (e > err) err = e;
                if (fabs(o) > big) big = fabs(o);
            }
        }
    return err / big;
}

/* CPY of f32 rows into the KV cache's block types (rows of a different
 * width, as the cache's [D*H_kv, T] slot takes [D, H_kv, T] keys): the
 * same bytes as ref's quantizers, zero blocks included. */
static void test_cpy_to_kv_types(void) {
    static const int32_t types[] = {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_1, TSR_DTYPE_Q5_0,
                                    TSR_DTYPE_Q5_1};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        tensor *a = tensor_new(TSR_DTYPE_F32, 64, 3, 2, 1);
        memset(a->mem, 0, 32 * sizeof(float));
        tensor *od = tensor_new(types[t], 192, 2, 1, 1), *or_ = tensor_new(types[t], 192, 2, 1, 1);
        tsr_node n = make_node(TSR_OP_CPY, 1, &a->t, NULL, NULL, NULL);
        char what[64];
        snprintf(what, sizeof what, "CPY F32 -> %s (KV cache rows)", dtype_name(types[t]));
        n.dst = &od->t;
        int ok = device->api->supports_op(device, &n) && queue->api->compute(queue, &n, 1) == TSR_OK;
        n.dst = &or_->t;
        ok = ok && ref_compute(&n, 1, NULL) == TSR_OK && !memcmp(od->mem, or_->mem, tensor_bytes(&od->t));
        printf("%s %-44s\n", ok ? "ok  " : "FAIL", what);
        EXPECT(ok, "%s (line above)", what);
        tensor_free(a), tensor_free(od), tensor_free(or_);
    }
}

/* f32 copy of a contiguous tensor (dequantized). */
static float *fa_to_f32(const tensor *x) {
    int64_t n = tsr_tensor_nelements(&x->t);
    float *f = malloc((size_t)n * sizeof *f);
    dtype_traits_get(x->t.dtype)->to_f32(x->mem, f, n);
    return f;
}

/* Whether the model's graph rounds q through Q8_0 for this K type (the
 * block types, as llama.cpp's CPU backend quantizes q): the tests do too. */
static int fa_rounds_q(int32_t kt) { return kt != TSR_DTYPE_F32 && kt != TSR_DTYPE_F16 && kt != TSR_DTYPE_BF16; }

enum { FA_MASK_NONE, FA_MASK_CAUSAL, FA_MASK_CAUSAL_ROW0_EMPTY, FA_MASK_WINDOW };

/* One FLASH_ATTN case, device vs ref (1e-4) and both vs the plain formula:
 * q [D, nq, H] (with `permuted`, a view of [D, H, nq] memory, as the
 * model's graph passes it), k and v [D, nkv, H_kv], an F16 mask [nkv, nq + 1]:
 * causal over the last nq cells, optionally with query 0 seeing nothing
 * (zeros out) or a window of 100 cells (the start of the cache masked). */
static void fa_case(int32_t kt, int32_t vt, int64_t D, int64_t nq, int64_t H, int64_t nkv, int64_t Hkv,
                    int mask_kind, int permuted) {
    tensor *q0 = tensor_new(TSR_DTYPE_F32, D, permuted ? H : nq, permuted ? nq : H, 1);
    tensor *q = fa_rounds_q(kt) ? roundtrip_activations(q0, TSR_DTYPE_Q8_0) : q0;
    tensor *k = tensor_new(kt, D, nkv, Hkv, 1), *v = tensor_new(vt, D, nkv, Hkv, 1);
    tensor *m = tensor_new(TSR_DTYPE_F16, nkv, nq + 1, 1, 1);
    float *mf = calloc((size_t)(nkv * (nq + 1)), sizeof *mf);
    for (int64_t i = 0; i < nq + 1; i++)
        for (int64_t j = 0; j < nkv; j++) {
            const int64_t pos = nkv - nq + i; /* the query's own cell */
            int masked = j > pos;
            if (mask_kind == FA_MASK_CAUSAL_ROW0_EMPTY && i == 0) masked = 1;
            if (mask_kind == FA_MASK_WINDOW && j < pos - 100) masked = 1;
            mf[i * nkv + j] = masked ? -INFINITY : 0.0f;
        }
    dtype_traits_get(TSR_DTYPE_F16)->from_f32(mf, m->mem, nkv * (nq + 1));
    tsr_tensor qv = permuted ? view_swap(q, 1, 2) : q->t;
    tensor *oa = tensor_new(TSR_DTYPE_F32, D, H, nq, 1), *or_ = tensor_new(TSR_DTYPE_F32, D, H, nq, 1);
    const int with_mask = mask_kind != FA_MASK_NONE;
    tsr_node n = make_node(TSR_OP_FLASH_ATTN, with_mask ? 4 : 3, &qv, &k->t, &v->t, with_mask ? &m->t : NULL);
    n.fparams[TSR_FLASH_ATTN_F_SCALE] = 1.0f / sqrtf((float)D);
    static const char *const mask_names[] = {"", " causal", " causal, row 0 empty", " window"};
    char what[96];
    snprintf(what, sizeof what, "FLASH_ATTN K %s V %s D %lld %lldx%lld/%lld kv %lld%s%s", dtype_name(kt),
             dtype_name(vt), (long long)D, (long long)nq, (long long)H, (long long)Hkv, (long long)nkv,
             mask_names[mask_kind], permuted ? " q view" : "");
    check_node(what, n, oa, or_, 1e-4, 1);
    /* the plain formula reads q as [D, nq, H] */
    float *qc = malloc((size_t)(D * nq * H) * sizeof *qc);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < nq; i++)
            for (int64_t d = 0; d < D; d++)
                qc[(h * nq + i) * D + d] = ((const float *)q->mem)[(permuted ? i * H + h : h * nq + i) * D + d];
    float *kf = fa_to_f32(k), *vf = fa_to_f32(v);
    for (int r = 0; r < 2; r++) {
        double e = fa_plain_rel_err(qc, kf, vf, with_mask ? mf : NULL, D, nq, nkv, H, Hkv, n.fparams[TSR_FLASH_ATTN_F_SCALE],
                                    r ? or_->mem : oa->mem);
        if (!(e <= 1e-4)) {
            ADD_FAILURE("%-44s %s vs the plain formula: rel err %.3g", what, r ? "ref" : "device", e);
        }
    }
    if (mask_kind == FA_MASK_CAUSAL_ROW0_EMPTY) { /* query 0 sees no cell: zeros */
        for (int64_t e = 0; e < D * H; e++)
            if (((const float *)oa->mem)[e] != 0.0f) {
                ADD_FAILURE("%-44s query 0 sees no cell but got %g", what, ((const float *)oa->mem)[e]);
                break;
            }
    }
    free(qc), free(kf), free(vf), free(mf);
    if (q != q0) tensor_free(q);
    tensor_free(q0), tensor_free(k), tensor_free(v), tensor_free(m), tensor_free(oa), tensor_free(or_);
}

/* Every KV cache type (and a mixed pair) on a small node; then the shapes
 * the models make, large enough for several tiles of cells, query rows
 * grouped per kv head, and decoding's cells cut into chunks per thread
 * (then merged): SmolLM2 (64 x 9/3) and Gemma 3 (256 x 4/1) prompts and
 * decoding, one kv head for 20 query heads (more than one unit's rows),
 * an odd head size, a query that sees nothing, a sliding window; and
 * the encoders' unmasked attention. */
static void test_flash_attn(void) {
    static const int32_t kvt[][2] = {
        {TSR_DTYPE_F32, TSR_DTYPE_F32},   {TSR_DTYPE_F16, TSR_DTYPE_F16},   {TSR_DTYPE_BF16, TSR_DTYPE_BF16},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0}, {TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_0}, {TSR_DTYPE_Q4_1, TSR_DTYPE_Q4_1},
        {TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_0}, {TSR_DTYPE_Q5_1, TSR_DTYPE_Q5_1}, {TSR_DTYPE_IQ4_NL, TSR_DTYPE_IQ4_NL},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0},
    };
    for (size_t t = 0; t < sizeof kvt / sizeof kvt[0]; t++)
        for (int with_mask = 0; with_mask < 2; with_mask++)
            fa_case(kvt[t][0], kvt[t][1], 64, 3, 8, 21, 2, with_mask ? FA_MASK_CAUSAL : FA_MASK_NONE, 0);
    fa_case(TSR_DTYPE_F16, TSR_DTYPE_F16, 64, 7, 9, 300, 3, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_Q5_1, TSR_DTYPE_Q4_1, 64, 7, 9, 300, 3, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_F16, TSR_DTYPE_F16, 64, 1, 9, 500, 3, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_IQ4_NL, TSR_DTYPE_IQ4_NL, 64, 1, 8, 300, 2, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_F16, TSR_DTYPE_F16, 256, 6, 4, 200, 1, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0, 256, 1, 4, 400, 1, FA_MASK_WINDOW, 1);
    fa_case(TSR_DTYPE_BF16, TSR_DTYPE_BF16, 256, 1, 4, 400, 1, FA_MASK_NONE, 0);
    fa_case(TSR_DTYPE_Q4_0, TSR_DTYPE_F16, 64, 2, 20, 70, 1, FA_MASK_CAUSAL, 1);
    fa_case(TSR_DTYPE_F16, TSR_DTYPE_F32, 40, 3, 2, 45, 2, FA_MASK_CAUSAL_ROW0_EMPTY, 0);
    /* encoders' attention without a mask, up to 64 rows a unit: Whisper's
     * heads of 16 (150 tokens: two full units and a short one), and two
     * query heads per kv head of 80 (32 + 32 + 16 columns) in F16 */
    fa_case(TSR_DTYPE_F32, TSR_DTYPE_F32, 16, 150, 4, 150, 4, FA_MASK_NONE, 1);
    fa_case(TSR_DTYPE_F16, TSR_DTYPE_F16, 80, 100, 2, 90, 1, FA_MASK_NONE, 0);
}

#endif
