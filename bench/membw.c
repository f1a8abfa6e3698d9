/*
 * membw — how fast this machine reads memory, the bound on token generation
 * (every weight is read once per generated token).
 *
 * Usage: membw [threads] [MiB]   (defaults: 2 threads, 512 MiB)
 * Each thread sums its slice of a buffer much larger than the caches with
 * 256-bit loads, 5 passes; the best pass is reported in GB/s (10^9 bytes).
 * Build: cc -O2 -mavx2 -pthread bench/membw.c -o membw   (or via meson:
 * build/bench/membw).
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct slice {
    const __m256i *p;
    size_t n; /* 32-byte vectors */
    pthread_barrier_t *start;
    uint64_t sink;
} slice;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *reader(void *arg) {
    slice *s = arg;
    pthread_barrier_wait(s->start);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(s->p + i));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(s->p + i + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(s->p + i + 2));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(s->p + i + 3));
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    s->sink = (uint64_t)_mm256_extract_epi64(x, 0);
    pthread_barrier_wait(s->start);
    return NULL;
}

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 512;
    if (nth < 1 || nth > 256 || mib < 16) {
        fprintf(stderr, "usage: membw [threads 1..256] [MiB >= 16]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    __m256i *buf = aligned_alloc(64, bytes);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    memset(buf, 1, bytes); /* fault the pages in */
    size_t nvec = bytes / 32, per = nvec / (size_t)nth;
    double best = 0.0;
    for (int pass = 0; pass < 5; pass++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)nth + 1);
        pthread_t th[256];
        slice sl[256];
        for (int t = 0; t < nth; t++) {
            sl[t] = (slice){buf + per * (size_t)t, per, &start, 0};
            pthread_create(&th[t], NULL, reader, &sl[t]);
        }
        pthread_barrier_wait(&start);
        double t0 = now_s();
        pthread_barrier_wait(&start);
        double dt = now_s() - t0;
        for (int t = 0; t < nth; t++) pthread_join(th[t], NULL);
        pthread_barrier_destroy(&start);
        double gbs = (double)(per * (size_t)nth * 32) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    printf("membw: %d thread(s), %zu MiB: %.1f GB/s (best of 5 passes)\n", nth, mib, best);
    free(buf);
    return 0;
}
