/* Linearization of a mechanism's equations of motion: the Jacobian of the
 * right-hand side y' = f(t, y), y = [q; q'] (THEORY T4, any formulation),
 * and the state matrix of the minimum-order (partitioned) system
 * z' = f(t, z), z = [q_ind; q'_ind] (T4.10), whose eigenvalues are the
 * mechanism's linear modes at an operating point, with its input matrix
 * for forces that depend on inputs u (exact: q'' is linear in Q).
 *
 * Both are extrapolated central differences: for each column,
 * D(h) = (g(x + h e_j) - g(x - h e_j)) / 2h at h and 2h, and
 * (4 D(h) - D(2h)) / 3, whose truncation error is O(h^4). The step is
 * large (1e-3 of the state's magnitude), because the partitioned
 * right-hand side carries the rounding of a Newton solve (about its
 * tolerance, 1e-10 relative by default) and that, divided by h, is the
 * other error: about 1e-7 relative all told. g is the right-hand side
 * itself only for the pseudo-inverse below full rank. In the Lagrange form
 * (and the pseudo-inverse at full rank) x = [q''; lambda] solves
 * K(y) x = b(y), K = [M Phi_q^T; Phi_q 0], b = [Q; s] (T4.4-T4.6), and
 * differentiating along e_j gives K dx/dy_j = db - dK x at fixed x: the
 * differences are those of the model's terms, and each column is one
 * solve with the factors of the evaluation at y
 * (cdyn__constraint_solve_again), in place of 8 right-hand sides each with
 * its own factorization. The penalty form (T4.8) has the same
 * M q'' + Phi_q^T lambda = Q with lambda = alpha (Phi_q q'' - s), so the
 * same [top; bottom] = db - dK x goes to its own matrix:
 * (M + Phi_q^T alpha Phi_q) dq'' = top + Phi_q^T alpha bottom.
 */
#include "constraint_internal.h"
#include "linalg.h"
#include "mbs_internal.h"

#include <math.h>
#include <string.h>

#define LIN_STEP 1e-3

typedef cdyn_status (*rhs_fn)(cdyn_mbs *mbs, double t, const double *x, double *fx);

/* The magnitude of entry j of x (size 2h: coordinates, then speeds): the
 * caller's scale, else |x_j|, else the largest |x| of its half; a speed
 * half that is all zero takes the coordinates' magnitude per second. */
static double magnitude(const double *x, const double *scale, int half, int j)
{
    if (scale) return scale[j];
    if (x[j] != 0.0) return fabs(x[j]);
    int lo = j < half ? 0 : half;
    double largest = 0.0;
    for (int i = lo; i < lo + half; ++i) largest = fmax(largest, fabs(x[i]));
    if (largest > 0.0) return largest;
    if (lo == half)
        for (int i = 0; i < half; ++i) largest = fmax(largest, fabs(x[i]));
    return largest > 0.0 ? largest : 1.0;
}

/* CDYN_ERR_ARG unless scale (size values; may be NULL) is finite and > 0. */
static cdyn_status check_scale(cdyn_mbs *mbs, const char *fn, int size, const double *scale)
{
    for (int j = 0; j < size && scale; ++j)
        if (!(scale[j] > 0.0) || isinf(scale[j]))
            return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: scale[%d] = %g is not finite and > 0",
                              fn, j, scale[j]);
    return CDYN_OK;
}

/* The step of column j: LIN_STEP times its magnitude, made representable. */
static double column_step(const double *x, const double *scale, int half, int j)
{
    double h = LIN_STEP * magnitude(x, scale, half, j);
    volatile double ahead = x[j] + h;
    return ahead - x[j];
}

/* What the evaluations commit and a failed call must give back: the
 * reactions, the residuals, the partition's warm start and verdict. */
typedef struct {
    double *reaction_force, *reaction_mult, *y_part;
    int has_reactions, has_residuals, event;
    double residual_position, residual_velocity, quality, best_quality;
} committed;

static void save_committed(cdyn_mbs *mbs, double *space, committed *c)
{
    int n = mbs->n;
    c->reaction_force = space;
    c->reaction_mult = space + n;
    c->y_part = space + n + mbs->m1;
    memcpy(c->reaction_force, mbs->reaction_force, sizeof(double) * (size_t)n);
    memcpy(c->reaction_mult, mbs->reaction_mult, sizeof(double) * (size_t)mbs->m1);
    memcpy(c->y_part, mbs->y_part, sizeof(double) * 2 * (size_t)n);
    c->has_reactions = mbs->has_reactions;
    c->has_residuals = mbs->has_residuals;
    c->event = mbs->event;
    c->residual_position = mbs->residual_position;
    c->residual_velocity = mbs->residual_velocity;
    c->quality = mbs->quality;
    c->best_quality = mbs->best_quality;
}

static void restore_committed(cdyn_mbs *mbs, const committed *c)
{
    int n = mbs->n;
    memcpy(mbs->reaction_force, c->reaction_force, sizeof(double) * (size_t)n);
    memcpy(mbs->reaction_mult, c->reaction_mult, sizeof(double) * (size_t)mbs->m1);
    memcpy(mbs->y_part, c->y_part, sizeof(double) * 2 * (size_t)n);
    mbs->has_reactions = c->has_reactions;
    mbs->has_residuals = c->has_residuals;
    mbs->event = c->event;
    mbs->residual_position = c->residual_position;
    mbs->residual_velocity = c->residual_velocity;
    mbs->quality = c->quality;
    mbs->best_quality = c->best_quality;
}

/* A (size x size, lda) = df/dx at (t, x) by extrapolated central
 * differences of f; ends with an evaluation at x itself, so that the
 * object's state (warm starts, reactions) is that of (t, x). Written only
 * on success. */
static cdyn_status difference_jacobian(cdyn_mbs *mbs, const char *fn, rhs_fn f, int size,
                                       double t, const double *x, const double *scale, double *A,
                                       int lda)
{
    double *jac = mbs->lin_work, *xs = jac + (size_t)size * size;
    double *fp = xs + size, *fm = fp + size, *fp2 = fm + size, *fm2 = fp2 + size,
           *base = fm2 + size;
    int half = size / 2;
    cdyn_status st = check_scale(mbs, fn, size, scale);
    if (st) return st;
    committed before;
    save_committed(mbs, base + size, &before);
    memcpy(xs, x, sizeof(double) * (size_t)size);
    st = f(mbs, t, xs, base); /* a failure at x itself is reported as such */
    for (int j = 0; st == CDYN_OK && j < size; ++j) {
        double h = column_step(x, scale, half, j);
        xs[j] = x[j] + h;
        st = f(mbs, t, xs, fp);
        if (st == CDYN_OK) {
            xs[j] = x[j] - h;
            st = f(mbs, t, xs, fm);
        }
        if (st == CDYN_OK) {
            xs[j] = x[j] + 2.0 * h;
            st = f(mbs, t, xs, fp2);
        }
        if (st == CDYN_OK) {
            xs[j] = x[j] - 2.0 * h;
            st = f(mbs, t, xs, fm2);
        }
        xs[j] = x[j];
        for (int i = 0; st == CDYN_OK && i < size; ++i) {
            double d1 = (fp[i] - fm[i]) / (2.0 * h), d2 = (fp2[i] - fm2[i]) / (4.0 * h);
            jac[i + (size_t)j * size] = (4.0 * d1 - d2) / 3.0;
        }
    }
    if (st == CDYN_OK) st = f(mbs, t, x, base); /* leave the state at x */
    if (st == CDYN_OK && cdyn__first_nonfinite(size, size, jac, size) >= 0)
        st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: the Jacobian overflowed at t = %g", fn,
                        t);
    if (st != CDYN_OK) {
        restore_committed(mbs, &before);
        return st;
    }
    for (int j = 0; j < size; ++j)
        memcpy(A + (size_t)j * lda, jac + (size_t)j * size, sizeof(double) * (size_t)size);
    return CDYN_OK;
}

/* ---- through the evaluation's factorization ------------------------------ */

/* The model's terms at ys, moved from y by delta along column j, added
 * with weight w into the sums dM (n x n), dG (m x n, ld m1), dQ (n) and
 * ds (m) of the difference stencil (phi0, phidot0: Phi and Phi' at y). A
 * coordinate moves M, Q, Phi, Phi_q, Phi' and xi; a speed moves only Q,
 * xi and Phi' = Phi_q q' + Phi_t, by delta times a column of Phi_q (exact:
 * Phi' is linear in q'), so dM and dG are left alone. Summing each term's
 * differences apart, before any product with the solution, keeps a small
 * change of one term from drowning in the rounding of the others (the
 * speeds' terms of a pendulum of 1.3 um are 1e-7 of its gravity terms). */
static cdyn_status add_moved_terms(cdyn_mbs *mbs, const char *fn, double t, const double *ys,
                                   int j, double delta, double w, const double *phi0,
                                   const double *phidot0, double *dM, double *dG, double *dQ,
                                   double *ds)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    const double *q = ys, *qdot = ys + n, *phi = phi0;
    cdyn_status st = CDYN_OK;
    if (j < n) {
        st = cdyn__mbs_mass(mbs, fn, t, q);
        if (!st && m > 0) st = cdyn__mbs_phi(mbs, fn, t, q, mbs->Phi);
        if (!st && m > 0)
            st = cdyn__mbs_velocity_constraint(mbs, fn, t, q, qdot, mbs->Phi_q, mbs->Phi_dot);
        phi = mbs->Phi;
    } else {
        const double *g = mbs->kernel->jac + (size_t)(j - n) * m1;
        for (int i = 0; i < m; ++i) mbs->Phi_dot[i] = phidot0[i] + delta * g[i];
    }
    if (!st) st = cdyn__mbs_force(mbs, fn, t, q, qdot);
    if (!st && m > 0) st = cdyn__mbs_xi(mbs, fn, t, q, qdot);
    if (st) return st;
    for (int i = 0; i < n; ++i) dQ[i] += w * mbs->Q[i];
    if (m > 0) { /* s = xi - K_D Phi' - K_P Phi (T4.6), through vec_m */
        cdyn__constraint_accel_rhs(mbs->kernel, phi, mbs->Phi_dot, mbs->xi_val, mbs->vec_m);
        for (int i = 0; i < m; ++i) ds[i] += w * mbs->vec_m[i];
    }
    if (j >= n) return CDYN_OK;
    for (size_t e = 0; e < (size_t)n * n; ++e) dM[e] += w * mbs->M[e];
    for (int col = 0; col < n; ++col)
        for (int i = 0; i < m; ++i) dG[i + (size_t)col * m1] += w * mbs->Phi_q[i + (size_t)col * m1];
    return CDYN_OK;
}

/* J = d ydot / dy (2n x 2n) at (t, y): one evaluation at y, then per
 * column the extrapolated central differences dK, db of the model's terms,
 * and the solve of db - dK [q''; lambda] with the evaluation's factors (the
 * file's comment). *applies = 0, with nothing written and the object as
 * before the call, when the kernel kept no such factors (the
 * pseudo-inverse below full rank) or a column's solve is not certified:
 * the caller then differences the right-hand side. */
static cdyn_status kkt_jacobian(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                                const double *scale, double *J, int ldj, int *applies)
{
    static const double steps[4] = {1.0, -1.0, 2.0, -2.0};
    static const double weights[4] = {2.0 / 3.0, -2.0 / 3.0, -1.0 / 12.0, 1.0 / 12.0};
    int n = mbs->n, m = mbs->m, m1 = mbs->m1, size = 2 * n, nm = n + m1;
    double *jac = mbs->lin_work, *dM = jac + (size_t)size * size, *dG = dM + (size_t)n * n,
           *ys = dG + (size_t)n * m1, *x = ys + size, *rhs = x + nm, *dx = rhs + nm,
           *phi0 = dx + nm, *phidot0 = phi0 + m1, *space = phidot0 + m1;
    double *dQ = rhs, *ds = rhs + n;
    *applies = 1;
    cdyn_status st = check_scale(mbs, fn, size, scale);
    if (st) return st;
    committed before;
    save_committed(mbs, space, &before);
    st = cdyn_mbs_rhs(mbs, t, y, jac); /* the factors, and x, at y */
    if (st == CDYN_OK && !mbs->kernel->reusable) *applies = 0;
    if (st == CDYN_OK && *applies) {
        memcpy(x, jac + n, sizeof(double) * (size_t)n);
        memcpy(x + n, mbs->reaction_mult, sizeof(double) * (size_t)m);
        memcpy(phi0, mbs->Phi, sizeof(double) * (size_t)m);
        memcpy(phidot0, mbs->Phi_dot, sizeof(double) * (size_t)m);
        memcpy(ys, y, sizeof(double) * (size_t)size);
    }
    for (int j = 0; st == CDYN_OK && *applies && j < size; ++j) {
        double h = column_step(y, scale, n, j);
        memset(rhs, 0, sizeof(double) * (size_t)(n + m));
        if (j < n) {
            memset(dM, 0, sizeof(double) * (size_t)n * n);
            memset(dG, 0, sizeof(double) * (size_t)n * m1);
        }
        for (int p = 0; st == CDYN_OK && p < 4; ++p) {
            ys[j] = y[j] + steps[p] * h;
            st = add_moved_terms(mbs, fn, t, ys, j, ys[j] - y[j], weights[p] / h, phi0, phidot0,
                                 dM, dG, dQ, ds);
        }
        ys[j] = y[j];
        for (int col = 0; st == CDYN_OK && j < n && col < n; ++col) { /* db - dK x */
            const double *mc = dM + (size_t)col * n, *gc = dG + (size_t)col * m1;
            double gty = 0.0;
            for (int i = 0; i < n; ++i) dQ[i] -= mc[i] * x[col];
            for (int i = 0; i < m; ++i) {
                ds[i] -= gc[i] * x[col];
                gty += gc[i] * x[n + i];
            }
            dQ[col] -= gty;
        }
        if (st == CDYN_OK && !cdyn__constraint_solve_again(mbs->kernel, dQ, ds, dx, dx + n))
            *applies = 0;
        double *column = jac + (size_t)j * size;
        for (int i = 0; st == CDYN_OK && *applies && i < n; ++i) {
            column[i] = j == n + i ? 1.0 : 0.0;
            column[n + i] = dx[i];
        }
    }
    if (st != CDYN_OK || !*applies) {
        restore_committed(mbs, &before);
        return st;
    }
    for (int j = 0; j < size; ++j)
        memcpy(J + (size_t)j * ldj, jac + (size_t)j * size, sizeof(double) * (size_t)size);
    return CDYN_OK;
}

cdyn_status cdyn_mbs_rhs_jacobian(cdyn_mbs *mbs, double t, const double *y, const double *scale,
                                  double *J, int ldj)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_rhs_jacobian";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    int size = 2 * mbs->n;
    if (!y || !J) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "J");
    if (ldj < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: ldj = %d < 2n = %d", fn, ldj, size);
    int applies = 0;
    cdyn_status st = kkt_jacobian(mbs, fn, t, y, scale, J, ldj, &applies);
    if (applies) return st;
    return difference_jacobian(mbs, fn, cdyn_mbs_rhs, size, t, y, scale, J, ldj);
}

cdyn_status cdyn_mbs_partition_jacobian(cdyn_mbs *mbs, double t, const double *z,
                                        const double *scale, double *A, int lda)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_jacobian";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->partitioned)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    int size = 2 * (mbs->n - mbs->m);
    if (!z || !A) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !z ? "z" : "A");
    if (lda < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: lda = %d < 2d = %d", fn, lda, size);
    return difference_jacobian(mbs, fn, cdyn_mbs_partition_rhs, size, t, z, scale, A, lda);
}

cdyn_status cdyn_mbs_partition_input_matrix(cdyn_mbs *mbs, double t, const double *z, int inputs,
                                            const double *Qu, int ldqu, double *B, int ldb)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_input_matrix";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->partitioned)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    int n = mbs->n, d = n - mbs->m, size = 2 * d;
    if (!z || !Qu || !B)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !z ? "z" : !Qu ? "Qu" : "B");
    if (inputs < 1 || ldqu < n || ldb < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                          "%s: inputs = %d (>= 1), ldqu = %d (>= n = %d), ldb = %d (>= 2d = %d)",
                          fn, inputs, ldqu, n, ldb, size);
    size_t b_bytes = sizeof(double) * ((size_t)ldb * (inputs - 1) + size);
    if (cdyn__overlap(B, b_bytes, z, sizeof(double) * (size_t)size) ||
        cdyn__overlap(B, b_bytes, Qu, sizeof(double) * ((size_t)ldqu * (inputs - 1) + n)))
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: B overlaps z or Qu", fn);
    long bad = cdyn__first_nonfinite(n, inputs, Qu, ldqu);
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: Qu has NaN or Inf (column %ld)", fn,
                          bad / n);
    /* the evaluation at (t, z) leaves M(q) and the partition's
     * factorization at the state; q'' is linear in Q (T1.4-T1.5), so the
     * response to input k is the solve with F = dQ/du_k and c = 0 */
    double *zdot = mbs->lin_work, *response = zdot + size;
    cdyn_status st = cdyn_mbs_partition_rhs(mbs, t, z, zdot);
    /* two passes, so that B stays untouched when a solve fails: the first
     * only looks, the second (the same solves again) writes */
    for (int pass = 0; st == CDYN_OK && pass < 2; ++pass)
        for (int k = 0; st == CDYN_OK && k < inputs; ++k) {
            st = cdyn_nullspace_solve(mbs->partition, mbs->M, n, Qu + (size_t)k * ldqu, NULL,
                                      response, NULL);
            if (st != CDYN_OK)
                return cdyn__fail(mbs->msg, st, "%s at t = %g: %s", fn, t,
                                  cdyn_nullspace_last_error(mbs->partition));
            if (pass == 0) continue;
            double *col = B + (size_t)k * ldb;
            for (int j = 0; j < d; ++j) {
                col[j] = 0.0;
                col[d + j] = response[mbs->ind_index[j]];
            }
        }
    return st;
}
