/*
 * sched — runs a graph across devices: placement, splits, copies, per-device
 * compute buffers and CPU fallback (docs/design.md, "Scheduler").
 *
 * Usage, once per step (the graph may differ from step to step):
 *
 *     sched *s = sched_new(devices, n_devices, NULL);   // once
 *     graph *g = build...;                               // bind weights/KV first
 *     sched_alloc(s, g);          // place, split, plan memory, set t.data
 *     memcpy(input->t.data, ...); // inputs live in host memory
 *     sched_compute(s, g);        // run every split in order, wait for it
 *     read output->t.data;        // outputs live in host memory
 *
 * Whole-subgraph offload (ABI 1.1 claim_nodes): before placing a node, each
 * chosen device with the hook is offered the next nodes; a run it claims is
 * placed on it as a unit, without supports_op.
 *
 * Queues: the scheduler creates its own queue on each device it uses, so
 * schedulers (contexts) never share one, and gives each its thread count.
 *
 * Placement: a node goes to the device holding its weight input when that
 * device supports it (weights in plain host memory go to the first chosen
 * device that reads host memory); nodes without weights follow their
 * sources, or return to an earlier chosen device that can run them without
 * a copy; a CPY into a persistent tensor runs where that storage can be
 * addressed; a node no chosen device supports falls back to the best CPU
 * device and ultimately to "ref". Devices are tried in the order given.
 *
 * Consecutive nodes on one device form a split. A tensor a split's device
 * cannot address (another device's buffer, or host memory for a device that
 * does not read it) is copied once into that split. Each device gets ONE
 * compute buffer, planned by liveness with in-place reuse of dead
 * intermediates, kept across calls and grown when a graph needs more.
 *
 * Inputs (graph_set_input, unbound leaves) and outputs (graph_set_output)
 * are in plain host memory at t.data after sched_alloc / sched_compute.
 */
#ifndef TESSERA_SCHED_H
#define TESSERA_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "graph/graph.h"
#include "host/host.h"

typedef struct sched sched;

typedef struct sched_params {
    /* Do not add fallback devices: a node no given device supports is an
     * error naming the node and the devices (tests use this). */
    int no_fallback;
    /* Threads each of this scheduler's queues may use (ABI 1.1
     * set_n_threads); 0: the host's process-wide count (host_set_n_threads),
     * which is all a 1.0 plugin reads. */
    int32_t n_threads;
    /* Op offload (as ggml's): a MUL_MAT of at least this many columns
     * (tokens) whose weight lives in plain host memory runs on the first
     * chosen non-CPU device that cannot read host memory, the weight copied
     * there for the step, when that device supports it. Faster where the
     * device's compute outruns the copy (a real GPU, large prompt batches);
     * on a software GPU such as lavapipe it never is, so it is off unless
     * asked for. 0: from TESSERA_OP_OFFLOAD (a column count; unset or 0:
     * off); < 0: off. */
    int32_t offload_min_batch;
} sched_params;

/* A scheduler over devices (tried in this order). params may be NULL.
 * Free it before host_shutdown(): it holds buffers of the devices. */
sched *sched_new(host_device *const *devices, int n_devices, const sched_params *params);
void sched_free(sched *s);

/* Change the thread count of this scheduler's queues (0: the host's).
 * Each context owns its scheduler, so two contexts no longer share one
 * count. */
void sched_set_n_threads(sched *s, int32_t n_threads);

/* Place and split g, plan and (re)allocate compute buffers, set every
 * tensor's location; inputs get host memory at t.data. -1 with an error
 * naming the node/tensor/device on failure. */
int sched_alloc(sched *s, graph *g);

/* Whether g is the graph of the last successful sched_alloc (its plan,
 * buffers and tensor locations still hold). */
bool sched_holds(const sched *s, const graph *g);

/* The caller moved views into bound memory of the allocated graph (the
 * view_offset of a CPY node into the KV cache: a decode step reused for the
 * next cells); bring tensor locations and copies up to date. Shapes,
 * placement and the memory plan stay as they are. */
void sched_views_moved(sched *s);

/* Run g (as allocated by the last sched_alloc) and wait for it. Returns -1
 * with "aborted" when the host's abort flag is raised. */
int sched_compute(sched *s, graph *g);

/* Print the placement of the last sched_alloc: devices, splits, copies,
 * every fallback (op, node, device, reason), and compute buffer sizes. */
void sched_explain(const sched *s, FILE *out);

/* Statistics of the last sched_alloc. */
typedef struct sched_stats {
    int32_t n_splits;
    int32_t n_copies;
    int32_t n_fallbacks;
    uint64_t peak_bytes;        /* sum over devices of the planned buffer peak */
    uint64_t intermediate_bytes; /* sum of all intermediate sizes (no reuse)    */
    int32_t n_claimed;           /* nodes placed by a device's claim_nodes      */
} sched_stats;
void sched_get_stats(const sched *s, sched_stats *out);

/* What sched_compute has asked of the devices since sched_new (running
 * totals; a caller takes differences around the calls it measures). On a
 * GPU queue a compute call is one submission; uploads and reads are the
 * copies between host and device memory. */
typedef struct sched_counters {
    uint64_t n_runs;       /* sched_compute calls                         */
    uint64_t n_computes;   /* queue compute calls (one per split)         */
    uint64_t n_uploads;    /* copies into a split's device                */
    uint64_t upload_bytes;
    uint64_t n_reads;      /* outputs and copy sources read back          */
    uint64_t read_bytes;
    uint64_t n_waits;      /* queue synchronize calls                     */
    /* From the queues (ABI 1.3 get_stats; a queue without it counts one
     * submission per compute call and nothing replayed). */
    uint64_t n_submits;    /* batches handed to the devices               */
    uint64_t n_replayed;   /* computes that replayed recorded commands    */
} sched_counters;
void sched_get_counters(const sched *s, sched_counters *out);

/* Profiling (ABI 1.3 set_profiling): from now on (on) the queues time
 * every node and the scheduler sums, per op, the bytes each node reads and
 * writes and its arithmetic. Returns the number of this scheduler's
 * devices that cannot time their work (their ops count bytes but no
 * time). */
int sched_set_profiling(sched *s, bool on);

/* Per-op totals since profiling was turned on (index: tsr_op). */
typedef struct sched_profile {
    uint64_t ns[TSR_STATS_OPS];     /* device time (devices that time)   */
    uint64_t nodes[TSR_STATS_OPS];  /* nodes computed                    */
    uint64_t bytes[TSR_STATS_OPS];  /* bytes read and written            */
    double flops[TSR_STATS_OPS];    /* floating-point operations         */
    uint64_t untimed[TSR_STATS_OPS]; /* nodes on devices that do not time */
} sched_profile;
void sched_get_profile(const sched *s, sched_profile *out);

/* Bytes of the compute buffer this scheduler holds on device hd (0: none),
 * and of its host arena (graph inputs and read-back outputs). */
uint64_t sched_buffer_bytes(const sched *s, const host_device *hd);
uint64_t sched_host_bytes(const sched *s);

/* Device that computes node i of the last allocated graph (NULL if none). */
host_device *sched_node_device(const sched *s, int32_t node_index);

#endif
