/* The native floor of the benchmark: the least work any engine must do to answer a
 * full-payload aggregate, built for this machine (cc -O3 -march=native -fopenmp).
 *
 * floor FILE OFFSET LENGTH REPS: maps FILE, touches every page of bytes
 * [OFFSET, OFFSET + LENGTH) once, then REPS times sums them as f32 (f64 accumulators in
 * vector lanes, one OpenMP thread per core) and prints the median seconds and the sum as JSON. */
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: floor FILE OFFSET LENGTH REPS\n");
        return 2;
    }
    long long off = atoll(argv[2]), len = atoll(argv[3]);
    int reps = atoi(argv[4]);
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || off < 0 || len < 0 || off + len > st.st_size || reps < 1 || reps > 1000) {
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
    double *times = malloc(sizeof(double) * reps), sum = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
        for (long long i = 0; i < n; i++) s += v[i];
        times[r] = now() - t0;
        sum = s;
    }
    qsort(times, reps, sizeof(double), cmp);
    printf("{\"median_s\": %.6f, \"sum\": %.6e, \"threads\": %d}\n", times[reps / 2], sum, omp_get_max_threads());
    return 0;
}
