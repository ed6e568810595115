/* Coordinate partitioning for mechanisms (THEORY T4.10): independent
 * coordinates from a pivoted QR of Phi_q (cdyn_nullspace), dependent
 * coordinates by Newton, dependent speeds and accelerations by the
 * null-space reduction of T1 with W = Phi_q. */
#include "linalg.h"
#include "mbs_internal.h"
#include "newton_internal.h"

#include <math.h>
#include <string.h>

static cdyn_status need_partition_object(const cdyn_mbs *mbs, const char *fn)
{
    if (cdyn__mbs_check_busy(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->partition)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                          "%s: coordinate partitioning needs 0 < m < n (m = %d, n = %d)", fn,
                          mbs->m, mbs->n);
    return CDYN_OK;
}

static cdyn_status need_partition(const cdyn_mbs *mbs, const char *fn)
{
    cdyn_status st = need_partition_object(mbs, fn);
    if (!st && !mbs->partitioned)
        st = cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    return st;
}

/* need_partition for calls that change the object: they end the validity of
 * the last tangent projection, as every such call does (cdyn__mbs_check_idle). */
static cdyn_status need_partition_to_change(cdyn_mbs *mbs, const char *fn)
{
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    return need_partition(mbs, fn);
}

/* How good a factored partition is (T4.10): its largest sensitivity
 * |d q_dep / d q_ind|, every coordinate in its unit of the chart frame
 * (nullspace_internal.h: the balance of Phi_q's history, so unit-free), at
 * least 1. A fixed-step integrator's error grows with it: the chart's
 * derivatives of order k grow like its power 2k - 1 near a fold. */
static double quality_of(const cdyn_nullspace *ns)
{
    return fmax(1.0, cdyn_nullspace_dependence(ns));
}

/* The chart frame's inertia row (nullspace_internal.h): sqrt of the
 * largest M_jj each coordinate has had, from the M just evaluated. */
static void learn_inertia(cdyn_mbs *mbs)
{
    for (int j = 0; j < mbs->n; ++j)
        mbs->partition_inertia[j] =
            fmax(mbs->partition_inertia[j], sqrt(fabs(mbs->M[j + (size_t)j * mbs->n])));
}

cdyn_status cdyn_mbs_partition(cdyn_mbs *mbs, double t, const double *y)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition";
    cdyn_status st = cdyn__mbs_check_idle(mbs, fn);
    if (!st) st = need_partition_object(mbs, fn);
    if (!st) st = cdyn__mbs_check_state(mbs, fn, t, y);
    if (!st) st = cdyn__mbs_jacobian(mbs, fn, t, y, mbs->Phi_q);
    if (!st) st = cdyn__mbs_mass(mbs, fn, t, y); /* for the frame's inertia */
    if (st) return st;
    size_t inertia_bytes = sizeof(double) * (size_t)mbs->n;
    memcpy(mbs->inertia_saved, mbs->partition_inertia, inertia_bytes);
    learn_inertia(mbs);
    /* T4.10 = T1.2 with W = Phi_q: the best m columns in the chart frame
     * become the dependent coordinates */
    st = cdyn_nullspace_factor(mbs->partition, mbs->Phi_q, mbs->m1);
    if (st) {
        memcpy(mbs->partition_inertia, mbs->inertia_saved, inertia_bytes);
        return cdyn__fail(mbs->msg, st, "%s at t = %g: %s", fn, t,
                          cdyn_nullspace_last_error(mbs->partition));
    }
    memcpy(mbs->y_part, y, sizeof(double) * 2 * (size_t)mbs->n);
    mbs->partitioned = 1;
    mbs->counters.partitions++;
    mbs->event = 0;
    mbs->quality = mbs->best_quality = quality_of(mbs->partition);
    return CDYN_OK;
}

int cdyn_mbs_partition_coordinates(const cdyn_mbs *mbs, int *independent, int *dependent)
{
    if (!mbs) return -1;
    const char *fn = "cdyn_mbs_partition_coordinates";
    if (need_partition(mbs, fn)) return -1;
    int count = cdyn_nullspace_partition(mbs->partition, independent, dependent);
    if (count < 0)
        cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s", fn, cdyn_nullspace_last_error(mbs->partition));
    return count;
}

cdyn_status cdyn_mbs_partition_gather(cdyn_mbs *mbs, const double *y, double *z)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_gather";
    cdyn_status st = need_partition_to_change(mbs, fn);
    if (!st && (!y || !z)) st = cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "z");
    if (st) return st;
    int n = mbs->n, d = n - mbs->m;
    st = cdyn_nullspace_independent(mbs->partition, y, mbs->q_base);
    if (!st) st = cdyn_nullspace_independent(mbs->partition, y + n, mbs->vec_n);
    if (st)
        return cdyn__fail(mbs->msg, st, "%s: %s", fn, cdyn_nullspace_last_error(mbs->partition));
    memcpy(z, mbs->q_base, sizeof(double) * (size_t)d); /* written last: z may alias y */
    memcpy(z + d, mbs->vec_n, sizeof(double) * (size_t)d);
    return CDYN_OK;
}

/* Newton residual: Phi(q, t) with the dependent coordinates x placed into
 * q_work (the independent ones are already there). */
static int dependent_residual(const double *x, double *G, void *user)
{
    cdyn_mbs *mbs = user;
    for (int i = 0; i < mbs->m; ++i) mbs->q_work[mbs->dep_index[i]] = x[i];
    mbs->guard.in_callback++;
    mbs->counters.phi_evaluations++;
    int code = mbs->phi(mbs->t_eval, mbs->q_work, G, mbs->user);
    mbs->guard.in_callback--;
    if (code != 0) mbs->callback_code = code;
    return code;
}

/* Newton Jacobian: the dependent columns of Phi_q. */
static int dependent_jacobian(const double *x, double *J, int ldj, void *user)
{
    cdyn_mbs *mbs = user;
    int m = mbs->m;
    for (int i = 0; i < m; ++i) mbs->q_work[mbs->dep_index[i]] = x[i];
    mbs->guard.in_callback++;
    mbs->counters.jacobian_evaluations++;
    int code = mbs->jacobian(mbs->t_eval, mbs->q_work, mbs->jac_work, mbs->m1, mbs->user);
    mbs->guard.in_callback--;
    if (code != 0) {
        mbs->callback_code = code;
        return code;
    }
    for (int k = 0; k < m; ++k)
        memcpy(J + (size_t)k * ldj, mbs->jac_work + (size_t)mbs->dep_index[k] * mbs->m1,
               sizeof(double) * (size_t)m);
    return 0;
}

/* The consistent state at (t, z) into q_base (q) and qdot_work (q'): the
 * dependent coordinates by Newton on Phi(q, t) = 0 (warm start: the last
 * consistent state), W = Phi_q at q refactored in the current partition,
 * the dependent speeds from Phi_q q' = -Phi_t (T1.2 with c = Phi_t). */
static cdyn_status consistent_state(cdyn_mbs *mbs, const char *fn, double t, const double *z)
{
    int n = mbs->n, m = mbs->m, d = n - m;
    cdyn_nullspace *ns = mbs->partition;
    cdyn_nullspace_partition(ns, mbs->ind_index, mbs->dep_index);
    memcpy(mbs->q_work, mbs->y_part, sizeof(double) * (size_t)n);
    for (int j = 0; j < d; ++j) mbs->q_work[mbs->ind_index[j]] = z[j];
    for (int i = 0; i < m; ++i) mbs->vec_m2[i] = mbs->q_work[mbs->dep_index[i]];
    mbs->t_eval = t;
    cdyn_status st = cdyn_newton_solve(mbs->dependent, dependent_residual, dependent_jacobian,
                                       mbs, mbs->vec_m2);
    if (st)
        return cdyn__fail(mbs->msg, st, "%s at t = %g: dependent coordinates: %s", fn, t,
                          cdyn_newton_last_error(mbs->dependent));
    for (int i = 0; i < m; ++i) mbs->q_work[mbs->dep_index[i]] = mbs->vec_m2[i];
    /* q_work is scratch for the xi differences: keep q apart */
    memcpy(mbs->q_base, mbs->q_work, sizeof(double) * (size_t)n);
    int changed = 0;
    st = cdyn__mbs_jacobian(mbs, fn, t, mbs->q_base, mbs->Phi_q);
    if (!st) st = cdyn_nullspace_update(ns, mbs->Phi_q, mbs->m1, &changed);
    if (!st && changed) {
        mbs->event = 1;
        mbs->partitioned = 0;
        st = cdyn__fail(mbs->msg, CDYN_ERR_SINGULAR,
                        "%s at t = %g: the dependent block became singular; repartition "
                        "from the last state",
                        fn, t);
    }
    if (!st) st = cdyn__mbs_phi_t(mbs, fn, t, mbs->q_base, mbs->Phi_q, mbs->Phi_t);
    if (!st) st = cdyn_nullspace_complete(ns, z + d, mbs->Phi_t, mbs->qdot_work);
    return st;
}

/* The event (mbs.h): the current partition's quality more than `limit`
 * times that of the partition a pivoted QR would choose now at this Phi_q.
 * Every quality is >= 1, so the probe is needed only when the current one
 * passes the limit itself. */
static void watch_partition(cdyn_mbs *mbs)
{
    mbs->quality = quality_of(mbs->partition);
    mbs->best_quality = mbs->quality;
    mbs->event = 0;
    if (!(mbs->quality > mbs->partition_limit)) return;
    if (cdyn_nullspace_factor(mbs->probe, mbs->Phi_q, mbs->m1) != CDYN_OK) return;
    mbs->best_quality = fmin(mbs->quality, quality_of(mbs->probe));
    mbs->event = mbs->quality > mbs->partition_limit * mbs->best_quality;
}

/* The end of a failed call after the dependent coordinates' solve may
 * have converged: the magnitudes it learned are put back (held, saved at
 * the call's start), so that a call that fails leaves no scale behind
 * (docs/reliability.md, "A failed call leaves no learned magnitude"). */
static cdyn_status failed_call(cdyn_mbs *mbs, const double *held, cdyn_status st)
{
    cdyn__newton_restore_magnitudes(mbs->dependent, held);
    return st;
}

cdyn_status cdyn_mbs_partition_rhs(cdyn_mbs *mbs, double t, const double *z, double *zdot)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_rhs";
    int n = mbs->n, m = mbs->m, d = n - m;
    cdyn_status st = need_partition_to_change(mbs, fn);
    if (!st && (!z || !zdot))
        st = cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !z ? "z" : "zdot");
    if (!st && !isfinite(t)) st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    if (!st && cdyn__first_nonfinite(2 * d, 1, z, 2 * d) >= 0)
        st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: z has NaN or Inf", fn);
    if (st) return st;
    mbs->counters.partition_rhs++;
    double *held = mbs->held_magnitudes;
    cdyn__newton_save_magnitudes(mbs->dependent, held);
    st = consistent_state(mbs, fn, t, z);
    if (st) return failed_call(mbs, held, st);
    cdyn_nullspace *ns = mbs->partition;
    double *q = mbs->q_base, *qdot = mbs->qdot_work;
    /* accelerations: T1.4-T1.5 with F = Q and c = -xi; T1's lambda is -T4's */
    st = cdyn__mbs_mass(mbs, fn, t, q);
    if (!st) st = cdyn__mbs_force(mbs, fn, t, q, qdot);
    if (!st) st = cdyn__mbs_xi(mbs, fn, t, q, qdot);
    if (st) return failed_call(mbs, held, st);
    for (int i = 0; i < m; ++i) mbs->vec_m[i] = -mbs->xi_val[i];
    st = cdyn_nullspace_solve(ns, mbs->M, n, mbs->Q, mbs->vec_m, mbs->vec_n, mbs->vec_m2);
    if (st)
        return failed_call(mbs, held,
                           cdyn__fail(mbs->msg, st, "%s at t = %g: %s", fn, t,
                                      cdyn_nullspace_last_error(ns)));
    for (int i = 0; i < m; ++i) mbs->reaction_mult[i] = -mbs->vec_m2[i];
    cdyn__gemv('T', m, n, 1.0, mbs->Phi_q, mbs->m1, mbs->reaction_mult, 0.0, mbs->reaction_force);
    /* commit (zdot written last: it may alias z) */
    learn_inertia(mbs);
    watch_partition(mbs);
    memcpy(mbs->y_part, q, sizeof(double) * (size_t)n);
    memcpy(mbs->y_part + n, qdot, sizeof(double) * (size_t)n);
    for (int j = 0; j < d; ++j) zdot[d + j] = mbs->vec_n[mbs->ind_index[j]];
    for (int j = 0; j < d; ++j) zdot[j] = qdot[mbs->ind_index[j]];
    mbs->has_reactions = 1;
    cdyn_newton_report report;
    cdyn_newton_get_report(mbs->dependent, &report);
    /* Phi_q q' + Phi_t = 0 by construction */
    cdyn__mbs_set_residuals(mbs, report.residual_norm, 0.0);
    return CDYN_OK;
}

cdyn_status cdyn_mbs_partition_state(cdyn_mbs *mbs, double t, const double *z, double *y)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_state";
    int n = mbs->n, d = n - mbs->m;
    cdyn_status st = need_partition_to_change(mbs, fn);
    if (!st && (!z || !y))
        st = cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !z ? "z" : "y");
    if (!st && !isfinite(t)) st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    if (!st && cdyn__first_nonfinite(2 * d, 1, z, 2 * d) >= 0)
        st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: z has NaN or Inf", fn);
    if (st) return st;
    double *held = mbs->held_magnitudes;
    cdyn__newton_save_magnitudes(mbs->dependent, held);
    st = consistent_state(mbs, fn, t, z);
    if (st) return failed_call(mbs, held, st);
    memcpy(mbs->y_part, mbs->q_base, sizeof(double) * (size_t)n);
    memcpy(mbs->y_part + n, mbs->qdot_work, sizeof(double) * (size_t)n);
    memcpy(y, mbs->y_part, sizeof(double) * 2 * (size_t)n); /* written last: y may alias z */
    return CDYN_OK;
}

int cdyn_mbs_partition_event(const cdyn_mbs *mbs) { return mbs ? mbs->event : 0; }

cdyn_status cdyn_mbs_partition_quality(const cdyn_mbs *mbs, double *current, double *best)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_quality";
    if (!mbs->partitioned && mbs->quality < 0.0)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    if (current) *current = mbs->quality;
    if (best) *best = mbs->best_quality;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_partition_limit(cdyn_mbs *mbs, double limit)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_set_partition_limit";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!(limit >= 1.0) || isinf(limit))
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %g is not in [1, inf)", fn, limit);
    mbs->partition_limit = limit;
    return CDYN_OK;
}
