/* The native floor of the benchmark: the least work any engine must do to answer a
 * full-payload aggregate, built for this machine (cc -O3 -march=native -fopenmp).
 *
 * floor FILE OFFSET LENGTH REPS: maps FILE, touches every page of bytes
 * [OFFSET, OFFSET + LENGTH) once, then REPS times sums them as f32 (f64 accumulators in
 * vector lanes, a software prefetch ahead, one OpenMP thread per core) and prints the
 * median seconds and the sum as JSON.
 * REPS 0: paired mode: prints "ready", then one pass per line read on stdin, printing its
 * seconds and sum as a JSON line each (benches/driver.rs times a query beside each pass). */
#include <fcntl.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

/* Bytes ahead of the current load that each step asks the CPU to prefetch. The hardware's
 * stream prefetchers stop at page boundaries; a software prefetch 8 KiB ahead made the
 * pass 15-18% faster than none (17.2 -> 14.1-14.6 ms on the 508 MiB cube, Intel Xeon,
 * Dec 2026; 2 KiB: 15.0 ms, 16 KiB: 14.5 ms), so the floor uses it: a floor that a
 * kernel beats by prefetching would not be the least time one pass takes. */
#define PREFETCH_BYTES 8192

/* The f64 sum of the n f32 at v: the one pass every query over them must make. Each
 * thread sums its share of 16-element (64-byte) blocks in 16 f64 lanes (independent
 * chains) with one prefetch per block, the last thread adds the tail. With AVX the lanes
 * are four 256-bit registers fed by conversions straight from memory: GCC 12 compiles
 * the plain loop below with split loads and scalar conversions (-march=native on this
 * Intel host), which took 15.6-17.0 ms against 14.0-14.6 ms for this form. */
static double pass(const float *v, long long n) {
    double s = 0;
    long long blocks = n / 16;
#pragma omp parallel reduction(+ : s)
    {
        int t = omp_get_thread_num(), k = omp_get_num_threads();
        long long b = blocks * t / k * 16, e = blocks * (t + 1) / k * 16;
#ifdef __AVX__
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (long long i = b; i < e; i += 16) {
            _mm_prefetch((const char *)(v + i) + PREFETCH_BYTES, _MM_HINT_T0);
            a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(v + i)));
            a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 4)));
            a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 8)));
            a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 12)));
        }
        double lanes[4];
        _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
        s += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#else
        double lanes[16] = {0};
        for (long long i = b; i < e; i += 16) {
            __builtin_prefetch((const char *)(v + i) + PREFETCH_BYTES);
            for (int j = 0; j < 16; j++) lanes[j] += v[i + j];
        }
        for (int j = 0; j < 16; j++) s += lanes[j];
#endif
        if (t == k - 1)
            for (long long i = blocks * 16; i < n; i++) s += v[i];
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: floor FILE OFFSET LENGTH REPS\n");
        return 2;
    }
    long long off = atoll(argv[2]), len = atoll(argv[3]);
    int reps = atoi(argv[4]);
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || off < 0 || len < 0 || off + len > st.st_size || reps < 0 || reps > 1000) {
        fprintf(stderr, "floor: bad file or range\n");
        return 2;
    }
    unsigned char *map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    const float *v = (const float *)(map + off);
    long long n = len / 4;
    volatile unsigned char touch = 0;
    for (long long i = 0; i < len; i += 4096) touch ^= map[off + i];
    if (reps == 0) {
        char line[64];
        printf("ready\n");
        fflush(stdout);
        while (fgets(line, sizeof line, stdin)) {
            double t0 = now(), s = pass(v, n);
            printf("{\"s\": %.6f, \"sum\": %.6e}\n", now() - t0, s);
            fflush(stdout);
        }
        return 0;
    }
    double *times = malloc(sizeof(double) * reps), sum = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        sum = pass(v, n);
        times[r] = now() - t0;
    }
    qsort(times, reps, sizeof(double), cmp);
    printf("{\"median_s\": %.6f, \"sum\": %.6e, \"threads\": %d}\n", times[reps / 2], sum, omp_get_max_threads());
    return 0;
}
