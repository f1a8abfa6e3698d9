/*
 * kv_ops_tests — the KV cache ops of the CPU plugins' op test
 * (test_cpu_ops.c includes it after its helpers: tensor,
 * tensor_new/free, tensor_bytes, make_node, check_node, device, queue,
 * checks, failures):
 *   - FLASH_ATTN with every KV cache type (and a mixed K/V pair): device vs
 *     ref, and both vs the plain f32 formula over the dequantized K/V, so a
 *     wrong oracle is caught too;
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
        checks++;
        n.dst = &od->t;
        int ok = device->api->supports_op(device, &n) && queue->api->compute(queue, &n, 1) == TSR_OK;
        n.dst = &or_->t;
        ok = ok && ref_compute(&n, 1, NULL) == TSR_OK && !memcmp(od->mem, or_->mem, tensor_bytes(&od->t));
        printf("%s %-44s\n", ok ? "ok  " : "FAIL", what);
        if (!ok) failures++;
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

/* Every KV cache type (and a mixed pair), device vs ref, and both vs the
 * plain formula over the dequantized K/V. */
static void test_flash_attn(void) {
    static const int32_t kvt[][2] = {
        {TSR_DTYPE_F32, TSR_DTYPE_F32},   {TSR_DTYPE_F16, TSR_DTYPE_F16},   {TSR_DTYPE_BF16, TSR_DTYPE_BF16},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0}, {TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_0}, {TSR_DTYPE_Q4_1, TSR_DTYPE_Q4_1},
        {TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_0}, {TSR_DTYPE_Q5_1, TSR_DTYPE_Q5_1}, {TSR_DTYPE_IQ4_NL, TSR_DTYPE_IQ4_NL},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0},
    };
    for (size_t t = 0; t < sizeof kvt / sizeof kvt[0]; t++)
        for (int with_mask = 0; with_mask < 2; with_mask++) {
            const int64_t D = 64, nq = 3, H = 8, nkv = 21, Hkv = 2;
            tensor *q = tensor_new(TSR_DTYPE_F32, D, nq, H, 1);
            tensor *k = tensor_new(kvt[t][0], D, nkv, Hkv, 1), *v = tensor_new(kvt[t][1], D, nkv, Hkv, 1);
            tensor *m = tensor_new(TSR_DTYPE_F16, nkv, 4, 1, 1);
            float mf[21 * 4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < nkv; j++) mf[i * nkv + j] = j > 18 + i ? -INFINITY : 0.0f;
            dtype_traits_get(TSR_DTYPE_F16)->from_f32(mf, m->mem, nkv * 4);
            tensor *oa = tensor_new(TSR_DTYPE_F32, D, H, nq, 1), *or_ = tensor_new(TSR_DTYPE_F32, D, H, nq, 1);
            tsr_node n = make_node(TSR_OP_FLASH_ATTN, with_mask ? 4 : 3, &q->t, &k->t, &v->t, with_mask ? &m->t : NULL);
            n.fparams[0] = 0.125f;
            char what[64];
            snprintf(what, sizeof what, "FLASH_ATTN K %s V %s GQA 8/2%s", dtype_name(kvt[t][0]),
                     dtype_name(kvt[t][1]), with_mask ? " mask" : "");
            check_node(what, n, oa, or_, 1e-4, 1);
            float *kf = fa_to_f32(k), *vf = fa_to_f32(v);
            for (int r = 0; r < 2; r++) {
                double e = fa_plain_rel_err(q->mem, kf, vf, with_mask ? mf : NULL, D, nq, nkv, H, Hkv, 0.125f,
                                            r ? or_->mem : oa->mem);
                checks++;
                if (!(e <= 1e-4)) {
                    printf("FAIL %-44s %s vs the plain formula: rel err %.3g\n", what, r ? "ref" : "device", e);
                    failures++;
                }
            }
            free(kf), free(vf);
            tensor_free(q), tensor_free(k), tensor_free(v), tensor_free(m), tensor_free(oa), tensor_free(or_);
        }
}

#endif
