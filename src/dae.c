/* Quasi-linear DAE: the mass matrix and its bases (THEORY T3.1), hidden
 * constraints, and the index by repeated augmentation (T3.2). */
#include "dae_internal.h"
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

cdyn_dae *cdyn_dae_create(int n, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (n < 1 || (size_t)n * (size_t)n > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_dae *dae = calloc(1, sizeof *dae);
    if (!dae) goto fail;
    size_t nn = (size_t)n * n;
    dae->n = n;
    dae->r = -1;
    dae->rank_tol = 1e-10;
    dae->fd_step = 1.5e-8;
    dae->max_index = 5;
    dae->lwork = cdyn__gesvd_lwork(n, n);
    dae->work = malloc(sizeof(double) * (size_t)dae->lwork);
    dae->mass = malloc(sizeof(double) * nn);
    dae->massless = malloc(sizeof(int) * (size_t)n);
    dae->equation_level = malloc(sizeof(int) * (size_t)n);
    dae->integrated = malloc(sizeof(int) * (size_t)n);
    dae->algebraic = malloc(sizeof(int) * (size_t)n);
    dae->v_last = malloc(sizeof(double) * (size_t)n);
    dae->vdot_last = malloc(sizeof(double) * (size_t)n);
    dae->v_trial = malloc(sizeof(double) * (size_t)n);
    dae->force_val = malloc(sizeof(double) * (size_t)n);
    dae->force_shift = malloc(sizeof(double) * (size_t)n);
    dae->force_dt = malloc(sizeof(double) * (size_t)n);
    dae->force_jac = malloc(sizeof(double) * nn);
    dae->aug = malloc(sizeof(double) * nn);
    dae->aug_rhs = malloc(sizeof(double) * nn);
    dae->origin = malloc(sizeof(double) * nn);
    dae->svd_copy = malloc(sizeof(double) * nn);
    dae->u = malloc(sizeof(double) * nn);
    dae->vt = malloc(sizeof(double) * nn);
    dae->prod = malloc(sizeof(double) * nn);
    dae->sv = malloc(sizeof(double) * (size_t)n);
    if (!dae->work || !dae->mass || !dae->massless || !dae->equation_level ||
        !dae->integrated || !dae->algebraic || !dae->v_last || !dae->vdot_last ||
        !dae->v_trial || !dae->force_val || !dae->force_shift || !dae->force_dt ||
        !dae->force_jac || !dae->aug || !dae->aug_rhs || !dae->origin || !dae->svd_copy ||
        !dae->u || !dae->vt || !dae->prod || !dae->sv)
        goto fail;
    *status = CDYN_OK;
    return dae;
fail:
    cdyn_dae_free(dae);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

/* What set_mass allocates for a given rank (freed again on the next call). */
static void free_rank_dependent(cdyn_dae *dae)
{
    free(dae->beta);
    free(dae->range);
    free(dae->range_t_mass);
    free(dae->constraint_jac);
    free(dae->ga);
    free(dae->coef);
    free(dae->offset);
    free(dae->vec_q);
    free(dae->vec_q2);
    free(dae->mass_alpha);
    free(dae->reduced);
    free(dae->reduced_rhs);
    free(dae->ipiv);
    free(dae->mass_saved);
    free(dae->beta_ref);
    free(dae->beta_rows);
    free(dae->beta_signs);
    free(dae->beta_plus);
    free(dae->beta_minus);
    free(dae->beta_dot);
    free(dae->align);
    free(dae->align_u);
    free(dae->align_vt);
    free(dae->align_sv);
    cdyn_nullspace_free(dae->split_ns);
    cdyn_newton_free(dae->newton);
    dae->beta = dae->range = dae->range_t_mass = dae->constraint_jac = NULL;
    dae->ga = dae->coef = dae->offset = dae->vec_q = dae->vec_q2 = NULL;
    dae->mass_alpha = dae->reduced = dae->reduced_rhs = NULL;
    dae->ipiv = dae->beta_rows = NULL;
    dae->beta_signs = NULL;
    dae->mass_saved = dae->beta_ref = dae->beta_plus = dae->beta_minus = dae->beta_dot = NULL;
    dae->align = dae->align_u = dae->align_vt = dae->align_sv = NULL;
    dae->split_ns = NULL;
    dae->newton = NULL;
}

void cdyn_dae_free(cdyn_dae *dae)
{
    if (!dae) return;
    free_rank_dependent(dae);
    free(dae->work);
    free(dae->mass);
    free(dae->massless);
    free(dae->equation_level);
    free(dae->integrated);
    free(dae->algebraic);
    free(dae->v_last);
    free(dae->vdot_last);
    free(dae->v_trial);
    free(dae->force_val);
    free(dae->force_shift);
    free(dae->force_dt);
    free(dae->force_jac);
    free(dae->aug);
    free(dae->aug_rhs);
    free(dae->origin);
    free(dae->svd_copy);
    free(dae->u);
    free(dae->vt);
    free(dae->prod);
    free(dae->sv);
    free(dae);
}

cdyn_status cdyn_dae_set_rank_tolerance(cdyn_dae *dae, double tol)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_set_rank_tolerance: tol = %g is not in (0, 1)", tol);
    dae->rank_tol = tol;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_max_index(cdyn_dae *dae, int max_index)
{
    if (!dae) return CDYN_ERR_ARG;
    if (max_index < 1 || max_index > CDYN_DAE_MAX_INDEX)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_set_max_index: %d is not in [1, %d]", max_index,
                          CDYN_DAE_MAX_INDEX);
    dae->max_index = max_index;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_fd_step(cdyn_dae *dae, double h)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!(h > 0.0 && h < 1.0))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_set_fd_step: h = %g is not in (0, 1)",
                          h);
    dae->fd_step = h;
    return CDYN_OK;
}

cdyn_status cdyn_dae_set_functions(cdyn_dae *dae, cdyn_dae_force_fn force,
                                   cdyn_dae_jacobian_fn jacobian,
                                   cdyn_dae_time_fn time_derivative, void *user)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!force)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_set_functions: force is NULL");
    dae->force = force;
    dae->jacobian = jacobian;
    dae->time_derivative = time_derivative;
    dae->user = user;
    return CDYN_OK;
}

/* Allocate the rank-dependent parts for rank r (THEORY T3.1, T3.3). */
static int alloc_rank_dependent(cdyn_dae *dae, int r)
{
    int n = dae->n, q = n - r;
    size_t r1 = (size_t)(r > 0 ? r : 1), q1 = (size_t)(q > 0 ? q : 1);
    dae->beta = malloc(sizeof(double) * (size_t)n * q1);
    dae->range = malloc(sizeof(double) * (size_t)n * r1);
    dae->range_t_mass = malloc(sizeof(double) * r1 * (size_t)n);
    dae->constraint_jac = malloc(sizeof(double) * q1 * (size_t)n);
    dae->ga = malloc(sizeof(double) * q1 * q1);
    dae->coef = malloc(sizeof(double) * q1 * r1);
    dae->offset = malloc(sizeof(double) * q1);
    dae->vec_q = malloc(sizeof(double) * q1);
    dae->vec_q2 = malloc(sizeof(double) * q1);
    dae->mass_alpha = malloc(sizeof(double) * (size_t)n * r1);
    dae->reduced = malloc(sizeof(double) * r1 * r1);
    dae->reduced_rhs = malloc(sizeof(double) * r1);
    dae->ipiv = malloc(sizeof(int) * r1);
    dae->mass_saved = malloc(sizeof(double) * (size_t)n * n);
    dae->beta_ref = malloc(sizeof(double) * (size_t)n * q1);
    dae->beta_rows = malloc(sizeof(int) * q1);
    dae->beta_signs = malloc(sizeof(double) * q1);
    dae->beta_plus = malloc(sizeof(double) * (size_t)n * q1);
    dae->beta_minus = malloc(sizeof(double) * (size_t)n * q1);
    dae->beta_dot = malloc(sizeof(double) * (size_t)n * q1);
    dae->align = malloc(sizeof(double) * q1 * q1);
    dae->align_u = malloc(sizeof(double) * q1 * q1);
    dae->align_vt = malloc(sizeof(double) * q1 * q1);
    dae->align_sv = malloc(sizeof(double) * q1);
    if (!dae->mass_saved || !dae->beta_ref || !dae->beta_rows || !dae->beta_signs ||
        !dae->beta_plus || !dae->beta_minus ||
        !dae->beta_dot || !dae->align || !dae->align_u || !dae->align_vt || !dae->align_sv)
        return 0;
    if (!dae->beta || !dae->range || !dae->range_t_mass || !dae->constraint_jac || !dae->ga ||
        !dae->coef || !dae->offset || !dae->vec_q || !dae->vec_q2 || !dae->mass_alpha ||
        !dae->reduced || !dae->reduced_rhs || !dae->ipiv)
        return 0;
    cdyn_status st = CDYN_OK;
    if (q > 0) dae->newton = cdyn_newton_create(q, q, &st);
    if (st == CDYN_OK && q > 0 && q < n) dae->split_ns = cdyn_nullspace_create(n, q, &st);
    return st == CDYN_OK;
}

cdyn_status cdyn__dae_install_mass(cdyn_dae *dae, const char *fn)
{
    int n = dae->n;
    /* T3.1: M = U S V^T; beta = U(:, r:n), P = U(:, 0:r) */
    int r = cdyn__dae_mass_svd(dae);
    free_rank_dependent(dae);
    dae->split_done = dae->state_valid = dae->analyzed = 0;
    dae->r = -1;
    if (!alloc_rank_dependent(dae, r)) {
        free_rank_dependent(dae);
        return cdyn__fail(dae->msg, CDYN_ERR_NOMEM, "%s: out of memory", fn);
    }
    int q = n - r;
    memcpy(dae->range, dae->u, sizeof(double) * (size_t)n * r);
    memcpy(dae->beta, dae->u + (size_t)n * r, sizeof(double) * (size_t)n * q);
    memcpy(dae->beta_ref, dae->beta, sizeof(double) * (size_t)n * q);
    dae->q = q;
    cdyn__dae_detect_selection(dae);
    cdyn__gemm('T', 'N', r, n, n, 1.0, dae->range, n, dae->mass, n, 0.0, dae->range_t_mass,
               r > 0 ? r : 1);
    /* states whose column of M vanishes (relative to the largest entry) */
    double scale = 0.0;
    for (size_t k = 0; k < (size_t)n * n; ++k) scale = fmax(scale, fabs(dae->mass[k]));
    for (int j = 0; j < n; ++j) {
        double col = 0.0;
        for (int i = 0; i < n; ++i) col = fmax(col, fabs(dae->mass[i + (size_t)j * n]));
        dae->massless[j] = col <= dae->rank_tol * scale;
    }
    if (dae->split_ns) cdyn_nullspace_set_preferred_dependent(dae->split_ns, dae->massless);
    dae->r = r;
    dae->q = q;
    return CDYN_OK;
}

void cdyn__dae_detect_selection(cdyn_dae *dae)
{
    int n = dae->n, q = dae->q, selection = q > 0;
    for (int k = 0; k < q && selection; ++k) {
        const double *col = dae->beta + (size_t)k * n;
        int row = -1;
        for (int i = 0; i < n && selection; ++i) {
            if (col[i] == 0.0) continue;
            if (row >= 0 || fabs(col[i]) != 1.0) selection = 0;
            row = i;
        }
        if (row < 0) selection = 0;
        if (selection) {
            dae->beta_rows[k] = row;
            dae->beta_signs[k] = col[row];
        }
    }
    dae->beta_is_selection = selection;
}

void cdyn__dae_beta_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                      double *out, int ldo)
{
    int n = dae->n, q = dae->q;
    if (!dae->beta_is_selection) {
        cdyn__gemm('T', 'N', q, cols, n, alpha, dae->beta, n, X, ldx, 0.0, out, ldo);
        return;
    }
    for (int j = 0; j < cols; ++j)
        for (int k = 0; k < q; ++k)
            out[k + (size_t)j * ldo] =
                alpha * dae->beta_signs[k] * X[dae->beta_rows[k] + (size_t)j * ldx];
}

cdyn_status cdyn_dae_set_mass(cdyn_dae *dae, const double *M, int ldm)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_mass";
    int n = dae->n;
    if (!M) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: M is NULL", fn);
    if (ldm < n) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ldm = %d < n = %d", fn, ldm, n);
    long bad = cdyn__first_nonfinite(n, n, M, ldm);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) is not finite", fn,
                          bad % n, bad / n);
    for (int j = 0; j < n; ++j)
        memcpy(dae->mass + (size_t)j * n, M + (size_t)j * ldm, sizeof(double) * (size_t)n);
    dae->mass_fn = NULL;
    return cdyn__dae_install_mass(dae, fn);
}

int cdyn_dae_rank(const cdyn_dae *dae) { return dae ? dae->r : -1; }

cdyn_status cdyn_dae_bases(cdyn_dae *dae, double *beta, int ldbeta, double *P, int ldp)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_bases";
    int n = dae->n;
    if (dae->r < 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_mass first", fn);
    if ((beta && ldbeta < n) || (P && ldp < n))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: leading dimension < n = %d", fn, n);
    for (int j = 0; beta && j < dae->q; ++j)
        memcpy(beta + (size_t)j * ldbeta, dae->beta + (size_t)j * n, sizeof(double) * (size_t)n);
    for (int j = 0; P && j < dae->r; ++j)
        memcpy(P + (size_t)j * ldp, dae->range + (size_t)j * n, sizeof(double) * (size_t)n);
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
    int code = dae->force(t, v, out, dae->user);
    if (code != 0) return callback_failed(dae, fn, "force", code);
    return check_output(dae, fn, "F", dae->n, 1, out);
}

cdyn_status cdyn__dae_force_jacobian(cdyn_dae *dae, const char *fn, double t, double *v)
{
    int n = dae->n;
    if (dae->jacobian) {
        int code = dae->jacobian(t, v, dae->force_jac, n, dae->user);
        if (code != 0) return callback_failed(dae, fn, "Jacobian", code);
        return check_output(dae, fn, "dF/dv", n, n, dae->force_jac);
    }
    for (int j = 0; j < n; ++j) {
        double saved = v[j];
        double h = dae->fd_step * fmax(fabs(saved), 1.0);
        v[j] = saved + h;
        h = v[j] - saved;
        cdyn_status st = cdyn__dae_force(dae, fn, t, v, dae->force_shift);
        v[j] = saved;
        if (st != CDYN_OK) return st;
        for (int i = 0; i < n; ++i)
            dae->force_jac[i + (size_t)j * n] = (dae->force_shift[i] - dae->force_val[i]) / h;
    }
    return CDYN_OK;
}

cdyn_status cdyn__dae_force_time(cdyn_dae *dae, const char *fn, double t, const double *v)
{
    int n = dae->n;
    if (dae->time_derivative) {
        int code = dae->time_derivative(t, v, dae->force_dt, dae->user);
        if (code != 0) return callback_failed(dae, fn, "time-derivative", code);
        return check_output(dae, fn, "dF/dt", n, 1, dae->force_dt);
    }
    double h = dae->fd_step * fmax(fabs(t), 1.0);
    volatile double shifted = t + h; /* the step actually representable */
    h = shifted - t;
    cdyn_status st = cdyn__dae_force(dae, fn, t + h, v, dae->force_shift);
    if (st != CDYN_OK) return st;
    for (int i = 0; i < n; ++i) dae->force_dt[i] = (dae->force_shift[i] - dae->force_val[i]) / h;
    return CDYN_OK;
}

cdyn_status cdyn__dae_check_point(cdyn_dae *dae, const char *fn, double t, const double *v)
{
    if (dae->r < 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_mass first", fn);
    if (!dae->force)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_functions first", fn);
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
    /* T3.1: G0 = beta^T F */
    cdyn__dae_beta_t(dae, 1, dae->force_val, dae->n, 1.0, G0, dae->q);
    return CDYN_OK;
}

/* ---- T3.2: index by repeated augmentation ---------------------------- */

/* SVD rank of the n x n matrix a (copied; a is kept), U into dae->u. */
static int svd_rank(cdyn_dae *dae, const double *a)
{
    int n = dae->n;
    memcpy(dae->svd_copy, a, sizeof(double) * (size_t)n * n);
    cdyn__gesvd(n, n, dae->svd_copy, n, dae->sv, dae->u, n, dae->vt, n, dae->work, dae->lwork);
    int rank = 0;
    while (rank < n && dae->sv[0] > 0.0 && dae->sv[rank] > dae->rank_tol * dae->sv[0]) ++rank;
    return rank;
}

int cdyn__dae_mass_svd(cdyn_dae *dae) { return svd_rank(dae, dae->mass); }

/* a <- U^T a for the n x n a (U in dae->u). */
static void rotate_rows(cdyn_dae *dae, double *a)
{
    int n = dae->n;
    cdyn__gemm('T', 'N', n, n, n, 1.0, dae->u, n, a, n, 0.0, dae->prod, n);
    memcpy(a, dae->prod, sizeof(double) * (size_t)n * n);
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
     * combines (starts as I). */
    memcpy(dae->aug, dae->mass, sizeof(double) * (size_t)n * n);
    memcpy(dae->aug_rhs, dae->force_jac, sizeof(double) * (size_t)n * n);
    memset(dae->origin, 0, sizeof(double) * (size_t)n * n);
    for (int i = 0; i < n; ++i) dae->origin[i + (size_t)i * n] = 1.0;
    for (int i = 0; i < n; ++i) dae->equation_level[i] = -1;
    memset(dae->level_count, 0, sizeof dae->level_count);
    dae->analyzed = 0;
    for (int level = 0;; ++level) {
        if (cdyn__first_nonfinite(n, n, dae->aug, n) >= 0) /* LAPACK must not see it */
            return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                              "%s: the augmented matrix overflowed at level %d", fn, level);
        int rank = svd_rank(dae, dae->aug);
        if (rank == n) {
            dae->levels = level;
            dae->analyzed = 1;
            *index = level;
            return CDYN_OK;
        }
        if (level == dae->max_index)
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: augmented matrix still has rank %d < n = %d after %d "
                              "levels: the DAE is singular or its index exceeds %d",
                              fn, rank, n, level, dae->max_index);
        /* rows rank..n-1 of U^T [aug | aug_rhs] are 0 = constraint; their
         * derivative replaces them in the augmented matrix */
        rotate_rows(dae, dae->aug);
        rotate_rows(dae, dae->aug_rhs);
        rotate_rows(dae, dae->origin);
        dae->level_count[level] = n - rank;
        for (int i = rank; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                size_t ij = (size_t)i + (size_t)j * n;
                if (fabs(dae->origin[ij]) > 1e-8 && dae->equation_level[j] < 0)
                    dae->equation_level[j] = level;
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

cdyn_status cdyn_dae_equation_levels(cdyn_dae *dae, int *level_of_equation)
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

long cdyn_dae_svd_rate_solves(const cdyn_dae *dae) { return dae ? dae->svd_rate_solves : 0; }
