/*
 * tessera/plugin.h — the whole Tessera backend plugin ABI.
 *
 * A backend plugin is a shared object named libtessera-backend-<name>.so that
 * exports exactly one symbol:
 *
 *     const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version);
 *
 * It returns NULL when it cannot serve that host ABI version. Everything else
 * the host and the plugin exchange is defined in this header, which is
 * self-contained C99 and includes nothing but <stddef.h> and <stdint.h>.
 *
 * Three levels, each a small table of functions:
 *   plugin  (tsr_plugin)      init, enumerate devices, shutdown
 *   device  (tsr_device_api)  properties, supports_op, buffers, queues
 *   queue   (tsr_queue_api)   compute a node list, copy in/out, synchronize
 *
 * Stability rules (ABI major version TSR_ABI_MAJOR):
 *   - every struct that crosses the boundary starts with struct_size (or, for
 *     tsr_plugin, abi_version then struct_size); fields are only appended;
 *     read a field only if struct_size says it is present;
 *   - enums (tsr_dtype, tsr_op, ...) are append-only; tsr_dtype values equal
 *     GGUF/ggml type numbers so weights need no translation;
 *   - tsr_tensor and tsr_node are frozen for a major version.
 *
 * What 1.1 added (every field appended, every hook optional; a 1.0 plugin
 * loads and runs unchanged, a 1.1 plugin runs on a 1.0 host when it checks
 * struct sizes):
 *   - the host validates every node with tessera/plugin_check.h before it
 *     calls supports_op, and plugins-api ships the op table, the dtype table,
 *     block structs and fp16/bf16 helpers (tessera/plugin_util.h);
 *   - tsr_host.decline: say why supports_op answered 0 (shown by --explain);
 *   - tsr_device_info.max_alloc_size and .buffer_alignment;
 *   - tsr_queue_api.set_n_threads: a thread count per queue;
 *   - tsr_device_api.open / close: per-device setup (compile kernels) done
 *     once, before the device is used, and only for devices the user picks;
 *   - tsr_device_api.claim_nodes: whole-subgraph offload;
 *   - tsr_device_api.weight_size / weight_write: repack weights at upload.
 *
 * What 1.2 added: FLASH_ATTN's k and v may be of the KV cache's block types
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL). A 1.2 host does not ask a plugin
 * built for an older ABI about such nodes (it could not know to decline).
 *
 * What 1.3 added (appended, optional; 1.0-1.2 plugins load and run as
 * before):
 *   - tsr_queue_api.get_stats: running totals of a queue's work (device
 *     submissions, command buffers recorded and replayed, host waits), from
 *     which the host reports submissions per decoding step;
 *   - tsr_queue_api.set_profiling: time every node on the device (timestamp
 *     queries, profiling events) and sum the time per op type into the
 *     stats (`tessera run/bench --profile`).
 *   A queue may replay device commands it recorded for an earlier compute()
 *   when the node list is the same (same ops, tensors, shapes, locations):
 *   the host builds each split's node list once per graph and hands the
 *   same list while it reuses the step graph, changing only the locations
 *   of views into the KV cache.
 *
 * What 1.4 added (new ops; a plugin built for 1.0-1.3 declines op numbers
 * its own tsr_node_check does not know, and the host never asks it about
 * them, so they run on a device that knows them or on ref):
 *   - MUL_MAT_ID, TOP_K, SUM_ROWS, DIV: mixture-of-experts layers (experts
 *     chosen per token, their routing weights, the weighted sum).
 *   - SSM_CONV and SSM_SCAN, the recurrent ops of Mamba-2 and LFM2-style
 *     hybrids (a causal depthwise convolution over time and Mamba-2's
 *     selective scan, llama.cpp's semantics), see the op list below.
 *   - SWIGLU_OAI, gpt-oss's clamped SwiGLU (its experts' activation).
 *
 * What 1.5 added: DELTA_NET, the gated delta rule of Qwen3.5 and
 * Qwen3-Next's Gated DeltaNet blocks (a recurrent state of d_k x d_v per
 * head, see the op list below). As for 1.4's ops, the host never asks a
 * plugin built for 1.0-1.4 about it: such nodes run where a 1.5 plugin
 * computes them, or on ref.
 *
 * What 1.6 added: GELU_ERF, the exact GELU x/2 (1 + erf(x/sqrt 2)) of
 * Whisper-style encoders (GELU stays the tanh approximation). The host never
 * asks a plugin built for 1.0-1.5 about it: such nodes run where a 1.6
 * plugin computes them (the CPU plugin of this tree does), or on ref.
 *
 * Contracts (all versions):
 *   - Copies: queue write() may return before the copy is done ONLY if the
 *     plugin copied the source bytes first: the host may reuse `src` as soon
 *     as write() returns. read() may return early; the bytes are in `dst`
 *     after the next synchronize() on that queue returns TSR_OK. Work on one
 *     queue runs in call order (compute, write, read).
 *   - Threads: the host calls one queue from one thread at a time, but
 *     different queues (several contexts, each with its own queues) may be
 *     called concurrently from different threads; device functions
 *     (supports_op, buffer_alloc/free, queue_create) may be called
 *     concurrently with queue work and must be thread-safe. Plugin-level
 *     functions (init, device_count, device_get, shutdown) are called from
 *     one thread. A plugin must not call back into the host from a thread
 *     of its own except through tsr_host.log.
 *   - Numerics: results are compared with the host's reference backend
 *     (exact f32 products, sums in double). CPU backends may, as llama.cpp's
 *     do, round MUL_MAT activations to the weight's dot type first (Q8_0 for
 *     Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for K-quants): that is
 *     within the conformance tolerance and is what the goldens expect.
 *
 * Conventions: dimensions are counted innermost first, as in GGUF: ne[0] is
 * the number of elements in a row, ne[1] the number of rows, and so on; nb[i]
 * is the stride of dimension i in bytes. Unused trailing dimensions have
 * ne = 1. For block-quantized dtypes ne[0] is a multiple of the block size
 * and nb[0] is the size of one block.
 */
#ifndef TESSERA_PLUGIN_H
#define TESSERA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define TSR_ABI_MAJOR 1
#define TSR_ABI_MINOR 6
#define TSR_ABI_VERSION (((uint32_t)TSR_ABI_MAJOR << 16) | (uint32_t)TSR_ABI_MINOR)
#define TSR_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define TSR_ABI_MINOR_OF(v) ((uint32_t)(v) & 0xffffu)

#if defined(_WIN32)
#define TSR_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TSR_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ----------------------------------------------------------------- status */

typedef enum tsr_status {
    TSR_OK = 0,
    TSR_ERR_UNSUPPORTED = 1, /* op, dtype or feature not available          */
    TSR_ERR_NO_MEMORY = 2,   /* host or device allocation failed            */
    TSR_ERR_INVALID = 3,     /* bad argument (shape, offset, size)          */
    TSR_ERR_DEVICE = 4,      /* driver or device failure                    */
    TSR_ERR_ABORTED = 5      /* the host's abort flag was raised            */
} tsr_status;

/* ----------------------------------------------------------------- dtypes */

/* Values are GGUF tensor type numbers. Gaps are numbers GGUF retired. */
typedef enum tsr_dtype {
    TSR_DTYPE_F32 = 0,
    TSR_DTYPE_F16 = 1,
    TSR_DTYPE_Q4_0 = 2,
    TSR_DTYPE_Q4_1 = 3,
    TSR_DTYPE_Q5_0 = 6,
    TSR_DTYPE_Q5_1 = 7,
    TSR_DTYPE_Q8_0 = 8,
    TSR_DTYPE_Q8_1 = 9,
    TSR_DTYPE_Q2_K = 10,
    TSR_DTYPE_Q3_K = 11,
    TSR_DTYPE_Q4_K = 12,
    TSR_DTYPE_Q5_K = 13,
    TSR_DTYPE_Q6_K = 14,
    TSR_DTYPE_Q8_K = 15,
    TSR_DTYPE_IQ2_XXS = 16,
    TSR_DTYPE_IQ2_XS = 17,
    TSR_DTYPE_IQ3_XXS = 18,
    TSR_DTYPE_IQ1_S = 19,
    TSR_DTYPE_IQ4_NL = 20,
    TSR_DTYPE_IQ3_S = 21,
    TSR_DTYPE_IQ2_S = 22,
    TSR_DTYPE_IQ4_XS = 23,
    TSR_DTYPE_I8 = 24,
    TSR_DTYPE_I16 = 25,
    TSR_DTYPE_I32 = 26,
    TSR_DTYPE_I64 = 27,
    TSR_DTYPE_F64 = 28,
    TSR_DTYPE_IQ1_M = 29,
    TSR_DTYPE_BF16 = 30,
    TSR_DTYPE_TQ1_0 = 34,
    TSR_DTYPE_TQ2_0 = 35,
    TSR_DTYPE_MXFP4 = 39,
    TSR_DTYPE_COUNT = 40 /* one past the largest number known to this ABI */
} tsr_dtype;

/* ------------------------------------------------------------------- ops */

/*
 * Every op writes node->dst, which has its own dtype and shape, and reads
 * node->src[0..n_src-1]. Unless said otherwise, dst and src tensors are F32
 * and may be non-contiguous views (honour nb[]). "rows" are runs along ne[0].
 * Parameters live in named slots of node->iparams / node->fparams (the
 * TSR_<OP>_I_* / TSR_<OP>_F_* enums below); tessera/plugin_util.h reads them
 * into one struct per op (tsr_rope_params_of, ...). Slots an op does not name
 * carry nothing (the host leaves them 0); reserved slots must be 0.
 *
 * GET_ROWS   dst[:, i, j, k] = to_f32(src0[:, src1[i, j, k], j, k])
 *            src0 any dtype [n, r, b2, b3]; src1 I32 [m, b2, b3]; dst F32 [n, m, b2, b3]
 * ADD, MUL   dst = src0 (+|*) src1; src1 is broadcast: src1->ne[d] divides src0->ne[d]
 *            and element (i0,i1,i2,i3) of src0 meets (i0 % ne0, i1 % ne1, ...) of src1
 * SCALE      dst = src0 * scale + bias
 * MUL_MAT    dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
 *            src0 any dtype (weights, rows contiguous), src1 F32, dst F32 [M, N, B2, B3];
 *            r2 = B2 / src0->ne[2], r3 = B3 / src0->ne[3] (broadcast over batch dims)
 * RMS_NORM   each row: x / sqrt(mean(x^2) + eps)
 * NORM       each row: (x - mean) / sqrt(var + eps)
 * ROPE       src0 [head_dim, n_head, n_tokens, 1]; src1 I32 positions [n_tokens];
 *            src2 optional F32 frequency factors [n_dims/2] (Llama-3 style scaling);
 *            n_dims rotated (<= head_dim, rest copied), mode (TSR_ROPE_NORMAL:
 *            pairs (2i, 2i+1); TSR_ROPE_NEOX: pairs (i, i+n_dims/2)), n_ctx_orig,
 *            beta_fast, beta_slow (YaRN), freq_base, freq_scale, ext_factor,
 *            attn_factor:
 *            theta_i = pos * freq_scale * freq_base^(-2i/n_dims) / factor_i
 * SOFT_MAX   each row of src0*scale + mask, softmax along ne[0];
 *            src1 optional mask F32 or F16 [n, rows'] broadcast over ne[2], ne[3]
 *            (mask->ne[1] >= src0->ne[1]); max_bias (ALiBi, 0 = off)
 * SILU       x * sigmoid(x)
 * GELU       tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
 * SWIGLU     silu(src0) * src1 (same shapes)
 * CPY        convert/copy src0 into dst (dst's dtype; same element count, row
 *            order as if both were contiguous). dst may be a view into a
 *            persistent tensor (e.g. a KV cache slot). Any of F32/F16/BF16 to
 *            any of F32/F16/BF16/quantized, and quantized to F32.
 * CONCAT     dst = concat(src0, src1) along dimension dim
 * ARGMAX     dst I32 [rows]: index of the largest element of each row of src0
 * FLASH_ATTN fused attention: src0 q [D, n_q, H, 1], src1 k [D, n_kv, H_kv, 1],
 *            src2 v [D, n_kv, H_kv, 1] (k, v F32/F16/BF16; from ABI 1.2 also
 *            Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL, whole blocks per row, k and v
 *            may differ: a quantized KV cache), src3 mask optional
 *            [n_kv, n_q'] (F32/F16, -inf masks); scale;
 *            dst F32 [D, H, n_q, 1] (heads of one token adjacent); H % H_kv == 0.
 *            max_bias and softcap (ggml's ALiBi and logit softcap slots) are
 *            reserved: 0 in this ABI (tsr_node_check rejects other values); a
 *            later minor version that gives them a meaning will not ask older
 *            plugins about nodes that use them.
 *            A device declines the k/v dtypes it cannot read in supports_op;
 *            the host never asks a plugin built for ABI < 1.2 about block-type
 *            k/v.
 *
 * ABI 1.4 (mixture of experts):
 * MUL_MAT_ID dst[n, s, t] = sum_k src0[k, n, e] * src1[k, s % n_b, t], e = src2[s, t]
 *            src0 experts, any dtype MUL_MAT takes, rows contiguous [K, N, E, 1];
 *            src1 F32 activations [K, n_b, T, 1] with n_b = 1 (one row for every
 *            slot) or n_b = n_used; src2 I32 ids [n_used, T, 1, 1] (the expert of
 *            slot s of token t); dst F32 [N, n_used, T, 1]. Activations round as
 *            MUL_MAT's do. An id outside 0..E-1 is bad data, never a read out of
 *            bounds: a device that can report it fails compute() with
 *            TSR_ERR_INVALID, one that cannot writes 0 to that slot's row.
 * TOP_K      dst I32 [k, r, b2, b3]: the indices of the k largest elements of
 *            each row of src0 F32 [n, r, b2, b3] (1 <= k <= n), largest first;
 *            equal values in index order (the lower index first); NaN ranks
 *            below every number (-inf included).
 * SUM_ROWS   dst F32 [1, r, b2, b3] = the sum of each row of src0 F32 [n, r, b2, b3]
 * DIV        dst = src0 / src1, src1 broadcast as in ADD and MUL
 * SSM_CONV   (ABI 1.4) causal depthwise 1-D convolution over time, all F32:
 *            src0 sx [K - 1 + T, C, S] (per channel, the K - 1 previous inputs
 *            then this batch's T, time innermost), src1 kernel [K, C] ->
 *            dst [C, T, S]: dst[c, t, s] = sum_k sx[t + k, c, s] * w[k, c].
 *            The caller keeps the K - 1 last inputs (the last columns of sx)
 *            as the next call's state.
 * SSM_SCAN   (ABI 1.4) Mamba-2's selective scan, all F32:
 *            src0 state [N, P, H, S] (N = d_state, P = head size, H heads,
 *            S sequences), src1 xBC [P*H + 2*G*N, T, S] (per token: x
 *            [P, H], then B [N, G], then C [N, G]; G groups, H % G == 0),
 *            src2 dt [H, T, S] (bias added, before softplus), src3 A [H]
 *            or [1, H] -> dst 1-D [P*H*T*S + N*P*H*S]: y
 *            [P, H, T, S] then the final state [N, P, H, S]. Per sequence,
 *            head h (group g = h / (H / G)), token t in order:
 *              d = softplus(dt[h, t])  (log1p(exp(x)), x for x > 20)
 *              state[n, p, h] = state[n, p, h] * exp(d * A[h]) + B[n, g, t] * x[p, h, t] * d
 *              y[p, h, t] = sum_n state[n, p, h] * C[n, g, t]
 * SWIGLU_OAI (ABI 1.4) gpt-oss's clamped SwiGLU, all F32, src0 gate and
 *            src1 up of one shape -> dst of that shape; alpha, limit > 0:
 *              g = min(gate, limit), u = clamp(up, -limit, limit)
 *              dst = g * sigmoid(alpha * g) * (u + 1)
 *
 * ABI 1.5:
 * DELTA_NET  the gated delta rule (Gated DeltaNet), all F32: src0 state
 *            [Dv, Dk, H, S] (per head a Dk x Dv matrix, Dv innermost; S
 *            sequences), src1 qkv [2*Hk*Dk + H*Dv, T, S] (per token: q [Dk, Hk],
 *            k [Dk, Hk], v [Dv, H]; H % Hk == 0), src2 gates [H, 2, T, S]
 *            (per token: the beta logits b [H], then the decay inputs a [H],
 *            dt's bias added), src3 A [H] or [1, H] -> dst 1-D
 *            [Dv*H*T*S + Dv*Dk*H*S]: y [Dv, H, T, S] then the final state
 *            [Dv, Dk, H, S]. Parameters eps, scale, and kv_tiled: v head h
 *            reads q/k head h % Hk when kv_tiled is 1, h / (H / Hk) when 0.
 *            Per sequence, head h (q/k head j), token t in order:
 *              q' = scale * q[:, j] / max(|q[:, j]|, eps), k' = k[:, j] / max(|k[:, j]|, eps)
 *              decay = exp(A[h] * softplus(a[h]))  (softplus as SSM_SCAN's)
 *              beta = 1 / (1 + exp(-b[h]))
 *              S = decay * S;  u[i] = beta * (v[i, h] - sum_n S[i, n] k'[n])
 *              S[i, n] += k'[n] * u[i];  y[i, h, t] = sum_n S[i, n] q'[n]
 *
 * ABI 1.6:
 * GELU_ERF   exact GELU, elementwise like GELU: 0.5 x (1 + erf(x / sqrt(2)))
 *            (llama.cpp's CPU evaluates it in float as written, with erff;
 *            within a few ulp is within the conformance tolerance)
 */

/*
 * Every op, once: X(OP, name, number, min_src, max_src, minor) gives
 * TSR_OP_<OP> = number, the lower-case name the host uses for messages and
 * node names ("mul_mat-5"; tsr_op_name gives "MUL_MAT"), how many sources
 * the op reads (optional ones last; they may be NULL), and the ABI minor
 * version that added it: a host never asks a plugin built for an older
 * minor about the op (its own checker could not know it; a plugin that
 * answered by op number alone would misread it). The numbers are the ABI:
 * append-only, so a new op is a new last line with the next number and the
 * current TSR_ABI_MINOR, and a line is never removed or renumbered
 * (checked below at compile time). docs/ops.md lists everything else
 * adding an op touches.
 */
#define TSR_OPS(X)                              \
    X(NONE, "none", 0, 0, 0, 0) /* a leaf: input, weight or view; never computed */ \
    X(GET_ROWS, "get_rows", 1, 2, 2, 0)         \
    X(ADD, "add", 2, 2, 2, 0)                   \
    X(MUL, "mul", 3, 2, 2, 0)                   \
    X(SCALE, "scale", 4, 1, 1, 0)               \
    X(MUL_MAT, "mul_mat", 5, 2, 2, 0)           \
    X(RMS_NORM, "rms_norm", 6, 1, 1, 0)         \
    X(NORM, "norm", 7, 1, 1, 0)                 \
    X(ROPE, "rope", 8, 2, 3, 0)                 \
    X(SOFT_MAX, "soft_max", 9, 1, 2, 0)         \
    X(SILU, "silu", 10, 1, 1, 0)                \
    X(GELU, "gelu", 11, 1, 1, 0)                \
    X(SWIGLU, "swiglu", 12, 2, 2, 0)            \
    X(CPY, "cpy", 13, 1, 1, 0)                  \
    X(CONCAT, "concat", 14, 2, 2, 0)            \
    X(ARGMAX, "argmax", 15, 1, 1, 0)            \
    X(FLASH_ATTN, "flash_attn", 16, 3, 4, 0)    \
    X(MUL_MAT_ID, "mul_mat_id", 17, 3, 3, 4)    \
    X(TOP_K, "top_k", 18, 1, 1, 4)              \
    X(SUM_ROWS, "sum_rows", 19, 1, 1, 4)        \
    X(DIV, "div", 20, 2, 2, 4)                  \
    X(SSM_CONV, "ssm_conv", 21, 2, 2, 4)        \
    X(SSM_SCAN, "ssm_scan", 22, 4, 4, 4)        \
    X(SWIGLU_OAI, "swiglu_oai", 23, 2, 2, 4)   \
    X(DELTA_NET, "delta_net", 24, 4, 4, 5)      \
    X(GELU_ERF, "gelu_erf", 25, 1, 1, 6)

#define TSR_OP_ENUM_(op, name, number, min_src, max_src, minor) TSR_OP_##op = number,
typedef enum tsr_op {
    TSR_OPS(TSR_OP_ENUM_)
    TSR_OP_COUNT /* one past the largest op known to this ABI */
} tsr_op;
#undef TSR_OP_ENUM_

/* Append-only, checked: each op's number must equal its line's position in
 * TSR_OPS (a line inserted, removed or renumbered fails the build here), and
 * no op may claim a minor version newer than this header's. C99
 * has no static_assert: a negative array size fails instead. */
#define TSR_OP_POS_(op, name, number, min_src, max_src, minor) TSR_OP_POS_##op##_,
enum { TSR_OPS(TSR_OP_POS_) TSR_OP_POS_COUNT_ };
#undef TSR_OP_POS_
#define TSR_OP_PIN_(op, name, number, min_src, max_src, minor) \
    typedef char tsr_op_pin_##op##_[TSR_OP_POS_##op##_ == (number) && (min_src) <= (max_src) && \
                                    (minor) <= TSR_ABI_MINOR ? 1 : -1];
TSR_OPS(TSR_OP_PIN_)
#undef TSR_OP_PIN_
/* The 17 ops of ABI 1.0-1.3 stay (a last line removed fails here). */
typedef char tsr_op_count_check_[TSR_OP_COUNT >= 17 ? 1 : -1];

enum { TSR_ROPE_NORMAL = 0, TSR_ROPE_NEOX = 2 };

/* Parameter slots: TSR_<OP>_I_<NAME> indexes tsr_node.iparams,
 * TSR_<OP>_F_<NAME> tsr_node.fparams. Frozen like the op numbers: a new
 * parameter takes a new slot. Read them through plugin_util.h's accessors. */
enum {
    TSR_SCALE_F_SCALE = 0,
    TSR_SCALE_F_BIAS = 1,

    TSR_NORM_F_EPS = 0, /* RMS_NORM and NORM */

    TSR_ROPE_I_N_DIMS = 0,
    TSR_ROPE_I_MODE = 1,
    TSR_ROPE_I_N_CTX_ORIG = 2,
    TSR_ROPE_F_FREQ_BASE = 0,
    TSR_ROPE_F_FREQ_SCALE = 1,
    TSR_ROPE_F_EXT_FACTOR = 2,
    TSR_ROPE_F_ATTN_FACTOR = 3,
    TSR_ROPE_F_BETA_FAST = 4,
    TSR_ROPE_F_BETA_SLOW = 5,

    TSR_SOFT_MAX_F_SCALE = 0,
    TSR_SOFT_MAX_F_MAX_BIAS = 1,

    TSR_CONCAT_I_DIM = 0,

    TSR_FLASH_ATTN_F_SCALE = 0,
    TSR_FLASH_ATTN_F_MAX_BIAS = 1, /* reserved, 0 */
    TSR_FLASH_ATTN_F_SOFTCAP = 2,  /* reserved, 0 */

    TSR_SWIGLU_OAI_F_ALPHA = 0,
    TSR_SWIGLU_OAI_F_LIMIT = 1,

    TSR_DELTA_NET_I_KV_TILED = 0,
    TSR_DELTA_NET_F_EPS = 0,
    TSR_DELTA_NET_F_SCALE = 1
};

/* ---------------------------------------------------------------- tensors */

#define TSR_MAX_DIMS 4
#define TSR_MAX_SRC 4
#define TSR_MAX_PARAMS 8

/* A buffer is memory a device allocated; its contents are opaque to the host
 * unless the device reports it host-visible (then buffer_host_ptr is valid). */
typedef struct tsr_buffer tsr_buffer;

typedef struct tsr_tensor {
    int32_t dtype;  /* tsr_dtype */
    int32_t flags;  /* TSR_TENSOR_* */
    int64_t ne[TSR_MAX_DIMS];
    int64_t nb[TSR_MAX_DIMS];
    /* Where the bytes are. buffer == NULL: plain host memory at data (weights
     * read in place from the mmap, host inputs). Otherwise byte offset in a
     * buffer of the device that computes the node; data is then the host
     * address of those bytes when the buffer is host-visible, else NULL. */
    tsr_buffer *buffer;
    uint64_t offset;
    void *data;
    const char *name; /* for messages; may be "" */
} tsr_tensor;

enum {
    TSR_TENSOR_WEIGHT = 1 << 0, /* constant for the model's lifetime */
    TSR_TENSOR_INPUT = 1 << 1,  /* set by the host before each compute */
    TSR_TENSOR_OUTPUT = 1 << 2  /* read by the host after each compute */
};

typedef struct tsr_node {
    int32_t op;    /* tsr_op */
    int32_t n_src; /* number of used entries of src; optional ones may be NULL */
    tsr_tensor *dst;
    const tsr_tensor *src[TSR_MAX_SRC];
    int32_t iparams[TSR_MAX_PARAMS];
    float fparams[TSR_MAX_PARAMS];
} tsr_node;

/* ------------------------------------------------------------ host side */

enum { TSR_LOG_ERROR = 0, TSR_LOG_WARN = 1, TSR_LOG_INFO = 2, TSR_LOG_DEBUG = 3 };

/* Services the host hands to the plugin at init. The pointer stays valid until
 * shutdown; n_threads may change between compute calls (read it each time). */
typedef struct tsr_host {
    uint32_t struct_size;
    uint32_t abi_version; /* the host's TSR_ABI_VERSION */
    void (*log)(int level, const char *plugin_name, const char *message);
    const volatile int *abort_flag; /* non-zero: stop computing, return TSR_ERR_ABORTED */
    int32_t n_threads;              /* threads the user allows (-t) */
    int32_t reserved;
    const char *cache_dir; /* a directory the plugin may write caches to, or NULL */
    /* ---- ABI 1.1 (present when struct_size covers it) ---- */
    /* Inside supports_op, before answering 0: why this device declines
     * this node, e.g. "F16 activations are not implemented". One line; the
     * host copies it (shown by `tessera run --explain` and plugin check).
     * Call it only from supports_op, with the node it was given. */
    void (*decline)(const tsr_node *node, const char *reason);
} tsr_host;

/* True when struct s of the given size holds field f (read only such fields
 * of a struct the other side filled or allocated). */
#define TSR_HAS_FIELD(s, size, f) ((size) >= offsetof(s, f) + sizeof(((s *)0)->f))

/* -------------------------------------------------------------- devices */

typedef enum tsr_device_kind {
    TSR_DEVICE_CPU = 0,
    TSR_DEVICE_GPU = 1,
    TSR_DEVICE_ACCEL = 2
} tsr_device_kind;

typedef struct tsr_device_info {
    uint32_t struct_size; /* set by the caller to sizeof(tsr_device_info) */
    int32_t kind;         /* tsr_device_kind */
    const char *description; /* e.g. "AMD Radeon 780M (RADV)" */
    const char *features;    /* space-separated, e.g. "avx2 fma f16c", or "" */
    uint64_t memory_total;   /* bytes; 0 if unknown */
    uint64_t memory_free;    /* bytes; 0 if unknown */
    /* Buffers of this device have host addresses (unified memory, CPU). */
    int32_t host_visible;
    /* Nodes on this device may read and write tensors in plain host memory
     * (tsr_tensor.buffer == NULL), e.g. weights in the host's mmap. */
    int32_t reads_host_memory;
    /* Higher is preferred when the user does not order devices. */
    int32_t priority;
    int32_t reserved;
    /* ---- ABI 1.1: write these only if struct_size covers them ---- */
    /* Largest single buffer_alloc the device grants (OpenCL's
     * CL_DEVICE_MAX_MEM_ALLOC_SIZE, Vulkan's maxStorageBufferRange); 0: no
     * limit beyond memory. The host splits weights over several buffers to
     * stay under it. */
    uint64_t max_alloc_size;
    /* Byte alignment a tensor needs at its offset in a buffer (e.g. OpenCL's
     * CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8); 0: the host's default (256). The
     * host never uses less than 64. */
    uint64_t buffer_alignment;
} tsr_device_info;

typedef struct tsr_device tsr_device;
typedef struct tsr_queue tsr_queue;

/* ABI 1.3: what a queue did (tsr_queue_api.get_stats). */
#define TSR_STATS_OPS 32 /* op_ns/op_nodes slots: tsr_op values below it */
typedef struct tsr_queue_stats {
    uint32_t struct_size; /* set by the host to sizeof(tsr_queue_stats) */
    uint32_t reserved;
    uint64_t n_computes;   /* compute() calls                                  */
    uint64_t n_submits;    /* batches handed to the device (vkQueueSubmit, ...) */
    uint64_t n_recorded;   /* computes that built their device commands        */
    uint64_t n_replayed;   /* computes that replayed commands built before     */
    uint64_t n_host_waits; /* calls that blocked the caller on the device      */
    /* Profiling (tsr_queue_api.set_profiling): device time and nodes timed
     * per op (index: tsr_op). */
    uint64_t op_ns[TSR_STATS_OPS];
    uint64_t op_nodes[TSR_STATS_OPS];
} tsr_queue_stats;

typedef struct tsr_queue_api {
    uint32_t struct_size;
    /* Compute nodes in order. All tensors live in plain host memory (if the
     * device reads_host_memory) or in buffers of this device. May return
     * before the work is done; synchronize waits. */
    tsr_status (*compute)(tsr_queue *queue, const tsr_node *nodes, int32_t n_nodes);
    tsr_status (*write)(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset,
                        const void *src, uint64_t size);
    tsr_status (*read)(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset,
                       void *dst, uint64_t size);
    tsr_status (*synchronize)(tsr_queue *queue);
    void (*destroy)(tsr_queue *queue);
    /* ---- ABI 1.1 (optional, NULL if absent) ---- */
    /* Threads this queue may use for the computes that follow (>= 1). The
     * host calls it before the first compute and whenever the count
     * changes; a queue that has been told uses its own count and ignores
     * tsr_host.n_threads (which a 1.0 plugin reads instead). */
    void (*set_n_threads)(tsr_queue *queue, int32_t n_threads);

    /* ---- ABI 1.3 (optional, NULL if absent; check struct_size) ---- */
    /* Running totals since the queue was created; fill the fields
     * out->struct_size covers. The host takes differences around the
     * calls it measures. */
    void (*get_stats)(tsr_queue *queue, tsr_queue_stats *out);
    /* Profiling on (1) or off (0) for the computes that follow: time each
     * node on the device and add it to tsr_queue_stats.op_ns[node op] once
     * the work is done (at the latest by the next synchronize). Nodes may
     * then run one after another instead of overlapping. Return
     * TSR_ERR_UNSUPPORTED when the device cannot time its work. */
    tsr_status (*set_profiling)(tsr_queue *queue, int32_t on);
} tsr_queue_api;

struct tsr_queue {
    const tsr_queue_api *api;
    void *impl; /* the plugin's state */
};

typedef struct tsr_device_api {
    uint32_t struct_size;
    tsr_status (*get_info)(tsr_device *device, tsr_device_info *info);
    /* 1 if the device can compute this exact node (op, dtypes, shapes,
     * params), else 0. Must be truthful: the host falls back on 0.
     * The host asks while placing nodes, before memory is planned: tensor
     * locations (buffer, offset, data) are not assigned yet; ignore them.
     * A 1.1 host asks only about nodes tsr_node_check (tessera/plugin_check.h)
     * accepted: answer "can this device do it", and say why not through
     * tsr_host.decline. */
    int32_t (*supports_op)(tsr_device *device, const tsr_node *node);
    tsr_status (*buffer_alloc)(tsr_device *device, uint64_t size, tsr_buffer **out);
    void (*buffer_free)(tsr_device *device, tsr_buffer *buffer);
    /* Host address of the buffer's first byte, or NULL if not host-visible. */
    void *(*buffer_host_ptr)(tsr_device *device, tsr_buffer *buffer);
    tsr_status (*queue_create)(tsr_device *device, tsr_queue **out);

    /* ---- ABI 1.1 (optional, NULL if absent; check struct_size) ---- */

    /* Called once before the host uses the device for anything but
     * get_info: compile kernels, create contexts, warm caches. Only devices
     * a user selects are opened, so listing devices stays cheap. On failure
     * write a one-line reason; the host then does not use the device. A
     * 1.0 host never calls it: set up lazily in that case. */
    tsr_status (*open)(tsr_device *device, char *reason, size_t reason_size);
    /* After the host freed every buffer and destroyed every queue of the
     * device (before plugin shutdown). */
    void (*close)(tsr_device *device);

    /* Whole-subgraph offload. nodes[0..n_nodes) are the graph's next nodes
     * in order, each already validated; return how many leading nodes the
     * device takes as one unit (0: none, ask node by node). The host places
     * them all on this device without asking supports_op and hands them to
     * one compute call, so the plugin may fuse them or run them as one
     * device graph. Tensors read by the run that were computed before it,
     * and the run's results read after it, still go through the host's
     * copies; intermediates inside the run may be kept in device-private
     * form only if no node after the run reads them. */
    int32_t (*claim_nodes)(tsr_device *device, const tsr_node *nodes, int32_t n_nodes);

    /* Weight repacking at upload. weight_size: bytes the device needs for
     * weight t in its own layout (0: the plain GGUF size). weight_write:
     * store the plain bytes src (tsr_dtype_row_bytes(ne[0]) * rows) at
     * offset in buffer in the device's layout; t describes the weight as
     * nodes will see it (its buffer/offset are the destination). A queue
     * read() of a range written this way must return the plain bytes
     * (un-repacked), so the host can still copy the weight to a device
     * that declines a node. The host calls weight_write instead of a queue
     * write for weights only; it does not return before the bytes are
     * stored (src may be freed after). */
    uint64_t (*weight_size)(tsr_device *device, const tsr_tensor *t);
    tsr_status (*weight_write)(tsr_device *device, tsr_buffer *buffer, uint64_t offset,
                               const tsr_tensor *t, const void *src);
} tsr_device_api;

struct tsr_device {
    const tsr_device_api *api;
    void *impl; /* the plugin's state */
};

/* --------------------------------------------------------------- plugin */

typedef struct tsr_plugin {
    uint32_t abi_version; /* TSR_ABI_VERSION the plugin was built against */
    uint32_t struct_size; /* sizeof(tsr_plugin) as the plugin knows it */
    const char *name;     /* e.g. "cpu-avx"; devices are named name+index */
    const char *version;  /* the plugin's own version string */
    /* How well this build suits the running machine: 0 = cannot run here.
     * When several files provide the same plugin name (e.g. an AVX2 and an
     * AVX-512 build of cpu-avx), the host keeps the one with the best score. */
    int32_t (*score)(void);
    /* Probe drivers and devices. On failure, or when no device is usable,
     * return a status or report zero devices, and write a one-line reason
     * into reason[reason_size]; never abort the process. */
    tsr_status (*init)(const tsr_host *host, char *reason, size_t reason_size);
    int32_t (*device_count)(void);
    tsr_device *(*device_get)(int32_t index);
    void (*shutdown)(void);
} tsr_plugin;

typedef const tsr_plugin *(*tsr_plugin_entry_fn)(uint32_t host_abi_version);
#define TSR_PLUGIN_ENTRY_SYMBOL "tsr_plugin_entry"

/* ------------------------------------------------------ small helpers */

/* Block geometry of every dtype (tessera/plugin_util.h has the full table
 * with names and layouts). Returns 0 for unknown dtypes. */
static inline int64_t tsr_dtype_block_size(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16:
    case TSR_DTYPE_I8: case TSR_DTYPE_I16: case TSR_DTYPE_I32:
    case TSR_DTYPE_I64: case TSR_DTYPE_F64: return 1;
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0:
    case TSR_DTYPE_Q5_1: case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q8_1:
    case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_MXFP4: return 32;
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: case TSR_DTYPE_Q8_K:
    case TSR_DTYPE_IQ2_XXS: case TSR_DTYPE_IQ2_XS: case TSR_DTYPE_IQ3_XXS:
    case TSR_DTYPE_IQ1_S: case TSR_DTYPE_IQ3_S: case TSR_DTYPE_IQ2_S:
    case TSR_DTYPE_IQ4_XS: case TSR_DTYPE_IQ1_M: case TSR_DTYPE_TQ1_0:
    case TSR_DTYPE_TQ2_0: return 256;
    default: return 0;
    }
}

/* Bytes of one block (one element for plain types); 0 for unknown dtypes. */
static inline int64_t tsr_dtype_block_bytes(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: return 4;
    case TSR_DTYPE_F16: return 2;
    case TSR_DTYPE_BF16: return 2;
    case TSR_DTYPE_I8: return 1;
    case TSR_DTYPE_I16: return 2;
    case TSR_DTYPE_I32: return 4;
    case TSR_DTYPE_I64: return 8;
    case TSR_DTYPE_F64: return 8;
    case TSR_DTYPE_Q4_0: return 18;
    case TSR_DTYPE_Q4_1: return 20;
    case TSR_DTYPE_Q5_0: return 22;
    case TSR_DTYPE_Q5_1: return 24;
    case TSR_DTYPE_Q8_0: return 34;
    case TSR_DTYPE_Q8_1: return 36;
    case TSR_DTYPE_Q2_K: return 84;
    case TSR_DTYPE_Q3_K: return 110;
    case TSR_DTYPE_Q4_K: return 144;
    case TSR_DTYPE_Q5_K: return 176;
    case TSR_DTYPE_Q6_K: return 210;
    case TSR_DTYPE_Q8_K: return 292;
    case TSR_DTYPE_IQ4_NL: return 18;
    case TSR_DTYPE_IQ2_XXS: return 66;
    case TSR_DTYPE_IQ2_XS: return 74;
    case TSR_DTYPE_IQ3_XXS: return 98;
    case TSR_DTYPE_IQ1_S: return 50;
    case TSR_DTYPE_IQ3_S: return 110;
    case TSR_DTYPE_IQ2_S: return 82;
    case TSR_DTYPE_IQ4_XS: return 136;
    case TSR_DTYPE_IQ1_M: return 56;
    case TSR_DTYPE_TQ1_0: return 54;
    case TSR_DTYPE_TQ2_0: return 66;
    case TSR_DTYPE_MXFP4: return 17;
    default: return 0;
    }
}

static inline int64_t tsr_tensor_nelements(const tsr_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* True when the tensor's bytes are packed with no gaps in ne order. */
static inline int tsr_tensor_is_contiguous(const tsr_tensor *t) {
    int64_t bs = tsr_dtype_block_size(t->dtype);
    int64_t expect = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0) return 0;
    if (t->nb[0] != expect) return 0;
    expect *= t->ne[0] / bs;
    for (int d = 1; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] != 1 && t->nb[d] != expect) return 0;
        expect *= t->ne[d];
    }
    return 1;
}

/* Parameter accessors so kernels read the same slot the host wrote. */
static inline float tsr_node_fparam(const tsr_node *n, int i) { return n->fparams[i]; }
static inline int32_t tsr_node_iparam(const tsr_node *n, int i) { return n->iparams[i]; }

/* The plugin's one exported symbol. */
TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_H */
