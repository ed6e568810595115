/*
 * pmm_carriage.c - a planar-motion-mechanism (PMM) pure-sway test: the
 * carriage prescribes the model's horizontal motion, the model is free in
 * heave and pitch about a centre of rotation P offset from its centre of
 * mass C (THEORY T5, the CDYN_RIGID_CARRIAGE preset), and the loads the
 * carriage exerts (the constraint loads F_q) are analysed as in a towing
 * tank: first harmonics of the sway force and the yaw moment against the
 * prescribed sway.
 *
 * Frames (NED, as in ship_maneuvering.c): lab x along the tank, y to
 * starboard, z down, gravity +z, z = 0 the calm water surface; body x
 * forward, y starboard, z down. CARRIAGE: q = (z, theta), P = (x_c(t),
 * y_c(t), z), R = Rz(psi_c(t)) Ry(theta) Rx(phi0); here x_c = U t (towing;
 * a uniform velocity changes none of the loads), y_c = A sin(w t),
 * psi_c = 0, phi0 = 0. theta > 0 is bow up.
 *
 * Model: the Son & Nomoto container ship of ship_maneuvering.c at scale
 * 1:43.75 (L = 4 m), in fresh water, at the Froude-scaled speed
 * U = 7 m/s / sqrt(43.75) = 1.058 m/s. P is at midship on the waterline, the
 * pivot of the PMM's heave posts; C is 1 % L aft of it (ballast) and
 * (KG - T) / 43.75 = 0.0363 m above it: r_PC = (-0.04, 0, -0.0363) m.
 * Mass and inertias from the prime values (m' = 0.00792, I_z' = 0.000456,
 * I_x' = 0.0000176; I_y = I_z assumed), scaled with rho/2 L^3 and rho/2 L^5.
 *
 * Loads (callback; lab frame, moments about C):
 *  - hydrodynamic sway force and yaw moment about P from the linear
 *    derivatives of the same ship (prime values, so scale-free:
 *    Y_vdot' = -(M'11 - m') = -0.00705, Y_v' = -N'11 = -0.012035,
 *    N_vdot' = -M'21 = -0.0003525, N_v' = -N'21 = -0.0038436):
 *      Y = Y_vdot v' + Y_v v,   N_P = N_vdot v' + N_v v,
 *    v, v' the body sway velocity and acceleration of P. In pure sway both
 *    are the carriage's (J_T has no y component), so unlike the ship's added
 *    mass these are explicit;
 *  - gravity m g e_z at C; the static buoyancy -m g e_z through the
 *    longitudinal metacentre, GM_L above C (pitch restoring -m g GM_L
 *    sin(theta), no net force);
 *  - the heave spring and damper at the centre of flotation F (x_F aft of P
 *    on the waterline), -(k_z zeta_F + c_z zeta_F') e_z, zeta_F the
 *    immersion of F, k_z = rho g A_wp;
 *  - pitch damping -c_theta theta' about the pitch axis;
 *  - the cross-flow sinkage force Z = rho/2 C_Z L B v^2 (down) at x_Z: the
 *    flow under the bottom lowers the pressure there. A port-starboard
 *    symmetric hull cannot feel the sign of v, so heave and pitch are
 *    driven at 0 and 2w only.
 * Assumed (not from the source): C_WP = 0.70, x_F = -0.02 L, GM_L = L,
 * damping 0.2 of critical in heave and in pitch, C_Z = 0.5, x_Z = 0.1 L.
 *
 * Carriage loads by hand. F_q = Mbar q'' + Nbar - F_i (T5.3); its force
 * is m a_C - f_i. The pitch rotation is about the lab y axis (psi_c = 0),
 * which leaves y components alone: a_C,y = y_c'' exactly, whatever theta
 * does, so the pitch coupling contributes nothing to the sway force:
 *   F_y = m y_c'' - Y = -(m - Y_vdot) A w^2 sin(w t) - Y_v A w cos(w t).
 * The yaw moment about P, n_q + r_PC x f_q (z component): the angular
 * momentum about C has no z part (omega = theta' e_y, I diagonal), so
 * N_P = m y_c'' (x_G cos(theta) + z_G sin(theta)) - N_P,hydro cos(theta)
 *     = -(m x_G - N_vdot) A w^2 sin(w t) - N_v A w cos(w t) + pitch coupling,
 * the pitch coupling m y_c'' (z_G sin(theta) + x_G (cos(theta) - 1)),
 * bounded by m A w^2 (|z_G| + |x_G| |theta|/2) max|theta|.
 * Two runs: A without the hydrodynamic sway force (F_y must be m y_c''
 * exactly: amplitude m A w^2, in phase with the acceleration, i.e. 180 deg
 * from the displacement), and B with it, where the PMM analysis recovers
 * Y_vdot = m + a_s / (A w^2), Y_v = -a_c / (A w) and N_vdot, N_v likewise
 * (a_s, a_c the sin and cos coefficients of the fitted first harmonic).
 *
 * Heave and pitch by hand: linear about z = theta = 0, with P as the
 * reference point (x_G, z_G = r_PC; note the parallel-axis term):
 *   M = [ m, -m x_G ; -m x_G, I_y + m (x_G^2 + z_G^2) ],
 *   K = [ k_z, -k_z x_F ; -k_z x_F, k_z x_F^2 + m g GM_L ],
 *   C = [ c_z, -c_z x_F ; -c_z x_F, c_z x_F^2 + c_theta ],
 * forced by Z (1, -x_Z) with Z = Zbar (1 + cos 2wt), Zbar = rho/4 C_Z L B
 * (A w)^2: the mean from K xbar = Zbar (1, -x_Z), the 2w harmonic from
 * (K - 4 w^2 M + 2 i w C) X = Zbar (1, -x_Z).
 *
 * Tolerances: the fits cover whole periods (the last 4 of 10, from
 * t = 47 s) of uniformly spaced samples, so they are exact for the
 * harmonics present, and the heave/pitch transient (decay rates above
 * 1 1/s) is below e^-40 by then. The sway force depends on the prescribed
 * motion only: exact to rounding (limit 1e-9). The yaw moment: the
 * pitch-coupling bound above (plus 1e-9). Heave and pitch: the linearization drops terms quadratic in the
 * motion, the moment arms turning with theta (relative theta^2) and the
 * inertia terms m r_PC (theta theta'', theta'^2) against the forcing Zbar:
 *   b = max|theta|^2 + 2 m |r_PC| (2w)^2 max|theta|^2 / Zbar,
 * and the check allows 10 b (about 6e-5 here). For scale, the hand
 * response without the parallel-axis term m |r_PC|^2 (the simplification
 * T5.3 warns about) is also printed: it is off by about 2e-4.
 *
 * usage: pmm_carriage [output-dir]   (CSV, and a PNG if gnuplot is found)
 */
#include <cdyn/rigid.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NQ = 2, QZ = 0, QTHETA = 1 };

static const double PI = 3.14159265358979323846;

typedef struct {
    double length, beam, rho, g, speed;   /* L, B [m], [kg/m^3], [m/s^2], U [m/s] */
    double amplitude, omega;              /* A [m], w [rad/s] */
    double mass, inertia[9], r_pc[3];     /* body about C; r_PC body frame [m] */
    double y_vdot, y_v, n_vdot, n_v;      /* sway derivatives about P (0 in run A) */
    double k_heave, c_heave, x_float;     /* heave spring [N/m], damper [N s/m], x_F [m] */
    double gm_long, c_pitch;              /* GM_L [m], pitch damper [N m s] */
    double c_sink, x_sink;                /* C_Z, x_Z [m] */
    cdyn_rigid_preset_params preset;
} pmm;

static int carriage(double t, double *pos, double *vel, double *acc, void *user)
{
    const pmm *p = user;
    const double s = sin(p->omega * t), c = cos(p->omega * t), A = p->amplitude;
    const double w = p->omega;
    pos[0] = p->speed * t;
    pos[1] = A * s;
    pos[2] = 0.0;
    vel[0] = p->speed;
    vel[1] = A * w * c;
    vel[2] = 0.0;
    acc[0] = 0.0;
    acc[1] = -A * w * w * s;
    acc[2] = 0.0;
    return 0;
}

static pmm make_pmm(int hydrodynamics)
{
    pmm p;
    memset(&p, 0, sizeof p);
    const double scale = 43.75;
    p.length = 175.0 / scale;
    p.beam = 25.4 / scale;
    p.rho = 1000.0;
    p.g = 9.81;
    p.speed = 7.0 / sqrt(scale);
    p.amplitude = 0.2;
    p.omega = 0.8;
    const double L = p.length, h = 0.5 * p.rho, U = p.speed;
    p.mass = 0.00792 * h * pow(L, 3);
    p.inertia[0] = 0.0000176 * h * pow(L, 5);
    p.inertia[4] = 0.000456 * h * pow(L, 5); /* I_y = I_z, assumed */
    p.inertia[8] = 0.000456 * h * pow(L, 5);
    p.r_pc[0] = -0.01 * L;
    p.r_pc[2] = -(10.39 - 0.3 - 8.5) / scale; /* -(KG - T): C above the waterline */
    if (hydrodynamics) {
        p.y_vdot = -(0.01497 - 0.00792) * h * pow(L, 3);
        p.y_v = -0.012035 * h * L * L * U;
        p.n_vdot = -0.0003525 * h * pow(L, 4);
        p.n_v = -0.0038436 * h * pow(L, 3) * U;
    }
    const double zeta = 0.2, waterplane = 0.70 * L * p.beam;
    p.k_heave = p.rho * p.g * waterplane;
    p.c_heave = 2.0 * zeta * sqrt(p.k_heave * p.mass);
    p.x_float = -0.02 * L;
    p.gm_long = L;
    const double pitch_inertia =
        p.inertia[4] + p.mass * (p.r_pc[0] * p.r_pc[0] + p.r_pc[2] * p.r_pc[2]);
    p.c_pitch = 2.0 * zeta * sqrt(p.mass * p.g * p.gm_long * pitch_inertia);
    p.c_sink = 0.5;
    p.x_sink = 0.1 * L;
    p.preset.carriage = carriage;
    return p;
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

/* F += force f at lab offset d from C (moment about C) */
static void add_load(double *F, const double *d, const double *f)
{
    double n[3];
    cross(d, f, n);
    for (int i = 0; i < 3; ++i) {
        F[i] += f[i];
        F[3 + i] += n[i];
    }
}

/* ---- the model callbacks ----------------------------------------------- */

static int loads(double t, const double *q, const double *qdot, const cdyn_rigid_kinematics *k,
                 double *F_i, void *user)
{
    const pmm *p = user;
    const double *R = k->rotation;
    (void)t;
    double r[3], v_p[3], w[3], a_p[3], v_body[3], a_body[3];
    rotate(R, 0, p->r_pc, r); /* P -> C, lab */
    for (int i = 0; i < 3; ++i) {
        v_p[i] = k->v0[i];
        w[i] = k->w0[i];
        for (int c = 0; c < NQ; ++c) {
            v_p[i] += k->J_T[i + 3 * c] * qdot[c];
            w[i] += k->J_R[i + 3 * c] * qdot[c];
        }
        a_p[i] = k->v0_dot[i] + k->L_T[i]; /* + J_T q'', which has no y component */
    }
    rotate(R, 1, v_p, v_body);
    rotate(R, 1, a_p, a_body); /* body y: the sway acceleration (omega_b x v_b has no y part) */
    for (int i = 0; i < 6; ++i) F_i[i] = 0.0;

    /* hydrodynamic sway force at P and yaw moment about P, body frame -> lab */
    const double sway = p->y_vdot * a_body[1] + p->y_v * v_body[1];
    const double yaw = p->n_vdot * a_body[1] + p->n_v * v_body[1];
    double f_body[3] = {0.0, sway, 0.0}, n_body[3] = {0.0, 0.0, yaw}, f[3], n[3], d[3];
    rotate(R, 0, f_body, f);
    rotate(R, 0, n_body, n);
    for (int i = 0; i < 3; ++i) {
        F_i[3 + i] += n[i];
        d[i] = -r[i]; /* P relative to C */
    }
    add_load(F_i, d, f);

    /* gravity at C; static buoyancy through the longitudinal metacentre */
    const double weight = p->mass * p->g;
    const double down[3] = {0.0, 0.0, weight}, up[3] = {0.0, 0.0, -weight};
    const double zero[3] = {0.0, 0.0, 0.0}, meta_body[3] = {0.0, 0.0, -p->gm_long};
    add_load(F_i, zero, down);
    rotate(R, 0, meta_body, d);
    add_load(F_i, d, up);

    /* heave spring and damper at F: immersion zeta_F and its rate */
    double f_pt_body[3] = {p->x_float, 0.0, 0.0}, f_pt[3], wxr[3];
    rotate(R, 0, f_pt_body, f_pt); /* P -> F, lab */
    cross(w, f_pt, wxr);
    const double immersion = q[QZ] + f_pt[2], rate = v_p[2] + wxr[2];
    const double spring[3] = {0.0, 0.0, -(p->k_heave * immersion + p->c_heave * rate)};
    for (int i = 0; i < 3; ++i) d[i] = f_pt[i] - r[i];
    add_load(F_i, d, spring);

    /* pitch damping about the pitch axis (the theta column of J_R) */
    for (int i = 0; i < 3; ++i) F_i[3 + i] -= p->c_pitch * qdot[QTHETA] * k->J_R[i + 3 * QTHETA];

    /* cross-flow sinkage force at x_Z on the waterline */
    const double sink = 0.5 * p->rho * p->c_sink * p->length * p->beam * v_body[1] * v_body[1];
    double z_pt_body[3] = {p->x_sink, 0.0, 0.0}, z_pt[3];
    rotate(R, 0, z_pt_body, z_pt);
    const double sink_force[3] = {0.0, 0.0, sink};
    for (int i = 0; i < 3; ++i) d[i] = z_pt[i] - r[i];
    add_load(F_i, d, sink_force);
    return 0;
}

/* ---- the caller's integrator: fixed-step RK4 ---------------------------- */

static int rhs(cdyn_rigid *rb, double t, const double *y, double *ydot)
{
    cdyn_status st = cdyn_rigid_rhs(rb, t, y, ydot);
    if (st == CDYN_OK) return 1;
    fprintf(stderr, "pmm_carriage: cdyn_rigid_rhs at t = %.4f s: %s: %s\n", t,
            cdyn_status_string(st), cdyn_rigid_last_error(rb));
    return 0;
}

/* One RK4 step from (t, y) with k1 = f(t, y) already evaluated. */
static int rk4_step(cdyn_rigid *rb, double t, double *y, double dt, const double *k1)
{
    double k2[2 * NQ], k3[2 * NQ], k4[2 * NQ], stage[2 * NQ];
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + 0.5 * dt * k1[i];
    if (!rhs(rb, t + 0.5 * dt, stage, k2)) return 0;
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + 0.5 * dt * k2[i];
    if (!rhs(rb, t + 0.5 * dt, stage, k3)) return 0;
    for (int i = 0; i < 2 * NQ; ++i) stage[i] = y[i] + dt * k3[i];
    if (!rhs(rb, t + dt, stage, k4)) return 0;
    for (int i = 0; i < 2 * NQ; ++i)
        y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* ---- harmonic analysis --------------------------------------------------- */

/* Mean and the sin/cos coefficients at n w of a signal sampled uniformly
 * over whole periods: f ~ mean + s sin(n w t) + c cos(n w t). */
typedef struct {
    double sum, sum_sin, sum_cos;
    long count;
} harmonic;

static void harmonic_add(harmonic *h, double w, double t, double f)
{
    h->sum += f;
    h->sum_sin += f * sin(w * t);
    h->sum_cos += f * cos(w * t);
    ++h->count;
}

static void harmonic_get(const harmonic *h, double *mean, double *s, double *c)
{
    const double n = (double)h->count;
    *mean = h->sum / n;
    *s = 2.0 * h->sum_sin / n;
    *c = 2.0 * h->sum_cos / n;
}

/* ---- one run ----------------------------------------------------------- */

typedef struct {
    double force_s, force_c;   /* first harmonic of the carriage sway force [N] */
    double moment_s, moment_c; /* of the yaw moment about P [N m] */
    double coupling_s, coupling_c; /* of the pitch coupling m y_c'' (z_G s_th + x_G (c_th - 1)) */
    double z_mean, z_cos, z_sin;   /* heave [m]: mean and 2w harmonic */
    double th_mean, th_cos, th_sin; /* pitch [rad] */
    double theta_max;              /* max |theta| in the fit window */
} pmm_result;

static int run(pmm *p, const char *csv_path, pmm_result *res)
{
    const int per_period = 2000, periods = 10, fit_periods = 4;
    const double period = 2.0 * PI / p->omega, dt = period / per_period;
    const int steps = per_period * periods, fit_start = per_period * (periods - fit_periods);
    cdyn_status st;
    cdyn_rigid *rb = cdyn_rigid_create(NQ, &st);
    if (!rb) {
        fprintf(stderr, "pmm_carriage: cdyn_rigid_create: %s\n", cdyn_status_string(st));
        return 0;
    }
    p->preset.carriage_user = p;
    st = cdyn_rigid_set_body(rb, p->mass, p->inertia, 3, p->r_pc);
    if (st == CDYN_OK) /* the preset's kinematics, evaluated by cdyn */
        st = cdyn_rigid_set_preset(rb, CDYN_RIGID_CARRIAGE, &p->preset, loads, p);
    if (st != CDYN_OK) {
        fprintf(stderr, "pmm_carriage: setup: %s: %s\n", cdyn_status_string(st),
                cdyn_rigid_last_error(rb));
        cdyn_rigid_free(rb);
        return 0;
    }
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "t_s,y_carriage_m,heave_mm,pitch_deg,sway_force_N,yaw_moment_Nm,"
                     "hand_force_N,hand_moment_Nm\n");
    harmonic force = {0}, moment = {0}, coupling = {0}, heave = {0}, pitch = {0};
    double y[2 * NQ] = {0.0, 0.0, 0.0, 0.0}; /* at rest on the calm waterline */
    const double w = p->omega, A = p->amplitude, m = p->mass;
    const double xg = p->r_pc[0], zg = p->r_pc[2];
    int ok = 1;
    res->theta_max = 0.0;
    for (int step = 0; step < steps; ++step) {
        const double t = step * dt;
        double k1[2 * NQ], F_q[6];
        if (!(ok = rhs(rb, t, y, k1))) break;
        cdyn_rigid_last_constraint_loads(rb, F_q);
        /* the carriage's yaw moment about P: n_q + r_PC x f_q, z component */
        const double th = y[QTHETA], cth = cos(th), sth = sin(th);
        const double r_lab[3] = {xg * cth + zg * sth, 0.0, -xg * sth + zg * cth};
        const double yaw_p = F_q[5] + r_lab[0] * F_q[1] - r_lab[1] * F_q[0];
        const double acc = -A * w * w * sin(w * t), vel = A * w * cos(w * t);
        if (!isfinite(F_q[1]) || !isfinite(yaw_p) || !isfinite(y[QZ]) || !isfinite(th)) {
            ok = 0;
            fprintf(stderr, "pmm_carriage: non-finite state at t = %.4f s\n", t);
            break;
        }
        if (step >= fit_start) {
            harmonic_add(&force, w, t, F_q[1]);
            harmonic_add(&moment, w, t, yaw_p);
            harmonic_add(&coupling, w, t, m * acc * (zg * sth + xg * (cth - 1.0)));
            harmonic_add(&heave, 2.0 * w, t, y[QZ]);
            harmonic_add(&pitch, 2.0 * w, t, th);
            res->theta_max = fmax(res->theta_max, fabs(th));
        }
        if (csv && step % 20 == 0)
            fprintf(csv, "%.5f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", t, A * sin(w * t),
                    1e3 * y[QZ], th * 180.0 / PI, F_q[1], yaw_p,
                    (m - p->y_vdot) * acc - p->y_v * vel, (m * xg - p->n_vdot) * acc - p->n_v * vel);
        if (!(ok = rk4_step(rb, t, y, dt, k1))) break;
    }
    if (csv) fclose(csv);
    cdyn_rigid_free(rb);
    if (!ok) return 0;
    double mean;
    harmonic_get(&force, &mean, &res->force_s, &res->force_c);
    harmonic_get(&moment, &mean, &res->moment_s, &res->moment_c);
    harmonic_get(&coupling, &mean, &res->coupling_s, &res->coupling_c);
    harmonic_get(&heave, &res->z_mean, &res->z_sin, &res->z_cos);
    harmonic_get(&pitch, &res->th_mean, &res->th_sin, &res->th_cos);
    return 1;
}

/* ---- heave and pitch by hand ------------------------------------------- */

/* 2 x 2 complex solve (K - W^2 M + i W C) X = b, real b; W = 0 gives the
 * static solution. Xr, Xi: real and imaginary parts. parallel_axis = 0
 * leaves m |r_PC|^2 out of the pitch inertia about P (for comparison). */
static void heave_pitch_response(const pmm *p, double W, const double *b, int parallel_axis,
                                 double *Xr, double *Xi)
{
    const double m = p->mass, xg = p->r_pc[0], zg = p->r_pc[2], xf = p->x_float;
    const double M[4] = {m, -m * xg, -m * xg,
                         p->inertia[4] + (parallel_axis ? m * (xg * xg + zg * zg) : 0.0)};
    const double K[4] = {p->k_heave, -p->k_heave * xf, -p->k_heave * xf,
                         p->k_heave * xf * xf + m * p->g * p->gm_long};
    const double C[4] = {p->c_heave, -p->c_heave * xf, -p->c_heave * xf,
                         p->c_heave * xf * xf + p->c_pitch};
    double ar[4], ai[4]; /* A = K - W^2 M + i W C, row-major 2 x 2 */
    for (int i = 0; i < 4; ++i) {
        ar[i] = K[i] - W * W * M[i];
        ai[i] = W * C[i];
    }
    /* det = a00 a11 - a01 a10 (complex) */
    const double dr = ar[0] * ar[3] - ai[0] * ai[3] - (ar[1] * ar[2] - ai[1] * ai[2]);
    const double di = ar[0] * ai[3] + ai[0] * ar[3] - (ar[1] * ai[2] + ai[1] * ar[2]);
    /* X = adj(A) b / det */
    const double nr[2] = {ar[3] * b[0] - ar[1] * b[1], -ar[2] * b[0] + ar[0] * b[1]};
    const double ni[2] = {ai[3] * b[0] - ai[1] * b[1], -ai[2] * b[0] + ai[0] * b[1]};
    const double d2 = dr * dr + di * di;
    for (int i = 0; i < 2; ++i) {
        Xr[i] = (nr[i] * dr + ni[i] * di) / d2;
        Xi[i] = (ni[i] * dr - nr[i] * di) / d2;
    }
}

static double amplitude(double s, double c) { return hypot(s, c); }
static double phase_deg(double s, double c) { return atan2(c, s) * 180.0 / PI; }

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : ".";
    pmm dry = make_pmm(0), wet = make_pmm(1);
    const double A = wet.amplitude, w = wet.omega, m = wet.mass;
    const double xg = wet.r_pc[0], zg = wet.r_pc[2];
    printf("PMM pure sway, CDYN_RIGID_CARRIAGE: Son & Nomoto container ship model 1:43.75\n");
    printf("L = %.2f m, B = %.4f m, m = %.2f kg, I_y = I_z = %.2f kg m^2, r_PC = (%.4f, 0, %.4f) m"
           " (body, NED)\n", wet.length, wet.beam, m, wet.inertia[4], xg, zg);
    printf("carriage: x = U t, U = %.4f m/s; y = A sin(w t), A = %.2f m, w = %.2f rad/s "
           "(w L / U = %.2f); psi = 0\n", wet.speed, A, w, w * wet.length / wet.speed);
    printf("sway derivatives (run B): Y_vdot = %.2f kg, Y_v = %.2f N s/m, N_vdot = %.2f kg m, "
           "N_v = %.2f N s\n", wet.y_vdot, wet.y_v, wet.n_vdot, wet.n_v);
    printf("hydrostatics: k_z = %.0f N/m at x_F = %.3f m, m g GM_L = %.0f N m/rad; damping "
           "c_z = %.1f N s/m, c_theta = %.1f N m s\n", wet.k_heave, wet.x_float,
           m * wet.g * wet.gm_long, wet.c_heave, wet.c_pitch);

    char path[1024];
    snprintf(path, sizeof path, "%s/pmm_carriage.csv", out_dir);
    pmm_result ra, rb;
    if (!run(&dry, NULL, &ra) || !run(&wet, path, &rb)) return EXIT_FAILURE;

    int pass = 1;
    const double acc = A * w * w, vel = A * w;
    printf("\nfirst harmonics over the last 4 periods, F = a_s sin(w t) + a_c cos(w t) = "
           "|F| sin(w t + phase); y = A sin(w t)\n");
    printf("%-40s %11s %11s %11s %9s\n", "", "a_s", "a_c", "|F|", "phase");
    for (int r = 0; r < 2; ++r) {
        const pmm *p = r == 0 ? &dry : &wet;
        const pmm_result *res = r == 0 ? &ra : &rb;
        const double hf_s = -(m - p->y_vdot) * acc, hf_c = -p->y_v * vel;
        const double hm_s = -(m * xg - p->n_vdot) * acc, hm_c = -p->n_v * vel;
        const double f_err = hypot(res->force_s - hf_s, res->force_c - hf_c) /
                             amplitude(hf_s, hf_c);
        const double m_err = hypot(res->moment_s - hm_s, res->moment_c - hm_c) /
                             amplitude(hm_s, hm_c);
        const double m_tol = 1e-9 + m * acc * (fabs(zg) + 0.5 * fabs(xg) * res->theta_max) *
                                        res->theta_max / amplitude(hm_s, hm_c);
        printf("run %s\n", r == 0 ? "A: no hydrodynamic sway force" : "B: PMM with the sway derivatives");
        printf("  %-38s %11.5f %11.5f %11.5f %9.3f\n", "carriage sway force [N]", res->force_s,
               res->force_c, amplitude(res->force_s, res->force_c),
               phase_deg(res->force_s, res->force_c));
        printf("  %-38s %11.5f %11.5f %11.5f %9.3f\n",
               r == 0 ? "  hand: m y_c''" : "  hand: (m - Y_vdot) y'' - Y_v y'", hf_s, hf_c,
               amplitude(hf_s, hf_c), phase_deg(hf_s, hf_c));
        printf("  %-38s %11.5f %11.5f %11.5f %9.3f\n", "yaw moment about P [N m]",
               res->moment_s, res->moment_c, amplitude(res->moment_s, res->moment_c),
               phase_deg(res->moment_s, res->moment_c));
        printf("  %-38s %11.5f %11.5f %11.5f %9.3f\n",
               r == 0 ? "  hand: m x_G y_c''" : "  hand: (m x_G - N_vdot) y'' - N_v y'", hm_s,
               hm_c, amplitude(hm_s, hm_c), phase_deg(hm_s, hm_c));
        printf("  %-38s %11.2e %11.2e\n", "  pitch coupling (from theta(t))", res->coupling_s,
               res->coupling_c);
        printf("  difference: force %.1e (limit 1e-09), moment %.1e (limit: pitch coupling "
               "bound %.1e)\n", f_err, m_err, m_tol);
        pass = pass && f_err <= 1e-9 && m_err <= m_tol;
        if (r == 1) {
            const double yvd = m + res->force_s / acc, yv = -res->force_c / vel;
            const double nvd = m * xg + res->moment_s / acc, nv = -res->moment_c / vel;
            printf("  identified: Y_vdot %.4f kg (model %.4f), Y_v %.4f N s/m (%.4f), "
                   "N_vdot %.4f kg m (%.4f), N_v %.4f N s (%.4f)\n", yvd, p->y_vdot, yv, p->y_v,
                   nvd, p->n_vdot, nv, p->n_v);
            printf("  prime: Y_vdot' %.6f, Y_v' %.6f, N_vdot' %.7f, N_v' %.7f\n",
                   yvd / (0.5 * p->rho * pow(p->length, 3)),
                   yv / (0.5 * p->rho * p->length * p->length * p->speed),
                   nvd / (0.5 * p->rho * pow(p->length, 4)),
                   nv / (0.5 * p->rho * pow(p->length, 3) * p->speed));
        }
    }

    /* heave and pitch: mean and 2w harmonic, run B (run A is the same: the
     * sway derivatives do not reach heave and pitch) */
    const double zbar = 0.25 * wet.rho * wet.c_sink * wet.length * wet.beam * vel * vel;
    const double b[2] = {zbar, -wet.x_sink * zbar};
    double sr[2], si[2], hr[2], hi[2], nr[2], ni[2];
    heave_pitch_response(&wet, 0.0, b, 1, sr, si);
    heave_pitch_response(&wet, 2.0 * w, b, 1, hr, hi);
    heave_pitch_response(&wet, 2.0 * w, b, 0, nr, ni);
    /* fitted 2w: x = mean + c cos + s sin  <->  Re(X e^{i 2 w t}) = Xr cos - Xi sin */
    const double sim[2][3] = {{rb.z_mean, rb.z_cos, -rb.z_sin},
                              {rb.th_mean, rb.th_cos, -rb.th_sin}};
    const double hand[2][3] = {{sr[0], hr[0], hi[0]}, {sr[1], hr[1], hi[1]}};
    const double th2 = rb.theta_max * rb.theta_max;
    const double r_norm = hypot(xg, zg);
    const double hp_tol = 10.0 * (th2 + 2.0 * m * r_norm * 4.0 * w * w * th2 / zbar);
    printf("\nheave and pitch (run B): x = mean + Re(X e^{i 2 w t}); cross-flow force "
           "Zbar (1 + cos 2wt), Zbar = %.4f N\n", zbar);
    printf("  %-22s %13s %13s %13s %13s\n", "", "mean", "Re X", "Im X", "|X|");
    static const char *const names[2] = {"heave z [mm]", "pitch theta [deg]"};
    double hp_err = 0.0, no_pa = 0.0;
    for (int i = 0; i < 2; ++i) {
        const double unit = i == 0 ? 1e3 : 180.0 / PI;
        printf("  %-22s %13.6f %13.6f %13.6f %13.6f\n", names[i], unit * sim[i][0],
               unit * sim[i][1], unit * sim[i][2], unit * hypot(sim[i][1], sim[i][2]));
        printf("  %-22s %13.6f %13.6f %13.6f %13.6f\n", "  hand (linear)", unit * hand[i][0],
               unit * hand[i][1], unit * hand[i][2], unit * hypot(hand[i][1], hand[i][2]));
        hp_err = fmax(hp_err, fabs(sim[i][0] - hand[i][0]) / fabs(hand[i][0]));
        hp_err = fmax(hp_err, hypot(sim[i][1] - hand[i][1], sim[i][2] - hand[i][2]) /
                                  hypot(hand[i][1], hand[i][2]));
        no_pa = fmax(no_pa, hypot(nr[i] - hand[i][1], ni[i] - hand[i][2]) /
                                hypot(hand[i][1], hand[i][2]));
    }
    printf("  largest relative difference %.1e (limit 10 b = %.1e; max|theta| = %.2e rad)\n",
           hp_err, hp_tol, rb.theta_max);
    printf("  (the hand 2w response without the parallel-axis term m |r_PC|^2 differs by "
           "%.1e)\n", no_pa);
    pass = pass && hp_err <= hp_tol;
    printf("CSV: %s (run B)\n", path);

    if (pass && system("command -v gnuplot > /dev/null 2>&1") == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"set terminal pngcairo noenhanced size 900,700; set output '%s/pmm_carriage.png';"
                 " set datafile separator ','; set key outside right; set grid; set xlabel 't [s]';"
                 " set lmargin at screen 0.09; set rmargin at screen 0.62;"
                 " set multiplot layout 2,1 title 'PMM pure sway, 1:43.75 container ship model (cdyn, CDYN_RIGID_CARRIAGE)';"
                 " set ylabel 'carriage loads'; plot '%s' u 1:5 w l lw 2 t 'sway force [N]', '' u 1:6 w l lw 2 t 'yaw moment about P [N m]',"
                 " '' every 10 u 1:7 w p pt 6 ps 0.6 t 'hand: force', '' every 10 u 1:8 w p pt 4 ps 0.6 t 'hand: moment',"
                 " '' u 1:(100*\\$2) w l dt 2 lc 'black' t 'y_carriage [cm]';"
                 " set ylabel 'heave (down +), pitch (bow up +)'; plot '%s' u 1:3 w l lw 2 t 'heave z [mm]', '' u 1:(100*\\$4) w l lw 2 t 'pitch theta [0.01 deg]';"
                 " unset multiplot\"",
                 out_dir, path, path);
        if (system(cmd) == 0) printf("figure: %s/pmm_carriage.png\n", out_dir);
    }
    if (!pass) {
        fprintf(stderr, "pmm_carriage: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    printf("checks: passed\n");
    return EXIT_SUCCESS;
}
