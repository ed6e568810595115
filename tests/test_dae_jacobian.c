/* Check suite for cdyn_dae_rhs_jacobian (THEORY T3.3 differentiated).
 *
 * The expected Jacobians come from outside the library:
 *  - a two-state DAE whose algebraic state has mass (M = [m m; 0 0]), so
 *    that the Jacobian needs the second derivatives of the constraint: its
 *    minimum-order ODE is written out by hand below and differentiated
 *    analytically; also with states and equations rescaled by 1e+-8;
 *  - a hydraulic junction in SI units (three pipes and an orifice to a
 *    tank, the junction pressure algebraic): for a massless algebraic state
 *    the Jacobian is the Schur complement M_ii^-1 (F_ii - F_ia F_aa^-1 F_ai)
 *    of the analytic dF/dv;
 *  - a regular M: J = M^-1 dF/dv, and the input matrix M^-1 dF/du;
 *  - a time-varying M whose null space turns: central differences of
 *    cdyn_dae_rhs itself (a second computation: Newton solves at shifted
 *    states, no derivative formula of the library involved).
 * Plus the evaluation it commits, aliasing, counters, re-entry and the
 * allocation count. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "testutil.h"
#include "cdyn.h"

/* ------------------------------------------------------------------------ */
/* Model A: M = [m m; 0 0] (row and column scales below), in units          */
/* v = s x, equations scaled by e:                                          */
/*   m (x1' + x2') = -(x1 + x2) + sin t,     0 = x2 - x1^3 - c t.           */
/* x2 = x1^3 + c t, x2' = 3 x1^2 x1' + c, so                                 */
/*   x1' = f(x1) = (N / m - c) / D,  N = -(x1 + x1^3 + c t) + sin t,        */
/*                                   D = 1 + 3 x1^2,                         */
/*   f'(x1) = (N'/m D - (N/m - c) D') / D^2,  N' = -D, D' = 6 x1.            */
/* In units v = s x: dv1'/dv1 = dx1'/dx1 (time unchanged).                   */

typedef struct {
    double m, c, s, e1, e2; /* mass, rate, state unit, equation units */
    int busy_probe;         /* call the Jacobian from inside the force */
    cdyn_dae *self;
    int busy_status;
} model_a;

static int a_force(double t, const double *v, double *F, void *user)
{
    model_a *a = user;
    double x1 = v[0] / a->s, x2 = v[1] / a->s;
    F[0] = a->e1 * (-(x1 + x2) + sin(t));
    F[1] = a->e2 * (x2 - x1 * x1 * x1 - a->c * t);
    if (a->busy_probe) {
        double y = 0.0, J = 0.0;
        a->busy_status = (int)cdyn_dae_rhs_jacobian(a->self, t, &y, NULL, &J, 1);
    }
    return 0;
}

static int a_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t;
    model_a *a = user;
    double x1 = v[0] / a->s;
    J[0] = -a->e1 / a->s;
    J[ld] = -a->e1 / a->s;
    J[1] = -3.0 * x1 * x1 * a->e2 / a->s;
    J[1 + ld] = a->e2 / a->s;
    return 0;
}

static int a_time(double t, const double *v, double *dFdt, void *user)
{
    (void)v;
    model_a *a = user;
    dFdt[0] = a->e1 * cos(t);
    dFdt[1] = -a->e2 * a->c;
    return 0;
}

static double a_exact_derivative(const model_a *a, double t, double x1)
{
    double N = -(x1 + x1 * x1 * x1 + a->c * t) + sin(t), D = 1.0 + 3.0 * x1 * x1;
    return (-D / a->m * D - (N / a->m - a->c) * 6.0 * x1) / (D * D);
}

/* Which state the split integrates (either is a valid choice: after
 * equilibration the 1 x 2 row dG0/dv has equal entries). */
static int a_integrated(cdyn_dae *dae)
{
    int integrated = -1;
    ck_assert_int_eq(cdyn_dae_split_states(dae, &integrated, NULL), 1);
    ck_assert(integrated == 0 || integrated == 1);
    return integrated;
}

/* The expected Jacobian for the integrated state: f'(x1) for x1, and for
 * y = x2 (x1 = (x2 - c t)^(1/3), dx1/dx2 = 1 / (3 x1^2)):
 * x2' = 3 x1^2 f(x1) + c, so dx2'/dx2 = 2 f(x1) / x1 + f'(x1). */
static double a_expected(const model_a *a, int integrated, double t, double x1)
{
    double N = -(x1 + x1 * x1 * x1 + a->c * t) + sin(t), D = 1.0 + 3.0 * x1 * x1;
    double f = (N / a->m - a->c) / D;
    return integrated == 0 ? a_exact_derivative(a, t, x1)
                           : 2.0 * f / x1 + a_exact_derivative(a, t, x1);
}

static cdyn_dae *a_make(model_a *a, int with_jacobian, double t, double x1)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_ptr_nonnull(dae);
    a->self = dae;
    double ms = a->m / a->s;
    double M[4] = {a->e1 * ms, 0.0, a->e1 * ms, 0.0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, a_force, with_jacobian ? a_jacobian : NULL,
                                            a_time, a),
                     CDYN_OK);
    double v[2] = {a->s * x1, a->s * (x1 * x1 * x1 + a->c * t)};
    ck_assert_int_eq(cdyn_dae_split(dae, t, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_consistent(dae, t, v), CDYN_OK);
    return dae;
}

START_TEST(coupled_mass_matches_the_analytic_derivative)
{
    /* both routes to the second derivatives, in several units */
    const double units[][3] = {{1, 1, 1}, {1e8, 1, 1}, {1e-8, 1e8, 1e-8}, {1e-8, 1e-8, 1e8}};
    for (int with_jacobian = 0; with_jacobian <= 1; ++with_jacobian)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; ++u)
            for (int p = 0; p < 3; ++p) {
                double t = 0.4 + 0.7 * p, x1 = p == 0 ? -0.45 : p == 1 ? 0.25 : 0.6;
                model_a a = {.m = 2.0, .c = 0.3, .s = units[u][0], .e1 = units[u][1],
                             .e2 = units[u][2]};
                cdyn_dae *dae = a_make(&a, with_jacobian, t, x1);
                int integrated = a_integrated(dae);
                double x[2] = {x1, x1 * x1 * x1 + a.c * t};
                double y = a.s * x[integrated], ydot = 0.0, J = 0.0, ydot_rhs = 0.0;
                ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, &y, &ydot, &J, 1), CDYN_OK);
                double exact = a_expected(&a, integrated, t, x1);
                double tol = with_jacobian ? 1e-9 : 1e-6;
                ck_assert_msg(fabs(J - exact) <= tol * fabs(exact),
                              "jac %d units %zu point %d: J = %.17g, exact %.17g (rel %.2e)",
                              with_jacobian, u, p, J, exact, fabs(J - exact) / fabs(exact));
                /* ydot is the right-hand side of the same evaluation */
                ck_assert_int_eq(cdyn_dae_rhs(dae, t, &y, &ydot_rhs), CDYN_OK);
                ck_assert(ydot == ydot_rhs);
                double N = -(x1 + x1 * x1 * x1 + a.c * t) + sin(t), D = 1.0 + 3.0 * x1 * x1;
                double f = (N / a.m - a.c) / D;
                double rate = integrated == 0 ? f : 3.0 * x1 * x1 * f + a.c;
                /* without dF/dv the rates use a forward-difference G_v (dae.h) */
                double rate_tol = with_jacobian ? 1e-12 : 1e-7;
                ck_assert_msg(fabs(ydot / a.s - rate) <= rate_tol * (fabs(rate) + fabs(f)),
                              "jac %d units %zu point %d int %d: ydot %.17g vs %.17g",
                              with_jacobian, u, p, integrated, ydot / a.s, rate);
                cdyn_dae_free(dae);
            }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Model B: a junction without storage in SI units. States                   */
/* v = (Q1, Q2, Q3, p) [m^3/s, Pa]; pipe i has inertance L_i [kg/m^4] and    */
/* turbulent loss R_i Q|Q| [Pa]; an orifice from the junction to a tank at   */
/* p4 passes Q4 = sgn(p - p4) sqrt(|p - p4| / k):                            */
/*   L1 Q1' = ps(t) - p - R1 Q1|Q1|                                          */
/*   L2 Q2' = p - p2 - R2 Q2|Q2|                                             */
/*   L3 Q3' = p - p3 - R3 Q3|Q3|                                             */
/*   0      = Q1 - Q2 - Q3 - Q4(p)          (continuity at the junction)      */
/* The units of flow and pressure are scale factors (SI: 1, 1).             */

typedef struct {
    double L[3], R[3], ps0, p2, p3, p4, k;
    double qu, pu; /* one unit of flow, of pressure, in SI */
} model_b;

static double orifice_flow(const model_b *b, double dp)
{
    return copysign(sqrt(fabs(dp) / b->k), dp);
}

static int b_force(double t, const double *v, double *F, void *user)
{
    const model_b *b = user;
    double Q1 = v[0] * b->qu, Q2 = v[1] * b->qu, Q3 = v[2] * b->qu, p = v[3] * b->pu;
    double ps = b->ps0 * (1.0 + 0.1 * sin(3.0 * t));
    F[0] = (ps - p - b->R[0] * Q1 * fabs(Q1)) / b->pu;
    F[1] = (p - b->p2 - b->R[1] * Q2 * fabs(Q2)) / b->pu;
    F[2] = (p - b->p3 - b->R[2] * Q3 * fabs(Q3)) / b->pu;
    F[3] = (Q1 - Q2 - Q3 - orifice_flow(b, p - b->p4)) / b->qu;
    return 0;
}

static int b_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t;
    const model_b *b = user;
    memset(J, 0, sizeof(double) * (size_t)(3 * ld + 4));
    double p = v[3] * b->pu, dp = p - b->p4;
    for (int i = 0; i < 3; ++i) {
        double Q = v[i] * b->qu;
        J[i + (size_t)i * ld] = -2.0 * b->R[i] * fabs(Q) * b->qu / b->pu;
    }
    J[0 + 3 * (size_t)ld] = -1.0;
    J[1 + 3 * (size_t)ld] = 1.0;
    J[2 + 3 * (size_t)ld] = 1.0;
    J[3 + 0 * (size_t)ld] = 1.0;
    J[3 + 1 * (size_t)ld] = -1.0;
    J[3 + 2 * (size_t)ld] = -1.0;
    J[3 + 3 * (size_t)ld] = -0.5 / sqrt(b->k * fabs(dp)) * b->pu / b->qu;
    return 0;
}

static model_b b_model(double qu, double pu)
{
    model_b b = {.L = {2e8, 5e8, 1.2e9}, .R = {4e11, 9e11, 2e12}, .ps0 = 3e5, .p2 = 1e5,
                 .p3 = 1.2e5, .p4 = 1e5, .k = 2e12, .qu = qu, .pu = pu};
    return b;
}

/* The Schur complement of the analytic Jacobian at v (units of model b). */
static void b_exact(const model_b *b, const double *v, double *Jexact)
{
    double F[16];
    b_jacobian(0.0, v, F, 4, (void *)b);
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double schur = F[i + 4 * j] - F[i + 12] * F[3 + 4 * j] / F[15];
            Jexact[i + 3 * j] = schur / (b->L[i] * b->qu / b->pu);
        }
}

static cdyn_dae *b_make(model_b *b, int with_jacobian, double t, double *v)
{
    cdyn_dae *dae = cdyn_dae_create(4, NULL);
    ck_assert_ptr_nonnull(dae);
    double M[16] = {0};
    for (int i = 0; i < 3; ++i) M[i + 4 * i] = b->L[i] * b->qu / b->pu;
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 4), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, b_force, with_jacobian ? b_jacobian : NULL,
                                            NULL, b),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_dae_split(dae, t, v), CDYN_OK);
    int algebraic = -1;
    cdyn_dae_split_states(dae, NULL, &algebraic);
    ck_assert_int_eq(algebraic, 3); /* the massless pressure */
    ck_assert_int_eq(cdyn_dae_consistent(dae, t, v), CDYN_OK);
    return dae;
}

START_TEST(hydraulic_junction_is_the_schur_complement)
{
    const double units[][2] = {{1.0, 1.0}, {1e-3, 1e5}, {1e-6, 1e-3}}; /* SI; L/s and bar; ... */
    for (int with_jacobian = 0; with_jacobian <= 1; ++with_jacobian)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; ++u) {
            model_b b = b_model(units[u][0], units[u][1]);
            double t = 0.2;
            double v[4] = {3e-4 / b.qu, 1.5e-4 / b.qu, -0.5e-4 / b.qu, 1.5e5 / b.pu};
            cdyn_dae *dae = b_make(&b, with_jacobian, t, v);
            double y[3] = {v[0], v[1], v[2]}, J[9], Jexact[9];
            ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, y, NULL, J, 3), CDYN_OK);
            double vfull[4];
            ck_assert_int_eq(cdyn_dae_last_state(dae, vfull, NULL), CDYN_OK);
            b_exact(&b, vfull, Jexact);
            double tol = with_jacobian ? 1e-12 : 1e-7, scale = 0.0;
            for (int i = 0; i < 9; ++i) scale = fmax(scale, fabs(Jexact[i]));
            for (int i = 0; i < 9; ++i)
                ck_assert_msg(fabs(J[i] - Jexact[i]) <= tol * scale,
                              "jac %d units %zu entry %d: %.17g vs %.17g", with_jacobian, u, i,
                              J[i], Jexact[i]);
            cdyn_dae_free(dae);
        }
}
END_TEST

/* One state, M = 1e-10, F = -v + u: B = dv'/du = 1e10 exactly. With
 * inputs Fu = (1, 1e300) the second column, 1e310, overflows. Asserts: the
 * finite case is 1e10 to rounding; the overflow is refused with
 * CDYN_ERR_NONFINITE and B untouched (its first column too). */
static int decay_force(double t, const double *v, double *F, void *user)
{
    (void)t, (void)user;
    F[0] = -v[0];
    return 0;
}

START_TEST(input_matrix_that_overflows_is_refused_with_b_untouched)
{
    cdyn_dae *dae = cdyn_dae_create(1, NULL);
    const double M = 1e-10;
    double v = 0.5;
    ck_assert_int_eq(cdyn_dae_set_mass(dae, &M, 1), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, decay_force, NULL, NULL, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, &v), CDYN_OK);
    const double Fu[2] = {1.0, 1e300};
    double B[2] = {7.0, 7.0};
    ck_assert_int_eq(cdyn_dae_input_matrix(dae, 0.0, &v, 1, Fu, 1, B, 1), CDYN_OK);
    ck_assert_double_eq_tol(B[0], 1e10, 1e-5);
    B[0] = 7.0;
    ck_assert_int_eq(cdyn_dae_input_matrix(dae, 0.0, &v, 2, Fu, 1, B, 1), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "overflows"));
    ck_assert(B[0] == 7.0 && B[1] == 7.0);
    cdyn_dae_free(dae);
}
END_TEST

/* Input matrix of model B: u1 = the supply pressure (enters pipe 1's
 * equation), u2 = a flow injected at the junction (enters the
 * continuity). With a massless junction, at fixed y the pressure moves by
 * dp = -F_aa^-1 F_au du, so B = M_ii^-1 (F_iu - F_ia F_aa^-1 F_au), by hand
 * from the analytic dF/dv; in every unit system, with and without dF/dv. */
START_TEST(hydraulic_junction_input_matrix_by_hand)
{
    const double units[][2] = {{1.0, 1.0}, {1e-3, 1e5}, {1e-6, 1e-3}};
    for (int with_jacobian = 0; with_jacobian <= 1; ++with_jacobian)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; ++u) {
            model_b b = b_model(units[u][0], units[u][1]);
            double t = 0.2;
            double v[4] = {3e-4 / b.qu, 1.5e-4 / b.qu, -0.5e-4 / b.qu, 1.5e5 / b.pu};
            cdyn_dae *dae = b_make(&b, with_jacobian, t, v);
            /* dF/du in the model's units per SI unit of input (Pa, m^3/s) */
            double Fu[8] = {1.0 / b.pu, 0, 0, 0, 0, 0, 0, 1.0 / b.qu}, B[6], y[3] = {v[0], v[1], v[2]};
            ck_assert_int_eq(cdyn_dae_input_matrix(dae, t, y, 2, Fu, 4, B, 3), CDYN_OK);
            double vfull[4], F[16];
            ck_assert_int_eq(cdyn_dae_last_state(dae, vfull, NULL), CDYN_OK);
            b_jacobian(t, vfull, F, 4, &b);
            double tol = with_jacobian ? 1e-12 : 1e-7;
            for (int k = 0; k < 2; ++k) {
                double scale = 0.0, exact[3];
                for (int i = 0; i < 3; ++i) {
                    exact[i] = (Fu[i + 4 * k] - F[i + 12] * Fu[3 + 4 * k] / F[15]) /
                               (b.L[i] * b.qu / b.pu);
                    scale = fmax(scale, fabs(exact[i]));
                }
                for (int i = 0; i < 3; ++i)
                    ck_assert_msg(fabs(B[i + 3 * k] - exact[i]) <= tol * scale,
                                  "jac %d units %zu input %d row %d: %.17g vs %.17g",
                                  with_jacobian, u, k, i, B[i + 3 * k], exact[i]);
            }
            /* refused: overlap, sizes, NaN */
            ck_assert_int_eq(cdyn_dae_input_matrix(dae, t, y, 2, Fu, 4, Fu, 3), CDYN_ERR_ARG);
            ck_assert_int_eq(cdyn_dae_input_matrix(dae, t, y, 2, Fu, 3, B, 3), CDYN_ERR_ARG);
            ck_assert_int_eq(cdyn_dae_input_matrix(dae, t, y, 2, Fu, 4, B, 2), CDYN_ERR_ARG);
            Fu[1] = NAN;
            ck_assert_int_eq(cdyn_dae_input_matrix(dae, t, y, 2, Fu, 4, B, 3),
                             CDYN_ERR_NONFINITE);
            cdyn_dae_free(dae);
        }
    /* model A's algebraic state carries mass: refused, with the reason */
    model_a a = {.m = 2.0, .c = 0.3, .s = 1.0, .e1 = 1.0, .e2 = 1.0};
    cdyn_dae *dae = a_make(&a, 1, 0.4, 0.25);
    double y = a_integrated(dae) == 0 ? 0.25 : 0.25 * 0.25 * 0.25 + 0.3 * 0.4;
    double Fu[2] = {1.0, 0.0}, B = 0.0;
    ck_assert_int_eq(cdyn_dae_input_matrix(dae, 0.4, &y, 1, Fu, 2, &B, 1), CDYN_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "carry mass"));
    cdyn_dae_free(dae);
}
END_TEST

START_TEST(jacobian_may_alias_y_and_commits_like_rhs)
{
    model_b b = b_model(1.0, 1.0);
    double t = 0.2, v[4] = {3e-4, 1.5e-4, -0.5e-4, 1.5e5};
    cdyn_dae *dae = b_make(&b, 1, t, v);
    double y[3] = {v[0], v[1], v[2]}, J[9], ydot[3];
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, y, ydot, J, 3), CDYN_OK);
    double both[9] = {v[0], v[1], v[2]}; /* y in the first column of J */
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, both, NULL, both, 3), CDYN_OK);
    ck_assert(memcmp(both, J, sizeof J) == 0);
    /* ydot and J must not overlap */
    double big[12];
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, y, big + 2, big, 3), CDYN_ERR_ARG);
    /* leading dimension larger than r: the padding is not written */
    double padded[4 * 3];
    for (int i = 0; i < 12; ++i) padded[i] = -7.0;
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, y, NULL, padded, 4), CDYN_OK);
    for (int j = 0; j < 3; ++j) {
        ck_assert(padded[3 + 4 * j] == -7.0);
        for (int i = 0; i < 3; ++i) ck_assert(padded[i + 4 * j] == J[i + 3 * j]);
    }
    /* the evaluation is committed: cdyn_dae_last_state gives its v and v' */
    double vs[4], vd[4];
    ck_assert_int_eq(cdyn_dae_last_state(dae, vs, vd), CDYN_OK);
    for (int i = 0; i < 3; ++i) ck_assert(vd[i] == ydot[i]);
    /* counters: three Jacobians (the refused call did not run) and as many
     * right-hand sides */
    cdyn_dae_counters c;
    ck_assert_int_eq(cdyn_dae_get_counters(dae, &c), CDYN_OK);
    ck_assert_int_eq(c.rhs_jacobians, 3);
    ck_assert_int_eq(c.rhs, 3);
    cdyn_dae_free(dae);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Model D: regular M = [2 1; 1 3], F = (-v1^3 + v2, -sin v1 - v2):          */
/* J = M^-1 dF/dv.                                                           */

static int d_force(double t, const double *v, double *F, void *user)
{
    (void)t, (void)user;
    F[0] = -v[0] * v[0] * v[0] + v[1];
    F[1] = -sin(v[0]) - v[1];
    return 0;
}

START_TEST(regular_mass_gives_m_inverse_dfdv)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    double M[4] = {2.0, 1.0, 1.0, 3.0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, d_force, NULL, NULL, NULL), CDYN_OK);
    double v[2] = {0.7, -0.2};
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    double J[4];
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, 0.0, v, NULL, J, 2), CDYN_OK);
    double Fv[4] = {-3.0 * v[0] * v[0], -cos(v[0]), 1.0, -1.0}; /* column-major */
    double det = 2.0 * 3.0 - 1.0, Mi[4] = {3.0 / det, -1.0 / det, -1.0 / det, 2.0 / det};
    for (int j = 0; j < 2; ++j)
        for (int i = 0; i < 2; ++i) {
            double e = Mi[i] * Fv[2 * j] + Mi[i + 2] * Fv[1 + 2 * j];
            ck_assert_msg(fabs(J[i + 2 * j] - e) <= 1e-7 * 2.0, "(%d,%d) %.17g vs %.17g", i, j,
                          J[i + 2 * j], e);
        }
    /* the input matrix of a regular M: B = M^-1 Fu, exact */
    double Fu[4] = {1.0, 0.0, 0.5, -2.0}, B[4];
    ck_assert_int_eq(cdyn_dae_input_matrix(dae, 0.0, v, 2, Fu, 2, B, 2), CDYN_OK);
    for (int j = 0; j < 2; ++j)
        for (int i = 0; i < 2; ++i) {
            double e = Mi[i] * Fu[2 * j] + Mi[i + 2] * Fu[1 + 2 * j];
            ck_assert_msg(fabs(B[i + 2 * j] - e) <= 1e-15, "B(%d,%d) %.17g vs %.17g", i, j,
                          B[i + 2 * j], e);
        }
    cdyn_dae_free(dae);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Model C: M(t) = [1; a(t)] [m m] with a = 0.3 sin t (rank 1, its left null */
/* space [a, -1] turns with t), the forces of model A. Reference: central    */
/* differences of cdyn_dae_rhs with the algebraic state solved to 1e-14.     */

static int c_mass(double t, double *M, int ld, void *user)
{
    (void)user;
    double a = 0.3 * sin(t), m = 2.0;
    M[0] = m;
    M[1] = a * m;
    M[ld] = m;
    M[1 + ld] = a * m;
    return 0;
}

/* Model C on one object; with_jacobian selects dF/dv by callback or by
 * differences. Returns the integrated state's index, y and the object. */
static cdyn_dae *c_make(model_a *a, int with_jacobian, double t, double *y, int *integrated)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, c_mass, NULL, t), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, a_force, with_jacobian ? a_jacobian : NULL,
                                            a_time, a),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_tolerances(dae, 1e-15, NULL), CDYN_OK);
    double v[2] = {0.3, 0.1};
    ck_assert_int_eq(cdyn_dae_split(dae, t, v), CDYN_OK);
    ck_assert_int_ge(cdyn_dae_split_states(dae, integrated, NULL), 0);
    ck_assert_int_eq(cdyn_dae_consistent(dae, t, v), CDYN_OK);
    *y = v[*integrated];
    return dae;
}

START_TEST(turning_null_space_matches_differences_of_rhs)
{
    /* reference: central differences of the right-hand side with the exact
     * dF/dv (with differences inside, the rhs carries a rounding noise of
     * ~1e-8 that a difference quotient would magnify) */
    model_a a = {.m = 2.0, .c = 0.3, .s = 1.0, .e1 = 1.0, .e2 = 1.0};
    double t = 0.9, y0 = 0.0;
    int integrated = -1;
    cdyn_dae *exact = c_make(&a, 1, t, &y0, &integrated);
    double h = 1e-5 * fmax(fabs(y0), 1.0), yp = y0 + h, ym = y0 - h, fp, fm;
    ck_assert_int_eq(cdyn_dae_rhs(exact, t, &yp, &fp), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rhs(exact, t, &ym, &fm), CDYN_OK);
    double reference = (fp - fm) / (2.0 * h);
    cdyn_dae_free(exact);
    for (int with_jacobian = 0; with_jacobian <= 1; ++with_jacobian) {
        double y = 0.0, J = 0.0;
        int which = -1;
        cdyn_dae *dae = c_make(&a, with_jacobian, t, &y, &which);
        ck_assert_int_eq(which, integrated);
        ck_assert_int_eq(cdyn_dae_rhs_jacobian(dae, t, &y, NULL, &J, 1), CDYN_OK);
        ck_assert_msg(fabs(J - reference) <= (with_jacobian ? 1e-8 : 1e-6) * fabs(reference),
                      "jac %d: J = %.17g, differences %.17g", with_jacobian, J, reference);
        cdyn_dae_free(dae);
    }
}
END_TEST

START_TEST(no_allocation_and_reentry_refused)
{
    model_a a = {.m = 2.0, .c = 0.3, .s = 1.0, .e1 = 1.0, .e2 = 1.0};
    cdyn_dae *with = a_make(&a, 1, 0.4, 0.2);
    model_a a2 = a;
    cdyn_dae *without = a_make(&a2, 0, 0.4, 0.2);
    model_b b = b_model(1.0, 1.0);
    double v[4] = {3e-4, 1.5e-4, -0.5e-4, 1.5e5};
    cdyn_dae *hyd = b_make(&b, 0, 0.2, v);
    double y = 0.2, J = 0.0, yb[3] = {v[0], v[1], v[2]}, Jb[9];
    /* no assertion inside the counted region (Check's own bookkeeping allocates) */
    cdyn_status st[4];
    alloc_count_start();
    st[0] = cdyn_dae_rhs_jacobian(with, 0.4, &y, NULL, &J, 1);
    st[1] = cdyn_dae_rhs_jacobian(without, 0.4, &y, NULL, &J, 1);
    st[2] = cdyn_dae_rhs_jacobian(hyd, 0.2, yb, NULL, Jb, 3);
    st[3] = cdyn_dae_rhs_jacobian(hyd, 0.2, yb, NULL, NULL, 3);
    long allocations = alloc_count_stop();
    ck_assert_int_eq(allocations, 0);
    ck_assert(st[0] == CDYN_OK && st[1] == CDYN_OK && st[2] == CDYN_OK && st[3] == CDYN_ERR_ARG);

    /* from inside a callback: refused with CDYN_ERR_BUSY, no hang */
    a.busy_probe = 1;
    a.busy_status = -1;
    ck_assert_int_eq(cdyn_dae_rhs_jacobian(with, 0.4, &y, NULL, &J, 1), CDYN_OK);
    ck_assert_int_eq(a.busy_status, CDYN_ERR_BUSY);
    cdyn_dae_free(with);
    cdyn_dae_free(without);
    cdyn_dae_free(hyd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dae_jacobian");
    TCase *tc = tcase_create("minimum-order Jacobian");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, coupled_mass_matches_the_analytic_derivative);
    tcase_add_test(tc, hydraulic_junction_is_the_schur_complement);
    tcase_add_test(tc, hydraulic_junction_input_matrix_by_hand);
    tcase_add_test(tc, input_matrix_that_overflows_is_refused_with_b_untouched);
    tcase_add_test(tc, jacobian_may_alias_y_and_commits_like_rhs);
    tcase_add_test(tc, regular_mass_gives_m_inverse_dfdv);
    tcase_add_test(tc, turning_null_space_matches_differences_of_rhs);
    tcase_add_test(tc, no_allocation_and_reentry_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
