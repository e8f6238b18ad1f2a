/* A fine-grained MPI program: each iteration computes for --grain-ms of CPU
 * time, then every rank takes part in one MPI_Allreduce. It is what gang
 * scheduling is for: a rank that waits for a stopped peer polls, so running
 * part of a job wastes the whole quantum. (MPICH's wait polls and yields the
 * processor once per wait; over TCP its network library also blocks, which
 * lets an uncoordinated kernel run another job's rank meanwhile.)
 *
 * CPU time, not wall time, measures the computation, so a rank that is
 * stopped does not "finish" its work while it waits. Rank 0 writes the
 * iterations done to GANG_PROGRESS_FILE (8 bytes, little-endian) where the
 * scheduler gives one, and prints the result and the rate at the end:
 *   iterations=N result=S seconds=T iterations_per_s=R
 * The result is the sum over iterations of the allreduced sum of rank + 1,
 * so it is the same whatever launches the program. The first line rank 0
 * prints, initialized_at=T, is the Unix time at which the last rank was past
 * MPI_Init: a launcher's start-up is that time less the submission's.
 *
 * usage: allreduce [--iterations N (0: until killed)] [--grain-ms G]
 */
#include <mpi.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double seconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void compute(double grain_s) {
    double until = seconds(CLOCK_THREAD_CPUTIME_ID) + grain_s;
    volatile double sink = 0.0;
    while (seconds(CLOCK_THREAD_CPUTIME_ID) < until) {
        for (int i = 0; i < 1000; i++) sink += (double)i * 0.5;
    }
}

static void write_progress(int fd, uint64_t done) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(done >> (8 * i));
    if (pwrite(fd, bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        /* progress is advisory: the job goes on without it */
    }
}

int main(int argc, char **argv) {
    long iterations = 1000;
    double grain_ms = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--iterations") == 0) iterations = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--grain-ms") == 0) grain_ms = atof(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    MPI_Init(&argc, &argv);
    double initialized = seconds(CLOCK_REALTIME), last_initialized = 0.0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&initialized, &last_initialized, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("initialized_at=%.6f\n", last_initialized);
        fflush(stdout);
    }
    int progress_fd = -1;
    const char *progress = getenv("GANG_PROGRESS_FILE");
    if (rank == 0 && progress != NULL) progress_fd = open(progress, O_WRONLY);
    long long total = 0;
    double start = seconds(CLOCK_MONOTONIC);
    long done = 0;
    for (; iterations == 0 || done < iterations; done++) {
        compute(grain_ms / 1000.0);
        long long mine = rank + 1, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
        if (progress_fd >= 0) write_progress(progress_fd, (uint64_t)(done + 1));
    }
    double elapsed = seconds(CLOCK_MONOTONIC) - start;
    if (rank == 0) {
        printf("size=%d iterations=%ld result=%lld seconds=%.3f iterations_per_s=%.1f\n",
               size, done, total, elapsed, elapsed > 0 ? done / elapsed : 0.0);
    }
    MPI_Finalize();
    return 0;
}
