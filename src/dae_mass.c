/* Time-varying mass matrix M(t) for cdyn_dae: refactor at each time with a
 * left null-space basis that varies smoothly, and its time derivative
 * (THEORY T3.1-T3.3 with M(t)). */
#include "dae_internal.h"
#include "difference_tableau.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

cdyn_status cdyn_dae_set_mass_fn(cdyn_dae *dae, cdyn_dae_mass_fn mass, void *user, double t0)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_mass_fn";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!mass) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: mass is NULL", fn);
    if (!isfinite(t0)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t0 is not finite", fn);
    cdyn_dae_mass_fn previous = dae->mass_fn;
    void *previous_user = dae->mass_user;
    dae->mass_fn = mass;
    dae->mass_user = user;
    cdyn_status st = cdyn__dae_call_mass(dae, fn, t0, dae->prod);
    if (st == CDYN_OK) st = cdyn__dae_install_mass(dae, fn, dae->prod, dae->n);
    if (st != CDYN_OK) { /* the previous mass stays, with its own callback */
        dae->mass_fn = previous;
        dae->mass_user = previous_user;
    }
    return st;
}

/* M(t) into part.mass and its rank decision (U in dae->u); the rank must
 * be the set-up rank. */
static cdyn_status factor_mass_at(cdyn_dae *dae, const char *fn, double t)
{
    cdyn_status st = cdyn__dae_call_mass(dae, fn, t, dae->part.mass);
    if (st != CDYN_OK) return st;
    int rank = cdyn__dae_row_rank(dae, dae->part.mass);
    if (rank < 0) return cdyn__fail(dae->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 failed on M(t)", fn);
    if (rank != dae->r)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: M(t) has rank %d at t = %g but %d at set-up; the split into "
                          "integrated and algebraic states no longer applies",
                          fn, rank, t, dae->r);
    return CDYN_OK;
}

/* The orthonormal basis of the left null space of the factored M(t)
 * closest to ref, written to out: out = B0 W with B0 any orthonormal basis
 * and W the orthogonal polar factor of B0^T ref (orthogonal Procrustes), so
 * successive bases vary smoothly. P (the range) into part.range. */
static void aligned_null_basis(cdyn_dae *dae, const double *ref, double *out)
{
    int n = dae->n, q = dae->q;
    cdyn__dae_part *p = &dae->part;
    double *basis = dae->aug; /* n x q, free here */
    cdyn__dae_bases(dae, p->mass, dae->r, basis, p->range, p->beta_error);
    cdyn__gemm('T', 'N', q, q, n, 1.0, basis, n, ref, n, 0.0, p->align, q);
    cdyn__gesvd(q, q, p->align, q, p->align_sv, p->align_u, q, p->align_vt, q, dae->work,
                dae->lwork);
    cdyn__gemm('N', 'N', q, q, q, 1.0, p->align_u, q, p->align_vt, q, 0.0, p->align, q);
    cdyn__gemm('N', 'N', n, q, q, 1.0, basis, n, p->align, q, 0.0, out, n);
    /* the rounding of out = B0 W: entry (i, k) at most sum_l e_il |W_lk| */
    double *error = dae->scratch; /* free after cdyn__dae_bases */
    for (int k = 0; k < q; ++k)
        for (int i = 0; i < n; ++i) {
            double e = 0.0;
            for (int l = 0; l < q; ++l)
                e += p->beta_error[i + (size_t)l * n] * fabs(p->align[l + (size_t)k * q]);
            error[i + (size_t)k * n] = fmin(1.0, e);
        }
    memcpy(p->beta_error, error, sizeof(double) * (size_t)n * q);
}

cdyn_status cdyn__dae_mass_at(cdyn_dae *dae, const char *fn, double t)
{
    if (!dae->mass_fn) return CDYN_OK;
    cdyn_status st = factor_mass_at(dae, fn, t);
    if (st != CDYN_OK) return st;
    int n = dae->n, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    if (dae->q > 0)
        aligned_null_basis(dae, p->beta_ref, p->beta);
    else
        cdyn__dae_bases(dae, p->mass, r, p->beta, p->range, p->beta_error);
    cdyn__dae_detect_selection(p, n);
    cdyn__dae_find_mass_rows(p, n);
    cdyn__gemm('T', 'N', r, n, n, 1.0, p->range, n, p->mass, n, 0.0, p->range_t_mass,
               r > 0 ? r : 1);
    return CDYN_OK;
}

/* The aligned null basis of M(t + tau) into out (n x q). */
typedef struct {
    cdyn_dae *dae;
    const char *fn;
    double t;
} mass_in_time;

static cdyn_status null_basis_offset(void *ctx, double tau, double *out)
{
    const mass_in_time *at = ctx;
    cdyn_status st = factor_mass_at(at->dae, at->fn, at->t + tau);
    if (st == CDYN_OK) aligned_null_basis(at->dae, at->dae->part.beta, out);
    return st;
}

cdyn_status cdyn__dae_beta_rate(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n;
    cdyn__dae_part *p = &dae->part;
    size_t nq = (size_t)n * dae->q, nr = (size_t)n * dae->r;
    memcpy(p->mass_saved, p->mass, sizeof(double) * (size_t)n * n);
    /* the range P(t) is kept: the difference evaluations overwrite it */
    double *range_saved = dae->origin;
    memcpy(range_saved, p->range, sizeof(double) * nr);
    /* steps of CDYN__TIME_STEP s and a quarter of it whatever t, checked
     * against each other: the size of t says nothing of the time scale of
     * M(t) (a step of 6e-6 |t| is 0.06 s at t = 1e4 s, across a whole
     * period of 50 Hz) */
    double *w = p->beta_time_work, best = 0.0;
    cdyn__tableau_work work = cdyn__tableau_layout(w, nq, CDYN__TIME_LEVELS);
    mass_in_time at = {dae, fn, t};
    double *spare = w + (size_t)CDYN__TABLEAU_WORK(CDYN__TIME_LEVELS) * nq;
    cdyn_status st = cdyn__time_derivative((int)nq, (int)nq, t, CDYN__TIME_STEP,
                                           CDYN__TIME_LEVELS, NULL, null_basis_offset, &at,
                                           &work, spare, p->beta_dot, &best);
    memcpy(p->mass, p->mass_saved, sizeof(double) * (size_t)n * n);
    memcpy(p->range, range_saved, sizeof(double) * nr);
    if (st == CDYN_OK && !isfinite(best))
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                          "%s: the difference quotients of beta'(t) are not finite at t = %g",
                          fn, t);
    return st;
}
