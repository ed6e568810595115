/* Randomized accuracy suite: every linear formulation of cdyn against an
 * independent reference solved in quad precision (tests/quadref.c).
 *
 * The rule under test. For every random system the library either refuses
 * (returns a status other than CDYN_OK) or its answer satisfies
 *
 *     err <= C * cond * eps,    C = 1e3 * N,   eps = DBL_EPSILON,
 *
 * where N is the order of the square linear system that defines the answer
 * (n + m for the bordered systems, n + q for the DAE), err is the largest
 * relative error ||x - x_ref||_inf / ||x_ref||_inf over the vectors
 * returned (q'' and lambda; v' and v for the DAE), measured in the UNSCALED
 * frame, and cond = ||K||_1 ||K^{-1}||_1 of that unscaled system K,
 * computed in quad. An OK answer that breaks the bound is a "wrong OK" and
 * fails the test case. Refusals are counted too, and none is allowed among
 * the well-posed systems (cond * DBL_EPSILON <= 1e-8): a library that
 * refuses everything must not pass.
 *
 * Why C = 1e3 N. A backward-stable solve in the unscaled frame computes an
 * x with (K + dK) x = b + db, ||dK||_1 <= c N eps ||K||_1 (the Wilkinson
 * bound of a factorization of order N with modest growth), so
 * ||x - x_ref||_1 <= cond * c N eps ||x||_1 to first order. Going to the
 * infinity norm costs at most another factor N (||x||_1 <= N ||x||_inf):
 * c N^2 eps cond <= 24 c N eps cond for N <= 24. The remaining factor of
 * about 40 covers the rounding of the data themselves (scalings by powers
 * of ten, s = xi - K_D Phi' - K_P Phi formed in double) and measuring each
 * returned vector against its own norm rather than the whole solution's.
 * The control case, LAPACK's LU of the whole bordered matrix in the
 * unscaled frame, shows the margin: its largest err / (cond eps) is about 2.
 *
 * The DAE (cdyn_dae_rhs) uses max(eps, 1e-10) in place of eps: its
 * algebraic states come from a Newton solve whose default tolerance is
 * 1e-10, not from a direct factorization, so an error of that size times
 * cond is within its contract.
 *
 * The systems. Sizes n in 2..12, m in 1..n-1 (a quarter with m = n - 1).
 * In a "nice" frame: M = U diag(mu) U^T with log-spaced mu, cond(M) in
 * {1, 1e4, 1e8, 1e12, 1e16}; in half of the systems the m smallest
 * eigenvectors of M lie in the row space of Phi_q (nearly massless
 * coordinates pinned by the constraints: cond(K) stays moderate although
 * cond(M) is huge), in the other half U is random. Phi_q = P diag(sig) V^T
 * with cond(Phi_q) in {1, 1e3, 1e6}. Then unit scalings: coordinate j by
 * S_j = 10^k_j, constraint row i by R_i = 10^l_i, k_j, l_i uniform
 * integers in [-8, 8] (a third of the systems keep all scales 1). The
 * library sees M_u = S M S, Phi_u = R Phi S, Q_u = S Q, s_u = R s (each
 * entry rounded once from the exact product), and its answers convert back
 * as q'' = S q''_u, lambda = R lambda_u. The DAE draws are described at
 * linear_dae below.
 *
 * The reference takes the exact doubles the library was given, divides
 * the known scales out in quad (the exact unscaled counterpart of those
 * data, to 1e-34 per entry), solves by Gaussian elimination with partial
 * pivoting in quad (its residual is checked) and inverts the same matrix
 * for cond. It is checked against LAPACK on well-conditioned systems and
 * against planted solutions at every scale.
 *
 * Each test case prints a table (one line per scaling class and cond bin):
 * systems, OK, refused (of which well-posed), wrong OK, and the largest
 * err / (cond eps) over the OK answers, followed by the first failures of
 * each kind with their seeds and the library's message. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdyn/constraint.h"
#include "cdyn/dae.h"
#include "cdyn/nullspace.h"
#include "cdyn/status.h"
#include "quadref.h"
#include "testutil.h"

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

enum {
    MAXN = 12,      /* coordinates / states */
    MAXM = 16,      /* constraint rows, redundant copies included */
    MAXK = 24,      /* order of a reference system */
    MAX_COPIES = 3, /* redundant rows added for the pseudo-inverse */
    NBINS = 9,      /* cond bins: decade pairs from 1 to 1e16, then >= 1e16 */
    EXAMPLES = 2,   /* failures described per kind and scaling class */
    EXAMPLE_LEN = 400
};

static const double C_PER_UNKNOWN = 1e3; /* C = 1e3 N, see the header */
static const double WELL_POSED = 1e-8;   /* cond * eps at or below: no refusal allowed */
/* Newton's default tolerance for the algebraic states of cdyn_dae: their
 * residual is only driven to about this level, so the DAE's answers carry a
 * relative error of this size times cond (not times eps). */
static const double NEWTON_TOL = 1e-10;
static const double QUAD_RESIDUAL = 1e-30; /* quad eps is 1e-34 */

static const double COND_M[] = {1, 1e4, 1e8, 1e12, 1e16};
static const double COND_PHI[] = {1, 1e3, 1e6};
/* DAE: cond(M11) stays below the default mass rank tolerance (1e-10), so
 * the rank of M is a fact of the unscaled system. */
static const double COND_M11[] = {1, 1e4, 1e8};

/* ------------------------------------------------------------------------ */
/* Random draws                                                              */

static int uniform_int(tu_rng *rng, int lo, int hi)
{
    int k = lo + (int)((tu_uniform(rng) + 1.0) * 0.5 * (hi - lo + 1));
    return k > hi ? hi : k;
}

static double pick(tu_rng *rng, int count, const double *values)
{
    return values[uniform_int(rng, 0, count - 1)];
}

/* The parameters of one random system. */
typedef struct {
    unsigned long long seed;
    int dae;         /* a DAE draw: the fields below in brackets apply */
    int n, m;        /* coordinates and constraints [states and massless states] */
    int pinned;      /* M's small eigenvectors in the row space of Phi_q [unused] */
    int scaled;      /* 0: all unit scales are 1 */
    int scale_exp;   /* unit scales are 10^k, k uniform in [-scale_exp, scale_exp] */
    double cond_m;   /* target cond(M) [cond(M11)] */
    double cond_phi; /* target cond(Phi_q) [cond of the massless block A_ZZ of A] */
} draw;

/* The range of the unit scales' exponents: 8 (1e+-8), or wider for the
 * extreme-units cases. */
static int g_scale_exp = 8;

static draw draw_params(tu_rng *rng, unsigned long long seed, int dae)
{
    draw d;
    d.seed = seed;
    d.scale_exp = g_scale_exp;
    d.dae = dae;
    d.n = uniform_int(rng, 2, MAXN);
    d.m = tu_uniform(rng) < -0.5 ? d.n - 1 : uniform_int(rng, 1, d.n - 1);
    d.pinned = tu_uniform(rng) < 0.0;
    d.scaled = tu_uniform(rng) > -1.0 / 3.0;
    d.cond_m = dae ? pick(rng, 3, COND_M11) : pick(rng, 5, COND_M);
    d.cond_phi = pick(rng, 3, COND_PHI);
    return d;
}

static void draw_scales(tu_rng *rng, const draw *d, int len, quad *scale)
{
    int k = d->scale_exp;
    for (int i = 0; i < len; ++i) scale[i] = d->scaled ? qref_pow10(uniform_int(rng, -k, k)) : 1;
}

static void draw_vector(tu_rng *rng, int len, double *x)
{
    for (int i = 0; i < len; ++i) x[i] = tu_uniform(rng);
}

/* The library-frame value of an unscaled entry: row * a * col rounded once. */
static double scaled_entry(quad row, double a, quad col) { return (double)(row * (quad)a * col); }

/* ------------------------------------------------------------------------ */
/* Nice-frame matrices                                                       */

/* Random n x n orthogonal matrix (ld n): Gram-Schmidt, twice, on uniform
 * columns. */
static void random_orthogonal(tu_rng *rng, int n, double *O)
{
    tu_random(rng, n, n, O, n);
    for (int pass = 0; pass < 2; ++pass)
        for (int j = 0; j < n; ++j) {
            double *col = O + (size_t)j * n;
            for (int k = 0; k < j; ++k) {
                const double *prev = O + (size_t)k * n;
                double dot = 0.0;
                for (int i = 0; i < n; ++i) dot += prev[i] * col[i];
                for (int i = 0; i < n; ++i) col[i] -= dot * prev[i];
            }
            double norm = 0.0;
            for (int i = 0; i < n; ++i) norm += col[i] * col[i];
            norm = sqrt(norm);
            for (int i = 0; i < n; ++i) col[i] /= norm;
        }
}

/* v[0..len-1] log-spaced from first to last; a single value is last. */
static void log_spaced(int len, double first, double last, double *v)
{
    if (len == 1) {
        v[0] = last;
        return;
    }
    for (int k = 0; k < len; ++k) v[k] = first * pow(last / first, (double)k / (len - 1));
}

/* A (rows x cols, ld rows) = U diag(sig) V^T with U rows x k (ld rows) and
 * V cols x k (ld ldv), accumulated in quad and rounded once. */
static void compose(int rows, int cols, int k, const double *U, const double *sig,
                    const double *V, int ldv, double *A)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            quad sum = 0;
            for (int p = 0; p < k; ++p)
                sum += (quad)U[i + (size_t)p * rows] * sig[p] * V[j + (size_t)p * ldv];
            A[i + (size_t)j * rows] = (double)sum;
        }
}

/* Copy the upper triangle of the n x n matrix A (ld n) to the lower one. */
static void symmetrize(int n, double *A)
{
    for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) A[i + (size_t)j * n] = A[j + (size_t)i * n];
}

/* Symmetric M = U diag(mu) U^T (n x n, ld n). */
static void compose_symmetric(int n, const double *U, const double *mu, double *M)
{
    compose(n, n, n, U, mu, U, n, M);
    symmetrize(n, M);
}

/* m x n matrix P diag(sig) V^T with cond = cond_target, V the first m
 * columns of the orthogonal O (ld n). */
static void compose_rows(tu_rng *rng, int m, int n, const double *O, double cond_target,
                         double *A)
{
    double P[MAXN * MAXN], sig[MAXN];
    random_orthogonal(rng, m, P);
    log_spaced(m, 1.0, 1.0 / cond_target, sig);
    compose(m, n, m, P, sig, O, n, A);
}

/* Nice-frame M (n x n) and Phi_q (m x n) of the draw. */
static void nice_mechanism(tu_rng *rng, const draw *d, double *M, double *Phi)
{
    int n = d->n, m = d->m;
    double O[MAXN * MAXN], U[MAXN * MAXN], G[MAXN * MAXN], mu[MAXN];
    random_orthogonal(rng, n, O); /* O(:, 0:m) spans the rows of Phi_q */
    compose_rows(rng, m, n, O, d->cond_phi, Phi);
    if (d->pinned) {
        /* U = [O(:, 0:m) G, O(:, m:n)]: the m small eigenvalues on the
         * constrained directions, moderate ones on the free motions */
        random_orthogonal(rng, m, G);
        tu_matmul(n, m, m, O, n, G, m, U, n);
        memcpy(U + (size_t)m * n, O + (size_t)m * n, sizeof(double) * (size_t)(n - m) * n);
        log_spaced(m, 1.0, 1.0 / d->cond_m, mu);
        log_spaced(n - m, 0.1, 1.0, mu + m);
    } else {
        random_orthogonal(rng, n, U);
        log_spaced(n, 1.0, 1.0 / d->cond_m, mu);
    }
    compose_symmetric(n, U, mu, M);
}

/* ------------------------------------------------------------------------ */
/* A mechanism as the library sees it                                        */

typedef struct {
    int n, m;
    double M[MAXN * MAXN];   /* S M S, ld n */
    double Phi[MAXM * MAXN]; /* R Phi_q S, ld m */
    double Q[MAXN];          /* S Q */
    double s[MAXM];          /* R s */
    quad S[MAXN], R[MAXM];   /* coordinate and constraint-row scales */
} mechanism;

/* The library-frame copy of the unscaled rows x cols matrix A (ld rows):
 * row i times row_scale[i], column j times col_scale[j]. */
static void scale_matrix(int rows, int cols, const double *A, const quad *row_scale,
                         const quad *col_scale, double *out)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
            out[i + (size_t)j * rows] =
                scaled_entry(row_scale[i], A[i + (size_t)j * rows], col_scale[j]);
}

static void scale_vector(int len, const double *x, const quad *scale, double *out)
{
    for (int i = 0; i < len; ++i) out[i] = scaled_entry(scale[i], x[i], 1);
}

static int library_mass_is_spd(const mechanism *mc)
{
    int n = mc->n;
    quad Mq[MAXN * MAXN];
    for (int i = 0; i < n * n; ++i) Mq[i] = mc->M[i];
    return qref_is_spd(n, Mq);
}

/* One scaled mechanism; redrawn until the M the library gets is positive
 * definite in exact arithmetic (at cond(M) = 1e16 its rounding can make it
 * indefinite, and every formulation here but the null-space one requires
 * an SPD M). */
static void draw_mechanism(tu_rng *rng, const draw *d, mechanism *mc)
{
    int n = d->n, m = d->m;
    mc->n = n;
    mc->m = m;
    for (int attempt = 0;; ++attempt) {
        ck_assert_msg(attempt < 100, "seed %llu: no SPD mass matrix drawn", d->seed);
        double M[MAXN * MAXN], Phi[MAXM * MAXN], Q[MAXN], s[MAXM];
        nice_mechanism(rng, d, M, Phi);
        draw_vector(rng, n, Q);
        draw_vector(rng, m, s);
        draw_scales(rng, d, n, mc->S);
        draw_scales(rng, d, m, mc->R);
        scale_matrix(n, n, M, mc->S, mc->S, mc->M);
        symmetrize(n, mc->M);
        scale_matrix(m, n, Phi, mc->R, mc->S, mc->Phi);
        scale_vector(n, Q, mc->S, mc->Q);
        scale_vector(m, s, mc->R, mc->s);
        if (library_mass_is_spd(mc)) return;
    }
}

/* ------------------------------------------------------------------------ */
/* Reference solve in quad                                                   */

/* A square system in the library frame with its scales: the unscaled
 * matrix is diag(row)^{-1} K diag(col)^{-1}, the unscaled solution
 * diag(col) x, the unscaled right-hand side diag(row)^{-1} b. */
typedef struct {
    int N;
    quad K[MAXK * MAXK]; /* ld N */
    quad b[MAXK];
    quad row[MAXK];
    quad col[MAXK];
} scaled_system;

static void system_clear(scaled_system *sys, int N)
{
    sys->N = N;
    for (int i = 0; i < N * N; ++i) sys->K[i] = 0;
    for (int i = 0; i < N; ++i) sys->b[i] = sys->row[i] = sys->col[i] = 0;
}

/* The unscaled system: K_u and b_u divided by the (exact or quad-rounded)
 * powers of ten, a perturbation of 1e-34 relative per entry. Eliminating
 * in this frame keeps the quad solve's error at cond * 1e-34 for the cond
 * of the unscaled matrix; on K_u itself, row scalings of up to 1e16 could
 * spoil the pivot order. */
static void unscaled(const scaled_system *sys, quad *K, quad *b)
{
    int N = sys->N;
    for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i)
            K[i + (size_t)j * N] = sys->K[i + (size_t)j * N] / (sys->row[i] * sys->col[j]);
    for (int i = 0; i < N; ++i) b[i] = sys->b[i] / sys->row[i];
}

/* Solve in quad (the residual is checked), write the unscaled solution to
 * x and return the 1-norm condition of the unscaled matrix. */
static double reference_solve(const scaled_system *sys, quad *x)
{
    int N = sys->N;
    quad K[MAXK * MAXK], b[MAXK];
    unscaled(sys, K, b);
    ck_assert_int_eq(qref_solve(N, K, b, x), 0);
    double residual = qref_residual(N, K, b, x);
    ck_assert_msg(residual <= QUAD_RESIDUAL, "quad reference residual %.3e", residual);
    return qref_cond1(N, K);
}

/* The bordered matrix [M G^T; P 0] (G, P m x n, ld m) with right-hand side
 * [top; bottom] in the library frame; rows scaled by (S, R), columns by
 * (S, T): T = R for Lagrange multipliers, the reaction scales for C. */
static void bordered_system(int n, int m, const double *M, const double *G, const double *P,
                            const double *top, const double *bottom, const quad *S,
                            const quad *R, const quad *T, scaled_system *sys)
{
    int N = n + m;
    system_clear(sys, N);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) sys->K[i + (size_t)j * N] = M[i + (size_t)j * n];
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            sys->K[(n + i) + (size_t)j * N] = P[i + (size_t)j * m];
            sys->K[j + (size_t)(n + i) * N] = G[i + (size_t)j * m];
        }
    for (int i = 0; i < n; ++i) {
        sys->b[i] = top[i];
        sys->row[i] = sys->col[i] = S[i];
    }
    for (int i = 0; i < m; ++i) {
        sys->b[n + i] = bottom[i];
        sys->row[n + i] = R[i];
        sys->col[n + i] = T[i];
    }
}

/* The KKT system M q'' + Phi^T lambda = Q, Phi q'' = s of a mechanism. */
static void kkt_system(const mechanism *mc, scaled_system *sys)
{
    bordered_system(mc->n, mc->m, mc->M, mc->Phi, mc->Phi, mc->Q, mc->s, mc->S, mc->R, mc->R,
                    sys);
}

/* A random mechanism, its KKT system and the reference solution (unscaled);
 * returns cond. */
static double draw_kkt(tu_rng *rng, const draw *d, mechanism *mc, scaled_system *sys,
                       quad *ref)
{
    draw_mechanism(rng, d, mc);
    kkt_system(mc, sys);
    return reference_solve(sys, ref);
}

static double worse(double a, double b) { return (a >= b || isnan(a)) ? a : b; }

/* Largest relative error of the blocks x[0..n-1] and x[n..N-1] of a
 * library answer (library frame) against the unscaled reference. */
static double answer_error(const scaled_system *sys, int n, const double *x, const quad *ref)
{
    quad xq[MAXK];
    for (int i = 0; i < sys->N; ++i) xq[i] = sys->col[i] * (quad)x[i];
    return worse(qref_relerr(n, xq, ref), qref_relerr(sys->N - n, xq + n, ref + n));
}

/* ------------------------------------------------------------------------ */
/* Tally and table                                                           */

typedef struct {
    long systems, ok, refused, refused_well_posed, wrong_ok;
    double worst; /* largest err / (cond eps) of the OK answers */
} bin;

/* The first failures of each kind (0: wrong OK, 1: well-posed refusal)
 * and scaling class, printed under the table. */
typedef struct {
    int count;
    char text[EXAMPLES][EXAMPLE_LEN];
} examples;

typedef struct {
    const char *name;
    double eps; /* DBL_EPSILON, or the Newton tolerance for the DAE */
    bin bins[2][NBINS];
    examples failures[2][2]; /* [kind][scaled] */
} tally;

static void tally_init(tally *t, const char *name, double eps)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->eps = eps;
}

static int cond_bin(double cond)
{
    if (!(cond < 1e16)) return NBINS - 1;
    int b = (int)floor(log10(cond) / 2.0);
    return b < 0 ? 0 : b;
}

static void keep_example(tally *t, int kind, const draw *d, double cond, double err,
                         const char *why)
{
    examples *ex = &t->failures[kind][d->scaled];
    if (ex->count >= EXAMPLES) return;
    char *text = ex->text[ex->count++];
    const char *what = kind ? "refused (well-posed)" : "wrong OK";
    const char *scales = d->scaled ? "scaled" : "unit scales";
    int used = d->dae ? snprintf(text, EXAMPLE_LEN,
                                 "%s: seed %llu, n %d q %d, %s, cond(M11) %.0e cond(A_ZZ) %.0e, "
                                 "cond %.2e",
                                 what, d->seed, d->n, d->m, scales, d->cond_m, d->cond_phi, cond)
                      : snprintf(text, EXAMPLE_LEN,
                                 "%s: seed %llu, n %d m %d, %s M, %s, cond(M) %.0e "
                                 "cond(Phi) %.0e, cond %.2e",
                                 what, d->seed, d->n, d->m, d->pinned ? "pinned" : "random",
                                 scales, d->cond_m, d->cond_phi, cond);
    if (used < 0 || used >= EXAMPLE_LEN) return;
    if (kind)
        snprintf(text + used, (size_t)(EXAMPLE_LEN - used), ": %s", why ? why : "");
    else
        snprintf(text + used, (size_t)(EXAMPLE_LEN - used), ", err %.2e = %.1e cond eps", err,
                 err / (cond * t->eps));
}

/* One system: status st, answer error err (ignored unless OK), order N of
 * the defining system and its cond; why is the library's message. */
static void record(tally *t, const draw *d, int N, double cond, cdyn_status st, double err,
                   const char *why)
{
    bin *b = &t->bins[d->scaled][cond_bin(cond)];
    b->systems++;
    if (st != CDYN_OK) {
        b->refused++;
        if (cond * DBL_EPSILON <= WELL_POSED) {
            b->refused_well_posed++;
            keep_example(t, 1, d, cond, NAN, why);
        }
        return;
    }
    b->ok++;
    double unit = cond * t->eps;
    double ratio = err / unit;
    if (!(ratio <= b->worst)) b->worst = ratio;
    if (!(err <= C_PER_UNKNOWN * N * unit)) {
        b->wrong_ok++;
        keep_example(t, 0, d, cond, err, NULL);
    }
}

static bin tally_total(const tally *t)
{
    bin sum = {0, 0, 0, 0, 0, 0.0};
    for (int s = 0; s < 2; ++s)
        for (int k = 0; k < NBINS; ++k) {
            const bin *b = &t->bins[s][k];
            sum.systems += b->systems;
            sum.ok += b->ok;
            sum.refused += b->refused;
            sum.refused_well_posed += b->refused_well_posed;
            sum.wrong_ok += b->wrong_ok;
            sum.worst = worse(sum.worst, b->worst);
        }
    return sum;
}

static void print_bin(const char *scales, const char *range, const bin *b)
{
    char refused[48], worst[16];
    snprintf(refused, sizeof refused, "%ld (%ld)", b->refused, b->refused_well_posed);
    if (b->ok > 0)
        snprintf(worst, sizeof worst, "%.2e", b->worst);
    else
        snprintf(worst, sizeof worst, "-");
    printf("  %-7s %-14s %7ld %7ld  %-20s %8ld  %s\n", scales, range, b->systems, b->ok, refused,
           b->wrong_ok, worst);
}

static void print_tally(const tally *t)
{
    printf("[%s] rule: err <= C cond eps, C = 1e3 N, eps = %.2e\n", t->name, t->eps);
    printf("  %-7s %-14s %7s %7s  %-20s %8s  %s\n", "scales", "cond(K)", "systems", "ok",
           "refused (well-posed)", "wrong-OK", "max err/(cond eps)");
    for (int s = 0; s < 2; ++s)
        for (int k = 0; k < NBINS; ++k) {
            const bin *b = &t->bins[s][k];
            if (b->systems == 0) continue;
            char range[32];
            if (k == NBINS - 1)
                snprintf(range, sizeof range, ">= 1e16");
            else
                snprintf(range, sizeof range, "[1e%d, 1e%d)", 2 * k, 2 * k + 2);
            print_bin(s ? "scaled" : "unit", range, b);
        }
    bin all = tally_total(t);
    print_bin("all", "", &all);
    for (int kind = 0; kind < 2; ++kind)
        for (int scaled = 0; scaled < 2; ++scaled) {
            const examples *ex = &t->failures[kind][scaled];
            for (int k = 0; k < ex->count; ++k) printf("  %s\n", ex->text[k]);
        }
    fflush(stdout);
}

/* Print the table, then assert: no wrong OK, no refusal of a well-posed
 * system. */
static void tally_check(const tally *t)
{
    print_tally(t);
    bin all = tally_total(t);
    ck_assert_msg(all.wrong_ok == 0, "%s: %ld of %ld OK answers break err <= C cond eps",
                  t->name, all.wrong_ok, all.ok);
    ck_assert_msg(all.refused_well_posed == 0,
                  "%s: %ld well-posed systems (cond eps <= 1e-8) refused", t->name,
                  all.refused_well_posed);
}

typedef void (*system_fn)(tu_rng *rng, const draw *d, tally *t);

/* count systems with seeds derived from base; dae selects the DAE draws. */
static void sweep(tally *t, int count, unsigned long long base, int dae, system_fn run)
{
    for (int i = 0; i < count; ++i) {
        unsigned long long seed = (base + (unsigned long long)i) * 0x9E3779B97F4A7C15ull;
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        draw d = draw_params(&rng, seed, dae);
        run(&rng, &d, t);
    }
}

/* ------------------------------------------------------------------------ */
/* Constraint formulations                                                   */

static cdyn_constraint *make_constraint(int n, int m)
{
    cdyn_constraint *c = cdyn_constraint_create(n, m, NULL);
    ck_assert_ptr_nonnull(c);
    return c;
}

static void load_mechanism(cdyn_constraint *c, const mechanism *mc, const double *Phi_val,
                           const double *Phi_dot, const double *xi)
{
    ck_assert_int_eq(cdyn_constraint_load(c, mc->M, mc->n, mc->Q, mc->Phi, mc->m, Phi_val,
                                          Phi_dot, xi),
                     CDYN_OK);
}

typedef cdyn_status (*kkt_fn)(cdyn_constraint *c, double *qdd, double *lambda);

/* A formulation that solves the KKT system M q'' + Phi^T lambda = Q,
 * Phi q'' = s (xi = s, no stabilization). */
static void run_kkt_formulation(tu_rng *rng, const draw *d, tally *t, kkt_fn solve)
{
    mechanism mc;
    scaled_system sys;
    quad ref[MAXK];
    double cond = draw_kkt(rng, d, &mc, &sys, ref);
    int n = mc.n, m = mc.m;
    cdyn_constraint *c = make_constraint(n, m);
    load_mechanism(c, &mc, NULL, NULL, mc.s);
    double x[MAXK];
    cdyn_status st = solve(c, x, x + n);
    double err = st == CDYN_OK ? answer_error(&sys, n, x, ref) : 0.0;
    record(t, d, n + m, cond, st, err, cdyn_constraint_last_error(c));
    cdyn_constraint_free(c);
}

static void run_lagrange(tu_rng *rng, const draw *d, tally *t)
{
    run_kkt_formulation(rng, d, t, cdyn_constraint_lagrange);
}

static void run_pseudoinverse_full_rank(tu_rng *rng, const draw *d, tally *t)
{
    run_kkt_formulation(rng, d, t, cdyn_constraint_pseudoinverse);
}

/* Stabilizer gains K_D, K_P (m x m, ld m) set on c. Scalar Baumgarte
 * (a, b multiples of 1/8, so 2a and b^2 are exact) or generalized gains:
 * full SPD matrices at unit scales, diagonal ones on scaled rows (a
 * symmetric gain coupling constraints of different units is not
 * unit-consistent: in the unscaled frame it would read R^{-1} K R). */
static void set_random_gains(tu_rng *rng, cdyn_constraint *c, int m, int scaled, double *KD,
                             double *KP)
{
    memset(KD, 0, sizeof(double) * (size_t)m * m);
    memset(KP, 0, sizeof(double) * (size_t)m * m);
    if (tu_uniform(rng) < 0.0) {
        double a = uniform_int(rng, 0, 80) / 8.0, b = uniform_int(rng, 0, 80) / 8.0;
        for (int i = 0; i < m; ++i) {
            KD[i + (size_t)i * m] = 2.0 * a;
            KP[i + (size_t)i * m] = b * b;
        }
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, a, b), CDYN_OK);
        return;
    }
    if (scaled) {
        for (int i = 0; i < m; ++i) {
            KD[i + (size_t)i * m] = 1.0 + 10.0 * (tu_uniform(rng) + 1.0);
            KP[i + (size_t)i * m] = 1.0 + 50.0 * (tu_uniform(rng) + 1.0);
        }
    } else {
        tu_random_spd(rng, m, KD, m);
        tu_random_spd(rng, m, KP, m);
    }
    ck_assert_int_eq(cdyn_constraint_set_gains(c, KD, m, KP, m), CDYN_OK);
}

/* s = xi - K_D Phi' - K_P Phi in quad from the library's doubles. */
static void stabilized_rhs(int m, const double *KD, const double *KP, const double *Phi_val,
                           const double *Phi_dot, const double *xi, quad *s)
{
    for (int i = 0; i < m; ++i) {
        quad sum = xi[i];
        for (int j = 0; j < m; ++j) {
            sum -= (quad)KD[i + (size_t)j * m] * Phi_dot[j];
            sum -= (quad)KP[i + (size_t)j * m] * Phi_val[j];
        }
        s[i] = sum;
    }
}

static void run_baumgarte(tu_rng *rng, const draw *d, tally *t)
{
    mechanism mc;
    draw_mechanism(rng, d, &mc);
    int n = mc.n, m = mc.m;
    double raw[MAXM], Phi_val[MAXM], Phi_dot[MAXM], KD[MAXM * MAXM], KP[MAXM * MAXM];
    draw_vector(rng, m, raw);
    scale_vector(m, raw, mc.R, Phi_val);
    draw_vector(rng, m, raw);
    scale_vector(m, raw, mc.R, Phi_dot);
    cdyn_constraint *c = make_constraint(n, m);
    set_random_gains(rng, c, m, d->scaled, KD, KP);
    quad s[MAXM], ref[MAXK];
    stabilized_rhs(m, KD, KP, Phi_val, Phi_dot, mc.s, s); /* mc.s serves as xi */
    scaled_system sys;
    kkt_system(&mc, &sys);
    for (int i = 0; i < m; ++i) sys.b[n + i] = s[i];
    double cond = reference_solve(&sys, ref);
    load_mechanism(c, &mc, Phi_val, Phi_dot, mc.s);
    double x[MAXK];
    cdyn_status st = cdyn_constraint_lagrange(c, x, x + n);
    double err = st == CDYN_OK ? answer_error(&sys, n, x, ref) : 0.0;
    record(t, d, n + m, cond, st, err, cdyn_constraint_last_error(c));
    cdyn_constraint_free(c);
}

/* Reactions: [M C^T; Phi 0][q''; f] = [Q; s], C (m x n) full rank with its
 * own condition, its own random frame and its own row (reaction) scales T:
 * the library sees C_u = T C S and f = T f_u. */
static void run_reactions(tu_rng *rng, const draw *d, tally *t)
{
    mechanism mc;
    draw_mechanism(rng, d, &mc);
    int n = mc.n, m = mc.m;
    double O[MAXN * MAXN], C[MAXM * MAXN], Cu[MAXM * MAXN];
    quad T[MAXM], ref[MAXK];
    random_orthogonal(rng, n, O);
    compose_rows(rng, m, n, O, pick(rng, 3, COND_PHI), C);
    draw_scales(rng, d, m, T);
    scale_matrix(m, n, C, T, mc.S, Cu);
    scaled_system sys;
    bordered_system(n, m, mc.M, Cu, mc.Phi, mc.Q, mc.s, mc.S, mc.R, T, &sys);
    double cond = reference_solve(&sys, ref);
    cdyn_constraint *c = make_constraint(n, m);
    load_mechanism(c, &mc, NULL, NULL, mc.s);
    double x[MAXK];
    cdyn_status st = cdyn_constraint_reactions(c, Cu, m, x, x + n);
    double err = st == CDYN_OK ? answer_error(&sys, n, x, ref) : 0.0;
    record(t, d, n + m, cond, st, err, cdyn_constraint_last_error(c));
    cdyn_constraint_free(c);
}

/* Redundant rows for the pseudo-inverse: copy k of Phi_u's row orig[k]
 * times factor[k] = +-2^e (exact in double, so the copy is an exact
 * multiple in the library frame), with s_copy = factor * s_orig. */
typedef struct {
    int count;
    int orig[MAX_COPIES];
    double factor[MAX_COPIES];
    double Phi[MAXM * MAXN]; /* (m + count) x n, ld m + count */
    double s[MAXM];
} stacked_rows;

static void stack_copies(tu_rng *rng, const mechanism *mc, stacked_rows *st)
{
    int n = mc->n, m = mc->m;
    st->count = uniform_int(rng, 1, MAX_COPIES);
    int rows = m + st->count;
    for (int k = 0; k < st->count; ++k) {
        st->orig[k] = uniform_int(rng, 0, m - 1);
        st->factor[k] = ldexp(tu_uniform(rng) < 0.0 ? -1.0 : 1.0, uniform_int(rng, -4, 4));
    }
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) st->Phi[i + (size_t)j * rows] = mc->Phi[i + (size_t)j * m];
        for (int k = 0; k < st->count; ++k) {
            double original = mc->Phi[st->orig[k] + (size_t)j * m];
            st->Phi[m + k + (size_t)j * rows] = st->factor[k] * original;
        }
    }
    for (int i = 0; i < m; ++i) st->s[i] = mc->s[i];
    for (int k = 0; k < st->count; ++k) st->s[m + k] = st->factor[k] * mc->s[st->orig[k]];
}

/* Minimum-norm multipliers of the stacked rows from the reduced ones mu
 * (unscaled), as cdyn_constraint_pseudoinverse defines them (constraint.h):
 * lambda = D_r m with |m| minimal, D_r the powers of two that bring every
 * row's largest |entry| into [1/2, 1). A copy c phi of a row phi, c = +-2^e,
 * has D_r scaled by 1/|c| exactly, so in that frame the rows of a group are
 * +-the same row: the multipliers giving the same force have sum_j c_j l_j
 * = mu with l_j = D_j m_j, and |m| is smallest with all |m_j| equal, i.e.
 * l_j = t / c_j (c_0 = 1) and t (1 + copies) = mu. All rows of a group
 * share the row scale R_i, so the unscaled values are the same expression
 * in the unscaled mu. */
static void min_norm_split(int m, const stacked_rows *st, const quad *mu, quad *lambda)
{
    quad members[MAXM] = {0};
    for (int i = 0; i < m; ++i) members[i] = 1;
    for (int k = 0; k < st->count; ++k) members[st->orig[k]] += 1;
    for (int i = 0; i < m; ++i) lambda[i] = mu[i] / members[i];
    for (int k = 0; k < st->count; ++k)
        lambda[m + k] = mu[st->orig[k]] / (members[st->orig[k]] * (quad)st->factor[k]);
}

static void run_pseudoinverse_redundant(tu_rng *rng, const draw *d, tally *t)
{
    mechanism mc;
    scaled_system sys;
    quad ref[MAXK], lambda_ref[MAXM];
    double cond = draw_kkt(rng, d, &mc, &sys, ref); /* the reduced system fixes q'' and mu */
    int n = mc.n, m = mc.m;
    stacked_rows st;
    stack_copies(rng, &mc, &st);
    int rows = m + st.count;
    min_norm_split(m, &st, ref + n, lambda_ref);
    cdyn_constraint *c = cdyn_constraint_create(n, rows, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(cdyn_constraint_load(c, mc.M, n, mc.Q, st.Phi, rows, NULL, NULL, st.s),
                     CDYN_OK);
    double qdd[MAXN], lambda[MAXM];
    cdyn_status status = cdyn_constraint_pseudoinverse(c, qdd, lambda);
    double err = 0.0;
    if (status == CDYN_OK) {
        quad q[MAXN], l[MAXM];
        for (int j = 0; j < n; ++j) q[j] = mc.S[j] * (quad)qdd[j];
        for (int i = 0; i < rows; ++i) l[i] = mc.R[i < m ? i : st.orig[i - m]] * (quad)lambda[i];
        err = worse(qref_relerr(n, q, ref), qref_relerr(rows, l, lambda_ref));
    }
    record(t, d, n + m, cond, status, err, cdyn_constraint_last_error(c));
    cdyn_constraint_free(c);
}

/* Null-space form (T1): M v' - F - W^T lambda_ns = 0, W v' = -c with
 * W = Phi_q, F = Q, c = -s; so v' = q'' and lambda_ns = -lambda. */
static void run_nullspace(tu_rng *rng, const draw *d, tally *t)
{
    mechanism mc;
    scaled_system sys;
    quad ref[MAXK];
    double cond = draw_kkt(rng, d, &mc, &sys, ref);
    int n = mc.n, m = mc.m;
    double c[MAXM], x[MAXK];
    for (int i = 0; i < m; ++i) c[i] = -mc.s[i];
    cdyn_nullspace *ns = cdyn_nullspace_create(n, m, NULL);
    ck_assert_ptr_nonnull(ns);
    cdyn_status st = cdyn_nullspace_factor(ns, mc.Phi, m);
    if (st == CDYN_OK) st = cdyn_nullspace_solve(ns, mc.M, n, mc.Q, c, x, x + n);
    double err = 0.0;
    if (st == CDYN_OK) {
        for (int i = 0; i < m; ++i) x[n + i] = -x[n + i];
        err = answer_error(&sys, n, x, ref);
    }
    record(t, d, n + m, cond, st, err, cdyn_nullspace_last_error(ns));
    cdyn_nullspace_free(ns);
}

/* ------------------------------------------------------------------------ */
/* Quasi-linear DAE with a selection mass matrix (T3)                        */

/* F(v, t) = A v + b + t b' in the library frame. */
typedef struct {
    int n;
    double A[MAXN * MAXN]; /* ld n */
    double b[MAXN], bdot[MAXN];
} linear_force;

static int linear_force_fn(double t, const double *v, double *F, void *user)
{
    const linear_force *f = user;
    tu_matvec(f->n, f->n, f->A, f->n, v, F);
    for (int i = 0; i < f->n; ++i) F[i] += f->b[i] + t * f->bdot[i];
    return 0;
}

static int linear_jacobian_fn(double t, const double *v, double *J, int ld, void *user)
{
    const linear_force *f = user;
    (void)t;
    (void)v;
    for (int j = 0; j < f->n; ++j)
        memcpy(J + (size_t)j * ld, f->A + (size_t)j * f->n, sizeof(double) * (size_t)f->n);
    return 0;
}

static int linear_time_fn(double t, const double *v, double *Ft, void *user)
{
    const linear_force *f = user;
    (void)t;
    (void)v;
    memcpy(Ft, f->bdot, sizeof(double) * (size_t)f->n);
    return 0;
}

/* M v' = A v + b(t) with M = (symmetric permutation of) blockdiag(M11, 0):
 * the q states Z in massless[] have zero rows and columns in M, so beta^T
 * picks the massless rows and G0 = A(Z, :) v + b_Z. Drawn unscaled: q in
 * 1..n-1, M11 SPD with cond(M11) in COND_M11, A uniform except the block
 * A(Z, Z) with cond in COND_PHI (invertible: index 1 with v_Z algebraic),
 * b and b' uniform; then equation scales R and state scales S as for the
 * mechanisms. The library sees M_u = R M S, A_u = R A S, b_u = R b,
 * b'_u = R b' (v = S v_u) and is evaluated at t = 0 (where F = A v + b
 * exactly) at a fresh state after its consistent initialisation. */
typedef struct {
    int n, q;
    int massless[MAXN];
    int is_massless[MAXN];
    double M[MAXN * MAXN]; /* ld n */
    linear_force f;
    quad S[MAXN], R[MAXN];
} linear_dae;

static void random_permutation(tu_rng *rng, int n, int *perm)
{
    for (int i = 0; i < n; ++i) perm[i] = i;
    for (int i = n - 1; i > 0; --i) {
        int j = uniform_int(rng, 0, i), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* Unscaled M: an SPD M11 with cond(M11) = d->cond_m on the massive states. */
static void nice_selection_mass(tu_rng *rng, const draw *d, const int *perm, double *M)
{
    int n = d->n, q = d->m, r = n - q;
    double U[MAXN * MAXN], mu[MAXN], M11[MAXN * MAXN];
    random_orthogonal(rng, r, U);
    log_spaced(r, 1.0, 1.0 / d->cond_m, mu);
    compose_symmetric(r, U, mu, M11);
    memset(M, 0, sizeof(double) * (size_t)n * n);
    for (int j = 0; j < r; ++j)
        for (int i = 0; i < r; ++i)
            M[perm[q + i] + (size_t)perm[q + j] * n] = M11[i + (size_t)j * r];
}

/* Unscaled A: uniform, with the massless block A(Z, Z) of condition
 * d->cond_phi, so the DAE has index 1 with v_Z algebraic. */
static void nice_dae_jacobian(tu_rng *rng, const draw *d, const int *perm, double *A)
{
    int n = d->n, q = d->m;
    double O[MAXN * MAXN], Azz[MAXN * MAXN];
    tu_random(rng, n, n, A, n);
    random_orthogonal(rng, q, O);
    compose_rows(rng, q, q, O, d->cond_phi, Azz);
    for (int j = 0; j < q; ++j)
        for (int i = 0; i < q; ++i) A[perm[i] + (size_t)perm[j] * n] = Azz[i + (size_t)j * q];
}

static void draw_dae(tu_rng *rng, const draw *d, linear_dae *sys)
{
    int n = d->n, q = d->m, perm[MAXN];
    double M[MAXN * MAXN], A[MAXN * MAXN], b[MAXN], bdot[MAXN];
    random_permutation(rng, n, perm);
    nice_selection_mass(rng, d, perm, M);
    nice_dae_jacobian(rng, d, perm, A);
    draw_vector(rng, n, b);
    draw_vector(rng, n, bdot);
    sys->n = sys->f.n = n;
    sys->q = q;
    memset(sys->is_massless, 0, sizeof sys->is_massless);
    for (int k = 0; k < q; ++k) {
        sys->massless[k] = perm[k];
        sys->is_massless[perm[k]] = 1;
    }
    draw_scales(rng, d, n, sys->S);
    draw_scales(rng, d, n, sys->R);
    scale_matrix(n, n, M, sys->R, sys->S, sys->M);
    scale_matrix(n, n, A, sys->R, sys->S, sys->f.A);
    scale_vector(n, b, sys->R, sys->f.b);
    scale_vector(n, bdot, sys->R, sys->f.bdot);
}

/* A random unscaled state in the library frame (v_u = v / S). */
static void draw_state(tu_rng *rng, const linear_dae *sys, double *v)
{
    for (int j = 0; j < sys->n; ++j) v[j] = (double)((quad)tu_uniform(rng) / sys->S[j]);
}

/* The reference system of one right-hand side, unknowns [v_a (q); v' (n)]
 * given the integrated states y (library frame):
 *   massless rows z:  A(z, alg) v_a = -(A(z, int) y + b_z)       (G0 = 0)
 *   massive rows i:   M(i, :) v' - A(i, alg) v_a = A(i, int) y + b_i
 *   massless rows z:  A(z, :) v' = -b'_z                       (G0' = 0) */
static void dae_system(const linear_dae *sys, const int *integ, const int *alg, const double *y,
                       scaled_system *out)
{
    int n = sys->n, q = sys->q, r = n - q, N = n + q;
    const double *A = sys->f.A;
    system_clear(out, N);
    for (int k = 0; k < q; ++k) {
        int z = sys->massless[k];
        quad known = sys->f.b[z];
        for (int j = 0; j < r; ++j) known += (quad)A[z + (size_t)integ[j] * n] * y[j];
        for (int a = 0; a < q; ++a) out->K[k + (size_t)a * N] = A[z + (size_t)alg[a] * n];
        out->b[k] = -known;
        out->row[k] = sys->R[z];
    }
    for (int i = 0; i < n; ++i) {
        int row = q + i;
        const double *Mi = sys->is_massless[i] ? A : sys->M;
        for (int c = 0; c < n; ++c) out->K[row + (size_t)(q + c) * N] = Mi[i + (size_t)c * n];
        if (sys->is_massless[i]) {
            out->b[row] = -(quad)sys->f.bdot[i];
        } else {
            quad known = sys->f.b[i];
            for (int j = 0; j < r; ++j) known += (quad)A[i + (size_t)integ[j] * n] * y[j];
            for (int a = 0; a < q; ++a) out->K[row + (size_t)a * N] = -A[i + (size_t)alg[a] * n];
            out->b[row] = known;
        }
        out->row[row] = sys->R[i];
    }
    for (int a = 0; a < q; ++a) out->col[a] = sys->S[alg[a]];
    for (int c = 0; c < n; ++c) out->col[q + c] = sys->S[c];
}

/* The split the reference uses when the library has none of the right
 * size: the massless states algebraic. */
static void true_split(const linear_dae *sys, int *integ, int *alg)
{
    int r = 0;
    for (int j = 0; j < sys->n; ++j)
        if (!sys->is_massless[j]) integ[r++] = j;
    memcpy(alg, sys->massless, sizeof(int) * (size_t)sys->q);
}

/* set_mass, set_functions, split and consistent at the state v0. */
static cdyn_status dae_prepare(cdyn_dae *dae, linear_dae *sys, double *v0)
{
    cdyn_status st = cdyn_dae_set_mass(dae, sys->M, sys->n);
    if (st == CDYN_OK)
        st = cdyn_dae_set_model(dae, linear_force_fn, linear_jacobian_fn, linear_time_fn,
                                    &sys->f);
    if (st == CDYN_OK) st = cdyn_dae_split(dae, 0.0, v0);
    if (st == CDYN_OK) st = cdyn_dae_consistent(dae, 0.0, v0);
    return st;
}

/* err of the library's v (algebraic states) and v' against the reference
 * solution x = [v_a; v'] (unscaled). */
static double dae_error(const linear_dae *sys, const int *integ, const int *alg, const double *y,
                        const double *v, const double *vdot, const quad *x)
{
    int n = sys->n, q = sys->q;
    quad v_lib[MAXN], v_ref[MAXN], vdot_lib[MAXN];
    for (int j = 0; j < n; ++j) {
        v_lib[j] = sys->S[j] * (quad)v[j];
        vdot_lib[j] = sys->S[j] * (quad)vdot[j];
    }
    for (int j = 0; j < n - q; ++j) v_ref[integ[j]] = sys->S[integ[j]] * (quad)y[j];
    for (int a = 0; a < q; ++a) v_ref[alg[a]] = x[a];
    return worse(qref_relerr(n, v_lib, v_ref), qref_relerr(n, vdot_lib, x + q));
}

static void run_dae(tu_rng *rng, const draw *d, tally *t)
{
    linear_dae sys;
    draw_dae(rng, d, &sys);
    int n = sys.n, q = sys.q, integ[MAXN], alg[MAXN];
    double v0[MAXN], v1[MAXN], y[MAXN], ydot[MAXN], v[MAXN], vdot[MAXN];
    draw_state(rng, &sys, v0);
    draw_state(rng, &sys, v1);
    cdyn_dae *dae = cdyn_dae_create(n, NULL);
    ck_assert_ptr_nonnull(dae);
    cdyn_status st = dae_prepare(dae, &sys, v0);
    int rank = cdyn_dae_ode_size(dae); /* the length of y (r - q in the index-2 form) */
    if (st == CDYN_OK && cdyn_dae_split_states(dae, integ, alg) != rank) st = CDYN_ERR_ARG;
    if (st == CDYN_OK) {
        for (int j = 0; j < rank; ++j) y[j] = v1[integ[j]];
        st = cdyn_dae_rhs(dae, 0.0, y, ydot);
    }
    if (st == CDYN_OK) st = cdyn_dae_last_state(dae, v, vdot);
    if (st != CDYN_OK || rank != n - q) {
        /* no usable split of the library's: the reference takes the
         * massless states as algebraic. With a misjudged rank of M (the
         * library integrates fewer states) the OK answer is checked as a
         * solution of the true DAE at its own values of the integrated
         * states. */
        true_split(&sys, integ, alg);
        for (int j = 0; j < n - q; ++j) y[j] = st == CDYN_OK ? v[integ[j]] : v1[integ[j]];
    }
    scaled_system ref_sys;
    quad x[MAXK];
    dae_system(&sys, integ, alg, y, &ref_sys);
    double cond = reference_solve(&ref_sys, x);
    double err = st == CDYN_OK ? dae_error(&sys, integ, alg, y, v, vdot, x) : 0.0;
    record(t, d, n + q, cond, st, err, cdyn_dae_last_error(dae));
    cdyn_dae_free(dae);
}

/* ------------------------------------------------------------------------ */
/* Checks of the reference and of the rule itself                            */

START_TEST(quad_reference_agrees_with_lapack_on_well_conditioned_systems)
{
    /* cond(M) = cond(Phi_q) = 1 and unit scales: cond(K) is small, so
     * LAPACK's dgesv (testutil) must agree with the quad solve to 1e-13. */
    for (int i = 0; i < 200; ++i) {
        tu_rng rng;
        tu_rng_seed(&rng, 0x5EED0000ull + (unsigned long long)i);
        draw d = draw_params(&rng, 0x5EED0000ull + (unsigned long long)i, 0);
        d.scaled = 0;
        d.cond_m = d.cond_phi = 1.0;
        mechanism mc;
        scaled_system sys;
        quad ref[MAXK], x[MAXK];
        double cond = draw_kkt(&rng, &d, &mc, &sys, ref);
        int n = mc.n, m = mc.m;
        ck_assert_msg(cond <= 1e2, "cond %.3e", cond);
        double c[MAXM], vdot[MAXN], lam[MAXM];
        for (int k = 0; k < m; ++k) c[k] = -mc.s[k];
        ck_assert_int_eq(tu_kkt_solve(n, m, mc.M, n, mc.Phi, m, mc.Q, c, vdot, lam), 0);
        for (int j = 0; j < n; ++j) x[j] = vdot[j];
        for (int k = 0; k < m; ++k) x[n + k] = -lam[k]; /* T1's lambda is minus T4's */
        double e = worse(qref_relerr(n, x, ref), qref_relerr(m, x + n, ref + n));
        ck_assert_msg(e <= 1e-13, "seed %d: dgesv and quad differ by %.3e", i, e);
    }
}
END_TEST

START_TEST(quad_reference_recovers_a_planted_solution_at_any_scale)
{
    /* Plant x in the unscaled frame, form b = K x in quad: the reference must
     * give x back to quad accuracy times cond, whatever the scales. */
    for (int i = 0; i < 200; ++i) {
        unsigned long long seed = 0xB1A57000ull + (unsigned long long)i;
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        draw d = draw_params(&rng, seed, 0);
        mechanism mc;
        draw_mechanism(&rng, &d, &mc);
        int n = mc.n, m = mc.m, N = n + m;
        quad planted[MAXK], x[MAXK];
        scaled_system sys;
        kkt_system(&mc, &sys); /* its right-hand side is replaced below */
        for (int k = 0; k < N; ++k) planted[k] = tu_uniform(&rng);
        for (int r = 0; r < N; ++r) {
            quad sum = 0;
            for (int k = 0; k < N; ++k) sum += sys.K[r + (size_t)k * N] * (planted[k] / sys.col[k]);
            sys.b[r] = sum;
        }
        double cond = reference_solve(&sys, x);
        double e = qref_relerr(N, x, planted);
        ck_assert_msg(e <= 1e-28 * cond, "seed %llu: planted error %.3e, cond %.3e", seed, e,
                      cond);
    }
}
END_TEST

/* Control: LAPACK's LU of the whole bordered matrix after the unit scales
 * are divided out (in quad, then rounded: a perturbation of eps per entry).
 * Backward stable in the frame where cond is measured, it must meet the
 * rule on every system, scaled or not; this checks C and the mapping of
 * scaled answers back to the unscaled frame. */
static void control_solve(const scaled_system *sys, double *x)
{
    int N = sys->N, one = 1, info = 0, ipiv[MAXK];
    quad Kq[MAXK * MAXK], bq[MAXK];
    double K[MAXK * MAXK];
    unscaled(sys, Kq, bq);
    for (int i = 0; i < N * N; ++i) K[i] = (double)Kq[i];
    for (int i = 0; i < N; ++i) x[i] = (double)bq[i];
    dgesv_(&N, &one, K, &N, ipiv, x, &N, &info);
    ck_assert_int_eq(info, 0);
    for (int i = 0; i < N; ++i) x[i] = (double)((quad)x[i] / sys->col[i]); /* library frame */
}

static void run_lapack_control(tu_rng *rng, const draw *d, tally *t)
{
    mechanism mc;
    scaled_system sys;
    quad ref[MAXK];
    double cond = draw_kkt(rng, d, &mc, &sys, ref);
    int n = mc.n, m = mc.m;
    double x[MAXK];
    control_solve(&sys, x);
    record(t, d, n + m, cond, CDYN_OK, answer_error(&sys, n, x, ref), NULL);
}

START_TEST(bordered_lu_control_meets_the_rule)
{
    tally t;
    tally_init(&t, "control: LAPACK dgesv on the unscaled [M Phi^T; Phi 0]", DBL_EPSILON);
    sweep(&t, 1000, 0xC0E7000ull, 0, run_lapack_control);
    tally_check(&t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The formulations                                                          */

START_TEST(lagrange_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_constraint_lagrange (KKT, T4.4)", DBL_EPSILON);
    sweep(&t, 1500, 0x1A6000ull, 0, run_lagrange);
    tally_check(&t);
}
END_TEST

START_TEST(baumgarte_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_constraint_lagrange with Baumgarte / generalized gains (T4.5-T4.6)",
               DBL_EPSILON);
    sweep(&t, 1000, 0xBA0000ull, 0, run_baumgarte);
    tally_check(&t);
}
END_TEST

START_TEST(reactions_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_constraint_reactions (T4.3)", DBL_EPSILON);
    sweep(&t, 1000, 0x4EAC000ull, 0, run_reactions);
    tally_check(&t);
}
END_TEST

START_TEST(pseudoinverse_full_rank_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_constraint_pseudoinverse, full rank: equals KKT (T4.7)", DBL_EPSILON);
    sweep(&t, 800, 0x9170000ull, 0, run_pseudoinverse_full_rank);
    tally_check(&t);
}
END_TEST

START_TEST(pseudoinverse_redundant_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_constraint_pseudoinverse, copied rows: min-norm lambda (T4.7)",
               DBL_EPSILON);
    sweep(&t, 800, 0x4ED0000ull, 0, run_pseudoinverse_redundant);
    tally_check(&t);
}
END_TEST

START_TEST(nullspace_solve_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_nullspace_factor + cdyn_nullspace_solve (T1)", DBL_EPSILON);
    sweep(&t, 1500, 0x0115000ull, 0, run_nullspace);
    tally_check(&t);
}
END_TEST

START_TEST(dae_rhs_never_wrong_ok)
{
    tally t;
    tally_init(&t, "cdyn_dae_rhs, linear index-1 DAE, selection mass (T3.3)", NEWTON_TOL);
    sweep(&t, 1000, 0xDAE000ull, 1, run_dae);
    tally_check(&t);
}
END_TEST

/* Units 1e+-150 apart (coordinates and constraint rows, entries up to
 * about 1e+-300): the KKT equilibration's sweeps once stopped there with M
 * negligible beside Phi_q (1e-65), and a wrong frame let the certificate's
 * floor accept answers 1e33 off with CDYN_OK (16 of 1500 Lagrange systems;
 * every constraint formulation had some). kkt.c now fixes the frame's free
 * scale by M. Every constraint formulation and the null space, the same
 * rule, no refusal of a well-posed system. (The DAE is left out: at these
 * units it refuses 3 % of its well-posed systems, honestly, with
 * CDYN_ERR_SINGULAR or NOCONV.) */
START_TEST(formulations_never_wrong_ok_with_units_1e150_apart)
{
    static const struct {
        const char *name;
        int count;
        unsigned long long base;
        system_fn run;
    } cases[] = {
        {"lagrange, units 1e+-150", 600, 0xE1A6000ull, run_lagrange},
        {"lagrange with Baumgarte / gains, units 1e+-150", 400, 0xEBA0000ull, run_baumgarte},
        {"reactions, units 1e+-150", 400, 0xE4EA000ull, run_reactions},
        {"pseudoinverse full rank, units 1e+-150", 400, 0xE917000ull, run_pseudoinverse_full_rank},
        {"pseudoinverse copied rows, units 1e+-150", 400, 0xE4ED000ull,
         run_pseudoinverse_redundant},
        {"nullspace factor + solve, units 1e+-150", 600, 0xE011500ull, run_nullspace},
    };
    g_scale_exp = 150;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        tally t;
        tally_init(&t, cases[k].name, DBL_EPSILON);
        sweep(&t, cases[k].count, cases[k].base, 0, cases[k].run);
        tally_check(&t);
    }
    g_scale_exp = 8;
}
END_TEST

static Suite *accuracy_suite(void)
{
    Suite *s = suite_create("accuracy");

    TCase *ref = tcase_create("reference");
    tcase_set_timeout(ref, 300);
    tcase_add_test(ref, quad_reference_agrees_with_lapack_on_well_conditioned_systems);
    tcase_add_test(ref, quad_reference_recovers_a_planted_solution_at_any_scale);
    tcase_add_test(ref, bordered_lu_control_meets_the_rule);
    suite_add_tcase(s, ref);

    TCase *form = tcase_create("formulations");
    tcase_set_timeout(form, 300);
    tcase_add_test(form, lagrange_never_wrong_ok);
    tcase_add_test(form, baumgarte_never_wrong_ok);
    tcase_add_test(form, reactions_never_wrong_ok);
    tcase_add_test(form, pseudoinverse_full_rank_never_wrong_ok);
    tcase_add_test(form, pseudoinverse_redundant_never_wrong_ok);
    tcase_add_test(form, nullspace_solve_never_wrong_ok);
    tcase_add_test(form, dae_rhs_never_wrong_ok);
    tcase_add_test(form, formulations_never_wrong_ok_with_units_1e150_apart);
    suite_add_tcase(s, form);
    return s;
}

int main(void)
{
    return tu_run_suite(accuracy_suite());
}
