/*
 * conf_gen_math — cases for the ops that compute: MUL_MAT, MUL_MAT_ID,
 * RMS_NORM, NORM, SOFT_MAX, ROPE, FLASH_ATTN, SSM_CONV, SSM_SCAN, DELTA_NET; and
 * MALFORMED, nodes every device must decline.
 */
#include <math.h>

#include "conformance/conf_internal.h"
#include "tensor/dtype.h"

#define NE(a, b, c, d) ((const int64_t[4]){a, b, c, d})
#define F32 TSR_DTYPE_F32

/* -------------------------------------------------------------- MUL_MAT */

void conf_gen_mul_mat(conf_runner *r) {
    CONF_FOR_EACH_WEIGHT_DTYPE(dt) {
        const int64_t bs = tsr_dtype_block_size(dt);
        int64_t Ks[4] = {1, 17, 64, 255};
        int n_K = 4;
        if (bs > 1) {
            /* one and a few blocks, and a model-sized K (SmolLM2's FFN is
             * 1536, TinyLlama's 2048..5632): long dot products are where
             * 8-bit activation rounding and accumulation order show */
            Ks[0] = bs == 32 ? 32 : 256;
            Ks[1] = bs == 32 ? 96 : 512;
            Ks[2] = 2048;
            n_K = 3;
        }
        for (int ki = 0; ki < n_K; ki++)
            for (int v = 0; v < 5; v++) {
                const int64_t K = Ks[ki];
                /* v0 matrix x vector (decode), v1 small batch, v2 N > M,
                 * v3 broadcast over both batch dims (GQA-like r2 = 2, r3 = 3),
                 * v4 padded weight rows, permuted activations, padded dst */
                int64_t w[4] = {K, 33, 1, 1}, x[4] = {K, 1, 1, 1};
                if (v == 1) x[1] = 7;
                if (v == 2) { w[1] = 3; x[1] = 17; }
                if (v == 3) { w[1] = 5; w[2] = 2; x[1] = 3; x[2] = 4; x[3] = 3; }
                if (v == 4) { w[1] = 9; w[2] = 3; x[1] = 4; x[2] = 3; }
                const conf_layout wl = v == 4 ? CONF_PADDED : CONF_CONTIG;
                const conf_layout xl = v == 4 ? CONF_PERMUTED : CONF_CONTIG;
                conf_case c;
                conf_case_init(&c, TSR_OP_MUL_MAT,
                               "%s [%lld, %lld, %lld, %lld]%s x F32 [%lld, %lld, %lld, %lld]%s",
                               dtype_name(dt), (long long)w[0], (long long)w[1], (long long)w[2],
                               (long long)w[3], v == 4 ? " padded" : "", (long long)x[0],
                               (long long)x[1], (long long)x[2], (long long)x[3],
                               v == 4 ? " permuted" : "");
                c.weight_src0 = true;
                c.tol = conf_tolerance(TSR_OP_MUL_MAT, dt);
                conf_case_src(r, &c, 0, dt, w, wl, conf_uniform(-1, 1));
                conf_case_src(r, &c, 1, F32, x, xl, conf_uniform(-1, 1));
                conf_case_dst(&c, F32, NE(w[1], x[1], x[2], x[3]), v == 4 ? CONF_PADDED : CONF_CONTIG);
                conf_case_run(r, &c);
            }
    }
}

/* ----------------------------------------------------------- MUL_MAT_ID */

/* One MUL_MAT_ID case: E experts [K, N], T tokens of n_b rows, n_used ids
 * per token (random in 0..E-1, so a token may name an expert twice). */
static void mul_mat_id_case(conf_runner *r, int32_t dt, int64_t K, int64_t N, int64_t E, int64_t n_used,
                            int64_t T, int64_t n_b, bool odd_layouts) {
    conf_case c;
    conf_case_init(&c, TSR_OP_MUL_MAT_ID, "%s [%lld, %lld, %lld]%s x F32 [%lld, %lld, %lld]%s, %lld of %lld per token",
                   dtype_name(dt), (long long)K, (long long)N, (long long)E, odd_layouts ? " padded" : "",
                   (long long)K, (long long)n_b, (long long)T, odd_layouts ? " permuted" : "", (long long)n_used,
                   (long long)E);
    c.weight_src0 = true;
    c.tol = conf_tolerance(TSR_OP_MUL_MAT_ID, dt);
    conf_case_src(r, &c, 0, dt, NE(K, N, E, 1), odd_layouts ? CONF_PADDED : CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 1, F32, NE(K, n_b, T, 1), odd_layouts ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 2, TSR_DTYPE_I32, NE(n_used, T, 1, 1), odd_layouts ? CONF_PADDED : CONF_CONTIG,
                  conf_index(E));
    conf_case_dst(&c, F32, NE(N, n_used, T, 1), odd_layouts ? CONF_PADDED : CONF_CONTIG);
    conf_case_run(r, &c);
}

void conf_gen_mul_mat_id(conf_runner *r) {
    CONF_FOR_EACH_WEIGHT_DTYPE(dt) {
        const int64_t bs = tsr_dtype_block_size(dt);
        /* float weights: odd K; block types: one block, a few, and a
         * model-sized K (Qwen3-30B-A3B's experts are [2048, 768]) */
        const int64_t Ks[3] = {bs == 1 ? 17 : bs, bs == 1 ? 255 : 3 * bs, 2048};
        for (int ki = 0; ki < 3; ki++) {
            const int64_t K = Ks[ki];
            mul_mat_id_case(r, dt, K, 33, 4, 2, 1, 1, false); /* decoding: one token      */
            mul_mat_id_case(r, dt, K, 17, 5, 3, 7, 1, false); /* a few tokens, repeats    */
            mul_mat_id_case(r, dt, K, 9, 3, 2, 5, 2, false);  /* n_b = n_used (down proj) */
            mul_mat_id_case(r, dt, K, 7, 3, 2, 4, 2, true);   /* padded, permuted views   */
            if (ki < 2) { /* prompts: devices group the pairs by expert */
                mul_mat_id_case(r, dt, K, 5, 8, 4, 33, 1, false);
                mul_mat_id_case(r, dt, K, 65, 2, 2, 70, 1, false); /* experts with over 64 pairs and rows */
                mul_mat_id_case(r, dt, K, 9, 4, 2, 40, 2, true);   /* down projection, views           */
            }
        }
    }
    /* ids outside 0..E-1: never read out of bounds; a device that cannot
     * refuse the node writes 0 to those slots */
    static const int32_t bad[][2] = {{4, 7}, {-1, 4}, {INT32_MAX, INT32_MIN}};
    for (int v = 0; v < 3; v++) {
        const int32_t dt = v == 0 ? F32 : v == 1 ? TSR_DTYPE_Q8_0 : TSR_DTYPE_Q4_K;
        const int64_t K = v == 2 ? 256 : 64;
        conf_case c;
        conf_case_init(&c, TSR_OP_MUL_MAT_ID, "%s [%lld, 6, 4] with ids %d and %d of 4 experts", dtype_name(dt),
                       (long long)K, (int)bad[v][0], (int)bad[v][1]);
        c.bad_data = true;
        c.weight_src0 = true;
        c.tol = conf_tolerance(TSR_OP_MUL_MAT_ID, dt);
        conf_case_src(r, &c, 0, dt, NE(K, 6, 4, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_case_src(r, &c, 1, F32, NE(K, 1, 3, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_tensor *ids = conf_case_src(r, &c, 2, TSR_DTYPE_I32, NE(2, 3, 1, 1), CONF_CONTIG, conf_index(4));
        if (ids->storage >= 0) {
            int32_t *p = (int32_t *)(void *)(c.storage[ids->storage].init + ids->t.offset);
            for (int i = 0; i < 6; i++) p[i] = bad[v][i % 2];
        }
        conf_case_dst(&c, F32, NE(6, 2, 3, 1), CONF_CONTIG);
        conf_case_run(r, &c);
    }
}

/* ------------------------------------------------------- RMS_NORM, NORM */

static void gen_norm(conf_runner *r, int32_t op, const char *name, float lo, float hi) {
    static const int64_t shapes[][4] = {
        {1, 3, 1, 1}, {3, 3, 1, 1}, {17, 3, 1, 1}, {64, 3, 2, 2}, {255, 2, 1, 1}, {1024, 2, 1, 1},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            /* v0 contiguous, eps 1e-5; v1 permuted source, padded dst, eps
             * 1e-6; v2 in place */
            const int64_t *ne = shapes[s];
            conf_case c;
            static const char *const vname[] = {"", " permuted/padded", " in place"};
            conf_case_init(&c, op, "%s [%lld, %lld, %lld, %lld]%s", name, (long long)ne[0],
                           (long long)ne[1], (long long)ne[2], (long long)ne[3], vname[v]);
            c.tol = conf_tolerance(op, F32);
            tsr_norm_params_put(&(tsr_norm_params){.eps = v == 1 ? 1e-6f : 1e-5f}, c.node.iparams, c.node.fparams);
            conf_case_src(r, &c, 0, F32, ne, v == 1 ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(lo, hi));
            conf_case_dst_as(&c, F32, ne, v == 2, v == 1 ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

void conf_gen_rms_norm(conf_runner *r) { gen_norm(r, TSR_OP_RMS_NORM, "RMS_NORM", -2, 2); }
/* an offset mean, so the subtraction matters */
void conf_gen_norm(conf_runner *r) { gen_norm(r, TSR_OP_NORM, "NORM", -1, 3); }

/* ------------------------------------------------------------- SOFT_MAX */

void conf_gen_soft_max(conf_runner *r) {
    static const int64_t widths[] = {1, 3, 17, 32, 255};
    static const int64_t row_shapes[][2] = {{1, 1}, {5, 4}}; /* rows, ne2 (heads) */
    static const int32_t masks[] = {-1, TSR_DTYPE_F32, TSR_DTYPE_F16};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (int rs = 0; rs < 2; rs++)
            for (int m = 0; m < 3; m++)
                for (int v = 0; v < 4; v++) {
                    /* v0 scale 1; v1 scale 0.125 and ALiBi (max_bias 8) when
                     * masked; v2 permuted source + padded dst; v3 in place */
                    const int64_t n = widths[w], rows = row_shapes[rs][0], heads = row_shapes[rs][1];
                    if (v >= 2 && n != 32) continue;
                    const int32_t mdt = masks[m];
                    conf_case c;
                    static const char *const vname[] = {"", " scaled", " permuted/padded", " in place"};
                    conf_case_init(&c, TSR_OP_SOFT_MAX, "SOFT_MAX [%lld, %lld, %lld] mask %s%s%s",
                                   (long long)n, (long long)rows, (long long)heads,
                                   mdt < 0 ? "none" : dtype_name(mdt), vname[v],
                                   v == 1 && mdt >= 0 ? " alibi" : "");
                    c.tol = conf_tolerance(TSR_OP_SOFT_MAX, F32);
                    const tsr_soft_max_params sp = {.scale = v == 1 ? 0.125f : 1.0f,
                                                    .max_bias = v == 1 && mdt >= 0 ? 8.0f : 0.0f};
                    tsr_soft_max_params_put(&sp, c.node.iparams, c.node.fparams);
                    const int64_t ne[4] = {n, rows, heads, 1};
                    conf_case_src(r, &c, 0, F32, ne, v == 2 ? CONF_PERMUTED : CONF_CONTIG,
                                  conf_uniform(-5, 5));
                    if (mdt >= 0) {
                        /* rows padded past the batch, as llama.cpp pads its KQ mask */
                        const int64_t gap = rows < n ? rows : n;
                        conf_case_src(r, &c, 1, mdt, NE(n, rows + 3, 1, 1), CONF_CONTIG,
                                      conf_mask(gap, -2.0f));
                    }
                    conf_case_dst_as(&c, F32, ne, v == 3, v == 2 ? CONF_PADDED : CONF_CONTIG);
                    conf_case_run(r, &c);
                }
}

/* ----------------------------------------------------------------- ROPE */

typedef struct rope_config {
    const char *what;
    int64_t head_dim, n_head, n_tokens;
    int32_t n_dims, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int freq_factors;
} rope_config;

static const rope_config rope_configs[] = {
    {"llama", 64, 3, 5, 64, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0},
    {"llama3 freq factors", 128, 2, 3, 128, 8192, 500000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 1},
    {"partial n_dims", 64, 2, 4, 32, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0},
    {"yarn", 64, 2, 3, 64, 4096, 10000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, 0},
    {"linear scaling", 32, 4, 2, 32, 0, 10000.0f, 0.5f, 0.0f, 1.0f, 32.0f, 1.0f, 0},
    {"odd head_dim", 18, 1, 1, 16, 0, 1000000.0f, 1.0f, 0.0f, 0.8f, 32.0f, 1.0f, 0},
};

void conf_gen_rope(conf_runner *r) {
    for (size_t k = 0; k < sizeof rope_configs / sizeof rope_configs[0]; k++)
        for (int mode = 0; mode < 2; mode++)
            for (int v = 0; v < 4; v++) {
                /* v0 contiguous; v1 permuted source, padded dst; v2 in
                 * place; v3 F16 source and dst */
                const rope_config *rc = &rope_configs[k];
                const int64_t ne[4] = {rc->head_dim, rc->n_head, rc->n_tokens, 1};
                conf_case c;
                static const char *const vname[] = {"", " permuted/padded", " in place", " F16"};
                conf_case_init(&c, TSR_OP_ROPE, "ROPE %s %s [%lld, %lld, %lld] n_dims %d%s",
                               mode ? "neox" : "normal", rc->what, (long long)ne[0], (long long)ne[1],
                               (long long)ne[2], (int)rc->n_dims, vname[v]);
                c.tol = conf_tolerance(TSR_OP_ROPE, F32);
                const tsr_rope_params rp = {
                    .n_dims = rc->n_dims, .mode = mode ? TSR_ROPE_NEOX : TSR_ROPE_NORMAL,
                    .n_ctx_orig = rc->n_ctx_orig, .freq_base = rc->freq_base, .freq_scale = rc->freq_scale,
                    .ext_factor = rc->ext_factor, .attn_factor = rc->attn_factor, .beta_fast = rc->beta_fast,
                    .beta_slow = rc->beta_slow,
                };
                tsr_rope_params_put(&rp, c.node.iparams, c.node.fparams);
                const int32_t dt = v == 3 ? TSR_DTYPE_F16 : F32;
                conf_case_src(r, &c, 0, dt, ne, v == 1 ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(-1, 1));
                conf_case_src(r, &c, 1, TSR_DTYPE_I32, NE(rc->n_tokens, 1, 1, 1), CONF_CONTIG,
                              conf_index(300));
                if (rc->freq_factors)
                    conf_case_src(r, &c, 2, F32, NE(rc->n_dims / 2, 1, 1, 1), CONF_CONTIG,
                                  conf_uniform(1, 8));
                conf_case_dst_as(&c, dt, ne, v == 2, v == 1 ? CONF_PADDED : CONF_CONTIG);
                conf_case_run(r, &c);
            }
}

/* ----------------------------------------------------------- FLASH_ATTN */

/* The looser of two tolerances (per field). */
static conf_tol tol_max(conf_tol a, conf_tol b) {
    return (conf_tol){fmax(a.abs, b.abs), fmax(a.rel, b.rel), fmax(a.norm, b.norm)};
}


void conf_gen_flash_attn(conf_runner *r) {
    static const int64_t configs[][5] = {
        /* D, n_q, n_kv, H, H_kv */
        {64, 1, 17, 4, 4}, {64, 7, 33, 4, 2}, {32, 5, 64, 8, 1}, {128, 3, 256, 2, 2}, {64, 1, 1, 2, 1},
        /* an encoder's heads (many queries, no mask; cpu's dense tiles):
         * widths of 32 + 32 + 8 (SigLIP's 72) and 16 + 4 */
        {72, 40, 50, 2, 2}, {20, 9, 37, 3, 3},
    };
    /* K, V types: the plain ones with every mask; BF16, the KV cache's
     * block types (ABI 1.2) and a mixed pair with an F16 mask only. */
    static const int32_t kv_types[][2] = {
        {TSR_DTYPE_F32, TSR_DTYPE_F32},   {TSR_DTYPE_F16, TSR_DTYPE_F16},   {TSR_DTYPE_BF16, TSR_DTYPE_BF16},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0}, {TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_0}, {TSR_DTYPE_Q4_1, TSR_DTYPE_Q4_1},
        {TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_0}, {TSR_DTYPE_Q5_1, TSR_DTYPE_Q5_1}, {TSR_DTYPE_IQ4_NL, TSR_DTYPE_IQ4_NL},
        {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0},
    };
    static const int32_t masks[] = {-1, TSR_DTYPE_F16, TSR_DTYPE_F32};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++)
        for (size_t t = 0; t < sizeof kv_types / sizeof kv_types[0]; t++)
            for (int m = 0; m < 3; m++)
                for (int v = 0; v < 2; v++) {
                    /* v1: q a permuted view, k/v padded views of a cache
                     * (only with an F16 mask, to keep the count small) */
                    if ((v == 1 || t >= 2) && m != 1) continue;
                    const int64_t D = configs[k][0], n_q = configs[k][1], n_kv = configs[k][2];
                    const int64_t H = configs[k][3], H_kv = configs[k][4];
                    const int32_t kt = kv_types[t][0], vt = kv_types[t][1], mdt = masks[m];
                    if (D % 32 && t >= 3) continue; /* the block types' rows are whole blocks */
                    conf_case c;
                    conf_case_init(&c, TSR_OP_FLASH_ATTN,
                                   "FLASH_ATTN D %lld n_q %lld n_kv %lld H %lld/%lld K %s V %s mask %s%s",
                                   (long long)D, (long long)n_q, (long long)n_kv, (long long)H,
                                   (long long)H_kv, dtype_name(kt), dtype_name(vt),
                                   mdt < 0 ? "none" : dtype_name(mdt), v ? " views" : "");
                    c.tol = tol_max(conf_tolerance(TSR_OP_FLASH_ATTN, kt), conf_tolerance(TSR_OP_FLASH_ATTN, vt));
                    tsr_flash_attn_params_put(&(tsr_flash_attn_params){.scale = 1.0f / sqrtf((float)D)},
                                              c.node.iparams, c.node.fparams);
                    conf_case_src(r, &c, 0, F32, NE(D, n_q, H, 1), v ? CONF_PERMUTED : CONF_CONTIG,
                                  conf_uniform(-1, 1));
                    conf_case_src(r, &c, 1, kt, NE(D, n_kv, H_kv, 1), v ? CONF_PADDED : CONF_CONTIG,
                                  conf_uniform(-1, 1));
                    conf_case_src(r, &c, 2, vt, NE(D, n_kv, H_kv, 1), v ? CONF_PADDED : CONF_CONTIG,
                                  conf_uniform(-1, 1));
                    if (mdt >= 0)
                        conf_case_src(r, &c, 3, mdt, NE(n_kv, n_q + 3, 1, 1), CONF_CONTIG,
                                      conf_mask(n_q < n_kv ? n_q : n_kv, -1.0f));
                    conf_case_dst(&c, F32, NE(D, H, n_q, 1), CONF_CONTIG);
                    conf_case_run(r, &c);
                }
}

/* ------------------------------------------------------------ MALFORMED */

/* Run the case begun in c, contiguous: source a F32, source b (NULL: none)
 * of b_dtype filled by b_fill, dst d F32; the device must decline it. */
static void run_declined(conf_runner *r, conf_case *c, const int64_t *a, int32_t b_dtype, const int64_t *b,
                         conf_fill b_fill, const int64_t *d) {
    c->expect_decline = true;
    conf_case_src(r, c, 0, F32, a, CONF_CONTIG, conf_uniform(-1, 1));
    if (b) conf_case_src(r, c, 1, b_dtype, b, CONF_CONTIG, b_fill);
    conf_case_dst(c, F32, d, CONF_CONTIG);
    conf_case_run(r, c);
}

/* The same with b F32 in [-1, 1]. */
static void run_declined_f32(conf_runner *r, conf_case *c, const int64_t *a, const int64_t *b, const int64_t *d) {
    run_declined(r, c, a, F32, b, conf_uniform(-1, 1), d);
}

/* A malformed MUL_MAT_ID over experts F32 [32, 5, 4]: activations x, ids
 * of ids_dtype (values 0..3), dst [5, ids ne0, ids ne1]. */
static void mul_mat_id_declined(conf_runner *r, const char *what, const int64_t *x, int32_t ids_dtype,
                                const int64_t *ids) {
    conf_case c;
    conf_case_init(&c, TSR_OP_MUL_MAT_ID, "MUL_MAT_ID with %s", what);
    c.expect_decline = true;
    conf_case_src(r, &c, 0, F32, NE(32, 5, 4, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 1, F32, x, CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 2, ids_dtype, ids, CONF_CONTIG, ids_dtype == F32 ? conf_uniform(0, 3) : conf_index(4));
    conf_case_dst(&c, F32, NE(5, ids[0], ids[1], 1), CONF_CONTIG);
    conf_case_run(r, &c);
}

/* ------------------------------------------------------------- SSM_CONV */

/* LFM2's short convolution (K 3) and Mamba-2's (K 4) over one token
 * (decoding), a prompt, and several sequences; an asymmetric random kernel,
 * so a flipped kernel fails. */
void conf_gen_ssm_conv(conf_runner *r) {
    static const int64_t shapes[][4] = {
        /* K, C, T, S */
        {3, 64, 1, 1}, {3, 17, 9, 1}, {4, 96, 1, 3}, {4, 33, 7, 2}, {2, 5, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 2; v++) {
            const int64_t K = shapes[i][0], C = shapes[i][1], T = shapes[i][2], S = shapes[i][3];
            conf_case c;
            conf_case_init(&c, TSR_OP_SSM_CONV, "SSM_CONV K %lld C %lld T %lld S %lld%s", (long long)K,
                           (long long)C, (long long)T, (long long)S, v ? " padded" : "");
            c.tol = conf_tolerance(TSR_OP_SSM_CONV, F32);
            conf_case_src(r, &c, 0, F32, NE(K - 1 + T, C, S, 1), v ? CONF_PADDED : CONF_CONTIG,
                          conf_uniform(-1, 1));
            conf_case_src(r, &c, 1, F32, NE(K, C, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
            conf_case_dst(&c, F32, NE(C, T, S, 1), v ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ------------------------------------------------------------- SSM_SCAN */

/* Mamba-2's scan: a random previous state (a scan that starts from zero
 * fails), groups shared by several heads (G > 1 and H / G > 1, so a wrong
 * head-to-group rule fails), dt on both sides of softplus's cut at 20. */
void conf_gen_ssm_scan(conf_runner *r) {
    static const int64_t shapes[][6] = {
        /* N, P, H, G, T, S */
        {16, 8, 4, 1, 1, 1}, {16, 4, 8, 2, 5, 1}, {8, 5, 6, 3, 1, 2}, {32, 16, 2, 1, 9, 1}, {4, 3, 4, 2, 3, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 2; v++) {
            const int64_t N = shapes[i][0], P = shapes[i][1], H = shapes[i][2], G = shapes[i][3];
            const int64_t T = shapes[i][4], S = shapes[i][5];
            conf_case c;
            conf_case_init(&c, TSR_OP_SSM_SCAN, "SSM_SCAN N %lld P %lld H %lld G %lld T %lld S %lld%s",
                           (long long)N, (long long)P, (long long)H, (long long)G, (long long)T, (long long)S,
                           v ? " padded, A [1, H]" : "");
            c.tol = conf_tolerance(TSR_OP_SSM_SCAN, F32);
            conf_case_src(r, &c, 0, F32, NE(N, P, H, S), v ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(-1, 1));
            conf_case_src(r, &c, 1, F32, NE(P * H + 2 * G * N, T, S, 1), v ? CONF_PADDED : CONF_CONTIG,
                          conf_uniform(-1, 1));
            conf_case_src(r, &c, 2, F32, NE(H, T, S, 1), CONF_CONTIG, conf_uniform(-4, v ? 24 : 2));
            conf_case_src(r, &c, 3, F32, v ? NE(1, H, 1, 1) : NE(H, 1, 1, 1), CONF_CONTIG, conf_uniform(-2, -0.1f));
            conf_case_dst(&c, F32, NE(P * H * T * S + N * P * H * S, 1, 1, 1), CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ------------------------------------------------------------ DELTA_NET */

/* The gated delta rule: a random previous state, several v heads per q/k
 * head both ways (kv_tiled 0 and 1, so a wrong head rule fails), decay
 * inputs on both sides of softplus's cut at 20, beta logits of both signs,
 * q/k rows with norms above and below 1, a q scale other than 1. */
void conf_gen_delta_net(conf_runner *r) {
    static const int64_t shapes[][6] = {
        /* Dk, Dv, H, Hk, T, S */
        {16, 16, 4, 1, 1, 1}, {8, 16, 8, 2, 5, 1}, {16, 8, 6, 3, 1, 2}, {32, 32, 2, 2, 9, 1}, {4, 5, 4, 2, 3, 2},
        {8, 80, 4, 2, 2, 1}, /* Dv past 64 (cpu-common's blocks of y) */
        {128, 16, 2, 1, 600, 2}, /* a long prompt of two sequences: Qwen3.5's Dk, past the tokens a
                                  * Vulkan dispatch takes on a CPU implementation (168: vk_fused.c) */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 2; v++) {
            const int64_t Dk = shapes[i][0], Dv = shapes[i][1], H = shapes[i][2], Hk = shapes[i][3];
            const int64_t T = shapes[i][4], S = shapes[i][5];
            conf_case c;
            conf_case_init(&c, TSR_OP_DELTA_NET, "DELTA_NET Dk %lld Dv %lld H %lld Hk %lld T %lld S %lld%s",
                           (long long)Dk, (long long)Dv, (long long)H, (long long)Hk, (long long)T, (long long)S,
                           v ? " tiled, padded, A [1, H]" : "");
            c.tol = conf_tolerance(TSR_OP_DELTA_NET, F32);
            tsr_delta_net_params_put(&(tsr_delta_net_params){.eps = 1e-6f, .scale = 1.0f / sqrtf((float)Dk),
                                                             .kv_tiled = v},
                                     c.node.iparams, c.node.fparams);
            conf_case_src(r, &c, 0, F32, NE(Dv, Dk, H, S), v ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(-1, 1));
            conf_case_src(r, &c, 1, F32, NE(2 * Hk * Dk + H * Dv, T, S, 1), v ? CONF_PADDED : CONF_CONTIG,
                          conf_uniform(-1, 1));
            conf_case_src(r, &c, 2, F32, NE(H, 2, T, S), CONF_CONTIG, conf_uniform(-4, v ? 24 : 3));
            conf_case_src(r, &c, 3, F32, v ? NE(1, H, 1, 1) : NE(H, 1, 1, 1), CONF_CONTIG, conf_uniform(-2, -0.1f));
            conf_case_dst(&c, F32, NE(Dv * H * T * S + Dv * Dk * H * S, 1, 1, 1), CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* Nodes the ABI's op list forbids; a device must answer supports_op = 0. */
void conf_gen_malformed(conf_runner *r) {
    conf_case c;

    conf_case_init(&c, TSR_OP_MUL_MAT, "MUL_MAT with K 64 vs 32");
    run_declined_f32(r, &c, NE(64, 3, 1, 1), NE(32, 2, 1, 1), NE(3, 2, 1, 1));

    conf_case_init(&c, TSR_OP_MUL_MAT, "MUL_MAT with a dst of the wrong shape");
    run_declined_f32(r, &c, NE(64, 3, 1, 1), NE(64, 2, 1, 1), NE(3, 3, 1, 1));

    conf_case_init(&c, TSR_OP_MUL_MAT, "MUL_MAT batch 3 of weights does not divide 4");
    run_declined_f32(r, &c, NE(32, 3, 3, 1), NE(32, 2, 4, 1), NE(3, 2, 4, 1));

    conf_case_init(&c, TSR_OP_ADD, "ADD with src1 [5, 3] not dividing [17, 3]");
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(5, 3, 1, 1), NE(17, 3, 1, 1));

    for (int bad = 0; bad < 2; bad++) {
        conf_case_init(&c, TSR_OP_ROPE, "ROPE with n_dims %d for head_dim 64", bad ? 66 : 63);
        const tsr_rope_params rp = {.n_dims = bad ? 66 : 63, .mode = TSR_ROPE_NORMAL, .freq_base = 10000.0f,
                                    .freq_scale = 1.0f, .attn_factor = 1.0f};
        tsr_rope_params_put(&rp, c.node.iparams, c.node.fparams);
        run_declined(r, &c, NE(64, 2, 3, 1), TSR_DTYPE_I32, NE(3, 1, 1, 1), conf_index(10), NE(64, 2, 3, 1));
    }

    conf_case_init(&c, TSR_OP_SOFT_MAX, "SOFT_MAX with a mask of 2 rows for 5");
    tsr_soft_max_params_put(&(tsr_soft_max_params){.scale = 1.0f}, c.node.iparams, c.node.fparams);
    run_declined(r, &c, NE(17, 5, 1, 1), F32, NE(17, 2, 1, 1), conf_uniform(-1, 0), NE(17, 5, 1, 1));

    conf_case_init(&c, TSR_OP_GET_ROWS, "GET_ROWS with a dst of the wrong width");
    run_declined(r, &c, NE(17, 5, 1, 1), TSR_DTYPE_I32, NE(3, 1, 1, 1), conf_index(5), NE(16, 3, 1, 1));

    conf_case_init(&c, TSR_OP_FLASH_ATTN, "FLASH_ATTN with 3 query heads over 2 kv heads");
    c.expect_decline = true;
    tsr_flash_attn_params_put(&(tsr_flash_attn_params){.scale = 0.125f}, c.node.iparams, c.node.fparams);
    conf_case_src(r, &c, 0, F32, NE(64, 1, 3, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 1, F32, NE(64, 4, 2, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 2, F32, NE(64, 4, 2, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_dst(&c, F32, NE(64, 3, 1, 1), CONF_CONTIG);
    conf_case_run(r, &c);

    conf_case_init(&c, TSR_OP_SSM_CONV, "SSM_CONV with 2 steps for a kernel of 4");
    run_declined_f32(r, &c, NE(2, 8, 1, 1), NE(4, 8, 1, 1), NE(8, 1, 1, 1));

    conf_case_init(&c, TSR_OP_SSM_CONV, "SSM_CONV with 8 channels for a kernel of 6");
    run_declined_f32(r, &c, NE(5, 8, 1, 1), NE(3, 6, 1, 1), NE(8, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SSM_SCAN, "SSM_SCAN with 6 heads in 4 groups");
    c.expect_decline = true;
    conf_case_src(r, &c, 0, F32, NE(4, 2, 6, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 1, F32, NE(2 * 6 + 2 * 4 * 4, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 2, F32, NE(6, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_src(r, &c, 3, F32, NE(6, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 0));
    conf_case_dst(&c, F32, NE(2 * 6 + 4 * 2 * 6, 1, 1, 1), CONF_CONTIG);
    conf_case_run(r, &c);

    for (int bad = 0; bad < 2; bad++) {
        /* 6 v heads over 4 q/k heads; a good shape with kv_tiled 2 */
        const int64_t Hk = bad ? 2 : 4;
        conf_case_init(&c, TSR_OP_DELTA_NET,
                       bad ? "DELTA_NET with kv_tiled 2" : "DELTA_NET with 6 v heads over 4 q/k heads");
        c.expect_decline = true;
        tsr_delta_net_params_put(&(tsr_delta_net_params){.eps = 1e-6f, .scale = 0.5f, .kv_tiled = bad ? 2 : 0},
                                 c.node.iparams, c.node.fparams);
        conf_case_src(r, &c, 0, F32, NE(2, 4, 6, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_case_src(r, &c, 1, F32, NE(2 * Hk * 4 + 6 * 2, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_case_src(r, &c, 2, F32, NE(6, 2, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_case_src(r, &c, 3, F32, NE(6, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 0));
        conf_case_dst(&c, F32, NE(2 * 6 + 2 * 4 * 6, 1, 1, 1), CONF_CONTIG);
        conf_case_run(r, &c);
    }

    conf_case_init(&c, TSR_OP_CPY, "CPY of 51 elements into 48");
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NULL, NE(16, 3, 1, 1));

    /* experts F32 [32, 5, 4] */
    mul_mat_id_declined(r, "3 rows per token for 2 experts used", NE(32, 3, 2, 1), TSR_DTYPE_I32, NE(2, 2, 1, 1));
    mul_mat_id_declined(r, "F32 ids", NE(32, 1, 2, 1), F32, NE(2, 2, 1, 1));
    mul_mat_id_declined(r, "ids for 3 tokens and 2 token rows", NE(32, 1, 2, 1), TSR_DTYPE_I32, NE(2, 3, 1, 1));

    conf_case_init(&c, TSR_OP_TOP_K, "TOP_K of 9 from rows of 8");
    c.expect_decline = true;
    conf_case_src(r, &c, 0, F32, NE(8, 3, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_dst(&c, TSR_DTYPE_I32, NE(9, 3, 1, 1), CONF_CONTIG);
    conf_case_run(r, &c);

    conf_case_init(&c, TSR_OP_TOP_K, "TOP_K into an F32 dst");
    run_declined_f32(r, &c, NE(8, 3, 1, 1), NULL, NE(2, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SUM_ROWS, "SUM_ROWS with a dst of 2 columns");
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NULL, NE(2, 3, 1, 1));

    conf_case_init(&c, TSR_OP_DIV, "DIV by 4 rows broadcast over 6");
    run_declined_f32(r, &c, NE(17, 6, 1, 1), NE(17, 4, 1, 1), NE(17, 6, 1, 1));

    /* gate [17, 3]; valid alpha and limit unless the case is about them */
    const tsr_swiglu_oai_params oai = {.alpha = 1.702f, .limit = 7.0f};
    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with up [17, 1] broadcast over gate [17, 3]");
    tsr_swiglu_oai_params_put(&oai, c.node.iparams, c.node.fparams);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(17, 1, 1, 1), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with a dst of 16 columns for 17");
    tsr_swiglu_oai_params_put(&oai, c.node.iparams, c.node.fparams);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(17, 3, 1, 1), NE(16, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with an I32 up");
    tsr_swiglu_oai_params_put(&oai, c.node.iparams, c.node.fparams);
    run_declined(r, &c, NE(17, 3, 1, 1), TSR_DTYPE_I32, NE(17, 3, 1, 1), conf_index(5), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with an F16 up (the op is all F32)");
    tsr_swiglu_oai_params_put(&oai, c.node.iparams, c.node.fparams);
    run_declined(r, &c, NE(17, 3, 1, 1), TSR_DTYPE_F16, NE(17, 3, 1, 1), conf_uniform(-1, 1), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with limit 0");
    tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = 1.702f, .limit = 0.0f}, c.node.iparams,
                              c.node.fparams);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(17, 3, 1, 1), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with alpha -1.702");
    tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = -1.702f, .limit = 7.0f}, c.node.iparams,
                              c.node.fparams);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(17, 3, 1, 1), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI with an infinite limit");
    tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = 1.702f, .limit = INFINITY}, c.node.iparams,
                              c.node.fparams);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NE(17, 3, 1, 1), NE(17, 3, 1, 1));

    conf_case_init(&c, TSR_OP_GELU_ERF, "GELU_ERF with a dst of 16 columns for 17");
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NULL, NE(16, 3, 1, 1));

    conf_case_init(&c, TSR_OP_COUNT + 100, "op number %d, unknown to this ABI", TSR_OP_COUNT + 100);
    run_declined_f32(r, &c, NE(17, 3, 1, 1), NULL, NE(17, 3, 1, 1));
}

/* ---------------------------------------------------------------- GRAPH */

/* Several dependent nodes in one compute() call: a backend that runs work
 * asynchronously must order it (a later node reads what an earlier one
 * wrote, or overwrites it in place). Errors propagate along a chain, so
 * later nodes get the tolerance of the loosest node before them. */

/* rms_norm -> mul by a norm weight -> mul_mat -> silu -> add bias */
static void graph_ffn(conf_runner *r, int32_t wdt) {
    const int64_t K = 256, M = 48, N = 5;
    conf_case c;
    conf_case_init(&c, TSR_OP_RMS_NORM, "GRAPH rms_norm, mul, mul_mat %s, silu, add", dtype_name(wdt));
    conf_tol tol = conf_tolerance(TSR_OP_RMS_NORM, F32);
    c.tol = tol;
    tsr_norm_params_put(&(tsr_norm_params){.eps = 1e-5f}, c.node.iparams, c.node.fparams);
    conf_case_src(r, &c, 0, F32, NE(K, N, 1, 1), CONF_CONTIG, conf_uniform(-2, 2));
    conf_case_dst(&c, F32, NE(K, N, 1, 1), CONF_CONTIG);

    conf_case_next_node(&c, TSR_OP_MUL);
    c.tol = tol = tol_max(tol, conf_tolerance(TSR_OP_MUL, F32));
    conf_case_src_from(&c, 0, 0);
    conf_case_src(r, &c, 1, F32, NE(K, 1, 1, 1), CONF_CONTIG, conf_uniform(0.5f, 1.5f));
    conf_case_dst(&c, F32, NE(K, N, 1, 1), CONF_CONTIG);

    conf_case_next_node(&c, TSR_OP_MUL_MAT);
    c.tol = tol = tol_max(tol, conf_tolerance(TSR_OP_MUL_MAT, wdt));
    c.weight_src0 = true;
    conf_case_src(r, &c, 0, wdt, NE(K, M, 1, 1), CONF_CONTIG, conf_uniform(-0.1f, 0.1f));
    conf_case_src_from(&c, 1, 1);
    conf_case_dst(&c, F32, NE(M, N, 1, 1), CONF_CONTIG);

    /* silu's and add's outputs are judged relative to the matmul's scale */
    conf_case_next_node(&c, TSR_OP_SILU);
    c.tol = tol = tol_max(tol, conf_tolerance(TSR_OP_SILU, F32));
    conf_case_src_from(&c, 0, 2);
    conf_case_dst(&c, F32, NE(M, N, 1, 1), CONF_CONTIG);

    conf_case_next_node(&c, TSR_OP_ADD);
    c.tol = tol_max(tol, conf_tolerance(TSR_OP_ADD, F32));
    conf_case_src_from(&c, 0, 3);
    conf_case_src(r, &c, 1, F32, NE(M, 1, 1, 1), CONF_CONTIG, conf_uniform(-0.5f, 0.5f));
    conf_case_dst(&c, F32, NE(M, N, 1, 1), CONF_CONTIG);
    conf_case_run(r, &c);
}

/* Swap dims 1 and 2 of the source just taken from an earlier node. */
static void permute_src_12(conf_case *c, int i) {
    tsr_tensor *t = &c->src[i].t;
    int64_t ne = t->ne[1], nb = t->nb[1];
    t->ne[1] = t->ne[2];
    t->nb[1] = t->nb[2];
    t->ne[2] = ne;
    t->nb[2] = nb;
}

/* rope q and k [D, heads, tokens], then attention over permuted views */
static void graph_attention(conf_runner *r, int32_t kv_dtype) {
    const int64_t D = 32, H = 4, H_kv = 2, T = 3;
    conf_case c;
    conf_case_init(&c, TSR_OP_ROPE, "GRAPH rope q, rope k, flash_attn over permuted views, v %s",
                   dtype_name(kv_dtype));
    for (int k = 0; k < 2; k++) {
        if (k) conf_case_next_node(&c, TSR_OP_ROPE);
        c.tol = conf_tolerance(TSR_OP_ROPE, F32);
        const tsr_rope_params rp = {.n_dims = (int32_t)D, .mode = TSR_ROPE_NEOX, .freq_base = 10000.0f,
                                    .freq_scale = 1.0f, .attn_factor = 1.0f};
        tsr_rope_params_put(&rp, c.node.iparams, c.node.fparams);
        conf_case_src(r, &c, 0, F32, NE(D, k ? H_kv : H, T, 1), CONF_CONTIG, conf_uniform(-1, 1));
        conf_case_src(r, &c, 1, TSR_DTYPE_I32, NE(T, 1, 1, 1), CONF_CONTIG, conf_index(64));
        conf_case_dst(&c, F32, NE(D, k ? H_kv : H, T, 1), CONF_CONTIG);
    }
    conf_case_next_node(&c, TSR_OP_FLASH_ATTN);
    c.tol = tol_max(conf_tolerance(TSR_OP_ROPE, F32), conf_tolerance(TSR_OP_FLASH_ATTN, kv_dtype));
    tsr_flash_attn_params_put(&(tsr_flash_attn_params){.scale = 1.0f / sqrtf((float)D)}, c.node.iparams,
                              c.node.fparams);
    conf_case_src_from(&c, 0, 0);
    permute_src_12(&c, 0); /* [D, T, H] */
    if (kv_dtype == F32) {
        conf_case_src_from(&c, 1, 1);
        permute_src_12(&c, 1); /* [D, T, H_kv] */
    } else {
        conf_case_src(r, &c, 1, kv_dtype, NE(D, T, H_kv, 1), CONF_PERMUTED, conf_uniform(-1, 1));
    }
    conf_case_src(r, &c, 2, kv_dtype, NE(D, T, H_kv, 1), CONF_PERMUTED, conf_uniform(-1, 1));
    conf_case_src(r, &c, 3, TSR_DTYPE_F16, NE(T, T + 3, 1, 1), CONF_CONTIG, conf_mask(T, 0.0f));
    conf_case_dst(&c, F32, NE(D, H, T, 1), CONF_CONTIG);
    conf_case_run(r, &c);
}

/* scale, silu, add, mul, each in place on one buffer */
static void graph_in_place(conf_runner *r) {
    const int64_t ne[4] = {255, 3, 1, 1};
    conf_case c;
    conf_case_init(&c, TSR_OP_SCALE, "GRAPH scale, silu, add, mul all in place on [255, 3]");
    conf_tol tol = conf_tolerance(TSR_OP_SILU, F32);
    c.tol = tol;
    tsr_scale_params_put(&(tsr_scale_params){.scale = 0.5f, .bias = 1.0f}, c.node.iparams, c.node.fparams);
    conf_case_src(r, &c, 0, F32, ne, CONF_PADDED, conf_uniform(-4, 4));
    conf_case_dst_inplace(&c, 0);
    conf_case_next_node(&c, TSR_OP_SILU);
    c.tol = tol;
    conf_case_src_from(&c, 0, 0);
    conf_case_dst_inplace(&c, 0);
    conf_case_next_node(&c, TSR_OP_ADD);
    c.tol = tol;
    conf_case_src_from(&c, 0, 1);
    conf_case_src(r, &c, 1, F32, NE(255, 1, 1, 1), CONF_CONTIG, conf_uniform(-1, 1));
    conf_case_dst_inplace(&c, 0);
    conf_case_next_node(&c, TSR_OP_MUL);
    c.tol = tol;
    conf_case_src_from(&c, 0, 2);
    conf_case_src(r, &c, 1, F32, NE(1, 3, 1, 1), CONF_CONTIG, conf_uniform(-2, 2));
    conf_case_dst_inplace(&c, 0);
    conf_case_run(r, &c);
}

void conf_gen_graph(conf_runner *r) {
    /* one dtype of each family: float, half, 8-bit blocks, k-quants */
    CONF_FOR_EACH_WEIGHT_DTYPE(dt)
        if (dt == F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_Q8_0 || dt == TSR_DTYPE_Q4_K) graph_ffn(r, dt);
    graph_attention(r, F32);
    graph_attention(r, TSR_DTYPE_F16);
    graph_in_place(r);
}
