/* Shared pieces of the MPI reference programs; see mpi_common.h. */
#define _POSIX_C_SOURCE 200809L

#include "mpi_common.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

struct app_stats app_stats;

static enum wait_mode wait_mode = WAIT_SPIN;

/* ---- grid --------------------------------------------------------------- */

void grid_init(struct grid *g, int P, int Q)
{
    g->P = P;
    g->Q = Q;
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g->size);
    g->myrow = g->rank / Q;
    g->mycol = g->rank % Q;
    /* The keys make the rank inside each sub-communicator equal to the
     * grid coordinate along it, so ring neighbours are coordinate +- 1. */
    MPI_Comm_split(MPI_COMM_WORLD, g->myrow, g->mycol, &g->row);
    MPI_Comm_split(MPI_COMM_WORLD, g->mycol, g->myrow, &g->col);
}

void grid_free(struct grid *g)
{
    MPI_Comm_free(&g->row);
    MPI_Comm_free(&g->col);
}

/* ---- options ------------------------------------------------------------ */

void opt_fail(struct opt_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static bool parse_positive_int(const char *app, const char *name, const char *text, int *out,
                               struct opt_error *err)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || value <= 0 || value > INT_MAX) {
        opt_fail(err, "%s: %s must be a positive integer, got '%s'", app, name, text);
        return false;
    }
    *out = (int)value;
    return true;
}

/* Reads leading decimal digits of *text into *out; false if there are none
 * or they overflow an int. */
static bool take_digits(const char **text, int *out)
{
    long value = 0;
    const char *s = *text;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        value = value * 10 + (*s - '0');
        if (value > INT_MAX)
            return false;
    }
    *out = (int)value;
    *text = s;
    return true;
}

static bool parse_grid(const char *app, const char *text, int *P, int *Q, struct opt_error *err)
{
    const char *s = text;
    if (!take_digits(&s, P) || *s++ != 'x' || !take_digits(&s, Q) || *s != '\0') {
        opt_fail(err, "%s: malformed --grid '%s' (expected PxQ, e.g. 2x2)", app, text);
        return false;
    }
    if (*P <= 0 || *Q <= 0) {
        opt_fail(err, "%s: --grid '%s' must have positive P and Q", app, text);
        return false;
    }
    return true;
}

static bool parse_wait_mode(const char *app, const char *text, enum wait_mode *out, struct opt_error *err)
{
    static const enum wait_mode modes[] = {WAIT_SPIN, WAIT_YIELD, WAIT_BLOCK};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(text, wait_mode_name(modes[i])) == 0) {
            *out = modes[i];
            return true;
        }
    }
    opt_fail(err, "%s: unknown --wait '%s' (expected spin, yield or block)", app, text);
    return false;
}

static bool apply_option(const char *app, const struct opt_spec *spec, const char *value, struct opt_error *err)
{
    switch (spec->kind) {
    case OPT_INT:
        return parse_positive_int(app, spec->name, value, spec->a, err);
    case OPT_GRID:
        *spec->given = true;
        return parse_grid(app, value, spec->a, spec->b, err);
    case OPT_WAIT:
    default:
        return parse_wait_mode(app, value, spec->a, err);
    }
}

static const struct opt_spec *find_option(const struct opt_spec *specs, int nspecs, const char *name, size_t len)
{
    for (int i = 0; i < nspecs; i++) {
        if (strlen(specs[i].name) == len && strncmp(specs[i].name, name, len) == 0)
            return &specs[i];
    }
    return NULL;
}

enum parse_result parse_options(const char *app, int argc, char **argv, const struct opt_spec *specs, int nspecs,
                                struct opt_error *err)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return PARSE_HELP;
        /* "--name=value" or "--name value" */
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        const struct opt_spec *spec = find_option(specs, nspecs, arg, len);
        if (spec == NULL) {
            opt_fail(err, "%s: unknown option '%.*s' (try --help)", app, (int)len, arg);
            return PARSE_ERROR;
        }
        const char *value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            opt_fail(err, "%s: option %s needs a value", app, arg);
            return PARSE_ERROR;
        }
        if (!apply_option(app, spec, value, err))
            return PARSE_ERROR;
    }
    return PARSE_OK;
}

int finish_early(enum parse_result result, const struct opt_error *err, const char *usage)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 && result == PARSE_HELP)
        fputs(usage, stdout);
    else if (rank == 0)
        fprintf(stderr, "%s\n", err->message);
    MPI_Finalize();
    return result == PARSE_HELP ? 0 : EXIT_USAGE;
}

enum parse_result check_size_and_grid(const char *app, int n, int *P, int *Q, bool grid_given, bool divisible,
                                      struct opt_error *err)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (n == 0) {
        opt_fail(err, "%s: --n N is required", app);
        return PARSE_ERROR;
    }
    if (!grid_given) {
        *P = size;
        *Q = 1;
    }
    if ((long)*P * *Q != size) {
        opt_fail(err, "%s: grid %dx%d needs %ld processes, got %d", app, *P, *Q, (long)*P * *Q, size);
        return PARSE_ERROR;
    }
    if (divisible && n % *P != 0) {
        opt_fail(err, "%s: --n %d is not divisible by P=%d of grid %dx%d", app, n, *P, *P, *Q);
        return PARSE_ERROR;
    }
    if (divisible && n % *Q != 0) {
        opt_fail(err, "%s: --n %d is not divisible by Q=%d of grid %dx%d", app, n, *Q, *P, *Q);
        return PARSE_ERROR;
    }
    return PARSE_OK;
}

/* ---- communication ------------------------------------------------------ */

void comm_set_wait_mode(enum wait_mode mode)
{
    wait_mode = mode;
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    /* Linux lets a sleep overrun by the timer slack, 50 us by default,
     * which would turn the 10 us first back-off step into 60 us. */
    if (mode == WAIT_BLOCK)
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
}

const char *wait_mode_name(enum wait_mode mode)
{
    switch (mode) {
    case WAIT_YIELD:
        return "yield";
    case WAIT_BLOCK:
        return "block";
    case WAIT_SPIN:
    default:
        return "spin";
    }
}

/* Back-off bounds of the block mode: short enough that a message arriving
 * while we sleep costs little, long enough that a waiting process uses
 * almost no CPU once a wait lasts more than a few milliseconds. */
#define BLOCK_FIRST_NS 10000L
#define BLOCK_LAST_NS 1000000L

static void sleep_ns(long ns)
{
    struct timespec t = {.tv_sec = 0, .tv_nsec = ns};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* Polls until all requests are done, giving the CPU away between polls. */
static void poll_all(int n, MPI_Request *reqs)
{
    long delay = BLOCK_FIRST_NS;
    int done = 0;
    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    while (!done) {
        if (wait_mode == WAIT_YIELD) {
            sched_yield();
        } else {
            sleep_ns(delay);
            delay = delay * 2 < BLOCK_LAST_NS ? delay * 2 : BLOCK_LAST_NS;
        }
        MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    }
}

/* Every wait of the programs comes here, so that --wait decides how a
 * process behaves while its partner is descheduled:
 *   spin:  MPI_Waitall; Open MPI busy-polls its transports (shared memory,
 *          TCP) and keeps the CPU.
 *   yield: MPI_Testall and sched_yield() between tests; still runnable, but
 *          any other runnable process on the core goes first.
 *   block: MPI_Testall and nanosleep between tests, backing off from 10 us
 *          to 1 ms. Open MPI has no truly blocking receive over shared
 *          memory or TCP; this gives the CPU away the way LAM-MPI's blocking
 *          receive over TCP did.
 * Open MPI's own library-level alternative to "yield" is
 * `--mca mpi_yield_when_idle 1` (its progress loop then calls sched_yield;
 * it is switched on by itself when a node is oversubscribed). */
void comm_wait_all(int n, MPI_Request *reqs)
{
    double start = MPI_Wtime();
    if (wait_mode == WAIT_SPIN)
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    else
        poll_all(n, reqs);
    app_stats.comm_s += MPI_Wtime() - start;
}

void comm_wait(MPI_Request *req)
{
    comm_wait_all(1, req);
}

void comm_isend(const double *buf, int count, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    double start = MPI_Wtime();
    MPI_Isend(buf, count, MPI_DOUBLE, dest, tag, comm, req);
    app_stats.messages += 1;
    app_stats.doubles += count;
    app_stats.comm_s += MPI_Wtime() - start;
}

void comm_irecv(double *buf, int count, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
    double start = MPI_Wtime();
    MPI_Irecv(buf, count, MPI_DOUBLE, src, tag, comm, req);
    app_stats.comm_s += MPI_Wtime() - start;
}

void comm_recv(double *buf, int count, int src, int tag, MPI_Comm comm)
{
    MPI_Request req;
    comm_irecv(buf, count, src, tag, comm, &req);
    comm_wait(&req);
}

/* Broadcast by ring shift: the root sends to its successor, which forwards
 * to the next, until the root's predecessor; everyone receives the data
 * exactly once and sends it at most once. Used instead of MPI_Bcast so the
 * traffic is the same under every MPI library and easy to count. The
 * forwarding send is left in *forward (MPI_REQUEST_NULL if none) so that it
 * overlaps the caller's arithmetic; wait on it before reusing buf. */
void comm_ring_bcast(double *buf, int count, int root, int tag, MPI_Comm comm, MPI_Request *forward)
{
    int size, me;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    *forward = MPI_REQUEST_NULL;
    if (size == 1 || count == 0)
        return;
    int next = (me + 1) % size;
    if (me != root)
        comm_recv(buf, count, (me + size - 1) % size, tag, comm);
    if (next != root)
        comm_isend(buf, count, next, tag, comm, forward);
}

/* Collectives count as one message of their payload for each rank that
 * contributes data (every rank of an allreduce, the root of a bcast): the
 * real number of transfers depends on the algorithm Open MPI picks. */
void comm_bcast(double *buf, int count, int root, MPI_Comm comm)
{
    int size, me;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    if (size == 1)
        return;
    MPI_Request req;
    double start = MPI_Wtime();
    MPI_Ibcast(buf, count, MPI_DOUBLE, root, comm, &req);
    app_stats.comm_s += MPI_Wtime() - start;
    if (me == root) {
        app_stats.messages += 1;
        app_stats.doubles += count;
    }
    comm_wait(&req);
}

void comm_allreduce(void *buf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int size;
    MPI_Comm_size(comm, &size);
    if (size == 1)
        return;
    MPI_Request req;
    double start = MPI_Wtime();
    MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, comm, &req);
    app_stats.comm_s += MPI_Wtime() - start;
    app_stats.messages += 1;
    app_stats.doubles += count; /* MPI_DOUBLE or MPI_DOUBLE_INT: one double each */
    comm_wait(&req);
}

void comm_barrier(MPI_Comm comm)
{
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    comm_wait(&req);
}

/* ---- timing, data, report ----------------------------------------------- */

double elapsed_max(double start)
{
    double seconds = MPI_Wtime() - start;
    comm_allreduce(&seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return seconds;
}

double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void compute_done(double start)
{
    app_stats.compute_s += MPI_Wtime() - start;
}

void update_done(double start)
{
    double seconds = MPI_Wtime() - start;
    app_stats.compute_s += seconds;
    app_stats.update_s += seconds;
}

/* splitmix64's finaliser: a cheap bijective mix with good avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double gen_value(uint64_t seed, long i, long j)
{
    uint64_t key = mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i);
    key = mix64(key ^ ((uint64_t)j * 0xc2b2ae3d27d4eb4fULL));
    /* The top 53 bits give an exact double in [0, 1). */
    return (double)(key >> 11) * 0x1.0p-53 - 0.5;
}

double nan_max(double a, double b)
{
    return isnan(b) || b > a ? b : a;
}

void json_number(FILE *out, double value)
{
    if (isfinite(value))
        fprintf(out, "%.6g", value);
    else
        fputs("null", out);
}

void report_stats(FILE *out, const struct app_stats *mine, MPI_Comm comm)
{
    enum { N = 6 };
    static const char *const names[N] = {"messages_per_rank", "doubles_per_rank", "compute_s",
                                         "comm_s",            "cpu_s",            "update_s"};
    static const char *const formats[N] = {",\"%s\":%.0f,\"%s_mean\":%.1f", ",\"%s\":%.0f,\"%s_mean\":%.1f",
                                           ",\"%s\":%.4f,\"%s_mean\":%.4f", ",\"%s\":%.4f,\"%s_mean\":%.4f",
                                           ",\"%s\":%.4f,\"%s_mean\":%.4f", ",\"%s\":%.4f,\"%s_mean\":%.4f"};
    int size, me;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    double local[N] = {(double)mine->messages, (double)mine->doubles, mine->compute_s,
                       mine->comm_s,           mine->cpu_s,          mine->update_s};
    double max[N], sum[N];
    MPI_Reduce(local, max, N, MPI_DOUBLE, MPI_MAX, 0, comm);
    MPI_Reduce(local, sum, N, MPI_DOUBLE, MPI_SUM, 0, comm);
    if (me != 0)
        return;
    for (int i = 0; i < N; i++)
        fprintf(out, formats[i], names[i], max[i], names[i], sum[i] / size);
    fputs("}\n", out);
    fflush(out);
}

double *alloc_doubles(size_t count)
{
    double *p = malloc((count > 0 ? count : 1) * sizeof *p);
    if (p == NULL) {
        fprintf(stderr, "out of memory allocating %zu doubles\n", count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

void report_result(FILE *out, double seconds, double flops, double residual, bool passed)
{
    fprintf(out, ",\"time_s\":");
    json_number(out, seconds);
    fprintf(out, ",\"mflops\":");
    json_number(out, flops / seconds / 1e6);
    fprintf(out, ",\"residual\":");
    json_number(out, residual);
    fprintf(out, ",\"passed\":%s", passed ? "true" : "false");
}
