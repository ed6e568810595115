/* libFuzzer harness: cdyn_dae with a decoded mass matrix and a decoded
 * polynomial force F_i = c_i + sum_j a_ij v_j + b_ij v_j|v_j| + d_i sin(t):
 * set_mass, the residual form (its CDYN_OK checked against M v' - F
 * computed here), hidden constraints, analyze, split (index 1 or the
 * index-2 form), consistent, rhs, its Jacobian, state, every CDYN_OK
 * output finite (with dF/dv when CDYN_FUZZ_JACOBIAN is set); with
 * CDYN_FUZZ_STRICT set in the environment also that
 * the hidden constraints hold at every state an OK right-hand side returns
 * (check_constraints_hold: a model of the default tolerances of newton.h
 * that is generous but not exact, so it runs in campaigns, not in CI's 60 s
 * run; it found the wrong CDYN_OKs the CHANGELOG lists for this round, whose
 * inputs are in seeds/); in decoded units,
 * equations scaled by R and states v = S v~ (M -> R M S, F -> R F). */
#include <cdyn.h>

#include "fuzz_input.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { NMAX = 6 };
typedef struct { int n; double c[NMAX], d[NMAX], a[NMAX * NMAX], b[NMAX * NMAX]; } model;

static int force(double t, const double *v, double *F, void *user)
{
    const model *md = user;
    for (int i = 0; i < md->n; ++i) {
        double s = md->c[i] + md->d[i] * sin(t);
        for (int j = 0; j < md->n; ++j)
            s += md->a[i + NMAX * j] * v[j] + md->b[i + NMAX * j] * v[j] * fabs(v[j]);
        F[i] = s;
    }
    return 0;
}

/* dF/dv of force: a_ij + 2 b_ij |v_j|. Given to the object when
 * CDYN_FUZZ_JACOBIAN is set in the environment (a campaign knob, as
 * CDYN_FUZZ_STRICT): the paths that need dF/dv (the index-2 pressures
 * without their Newton solve) run then. */
static int force_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    const model *md = user;
    (void)t;
    for (int j = 0; j < md->n; ++j)
        for (int i = 0; i < md->n; ++i)
            J[i + (size_t)ld * j] = md->a[i + NMAX * j] + 2.0 * md->b[i + NMAX * j] * fabs(v[j]);
    return 0;
}

/* The residual form at (t, v, v' = v): outputs stay in bounds, and an OK
 * r is M v - F(v) to the rounding of its terms. */
static void check_residual(cdyn_dae *dae, const model *md, const double *M, double t,
                           const double *v)
{
    int n = md->n;
    double r[NMAX + FUZZ_GUARD], J[NMAX * NMAX + FUZZ_GUARD], F[NMAX];
    fuzz_guard_set(r, (size_t)n);
    fuzz_guard_set(J, (size_t)n * n);
    cdyn_status st = fuzz_ok_finite(cdyn_dae_residual(dae, t, v, v, r), r, (size_t)n);
    fuzz_ok_finite(cdyn_dae_residual_jacobian(dae, t, 3.0, v, J, n), J, (size_t)n * n);
    if (!fuzz_guard_ok(r, (size_t)n) || !fuzz_guard_ok(J, (size_t)n * n)) abort();
    if (st != CDYN_OK) return;
    force(t, v, F, (void *)md);
    for (int i = 0; i < n; ++i) {
        double want = -F[i], size = fabs(F[i]);
        for (int j = 0; j < n; ++j) {
            want += M[i + n * j] * v[j];
            size += fabs(M[i + n * j] * v[j]);
        }
        if (isfinite(size) && !(fabs(r[i] - want) <= 4.0 * (n + 2) * 2.3e-16 * size)) abort();
    }
}

/* After an OK right-hand side: the hidden constraints hold at the state
 * it returns. The Newton solve converges on the states (1e-10 of the
 * larger of each state's value and the magnitude it started from, with a
 * floor from the other states for one of unknown magnitude: the default
 * tolerances, newton.h), so G0 = beta^T F(v, t) may be off by dG0/dv times
 * that; the check allows 1e-6 of it plus 1e-6 of the size of G0's terms:
 * it catches a state the solve never reached, not its last digits. v0 is
 * the largest |v_j| the object was given (split) or returned (consistent
 * values, earlier right-hand sides): the default atol is rtol times the
 * largest converged |v_j|, capped by the scales the equations give
 * (newton.h). */
static void check_constraints_hold(cdyn_dae *dae, const model *md, double t, const double *v0)
{
    int n = md->n, q = n - cdyn_dae_rank(dae);
    double v[NMAX], G0[NMAX], beta[NMAX * NMAX], size[NMAX], bounds[NMAX];
    /* models of a physical range: no coefficient beyond 1e200, none of an
     * equation 1e100 or more apart from another (such spreads put the
     * solution near the ends of the exponent range, or hide terms from
     * every difference quotient, where the tolerances of newton.h are not
     * the check's to judge) */
    for (int i = 0; i < n; ++i) {
        double coef[2 + 2 * NMAX] = {md->c[i], md->d[i]}, lo = INFINITY, hi = 0.0;
        for (int j = 0; j < n; ++j) {
            coef[2 + 2 * j] = md->a[i + NMAX * j];
            coef[3 + 2 * j] = md->b[i + NMAX * j];
        }
        for (int e = 0; e < 2 + 2 * n; ++e) {
            double c = fabs(coef[e]);
            if (c == 0.0 || c < 1e-290) continue; /* zero or subnormal: no term */
            lo = fmin(lo, c);
            hi = fmax(hi, c);
        }
        if (!(hi <= 1e200) || hi > 1e100 * lo) return;
    }
    if (q == 0 || cdyn_dae_last_state(dae, v, NULL) != CDYN_OK ||
        cdyn_dae_bases(dae, beta, n, NULL, n) != CDYN_OK ||
        cdyn_dae_hidden_constraints(dae, t, v, G0) != CDYN_OK)
        return;
    /* a state without a magnitude of its own is judged against the others
     * (the tolerance floor of newton.h, which judges a state whose own
     * equation is its term alone, like a closed valve, against the
     * equations with other terms it enters): here, generously, the widest
     * others / coefficient of those, and 1e-6 of the largest state */
    double known = 0.0, terms[NMAX], scale[NMAX];
    for (int j = 0; j < n; ++j) known = fmax(known, fmax(v0[j], fabs(v[j])));
    for (int i = 0; i < n; ++i) { /* each equation's terms at v */
        terms[i] = fabs(md->c[i]) + fabs(md->d[i] * sin(t));
        for (int j = 0; j < n; ++j)
            terms[i] += fabs(md->a[i + NMAX * j] * v[j]) + fabs(md->b[i + NMAX * j] * v[j] * v[j]);
    }
    for (int j = 0; j < n; ++j) { /* the widest scale an equation with other terms gives v_j */
        scale[j] = 0.0;
        for (int i = 0; i < n; ++i) {
            double a = fabs(md->a[i + NMAX * j]) + 2.0 * fabs(md->b[i + NMAX * j] * v[j]);
            double own = fabs(md->a[i + NMAX * j] * v[j]) + fabs(md->b[i + NMAX * j] * v[j] * v[j]);
            if (a > 0.0 && terms[i] - own > 0.0) scale[j] = fmax(scale[j], (terms[i] - own) / a);
        }
    }
    for (int i = 0; i < n; ++i) {
        size[i] = fabs(md->c[i]) + fabs(md->d[i] * sin(t));
        for (int j = 0; j < n; ++j) {
            double a = md->a[i + NMAX * j], b = md->b[i + NMAX * j];
            double reach = fmax(fmax(fabs(v[j]), scale[j]), fmax(v0[j], 1e-6 * known));
            size[i] += fabs(a * v[j]) + fabs(b * v[j] * v[j]);
            size[i] += (fabs(a) + 2.0 * fabs(b * v[j])) * reach; /* the states' tolerance */
        }
    }
    int blind = 0; /* any row a difference Jacobian cannot resolve (below) */
    for (int k = 0; k < q; ++k) {
        double bound = 0.0;
        for (int i = 0; i < n; ++i) {
            if (beta[i + n * k] == 0.0) continue;
            bound += fabs(beta[i + n * k]) * size[i];
            /* a row whose largest term exceeds the others by more than a
             * difference quotient resolves (1e-8 steps against rounding):
             * the Jacobian by differences does not see the rest of it, and
             * the solve judges the row as that one term (newton.h) */
            double parts[2 * NMAX + 2] = {fabs(md->c[i]), fabs(md->d[i] * sin(t))}, total = 0.0,
                   largest = 0.0;
            for (int j = 0; j < n; ++j) {
                parts[2 + 2 * j] = fabs(md->a[i + NMAX * j] * v[j]);
                parts[3 + 2 * j] = fabs(md->b[i + NMAX * j] * v[j] * v[j]);
            }
            int top = 0;
            for (int e = 1; e < 2 * n + 2; ++e) top = parts[e] > parts[top] ? e : top;
            largest = parts[top];
            for (int e = 0; e < 2 * n + 2; ++e) total += e == top ? 0.0 : parts[e]; /* the others */
            blind |= total > 0.0 && largest > 1e8 * total;
        }
        bounds[k] = bound;
    }
    /* a row the differences cannot resolve throws the whole solve off its
     * judgement, not only that row; terms near the subnormal range have no
     * relative accuracy */
    for (int k = 0; k < q && !blind; ++k)
        if (isfinite(bounds[k]) && bounds[k] > 1e6 * DBL_MIN && !(fabs(G0[k]) <= 1e-6 * bounds[k]))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int n = fuzz_size(&in, 1, NMAX);
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(n, &st);
    if (!dae) return 0;
    if (n > NMAX) {
        cdyn_dae_free(dae);
        return 0;
    }
    model md = {n, {0}, {0}, {0}, {0}};
    double M[NMAX * NMAX] = {0}, v[NMAX], y[NMAX], ydot[NMAX + FUZZ_GUARD], full[NMAX], rate[NMAX];
    uint8_t mask = fuzz_byte(&in); /* zero rows/columns make M singular */
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
            M[i + n * j] = ((mask >> i) & 1) || ((mask >> j) & 1) ? 0.0 : fuzz_double(&in);
    fuzz_fill(&in, md.c, (size_t)n);
    fuzz_fill(&in, md.d, (size_t)n);
    fuzz_fill(&in, md.a, NMAX * NMAX);
    fuzz_fill(&in, md.b, NMAX * NMAX);
    fuzz_fill(&in, v, (size_t)n);
    uint8_t opts = fuzz_byte(&in);
    if (opts & 1) cdyn_dae_set_rank_tolerance(dae, fuzz_double(&in));
    if (opts & 2) cdyn_dae_set_max_index(dae, (int)(fuzz_byte(&in) % 12) - 1);
    double t = (opts & 4) ? fuzz_double(&in) : 0.0;
    double R[NMAX], S[NMAX], S2[NMAX], Sinv[NMAX];
    fuzz_scales(&in, R, n);
    fuzz_scales(&in, S, n);
    for (int j = 0; j < n; ++j) {
        S2[j] = S[j] * S[j];
        Sinv[j] = 1.0 / S[j];
    }
    fuzz_scale_matrix(M, n, n, n, R, S);
    fuzz_scale_vector(md.c, n, R);
    fuzz_scale_vector(md.d, n, R);
    fuzz_scale_matrix(md.a, n, n, NMAX, R, S);
    fuzz_scale_matrix(md.b, n, n, NMAX, R, S2);
    fuzz_scale_vector(v, n, Sinv);
    if (cdyn_dae_set_mass(dae, M, n) == CDYN_OK &&
        cdyn_dae_set_model(dae, force, getenv("CDYN_FUZZ_JACOBIAN") ? force_jacobian : NULL,
                           NULL, &md) == CDYN_OK) {
        check_residual(dae, &md, M, t, v);
        double G0[NMAX + FUZZ_GUARD];
        int q = n - cdyn_dae_rank(dae);
        fuzz_guard_set(G0, (size_t)q);
        fuzz_ok_finite(cdyn_dae_hidden_constraints(dae, t, v, G0), G0, (size_t)q);
        if (!fuzz_guard_ok(G0, (size_t)q)) abort();
        int index;
        cdyn_dae_analyze(dae, t, v, &index);
        double v0[NMAX]; /* the largest |v_j| the object has been given or has returned */
        for (int j = 0; j < n; ++j) v0[j] = fabs(v[j]);
        if (cdyn_dae_split(dae, t, v) == CDYN_OK) {
            cdyn_newton *nt = cdyn_dae_newton(dae);
            if (nt) cdyn_newton_set_max_iterations(nt, 8);
            /* every OK right-hand side is judged: a magnitude learned inside a
             * failed call counts only up to what the equations give (newton.h) */
            int strict = getenv("CDYN_FUZZ_STRICT") != NULL;
            if (cdyn_dae_consistent(dae, t, v) == CDYN_OK)
                for (int j = 0; j < n; ++j) v0[j] = fmax(fabs(v0[j]), fabs(v[j]));
            int r = cdyn_dae_ode_size(dae), integrated[NMAX]; /* the length of y */
            cdyn_dae_split_states(dae, integrated, NULL);
            for (int i = 0; i < r; ++i) y[i] = v[integrated[i]];
            fuzz_guard_set(ydot, (size_t)r);
            for (int step = 0; step < 3; ++step) {
                if (fuzz_ok_finite(cdyn_dae_rhs(dae, t + 0.01 * step, y, ydot), ydot,
                                   (size_t)r) != CDYN_OK)
                    continue;
                if (strict) check_constraints_hold(dae, &md, t + 0.01 * step, v0);
                if (cdyn_dae_last_state(dae, full, NULL) == CDYN_OK)
                    for (int j = 0; j < n; ++j) v0[j] = fmax(v0[j], fabs(full[j]));
            }
            double Jy[NMAX * NMAX + FUZZ_GUARD];
            fuzz_guard_set(Jy, (size_t)r * r);
            fuzz_ok_finite(cdyn_dae_rhs_jacobian(dae, t, y, NULL, Jy, r > 0 ? r : 1), Jy,
                           (size_t)r * r);
            if (!fuzz_guard_ok(ydot, (size_t)r) || !fuzz_guard_ok(Jy, (size_t)r * r)) abort();
            fuzz_ok_finite(fuzz_ok_finite(cdyn_dae_last_state(dae, full, rate), full, (size_t)n),
                           rate, (size_t)n);
        }
    }
    cdyn_dae_free(dae);
    return 0;
}
