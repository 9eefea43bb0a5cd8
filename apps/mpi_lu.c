/* mpi_lu: LU factorisation with partial pivoting of a dense N x N system on
 * a P x Q process grid, a reference program for measuring how simultaneous
 * jobs slow each other down. Its communication mixes many small, latency-
 * bound messages (the panel's pivot search and row swaps) with large ones
 * (the panel and U row broadcasts), like HPL.
 *
 * Distribution: 2-D block-cyclic with square nb x nb blocks; rank r sits at
 * grid row r / Q, column r % Q; local storage is column-major (storage
 * blocking: a local column holds whole blocks of rows). The right-hand side
 * b is an extra global column N, so the factorisation also performs the
 * forward substitution (b becomes L^-1 P b) as in HPL; the row swaps are
 * therefore never applied to the columns left of the panel, whose L is not
 * needed again.
 *
 * Right-looking, for each panel of nb columns starting at k0:
 *   1. the owning process column factors it column by column: pivot search
 *      (MPI_Iallreduce MAXLOC over the process column), broadcast of the
 *      pivot row (MPI_Ibcast), point-to-point swap of the displaced row,
 *      scaling and rank-1 update;
 *   2. the panel and its pivots go along each process row by ring shift;
 *   3. every process column applies the panel's row swaps to its columns
 *      right of the panel (one message per pair of process rows involved);
 *   4. the process row holding the diagonal block solves for its part of
 *      the U block row (dtrsm) and passes it down each process column by
 *      ring shift;
 *   5. everyone updates its part of the trailing matrix with dgemm.
 * Ring shifts, not MPI_Bcast, carry the large messages, as in HPL's
 * default "increasing ring", so the traffic and its count do not depend on
 * the MPI library's choice of broadcast algorithm.
 *
 * Self-check (outside the timed region): rank 0 gathers U and L^-1 P b,
 * solves U x = y, and computes HPL's scaled residual against the A and b
 * regenerated from the deterministic generator. */
#define _POSIX_C_SOURCE 200809L

#include "mpi_common.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define APP "mpi_lu"
#define SEED_A 21 /* b is column N of the same generator */
#define TAG_SWAP 1
#define TAG_PANEL 2
#define TAG_ROWS 3
#define TAG_U 4
#define TAG_GATHER 5
#define RESIDUAL_LIMIT 16.0

static const char USAGE[] =
    "usage: mpirun -np p mpi_lu --n N [--grid PxQ] [--nb 60] [--wait spin|yield|block]\n"
    "  LU factorisation with partial pivoting of an N x N system on a P x Q process\n"
    "  grid (p = P*Q, default grid p x 1), block-cyclic with nb x nb blocks.\n"
    "  Prints one JSON line.\n";

struct lu_options {
    int n, P, Q, nb;
    enum wait_mode wait;
};

struct lu {
    struct grid g;
    int n, nb;
    int mloc, nloc, lda; /* my rows of the N, my columns of the N + 1 */
    double *a;           /* column-major, leading dimension lda */
    double *panel;       /* L panel (my rows from k0 on) x jb, then jb pivots */
    double *urow;        /* jb x (my columns right of the panel): U block row */
    double *rowbuf;      /* 2 nb: the pivot row, and the row it displaces */
    double *sendrows;    /* 2 nb rows of my trailing columns: swap traffic */
    double *recvrows;
    int *ipiv;        /* the panel's pivots, as global rows */
    int *move_row;    /* row swaps of a panel as moves: row move_row[i] */
    int *move_src;    /* receives the original content of row move_src[i] */
    MPI_Request *req; /* 2 P, for the row swap exchange */
};

/* ---- block-cyclic index arithmetic -------------------------------------- */

/* How many of the indices 0 .. g-1 process `me` of `nprocs` owns when
 * blocks of nb are dealt round-robin starting with process 0. */
static int owned_before(int g, int nb, int me, int nprocs)
{
    int blocks = g / nb;
    int count = blocks / nprocs * nb;
    int extra = blocks % nprocs;
    if (me < extra)
        count += nb;
    else if (me == extra)
        count += g % nb;
    return count;
}

static int owner_of(int g, int nb, int nprocs)
{
    return g / nb % nprocs;
}

static int local_index(int g, int nb, int nprocs)
{
    return g / nb / nprocs * nb + g % nb;
}

static int global_index(int l, int nb, int me, int nprocs)
{
    return (l / nb * nprocs + me) * nb + l % nb;
}

/* My first local row (column) whose global index is >= g. */
static int row_start(const struct lu *f, int g)
{
    return owned_before(g, f->nb, f->g.myrow, f->g.P);
}

static int col_start(const struct lu *f, int g)
{
    return owned_before(g, f->nb, f->g.mycol, f->g.Q);
}

static int row_owner(const struct lu *f, int g)
{
    return owner_of(g, f->nb, f->g.P);
}

static double *at(const struct lu *f, int lrow, int lcol)
{
    return f->a + (size_t)lcol * f->lda + lrow;
}

/* ---- set-up ------------------------------------------------------------- */

static enum parse_result parse_args(int argc, char **argv, struct lu_options *o, struct opt_error *err)
{
    bool grid_given = false;
    *o = (struct lu_options){.nb = 60, .wait = WAIT_SPIN};
    const struct opt_spec specs[] = {
        {"--n", OPT_INT, &o->n, NULL, NULL},
        {"--grid", OPT_GRID, &o->P, &o->Q, &grid_given},
        {"--nb", OPT_INT, &o->nb, NULL, NULL},
        {"--wait", OPT_WAIT, &o->wait, NULL, NULL},
    };
    enum parse_result r = parse_options(APP, argc, argv, specs, sizeof specs / sizeof specs[0], err);
    if (r != PARSE_OK)
        return r;
    return check_size_and_grid(APP, o->n, &o->P, &o->Q, grid_given, false, err);
}

/* Fills my part of [A b] from the generator. */
static void generate_local(struct lu *f)
{
    for (int c = 0; c < f->nloc; c++) {
        int gc = global_index(c, f->nb, f->g.mycol, f->g.Q);
        for (int r = 0; r < f->mloc; r++)
            *at(f, r, c) = gen_value(SEED_A, global_index(r, f->nb, f->g.myrow, f->g.P), gc);
    }
}

static void lu_setup(struct lu *f, const struct lu_options *o)
{
    grid_init(&f->g, o->P, o->Q);
    f->n = o->n;
    f->nb = o->nb < o->n ? o->nb : o->n;
    f->mloc = row_start(f, f->n);
    f->nloc = col_start(f, f->n + 1);
    f->lda = f->mloc > 0 ? f->mloc : 1;
    size_t nb = (size_t)f->nb;
    f->a = alloc_doubles((size_t)f->lda * f->nloc);
    f->panel = alloc_doubles((size_t)f->mloc * nb + nb);
    f->urow = alloc_doubles(nb * f->nloc);
    f->rowbuf = alloc_doubles(2 * nb);
    f->sendrows = alloc_doubles(2 * nb * f->nloc);
    f->recvrows = alloc_doubles(2 * nb * f->nloc);
    f->ipiv = malloc(nb * sizeof *f->ipiv);
    f->move_row = malloc(2 * nb * sizeof *f->move_row);
    f->move_src = malloc(2 * nb * sizeof *f->move_src);
    f->req = malloc(2 * (size_t)f->g.P * sizeof *f->req);
    if (!f->ipiv || !f->move_row || !f->move_src || !f->req) {
        fprintf(stderr, "%s: out of memory\n", APP);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    generate_local(f);
}

static void lu_free(struct lu *f)
{
    free(f->a);
    free(f->panel);
    free(f->urow);
    free(f->rowbuf);
    free(f->sendrows);
    free(f->recvrows);
    free(f->ipiv);
    free(f->move_row);
    free(f->move_src);
    free(f->req);
    grid_free(&f->g);
}

/* ---- 1. panel factorisation (owning process column only) ---------------- */

/* The global row of the largest |entry| of global column gj (local lcol)
 * from row gj down, over the whole process column; ties go to the lowest
 * row, so every process agrees. */
static int find_pivot(const struct lu *f, int gj, int lcol)
{
    struct {
        double value;
        int row;
    } best = {-1.0, INT_MAX};
    int lr = row_start(f, gj);
    if (lr < f->mloc) {
        double start = MPI_Wtime();
        int i = (int)cblas_idamax(f->mloc - lr, at(f, lr, lcol), 1);
        best.value = fabs(*at(f, lr + i, lcol));
        best.row = global_index(lr + i, f->nb, f->g.myrow, f->g.P);
        compute_done(start);
    }
    comm_allreduce(&best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, f->g.col);
    return best.row;
}

static void copy_row_out(const struct lu *f, int lrow, int lcol, int width, double *out)
{
    for (int j = 0; j < width; j++)
        out[j] = *at(f, lrow, lcol + j);
}

static void copy_row_in(struct lu *f, int lrow, int lcol, int width, const double *in)
{
    for (int j = 0; j < width; j++)
        *at(f, lrow, lcol + j) = in[j];
}

/* Swaps rows gj and piv across the panel's jb columns (from local column
 * lc0) and leaves the new row gj, the pivot row, in prow on every process
 * of the column: its owner broadcasts it, and the old row gj goes to piv's
 * owner point to point. */
static void swap_panel_rows(struct lu *f, int gj, int piv, int lc0, int jb, double *prow)
{
    int from = row_owner(f, piv), to = row_owner(f, gj), me = f->g.myrow;
    double *displaced = prow + f->nb;
    if (me == from)
        copy_row_out(f, local_index(piv, f->nb, f->g.P), lc0, jb, prow);
    comm_bcast(prow, jb, from, f->g.col);
    if (piv == gj)
        return;
    if (me == to)
        copy_row_out(f, local_index(gj, f->nb, f->g.P), lc0, jb, displaced);
    if (me == to && from != to) {
        MPI_Request req;
        comm_isend(displaced, jb, from, TAG_SWAP, f->g.col, &req);
        comm_wait(&req);
    } else if (me == from && from != to) {
        comm_recv(displaced, jb, to, TAG_SWAP, f->g.col);
    }
    if (me == from)
        copy_row_in(f, local_index(piv, f->nb, f->g.P), lc0, jb, displaced);
    if (me == to)
        copy_row_in(f, local_index(gj, f->nb, f->g.P), lc0, jb, prow);
}

/* Scales the column below the pivot and applies the rank-1 update to the
 * rest of the panel. A zero pivot (singular matrix) is left unscaled; the
 * self-check then fails. */
static void eliminate(struct lu *f, int gj, int lcol, int rest, const double *prow)
{
    int lr = row_start(f, gj + 1);
    int m = f->mloc - lr;
    double pivot = prow[0];
    if (m <= 0 || pivot == 0.0)
        return;
    double start = MPI_Wtime();
    cblas_dscal(m, 1.0 / pivot, at(f, lr, lcol), 1);
    if (rest > 0)
        cblas_dger(CblasColMajor, m, rest, -1.0, at(f, lr, lcol), 1, prow + 1, 1, at(f, lr, lcol + 1), f->lda);
    compute_done(start);
}

/* Copies my rows of the factored panel (from k0 down) and the pivots into
 * f->panel, the message for the process row. */
static void pack_panel(struct lu *f, int k0, int jb)
{
    int lr0 = row_start(f, k0), mp = f->mloc - lr0, lc0 = col_start(f, k0);
    for (int j = 0; j < jb; j++)
        if (mp > 0)
            memcpy(f->panel + (size_t)j * mp, at(f, lr0, lc0 + j), (size_t)mp * sizeof(double));
    for (int j = 0; j < jb; j++)
        f->panel[(size_t)mp * jb + j] = f->ipiv[j];
}

static void factor_panel(struct lu *f, int k0, int jb)
{
    int lc0 = col_start(f, k0);
    for (int j = 0; j < jb; j++) {
        int gj = k0 + j;
        int piv = find_pivot(f, gj, lc0 + j);
        f->ipiv[j] = piv;
        swap_panel_rows(f, gj, piv, lc0, jb, f->rowbuf);
        eliminate(f, gj, lc0 + j, jb - j - 1, f->rowbuf + j);
    }
    pack_panel(f, k0, jb);
}

/* ---- 2. panel along the process rows ------------------------------------ */

static void share_panel(struct lu *f, int k0, int jb, MPI_Request *forward)
{
    int mp = f->mloc - row_start(f, k0);
    int owner = owner_of(k0, f->nb, f->g.Q);
    comm_ring_bcast(f->panel, mp * jb + jb, owner, TAG_PANEL, f->g.row, forward);
    for (int j = 0; j < jb; j++)
        f->ipiv[j] = (int)f->panel[(size_t)mp * jb + j];
}

/* ---- 3. row swaps right of the panel ------------------------------------ */

static int find_or_add_move(struct lu *f, int *count, int row)
{
    for (int i = 0; i < *count; i++)
        if (f->move_row[i] == row)
            return i;
    f->move_row[*count] = row;
    f->move_src[*count] = row;
    return (*count)++;
}

/* Composes the panel's sequential swaps into one permutation of the rows
 * they touch (at most 2 jb): row move_row[i] ends up holding what row
 * move_src[i] holds now. Returns the number of rows touched. */
static int compose_swaps(struct lu *f, int k0, int jb)
{
    int count = 0;
    for (int j = 0; j < jb; j++) {
        if (f->ipiv[j] == k0 + j)
            continue;
        int a = find_or_add_move(f, &count, k0 + j);
        int b = find_or_add_move(f, &count, f->ipiv[j]);
        int t = f->move_src[a];
        f->move_src[a] = f->move_src[b];
        f->move_src[b] = t;
    }
    return count;
}

/* Whether move i takes a row from process row `from` to process row `to`. */
static bool move_between(const struct lu *f, int i, int from, int to)
{
    return f->move_row[i] != f->move_src[i] && row_owner(f, f->move_src[i]) == from &&
           row_owner(f, f->move_row[i]) == to;
}

/* Packs (or, with unpack, stores) the rows that go from process row
 * `from` to process row `to`, columns lcs.. of my part, in move order. */
static int transfer_rows(struct lu *f, int count, int from, int to, int lcs, double *buf, bool unpack)
{
    int nt = f->nloc - lcs, k = 0;
    double start = MPI_Wtime();
    for (int i = 0; i < count; i++) {
        if (!move_between(f, i, from, to))
            continue;
        int g = unpack ? f->move_row[i] : f->move_src[i];
        int lrow = local_index(g, f->nb, f->g.P);
        if (unpack)
            copy_row_in(f, lrow, lcs, nt, buf + (size_t)k * nt);
        else
            copy_row_out(f, lrow, lcs, nt, buf + (size_t)k * nt);
        k++;
    }
    compute_done(start);
    return k;
}

/* Packs every row I must give away (my own moves into *mine) and posts the
 * sends and receives; returns the number of requests. */
static int post_row_exchange(struct lu *f, int count, int lcs, double **mine)
{
    int nt = f->nloc - lcs, me = f->g.myrow, nreq = 0;
    size_t sent = 0, received = 0;
    for (int q = 0; q < f->g.P; q++) {
        int k = transfer_rows(f, count, me, q, lcs, f->sendrows + sent, false);
        if (q == me)
            *mine = f->sendrows + sent;
        else if (k > 0)
            comm_isend(f->sendrows + sent, k * nt, q, TAG_ROWS, f->g.col, &f->req[nreq++]);
        sent += (size_t)k * nt;
        int expect = 0;
        for (int i = 0; i < count; i++)
            expect += q != me && move_between(f, i, q, me);
        if (expect > 0)
            comm_irecv(f->recvrows + received, expect * nt, q, TAG_ROWS, f->g.col, &f->req[nreq++]);
        received += (size_t)expect * nt;
    }
    return nreq;
}

/* Applies the panel's swaps to my columns right of it. All the rows I give
 * away are packed before any is overwritten, so cycles need no care; each
 * pair of process rows exchanges at most one message each way. */
static void swap_trailing_rows(struct lu *f, int k0, int jb)
{
    int lcs = col_start(f, k0 + jb), nt = f->nloc - lcs, me = f->g.myrow;
    int count = compose_swaps(f, k0, jb);
    if (nt == 0 || count == 0)
        return;
    double *mine = f->sendrows;
    int nreq = post_row_exchange(f, count, lcs, &mine);
    comm_wait_all(nreq, f->req);
    size_t received = 0;
    for (int q = 0; q < f->g.P; q++) {
        double *from = q == me ? mine : f->recvrows + received;
        int k = transfer_rows(f, count, q, me, lcs, from, true);
        if (q != me)
            received += (size_t)k * nt;
    }
}

/* ---- 4. and 5. U block row and trailing update -------------------------- */

static void share_u_row(struct lu *f, int k0, int jb, MPI_Request *forward)
{
    int lcs = col_start(f, k0 + jb), nt = f->nloc - lcs;
    int owner = row_owner(f, k0);
    if (f->g.myrow == owner && nt > 0) {
        double start = MPI_Wtime();
        int lr0 = row_start(f, k0), mp = f->mloc - lr0;
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, jb, nt, 1.0, f->panel, mp,
                    at(f, lr0, lcs), f->lda);
        for (int j = 0; j < nt; j++)
            memcpy(f->urow + (size_t)j * jb, at(f, lr0, lcs + j), (size_t)jb * sizeof(double));
        update_done(start);
    }
    comm_ring_bcast(f->urow, jb * nt, owner, TAG_U, f->g.col, forward);
}

static void update_trailing(struct lu *f, int k0, int jb)
{
    int lr0 = row_start(f, k0), lr1 = row_start(f, k0 + jb), lcs = col_start(f, k0 + jb);
    int mp = f->mloc - lr0, m2 = f->mloc - lr1, nt = f->nloc - lcs;
    if (m2 == 0 || nt == 0)
        return;
    double start = MPI_Wtime();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m2, nt, jb, -1.0, f->panel + (lr1 - lr0), mp, f->urow, jb,
                1.0, at(f, lr1, lcs), f->lda);
    update_done(start);
}

static void lu_factor(struct lu *f)
{
    for (int k0 = 0; k0 < f->n; k0 += f->nb) {
        int jb = f->n - k0 < f->nb ? f->n - k0 : f->nb;
        MPI_Request forward[2];
        if (f->g.mycol == owner_of(k0, f->nb, f->g.Q))
            factor_panel(f, k0, jb);
        share_panel(f, k0, jb, &forward[0]);
        swap_trailing_rows(f, k0, jb);
        share_u_row(f, k0, jb, &forward[1]);
        update_trailing(f, k0, jb);
        /* the panel and U buffers are reused by the next step */
        comm_wait_all(2, forward);
    }
}

/* ---- self-check ----------------------------------------------------------- */

/* Stores rank r's local array (leading dimension lda) into the global
 * n x (n+1) column-major matrix `whole`. */
static void scatter_part(const struct lu *f, double *whole, const double *part, int r, int lda)
{
    int prow = r / f->g.Q, pcol = r % f->g.Q;
    int mloc = owned_before(f->n, f->nb, prow, f->g.P), nloc = owned_before(f->n + 1, f->nb, pcol, f->g.Q);
    for (int c = 0; c < nloc; c++) {
        size_t gc = (size_t)global_index(c, f->nb, pcol, f->g.Q);
        for (int l = 0; l < mloc; l++)
            whole[gc * f->n + global_index(l, f->nb, prow, f->g.P)] = part[(size_t)c * lda + l];
    }
}

/* Rank 0 collects every rank's local [L\U y] into `whole`. */
static void gather_factors(const struct lu *f, double *whole)
{
    if (f->g.rank != 0) {
        MPI_Request req;
        comm_isend(f->a, f->lda * f->nloc, 0, TAG_GATHER, MPI_COMM_WORLD, &req);
        comm_wait(&req);
        return;
    }
    scatter_part(f, whole, f->a, 0, f->lda);
    for (int r = 1; r < f->g.size; r++) {
        int mloc = owned_before(f->n, f->nb, r / f->g.Q, f->g.P);
        int nloc = owned_before(f->n + 1, f->nb, r % f->g.Q, f->g.Q);
        int lda = mloc > 0 ? mloc : 1;
        double *part = alloc_doubles((size_t)lda * nloc);
        comm_recv(part, lda * nloc, r, TAG_GATHER, MPI_COMM_WORLD);
        scatter_part(f, whole, part, r, lda);
        free(part);
    }
}

static double vector_max_abs(const double *v, int n)
{
    double best = 0.0;
    for (int i = 0; i < n; i++)
        best = nan_max(best, fabs(v[i]));
    return best;
}

/* HPL's scaled residual ||A x - b|| / (eps (||A|| ||x|| + ||b||) N), all
 * infinity norms, with A and b regenerated. */
static double scaled_residual(int n, const double *x)
{
    double norm_a = 0.0, norm_r = 0.0, norm_b = 0.0;
    for (int i = 0; i < n; i++) {
        double row_sum = 0.0, ax = 0.0;
        for (int j = 0; j < n; j++) {
            double aij = gen_value(SEED_A, i, j);
            row_sum += fabs(aij);
            ax += aij * x[j];
        }
        double b = gen_value(SEED_A, i, n);
        norm_a = nan_max(norm_a, row_sum);
        norm_b = nan_max(norm_b, fabs(b));
        norm_r = nan_max(norm_r, fabs(ax - b));
    }
    return norm_r / (UNIT_ROUNDOFF * (norm_a * vector_max_abs(x, n) + norm_b) * n);
}

/* Solves on rank 0 and shares the residual, so every rank exits alike. */
static double lu_check(const struct lu *f)
{
    double residual = 0.0;
    double *whole = f->g.rank == 0 ? alloc_doubles((size_t)f->n * (f->n + 1)) : NULL;
    gather_factors(f, whole);
    if (f->g.rank == 0) {
        double *x = whole + (size_t)f->n * f->n; /* y = L^-1 P b, solved in place */
        cblas_dtrsv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, f->n, whole, f->n, x, 1);
        residual = scaled_residual(f->n, x);
    }
    comm_bcast(&residual, 1, 0, MPI_COMM_WORLD);
    free(whole);
    return residual;
}

/* ---- main ------------------------------------------------------------------ */

static void print_report(const struct lu *f, const struct lu_options *o, double seconds, double residual,
                         bool passed, const struct app_stats *timed)
{
    if (f->g.rank == 0) {
        double n = o->n;
        double flops = 2.0 / 3.0 * n * n * n + 1.5 * n * n; /* HPL's count */
        printf("{\"app\":\"lu\",\"n\":%d,\"p\":%d,\"grid\":\"%dx%d\",\"nb\":%d,\"wait\":\"%s\"", o->n, f->g.size,
               o->P, o->Q, o->nb, wait_mode_name(o->wait));
        report_result(stdout, seconds, flops, residual, passed);
    }
    report_stats(stdout, timed, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    openblas_set_num_threads(1); /* one BLAS thread per MPI process */
    struct lu_options o;
    struct opt_error err = {{0}};
    enum parse_result parsed = parse_args(argc, argv, &o, &err);
    if (parsed != PARSE_OK)
        return finish_early(parsed, &err, USAGE);
    comm_set_wait_mode(o.wait);
    struct lu f;
    lu_setup(&f, &o);

    comm_barrier(MPI_COMM_WORLD);
    app_stats = (struct app_stats){0};
    double start = MPI_Wtime(), cpu_start = cpu_now();
    lu_factor(&f);
    comm_barrier(MPI_COMM_WORLD);
    app_stats.cpu_s = cpu_now() - cpu_start;
    struct app_stats timed = app_stats;
    double seconds = elapsed_max(start);

    double residual = lu_check(&f);
    bool passed = residual < RESIDUAL_LIMIT; /* false for NaN too */
    print_report(&f, &o, seconds, residual, passed, &timed);
    if (!passed && f.g.rank == 0)
        fprintf(stderr, "%s: self-check FAILED: scaled residual %g >= %g\n", APP, residual, RESIDUAL_LIMIT);
    lu_free(&f);
    MPI_Finalize();
    return passed ? 0 : 1;
}
