/*
 * sched internals shared by sched.c (placement, splits, copies, memory),
 * memplan.c (the liveness allocator) and run.c (compute, explain).
 */
#ifndef TESSERA_SCHED_INTERNAL_H
#define TESSERA_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/sched.h"

enum {
    SCHED_MAX_DEVICES = 16,
    SCHED_ALIGN = 256,       /* offsets in compute buffers */
    SCHED_HOST_ALIGN = 64,   /* offsets in the host arena  */
    SCHED_REASON_MAX = 200,
    SCHED_CLAIM_WINDOW = 64  /* nodes offered to claim_nodes at once */
};
/* Weight bytes one split may copy in for op offload (build_splits). */
#define SCHED_UPLOAD_BUDGET (UINT64_C(64) << 20)

/* ------------------------------------------------------- memory planner */

/* Offsets in one growing buffer: best-fit from a free list, new space at the
 * top; peak is the largest top ever reached. */
typedef struct memplan_block {
    uint64_t offset, size;
} memplan_block;

typedef struct memplan {
    memplan_block *free_blocks;
    int32_t n_free, cap_free;
    uint64_t top;
    uint64_t peak;
} memplan;

void memplan_reset(memplan *p);
void memplan_release(memplan *p);
/* Offset of size bytes (size rounded up to SCHED_ALIGN). */
uint64_t memplan_alloc(memplan *p, uint64_t size);
/* Return [offset, offset+size) (same size as allocated). -1 out of memory. */
int memplan_free(memplan *p, uint64_t offset, uint64_t size);
uint64_t memplan_aligned(uint64_t size);

/* ------------------------------------------------------------- state */

typedef struct sched_slot {
    host_device *hd;
    bool fallback;      /* added by the scheduler, not chosen by the user */
    bool host_visible;  /* buffers have host addresses                    */
    bool reads_host;    /* nodes may read plain host memory               */
    tsr_buffer *buf;    /* the one compute buffer, kept across calls      */
    uint64_t buf_size;
    unsigned char *buf_host;
    memplan plan;
    tsr_queue *queue;       /* this scheduler's own queue, created on use */
    int32_t queue_threads;  /* last count given to set_n_threads; 0 none  */
    uint64_t n_computes;    /* compute calls on queue                     */
    bool profiled;          /* queue times its nodes (ABI 1.3)            */
    tsr_queue_stats prof_base; /* its stats when profiling was turned on  */
} sched_slot;

/* Where a storage root's bytes are. */
typedef struct sched_loc {
    host_device *owner;   /* device whose buffer holds it; NULL: plain host */
    tsr_buffer *buffer;
    uint64_t offset;
    unsigned char *host;  /* host address of the first byte, or NULL */
} sched_loc;

typedef struct sched_copy {
    int32_t split;
    int32_t tensor;       /* graph tensor index of the source (may be a view) */
    int32_t root;         /* its storage root                                 */
    uint64_t start;       /* byte offset of the source within the root        */
    uint64_t size;
    uint64_t dst_offset;  /* in the split device's compute buffer             */
} sched_copy;

typedef struct sched_split {
    int32_t slot;
    int32_t first, last; /* node positions, inclusive */
    int32_t copy_begin, n_copies;
    /* Slots to synchronize before this split starts: those whose earlier
     * work it reads (results, or writes into persistent storage), and
     * those that may still be reading this slot's memory in place. Work
     * on the other devices keeps running (CPU and GPU splits overlap). */
    uint32_t wait_mask;
} sched_split;

typedef struct sched_fallback {
    int32_t node;
    int32_t slot;
    char reason[SCHED_REASON_MAX];
} sched_fallback;

struct sched {
    sched_slot slots[SCHED_MAX_DEVICES];
    int32_t n_slots;
    int32_t n_chosen;
    sched_params params;

    /* The last allocated graph. */
    const graph *g;
    int32_t n_nodes, n_tensors, cap_nodes, cap_tensors;
    int32_t *node_slot;     /* [n_nodes] slot computing node i           */
    int32_t *node_pos;      /* [n_tensors] node position, -1 for leaves  */
    int32_t *last_use;      /* [n_tensors] per root: last reading node   */
    int32_t *last_writer;   /* [n_tensors] per root: slot that last wrote it, -1 */
    bool *is_output;        /* [n_tensors] per root                      */
    bool *in_place;         /* [n_tensors] root handed its block on      */
    bool *released;         /* [n_tensors] root's block already freed    */
    uint64_t *plan_offset;  /* [n_tensors] per root in its compute buffer */
    uint64_t *host_offset;  /* [n_tensors] per root in the host arena, or UINT64_MAX */
    sched_loc *loc;         /* [n_tensors] per root                      */

    sched_split *splits;
    int32_t n_splits, cap_splits;
    sched_copy *copies;
    int32_t n_copies, cap_copies;
    sched_fallback *fallbacks;
    int32_t n_fallbacks, cap_fallbacks;

    unsigned char *host_arena; /* inputs and read-back outputs */
    uint64_t host_arena_size, host_arena_used;
    unsigned char *staging;    /* bounce buffer for device-to-device copies */
    uint64_t staging_size;
    /* Every split's nodes as its device sees them, built once per
     * sched_alloc (node pos at run_nodes[pos]); sched_views_moved patches
     * only the nodes and tensors listed in moving_nodes / moving_tensors
     * (views into caller-bound storage: the KV cache writes). */
    tsr_node *run_nodes;       /* [n_nodes] */
    tsr_tensor *run_tensors;   /* [n_nodes * (1 + TSR_MAX_SRC)] */
    int32_t *moving_nodes;     /* [n_nodes] node positions */
    int32_t n_moving_nodes;
    int32_t *moving_tensors;   /* [n_tensors] tensor indices */
    int32_t n_moving_tensors;

    sched_counters counters; /* running totals of sched_compute's device calls */
    bool profiling;          /* sched_set_profiling(on)                   */
    sched_profile profile;   /* host-side totals: nodes, bytes, flops     */
    uint64_t intermediate_bytes;
    int32_t n_claimed;      /* nodes placed by a device's claim_nodes     */
    int32_t n_threads;      /* per-queue thread count; 0: the host's      */
    int32_t offload_batch;  /* op offload from this many columns; 0: off   */
};

/* A queue's ABI 1.3 stats (false when it has no get_stats). */
bool sched_queue_stats(tsr_queue *q, tsr_queue_stats *out);
/* Turn profiling on or off on slot's queue; false if it cannot time. */
bool sched_slot_profile(sched *s, int32_t slot, bool on);
/* Add split k's nodes to the profile's bytes and flops (profiling on). */
void sched_profile_split(sched *s, int32_t k);

/* The scheduler's queue on slot's device (created on first use). */
tsr_queue *sched_slot_queue(sched *s, int32_t slot);
/* The queue to reach a buffer of device hd: the slot's when hd is one of
 * the scheduler's devices, else the device's shared one. */
tsr_queue *sched_device_queue(sched *s, host_device *hd);

/* Storage root of tensor index i and the byte offset of i within it. */
graph_tensor *sched_root(const sched *s, int32_t i, uint64_t *offset);

/* The tensor as device `slot` sees it during split `split`: copied, in the
 * device's own buffer, or in host memory. */
void sched_present(const sched *s, graph_tensor *t, int32_t slot, int32_t split, tsr_tensor *out);

/* Whether t is a view into caller-bound storage (weights, KV cache): where
 * it points may move between steps (sched_views_moved). */
bool sched_is_bound_view(const graph_tensor *t);

/* Build run_nodes/run_tensors and the moving lists for the allocated graph
 * (after set_locations); re-present the moving nodes after views moved. */
void sched_nodes_build(sched *s);
void sched_nodes_patch(sched *s);

#endif
