/*
 * pendulum_drift.c - constraint drift of a pendulum in Cartesian coordinates
 * over 100 s: unstabilized KKT, Baumgarte, generalized Baumgarte, modified
 * Lagrange, projection and coordinate partitioning side by side (THEORY T4).
 *
 * A point mass m on a massless rod of length l, pivot at the origin, gravity
 * g along -y. Coordinates q = (x, y) (n = 2), one holonomic constraint
 * (m = 1), scleronomic (Phi_t = 0):
 *
 *   M = m I,   Q = (0, -m g),   Phi = x^2 + y^2 - l^2   [m^2],   Phi_q = [2x  2y]
 *   Phi'  = 2 (x x' + y y')
 *   Phi'' = Phi_q q'' + 2 (x'^2 + y'^2)  =>  Phi_q q'' = xi,  xi = -2 (x'^2 + y'^2)
 *
 * (T4.1; xi is given exactly by a callback, no finite differences). The KKT
 * equations m q'' + Phi_q^T lambda = Q (T4.4) give, on the manifold,
 * lambda = m (v^2 - g y) / (2 l^2): the rod tension is 2 l lambda. With the
 * angle theta from the downward vertical, x = l sin(theta), y = -l cos(theta),
 * and the energy (zero at the lowest point)
 *
 *   E = m (x'^2 + y'^2) / 2 + m g (y + l),   E0 = m g l (1 - cos(theta0)).
 *
 * Every formulation below imposes the constraint at the acceleration level
 * only, so Phi and Phi' are not protected against the integrator's
 * truncation error:
 *
 *   - Unstabilized KKT imposes Phi'' = 0. A small systematic truncation
 *     error in Phi'' makes Phi' grow linearly and Phi like t^2 (and like
 *     dt^4: 2.1e-4, 3.3e-3, 5.4e-2 m^2 after 100 s at dt = 5e-3, 1e-2, 2e-2).
 *   - Baumgarte (T4.5) imposes Phi'' + 2a Phi' + b^2 Phi = 0: errors decay
 *     with rate a (a = b = 5: critically damped), so the drift settles where
 *     the decay balances the truncation error of each step.
 *   - Generalized Baumgarte (T4.6) with critical gains K_D = 2k, K_P = k^2:
 *     with one constraint this is exactly Baumgarte with a = b = k (the
 *     program re-runs k = 5 and compares with the Baumgarte row). The row
 *     uses k = 20 to show that a stiffer gain is not better at a fixed step:
 *     the gains enter the Jacobian of the vector field (2k, k^2) and with it
 *     RK4's truncation error. For a = b = 1, 2, 5, 10, 20, 50 this run gave
 *     max |Phi| = 6.4e-7, 1.4e-7, 1.3e-7, 4.4e-7, 1.5e-6, 1.1e-5 m^2.
 *   - Modified Lagrange (T4.8), (M + alpha Phi_q^T Phi_q) q'' = Q + alpha
 *     Phi_q^T s, meets Phi_q q'' = s only up to
 *         r = (Phi_q M^-1 Q - s) / (1 + alpha Phi_q M^-1 Phi_q^T)
 *           = 2 (v^2 - g y) / (1 + 4 alpha l^2 / m)    on the manifold,
 *     which has the sign of the rod tension. Without gains Phi'' = r > 0 and
 *     Phi grows like t^2 (2.8e-2 m^2 after 100 s at alpha = 1e6), so it runs
 *     with the Baumgarte gains a = b = 5 and settles near Phi ~ r / b^2, at
 *     most 2 g l (3 - 2 cos(theta0)) / ((1 + 4 alpha l^2 / m) b^2) (printed
 *     and checked). alpha = 1e6 kg/m^2 keeps that bias visible; 1e8 pushes
 *     it below Baumgarte's truncation level; from about 1e10 the condition
 *     1 + 4 alpha l^2 / m of the leading matrix costs accuracy (relative
 *     energy error 9e-6 at 1e10, 4e-4 at 1e12); the default alpha = 10
 *     leaves 3e-2 m^2 here.
 *   - Projection after each step (T4.9) and coordinate partitioning (T4.10)
 *     keep Phi at the level of their Newton tolerance (relative 1e-12) by
 *     construction: max |Phi| 4.0e-12 and 3.4e-12 m^2 in this run.
 *
 * Partitioning: the pivoted QR of Phi_q = [2x 2y], each coordinate in its
 * unit of the chart frame (cdyn_mbs_partition_quality(): M = m I makes x
 * and y commensurate), makes the coordinate of the larger entry
 * dependent. At theta0 = 1.2 rad |x| > |y|: x is dependent and y
 * integrated. That cannot last through the lowest point, where x = 0 and y
 * stops being a coordinate (x = +-sqrt(l^2 - y^2)): the partition must
 * switch before it. cdyn raises cdyn_mbs_partition_event() when the
 * current partition has become more than PARTITION_LIMIT times worse than
 * the one cdyn_mbs_partition() would choose at the same configuration
 * (cdyn_mbs_set_partition_limit(); 1.2 here, a 20 % hysteresis; the
 * default is 1.1). A partition's quality is its largest sensitivity
 * |d q_dep / d q_ind| in those units, at least 1: here |d x / d y| =
 * |y / x| (or the reverse after a switch), with the units of x and y
 * between equal (the masses) and what Phi_q's history has seen. The
 * partition then switches near theta = +-38 deg on the way down and +-50
 * deg on the way up (tan 50 deg = 1.2; the first switch, from rest at 69
 * deg, at 43 deg), four times per swing period: 182 repartitions in 100 s.
 * Switching early matters: the integrated y carries x = sqrt(l^2 - y^2),
 * whose n-th derivative grows like the ratio^(2n-1), and RK4's error with
 * it: the largest relative energy errors over 100 s were 1.9e-7 with the
 * limit 1.2 (182 repartitions), 4.1e-7 with 1.1 (182), 7.9e-6 with 1.5
 * (181), 6.2e-5 with 2 (181), 2.2e-3 with 10 (one late switch, 4 deg
 * before the lowest point), and with 30 (one switch, 2 deg before it) the
 * mass lost half its energy (5.1e-1).
 *
 * Time step: fixed-step RK4, "the caller's integrator", dt = 1e-2 s. The
 * fastest motion is the swing, omega0 = sqrt(g/l) = 3.13 rad/s, at most
 * 3.5 rad/s at the bottom for theta0 = 1.2: 0.035 rad per step, so RK4's
 * local error (omega dt)^5 / 120 ~ 4e-10 per step is small, the gains have
 * k dt <= 0.2 (far inside RK4's stability bound 2.78 on the negative real
 * axis), and the drift of the unstabilized form is still plain to see over
 * 10^4 steps.
 *
 * Period check: a separate 21 s run at theta0 = 0.05 rad (KKT + projection)
 * finds the zero crossings of x by cubic Hermite interpolation in (x, x')
 * and compares the mean period with 2 pi sqrt(l/g) (1 + theta0^2 / 16).
 * The series' next term is 11 theta0^4 / 3072 = 2.2e-8 (relative); RK4's
 * phase error is (omega0 dt)^4 / 120 = 8e-9 per unit phase; the Hermite
 * interpolation error is O(dt^4) and shared by 20 half periods. The
 * tolerance 1e-7 covers these with margin yet is 1500 times smaller than
 * the correction theta0^2 / 16 = 1.6e-4 it is meant to confirm. The exact
 * period 2 pi sqrt(l/g) / AGM(1, cos(theta0 / 2)) is printed as well.
 *
 * Checks (exit status EXIT_FAILURE if one fails): projection and
 * partitioning keep |Phi| <= 1e-10 m^2 and the relative energy error below
 * 1e-5; the partition switched at least once; Baumgarte and generalized
 * Baumgarte stay at least 100 times below the unstabilized drift and do not
 * grow (max over the second 50 s at most twice that over the first), while
 * the unstabilized drift does; generalized k = 5 reproduces Baumgarte
 * a = b = 5; the penalty bias is within a factor 2 of its estimate; the
 * period agrees.
 *
 * usage: pendulum_drift [output-dir]   (CSV, and a PNG if gnuplot is found)
 */
#include <cdyn/mbs.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { NQ = 2, NY = 4, NC = 1 }; /* coordinates, state size, constraints */

static const double PI = 3.14159265358979323846;
static const double PARTITION_LIMIT = 1.2;

typedef struct {
    double mass, length, gravity; /* kg, m, m/s^2 */
} pendulum;

/* ---- the model callbacks ------------------------------------------------ */

static int mass_matrix(double t, const double *q, double *M, int ldm, void *user)
{
    const pendulum *p = user;
    (void)t;
    (void)q;
    M[0] = p->mass;
    M[1] = 0.0;
    M[ldm] = 0.0;
    M[1 + ldm] = p->mass;
    return 0;
}

static int applied_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    const pendulum *p = user;
    (void)t;
    (void)q;
    (void)qdot;
    Q[0] = 0.0;
    Q[1] = -p->mass * p->gravity;
    return 0;
}

static int constraint(double t, const double *q, double *Phi, void *user)
{
    const pendulum *p = user;
    (void)t;
    Phi[0] = q[0] * q[0] + q[1] * q[1] - p->length * p->length;
    return 0;
}

static int constraint_jacobian(double t, const double *q, double *Phi_q, int ld, void *user)
{
    (void)t;
    (void)user;
    Phi_q[0] = 2.0 * q[0];
    Phi_q[ld] = 2.0 * q[1];
    return 0;
}

/* xi = -(Phi_q q')_q q' = -2 (x'^2 + y'^2) (T4.1) */
static int constraint_xi(double t, const double *q, const double *qdot, double *xi, void *user)
{
    (void)t;
    (void)q;
    (void)user;
    xi[0] = -2.0 * (qdot[0] * qdot[0] + qdot[1] * qdot[1]);
    return 0;
}

/* ---- measurements ------------------------------------------------------- */

static double phi_of(const pendulum *p, const double *y)
{
    return y[0] * y[0] + y[1] * y[1] - p->length * p->length;
}

static double phi_dot_of(const double *y) { return 2.0 * (y[0] * y[2] + y[1] * y[3]); }

static double energy_of(const pendulum *p, const double *y)
{
    return 0.5 * p->mass * (y[2] * y[2] + y[3] * y[3]) + p->mass * p->gravity * (y[1] + p->length);
}

/* ---- the methods -------------------------------------------------------- */

typedef struct {
    const char *name;   /* table row */
    const char *column; /* CSV column */
    cdyn_mbs_formulation formulation;
    double baumgarte; /* a = b; 0: none */
    double critical;  /* k of the critical gains; 0: none */
    double penalty;   /* alpha_c [kg/m^2] of the penalty form */
    int project, partition;
} method;

enum { METHODS = 6, PARTITIONED = 5 };
static const method METHOD_LIST[METHODS] = {
    {"KKT, unstabilized", "kkt", CDYN_MBS_LAGRANGE, 0.0, 0.0, 0.0, 0, 0},
    {"Baumgarte a = b = 5", "baumgarte", CDYN_MBS_LAGRANGE, 5.0, 0.0, 0.0, 0, 0},
    {"generalized, k = 20", "generalized", CDYN_MBS_LAGRANGE, 0.0, 20.0, 0.0, 0, 0},
    {"modified Lagrange", "penalty", CDYN_MBS_PENALTY, 5.0, 0.0, 1e6, 0, 0},
    {"KKT + projection", "projection", CDYN_MBS_LAGRANGE, 0.0, 0.0, 0.0, 1, 0},
    {"partitioning", "partitioning", CDYN_MBS_LAGRANGE, 0.0, 0.0, 0.0, 0, 1},
};

typedef struct {
    double max_phi, final_phi, max_phi_dot;
    double max_energy, final_energy; /* relative to E0 */
    double max_phi_first_half, max_phi_second_half;
    int events; /* repartitions on cdyn_mbs_partition_event() */
} run_result;

static int fail(cdyn_mbs *mbs, const char *what, cdyn_status st)
{
    fprintf(stderr, "pendulum_drift: %s: %s: %s\n", what, cdyn_status_string(st),
            cdyn_mbs_last_error(mbs));
    return 0;
}

static cdyn_mbs *make_model(pendulum *p, const method *how)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(NQ, NC, &st);
    if (!mbs) {
        fprintf(stderr, "pendulum_drift: cdyn_mbs_create: %s\n", cdyn_status_string(st));
        return NULL;
    }
    cdyn_constraint *c = cdyn_mbs_constraint(mbs);
    st = cdyn_mbs_set_model(mbs, mass_matrix, applied_force, constraint, constraint_jacobian, p);
    if (st == CDYN_OK) st = cdyn_mbs_set_time_terms(mbs, NULL, constraint_xi);
    if (st == CDYN_OK) st = cdyn_mbs_set_formulation(mbs, how->formulation);
    if (st == CDYN_OK && how->baumgarte > 0.0)
        st = cdyn_constraint_set_baumgarte(c, how->baumgarte, how->baumgarte);
    if (st == CDYN_OK && how->critical > 0.0)
        st = cdyn_constraint_set_critical_gains(c, &how->critical);
    if (st == CDYN_OK && how->penalty > 0.0) st = cdyn_constraint_set_penalty(c, &how->penalty);
    if (st == CDYN_OK && how->partition) st = cdyn_mbs_set_partition_limit(mbs, PARTITION_LIMIT);
    if (st != CDYN_OK) {
        fail(mbs, how->name, st);
        cdyn_mbs_free(mbs);
        return NULL;
    }
    return mbs;
}

/* The caller's integrator: one classical RK4 step of y' = f(t, y), y = [q; q']. */
static int rk4_full(cdyn_mbs *mbs, double t, double *y, double dt)
{
    double k1[NY], k2[NY], k3[NY], k4[NY], stage[NY];
    cdyn_status st = cdyn_mbs_rhs(mbs, t, y, k1);
    for (int i = 0; i < NY; ++i) stage[i] = y[i] + 0.5 * dt * k1[i];
    if (st == CDYN_OK) st = cdyn_mbs_rhs(mbs, t + 0.5 * dt, stage, k2);
    for (int i = 0; i < NY; ++i) stage[i] = y[i] + 0.5 * dt * k2[i];
    if (st == CDYN_OK) st = cdyn_mbs_rhs(mbs, t + 0.5 * dt, stage, k3);
    for (int i = 0; i < NY; ++i) stage[i] = y[i] + dt * k3[i];
    if (st == CDYN_OK) st = cdyn_mbs_rhs(mbs, t + dt, stage, k4);
    if (st != CDYN_OK) return fail(mbs, "cdyn_mbs_rhs", st);
    for (int i = 0; i < NY; ++i) y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* The same step for the partitioned ODE z' = f(t, z), z = [q_ind; q'_ind]
 * (2 entries here: d = n - m = 1). */
static int rk4_partitioned(cdyn_mbs *mbs, double t, double *z, double dt)
{
    enum { NZ = 2 * (NQ - NC) };
    double k1[NZ], k2[NZ], k3[NZ], k4[NZ], stage[NZ];
    cdyn_status st = cdyn_mbs_partition_rhs(mbs, t, z, k1);
    for (int i = 0; i < NZ; ++i) stage[i] = z[i] + 0.5 * dt * k1[i];
    if (st == CDYN_OK) st = cdyn_mbs_partition_rhs(mbs, t + 0.5 * dt, stage, k2);
    for (int i = 0; i < NZ; ++i) stage[i] = z[i] + 0.5 * dt * k2[i];
    if (st == CDYN_OK) st = cdyn_mbs_partition_rhs(mbs, t + 0.5 * dt, stage, k3);
    for (int i = 0; i < NZ; ++i) stage[i] = z[i] + dt * k3[i];
    if (st == CDYN_OK) st = cdyn_mbs_partition_rhs(mbs, t + dt, stage, k4);
    if (st != CDYN_OK) return fail(mbs, "cdyn_mbs_partition_rhs", st);
    for (int i = 0; i < NZ; ++i) z[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* Choose a partition at the consistent state y and gather z from it. */
static int repartition(cdyn_mbs *mbs, double t, const double *y, double *z)
{
    cdyn_status st = cdyn_mbs_partition(mbs, t, y);
    if (st != CDYN_OK) return fail(mbs, "cdyn_mbs_partition", st);
    st = cdyn_mbs_partition_gather(mbs, y, z);
    if (st != CDYN_OK) return fail(mbs, "cdyn_mbs_partition_gather", st);
    return 1;
}

enum { STEPS = 10000, SAMPLE_EVERY = 10, SAMPLES = STEPS / SAMPLE_EVERY + 1 };

/* One run of STEPS steps of one method from rest at theta0; the largest
 * |Phi| of each SAMPLE_EVERY steps into samples (samples[0]: the start). */
static int run_method(pendulum *p, const method *how, double theta0, double dt,
                      run_result *res, double *samples)
{
    const int steps = STEPS;
    double window = 0.0;
    cdyn_mbs *mbs = make_model(p, how);
    if (!mbs) return 0;
    double y[NY] = {p->length * sin(theta0), -p->length * cos(theta0), 0.0, 0.0};
    double z[2 * (NQ - NC)];
    const double e0 = energy_of(p, y);
    int ok = 1;
    if (how->partition) ok = repartition(mbs, 0.0, y, z);
    *res = (run_result){0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0};
    for (int step = 0; ok; ++step) {
        double t = step * dt;
        double phi = fabs(phi_of(p, y)), energy = (energy_of(p, y) - e0) / e0;
        res->max_phi = fmax(res->max_phi, phi);
        res->max_phi_dot = fmax(res->max_phi_dot, fabs(phi_dot_of(y)));
        res->max_energy = fmax(res->max_energy, fabs(energy));
        if (2 * step <= steps) res->max_phi_first_half = fmax(res->max_phi_first_half, phi);
        else res->max_phi_second_half = fmax(res->max_phi_second_half, phi);
        window = fmax(window, phi);
        if (step % SAMPLE_EVERY == 0) {
            samples[step / SAMPLE_EVERY] = window;
            window = 0.0;
        }
        if (step == steps) {
            res->final_phi = phi;
            res->final_energy = energy;
            break;
        }
        if (!how->partition) {
            ok = rk4_full(mbs, t, y, dt);
            if (ok && how->project) {
                cdyn_status st = cdyn_mbs_project(mbs, t + dt, y);
                if (st != CDYN_OK) ok = fail(mbs, "cdyn_mbs_project", st);
            }
            continue;
        }
        /* partitioned: integrate z, then one more evaluation at the accepted
         * (t + dt, z) (it updates the partition event), the consistent full
         * state there, and repartition there if needed */
        double zdot[2 * (NQ - NC)];
        ok = rk4_partitioned(mbs, t, z, dt);
        if (ok) {
            cdyn_status st = cdyn_mbs_partition_rhs(mbs, t + dt, z, zdot);
            if (st == CDYN_OK) st = cdyn_mbs_partition_state(mbs, t + dt, z, y);
            if (st != CDYN_OK) ok = fail(mbs, "cdyn_mbs_partition_rhs/state", st);
        }
        if (ok && cdyn_mbs_partition_event(mbs)) {
            ++res->events;
            ok = repartition(mbs, t + dt, y, z);
        }
    }
    cdyn_mbs_free(mbs);
    return ok;
}

/* ---- the small-angle period --------------------------------------------- */

/* Zero of the cubic Hermite interpolant of x over [t0, t0 + h] with the end
 * values (x0, v0), (x1, v1); x0 and x1 of opposite signs. */
static double hermite_zero(double t0, double h, double x0, double v0, double x1, double v1)
{
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 60; ++it) {
        double s = 0.5 * (lo + hi), s2 = s * s, s3 = s2 * s;
        double value = (2 * s3 - 3 * s2 + 1) * x0 + (s3 - 2 * s2 + s) * h * v0 +
                       (-2 * s3 + 3 * s2) * x1 + (s3 - s2) * h * v1;
        if ((value > 0.0) == (x0 > 0.0)) lo = s;
        else hi = s;
    }
    return t0 + 0.5 * (lo + hi) * h;
}

/* Mean period from the zero crossings of x over t_end (projected KKT). */
static int measure_period(pendulum *p, double theta0, double dt, double t_end, double *period,
                          int *crossings)
{
    static const method how = {"period", "", CDYN_MBS_LAGRANGE, 0.0, 0.0, 0.0, 1, 0};
    cdyn_mbs *mbs = make_model(p, &how);
    if (!mbs) return 0;
    double y[NY] = {p->length * sin(theta0), -p->length * cos(theta0), 0.0, 0.0};
    double first = 0.0, last = 0.0;
    int count = 0, ok = 1;
    const int steps = (int)lround(t_end / dt);
    for (int step = 0; ok && step < steps; ++step) {
        double t = step * dt, x0 = y[0], v0 = y[2];
        ok = rk4_full(mbs, t, y, dt);
        if (ok) {
            cdyn_status st = cdyn_mbs_project(mbs, t + dt, y);
            if (st != CDYN_OK) ok = fail(mbs, "cdyn_mbs_project", st);
        }
        if (ok && (x0 > 0.0) != (y[0] > 0.0)) {
            last = hermite_zero(t, dt, x0, v0, y[0], y[2]);
            if (count++ == 0) first = last;
        }
    }
    cdyn_mbs_free(mbs);
    if (!ok) return 0;
    *crossings = count;
    *period = count > 1 ? 2.0 * (last - first) / (count - 1) : 0.0;
    return count > 1;
}

/* Exact period 2 pi sqrt(l/g) / AGM(1, cos(theta0 / 2)). */
static double exact_period(const pendulum *p, double theta0)
{
    double a = 1.0, b = cos(0.5 * theta0);
    for (int it = 0; it < 8; ++it) {
        double mean = 0.5 * (a + b);
        b = sqrt(a * b);
        a = mean;
    }
    return 2.0 * PI * sqrt(p->length / p->gravity) / a;
}

/* The plot: log10 of the largest |Phi| per 0.1 s against t, one line per method. */
static void plot(const char *out_dir, const char *csv_path)
{
    char cmd[4096];
    int len = snprintf(cmd, sizeof cmd,
                       "gnuplot -e \"set terminal pngcairo size 960,600; set output '%s/pendulum_drift.png';"
                       " set datafile separator ','; set key outside right; set grid;"
                       " set xlabel 't [s]'; set ylabel 'log_{10} |{/Symbol F}| [m^2], largest per 0.1 s';"
                       " set yrange [-17:0]; f(v) = v > 1e-17 ? log10(v) : -17;"
                       " set title 'Cartesian pendulum, theta0 = 1.2 rad, RK4 dt = 0.01 s';"
                       " plot",
                       out_dir);
    static const char *const color[METHODS] = {"#9400d3", "#009e73", "#56b4e9",
                                               "#e69f00", "#d62728", "#0050a0"};
    for (int k = 0; k < METHODS && len > 0 && (size_t)len < sizeof cmd; ++k)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len,
                        "%s '%s' u 1:(f(column(%d))) w l lw 1.5 lc rgb '%s' t '%s'", k ? "," : "",
                        k ? "" : csv_path, k + 2, color[k], METHOD_LIST[k].name);
    if (len > 0 && (size_t)len + 2 < sizeof cmd) {
        snprintf(cmd + len, sizeof cmd - (size_t)len, "\"");
        if (system(cmd) == 0) printf("figure: %s/pendulum_drift.png\n", out_dir);
    }
}

static int check(int ok, const char *what)
{
    if (!ok) fprintf(stderr, "pendulum_drift: check failed: %s\n", what);
    return ok;
}

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : ".";
    pendulum p = {1.0, 1.0, 9.81};
    const double theta0 = 1.2, t_end = 100.0, dt = t_end / STEPS;
    static double phi_samples[METHODS + 1][SAMPLES];
    run_result res[METHODS + 1];

    printf("Cartesian pendulum: m = %.1f kg, l = %.1f m, g = %.2f m/s^2, theta0 = %.2f rad, "
           "RK4 dt = %.0e s, %.0f s (%d steps)\n",
           p.mass, p.length, p.gravity, theta0, dt, t_end, STEPS);
    for (int k = 0; k < METHODS; ++k)
        if (!run_method(&p, &METHOD_LIST[k], theta0, dt, &res[k], phi_samples[k]))
            return EXIT_FAILURE;
    /* generalized Baumgarte with k = 5: with one constraint, Baumgarte a = b = 5 */
    const method critical5 = {"generalized, k = 5", "", CDYN_MBS_LAGRANGE, 0.0, 5.0, 0.0, 0, 0};
    if (!run_method(&p, &critical5, theta0, dt, &res[METHODS], phi_samples[METHODS]))
        return EXIT_FAILURE;

    printf("\n%-22s %10s %10s %10s %11s %11s %8s\n", "method", "max|Phi|", "final|Phi|",
           "max|Phi'|", "max|dE|/E0", "final dE/E0", "repart.");
    printf("%-22s %10s %10s %10s %11s %11s %8s\n", "", "[m^2]", "[m^2]", "[m^2/s]", "", "", "");
    for (int k = 0; k < METHODS; ++k) {
        const run_result *r = &res[k];
        char repart[16] = "-";
        if (METHOD_LIST[k].partition) snprintf(repart, sizeof repart, "%d", r->events);
        printf("%-22s %10.2e %10.2e %10.2e %11.2e %11.2e %8s\n", METHOD_LIST[k].name, r->max_phi,
               r->final_phi, r->max_phi_dot, r->max_energy, r->final_energy, repart);
    }

    const run_result *kkt = &res[0], *baum = &res[1], *gen = &res[2], *pen = &res[3];
    const run_result *proj = &res[4], *part = &res[PARTITIONED], *gen5 = &res[METHODS];
    const method *pm = &METHOD_LIST[3];
    double e0 = p.mass * p.gravity * p.length * (1.0 - cos(theta0));
    double bias = 2.0 * p.gravity * p.length * (3.0 - 2.0 * cos(theta0)) /
                  ((1.0 + 4.0 * pm->penalty * p.length * p.length / p.mass) * pm->baumgarte *
                   pm->baumgarte);
    double same5 = fmax(fabs(gen5->max_phi - baum->max_phi) / baum->max_phi,
                        fabs(gen5->final_energy - baum->final_energy) / fabs(baum->final_energy));
    printf("\nE0 = m g l (1 - cos theta0) = %.6f J; dE/E0 is the relative energy error.\n", e0);
    printf("unstabilized drift: max |Phi| %.2e m^2 over the first 50 s, %.2e over the second "
           "(t^2 growth: ratio %.2f)\n",
           kkt->max_phi_first_half, kkt->max_phi_second_half,
           kkt->max_phi_second_half / kkt->max_phi_first_half);
    printf("Baumgarte a = b = 5: max |Phi| %.2e / %.2e (first / second 50 s), %.0f times below "
           "the unstabilized drift\n",
           baum->max_phi_first_half, baum->max_phi_second_half, kkt->max_phi / baum->max_phi);
    printf("generalized k = 20:  max |Phi| %.2e / %.2e (first / second 50 s), %.0f times below "
           "the unstabilized drift\n",
           gen->max_phi_first_half, gen->max_phi_second_half, kkt->max_phi / gen->max_phi);
    printf("generalized k = 5:   max |Phi| %.6e, final dE/E0 %.6e (Baumgarte a = b = 5: %.6e, "
           "%.6e; relative difference %.1e)\n",
           gen5->max_phi, gen5->final_energy, baum->max_phi, baum->final_energy, same5);
    printf("modified Lagrange, alpha_c = %.0e kg/m^2, a = b = %.0f: max |Phi| %.2e m^2, bias "
           "estimate 2 g l (3 - 2 cos theta0) / ((1 + 4 alpha l^2/m) b^2) = %.2e\n",
           pm->penalty, pm->baumgarte, pen->max_phi, bias);
    printf("partitioning: %d repartitions on cdyn_mbs_partition_event, limit %.1f\n",
           part->events, PARTITION_LIMIT);

    /* period at a small amplitude */
    const double theta_small = 0.05, t_period_run = 21.0, period_tol = 1e-7;
    double period = 0.0;
    int crossings = 0;
    if (!measure_period(&p, theta_small, dt, t_period_run, &period, &crossings)) {
        fprintf(stderr, "pendulum_drift: the period run found no two zero crossings\n");
        return EXIT_FAILURE;
    }
    double t0 = 2.0 * PI * sqrt(p.length / p.gravity);
    double t_series = t0 * (1.0 + theta_small * theta_small / 16.0);
    double t_exact = exact_period(&p, theta_small);
    double period_diff = fabs(period - t_series) / t_series;
    printf("\nperiod at theta0 = %.2f rad (%d zero crossings of x in %.0f s, KKT + projection):\n",
           theta_small, crossings, t_period_run);
    printf("  measured                                 %.10f s\n", period);
    printf("  2 pi sqrt(l/g) (1 + theta0^2/16)         %.10f s  relative difference %.2e "
           "(tolerance %.0e)\n",
           t_series, period_diff, period_tol);
    printf("  2 pi sqrt(l/g)                           %.10f s  relative difference %.2e\n", t0,
           fabs(period - t0) / t0);
    printf("  2 pi sqrt(l/g) / AGM(1, cos(theta0/2))   %.10f s  relative difference %.2e "
           "(exact)\n",
           t_exact, fabs(period - t_exact) / t_exact);

    /* CSV */
    char path[1024];
    snprintf(path, sizeof path, "%s/pendulum_drift.csv", out_dir);
    FILE *csv = fopen(path, "w");
    if (csv) {
        fprintf(csv, "t_s");
        for (int k = 0; k < METHODS; ++k) fprintf(csv, ",max_abs_phi_%s", METHOD_LIST[k].column);
        fprintf(csv, "\n");
        for (int s = 0; s < SAMPLES; ++s) {
            fprintf(csv, "%.1f", s * SAMPLE_EVERY * dt);
            for (int k = 0; k < METHODS; ++k) fprintf(csv, ",%.3e", phi_samples[k][s]);
            fprintf(csv, "\n");
        }
        fclose(csv);
        printf("\nCSV: %s\n", path);
    }

    int pass = 1;
    pass &= check(proj->max_phi <= 1e-10 && part->max_phi <= 1e-10,
                  "projection and partitioning keep |Phi| <= 1e-10 m^2");
    pass &= check(proj->max_energy <= 1e-5 && part->max_energy <= 1e-5,
                  "projection and partitioning keep the energy error below 1e-5");
    pass &= check(part->events >= 1, "the partition switched");
    pass &= check(kkt->max_phi_second_half > 2.0 * kkt->max_phi_first_half,
                  "the unstabilized drift grows");
    for (int k = 1; k <= 2; ++k)
        pass &= check(res[k].max_phi <= 1e-2 * kkt->max_phi &&
                          res[k].max_phi_second_half <= 2.0 * res[k].max_phi_first_half,
                      k == 1 ? "Baumgarte stays bounded, 100 times below the unstabilized drift"
                             : "generalized Baumgarte stays bounded, 100 times below the "
                               "unstabilized drift");
    pass &= check(same5 <= 1e-9, "generalized k = 5 reproduces Baumgarte a = b = 5");
    pass &= check(pen->max_phi >= 0.5 * bias && pen->max_phi <= 2.0 * bias,
                  "the penalty bias is within a factor 2 of its estimate");
    pass &= check(period_diff <= period_tol, "the period agrees with 2 pi sqrt(l/g) (1 + theta0^2/16)");

    if (pass && csv && system("command -v gnuplot > /dev/null 2>&1") == 0) plot(out_dir, path);
    if (!pass) {
        fprintf(stderr, "pendulum_drift: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
