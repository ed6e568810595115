/* Benchmark of the sparse network object (include/cdyn/network.h, library
 * cdyn_sparse) against the CHOLMOD range-space solve a user would write by
 * hand, on hydraulic grid networks of n = 1e2 ... 1e5 pipes.
 *
 * Model: a k x k grid of junctions (m = k^2), one pipe on every grid edge
 * (incidence -1 at the junction it drains, +1 at the one it feeds; the
 * lower-numbered junction drains, so the rows of a column are sorted), an
 * inflow pipe into junction 0 (a single +1) and an outflow pipe from the
 * last junction (a single -1): n = 2k(k-1) + 2 pipes. M is diagonal, the
 * pipe inertances rho l / A, log-uniform in [1e5, 1e6] kg/m^4; M and W do
 * not change. One "step" takes a new F (pipe pressure drops, uniform in
 * [-1e5, 1e5] Pa, from a pool of NFORCE vectors generated before timing)
 * and computes v' and the junction pressures lambda of
 *     M v' = F + W^T lambda,   W v' = 0.
 * One timed call is a sweep of NFORCE steps through the whole pool, and
 * the times reported are per step (a sweep's time / NFORCE): cdyn's solve
 * costs about twice as much for a force that needs a refinement step as
 * for one that does not, so every sample must see the same forces.
 * Sizes k = 8, 23, 71, 224 (n ~ 1e2, 1e3, 1e4, 1e5); --quick: k = 8, 23, 71.
 *
 * Paths (each with its own objects; all timed in turn within every sample
 * by bu_measure, so a slow phase of the machine hits them alike):
 *   chol_factor+solve   the baseline (ratio 1): the range-space solve
 *                       written directly on CHOLMOD. Once: B = W M^-1/2
 *                       (W's pattern, unsymmetric) and cholmod_analyze(B),
 *                       which orders and analyses B B^T = W M^-1 W^T = S.
 *                       Per step: B's values (W_ik / sqrt(M_k)),
 *                       cholmod_factorize(B, L) (CHOLMOD forms B B^T
 *                       itself: the documented way to factor A A^T),
 *                       r = -W M^-1 F, cholmod_solve2 (workspace reused),
 *                       v' = M^-1 (F + W^T lambda). No checks, no
 *                       certification, default cholmod_common.
 *   net_load+solve      cdyn_network_load + cdyn_network_solve per step:
 *                       the like-for-like comparison (both factor per step).
 *   net_solve           cdyn_network_solve with the factor of one load: what
 *                       a caller with constant M and W pays per step.
 *   chol_solve          the baseline's per-step part without the
 *                       factorization (r, cholmod_solve2, v'), with the
 *                       factor of one cholmod_factorize: the like-for-like
 *                       comparison for net_solve (column "vs_csolve").
 *   chol_S+factor+solve the baseline with S formed explicitly each step:
 *                       B's values, B^T = cholmod_transpose(B), S =
 *                       cholmod_ssmult(B, B^T) (upper triangle, stype 1),
 *                       cholmod_factorize(S, L) (S's pattern analysed once),
 *                       then as the baseline: the other way a user writes
 *                       it, shown so that the ratio does not hinge on which
 *                       of the two the baseline is.
 *   dense_nullspace     n <= DENSE_MAX only: cdyn_nullspace_factor once on
 *                       the dense W, cdyn_nullspace_solve per step (dense M).
 *   dense_range         n <= DENSE_MAX only: S = (W M^-1/2)(W M^-1/2)^T by
 *                       dsyrk and dpotrf once; per step r = -W M^-1 F
 *                       (dgemv), dpotrs, v' = M^-1 (F + W^T lambda) (dgemv).
 *
 * Reported per size: median [min, max] time per step over the samples, the
 * ratio to chol_factor+solve, net_solve / chol_solve, and the time exponent
 * against the previous size (log of the ratio of medians / log of the ratio
 * of n). Memory (/proc/self/status), two figures:
 *   per group   the peak resident memory one object costs: set up and run
 *               once (cdyn: create + load + solve; CHOLMOD: analyse +
 *               factorize + solve; dense: the dense M and W, the null-space
 *               object, S and one solve of each), measured in a fresh
 *               process (this program run again with --memory-probe, not a
 *               documented option) as VmHWM after minus VmRSS before, so
 *               that heap freed by earlier sizes cannot hide any of it;
 *   size peak   VmHWM of this process at the end of the size (all paths
 *               set up and timed at once), the peak having been reset at
 *               the start of the size by writing 5 to /proc/self/clear_refs
 *               (Linux >= 4.0); where that is refused, the process-wide
 *               peak so far, labelled so.
 *
 * Checks (not timed): before timing, every path solves with the pool's
 * first F and net_load+solve, net_solve and every other path must agree
 * with chol_factor+solve to 1e-9 relative (normwise, v' and lambda
 * separately); net_solve must also agree with chol_solve for every F of
 * the pool;
 * the differences, cdyn's backward error and pivot ratio and the residuals
 * of cdyn's and the baseline's answers are printed. The exit status is
 * non-zero only if a call fails or a check fails (a bug), never on time.
 *
 * usage: bench_network [--quick] [--csv FILE]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, popen, readlink */
#include <cdyn.h>
#include <cdyn/network.h>

#include "bench_util.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <suitesparse/cholmod.h>
#include <unistd.h>

/* LAPACK/BLAS of the dense range-space path (prototypes as called). */
void dgemv_(const char *trans, const int *m, const int *n, const double *alpha, const double *a,
            const int *lda, const double *x, const int *incx, const double *beta, double *y,
            const int *incy);
void dsyrk_(const char *uplo, const char *trans, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *beta, double *c,
            const int *ldc);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda,
             double *b, const int *ldb, int *info);

enum { NFORCE = 4 };       /* forces: one timed call steps through all */
enum { DENSE_MAX = 1200 }; /* largest n of the dense paths */
#define CHECK_TOL 1e-9

enum { P_CHOL, P_LOAD, P_SOLVE, P_CHOL_SOLVE, P_CHOL_S, P_NULLSPACE, P_DENSE, NPATH };
static const char *path_names[NPATH] = {"chol_factor+solve (base)", "net_load+solve",
                                        "net_solve",                "chol_solve",
                                        "chol_S+factor+solve",      "dense_nullspace",
                                        "dense_range"};

/* The network: W (compressed columns), the diagonal of M, the forces. */
typedef struct {
    int k, n, m, nnz;
    int *colptr, *rowind;
    double *Wx, *Mdiag, *Fpool; /* Fpool: NFORCE vectors of n */
} network;

/* One path's answer (of its last step). */
typedef struct {
    double *vdot, *lambda;
} answer;

/* One step of a path with the force F; non-zero on a failed call. */
typedef int (*step_fn)(void *ctx, const double *F);

/* The timed call (bu_fn): one sweep through the force pool, NFORCE steps,
 * so that every sample sees the same forces (a solve's cost depends on its
 * F through the refinement steps it takes). */
typedef struct {
    step_fn step;
    void *ctx;
    const network *w;
} sweep;

static int run_sweep(void *ctx)
{
    const sweep *sw = ctx;
    int bad = 0;
    for (int f = 0; f < NFORCE; ++f)
        bad |= sw->step(sw->ctx, sw->w->Fpool + (size_t)f * (size_t)sw->w->n);
    return bad;
}

/* ---- the network ----------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench_network: out of memory (%zu bytes)\n", bytes);
        exit(EXIT_FAILURE);
    }
    return p;
}

static void network_build(network *w, int k, tu_rng *rng)
{
    int m = k * k, n = 2 * k * (k - 1) + 2, nnz = 2 * (n - 2) + 2;
    w->k = k;
    w->n = n;
    w->m = m;
    w->nnz = nnz;
    w->colptr = xmalloc(sizeof(int) * (size_t)(n + 1));
    w->rowind = xmalloc(sizeof(int) * (size_t)nnz);
    w->Wx = xmalloc(sizeof(double) * (size_t)nnz);
    w->Mdiag = xmalloc(sizeof(double) * (size_t)n);
    w->Fpool = xmalloc(sizeof(double) * (size_t)n * NFORCE);
    int pipe = 0, q = 0;
    w->colptr[0] = 0;
    /* inflow into junction 0 */
    w->rowind[q] = 0;
    w->Wx[q++] = 1.0;
    w->colptr[++pipe] = q;
    for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
            int node = i * k + j;
            int to[2] = {j + 1 < k ? node + 1 : -1, i + 1 < k ? node + k : -1};
            for (int e = 0; e < 2; ++e) {
                if (to[e] < 0) continue;
                w->rowind[q] = node; /* drained */
                w->Wx[q++] = -1.0;
                w->rowind[q] = to[e]; /* fed */
                w->Wx[q++] = 1.0;
                w->colptr[++pipe] = q;
            }
        }
    /* outflow from the last junction */
    w->rowind[q] = m - 1;
    w->Wx[q++] = -1.0;
    w->colptr[++pipe] = q;
    if (pipe != n || q != nnz) {
        fprintf(stderr, "bench_network: grid construction is wrong (%d pipes, %d entries)\n",
                pipe, q);
        exit(EXIT_FAILURE);
    }
    for (int p = 0; p < n; ++p) w->Mdiag[p] = 1e5 * pow(10.0, 0.5 + 0.5 * tu_uniform(rng));
    for (size_t i = 0; i < (size_t)n * NFORCE; ++i) w->Fpool[i] = 1e5 * tu_uniform(rng);
}

static void network_free(network *w)
{
    free(w->colptr);
    free(w->rowind);
    free(w->Wx);
    free(w->Mdiag);
    free(w->Fpool);
}

/* r = -W M^-1 F (u: n workspace) */
static void range_rhs(const network *w, const double *F, double *u, double *r)
{
    for (int p = 0; p < w->n; ++p) u[p] = F[p] / w->Mdiag[p];
    for (int i = 0; i < w->m; ++i) r[i] = 0.0;
    for (int p = 0; p < w->n; ++p)
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) r[w->rowind[q]] -= w->Wx[q] * u[p];
}

/* v' = M^-1 (F + W^T lambda) */
static void range_rates(const network *w, const double *F, const double *lambda, double *vdot)
{
    for (int p = 0; p < w->n; ++p) {
        double s = F[p];
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) s += w->Wx[q] * lambda[w->rowind[q]];
        vdot[p] = s / w->Mdiag[p];
    }
}

/* ---- cdyn_network paths ------------------------------------------------- */

typedef struct {
    const network *w;
    cdyn_network *net;
    answer a;
} cdyn_path;

static int step_load_solve(void *ctx, const double *F)
{
    cdyn_path *c = ctx;
    return cdyn_network_load(c->net, c->w->Mdiag, c->w->Wx) != CDYN_OK ||
           cdyn_network_solve(c->net, F, NULL, c->a.vdot, c->a.lambda) != CDYN_OK;
}

static int step_solve(void *ctx, const double *F)
{
    cdyn_path *c = ctx;
    return cdyn_network_solve(c->net, F, NULL, c->a.vdot, c->a.lambda) != CDYN_OK;
}

static void cdyn_path_init(cdyn_path *c, const network *w, int load)
{
    c->w = w;
    c->a.vdot = xmalloc(sizeof(double) * (size_t)w->n);
    c->a.lambda = xmalloc(sizeof(double) * (size_t)w->m);
    cdyn_status st;
    c->net = cdyn_network_create(w->n, w->m, w->colptr, w->rowind, NULL, 0, &st);
    if (!c->net) {
        fprintf(stderr, "BUG: cdyn_network_create failed at k = %d (status %d)\n", w->k, (int)st);
        exit(EXIT_FAILURE);
    }
    if (load && cdyn_network_load(c->net, w->Mdiag, w->Wx) != CDYN_OK) {
        fprintf(stderr, "BUG: cdyn_network_load failed at k = %d: %s\n", w->k,
                cdyn_network_last_error(c->net));
        exit(EXIT_FAILURE);
    }
}

static void cdyn_path_free(cdyn_path *c)
{
    cdyn_network_free(c->net);
    free(c->a.vdot);
    free(c->a.lambda);
}

/* ---- the hand-written CHOLMOD range-space baseline ---------------------- */

typedef struct {
    const network *w;
    cholmod_common *cc;
    cholmod_sparse *B;   /* W M^-1/2: W's pattern, values set per step */
    cholmod_factor *L;   /* of B B^T (or of S for the explicit variant) */
    cholmod_dense *r, *X, *Y, *E; /* right-hand side, lambda, solve2 workspace */
    double *u;           /* n */
    int explicit_S;      /* form S = B B^T with transpose + ssmult per step */
    double lnz, flops;   /* nnz(L) and factorization flops, from the analysis */
    answer a;
} chol_path;

/* B's values: W_ik / sqrt(M_k) (recomputed per step, as a user would for
 * an M that may change) */
static void chol_scale(chol_path *c)
{
    const network *w = c->w;
    double *Bx = c->B->x;
    for (int p = 0; p < w->n; ++p) {
        double d = 1.0 / sqrt(w->Mdiag[p]);
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) Bx[q] = w->Wx[q] * d;
    }
}

/* S = B B^T, upper triangle (stype 1), with fresh storage: the caller frees */
static cholmod_sparse *chol_form_S(chol_path *c)
{
    cholmod_sparse *Bt = cholmod_transpose(c->B, 1, c->cc);
    cholmod_sparse *S = Bt ? cholmod_ssmult(c->B, Bt, 1, 1, 1, c->cc) : NULL;
    cholmod_free_sparse(&Bt, c->cc);
    return S;
}

static int chol_factor(chol_path *c)
{
    chol_scale(c);
    if (!c->explicit_S) return !cholmod_factorize(c->B, c->L, c->cc) || c->cc->status != CHOLMOD_OK;
    cholmod_sparse *S = chol_form_S(c);
    int bad = !S || !cholmod_factorize(S, c->L, c->cc) || c->cc->status != CHOLMOD_OK;
    cholmod_free_sparse(&S, c->cc);
    return bad;
}

static int chol_solve(chol_path *c, const double *F)
{
    range_rhs(c->w, F, c->u, c->r->x);
    if (!cholmod_solve2(CHOLMOD_A, c->L, c->r, NULL, &c->X, NULL, &c->Y, &c->E, c->cc))
        return 1;
    memcpy(c->a.lambda, c->X->x, sizeof(double) * (size_t)c->w->m);
    range_rates(c->w, F, c->a.lambda, c->a.vdot);
    return 0;
}

static int step_chol_factor_solve(void *ctx, const double *F)
{
    chol_path *c = ctx;
    int bad = chol_factor(c);
    return chol_solve(c, F) || bad;
}

static int step_chol_solve(void *ctx, const double *F) { return chol_solve(ctx, F); }

/* Analysis once (and one factorization, for chol_solve). */
static void chol_path_init(chol_path *c, const network *w, cholmod_common *cc, int explicit_S)
{
    memset(c, 0, sizeof *c);
    c->w = w;
    c->cc = cc;
    c->explicit_S = explicit_S;
    c->a.vdot = xmalloc(sizeof(double) * (size_t)w->n);
    c->a.lambda = xmalloc(sizeof(double) * (size_t)w->m);
    c->u = xmalloc(sizeof(double) * (size_t)w->n);
    c->B = cholmod_allocate_sparse((size_t)w->m, (size_t)w->n, (size_t)w->nnz, 1, 1, 0,
                                   CHOLMOD_REAL, cc);
    c->r = cholmod_allocate_dense((size_t)w->m, 1, (size_t)w->m, CHOLMOD_REAL, cc);
    if (!c->B || !c->r) {
        fprintf(stderr, "bench_network: CHOLMOD allocation failed at k = %d\n", w->k);
        exit(EXIT_FAILURE);
    }
    memcpy(c->B->p, w->colptr, sizeof(int) * (size_t)(w->n + 1));
    memcpy(c->B->i, w->rowind, sizeof(int) * (size_t)w->nnz);
    chol_scale(c);
    if (explicit_S) {
        cholmod_sparse *S = chol_form_S(c);
        c->L = S ? cholmod_analyze(S, cc) : NULL;
        cholmod_free_sparse(&S, cc);
    } else {
        c->L = cholmod_analyze(c->B, cc);
    }
    c->lnz = cc->lnz;
    c->flops = cc->fl;
    if (!c->L || chol_factor(c)) {
        fprintf(stderr, "BUG: CHOLMOD analysis or factorization failed at k = %d (status %d)\n",
                w->k, cc->status);
        exit(EXIT_FAILURE);
    }
}

static void chol_path_free(chol_path *c)
{
    cholmod_free_factor(&c->L, c->cc);
    cholmod_free_sparse(&c->B, c->cc);
    cholmod_free_dense(&c->r, c->cc);
    cholmod_free_dense(&c->X, c->cc);
    cholmod_free_dense(&c->Y, c->cc);
    cholmod_free_dense(&c->E, c->cc);
    free(c->u);
    free(c->a.vdot);
    free(c->a.lambda);
}

/* ---- dense paths (n <= DENSE_MAX) --------------------------------------- */

typedef struct {
    const network *w;
    double *Md, *Wd, *Sd, *u; /* n x n, m x n, m x m (Cholesky factor), n */
    cdyn_nullspace *ns;
    answer a_ns, a_range;
} dense_path;

static int step_nullspace(void *ctx, const double *F)
{
    dense_path *d = ctx;
    return cdyn_nullspace_solve(d->ns, d->Md, d->w->n, F, NULL, d->a_ns.vdot, d->a_ns.lambda) !=
           CDYN_OK;
}

static int step_dense_range(void *ctx, const double *F)
{
    dense_path *d = ctx;
    const network *w = d->w;
    int n = w->n, m = w->m, one = 1, info = 0;
    const double minus = -1.0, plus = 1.0, zero = 0.0;
    double *lambda = d->a_range.lambda, *vdot = d->a_range.vdot;
    for (int p = 0; p < n; ++p) d->u[p] = F[p] / w->Mdiag[p];
    dgemv_("N", &m, &n, &minus, d->Wd, &m, d->u, &one, &zero, lambda, &one);
    dpotrs_("U", &m, &one, d->Sd, &m, lambda, &m, &info);
    memcpy(vdot, F, sizeof(double) * (size_t)n);
    dgemv_("T", &m, &n, &plus, d->Wd, &m, lambda, &one, &plus, vdot, &one);
    for (int p = 0; p < n; ++p) vdot[p] /= w->Mdiag[p];
    return info != 0;
}

static void dense_path_init(dense_path *d, const network *w)
{
    int n = w->n, m = w->m, info = 0;
    memset(d, 0, sizeof *d);
    d->w = w;
    d->Md = calloc((size_t)n * (size_t)n, sizeof(double));
    d->Wd = calloc((size_t)m * (size_t)n, sizeof(double));
    d->Sd = xmalloc(sizeof(double) * (size_t)m * (size_t)m);
    d->u = xmalloc(sizeof(double) * (size_t)n);
    answer *as[2] = {&d->a_ns, &d->a_range};
    for (int i = 0; i < 2; ++i) {
        as[i]->vdot = xmalloc(sizeof(double) * (size_t)n);
        as[i]->lambda = xmalloc(sizeof(double) * (size_t)m);
    }
    if (!d->Md || !d->Wd) {
        fprintf(stderr, "bench_network: out of memory (dense, k = %d)\n", w->k);
        exit(EXIT_FAILURE);
    }
    for (int p = 0; p < n; ++p) {
        d->Md[p + (size_t)p * n] = w->Mdiag[p];
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q)
            d->Wd[w->rowind[q] + (size_t)p * m] = w->Wx[q];
    }
    d->ns = cdyn_nullspace_create(n, m, NULL);
    if (!d->ns || cdyn_nullspace_factor(d->ns, d->Wd, m) != CDYN_OK) {
        fprintf(stderr, "BUG: dense null space set-up failed at k = %d: %s\n", w->k,
                d->ns ? cdyn_nullspace_last_error(d->ns) : "create");
        exit(EXIT_FAILURE);
    }
    /* S = (W M^-1/2)(W M^-1/2)^T, upper triangle, and its Cholesky factor */
    double *B = xmalloc(sizeof(double) * (size_t)m * (size_t)n);
    for (int p = 0; p < n; ++p) {
        double s = 1.0 / sqrt(w->Mdiag[p]);
        for (int i = 0; i < m; ++i) B[i + (size_t)p * m] = d->Wd[i + (size_t)p * m] * s;
    }
    const double one = 1.0, zero = 0.0;
    dsyrk_("U", "N", &m, &n, &one, B, &m, &zero, d->Sd, &m);
    free(B);
    dpotrf_("U", &m, d->Sd, &m, &info);
    if (info != 0) {
        fprintf(stderr, "BUG: dpotrf of the dense S failed at k = %d (info %d)\n", w->k, info);
        exit(EXIT_FAILURE);
    }
}

static void dense_path_free(dense_path *d)
{
    cdyn_nullspace_free(d->ns);
    free(d->Md);
    free(d->Wd);
    free(d->Sd);
    free(d->u);
    free(d->a_ns.vdot);
    free(d->a_ns.lambda);
    free(d->a_range.vdot);
    free(d->a_range.lambda);
}

/* ---- checks --------------------------------------------------------------- */

/* max |a - b| / max |b| */
static double rel_diff(int len, const double *a, const double *b)
{
    double d = 0.0, s = tu_vec_max_abs(len, b);
    for (int i = 0; i < len; ++i) d = fmax(d, fabs(a[i] - b[i]));
    return s > 0.0 ? d / s : d;
}

/* Normwise relative residual of an answer: max over the two block rows of
 * max |residual| / max (sum of the magnitudes of the row's terms). */
static double residual(const network *w, const double *F, const double *vdot,
                       const double *lambda)
{
    int n = w->n, m = w->m;
    double *rg = calloc((size_t)m, sizeof(double)), *ug = calloc((size_t)m, sizeof(double));
    if (!rg || !ug) {
        fprintf(stderr, "bench_network: out of memory (residual)\n");
        exit(EXIT_FAILURE);
    }
    double rf = 0.0, uf = 0.0;
    for (int p = 0; p < n; ++p) {
        double r = w->Mdiag[p] * vdot[p] - F[p], u = fabs(w->Mdiag[p] * vdot[p]) + fabs(F[p]);
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) {
            int i = w->rowind[q];
            r -= w->Wx[q] * lambda[i];
            u += fabs(w->Wx[q] * lambda[i]);
            rg[i] += w->Wx[q] * vdot[p];
            ug[i] += fabs(w->Wx[q] * vdot[p]);
        }
        rf = fmax(rf, fabs(r));
        uf = fmax(uf, u);
    }
    double rgm = 0.0, ugm = 0.0;
    for (int i = 0; i < m; ++i) {
        rgm = fmax(rgm, fabs(rg[i]));
        ugm = fmax(ugm, ug[i]);
    }
    free(rg);
    free(ug);
    return fmax(uf > 0.0 ? rf / uf : rf, ugm > 0.0 ? rgm / ugm : rgm);
}

/* ---- memory (/proc/self/status) ---------------------------------------- */

/* The value in KiB of a "Name:   123 kB" line, or -1. */
static long status_kib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t len = strlen(name);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, len) && line[len] == ':') {
            v = strtol(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Reset VmHWM to the present VmRSS (Linux >= 4.0); 1 when done. */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok;
}

/* The probe (this program run as `bench_network --memory-probe GROUP K`):
 * build the network of size k, then set up and run once the group's paths
 * and print the growth of the peak resident memory in KiB. Nothing has
 * been freed before, so the peak before the set-up is the resident memory
 * then, reset or not. */
static int memory_probe(const char *group, int k)
{
    tu_rng rng;
    tu_rng_seed(&rng, 1000 + (unsigned)k);
    network w;
    network_build(&w, k, &rng);
    reset_peak();
    long rss0 = status_kib("VmRSS");
    int bad = 0;
    if (!strcmp(group, "cdyn")) {
        cdyn_path c;
        cdyn_path_init(&c, &w, 1);
        bad = step_solve(&c, w.Fpool);
    } else if (!strcmp(group, "chol")) {
        cholmod_common cc;
        cholmod_start(&cc);
        cc.print = 0;
        chol_path c;
        chol_path_init(&c, &w, &cc, 0);
        bad = step_chol_factor_solve(&c, w.Fpool);
    } else if (!strcmp(group, "dense")) {
        dense_path d;
        dense_path_init(&d, &w);
        bad = step_nullspace(&d, w.Fpool) || step_dense_range(&d, w.Fpool);
    } else {
        return EXIT_FAILURE;
    }
    long hwm = status_kib("VmHWM");
    if (bad || hwm < 0 || rss0 < 0) return EXIT_FAILURE;
    printf("%ld\n", hwm - rss0);
    return EXIT_SUCCESS; /* the objects go with the process */
}

/* Run the probe of a group in a fresh process; KiB, or -1 when it fails. */
static long probe_memory(const char *self, const char *group, int k)
{
    if (!self) return -1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --memory-probe %s %d", self, group, k);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    long kib = -1;
    if (fscanf(p, "%ld", &kib) != 1) kib = -1;
    if (pclose(p) != 0) kib = -1;
    return kib;
}

static void print_mib(char *buf, size_t size, long kib)
{
    if (kib < 0) snprintf(buf, size, "n/a");
    else snprintf(buf, size, "%.1f MiB", kib / 1024.0);
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--memory-probe"))
        return memory_probe(argv[2], atoi(argv[3]));
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_network", &quick, &csv_path) != 0)
        return EXIT_FAILURE;
    /* this program's path, for the memory probes */
    static char self_buf[4096];
    const char *self = NULL;
    ssize_t len = readlink("/proc/self/exe", self_buf, sizeof self_buf - 1);
    if (len > 0) {
        self_buf[len] = '\0';
        if (!strchr(self_buf, '\'')) self = self_buf;
    }
    static const int ks[] = {8, 23, 71, 224};
    const int nsizes = quick ? 3 : 4;
    /* samples and seconds per sample and path, by size: fewer at 1e5 */
    static const int samples_full[] = {15, 9, 11, 5}, samples_quick[] = {5, 3, 3, 3};
    static const double target_full[] = {4e-3, 1e-2, 3e-2, 1e-3};
    static const double target_quick[] = {5e-4, 1e-3, 2e-3, 1e-3};
    FILE *csv = bu_open_csv(csv_path, "bench_network", quick,
                            "k,n,m,path,median_s,min_s,max_s,ratio_to_chol_factor_solve,"
                            "ratio_to_chol_solve,exponent_vs_previous,mem_kib,size_peak_kib");
    int bugs = 0;
    long failures = 0;
    printf("cdyn %s sparse network benchmark (%s mode): time per step (new F; fixed diagonal "
           "M and W), median [min, max] over the samples, each a sweep through the %d forces\n",
           cdyn_version(), quick ? "quick" : "full", (int)NFORCE);
    bu_print_machine(stdout, "  ");
    printf("model: k x k grid of junctions, pipes on the edges, one inflow, one outflow: "
           "n = 2k(k-1)+2, m = k^2\n");
    printf("ratio: to chol_factor+solve (hand-written CHOLMOD range space, factor per step); "
           "vs_csolve: to chol_solve (the same without the factorization)\n");
    printf("exp: time exponent against the previous size, log(t/t_prev) / log(n/n_prev)\n");
    printf("%4s %6s %6s  %-25s %12s %12s %12s %8s %9s %6s\n", "k", "n", "m", "path",
           "median [us]", "min", "max", "ratio", "vs_csolve", "exp");

    double prev_median[NPATH] = {0};
    int prev_n = 0;
    /* the summary table at the end */
    double sum_t[4][NPATH];
    long sum_mem[4][3], sum_peak[4];
    int sum_dense[4];
    int resettable_all = 1;

    cholmod_common cc;
    cholmod_start(&cc);
    cc.print = 0;

    for (int s = 0; s < nsizes; ++s) {
        int k = ks[s];
        int n = 2 * k * (k - 1) + 2, dense = n <= DENSE_MAX;
        /* memory of one object of each group, in fresh processes */
        long mem_cdyn = probe_memory(self, "cdyn", k), mem_chol = probe_memory(self, "chol", k);
        long mem_dense = dense ? probe_memory(self, "dense", k) : -1;

        int resettable = reset_peak();
        resettable_all = resettable_all && resettable;
        tu_rng rng;
        tu_rng_seed(&rng, 1000 + (unsigned)k);
        network w;
        network_build(&w, k, &rng);
        int m = w.m;
        cdyn_path load_path, solve_path;
        cdyn_path_init(&solve_path, &w, 1);
        cdyn_path_init(&load_path, &w, 0);
        chol_path chol, chol_solve_only, chol_S;
        chol_path_init(&chol, &w, &cc, 0);
        chol_path_init(&chol_solve_only, &w, &cc, 0);
        chol_path_init(&chol_S, &w, &cc, 1);
        dense_path dp;
        if (dense) dense_path_init(&dp, &w);

        static const step_fn steps[NPATH] = {step_chol_factor_solve, step_load_solve,
                                             step_solve,             step_chol_solve,
                                             step_chol_factor_solve, step_nullspace,
                                             step_dense_range};
        void *ctxs[NPATH] = {&chol, &load_path, &solve_path, &chol_solve_only, &chol_S, &dp, &dp};
        answer *ans[NPATH] = {&chol.a,           &load_path.a,  &solve_path.a,
                              &chol_solve_only.a, &chol_S.a,     &dp.a_ns, &dp.a_range};
        int npath = dense ? NPATH : P_NULLSPACE;
        sweep sweeps[NPATH];
        bu_path paths[NPATH];
        for (int q = 0; q < npath; ++q) {
            sweeps[q] = (sweep){steps[q], ctxs[q], &w};
            paths[q] = (bu_path){run_sweep, &sweeps[q], 0, 0, {0, 0, 0}};
        }

        /* agreement with the baseline: every path with the pool's first F,
         * and net_solve against chol_solve with every F of the pool */
        double diff[NPATH] = {0};
        for (int f = 0; f < NFORCE; ++f) {
            const double *F = w.Fpool + (size_t)f * (size_t)n;
            for (int q = 0; q < npath; ++q) {
                if (f > 0 && q != P_SOLVE && q != P_CHOL_SOLVE) continue;
                if (steps[q](ctxs[q], F)) {
                    fprintf(stderr, "BUG: k = %d: %s failed: %s\n", k, path_names[q],
                            q == P_LOAD    ? cdyn_network_last_error(load_path.net)
                            : q == P_SOLVE ? cdyn_network_last_error(solve_path.net)
                                           : "");
                    ++bugs;
                }
            }
            for (int q = 1; q < npath; ++q) {
                if (f > 0 && q != P_SOLVE) continue;
                const answer *ref = f > 0 ? &chol_solve_only.a : &chol.a;
                double dv = rel_diff(n, ans[q]->vdot, ref->vdot);
                double dl = rel_diff(m, ans[q]->lambda, ref->lambda);
                diff[q] = fmax(diff[q], fmax(dv, dl));
                if (!(dv <= CHECK_TOL && dl <= CHECK_TOL)) {
                    fprintf(stderr,
                            "BUG: k = %d, force %d: %s differs from the CHOLMOD baseline: v' "
                            "%.3e, lambda %.3e (tolerance %.0e)\n",
                            k, f, path_names[q], dv, dl, CHECK_TOL);
                    ++bugs;
                }
            }
        }
        /* the answers of the pool's first F again, for the residuals */
        if (step_chol_factor_solve(&chol, w.Fpool) || step_load_solve(&load_path, w.Fpool)) ++bugs;
        double res_chol = residual(&w, w.Fpool, chol.a.vdot, chol.a.lambda);
        double res_cdyn = residual(&w, w.Fpool, load_path.a.vdot, load_path.a.lambda);
        double berr = cdyn_network_backward_error(load_path.net);
        double pivot = cdyn_network_pivot_ratio(load_path.net);
        int super_base = chol.L->is_super;

        /* timing */
        int samples = quick ? samples_quick[s] : samples_full[s];
        double target = quick ? target_quick[s] : target_full[s];
        bu_measure(paths, npath, samples, target);
        for (int q = 0; q < npath; ++q) { /* per sweep -> per step */
            paths[q].t.median /= NFORCE;
            paths[q].t.min /= NFORCE;
            paths[q].t.max /= NFORCE;
        }
        long size_peak = status_kib("VmHWM");

        double base = paths[P_CHOL].t.median, csolve = paths[P_CHOL_SOLVE].t.median;
        for (int q = 0; q < npath; ++q) {
            failures += paths[q].failures;
            const bu_timing *t = &paths[q].t;
            double ratio = t->median / base;
            char vs[16] = "-", ex[16] = "-";
            if (q == P_SOLVE) snprintf(vs, sizeof vs, "%.3f", t->median / csolve);
            int have_prev = s > 0 && prev_median[q] > 0.0;
            if (have_prev)
                snprintf(ex, sizeof ex, "%.2f",
                         log(t->median / prev_median[q]) / log((double)n / prev_n));
            printf("%4d %6d %6d  %-25s %12.2f %12.2f %12.2f %8.3f %9s %6s\n", k, n, m,
                   path_names[q], 1e6 * t->median, 1e6 * t->min, 1e6 * t->max, ratio, vs, ex);
            /* one object's memory: the group the path belongs to */
            long mem = q == P_LOAD || q == P_SOLVE        ? mem_cdyn
                       : q == P_CHOL || q == P_CHOL_SOLVE ? mem_chol
                       : q >= P_NULLSPACE                 ? mem_dense
                                                          : -1;
            if (csv)
                fprintf(csv, "%d,%d,%d,%s,%.9e,%.9e,%.9e,%.4f,%s,%s,%ld,%ld\n", k, n, m,
                        path_names[q], t->median, t->min, t->max, ratio,
                        q == P_SOLVE ? vs : "", have_prev ? ex : "", mem, size_peak);
            prev_median[q] = t->median;
            sum_t[s][q] = t->median;
        }
        for (int q = npath; q < NPATH; ++q) {
            prev_median[q] = 0.0;
            sum_t[s][q] = -1.0;
        }
        prev_n = n;
        char m1[32], m2[32], m3[32], m4[32];
        print_mib(m1, sizeof m1, mem_cdyn);
        print_mib(m2, sizeof m2, mem_chol);
        print_mib(m3, sizeof m3, mem_dense);
        print_mib(m4, sizeof m4, size_peak);
        printf("%4s %6s %6s  memory of one object: cdyn create+load+solve %s, CHOLMOD "
               "analyse+factor+solve %s, dense (both paths) %s; %s %s\n",
               "", "", "", m1, m2, m3, resettable ? "peak VmHWM of this size" : "process VmHWM",
               m4);
        printf("%4s %6s %6s  checks: max rel. diff to the baseline %.1e (net_load+solve), "
               "%.1e (net_solve), %.1e (chol_S), %s; residual cdyn %.1e, baseline %.1e; cdyn "
               "backward error %.1e, pivot ratio %.1e; baseline factor %s, nnz(L) %.0f (S "
               "variant %.0f), %.2g flops\n",
               "", "", "", diff[P_LOAD], diff[P_SOLVE], diff[P_CHOL_S],
               dense ? "dense below" : "no dense paths", res_cdyn, res_chol, berr, pivot,
               super_base ? "supernodal" : "simplicial", chol.lnz, chol_S.lnz, chol.flops);
        if (dense)
            printf("%4s %6s %6s  checks: dense_nullspace %.1e, dense_range %.1e\n", "", "", "",
                   diff[P_NULLSPACE], diff[P_DENSE]);
        fflush(stdout);
        sum_mem[s][0] = mem_cdyn;
        sum_mem[s][1] = mem_chol;
        sum_mem[s][2] = mem_dense;
        sum_peak[s] = size_peak;
        sum_dense[s] = dense;

        if (dense) dense_path_free(&dp);
        chol_path_free(&chol);
        chol_path_free(&chol_solve_only);
        chol_path_free(&chol_S);
        cdyn_path_free(&load_path);
        cdyn_path_free(&solve_path);
        network_free(&w);
    }
    cholmod_finish(&cc);

    /* summary: the per-step times of the three main paths and the ratios */
    printf("\nsummary (median per step, us; (a) net_load+solve, (b) net_solve, (c) "
           "chol_factor+solve, (c') chol_solve, (d) dense_nullspace; memory in MiB: one cdyn "
           "object, one CHOLMOD baseline, the size's peak of the whole process)\n");
    printf("%6s %6s %11s %11s %11s %11s %11s %7s %7s %7s %9s %9s %9s\n", "n", "m", "(a)", "(b)",
           "(c)", "(c')", "(d)", "(a)/(c)", "(b)/(c)", "(b)/(c')", "mem cdyn", "mem chol",
           resettable_all ? "peak" : "proc.peak");
    for (int s = 0; s < nsizes; ++s) {
        int k = ks[s], n = 2 * k * (k - 1) + 2;
        char dcol[24] = "-";
        if (sum_dense[s]) snprintf(dcol, sizeof dcol, "%.1f", 1e6 * sum_t[s][P_NULLSPACE]);
        char mc[24] = "n/a", mh[24] = "n/a";
        if (sum_mem[s][0] >= 0) snprintf(mc, sizeof mc, "%.2f", sum_mem[s][0] / 1024.0);
        if (sum_mem[s][1] >= 0) snprintf(mh, sizeof mh, "%.2f", sum_mem[s][1] / 1024.0);
        printf("%6d %6d %11.1f %11.1f %11.1f %11.1f %11s %7.3f %7.3f %7.3f %9s %9s %9.1f\n",
               n, k * k, 1e6 * sum_t[s][P_LOAD], 1e6 * sum_t[s][P_SOLVE],
               1e6 * sum_t[s][P_CHOL], 1e6 * sum_t[s][P_CHOL_SOLVE], dcol,
               sum_t[s][P_LOAD] / sum_t[s][P_CHOL], sum_t[s][P_SOLVE] / sum_t[s][P_CHOL],
               sum_t[s][P_SOLVE] / sum_t[s][P_CHOL_SOLVE], mc, mh, sum_peak[s] / 1024.0);
    }
    if (csv) fclose(csv);
    if (failures || bugs) {
        fprintf(stderr, "bench_network: %ld failed calls, %d failed agreement checks: a bug\n",
                failures, bugs);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
