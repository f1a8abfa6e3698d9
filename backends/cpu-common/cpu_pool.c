/* cpu_pool — the CPU plugins' thread pool; see cpu_pool.h. Linux futexes for
 * sleeping; C11 atomics for the fast path. */
#include "cpu_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Pause iterations, then yields, before a waiter goes to sleep: spinning
 * keeps token-by-token decoding fast; yielding lets a preempted partner
 * thread run when the machine is oversubscribed. 2000 pauses are about
 * 50 us on a recent x86 core, 50 yields of an idle CPU about 35 us. */
enum { SPIN_LIMIT = 2000, YIELD_LIMIT = 50 };

/* Inside a job (a barrier, the caller waiting for the workers' end) the
 * others are mid-step and arrive soon, unless they were preempted or
 * their CPU had gone to sleep. Sleeping there is what costs: the sleeper
 * wakes late (a futex wake, and on a virtual machine a halted vCPU's
 * wake-up, 0.1 ms and more), so it reaches the next barrier late, where
 * its partner waits past the spin and sleeps in turn. Near idle that
 * cascade, once started (a new worker's first wake in a fresh process),
 * ran on at every barrier: a two-thread image encoder's first encodes
 * took as much wall time as their CPU time, three times a warm encode's.
 * So inside a job a waiter goes on yielding (the CPU goes to whoever
 * else wants it, a preempted partner included) up to IN_JOB_WAIT_NS
 * before it sleeps, as a thread pool that spins through a graph does. */
#define IN_JOB_WAIT_NS 2000000LL

typedef struct worker {
    cpu_pool *pool;
    pthread_t thread;
    int ith;
    uint32_t start_gen; /* job_gen when created: a job published later is its first */
} worker;

struct cpu_pool {
    /* job, published by bumping job_gen */
    _Atomic uint32_t job_gen;
    _Atomic int job_sleepers;
    cpu_pool_fn fn;
    void *ctx;
    int nth;
    _Atomic uint32_t n_done; /* also the futex word the caller sleeps on */
    _Atomic int stop;

    /* barrier */
    _Atomic uint32_t bar_gen;
    _Atomic int bar_arrived;
    _Atomic int bar_sleepers;
    _Atomic int bar_flags;  /* OR of the flags brought to the barrier being met */
    _Atomic int bar_result; /* that OR, published with bar_gen */

    /* done (main waits) */
    _Atomic int done_sleepers;

    worker workers[CPU_POOL_MAX_THREADS];
    int n_workers; /* threads started; worker i has ith = i + 1 */
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Wait until *word != seen: spin, yield (for at least patience_ns), then
 * sleep. */
static void wait_change(_Atomic uint32_t *word, uint32_t seen, _Atomic int *sleepers, int64_t patience_ns) {
    for (int i = 0; i < SPIN_LIMIT; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen) return;
        cpu_relax();
    }
    const int64_t until = patience_ns > 0 ? now_ns() + patience_ns : 0;
    for (int i = 0;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen) return;
        sched_yield();
        if (i >= YIELD_LIMIT && (!until || now_ns() > until)) break;
    }
    while (atomic_load_explicit(word, memory_order_acquire) == seen) {
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(word) == seen) futex_wait(word, seen);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void wake_if_sleeping(_Atomic uint32_t *word, _Atomic int *sleepers) {
    if (atomic_load(sleepers) > 0) futex_wake_all(word);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    cpu_pool *pool = w->pool;
    uint32_t seen = w->start_gen;
    for (;;) {
        wait_change(&pool->job_gen, seen, &pool->job_sleepers, 0);
        seen = atomic_load_explicit(&pool->job_gen, memory_order_acquire);
        if (atomic_load(&pool->stop)) break;
        if (w->ith < pool->nth) {
            pool->fn(pool->ctx, w->ith, pool->nth);
            atomic_fetch_add(&pool->n_done, 1);
            wake_if_sleeping(&pool->n_done, &pool->done_sleepers);
        }
    }
    return NULL;
}

cpu_pool *cpu_pool_create(void) {
    cpu_pool *pool = calloc(1, sizeof *pool);
    return pool;
}

void cpu_pool_destroy(cpu_pool *pool) {
    if (!pool) return;
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->job_gen, 1);
    futex_wake_all(&pool->job_gen);
    for (int i = 0; i < pool->n_workers; i++) pthread_join(pool->workers[i].thread, NULL);
    free(pool);
}

int cpu_pool_reserve(cpu_pool *pool, int nth) {
    if (nth < 1) nth = 1;
    if (nth > CPU_POOL_MAX_THREADS) nth = CPU_POOL_MAX_THREADS;
    int n_workers = nth - 1;
    while (pool->n_workers < n_workers) {
        worker *w = &pool->workers[pool->n_workers];
        w->pool = pool;
        w->ith = pool->n_workers + 1;
        w->start_gen = atomic_load(&pool->job_gen);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) break;
        pool->n_workers++;
    }
    return pool->n_workers + 1;
}

int cpu_pool_run(cpu_pool *pool, int nth, cpu_pool_fn fn, void *ctx) {
    if (nth < 1) nth = 1;
    if (nth > CPU_POOL_MAX_THREADS) nth = CPU_POOL_MAX_THREADS;
    if (nth > 1) nth = cpu_pool_reserve(pool, nth);
    if (nth == 1) {
        fn(ctx, 0, 1);
        return 1;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->nth = nth;
    atomic_store(&pool->n_done, 0);
    atomic_store(&pool->bar_arrived, 0);
    atomic_fetch_add(&pool->job_gen, 1);
    wake_if_sleeping(&pool->job_gen, &pool->job_sleepers);

    fn(ctx, 0, nth);

    for (;;) {
        uint32_t d = atomic_load_explicit(&pool->n_done, memory_order_acquire);
        if ((int)d == nth - 1) break;
        wait_change(&pool->n_done, d, &pool->done_sleepers, IN_JOB_WAIT_NS);
    }
    return nth;
}

int cpu_pool_barrier_or(cpu_pool *pool, int nth, int flag) {
    if (nth <= 1) return flag;
    if (flag) atomic_fetch_or_explicit(&pool->bar_flags, 1, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&pool->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&pool->bar_arrived, 1, memory_order_acq_rel) == nth - 1) {
        /* the last to arrive: every flag is in (each was set before its
         * thread arrived); bar_result is read by the others before they
         * arrive at the next barrier, which cannot complete without them */
        const int result = atomic_exchange_explicit(&pool->bar_flags, 0, memory_order_acq_rel);
        atomic_store_explicit(&pool->bar_result, result, memory_order_relaxed);
        atomic_store_explicit(&pool->bar_arrived, 0, memory_order_relaxed);
        atomic_fetch_add(&pool->bar_gen, 1);
        wake_if_sleeping(&pool->bar_gen, &pool->bar_sleepers);
        return result;
    }
    wait_change(&pool->bar_gen, gen, &pool->bar_sleepers, IN_JOB_WAIT_NS);
    return atomic_load_explicit(&pool->bar_result, memory_order_relaxed);
}

void cpu_pool_barrier(cpu_pool *pool, int nth) { (void)cpu_pool_barrier_or(pool, nth, 0); }
