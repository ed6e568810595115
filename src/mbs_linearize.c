/* Linearization of a mechanism's equations of motion: the Jacobian of the
 * right-hand side y' = f(t, y), y = [q; q'] (THEORY T4, any formulation),
 * and the state matrix of the minimum-order (partitioned) system
 * z' = f(t, z), z = [q_ind; q'_ind] (T4.10), whose eigenvalues are the
 * mechanism's linear modes at an operating point, with its input matrix
 * for forces that depend on inputs u (exact: q'' is linear in Q).
 *
 * Both are extrapolated central differences of the right-hand side: for
 * each column, D(h) = (f(x + h e_j) - f(x - h e_j)) / 2h at h and 2h, and
 * (4 D(h) - D(2h)) / 3, whose truncation error is O(h^4). The step is
 * large (1e-3 of the state's magnitude), because the partitioned
 * right-hand side carries the rounding of a Newton solve (about its
 * tolerance, 1e-10 relative by default) and that, divided by h, is the
 * other error: about 1e-7 relative all told.
 */
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
    for (int j = 0; j < size && scale; ++j)
        if (!(scale[j] > 0.0) || isinf(scale[j]))
            return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: scale[%d] = %g is not finite and > 0",
                              fn, j, scale[j]);
    committed before;
    save_committed(mbs, base + size, &before);
    memcpy(xs, x, sizeof(double) * (size_t)size);
    cdyn_status st = f(mbs, t, xs, base); /* a failure at x itself is reported as such */
    for (int j = 0; st == CDYN_OK && j < size; ++j) {
        double h = LIN_STEP * magnitude(x, scale, half, j);
        volatile double ahead = x[j] + h; /* the step actually representable */
        h = ahead - x[j];
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
