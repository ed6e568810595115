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

/* One sweep's row maxima of the scaled bordered matrix, reading M's lower
 * triangle only (the matrix is symmetric): row_q (n) and row_g (m) get the
 * largest |entry| of every row. The factors are powers of two, so
 * |s_i a_ij s_j| = |a_ij| s_j times s_i exactly: the loops over a column
 * keep the row factor out and are elementwise (they vectorize), except the
 * column maxima, which run in four chains. Returns the largest |entry| of
 * the scaled M alone. */
static double sweep_maxima(int n, int m, const double *M, int ldm, const double *G, int ldg,
                           const double *sq, const double *sg, double *row_q, double *row_g)
{
    double mass_largest = 0.0;
    for (int j = 0; j < n; ++j) row_q[j] = 0.0;
    for (int i = 0; i < m; ++i) row_g[i] = 0.0;
    for (int j = 0; j < n; ++j) {
        const double *mcol = M + (size_t)j * ldm;
        double sj = sq[j];
        for (int i = j + 1; i < n; ++i) { /* (i, j) in row i, s_i left out */
            double v = fabs(mcol[i]) * sj;
            row_q[i] = v > row_q[i] ? v : row_q[i];
        }
        /* (i, j), i >= j, in row j, s_j left out */
        double own = cdyn__larger(fabs(mcol[j]) * sj, column_max(n - j - 1, mcol + j + 1, sq + j + 1));
        mass_largest = cdyn__larger(mass_largest, own * sj);
        if (m > 0) {
            const double *gcol = G + (size_t)j * ldg;
            for (int i = 0; i < m; ++i) {
                double v = fabs(gcol[i]) * sj;
                row_g[i] = v > row_g[i] ? v : row_g[i];
            }
            own = cdyn__larger(own, column_max(m, gcol, sg)); /* row j of G^T */
        }
        row_q[j] = cdyn__larger(row_q[j], own);
    }
    for (int j = 0; j < n; ++j) row_q[j] *= sq[j];
    for (int i = 0; i < m; ++i) row_g[i] *= sg[i];
    return mass_largest;
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

/* The start of the sweeps: every diagonal entry of M above 1 scaled to
 * about 1 (a light coordinate keeps 1: a constraint may be what pins it,
 * and the sweeps find that), then every row of G to its largest entry in
 * [1/2, 1). Where M's diagonal dominates its rows, as in most mass
 * matrices, the first sweep finds the matrix balanced; from the unit start
 * Ruiz needs about log2 of the spread between M and G more. */
static void first_factors(int n, int m, const double *M, int ldm, const double *G, int ldg,
                          double *sq, double *sg, double *row_g)
{
    for (int j = 0; j < n; ++j) {
        double s = cdyn__sym_scale(fabs(M[j + (size_t)j * ldm]));
        sq[j] = s < 1.0 ? s : 1.0;
    }
    for (int i = 0; i < m; ++i) row_g[i] = 0.0;
    for (int j = 0; j < n && m > 0; ++j) {
        const double *gcol = G + (size_t)j * ldg;
        double sj = sq[j];
        for (int i = 0; i < m; ++i) {
            double v = fabs(gcol[i]) * sj;
            row_g[i] = v > row_g[i] ? v : row_g[i];
        }
    }
    for (int i = 0; i < m; ++i) sg[i] = cdyn__inverse_power_of_two(row_g[i]);
}

void cdyn__kkt_equilibrate(int n, int m, const double *M, int ldm, const double *G, int ldg,
                           double *sq, double *sg, double *work)
{
    double *row_q = work, *row_g = work + n, mass_largest = 0.0;
    first_factors(n, m, M, ldm, G, ldg, sq, sg, row_g);
    int balanced = 0;
    for (int sweep = 0; sweep < 64 && !balanced; ++sweep) {
        mass_largest = sweep_maxima(n, m, M, ldm, G, ldg, sq, sg, row_q, row_g);
        balanced = 1;
        for (int k = 0; k < n + m; ++k)
            if (work[k] > 0.0 && (work[k] < 0.5 || work[k] >= 2.0)) balanced = 0;
        if (balanced) break;
        for (int j = 0; j < n; ++j) sq[j] *= cdyn__sym_scale(row_q[j]);
        for (int i = 0; i < m; ++i) sg[i] *= cdyn__sym_scale(row_g[i]);
    }
    if (!balanced) /* the last sweep's factors were changed after it */
        mass_largest = sweep_maxima(n, m, M, ldm, G, ldg, sq, sg, row_q, row_g);
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
                                        const int *skip, double *rf, double *rg, double *work)
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
