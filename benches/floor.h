/* Helpers shared by the native floor programs (benches/floor.c, benches/floor_zstd.c). */
#ifndef TET_BENCH_FLOOR_H
#define TET_BENCH_FLOOR_H
#include <time.h>

/* Monotonic seconds. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* qsort order of doubles (for the median of the repetitions). */
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
#endif
