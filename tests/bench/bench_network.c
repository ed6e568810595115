/* Benchmark of the sparse network object (include/cdyn/network.h, library
 * cdyn_sparse) against the CHOLMOD range-space solve a user would write by
 * hand, in two parts run one after the other: hydraulic grid networks of
 * n = 1e2 ... 1e5 pipes (fixed M and W, a new force per step) and planar
 * mechanism chains of N = 10 ... 1e4 links (a new Phi_q and gamma per
 * step).
 *
 * Both parts solve
 *     M v' = F + W^T lambda,   W v' = g
 * with a diagonal M. One "step" is one such evaluation with the step's
 * data, taken from a pool of NPOOL data sets generated before timing; one
 * timed call is a sweep through the whole pool, and the times reported are
 * per step (a sweep's time / NPOOL): cdyn's solve costs about twice as
 * much for data that need a refinement step as for data that do not, so
 * every sample must see the same data.
 *
 * Grid model: a k x k grid of junctions (m = k^2), one pipe on every grid
 * edge (incidence -1 at the junction it drains, +1 at the one it feeds;
 * the lower-numbered junction drains, so the rows of a column are sorted),
 * an inflow pipe into junction 0 (a single +1) and an outflow pipe from the
 * last junction (a single -1): n = 2k(k-1) + 2 pipes. M is diagonal, the
 * pipe inertances rho l / A, log-uniform in [1e5, 1e6] kg/m^4; M and W do
 * not change, g = 0. The pool: NPOOL forces F (pipe pressure drops,
 * uniform in [-1e5, 1e5] Pa). Sizes k = 8, 23, 71, 224 (n ~ 1e2, 1e3,
 * 1e4, 1e5); --quick: k = 8, 23, 71.
 *
 * Chain model: examples/chain_model.h, N links of 5 g and 1 cm in
 * absolute coordinates (as examples/chain.c): n = 3N, m = 2N, M =
 * diag(m, m, J, ...), W = Phi_q(q), g = gamma(q, q'), F = Q (gravity,
 * fixed). The pool: NPOOL states, state f has every link at 0.7 rad, bent
 * by 0.3 sin(1 + i) and moved on by f * 10 ms at theta_i' = 2 cos(2 + i)
 * (theta_i = 0.7 + 0.3 sin(1 + i) + 0.01 f theta_i'); the states need
 * not be consistent for timing, and every path sees the same ones. Phi_q's
 * values and gamma change at every step, as in a simulation. Sizes N = 10,
 * 100, 1000, 10000 (n = 30 ... 3e4); --quick: N = 10, 100, 1000.
 *
 * Paths (each with its own objects; all timed in turn within every sample
 * by bu_measure, so a slow phase of the machine hits them alike):
 *   chol_factor+solve   the baseline (ratio 1): the range-space solve
 *                       written directly on CHOLMOD. Once: B = W M^-1/2
 *                       (W's pattern, unsymmetric) and cholmod_analyze(B),
 *                       which orders and analyses B B^T = W M^-1 W^T = S.
 *                       Per step: B's values (W_ik / sqrt(M_k), from the
 *                       step's W), cholmod_factorize(B, L) (CHOLMOD forms
 *                       B B^T itself: the documented way to factor A A^T),
 *                       r = g - W M^-1 F, cholmod_solve2 (workspace
 *                       reused), v' = M^-1 (F + W^T lambda). No checks, no
 *                       certification, default cholmod_common.
 *   net_load+solve      cdyn_network_load + cdyn_network_solve per step:
 *                       the like-for-like comparison (both factor per step).
 *   net_solve           grid only (needs a fixed W): cdyn_network_solve with
 *                       the factor of one load: what a caller with constant
 *                       M and W pays per step.
 *   chol_solve          grid only: the baseline's per-step part without the
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
 *   dense_nullspace     n <= DENSE_MAX only: cdyn_nullspace_solve per step
 *                       (dense M, c = -g) after cdyn_nullspace_factor of the
 *                       dense W: once for the grid (fixed W), per step for
 *                       the chain (W changes).
 *   dense_range         n <= DENSE_MAX only: S = (W M^-1/2)(W M^-1/2)^T by
 *                       dsyrk and dpotrf (once for the grid, per step for
 *                       the chain); per step r = g - W M^-1 F (dgemv),
 *                       dpotrs, v' = M^-1 (F + W^T lambda) (dgemv).
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
 *               (Linux >= 4.0), after giving the free heap back to the
 *               system (malloc_trim, with glibc); where the reset is
 *               refused, the process-wide peak so far, labelled so.
 * A summary table per model ends the output; the chain's is followed by
 * the targets of issue 15 (within 1.3x of chol_factor+solve at every size,
 * at most 5 ms per step at 1e4 links, time exponent at most 1.1), each
 * said met or missed (information: the exit status does not depend on it).
 *
 * Checks (not timed): before timing, every path solves with every data set
 * of the pool and must agree with chol_factor+solve on the same data to
 * 1e-9 relative (normwise, v' and lambda separately); the differences,
 * cdyn's backward error and pivot ratio and the residuals of cdyn's and
 * the baseline's answers (first data set) are printed. The exit status is
 * non-zero only if a call fails or a check fails (a bug), never on time.
 *
 * CSV (--csv): one row per model, size and path; the column "model" is
 * "grid" or "chain" and "size" is k or N.
 *
 * usage: bench_network [--quick] [--csv FILE]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, popen, readlink */
#include <cdyn.h>
#include <cdyn/network.h>

#include "../../examples/chain_model.h"
#include "bench_util.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <suitesparse/cholmod.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h> /* malloc_trim */
#endif

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

enum { NPOOL = 4 };        /* data sets: one timed call steps through all */
enum { DENSE_MAX = 1200 }; /* largest n of the dense paths */
#define CHECK_TOL 1e-9
#define CHAIN_MASS 0.005   /* kg per link (examples/chain.c) */
#define CHAIN_LENGTH 0.01  /* m per link */
#define CHAIN_DT 0.01      /* s between the states of the pool */

enum { P_CHOL, P_LOAD, P_SOLVE, P_CHOL_SOLVE, P_CHOL_S, P_NULLSPACE, P_DENSE, NPATH };
static const char *path_names[NPATH] = {"chol_factor+solve (base)", "net_load+solve",
                                        "net_solve",                "chol_solve",
                                        "chol_S+factor+solve",      "dense_nullspace",
                                        "dense_range"};

typedef enum { MODEL_GRID, MODEL_CHAIN } model_kind;
static const char *model_names[] = {"grid", "chain"};

/* The problem of one size: W (compressed columns), the diagonal of M, and
 * the pool of step data. Fixed parts are stored once (stride 0). */
typedef struct {
    model_kind model;
    int size;            /* k (grid) or N (chain) */
    int n, m, nnz;
    int *colptr, *rowind;
    double *Mdiag;
    double *Wpool;       /* W's values: NPOOL x nnz (chain) or nnz (grid) */
    double *Fpool;       /* forces: NPOOL x n (grid) or n (chain) */
    double *gpool;       /* g: NPOOL x m (chain) or NULL (grid: g = 0) */
    int W_varies, F_varies;
} network;

static const double *net_W(const network *w, int f)
{
    return w->Wpool + (w->W_varies ? (size_t)f * (size_t)w->nnz : 0);
}

static const double *net_F(const network *w, int f)
{
    return w->Fpool + (w->F_varies ? (size_t)f * (size_t)w->n : 0);
}

static const double *net_g(const network *w, int f)
{
    return w->gpool ? w->gpool + (size_t)f * (size_t)w->m : NULL;
}

/* One path's answer (of its last step). */
typedef struct {
    double *vdot, *lambda;
} answer;

/* One step of a path with data set f of the pool; non-zero on a failed
 * call. */
typedef int (*step_fn)(void *ctx, int f);

/* The timed call (bu_fn): one sweep through the pool, NPOOL steps, so that
 * every sample sees the same data (a solve's cost depends on its data
 * through the refinement steps it takes). */
typedef struct {
    step_fn step;
    void *ctx;
} sweep;

static int run_sweep(void *ctx)
{
    const sweep *sw = ctx;
    int bad = 0;
    for (int f = 0; f < NPOOL; ++f) bad |= sw->step(sw->ctx, f);
    return bad;
}

/* ---- the problems ------------------------------------------------------ */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench_network: out of memory (%zu bytes)\n", bytes);
        exit(EXIT_FAILURE);
    }
    return p;
}

static void network_build_grid(network *w, int k)
{
    tu_rng rng;
    tu_rng_seed(&rng, 1000 + (unsigned)k);
    int m = k * k, n = 2 * k * (k - 1) + 2, nnz = 2 * (n - 2) + 2;
    memset(w, 0, sizeof *w);
    w->model = MODEL_GRID;
    w->size = k;
    w->n = n;
    w->m = m;
    w->nnz = nnz;
    w->F_varies = 1;
    w->colptr = xmalloc(sizeof(int) * (size_t)(n + 1));
    w->rowind = xmalloc(sizeof(int) * (size_t)nnz);
    w->Wpool = xmalloc(sizeof(double) * (size_t)nnz);
    w->Mdiag = xmalloc(sizeof(double) * (size_t)n);
    w->Fpool = xmalloc(sizeof(double) * (size_t)n * NPOOL);
    double *Wx = w->Wpool;
    int pipe = 0, q = 0;
    w->colptr[0] = 0;
    /* inflow into junction 0 */
    w->rowind[q] = 0;
    Wx[q++] = 1.0;
    w->colptr[++pipe] = q;
    for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
            int node = i * k + j;
            int to[2] = {j + 1 < k ? node + 1 : -1, i + 1 < k ? node + k : -1};
            for (int e = 0; e < 2; ++e) {
                if (to[e] < 0) continue;
                w->rowind[q] = node; /* drained */
                Wx[q++] = -1.0;
                w->rowind[q] = to[e]; /* fed */
                Wx[q++] = 1.0;
                w->colptr[++pipe] = q;
            }
        }
    /* outflow from the last junction */
    w->rowind[q] = m - 1;
    Wx[q++] = -1.0;
    w->colptr[++pipe] = q;
    if (pipe != n || q != nnz) {
        fprintf(stderr, "bench_network: grid construction is wrong (%d pipes, %d entries)\n",
                pipe, q);
        exit(EXIT_FAILURE);
    }
    for (int p = 0; p < n; ++p) w->Mdiag[p] = 1e5 * pow(10.0, 0.5 + 0.5 * tu_uniform(&rng));
    for (size_t i = 0; i < (size_t)n * NPOOL; ++i) w->Fpool[i] = 1e5 * tu_uniform(&rng);
}

static void network_build_chain(network *w, int links)
{
    chain_model c = {links, CHAIN_MASS, CHAIN_LENGTH};
    int n = 3 * links, m = 2 * links;
    memset(w, 0, sizeof *w);
    w->model = MODEL_CHAIN;
    w->size = links;
    w->n = n;
    w->m = m;
    w->W_varies = 1;
    w->colptr = xmalloc(sizeof(int) * (size_t)(n + 1));
    w->rowind = xmalloc(sizeof(int) * 8 * (size_t)links);
    chain_pattern(&c, w->colptr, w->rowind);
    w->nnz = w->colptr[n];
    w->Mdiag = xmalloc(sizeof(double) * (size_t)n);
    w->Fpool = xmalloc(sizeof(double) * (size_t)n);
    chain_mass_forces(&c, w->Mdiag, w->Fpool);
    w->Wpool = xmalloc(sizeof(double) * (size_t)w->nnz * NPOOL);
    w->gpool = xmalloc(sizeof(double) * (size_t)m * NPOOL);
    double *q = xmalloc(sizeof(double) * (size_t)n), *qd = xmalloc(sizeof(double) * (size_t)n);
    for (int f = 0; f < NPOOL; ++f) {
        chain_straight(&c, 0.7, q, qd);
        for (int i = 0; i < links; ++i) {
            qd[3 * i + 2] = 2.0 * cos(2.0 + i);
            q[3 * i + 2] += 0.3 * sin(1.0 + i) + CHAIN_DT * f * qd[3 * i + 2];
        }
        chain_jacobian(&c, q, w->Wpool + (size_t)f * (size_t)w->nnz);
        chain_gamma(&c, q, qd, w->gpool + (size_t)f * (size_t)m);
    }
    free(q);
    free(qd);
}

static void network_build(network *w, model_kind model, int size)
{
    if (model == MODEL_GRID) network_build_grid(w, size);
    else network_build_chain(w, size);
}

static void network_free(network *w)
{
    free(w->colptr);
    free(w->rowind);
    free(w->Wpool);
    free(w->Mdiag);
    free(w->Fpool);
    free(w->gpool);
}

/* r = g - W M^-1 F with data set f (u: n workspace) */
static void range_rhs(const network *w, int f, double *u, double *r)
{
    const double *F = net_F(w, f), *W = net_W(w, f), *g = net_g(w, f);
    for (int p = 0; p < w->n; ++p) u[p] = F[p] / w->Mdiag[p];
    for (int i = 0; i < w->m; ++i) r[i] = g ? g[i] : 0.0;
    for (int p = 0; p < w->n; ++p)
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) r[w->rowind[q]] -= W[q] * u[p];
}

/* v' = M^-1 (F + W^T lambda) with data set f */
static void range_rates(const network *w, int f, const double *lambda, double *vdot)
{
    const double *F = net_F(w, f), *W = net_W(w, f);
    for (int p = 0; p < w->n; ++p) {
        double s = F[p];
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) s += W[q] * lambda[w->rowind[q]];
        vdot[p] = s / w->Mdiag[p];
    }
}

/* ---- cdyn_network paths ------------------------------------------------- */

typedef struct {
    const network *w;
    cdyn_network *net;
    answer a;
} cdyn_path;

static int step_load_solve(void *ctx, int f)
{
    cdyn_path *c = ctx;
    const network *w = c->w;
    return cdyn_network_load(c->net, w->Mdiag, net_W(w, f)) != CDYN_OK ||
           cdyn_network_solve(c->net, net_F(w, f), net_g(w, f), c->a.vdot, c->a.lambda) !=
               CDYN_OK;
}

/* (fixed W only) */
static int step_solve(void *ctx, int f)
{
    cdyn_path *c = ctx;
    const network *w = c->w;
    return cdyn_network_solve(c->net, net_F(w, f), net_g(w, f), c->a.vdot, c->a.lambda) !=
           CDYN_OK;
}

static void cdyn_path_init(cdyn_path *c, const network *w, int load)
{
    c->w = w;
    c->a.vdot = xmalloc(sizeof(double) * (size_t)w->n);
    c->a.lambda = xmalloc(sizeof(double) * (size_t)w->m);
    cdyn_status st;
    c->net = cdyn_network_create(w->n, w->m, w->colptr, w->rowind, NULL, 0, &st);
    if (!c->net) {
        fprintf(stderr, "BUG: %s %d: cdyn_network_create failed (status %d)\n",
                model_names[w->model], w->size, (int)st);
        exit(EXIT_FAILURE);
    }
    if (load && cdyn_network_load(c->net, w->Mdiag, net_W(w, 0)) != CDYN_OK) {
        fprintf(stderr, "BUG: %s %d: cdyn_network_load failed: %s\n", model_names[w->model],
                w->size, cdyn_network_last_error(c->net));
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

/* B's values: W_ik / sqrt(M_k) with data set f (recomputed per step, as a
 * user would for an M that may change) */
static void chol_scale(chol_path *c, int f)
{
    const network *w = c->w;
    const double *W = net_W(w, f);
    double *Bx = c->B->x;
    for (int p = 0; p < w->n; ++p) {
        double d = 1.0 / sqrt(w->Mdiag[p]);
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) Bx[q] = W[q] * d;
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

static int chol_factor(chol_path *c, int f)
{
    chol_scale(c, f);
    if (!c->explicit_S) return !cholmod_factorize(c->B, c->L, c->cc) || c->cc->status != CHOLMOD_OK;
    cholmod_sparse *S = chol_form_S(c);
    int bad = !S || !cholmod_factorize(S, c->L, c->cc) || c->cc->status != CHOLMOD_OK;
    cholmod_free_sparse(&S, c->cc);
    return bad;
}

static int chol_solve(chol_path *c, int f)
{
    range_rhs(c->w, f, c->u, c->r->x);
    if (!cholmod_solve2(CHOLMOD_A, c->L, c->r, NULL, &c->X, NULL, &c->Y, &c->E, c->cc))
        return 1;
    memcpy(c->a.lambda, c->X->x, sizeof(double) * (size_t)c->w->m);
    range_rates(c->w, f, c->a.lambda, c->a.vdot);
    return 0;
}

static int step_chol_factor_solve(void *ctx, int f)
{
    chol_path *c = ctx;
    int bad = chol_factor(c, f);
    return chol_solve(c, f) || bad;
}

/* (fixed W only) */
static int step_chol_solve(void *ctx, int f) { return chol_solve(ctx, f); }

/* Analysis once (and one factorization with data set 0, for chol_solve). */
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
        fprintf(stderr, "bench_network: %s %d: CHOLMOD allocation failed\n",
                model_names[w->model], w->size);
        exit(EXIT_FAILURE);
    }
    memcpy(c->B->p, w->colptr, sizeof(int) * (size_t)(w->n + 1));
    memcpy(c->B->i, w->rowind, sizeof(int) * (size_t)w->nnz);
    chol_scale(c, 0);
    if (explicit_S) {
        cholmod_sparse *S = chol_form_S(c);
        c->L = S ? cholmod_analyze(S, cc) : NULL;
        cholmod_free_sparse(&S, cc);
    } else {
        c->L = cholmod_analyze(c->B, cc);
    }
    c->lnz = cc->lnz;
    c->flops = cc->fl;
    if (!c->L || chol_factor(c, 0)) {
        fprintf(stderr, "BUG: %s %d: CHOLMOD analysis or factorization failed (status %d)\n",
                model_names[w->model], w->size, cc->status);
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
    double *Md, *Wd, *Bd, *Sd; /* n x n, m x n, m x n (W M^-1/2), m x m (factor) */
    double *u, *c;             /* n, m (c = -g) */
    cdyn_nullspace *ns;
    answer a_ns, a_range;
} dense_path;

/* W's values of data set f into the dense W (the zeros stay). */
static void dense_scatter(dense_path *d, int f)
{
    const network *w = d->w;
    const double *W = net_W(w, f);
    for (int p = 0; p < w->n; ++p)
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q)
            d->Wd[w->rowind[q] + (size_t)p * w->m] = W[q];
}

/* S = (W M^-1/2)(W M^-1/2)^T, upper triangle, and its Cholesky factor
 * (dpotrf's info). */
static int dense_range_factor(dense_path *d)
{
    const network *w = d->w;
    int n = w->n, m = w->m, info = 0;
    for (int p = 0; p < n; ++p) {
        double s = 1.0 / sqrt(w->Mdiag[p]);
        for (int i = 0; i < m; ++i) d->Bd[i + (size_t)p * m] = d->Wd[i + (size_t)p * m] * s;
    }
    const double one = 1.0, zero = 0.0;
    dsyrk_("U", "N", &m, &n, &one, d->Bd, &m, &zero, d->Sd, &m);
    dpotrf_("U", &m, d->Sd, &m, &info);
    return info;
}

static int step_nullspace(void *ctx, int f)
{
    dense_path *d = ctx;
    const network *w = d->w;
    if (w->W_varies) {
        dense_scatter(d, f);
        if (cdyn_nullspace_factor(d->ns, d->Wd, w->m) != CDYN_OK) return 1;
    }
    const double *g = net_g(w, f);
    if (g)
        for (int i = 0; i < w->m; ++i) d->c[i] = -g[i];
    return cdyn_nullspace_solve(d->ns, d->Md, w->n, net_F(w, f), g ? d->c : NULL, d->a_ns.vdot,
                                d->a_ns.lambda) != CDYN_OK;
}

static int step_dense_range(void *ctx, int f)
{
    dense_path *d = ctx;
    const network *w = d->w;
    int n = w->n, m = w->m, one = 1, info = 0;
    if (w->W_varies) {
        dense_scatter(d, f);
        if (dense_range_factor(d) != 0) return 1;
    }
    const double minus = -1.0, plus = 1.0, zero = 0.0;
    const double *F = net_F(w, f), *g = net_g(w, f);
    double *lambda = d->a_range.lambda, *vdot = d->a_range.vdot;
    for (int p = 0; p < n; ++p) d->u[p] = F[p] / w->Mdiag[p];
    if (g) memcpy(lambda, g, sizeof(double) * (size_t)m);
    dgemv_("N", &m, &n, &minus, d->Wd, &m, d->u, &one, g ? &plus : &zero, lambda, &one);
    dpotrs_("U", &m, &one, d->Sd, &m, lambda, &m, &info);
    memcpy(vdot, F, sizeof(double) * (size_t)n);
    dgemv_("T", &m, &n, &plus, d->Wd, &m, lambda, &one, &plus, vdot, &one);
    for (int p = 0; p < n; ++p) vdot[p] /= w->Mdiag[p];
    return info != 0;
}

static void dense_path_init(dense_path *d, const network *w)
{
    int n = w->n, m = w->m;
    memset(d, 0, sizeof *d);
    d->w = w;
    d->Md = calloc((size_t)n * (size_t)n, sizeof(double));
    d->Wd = calloc((size_t)m * (size_t)n, sizeof(double));
    d->Bd = xmalloc(sizeof(double) * (size_t)m * (size_t)n);
    d->Sd = xmalloc(sizeof(double) * (size_t)m * (size_t)m);
    d->u = xmalloc(sizeof(double) * (size_t)n);
    d->c = xmalloc(sizeof(double) * (size_t)m);
    answer *as[2] = {&d->a_ns, &d->a_range};
    for (int i = 0; i < 2; ++i) {
        as[i]->vdot = xmalloc(sizeof(double) * (size_t)n);
        as[i]->lambda = xmalloc(sizeof(double) * (size_t)m);
    }
    if (!d->Md || !d->Wd) {
        fprintf(stderr, "bench_network: out of memory (dense, %s %d)\n", model_names[w->model],
                w->size);
        exit(EXIT_FAILURE);
    }
    for (int p = 0; p < n; ++p) d->Md[p + (size_t)p * n] = w->Mdiag[p];
    dense_scatter(d, 0);
    d->ns = cdyn_nullspace_create(n, m, NULL);
    if (!d->ns || cdyn_nullspace_factor(d->ns, d->Wd, m) != CDYN_OK) {
        fprintf(stderr, "BUG: %s %d: dense null space set-up failed: %s\n",
                model_names[w->model], w->size,
                d->ns ? cdyn_nullspace_last_error(d->ns) : "create");
        exit(EXIT_FAILURE);
    }
    int info = dense_range_factor(d);
    if (info != 0) {
        fprintf(stderr, "BUG: %s %d: dpotrf of the dense S failed (info %d)\n",
                model_names[w->model], w->size, info);
        exit(EXIT_FAILURE);
    }
}

static void dense_path_free(dense_path *d)
{
    cdyn_nullspace_free(d->ns);
    free(d->Md);
    free(d->Wd);
    free(d->Bd);
    free(d->Sd);
    free(d->u);
    free(d->c);
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

/* Normwise relative residual of an answer with data set f: max over the
 * two block rows of max |residual| / max (sum of the magnitudes of the
 * row's terms). */
static double residual(const network *w, int f, const double *vdot, const double *lambda)
{
    int n = w->n, m = w->m;
    const double *F = net_F(w, f), *W = net_W(w, f), *g = net_g(w, f);
    double *rg = calloc((size_t)m, sizeof(double)), *ug = calloc((size_t)m, sizeof(double));
    if (!rg || !ug) {
        fprintf(stderr, "bench_network: out of memory (residual)\n");
        exit(EXIT_FAILURE);
    }
    if (g)
        for (int i = 0; i < m; ++i) {
            rg[i] = -g[i];
            ug[i] = fabs(g[i]);
        }
    double rf = 0.0, uf = 0.0;
    for (int p = 0; p < n; ++p) {
        double r = w->Mdiag[p] * vdot[p] - F[p], u = fabs(w->Mdiag[p] * vdot[p]) + fabs(F[p]);
        for (int q = w->colptr[p]; q < w->colptr[p + 1]; ++q) {
            int i = w->rowind[q];
            r -= W[q] * lambda[i];
            u += fabs(W[q] * lambda[i]);
            rg[i] += W[q] * vdot[p];
            ug[i] += fabs(W[q] * vdot[p]);
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

/* Reset VmHWM to the present VmRSS (Linux >= 4.0); 1 when done. With
 * glibc, the free heap is given back first (malloc_trim), so that what the
 * previous sizes freed does not stay in VmRSS and hence in the next peak. */
static int reset_peak(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok;
}

/* The probe (this program run as `bench_network --memory-probe MODEL
 * GROUP SIZE`): build the problem of the size, then set up and run once
 * the group's paths and print the growth of the peak resident memory in
 * KiB. Nothing has been freed before, so the peak before the set-up is the
 * resident memory then, reset or not. */
static int memory_probe(const char *model, const char *group, int size)
{
    network w;
    if (!strcmp(model, "grid") && size >= 2) network_build(&w, MODEL_GRID, size);
    else if (!strcmp(model, "chain") && size >= 1) network_build(&w, MODEL_CHAIN, size);
    else return EXIT_FAILURE;
    reset_peak();
    long rss0 = status_kib("VmRSS");
    int bad = 0;
    if (!strcmp(group, "cdyn")) {
        cdyn_path c;
        cdyn_path_init(&c, &w, 0);
        bad = step_load_solve(&c, 0);
    } else if (!strcmp(group, "chol")) {
        cholmod_common cc;
        cholmod_start(&cc);
        cc.print = 0;
        chol_path c;
        chol_path_init(&c, &w, &cc, 0);
        bad = step_chol_factor_solve(&c, 0);
    } else if (!strcmp(group, "dense")) {
        dense_path d;
        dense_path_init(&d, &w);
        bad = step_nullspace(&d, 0) || step_dense_range(&d, 0);
    } else {
        return EXIT_FAILURE;
    }
    long hwm = status_kib("VmHWM");
    if (bad || hwm < 0 || rss0 < 0) return EXIT_FAILURE;
    printf("%ld\n", hwm - rss0);
    return EXIT_SUCCESS; /* the objects go with the process */
}

/* Run the probe of a group in a fresh process; KiB, or -1 when it fails. */
static long probe_memory(const char *self, model_kind model, const char *group, int size)
{
    if (!self) return -1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --memory-probe %s %s %d", self, model_names[model], group,
             size);
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

/* ---- one size of one model ------------------------------------------------ */

enum { MAX_SIZES = 4 };

/* What the summary needs of a size. */
typedef struct {
    int size, n, m, dense, resettable;
    int active[NPATH];
    double t[NPATH]; /* median per step */
    long mem[3];     /* KiB of one object: cdyn, CHOLMOD, dense (-1: n/a) */
    long peak;       /* KiB: VmHWM at the end of the size */
} size_result;

/* The sizes and the measurement plan of a model. */
typedef struct {
    model_kind model;
    const char *label; /* the size's name in the tables: k or N */
    int sizes[MAX_SIZES], quick_sizes;
    int samples_full[MAX_SIZES], samples_quick[MAX_SIZES];
    double target_full[MAX_SIZES], target_quick[MAX_SIZES];
} model_plan;

/* Is path q run on this problem? */
static int path_active(const network *w, int q)
{
    if ((q == P_SOLVE || q == P_CHOL_SOLVE) && w->W_varies) return 0; /* a fixed factor */
    if ((q == P_NULLSPACE || q == P_DENSE) && w->n > DENSE_MAX) return 0;
    return 1;
}

/* Set up, check and time every path on one size, print its rows (and the
 * CSV's), fill *res. prev: the previous size of the model, or NULL.
 * Returns the failed agreement checks and calls (bugs); *failures counts
 * the failed timed calls. */
static int bench_size(const model_plan *plan, int size, int quick, int s, const char *self,
                      cholmod_common *cc, FILE *csv, const size_result *prev, size_result *res,
                      long *failures)
{
    model_kind model = plan->model;
    const char *mname = model_names[model];
    network w;
    int bugs = 0;

    /* memory of one object of each group, in fresh processes (before this
     * process builds anything of the size) */
    int n = model == MODEL_GRID ? 2 * size * (size - 1) + 2 : 3 * size;
    int m = model == MODEL_GRID ? size * size : 2 * size, dense = n <= DENSE_MAX;
    long mem_cdyn = probe_memory(self, model, "cdyn", size);
    long mem_chol = probe_memory(self, model, "chol", size);
    long mem_dense = dense ? probe_memory(self, model, "dense", size) : -1;

    int resettable = reset_peak();
    network_build(&w, model, size);
    cdyn_path load_path, solve_path;
    cdyn_path_init(&load_path, &w, 0);
    chol_path chol, chol_solve_only, chol_S;
    chol_path_init(&chol, &w, cc, 0);
    chol_path_init(&chol_S, &w, cc, 1);
    int active[NPATH];
    for (int q = 0; q < NPATH; ++q) active[q] = path_active(&w, q);
    if (active[P_SOLVE]) cdyn_path_init(&solve_path, &w, 1);
    if (active[P_CHOL_SOLVE]) chol_path_init(&chol_solve_only, &w, cc, 0);
    dense_path dp;
    if (dense) dense_path_init(&dp, &w);

    static const step_fn steps[NPATH] = {step_chol_factor_solve, step_load_solve,
                                         step_solve,             step_chol_solve,
                                         step_chol_factor_solve, step_nullspace,
                                         step_dense_range};
    void *ctxs[NPATH] = {&chol, &load_path, &solve_path, &chol_solve_only, &chol_S, &dp, &dp};
    answer *ans[NPATH] = {&chol.a,           &load_path.a, &solve_path.a,
                          &chol_solve_only.a, &chol_S.a,    &dp.a_ns, &dp.a_range};

    /* agreement with the baseline: every path with every data set of the
     * pool, against chol_factor+solve on the same data */
    double diff[NPATH] = {0};
    for (int f = 0; f < NPOOL; ++f) {
        for (int q = 0; q < NPATH; ++q) {
            if (!active[q] || !steps[q](ctxs[q], f)) continue;
            fprintf(stderr, "BUG: %s %d, data set %d: %s failed: %s\n", mname, size, f,
                    path_names[q],
                    q == P_LOAD        ? cdyn_network_last_error(load_path.net)
                    : q == P_SOLVE     ? cdyn_network_last_error(solve_path.net)
                    : q == P_NULLSPACE ? cdyn_nullspace_last_error(dp.ns)
                                       : "");
            ++bugs;
        }
        for (int q = 1; q < NPATH; ++q) {
            if (!active[q]) continue;
            double dv = rel_diff(n, ans[q]->vdot, chol.a.vdot);
            double dl = rel_diff(m, ans[q]->lambda, chol.a.lambda);
            diff[q] = fmax(diff[q], fmax(dv, dl));
            if (!(dv <= CHECK_TOL && dl <= CHECK_TOL)) {
                fprintf(stderr,
                        "BUG: %s %d, data set %d: %s differs from the CHOLMOD baseline: v' "
                        "%.3e, lambda %.3e (tolerance %.0e)\n",
                        mname, size, f, path_names[q], dv, dl, CHECK_TOL);
                ++bugs;
            }
        }
    }
    /* the answers of the first data set again, for the residuals */
    if (step_chol_factor_solve(&chol, 0) || step_load_solve(&load_path, 0)) ++bugs;
    double res_chol = residual(&w, 0, chol.a.vdot, chol.a.lambda);
    double res_cdyn = residual(&w, 0, load_path.a.vdot, load_path.a.lambda);
    double berr = cdyn_network_backward_error(load_path.net);
    double pivot = cdyn_network_pivot_ratio(load_path.net);
    int super_base = chol.L->is_super;

    /* timing */
    sweep sweeps[NPATH];
    bu_path paths[NPATH];
    int index[NPATH], npath = 0; /* paths[] holds the active ones */
    for (int q = 0; q < NPATH; ++q) {
        index[q] = -1;
        if (!active[q]) continue;
        sweeps[q] = (sweep){steps[q], ctxs[q]};
        paths[npath] = (bu_path){run_sweep, &sweeps[q], 0, 0, {0, 0, 0}};
        index[q] = npath++;
    }
    int samples = quick ? plan->samples_quick[s] : plan->samples_full[s];
    double target = quick ? plan->target_quick[s] : plan->target_full[s];
    bu_measure(paths, npath, samples, target);
    for (int j = 0; j < npath; ++j) { /* per sweep -> per step */
        paths[j].t.median /= NPOOL;
        paths[j].t.min /= NPOOL;
        paths[j].t.max /= NPOOL;
    }
    long size_peak = status_kib("VmHWM");

    double base = paths[index[P_CHOL]].t.median;
    double csolve = active[P_CHOL_SOLVE] ? paths[index[P_CHOL_SOLVE]].t.median : 0.0;
    for (int q = 0; q < NPATH; ++q) {
        res->active[q] = active[q];
        res->t[q] = -1.0;
        if (!active[q]) continue;
        const bu_path *pq = &paths[index[q]];
        *failures += pq->failures;
        const bu_timing *t = &pq->t;
        double ratio = t->median / base;
        char vs[16] = "-", ex[16] = "-";
        if (q == P_SOLVE) snprintf(vs, sizeof vs, "%.3f", t->median / csolve);
        int have_prev = prev && prev->active[q] && prev->t[q] > 0.0;
        if (have_prev)
            snprintf(ex, sizeof ex, "%.2f", log(t->median / prev->t[q]) / log((double)n / prev->n));
        printf("%5d %6d %6d  %-25s %12.2f %12.2f %12.2f %8.3f %9s %6s\n", size, n, m,
               path_names[q], 1e6 * t->median, 1e6 * t->min, 1e6 * t->max, ratio, vs, ex);
        /* one object's memory: the group the path belongs to */
        long mem = q == P_LOAD || q == P_SOLVE        ? mem_cdyn
                   : q == P_CHOL || q == P_CHOL_SOLVE ? mem_chol
                   : q >= P_NULLSPACE                 ? mem_dense
                                                      : -1;
        if (csv)
            fprintf(csv, "%s,%d,%d,%d,%s,%.9e,%.9e,%.9e,%.4f,%s,%s,%ld,%ld\n", mname, size, n, m,
                    path_names[q], t->median, t->min, t->max, ratio, q == P_SOLVE ? vs : "",
                    have_prev ? ex : "", mem, size_peak);
        res->t[q] = t->median;
    }
    char m1[32], m2[32], m3[32], m4[32];
    print_mib(m1, sizeof m1, mem_cdyn);
    print_mib(m2, sizeof m2, mem_chol);
    print_mib(m3, sizeof m3, mem_dense);
    print_mib(m4, sizeof m4, size_peak);
    printf("%5s %6s %6s  memory of one object: cdyn create+load+solve %s, CHOLMOD "
           "analyse+factor+solve %s, dense (both paths) %s; %s %s\n",
           "", "", "", m1, m2, m3, resettable ? "peak VmHWM of this size" : "process VmHWM", m4);
    printf("%5s %6s %6s  checks: max rel. diff to the baseline over the %d data sets:", "", "",
           "", (int)NPOOL);
    for (int q = 1, first = 1; q < NPATH; ++q)
        if (active[q]) {
            printf("%s %s %.1e", first ? "" : ",", path_names[q], diff[q]);
            first = 0;
        }
    printf("%s\n", dense ? "" : " (no dense paths)");
    printf("%5s %6s %6s  residual (data set 0) cdyn %.1e, baseline %.1e; cdyn backward error "
           "%.1e, pivot ratio %.1e; baseline factor %s, nnz(L) %.0f (S variant %.0f), %.2g "
           "flops\n",
           "", "", "", res_cdyn, res_chol, berr, pivot, super_base ? "supernodal" : "simplicial",
           chol.lnz, chol_S.lnz, chol.flops);
    fflush(stdout);
    res->size = size;
    res->n = n;
    res->m = m;
    res->dense = dense;
    res->resettable = resettable;
    res->mem[0] = mem_cdyn;
    res->mem[1] = mem_chol;
    res->mem[2] = mem_dense;
    res->peak = size_peak;

    if (dense) dense_path_free(&dp);
    if (active[P_CHOL_SOLVE]) chol_path_free(&chol_solve_only);
    if (active[P_SOLVE]) cdyn_path_free(&solve_path);
    chol_path_free(&chol);
    chol_path_free(&chol_S);
    cdyn_path_free(&load_path);
    network_free(&w);
    return bugs;
}

/* ---- summaries ------------------------------------------------------------ */

static void fmt_time(char *buf, size_t size, double t)
{
    if (t > 0.0) snprintf(buf, size, "%.1f", 1e6 * t);
    else snprintf(buf, size, "-");
}

static void fmt_mem(char *buf, size_t size, long kib)
{
    if (kib >= 0) snprintf(buf, size, "%.2f", kib / 1024.0);
    else snprintf(buf, size, "n/a");
}

static void summary_grid(const size_result *r, int count)
{
    int resettable_all = 1;
    for (int s = 0; s < count; ++s) resettable_all = resettable_all && r[s].resettable;
    printf("\nsummary, grid networks (median per step, us; (a) net_load+solve, (b) net_solve, "
           "(c) chol_factor+solve, (c') chol_solve, (d) dense_nullspace; memory in MiB: one "
           "cdyn object, one CHOLMOD baseline, the size's peak of the whole process)\n");
    printf("%6s %6s %11s %11s %11s %11s %11s %7s %7s %7s %9s %9s %9s\n", "n", "m", "(a)", "(b)",
           "(c)", "(c')", "(d)", "(a)/(c)", "(b)/(c)", "(b)/(c')", "mem cdyn", "mem chol",
           resettable_all ? "peak" : "proc.peak");
    for (int s = 0; s < count; ++s) {
        const double *t = r[s].t;
        char dcol[24], mc[24], mh[24];
        fmt_time(dcol, sizeof dcol, t[P_NULLSPACE]);
        fmt_mem(mc, sizeof mc, r[s].mem[0]);
        fmt_mem(mh, sizeof mh, r[s].mem[1]);
        printf("%6d %6d %11.1f %11.1f %11.1f %11.1f %11s %7.3f %7.3f %7.3f %9s %9s %9.1f\n",
               r[s].n, r[s].m, 1e6 * t[P_LOAD], 1e6 * t[P_SOLVE], 1e6 * t[P_CHOL],
               1e6 * t[P_CHOL_SOLVE], dcol, t[P_LOAD] / t[P_CHOL], t[P_SOLVE] / t[P_CHOL],
               t[P_SOLVE] / t[P_CHOL_SOLVE], mc, mh, r[s].peak / 1024.0);
    }
}

/* The chain's table and the targets of issue 15: (a)/(c) <= 1.3 at every
 * size, (a) <= 5 ms at 1e4 links, time exponent of (a) <= 1.1. */
static void summary_chain(const size_result *r, int count)
{
    int resettable_all = 1;
    for (int s = 0; s < count; ++s) resettable_all = resettable_all && r[s].resettable;
    printf("\nsummary, chains (median per step, us, one step = a new Phi_q and gamma; (a) "
           "net_load+solve, (c) chol_factor+solve, (c*) chol_S+factor+solve, (d) "
           "dense_nullspace with its factor, (d') dense_range with dsyrk + dpotrf; exp: time "
           "exponent against the previous size; memory in MiB as for the grids)\n");
    printf("%6s %6s %6s %11s %11s %11s %11s %11s %7s %7s %7s %9s %9s %9s\n", "N", "n", "m",
           "(a)", "(c)", "(c*)", "(d)", "(d')", "(a)/(c)", "exp(a)", "exp(c)", "mem cdyn",
           "mem chol", resettable_all ? "peak" : "proc.peak");
    double worst_ratio = 0.0, worst_exp = -INFINITY, t_1e4 = -1.0;
    int worst_ratio_at = 0, worst_exp_at = 0;
    for (int s = 0; s < count; ++s) {
        const double *t = r[s].t;
        char d1[24], d2[24], ea[16] = "-", ec[16] = "-", mc[24], mh[24];
        fmt_time(d1, sizeof d1, t[P_NULLSPACE]);
        fmt_time(d2, sizeof d2, t[P_DENSE]);
        fmt_mem(mc, sizeof mc, r[s].mem[0]);
        fmt_mem(mh, sizeof mh, r[s].mem[1]);
        double ratio = t[P_LOAD] / t[P_CHOL];
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst_ratio_at = r[s].size;
        }
        if (s > 0) {
            double ln = log((double)r[s].n / r[s - 1].n);
            double xa = log(t[P_LOAD] / r[s - 1].t[P_LOAD]) / ln;
            snprintf(ea, sizeof ea, "%.2f", xa);
            snprintf(ec, sizeof ec, "%.2f", log(t[P_CHOL] / r[s - 1].t[P_CHOL]) / ln);
            if (xa > worst_exp) {
                worst_exp = xa;
                worst_exp_at = s;
            }
        }
        if (r[s].size == 10000) t_1e4 = t[P_LOAD];
        printf("%6d %6d %6d %11.1f %11.1f %11.1f %11s %11s %7.3f %7s %7s %9s %9s %9.1f\n",
               r[s].size, r[s].n, r[s].m, 1e6 * t[P_LOAD], 1e6 * t[P_CHOL], 1e6 * t[P_CHOL_S],
               d1, d2, ratio, ea, ec, mc, mh, r[s].peak / 1024.0);
    }
    printf("targets (issue 15, chains; information only):\n");
    printf("  (a)/(c) <= 1.3 at every size: worst %.3f (N = %d): %s\n", worst_ratio,
           worst_ratio_at, worst_ratio <= 1.3 ? "met" : "MISSED");
    if (t_1e4 > 0.0)
        printf("  (a) <= 5 ms per step at N = 10000: %.3f ms: %s\n", 1e3 * t_1e4,
               t_1e4 <= 5e-3 ? "met" : "MISSED");
    else
        printf("  (a) <= 5 ms per step at N = 10000: not measured (quick mode)\n");
    if (count > 1)
        printf("  time exponent of (a) <= 1.1: worst %.2f (N = %d -> %d): %s\n", worst_exp,
               r[worst_exp_at - 1].size, r[worst_exp_at].size,
               worst_exp <= 1.1 ? "met" : "MISSED");
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--memory-probe"))
        return memory_probe(argv[2], argv[3], atoi(argv[4]));
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
    /* samples and seconds per sample and path, by size: fewer at 1e5 */
    static const model_plan plans[2] = {
        {MODEL_GRID, "k", {8, 23, 71, 224}, 3, {15, 9, 11, 5}, {5, 3, 3, 3},
         {4e-3, 1e-2, 3e-2, 1e-3}, {5e-4, 1e-3, 2e-3, 1e-3}},
        {MODEL_CHAIN, "N", {10, 100, 1000, 10000}, 3, {15, 11, 11, 11}, {5, 5, 5, 5},
         {5e-3, 2e-2, 3e-2, 6e-2}, {1e-3, 2e-3, 5e-3, 5e-3}},
    };
    FILE *csv = bu_open_csv(csv_path, "bench_network", quick,
                            "model,size,n,m,path,median_s,min_s,max_s,ratio_to_chol_factor_solve,"
                            "ratio_to_chol_solve,exponent_vs_previous,mem_kib,size_peak_kib");
    int bugs = 0;
    long failures = 0;
    printf("cdyn %s sparse network benchmark (%s mode): time per step, median [min, max] over "
           "the samples, each a sweep through a pool of %d data sets\n",
           cdyn_version(), quick ? "quick" : "full", (int)NPOOL);
    bu_print_machine(stdout, "  ");
    printf("ratio: to chol_factor+solve (hand-written CHOLMOD range space, factor per step); "
           "vs_csolve: to chol_solve (the same without the factorization)\n");
    printf("exp: time exponent against the previous size, log(t/t_prev) / log(n/n_prev)\n");

    cholmod_common cc;
    cholmod_start(&cc);
    cc.print = 0;

    size_result results[2][MAX_SIZES];
    int counts[2];
    for (int p = 0; p < 2; ++p) {
        const model_plan *plan = &plans[p];
        if (plan->model == MODEL_GRID)
            printf("\ngrid networks: k x k grid of junctions, pipes on the edges, one inflow, "
                   "one outflow: n = 2k(k-1)+2, m = k^2; a step: a new F (fixed diagonal M "
                   "and W, g = 0)\n");
        else
            printf("\nchains (examples/chain_model.h): N links of %g kg, %g m in absolute "
                   "coordinates: n = 3N, m = 2N; a step: Phi_q(q) and gamma(q, q') of a new "
                   "state (fixed diagonal M, F = gravity)\n",
                   CHAIN_MASS, CHAIN_LENGTH);
        printf("%5s %6s %6s  %-25s %12s %12s %12s %8s %9s %6s\n", plan->label, "n", "m", "path",
               "median [us]", "min", "max", "ratio", "vs_csolve", "exp");
        counts[p] = quick ? plan->quick_sizes : MAX_SIZES;
        for (int s = 0; s < counts[p]; ++s)
            bugs += bench_size(plan, plan->sizes[s], quick, s, self, &cc, csv,
                               s > 0 ? &results[p][s - 1] : NULL, &results[p][s], &failures);
    }
    cholmod_finish(&cc);

    summary_grid(results[0], counts[0]);
    summary_chain(results[1], counts[1]);
    if (csv) fclose(csv);
    if (failures || bugs) {
        fprintf(stderr, "bench_network: %ld failed calls, %d failed agreement checks: a bug\n",
                failures, bugs);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
