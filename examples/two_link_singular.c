/*
 * two_link_singular.c - a two-link arm whose tip is driven along a line
 * through a kinematic singularity (THEORY T4.6, T4.8, T6.2): generalized
 * Baumgarte stops there with a rank report, modified Lagrange runs through.
 *
 *        y
 *        |     o elbow
 *        |    / \
 *        |   /   \  link 2 (l2 = 1/2 m, m2 = 1 kg; q2 measured from link 1)
 *  1/2 - + -/- - -P - - - - - -   the tip P runs along y = 1/2 towards -x
 *        | /
 *        |/  link 1 (l1 = 1 m, m1 = 2 kg; q1 from +x)
 *        o------------------------ x     gravity g = 9.81 m/s^2 along -y
 *      base    (pose at t = 0; at t* link 1 is vertical, link 2 folded back on it)
 *
 * Coordinates q = (q1, q2) [rad], uniform links (centres at mid-link), the
 * centroidal inertias as printed in the seed paper (I1 = 0.167, I2 = 0.208
 * kg m^2), no joint torques. Lagrange's equations give M q'' = Q - Phi_q^T
 * lambda with (c1 = cos q1, c2 = cos q2, s2 = sin q2, c12 = cos(q1 + q2))
 *
 *   M = [ 1.5625 + 0.5 c2 + I1 + I2   0.0625 + 0.25 c2 + I2 ]
 *       [ 0.0625 + 0.25 c2 + I2       0.0625 + I2           ]
 *   Q = [ 0.25 s2 q2' (2 q1' + q2') - g (2 c1 + 0.25 c12) ]
 *       [ -0.25 s2 q1'^2 - 0.25 g c12                     ]
 *
 * and two rheonomic constraints (m = n = 2: zero degrees of freedom, the
 * motion is pure inverse kinematics):
 *
 *   Phi1 = l1 sin q1 + l2 sin(q1 + q2) - 1/2         tip on the line y = 1/2
 *   Phi2 = l1 cos q1 + l2 cos(q1 + q2) + v t - x0    tip at x = x0 - v t
 *
 *   Phi_q = [  c1 + c12/2   c12/2 ]    Phi_t = (0, v),   det Phi_q = -l1 l2 s2
 *           [ -s1 - s12/2  -s12/2 ]
 *   xi = (s1 q1'^2 + s12 w^2 / 2, c1 q1'^2 + c12 w^2 / 2),  w = q1' + q2'
 *
 * Exact reference. With the tip at (x, 1/2): cos q2 = x^2 - 1, and the
 * branch that passes smoothly through the folded pose is
 *   q2 = pi + 2 asin(x / sqrt 2),
 *   q1 = atan2(1/2, x) - atan2(l2 sin q2, l1 + l2 cos q2).
 * Phi_q is singular where s2 = 0: the folded pose q1 = pi/2, q2 = pi at
 * x = 0, i.e. t* = x0 / v (there the row of Phi1 vanishes: no joint rate
 * moves the tip vertically), and the stretched pose q2 = 0 at x = -sqrt 2,
 * after which no pose reaches the target (the run ends before it).
 *
 * Data of the seed paper: q(0) = (1.396263, 3.563268), so x0 = 0.295965 m
 * (the paper prints 0.295953). Its failure time 4.067105 s matches
 * t* = x0 / v for v = 0.07277 m/s, the default here (its printed initial
 * rates belong to v = 0.6 m/s instead: THEORY T6.2). The initial rates are
 * derived from v: Phi_q q' = -Phi_t at t = 0.
 *
 * Two runs with the same gains K_D = diag(20, 10), K_P = diag(100, 25)
 * (critically damped per constraint, THEORY T4.6) and this program's own
 * fixed-step RK4 (dt = 1 ms) as the caller's integrator:
 *   1. generalized Baumgarte (CDYN_MBS_LAGRANGE): must stop at t* with
 *      CDYN_ERR_SINGULAR and the rank facts of Phi_q, never a NaN;
 *   2. modified Lagrange (CDYN_MBS_PENALTY, alpha_c = 10 I): runs through t*
 *      to the end with a constraint error below the bound derived in
 *      penalty_bound().
 * The rank tolerance of run 1 is scaled to the step (see main()); a third
 * run, for comparison only, keeps cdyn's default 1e-10: it steps across t*
 * unnoticed, cleanly or with exploding multipliers depending on v.
 *   4. modified Lagrange with cdyn's default alpha_c (2^20 times the mass
 *      each constraint moves, cdyn_constraint_set_penalty), same gains:
 *      a stiff penalty, which follows the exact pose through t* (|Phi| <=
 *      1e-5 m, the final pose within 1e-5 rad of the exact one), where
 *      alpha_c = 10 I drifts onto the other elbow's branch at the default
 *      v; its multipliers peak briefly at t*, where the exact ones are
 *      0/0.
 *
 * usage: two_link_singular [output-dir [v]]   (v in m/s, default 0.07277;
 *        CSV, and a PNG if gnuplot is found, into output-dir, default ".")
 */
#include <cdyn/mbs.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2, M_C = 2, NY = 4 };

static const double PI = 3.14159265358979323846;
static const double L1 = 1.0, L2 = 0.5, G = 9.81;
static const double I1 = 0.167, I2 = 0.208;           /* kg m^2, as printed */
static const double Q1_0 = 1.396263, Q2_0 = 3.563268; /* rad, as printed */
static const double KD[M_C * M_C] = {20.0, 0.0, 0.0, 10.0};
static const double KP[M_C * M_C] = {100.0, 0.0, 0.0, 25.0};
static const double ALPHA[M_C] = {10.0, 10.0};

typedef struct {
    double v;  /* tip speed [m/s] */
    double x0; /* tip x at t = 0 [m] */
} arm;

/* ---- the model callbacks ------------------------------------------------ */

static int mass(double t, const double *q, double *M, int ldm, void *user)
{
    (void)t;
    (void)user;
    double c2 = cos(q[1]);
    M[0] = 1.5625 + 0.5 * c2 + I1 + I2;
    M[1] = M[ldm] = 0.0625 + 0.25 * c2 + I2;
    M[1 + ldm] = 0.0625 + I2;
    return 0;
}

static int force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    (void)user;
    double c1 = cos(q[0]), s2 = sin(q[1]), c12 = cos(q[0] + q[1]);
    Q[0] = 0.25 * s2 * qd[1] * (2.0 * qd[0] + qd[1]) - G * (2.0 * c1 + 0.25 * c12);
    Q[1] = -0.25 * s2 * qd[0] * qd[0] - 0.25 * G * c12;
    return 0;
}

static void tip(const double *q, double *x, double *y)
{
    *x = L1 * cos(q[0]) + L2 * cos(q[0] + q[1]);
    *y = L1 * sin(q[0]) + L2 * sin(q[0] + q[1]);
}

static int phi(double t, const double *q, double *Phi, void *user)
{
    const arm *a = user;
    double x, y;
    tip(q, &x, &y);
    Phi[0] = y - 0.5;
    Phi[1] = x + a->v * t - a->x0;
    return 0;
}

static int jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t;
    (void)user;
    double c1 = cos(q[0]), s1 = sin(q[0]), c12 = cos(q[0] + q[1]), s12 = sin(q[0] + q[1]);
    J[0] = L1 * c1 + L2 * c12;
    J[1] = -L1 * s1 - L2 * s12;
    J[ld] = L2 * c12;
    J[1 + ld] = -L2 * s12;
    return 0;
}

static int phi_t(double t, const double *q, double *Pt, void *user)
{
    (void)t;
    (void)q;
    const arm *a = user;
    Pt[0] = 0.0;
    Pt[1] = a->v;
    return 0;
}

static int xi(double t, const double *q, const double *qd, double *out, void *user)
{
    (void)t;
    (void)user;
    double w = qd[0] + qd[1];
    out[0] = L1 * sin(q[0]) * qd[0] * qd[0] + L2 * sin(q[0] + q[1]) * w * w;
    out[1] = L1 * cos(q[0]) * qd[0] * qd[0] + L2 * cos(q[0] + q[1]) * w * w;
    return 0;
}

/* ---- the example's own diagnostics -------------------------------------- */

/* Singular values of the 2 x 2 Phi_q in closed form: s_max^2 + s_min^2 =
 * |Phi_q|_F^2, s_max s_min = |det| = l1 l2 |sin q2|. */
static double sigma_min(const double *q, double *sigma_max)
{
    double J[4];
    jacobian(0.0, q, J, 2, NULL);
    double f2 = J[0] * J[0] + J[1] * J[1] + J[2] * J[2] + J[3] * J[3];
    double det = fabs(J[0] * J[3] - J[1] * J[2]);
    double smax = sqrt(0.5 * (f2 + sqrt(fmax(f2 * f2 - 4.0 * det * det, 0.0))));
    if (sigma_max) *sigma_max = smax;
    return smax > 0.0 ? det / smax : 0.0;
}

static double phi_norm(const arm *a, double t, const double *q)
{
    double P[M_C];
    phi(t, q, P, (void *)a);
    return fmax(fabs(P[0]), fabs(P[1]));
}

/* Exact pose on the branch through the fold (see the header). */
static void exact_pose(const arm *a, double t, double *q)
{
    double x = a->x0 - a->v * t;
    q[1] = PI + 2.0 * asin(x / sqrt(2.0));
    q[0] = atan2(0.5, x) - atan2(L2 * sin(q[1]), L1 + L2 * cos(q[1]));
}

/* ---- one run: the caller's RK4 around cdyn_mbs_rhs ---------------------- */

typedef struct {
    cdyn_mbs *mbs;
    const arm *a;
    int nonfinite;            /* non-finite values seen in any rate or state */
    double max_lambda[M_C];   /* largest |lambda_i| (penalty: its estimate) */
    double fail_time;         /* time of the failing evaluation */
    cdyn_status fail_status;
} run;

static cdyn_status eval(run *r, double t, const double *y, double *ydot)
{
    for (int i = 0; i < NY; ++i) /* a stage state that overflowed */
        if (!isfinite(y[i])) ++r->nonfinite;
    cdyn_status st = cdyn_mbs_rhs(r->mbs, t, y, ydot);
    if (st != CDYN_OK) {
        r->fail_time = t;
        r->fail_status = st;
        return st;
    }
    for (int i = 0; i < NY; ++i)
        if (!isfinite(ydot[i])) ++r->nonfinite;
    double lambda[M_C];
    if (cdyn_mbs_last_reactions(r->mbs, NULL, lambda) == CDYN_OK)
        for (int i = 0; i < M_C; ++i)
            if (fabs(lambda[i]) > r->max_lambda[i]) r->max_lambda[i] = fabs(lambda[i]);
    return CDYN_OK;
}

/* One RK4 step; y is left at the step start if an evaluation fails. */
static cdyn_status rk4_step(run *r, double t, double *y, double dt)
{
    double k1[NY], k2[NY], k3[NY], k4[NY], stage[NY];
    cdyn_status st = eval(r, t, y, k1);
    for (int i = 0; !st && i < NY; ++i) stage[i] = y[i] + 0.5 * dt * k1[i];
    if (!st) st = eval(r, t + 0.5 * dt, stage, k2);
    for (int i = 0; !st && i < NY; ++i) stage[i] = y[i] + 0.5 * dt * k2[i];
    if (!st) st = eval(r, t + 0.5 * dt, stage, k3);
    for (int i = 0; !st && i < NY; ++i) stage[i] = y[i] + dt * k3[i];
    if (!st) st = eval(r, t + dt, stage, k4);
    if (st) return st;
    for (int i = 0; i < NY; ++i) {
        y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        if (!isfinite(y[i])) ++r->nonfinite;
    }
    return CDYN_OK;
}

/* What is kept of each step of a run. */
typedef struct {
    double q1, q2, phi, tip_x; /* phi = |Phi|_inf */
    double smin, srel;         /* sigma_min of Phi_q, and over sigma_max */
} record;

static record make_record(const arm *a, double t, const double *y)
{
    record rec;
    double y_tip, smax;
    rec.q1 = y[0];
    rec.q2 = y[1];
    rec.phi = phi_norm(a, t, y);
    tip(y, &rec.tip_x, &y_tip);
    rec.smin = sigma_min(y, &smax);
    rec.srel = rec.smin / smax;
    return rec;
}

/* Integrate from y0 over steps, or until an evaluation fails; returns the
 * number of records (steps completed + 1). */
static int integrate(run *r, const double *y0, double dt, int steps, record *out)
{
    double y[NY];
    memcpy(y, y0, sizeof y);
    out[0] = make_record(r->a, 0.0, y);
    int done = 0;
    while (done < steps) {
        if (rk4_step(r, done * dt, y, dt) != CDYN_OK) break;
        ++done;
        out[done] = make_record(r->a, done * dt, y);
    }
    return done + 1;
}

static cdyn_mbs *make_model(arm *a, cdyn_mbs_formulation formulation, double rank_tol,
                            const double *alpha)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_C, &st);
    if (!mbs) {
        fprintf(stderr, "two_link_singular: cdyn_mbs_create: %s\n", cdyn_status_string(st));
        return NULL;
    }
    cdyn_constraint *c = cdyn_mbs_constraint(mbs);
    st = cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, a);
    if (!st) st = cdyn_mbs_set_time_terms(mbs, phi_t, xi);
    if (!st) st = cdyn_mbs_set_formulation(mbs, formulation);
    if (!st) st = cdyn_constraint_set_gains(c, KD, M_C, KP, M_C);
    if (!st && formulation == CDYN_MBS_PENALTY) st = cdyn_constraint_set_penalty(c, alpha);
    if (!st && rank_tol > 0.0) st = cdyn_constraint_set_rank_tolerance(c, rank_tol);
    if (st) {
        fprintf(stderr, "two_link_singular: setup: %s: %s %s\n", cdyn_status_string(st),
                cdyn_mbs_last_error(mbs), cdyn_constraint_last_error(c));
        cdyn_mbs_free(mbs);
        return NULL;
    }
    return mbs;
}

/* Angle difference wrapped to (-pi, pi]. */
static double angle_diff(double a, double b)
{
    double d = fmod(a - b, 2.0 * PI);
    if (d > PI) d -= 2.0 * PI;
    if (d <= -PI) d += 2.0 * PI;
    return d;
}

/* Distance of q from the exact pose (branch through the fold) and from its
 * mirror image (the other elbow: q1m = 2 atan2(1/2, x) - q1, q2m = -q2). */
static void branch_distances(const arm *a, double t, const double *q, double *d_exact,
                             double *d_mirror)
{
    double qe[N];
    exact_pose(a, t, qe);
    double theta = atan2(0.5, a->x0 - a->v * t);
    *d_exact = fmax(fabs(angle_diff(q[0], qe[0])), fabs(angle_diff(q[1], qe[1])));
    *d_mirror = fmax(fabs(angle_diff(q[0], 2.0 * theta - qe[0])), fabs(angle_diff(q[1], -qe[1])));
}

/* The modified Lagrange form solves (T4.8)
 *     (M + Phi_q^T alpha Phi_q) q'' = Q + Phi_q^T alpha s,
 * so its multiplier estimate lambda = alpha (Phi_q q'' - s) is exactly the
 * residual of the stabilized acceleration constraint:
 *     Phi'' + K_D Phi' + K_P Phi = lambda / alpha      (per constraint).
 * Both filters are critically damped (K_D^2 = 4 K_P), so their impulse
 * response t exp(-k t) is positive with integral 1/K_P, and from Phi(0) with
 * Phi'(0) = 0 the free response never exceeds |Phi(0)|:
 *     |Phi_i(t)| <= |Phi_i(0)| + max |lambda_i| / (alpha_i K_P,ii).
 * The penalty error is the constraint force over the penalty stiffness
 * alpha K_P; with |lambda| of the order of the weight (m1 + m2) g = 29 N it
 * is centimetres here. max |lambda| is sampled at every RK4 stage (1 % slack
 * for the sampling and the RK4 error). */
static double penalty_bound(int i, double phi0, const double *max_lambda)
{
    return 1.01 * (fabs(phi0) + max_lambda[i] / (ALPHA[i] * KP[i + i * M_C]));
}

static void print_row(double t, const record *b, const record *m, double x_exact)
{
    printf("%7.3f ", t);
    if (b)
        printf(" %7.4f %7.4f %9.2e %9.2e ", b->q1, b->q2, b->phi, b->smin);
    else
        printf(" %7s %7s %9s %9s ", "-", "-", "-", "-");
    printf("  %7.4f %7.4f %9.2e %9.5f %9.2e  %9.5f\n", m->q1, m->q2, m->phi, m->tip_x, m->smin,
           x_exact);
}

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : ".";
    arm a = {0.07277, 0.0};
    if (argc > 2) {
        char *end;
        a.v = strtod(argv[2], &end);
        if (end == argv[2] || *end != '\0' || !(a.v >= 0.02 && a.v <= 1.0)) {
            fprintf(stderr, "two_link_singular: v = '%s' is not a speed in [0.02, 1] m/s\n",
                    argv[2]);
            return EXIT_FAILURE;
        }
    }
    const double q0[N] = {Q1_0, Q2_0};
    double y_tip0;
    tip(q0, &a.x0, &y_tip0);
    const double dt = 1e-3;
    const double t_star = a.x0 / a.v, t_exit = (a.x0 + sqrt(2.0)) / a.v;
    /* end at 20 s (the paper's horizon) or at 90 % of the way to the
     * stretched pose, where q2' grows without bound and the target then
     * leaves the workspace */
    const double t_end = fmin(20.0, floor(0.9 * t_exit * 10.0) / 10.0);
    const int steps = (int)lround(t_end / dt);

    /* initial rates: Phi_q q' = -Phi_t = (0, -v) at t = 0 */
    double J[4];
    jacobian(0.0, q0, J, 2, NULL);
    double det = J[0] * J[3] - J[2] * J[1];
    const double y0[NY] = {q0[0], q0[1], -J[2] * (-a.v) / det, J[0] * (-a.v) / det};

    /* Rank tolerance of the Baumgarte run. A fixed-step RK4 evaluates Phi_q
     * only at its stage times, dt/2 apart, and none of them lands on t*: on
     * the exact path sigma_min/sigma_max of Phi_q falls linearly to 0 at t*
     * (it is ~ sqrt(2) v |t - t*| here), so the default 1e-10 would need a
     * stage within ~1e-9 s of t*. "Singular at the integrator's resolution"
     * is: below what the ratio changes in a fraction of a step. We take 0.4
     * step, measured on the exact path one step before the fold: a stage
     * always lies in [t* - dt/2, t*), and cdyn's test (|R_22| / |R_11| of a
     * pivoted QR of Phi_q^T, an estimate of sigma_min / sigma_max) fires
     * there: before the fold and within one step of it. */
    double q_before[N], smax_before;
    exact_pose(&a, t_star - dt, q_before);
    const double rank_tol = 0.4 * sigma_min(q_before, &smax_before) / smax_before;

    printf("two-link arm (THEORY T6.2): tip along y = 1/2 at v = %.5f m/s from x0 = %.6f m\n",
           a.v, a.x0);
    printf("q(0) = (%.6f, %.6f) rad, Phi(0) = (%.1e, 0) m; q'(0) from Phi_q q' = -Phi_t: "
           "(%.6f, %.6f) rad/s\n",
           q0[0], q0[1], y_tip0 - 0.5, y0[2], y0[3]);
    printf("folded pose at t* = x0/v = %.6f s; stretched pose at %.3f s; runs end at %.1f s; "
           "RK4 dt = %.0e s\n",
           t_star, t_exit, t_end, dt);
    printf("gains K_D = diag(%g, %g), K_P = diag(%g, %g); penalty alpha_c = %g I; Baumgarte "
           "rank tolerance %.2e\n",
           KD[0], KD[3], KP[0], KP[3], ALPHA[0], rank_tol);

    record *rb = malloc(sizeof(record) * (size_t)(steps + 1));
    record *rm = malloc(sizeof(record) * (size_t)(steps + 1));
    record *rd = malloc(sizeof(record) * (size_t)(steps + 1));
    record *rs = malloc(sizeof(record) * (size_t)(steps + 1));
    cdyn_mbs *mb = make_model(&a, CDYN_MBS_LAGRANGE, rank_tol, NULL);
    cdyn_mbs *mm = make_model(&a, CDYN_MBS_PENALTY, 0.0, ALPHA);
    cdyn_mbs *md = make_model(&a, CDYN_MBS_LAGRANGE, 0.0, NULL); /* default tolerance */
    cdyn_mbs *ms = make_model(&a, CDYN_MBS_PENALTY, 0.0, NULL);  /* default alpha_c */
    if (!rb || !rm || !rd || !rs || !mb || !mm || !md || !ms) {
        fprintf(stderr, "two_link_singular: out of memory or setup failed\n");
        free(rb);
        free(rm);
        free(rd);
        free(rs);
        cdyn_mbs_free(mb);
        cdyn_mbs_free(mm);
        cdyn_mbs_free(md);
        cdyn_mbs_free(ms);
        return EXIT_FAILURE;
    }

    run bau = {mb, &a, 0, {0.0, 0.0}, -1.0, CDYN_OK};
    run mod = {mm, &a, 0, {0.0, 0.0}, -1.0, CDYN_OK};
    run def = {md, &a, 0, {0.0, 0.0}, -1.0, CDYN_OK};
    run stiff = {ms, &a, 0, {0.0, 0.0}, -1.0, CDYN_OK};
    const int nb = integrate(&bau, y0, dt, steps, rb);
    const int nm = integrate(&mod, y0, dt, steps, rm);
    const int nd = integrate(&def, y0, dt, steps, rd);
    const int ns = integrate(&stiff, y0, dt, steps, rs);

    /* ---- the table ---- */
    const int per_row = (int)lround(t_end / 20.0 / dt);
    const int k_star = (int)floor(t_star / dt); /* last step at or before t* */
    printf("\n%7s  %-37s   %-48s  %9s\n", "", "------- generalized Baumgarte -------",
           "--------- modified Lagrange, alpha_c = 10 I ----------", "exact");
    printf("%7s  %7s %7s %9s %9s   %7s %7s %9s %9s %9s  %9s\n", "t [s]", "q1", "q2", "|Phi| [m]",
           "sigma_min", "q1", "q2", "|Phi| [m]", "tip x [m]", "sigma_min", "x0-vt [m]");
    for (int k = 0; k < nm; ++k) {
        int sample = k % per_row == 0 || k == nb - 1 || (k == k_star + 1 && k != nb - 1);
        if (!sample) continue;
        print_row(k * dt, k < nb ? &rb[k] : NULL, &rm[k], a.x0 - a.v * k * dt);
    }

    /* ---- Baumgarte: the rank loss ---- */
    cdyn_constraint *cb = cdyn_mbs_constraint(mb);
    int rows[M_C] = {-1, -1};
    int n_rows = cdyn_constraint_redundant_rows(cb, rows);
    int rank = cdyn_constraint_rank(cb);
    double lib_smin = cdyn_constraint_smallest_singular_value(cb);
    printf("\ngeneralized Baumgarte: ");
    if (bau.fail_status == CDYN_OK)
        printf("ran to t = %.3f s without a report\n", (nb - 1) * dt);
    else
        printf("cdyn_mbs_rhs returned %s at t = %.4f s (t* = %.6f s, %+.2f steps)\n  rank of "
               "Phi_q %d of %d, smallest singular value %.3e, dependent row %d (%s)\n  cdyn: %s\n",
               cdyn_status_string(bau.fail_status), bau.fail_time, t_star,
               (bau.fail_time - t_star) / dt, rank, M_C, lib_smin, n_rows > 0 ? rows[0] : -1,
               n_rows > 0 && rows[0] == 0 ? "Phi1: the tip's y, which no joint rate moves there"
                                          : "?",
               cdyn_mbs_last_error(mb));
    printf("  sigma_min of Phi_q over the last steps:");
    for (int k = nb > 5 ? nb - 5 : 0; k < nb; ++k) printf(" %.2e", rb[k].smin);
    double b_maxphi = 0.0;
    for (int k = 0; k < nb; ++k) b_maxphi = fmax(b_maxphi, rb[k].phi);
    printf(" (t = %.3f ... %.3f s)\n  max |Phi| until then %.2e m; non-finite values: %d\n",
           (nb > 5 ? nb - 5 : 0) * dt, (nb - 1) * dt, b_maxphi, bau.nonfinite);

    /* ---- for comparison: Baumgarte with cdyn's default tolerance ---- */
    double d_maxphi = 0.0, d_minrel = 1.0;
    for (int k = 0; k < nd; ++k) {
        d_maxphi = fmax(d_maxphi, rd[k].phi);
        d_minrel = fmin(d_minrel, rd[k].srel);
    }
    printf("same with cdyn's default rank tolerance 1e-10: ");
    if (def.fail_status == CDYN_OK)
        printf("stepped across t* to t = %.3f s", (nd - 1) * dt);
    else
        printf("stopped at t = %.4f s with %s", def.fail_time, cdyn_status_string(def.fail_status));
    printf("\n  smallest sigma_min/sigma_max at a step %.1e; max |Phi| %.1e m; max |lambda| "
           "(%.3g, %.3g) N; non-finite values: %d\n",
           d_minrel, d_maxphi, def.max_lambda[0], def.max_lambda[1], def.nonfinite);

    /* ---- modified Lagrange: bounded error through t* ---- */
    double m_max[M_C] = {0.0, 0.0}, m_after = 0.0, m_end = rm[nm - 1].phi;
    int k_min = 0; /* where the penalty arm comes closest to a singular pose */
    for (int k = 0; k < nm; ++k) {
        if (rm[k].smin < rm[k_min].smin) k_min = k;
        double P[M_C];
        double q[N] = {rm[k].q1, rm[k].q2};
        phi(k * dt, q, P, &a);
        for (int i = 0; i < M_C; ++i) m_max[i] = fmax(m_max[i], fabs(P[i]));
        if (k * dt > t_star) m_after = fmax(m_after, rm[k].phi);
    }
    /* Sanity of the penalty force itself: the constraint force holds the arm
     * up, so it is of the order of its weight (m1 + m2) g = 29 N; three times
     * that leaves room for the inertial forces (v <= 1 m/s). */
    const double lambda_cap = 3.0 * (2.0 + 1.0) * G;
    const double phi0[M_C] = {y_tip0 - 0.5, 0.0};
    double bound[M_C];
    for (int i = 0; i < M_C; ++i) bound[i] = penalty_bound(i, phi0[i], mod.max_lambda);
    double q_end[N] = {rm[nm - 1].q1, rm[nm - 1].q2}, d_exact, d_mirror;
    branch_distances(&a, (nm - 1) * dt, q_end, &d_exact, &d_mirror);
    printf("\nmodified Lagrange: %s, %d steps to t = %.3f s; non-finite values: %d\n",
           cdyn_status_string(mod.fail_status), nm - 1, (nm - 1) * dt, mod.nonfinite);
    printf("  max |Phi1| (tip y - 1/2) %.3e m %s bound %.3e m; max |Phi2| (tip x - (x0 - v t)) "
           "%.3e m %s bound %.3e m\n",
           m_max[0], m_max[0] <= bound[0] ? "<=" : ">", bound[0], m_max[1],
           m_max[1] <= bound[1] ? "<=" : ">", bound[1]);
    printf("  bound = 1.01 (|Phi(0)| + max |lambda| / (alpha_c K_P)), max |lambda| = (%.3f, "
           "%.3f) N (sanity cap 3 (m1 + m2) g = %.1f N)\n",
           mod.max_lambda[0], mod.max_lambda[1], lambda_cap);
    printf("  max |Phi| after t*: %.3e m; at t = %.1f s: %.3e m; q(end) is %.3f rad from the "
           "exact pose, %.3f rad from its other-elbow mirror\n",
           m_after, (nm - 1) * dt, m_end, d_exact, d_mirror);
    printf("  its own path passes singular poses: smallest sigma_min of Phi_q %.2e at t = %.3f s "
           "(q2 - pi = %+.2e)\n",
           rm[k_min].smin, k_min * dt, rm[k_min].q2 - PI);

    /* ---- modified Lagrange with the default alpha_c: the exact pose ---- */
    double s_max = 0.0;
    for (int k = 0; k < ns; ++k) s_max = fmax(s_max, rs[k].phi);
    double qs_end[N] = {rs[ns - 1].q1, rs[ns - 1].q2}, s_exact, s_mirror;
    branch_distances(&a, (ns - 1) * dt, qs_end, &s_exact, &s_mirror);
    printf("\nmodified Lagrange, default alpha_c: %s, %d steps to t = %.3f s; non-finite values: "
           "%d\n  max |Phi| %.3e m; q(end) is %.2e rad from the exact pose; max |lambda| = (%.4g, "
           "%.4g) N (at t*, where the exact multipliers are 0/0)\n",
           cdyn_status_string(stiff.fail_status), ns - 1, (ns - 1) * dt, stiff.nonfinite, s_max,
           s_exact, stiff.max_lambda[0], stiff.max_lambda[1]);

    /* ---- checks ---- */
    /* The report must name the loss: rank 1, row 0 (Phi1), a small singular
     * value, at the evaluation within one step of t*. */
    int b_ok = bau.fail_status == CDYN_ERR_SINGULAR && bau.nonfinite == 0 &&
               fabs(bau.fail_time - t_star) <= dt && rank == M_C - 1 && n_rows == 1 &&
               rows[0] == 0 && lib_smin >= 0.0 && lib_smin <= rank_tol * smax_before;
    int m_ok = mod.fail_status == CDYN_OK && nm == steps + 1 && mod.nonfinite == 0 &&
               m_max[0] <= bound[0] && m_max[1] <= bound[1] &&
               mod.max_lambda[0] <= lambda_cap && mod.max_lambda[1] <= lambda_cap;
    printf("\ncheck generalized Baumgarte reports the rank loss at t* without NaN: %s\n",
           b_ok ? "pass" : "FAIL");
    printf("check modified Lagrange runs through with |Phi| within its bound: %s\n",
           m_ok ? "pass" : "FAIL");
    int s_ok = stiff.fail_status == CDYN_OK && ns == steps + 1 && stiff.nonfinite == 0 &&
               s_max <= 1e-5 && s_exact <= 1e-5;
    printf("check modified Lagrange with the default alpha_c follows the exact pose through t*: "
           "%s\n",
           s_ok ? "pass" : "FAIL");
    m_ok = m_ok && s_ok;

    /* ---- CSV and figure ---- */
    char path[1024];
    snprintf(path, sizeof path, "%s/two_link_singular.csv", out_dir);
    FILE *csv = fopen(path, "w");
    const int have_csv = csv != NULL;
    if (csv) {
        const int every = steps / 400 > 0 ? steps / 400 : 1;
        fprintf(csv, "t_s,x_exact_m,b_q1,b_q2,b_phi_m,b_sigma_min,m_q1,m_q2,m_phi_m,m_tip_x_m,"
                     "m_sigma_min\n");
        for (int k = 0; k < nm; ++k) {
            /* every step near t* and where the penalty arm is near a singular pose */
            int fine = abs(k - k_star) <= 25 || rm[k].smin < 0.02;
            if (k % every != 0 && !fine && k != nb - 1) continue;
            fprintf(csv, "%.4f,%.7f,", k * dt, a.x0 - a.v * k * dt);
            if (k < nb)
                fprintf(csv, "%.7f,%.7f,%.3e,%.5e,", rb[k].q1, rb[k].q2, fmax(rb[k].phi, 1e-16),
                        rb[k].smin);
            else
                fprintf(csv, ",,,,");
            fprintf(csv, "%.7f,%.7f,%.5e,%.7f,%.5e\n", rm[k].q1, rm[k].q2,
                    fmax(rm[k].phi, 1e-16), rm[k].tip_x, rm[k].smin);
        }
        fclose(csv);
        printf("CSV: %s\n", path);
    } else {
        fprintf(stderr, "two_link_singular: cannot write %s (no CSV, no figure)\n", path);
    }
    if (b_ok && m_ok && have_csv && system("command -v gnuplot > /dev/null 2>&1") == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"set terminal pngcairo size 900,650; set output '%s/two_link_singular.png';"
                 " set datafile separator ','; set datafile missing ''; set xlabel 't [s]';"
                 " set logscale y; set format y '10^{%%L}'; set arrow from %g, graph 0 to %g, graph 1 nohead dt 2;"
                 " set multiplot layout 2,1 title 'Two-link arm through the folded pose (v = %.5f m/s, t* = %.3f s)';"
                 " set key inside bottom right; set ylabel '|Phi| [m]'; plot [0:%g] [1e-16:1] '%s' u 1:5 w l lw 2 t 'gen. Baumgarte',"
                 " '' u 1:9 w l lw 2 t 'modified Lagrange';"
                 " set key inside center right; set ylabel 'sigma_{min}(Phi_q)'; plot [0:%g] [1e-5:1] '%s' u 1:6 w l lw 2 t 'gen. Baumgarte',"
                 " '' u 1:11 w l lw 2 t 'modified Lagrange', %g w l dt 3 lc 'black' t 'rank tolerance x sigma_{max}';"
                 " unset multiplot\"",
                 out_dir, t_star, t_star, a.v, t_star, t_end, path, t_end, path,
                 rank_tol * smax_before);
        if (system(cmd) == 0) printf("figure: %s/two_link_singular.png\n", out_dir);
    }
    if (!b_ok || !m_ok) fprintf(stderr, "two_link_singular: a check failed (see above)\n");
    free(rb);
    free(rm);
    free(rd);
    free(rs);
    cdyn_mbs_free(mb);
    cdyn_mbs_free(mm);
    cdyn_mbs_free(md);
    cdyn_mbs_free(ms);
    return b_ok && m_ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
