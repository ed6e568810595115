/* The bordered system helpers of kkt.h: Ruiz equilibration and the
 * componentwise backward error. */
#include "kkt.h"

#include "internal.h"
#include "rank.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* max_i |g_i| s_i (len entries), in four independent chains. */
static double column_max(int len, const double *g, const double *s)
{
    double a[4] = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= len; i += 4)
        for (int k = 0; k < 4; ++k) a[k] = cdyn__larger(a[k], fabs(g[i + k]) * s[i + k]);
    for (; i < len; ++i) a[0] = cdyn__larger(a[0], fabs(g[i]) * s[i]);
    return cdyn__larger(cdyn__larger(a[0], a[1]), cdyn__larger(a[2], a[3]));
}

/* rows[i] = max(rows[i], max_j |A_ij| s_j) over the columns j of A (len
 * rows, ld lda, cols columns): elementwise over a column (it vectorizes),
 * four columns per pass over rows. */
static void fold_row_maxima(int len, int cols, const double *A, int lda, const double *s,
                            double *rows)
{
    int j = 0;
    for (; j + 4 <= cols; j += 4) {
        const double *a0 = A + (size_t)j * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        double s0 = s[j], s1 = s[j + 1], s2 = s[j + 2], s3 = s[j + 3];
        for (int i = 0; i < len; ++i) {
            double v0 = fabs(a0[i]) * s0, v1 = fabs(a1[i]) * s1;
            double v2 = fabs(a2[i]) * s2, v3 = fabs(a3[i]) * s3;
            v0 = v1 > v0 ? v1 : v0;
            v2 = v3 > v2 ? v3 : v2;
            v0 = v2 > v0 ? v2 : v0;
            rows[i] = v0 > rows[i] ? v0 : rows[i];
        }
    }
    for (; j < cols; ++j) {
        const double *a = A + (size_t)j * lda;
        for (int i = 0; i < len; ++i) {
            double v = fabs(a[i]) * s[j];
            rows[i] = v > rows[i] ? v : rows[i];
        }
    }
}

/* The parts of a sweep's row maxima, each without its own row's factor
 * (the factors are powers of two, so |s_i a_ij s_j| = |a_ij| s_j times s_i
 * exactly): mass_rows[i] = max_j |M_ij| sq_j and g_rows[i] = max_j |G_ij|
 * sq_j. Both depend on sq only. Returns the largest |entry| of the scaled
 * M. */
static double mass_and_g_rows(int n, int m, const double *M, int ldm, const double *G, int ldg,
                              const double *sq, double *mass_rows, double *g_rows)
{
    for (int j = 0; j < n; ++j) mass_rows[j] = 0.0;
    for (int i = 0; i < m; ++i) g_rows[i] = 0.0;
    fold_row_maxima(n, n, M, ldm, sq, mass_rows);
    fold_row_maxima(m, n, G, ldg, sq, g_rows);
    double mass_largest = 0.0;
    for (int i = 0; i < n; ++i) mass_largest = cdyn__larger(mass_largest, mass_rows[i] * sq[i]);
    return mass_largest;
}

/* gt_rows[j] = max_i |G_ij| sg_i (row j of G^T without sq_j): depends on
 * sg only. */
static void gt_rows_of(int n, int m, const double *G, int ldg, const double *sg, double *gt_rows)
{
    for (int j = 0; j < n; ++j) gt_rows[j] = m > 0 ? column_max(m, G + (size_t)j * ldg, sg) : 0.0;
}

/* The balanced bordered matrix keeps one degree of freedom: sq times a
 * and sg over a leave G~ unchanged and scale M~ by a^2. Where the
 * constraints dominate every row, the sweeps can stop with M~ negligible
 * beside G~ (1e-65 has been seen with units 1e+-150 apart), a frame in
 * which the unknowns' units, the path and the certificate's floor are all
 * wrong for the motions G leaves free. Raising M~'s largest entry (given)
 * into [1/2, 2) fixes that choice the same way whatever the units, and
 * keeps every row's largest entry below 2. */
static void balance_mass_against_constraints(int n, int m, double largest, double *sq,
                                             double *sg)
{
    if (!(largest > 0.0 && largest < 0.5)) return;
    double a = cdyn__sym_scale(largest); /* a^2 largest in [1/2, 2) */
    for (int j = 0; j < n; ++j) /* factors stay normal numbers */
        if (!(sq[j] * a < 0x1p+1000)) return;
    for (int i = 0; i < m; ++i)
        if (!(sg[i] / a > 0x1p-1000)) return;
    for (int j = 0; j < n; ++j) sq[j] *= a;
    for (int i = 0; i < m; ++i) sg[i] /= a;
}

/* Is the largest entry r of a row balanced (in [1/2, 2), or the row zero)? */
static int balanced_row(double r) { return !(r > 0.0) || (r >= 0.5 && r < 2.0); }

void cdyn__kkt_equilibrate(int n, int m, const double *M, int ldm, const double *G, int ldg,
                           double *sq, double *sg, double *work)
{
    double *mass_rows = work, *gt_rows = work + n, *g_rows = work + 2 * (size_t)n;
    double mass_largest = 0.0;
    for (int j = 0; j < n; ++j) sq[j] = 1.0;
    for (int i = 0; i < m; ++i) sg[i] = 1.0;
    /* a sweep recomputes only the parts whose factors the last one changed
     * (sg alone changes in most sweeps after the first: G is then the only
     * pass) */
    int sq_changed = 1, sg_changed = 1, balanced = 0;
    for (int sweep = 0; sweep < 64; ++sweep) {
        if (sq_changed) mass_largest = mass_and_g_rows(n, m, M, ldm, G, ldg, sq, mass_rows, g_rows);
        if (sg_changed) gt_rows_of(n, m, G, ldg, sg, gt_rows);
        balanced = 1;
        for (int j = 0; j < n; ++j)
            balanced &= balanced_row(cdyn__larger(mass_rows[j], gt_rows[j]) * sq[j]);
        for (int i = 0; i < m; ++i) balanced &= balanced_row(g_rows[i] * sg[i]);
        if (balanced) break;
        sq_changed = sg_changed = 0;
        for (int j = 0; j < n; ++j) {
            double f = cdyn__sym_scale(cdyn__larger(mass_rows[j], gt_rows[j]) * sq[j]);
            sq_changed |= f != 1.0;
            sq[j] *= f;
        }
        for (int i = 0; i < m; ++i) {
            double f = cdyn__sym_scale(g_rows[i] * sg[i]);
            sg_changed |= f != 1.0;
            sg[i] *= f;
        }
    }
    if (!balanced && sq_changed) /* the last sweep changed sq after it */
        mass_largest = mass_and_g_rows(n, m, M, ldm, G, ldg, sq, mass_rows, g_rows);
    balance_mass_against_constraints(n, m, mass_largest, sq, sg);
}

/* |r| / bound with the convention of kkt.h for a zero bound. */
static double ratio(double r, double bound)
{
    if (bound > 0.0) {
        double q = fabs(r) / bound;
        return q == q ? q : INFINITY; /* a NaN residual certifies nothing */
    }
    return r == 0.0 ? 0.0 : INFINITY;
}

CDYN__SIZED double backward_error_sized(int n, int m, const double *M, int ldm, const double *G,
                                        int ldg, double s, const double *H, int ldh,
                                        const double *x, const double *y, const double *f,
                                        const double *g, const double *ux, const double *uy,
                                        const int *skip, double *restrict rf, double *restrict rg,
                                        double *restrict work)
{
    double *bound_f = work, *bound_g = work + n, eta = 0.0;
    for (int j = 0; ux && j < n; ++j) eta = cdyn__larger(eta, fabs(x[j]) / ux[j]);
    for (int i = 0; uy && i < m; ++i) eta = cdyn__larger(eta, fabs(y[i]) / uy[i]);
    eta *= DBL_EPSILON; /* the rounding of the largest unknown */
    for (int i = 0; i < n; ++i) {
        rf[i] = f[i];
        bound_f[i] = fabs(f[i]);
    }
    for (int i = 0; i < m; ++i) {
        rg[i] = g ? g[i] : 0.0;
        bound_g[i] = fabs(rg[i]);
    }
    for (int j = 0; j < n; ++j) { /* column j of M and H, row j of G^T */
        const double *mcol = M + (size_t)j * ldm;
        double xj = x[j], xj_bound = fabs(xj) + (ux ? ux[j] * eta : 0.0);
        for (int i = 0; i < n; ++i) {
            rf[i] -= mcol[i] * xj;
            bound_f[i] += fabs(mcol[i]) * xj_bound;
        }
        if (m == 0) continue;
        const double *hcol = H + (size_t)j * ldh, *gcol = G + (size_t)j * ldg;
        double gty = 0.0, gty_bound = 0.0;
        for (int i = 0; i < m; ++i) {
            rg[i] -= hcol[i] * xj;
            bound_g[i] += fabs(hcol[i]) * xj_bound;
            gty += gcol[i] * y[i];
            gty_bound += fabs(gcol[i]) * (fabs(y[i]) + (uy ? uy[i] * eta : 0.0));
        }
        rf[j] -= s * gty;
        bound_f[j] += gty_bound;
    }
    double worst = 0.0;
    for (int i = 0; i < n; ++i) worst = cdyn__larger(worst, ratio(rf[i], bound_f[i]));
    for (int i = 0; i < m; ++i)
        if (!(skip && skip[i])) worst = cdyn__larger(worst, ratio(rg[i], bound_g[i]));
    return worst;
}

double cdyn__kkt_backward_error(int n, int m, const double *M, int ldm, const double *G,
                                int ldg, double s, const double *H, int ldh, const double *x,
                                const double *y, const double *f, const double *g,
                                const double *ux, const double *uy, const int *skip,
                                double *rf, double *rg, double *work)
{
    double omega = 0.0;
#define BACKWARD_ERROR(N)                                                                         \
    omega = backward_error_sized(N, m, M, ldm, G, ldg, s, H, ldh, x, y, f, g, ux, uy, skip, rf, rg, \
                                 work)
    CDYN__FIXED_SIZE(n, BACKWARD_ERROR);
#undef BACKWARD_ERROR
    return omega;
}

double cdyn__kkt_backward_tolerance(int n, int m) { return 8.0 * (n + m + 2) * DBL_EPSILON; }
