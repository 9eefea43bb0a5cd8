/* Shared pieces of the MPI reference programs (mpi_mm.c, mpi_lu.c): the
 * process grid, option parsing, the one place where the programs wait for
 * communication, the counters, the deterministic matrix generator and the
 * JSON report. */
#ifndef COSCHED_APPS_MPI_COMMON_H
#define COSCHED_APPS_MPI_COMMON_H

#include <mpi.h>
#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* How a process waits for a message (see comm_wait_all). */
enum wait_mode { WAIT_SPIN, WAIT_YIELD, WAIT_BLOCK };

/* What one rank did inside the timed region. */
struct app_stats {
    long messages;    /* messages this rank sent (collectives: see comm.c) */
    long doubles;     /* doubles in those messages */
    double compute_s; /* seconds in BLAS and other local arithmetic */
    double update_s;  /* of compute_s: long updates between exchanges (mpi_lu's U row and trailing matrix) */
    double comm_s;    /* seconds posting and waiting for communication */
    double cpu_s;     /* CPU seconds of the process (all its threads) */
};

extern struct app_stats app_stats;

/* P x Q process grid; rank r sits at row r / Q, column r % Q (row-major). */
struct grid {
    int P, Q;
    int rank, size;
    int myrow, mycol;
    MPI_Comm row; /* my process row: Q ranks, rank in it == mycol */
    MPI_Comm col; /* my process column: P ranks, rank in it == myrow */
};

void grid_init(struct grid *g, int P, int Q);
void grid_free(struct grid *g);

/* ---- options ---------------------------------------------------------- */

/* Holds the first error found while parsing, for rank 0 to print. */
struct opt_error {
    char message[256];
};

void opt_fail(struct opt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

enum opt_kind { OPT_INT, OPT_GRID, OPT_WAIT };

/* One accepted option: "--name value" or "--name=value". OPT_INT stores a
 * positive int in *a; OPT_GRID stores P in *a and Q in *b and sets *given;
 * OPT_WAIT stores an enum wait_mode in *a. */
struct opt_spec {
    const char *name;
    enum opt_kind kind;
    void *a;
    int *b;
    bool *given;
};

enum parse_result { PARSE_OK, PARSE_HELP, PARSE_ERROR };

enum parse_result parse_options(const char *app, int argc, char **argv, const struct opt_spec *specs, int nspecs,
                                struct opt_error *err);

/* Ends a run that stopped at option parsing: rank 0 prints the usage (help)
 * or the error; every rank finalises MPI. Returns the exit code. */
int finish_early(enum parse_result result, const struct opt_error *err, const char *usage);

/* Checks the size and grid options once parsed: --n was given; without
 * --grid, the grid is all ranks in one column (P = ranks, Q = 1); the grid
 * fits the job, and N fits the grid when `divisible`. Returns PARSE_OK, or
 * PARSE_ERROR with err. */
enum parse_result check_size_and_grid(const char *app, int n, int *P, int *Q, bool grid_given, bool divisible,
                                      struct opt_error *err);

/* Exit code for bad usage; 1 is a failed self-check. */
#define EXIT_USAGE 2

/* ---- communication ---------------------------------------------------- */

void comm_set_wait_mode(enum wait_mode mode);
const char *wait_mode_name(enum wait_mode mode);

/* The single place where the programs wait for communication. */
void comm_wait_all(int n, MPI_Request *reqs);
void comm_wait(MPI_Request *req);

void comm_isend(const double *buf, int count, int dest, int tag, MPI_Comm comm, MPI_Request *req);
void comm_irecv(double *buf, int count, int src, int tag, MPI_Comm comm, MPI_Request *req);
void comm_recv(double *buf, int count, int src, int tag, MPI_Comm comm);
void comm_ring_bcast(double *buf, int count, int root, int tag, MPI_Comm comm, MPI_Request *forward);
void comm_bcast(double *buf, int count, int root, MPI_Comm comm);
void comm_allreduce(void *buf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
void comm_barrier(MPI_Comm comm);

/* ---- timing, data, report --------------------------------------------- */

/* The longest of every rank's time since its `start` (an MPI_Wtime value
 * taken when leaving the starting barrier): ranks leave a barrier at
 * slightly different moments, and this keeps every rank's compute_s +
 * comm_s within the reported time. Collective. */
double elapsed_max(double start);

/* CPU seconds used so far by this process, all threads. */
double cpu_now(void);

/* Adds the seconds since `start` (an MPI_Wtime value) to app_stats.compute_s. */
void compute_done(double start);

/* As compute_done, for a long update between exchanges: counted in update_s too, so that a model can tell the
 * program's short computes between tightly coupled exchanges from its long ones. */
void update_done(double start);

/* Deterministic value in [-0.5, 0.5) for entry (i, j) of matrix `seed`. */
double gen_value(uint64_t seed, long i, long j);

/* Unit roundoff, 2^-53, as HPL's epsilon. */
#define UNIT_ROUNDOFF (0.5 * DBL_EPSILON)

/* Prints the common tail of the JSON line: the counters (max and mean over
 * ranks) and the closing brace. Collective; only rank 0 prints. */
void report_stats(FILE *out, const struct app_stats *mine, MPI_Comm comm);

/* max(a, b) that keeps a NaN from either side (fmax drops it), so that a
 * NaN anywhere in a self-check makes it fail. */
double nan_max(double a, double b);

/* Prints a double as JSON (null if not finite). */
void json_number(FILE *out, double value);

/* The report's common fields after the program's own: time, speed, residual, verdict. */
void report_result(FILE *out, double seconds, double flops, double residual, bool passed);

/* Allocation that never returns NULL (aborts the job instead) and is
 * valid for zero sizes. */
double *alloc_doubles(size_t count);

#endif
