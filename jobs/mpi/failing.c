/* An MPI program whose one rank fails after MPI_Init, as a crashing or aborting
 * rank would, while the others wait for it in a barrier: for checking that the
 * process manager fails the whole job, names the rank and leaves nothing behind.
 *
 * usage: failing --rank R --how abort|exit|kill [--code C]
 *   abort: MPI_Abort(MPI_COMM_WORLD, C); exit: exit(C) without MPI_Finalize;
 *   kill: SIGKILL itself.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int failing = 1, code = 3;
    const char *how = "exit";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rank") == 0) failing = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--how") == 0) how = argv[i + 1];
        else if (strcmp(argv[i], "--code") == 0) code = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == failing) {
        if (strcmp(how, "abort") == 0) MPI_Abort(MPI_COMM_WORLD, code);
        else if (strcmp(how, "kill") == 0) kill(getpid(), SIGKILL);
        else exit(code);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
