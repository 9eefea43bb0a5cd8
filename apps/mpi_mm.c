/* mpi_mm: C <- A*A + C on a P x Q process grid, a reference program for
 * measuring how simultaneous jobs slow each other down.
 *
 * Distribution: rank r sits at grid row r / Q, column r % Q and holds the
 * (N/P) x (N/Q) blocks A(I,J) and C(I,J), column-major. The inner index runs
 * in panels of at most k: for each panel the owner of the column panel
 * A(I, k0:k1) passes it along the process row and the owner of the row panel
 * A(k0:k1, J) passes it down the process column, each by a ring shift; every
 * process then does the rank-(k1-k0) update with dgemm. Panels are cut where
 * ownership changes, so each panel has one owner in each direction.
 *
 * Self-check (outside the timed region): Freivalds' test with a fixed vector
 * x, comparing C*x with R*A*(A*x) + C0*x, scaled as HPL does. */
#define _POSIX_C_SOURCE 200809L

#include "mpi_common.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define APP "mpi_mm"
#define SEED_A 11
#define SEED_C 12
#define SEED_X 13
#define TAG_COLUMN_PANEL 1
#define TAG_ROW_PANEL 2
#define RESIDUAL_LIMIT 16.0

static const char USAGE[] =
    "usage: mpirun -np p mpi_mm --n N [--grid PxQ] [--k 128] [--repeat R] [--wait spin|yield|block]\n"
    "  C <- A*A + C (R times) for N x N matrices on a P x Q process grid (p = P*Q,\n"
    "  default grid p x 1); N must be divisible by P and by Q. Prints one JSON line.\n";

struct mm_options {
    int n, P, Q, k, repeat;
    enum wait_mode wait;
};

struct mm {
    struct grid g;
    int n, k;
    int mb, nbk;      /* local block: mb = N/P rows, nbk = N/Q columns */
    double *a, *c;    /* local blocks, column-major, leading dimension mb */
    double *colpanel; /* mb x k, received column panel of A */
    double *rowpanel; /* k x nbk, received or packed row panel of A */
};

static enum parse_result parse_args(int argc, char **argv, struct mm_options *o, struct opt_error *err)
{
    bool grid_given = false;
    *o = (struct mm_options){.k = 128, .repeat = 1, .wait = WAIT_SPIN};
    const struct opt_spec specs[] = {
        {"--n", OPT_INT, &o->n, NULL, NULL},
        {"--grid", OPT_GRID, &o->P, &o->Q, &grid_given},
        {"--k", OPT_INT, &o->k, NULL, NULL},
        {"--repeat", OPT_INT, &o->repeat, NULL, NULL},
        {"--wait", OPT_WAIT, &o->wait, NULL, NULL},
    };
    enum parse_result r = parse_options(APP, argc, argv, specs, sizeof specs / sizeof specs[0], err);
    if (r != PARSE_OK)
        return r;
    return check_size_and_grid(APP, o->n, &o->P, &o->Q, grid_given, true, err);
}

/* Fills the local block of global matrix `seed` (rows from row0, columns
 * from col0). */
static void generate_block(double *block, int rows, int cols, int row0, int col0, uint64_t seed)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            block[(size_t)j * rows + i] = gen_value(seed, row0 + i, col0 + j);
}

static void mm_setup(struct mm *m, const struct mm_options *o)
{
    grid_init(&m->g, o->P, o->Q);
    m->n = o->n;
    m->k = o->k < o->n ? o->k : o->n;
    m->mb = o->n / o->P;
    m->nbk = o->n / o->Q;
    size_t block = (size_t)m->mb * m->nbk;
    m->a = alloc_doubles(block);
    m->c = alloc_doubles(block);
    m->colpanel = alloc_doubles((size_t)m->mb * m->k);
    m->rowpanel = alloc_doubles((size_t)m->k * m->nbk);
    generate_block(m->a, m->mb, m->nbk, m->g.myrow * m->mb, m->g.mycol * m->nbk, SEED_A);
    generate_block(m->c, m->mb, m->nbk, m->g.myrow * m->mb, m->g.mycol * m->nbk, SEED_C);
}

static void mm_free(struct mm *m)
{
    free(m->a);
    free(m->c);
    free(m->colpanel);
    free(m->rowpanel);
    grid_free(&m->g);
}

/* End of the panel starting at k0: at most k wide, and never across a
 * boundary between owners of column blocks (multiples of N/Q) or of row
 * blocks (multiples of N/P). */
static int panel_end(const struct mm *m, int k0)
{
    int end = k0 + m->k;
    int column_owner_end = (k0 / m->nbk + 1) * m->nbk;
    int row_owner_end = (k0 / m->mb + 1) * m->mb;
    if (column_owner_end < end)
        end = column_owner_end;
    if (row_owner_end < end)
        end = row_owner_end;
    return end < m->n ? end : m->n;
}

/* A(I, k0:k0+kw) for my process row. The owner sends straight from its
 * block, where the panel is contiguous in column-major order. */
static double *share_column_panel(struct mm *m, int k0, int kw, MPI_Request *forward)
{
    int owner = k0 / m->nbk;
    double *panel = m->colpanel;
    if (m->g.mycol == owner)
        panel = m->a + (size_t)(k0 - owner * m->nbk) * m->mb;
    comm_ring_bcast(panel, m->mb * kw, owner, TAG_COLUMN_PANEL, m->g.row, forward);
    return panel;
}

/* A(k0:k0+kw, J) for my process column; the owner packs the strided rows
 * into a kw x nbk panel first. */
static double *share_row_panel(struct mm *m, int k0, int kw, MPI_Request *forward)
{
    int owner = k0 / m->mb;
    if (m->g.myrow == owner) {
        double start = MPI_Wtime();
        int first = k0 - owner * m->mb;
        for (int j = 0; j < m->nbk; j++)
            memcpy(m->rowpanel + (size_t)j * kw, m->a + (size_t)j * m->mb + first, (size_t)kw * sizeof(double));
        compute_done(start);
    }
    comm_ring_bcast(m->rowpanel, kw * m->nbk, owner, TAG_ROW_PANEL, m->g.col, forward);
    return m->rowpanel;
}

/* One C <- A*A + C. The forwarding sends overlap the dgemm; they must end
 * before the panel buffers are reused. */
static void multiply_once(struct mm *m)
{
    for (int k0 = 0; k0 < m->n;) {
        int k1 = panel_end(m, k0);
        int kw = k1 - k0;
        MPI_Request forward[2];
        double *colp = share_column_panel(m, k0, kw, &forward[0]);
        double *rowp = share_row_panel(m, k0, kw, &forward[1]);
        double start = MPI_Wtime();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m->mb, m->nbk, kw, 1.0, colp, m->mb, rowp, kw, 1.0,
                    m->c, m->mb);
        compute_done(start);
        comm_wait_all(2, forward);
        k0 = k1;
    }
}

/* out[row0 + i] = (block * x[col0 ...])_i, the rest of out untouched. */
static void block_times_vector(const struct mm *m, const double *block, const double *x, double *out)
{
    const double *xj = x + (size_t)m->g.mycol * m->nbk;
    double *yi = out + (size_t)m->g.myrow * m->mb;
    cblas_dgemv(CblasColMajor, CblasNoTrans, m->mb, m->nbk, 1.0, block, m->mb, xj, 1, 0.0, yi, 1);
}

static void block_abs_row_sums(const struct mm *m, const double *block, double *out)
{
    double *sums = out + (size_t)m->g.myrow * m->mb;
    for (int i = 0; i < m->mb; i++) {
        double s = 0.0;
        for (int j = 0; j < m->nbk; j++)
            s += fabs(block[(size_t)j * m->mb + i]);
        sums[i] = s;
    }
}

static double max_abs(const double *v, int n)
{
    double best = 0.0;
    for (int i = 0; i < n; i++)
        best = nan_max(best, fabs(v[i]));
    return best;
}

/* Freivalds: y1 = C x and y2 = R A (A x) + C0 x, as full-length vectors
 * summed over the world (each process fills in its own rows). Returns
 * ||y1 - y2|| / ((R ||A||^2 + ||C0||) ||x|| N eps): HPL's scaling, with
 * ||C0|| added because C0's rounding errors are in y1 too and dominate when
 * N is tiny. */
static double mm_residual(const struct mm *m, int repeat)
{
    int n = m->n;
    enum { CX, AX, C0X, ASUM, C0SUM, PARTS };
    double *x = alloc_doubles(n), *w = alloc_doubles(n);
    double *v = calloc((size_t)PARTS * n, sizeof *v);
    double *c0 = alloc_doubles((size_t)m->mb * m->nbk);
    for (int j = 0; j < n; j++)
        x[j] = gen_value(SEED_X, j, 0);
    generate_block(c0, m->mb, m->nbk, m->g.myrow * m->mb, m->g.mycol * m->nbk, SEED_C);
    block_times_vector(m, m->c, x, v + (size_t)CX * n);
    block_times_vector(m, m->a, x, v + (size_t)AX * n);
    block_times_vector(m, c0, x, v + (size_t)C0X * n);
    block_abs_row_sums(m, m->a, v + (size_t)ASUM * n);
    block_abs_row_sums(m, c0, v + (size_t)C0SUM * n);
    comm_allreduce(v, PARTS * n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    memset(w, 0, (size_t)n * sizeof *w);
    block_times_vector(m, m->a, v + (size_t)AX * n, w);
    comm_allreduce(w, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double diff = 0.0;
    for (int i = 0; i < n; i++)
        diff = nan_max(diff, fabs(v[(size_t)CX * n + i] - (repeat * w[i] + v[(size_t)C0X * n + i])));
    double norm_a = max_abs(v + (size_t)ASUM * n, n);
    double norm_c0 = max_abs(v + (size_t)C0SUM * n, n);
    double scale = (repeat * norm_a * norm_a + norm_c0) * max_abs(x, n) * n * UNIT_ROUNDOFF + DBL_MIN;
    free(x);
    free(w);
    free(v);
    free(c0);
    return diff / scale;
}

static void print_report(const struct mm *m, const struct mm_options *o, double seconds, double residual,
                         bool passed, const struct app_stats *timed)
{
    if (m->g.rank == 0) {
        double flops = 2.0 * o->n * (double)o->n * o->n * o->repeat;
        printf("{\"app\":\"mm\",\"n\":%d,\"p\":%d,\"grid\":\"%dx%d\",\"k\":%d,\"repeat\":%d,\"wait\":\"%s\"", o->n,
               m->g.size, o->P, o->Q, o->k, o->repeat, wait_mode_name(o->wait));
        report_result(stdout, seconds, flops, residual, passed);
    }
    report_stats(stdout, timed, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    openblas_set_num_threads(1); /* one BLAS thread per MPI process */
    struct mm_options o;
    struct opt_error err = {{0}};
    enum parse_result parsed = parse_args(argc, argv, &o, &err);
    if (parsed != PARSE_OK)
        return finish_early(parsed, &err, USAGE);
    comm_set_wait_mode(o.wait);
    struct mm m;
    mm_setup(&m, &o);

    comm_barrier(MPI_COMM_WORLD);
    app_stats = (struct app_stats){0};
    double start = MPI_Wtime(), cpu_start = cpu_now();
    for (int r = 0; r < o.repeat; r++)
        multiply_once(&m);
    comm_barrier(MPI_COMM_WORLD);
    app_stats.cpu_s = cpu_now() - cpu_start;
    struct app_stats timed = app_stats;
    double seconds = elapsed_max(start);

    double residual = mm_residual(&m, o.repeat);
    bool passed = residual < RESIDUAL_LIMIT; /* false for NaN too */
    print_report(&m, &o, seconds, residual, passed, &timed);
    if (!passed && m.g.rank == 0)
        fprintf(stderr, "%s: self-check FAILED: scaled residual %g >= %g\n", APP, residual, RESIDUAL_LIMIT);
    mm_free(&m);
    MPI_Finalize();
    return passed ? 0 : 1;
}
