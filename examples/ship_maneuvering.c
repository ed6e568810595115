/*
 * ship_maneuvering.c - a turning circle of a container ship in 4 degrees of
 * freedom (surge, sway, roll, yaw; heave and pitch held): THEORY T5 with the
 * CDYN_RIGID_MANEUVER4 preset.
 *
 * Frames (marine convention, NED): lab x north, y east, z down, gravity +z;
 * body x forward, y starboard, z down, attached at the centre of gravity
 * (P = C, r_PC = 0). MANEUVER4: q = (x, y, phi, psi), z = 0, theta = 0,
 * R = Rz(psi) Rx(phi). Body velocities nu_b = (u, v, w) = R^T v_C and
 * (p, q, r) = R^T omega; with theta = 0, p = phi', q = psi' sin(phi),
 * r = psi' cos(phi). A positive rudder angle turns the ship to starboard
 * (psi' > 0); roll phi > 0 is starboard down.
 *
 * Ship: the Son & Nomoto container ship (L = 175 m, U0 = 7 m/s, GM = 0.3 m;
 * K. Son, K. Nomoto, "On the coupled motion of steering and rolling of a
 * high speed container ship", Naval Architecture and Ocean Engineering 20
 * (1982) 73-83, from J. Soc. Nav. Arch. Japan 150, 1981), in its linear
 * steering-roll form: T. I. Fossen, Handbook of Marine Craft Hydrodynamics
 * and Motion Control, 2nd ed., Wiley 2021, App. D, with the numbers of the
 * book's MSS toolbox (Lcontainer.m; rigid-body values from container.m).
 * In the prime system (forces over rho/2 L^2 U^2, moments over
 * rho/2 L^3 U^2, masses over rho/2 L^3, inertias over rho/2 L^5, v' = v/U,
 * r' = r L/U), for nu = (v, r, p), eta = (y, psi, phi):
 *
 *   T M' T^-1 nu' + (U/L) T N' T^-1 nu + (U/L)^2 T G' T^-1 eta = (U^2/L) T b' delta,
 *   T = diag(1, 1/L, 1/L),
 *
 *   M' = [ 0.01497    0.0003525 -0.0002205 ]   N' = [  0.012035  0.00522    0         ]
 *        [ 0.0003525  0.000875   0         ]        [  0.0038436 0.00243   -0.000213  ]
 *        [-0.0002205  0          0.0000210 ]        [ -0.000314  0.0000692  0.0000075 ]
 *
 *   G' (phi column) = (0.0000704, 0.0001468, 0.0004966),
 *   b' = (-0.002578, 0.00126, 0.0000855),
 *
 * linearized at U0 about the centre of gravity (x_G = 0) with the rudder and
 * propeller included (G'_33 = W' GM' - K_phi', W' = m' g L / U^2).
 * Rigid-body values of the same ship: m' = 0.00792, I_x' = 0.0000176,
 * I_z' = 0.000456; surge added mass m_x' = 0.000238.
 *
 * In dimensional form (D = diag(1, L, L)): M = rho/2 L^3 D M' D,
 * N = rho/2 L^2 U0 D N' D, G = rho/2 L U0^2 D G' D, b = rho/2 L^2 U0^2 D b'.
 * These matrices hold rigid-body terms that cdyn computes itself from the
 * body (T5.2), so the loads callback keeps only the rest:
 *   - M minus diag(m, I_z, I_x): the added mass M_A;
 *   - N minus the centripetal term m U0 (sway row, r column), which cdyn
 *     gives exactly as m u r in the body-y component of m a_C;
 *   - G(roll, phi) minus m g GM: the metacentric restoring moment comes from
 *     gravity m g e_z at C and buoyancy -m g e_z acting through the
 *     metacentre M, GM above C on the body z axis (moment about C:
 *     (R (0, 0, -GM)) x (-m g e_z), i.e. -m g GM sin(phi) about the heading).
 * The hydrodynamic force (X, Y, 0) and moment (K, 0, N) are formed in the
 * body frame and rotated to the lab frame (F_i is lab frame, moment about C):
 *   (Y, N, K) = -N_h nu - G_h phi + b delta - M_A nu_b',
 * nu_b' = d/dt(R^T v_C), d/dt(R^T omega) the body-frame accelerations.
 *
 * Surge. The linear model holds u = U0. Here surge is free, so a speed
 * governor X = -k_u (u - U0) - m_x u', k_u = (m + m_x) / (1 s), stands in
 * for the propeller's rpm control (thrust minus resistance).
 *
 * Added mass. A loads callback cannot see q''; -M_A nu_b' makes F_i affine
 * in q'', F_i = F_0 + B q''. Because q'' is affine in F_i too, the callback
 * solves the coupling exactly: with a second cdyn_rigid (same body), g0 =
 * q''(F_0), g_j = q''(F_0 + B e_j) - g0, then (I - [g_1..g_4]) q'' = g0 and
 * F_i = F_0 + B q''. (The total mass M'_11 M'_33 > M'_13^2 keeps this
 * regular, although M_A alone is not positive definite in sway-roll.)
 *
 * Rudder: 0 -> 5 degrees at the model's rate limit 5 deg/s, from t = 0, on a
 * straight course at U0.
 *
 * Steady turn by hand (the check). In a steady turn psi' = W, phi, u, v are
 * constant and p = 0, so nu_b' = 0 and only the steady parts remain.
 * (1) Linear theory, the textbook estimate: N nu + G eta = b delta with
 *     nu = (v, r, 0), three equations for (v, r, phi). Solved below.
 * (2) The same balance for the constrained rigid body, exactly. The lab
 *     acceleration of C is W e_z x v_C; in the body, m (omega_b x v_b) =
 *     m (-W v_h, u r, -u W sin(phi)) (v_h: lateral speed). The heave
 *     constraint force F e_z has body components F (0, sin phi, cos phi); the
 *     body-z balance gives F = -m u W tan(phi) (the heave load reported), and
 *     the body-y balance m u r = Y_h + F sin(phi) then Y_h = m u r / cos^2(phi).
 *     The moment balance about C, with I_y = I_z (assumed; the source gives
 *     no pitch inertia) so that omega_b x I omega_b = 0 at p = 0, and the
 *     constraint moment along Rz(psi) e_y = body (0, cos phi, -sin phi):
 *     pitch: M_p cos(phi) = 0, so the pitch constraint moment is 0; yaw:
 *     N_h = 0; roll: K_h = m g GM sin(phi). Hence, with u measured,
 *       N_h11 v + (N_h12 + m u / cos^2 phi) r + G_h1 phi = b_1 delta
 *       N_h21 v +  N_h22 r                    + G_h2 phi = b_2 delta
 *       N_h31 v +  N_h32 r + G_h3 phi + m g GM sin(phi)  = b_3 delta
 *     (N_h, G_h the hydrodynamic parts), solved by fixed-point iteration on
 *     phi. Its coefficients differ from those of (1) by terms of order
 *     phi^2 (1 %) and |u - U0| / U0 (0.1 %).
 * Tolerances. Against (2): 1e-4 relative. The simulation integrates the
 * same equations, so what remains is the transient (its slowest mode decays
 * at about 0.007 1/s: e^-14 of its start after 2000 s; the averages are
 * over the last 200 s) and the RK4 error (dt = 0.25 s against time
 * constants >= 1 s: below 1e-6). Against (1): (1) misses the factor
 * (u / U0) / cos^2(phi) on the centripetal coefficient m U0, a relative
 * change eps = phi^2 + |u - U0| / U0 to first order (about 1 %). The turn
 * rate is r = (...) / C with the sway-yaw stability determinant
 * C = N11 N22 - N12 N21 (N12 includes m U0), and this ship is only weakly
 * course-stable: d ln C / d ln(m U0) = -m U0 N21 / C = -S with S = 3.3.
 * So (1) is off by about S eps (4 to 5 %), and the check allows 2 S eps.
 *
 * Output: the tactical diameter (transfer at 180 degrees of heading change),
 * advance and transfer at 90 degrees, steady turning rate, diameter, heel,
 * drift speed and the constraint loads (heave force, pitch moment).
 *
 * usage: ship_maneuvering [output-dir]   (CSV, and a PNG if gnuplot is found)
 */
#include <cdyn/rigid.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NQ = 4, QX = 0, QY = 1, QPHI = 2, QPSI = 3 };
/* body degrees of freedom for the 6 x 6 added mass: (u, v, w, p, q, r) */
enum { DU = 0, DV = 1, DW = 2, DP = 3, DQ = 4, DR = 5 };
/* rows and columns of the linear model: (v, r, p), force rows (Y, N, K) */
enum { LV = 0, LR = 1, LP = 2 };

static const double PI = 3.14159265358979323846;

/* Son & Nomoto container ship, linear model (Fossen 2021, App. D) */
static const double M_PRIME[3][3] = {{0.01497, 0.0003525, -0.0002205},
                                     {0.0003525, 0.000875, 0.0},
                                     {-0.0002205, 0.0, 0.0000210}};
static const double N_PRIME[3][3] = {{0.012035, 0.00522, 0.0},
                                     {0.0038436, 0.00243, -0.000213},
                                     {-0.000314, 0.0000692, 0.0000075}};
static const double G_PRIME[3] = {0.0000704, 0.0001468, 0.0004966}; /* phi column */
static const double B_PRIME[3] = {-0.002578, 0.00126, 0.0000855};
static const double MASS_PRIME = 0.00792, IX_PRIME = 0.0000176, IZ_PRIME = 0.000456;
static const double MX_PRIME = 0.000238;

typedef struct {
    double length, speed, rho, g, gm;   /* L [m], U0 [m/s], [kg/m^3], [m/s^2], GM [m] */
    double mass, inertia[9];            /* about C, body frame */
    double added[36];                   /* M_A, body frame (u, v, w, p, q, r), about C */
    double damping[3][3];               /* N_h: rows (Y, N, K), columns (v, r, p) */
    double heel_stiffness[3];           /* G_h: (Y, N, K) per rad of phi */
    double rudder[3];                   /* b: (Y, N, K) per rad of delta */
    double speed_gain;                  /* k_u [N s/m] */
    double delta_max, delta_rate;       /* [rad], [rad/s] */
    cdyn_rigid_preset_params preset;    /* z0 = theta0 = 0 */
    cdyn_rigid *helper;                 /* same body: the added-mass solve */
} ship;

static ship make_ship(void)
{
    ship s;
    memset(&s, 0, sizeof s);
    s.length = 175.0;
    s.speed = 7.0;
    s.rho = 1025.0;
    s.g = 9.81;
    s.gm = 0.3;
    const double L = s.length, U = s.speed, h = 0.5 * s.rho;
    const double scale[3] = {1.0, L, L}; /* D = diag(1, L, L) */
    const int dof[3] = {DV, DR, DP};
    s.mass = MASS_PRIME * h * pow(L, 3);
    const double ix = IX_PRIME * h * pow(L, 5), iz = IZ_PRIME * h * pow(L, 5);
    s.inertia[0] = ix;
    s.inertia[4] = iz; /* I_y = I_z, assumed */
    s.inertia[8] = iz;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            s.added[dof[i] + 6 * dof[j]] = h * pow(L, 3) * scale[i] * M_PRIME[i][j] * scale[j];
            s.damping[i][j] = h * L * L * U * scale[i] * N_PRIME[i][j] * scale[j];
        }
        s.heel_stiffness[i] = h * L * U * U * scale[i] * G_PRIME[i] * L;
        s.rudder[i] = h * L * L * U * U * scale[i] * B_PRIME[i];
    }
    s.added[DV + 6 * DV] -= s.mass; /* the rigid-body parts that cdyn supplies */
    s.added[DR + 6 * DR] -= iz;
    s.added[DP + 6 * DP] -= ix;
    s.added[DU + 6 * DU] = MX_PRIME * h * pow(L, 3);
    s.damping[LV][LR] -= s.mass * U;
    s.heel_stiffness[LP] -= s.mass * s.g * s.gm;
    s.speed_gain = (s.mass + s.added[DU + 6 * DU]) / 1.0;
    s.delta_max = 5.0 * PI / 180.0;
    s.delta_rate = 5.0 * PI / 180.0;
    return s;
}

static double rudder_angle(const ship *s, double t)
{
    return t <= 0.0 ? 0.0 : fmin(s->delta_max, s->delta_rate * t);
}

/* ---- small vector helpers --------------------------------------------- */

static void cross(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* y = R x (transpose = 0) or R^T x (transpose = 1), R 3 x 3 column-major */
static void rotate(const double *R, int transpose, const double *x, double *y)
{
    for (int i = 0; i < 3; ++i) {
        y[i] = 0.0;
        for (int j = 0; j < 3; ++j) y[i] += (transpose ? R[j + 3 * i] : R[i + 3 * j]) * x[j];
    }
}

/* body 6-vector (force; moment) -> lab 6-vector */
static void body_to_lab(const double *R, const double *body, double *lab)
{
    rotate(R, 0, body, lab);
    rotate(R, 0, body + 3, lab + 3);
}

/* Solve A x = b (n x n, row-major, overwritten) by Gaussian elimination with
 * partial pivoting; returns 0 if A is singular. */
static int solve_dense(int n, double *A, double *b)
{
    for (int c = 0; c < n; ++c) {
        int p = c;
        for (int i = c + 1; i < n; ++i)
            if (fabs(A[i * n + c]) > fabs(A[p * n + c])) p = i;
        if (A[p * n + c] == 0.0) return 0;
        if (p != c) {
            for (int j = 0; j < n; ++j) {
                double tmp = A[c * n + j];
                A[c * n + j] = A[p * n + j];
                A[p * n + j] = tmp;
            }
            double tmp = b[c];
            b[c] = b[p];
            b[p] = tmp;
        }
        for (int i = c + 1; i < n; ++i) {
            double l = A[i * n + c] / A[c * n + c];
            for (int j = c; j < n; ++j) A[i * n + j] -= l * A[c * n + j];
            b[i] -= l * b[c];
        }
    }
    for (int i = n - 1; i >= 0; --i) {
        for (int j = i + 1; j < n; ++j) b[i] -= A[i * n + j] * b[j];
        b[i] /= A[i * n + i];
    }
    return 1;
}

/* ---- the model callbacks ----------------------------------------------- */

/* Body velocities nu_b = (R^T v_C; R^T omega) at (q', k); P = C. */
static void body_velocities(const cdyn_rigid_kinematics *k, const double *qdot, double *nu)
{
    double v[3], w[3];
    for (int i = 0; i < 3; ++i) {
        v[i] = k->v0[i];
        w[i] = k->w0[i];
        for (int c = 0; c < NQ; ++c) {
            v[i] += k->J_T[i + 3 * c] * qdot[c];
            w[i] += k->J_R[i + 3 * c] * qdot[c];
        }
    }
    rotate(k->rotation, 1, v, nu);
    rotate(k->rotation, 1, w, nu + 3);
}

/* Lab load of the added mass for the body acceleration acc (6): -M_A acc. */
static void added_mass_load(const ship *s, const double *R, const double *acc, double *lab)
{
    double body[6];
    for (int i = 0; i < 6; ++i) {
        body[i] = 0.0;
        for (int j = 0; j < 6; ++j) body[i] -= s->added[i + 6 * j] * acc[j];
    }
    body_to_lab(R, body, lab);
}

/* F_i = hydrodynamic load (body frame, rotated), gravity and buoyancy, and
 * the added-mass load -M_A nu_b', solved together with q'' (see the header
 * comment). Returns 2 if the helper object fails, 3 if the solve does. */
static int loads(double t, const double *q, const double *qdot, const cdyn_rigid_kinematics *k,
                 double *F_i, void *user)
{
    const ship *s = user;
    const double *R = k->rotation;
    double nu[6];
    body_velocities(k, qdot, nu);
    const double lin[3] = {nu[DV], nu[DR], nu[DP]}, phi = q[QPHI];
    const double delta = rudder_angle(s, t);

    /* hydrodynamic load in the body frame (force; moment about C) */
    double body[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const int row[3] = {DV, DR, DP};
    body[DU] = -s->speed_gain * (nu[DU] - s->speed);
    for (int i = 0; i < 3; ++i) {
        double sum = -s->heel_stiffness[i] * phi + s->rudder[i] * delta;
        for (int j = 0; j < 3; ++j) sum -= s->damping[i][j] * lin[j];
        body[row[i]] = sum;
    }
    double F0[6];
    body_to_lab(R, body, F0);
    /* gravity m g e_z at C and buoyancy -m g e_z through the metacentre
     * cancel as forces; the buoyancy's moment about C remains:
     * (R (0, 0, -GM)) x (-m g e_z) */
    const double weight = s->mass * s->g, buoyancy[3] = {0.0, 0.0, -weight};
    double gm_body[3] = {0.0, 0.0, -s->gm}, gm_lab[3], moment[3];
    rotate(R, 0, gm_body, gm_lab);
    cross(gm_lab, buoyancy, moment);
    for (int i = 0; i < 3; ++i) F0[3 + i] += moment[i];

    /* added mass: body accelerations at q'' = 0 and per unit q''_j */
    double acc0[6], lab_acc[3], wxv[3], FA[6];
    for (int i = 0; i < 3; ++i) lab_acc[i] = k->L_T[i] + k->v0_dot[i];
    rotate(R, 1, lab_acc, acc0);
    cross(nu + 3, nu, wxv);
    for (int i = 0; i < 3; ++i) {
        acc0[i] -= wxv[i];
        lab_acc[i] = k->L_R[i] + k->w0_dot[i];
    }
    rotate(R, 1, lab_acc, acc0 + 3);
    added_mass_load(s, R, acc0, FA);
    for (int i = 0; i < 6; ++i) F0[i] += FA[i];
    double B[NQ][6];
    for (int j = 0; j < NQ; ++j) {
        double accj[6];
        rotate(R, 1, k->J_T + 3 * j, accj);
        rotate(R, 1, k->J_R + 3 * j, accj + 3);
        added_mass_load(s, R, accj, B[j]);
    }
    /* q'' = g0 + G q'': g0 = q''(F_0), G e_j = q''(F_0 + B e_j) - g0 */
    double g0[NQ], A[NQ * NQ], x[NQ];
    if (cdyn_rigid_accelerations(s->helper, k, qdot, F0, g0, NULL) != CDYN_OK) return 2;
    for (int j = 0; j < NQ; ++j) {
        double Fj[6], gj[NQ];
        for (int i = 0; i < 6; ++i) Fj[i] = F0[i] + B[j][i];
        if (cdyn_rigid_accelerations(s->helper, k, qdot, Fj, gj, NULL) != CDYN_OK) return 2;
        for (int i = 0; i < NQ; ++i) A[i * NQ + j] = (i == j ? 1.0 : 0.0) - (gj[i] - g0[i]);
    }
    memcpy(x, g0, sizeof x);
    if (!solve_dense(NQ, A, x)) return 3;
    for (int i = 0; i < 6; ++i) {
        F_i[i] = F0[i];
        for (int j = 0; j < NQ; ++j) F_i[i] += B[j][i] * x[j];
    }
    return 0;
}

/* ---- the caller's integrator: fixed-step RK4 ---------------------------- */

static int rhs(cdyn_rigid *rb, const ship *s, double t, const double *y, double *ydot)
{
    cdyn_status st = cdyn_rigid_rhs(rb, t, y, ydot);
    if (st == CDYN_OK) return 1;
    fprintf(stderr, "ship_maneuvering: cdyn_rigid_rhs at t = %.3f s: %s: %s\n", t,
            cdyn_status_string(st), cdyn_rigid_last_error(rb));
    if (st == CDYN_ERR_CALLBACK && cdyn_rigid_callback_code(rb) == 2)
        fprintf(stderr, "  (added-mass solve) %s\n", cdyn_rigid_last_error(s->helper));
    return 0;
}

/* One RK4 step from (t, y) with k1 = f(t, y) already evaluated. */
static int rk4_step(cdyn_rigid *rb, const ship *s, double t, double *y, double dt,
                    const double *k1)
{
    double k2[2 * NQ], k3[2 * NQ], k4[2 * NQ], stage[2 * NQ];
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + 0.5 * dt * k1[i];
    if (!rhs(rb, s, t + 0.5 * dt, stage, k2)) return 0;
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + 0.5 * dt * k2[i];
    if (!rhs(rb, s, t + 0.5 * dt, stage, k3)) return 0;
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + dt * k3[i];
    if (!rhs(rb, s, t + dt, stage, k4)) return 0;
    for (int i = 0; i < 2 * NQ; ++i)
        y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* ---- steady turn by hand ------------------------------------------------ */

/* Solves the 3 x 3 steady balance for (v, r, phi). exact = 0: linear theory
 * (1) with the full N, G (rigid parts at U0); exact = 1: the constrained
 * rigid body (2) at surge speed u. */
static int steady_turn(const ship *s, int exact, double u, double *v, double *r, double *phi)
{
    const double delta = s->delta_max, wgm = s->mass * s->g * s->gm;
    double heel = 0.0;
    for (int iter = 0; iter < (exact ? 50 : 1); ++iter) {
        double c2 = cos(heel) * cos(heel), sinc = heel != 0.0 ? sin(heel) / heel : 1.0;
        double A[9], b[3];
        for (int i = 0; i < 3; ++i) {
            A[3 * i + 0] = s->damping[i][LV];
            A[3 * i + 1] = s->damping[i][LR];
            A[3 * i + 2] = s->heel_stiffness[i];
            b[i] = s->rudder[i] * delta;
        }
        A[3 * 0 + 1] += exact ? s->mass * u / c2 : s->mass * s->speed;
        A[3 * 2 + 2] += exact ? wgm * sinc : wgm;
        if (!solve_dense(3, A, b)) return 0;
        *v = b[0];
        *r = b[1];
        *phi = b[2];
        if (exact && fabs(b[2] - heel) <= 1e-15 * fabs(b[2])) break;
        heel = b[2];
    }
    return 1;
}

/* ---- the run ------------------------------------------------------------- */

/* What one instant gives: track, body velocities, constraint loads. */
typedef struct {
    double t, x, y, psi, phi, turn_rate; /* turn_rate = psi' */
    double nu[6];                         /* body velocities */
    double heave, pitch;                  /* F_q: lab z force [N], moment about Rz(psi) e_y [N m] */
    double work;                          /* |J^T F_q| over m g (x, y) and m g L (phi, psi) */
} sample;

static int take_sample(const ship *s, double t, const double *y, const double *F_q, sample *out)
{
    cdyn_rigid_kinematics k;
    if (cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &s->preset, t, y, y + NQ, &k) != CDYN_OK)
        return 0;
    out->t = t;
    out->x = y[QX];
    out->y = y[QY];
    out->phi = y[QPHI];
    out->psi = y[QPSI];
    out->turn_rate = y[NQ + QPSI];
    body_velocities(&k, y + NQ, out->nu);
    out->heave = F_q[2];
    out->pitch = -sin(out->psi) * F_q[3] + cos(out->psi) * F_q[4];
    /* J^T F_q = 0 (T5.3; P = C so J = [J_T; J_R]), each column against the
     * scale of the loads it balances: the weight m g for x and y, m g L for
     * phi and psi */
    const double weight = s->mass * s->g;
    out->work = 0.0;
    for (int c = 0; c < NQ; ++c) {
        double sum = 0.0;
        for (int i = 0; i < 3; ++i)
            sum += k.J_T[i + 3 * c] * F_q[i] + k.J_R[i + 3 * c] * F_q[3 + i];
        out->work = fmax(out->work, fabs(sum) / (c < QPHI ? weight : weight * s->length));
    }
    return 1;
}

static int all_finite(int n, const double *x)
{
    for (int i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* where psi first reaches target (linear interpolation): x, y */
static void crossing(const sample *a, const sample *b, double target, double *x, double *y)
{
    if (isfinite(*x) || !(a->psi < target && b->psi >= target)) return;
    double w = (target - a->psi) / (b->psi - a->psi);
    *x = a->x + w * (b->x - a->x);
    *y = a->y + w * (b->y - a->y);
}

static double rel_diff(double a, double b) { return fabs(a - b) / fabs(b); }

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : ".";
    ship s = make_ship();
    const double dt = 0.25, t_end = 2000.0, window = 200.0; /* steady: the last 200 s */
    const int steps = (int)lround(t_end / dt), per_row = (int)lround(1.0 / dt);
    const int per_print = (int)lround(100.0 / dt), window_start = steps - (int)lround(window / dt);

    cdyn_status st;
    cdyn_rigid *rb = cdyn_rigid_create(NQ, &st);
    s.helper = rb ? cdyn_rigid_create(NQ, &st) : NULL;
    if (!rb || !s.helper) {
        fprintf(stderr, "ship_maneuvering: cdyn_rigid_create: %s\n", cdyn_status_string(st));
        cdyn_rigid_free(rb);
        return EXIT_FAILURE;
    }
    st = cdyn_rigid_set_body(rb, s.mass, s.inertia, 3, NULL);
    if (st == CDYN_OK) st = cdyn_rigid_set_body(s.helper, s.mass, s.inertia, 3, NULL);
    if (st == CDYN_OK) /* the preset's kinematics, evaluated by cdyn */
        st = cdyn_rigid_set_preset(rb, CDYN_RIGID_MANEUVER4, &s.preset, loads, &s);
    if (st != CDYN_OK) {
        fprintf(stderr, "ship_maneuvering: setup: %s: %s\n", cdyn_status_string(st),
                cdyn_rigid_last_error(rb));
        cdyn_rigid_free(s.helper);
        cdyn_rigid_free(rb);
        return EXIT_FAILURE;
    }

    printf("Son & Nomoto container ship in 4 DOF (surge, sway, roll, yaw; heave and pitch "
           "held): CDYN_RIGID_MANEUVER4\n");
    printf("L = %.0f m, U0 = %.1f m/s, m = %.4e kg, I_x = %.4e kg m^2, I_y = I_z = %.4e kg m^2, "
           "GM = %.2f m\n", s.length, s.speed, s.mass, s.inertia[0], s.inertia[8], s.gm);
    printf("added mass: surge %.3e kg, sway %.3e kg, yaw %.3e kg m^2, roll %.3e kg m^2; "
           "rudder 0 -> %.0f deg at %.0f deg/s\n", s.added[DU + 6 * DU], s.added[DV + 6 * DV],
           s.added[DR + 6 * DR], s.added[DP + 6 * DP], s.delta_max * 180.0 / PI,
           s.delta_rate * 180.0 / PI);

    char path[1024];
    snprintf(path, sizeof path, "%s/ship_maneuvering.csv", out_dir);
    FILE *csv = fopen(path, "w");
    if (csv)
        fprintf(csv, "t_s,x_m,y_m,psi_deg,phi_deg,u_mps,v_mps,r_degps,delta_deg,"
                     "heave_force_kN,pitch_moment_kNm\n");

    double y[2 * NQ] = {0.0, 0.0, 0.0, 0.0, s.speed, 0.0, 0.0, 0.0};
    double advance = NAN, transfer = NAN, x180 = NAN, tactical = NAN;
    double mean_u = 0, mean_v = 0, mean_r = 0, mean_w = 0, mean_phi = 0, mean_speed = 0;
    double mean_heave = 0, mean_pitch = 0, phi_lo = INFINITY, phi_hi = -INFINITY;
    double r_lo = INFINITY, r_hi = -INFINITY, pitch_peak = 0.0, pitch_peak_t = 0.0;
    double worst_work = 0.0, inward = 0.0, inward_t = 0.0; /* largest heel to starboard */
    int n_window = 0, ok = 1;
    sample prev = {0};
    printf("\n%6s %9s %9s %9s %8s %7s %7s %8s %10s %11s\n", "t [s]", "x [m]", "y [m]",
           "psi [deg]", "phi[deg]", "u [m/s]", "v [m/s]", "r[deg/s]", "heave [kN]",
           "pitch [kNm]");
    for (int step = 0; step <= steps; ++step) {
        double t = step * dt, k1[2 * NQ], F_q[6];
        sample now;
        if (!(ok = rhs(rb, &s, t, y, k1))) break; /* the state at t */
        cdyn_rigid_last_constraint_loads(rb, F_q);
        if (!(ok = all_finite(2 * NQ, y) && all_finite(6, F_q) && take_sample(&s, t, y, F_q, &now)))
            break;
        if (step > 0) {
            crossing(&prev, &now, 0.5 * PI, &advance, &transfer);
            crossing(&prev, &now, PI, &x180, &tactical);
        }
        worst_work = fmax(worst_work, now.work);
        if (now.phi > inward) {
            inward = now.phi;
            inward_t = t;
        }
        if (fabs(now.pitch) > pitch_peak) {
            pitch_peak = fabs(now.pitch);
            pitch_peak_t = t;
        }
        if (step >= window_start) {
            ++n_window;
            mean_u += now.nu[DU];
            mean_v += now.nu[DV];
            mean_r += now.nu[DR];
            mean_w += now.turn_rate;
            mean_phi += now.phi;
            mean_speed += hypot(y[NQ + QX], y[NQ + QY]);
            mean_heave += now.heave;
            mean_pitch += now.pitch;
            phi_lo = fmin(phi_lo, now.phi);
            phi_hi = fmax(phi_hi, now.phi);
            r_lo = fmin(r_lo, now.nu[DR]);
            r_hi = fmax(r_hi, now.nu[DR]);
        }
        if (csv && step % per_row == 0)
            fprintf(csv, "%.1f,%.4f,%.4f,%.6f,%.6f,%.6f,%.6f,%.8f,%.4f,%.6f,%.6f\n", t, now.x,
                    now.y, now.psi * 180.0 / PI, now.phi * 180.0 / PI, now.nu[DU], now.nu[DV],
                    now.nu[DR] * 180.0 / PI, rudder_angle(&s, t) * 180.0 / PI, 1e-3 * now.heave,
                    1e-3 * now.pitch);
        if (step % per_print == 0)
            printf("%6.0f %9.1f %9.1f %9.2f %8.3f %7.4f %7.4f %8.4f %10.2f %11.2f\n", t, now.x,
                   now.y, now.psi * 180.0 / PI, now.phi * 180.0 / PI, now.nu[DU], now.nu[DV],
                   now.nu[DR] * 180.0 / PI, 1e-3 * now.heave, 1e-3 * now.pitch);
        prev = now;
        if (step < steps && !(ok = rk4_step(rb, &s, t, y, dt, k1))) break;
    }
    if (csv) fclose(csv);
    if (!ok || n_window == 0) {
        fprintf(stderr, "ship_maneuvering: the run failed or left finite values (t = %.1f s)\n",
                prev.t);
        cdyn_rigid_free(s.helper);
        cdyn_rigid_free(rb);
        return EXIT_FAILURE;
    }
    const double n = (double)n_window;
    mean_u /= n;
    mean_v /= n;
    mean_r /= n;
    mean_w /= n;
    mean_phi /= n;
    mean_speed /= n;
    mean_heave /= n;
    mean_pitch /= n;

    /* the hand estimates */
    double v_lin = NAN, r_lin = NAN, phi_lin = NAN, v_ex = NAN, r_ex = NAN, phi_ex = NAN;
    int hand_ok = steady_turn(&s, 0, s.speed, &v_lin, &r_lin, &phi_lin) &&
                  steady_turn(&s, 1, mean_u, &v_ex, &r_ex, &phi_ex);
    const double w_ex = r_ex / cos(phi_ex), heave_ex = -s.mass * mean_u * w_ex * tan(phi_ex);
    const double tol_exact = 1e-4;
    /* sensitivity S = m U0 N21 / C of the stability determinant (full N) */
    const double n12 = s.damping[LV][LR] + s.mass * s.speed, n21 = s.damping[LR][LV];
    const double stability = s.damping[LV][LV] * s.damping[LR][LR] - n12 * n21;
    const double sens = s.mass * s.speed * n21 / stability;
    const double eps = mean_phi * mean_phi + fabs(mean_u - s.speed) / s.speed;
    const double tol_linear = 2.0 * sens * eps;
    /* pitch moment: 0 in the steady turn; compare with the roll moment scale m g GM |phi| */
    const double pitch_scale = s.mass * s.g * s.gm * fabs(mean_phi);
    const double d2r = 180.0 / PI;

    printf("\nturning circle (rudder %.0f deg to starboard):\n", s.delta_max * d2r);
    printf("  advance %.1f m and transfer %.1f m at 90 deg; tactical diameter %.1f m "
           "(%.2f L) at 180 deg\n", advance, transfer, tactical, tactical / s.length);
    printf("  steady turning rate psi' = %.5f deg/s, diameter 2 V / psi' = %.1f m (%.2f L); "
           "V = %.4f m/s, u = %.4f m/s (governor: U0 %+.2e)\n", mean_w * d2r,
           2.0 * mean_speed / mean_w, 2.0 * mean_speed / mean_w / s.length, mean_speed, mean_u,
           mean_u - s.speed);
    printf("  steady heel phi = %.4f deg (outward), after an initial inward heel of %.3f deg "
           "at t = %.0f s; drift: body v = %.4f m/s (%.2f deg)\n", mean_phi * d2r,
           inward * d2r, inward_t, mean_v, atan2(-mean_v, mean_u) * d2r);
    printf("  residual oscillation over the last %.0f s: phi %.1e deg, r %.1e deg/s "
           "peak to peak\n", window, (phi_hi - phi_lo) * d2r, (r_hi - r_lo) * d2r);
    printf("constraint loads (cdyn_rigid_last_constraint_loads; NED, z down):\n");
    printf("  heave force %.3f kN steady, downward (hand: -m u psi' tan(phi) = %.3f kN)\n",
           1e-3 * mean_heave, 1e-3 * heave_ex);
    printf("  pitch moment %.2e kN m steady (hand: 0); largest %.2f kN m at t = %.0f s, "
           "while the heeled ship picks up yaw\n", 1e-3 * mean_pitch, 1e-3 * pitch_peak,
           pitch_peak_t);
    printf("  ideal constraints: largest |J^T F_q| over m g (x, y) or m g L (phi, psi) = "
           "%.1e\n", worst_work);
    printf("\nsteady turn by hand:\n");
    printf("  %-44s %12s %12s %12s\n", "", "r [deg/s]", "phi [deg]", "v [m/s]");
    printf("  %-44s %12.6f %12.6f %12.6f\n", "simulation (body r, heel, body v)", mean_r * d2r,
           mean_phi * d2r, mean_v);
    printf("  %-44s %12.6f %12.6f %12.6f\n", "constrained rigid body, exact balance (2)",
           r_ex * d2r, phi_ex * d2r, v_ex);
    printf("  %-44s %12.6f %12.6f %12.6f\n", "linear theory at U0 (1)", r_lin * d2r,
           phi_lin * d2r, v_lin);
    const double e_r = rel_diff(mean_r, r_ex), e_phi = rel_diff(mean_phi, phi_ex);
    const double e_v = rel_diff(mean_v, v_ex), e_heave = rel_diff(mean_heave, heave_ex);
    const double l_r = rel_diff(mean_r, r_lin), l_phi = rel_diff(mean_phi, phi_lin);
    printf("  against (2): r %.1e, phi %.1e, v %.1e, heave force %.1e (limit %.0e)\n", e_r,
           e_phi, e_v, e_heave, tol_exact);
    printf("  against (1): r %.1e, phi %.1e (limit 2 S eps = %.1e: eps = phi^2 + |u - U0| / U0 "
           "= %.2e, S = m U0 N21 / C = %.2f)\n", l_r, l_phi, tol_linear, eps, sens);
    printf("  steady pitch moment / (m g GM |phi|) = %.1e (limit %.0e)\n",
           fabs(mean_pitch) / pitch_scale, tol_exact);
    printf("CSV: %s\n", path);

    int pass = hand_ok && e_r <= tol_exact && e_phi <= tol_exact && e_v <= tol_exact &&
               e_heave <= tol_exact && l_r <= tol_linear && l_phi <= tol_linear &&
               fabs(mean_pitch) <= tol_exact * pitch_scale && worst_work <= 1e-12 &&
               isfinite(tactical);
    if (pass && csv && system("command -v gnuplot > /dev/null 2>&1") == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"set terminal pngcairo noenhanced size 1000,500; set output '%s/ship_maneuvering.png';"
                 " set datafile separator ','; set multiplot layout 1,2 title "
                 "'Son & Nomoto container ship, 5 deg rudder to starboard (cdyn, CDYN_RIGID_MANEUVER4)';"
                 " set size ratio -1; set grid; set key center center; set xtics 400; set xlabel 'y (east) [m]'; set ylabel 'x (north) [m]';"
                 " plot '%s' u 3:2 w l lw 2 t 'track of C', '' every 60 u 3:2 w p pt 7 ps 0.6 t 'every 60 s';"
                 " set size noratio; set xtics 300; set xlabel 't [s]'; set ylabel 'heel [deg]'; set y2label 'yaw rate r [deg/s]';"
                 " set ytics nomirror; set y2tics; set key bottom right;"
                 " plot '%s' u 1:5 w l lw 2 t 'heel phi', '' u 1:8 axes x1y2 w l lw 2 t 'yaw rate r';"
                 " unset multiplot\"",
                 out_dir, path, path);
        if (system(cmd) == 0) printf("figure: %s/ship_maneuvering.png\n", out_dir);
    }
    cdyn_rigid_free(s.helper);
    cdyn_rigid_free(rb);
    if (!pass) {
        fprintf(stderr, "ship_maneuvering: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    printf("checks: passed\n");
    return EXIT_SUCCESS;
}
