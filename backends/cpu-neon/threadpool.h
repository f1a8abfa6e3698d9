/*
 * threadpool — worker threads created once and kept for the plugin's life.
 *
 * pool_run(pool, nth, fn, ctx) runs fn(ctx, ith, nth) on nth threads, the
 * caller being ith 0, and returns when all are done. Inside fn the threads may
 * meet at pool_barrier(). Waiting spins a little (a decoded token runs a few
 * hundred short nodes back to back) and then sleeps on a futex, so idle
 * workers cost nothing on a shared machine.
 */
#ifndef TESSERA_CPU_NEON_THREADPOOL_H
#define TESSERA_CPU_NEON_THREADPOOL_H

typedef struct neon_pool neon_pool;
typedef void (*neon_pool_fn)(void *ctx, int ith, int nth);

enum { NEON_POOL_MAX_THREADS = 256 };

neon_pool *pool_create(void);
void pool_destroy(neon_pool *pool);

/* Starts workers so that nth threads can run; returns how many can (fewer
 * if a thread could not be created). */
int pool_reserve(neon_pool *pool, int nth);

/* Runs fn on nth threads (clamped to 1..NEON_POOL_MAX_THREADS; fewer if
 * worker threads cannot be created). Returns the thread count used. */
int pool_run(neon_pool *pool, int nth, neon_pool_fn fn, void *ctx);

/* All nth threads of the current pool_run meet here. */
void pool_barrier(neon_pool *pool, int nth);

#endif
