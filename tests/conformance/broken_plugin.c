/*
 * broken_plugin — a deliberately wrong backend, built from plugins-api/ only,
 * to prove the conformance suite catches what it claims to catch.
 *
 * One CPU device with host-visible malloc'd buffers. Per op:
 *   ADD    correct for F32 (honours strides and broadcasting): must pass
 *   MUL    correct except the first element of dst is off by 1e-3: must fail
 *   GELU   assumes contiguous tensors (ignores nb): must fail on views
 *   SCALE  correct values, but zeroes 4 bytes after dst's last element
 *          when there is room in the buffer: must fail
 *   MUL_MAT says yes to every node, even malformed ones, then computes
 *          nothing: must fail (and MALFORMED must fail)
 *   MUL_MAT_ID (F32) two bugs: every slot reads the token's first row
 *          (n_b = n_used taken for 1), and an expert id out of range is
 *          clamped into it (read, not refused): must fail on both
 *   SSM_CONV (ABI 1.4 build only) flips the kernel (w[K-1-k], a
 *          convolution where ggml's is a correlation): must fail
 *   SSM_SCAN (ABI 1.4 build only) gives head h group h % G instead of
 *          h / (H / G): must fail (the cases have G > 1 and H / G > 1)
 *   SWIGLU_OAI (ABI 1.4 build only) clamps the gate on both sides
 *          (clamp(gate, -limit, limit), as it clamps up) where gpt-oss
 *          clamps it only from above: must fail
 *   DELTA_NET (ABI 1.5 build only) ignores kv_tiled: v head h always
 *          reads q/k head h / (H / Hk) (Hugging Face's repeat_interleave)
 *          where a tiled node says h % Hk: must fail on the tiled cases
 *   GELU_ERF (ABI 1.6 build only) computes the tanh approximation (GELU's
 *          formula, 2e-4 off near |x| = 2): must fail
 *   others declined: "unsupported (falls back)"
 * With BROKEN_PLUGIN_NO_DEVICE=1 in the environment, init reports zero
 * devices and a reason (the suite must skip, exit 77). With
 * BROKEN_PLUGIN_CRASH=ADD the third ADD computed dies of SIGSEGV (the
 * suite must name the case and the signal); with
 * BROKEN_PLUGIN_CRASH=DISCOVERY device_count does (the suite must name the
 * plugin and the phase).
 *
 * Built twice: against the live header (ABI 1.1: the host validates nodes,
 * so accepting a malformed one is harmless) and against the frozen 1.0
 * header (a 1.0 plugin must decline malformed nodes itself).
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>

typedef struct broken_buffer {
    uint64_t size;
    unsigned char *data;
} broken_buffer;

static int no_device;

static unsigned char *base_of(const tsr_tensor *t) {
    if (t->data) return t->data;
    broken_buffer *b = (broken_buffer *)(void *)t->buffer;
    return b ? b->data + t->offset : NULL;
}

static float *at(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)(void *)(base_of(t) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                             i3 * t->nb[3]);
}

static int all_f32(const tsr_node *n) {
    if (!n->dst || n->dst->dtype != TSR_DTYPE_F32) return 0;
    for (int i = 0; i < n->n_src; i++)
        if (!n->src[i] || n->src[i]->dtype != TSR_DTYPE_F32) return 0;
    return 1;
}

static void binary(const tsr_node *n, int mul) {
    const tsr_tensor *a = n->src[0], *b = n->src[1], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                    float x = *at(a, i0, i1, i2, i3);
                    float y = *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                    *at(d, i0, i1, i2, i3) = mul ? x * y : x + y;
                }
    if (mul) *at(d, 0, 0, 0, 0) += 1e-3f; /* the bug */
}

static void gelu_contiguous(const tsr_node *n) {
    const float *x = (const float *)(void *)base_of(n->src[0]);
    float *y = (float *)(void *)base_of(n->dst);
    int64_t count = tsr_tensor_nelements(n->dst);
    for (int64_t i = 0; i < count; i++) /* the bug: strides ignored */
        y[i] = 0.5f * x[i] * (1.0f + tanhf(0.7978845608f * x[i] * (1.0f + 0.044715f * x[i] * x[i])));
}

static void scale_and_scribble(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++)
                    *at(d, i0, i1, i2, i3) = *at(a, i0, i1, i2, i3) * n->fparams[0] + n->fparams[1];
    broken_buffer *b = (broken_buffer *)(void *)d->buffer;
    unsigned char *end = (unsigned char *)(at(d, d->ne[0] - 1, d->ne[1] - 1, d->ne[2] - 1, d->ne[3] - 1) + 1);
    if (b && end + 4 <= b->data + b->size) memset(end, 0, 4); /* the bug */
}

#if TSR_ABI_MINOR >= 4
/* dst[:, s, t] = w[:, :, ids[s, t]] . x[:, 0, t] -- the bugs: row 0 for
 * every slot, and ids clamped into 0..E-1 */
static void mul_mat_id_wrong(const tsr_node *n) {
    const tsr_tensor *w = n->src[0], *x = n->src[1], *ids = n->src[2], *d = n->dst;
    for (int64_t t = 0; t < d->ne[2]; t++)
        for (int64_t s = 0; s < d->ne[1]; s++) {
            int32_t e;
            memcpy(&e, base_of(ids) + s * ids->nb[0] + t * ids->nb[1], sizeof e);
            e = e < 0 ? 0 : e >= w->ne[2] ? (int32_t)(w->ne[2] - 1) : e;
            for (int64_t m = 0; m < d->ne[0]; m++) {
                double sum = 0.0;
                for (int64_t k = 0; k < w->ne[0]; k++) sum += (double)*at(w, k, m, e, 0) * *at(x, k, 0, t, 0);
                *at(d, m, s, t, 0) = (float)sum;
            }
        }
}

static void ssm_conv_flipped(const tsr_node *n) {
    const tsr_tensor *sx = n->src[0], *w = n->src[1], *d = n->dst;
    const int64_t K = w->ne[0];
    for (int64_t s = 0; s < d->ne[2]; s++)
        for (int64_t t = 0; t < d->ne[1]; t++)
            for (int64_t c = 0; c < d->ne[0]; c++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++) acc += *at(sx, t + k, c, s, 0) * *at(w, K - 1 - k, c, 0, 0); /* the bug */
                *at(d, c, t, s, 0) = acc;
            }
}

static void ssm_scan_wrong_groups(const tsr_node *n) {
    const tsr_tensor *st = n->src[0], *x = n->src[1], *dt = n->src[2], *a = n->src[3];
    const int64_t N = st->ne[0], P = st->ne[1], H = st->ne[2], S = st->ne[3], T = x->ne[1];
    const int64_t G = (x->ne[0] - P * H) / (2 * N);
    float *y = (float *)(void *)base_of(n->dst), *fin = y + P * H * T * S;
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h % G; /* the bug */
            const float A = a->ne[0] == H ? *at(a, h, 0, 0, 0) : *at(a, 0, h, 0, 0);
            float *hs = fin + (s * H + h) * P * N;
            for (int64_t p = 0; p < P; p++)
                for (int64_t i = 0; i < N; i++) hs[p * N + i] = *at(st, i, p, h, s);
            for (int64_t t = 0; t < T; t++) {
                const float v = *at(dt, h, t, s, 0), sp = v > 20.0f ? v : log1pf(expf(v));
                for (int64_t p = 0; p < P; p++) {
                    float acc = 0.0f;
                    for (int64_t i = 0; i < N; i++) {
                        float *e = &hs[p * N + i];
                        *e = *e * expf(sp * A) + *at(x, P * H + g * N + i, t, s, 0) * *at(x, h * P + p, t, s, 0) * sp;
                        acc += *e * *at(x, P * H + G * N + g * N + i, t, s, 0);
                    }
                    y[((s * T + t) * H + h) * P + p] = acc;
                }
            }
        }
}
#endif

#if TSR_ABI_MINOR >= 4
static void swiglu_oai_clamped_twice(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *b = n->src[1], *d = n->dst;
    const float alpha = n->fparams[TSR_SWIGLU_OAI_F_ALPHA], lim = n->fparams[TSR_SWIGLU_OAI_F_LIMIT];
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                    float g = *at(a, i0, i1, i2, i3), u = *at(b, i0, i1, i2, i3);
                    g = g < -lim ? -lim : g > lim ? lim : g; /* the bug: gpt-oss has no lower clamp */
                    u = u < -lim ? -lim : u > lim ? lim : u;
                    *at(d, i0, i1, i2, i3) = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
                }
}
#endif

#if TSR_ABI_MINOR >= 5
static void delta_net_untiled(const tsr_node *n) {
    const tsr_tensor *st = n->src[0], *x = n->src[1], *gt = n->src[2], *a = n->src[3];
    const int64_t Dv = st->ne[0], Dk = st->ne[1], H = st->ne[2], S = st->ne[3], T = x->ne[1];
    const int64_t Hk = (x->ne[0] - H * Dv) / (2 * Dk);
    const float eps = n->fparams[TSR_DELTA_NET_F_EPS], scale = n->fparams[TSR_DELTA_NET_F_SCALE];
    float *y = (float *)(void *)base_of(n->dst), *fin = y + Dv * H * T * S;
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t j = h / (H / Hk); /* the bug: kv_tiled not read */
            const float A = a->ne[0] == H ? *at(a, h, 0, 0, 0) : *at(a, 0, h, 0, 0);
            float *m = fin + (s * H + h) * Dk * Dv;
            for (int64_t k = 0; k < Dk; k++)
                for (int64_t i = 0; i < Dv; i++) m[k * Dv + i] = *at(st, i, k, h, s);
            for (int64_t t = 0; t < T; t++) {
                float qq = 0.0f, kk = 0.0f;
                for (int64_t k = 0; k < Dk; k++) {
                    qq += *at(x, j * Dk + k, t, s, 0) * *at(x, j * Dk + k, t, s, 0);
                    kk += *at(x, (Hk + j) * Dk + k, t, s, 0) * *at(x, (Hk + j) * Dk + k, t, s, 0);
                }
                const float qd = sqrtf(qq) > eps ? sqrtf(qq) : eps, kd = sqrtf(kk) > eps ? sqrtf(kk) : eps;
                const float b = *at(gt, h, 0, t, s), av = *at(gt, h, 1, t, s);
                const float decay = expf(A * (av > 20.0f ? av : log1pf(expf(av)))), beta = 1.0f / (1.0f + expf(-b));
                for (int64_t i = 0; i < Dv; i++) {
                    float sk = 0.0f;
                    for (int64_t k = 0; k < Dk; k++)
                        sk += (m[k * Dv + i] *= decay) * *at(x, (Hk + j) * Dk + k, t, s, 0) / kd;
                    const float u = beta * (*at(x, 2 * Hk * Dk + h * Dv + i, t, s, 0) - sk);
                    float acc = 0.0f;
                    for (int64_t k = 0; k < Dk; k++) {
                        m[k * Dv + i] += *at(x, (Hk + j) * Dk + k, t, s, 0) / kd * u;
                        acc += m[k * Dv + i] * *at(x, j * Dk + k, t, s, 0) / qd * scale;
                    }
                    y[((s * T + t) * H + h) * Dv + i] = acc;
                }
            }
        }
}
#endif

#if TSR_ABI_MINOR >= 6
static void gelu_erf_as_tanh(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                    const float x = *at(a, i0, i1, i2, i3); /* the bug: tanh, not erf */
                    *at(d, i0, i1, i2, i3) = 0.5f * x * (1.0f + tanhf(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
                }
}
#endif

static int crash_wanted(const char *what) {
    const char *e = getenv("BROKEN_PLUGIN_CRASH");
    return e && !strcmp(e, what);
}

static tsr_status q_compute(tsr_queue *q, const tsr_node *nodes, int32_t n_nodes) {
    (void)q;
    static int adds;
    for (int32_t i = 0; i < n_nodes; i++) {
        const tsr_node *n = &nodes[i];
        if (n->op == TSR_OP_ADD && ++adds == 3 && crash_wanted("ADD")) raise(SIGSEGV);
        switch (n->op) {
        case TSR_OP_ADD: binary(n, 0); break;
        case TSR_OP_MUL: binary(n, 1); break;
        case TSR_OP_GELU: gelu_contiguous(n); break;
        case TSR_OP_SCALE: scale_and_scribble(n); break;
        case TSR_OP_MUL_MAT: break; /* the bug: nothing computed */
#if TSR_ABI_MINOR >= 4
        case TSR_OP_MUL_MAT_ID: mul_mat_id_wrong(n); break;
        case TSR_OP_SSM_CONV: ssm_conv_flipped(n); break;
        case TSR_OP_SSM_SCAN: ssm_scan_wrong_groups(n); break;
        case TSR_OP_SWIGLU_OAI: swiglu_oai_clamped_twice(n); break;
#endif
#if TSR_ABI_MINOR >= 5
        case TSR_OP_DELTA_NET: delta_net_untiled(n); break;
#endif
#if TSR_ABI_MINOR >= 6
        case TSR_OP_GELU_ERF: gelu_erf_as_tanh(n); break;
#endif
        default: return TSR_ERR_UNSUPPORTED;
        }
    }
    return TSR_OK;
}

static int range_ok(const broken_buffer *b, uint64_t off, uint64_t size) {
    return b && off <= b->size && size <= b->size - off;
}

static tsr_status q_write(tsr_queue *q, tsr_buffer *buf, uint64_t off, const void *src, uint64_t size) {
    (void)q;
    broken_buffer *b = (broken_buffer *)(void *)buf;
    if (!range_ok(b, off, size)) return TSR_ERR_INVALID;
    memcpy(b->data + off, src, size);
    return TSR_OK;
}

static tsr_status q_read(tsr_queue *q, tsr_buffer *buf, uint64_t off, void *dst, uint64_t size) {
    (void)q;
    broken_buffer *b = (broken_buffer *)(void *)buf;
    if (!range_ok(b, off, size)) return TSR_ERR_INVALID;
    memcpy(dst, b->data + off, size);
    return TSR_OK;
}

static tsr_status q_sync(tsr_queue *q) {
    (void)q;
    return TSR_OK;
}

static void q_destroy(tsr_queue *q) { free(q); }

static const tsr_queue_api queue_api = {.struct_size = sizeof(tsr_queue_api), .compute = q_compute,
                                        .write = q_write, .read = q_read, .synchronize = q_sync,
                                        .destroy = q_destroy};

static tsr_status d_info(tsr_device *d, tsr_device_info *info) {
    (void)d;
    tsr_device_info full = {.struct_size = info->struct_size, .kind = TSR_DEVICE_CPU,
                            .description = "deliberately broken test backend", .features = "",
                            .host_visible = 1, .reads_host_memory = 1, .priority = 0};
    memcpy(info, &full, info->struct_size < sizeof full ? info->struct_size : sizeof full);
    return TSR_OK;
}

static int32_t d_supports(tsr_device *d, const tsr_node *n) {
    (void)d;
    switch (n->op) {
    case TSR_OP_MUL_MAT: return 1; /* the bug: never declines */
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_GELU:
    case TSR_OP_SCALE: return all_f32(n);
#if TSR_ABI_MINOR >= 4
    case TSR_OP_MUL_MAT_ID:
        return n->src[0]->dtype == TSR_DTYPE_F32 && n->src[1]->dtype == TSR_DTYPE_F32 && n->dst->dtype == TSR_DTYPE_F32;
    case TSR_OP_SSM_CONV: return all_f32(n);
    case TSR_OP_SSM_SCAN: return all_f32(n) && n->dst->nb[0] == 4;
    case TSR_OP_SWIGLU_OAI: return all_f32(n);
#endif
#if TSR_ABI_MINOR >= 5
    case TSR_OP_DELTA_NET: return all_f32(n) && n->dst->nb[0] == 4;
#endif
#if TSR_ABI_MINOR >= 6
    case TSR_OP_GELU_ERF: return all_f32(n);
#endif
    default: return 0;
    }
}

static tsr_status d_alloc(tsr_device *d, uint64_t size, tsr_buffer **out) {
    (void)d;
    broken_buffer *b = malloc(sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    b->size = size;
    b->data = malloc(size ? size : 1);
    if (!b->data) {
        free(b);
        return TSR_ERR_NO_MEMORY;
    }
    *out = (tsr_buffer *)(void *)b;
    return TSR_OK;
}

static void d_free(tsr_device *d, tsr_buffer *buf) {
    (void)d;
    broken_buffer *b = (broken_buffer *)(void *)buf;
    if (b) free(b->data);
    free(b);
}

static void *d_host_ptr(tsr_device *d, tsr_buffer *buf) {
    (void)d;
    return ((broken_buffer *)(void *)buf)->data;
}

static tsr_status d_queue(tsr_device *d, tsr_queue **out) {
    (void)d;
    tsr_queue *q = malloc(sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    q->api = &queue_api;
    q->impl = NULL;
    *out = q;
    return TSR_OK;
}

static const tsr_device_api device_api = {.struct_size = sizeof(tsr_device_api), .get_info = d_info,
                                          .supports_op = d_supports, .buffer_alloc = d_alloc,
                                          .buffer_free = d_free, .buffer_host_ptr = d_host_ptr,
                                          .queue_create = d_queue};
static tsr_device device = {&device_api, NULL};

static int32_t p_score(void) { return 1; }

static tsr_status p_init(const tsr_host *host, char *reason, size_t reason_size) {
    (void)host;
    const char *e = getenv("BROKEN_PLUGIN_NO_DEVICE");
    no_device = e && e[0] == '1';
    if (no_device && reason && reason_size > 40) strcpy(reason, "BROKEN_PLUGIN_NO_DEVICE is set");
    return TSR_OK;
}

static int32_t p_count(void) {
    if (crash_wanted("DISCOVERY")) raise(SIGSEGV);
    return no_device ? 0 : 1;
}
static tsr_device *p_get(int32_t i) { return i == 0 && !no_device ? &device : NULL; }
static void p_shutdown(void) {}

static const tsr_plugin plugin = {TSR_ABI_VERSION, sizeof(tsr_plugin), "broken", "0", p_score,
                                  p_init, p_count, p_get, p_shutdown};

TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
    return TSR_ABI_MAJOR_OF(host_abi_version) == TSR_ABI_MAJOR ? &plugin : NULL;
}
