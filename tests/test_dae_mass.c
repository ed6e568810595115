/* cdyn_dae with a time-varying mass matrix M(t) (THEORY T3 with M(t)):
 * results against analytic solutions, rank changes, bad input. */
#include <cdyn.h>

#include "alloc_count.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- rotating null space ---------------------------------------------
 * u = (cos wt, sin wt), u_perp = (-sin wt, cos wt), M(t) = u u^T (rank 1),
 * F = u a + u_perp g with a = -u^T v, g = u_perp^T v - h. The hidden
 * constraint is u_perp^T v = h. With p = u^T v: p' = u'^T v + u^T v' =
 * w u_perp^T v + a = w h - p, so p(t) = w h + (p0 - w h) e^{-t} and
 * v(t) = p u + h u_perp. Neglecting beta' in dG0/dt would give p' = -p. */
typedef struct { double w, h; int fail_at, calls; } rotating;

static void frame(double w, double t, double *u, double *up)
{
    u[0] = cos(w * t); u[1] = sin(w * t);
    up[0] = -u[1]; up[1] = u[0];
}

static int rotating_mass(double t, double *M, int ldm, void *user)
{
    rotating *r = user;
    if (r->fail_at > 0 && ++r->calls >= r->fail_at) return 13;
    double u[2], up[2];
    frame(r->w, t, u, up);
    for (int j = 0; j < 2; ++j)
        for (int i = 0; i < 2; ++i) M[i + j * ldm] = u[i] * u[j];
    return 0;
}

static int rotating_force(double t, const double *v, double *F, void *user)
{
    rotating *r = user;
    double u[2], up[2];
    frame(r->w, t, u, up);
    double a = -(u[0] * v[0] + u[1] * v[1]), g = up[0] * v[0] + up[1] * v[1] - r->h;
    F[0] = u[0] * a + up[0] * g;
    F[1] = u[1] * a + up[1] * g;
    return 0;
}

static void rotating_exact(const rotating *r, double p0, double t, double *v)
{
    double u[2], up[2];
    frame(r->w, t, u, up);
    double p = r->w * r->h + (p0 - r->w * r->h) * exp(-t);
    v[0] = p * u[0] + r->h * up[0];
    v[1] = p * u[1] + r->h * up[1];
}

/* fixed-step RK4 of the minimum-order ODE y' = f(t, y) through cdyn */
static int integrate(cdyn_dae *dae, int r, double *y, double t0, double t1, int steps)
{
    double k[4][4], stage[4], h = (t1 - t0) / steps;
    for (int s = 0; s < steps; ++s) {
        double t = t0 + s * h;
        if (cdyn_dae_rhs(dae, t, y, k[0]) != CDYN_OK) return 0;
        for (int i = 0; i < r; ++i) stage[i] = y[i] + 0.5 * h * k[0][i];
        if (cdyn_dae_rhs(dae, t + 0.5 * h, stage, k[1]) != CDYN_OK) return 0;
        for (int i = 0; i < r; ++i) stage[i] = y[i] + 0.5 * h * k[1][i];
        if (cdyn_dae_rhs(dae, t + 0.5 * h, stage, k[2]) != CDYN_OK) return 0;
        for (int i = 0; i < r; ++i) stage[i] = y[i] + h * k[2][i];
        if (cdyn_dae_rhs(dae, t + h, stage, k[3]) != CDYN_OK) return 0;
        for (int i = 0; i < r; ++i) y[i] += h / 6.0 * (k[0][i] + 2 * k[1][i] + 2 * k[2][i] + k[3][i]);
    }
    return 1;
}

static cdyn_dae *rotating_setup(rotating *r, double p0)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_ptr_nonnull(dae);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, rotating_mass, r, 0.0), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, rotating_force, NULL, NULL, r), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rank(dae), 1);
    double v[2];
    rotating_exact(r, p0, 0.0, v);
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    return dae;
}

START_TEST(rotating_null_space_matches_analytic_solution)
{
    rotating r = {0.5, 0.3, 0, 0};
    const double p0 = 1.0;
    cdyn_dae *dae = rotating_setup(&r, p0);
    int integrated, algebraic;
    ck_assert_int_eq(cdyn_dae_split_states(dae, &integrated, &algebraic), 1);
    /* at t = 0 dG0/dv = +-u_perp = +-(0, 1): v1 is the algebraic state */
    ck_assert_int_eq(integrated, 0);
    ck_assert_int_eq(algebraic, 1);
    double v[2], exact[2];
    rotating_exact(&r, p0, 0.0, v);
    double y = v[0];
    ck_assert(integrate(dae, 1, &y, 0.0, 1.0, 200));
    ck_assert_int_eq(cdyn_dae_last_state(dae, v, NULL), CDYN_OK);
    rotating_exact(&r, p0, 1.0, exact);
    /* RK4 with h = 5e-3 on a rate-1 problem: ~1e-11; beta' by central
     * differences with h = 1.5e-8: ~1e-8 relative. */
    ck_assert_double_eq_tol(y, exact[0], 1e-7);
    ck_assert_double_eq_tol(v[1], exact[1], 1e-7);
    /* the hidden constraint holds to the Newton tolerance */
    double G0;
    ck_assert_int_eq(cdyn_dae_hidden_constraints(dae, 1.0, v, &G0), CDYN_OK);
    ck_assert_double_le(fabs(G0), 1e-9);
    cdyn_dae_free(dae);
}
END_TEST

/* The same at 50 Hz late in a run: beta' by central differences stepped
 * 6e-6 |t| (0.06 s at t = 1e4 s, three periods) was garbage there; the
 * step is now 6e-6 s whatever t (dae.h). At a consistent state v = p u +
 * h u_perp, p' = w h - p and v' = p' u + p w u_perp - h w u. Asserted at
 * t = 1 s, 1e2 s and 1e4 s: one right-hand side within 1e-5 of that
 * (the central difference's (w h)^2 / 6 = 6e-7, and w t's own rounding,
 * 7e-10 rad at 1e4 s, over w h = 1.9e-3). */
/* One right-hand side of the mass turning at w rad/s (p = 1, h = 0.3),
 * split and evaluated at T on the consistent state: its error against
 * the hand rate, relative to the rate's size. Asserts OK statuses and no
 * allocation in the right-hand side. */
static double turning_rate_error(double w, double T)
{
    const double p = 1.0;
    rotating r = {w, 0.3, 0, 0};
    double u[2], up[2], v[2], rate[2];
    frame(r.w, T, u, up);
    for (int i = 0; i < 2; ++i) {
        v[i] = p * u[i] + r.h * up[i];
        rate[i] = (r.w * r.h - p) * u[i] + p * r.w * up[i] - r.h * r.w * u[i];
    }
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, rotating_mass, &r, T), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, rotating_force, NULL, NULL, &r), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_split(dae, T, v), CDYN_OK);
    int integrated, algebraic;
    ck_assert_int_eq(cdyn_dae_split_states(dae, &integrated, &algebraic), 1);
    double y = v[integrated], ydot;
    alloc_count_start(); /* the tableau's levels too (10 and 100 kHz) */
    cdyn_status st = cdyn_dae_rhs(dae, T, &y, &ydot);
    long allocations = alloc_count_stop();
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(allocations, 0);
    cdyn_dae_free(dae);
    return fabs(ydot - rate[integrated]) / fmax(fabs(rate[0]), fabs(rate[1]));
}

START_TEST(a_mass_turning_at_50_hz_late_in_a_run)
{
    const double times[3] = {1.0, 1e2, 1e4};
    for (int k = 0; k < 3; ++k) {
        double error = turning_rate_error(314.15926535897932, times[k]);
        ck_assert_msg(error <= 1e-5, "t = %g: off by %.3e of the rate", times[k], error);
    }
}
END_TEST

/* The same mass turning at 1 kHz to 100 kHz, at t = 1.1 s: beta' by one
 * central difference stepped 6e-6 s was (w h)^2 / 6 off there (the rate
 * 2.4e-4, 2.4 % and 84 % off, with CDYN_OK); differences at h and h / 4
 * checked against each other, and a tableau where they disagree, give the
 * rate within 1e-8 of its size (1.2e-9 measured). */
START_TEST(a_mass_turning_at_up_to_100_khz)
{
    const double hz[3] = {1e3, 1e4, 1e5};
    for (int k = 0; k < 3; ++k) {
        double error = turning_rate_error(6.283185307179586 * hz[k], 1.1);
        ck_assert_msg(error <= 1e-8, "%g Hz: off by %.3e of the rate", hz[k], error);
    }
}
END_TEST

/* ---- scaled mass: M(t) = c(t) diag(1, 0) ------------------------------
 * c v0' = -v0 + v1, 0 = v1 - cos t: v0' = (cos t - v0) / c(t). */
static double scale_of(double t) { return 1.0 + 0.5 * sin(t); }

static int scaled_mass(double t, double *M, int ldm, void *user)
{
    (void)user;
    M[0] = scale_of(t); M[1] = 0.0; M[ldm] = 0.0; M[ldm + 1] = 0.0;
    return 0;
}

static int scaled_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    F[0] = -v[0] + v[1];
    F[1] = v[1] - cos(t);
    return 0;
}

static double scalar_rate(double t, double x) { return (cos(t) - x) / scale_of(t); }

START_TEST(scaled_mass_matches_scalar_ode)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, scaled_mass, NULL, 0.0), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, scaled_force, NULL, NULL, NULL), CDYN_OK);
    double v[2] = {0.2, 0.7};
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_consistent(dae, 0.0, v), CDYN_OK);
    ck_assert_double_eq_tol(v[1], 1.0, 1e-10);
    double y = v[0], x = v[0];
    const int steps = 100;
    const double h = 1.0 / steps;
    ck_assert(integrate(dae, 1, &y, 0.0, 1.0, steps));
    for (int s = 0; s < steps; ++s) { /* the same RK4 on the scalar ODE by hand */
        double t = s * h, k1 = scalar_rate(t, x), k2 = scalar_rate(t + h / 2, x + h / 2 * k1);
        double k3 = scalar_rate(t + h / 2, x + h / 2 * k2), k4 = scalar_rate(t + h, x + h * k3);
        x += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
    }
    /* both are the same RK4 recursion; they differ only by the Newton and
     * finite-difference errors of the rate evaluations (~1e-9) */
    ck_assert_double_eq_tol(y, x, 1e-8);
    cdyn_dae_free(dae);
}
END_TEST

/* ---- rank change, callback failure, bad input ------------------------- */
static int growing_mass(double t, double *M, int ldm, void *user)
{
    (void)user;
    M[0] = 1.0; M[1] = 0.0; M[ldm] = 0.0; M[ldm + 1] = t > 0.5 ? t : 0.0;
    return 0;
}

static int nan_mass(double t, double *M, int ldm, void *user)
{
    (void)user;
    M[0] = t > 0.5 ? NAN : 1.0; M[1] = 0.0; M[ldm] = 0.0; M[ldm + 1] = 0.0;
    return 0;
}

START_TEST(rank_change_is_reported_not_integrated)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, growing_mass, NULL, 0.0), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, scaled_force, NULL, NULL, NULL), CDYN_OK);
    double v[2] = {0.0, 1.0}, y = 0.0, ydot = 12345.0;
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1, &y, &ydot), CDYN_OK);
    ydot = 12345.0;
    ck_assert_int_eq(cdyn_dae_rhs(dae, 1.0, &y, &ydot), CDYN_ERR_SINGULAR);
    ck_assert_double_eq(ydot, 12345.0);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "rank 2"));
    /* still usable where the rank is right */
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.2, &y, &ydot), CDYN_OK);
    ck_assert_double_eq_tol(ydot, cos(0.2) - 0.0, 1e-8);
    cdyn_dae_free(dae);
}
END_TEST

START_TEST(mass_callback_failure_and_bad_input)
{
    rotating r = {0.5, 0.3, 0, 0};
    cdyn_dae *dae = rotating_setup(&r, 1.0);
    double y = 0.9, ydot = 12345.0;
    r.fail_at = 1; r.calls = 0;
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1, &y, &ydot), CDYN_ERR_CALLBACK);
    ck_assert_int_eq(cdyn_dae_callback_code(dae), 13);
    ck_assert_double_eq(ydot, 12345.0);
    r.fail_at = 3; r.calls = 0; /* fails inside the derivative of beta */
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1, &y, &ydot), CDYN_ERR_CALLBACK);
    ck_assert_double_eq(ydot, 12345.0);
    r.fail_at = 0;
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1, &y, &ydot), CDYN_OK);
    ck_assert(isfinite(ydot));
    /* bad arguments */
    ck_assert_int_eq(cdyn_dae_set_mass_fn(NULL, rotating_mass, &r, 0.0), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, NULL, &r, 0.0), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, rotating_mass, &r, NAN), CDYN_ERR_NONFINITE);
    cdyn_dae_free(dae);
    dae = cdyn_dae_create(2, NULL);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, nan_mass, NULL, 1.0), CDYN_ERR_NONFINITE);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, nan_mass, NULL, 0.0), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, scaled_force, NULL, NULL, NULL), CDYN_OK);
    double v[2] = {0.0, 1.0};
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rhs(dae, 1.0, &y, &ydot), CDYN_ERR_NONFINITE);
    cdyn_dae_free(dae);
}
END_TEST

START_TEST(time_varying_rhs_does_not_allocate)
{
    rotating r = {0.5, 0.3, 0, 0};
    cdyn_dae *dae = rotating_setup(&r, 1.0);
    double y = 0.9, ydot = 0.0, v[2];
    alloc_count_start();
    cdyn_status st = cdyn_dae_rhs(dae, 0.1, &y, &ydot);
    cdyn_status st2 = cdyn_dae_last_state(dae, v, NULL);
    long calls = alloc_count_stop();
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(st2, CDYN_OK);
    ck_assert_int_eq(calls, 0);
    cdyn_dae_free(dae);
}
END_TEST

/* ---- a split that goes singular (found by an adversarial review) --------
 * M(t) = p p^T, p = (cos t, sin t); F = (-a + sin 3t, -k b), k = 2, v =
 * (a, b). The hidden constraint p_perp^T F = 0 is G0 = sin t a - k cos t b
 * - sin t sin 3t: index 1 for every t (det [p^T; dG0/dv] = -(k cos^2 t +
 * sin^2 t)), but the split of t = 0, b algebraic, has dG0/db = -k cos t,
 * 0 at pi/2. By hand, with u = p^T v: c a + s b = u and s a - k c b =
 * s U (c = cos t, s = sin t, U = sin 3t) give a = (k c u + s^2 U) / D,
 * b = (s u - c s U) / D, D = k c^2 + s^2, and u' = p'^T v + p^T F =
 * -s a + c b + c (-a + U) - k s b; integrated by RK4 at 1e-5 s as the
 * reference. Through cdyn (RK4, 1 ms) every call was CDYN_OK while the
 * run crossed pi/2 with rates growing as 1 / (t - pi/2): 5.8e-3 off at
 * t = 3. The event asks for the new split once, before pi/2 (tan t = 10
 * there: the split's sensitivity |db/da| in units of the states' sizes,
 * against 1 / tan t for a algebraic); split again there, the run ends on
 * the hand solution. */
/* the states in units u (v = u v~): M u, F(u v~), dF/dv u */
static int turning_mass(double t, double *M, int ldm, void *user)
{
    const double *u = user;
    double p[2] = {cos(t), sin(t)};
    for (int j = 0; j < 2; ++j)
        for (int i = 0; i < 2; ++i) M[i + j * ldm] = p[i] * p[j] * u[j];
    return 0;
}

static int turning_force(double t, const double *v, double *F, void *user)
{
    const double *u = user;
    F[0] = -u[0] * v[0] + sin(3.0 * t);
    F[1] = -2.0 * u[1] * v[1];
    return 0;
}

static int turning_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)v;
    const double *u = user;
    J[0] = -u[0], J[1] = 0.0, J[ld] = 0.0, J[1 + ld] = -2.0 * u[1];
    return 0;
}

static void turning_states(double t, double u, double *ab)
{
    double c = cos(t), s = sin(t), U = sin(3.0 * t), D = 2.0 * c * c + s * s;
    ab[0] = (2.0 * c * u + s * s * U) / D;
    ab[1] = (s * u - c * s * U) / D;
}

static double turning_u_rate(double t, double u)
{
    double ab[2], c = cos(t), s = sin(t);
    turning_states(t, u, ab);
    return -s * ab[0] + c * ab[1] + c * (-ab[0] + sin(3.0 * t)) - 2.0 * s * ab[1];
}

START_TEST(a_split_that_goes_singular_asks_for_a_new_one)
{
    const double T = 3.0, h = 1e-3;
    double u = 1.0, href = 1e-5, ref[2];
    for (long k = 0; k < 300000; ++k) { /* the reference */
        double t = k * href, k1 = turning_u_rate(t, u);
        double k2 = turning_u_rate(t + href / 2, u + href / 2 * k1);
        double k3 = turning_u_rate(t + href / 2, u + href / 2 * k2);
        double k4 = turning_u_rate(t + href, u + href * k3);
        u += href / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    }
    turning_states(T, u, ref);

    /* the same in other units of the states (the split's choice and its
     * watch must not depend on them) */
    const double units[4][2] = {{1.0, 1.0}, {0.3, 1.0}, {1e-8, 1.0}, {1.0, 1e8}};
    for (int w = 0; w < 4; ++w) {
        const double *unit = units[w];
        cdyn_dae *dae = cdyn_dae_create(2, NULL);
        ck_assert_ptr_nonnull(dae);
        ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, turning_mass, (void *)unit, 0.0), CDYN_OK);
        ck_assert_int_eq(
            cdyn_dae_set_model(dae, turning_force, turning_jacobian, NULL, (void *)unit), CDYN_OK);
        double v[2] = {1.0 / unit[0], 0.0}, current = 0.0, best = 0.0;
        ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
        int integrated = -1, events = 0;
        cdyn_dae_split_states(dae, &integrated, NULL);
        ck_assert_int_eq(integrated, 0); /* a; b algebraic */
        double y = v[0], t = 0.0, event_t = -1.0;
        for (int step = 0; step < 3000; ++step, t = step * h) {
            double k[4], stage;
            alloc_count_start(); /* the watch and its probe included */
            cdyn_status st = cdyn_dae_rhs(dae, t, &y, &k[0]);
            long allocations = alloc_count_stop();
            ck_assert_int_eq(st, CDYN_OK);
            ck_assert_int_eq(allocations, 0);
            if (cdyn_dae_split_event(dae)) { /* at the accepted state: split again */
                ck_assert_int_eq(cdyn_dae_split_quality(dae, &current, &best), CDYN_OK);
                ck_assert_double_gt(current, 10.0 * best);
                ck_assert_int_eq(cdyn_dae_last_state(dae, v, NULL), CDYN_OK);
                ck_assert_int_eq(cdyn_dae_split(dae, t, v), CDYN_OK);
                cdyn_dae_split_states(dae, &integrated, NULL);
                ck_assert_int_eq(integrated, 1); /* b; a algebraic */
                y = v[integrated];
                event_t = t;
                ++events;
                ck_assert_int_eq(cdyn_dae_rhs(dae, t, &y, &k[0]), CDYN_OK);
                ck_assert_int_eq(cdyn_dae_split_event(dae), 0);
            }
            stage = y + 0.5 * h * k[0];
            ck_assert_int_eq(cdyn_dae_rhs(dae, t + 0.5 * h, &stage, &k[1]), CDYN_OK);
            stage = y + 0.5 * h * k[1];
            ck_assert_int_eq(cdyn_dae_rhs(dae, t + 0.5 * h, &stage, &k[2]), CDYN_OK);
            stage = y + h * k[2];
            ck_assert_int_eq(cdyn_dae_rhs(dae, t + h, &stage, &k[3]), CDYN_OK);
            y += h / 6.0 * (k[0] + 2.0 * k[1] + 2.0 * k[2] + k[3]);
        }
        double ydot;
        ck_assert_int_eq(cdyn_dae_rhs(dae, T, &y, &ydot), CDYN_OK);
        ck_assert_int_eq(cdyn_dae_last_state(dae, v, NULL), CDYN_OK);
        ck_assert_msg(events == 1, "units (%g, %g): %d events", unit[0], unit[1], events);
        ck_assert_msg(event_t > 1.2 && event_t < 1.5708, "the event at t = %g", event_t);
        double a = v[0] * unit[0], b = v[1] * unit[1];
        ck_assert_msg(fabs(a - ref[0]) <= 1e-8 && fabs(b - ref[1]) <= 1e-8,
                      "units (%g, %g), at t = 3: (%.12g, %.12g), by hand (%.12g, %.12g)", unit[0],
                      unit[1], a, b, ref[0], ref[1]);
        cdyn_dae_free(dae);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dae_mass");
    TCase *tc = tcase_create("time_varying_mass");
    tcase_set_timeout(tc, 60); /* the split case integrates 8 unit scalings: ~4 s under ASan */
    tcase_add_test(tc, rotating_null_space_matches_analytic_solution);
    tcase_add_test(tc, a_mass_turning_at_50_hz_late_in_a_run);
    tcase_add_test(tc, a_mass_turning_at_up_to_100_khz);
    tcase_add_test(tc, scaled_mass_matches_scalar_ode);
    tcase_add_test(tc, rank_change_is_reported_not_integrated);
    tcase_add_test(tc, mass_callback_failure_and_bad_input);
    tcase_add_test(tc, time_varying_rhs_does_not_allocate);
    tcase_add_test(tc, a_split_that_goes_singular_asks_for_a_new_one);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
