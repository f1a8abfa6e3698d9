/* graph building: shapes, views, node order and shape errors as messages. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "harness.h"
#include "graph/graph.h"
#include "ref/ref.h"
#include "util/error.h"

static int shape_is(const graph_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return t && t->t.ne[0] == a && t->t.ne[1] == b && t->t.ne[2] == c && t->t.ne[3] == d;
}

TEST(test_shapes) {
    graph *g = graph_new(64);
    graph_tensor *w = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_Q8_0, 64, 48), "w");
    graph_tensor *x = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 64, 5), "x");
    graph_tensor *y = graph_mul_mat(g, w, x);
    EXPECT(shape_is(y, 48, 5, 1, 1), "mul_mat shape");
    EXPECT(y && y->t.nb[1] == 48 * 4, "mul_mat contiguous strides");
    EXPECT(w->t.nb[0] == 34 && w->t.nb[1] == 34 * 2, "Q8_0 strides nb0 %lld nb1 %lld",
           (long long)w->t.nb[0], (long long)w->t.nb[1]);
    graph_tensor *n = graph_rms_norm(g, y, 1e-5f);
    EXPECT(n && n->fparams[TSR_NORM_F_EPS] == 1e-5f, "rms_norm eps");
    graph_tensor *r = graph_reshape_3d(g, n, 16, 3, 5);
    EXPECT(shape_is(r, 16, 3, 5, 1) && r->op == TSR_OP_NONE && r->view_src == n, "reshape view");
    graph_tensor *p = graph_permute(g, r, 0, 2, 1, 3);
    EXPECT(shape_is(p, 16, 5, 3, 1), "permute shape");
    EXPECT(p && p->t.nb[1] == r->t.nb[2] && p->t.nb[2] == r->t.nb[1], "permute strides");
    EXPECT(p && !graph_tensor_is_contiguous(p), "permuted is not contiguous");
    graph_tensor *c = graph_cont(g, p);
    EXPECT(c && graph_tensor_is_contiguous(c) && c->op == TSR_OP_CPY, "cont");
    graph_tensor *t = graph_transpose(g, y);
    EXPECT(shape_is(t, 5, 48, 1, 1), "transpose");
    graph_tensor *v = graph_view_2d(g, y, 8, 5, y->t.nb[1], 4 * 8);
    EXPECT(v && v->view_src == y && v->view_offset == 32, "view_2d");
    graph_tensor *vv = graph_view_1d(g, v, 4, 8);
    EXPECT(vv && vv->view_src == y && vv->view_offset == 40, "view of view resolves to storage");
    graph_tensor *pos = graph_tensor_new_1d(g, TSR_DTYPE_I32, 5);
    graph_rope_params rp = {.n_dims = 16, .mode = TSR_ROPE_NEOX, .freq_base = 10000, .freq_scale = 1};
    graph_tensor *ro = graph_rope(g, r, pos, NULL, &rp);
    EXPECT(ro && ro->iparams[TSR_ROPE_I_N_DIMS] == 16 && ro->iparams[TSR_ROPE_I_MODE] == TSR_ROPE_NEOX &&
               ro->fparams[TSR_ROPE_F_FREQ_BASE] == 10000,
           "rope params");
    graph_tensor *kv = graph_tensor_new_1d(g, TSR_DTYPE_F16, 1000);
    graph_tensor *slot = graph_view_1d(g, kv, 240, 2 * 100);
    graph_tensor *cp = graph_cpy(g, y, slot);
    EXPECT(cp && cp->view_src == kv && cp->view_offset == 200 && cp->t.dtype == TSR_DTYPE_F16,
           "cpy aliases dst storage");
    graph_tensor *am = graph_argmax(g, y);
    EXPECT(am && am->t.dtype == TSR_DTYPE_I32 && am->t.ne[0] == 5, "argmax");
    graph_tensor *cc = graph_concat(g, y, y, 1);
    EXPECT(shape_is(cc, 48, 10, 1, 1), "concat");
    EXPECT(graph_check(g) == 0, "no error expected: %s", error_get());
    /* nodes in creation order: mul_mat, rms_norm, cont, rope, cpy, argmax, concat */
    const int32_t want[] = {TSR_OP_MUL_MAT, TSR_OP_RMS_NORM, TSR_OP_CPY, TSR_OP_ROPE,
                            TSR_OP_CPY, TSR_OP_ARGMAX, TSR_OP_CONCAT};
    EXPECT(graph_n_nodes(g) == 7, "node count %d", graph_n_nodes(g));
    for (int i = 0; i < 7 && i < graph_n_nodes(g); i++)
        EXPECT(graph_node_at(g, i)->op == want[i], "node %d op %d", i, graph_node_at(g, i)->op);
    tsr_node nd;
    graph_node_to_tsr(y, &nd);
    EXPECT(nd.op == TSR_OP_MUL_MAT && nd.n_src == 2 && nd.src[0] == &w->t && nd.src[1] == &x->t &&
              nd.dst == &y->t,
           "graph_node_to_tsr");
    EXPECT(graph_tensor_nbytes(w) == 34 * 2 * 48, "nbytes of Q8_0 weight");
    EXPECT(graph_tensor_nbytes(t) == 48 * 5 * 4, "nbytes of transposed view");
    graph_free(g);
}

static void expect_error(graph *g, const char *what, const char *needle) {
    EXPECT(graph_check(g) != 0, "%s: expected an error", what);
    EXPECT(strstr(error_get(), needle) != NULL, "%s: message '%s' lacks '%s'", what, error_get(),
           needle);
}

TEST(test_errors) {
    graph *g = graph_new(32);
    graph_tensor *w = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 64, 64),
                                            "blk.0.attn_q.weight");
    graph_tensor *x = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 32, 5),
                                            "attn_norm-0");
    graph_tensor *y = graph_mul_mat(g, w, x);
    EXPECT(y == NULL, "mismatched mul_mat must fail");
    expect_error(g, "mul_mat",
                 "mul_mat: 'blk.0.attn_q.weight' [64, 64] x 'attn_norm-0' [32, 5]: inner "
                 "dimensions differ (64 vs 32)");
    /* later ops on a NULL keep the first error */
    graph_tensor *z = graph_add(g, y, x);
    EXPECT(z == NULL, "op on NULL returns NULL");
    expect_error(g, "first error kept", "inner dimensions differ");
    graph_free(g);

    g = graph_new(32);
    graph_tensor *a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    graph_tensor *b = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 4, 4), "b");
    EXPECT(graph_add(g, a, b) == NULL, "add broadcast mismatch");
    expect_error(g, "add", "add: 'a' [6, 4] and 'b' [4, 4]");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    EXPECT(graph_reshape_2d(g, a, 5, 5) == NULL, "reshape count mismatch");
    expect_error(g, "reshape", "reshape_2d: 'a' [6, 4] has 24 elements");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    EXPECT(graph_view_1d(g, a, 10, 4 * 20) == NULL, "view past end");
    expect_error(g, "view", "past the end of 'a' (96 bytes)");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    EXPECT(graph_view_2d(g, a, 2, (int64_t)1 << 62, 16, 0) == NULL, "overflowing view");
    expect_error(g, "view overflow", "view_2d: view of 'a' [6, 4]");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    EXPECT(graph_view_1d(g, a, 2, UINT64_MAX - 4) == NULL, "offset near UINT64_MAX");
    expect_error(g, "view offset", "past the end of 'a'");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 4), "a");
    EXPECT(graph_reshape_2d(g, a, (int64_t)1 << 40, (int64_t)1 << 40) == NULL, "huge reshape");
    expect_error(g, "reshape overflow", "has 24 elements");
    EXPECT(graph_view_1d(g, a, (int64_t)1 << 62, 0) == NULL, "huge view_1d");
    graph_free(g);

    g = graph_new(32);
    EXPECT(graph_tensor_new_4d(g, TSR_DTYPE_F32, (int64_t)1 << 40, 1 << 20, 1 << 10, 1) == NULL,
           "huge tensor");
    expect_error(g, "huge", "is too large");
    graph_free(g);

    g = graph_new(32);
    EXPECT(graph_tensor_new_2d(g, TSR_DTYPE_Q4_0, 30, 2) == NULL, "Q4_0 row of 30");
    expect_error(g, "block", "ne[0] is 30");
    graph_free(g);

    g = graph_new(2);
    graph_tensor_new_1d(g, TSR_DTYPE_F32, 4);
    graph_tensor_new_1d(g, TSR_DTYPE_F32, 4);
    EXPECT(graph_tensor_new_1d(g, TSR_DTYPE_F32, 4) == NULL, "arena full");
    expect_error(g, "full", "graph is full (2 tensors)");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_F32, 8, 2, 3), "q");
    graph_tensor *pos = graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_I32, 4), "pos");
    graph_rope_params rp = {.n_dims = 8, .mode = TSR_ROPE_NORMAL, .freq_base = 10000, .freq_scale = 1};
    EXPECT(graph_rope(g, a, pos, NULL, &rp) == NULL, "rope positions mismatch");
    expect_error(g, "rope", "rope: positions 'pos' [4] must be [3]");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 2), "logits");
    graph_tensor *mask = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 7, 2), "mask");
    EXPECT(graph_soft_max(g, a, mask, 1.0f, 0.0f) == NULL, "mask mismatch");
    expect_error(g, "soft_max", "soft_max: mask 'mask' [7, 2] does not cover input 'logits' [8, 2]");
    graph_free(g);
}

/* Run every node of g on ref, each tensor in its own calloc'd storage
 * (views into their storage's); returns the storage to free. */
static void **run_on_ref(graph *g) {
    const int32_t n = graph_n_tensors(g);
    void **mem = calloc((size_t)n, sizeof *mem);
    for (int32_t i = 0; i < n; i++) {
        graph_tensor *t = graph_tensor_at(g, i);
        if (t->view_src) continue;
        if (!t->t.data) mem[i] = calloc(1, graph_tensor_nbytes(t)), t->t.data = mem[i];
    }
    for (int32_t i = 0; i < n; i++) {
        graph_tensor *t = graph_tensor_at(g, i);
        if (t->view_src) t->t.data = (uint8_t *)t->view_src->t.data + t->view_offset;
    }
    for (int32_t i = 0; i < graph_n_nodes(g); i++) {
        tsr_node nd;
        graph_node_to_tsr(graph_node_at(g, i), &nd);
        EXPECT(ref_compute(&nd, 1, NULL) == TSR_OK, "node %d: %s", (int)i, error_get());
    }
    return mem;
}

static void free_run(graph *g, void **mem) {
    for (int32_t i = 0; i < graph_n_tensors(g); i++) free(mem[i]);
    free(mem);
}

/* graph_mul_mat_id of experts 'exps' Q8_0 [64, 16, 4], activations 'x' F32
 * [K, n_b, T] and ids 'ids' [2, 5] of ids_dtype must fail with want. */
static void mul_mat_id_error(int64_t K, int64_t n_b, int64_t T, int32_t ids_dtype, const char *want) {
    graph *g = graph_new(32);
    graph_tensor *ex = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_Q8_0, 64, 16, 4), "exps");
    graph_tensor *x = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_F32, K, n_b, T), "x");
    graph_tensor *ids = graph_tensor_set_name(graph_tensor_new_2d(g, ids_dtype, 2, 5), "ids");
    EXPECT(graph_mul_mat_id(g, ex, x, ids) == NULL, "%s: accepted", want);
    expect_error(g, "mul_mat_id", want);
    graph_free(g);
}

/* The mixture-of-experts constructors (ABI 1.4): shapes, errors naming the
 * tensors, and graph_sigmoid (a composite) computed on ref. */
TEST(test_moe) {
    graph *g = graph_new(64);
    graph_tensor *ex = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_Q4_K, 256, 48, 8), "blk.0.ffn_up_exps");
    graph_tensor *x = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_F32, 256, 1, 5), "ffn_norm-0");
    graph_tensor *logits = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 5), "router");
    graph_tensor *ids = graph_top_k(g, logits, 2);
    EXPECT(shape_is(ids, 2, 5, 1, 1) && ids->t.dtype == TSR_DTYPE_I32 && ids->op == TSR_OP_TOP_K, "top_k");
    graph_tensor *up = graph_mul_mat_id(g, ex, x, ids);
    EXPECT(shape_is(up, 48, 2, 5, 1) && up->op == TSR_OP_MUL_MAT_ID && up->n_src == 3, "mul_mat_id n_b 1");
    graph_tensor *x2 = graph_tensor_new_3d(g, TSR_DTYPE_F32, 256, 2, 5);
    EXPECT(shape_is(graph_mul_mat_id(g, ex, x2, ids), 48, 2, 5, 1), "mul_mat_id n_b = n_used");
    graph_tensor *w = graph_reshape_3d(g, logits, 1, 8, 5);
    graph_tensor *sel = graph_get_rows(g, w, ids); /* [1, 2, 5] */
    graph_tensor *sum = graph_sum_rows(g, graph_reshape_2d(g, sel, 2, 5));
    EXPECT(shape_is(sum, 1, 5, 1, 1) && sum->op == TSR_OP_SUM_ROWS, "sum_rows");
    graph_tensor *norm = graph_div(g, graph_reshape_2d(g, sel, 2, 5), sum);
    EXPECT(shape_is(norm, 2, 5, 1, 1) && norm->op == TSR_OP_DIV, "div");
    EXPECT(graph_check(g) == 0, "no error expected: %s", error_get());
    graph_free(g);

    mul_mat_id_error(64, 3, 5, TSR_DTYPE_I32, "mul_mat_id: activations 'x' [64, 3, 5]: ne[1] must be 1 or the 2");
    mul_mat_id_error(64, 1, 4, TSR_DTYPE_I32, "activations 'x' [64, 1, 4] have 4 tokens, ids 'ids' [2, 5] 5");
    mul_mat_id_error(32, 1, 5, TSR_DTYPE_F32, "mul_mat_id: expert ids 'ids' [2, 5] is F32, expected I32");

    g = graph_new(32);
    logits = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 5), "router");
    EXPECT(graph_top_k(g, logits, 9) == NULL, "k 9 of 8");
    expect_error(g, "top_k", "top_k: 'router' [8, 5]: k = 9 is not 1..8");
    graph_free(g);

    /* graph_sigmoid on ref: 1 / (1 + e^-x) over a transposed view */
    g = graph_new(32);
    float v[6] = {0.0f, 1.0f, -2.0f, 30.0f, -30.0f, 0.25f};
    graph_tensor *a = graph_tensor_new_2d(g, TSR_DTYPE_F32, 3, 2);
    graph_tensor_bind(a, GRAPH_INPUT, -1, NULL, 0, v);
    graph_tensor *sg = graph_sigmoid(g, graph_transpose(g, a));
    EXPECT(shape_is(sg, 2, 3, 1, 1) && graph_tensor_is_contiguous(sg), "sigmoid shape");
    EXPECT(graph_check(g) == 0, "sigmoid graph: %s", error_get());
    if (sg) {
        void **mem = run_on_ref(g);
        const float *out = sg->view_src ? sg->view_src->t.data : sg->t.data;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                const double want = 1.0 / (1.0 + exp(-(double)v[i * 3 + j]));
                EXPECT_NEAR(out[j * 2 + i], want, 2e-7, "sigmoid(%g)", (double)v[i * 3 + j]);
            }
        free_run(g, mem);
    }
    graph_free(g);
}

/* graph_swiglu_oai (gpt-oss's clamped SwiGLU): shape, parameters in their
 * slots, and the errors naming the tensors, on ref against its formula. */
TEST(test_swiglu_oai) {
    graph *g = graph_new(32);
    float gate[6] = {-9.0f, -1.0f, 0.0f, 0.5f, 6.9f, 30.0f};
    float up[6] = {-30.0f, -7.5f, -0.25f, 0.0f, 3.0f, 8.0f};
    graph_tensor *a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 3, 2), "gate");
    graph_tensor *b = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 3, 2), "up");
    graph_tensor_bind(a, GRAPH_INPUT, -1, NULL, 0, gate);
    graph_tensor_bind(b, GRAPH_INPUT, -1, NULL, 0, up);
    graph_tensor *y = graph_swiglu_oai(g, a, b, 1.702f, 7.0f);
    EXPECT(shape_is(y, 3, 2, 1, 1) && y->op == TSR_OP_SWIGLU_OAI && y->n_src == 2 && y->t.dtype == TSR_DTYPE_F32,
           "swiglu_oai shape");
    if (y) {
        tsr_node nd;
        graph_node_to_tsr(y, &nd);
        const tsr_swiglu_oai_params p = tsr_swiglu_oai_params_of(&nd);
        EXPECT(p.alpha == 1.702f && p.limit == 7.0f, "swiglu_oai params %g %g", (double)p.alpha, (double)p.limit);
    }
    EXPECT(graph_check(g) == 0, "swiglu_oai graph: %s", error_get());
    if (y) {
        void **mem = run_on_ref(g);
        const float *out = y->t.data;
        for (int i = 0; i < 6; i++) {
            const double gg = fmin(gate[i], 7.0), uu = fmax(-7.0, fmin(up[i], 7.0));
            const double want = gg / (1.0 + exp(-1.702 * gg)) * (uu + 1.0);
            EXPECT_NEAR(out[i], want, 1e-5 * fmax(1.0, fabs(want)), "swiglu_oai(%g, %g)", (double)gate[i],
                        (double)up[i]);
        }
        free_run(g, mem);
    }
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 3), "ffn_gate");
    b = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 1), "ffn_up");
    EXPECT(graph_swiglu_oai(g, a, b, 1.702f, 7.0f) == NULL, "swiglu_oai broadcast");
    expect_error(g, "swiglu_oai shapes", "swiglu_oai: 'ffn_gate' [8, 3] and 'ffn_up' [8]: shapes differ");
    graph_free(g);

    g = graph_new(32);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 3), "ffn_gate");
    b = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F16, 8, 3), "ffn_up");
    EXPECT(graph_swiglu_oai(g, a, b, 1.702f, 7.0f) == NULL, "swiglu_oai F16 up");
    expect_error(g, "swiglu_oai dtype", "swiglu_oai: up 'ffn_up' [8, 3] is F16, expected F32");
    graph_free(g);

    const float bad[][2] = {{1.702f, 0.0f}, {0.0f, 7.0f}, {1.702f, INFINITY}, {NAN, 7.0f}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = graph_new(32);
        a = graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 3);
        b = graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 3);
        EXPECT(graph_swiglu_oai(g, a, b, bad[i][0], bad[i][1]) == NULL, "swiglu_oai alpha %g limit %g",
               (double)bad[i][0], (double)bad[i][1]);
        expect_error(g, "swiglu_oai params", "must be finite and > 0");
        graph_free(g);
    }
}

/* TSR_OPS gives both spellings of each op's name; they must agree. */
/* graph_delta_net: its 1-D output (y, then the state), its parameters in
 * their slots, and errors naming the tensors. */
TEST(test_delta_net) {
    graph *g = graph_new(32);
    /* Dv 16, Dk 8, 6 v heads over 2 q/k heads, 5 tokens */
    graph_tensor *st = graph_tensor_set_name(graph_tensor_new_4d(g, TSR_DTYPE_F32, 16, 8, 6, 1), "state");
    graph_tensor *qkv = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 2 * 2 * 8 + 6 * 16, 5), "qkv");
    graph_tensor *gt = graph_tensor_set_name(graph_tensor_new_4d(g, TSR_DTYPE_F32, 6, 2, 5, 1), "gates");
    graph_tensor *a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 1), "A");
    graph_tensor *y = graph_delta_net(g, st, graph_reshape_3d(g, qkv, 128, 5, 1), gt, a, 1e-6f, 0.25f, true);
    EXPECT(shape_is(y, 16 * 6 * 5 + 16 * 8 * 6, 1, 1, 1) && y->op == TSR_OP_DELTA_NET && y->n_src == 4,
           "delta_net shape");
    if (y) {
        tsr_node nd;
        graph_node_to_tsr(y, &nd);
        const tsr_delta_net_params p = tsr_delta_net_params_of(&nd);
        EXPECT(p.eps == 1e-6f && p.scale == 0.25f && p.kv_tiled == 1, "delta_net params");
    }
    /* 6 v heads over 4 q/k heads */
    graph_tensor *qkv4 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 2 * 4 * 8 + 6 * 16, 5), "qkv4");
    EXPECT(graph_delta_net(g, st, graph_reshape_3d(g, qkv4, 160, 5, 1), gt, a, 1e-6f, 0.25f, false) == NULL,
           "delta_net 6 heads over 4");
    expect_error(g, "delta_net heads", "delta_net: qkv");
    graph_free(g);

    g = graph_new(32);
    st = graph_tensor_new_4d(g, TSR_DTYPE_F32, 16, 8, 6, 1);
    qkv = graph_tensor_new_3d(g, TSR_DTYPE_F32, 128, 5, 1);
    gt = graph_tensor_set_name(graph_tensor_new_4d(g, TSR_DTYPE_F32, 6, 1, 5, 1), "ba");
    a = graph_tensor_new_2d(g, TSR_DTYPE_F32, 6, 1);
    EXPECT(graph_delta_net(g, st, qkv, gt, a, 1e-6f, 0.25f, false) == NULL, "delta_net gates of one row");
    expect_error(g, "delta_net gates", "delta_net: gates 'ba' [6, 1, 5] is not [6, 2, 5, 1]");
    graph_free(g);
}

/* graph_gelu_erf (ABI 1.6): its op and shape, and an F16 input refused by
 * name. */
TEST(test_gelu_erf) {
    graph *g = graph_new(16);
    graph_tensor *a = graph_tensor_set_name(graph_tensor_new_3d(g, TSR_DTYPE_F32, 7, 3, 2), "ffn_up-0");
    graph_tensor *y = graph_gelu_erf(g, a);
    EXPECT(shape_is(y, 7, 3, 2, 1) && y->op == TSR_OP_GELU_ERF && y->n_src == 1 && y->src[0] == a,
           "gelu_erf node");
    EXPECT(graph_check(g) == 0, "gelu_erf graph: %s", error_get());
    graph_free(g);
    g = graph_new(16);
    a = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F16, 7, 3), "h16");
    EXPECT(graph_gelu_erf(g, a) == NULL, "gelu_erf of F16");
    expect_error(g, "gelu_erf F16", "gelu_erf: input 'h16' [7, 3] is F16, expected F32");
    graph_free(g);
}

TEST(test_op_names) {
    for (int32_t op = 0; op < TSR_OP_COUNT; op++) {
        const char *upper = tsr_op_name(op), *lower = graph_op_name(op);
        size_t i = 0;
        while (upper[i] && tolower((unsigned char)upper[i]) == lower[i]) i++;
        EXPECT(!upper[i] && !lower[i], "op %d: '%s' vs '%s'", (int)op, upper, lower);
    }
    EXPECT(strcmp(tsr_op_name(TSR_OP_COUNT), "unknown") == 0, "past the last op");
    EXPECT(strcmp(graph_op_name(TSR_OP_COUNT), "unknown-op") == 0, "past the last op (graph)");
}

HARNESS_MAIN("graph build", HARNESS_TEST(test_shapes), HARNESS_TEST(test_errors), HARNESS_TEST(test_op_names),
             HARNESS_TEST(test_moe), HARNESS_TEST(test_swiglu_oai), HARNESS_TEST(test_delta_net),
             HARNESS_TEST(test_gelu_erf))
