/*
 * conf_internal — the pieces of the conformance suite: a backend under test,
 * a test case (one node, its tensors and their storage), the runner that
 * executes cases and keeps the counts, and the case generators.
 */
#ifndef TESSERA_CONF_INTERNAL_H
#define TESSERA_CONF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tessera/plugin_util.h>

/* ---------------------------------------------------------------- backend */

typedef struct conf_backend {
    void *dl;                 /* dlopen handle, NULL for the built-in ref */
    const tsr_plugin *plugin;
    tsr_host host;
    volatile int abort_flag;
    bool initialized;
    char reason[320];         /* why there is no usable device */
    char cache_dir[4096];
} conf_backend;

/* Load target ("ref" or a .so path) and init it. -1 with error_get() when it
 * cannot be loaded at all; 0 otherwise (device_count may still be 0, with
 * b->reason saying why). */
int conf_backend_open(conf_backend *b, const char *target);
int32_t conf_backend_device_count(const conf_backend *b);
void conf_backend_close(conf_backend *b);
/* Where tsr_host.decline puts the reason during one supports_op call on
 * node (why NULL: the call is over). */
void conf_backend_asking(char *why, size_t why_size, const tsr_node *node);

/* ------------------------------------------------------------------ cases */

/* How a tensor lies in its storage. */
typedef enum conf_layout {
    CONF_CONTIG = 0,  /* packed, at offset 0                                   */
    CONF_PADDED,      /* rows padded (nb[1] > row bytes), view at an offset    */
    CONF_PERMUTED,    /* dims 1 and 2 swapped in storage (nb[2] < nb[1])        */
    CONF_TRANSPOSED   /* dims 0 and 1 swapped in storage (plain dtypes only)    */
} conf_layout;

/* What values a source holds. */
typedef enum conf_fill_kind {
    CONF_FILL_UNIFORM = 0, /* uniform in [lo, hi)                               */
    CONF_FILL_INDEX,       /* I32 uniform in [0, range)                          */
    CONF_FILL_MASK,        /* causal mask over [n_kv, rows]: row i sees the first
                              n_kv - visible_gap + i entries, values in [lo, 0],
                              the rest -inf                                       */
} conf_fill_kind;

typedef struct conf_fill {
    conf_fill_kind kind;
    float lo, hi;
    int64_t range;       /* INDEX: exclusive upper bound */
    int64_t visible_gap; /* MASK: n_q rows used (row i sees n_kv - gap + 1 + i) */
} conf_fill;

#define CONF_MAX_STORAGE 16

typedef struct conf_storage {
    uint64_t size;
    uint8_t *init;    /* initial bytes (inputs, or the dst sentinel) */
    uint8_t *ref_out; /* after ref computed */
    uint8_t *dev_out; /* after the device computed, read back */
    tsr_buffer *buf;  /* device buffer while running */
} conf_storage;

typedef struct conf_tensor {
    tsr_tensor t;     /* dtype, ne, nb; offset = byte offset in its storage */
    int32_t storage;  /* index in conf_case.storage, -1 if absent */
} conf_tensor;

/* Tolerance: |got - want| <= abs + rel*|want| + norm*max|want| per element. */
typedef struct conf_tol {
    double abs, rel, norm;
} conf_tol;

/* One node of a case with its tensors. */
typedef struct conf_node {
    tsr_node node;          /* op, n_src, params; tensors filled in when run */
    conf_tensor src[TSR_MAX_SRC];
    conf_tensor dst;
    conf_tol tol;
    bool weight_src0;       /* src0 is a weight: plain host memory on devices that read it */
} conf_node;

#define CONF_MAX_NODES 8

/* A case is a short list of nodes computed in one compute() call (most
 * cases have one). The fields node..weight_src0 describe the node being
 * built, the last of the list; conf_case_next_node() files it under
 * earlier[] and starts another. */
typedef struct conf_case {
    char name[200];
    tsr_node node;
    conf_tensor src[TSR_MAX_SRC];
    conf_tensor dst;
    conf_tol tol;
    bool weight_src0;
    conf_node earlier[CONF_MAX_NODES - 1];
    int32_t n_earlier;
    conf_storage storage[CONF_MAX_STORAGE];
    int32_t n_storage;
    bool expect_decline;    /* malformed: the device must say no */
    bool bad_data;          /* well-formed, data out of range (e.g. an expert id):
                               ref refuses it; the device refuses it too
                               (compute() fails with TSR_ERR_INVALID) or
                               writes 0 to every element of dst */
    bool failed_to_build;   /* a builder ran out of memory or room */
    bool seeded;            /* index and seed assigned                */
    int32_t index;          /* position in its family (--case N)      */
    uint64_t seed;          /* its data: from the family and index only */
} conf_case;

/* ----------------------------------------------------------------- runner */

typedef struct conf_stats {
    int64_t passed, failed, unsupported;
    double worst;           /* largest error / allowed ratio among passes and fails */
} conf_stats;

/* What a family's child process reports to the parent (shared memory):
 * its counts, and the case on the device when it died. */
typedef struct conf_shared {
    conf_stats family;
    int32_t failures_shown;
    int32_t case_index;     /* case on the device now, -1 none */
    uint64_t case_seed;
    char case_name[200];
    int32_t finished;       /* the family ran to its end */
} conf_shared;

typedef struct conf_runner {
    const conf_backend *backend;
    tsr_device *dev;
    int32_t device_index;
    tsr_device_info info;
    tsr_queue *queue;
    bool exact;             /* the device is ref itself: demand identical bytes */
    bool verbose;
    FILE *out;
    uint64_t seed;          /* the PRNG state while a case is built */
    conf_stats family;      /* current op family */
    int32_t family_failures_shown;
    const char *target;     /* for the re-run command */
    const char *family_name;
    uint64_t family_seed;   /* from the family's name: the same with or without --op */
    int32_t case_index;     /* next case of the family */
    int32_t only_case;      /* --case N, or -1 for all */
    bool rerun_shown;       /* the re-run command printed for this family */
    conf_shared *shared;    /* set in a family's child process */
    char declined[256];     /* the reason the device gave (tsr_host.decline) */
    bool opened;            /* the ABI 1.1 open hook was called */
} conf_runner;

/* Start a case for op; the name is printed in reports. */
void conf_case_init(conf_case *c, int32_t op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Add source slot i / the dst with its own storage. ne has 4 entries. */
conf_tensor *conf_case_src(conf_runner *r, conf_case *c, int i, int32_t dtype, const int64_t ne[4],
                           conf_layout layout, conf_fill fill);
conf_tensor *conf_case_dst(conf_case *c, int32_t dtype, const int64_t ne[4], conf_layout layout);
/* dst computed in place: same storage, dtype, shape and strides as src i. */
void conf_case_dst_inplace(conf_case *c, int i);
/* The dst of a case run in several storage variants: in place on source 0
 * when in_place, else its own storage laid out as layout. */
void conf_case_dst_as(conf_case *c, int32_t dtype, const int64_t ne[4], bool in_place, conf_layout layout);
/* An optional source left out (e.g. no mask): counts in n_src as NULL. */
void conf_case_src_none(conf_case *c, int i);
/* Finish the node being built and start another computing op. */
void conf_case_next_node(conf_case *c, int32_t op);
/* Source slot i of the node being built is the dst of earlier node k. */
void conf_case_src_from(conf_case *c, int i, int k);

/* The tolerance of op when its key dtype (weights, K/V, source) is
 * key_dtype; the table with reasons is in conf_tolerance.c. */
conf_tol conf_tolerance(int32_t op, int32_t key_dtype);

/* Run the case on ref and on the device, compare, count, release. */
void conf_case_run(conf_runner *r, conf_case *c);

/* Fill helpers. */
static inline conf_fill conf_uniform(float lo, float hi) {
    return (conf_fill){.kind = CONF_FILL_UNIFORM, .lo = lo, .hi = hi};
}
static inline conf_fill conf_index(int64_t range) {
    return (conf_fill){.kind = CONF_FILL_INDEX, .range = range};
}
static inline conf_fill conf_mask(int64_t n_rows_used, float lo) {
    return (conf_fill){.kind = CONF_FILL_MASK, .lo = lo, .visible_gap = n_rows_used};
}

/* Deterministic PRNG (splitmix64). */
uint64_t conf_rand_next(uint64_t *state);
float conf_rand_uniform(uint64_t *state, float lo, float hi);

/* Dtypes the suite exercises as weights/quantization targets: every dtype
 * the tensor module supports with both conversions, in number order. The
 * first after prev (-1: the first), -1 after the last; loop with
 * CONF_FOR_EACH_WEIGHT_DTYPE. */
int32_t conf_weight_dtype_next(int32_t prev);
#define CONF_FOR_EACH_WEIGHT_DTYPE(dt) \
    for (int32_t dt = conf_weight_dtype_next(-1); dt >= 0; dt = conf_weight_dtype_next(dt))
bool conf_dtype_is_quantized(int32_t dtype);
/* True for the dtypes filled with random blocks (read, not produced). */
bool conf_dtype_random_fill(int32_t dtype);

/* ------------------------------------------------------------- generators */

void conf_gen_get_rows(conf_runner *r);
void conf_gen_add(conf_runner *r);
void conf_gen_mul(conf_runner *r);
void conf_gen_scale(conf_runner *r);
void conf_gen_mul_mat(conf_runner *r);
void conf_gen_rms_norm(conf_runner *r);
void conf_gen_norm(conf_runner *r);
void conf_gen_rope(conf_runner *r);
void conf_gen_soft_max(conf_runner *r);
void conf_gen_silu(conf_runner *r);
void conf_gen_gelu(conf_runner *r);
void conf_gen_gelu_erf(conf_runner *r);
void conf_gen_swiglu(conf_runner *r);
void conf_gen_swiglu_oai(conf_runner *r);
void conf_gen_cpy(conf_runner *r);
void conf_gen_concat(conf_runner *r);
void conf_gen_argmax(conf_runner *r);
void conf_gen_flash_attn(conf_runner *r);
void conf_gen_mul_mat_id(conf_runner *r);
void conf_gen_top_k(conf_runner *r);
void conf_gen_sum_rows(conf_runner *r);
void conf_gen_div(conf_runner *r);
void conf_gen_ssm_conv(conf_runner *r);
void conf_gen_ssm_scan(conf_runner *r);
void conf_gen_delta_net(conf_runner *r);
void conf_gen_malformed(conf_runner *r);
void conf_gen_graph(conf_runner *r);

#endif
