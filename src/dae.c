/* Quasi-linear DAE: the mass matrix and its bases (THEORY T3.1), hidden
 * constraints, and the index by repeated augmentation (T3.2). */
#include "dae_internal.h"
#include "difference_tableau.h"
#include "linalg.h"
#include "newton_internal.h"
#include "nullspace_internal.h"
#include "rank.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static double *doubles(size_t count) { return malloc(sizeof(double) * (count > 0 ? count : 1)); }

cdyn_dae *cdyn_dae_create(int n, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (n < 1 || (size_t)n * (size_t)n > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_dae *dae = cdyn__object_alloc(sizeof *dae, offsetof(cdyn_dae, msg));
    if (!dae) goto fail;
    size_t nn = (size_t)n * n;
    dae->n = n;
    dae->r = -1;
    dae->rank_tol = CDYN__RANK_TOL;
    dae->fd_step = 1.5e-8;
    dae->max_index = 5;
    dae->split_limit = 10.0;
    dae->rtol = 1e-10;
    int lwork = cdyn__gesvd_lwork(n, n);
    lwork = cdyn__max(lwork, cdyn__geqp3_lwork(n, n));
    lwork = cdyn__max(lwork, cdyn__ormqr_lwork('L', 'N', n, n, n));
    dae->lwork = lwork;
    dae->work = doubles((size_t)lwork);
    dae->atol = doubles((size_t)n);
    dae->row_scale = doubles((size_t)n);
    dae->col_scale = doubles((size_t)n);
    dae->equation_level = malloc(sizeof(int) * (size_t)n);
    dae->equation_size = doubles((size_t)n);
    dae->integrated = malloc(sizeof(int) * (size_t)n);
    dae->algebraic = malloc(sizeof(int) * (size_t)n);
    dae->multiplier = malloc(sizeof(int) * (size_t)n);
    dae->v_last = doubles((size_t)n);
    dae->vdot_last = doubles((size_t)n);
    dae->magnitude = calloc((size_t)n, sizeof(double));
    dae->resolution = calloc((size_t)n, sizeof(double));
    dae->held_magnitudes = doubles(2 * (size_t)n);
    dae->v_trial = doubles((size_t)n);
    dae->force_val = doubles((size_t)n);
    dae->force_shift = doubles((size_t)n);
    dae->force_dt = doubles((size_t)n);
    dae->time_work = doubles(CDYN__TIME_WORK * (size_t)n);
    dae->force_jac = doubles(nn);
    dae->aug = doubles(nn);
    dae->aug_rhs = doubles(nn);
    dae->origin = doubles(nn);
    dae->scratch = doubles(nn);
    dae->u = doubles(nn);
    dae->prod = doubles(nn);
    dae->tau = doubles((size_t)n);
    dae->jpvt = malloc(sizeof(int) * 2 * (size_t)n);
    dae->row_order = malloc(sizeof(int) * (size_t)n);
    dae->residual = doubles((size_t)n);
    dae->bound = doubles((size_t)n);
    dae->row_max = doubles((size_t)n);
    dae->rate_unit = doubles((size_t)n);
    dae->resid_v = doubles((size_t)n);
    dae->resid_f = doubles((size_t)n);
    dae->resid_out = doubles((size_t)n);
    dae->resid_mass = doubles(nn);
    dae->resid_jac = doubles(nn);
    dae->observed_coef = doubles(nn);
    dae->observed_size = doubles((size_t)n);
    dae->f_at = doubles((size_t)n);
    int ws_ok = cdyn__rank_ws_init(&dae->rank_ws, n, n, 1);
    if (!ws_ok || !dae->work || !dae->atol || !dae->row_scale || !dae->col_scale ||
        !dae->equation_level || !dae->equation_size || !dae->integrated || !dae->algebraic ||
        !dae->multiplier ||
        !dae->v_last || !dae->vdot_last || !dae->magnitude || !dae->resolution ||
        !dae->held_magnitudes || !dae->v_trial ||
        !dae->force_val || !dae->force_shift || !dae->force_dt || !dae->time_work ||
        !dae->force_jac ||
        !dae->aug || !dae->aug_rhs || !dae->origin || !dae->scratch || !dae->u ||
        !dae->prod || !dae->tau || !dae->jpvt || !dae->row_order || !dae->residual ||
        !dae->bound ||
        !dae->row_max || !dae->rate_unit || !dae->resid_v || !dae->resid_f ||
        !dae->resid_out || !dae->resid_mass || !dae->resid_jac || !dae->observed_coef ||
        !dae->observed_size || !dae->f_at)
        goto fail;
    *status = CDYN_OK;
    return dae;
fail:
    cdyn_dae_free(dae);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

static void part_free(cdyn__dae_part *p)
{
    double *arrays[] = {p->mass,      p->mass_saved,   p->beta,       p->beta_signs,
                        p->beta_error, p->g0_noise,
                        p->beta_ref,  p->beta_time_work, p->beta_dot,
                        p->align,     p->align_u,      p->align_vt,   p->align_sv,
                        p->range,     p->range_t_mass, p->constraint_jac, p->ga,
                        p->coef,      p->vec_q,        p->vec_q2,
                        p->reduced,   p->reduced_rhs, p->rate_of_multiplier,
                        p->range_t_fz, p->top_value, p->top_inverse, p->top_column,
                        p->hz_last,   p->gx_last,     p->fz_next, p->multiplier_dir,
                        p->rate_w,    p->multiplier_step, p->g0_bound,
                        p->w_start,   p->multiplier_start, p->bottom_value, p->bottom_inverse,
                        p->bottom_source, p->g0_at};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(p->beta_rows);
    free(p->beta_unit);
    free(p->mass_rows);
    free(p->range_rows);
    free(p->range_signs);
    free(p->massless);
    free(p->mass_start);
    free(p->mass_row);
    free(p->ipiv);
    free(p->top_start);
    free(p->top_row);
    free(p->bottom_start);
    free(p->bottom_row);
    cdyn_nullspace_free(p->split_ns);
    cdyn_nullspace_free(p->split_probe);
    free(p->split_ref.amax);
    memset(p, 0, sizeof *p);
}

/* cdyn__dae_find_mass_rows: dae_internal.h. */
void cdyn__dae_find_mass_rows(cdyn__dae_part *p, int n)
{
    p->n_mass_rows = 0;
    for (int i = 0; i < n; ++i) { /* equations with mass: row i not exactly zero */
        int j = 0;
        while (j < n && p->mass[i + (size_t)j * n] == 0.0) ++j;
        if (j < n) p->mass_rows[p->n_mass_rows++] = i;
    }
}

/* Allocate the parts for rank r (THEORY T3.1, T3.3); 0 when out of memory
 * (p freed). */
static int part_alloc(cdyn__dae_part *p, int n, int r, int timed)
{
    memset(p, 0, sizeof *p);
    int q = n - r;
    size_t nn = (size_t)n * n, r1 = (size_t)(r > 0 ? r : 1), q1 = (size_t)(q > 0 ? q : 1);
    p->r = r;
    p->q = q;
    p->mass = doubles(nn);
    p->mass_saved = doubles(nn);
    p->beta = doubles((size_t)n * q1);
    p->beta_rows = malloc(sizeof(int) * q1);
    p->beta_unit = malloc(sizeof(int) * q1);
    p->mass_rows = malloc(sizeof(int) * (size_t)n);
    p->beta_error = doubles((size_t)n * q1);
    p->g0_noise = doubles(q1);
    p->beta_signs = doubles(q1);
    p->range_rows = malloc(sizeof(int) * r1);
    p->range_signs = doubles(r1);
    p->beta_ref = doubles((size_t)n * q1);
    /* beta'(t)'s differences, for M(t) only */
    p->beta_time_work = doubles((timed ? CDYN__TIME_WORK : 1) * (size_t)n * q1);
    p->beta_dot = doubles((size_t)n * q1);
    p->align = doubles(q1 * q1);
    p->align_u = doubles(q1 * q1);
    p->align_vt = doubles(q1 * q1);
    p->align_sv = doubles(q1);
    p->range = doubles((size_t)n * r1);
    p->range_t_mass = doubles(r1 * (size_t)n);
    p->massless = malloc(sizeof(int) * (size_t)n);
    p->mass_start = malloc(sizeof(int) * ((size_t)n + 1));
    p->mass_row = malloc(sizeof(int) * (nn > 0 ? nn : 1));
    p->constraint_jac = doubles(q1 * (size_t)n);
    p->ga = doubles(q1 * q1);
    p->coef = doubles(q1 * r1);
    p->vec_q = doubles(q1);
    p->vec_q2 = doubles(q1);
    p->reduced = doubles(r1 * r1);
    p->reduced_rhs = doubles(r1);
    p->ipiv = malloc(sizeof(int) * r1);
    p->rate_of_multiplier = doubles(r1 * q1);
    p->range_t_fz = doubles(r1 * q1);
    p->top_start = malloc(sizeof(int) * ((size_t)n + 1));
    p->top_row = malloc(sizeof(int) * r1 * (size_t)n);
    p->top_value = doubles(r1 * (size_t)n);
    p->top_inverse = doubles(r1);
    p->top_column = doubles((size_t)n);
    p->bottom_start = malloc(sizeof(int) * ((size_t)n + 1));
    p->bottom_row = malloc(sizeof(int) * q1 * (size_t)n);
    p->bottom_value = doubles(q1 * (size_t)n);
    p->bottom_inverse = doubles(q1);
    p->bottom_source = doubles(q1 * (size_t)n);
    p->hz_last = doubles(q1 * q1);
    p->gx_last = doubles(q1 * r1);
    p->fz_next = doubles(r1 * q1);
    p->multiplier_dir = doubles((size_t)n * q1);
    p->rate_w = doubles(q1);
    p->multiplier_step = doubles(q1);
    p->g0_bound = doubles(q1);
    p->w_start = doubles(q1);
    p->multiplier_start = doubles(q1);
    p->g0_at = doubles(q1);
    cdyn_status st = CDYN_OK;
    if (q > 0 && q < n) p->split_ns = cdyn_nullspace_create(n, q, &st);
    if (st == CDYN_OK && q > 0 && q < n) p->split_probe = cdyn_nullspace_create(n, q, &st);
    if (q > 0 && q < n) p->split_ref.amax = calloc(q1 * (size_t)n, sizeof(double));
    int ok = st == CDYN_OK && (!(q > 0 && q < n) || p->split_ref.amax) && p->mass && p->mass_saved && p->beta && p->beta_rows &&
             p->beta_unit && p->mass_rows && p->beta_error && p->g0_noise &&
             p->range_rows && p->range_signs &&
             p->beta_signs && p->beta_ref && p->beta_time_work && p->beta_dot &&
             p->align && p->align_u && p->align_vt && p->align_sv && p->range &&
             p->range_t_mass && p->massless && p->mass_start && p->mass_row &&
             p->constraint_jac && p->ga &&
             p->coef &&
             p->vec_q && p->vec_q2 && p->reduced && p->reduced_rhs && p->ipiv &&
             p->rate_of_multiplier && p->range_t_fz && p->top_start && p->top_row &&
             p->top_value && p->top_inverse && p->top_column && p->bottom_start &&
             p->bottom_row && p->bottom_value && p->bottom_inverse && p->bottom_source &&
             p->hz_last && p->gx_last &&
             p->fz_next && p->multiplier_dir && p->rate_w &&
             p->multiplier_step && p->g0_bound &&
             p->w_start && p->multiplier_start && p->g0_at;
    if (!ok) part_free(p);
    return ok;
}

void cdyn_dae_free(cdyn_dae *dae)
{
    if (!dae) return;
    part_free(&dae->part);
    cdyn_newton_free(dae->newton);
    cdyn_newton_free(dae->newton_z);
    cdyn__rank_ws_free(&dae->rank_ws);
    double *arrays[] = {dae->work,      dae->atol,      dae->row_scale,  dae->col_scale,
                        dae->equation_size, dae->v_last, dae->vdot_last, dae->magnitude,
                        dae->resolution, dae->held_magnitudes,
                        dae->v_trial,   dae->force_val, dae->force_shift, dae->force_dt,
                        dae->time_work,
                        dae->force_jac, dae->aug,       dae->aug_rhs,    dae->origin,
                        dae->scratch,  dae->u,         dae->prod,
                        dae->tau,       dae->residual,   dae->bound,
                        dae->row_max,   dae->rate_unit, dae->resid_v,  dae->resid_f,
                        dae->resid_out, dae->resid_mass, dae->resid_jac,
                        dae->observed_coef, dae->observed_size, dae->f_at};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(dae->equation_level);
    free(dae->integrated);
    free(dae->algebraic);
    free(dae->multiplier);
    free(dae->jpvt);
    free(dae->row_order);
    free(dae);
}

cdyn_status cdyn__dae_check_idle(cdyn_dae *dae, const char *fn)
{
    return cdyn__guard_busy(&dae->guard) ? cdyn__busy(dae->msg, fn) : CDYN_OK;
}

cdyn_status cdyn_dae_set_rank_tolerance(cdyn_dae *dae, double tol)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_rank_tolerance";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: tol = %g is not in (0, 1)", fn, tol);
    dae->rank_tol = tol;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_max_index(cdyn_dae *dae, int max_index)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_max_index";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (max_index < 1 || max_index > CDYN_DAE_MAX_INDEX)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: %d is not in [1, %d]", fn, max_index,
                          CDYN_DAE_MAX_INDEX);
    dae->max_index = max_index;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_fd_step(cdyn_dae *dae, double h)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_fd_step";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!(h > 0.0 && h < 1.0))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: h = %g is not in (0, 1)", fn, h);
    dae->fd_step = h;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_tolerances(cdyn_dae *dae, double rtol, const double *atol)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_tolerances";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    cdyn_status st = cdyn__check_tolerances(dae->msg, fn, rtol, atol, dae->n);
    if (st != CDYN_OK) return st;
    dae->rtol = rtol;
    dae->has_tolerances = 1;
    dae->has_atol = atol != NULL;
    if (atol) memcpy(dae->atol, atol, sizeof(double) * (size_t)dae->n);
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_model(cdyn_dae *dae, cdyn_dae_force_fn force,
                                   cdyn_dae_jacobian_fn jacobian,
                                   cdyn_dae_time_fn time_derivative, void *user)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_model";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!force) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: force is NULL", fn);
    dae->force = force;
    dae->jacobian = jacobian;
    dae->time_derivative = time_derivative;
    dae->user = user;
    return CDYN_OK;
}

/* ---- T3.1: rank and bases by the rank policy ---------------------------- */

int cdyn__dae_row_rank(cdyn_dae *dae, const double *A)
{
    /* Rows that are exactly zero (the equations of massless states) go
     * last, so that the Householder reflectors never touch them and the
     * left null vectors they give are exactly the unit vectors: for a
     * selection-structured M, beta^T F picks the algebraic equations
     * without any rounding from the others, whatever their scales. */
    int n = dae->n, top = 0, *row_of = dae->jpvt + n; /* jpvt has room for 2 n */
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < n; ++i) {
            int zero = 1;
            for (int j = 0; j < n && zero; ++j) zero = A[i + (size_t)j * n] == 0.0;
            if (zero == pass) row_of[top++] = i;
        }
    double *ordered = dae->scratch, *full = dae->prod;
    for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) ordered[k + (size_t)j * n] = A[row_of[k] + (size_t)j * n];
    const cdyn__rank_ws *w = &dae->rank_ws;
    int rank = cdyn__rank_decide(&dae->rank_ws, CDYN__RANK_COLUMNS, n, n, ordered, n,
                                 dae->rank_tol, NULL, NULL, NULL);
    if (rank < 0) return -1;
    /* U = the rows of Q put back in the caller's order, and the factors */
    memset(full, 0, sizeof(double) * (size_t)n * n);
    for (int i = 0; i < n; ++i) full[i + (size_t)i * n] = 1.0;
    cdyn__ormqr('L', 'N', n, n, n, w->qr, n, w->tau, full, n, dae->work, dae->lwork);
    for (int k = 0; k < n; ++k) {
        dae->row_scale[row_of[k]] = w->row_scale[k];
        for (int j = 0; j < n; ++j) dae->u[row_of[k] + (size_t)j * n] = full[k + (size_t)j * n];
    }
    memcpy(dae->col_scale, w->col_scale, sizeof(double) * (size_t)n);
    return rank;
}

/* mark[i] = 1 where a column of the null vectors a (n x q) is exactly
 * a multiple of e_i and no other column has an entry in row i: the
 * vector of an equation of M that is exactly zero (cdyn__dae_row_rank
 * leaves those rows untouched); else 0. */
static void mark_unit_rows(int n, int q, const double *a, int *mark)
{
    memset(mark, 0, sizeof(int) * (size_t)n);
    for (int k = 0; k < q; ++k) {
        const double *col = a + (size_t)k * n;
        int row = -1, count = 0;
        for (int i = 0; i < n; ++i)
            if (col[i] != 0.0) row = i, ++count;
        if (count != 1) continue;
        int alone = 1;
        for (int l = 0; l < q && alone; ++l) alone = l == k || a[row + (size_t)l * n] == 0.0;
        mark[row] = alone;
    }
}

/* The orthonormal basis Q (n x n; null vectors first, q of them) from the
 * QR of such null vectors is, in exact arithmetic, +-e_i in one null
 * column and 0 in every other column of row i, for each marked row; the
 * reflectors leave rounding there (1e-16 of other rows in e_i's vector:
 * beta^T F then mixes equations of other scales into the hidden
 * constraint of a massless state). Those entries are set to their exact
 * values, the sign kept. */
static void snap_unit_rows(int n, int q, const int *mark, double *Q)
{
    for (int i = 0; i < n; ++i) {
        if (mark[i] != 1) continue;
        int best = 0;
        for (int k = 1; k < q; ++k)
            if (fabs(Q[i + (size_t)k * n]) > fabs(Q[i + (size_t)best * n])) best = k;
        double value = Q[i + (size_t)best * n];
        if (!(fabs(value) > 0.5)) continue; /* not the unit vector it should be */
        for (int l = 0; l < n; ++l) Q[l + (size_t)best * n] = 0.0;
        for (int j = 0; j < n; ++j) Q[i + (size_t)j * n] = 0.0;
        Q[i + (size_t)best * n] = value > 0.0 ? 1.0 : -1.0;
    }
}

/* mark[i] = 2 where row i is the only non-zero of some column j of M
 * (n x n, ld n): every left null vector y has y_i M_ij = 0, so y_i = 0
 * exactly (marks of mark_unit_rows, zero rows, are never such rows). The
 * same holds again for a column whose other non-zeros are all in such
 * rows, and so on until no column adds a row (at most n passes). */
static void mark_lone_rows(int n, const double *M, int *mark)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (int j = 0; j < n; ++j) {
            const double *col = M + (size_t)j * n;
            int row = -1, count = 0;
            for (int i = 0; i < n && count < 2; ++i)
                if (col[i] != 0.0 && mark[i] != 2) row = i, ++count;
            if (count == 1) mark[row] = 2, changed = 1;
        }
    }
}

/* The null vectors' entries in rows marked 2 (mark_lone_rows) are 0 in
 * exact arithmetic, and the QR leaves rounding there, which beta^T F
 * turns into terms of that row's force in a hidden constraint that has
 * none (1e-18 of a force of 1e3 beside terms of 1e-16). They are set to
 * 0 and each column renormalized; an entry above 1e-8 is left alone (the
 * structure is then not what the marks say). */
static void zero_lone_rows(int n, int q, const int *mark, double *Q)
{
    for (int k = 0; k < q; ++k) {
        double *col = Q + (size_t)k * n;
        int changed = 0;
        for (int i = 0; i < n; ++i)
            if (mark[i] == 2 && col[i] != 0.0 && fabs(col[i]) <= 1e-8) col[i] = 0.0, changed = 1;
        if (!changed) continue;
        double norm = 0.0;
        for (int i = 0; i < n; ++i) norm += col[i] * col[i];
        norm = sqrt(norm);
        for (int i = 0; i < n; ++i) col[i] /= norm;
    }
}

void cdyn__dae_bases(cdyn_dae *dae, const double *M, int r, double *null_basis, double *range,
                     double *error)
{
    /* u^T (D_r M D_c) = 0 for the last q columns u of U, so (D_r u)^T M = 0:
     * the left null space of M is spanned by D_r U(:, r:n).
     * A QR of it gives an orthonormal basis (its first q columns of Q) and
     * the orthogonal complement, the range of M (the other r). */
    int n = dae->n, q = n - r, *unit_row = dae->jpvt + n; /* jpvt has room for 2 n */
    int *order = dae->row_order;
    double *a = dae->scratch, *full = dae->prod;
    if (q > 0) {
        for (int k = 0; k < q; ++k)
            for (int i = 0; i < n; ++i)
                a[i + (size_t)k * n] = dae->row_scale[i] * dae->u[i + (size_t)(r + k) * n];
        mark_unit_rows(n, q, a, unit_row);
        mark_lone_rows(n, M, unit_row);
        /* a row that is 0 in every null vector (marked 2) and has only
         * U's rounding there gets exactly 0 before the QR: D_r(i) can make
         * that rounding the largest entry of the vector (a row of M 2^-70
         * of the others: eps times D_r = 1e20, and the basis was e_i) */
        for (int k = 0; k < q; ++k)
            for (int i = 0; i < n; ++i)
                if (unit_row[i] == 2 &&
                    fabs(dae->u[i + (size_t)(r + k) * n]) <= 4.0 * (n + 1) * DBL_EPSILON)
                    a[i + (size_t)k * n] = 0.0;
        /* rows by decreasing largest entry (a stable insertion sort, in
         * full as scratch): the Householder QR is then accurate in each
         * row, not only normwise */
        double *size = full;
        for (int i = 0; i < n; ++i) {
            double largest = 0.0;
            for (int k = 0; k < q; ++k) largest = fmax(largest, fabs(a[i + (size_t)k * n]));
            int at = i;
            while (at > 0 && size[at - 1] < largest) {
                size[at] = size[at - 1];
                order[at] = order[at - 1];
                --at;
            }
            size[at] = largest;
            order[at] = i;
        }
        for (int k = 0; k < q; ++k) {
            for (int i = 0; i < n; ++i) full[i] = a[order[i] + (size_t)k * n];
            memcpy(a + (size_t)k * n, full, sizeof(double) * (size_t)n);
        }
        memset(dae->jpvt, 0, sizeof(int) * (size_t)q);
        cdyn__geqp3(n, q, a, n, dae->jpvt, dae->tau, dae->work, dae->lwork);
        for (int k = 0; k < q; ++k) {
            double diagonal = fabs(a[k + (size_t)k * n]);
            for (int i = 0; i < n; ++i) {
                double e = diagonal > 0.0 ? dae->row_scale[i] / diagonal : 1.0;
                error[i + (size_t)k * n] = unit_row[i] ? 0.0 : fmin(1.0, e);
            }
        }
    }
    memset(full, 0, sizeof(double) * (size_t)n * n);
    for (int i = 0; i < n; ++i) full[i + (size_t)i * n] = 1.0;
    if (q > 0) {
        cdyn__ormqr('L', 'N', n, n, q, a, n, dae->tau, full, n, dae->work, dae->lwork);
        for (int j = 0; j < n; ++j) /* back to the rows' own order (a is free) */
            for (int i = 0; i < n; ++i) a[order[i] + (size_t)j * n] = full[i + (size_t)j * n];
        memcpy(full, a, sizeof(double) * (size_t)n * n);
        snap_unit_rows(n, q, unit_row, full);
        zero_lone_rows(n, q, unit_row, full);
        memcpy(null_basis, full, sizeof(double) * (size_t)n * q);
    }
    if (r > 0) memcpy(range, full + (size_t)n * q, sizeof(double) * (size_t)n * r);
}

cdyn_status cdyn__dae_install_mass(cdyn_dae *dae, const char *fn, const double *M, int ldm)
{
    int n = dae->n;
    /* the new M is factored in workspace first: nothing of the object
     * changes until the new parts exist */
    for (int j = 0; j < n; ++j)
        memcpy(dae->aug + (size_t)j * n, M + (size_t)j * ldm, sizeof(double) * (size_t)n);
    int r = cdyn__dae_row_rank(dae, dae->aug), q = n - r;
    if (r < 0) return cdyn__fail(dae->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 failed on M", fn);
    cdyn__dae_part fresh;
    if (!part_alloc(&fresh, n, r, dae->mass_fn != NULL))
        return cdyn__fail(dae->msg, CDYN_ERR_NOMEM, "%s: out of memory (previous mass kept)", fn);
    if (q > 0) {
        cdyn_status st = CDYN_OK;
        cdyn_newton **solvers[2] = {&dae->newton, &dae->newton_z};
        for (int s = 0; s < 2 && st == CDYN_OK; ++s) {
            cdyn_newton **nt = solvers[s];
            st = *nt ? cdyn__newton_set_size(*nt, q, q) : CDYN_OK;
            if (st == CDYN_OK && !*nt) {
                *nt = cdyn_newton_create(q, q, &st);
                if (*nt) cdyn__newton_set_owner(*nt, &dae->guard.in_callback);
                /* consecutive right-hand sides solve nearby systems: start
                 * each from the last factorization (newton_internal.h) */
                if (*nt) cdyn__newton_set_chord(*nt, 1);
            }
        }
        if (st != CDYN_OK) {
            part_free(&fresh);
            if (dae->newton && dae->q > 0) /* back to the kept size: no allocation */
                cdyn__newton_set_size(dae->newton, dae->q, dae->q);
            return cdyn__fail(dae->msg, CDYN_ERR_NOMEM, "%s: out of memory (previous mass kept)",
                              fn);
        }
    }
    memcpy(fresh.mass, dae->aug, sizeof(double) * (size_t)n * n);
    cdyn__dae_bases(dae, fresh.mass, r, fresh.beta, fresh.range, fresh.beta_error);
    if (q > 0) memcpy(fresh.beta_ref, fresh.beta, sizeof(double) * (size_t)n * q);
    cdyn__dae_detect_selection(&fresh, n);
    cdyn__gemm('T', 'N', r, n, n, 1.0, fresh.range, n, fresh.mass, n, 0.0, fresh.range_t_mass,
               r > 0 ? r : 1);
    fresh.mass_start[0] = 0;
    for (int j = 0; j < n; ++j) { /* M's non-zero pattern; states without mass */
        int count = fresh.mass_start[j];
        for (int i = 0; i < n; ++i)
            if (fresh.mass[i + (size_t)j * n] != 0.0) fresh.mass_row[count++] = i;
        fresh.mass_start[j + 1] = count;
        fresh.massless[j] = count == fresh.mass_start[j]; /* column j exactly zero */
    }
    cdyn__dae_find_mass_rows(&fresh, n);
    if (fresh.split_ns) {
        cdyn_nullspace_set_preferred_dependent(fresh.split_ns, fresh.massless);
        cdyn__nullspace_set_owner(fresh.split_ns, &dae->guard.in_callback);
        /* the watch refactors it with the split kept while it is regular */
        cdyn_nullspace_set_condition_limit(fresh.split_ns, DBL_MAX);
        cdyn_nullspace_set_preferred_dependent(fresh.split_probe, fresh.massless);
        cdyn__nullspace_set_owner(fresh.split_probe, &dae->guard.in_callback);
    }
    part_free(&dae->part);
    dae->part = fresh;
    dae->reduced_factored = 0;
    dae->r = r;
    dae->q = q;
    dae->split_done = dae->state_valid = dae->analyzed = 0;
    return CDYN_OK;
}

/* Is the n x cols basis a signed selection? Then rows and signs say which. */
static int signed_selection(const double *basis, int n, int cols, int *rows, double *signs)
{
    int selection = cols > 0;
    for (int k = 0; k < cols && selection; ++k) {
        const double *col = basis + (size_t)k * n;
        int row = -1;
        for (int i = 0; i < n && selection; ++i) {
            if (col[i] == 0.0) continue;
            if (row >= 0 || fabs(col[i]) != 1.0) selection = 0;
            row = i;
        }
        if (row < 0) selection = 0;
        if (selection) {
            rows[k] = row;
            signs[k] = col[row];
        }
    }
    return selection;
}

void cdyn__dae_detect_selection(cdyn__dae_part *part, int n)
{
    for (int k = 0; k < part->q; ++k) {
        const double *col = part->beta + (size_t)k * n;
        int count = 0, unit = 0;
        for (int i = 0; i < n; ++i)
            if (col[i] != 0.0) ++count, unit = fabs(col[i]) == 1.0;
        part->beta_unit[k] = count == 1 && unit;
    }
    part->beta_is_selection = signed_selection(part->beta, n, part->q, part->beta_rows,
                                               part->beta_signs);
    part->range_is_selection = signed_selection(part->range, n, part->r, part->range_rows,
                                                part->range_signs);
}

void cdyn__dae_range_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                       double *out, int ldo)
{
    int n = dae->n, r = dae->r;
    const cdyn__dae_part *p = &dae->part;
    if (r == 0) return;
    if (!p->range_is_selection) {
        cdyn__gemm('T', 'N', r, cols, n, alpha, p->range, n, X, ldx, 0.0, out, ldo);
        return;
    }
    for (int j = 0; j < cols; ++j)
        for (int k = 0; k < r; ++k)
            out[k + (size_t)j * ldo] =
                alpha * p->range_signs[k] * X[p->range_rows[k] + (size_t)j * ldx];
}

void cdyn__dae_beta_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                      double *out, int ldo)
{
    int n = dae->n, q = dae->q;
    const cdyn__dae_part *p = &dae->part;
    if (!p->beta_is_selection) {
        cdyn__gemm('T', 'N', q, cols, n, alpha, p->beta, n, X, ldx, 0.0, out, ldo);
        return;
    }
    for (int j = 0; j < cols; ++j)
        for (int k = 0; k < q; ++k)
            out[k + (size_t)j * ldo] = alpha * p->beta_signs[k] * X[p->beta_rows[k] + (size_t)j * ldx];
}

/* 2 (n + 1) eps sum_i (e_i + |beta_ik|) |x_i| (k not a unit column):
 * what the rounding of the sum (e_i = 0) or also that of beta itself
 * (of_beta: e_i = beta_error_ik) leaves in (beta^T x)_k. */
static double beta_rounding(const cdyn__dae_part *p, int n, int k, const double *x, int of_beta)
{
    const double *b = p->beta + (size_t)k * n;
    double sum = 0.0;
    for (int i = 0; i < n; ++i)
        sum += ((of_beta ? p->beta_error[i + (size_t)k * n] : 0.0) + fabs(b[i])) * fabs(x[i]);
    return 2.0 * (n + 1) * DBL_EPSILON * sum;
}

void cdyn__dae_beta_t_jacobian(const cdyn_dae *dae, int cols, const double *X, int ldx,
                               double *out, int ldo)
{
    int n = dae->n, q = dae->q;
    const cdyn__dae_part *p = &dae->part;
    cdyn__dae_beta_t(dae, cols, X, ldx, 1.0, out, ldo);
    if (p->beta_is_selection) return; /* exact copies */
    for (int j = 0; j < cols; ++j) {
        const double *x = X + (size_t)j * ldx;
        double *o = out + (size_t)j * ldo, column = 0.0;
        for (int i = 0; i < n; ++i) column += fabs(x[i]);
        /* the bound is at most 2 (n + 1) eps sum_i |X_ij| (|beta_ik| <= 1):
         * most entries are decided without it; a non-finite column stays
         * for the caller's check */
        if (!(column < INFINITY)) continue;
        double most = 2.0 * (n + 1) * DBL_EPSILON * column;
        for (int k = 0; k < q; ++k)
            if (o[k] != 0.0 && !p->beta_unit[k] && fabs(o[k]) <= most &&
                fabs(o[k]) <= beta_rounding(p, n, k, x, 0))
                o[k] = 0.0;
    }
}

void cdyn__dae_g0_rounding(const cdyn_dae *dae, const double *F, double *noise)
{
    const cdyn__dae_part *p = &dae->part;
    for (int k = 0; k < dae->q; ++k)
        noise[k] = p->beta_unit[k] ? 0.0 : beta_rounding(p, dae->n, k, F, 1);
}

cdyn_status cdyn_dae_set_mass(cdyn_dae *dae, const double *M, int ldm)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_mass";
    int n = dae->n;
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!M) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: M is NULL", fn);
    if (ldm < n) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ldm = %d < n = %d", fn, ldm, n);
    long bad = cdyn__first_nonfinite(n, n, M, ldm);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) is not finite", fn,
                          bad % n, bad / n);
    cdyn_status st = cdyn__dae_install_mass(dae, fn, M, ldm);
    if (st == CDYN_OK) dae->mass_fn = NULL;
    return st;
}

int cdyn_dae_rank(const cdyn_dae *dae) { return dae ? dae->r : -1; }

int cdyn_dae_ode_size(const cdyn_dae *dae)
{
    if (!dae) return -1;
    return dae->split_done ? dae->ny : dae->r;
}

int cdyn_dae_index2(const cdyn_dae *dae) { return dae && dae->split_done && dae->index2; }

cdyn_status cdyn_dae_bases(const cdyn_dae *dae, double *beta, int ldbeta, double *P, int ldp)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_bases";
    int n = dae->n; /* a read-only accessor: allowed from inside a callback */
    if (dae->r < 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_mass first", fn);
    if ((beta && ldbeta < n) || (P && ldp < n))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: leading dimension < n = %d", fn, n);
    if (beta && P && cdyn__overlap(beta, sizeof(double) * ((size_t)ldbeta * (dae->q - 1) + n),
                                   P, sizeof(double) * ((size_t)ldp * (dae->r - 1) + n)))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: beta and P overlap", fn);
    for (int j = 0; beta && j < dae->q; ++j)
        memcpy(beta + (size_t)j * ldbeta, dae->part.beta + (size_t)j * n, sizeof(double) * (size_t)n);
    for (int j = 0; P && j < dae->r; ++j)
        memcpy(P + (size_t)j * ldp, dae->part.range + (size_t)j * n, sizeof(double) * (size_t)n);
    return CDYN_OK;
}

cdyn_status cdyn_dae_get_counters(const cdyn_dae *dae, cdyn_dae_counters *counters)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!counters)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_get_counters: counters is NULL");
    *counters = dae->counters;
    return CDYN_OK;
}

cdyn_status cdyn_dae_reset_counters(cdyn_dae *dae)
{
    if (!dae) return CDYN_ERR_ARG;
    if (cdyn__dae_check_idle(dae, "cdyn_dae_reset_counters")) return CDYN_ERR_BUSY;
    memset(&dae->counters, 0, sizeof dae->counters);
    return CDYN_OK;
}

/* ---- callbacks ------------------------------------------------------- */

static cdyn_status callback_failed(cdyn_dae *dae, const char *fn, const char *which, int code)
{
    dae->callback_code = code;
    return cdyn__fail(dae->msg, CDYN_ERR_CALLBACK, "%s: %s callback returned %d", fn, which,
                      code);
}

static cdyn_status check_output(cdyn_dae *dae, const char *fn, const char *what, int rows,
                                int cols, const double *A)
{
    long bad = cdyn__first_nonfinite(rows, cols, A, rows);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: %s entry %ld is not finite", fn, what,
                      bad);
}

cdyn_status cdyn__dae_force(cdyn_dae *dae, const char *fn, double t, const double *v,
                            double *out)
{
    dae->guard.in_callback++;
    dae->counters.force_evaluations++;
    int code = dae->force(t, v, out, dae->user);
    dae->guard.in_callback--;
    if (code != 0) return callback_failed(dae, fn, "force", code);
    return check_output(dae, fn, "F", dae->n, 1, out);
}

cdyn_status cdyn__dae_call_mass(cdyn_dae *dae, const char *fn, double t, double *out)
{
    int n = dae->n;
    dae->guard.in_callback++;
    dae->counters.mass_evaluations++;
    int code = dae->mass_fn(t, out, n, dae->mass_user);
    dae->guard.in_callback--;
    if (code != 0) return callback_failed(dae, fn, "mass", code);
    long bad = cdyn__first_nonfinite(n, n, out, n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) at t = %g is not finite",
                          fn, bad % n, bad / n, t);
    return CDYN_OK;
}

/* cdyn__dae_step_scale: dae_internal.h. */
double cdyn__dae_step_scale(const cdyn_dae *dae, const double *v, int j)
{
    /* a solved state within its solver's tolerance of 0 is the rounding of
     * that solve (1e-37 V beside 1e-18 V), not a scale for a step */
    double value = fabs(v[j]) > dae->resolution[j] ? fabs(v[j]) : 0.0;
    double s = fmax(value, dae->magnitude[j]);
    if (s > 0.0) return s;
    double smallest = INFINITY;
    for (int i = 0; i < dae->n; ++i)
        if (dae->magnitude[i] > 0.0) smallest = fmin(smallest, dae->magnitude[i]);
    return isfinite(smallest) ? smallest : 1.0;
}

cdyn_status cdyn__dae_force_jacobian(cdyn_dae *dae, const char *fn, double t, double *v)
{
    return cdyn__dae_force_jacobian_to(dae, fn, t, v, dae->force_val, dae->force_shift,
                                       dae->force_jac, dae->n);
}

cdyn_status cdyn__dae_force_jacobian_to(cdyn_dae *dae, const char *fn, double t, double *v,
                                        const double *base, double *shift, double *out,
                                        int ldo)
{
    int n = dae->n;
    const char *what = "dF/dv";
    if (dae->jacobian) {
        dae->guard.in_callback++;
        dae->counters.jacobian_evaluations++;
        int code = dae->jacobian(t, v, out, ldo, dae->user);
        dae->guard.in_callback--;
        if (code != 0) return callback_failed(dae, fn, "Jacobian", code);
    } else {
        what = "the difference dF/dv";
        for (int j = 0; j < n; ++j) {
            double h = 0.0;
            cdyn_status st = cdyn__dae_shifted_force(dae, fn, t, v, j, base, shift, &h);
            if (st != CDYN_OK) return st;
            for (int i = 0; i < n; ++i) out[i + (size_t)j * ldo] = (shift[i] - base[i]) / h;
        }
    }
    long bad = cdyn__first_nonfinite(n, n, out, ldo);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: %s(%ld, %ld) is not finite", fn, what,
                      bad % n, bad / n);
}

cdyn_status cdyn__dae_shifted_force(cdyn_dae *dae, const char *fn, double t, double *v, int j,
                                    const double *base, double *shifted, double *h)
{
    int n = dae->n;
    double saved = v[j], step = dae->fd_step * cdyn__dae_step_scale(dae, v, j);
    for (int tries = 0; step > 0.0; ++tries) {
        v[j] = saved + step;
        *h = v[j] - saved; /* the step actually representable */
        cdyn_status st = cdyn__dae_force(dae, fn, t, v, shifted);
        v[j] = saved;
        if (st != CDYN_OK) return st;
        step = cdyn__dae_next_step(n, base, shifted, step, tries);
    }
    return CDYN_OK;
}

/* F at (t + tau, v) for dF/dt's differences. */
typedef struct {
    cdyn_dae *dae;
    const char *fn;
    double t;
    const double *v;
} force_in_time;

static cdyn_status force_offset(void *ctx, double tau, double *out)
{
    const force_in_time *at = ctx;
    return cdyn__dae_force(at->dae, at->fn, at->t + tau, at->v, out);
}

double *cdyn__dae_time_terms(cdyn_dae *dae)
{
    return dae->time_derivative ? NULL : dae->time_work + (size_t)CDYN__TIME_TERMS * dae->n;
}

const double *cdyn__dae_terms_of(cdyn_dae *dae, const double *jac, const double *v)
{
    int n = dae->n;
    double *terms = cdyn__dae_time_terms(dae);
    if (!terms) return NULL;
    memset(terms, 0, sizeof(double) * (size_t)n);
    for (int j = 0; j < n; ++j) {
        const double *col = jac + (size_t)j * n;
        double size = fabs(v[j]);
        for (int i = 0; i < n; ++i) terms[i] += fabs(col[i]) * size;
    }
    return terms;
}

cdyn_status cdyn__dae_force_time(cdyn_dae *dae, const char *fn, double t, const double *v,
                                 const double *terms)
{
    int n = dae->n;
    if (dae->time_derivative) {
        dae->guard.in_callback++;
        dae->counters.time_evaluations++;
        int code = dae->time_derivative(t, v, dae->force_dt, dae->user);
        dae->guard.in_callback--;
        if (code != 0) return callback_failed(dae, fn, "time-derivative", code);
        return check_output(dae, fn, "dF/dt", n, 1, dae->force_dt);
    }
    /* differences stepped CDYN__TIME_STEP seconds whatever t, and a
     * quarter of it, checked against each other (difference_tableau.h):
     * the size of t says nothing of the time scale of F's inputs (steps of
     * 6e-6 |t|, before, made the rates of a network with a 50 Hz inflow
     * 30 % off at t = 1000 s and wrong in sign at 1e4 s, with CDYN_OK), and
     * one difference alone was (w h)^2 / 6 off for an input of w rad/s
     * (2.4e-4 at 1 kHz, 2.4 % at 10 kHz, with CDYN_OK); judged against
     * the rounding of F's terms, not of its values (a residual, about 0 at
     * a consistent state: a reservoir of 1e7 Pa drawn down by 1e-3 Pa/s
     * had its orifice's rate come back 0, with CDYN_OK) */
    double *w = dae->time_work, best = 0.0;
    cdyn__tableau_work work = cdyn__tableau_layout(w, (size_t)n, CDYN__TIME_LEVELS);
    force_in_time at = {dae, fn, t, v};
    double *spare = w + (size_t)CDYN__TABLEAU_WORK(CDYN__TIME_LEVELS) * n;
    cdyn_status st = cdyn__time_derivative(n, n, t, CDYN__TIME_STEP, CDYN__TIME_LEVELS, terms,
                                           force_offset, &at, &work, spare, dae->force_dt, &best);
    if (st == CDYN_OK && !isfinite(best))
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                          "%s: the difference quotients of dF/dt are not finite at t = %g", fn,
                          t);
    if (st != CDYN_OK) return st;
    return check_output(dae, fn, "the difference dF/dt", n, 1, dae->force_dt);
}

cdyn_status cdyn__dae_check_point(cdyn_dae *dae, const char *fn, double t, const double *v)
{
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (dae->r < 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_mass first", fn);
    if (!dae->force)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_model first", fn);
    if (!v) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: v is NULL", fn);
    if (!isfinite(t)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    long bad = cdyn__first_nonfinite(dae->n, 1, v, dae->n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: v[%ld] is not finite", fn, bad);
    return CDYN_OK;
}

cdyn_status cdyn_dae_hidden_constraints(cdyn_dae *dae, double t, const double *v, double *G0)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_hidden_constraints";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    if (!G0 && dae->q > 0) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: G0 is NULL", fn);
    st = cdyn__dae_mass_at(dae, fn, t);
    if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, v, dae->force_val);
    if (st != CDYN_OK) return st;
    /* T3.1: G0 = beta^T F, in workspace (written last: G0 may alias v) */
    double *g = dae->resid_out;
    cdyn__dae_beta_t(dae, 1, dae->force_val, dae->n, 1.0, g, dae->q);
    long bad = dae->q > 0 ? cdyn__first_nonfinite(dae->q, 1, g, dae->q) : -1;
    if (bad >= 0) /* a finite F, but beta^T F overflows */
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: G0[%ld] overflows at t = %g", fn,
                          bad, t);
    if (dae->q > 0) memcpy(G0, g, sizeof(double) * (size_t)dae->q);
    return CDYN_OK;
}

/* ---- T3.2: index by repeated augmentation ---------------------------- */

/* a <- U^T D_r a for the n x n a: an invertible combination of the rows
 * whose last n - rank rows vanish for the augmented matrix. */
static void combine_rows(cdyn_dae *dae, double *a)
{
    int n = dae->n;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) a[i + (size_t)j * n] *= dae->row_scale[i];
    cdyn__gemm('T', 'N', n, n, n, 1.0, dae->u, n, a, n, 0.0, dae->prod, n);
    memcpy(a, dae->prod, sizeof(double) * (size_t)n * n);
}

/* Mark the equations that take part in the null row i of `origin`: those
 * whose share |origin(i, j)| * size_j is at least 1e-8 of the largest (a
 * measure that does not change with the units of the equations). */
static void mark_levels(cdyn_dae *dae, int i, int level)
{
    int n = dae->n;
    double largest = 0.0;
    for (int j = 0; j < n; ++j)
        largest = fmax(largest, fabs(dae->origin[i + (size_t)j * n]) * dae->equation_size[j]);
    for (int j = 0; j < n; ++j) {
        double share = fabs(dae->origin[i + (size_t)j * n]) * dae->equation_size[j];
        if (largest > 0.0 && share >= 1e-8 * largest && dae->equation_level[j] < 0)
            dae->equation_level[j] = level;
    }
}

/* Scale the columns of aug and aug_rhs (one factor per state, a power of
 * two) so that each column's largest entry of [M | dF/dv], with every
 * equation first divided by its size, lies in [1/2, 1). The row
 * combinations of the analysis are then formed in that frame: a state
 * whose entries are small in the caller's units (pressures in 1e-4 Pa
 * beside flows in m^3/s) keeps its entries above the rounding that the
 * combinations of the other columns leave in it, so the levels, and the
 * index, do not depend on the units of the states. Column scaling changes
 * neither the rank nor the row combinations. Uses tau (n). */
static void scale_state_columns(cdyn_dae *dae)
{
    int n = dae->n;
    double *c = dae->tau;
    for (int j = 0; j < n; ++j) {
        double largest = 0.0;
        for (int i = 0; i < n; ++i) {
            double size = dae->equation_size[i];
            if (!(size > 0.0)) continue;
            double a = fabs(dae->aug[i + (size_t)j * n]), b = fabs(dae->aug_rhs[i + (size_t)j * n]);
            double e = (a > b ? a : b) / size;
            largest = e > largest ? e : largest;
        }
        c[j] = cdyn__inverse_power_of_two(largest);
    }
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            dae->aug[i + (size_t)j * n] *= c[j];
            dae->aug_rhs[i + (size_t)j * n] *= c[j];
        }
}

cdyn_status cdyn_dae_analyze(cdyn_dae *dae, double t, const double *v, int *index)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_analyze";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    if (!index) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: index is NULL", fn);
    int n = dae->n;
    memcpy(dae->v_trial, v, sizeof(double) * (size_t)n);
    st = cdyn__dae_mass_at(dae, fn, t);
    if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st == CDYN_OK) st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_trial);
    if (st != CDYN_OK) return st;
    /* Augmented matrix `aug` (starts as M), the Jacobian of its right-hand
     * side `aug_rhs` (starts as dF/dv, linearised: zero for the rows of
     * differentiated constraints) and `origin`, which equations each row
     * combines (starts as I). Every rank decision is made on the
     * equilibrated matrix (rank policy), so the index is the same in any
     * units of states and equations. */
    memcpy(dae->aug, dae->part.mass, sizeof(double) * (size_t)n * n);
    memcpy(dae->aug_rhs, dae->force_jac, sizeof(double) * (size_t)n * n);
    memset(dae->origin, 0, sizeof(double) * (size_t)n * n);
    for (int i = 0; i < n; ++i) {
        dae->origin[i + (size_t)i * n] = 1.0;
        dae->equation_level[i] = -1;
        dae->equation_size[i] = 0.0;
        for (int j = 0; j < n; ++j)
            dae->equation_size[i] = fmax(dae->equation_size[i],
                                         fmax(fabs(dae->aug[i + (size_t)j * n]),
                                              fabs(dae->aug_rhs[i + (size_t)j * n])));
    }
    scale_state_columns(dae);
    memset(dae->level_count, 0, sizeof dae->level_count);
    dae->analyzed = 0;
    for (int level = 0;; ++level) {
        if (cdyn__first_nonfinite(n, n, dae->aug, n) >= 0) /* LAPACK must not see it */
            return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                              "%s: the augmented matrix overflowed at level %d", fn, level);
        int rank = cdyn__dae_row_rank(dae, dae->aug);
        if (rank < 0)
            return cdyn__fail(dae->msg, CDYN_ERR_LAPACK,
                              "%s: dgeqp3 failed on the augmented matrix", fn);
        if (rank == n) {
            dae->levels = level;
            dae->analyzed = 1;
            *index = level;
            return CDYN_OK;
        }
        if (level == dae->max_index)
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: augmented matrix still has rank %d < n = %d after %d "
                              "levels (rank decided after equilibration, tolerance %.1e): the "
                              "DAE is singular or its index exceeds %d",
                              fn, rank, n, level, dae->rank_tol, dae->max_index);
        /* rows rank..n-1 of U^T D_r [aug | aug_rhs] are 0 = constraint; their
         * derivative replaces them in the augmented matrix */
        combine_rows(dae, dae->aug);
        combine_rows(dae, dae->aug_rhs);
        combine_rows(dae, dae->origin);
        dae->level_count[level] = n - rank;
        for (int i = rank; i < n; ++i) {
            mark_levels(dae, i, level);
            for (int j = 0; j < n; ++j) {
                size_t ij = (size_t)i + (size_t)j * n;
                dae->aug[ij] = dae->aug_rhs[ij];
                dae->aug_rhs[ij] = 0.0;
            }
        }
    }
}

int cdyn_dae_constraints_at_level(const cdyn_dae *dae, int level)
{
    if (!dae || !dae->analyzed || level < 0 || level >= dae->levels) return -1;
    return dae->level_count[level];
}

cdyn_status cdyn_dae_equation_levels(const cdyn_dae *dae, int *level_of_equation)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!dae->analyzed || !level_of_equation)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_equation_levels: %s",
                          !level_of_equation ? "output is NULL" : "call cdyn_dae_analyze first");
    memcpy(level_of_equation, dae->equation_level, sizeof(int) * (size_t)dae->n);
    return CDYN_OK;
}

int cdyn_dae_callback_code(const cdyn_dae *dae) { return dae ? dae->callback_code : 0; }

const char *cdyn_dae_last_error(const cdyn_dae *dae)
{
    return dae ? dae->msg : "cdyn_dae: NULL object";
}

cdyn_newton *cdyn_dae_newton(cdyn_dae *dae) { return dae ? dae->newton : NULL; }

long cdyn_dae_svd_rate_solves(const cdyn_dae *dae) { return dae ? dae->svd_rate_solves : -1; }

int cdyn_dae_split_event(const cdyn_dae *dae) { return dae ? dae->split_event : 0; }

cdyn_status cdyn_dae_split_quality(const cdyn_dae *dae, double *current, double *best)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_split_quality: call cdyn_dae_split first");
    if (current) *current = dae->split_quality;
    if (best) *best = dae->split_best;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_split_limit(cdyn_dae *dae, double limit)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_split_limit";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!(limit >= 1.0) || isinf(limit))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: limit = %g is not finite and >= 1", fn,
                          limit);
    dae->split_limit = limit;
    return CDYN_OK;
}

int cdyn_dae_size(const cdyn_dae *dae) { return dae ? dae->n : -1; }
