/* Index-1 DAEs: split into integrated and algebraic states, consistent
 * initial values, and the minimum-order right-hand side (THEORY T3.3). */
#include "dae_internal.h"
#include "kkt.h"
#include "linalg.h"
#include "newton_internal.h"
#include "nullspace_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Is x (q) bit for bit the point whose F and G_v the constraint data of
 * the index-2 form left at hand (cdyn__dae_index2_dependent)? */
static int at_hand(const cdyn_dae *dae, const double *x)
{
    return dae->part.g0_at_hand &&
           memcmp(x, dae->part.g0_at, sizeof(double) * (size_t)dae->q) == 0;
}

/* The Newton solve's observed rows (cdyn__newton_set_observed_rows) at the
 * algebraic states in v_trial: the rows of F that carry mass. The rates
 * come from them (P^T F), and an algebraic state can be a term of the
 * size of such a row while the hidden constraints see it only through a
 * null vector's tiny entry there (5e-43 times a row of 2e27: a
 * coefficient of 1e-15 beside terms of 4, whose tolerance let a state
 * off by 0.29 pass where it moves the row by 30 %). With dF (n x n, ld
 * ld, every state's column) the coefficients come from it and each row's
 * size is |F_i| plus |dF_ij v_j| over all states; without it (difference
 * quotients of the algebraic columns only) the caller has filled
 * observed_coef, and the size sums those columns. F NULL: |F_i| unknown,
 * counted as 0 (which can only tighten). */
static void observe_rows(cdyn_dae *dae, const double *F, const double *dF, int ld)
{
    const cdyn__dae_part *p = &dae->part;
    int n = dae->n, q = dae->q, m = p->n_mass_rows;
    double *coef = dae->observed_coef, *size = dae->observed_size;
    const double *v = dae->v_trial;
    for (int e = 0; e < m; ++e) size[e] = F ? fabs(F[p->mass_rows[e]]) : 0.0;
    if (dF) { /* every state's terms, and the algebraic columns' coefficients */
        for (int j = 0; j < n; ++j) {
            const double *col = dF + (size_t)j * ld;
            for (int e = 0; e < m; ++e) size[e] += fabs(col[p->mass_rows[e]] * v[j]);
        }
        for (int k = 0; k < q; ++k) {
            const double *col = dF + (size_t)dae->algebraic[k] * ld;
            for (int e = 0; e < m; ++e) coef[e + (size_t)k * n] = col[p->mass_rows[e]];
        }
    } else {
        for (int k = 0; k < q; ++k)
            for (int e = 0; e < m; ++e)
                size[e] += fabs(coef[e + (size_t)k * n] * v[dae->algebraic[k]]);
    }
    dae->observed_count = m;
}

/* Newton residual for the algebraic states x = v_a, with the integrated
 * states already in v_trial: G0 = beta^T F(v, t) (T3.1). */
static int algebraic_residual(const double *x, double *G, void *user)
{
    cdyn_dae *dae = user;
    for (int k = 0; k < dae->q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    dae->f_at_valid = 0;
    if (at_hand(dae, x)) { /* F there is in force_val */
        cdyn__dae_beta_t(dae, 1, dae->force_val, dae->n, 1.0, G, dae->q);
        cdyn__dae_g0_rounding(dae, dae->force_val, dae->part.g0_noise);
        return 0;
    }
    dae->guard.in_callback++;
    dae->counters.force_evaluations++;
    int code = dae->force(dae->t_eval, dae->v_trial, dae->force_shift, dae->user);
    dae->guard.in_callback--;
    if (code != 0) {
        dae->callback_code = code;
        return code;
    }
    cdyn__dae_beta_t(dae, 1, dae->force_shift, dae->n, 1.0, G, dae->q);
    cdyn__dae_g0_rounding(dae, dae->force_shift, dae->part.g0_noise);
    memcpy(dae->f_at, x, sizeof(double) * (size_t)dae->q); /* F(x) stays in force_shift */
    dae->f_at_valid = 1;
    return 0;
}

/* Newton Jacobian dG0/dv_a = beta^T (dF/dv)(:, algebraic) from the caller's
 * dF/dv (only installed when the caller gave one). */
static int algebraic_jacobian(const double *x, double *J, int ldj, void *user)
{
    cdyn_dae *dae = user;
    int n = dae->n, q = dae->q;
    for (int k = 0; k < q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    if (at_hand(dae, x)) { /* G_v there is part.constraint_jac (no dF/dv: no rows) */
        dae->observed_count = 0;
        for (int k = 0; k < q; ++k)
            memcpy(J + (size_t)k * ldj, dae->part.constraint_jac + (size_t)dae->algebraic[k] * q,
                   sizeof(double) * (size_t)q);
        return 0;
    }
    dae->guard.in_callback++;
    dae->counters.jacobian_evaluations++;
    int code = dae->jacobian(dae->t_eval, dae->v_trial, dae->force_jac, n, dae->user);
    dae->guard.in_callback--;
    if (code != 0) {
        dae->callback_code = code;
        return code;
    }
    for (int k = 0; k < q; ++k)
        cdyn__dae_beta_t_jacobian(dae, 1, dae->force_jac + (size_t)dae->algebraic[k] * n, n,
                                  J + (size_t)k * ldj, q);
    int have_f = dae->f_at_valid && memcmp(dae->f_at, x, sizeof(double) * (size_t)q) == 0;
    observe_rows(dae, have_f ? dae->force_shift : NULL, dae->force_jac, n);
    return 0;
}

/* Without the caller's dF/dv: dG0/dv_a by forward differences, each step
 * scaled by the state's magnitude as this object knows it (its largest
 * value seen), so that an algebraic state converging to a root at 0 keeps
 * a step above the rounding of G0 (a step relative to the iterate alone
 * would shrink with it). force_val is free during the solve. */
static int algebraic_differences(const double *x, double *J, int ldj, void *user)
{
    cdyn_dae *dae = user;
    int n = dae->n, q = dae->q;
    double *v = dae->v_trial;
    for (int k = 0; k < q; ++k) v[dae->algebraic[k]] = x[k];
    dae->guard.in_callback++;
    dae->counters.force_evaluations++;
    int code = dae->force(dae->t_eval, v, dae->force_val, dae->user);
    for (int k = 0; code == 0 && k < q; ++k) {
        int a = dae->algebraic[k];
        double saved = v[a], step = dae->fd_step * cdyn__dae_step_scale(dae, v, a), h = 0.0;
        for (int tries = 0; code == 0 && step > 0.0; ++tries) {
            v[a] = saved + step;
            h = v[a] - saved; /* the step actually representable */
            dae->counters.force_evaluations++;
            code = dae->force(dae->t_eval, v, dae->force_shift, dae->user);
            v[a] = saved;
            /* a step F's rounding swallows grows (cdyn__dae_next_step) */
            if (code == 0)
                step = cdyn__dae_next_step(n, dae->force_val, dae->force_shift, step, tries);
        }
        for (int i = 0; code == 0 && i < n; ++i)
            dae->force_shift[i] = (dae->force_shift[i] - dae->force_val[i]) / h;
        if (code == 0) cdyn__dae_beta_t(dae, 1, dae->force_shift, n, 1.0, J + (size_t)k * ldj, q);
        for (int e = 0; code == 0 && e < dae->part.n_mass_rows; ++e)
            dae->observed_coef[e + (size_t)k * n] = dae->force_shift[dae->part.mass_rows[e]];
    }
    dae->guard.in_callback--;
    if (code != 0) dae->callback_code = code;
    if (code == 0) observe_rows(dae, dae->force_val, NULL, n);
    return code;
}

cdyn_status cdyn__dae_solve_algebraic(cdyn_dae *dae, const char *fn, double t, double *x)
{
    /* the size of each hidden constraint's terms in the other states, from
     * the last dG0/dv (split or evaluation): terms that cancel at the guess
     * (equal flows into and out of a junction) must still set the scale of
     * its tolerance */
    int q = dae->q;
    double *known = dae->bound;
    memset(known, 0, sizeof(double) * (size_t)q);
    for (int l = 0; l < dae->ny + (dae->index2 ? dae->nz : 0); ++l) { /* not the unknowns */
        int j = l < dae->ny ? dae->integrated[l] : dae->multiplier[l - dae->ny];
        double vj = fabs(dae->v_trial[j]);
        const double *g = dae->part.constraint_jac + (size_t)j * q;
        for (int k = 0; k < q; ++k) known[k] += fabs(g[k]) * vj;
    }
    cdyn__newton_set_known_terms(dae->newton, known);
    cdyn__newton_set_residual_noise(dae->newton, dae->part.g0_noise);
    cdyn__newton_set_differenced(dae->newton, dae->jacobian == NULL);
    dae->observed_count = 0; /* until the first Jacobian */
    dae->f_at_valid = 0;
    cdyn__newton_set_observed_rows(dae->newton, &dae->observed_count, dae->observed_coef,
                                   dae->n, dae->observed_size);
    dae->t_eval = t;
    cdyn_status st = cdyn_newton_solve(dae->newton, algebraic_residual,
                                       dae->jacobian ? algebraic_jacobian : algebraic_differences,
                                       dae, x);
    for (int k = 0; k < dae->q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    const double *tolerance = cdyn__newton_tolerance(dae->newton);
    for (int k = 0; k < dae->q; ++k) dae->resolution[dae->algebraic[k]] = tolerance[k];
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, st, "%s: algebraic states at t = %g: %s", fn, t,
                          cdyn_newton_last_error(dae->newton));
    return CDYN_OK;
}

/* The Newton tolerances of the algebraic states from cdyn_dae_set_tolerances
 * (nothing to do when the caller never set them). */
static void install_tolerances(cdyn_dae *dae)
{
    if (!dae->has_tolerances || dae->q == 0) return;
    double *atol = dae->part.vec_q2;
    for (int k = 0; k < dae->q; ++k) atol[k] = dae->atol[dae->algebraic[k]];
    cdyn_newton_set_tolerances(dae->newton, dae->rtol, dae->has_atol ? atol : NULL);
    if (!dae->index2) return;
    /* the multipliers' unknowns (z, w'): no absolute tolerance for the rates w' */
    for (int k = 0; k < dae->q; ++k) atol[k] = k < dae->nz ? dae->atol[dae->multiplier[k]] : 0.0;
    cdyn_newton_set_tolerances(dae->newton_z, dae->rtol, dae->has_atol ? atol : NULL);
}

void cdyn__dae_keep_factorizations(cdyn_dae *dae)
{
    if (dae->q == 0 || dae->hold_chord) return;
    cdyn__newton_keep_for_chord(dae->newton);
    if (dae->index2) cdyn__newton_keep_for_chord(dae->newton_z);
}

/* Remember the magnitudes of a consistent state (difference steps): the
 * integrated states as they are; the solved ones (algebraic, multipliers)
 * only where their Newton solve's last tolerance tells them apart from
 * zero (a node voltage of 1e-35 V beside 1e-18 V is not a magnitude, and
 * a difference step scaled by it is lost in F's rounding). */
static void learn_magnitudes(cdyn_dae *dae, const double *v)
{
    int q = dae->q;
    double *m = dae->magnitude;
    for (int j = 0; j < dae->ny; ++j) {
        int i = dae->integrated[j];
        m[i] = fmax(m[i], fabs(v[i]));
    }
    if (q == 0) return;
    const double *tol = cdyn__newton_tolerance(dae->newton);
    for (int k = 0; k < q; ++k) {
        double a = fabs(v[dae->algebraic[k]]);
        if (a > tol[k]) m[dae->algebraic[k]] = fmax(m[dae->algebraic[k]], a);
    }
    if (!dae->index2) return;
    tol = cdyn__newton_tolerance(dae->newton_z);
    for (int k = 0; k < dae->nz; ++k) {
        double a = fabs(v[dae->multiplier[k]]);
        if (a > tol[k]) m[dae->multiplier[k]] = fmax(m[dae->multiplier[k]], a);
    }
}

/* With M(t): the massless states of M at the t of the last mass
 * evaluation, the split's first choice (cdyn_nullspace_set_preferred_
 * dependent; those of M(t0) said nothing of a later split: the state
 * massless at t0 was chosen again where it had become the wrong one), and
 * the history of dG0/dv since set_mass_fn as the frame in which the split,
 * its watch and the probe judge the columns (one shared history: a fresh
 * one for each split put every column of one row in the same power-of-two
 * band, and the choice then depended on the units of the states: with one
 * state in units of 0.3 the split of a turning mass chose the same
 * singular block again at every event, 5.8e-3 off at the end). */
static void prefer_massless_now(cdyn_dae *dae)
{
    int n = dae->n;
    cdyn__dae_part *p = &dae->part;
    cdyn__nullspace_share_references(p->split_ns, p->split_ref);
    cdyn__nullspace_share_references(p->split_probe, p->split_ref);
    for (int j = 0; j < n; ++j) {
        p->massless[j] = 1;
        for (int i = 0; i < n; ++i)
            if (p->mass[i + (size_t)j * n] != 0.0) p->massless[j] = 0;
    }
    cdyn_nullspace_set_preferred_dependent(p->split_ns, p->massless);
    cdyn_nullspace_set_preferred_dependent(p->split_probe, p->massless);
}

/* How good a factored split is (as a mechanism's partition, mbs.h): the
 * larger of the condition estimate of its algebraic block of dG0/dv and
 * its largest sensitivity |d v_a / d v_i|, in units of each state's column
 * size in the history (unit-free). */
static double split_quality_of(const cdyn_nullspace *ns)
{
    return fmax(cdyn_nullspace_condition(ns), cdyn_nullspace_dependence(ns));
}

/* The watch of a fresh split (index: the analysis's): at index 1 with
 * M(t), whose null space turns under the split. With a constant M it is
 * not watched: a split there goes bad only through F, and the watch cost
 * 15 % of every right-hand side of bench_stiff's ladder (a nullspace
 * update of dG0/dv per call); dae.h says so. */
static void start_watch(cdyn_dae *dae, int index)
{
    int n = dae->n, q = dae->q;
    dae->split_watch = q > 0 && q < n && index == 1 && dae->mass_fn != NULL;
    dae->split_event = dae->split_singular = 0;
    dae->split_quality = dae->split_best =
        dae->split_watch ? split_quality_of(dae->part.split_ns) : 1.0;
}

/* After a successful index-1 evaluation (part.constraint_jac = dG0/dv at
 * it): the split's quality at this state, and the best a pivoted QR would
 * choose here where the split's passes the limit; the event when it is
 * more than the limit times that best, or when the split's algebraic
 * block has become singular (cdyn_dae_split_event, dae.h). */
static void watch_split(cdyn_dae *dae)
{
    cdyn__dae_part *p = &dae->part;
    int changed = 0;
    if (dae->split_singular) return; /* until the next split */
    cdyn_status st = cdyn_nullspace_update(p->split_ns, p->constraint_jac, dae->q, &changed);
    if (st != CDYN_OK || changed) { /* the split's block is singular */
        dae->split_quality = INFINITY;
        dae->split_event = dae->split_singular = 1;
        return;
    }
    dae->split_quality = dae->split_best = split_quality_of(p->split_ns);
    dae->split_event = 0;
    if (!(dae->split_quality > dae->split_limit)) return;
    prefer_massless_now(dae); /* the probe's choice as a split's here */
    if (cdyn_nullspace_factor(p->split_probe, p->constraint_jac, dae->q) != CDYN_OK) return;
    dae->split_best = fmin(dae->split_quality, split_quality_of(p->split_probe));
    dae->split_event = dae->split_quality > dae->split_limit * dae->split_best;
}

cdyn_status cdyn_dae_split(cdyn_dae *dae, double t, const double *v)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_split";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    int index = 0;
    if (q > 0) {
        st = cdyn_dae_analyze(dae, t, v, &index); /* leaves F and dF/dv at v */
        if (st != CDYN_OK) return st;
        if (index != 1 && index != 2)
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: the DAE has index %d at t = %g; the minimum-order system "
                              "needs index 1 or the index-2 form",
                              fn, index, t);
    }
    if (index == 2) { /* index 2: the multiplier form, or refused */
        st = cdyn__dae_index2_split(dae, fn, t);
        if (st != CDYN_OK) return st;
    } else if (q == 0 || q == n) { /* nothing to choose */
        for (int j = 0; j < r; ++j) dae->integrated[j] = j;
        for (int k = 0; k < q; ++k) dae->algebraic[k] = k;
    } else {
        /* T3.3: dG0/dv = beta^T dF/dv; pivoted QR picks the algebraic states,
         * the massless ones first: with M(t), those of M at t */
        if (dae->mass_fn) prefer_massless_now(dae);
        cdyn__dae_beta_t_jacobian(dae, n, dae->force_jac, n, p->constraint_jac, q);
        st = cdyn_nullspace_factor(p->split_ns, p->constraint_jac, q);
        if (st != CDYN_OK)
            return cdyn__fail(dae->msg, st, "%s: dG0/dv: %s", fn,
                              cdyn_nullspace_last_error(p->split_ns));
        cdyn_nullspace_partition(p->split_ns, dae->integrated, dae->algebraic);
    }
    if (index != 2) {
        dae->index2 = 0;
        dae->ny = r;
    }
    if (q > 0) cdyn__newton_forget(dae->newton);
    if (q > 0) cdyn__newton_forget(dae->newton_z);
    dae->reduced_factored = dae->part.hz_valid = dae->part.hz_factored = 0;
    dae->part.g0_factored = 0;
    memcpy(dae->v_last, v, sizeof(double) * (size_t)n);
    for (int j = 0; j < n; ++j) /* the caller's state: every value is a magnitude */
        dae->magnitude[j] = fmax(dae->magnitude[j], fabs(v[j]));
    memset(dae->resolution, 0, sizeof(double) * (size_t)n); /* no solve of this split yet */
    dae->split_done = 1;
    dae->state_valid = 0;
    dae->svd_rate_solves = 0;
    start_watch(dae, index);
    install_tolerances(dae);
    return CDYN_OK;
}

int cdyn_dae_split_states(const cdyn_dae *dae, int *integrated, int *algebraic)
{
    if (!dae) return -1;
    if (!dae->split_done) {
        cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_split_states: call cdyn_dae_split first");
        return -1;
    }
    int ny = dae->ny, q = dae->q;
    if (integrated && algebraic &&
        cdyn__overlap(integrated, sizeof(int) * (size_t)ny, algebraic,
                      sizeof(int) * (size_t)(dae->n - ny))) {
        cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_split_states: the outputs overlap");
        return -1;
    }
    if (integrated) memcpy(integrated, dae->integrated, sizeof(int) * (size_t)ny);
    if (algebraic) memcpy(algebraic, dae->algebraic, sizeof(int) * (size_t)q);
    if (algebraic && dae->index2)
        memcpy(algebraic + q, dae->multiplier, sizeof(int) * (size_t)dae->nz);
    return ny;
}

/* Consistent values in the index-2 form: x_d from G0 = 0 and the
 * multipliers from the rates, by one evaluation from v (the warm start);
 * on failure the object's last state is restored. */
static cdyn_status consistent_index2(cdyn_dae *dae, const char *fn, double t, double *v)
{
    int n = dae->n;
    double *saved = dae->aug_rhs, *saved_rate = saved + n, *y = dae->origin; /* n >= 2 */
    int was_valid = dae->state_valid;
    memcpy(saved, dae->v_last, sizeof(double) * (size_t)n);
    memcpy(saved_rate, dae->vdot_last, sizeof(double) * (size_t)n);
    memcpy(dae->v_last, v, sizeof(double) * (size_t)n);
    for (int j = 0; j < dae->ny; ++j) y[j] = v[dae->integrated[j]];
    cdyn_status st = cdyn__dae_rhs_at(dae, fn, t, y);
    if (st == CDYN_OK || st == CDYN_ERR_NOCONV) {
        double *source = st == CDYN_OK ? dae->v_last : dae->v_trial;
        memcpy(v, source, sizeof(double) * (size_t)n);
    }
    if (st != CDYN_OK) {
        memcpy(dae->v_last, saved, sizeof(double) * (size_t)n);
        memcpy(dae->vdot_last, saved_rate, sizeof(double) * (size_t)n);
        dae->state_valid = was_valid;
    }
    return st;
}

cdyn_status cdyn_dae_consistent(cdyn_dae *dae, double t, double *v)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_consistent";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q;
    if (q == 0) return CDYN_OK;
    if (dae->index2) return consistent_index2(dae, fn, t, v);
    st = cdyn__dae_mass_at(dae, fn, t);
    if (st != CDYN_OK) return st;
    double *x = dae->part.vec_q;
    memcpy(dae->v_trial, v, sizeof(double) * (size_t)n);
    for (int k = 0; k < q; ++k) x[k] = v[dae->algebraic[k]];
    st = cdyn__dae_solve_algebraic(dae, fn, t, x);
    if (st == CDYN_OK || st == CDYN_ERR_NOCONV)
        for (int k = 0; k < q; ++k) v[dae->algebraic[k]] = x[k];
    if (st == CDYN_OK) {
        memcpy(dae->v_last, v, sizeof(double) * (size_t)n);
        learn_magnitudes(dae, v);
        cdyn__dae_keep_factorizations(dae);
    }
    return st;
}

/* Do the algebraic states carry mass into the range of M (P^T M_a != 0)?
 * If not (massless algebraic states: hydraulic junctions, orifices), v_i'
 * does not depend on v_a' and the coupling A = -G_a^# G_i is not needed for
 * the rates. */
static int mass_couples_algebraic(const cdyn_dae *dae)
{
    int r = dae->r;
    for (int k = 0; k < dae->q; ++k) {
        const double *col = dae->part.range_t_mass + (size_t)dae->algebraic[k] * r;
        for (int i = 0; i < r; ++i)
            if (col[i] != 0.0) return 1;
    }
    return 0;
}

void cdyn__dae_coupling(cdyn_dae *dae)
{
    int q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    if (dae->coupling_valid) return;
    for (int j = 0; j < r; ++j) {
        const double *gi = p->constraint_jac + (size_t)dae->integrated[j] * q;
        for (int k = 0; k < q; ++k) p->coef[k + (size_t)j * q] = -gi[k];
    }
    cdyn__newton_apply_many(dae->newton, p->coef, q, r, p->coef, q);
    dae->coupling_valid = 1;
}

/* At the consistent state v_trial: G_v = dG0/dv, the factorization of G_a
 * (that of the Newton solve when it was taken here), -G_t into
 * part.vec_q2, and the coupling A = -G_a^# G_i when the algebraic states
 * carry mass (T3.3), with the rank-revealing solve of cdyn_newton. */
static cdyn_status algebraic_rates(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q;
    cdyn__dae_part *p = &dae->part;
    /* the Newton solve's last Jacobian callback was at this state and its
     * factorization of G_a is at hand: dF/dv is in force_jac already */
    int reuse = dae->jacobian && cdyn__newton_solution_factored(dae->newton);
    cdyn_status st = reuse ? CDYN_OK : cdyn__dae_force_jacobian(dae, fn, t, dae->v_trial);
    if (st == CDYN_OK)
        st = cdyn__dae_force_time(dae, fn, t, dae->v_trial,
                                  cdyn__dae_terms_of(dae, dae->force_jac, dae->v_trial));
    if (st != CDYN_OK) return st;
    cdyn__dae_beta_t_jacobian(dae, n, dae->force_jac, n, p->constraint_jac, q);
    if (cdyn__first_nonfinite(q, n, p->constraint_jac, q) >= 0) /* LAPACK must not see it */
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: dG0/dv overflowed at t = %g", fn, t);
    for (int k = 0; k < q; ++k)
        memcpy(p->ga + (size_t)k * q, p->constraint_jac + (size_t)dae->algebraic[k] * q,
               sizeof(double) * (size_t)q);
    if (!reuse) {
        int svd = cdyn__newton_factor(dae->newton, p->ga, q);
        if (svd < 0) return cdyn__fail(dae->msg, CDYN_ERR_LAPACK, "%s: LAPACK failed on G_a", fn);
        dae->svd_rate_solves += svd;
    }
    dae->decoupled = !mass_couples_algebraic(dae);
    if (!dae->decoupled) cdyn__dae_coupling(dae);
    /* G_t = beta^T dF/dt (+ beta'^T F for a time-varying M) */
    cdyn__dae_beta_t(dae, 1, dae->force_dt, n, -1.0, p->vec_q2, q);
    if (dae->mass_fn) {
        st = cdyn__dae_beta_rate(dae, fn, t);
        if (st != CDYN_OK) return st;
        cdyn__gemv('T', n, q, -1.0, p->beta_dot, n, dae->force_val, 1.0, p->vec_q2);
    }
    return CDYN_OK;
}

/* cdyn__dae_factor_reduced: dae_internal.h. */
int cdyn__dae_factor_reduced(cdyn_dae *dae)
{
    int r = dae->r;
    const double *lu = dae->part.reduced;
    dae->reduced_diagonal = 0;
    int info = cdyn__getrf(r, dae->part.reduced, r, dae->part.ipiv);
    if (info != 0) return info;
    /* the factors of a row permutation of a diagonal matrix (P^T M_x of
     * the index-2 form takes the states in B's column order, not P's) are
     * L = I and a diagonal U, exactly: each pivot column has one non-zero */
    for (int j = 0; j < r; ++j)
        for (int i = 0; i < r; ++i)
            if (i != j && lu[i + (size_t)j * r] != 0.0) return 0;
    dae->reduced_diagonal = 1;
    return 0;
}

/* cdyn__dae_solve_reduced: dae_internal.h. */
void cdyn__dae_solve_reduced(const cdyn_dae *dae, int nrhs, double *X, int ldx)
{
    int r = dae->r;
    const double *lu = dae->part.reduced;
    if (!dae->reduced_diagonal) {
        cdyn__getrs('N', r, nrhs, lu, r, dae->part.ipiv, X, ldx);
        return;
    }
    for (int j = 0; j < nrhs; ++j) {
        double *x = X + (size_t)j * ldx;
        for (int i = 0; i < r; ++i) { /* the row exchanges, in getrf's order */
            int swap = dae->part.ipiv[i] - 1;
            if (swap != i) {
                double keep = x[i];
                x[i] = x[swap];
                x[swap] = keep;
            }
        }
        for (int i = 0; i < r; ++i) x[i] /= lu[i + (size_t)i * r];
    }
}

/* cdyn__dae_solve_rates: dae_internal.h. */
void cdyn__dae_solve_rates(cdyn_dae *dae, const double *top, const double *bottom, double *out)
{
    int q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    const double *ptm = p->range_t_mass; /* r x n */
    double *va_part = p->vec_q, *vi = p->reduced_rhs;
    if (q > 0 && dae->decoupled) {
        /* P^T M_a = 0: v_i' from the top block alone, then
         * v_a' = G_a^# (bottom - G_i v_i') */
        memcpy(vi, top, sizeof(double) * (size_t)r);
        cdyn__dae_solve_reduced(dae, 1, vi, r);
        memcpy(va_part, bottom, sizeof(double) * (size_t)q);
        for (int j = 0; j < r; ++j) {
            const double *gi = p->constraint_jac + (size_t)dae->integrated[j] * q;
            for (int k = 0; k < q; ++k) va_part[k] -= gi[k] * vi[j];
            out[dae->integrated[j]] = vi[j];
        }
        cdyn__newton_apply(dae->newton, va_part, va_part);
        for (int k = 0; k < q; ++k) out[dae->algebraic[k]] = va_part[k];
        return;
    }
    if (q > 0) cdyn__newton_apply(dae->newton, bottom, va_part);
    memcpy(vi, top, sizeof(double) * (size_t)r);
    for (int k = 0; k < q; ++k) {
        const double *ptm_a = ptm + (size_t)dae->algebraic[k] * r;
        for (int i = 0; i < r; ++i) vi[i] -= ptm_a[i] * va_part[k];
    }
    cdyn__dae_solve_reduced(dae, 1, vi, r);
    for (int j = 0; j < r; ++j) out[dae->integrated[j]] = vi[j];
    for (int k = 0; k < q; ++k) {
        double s = va_part[k];
        for (int j = 0; j < r; ++j) s += p->coef[k + (size_t)j * q] * vi[j];
        out[dae->algebraic[k]] = s;
    }
}

/* The larger of a and b for finite values (fmax's NaN rules cost a call). */
static inline double larger(double a, double b) { return a > b ? a : b; }

/* The certificate's view of the top block P^T M (r x n): its non-zeros by
 * columns, 1 / its row maxima (0 for a zero row) and, per column, the
 * largest |entry| / row maximum. Fixed for a constant M, so built once per
 * mass; for M(t) at every call. */
/* The non-zeros of A (rows x n, ld rows) by columns into start (n + 1),
 * row and value, and 1 / the largest |entry| of each row into inverse
 * (rows; 0 for a zero row), in one pass. */
static void gather_nonzeros(int rows, int n, const double *A, int *start, int *row,
                            double *value, double *inverse)
{
    int count = 0;
    memset(inverse, 0, sizeof(double) * (size_t)rows); /* the row maxima first */
    for (int j = 0; j < n; ++j) {
        const double *a = A + (size_t)j * rows;
        start[j] = count;
        for (int i = 0; i < rows; ++i) {
            if (a[i] == 0.0) continue;
            inverse[i] = larger(inverse[i], fabs(a[i]));
            row[count] = i;
            value[count++] = a[i];
        }
    }
    start[n] = count;
    for (int i = 0; i < rows; ++i) inverse[i] = inverse[i] > 0.0 ? 1.0 / inverse[i] : 0.0;
}

static void top_frame(cdyn_dae *dae)
{
    cdyn__dae_part *p = &dae->part;
    if (p->top_valid && !dae->mass_fn) return;
    int n = dae->n;
    const double *inverse = p->top_inverse;
    gather_nonzeros(dae->r, n, p->range_t_mass, p->top_start, p->top_row, p->top_value,
                    p->top_inverse);
    for (int j = 0; j < n; ++j) {
        double largest = 0.0;
        for (int e = p->top_start[j]; e < p->top_start[j + 1]; ++e)
            largest = larger(largest, fabs(p->top_value[e]) * inverse[p->top_row[e]]);
        p->top_column[j] = largest;
    }
    p->top_valid = 1;
}

/* Residual of the rates (top block P^T F - P^T M v', bottom -G_t - G_v v')
 * into dae->residual (ptf = P^T F) and their backward error: componentwise,
 * with a floor that lets rate j carry eps times the largest |v_k'| / u_k of
 * its neighbours (the rates sharing a non-zero entry of a row with it),
 * u the unknowns' units in the equilibrated matrix (row maxima, then
 * column maxima of the row-scaled matrix): a rate that is zero up to
 * rounding (a closed valve's flow rate) is judged against the rounding of
 * the rates it is eliminated with, in any units. The floor is local, not
 * kkt.h's largest rate of the whole system: a decoupled state with a rate
 * of 1e28 made that floor accept a closed junction's inconsistent rates
 * (test_dae). Both blocks are walked by their non-zeros (gather_nonzeros:
 * the top once per mass in top_frame, G_v whenever it changed). */
double cdyn__dae_rates_backward_error(cdyn_dae *dae, const double *vdot, const double *ptf)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    double *res = dae->residual, *bound = dae->bound, *row_max = dae->row_max;
    double *unit = dae->rate_unit;
    const int *ts = p->top_start, *tr = p->top_row, *bs = p->bottom_start, *br = p->bottom_row;
    const double *tv = p->top_value, *bv = p->bottom_value;
    top_frame(dae);
    /* G_v's non-zeros by columns and 1 / its row maxima (rows r.. of the
     * matrix): the passes below visit only non-zeros */
    const double *inverse = p->bottom_inverse;
    size_t g_bytes = sizeof(double) * (size_t)q * n;
    if (!p->bottom_valid || memcmp(p->bottom_source, p->constraint_jac, g_bytes) != 0) {
        gather_nonzeros(q, n, p->constraint_jac, p->bottom_start, p->bottom_row, p->bottom_value,
                        p->bottom_inverse);
        memcpy(p->bottom_source, p->constraint_jac, g_bytes);
        p->bottom_valid = 1;
    }
    for (int j = 0; j < n; ++j) {
        double largest = p->top_column[j];
        for (int e = bs[j]; e < bs[j + 1]; ++e)
            largest = larger(largest, fabs(bv[e]) * inverse[br[e]]);
        unit[j] = largest > 0.0 ? 1.0 / largest : 1.0;
    }
    /* row_size (n, over the row maxima, no longer needed): the largest
     * |v_k'| / u_k of each row's non-zeros; then unit[j] becomes rate j's
     * floor, u_j eps times the largest row_size of its column's non-zeros */
    double *row_size = row_max;
    memset(row_size, 0, sizeof(double) * (size_t)n);
    for (int j = 0; j < n; ++j) {
        double size = fabs(vdot[j]) / unit[j];
        for (int e = ts[j]; e < ts[j + 1]; ++e) row_size[tr[e]] = larger(row_size[tr[e]], size);
        for (int e = bs[j]; e < bs[j + 1]; ++e)
            row_size[r + br[e]] = larger(row_size[r + br[e]], size);
    }
    for (int j = 0; j < n; ++j) {
        double neighbours = 0.0;
        for (int e = ts[j]; e < ts[j + 1]; ++e) neighbours = larger(neighbours, row_size[tr[e]]);
        for (int e = bs[j]; e < bs[j + 1]; ++e)
            neighbours = larger(neighbours, row_size[r + br[e]]);
        unit[j] *= DBL_EPSILON * neighbours;
    }
    /* top: P^T F (ptf, the reduced right-hand side before the solve) */
    for (int i = 0; i < r; ++i) {
        res[i] = ptf[i];
        bound[i] = fabs(ptf[i]);
    }
    for (int k = 0; k < q; ++k) {
        res[r + k] = p->vec_q2[k]; /* -G_t */
        bound[r + k] = fabs(p->vec_q2[k]);
    }
    for (int j = 0; j < n; ++j) {
        double x = vdot[j], floor = fabs(x) + unit[j];
        for (int e = ts[j]; e < ts[j + 1]; ++e) {
            res[tr[e]] -= tv[e] * x;
            bound[tr[e]] += fabs(tv[e]) * floor;
        }
        for (int e = bs[j]; e < bs[j + 1]; ++e) {
            res[r + br[e]] -= bv[e] * x;
            bound[r + br[e]] += fabs(bv[e]) * floor;
        }
    }
    double worst = 0.0;
    for (int i = 0; i < n; ++i) {
        double w = bound[i] > 0.0 ? fabs(res[i]) / bound[i] : (res[i] == 0.0 ? 0.0 : INFINITY);
        worst = w > worst || isnan(w) ? w : worst;
    }
    return worst;
}

/* v' (n) at the consistent state v_trial (T3.3), certified: its
 * componentwise backward error on the linear system of the rates must reach
 * the tolerance of kkt.h, with up to two steps of refinement (which use
 * dae->force_dt as scratch). */
static cdyn_status rates(cdyn_dae *dae, const char *fn, double t, double *vdot)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    const double *ptm = p->range_t_mass; /* r x n */
    /* decoupled with a constant M the matrix is P^T M_i, fixed by the split:
     * its LU from an earlier evaluation stands */
    int fixed = (q == 0 || dae->decoupled) && !dae->mass_fn;
    if (!fixed || !dae->reduced_factored) {
        dae->reduced_factored = 0;
        for (int j = 0; j < r; ++j) { /* P^T M Pi [I; coef] (P^T M_i when decoupled) */
            double *col = p->reduced + (size_t)j * r;
            memcpy(col, ptm + (size_t)dae->integrated[j] * r, sizeof(double) * (size_t)r);
            for (int k = 0; q > 0 && !dae->decoupled && k < q; ++k) {
                double c = p->coef[k + (size_t)j * q];
                const double *ptm_a = ptm + (size_t)dae->algebraic[k] * r;
                for (int i = 0; i < r; ++i) col[i] += ptm_a[i] * c;
            }
        }
        if (r > 0 && cdyn__dae_factor_reduced(dae) != 0)
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: minimum-order matrix P^T M Pi [I; -G_a^-1 G_i] is singular "
                              "at t = %g",
                              fn, t);
        dae->reduced_factored = fixed;
    }
    double *ptf = dae->force_shift; /* P^T F; free after the Newton solve */
    cdyn__dae_range_t(dae, 1, dae->force_val, n, 1.0, ptf, r);
    cdyn__dae_solve_rates(dae, ptf, p->vec_q2, vdot);
    double tolerance = cdyn__kkt_backward_tolerance(n, 0);
    double omega = cdyn__dae_rates_backward_error(dae, vdot, ptf);
    for (int step = 0; step < 2 && omega > tolerance && isfinite(omega); ++step) {
        /* one step of refinement with the same factorizations: the residual's
         * two blocks are the right-hand sides of the correction */
        cdyn__dae_solve_rates(dae, dae->residual, dae->residual + r, dae->force_dt);
        for (int j = 0; j < n; ++j) vdot[j] += dae->force_dt[j];
        omega = cdyn__dae_rates_backward_error(dae, vdot, ptf);
    }
    if (cdyn__first_nonfinite(n, 1, vdot, n) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: v' overflowed at t = %g", fn, t);
    if (!(omega <= tolerance))
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the rates at t = %g are not determined to working accuracy "
                          "(componentwise backward error %.2e > %.2e after refinement): the "
                          "minimum-order system is singular to rounding there",
                          fn, t, omega, tolerance);
    return CDYN_OK;
}

cdyn_status cdyn__dae_rhs_at(cdyn_dae *dae, const char *fn, double t, const double *y)
{
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q, ny = dae->ny;
    if (!y && ny > 0) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: y is NULL", fn);
    if (!isfinite(t)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    long bad = ny > 0 ? cdyn__first_nonfinite(ny, 1, y, ny) : -1;
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: y[%ld] is not finite", fn, bad);
    cdyn__dae_part *p = &dae->part;
    dae->counters.rhs++;
    dae->coupling_valid = 0;
    dae->decoupled = 0;

    /* what the solves have learned so far: put back if this call fails */
    double *held = dae->held_magnitudes;
    if (q > 0) cdyn__newton_save_magnitudes(dae->newton, held);
    if (q > 0 && dae->index2) cdyn__newton_save_magnitudes(dae->newton_z, held + n);

    /* v_i from y, v_a from the warm start, then G0 = 0 for v_a */
    memcpy(dae->v_trial, dae->v_last, sizeof(double) * (size_t)n);
    for (int j = 0; j < ny; ++j) dae->v_trial[dae->integrated[j]] = y[j];
    cdyn_status st = cdyn__dae_mass_at(dae, fn, t);
    if (st == CDYN_OK && q > 0) {
        for (int k = 0; k < q; ++k) p->vec_q[k] = dae->v_last[dae->algebraic[k]];
        st = dae->index2 ? cdyn__dae_index2_dependent(dae, fn, t, p->vec_q)
                         : cdyn__dae_solve_algebraic(dae, fn, t, p->vec_q);
    }
    double *vdot = dae->prod; /* n, committed below */
    if (dae->index2) {
        if (st == CDYN_OK) st = cdyn__dae_index2_rates(dae, fn, t, vdot);
    } else {
        if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
        if (st == CDYN_OK && q > 0) st = algebraic_rates(dae, fn, t);
        if (st == CDYN_OK) st = rates(dae, fn, t, vdot);
    }
    if (st != CDYN_OK) {
        if (q > 0) cdyn__newton_restore_magnitudes(dae->newton, held);
        if (q > 0 && dae->index2) cdyn__newton_restore_magnitudes(dae->newton_z, held + n);
        dae->counters.rhs_failures++;
        return st;
    }

    /* commit */
    memcpy(dae->vdot_last, vdot, sizeof(double) * (size_t)n);
    memcpy(dae->v_last, dae->v_trial, sizeof(double) * (size_t)n);
    learn_magnitudes(dae, dae->v_last);
    cdyn__dae_keep_factorizations(dae);
    if (dae->mass_fn) memcpy(p->beta_ref, p->beta, sizeof(double) * (size_t)n * q);
    p->g0_factored = dae->index2;
    dae->state_valid = 1;
    if (dae->split_watch) watch_split(dae);
    return CDYN_OK;
}

cdyn_status cdyn_dae_rhs(cdyn_dae *dae, double t, const double *y, double *ydot)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_rhs";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!ydot && dae->split_done && dae->ny > 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ydot is NULL", fn);
    cdyn_status st = cdyn__dae_rhs_at(dae, fn, t, y);
    if (st != CDYN_OK) return st;
    /* ydot written last: it may alias y */
    for (int j = 0; j < dae->ny; ++j) ydot[j] = dae->vdot_last[dae->integrated[j]];
    return CDYN_OK;
}

cdyn_status cdyn_dae_last_state(const cdyn_dae *dae, double *v, double *vdot)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!dae->state_valid)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_last_state: no successful cdyn_dae_rhs since the split");
    if (v && vdot && cdyn__overlap(v, sizeof(double) * (size_t)dae->n, vdot,
                                   sizeof(double) * (size_t)dae->n))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_last_state: v and vdot overlap");
    if (v) memcpy(v, dae->v_last, sizeof(double) * (size_t)dae->n);
    if (vdot) memcpy(vdot, dae->vdot_last, sizeof(double) * (size_t)dae->n);
    return CDYN_OK;
}
