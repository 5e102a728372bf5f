/* The native floor for zstd chunks: the least work any engine must do to answer a
 * full-payload aggregate over a file whose chunks are zstd frames, built for this machine
 * (cc -O3 -march=native -fopenmp floor_zstd.c -lzstd).
 *
 * floor_zstd FILE CHUNKS REPS: maps FILE and touches every page once; CHUNKS is a text
 * file of "payload_offset stored_bytes raw_bytes" lines (one per chunk of the dataset).
 * REPS times: every chunk is decompressed by libzstd into a per-thread buffer and its f32
 * values summed (f64 accumulators in vector lanes), one OpenMP thread per core, chunks
 * shared out dynamically. Prints the median seconds, the sum and the decoded bytes as JSON. */
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"
#include <zstd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: floor_zstd FILE CHUNKS REPS\n");
        return 2;
    }
    int reps = atoi(argv[3]);
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    FILE *list = fopen(argv[2], "r");
    if (fd < 0 || fstat(fd, &st) != 0 || !list || reps < 1 || reps > 1000) {
        fprintf(stderr, "floor_zstd: bad file, chunk list or reps\n");
        return 2;
    }
    long long cap = 1 << 16, n = 0, max_raw = 0, total_raw = 0;
    long long *off = malloc(cap * sizeof *off), *stored = malloc(cap * sizeof *stored),
              *raw = malloc(cap * sizeof *raw);
    long long o, s, r;
    while (fscanf(list, "%lld %lld %lld", &o, &s, &r) == 3) {
        if (o < 0 || s < 0 || r < 0 || o + s > st.st_size || r % 4 != 0 || n == cap) {
            fprintf(stderr, "floor_zstd: bad chunk line %lld\n", n);
            return 2;
        }
        off[n] = o, stored[n] = s, raw[n] = r, n++;
        if (r > max_raw) max_raw = r;
        total_raw += r;
    }
    unsigned char *map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    volatile unsigned char touch = 0;
    for (long long i = 0; i < st.st_size; i += 4096) touch ^= map[i];
    double *times = malloc(sizeof(double) * reps), sum = 0;
    int failed = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now(), total = 0;
#pragma omp parallel reduction(+ : total) reduction(| : failed)
        {
            ZSTD_DCtx *dctx = ZSTD_createDCtx();
            float *buf = malloc(max_raw ? max_raw : 4);
#pragma omp for schedule(dynamic, 1)
            for (long long c = 0; c < n; c++) {
                size_t got = ZSTD_decompressDCtx(dctx, buf, raw[c], map + off[c], stored[c]);
                if (ZSTD_isError(got) || (long long)got != raw[c]) {
                    failed = 1;
                    continue;
                }
                double s = 0;
                long long k = raw[c] / 4;
#pragma omp simd reduction(+ : s)
                for (long long i = 0; i < k; i++) s += buf[i];
                total += s;
            }
            free(buf);
            ZSTD_freeDCtx(dctx);
        }
        times[rep] = now() - t0;
        sum = total;
    }
    if (failed) {
        fprintf(stderr, "floor_zstd: a chunk did not decode to its raw length\n");
        return 1;
    }
    qsort(times, reps, sizeof(double), cmp);
    printf("{\"median_s\": %.6f, \"sum\": %.6e, \"raw_bytes\": %lld, \"chunks\": %lld, \"threads\": %d}\n",
           times[reps / 2], sum, total_raw, n, omp_get_max_threads());
    return 0;
}
