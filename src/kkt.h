/* The bordered (KKT) system shared by cdyn_constraint (THEORY T4.3-T4.7)
 * and cdyn_nullspace (T1.1):
 *
 *     [ M   s G^T ] [x]   [f]        M n x n symmetric, G and H m x n,
 *     [ H   0     ] [y] = [g]        s = +1 or -1
 *
 * Two helpers: a symmetric equilibration of the matrix, so that the choice
 * of a solution path depends on the conditioning of the problem solved and
 * not on the caller's units; and the componentwise backward error of a
 * computed solution, the certificate behind every CDYN_OK of a solve
 * (docs/theory.md, "Certified solves"): with backward error w, the error of
 * the solution is at most about cond(K) w, whatever path produced it.
 */
#ifndef CDYN_KKT_H
#define CDYN_KKT_H

/* Powers of two sq (n) and sg (m) that equilibrate the symmetric bordered
 * matrix [M G^T; G 0], reading both triangles of M (Ruiz: each sweep
 * divides every row and column by the square root of its largest entry,
 * rounded to a power of two, until every row's largest entry is within
 * [1/2, 2), from sq = sg = 1; at most 64 sweeps, each halving the spread
 * of exponents; a sweep passes over M only when the last one changed sq).
 * The one freedom left, sq a and sg / a, is then
 * fixed by raising M~'s largest entry into [1/2, 2) when it is smaller, so
 * that M is not left negligible beside G. Rows that are entirely zero keep
 * the factor 1. work: 2 n + m doubles. */
void cdyn__kkt_equilibrate(int n, int m, const double *M, int ldm, const double *G, int ldg,
                           double *sq, double *sg, double *work);

/* Residual rf = f - M x - s G^T y (n), rg = g - H x (m; g NULL means 0)
 * and the backward error of (x, y):
 *     max_i |r_i| / (|K| (|[x; y]| + eta u) + |[f; g]|)_i
 * with u = [ux; uy] the unknowns' units of an equilibrated frame (ux n,
 * uy m; either may be NULL: no floor for those unknowns) and eta = eps
 * max_j |[x; y]_j| / u_j. Without the floor this is the componentwise
 * (Oettli-Prager) backward error; the floor lets an unknown that is zero up
 * to the rounding of the largest (in the equilibrated frame) carry that
 * rounding, which a componentwise measure cannot (a row whose terms all
 * vanish would otherwise need its residual to be exactly 0). Both parts are
 * unchanged by any scaling of rows and columns when u comes from an
 * equilibration. A row whose bound is 0 contributes 0 if its residual is 0,
 * else Inf. Rows i of the bottom block with skip[i] != 0 (skip may be NULL)
 * are left out of the maximum (redundant rows of the pseudo-inverse form);
 * their residual is still computed. rf, rg and work must not alias the
 * inputs or each other.
 * work: n + m doubles. */
double cdyn__kkt_backward_error(int n, int m, const double *M, int ldm, const double *G,
                                int ldg, double s, const double *H, int ldh, const double *x,
                                const double *y, const double *f, const double *g,
                                const double *ux, const double *uy, const int *skip,
                                double *rf, double *rg, double *work);

/* The backward error a certified solve must reach: a few rounding errors
 * per entry of a row of the (n + m) system. */
double cdyn__kkt_backward_tolerance(int n, int m);

#endif
