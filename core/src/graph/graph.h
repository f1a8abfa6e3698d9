/*
 * graph — tensor graphs: building, shape inference, views.
 *
 * A graph owns its tensors. Leaves (op TSR_OP_NONE) are weights, inputs and
 * persistent state (KV cache); every other tensor is a node computed from its
 * sources. Nodes are kept in creation order, which is a topological order
 * because a node can only name tensors that already exist.
 *
 * Views (view/reshape/permute/transpose) are not computed: they are leaves
 * whose bytes are those of view_src at view_offset, with their own ne/nb.
 *
 * Shape errors do not abort: the op records a message naming the op, the
 * tensors and their shapes, returns NULL, and every later op given a NULL
 * source returns NULL too. Build the whole graph, then call graph_check().
 *
 * Where bytes live is decided later by the scheduler (sched/), which fills
 * each tsr_tensor's buffer/offset/data. Weights and persistent tensors are
 * bound by the caller with graph_tensor_bind() before scheduling.
 */
#ifndef TESSERA_GRAPH_H
#define TESSERA_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

enum {
    GRAPH_NAME_MAX = 64
};

/* Roles of a tensor; an input is filled by the host before compute, an output
 * read after; a weight or persistent tensor is bound to existing memory. */
enum {
    GRAPH_INPUT = 1 << 0,
    GRAPH_OUTPUT = 1 << 1,
    GRAPH_WEIGHT = 1 << 2,     /* constant, bound to model memory            */
    GRAPH_PERSISTENT = 1 << 3, /* outlives the graph (KV cache), bound       */
    GRAPH_BOUND = 1 << 4       /* set by graph_tensor_bind: caller's memory  */
};

typedef struct graph_tensor graph_tensor;

struct graph_tensor {
    tsr_tensor t;          /* what backends see: dtype, ne, nb, location, name */
    int32_t op;            /* tsr_op; TSR_OP_NONE for leaves and views        */
    int32_t n_src;
    graph_tensor *src[TSR_MAX_SRC];
    int32_t iparams[TSR_MAX_PARAMS];
    float fparams[TSR_MAX_PARAMS];
    graph_tensor *view_src; /* tensor whose storage this view shares, or NULL  */
    uint64_t view_offset;   /* byte offset into view_src's storage             */
    uint32_t flags;         /* GRAPH_INPUT | GRAPH_OUTPUT | ...               */
    int32_t index;          /* position in the graph's tensor list            */
    int32_t device;         /* placement, set by the scheduler (-1: none)     */
    int32_t home_device;    /* for bound tensors: the host device index whose
                               memory holds them (-1: plain host memory)      */
    char name[GRAPH_NAME_MAX];
};

typedef struct graph graph;

/* A graph with room for max_tensors tensors (nodes, leaves and views). */
graph *graph_new(int32_t max_tensors);
void graph_free(graph *g);

/* 0 if every op so far was well-formed; else -1 and error_get() holds the
 * first shape error. */
int graph_check(const graph *g);

/* All tensors, in creation order. */
int32_t graph_n_tensors(const graph *g);
graph_tensor *graph_tensor_at(const graph *g, int32_t i);

/* Computed nodes only (op != TSR_OP_NONE), in topological order. */
int32_t graph_n_nodes(const graph *g);
graph_tensor *graph_node_at(const graph *g, int32_t i);

/* ------------------------------------------------------------- tensors */

/* A new leaf with contiguous strides; n_dims 1..4, unused ne are 1. */
graph_tensor *graph_tensor_new(graph *g, int32_t dtype, int n_dims, const int64_t *ne);
graph_tensor *graph_tensor_new_1d(graph *g, int32_t dtype, int64_t ne0);
graph_tensor *graph_tensor_new_2d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1);
graph_tensor *graph_tensor_new_3d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1, int64_t ne2);
graph_tensor *graph_tensor_new_4d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1,
                                  int64_t ne2, int64_t ne3);

/* printf-style name, truncated to GRAPH_NAME_MAX-1; returns t. */
graph_tensor *graph_tensor_set_name(graph_tensor *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Mark roles (returns t, NULL-safe). */
graph_tensor *graph_set_input(graph_tensor *t);
graph_tensor *graph_set_output(graph_tensor *t);

/* Bind a weight or persistent leaf to existing memory: a tsr_buffer of host
 * device `home_device` at `offset` (data = its host address or NULL), or
 * plain host memory (buffer NULL, home_device -1, data = address). */
void graph_tensor_bind(graph_tensor *t, uint32_t role, int32_t home_device,
                       tsr_buffer *buffer, uint64_t offset, void *data);

/* Bytes spanned by t (from its first to one past its last byte). */
uint64_t graph_tensor_nbytes(const graph_tensor *t);
int64_t graph_tensor_nelements(const graph_tensor *t);
bool graph_tensor_is_contiguous(const graph_tensor *t);

/* The tensor that owns the storage t lives in (t itself if not a view), and
 * t's byte offset within it. */
graph_tensor *graph_tensor_storage(graph_tensor *t, uint64_t *offset);

/* --------------------------------------------------------------- views */

graph_tensor *graph_view_1d(graph *g, graph_tensor *a, int64_t ne0, uint64_t offset);
graph_tensor *graph_view_2d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1,
                            uint64_t nb1, uint64_t offset);
graph_tensor *graph_view_3d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                            uint64_t nb1, uint64_t nb2, uint64_t offset);
graph_tensor *graph_view_4d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                            int64_t ne3, uint64_t nb1, uint64_t nb2, uint64_t nb3,
                            uint64_t offset);
/* a must be contiguous; element count must match. */
graph_tensor *graph_reshape_2d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1);
graph_tensor *graph_reshape_3d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
graph_tensor *graph_reshape_4d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               int64_t ne3);
/* Dimension i of a becomes dimension ax_i of the result (ggml's convention). */
graph_tensor *graph_permute(graph *g, graph_tensor *a, int ax0, int ax1, int ax2, int ax3);
/* Swap dimensions 0 and 1. */
graph_tensor *graph_transpose(graph *g, graph_tensor *a);

/* ----------------------------------------------------------------- ops */
/* Semantics of each op: see the op list in tessera/plugin.h. */

graph_tensor *graph_get_rows(graph *g, graph_tensor *a, graph_tensor *rows);
graph_tensor *graph_add(graph *g, graph_tensor *a, graph_tensor *b);
graph_tensor *graph_mul(graph *g, graph_tensor *a, graph_tensor *b);
graph_tensor *graph_scale(graph *g, graph_tensor *a, float scale, float bias);
/* w [K, M, ...] any dtype, x [K, N, ...] F32 -> [M, N, ...] F32 */
graph_tensor *graph_mul_mat(graph *g, graph_tensor *w, graph_tensor *x);
graph_tensor *graph_rms_norm(graph *g, graph_tensor *a, float eps);
graph_tensor *graph_norm(graph *g, graph_tensor *a, float eps);

typedef struct graph_rope_params {
    int32_t n_dims;      /* rotated dimensions (<= head_dim)           */
    int32_t mode;        /* TSR_ROPE_NORMAL or TSR_ROPE_NEOX           */
    int32_t n_ctx_orig;  /* original training context (YaRN)          */
    float freq_base;
    float freq_scale;
    float ext_factor;    /* 0 = no YaRN                                */
    float attn_factor;   /* 1 normally                                 */
    float beta_fast;
    float beta_slow;
} graph_rope_params;

/* a [head_dim, n_head, n_tokens], pos I32 [n_tokens], freq_factors F32
 * [n_dims/2] or NULL. */
graph_tensor *graph_rope(graph *g, graph_tensor *a, graph_tensor *pos,
                         graph_tensor *freq_factors, const graph_rope_params *p);
graph_tensor *graph_soft_max(graph *g, graph_tensor *a, graph_tensor *mask, float scale,
                             float max_bias);
graph_tensor *graph_silu(graph *g, graph_tensor *a);
/* GELU: the tanh approximation (llama.cpp's ggml_gelu); GELU_ERF: the
 * exact form 0.5 x (1 + erf(x / sqrt 2)) (ggml_gelu_erf). */
graph_tensor *graph_gelu(graph *g, graph_tensor *a);
graph_tensor *graph_gelu_erf(graph *g, graph_tensor *a);
graph_tensor *graph_swiglu(graph *g, graph_tensor *a, graph_tensor *b);
/* gpt-oss's clamped SwiGLU (SWIGLU_OAI): g = min(gate, limit),
 * g * sigmoid(alpha g) * (clamp(up, -limit, limit) + 1); shapes equal. */
graph_tensor *graph_swiglu_oai(graph *g, graph_tensor *gate, graph_tensor *up, float alpha, float limit);
/* Copy/convert a into dst (often a view of a persistent tensor); returns the
 * node, which aliases dst's storage. */
graph_tensor *graph_cpy(graph *g, graph_tensor *a, graph_tensor *dst);
/* A contiguous copy of a, converted to dtype. */
graph_tensor *graph_cast(graph *g, graph_tensor *a, int32_t dtype);
/* A contiguous copy of a (same dtype). */
graph_tensor *graph_cont(graph *g, graph_tensor *a);
graph_tensor *graph_concat(graph *g, graph_tensor *a, graph_tensor *b, int dim);
graph_tensor *graph_argmax(graph *g, graph_tensor *a);
/* q [D, n_q, H], k/v [D, n_kv, H_kv], mask [n_kv, n_q'] or NULL -> [D, H, n_q] */
graph_tensor *graph_flash_attn(graph *g, graph_tensor *q, graph_tensor *k, graph_tensor *v,
                               graph_tensor *mask, float scale);
/* Causal depthwise convolution over time (SSM_CONV): sx [K - 1 + T, C, S],
 * kernel [K, C] -> [C, T, S]. */
graph_tensor *graph_ssm_conv(graph *g, graph_tensor *sx, graph_tensor *kernel);
/* Mamba-2's selective scan (SSM_SCAN): state [N, P, H, S], xBC
 * [P*H + 2*G*N, T, S], dt [H, T, S], A [H] or [1, H] -> 1-D
 * [P*H*T*S + N*P*H*S]: y [P, H, T, S] then the final state [N, P, H, S]. */
graph_tensor *graph_ssm_scan(graph *g, graph_tensor *state, graph_tensor *xbc, graph_tensor *dt,
                             graph_tensor *a);
/* The gated delta rule (DELTA_NET, ABI 1.5): state [Dv, Dk, H, S], qkv
 * [2*Hk*Dk + H*Dv, T, S] (q, k, v per token), gates [H, 2, T, S] (beta
 * logits, then the decay inputs), A [H] or [1, H] -> 1-D
 * [Dv*H*T*S + Dv*Dk*H*S]: y [Dv, H, T, S] then the final state. q and k
 * are L2-normalised (eps), q scaled; kv_tiled: v head h reads q/k head
 * h % Hk, else h / (H / Hk). */
graph_tensor *graph_delta_net(graph *g, graph_tensor *state, graph_tensor *qkv, graph_tensor *gates, graph_tensor *a,
                              float eps, float scale, bool kv_tiled);

/* ----------------------------------------------- mixture of experts (1.4) */

/* The chosen experts' products: experts [K, N, E] (a weight dtype, rows
 * contiguous), x F32 [K, n_b, T] with n_b 1 (every slot reads the token's one
 * row) or n_used (slot s reads row s), ids I32 [n_used, T] (expert of slot s
 * of token t) -> F32 [N, n_used, T]:
 *   out[:, s, t] = experts[:, :, ids[s, t]] x[:, s % n_b, t] */
graph_tensor *graph_mul_mat_id(graph *g, graph_tensor *experts, graph_tensor *x, graph_tensor *ids);
/* a F32 [n, r, b2, b3] -> I32 [k, r, b2, b3]: each row's k largest, largest
 * first, equal values by lower index, NaN last; 1 <= k <= n. */
graph_tensor *graph_top_k(graph *g, graph_tensor *a, int64_t k);
/* a F32 [n, r, b2, b3] -> F32 [1, r, b2, b3]: the sum of each row. */
graph_tensor *graph_sum_rows(graph *g, graph_tensor *a);
/* a / b, b broadcast as in graph_add. */
graph_tensor *graph_div(graph *g, graph_tensor *a, graph_tensor *b);
/* 1 / (1 + e^-a), element by element: no op of its own (the ABI has none),
 * but SOFT_MAX over the pair (a, 0): e^a / (e^a + e^0). Four nodes on a
 * router's few logits (SCALE, CONCAT, SOFT_MAX, CPY); a must be finite
 * (the 0 is a * 0). Any shape; returns a contiguous tensor of a's shape. */
graph_tensor *graph_sigmoid(graph *g, graph_tensor *a);

/* The ABI node for a computed tensor (pointers into g's tensors). */
void graph_node_to_tsr(const graph_tensor *t, tsr_node *out);

/* "mul_mat", "rope", ...; "unknown-op" for numbers outside tsr_op. */
const char *graph_op_name(int32_t op);

#endif
