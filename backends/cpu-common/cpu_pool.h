/*
 * cpu_pool — the thread pool shared by the CPU backend plugins (cpu-avx,
 * cpu-neon): worker threads created once and kept for the plugin's life.
 *
 * cpu_pool_run(pool, nth, fn, ctx) runs fn(ctx, ith, nth) on nth threads, the
 * caller being ith 0, and returns when all are done. Inside fn the threads may
 * meet at cpu_pool_barrier(). Waiting spins a little (a decoded token runs a few
 * hundred short nodes back to back) and then sleeps on a futex, so idle
 * workers cost nothing on a shared machine.
 */
#ifndef TESSERA_CPU_COMMON_CPU_POOL_H
#define TESSERA_CPU_COMMON_CPU_POOL_H

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_pool_fn)(void *ctx, int ith, int nth);

enum { CPU_POOL_MAX_THREADS = 256 };

cpu_pool *cpu_pool_create(void);
void cpu_pool_destroy(cpu_pool *pool);

/* Starts workers so that nth threads can run; returns how many can (fewer
 * if a thread could not be created). */
int cpu_pool_reserve(cpu_pool *pool, int nth);

/* Runs fn on nth threads (clamped to 1..CPU_POOL_MAX_THREADS; fewer if
 * worker threads cannot be created). Returns the thread count used. */
int cpu_pool_run(cpu_pool *pool, int nth, cpu_pool_fn fn, void *ctx);

/* All nth threads of the current cpu_pool_run meet here. */
void cpu_pool_barrier(cpu_pool *pool, int nth);
/* The same, returning the OR of the flags the threads brought: every
 * thread gets the same answer, so a decision to stop taken at a barrier
 * (an abort, an error) is taken by all of them together. */
int cpu_pool_barrier_or(cpu_pool *pool, int nth, int flag);

#endif
