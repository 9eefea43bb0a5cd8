/* spinbarrier: a tightly synchronised multi-threaded program, the pattern
 * of the LLNL gang scheduler benchmarks: T threads do K compute phases
 * separated by barriers. A thread that is descheduled holds all the others
 * up at the next barrier, which is what makes such programs suffer under
 * uncoordinated time-sharing.
 *
 * Each phase, each thread rotates the (x, y) pairs of its private, cache-
 * resident arrays by a small angle, sweep after sweep (6 flops per pair per
 * sweep). The angle of a phase depends on a value its neighbour thread
 * published at the end of the previous phase, so a barrier that let a
 * thread run ahead would change the result; the self-check compares the
 * result with a serial run of the same arithmetic. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define APP "spinbarrier"
#define EXIT_USAGE 2
#define PAIRS 512           /* 8 KiB of x and y per thread: stays in L1 */
#define FLOPS_PER_PAIR 6.0  /* 4 multiplications, 2 additions */
#define MAX_THREADS 1024

static const char USAGE[] =
    "usage: spinbarrier [--threads T] [--phases K] [--work-mflop W] [--barrier spin|yield|block] [--no-check]\n"
    "  T threads (default 2) do K compute phases (default 1000) of W MFLOP each\n"
    "  (default 1), separated by barriers. Prints one JSON line.\n";

enum barrier_kind { BARRIER_SPIN, BARRIER_YIELD, BARRIER_BLOCK };

static const char *const BARRIER_NAMES[] = {"spin", "yield", "block"};

struct options {
    int threads, phases;
    double work_mflop;
    enum barrier_kind barrier;
    bool check;
};

/* Sense-reversing barrier: the last thread to arrive resets the count and
 * flips the shared sense; the others wait until the sense matches their
 * own, which they flip at every barrier. The flag and the count live on
 * separate cache lines so the waiting threads do not disturb the arrivals. */
struct sense_barrier {
    alignas(64) atomic_int remaining;
    alignas(64) atomic_int sense;
    int total;
};

struct shared {
    struct options opt;
    long sweeps; /* per phase */
    struct sense_barrier spin;
    pthread_barrier_t block;
    double *published[2]; /* [phase % 2][thread]: x[0] after the phase */
};

struct worker {
    alignas(64) int id;
    struct shared *sh;
    double *x, *y;
    int local_sense;
    double compute_s, wait_s; /* inside the timed region */
    double start, end;        /* of this thread's timed region */
    pthread_t thread;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- options ------------------------------------------------------------ */

static bool parse_int(const char *name, const char *text, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v <= 0 || v > max) {
        fprintf(stderr, "%s: %s must be an integer from 1 to %d, got '%s'\n", APP, name, max, text);
        return false;
    }
    *out = (int)v;
    return true;
}

static bool parse_work(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !(v > 0.0) || !isfinite(v)) {
        fprintf(stderr, "%s: --work-mflop must be a positive number, got '%s'\n", APP, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_barrier(const char *text, enum barrier_kind *out)
{
    for (int i = 0; i < 3; i++) {
        if (strcmp(text, BARRIER_NAMES[i]) == 0) {
            *out = (enum barrier_kind)i;
            return true;
        }
    }
    fprintf(stderr, "%s: unknown --barrier '%s' (expected spin, yield or block)\n", APP, text);
    return false;
}

static bool parse_value(const char *name, const char *value, struct options *o)
{
    if (strcmp(name, "--threads") == 0)
        return parse_int(name, value, MAX_THREADS, &o->threads);
    if (strcmp(name, "--phases") == 0)
        return parse_int(name, value, INT_MAX, &o->phases);
    if (strcmp(name, "--work-mflop") == 0)
        return parse_work(value, &o->work_mflop);
    return parse_barrier(value, &o->barrier);
}

static bool known_valued_option(const char *name)
{
    static const char *const names[] = {"--threads", "--phases", "--work-mflop", "--barrier"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){.threads = 2, .phases = 1000, .work_mflop = 1.0, .barrier = BARRIER_SPIN, .check = true};
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *eq = strchr(argv[i], '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - argv[i]) : (int)strlen(argv[i]), argv[i]);
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--no-check") == 0) {
            o->check = false;
            continue;
        }
        if (!known_valued_option(name)) {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", APP, name);
            return EXIT_USAGE;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            fprintf(stderr, "%s: option %s needs a value\n", APP, name);
            return EXIT_USAGE;
        }
        if (!parse_value(name, value, o))
            return EXIT_USAGE;
    }
    return -1;
}

/* ---- barriers ------------------------------------------------------------ */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause(); /* lets a sibling hyperthread run, saves power */
#endif
}

static void sense_barrier_wait(struct sense_barrier *b, int *local_sense, bool yield)
{
    int mine = !*local_sense;
    *local_sense = mine;
    /* acq_rel: our writes before the barrier are released to the last
     * arriver, whose release store of the sense passes them all on. */
    if (atomic_fetch_sub_explicit(&b->remaining, 1, memory_order_acq_rel) == 1) {
        atomic_store_explicit(&b->remaining, b->total, memory_order_relaxed);
        atomic_store_explicit(&b->sense, mine, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&b->sense, memory_order_acquire) != mine) {
        if (yield)
            sched_yield();
        else
            cpu_relax();
    }
}

static void barrier_wait(struct worker *w)
{
    struct shared *sh = w->sh;
    if (sh->opt.barrier == BARRIER_BLOCK)
        pthread_barrier_wait(&sh->block);
    else
        sense_barrier_wait(&sh->spin, &w->local_sense, sh->opt.barrier == BARRIER_YIELD);
}

/* ---- the arithmetic, shared by the threads and the serial reference ------ */

/* Rotates every (x[i], y[i]) by the angle whose cosine and sine are c and
 * s, `sweeps` times. noinline: the threads and the serial check run the
 * very same machine code, so their results agree bit for bit. */
__attribute__((noinline)) static void rotate(double *restrict x, double *restrict y, long sweeps, double c, double s)
{
    for (long k = 0; k < sweeps; k++) {
        for (int i = 0; i < PAIRS; i++) {
            double xi = x[i], yi = y[i];
            x[i] = c * xi - s * yi;
            y[i] = s * xi + c * yi;
        }
    }
}

/* One phase of thread `id`: the angle comes from what the next thread
 * published in the previous phase; then this thread publishes its own. */
static void phase(struct shared *sh, int id, int k, double *x, double *y)
{
    int next = (id + 1) % sh->opt.threads;
    double angle = 1e-3 * (1.0 + 0.5 * sh->published[(k + 1) % 2][next]);
    rotate(x, y, sh->sweeps, cos(angle), sin(angle));
    sh->published[k % 2][id] = x[0];
}

static void fill_initial(int id, double *x, double *y)
{
    for (int i = 0; i < PAIRS; i++) {
        /* distinct, irregular values in [-0.5, 0.5) */
        x[i] = fmod((id + 1) * 0.6180339887 + i * 0.7548776662, 1.0) - 0.5;
        y[i] = fmod((id + 1) * 0.5698402910 + i * 0.4142135624, 1.0) - 0.5;
    }
}

static double checksum(double *const *x, double *const *y, int threads)
{
    double sum = 0.0;
    for (int t = 0; t < threads; t++)
        for (int i = 0; i < PAIRS; i++)
            sum += x[t][i] + 2.0 * y[t][i];
    return sum;
}

/* Before phase 0 each thread "publishes" its initial x[0]. */
static void publish_initial(struct shared *sh, double *const *x)
{
    for (int t = 0; t < sh->opt.threads; t++)
        sh->published[1][t] = x[t][0];
}

/* ---- threads ---------------------------------------------------------------- */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    barrier_wait(w); /* everyone is up: the timed region starts */
    w->start = now();
    for (int k = 0; k < sh->opt.phases; k++) {
        double t0 = now();
        phase(sh, w->id, k, w->x, w->y);
        double t1 = now();
        barrier_wait(w);
        w->compute_s += t1 - t0;
        w->wait_s += now() - t1;
    }
    w->end = now();
    return NULL;
}

static double *alloc_array(void)
{
    double *p = aligned_alloc(64, PAIRS * sizeof(double));
    if (p == NULL) {
        fprintf(stderr, "%s: out of memory\n", APP);
        exit(1);
    }
    return p;
}

static void shared_init(struct shared *sh, const struct options *o)
{
    sh->opt = *o;
    double sweeps = round(o->work_mflop * 1e6 / (FLOPS_PER_PAIR * PAIRS));
    sh->sweeps = sweeps < 1.0 ? 1 : (long)sweeps;
    atomic_init(&sh->spin.remaining, o->threads);
    atomic_init(&sh->spin.sense, 0);
    sh->spin.total = o->threads;
    pthread_barrier_init(&sh->block, NULL, (unsigned)o->threads);
    for (int p = 0; p < 2; p++)
        sh->published[p] = calloc((size_t)o->threads, sizeof(double));
}

/* Runs the threads; returns false if one could not be started. */
static bool run_threads(struct shared *sh, struct worker *w)
{
    int n = sh->opt.threads;
    for (int t = 0; t < n; t++) {
        int rc = pthread_create(&w[t].thread, NULL, worker_main, &w[t]);
        if (rc != 0) {
            fprintf(stderr, "%s: cannot start thread %d: %s\n", APP, t, strerror(rc));
            return false;
        }
    }
    for (int t = 0; t < n; t++)
        pthread_join(w[t].thread, NULL);
    return true;
}

/* The serial reference: the same phases, thread by thread. Phase k only
 * reads slot (k+1) % 2 and writes slot k % 2, so the order of the threads
 * within a phase does not matter, as in the parallel run. */
static double serial_reference(struct shared *sh)
{
    int n = sh->opt.threads;
    double **x = malloc((size_t)n * sizeof *x), **y = malloc((size_t)n * sizeof *y);
    for (int t = 0; t < n; t++) {
        x[t] = alloc_array();
        y[t] = alloc_array();
        fill_initial(t, x[t], y[t]);
    }
    publish_initial(sh, x);
    for (int k = 0; k < sh->opt.phases; k++)
        for (int t = 0; t < n; t++)
            phase(sh, t, k, x[t], y[t]);
    double sum = checksum(x, y, n);
    for (int t = 0; t < n; t++) {
        free(x[t]);
        free(y[t]);
    }
    free(x);
    free(y);
    return sum;
}

static void print_report(const struct options *o, const struct shared *sh, const struct worker *w, double sum,
                         bool passed)
{
    int n = o->threads;
    /* from the first thread out of the first barrier to the last one out
     * of the last: every thread's compute_s + comm_s fits in it */
    double first = w[0].start, last = w[0].end;
    double flops = FLOPS_PER_PAIR * PAIRS * (double)sh->sweeps * o->phases * n;
    double compute_max = 0, wait_max = 0, compute_sum = 0, wait_sum = 0;
    for (int t = 0; t < n; t++) {
        first = fmin(first, w[t].start);
        last = fmax(last, w[t].end);
        compute_max = fmax(compute_max, w[t].compute_s);
        wait_max = fmax(wait_max, w[t].wait_s);
        compute_sum += w[t].compute_s;
        wait_sum += w[t].wait_s;
    }
    double seconds = last - first;
    printf("{\"app\":\"spinbarrier\",\"threads\":%d,\"phases\":%d,\"work_mflop\":%g,\"barrier\":\"%s\"", n,
           o->phases, o->work_mflop, BARRIER_NAMES[o->barrier]);
    printf(",\"sweeps_per_phase\":%ld,\"time_s\":%.6g,\"mflops\":%.6g,\"checksum\":%.17g", sh->sweeps, seconds,
           flops / seconds / 1e6, sum);
    printf(",\"checked\":%s,\"passed\":%s", o->check ? "true" : "false", passed ? "true" : "false");
    printf(",\"compute_s\":%.4f,\"compute_s_mean\":%.4f,\"comm_s\":%.4f,\"comm_s_mean\":%.4f}\n", compute_max,
           compute_sum / n, wait_max, wait_sum / n);
}

int main(int argc, char **argv)
{
    struct options o;
    int code = parse_args(argc, argv, &o);
    if (code >= 0)
        return code;
    struct shared sh;
    shared_init(&sh, &o);
    /* aligned: each worker's counters on their own cache lines */
    struct worker *w = aligned_alloc(64, (size_t)o.threads * sizeof *w);
    double **x = malloc((size_t)o.threads * sizeof *x), **y = malloc((size_t)o.threads * sizeof *y);
    for (int t = 0; t < o.threads; t++) {
        w[t] = (struct worker){.id = t, .sh = &sh, .x = alloc_array(), .y = alloc_array()};
        fill_initial(t, w[t].x, w[t].y);
        x[t] = w[t].x;
        y[t] = w[t].y;
    }
    publish_initial(&sh, x);
    if (!run_threads(&sh, w))
        return 1;
    double sum = checksum(x, y, o.threads);
    /* Same code, same inputs, no reassociation (no -ffast-math): the
     * serial run must give exactly the same bits. */
    double expected = o.check ? serial_reference(&sh) : sum;
    bool passed = sum == expected;
    print_report(&o, &sh, w, sum, passed);
    if (!passed)
        fprintf(stderr, "%s: self-check FAILED: checksum %.17g, serial reference %.17g\n", APP, sum, expected);
    return passed ? 0 : 1;
}
