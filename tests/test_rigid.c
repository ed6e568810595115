/* Check suite for cdyn_rigid (THEORY T5).
 *
 * Every expected value comes from somewhere other than the library:
 *  - the preset kinematics (J_T, J_R, L_T, L_R, v0, w0 and their rates)
 *    against central finite differences of P(q(t), t) and R(q(t), t) along
 *    a trajectory q(t) = q0 + q' t + q'' t^2 / 2; the poses themselves
 *    against rotation matrices multiplied out here (Rz Ry Rx, Rodrigues);
 *  - a torque-free body integrated here by RK4: angular momentum about C,
 *    linear momentum and kinetic energy conserved; the axisymmetric body
 *    precesses at the analytic rate;
 *  - hand derivations: the compound pendulum and its pivot reaction, the
 *    4-DOF maneuvering body from Euler's equations in body axes, the
 *    pure-sway carriage from Newton's law for the centre of mass and the
 *    moment balance about the carriage pivot;
 *  - the same body in six coordinates (FREE) plus linear constraints, solved
 *    by a bordered dgesv written here, for every preset;
 *  - the projected equations assembled here by loops and solved by dgesv
 *    for random user kinematics.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "cdyn/rigid.h"
#include "cdyn/status.h"
#include "guarded.h"
#include "testutil.h"

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

static const double G_ACC = 9.81;
static const double PI = 3.14159265358979323846;

/* ------------------------------------------------------------------------ */
/* Small numerics written here                                               */

/* max |a - b| / max |b| (NaN propagates; absolute if b is all zero). */
static double reldiff(int len, const double *a, const double *b)
{
    double d = 0.0, s = 0.0;
    for (int i = 0; i < len; ++i) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= d)) d = e;
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    return s > 0.0 ? d / s : d;
}

static double maxabs(int len, const double *x)
{
    double s = 0.0;
    for (int i = 0; i < len; ++i)
        if (!(fabs(x[i]) <= s)) s = fabs(x[i]);
    return s;
}

/* Constraint loads vanish when nothing is constrained (f = 6), so they are
 * compared relative to the larger of the reference and the impressed loads. */
static double loads_diff(const double *Fq, const double *ref, const double *F_i)
{
    double d = 0.0;
    for (int i = 0; i < 6; ++i) {
        double e = fabs(Fq[i] - ref[i]);
        if (!(e <= d)) d = e;
    }
    return d / fmax(maxabs(6, ref), maxabs(6, F_i));
}

static void cross3(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static double norm3(const double *a) { return sqrt(dot3(a, a)); }

/* C = A B, C = A B^T, y = A x, y = A^T x for 3 x 3 column-major matrices. */
static void m3_mul(const double *A, const double *B, double *C)
{
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double s = 0.0;
            for (int p = 0; p < 3; ++p) s += A[i + 3 * p] * B[p + 3 * j];
            C[i + 3 * j] = s;
        }
}

static void m3_mul_t(const double *A, const double *B, double *C)
{
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double s = 0.0;
            for (int p = 0; p < 3; ++p) s += A[i + 3 * p] * B[j + 3 * p];
            C[i + 3 * j] = s;
        }
}

static void m3_vec(const double *A, const double *x, double *y)
{
    for (int i = 0; i < 3; ++i) y[i] = A[i] * x[0] + A[i + 3] * x[1] + A[i + 6] * x[2];
}

static void m3_tvec(const double *A, const double *x, double *y)
{
    for (int i = 0; i < 3; ++i) y[i] = A[3 * i] * x[0] + A[1 + 3 * i] * x[1] + A[2 + 3 * i] * x[2];
}

/* Elementary rotations (column-major). */
static void rot_x(double a, double *R)
{
    double c = cos(a), s = sin(a), M[9] = {1, 0, 0, 0, c, s, 0, -s, c};
    memcpy(R, M, sizeof M);
}

static void rot_y(double a, double *R)
{
    double c = cos(a), s = sin(a), M[9] = {c, 0, -s, 0, 1, 0, s, 0, c};
    memcpy(R, M, sizeof M);
}

static void rot_z(double a, double *R)
{
    double c = cos(a), s = sin(a), M[9] = {c, s, 0, -s, c, 0, 0, 0, 1};
    memcpy(R, M, sizeof M);
}

/* Rz(psi) Ry(theta) Rx(phi) multiplied out. */
static void euler_zyx(double phi, double theta, double psi, double *R)
{
    double X[9], Y[9], Z[9], ZY[9];
    rot_x(phi, X);
    rot_y(theta, Y);
    rot_z(psi, Z);
    m3_mul(Z, Y, ZY);
    m3_mul(ZY, X, R);
}

/* Rotation by q about the unit a: I + sin q K + (1 - cos q) K^2, K = [a]x. */
static void rodrigues(const double *a, double q, double *R)
{
    double K[9] = {0, a[2], -a[1], -a[2], 0, a[0], a[1], -a[0], 0}, K2[9];
    m3_mul(K, K, K2);
    for (int i = 0; i < 9; ++i) R[i] = sin(q) * K[i] + (1.0 - cos(q)) * K2[i];
    R[0] += 1.0;
    R[4] += 1.0;
    R[8] += 1.0;
}

static int dense_solve(int N, double *K, double *b)
{
    int one = 1, info = 0;
    int ipiv[16];
    ck_assert_int_le(N, 16);
    dgesv_(&N, &one, K, &N, ipiv, b, &N, &info);
    return info;
}

/* ------------------------------------------------------------------------ */
/* The body and the projected equations assembled here                      */

typedef struct {
    double m, I[9], r[3]; /* mass, inertia about C (body frame), r_PC (body frame) */
} body_t;

static cdyn_rigid *make_rigid(int f, const body_t *b)
{
    cdyn_status st = CDYN_ERR_LAPACK;
    cdyn_rigid *rb = cdyn_rigid_create(f, &st);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_ptr_nonnull(rb);
    ck_assert_int_eq(cdyn_rigid_size(rb), f);
    ck_assert_int_eq(cdyn_rigid_set_body(rb, b->m, b->I, 3, b->r), CDYN_OK);
    return rb;
}

static void random_body(tu_rng *g, body_t *b)
{
    b->m = 2.0 + tu_uniform(g);
    tu_random_spd(g, 3, b->I, 3);
    for (int i = 0; i < 3; ++i) b->r[i] = 0.5 * tu_uniform(g);
}

/* Mbar, Nbar, J (6 x f, leading dimension 6) of T5.2/T5.3 by plain loops. */
static void reference_terms(const body_t *b, int f, const cdyn_rigid_kinematics *k,
                            const double *qd, double *Mbar, double *Nbar, double *J)
{
    double RI[9], Mg[9], r[3], w[3], al[3], t1[3], t2[3];
    m3_mul(k->rotation, b->I, RI);
    m3_mul_t(RI, k->rotation, Mg);
    m3_vec(k->rotation, b->r, r);
    for (int i = 0; i < 3; ++i) {
        w[i] = k->w0[i];
        for (int c = 0; c < f; ++c) w[i] += k->J_R[i + 3 * c] * qd[c];
        al[i] = k->L_R[i] + k->w0_dot[i];
    }
    for (int c = 0; c < f; ++c) {
        cross3(r, k->J_R + 3 * c, t1);
        m3_vec(Mg, k->J_R + 3 * c, t2);
        for (int i = 0; i < 3; ++i) {
            J[i + 6 * c] = k->J_T[i + 3 * c] - t1[i];
            J[3 + i + 6 * c] = k->J_R[i + 3 * c];
            Mbar[i + 6 * c] = b->m * J[i + 6 * c];
            Mbar[3 + i + 6 * c] = t2[i];
        }
    }
    double axr[3], wxr[3], wwr[3], Mw[3], gyro[3], Ma[3];
    cross3(al, r, axr);
    cross3(w, r, wxr);
    cross3(w, wxr, wwr);
    m3_vec(Mg, w, Mw);
    cross3(w, Mw, gyro);
    m3_vec(Mg, al, Ma);
    for (int i = 0; i < 3; ++i) {
        Nbar[i] = b->m * (k->L_T[i] + k->v0_dot[i] + axr[i] + wwr[i]);
        Nbar[3 + i] = Ma[i] + gyro[i];
    }
}

/* (J^T Mbar) q'' = J^T (F_i - Nbar) by dgesv; F_q = Mbar q'' + Nbar - F_i. */
static void reference_solve(const body_t *b, int f, const cdyn_rigid_kinematics *k,
                            const double *qd, const double *F_i, double *qdd, double *F_q)
{
    double Mbar[36], Nbar[6], J[36], A[36];
    reference_terms(b, f, k, qd, Mbar, Nbar, J);
    for (int i = 0; i < f; ++i) {
        for (int j = 0; j < f; ++j) {
            double s = 0.0;
            for (int p = 0; p < 6; ++p) s += J[p + 6 * i] * Mbar[p + 6 * j];
            A[i + f * j] = s;
        }
        double s = 0.0;
        for (int p = 0; p < 6; ++p) s += J[p + 6 * i] * (F_i[p] - Nbar[p]);
        qdd[i] = s;
    }
    ck_assert_int_eq(dense_solve(f, A, qdd), 0);
    for (int p = 0; p < 6; ++p) {
        double s = Nbar[p] - F_i[p];
        for (int c = 0; c < f; ++c) s += Mbar[p + 6 * c] * qdd[c];
        F_q[p] = s;
    }
}

/* ------------------------------------------------------------------------ */
/* Carriage motions                                                          */

/* x = 0.3 sin(1.3 t) + 0.1 t, y = 0.2 cos(0.7 t), psi = 0.4 sin(0.9 t) + 0.2 t */
static int carriage_general(double t, double *pos, double *vel, double *acc, void *user)
{
    (void)user;
    pos[0] = 0.3 * sin(1.3 * t) + 0.1 * t;
    vel[0] = 0.3 * 1.3 * cos(1.3 * t) + 0.1;
    acc[0] = -0.3 * 1.3 * 1.3 * sin(1.3 * t);
    pos[1] = 0.2 * cos(0.7 * t);
    vel[1] = -0.2 * 0.7 * sin(0.7 * t);
    acc[1] = -0.2 * 0.7 * 0.7 * cos(0.7 * t);
    pos[2] = 0.4 * sin(0.9 * t) + 0.2 * t;
    vel[2] = 0.4 * 0.9 * cos(0.9 * t) + 0.2;
    acc[2] = -0.4 * 0.9 * 0.9 * sin(0.9 * t);
    return 0;
}

typedef struct {
    double amp, omega;
} sway_t;

/* pure sway: x = 0, y = amp sin(omega t), psi = 0 */
static int carriage_sway(double t, double *pos, double *vel, double *acc, void *user)
{
    const sway_t *s = user;
    pos[0] = vel[0] = acc[0] = 0.0;
    pos[2] = vel[2] = acc[2] = 0.0;
    pos[1] = s->amp * sin(s->omega * t);
    vel[1] = s->amp * s->omega * cos(s->omega * t);
    acc[1] = -s->amp * s->omega * s->omega * sin(s->omega * t);
    return 0;
}

static int carriage_fails(double t, double *pos, double *vel, double *acc, void *user)
{
    (void)t, (void)pos, (void)vel, (void)acc, (void)user;
    return 3;
}

static int carriage_nan(double t, double *pos, double *vel, double *acc, void *user)
{
    carriage_general(t, pos, vel, acc, user);
    vel[1] = NAN;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Preset kinematics against finite differences                              */

typedef struct {
    cdyn_rigid_preset preset;
    cdyn_rigid_preset_params p;
    double t0, q0[6], qd[6], qdd[6];
} traj_t;

static void traj_state(const traj_t *tr, double t, double *q, double *qd)
{
    int f = cdyn_rigid_preset_dof(tr->preset);
    double s = t - tr->t0;
    for (int i = 0; i < f; ++i) {
        q[i] = tr->q0[i] + tr->qd[i] * s + 0.5 * tr->qdd[i] * s * s;
        qd[i] = tr->qd[i] + tr->qdd[i] * s;
    }
}

static void traj_kin(const traj_t *tr, double t, cdyn_rigid_kinematics *k)
{
    double q[6], qd[6];
    traj_state(tr, t, q, qd);
    ck_assert_int_eq(cdyn_rigid_preset_eval(tr->preset, &tr->p, t, q, qd, k), CDYN_OK);
}

/* The pose as defined in T5.4 / rigid.h, multiplied out here. */
static void expected_pose(const traj_t *tr, double t, double *P, double *R)
{
    double q[6], qd[6];
    traj_state(tr, t, q, qd);
    const cdyn_rigid_preset_params *p = &tr->p;
    double a[3] = {0, 0, 1};
    if (tr->preset == CDYN_RIGID_ROTATION || tr->preset == CDYN_RIGID_TRANSLATION)
        for (int i = 0; i < 3; ++i) a[i] = p->axis[i] / norm3(p->axis);
    switch (tr->preset) {
    case CDYN_RIGID_FREE:
        memcpy(P, q, 3 * sizeof(double));
        euler_zyx(q[3], q[4], q[5], R);
        break;
    case CDYN_RIGID_ROTATION:
        memcpy(P, p->origin, 3 * sizeof(double));
        rodrigues(a, q[0], R);
        break;
    case CDYN_RIGID_TRANSLATION:
        for (int i = 0; i < 3; ++i) P[i] = p->origin[i] + q[0] * a[i];
        euler_zyx(0, 0, 0, R);
        break;
    case CDYN_RIGID_MANEUVER4:
        P[0] = q[0], P[1] = q[1], P[2] = p->z0;
        euler_zyx(q[2], p->theta0, q[3], R);
        break;
    case CDYN_RIGID_FIXED_POINT:
        memcpy(P, p->origin, 3 * sizeof(double));
        euler_zyx(q[0], q[1], q[2], R);
        break;
    case CDYN_RIGID_CARRIAGE: {
        double pos[3], vel[3], acc[3];
        p->carriage(t, pos, vel, acc, p->carriage_user);
        P[0] = pos[0], P[1] = pos[1], P[2] = q[0];
        euler_zyx(p->phi0, q[1], pos[2], R);
        break;
    }
    }
}

static void check_preset_against_differences(const traj_t *tr, const char *what)
{
    const int f = cdyn_rigid_preset_dof(tr->preset);
    const double h = 1e-3, tol = 1e-7;
    cdyn_rigid *rb = cdyn_rigid_create(f, NULL);
    ck_assert_ptr_nonnull(rb);
    double P[5][3], R[5][9], W[5][3];
    for (int s = 0; s < 5; ++s) {
        double t = tr->t0 + (s - 2) * h, q[6], qd[6], Pe[3] = {0}, Re[9] = {0};
        cdyn_rigid_kinematics k;
        traj_kin(tr, t, &k);
        traj_state(tr, t, q, qd);
        memcpy(P[s], k.position, sizeof P[s]);
        memcpy(R[s], k.rotation, sizeof R[s]);
        ck_assert_int_eq(cdyn_rigid_velocities(rb, &k, qd, NULL, W[s]), CDYN_OK);
        expected_pose(tr, t, Pe, Re);
        ck_assert_msg(reldiff(3, P[s], Pe) <= 1e-14 && reldiff(9, R[s], Re) <= 1e-14,
                      "%s: pose differs from its definition", what);
    }
    /* fourth-order central differences */
    double v_fd[3], a_fd[3], w_fd[3], wd_fd[3], Rd[9], Wm[9];
    for (int i = 0; i < 3; ++i) {
        v_fd[i] = (P[0][i] - 8 * P[1][i] + 8 * P[3][i] - P[4][i]) / (12 * h);
        a_fd[i] = (-P[0][i] + 16 * P[1][i] - 30 * P[2][i] + 16 * P[3][i] - P[4][i]) / (12 * h * h);
        wd_fd[i] = (W[0][i] - 8 * W[1][i] + 8 * W[3][i] - W[4][i]) / (12 * h);
    }
    for (int i = 0; i < 9; ++i) Rd[i] = (R[0][i] - 8 * R[1][i] + 8 * R[3][i] - R[4][i]) / (12 * h);
    m3_mul_t(Rd, R[2], Wm); /* R' R^T = [omega]x */
    w_fd[0] = 0.5 * (Wm[2 + 3 * 1] - Wm[1 + 3 * 2]);
    w_fd[1] = 0.5 * (Wm[0 + 3 * 2] - Wm[2 + 3 * 0]);
    w_fd[2] = 0.5 * (Wm[1 + 3 * 0] - Wm[0 + 3 * 1]);
    for (int i = 0; i < 3; ++i) /* skew to the difference accuracy */
        for (int j = 0; j < 3; ++j)
            ck_assert_msg(fabs(Wm[i + 3 * j] + Wm[j + 3 * i]) <= tol, "%s: R' R^T not skew", what);
    /* the library's kinematics at t0 */
    cdyn_rigid_kinematics k;
    double q[6], qd[6], v[3], w[3], a[3], wd[3];
    traj_kin(tr, tr->t0, &k);
    traj_state(tr, tr->t0, q, qd);
    ck_assert_int_eq(cdyn_rigid_velocities(rb, &k, qd, v, w), CDYN_OK);
    for (int i = 0; i < 3; ++i) {
        a[i] = k.L_T[i] + k.v0_dot[i];
        wd[i] = k.L_R[i] + k.w0_dot[i];
        for (int c = 0; c < f; ++c) {
            a[i] += k.J_T[i + 3 * c] * tr->qdd[c];
            wd[i] += k.J_R[i + 3 * c] * tr->qdd[c];
        }
    }
    for (int i = 0; i < 3; ++i) {
        ck_assert_msg(fabs(v[i] - v_fd[i]) <= tol * (1 + fabs(v_fd[i])), "%s: v_P[%d] %g vs %g",
                      what, i, v[i], v_fd[i]);
        ck_assert_msg(fabs(w[i] - w_fd[i]) <= tol * (1 + fabs(w_fd[i])), "%s: omega[%d] %g vs %g",
                      what, i, w[i], w_fd[i]);
        ck_assert_msg(fabs(a[i] - a_fd[i]) <= tol * (1 + fabs(a_fd[i])), "%s: a_P[%d] %g vs %g",
                      what, i, a[i], a_fd[i]);
        ck_assert_msg(fabs(wd[i] - wd_fd[i]) <= tol * (1 + fabs(wd_fd[i])),
                      "%s: omega'[%d] %g vs %g", what, i, wd[i], wd_fd[i]);
    }
    /* columns past f are zero */
    for (int i = 3 * f; i < 18; ++i) ck_assert(k.J_T[i] == 0.0 && k.J_R[i] == 0.0);
    cdyn_rigid_free(rb);
}

START_TEST(free_preset_matches_finite_differences)
{
    traj_t tr = {.preset = CDYN_RIGID_FREE, .t0 = 0.4};
    const double q0[][6] = {{0.3, -1.2, 2.0, 0.4, -0.7, 1.9},
                            {-2.0, 0.5, 0.1, -2.5, 1.1, -0.6},
                            {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}};
    const double qd[][6] = {{0.5, 0.2, -0.9, 1.3, -0.8, 0.6},
                            {-0.4, 1.1, 0.3, -0.7, 0.9, 2.2},
                            {0.1, 0.2, 0.3, 1.0, 1.5, -1.0}};
    const double qdd[][6] = {{0.2, -0.3, 0.4, -0.6, 0.5, 0.7},
                             {1.0, -0.5, 0.0, 0.8, -1.2, 0.3},
                             {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}};
    for (int c = 0; c < 3; ++c) {
        memcpy(tr.q0, q0[c], sizeof tr.q0);
        memcpy(tr.qd, qd[c], sizeof tr.qd);
        memcpy(tr.qdd, qdd[c], sizeof tr.qdd);
        check_preset_against_differences(&tr, "FREE");
    }
    /* params are not needed */
    cdyn_rigid_kinematics k;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0.0, q0[0], qd[0], &k), CDYN_OK);
}
END_TEST

START_TEST(fixed_point_preset_matches_finite_differences)
{
    traj_t tr = {.preset = CDYN_RIGID_FIXED_POINT, .t0 = 0.7};
    tr.p.origin[0] = 0.4, tr.p.origin[1] = -1.5, tr.p.origin[2] = 2.2;
    const double q0[][3] = {{0.4, -0.7, 1.9}, {-2.5, 1.1, -0.6}, {0.0, 0.0, 0.0}};
    const double qd[][3] = {{1.3, -0.8, 0.6}, {-0.7, 0.9, 2.2}, {1.0, 1.5, -1.0}};
    const double qdd[][3] = {{-0.6, 0.5, 0.7}, {0.8, -1.2, 0.3}, {0.0, 0.0, 0.0}};
    for (int c = 0; c < 3; ++c) {
        memcpy(tr.q0, q0[c], sizeof q0[c]);
        memcpy(tr.qd, qd[c], sizeof qd[c]);
        memcpy(tr.qdd, qdd[c], sizeof qdd[c]);
        check_preset_against_differences(&tr, "FIXED_POINT");
    }
}
END_TEST

START_TEST(maneuver4_preset_matches_finite_differences)
{
    traj_t tr = {.preset = CDYN_RIGID_MANEUVER4, .t0 = 1.0};
    tr.p.z0 = -0.7;
    const double th0[] = {0.0, 0.25, -1.1};
    const double q0[][4] = {{1.0, 2.0, 0.3, -0.8}, {-0.5, 0.2, -1.4, 2.6}, {0, 0, 0, 0}};
    const double qd[][4] = {{0.4, -0.3, 0.9, 1.2}, {1.5, 0.1, -0.6, -0.9}, {0.2, 0.3, 1.1, 0.7}};
    const double qdd[][4] = {{0.1, 0.2, -0.4, 0.3}, {-0.2, 0.6, 0.8, -1.0}, {0, 0, 0, 0}};
    for (int c = 0; c < 3; ++c) {
        tr.p.theta0 = th0[c];
        memcpy(tr.q0, q0[c], sizeof q0[c]);
        memcpy(tr.qd, qd[c], sizeof qd[c]);
        memcpy(tr.qdd, qdd[c], sizeof qdd[c]);
        check_preset_against_differences(&tr, "MANEUVER4");
    }
}
END_TEST

START_TEST(rotation_and_translation_presets_match_finite_differences)
{
    const double axes[][3] = {{0, 0, 1}, {1, 0, 0}, {0.3, -0.5, 0.8}, {-2.0, 1.0, 0.5}};
    for (int c = 0; c < 4; ++c) {
        traj_t tr = {.preset = CDYN_RIGID_ROTATION, .t0 = -0.3};
        memcpy(tr.p.axis, axes[c], sizeof tr.p.axis);
        tr.p.origin[0] = 0.5, tr.p.origin[1] = -1.0, tr.p.origin[2] = 2.0;
        tr.q0[0] = 0.7 - c, tr.qd[0] = 1.3 + 0.2 * c, tr.qdd[0] = -0.4 + c;
        check_preset_against_differences(&tr, "ROTATION");
        tr.preset = CDYN_RIGID_TRANSLATION;
        check_preset_against_differences(&tr, "TRANSLATION");
    }
}
END_TEST

START_TEST(carriage_preset_matches_finite_differences)
{
    traj_t tr = {.preset = CDYN_RIGID_CARRIAGE};
    tr.p.carriage = carriage_general;
    const double phi0[] = {0.0, 0.3, -0.9};
    const double t0[] = {0.0, 1.7, 4.2};
    const double q0[][2] = {{0.2, 0.1}, {-0.4, -0.6}, {1.0, 0.9}};
    const double qd[][2] = {{0.5, 0.8}, {-0.3, 1.4}, {0.0, -0.7}};
    const double qdd[][2] = {{0.3, -0.2}, {1.0, 0.5}, {-0.8, 0.0}};
    for (int c = 0; c < 3; ++c) {
        tr.p.phi0 = phi0[c];
        tr.t0 = t0[c];
        memcpy(tr.q0, q0[c], sizeof q0[c]);
        memcpy(tr.qd, qd[c], sizeof qd[c]);
        memcpy(tr.qdd, qdd[c], sizeof qdd[c]);
        check_preset_against_differences(&tr, "CARRIAGE");
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Torque-free body (FREE preset through cdyn_rigid_rhs) by RK4              */

static int free_motion(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                       void *user)
{
    (void)user;
    return (int)cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, t, q, qd, k);
}

static void rk4_step(cdyn_rigid *rb, int n, double t, double h, double *y)
{
    double k1[12], k2[12], k3[12], k4[12], tmp[12];
    ck_assert_int_eq(cdyn_rigid_rhs(rb, t, y, k1), CDYN_OK);
    for (int i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * h * k1[i];
    ck_assert_int_eq(cdyn_rigid_rhs(rb, t + 0.5 * h, tmp, k2), CDYN_OK);
    for (int i = 0; i < n; ++i) tmp[i] = y[i] + 0.5 * h * k2[i];
    ck_assert_int_eq(cdyn_rigid_rhs(rb, t + 0.5 * h, tmp, k3), CDYN_OK);
    for (int i = 0; i < n; ++i) tmp[i] = y[i] + h * k3[i];
    ck_assert_int_eq(cdyn_rigid_rhs(rb, t + h, tmp, k4), CDYN_OK);
    for (int i = 0; i < n; ++i) y[i] += h / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
}

/* Angular momentum about C (lab), linear momentum, kinetic energy, the
 * position of C; from the state y = [x y z phi theta psi; rates] with the
 * angular velocity written out here (omega = e_phi phi' + e_theta theta' +
 * e_psi psi'), independently of the library. */
static void free_invariants(const body_t *b, const double *y, double *L, double *p, double *E,
                            double *C)
{
    const double *d = y + 6;
    double R[9], RI[9], Mg[9], r[3], w[3], wxr[3], vC[3], Mw[3];
    double th = y[4], ps = y[5];
    euler_zyx(y[3], th, ps, R);
    m3_mul(R, b->I, RI);
    m3_mul_t(RI, R, Mg);
    m3_vec(R, b->r, r);
    w[0] = cos(th) * cos(ps) * d[3] - sin(ps) * d[4];
    w[1] = cos(th) * sin(ps) * d[3] + cos(ps) * d[4];
    w[2] = -sin(th) * d[3] + d[5];
    cross3(w, r, wxr);
    for (int i = 0; i < 3; ++i) vC[i] = d[i] + wxr[i];
    m3_vec(Mg, w, Mw);
    memcpy(L, Mw, sizeof Mw);
    for (int i = 0; i < 3; ++i) {
        p[i] = b->m * vC[i];
        C[i] = y[i] + r[i];
    }
    *E = 0.5 * b->m * dot3(vC, vC) + 0.5 * dot3(w, Mw);
}

/* Euler rates (phi', theta', psi') giving the lab angular velocity w. */
static void euler_rates(double theta, double psi, const double *w, double *rates)
{
    /* w = e_phi phi' + e_theta theta' + e_z psi'; e_phi = (ct cp, ct sp, -st),
     * e_theta = (-sp, cp, 0): the horizontal part gives phi', theta' */
    double ct = cos(theta), st = sin(theta), cp = cos(psi), sp = sin(psi);
    double phid = (cp * w[0] + sp * w[1]) / ct;
    double thd = -sp * w[0] + cp * w[1];
    rates[0] = phid;
    rates[1] = thd;
    rates[2] = w[2] + st * phid;
}

/* The FREE motion as the caller's callback (the general projected
 * equations) or as the preset cdyn evaluates itself (the free body's own
 * equations, cdyn_rigid_set_preset). */
static void set_free_model(cdyn_rigid *rb, int via_preset, cdyn_rigid_loads_fn loads, void *user)
{
    if (via_preset)
        ck_assert_int_eq(cdyn_rigid_set_preset(rb, CDYN_RIGID_FREE, NULL, loads, user), CDYN_OK);
    else
        ck_assert_int_eq(cdyn_rigid_set_model(rb, free_motion, loads, user), CDYN_OK);
}

START_TEST(torque_free_body_conserves_momentum_and_energy)
{
    /* offset centre of rotation: translation and rotation couple through r_PC */
    body_t b = {.m = 3.0,
                .I = {2.0, 0.1, 0.0, 0.1, 3.0, 0.05, 0.0, 0.05, 4.0},
                .r = {0.1, -0.2, 0.05}};
    for (int via_preset = 0; via_preset < 2; ++via_preset) {
        cdyn_rigid *rb = make_rigid(6, &b);
        set_free_model(rb, via_preset, NULL, NULL);
        double y[12] = {0.5, -0.2, 1.0, 0.1, -0.2, 0.3};
        /* spin mostly about the body axis of largest inertia (stable, so theta
         * stays far from +-pi/2): omega = R (0.3, -0.2, 2.0)_body */
        double R[9], wb[3] = {0.3, -0.2, 2.0}, w[3], r[3], wxr[3], vC[3] = {0.5, -0.3, 0.2};
        euler_zyx(y[3], y[4], y[5], R);
        m3_vec(R, wb, w);
        m3_vec(R, b.r, r);
        cross3(w, r, wxr);
        for (int i = 0; i < 3; ++i) y[6 + i] = vC[i] - wxr[i]; /* v_P = v_C - omega x r */
        euler_rates(y[4], y[5], w, y + 9);
        double L0[3], p0[3], E0, C0[3], L[3], p[3], E, C[3];
        free_invariants(&b, y, L0, p0, &E0, C0);
        const double h = 2e-3, T = 40.0;
        const int steps = (int)lround(T / h);
        double errL = 0, errp = 0, errE = 0, errC = 0, max_theta = 0, psi0 = y[5];
        for (int s = 0; s < steps; ++s) {
            rk4_step(rb, 12, s * h, h, y);
            free_invariants(&b, y, L, p, &E, C);
            double t = (s + 1) * h, dL[3], dp[3], dC[3];
            for (int i = 0; i < 3; ++i) {
                dL[i] = L[i] - L0[i];
                dp[i] = p[i] - p0[i];
                dC[i] = C[i] - (C0[i] + vC[i] * t); /* C moves uniformly */
            }
            errL = fmax(errL, norm3(dL) / norm3(L0));
            errp = fmax(errp, norm3(dp) / norm3(p0));
            errE = fmax(errE, fabs(E - E0) / E0);
            errC = fmax(errC, norm3(dC));
            max_theta = fmax(max_theta, fabs(y[4]));
        }
        double turns = fabs(y[5] - psi0) / (2 * PI);
        ck_assert_msg(turns > 10.0, "only %g turns", turns);
        ck_assert_msg(max_theta < 1.0, "theta reached %g", max_theta);
        ck_assert_msg(errL <= 1e-9, "angular momentum drift %g", errL);
        ck_assert_msg(errp <= 1e-9, "linear momentum drift %g", errp);
        ck_assert_msg(errE <= 1e-9, "energy drift %g", errE);
        ck_assert_msg(errC <= 1e-9, "centre of mass off its line by %g", errC);
        /* every rhs gave the constraint loads of a free body: zero */
        double Fq[6];
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(rb, Fq), CDYN_OK);
        ck_assert_msg(maxabs(6, Fq) <= 1e-11, "free body has loads %g", maxabs(6, Fq));
        if (via_preset) ck_assert_double_eq(maxabs(6, Fq), 0.0); /* nothing constrains it */
        cdyn_rigid_free(rb);
    }
}
END_TEST

/* Torque-free axisymmetric body, I = diag(I1, I1, I3) about C, symmetry axis
 * e3 = R e_z. With L = M_g omega fixed in the lab, split omega along e3 and
 * across it: L = I1 omega_perp + I3 omega_3 e3, so
 *   omega = L / I1 + (L . e3)(1/I3 - 1/I1) e3,
 * and e3' = omega x e3 = (L / I1) x e3: e3 turns about L at the constant
 * lab-frame rate Omega = |L| / I1, keeping its nutation angle beta to L. */
START_TEST(axisymmetric_body_precesses_at_the_analytic_rate)
{
    const double I1 = 2.0, I3 = 1.0, beta = 0.5, L0 = 3.0;
    body_t b = {.m = 1.5, .I = {I1, 0, 0, 0, I1, 0, 0, 0, I3}, .r = {0, 0, 0}};
    for (int via_preset = 0; via_preset < 2; ++via_preset) {
        cdyn_rigid *rb = make_rigid(6, &b);
        set_free_model(rb, via_preset, NULL, NULL);
        /* start tilted by beta about x (phi = beta, theta = psi = 0), L = L0 e_z */
        double y[12] = {0, 0, 0, beta, 0, 0}, R0[9], Lb[3], wb[3], w[3], Lz[3] = {0, 0, L0};
        euler_zyx(beta, 0, 0, R0);
        m3_tvec(R0, Lz, Lb); /* body components of L */
        wb[0] = Lb[0] / I1, wb[1] = Lb[1] / I1, wb[2] = Lb[2] / I3;
        m3_vec(R0, wb, w);
        euler_rates(0, 0, w, y + 9);
        const double Omega = L0 / I1, h = 1e-3;
        double e30[3] = {R0[6], R0[7], R0[8]}, worst = 0.0, worst_nut = 0.0;
        int steps = 15000, sample = 500;
        for (int s = 1; s <= steps; ++s) {
            rk4_step(rb, 12, (s - 1) * h, h, y);
            if (s % sample) continue;
            double t = s * h, R[9], Rz[9], e3_ref[3];
            euler_zyx(y[3], y[4], y[5], R);
            rot_z(Omega * t, Rz);
            m3_vec(Rz, e30, e3_ref);
            double d[3] = {R[6] - e3_ref[0], R[7] - e3_ref[1], R[8] - e3_ref[2]};
            worst = fmax(worst, norm3(d));
            worst_nut = fmax(worst_nut, fabs(acos(R[8]) - beta));
        }
        ck_assert_msg(Omega * steps * h > 4 * PI, "fewer than two precession periods");
        ck_assert_msg(worst <= 1e-10, "symmetry axis off the precession cone by %g", worst);
        ck_assert_msg(worst_nut <= 1e-10, "nutation angle drifted by %g", worst_nut);
        cdyn_rigid_free(rb);
    }
}
END_TEST

/* Loads that read the kinematics they are given: gravity at C, a lab
 * moment, a force along the body's x axis (R's first column) and a drag on
 * the translation; each call checks k against cdyn_rigid_preset_eval's
 * FREE kinematics bit for bit (the preset path must hand the loads the
 * same k). */
typedef struct {
    double m, F_i[6]; /* the loads of the last call */
    int mismatches, calls;
} free_loads_t;

static int free_loads(double t, const double *q, const double *qd,
                      const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    free_loads_t *u = user; /* no Check assertion here: it would allocate */
    cdyn_rigid_kinematics ref;
    u->mismatches += cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, t, q, qd, &ref) != CDYN_OK ||
                     memcmp(&ref, k, sizeof ref) != 0;
    u->calls++;
    for (int i = 0; i < 3; ++i) F_i[i] = 2.0 * k->rotation[i] - 0.3 * qd[i];
    F_i[2] -= u->m * G_ACC;
    F_i[3] = 0.2, F_i[4] = -0.4, F_i[5] = 0.1 * sin(t);
    memcpy(u->F_i, F_i, sizeof u->F_i);
    return 0;
}

/* The free body's q'' in long double, written here from the Newton-Euler
 * equations about C: omega' = R I^-1 (R^T n - w_b x I w_b) (I^-1 by
 * Cramer's rule), a_P = f / m - omega' x r - omega x (omega x r), and the
 * Euler-angle rates inverted in closed form (test_rigid's euler_rates). */
static void free_reference(const body_t *b, const double *y, const double *F, long double *qdd)
{
    long double ph = y[3], th = y[4], ps = y[5], d0 = y[9], d1 = y[10], d2 = y[11];
    long double cf = cosl(ph), sf = sinl(ph), ct = cosl(th), st = sinl(th), cp = cosl(ps),
                sp = sinl(ps);
    long double R[9] = {cp * ct, sp * ct, -st, cp * st * sf - sp * cf, sp * st * sf + cp * cf,
                        ct * sf, cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf};
    long double w[3] = {ct * cp * d0 - sp * d1, ct * sp * d0 + cp * d1, -st * d0 + d2};
    long double LR[3] = {d0 * (-st * cp * d1 - ct * sp * d2) - d1 * cp * d2,
                         d0 * (-st * sp * d1 + ct * cp * d2) - d1 * sp * d2, -d0 * ct * d1};
    long double wb[3], nb[3], Iw[3], rhs[3], ab[3], al[3], r[3];
    for (int i = 0; i < 3; ++i) {
        wb[i] = R[3 * i] * w[0] + R[3 * i + 1] * w[1] + R[3 * i + 2] * w[2];
        nb[i] = R[3 * i] * F[3] + R[3 * i + 1] * F[4] + R[3 * i + 2] * F[5];
    }
    const double *I = b->I;
    for (int i = 0; i < 3; ++i)
        Iw[i] = (long double)I[i] * wb[0] + (long double)I[i + 3] * wb[1] +
                (long double)I[i + 6] * wb[2];
    rhs[0] = nb[0] - (wb[1] * Iw[2] - wb[2] * Iw[1]);
    rhs[1] = nb[1] - (wb[2] * Iw[0] - wb[0] * Iw[2]);
    rhs[2] = nb[2] - (wb[0] * Iw[1] - wb[1] * Iw[0]);
    long double A[9];
    for (int i = 0; i < 9; ++i) A[i] = I[i];
    long double det = A[0] * (A[4] * A[8] - A[7] * A[5]) - A[3] * (A[1] * A[8] - A[7] * A[2]) +
                      A[6] * (A[1] * A[5] - A[4] * A[2]);
    for (int c = 0; c < 3; ++c) { /* Cramer: column c replaced by rhs */
        long double M[9];
        for (int i = 0; i < 9; ++i) M[i] = A[i];
        for (int i = 0; i < 3; ++i) M[i + 3 * c] = rhs[i];
        ab[c] = (M[0] * (M[4] * M[8] - M[7] * M[5]) - M[3] * (M[1] * M[8] - M[7] * M[2]) +
                 M[6] * (M[1] * M[5] - M[4] * M[2])) / det;
    }
    for (int i = 0; i < 3; ++i) {
        al[i] = R[i] * ab[0] + R[i + 3] * ab[1] + R[i + 6] * ab[2];
        r[i] = R[i] * b->r[0] + R[i + 3] * b->r[1] + R[i + 6] * b->r[2];
    }
    long double axr[3] = {al[1] * r[2] - al[2] * r[1], al[2] * r[0] - al[0] * r[2],
                          al[0] * r[1] - al[1] * r[0]};
    long double wxr[3] = {w[1] * r[2] - w[2] * r[1], w[2] * r[0] - w[0] * r[2],
                          w[0] * r[1] - w[1] * r[0]};
    long double wwr[3] = {w[1] * wxr[2] - w[2] * wxr[1], w[2] * wxr[0] - w[0] * wxr[2],
                          w[0] * wxr[1] - w[1] * wxr[0]};
    long double a[3];
    for (int i = 0; i < 3; ++i) {
        qdd[i] = F[i] / (long double)b->m - axr[i] - wwr[i];
        a[i] = al[i] - LR[i];
    }
    qdd[3] = (cp * a[0] + sp * a[1]) / ct;
    qdd[4] = -sp * a[0] + cp * a[1];
    qdd[5] = a[2] + st * qdd[3];
}

/* cdyn_rigid_set_preset(FREE) against the same motion through the general
 * projected equations (a motion callback): random bodies (P off C, full
 * inertia) and states, in SI and with mass and length rescaled by 1e+-8 (the
 * same verdicts; q'' scaled as the units say); pitches near +-pi/2 (both
 * accept at 1e-3 away, both refuse at the singularity); no allocation. */
START_TEST(free_preset_is_the_general_free_motion)
{
    tu_rng g;
    tu_rng_seed(&g, 7031);
    const double units[][2] = {{1.0, 1.0}, {1e8, 1e-8}, {1e-8, 1e8}, {1e8, 1e8}};
    for (int trial = 0; trial < 40; ++trial) {
        body_t b;
        random_body(&g, &b);
        int u = trial % 4;
        double mu = units[u][0], lu = units[u][1]; /* mass and length units */
        body_t bs = b;
        bs.m *= mu;
        for (int i = 0; i < 9; ++i) bs.I[i] *= mu * lu * lu;
        for (int i = 0; i < 3; ++i) bs.r[i] *= lu;
        cdyn_rigid *general = make_rigid(6, &bs), *preset = make_rigid(6, &bs);
        free_loads_t lg = {.m = bs.m}, lp = {.m = bs.m};
        set_free_model(general, 0, free_loads, &lg);
        set_free_model(preset, 1, free_loads, &lp);
        double y[12], yg[12], yp[12];
        for (int i = 0; i < 12; ++i) y[i] = 2.0 * tu_uniform(&g) - 1.0;
        for (int i = 0; i < 3; ++i) y[i] *= lu, y[6 + i] *= lu;
        if (trial % 5 == 0) y[4] = (trial % 2 ? -1.0 : 1.0) * (0.5 * PI - 1e-3);
        if (trial % 5 == 1) y[4] = (trial % 2 ? -1.0 : 1.0) * (0.5 * PI - 2e-6);
        ck_assert_int_eq(cdyn_rigid_rhs(general, 0.3, y, yg), CDYN_OK);
        alloc_count_start();
        cdyn_status st = cdyn_rigid_rhs(preset, 0.3, y, yp);
        ck_assert_int_eq(alloc_count_stop(), 0);
        ck_assert_int_eq(st, CDYN_OK);
        /* q'' by parts (translation in the length unit, angles in rad)
         * against the long double reference: the free body's equations to
         * rounding (condition 1 / cos theta from the angle rates); the
         * general path, which solves J^T Mbar J q'' = J^T (F_i - Nbar) as
         * a least-squares problem with a QR of its mass-weighted J, with
         * moments of the forces about P that cancel, to 1e-12 in SI and
         * within 1e-6 in the rescaled units (measured 2.8e-10 at mass 1e-8,
         * length 1e8), both times the same condition 1 / cos theta. Before
         * the QR the general path formed J^T Mbar J, whose condition is the
         * square: 4.8e-7 rad from the singular pitch it was 7.9e-4 off
         * with CDYN_OK, and the limits here carried (1 / cos theta)^2 (the
         * states 2e-6 rad from it check the linear limit). */
        long double ref[6];
        free_reference(&bs, y, lp.F_i, ref);
        double rt = 0.0, rr = 0.0;
        for (int i = 0; i < 3; ++i) {
            rt = fmax(rt, fabs((double)ref[i]));
            rr = fmax(rr, fabs((double)ref[3 + i]));
        }
        double amp = 1.0 / fabs(cos(y[4])), general_tol = u == 0 ? 1e-12 : 1e-6;
        for (int i = 0; i < 3; ++i) {
            ck_assert_double_le(fabsl(yp[6 + i] - ref[i]), 1e-13 * amp * rt);
            ck_assert_double_le(fabsl(yp[9 + i] - ref[3 + i]), 1e-13 * amp * rr);
            ck_assert_double_le(fabsl(yg[6 + i] - ref[i]), general_tol * amp * rt);
            ck_assert_double_le(fabsl(yg[9 + i] - ref[3 + i]), general_tol * amp * rr);
        }
        for (int i = 0; i < 6; ++i) ck_assert(yp[i] == y[6 + i]);
        double Fg[6], Fp[6];
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(general, Fg), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(preset, Fp), CDYN_OK);
        ck_assert_double_eq(maxabs(6, Fp), 0.0);
        ck_assert_int_eq(lp.mismatches, 0);
        ck_assert_int_eq(lp.calls, 1);
        /* the singular pitch: refused by both, outputs untouched */
        y[4] = trial % 2 ? -0.5 * PI : 0.5 * PI;
        double keep[12];
        memcpy(keep, yp, sizeof keep);
        ck_assert_int_eq(cdyn_rigid_rhs(general, 0.3, y, yg), CDYN_ERR_SINGULAR);
        ck_assert_int_eq(cdyn_rigid_rhs(preset, 0.3, y, yp), CDYN_ERR_SINGULAR);
        ck_assert(memcmp(keep, yp, sizeof keep) == 0);
        ck_assert(strstr(cdyn_rigid_last_error(preset), "singular") != NULL);
        cdyn_rigid_free(general);
        cdyn_rigid_free(preset);
    }
}
END_TEST

/* A hand calculation: no loads, spin w about the body z axis (principal),
 * P one unit of length from C along body x (r_PC = (1, 0, 0)), all angles
 * 0. Then omega' = 0 and P circles C: a_P = -omega x (omega x r) = (w^2, 0, 0). */
START_TEST(free_preset_spin_about_a_principal_axis)
{
    const double w = 3.0;
    body_t b = {.m = 2.0, .I = {1.0, 0, 0, 0, 2.0, 0, 0, 0, 3.0}, .r = {1.0, 0, 0}};
    cdyn_rigid *rb = make_rigid(6, &b);
    set_free_model(rb, 1, NULL, NULL);
    double y[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, w}, yd[12];
    ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_OK);
    const double expected[6] = {w * w, 0, 0, 0, 0, 0};
    for (int i = 0; i < 6; ++i) ck_assert_double_le(fabs(yd[6 + i] - expected[i]), 1e-14);
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* One-axis rotation: the compound pendulum                                  */

typedef struct {
    cdyn_rigid_preset preset;
    cdyn_rigid_preset_params p;
    double m;
} preset_user;

static int preset_motion(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                         void *user)
{
    const preset_user *u = user;
    return (int)cdyn_rigid_preset_eval(u->preset, &u->p, t, q, qd, k);
}

static int gravity_loads(double t, const double *q, const double *qd,
                         const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    (void)t, (void)q, (void)qd, (void)k;
    const preset_user *u = user;
    F_i[2] = -u->m * G_ACC;
    return 0;
}

/* Horizontal axis a through the pivot P; C at distance d below P at q = 0
 * (r_PC = (0, 0, -d) in the body frame, perpendicular to a). Rotating by q,
 * r = R r_PC = -d (cos q e_z + sin q a x e_z), and the gravity moment about
 * the axis is (r x (-m g e_z)) . a = -m g d sin q. With I_C = a^T I a
 * (R a = a) and I_P = I_C + m d^2:
 *   q'' = -m g d sin q / (I_C + m d^2).
 * Pivot reaction: f_q = m a_C - m g_vec, a_C = q'' a x r - q'^2 r;
 * moment about C from Euler's equation with no gravity moment about C:
 *   n_q = M_g a q'' + q'^2 a x (M_g a),
 * and the hinge carries no moment about its own axis: (n_q + r x f_q) . a = 0. */
START_TEST(one_axis_rotation_is_the_compound_pendulum)
{
    const double d = 0.4, alpha = 0.4;
    body_t b = {.m = 2.5,
                .I = {0.3, 0.02, -0.01, 0.02, 0.25, 0.03, -0.01, 0.03, 0.2},
                .r = {0, 0, -d}};
    double a[3] = {cos(alpha), sin(alpha), 0.0}, ez[3] = {0, 0, 1}, axez[3];
    cross3(a, ez, axez);
    preset_user u = {.preset = CDYN_RIGID_ROTATION, .m = b.m};
    for (int i = 0; i < 3; ++i) u.p.axis[i] = 2.5 * a[i]; /* not unit: normalized */
    u.p.origin[0] = 0.1, u.p.origin[1] = -0.2, u.p.origin[2] = 1.0;
    cdyn_rigid *rb = make_rigid(1, &b);
    ck_assert_int_eq(cdyn_rigid_set_model(rb, preset_motion, gravity_loads, &u), CDYN_OK);
    double Ia[3];
    m3_vec(b.I, a, Ia);
    const double I_C = dot3(a, Ia);
    const double states[][2] = {{0.3, 0.0}, {1.2, -0.7}, {-2.0, 1.5},
                                {2.9, 0.4}, {0.0, 2.0}, {0.0, 0.0}};
    for (size_t c = 0; c < sizeof states / sizeof states[0]; ++c) {
        double q = states[c][0], qd = states[c][1], y[2] = {q, qd}, ydot[2], Fq[6];
        ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.5, y, ydot), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(rb, Fq), CDYN_OK);
        double qdd = -b.m * G_ACC * d * sin(q) / (I_C + b.m * d * d);
        ck_assert_double_eq(ydot[0], qd);
        ck_assert_msg(fabs(ydot[1] - qdd) <= 1e-13 * (1 + fabs(qdd)), "q'' %g vs %g", ydot[1],
                      qdd);
        double r[3], axr[3], Rr[9], RI[9], Mg[9], Ma[3], axMa[3], ref[6];
        for (int i = 0; i < 3; ++i) r[i] = -d * (cos(q) * ez[i] + sin(q) * axez[i]);
        cross3(a, r, axr);
        rodrigues(a, q, Rr);
        m3_mul(Rr, b.I, RI);
        m3_mul_t(RI, Rr, Mg);
        m3_vec(Mg, a, Ma);
        cross3(a, Ma, axMa);
        for (int i = 0; i < 3; ++i) {
            ref[i] = b.m * (qdd * axr[i] - qd * qd * r[i]) + b.m * G_ACC * ez[i];
            ref[3 + i] = Ma[i] * qdd + qd * qd * axMa[i];
        }
        ck_assert_msg(reldiff(6, Fq, ref) <= 1e-12, "pivot reaction: %g", reldiff(6, Fq, ref));
        double rxf[3];
        cross3(r, Fq, rxf);
        double about_axis = (Fq[3] + rxf[0]) * a[0] + (Fq[4] + rxf[1]) * a[1] +
                            (Fq[5] + rxf[2]) * a[2];
        ck_assert_msg(fabs(about_axis) <= 1e-13 * maxabs(6, ref), "hinge moment %g", about_axis);
        /* the pendulum at rest hanging down carries exactly its weight */
        if (q == 0.0 && qd == 0.0) ck_assert_double_eq_tol(Fq[2], b.m * G_ACC, 1e-12);
    }
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 4-DOF maneuvering                                                         */

typedef struct {
    double m, B, b[3], T[2];
} ship_t;

/* gravity and buoyancy B at the centre of buoyancy (body offset b from C),
 * a thrust (T, 0) at C; the moment about C is (R b) x (0, 0, B). */
static void ship_loads(const ship_t *s, const double *R, double *F)
{
    double rb[3], up[3] = {0, 0, s->B};
    m3_vec(R, s->b, rb);
    F[0] = s->T[0];
    F[1] = s->T[1];
    F[2] = s->B - s->m * G_ACC;
    cross3(rb, up, F + 3);
}

/* Hand calculation (pitch theta0 = 0, z = z0, P = C). R = Rz(psi) Rx(phi),
 * omega = phi' e_phi + psi' e_z; body rates (Rx^T applied):
 *   p = phi', q = psi' sin phi, r = psi' cos phi,
 *   p' = phi'', q' = psi'' s + psi' phi' c, r' = psi'' c - psi' phi' s.
 * The only moment the constraints can exert is nu e_theta (e_theta = Rz e_y,
 * body components (0, c, -s)). Euler's equations in body axes,
 *   Ixx p' + (Izz - Iyy) q r = n_x,
 *   Iyy q' + (Ixx - Izz) r p = n_y + nu c,
 *   Izz r' + (Iyy - Ixx) p q = n_z - nu s,
 * give phi'' from the first and (psi'', nu) from the 2 x 2 system
 *   [Iyy s  -c; Izz c  s] [psi''; nu] = [n_y - Iyy psi' phi' c - (Ixx - Izz) r p;
 *                                        n_z + Izz psi' phi' s - (Iyy - Ixx) p q].
 * Surge and sway: m x'' = T_x, m y'' = T_y. The heave constraint holds the
 * unbalanced weight: f_q = (0, 0, m g - B). */
/* z-x-z rotation Rz(a) Rx(b) Rz(c), multiplied out here */
static void euler_zxz_matrix(double a, double b, double c, double *R)
{
    double Ra[9] = {cos(a), sin(a), 0, -sin(a), cos(a), 0, 0, 0, 1};
    double Rb[9] = {1, 0, 0, 0, cos(b), sin(b), 0, -sin(b), cos(b)};
    double Rc[9] = {cos(c), sin(c), 0, -sin(c), cos(c), 0, 0, 0, 1};
    double T[9];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            T[i + 3 * j] = 0.0;
            for (int l = 0; l < 3; ++l) T[i + 3 * j] += Ra[i + 3 * l] * Rb[l + 3 * j];
        }
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            R[i + 3 * j] = 0.0;
            for (int l = 0; l < 3; ++l) R[i + 3 * j] += T[i + 3 * l] * Rc[l + 3 * j];
        }
}

/* cdyn_rigid_euler_zxz: the same R as the classical angles, the same
 * angular velocity as their rates (omega = a' e_z + b' Rz(a) e_x +
 * c' Rz(a) Rx(b) e_z), in place too; the pitch singularity refused. */
START_TEST(classical_euler_angles_convert_to_the_fixed_point_coordinates)
{
    const double cases[][6] = {{0.3, 0.5, -1.2, 0.7, -0.2, 9.0},
                               {-2.0, 2.5, 0.4, 1.5, 0.3, -4.0},
                               {1.0, 0.01, 2.0, -0.3, 0.8, 0.5}};
    for (int c = 0; c < 3; ++c) {
        const double *z = cases[c], *zr = cases[c] + 3;
        double q[3], qd[3], R[9], Rq[9];
        ck_assert_int_eq(cdyn_rigid_euler_zxz(z, zr, q, qd), CDYN_OK);
        euler_zxz_matrix(z[0], z[1], z[2], R);
        euler_zyx(q[0], q[1], q[2], Rq);
        ck_assert_double_le(reldiff(9, Rq, R), 1e-14);
        double w[3] = {zr[1] * cos(z[0]) + zr[2] * sin(z[1]) * sin(z[0]),
                       zr[1] * sin(z[0]) - zr[2] * sin(z[1]) * cos(z[0]),
                       zr[0] + zr[2] * cos(z[1])};
        cdyn_rigid_preset_params prm = {.origin = {0, 0, 0}};
        cdyn_rigid_kinematics k;
        ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FIXED_POINT, &prm, 0.0, q, qd, &k),
                         CDYN_OK);
        double wq[3] = {0, 0, 0};
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) wq[i] += k.J_R[i + 3 * j] * qd[j];
        ck_assert_double_le(reldiff(3, wq, w), 1e-13);
        double both[6] = {z[0], z[1], z[2], zr[0], zr[1], zr[2]}; /* in place */
        ck_assert_int_eq(cdyn_rigid_euler_zxz(both, both + 3, both, both + 3), CDYN_OK);
        for (int i = 0; i < 3; ++i) ck_assert(both[i] == q[i] && both[3 + i] == qd[i]);
    }
    double sing[3] = {0.3, 1.5707963267948966, 1.5707963267948966}, rate[3] = {1, 1, 1};
    double q[3] = {7, 7, 7}, qd[3] = {7, 7, 7};
    ck_assert_int_eq(cdyn_rigid_euler_zxz(sing, rate, q, qd), CDYN_ERR_SINGULAR);
    ck_assert(q[0] == 7.0 && qd[0] == 7.0);
    /* finite rates whose z-y-x rates overflow: refused, not returned */
    double zxz[3] = {0.1, 0.5, 0.2}, huge[3] = {1e308, 1e308, 1e308};
    ck_assert_int_eq(cdyn_rigid_euler_zxz(zxz, huge, q, qd), CDYN_ERR_NONFINITE);
    ck_assert(q[0] == 7.0 && qd[0] == 7.0 && qd[2] == 7.0);
}
END_TEST

/* A heavy symmetric top on a ball joint in steady precession. Inertia about
 * C diag(A0, A0, C3), C on the symmetry axis at l from the joint P, mass m,
 * gravity -g e_z; z-x-z angles (precession a, nutation b, spin c) with b
 * fixed, a' = W and c' = s constant. The classical condition (moments about
 * P, A = A0 + m l^2): m g l = W (C3 w3 - A W cos b), w3 = s + W cos b,
 * gives s for chosen b and W. Then, by hand:
 *  - omega' = W e_z x omega (the axis e3 turns about e_z at W, and omega =
 *    W e_z + s e3);
 *  - C moves on a horizontal circle: a_C = W e_z x (W e_z x r_C), so the
 *    joint force is f = m a_C + m g e_z;
 *  - a ball joint carries no moment about P (cdyn_rigid_load_about_p). */
START_TEST(heavy_top_in_steady_precession)
{
    const double m = 2.0, g = 9.81, l = 0.15, A0 = 0.012, C3 = 0.02;
    const double nutations[] = {0.3, 1.0, 2.2}, W = 1.7;
    for (int c = 0; c < 3; ++c) {
        double b = nutations[c], A = A0 + m * l * l;
        double w3 = (m * g * l / W + A * W * cos(b)) / C3, s = w3 - W * cos(b);
        double zxz[3] = {0.4, b, -0.9}, rate[3] = {W, 0.0, s}, q[3], qd[3];
        ck_assert_int_eq(cdyn_rigid_euler_zxz(zxz, rate, q, qd), CDYN_OK);
        cdyn_rigid_preset_params prm = {.origin = {0.5, -0.2, 1.0}};
        cdyn_rigid_kinematics k;
        ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FIXED_POINT, &prm, 0.0, q, qd, &k),
                         CDYN_OK);
        cdyn_rigid *rb = cdyn_rigid_create(3, NULL);
        double I[9] = {A0, 0, 0, 0, A0, 0, 0, 0, C3}, r_pc[3] = {0, 0, l};
        ck_assert_int_eq(cdyn_rigid_set_body(rb, m, I, 3, r_pc), CDYN_OK);
        double F_i[6] = {0, 0, -m * g, 0, 0, 0}, qdd[3], F_q[6], F_p[6];
        ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F_i, qdd, F_q), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_load_about_p(rb, &k, F_q, F_p), CDYN_OK);
        double R[9], e3[3], w[3], wd[3] = {0, 0, 0}, wd_hand[3], rc[3];
        euler_zxz_matrix(zxz[0], zxz[1], zxz[2], R);
        for (int i = 0; i < 3; ++i) {
            e3[i] = R[i + 6];
            w[i] = (i == 2 ? W : 0.0) + s * e3[i];
            rc[i] = l * e3[i];
            wd[i] = k.L_R[i];
            for (int j = 0; j < 3; ++j) wd[i] += k.J_R[i + 3 * j] * qdd[j];
        }
        wd_hand[0] = -W * w[1], wd_hand[1] = W * w[0], wd_hand[2] = 0.0;
        double scale = W * fabs(s);
        for (int i = 0; i < 3; ++i)
            ck_assert_msg(fabs(wd[i] - wd_hand[i]) <= 1e-12 * scale,
                          "nutation %g: omega'[%d] %.15g vs %.15g", b, i, wd[i], wd_hand[i]);
        /* a_C = W e_z x (W e_z x r_C) = -W^2 (r_Cx, r_Cy, 0) */
        double f_hand[3] = {-m * W * W * rc[0], -m * W * W * rc[1], m * g};
        for (int i = 0; i < 3; ++i)
            ck_assert_msg(fabs(F_q[i] - f_hand[i]) <= 1e-12 * m * g, "joint force[%d] %.15g vs %.15g",
                          i, F_q[i], f_hand[i]);
        for (int i = 3; i < 6; ++i) ck_assert_double_le(fabs(F_p[i]), 1e-12 * m * g * l);
        double in_place[6]; /* F_p may be F */
        memcpy(in_place, F_q, sizeof in_place);
        ck_assert_int_eq(cdyn_rigid_load_about_p(rb, &k, in_place, in_place), CDYN_OK);
        ck_assert(memcmp(in_place, F_p, sizeof in_place) == 0);
        /* and about C it is r_CP x f: not zero */
        ck_assert_double_gt(fabs(F_q[3]) + fabs(F_q[4]), 1e-3 * m * g * l);
        cdyn_rigid_free(rb);
    }
}
END_TEST

START_TEST(maneuver4_holds_heave_and_pitch_against_unbalanced_loads)
{
    const double Ixx = 400, Iyy = 1500, Izz = 1700;
    body_t body = {.m = 1200, .I = {Ixx, 0, 0, 0, Iyy, 0, 0, 0, Izz}};
    ship_t s = {.m = body.m, .B = 1.08 * body.m * G_ACC, .b = {-0.3, 0.05, 0.4}, .T = {300, -150}};
    cdyn_rigid_preset_params p = {.z0 = -0.5, .theta0 = 0.0};
    cdyn_rigid *rb = cdyn_rigid_create(4, NULL);
    ck_assert_int_eq(cdyn_rigid_set_body(rb, body.m, body.I, 3, NULL), CDYN_OK);
    const double states[][8] = {{0, 0, 0, 0, 0, 0, 0, 0},
                                {1, 2, 0.2, 0.7, 0.3, -0.1, 0.5, -0.4},
                                {-3, 0.5, -0.35, 2.1, 1.0, 0.4, -0.8, 0.9},
                                {0.2, -1, 0.6, -2.5, -2.0, 0.0, 1.2, 1.5}};
    for (size_t c = 0; c < sizeof states / sizeof states[0]; ++c) {
        const double *q = states[c], *qd = states[c] + 4;
        cdyn_rigid_kinematics k;
        double F[6], qdd[4], Fq[6];
        ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &p, 0.0, q, qd, &k),
                         CDYN_OK);
        ship_loads(&s, k.rotation, F);
        ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, qdd, Fq), CDYN_OK);
        /* hand calculation */
        double phi = q[2], psi = q[3], dphi = qd[2], dpsi = qd[3];
        double sf = sin(phi), cf = cos(phi);
        double up_b[3] = {0, s.B * sf, s.B * cf}, n[3]; /* buoyancy in body axes */
        cross3(s.b, up_b, n);
        double pp = dphi, qq = dpsi * sf, rr = dpsi * cf;
        double ddphi = (n[0] - (Izz - Iyy) * qq * rr) / Ixx;
        double r1 = n[1] - Iyy * dpsi * dphi * cf - (Ixx - Izz) * rr * pp;
        double r2 = n[2] + Izz * dpsi * dphi * sf - (Iyy - Ixx) * pp * qq;
        double det = Iyy * sf * sf + Izz * cf * cf;
        double ddpsi = (r1 * sf + r2 * cf) / det, nu = (Iyy * sf * r2 - Izz * cf * r1) / det;
        double qdd_ref[4] = {s.T[0] / s.m, s.T[1] / s.m, ddphi, ddpsi};
        double Fq_ref[6] = {0, 0, s.m * G_ACC - s.B, -nu * sin(psi), nu * cos(psi), 0};
        ck_assert_msg(reldiff(4, qdd, qdd_ref) <= 1e-12, "state %zu q'': %g", c,
                      reldiff(4, qdd, qdd_ref));
        ck_assert_msg(reldiff(6, Fq, Fq_ref) <= 1e-12, "state %zu F_q: %g", c,
                      reldiff(6, Fq, Fq_ref));
        if (c == 0) { /* at rest, upright: pitch moment B b_x, no roll */
            ck_assert_double_eq_tol(Fq[4], s.B * s.b[0], 1e-9 * s.B);
            ck_assert_double_eq_tol(Fq[2], s.m * G_ACC - s.B, 1e-9 * s.B);
        }
    }
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planar motion carriage, pure sway, r_PC != 0                              */

typedef struct {
    preset_user pu;
    double B, kz, kth;
} carriage_model;

static int carriage_loads(double t, const double *q, const double *qd,
                          const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    (void)t, (void)qd, (void)k;
    const carriage_model *cm = user;
    F_i[2] = cm->B - cm->pu.m * G_ACC - cm->kz * q[0];
    F_i[4] = -cm->kth * q[1];
    return 0;
}

static int carriage_model_motion(double t, const double *q, const double *qd,
                                 cdyn_rigid_kinematics *k, void *user)
{
    return preset_motion(t, q, qd, k, &((carriage_model *)user)->pu);
}


/* 3 x 3 solve by Cramer's rule in long double (A column-major). */
static void solve3_ld(const long double *A, const long double *b, long double *x)
{
    long double det = A[0] * (A[4] * A[8] - A[7] * A[5]) - A[3] * (A[1] * A[8] - A[7] * A[2]) +
                      A[6] * (A[1] * A[5] - A[4] * A[2]);
    for (int c = 0; c < 3; ++c) {
        long double B[9];
        for (int i = 0; i < 9; ++i) B[i] = A[i];
        for (int i = 0; i < 3; ++i) B[i + 3 * c] = b[i];
        x[c] = (B[0] * (B[4] * B[8] - B[7] * B[5]) - B[3] * (B[1] * B[8] - B[7] * B[2]) +
                B[6] * (B[1] * B[5] - B[4] * B[2])) /
               det;
    }
}

static void cross_ld(const long double *a, const long double *b, long double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static int top_gravity(double t, const double *q, const double *qdot,
                       const cdyn_rigid_kinematics *k, double *F, void *user)
{
    (void)t, (void)q, (void)qdot, (void)k, (void)user;
    for (int i = 0; i < 6; ++i) F[i] = 0.0;
    F[2] = -2.0 * 9.81;
    return 0;
}

/* A spinning top about a fixed point (FIXED_POINT: z-y-x angles), its
 * centre 0.1 m up the body z axis, near the pitch pi/2 where the angles
 * are singular (a gyroscope with its axis horizontal passes there): by
 * hand in long double, alpha = I_P^-1 (r x f - w x I_P w) about the fixed
 * point, and the angle rates' second derivatives from alpha in closed
 * form. Forming J^T Mbar J squared the angles' condition 1 / cos theta:
 * 1e-6 rad from pi/2, q'' was 1.3e-4 off with CDYN_OK. Asserted within
 * 1e-6 at 1e-5 and 1e-6 rad (measured 1.1e-8 and 7.9e-8: the least-squares
 * problem's cond^2 eps times the joint force's share). */
START_TEST(heavy_top_near_the_euler_singularity)
{
    const double m = 2.0, I[9] = {0.02, 0, 0, 0, 0.02, 0, 0, 0, 0.01}, rpc[3] = {0, 0, 0.1};
    const double deltas[2] = {1e-5, 1e-6};
    for (int d = 0; d < 2; ++d) {
        double y[6] = {0.4, 0.5 * PI - deltas[d], 0.7, 0.5, -0.3, 50.0}, yd[6];
        cdyn_rigid_preset_params pp;
        memset(&pp, 0, sizeof pp);
        cdyn_rigid *rb = cdyn_rigid_create(3, NULL);
        ck_assert_ptr_nonnull(rb);
        ck_assert_int_eq(cdyn_rigid_set_body(rb, m, I, 3, rpc), CDYN_OK);
        ck_assert_int_eq(
            cdyn_rigid_set_preset(rb, CDYN_RIGID_FIXED_POINT, &pp, top_gravity, NULL), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_OK);
        long double ph = y[0], th = y[1], ps = y[2], d0 = y[3], d1 = y[4], d2 = y[5];
        long double cf = cosl(ph), sf = sinl(ph), ct = cosl(th), st = sinl(th), cp = cosl(ps),
                    sp = sinl(ps);
        long double R[9] = {cp * ct,           sp * ct,           -st,
                            cp * st * sf - sp * cf, sp * st * sf + cp * cf, ct * sf,
                            cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf};
        long double w[3] = {ct * cp * d0 - sp * d1, ct * sp * d0 + cp * d1, -st * d0 + d2};
        long double LR[3] = {d0 * (-st * cp * d1 - ct * sp * d2) - d1 * cp * d2,
                             d0 * (-st * sp * d1 + ct * cp * d2) - d1 * sp * d2, -d0 * ct * d1};
        long double r[3], IP[9], Iw[3], wIw[3], rhs[3], al[3], f[3] = {0, 0, -m * 9.81L}, n[3];
        for (int i = 0; i < 3; ++i) r[i] = R[i] * rpc[0] + R[i + 3] * rpc[1] + R[i + 6] * rpc[2];
        long double rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                long double sum = 0;
                for (int a = 0; a < 3; ++a)
                    for (int b = 0; b < 3; ++b) sum += R[i + 3 * a] * I[a + 3 * b] * R[j + 3 * b];
                IP[i + 3 * j] = sum + m * ((i == j) * rr - r[i] * r[j]);
            }
        for (int i = 0; i < 3; ++i) Iw[i] = IP[i] * w[0] + IP[i + 3] * w[1] + IP[i + 6] * w[2];
        cross_ld(w, Iw, wIw);
        cross_ld(r, f, n);
        for (int i = 0; i < 3; ++i) rhs[i] = n[i] - wIw[i];
        solve3_ld(IP, rhs, al);
        long double a[3], qdd[3];
        for (int i = 0; i < 3; ++i) a[i] = al[i] - LR[i];
        qdd[0] = (cp * a[0] + sp * a[1]) / ct;
        qdd[1] = -sp * a[0] + cp * a[1];
        qdd[2] = a[2] + st * qdd[0];
        for (int i = 0; i < 3; ++i)
            ck_assert_msg(fabsl(yd[3 + i] - qdd[i]) <= 1e-6L * fabsl(qdd[i]),
                          "%g rad from pi/2: q''[%d] = %.15g, by hand %.15Lg", deltas[d], i,
                          yd[3 + i], qdd[i]);
        cdyn_rigid_free(rb);
    }
}
END_TEST

/* A body on a carriage at rest (CARRIAGE, phi0 = 0), its centre 1 m out
 * along the body x axis, with an inertia about C of rho m l^2 (a small bob
 * on a long arm), gravity along +z and a moment n = 10 rho m l^2 about y at
 * C. By hand (Lagrange, C at (l cos th, 0, z - l sin th)):
 *   (m l^2 sin^2 th + I) th'' = n - m l^2 cos th sin th th'^2,
 *   z'' = g + l cos th th'' - l sin th th'^2.
 * J^T Mbar J carries m l^2 + I, whose rounding loses I when it is 1e-12 of
 * m l^2: formed so, th'' was 1.8e-4 off at th = 0, with CDYN_OK. The
 * least-squares form (a QR of the mass-weighted J, its columns
 * equilibrated) keeps I: asserted within 1e-11 for rho = 1e-6 to 1e-12 at
 * th = 0 and 1e-3 (measured 2e-16 and 9e-14). */
static int carriage_at_rest(double t, double *pos, double *vel, double *acc, void *user)
{
    (void)t, (void)user;
    for (int i = 0; i < 3; ++i) pos[i] = vel[i] = acc[i] = 0.0;
    return 0;
}

static int arm_loads(double t, const double *q, const double *qdot,
                     const cdyn_rigid_kinematics *k, double *F, void *user)
{
    (void)t, (void)q, (void)qdot, (void)k;
    const double *n = user;
    for (int i = 0; i < 6; ++i) F[i] = 0.0;
    F[2] = 9.81; /* m g, m = 1 */
    F[4] = *n;
    return 0;
}

START_TEST(small_inertia_on_a_long_arm_keeps_its_own_rate)
{
    const double rhos[4] = {1e-6, 1e-9, 1e-11, 1e-12}, thetas[2] = {0.0, 1e-3};
    for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 4; ++c) {
            double Iy = rhos[c], n = 10.0 * Iy;
            double I[9] = {Iy, 0, 0, 0, Iy, 0, 0, 0, Iy}, r[3] = {1.0, 0.0, 0.0};
            cdyn_rigid_preset_params pp;
            memset(&pp, 0, sizeof pp);
            pp.carriage = carriage_at_rest;
            cdyn_rigid *rb = cdyn_rigid_create(2, NULL);
            ck_assert_ptr_nonnull(rb);
            ck_assert_int_eq(cdyn_rigid_set_body(rb, 1.0, I, 3, r), CDYN_OK);
            ck_assert_int_eq(cdyn_rigid_set_preset(rb, CDYN_RIGID_CARRIAGE, &pp, arm_loads, &n),
                             CDYN_OK);
            double th = thetas[a], thd = 0.5, y[4] = {0.0, th, 0.0, thd}, yd[4];
            ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_OK);
            long double s_ = sinl(th), c_ = cosl(th);
            long double thdd = (n - c_ * s_ * thd * thd) / (s_ * s_ + Iy);
            long double zdd = 9.81L + c_ * thdd - s_ * thd * thd;
            ck_assert_msg(fabsl(yd[3] - thdd) <= 1e-11 * fabsl(thdd) &&
                              fabsl(yd[2] - zdd) <= 1e-11 * fabsl(zdd),
                          "rho %g, theta %g: th'' %.15g (hand %.15Lg), z'' %.15g (hand %.15Lg)",
                          Iy, th, yd[3], thdd, yd[2], zdd);
            cdyn_rigid_free(rb);
        }
}
END_TEST

/* Hand calculation (phi0 = 0, psi_c = 0, x_c = 0, y_c = A sin wt): R = Ry(theta),
 * r = R r_PC = (rx, 0, rz) in the x-z plane, omega = theta' e_y (a principal
 * axis of M_g for a diagonal body inertia). The centre of mass accelerates by
 *   a_C = (0, y_c'', z'') + theta'' e_y x r - theta'^2 r
 *       = (theta'' rz - theta'^2 rx, y_c'', z'' - theta'' rx - theta'^2 rz).
 * Heave is free: m a_Cz = F_z. Pitch is free about P: the carriage moment
 * about P has no y part, n_qy = -(r x f_q)_y with f_q = m a_C - F, and
 * Iyy theta'' = n_y + n_qy; with (r x a_C)_y = theta'' (rx^2 + rz^2) - rx z''
 * and (r x F)_y = -rx F_z:
 *   [m  -m rx; -m rx  Iyy + m (rx^2 + rz^2)] [z''; theta''] = [F_z + m theta'^2 rz; n_y - rx F_z].
 * The carriage force f_q = m a_C - F (f_qy = m y_c'' imposes the sway), the
 * moment about C n_q = (0, Iyy theta'' - n_y, 0). */
START_TEST(pure_sway_carriage_force_matches_hand_calculation)
{
    const double Iyy = 30.0, rxb = 0.6, rzb = -0.25;
    body_t body = {.m = 80, .I = {5, 0, 0, 0, Iyy, 0, 0, 0, 28}, .r = {rxb, 0, rzb}};
    sway_t sw = {.amp = 0.5, .omega = 1.2};
    carriage_model cm = {.pu = {.preset = CDYN_RIGID_CARRIAGE, .m = body.m},
                         .B = 0.9 * body.m * G_ACC, .kz = 2000, .kth = 500};
    cm.pu.p.carriage = carriage_sway;
    cm.pu.p.carriage_user = &sw;
    cdyn_rigid *rb = make_rigid(2, &body);
    ck_assert_int_eq(cdyn_rigid_set_model(rb, carriage_model_motion, carriage_loads, &cm),
                     CDYN_OK);
    const double samples[][5] = {/* t, z, theta, z', theta' */
                                 {0.2, 0.05, 0.1, -0.3, 0.4},
                                 {0.9, -0.1, -0.25, 0.2, -0.6},
                                 {1.7, 0.0, 0.3, 0.0, 0.0},
                                 {2.6, 0.12, -0.05, 0.5, 1.1}};
    for (size_t c = 0; c < sizeof samples / sizeof samples[0]; ++c) {
        double t = samples[c][0], y[4], ydot[4], Fq[6];
        memcpy(y, samples[c] + 1, sizeof y);
        ck_assert_int_eq(cdyn_rigid_rhs(rb, t, y, ydot), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(rb, Fq), CDYN_OK);
        double z = y[0], th = y[1], dth = y[3], m = body.m;
        double rx = cos(th) * rxb + sin(th) * rzb, rz = -sin(th) * rxb + cos(th) * rzb;
        double Fz = cm.B - m * G_ACC - cm.kz * z, ny = -cm.kth * th;
        double K[4] = {m, -m * rx, -m * rx, Iyy + m * (rx * rx + rz * rz)};
        double rhs[2] = {Fz + m * dth * dth * rz, ny - rx * Fz};
        double det = K[0] * K[3] - K[2] * K[1];
        double ddz = (rhs[0] * K[3] - K[2] * rhs[1]) / det;
        double ddth = (K[0] * rhs[1] - K[1] * rhs[0]) / det;
        double ddyc = -sw.amp * sw.omega * sw.omega * sin(sw.omega * t);
        double aC[3] = {ddth * rz - dth * dth * rx, ddyc, ddz - ddth * rx - dth * dth * rz};
        double Fq_ref[6] = {m * aC[0], m * aC[1], m * aC[2] - Fz, 0, Iyy * ddth - ny, 0};
        double qdd_ref[2] = {ddz, ddth};
        ck_assert_double_eq(ydot[0], y[2]);
        ck_assert_double_eq(ydot[1], y[3]);
        ck_assert_msg(reldiff(2, ydot + 2, qdd_ref) <= 1e-12, "t = %g: q'' %g", t,
                      reldiff(2, ydot + 2, qdd_ref));
        ck_assert_msg(reldiff(6, Fq, Fq_ref) <= 1e-12, "t = %g: F_q %g", t,
                      reldiff(6, Fq, Fq_ref));
        /* the sway force is m y_c'' (no y load): it imposes the motion */
        ck_assert_double_eq_tol(Fq[1], m * ddyc, 1e-12 * fmax(1.0, fabs(m * ddyc)));
        /* and the carriage exerts no pitch moment about P */
        double r3[3] = {rx, 0, rz}, rxf[3];
        cross3(r3, Fq, rxf);
        ck_assert_msg(fabs(Fq[4] + rxf[1]) <= 1e-12 * maxabs(6, Fq_ref), "pitch moment at P");
    }
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Each preset = FREE + constraints, by a bordered solve written here        */

typedef struct {
    const char *name;
    cdyn_rigid_preset preset;
    cdyn_rigid_preset_params p;
    double t, q[6], qd[6];
    /* the same state in six coordinates and p linear constraints Phi d = c(t) */
    double d[6], dd[6];
    int p_rows;
    double Phi[36]; /* p x 6, leading dimension 6 */
    double s[6];    /* Phi d'' */
    double S[36];   /* f x 6, leading dimension 6: q'' = S d'' */
} equiv_t;

static void equiv_check(const equiv_t *e, const body_t *b, const double *F_i)
{
    int f = cdyn_rigid_preset_dof(e->preset), p = e->p_rows, N = 6 + p;
    ck_assert_int_eq(f + p, 6);
    cdyn_rigid *rb = make_rigid(f, b);
    cdyn_rigid_kinematics k, k6;
    double qdd[6], Fq[6];
    ck_assert_int_eq(cdyn_rigid_preset_eval(e->preset, &e->p, e->t, e->q, e->qd, &k), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, e->qd, F_i, qdd, Fq), CDYN_OK);
    /* FREE: A6 d'' + Phi^T mu = J6^T (F_i - Nbar6), Phi d'' = s */
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, e->t, e->d, e->dd, &k6),
                     CDYN_OK);
    double Mbar[36], Nbar[6], J[36], K[144] = {0}, x[12];
    reference_terms(b, 6, &k6, e->dd, Mbar, Nbar, J);
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) {
            double s = 0.0;
            for (int l = 0; l < 6; ++l) s += J[l + 6 * i] * Mbar[l + 6 * j];
            K[i + N * j] = s;
        }
        double s = 0.0;
        for (int l = 0; l < 6; ++l) s += J[l + 6 * i] * (F_i[l] - Nbar[l]);
        x[i] = s;
    }
    for (int r = 0; r < p; ++r) {
        for (int j = 0; j < 6; ++j) {
            K[(6 + r) + N * j] = e->Phi[r + 6 * j];
            K[j + N * (6 + r)] = e->Phi[r + 6 * j];
        }
        x[6 + r] = e->s[r];
    }
    ck_assert_int_eq(dense_solve(N, K, x), 0);
    double qdd_ref[6], Fq_ref[6];
    for (int i = 0; i < f; ++i) {
        qdd_ref[i] = 0.0;
        for (int j = 0; j < 6; ++j) qdd_ref[i] += e->S[i + 6 * j] * x[j];
    }
    for (int i = 0; i < 6; ++i) {
        Fq_ref[i] = Nbar[i] - F_i[i];
        for (int j = 0; j < 6; ++j) Fq_ref[i] += Mbar[i + 6 * j] * x[j];
    }
    ck_assert_msg(reldiff(f, qdd, qdd_ref) <= 1e-10, "%s: q'' %g", e->name,
                  reldiff(f, qdd, qdd_ref));
    ck_assert_msg(loads_diff(Fq, Fq_ref, F_i) <= 1e-10, "%s: F_q %g", e->name,
                  loads_diff(Fq, Fq_ref, F_i));
    cdyn_rigid_free(rb);
}

/* Phi rows selecting the coordinates idx (d'' prescribed as s). */
static void equiv_select(equiv_t *e, int count, const int *idx, const double *s)
{
    e->p_rows = count;
    for (int r = 0; r < count; ++r) {
        e->Phi[r + 6 * idx[r]] = 1.0;
        e->s[r] = s ? s[r] : 0.0;
    }
}

START_TEST(presets_agree_with_free_body_plus_constraints)
{
    tu_rng g;
    tu_rng_seed(&g, 2024);
    for (int trial = 0; trial < 4; ++trial) {
        body_t b;
        random_body(&g, &b);
        double F[6];
        for (int i = 0; i < 6; ++i) F[i] = 10.0 * tu_uniform(&g);
        double u[6], v[6];
        for (int i = 0; i < 6; ++i) u[i] = tu_uniform(&g), v[i] = tu_uniform(&g);

        /* FREE itself: no constraints */
        equiv_t e = {.name = "FREE", .preset = CDYN_RIGID_FREE, .t = 0.3};
        for (int i = 0; i < 6; ++i) {
            e.q[i] = e.d[i] = u[i];
            e.qd[i] = e.dd[i] = 2.0 * v[i];
            e.S[i + 6 * i] = 1.0;
        }
        equiv_check(&e, &b, F);

        /* ROTATION about each lab axis: the matching Euler angle is free */
        for (int ax = 0; ax < 3; ++ax) {
            equiv_t r = {.name = "ROTATION", .preset = CDYN_RIGID_ROTATION, .t = 0.0};
            r.p.axis[ax] = 1.0;
            for (int i = 0; i < 3; ++i) r.p.origin[i] = r.d[i] = u[i];
            int eul = ax == 0 ? 3 : ax == 1 ? 4 : 5, fixed[5], nf = 0;
            r.q[0] = r.d[eul] = 2.0 * u[3];
            r.qd[0] = r.dd[eul] = 3.0 * v[3];
            for (int i = 0; i < 6; ++i)
                if (i != eul) fixed[nf++] = i;
            equiv_select(&r, 5, fixed, NULL);
            r.S[6 * eul] = 1.0;
            equiv_check(&r, &b, F);
        }

        /* TRANSLATION along a general axis: P - o stays on a, no rotation */
        equiv_t tr = {.name = "TRANSLATION", .preset = CDYN_RIGID_TRANSLATION, .t = 0.0};
        double a[3] = {0.3 + u[0], -0.5, 0.8 + 0.5 * u[1]}, na = norm3(a);
        memcpy(tr.p.axis, a, sizeof a);
        for (int i = 0; i < 3; ++i) a[i] /= na, tr.p.origin[i] = v[i];
        tr.q[0] = u[2], tr.qd[0] = v[3];
        for (int i = 0; i < 3; ++i) tr.d[i] = v[i] + u[2] * a[i], tr.dd[i] = v[3] * a[i];
        double n1[3], n2[3], ex[3] = {1, 0, 0}, ey[3] = {0, 1, 0};
        cross3(a, fabs(a[0]) < 0.9 ? ex : ey, n1);
        cross3(a, n1, n2);
        int rot[3] = {3, 4, 5};
        equiv_select(&tr, 3, rot, NULL);
        for (int j = 0; j < 3; ++j) {
            tr.Phi[3 + 6 * j] = n1[j];
            tr.Phi[4 + 6 * j] = n2[j];
            tr.S[6 * j] = a[j];
        }
        tr.p_rows = 5;
        equiv_check(&tr, &b, F);

        /* MANEUVER4: z and theta fixed */
        equiv_t mv = {.name = "MANEUVER4", .preset = CDYN_RIGID_MANEUVER4, .t = 0.0};
        mv.p.z0 = u[4], mv.p.theta0 = 0.6 * v[4];
        double q4[4] = {u[0], u[1], 1.5 * u[2], 3.0 * u[3]}, qd4[4] = {v[0], v[1], v[2], v[3]};
        memcpy(mv.q, q4, sizeof q4);
        memcpy(mv.qd, qd4, sizeof qd4);
        double d6[6] = {q4[0], q4[1], mv.p.z0, q4[2], mv.p.theta0, q4[3]};
        double dd6[6] = {qd4[0], qd4[1], 0, qd4[2], 0, qd4[3]};
        memcpy(mv.d, d6, sizeof d6);
        memcpy(mv.dd, dd6, sizeof dd6);
        int zth[2] = {2, 4}, free4[4] = {0, 1, 3, 5};
        equiv_select(&mv, 2, zth, NULL);
        for (int i = 0; i < 4; ++i) mv.S[i + 6 * free4[i]] = 1.0;
        equiv_check(&mv, &b, F);

        /* CARRIAGE: x, y, psi prescribed, phi = phi0 */
        equiv_t cr = {.name = "CARRIAGE", .preset = CDYN_RIGID_CARRIAGE, .t = 1.0 + u[5]};
        cr.p.phi0 = 0.5 * u[4];
        cr.p.carriage = carriage_general;
        double pos[3], vel[3], acc[3];
        carriage_general(cr.t, pos, vel, acc, NULL);
        cr.q[0] = u[2], cr.q[1] = 0.8 * v[5], cr.qd[0] = v[0], cr.qd[1] = 2.0 * v[1];
        double dc[6] = {pos[0], pos[1], cr.q[0], cr.p.phi0, cr.q[1], pos[2]};
        double ddc[6] = {vel[0], vel[1], cr.qd[0], 0, cr.qd[1], vel[2]};
        memcpy(cr.d, dc, sizeof dc);
        memcpy(cr.dd, ddc, sizeof ddc);
        int presc[4] = {0, 1, 3, 5};
        double sacc[4] = {acc[0], acc[1], 0.0, acc[2]};
        equiv_select(&cr, 4, presc, sacc);
        cr.S[0 + 6 * 2] = 1.0;
        cr.S[1 + 6 * 4] = 1.0;
        equiv_check(&cr, &b, F);
    }
}
END_TEST

/* The other presets through cdyn_rigid_set_preset are the same computation
 * as a motion callback calling cdyn_rigid_preset_eval: bit for bit. A
 * carriage callback that fails gives CDYN_ERR_CALLBACK with code 1; the
 * model layers replace each other. */
START_TEST(presets_through_set_preset_are_the_callback_route)
{
    body_t b = {.m = 4.0,
                .I = {2.0, 0.1, 0.0, 0.1, 3.0, 0.05, 0.0, 0.05, 4.0},
                .r = {0.2, -0.1, 0.3}};
    preset_user cases[3];
    memset(cases, 0, sizeof cases);
    cases[0].preset = CDYN_RIGID_MANEUVER4;
    cases[0].p.z0 = 0.5, cases[0].p.theta0 = 0.1;
    cases[1].preset = CDYN_RIGID_FIXED_POINT;
    cases[1].p.origin[0] = 1.0, cases[1].p.origin[2] = -2.0;
    cases[2].preset = CDYN_RIGID_CARRIAGE;
    static sway_t sway = {.amp = 0.3, .omega = 1.7};
    cases[2].p.phi0 = 0.05, cases[2].p.carriage = carriage_sway;
    cases[2].p.carriage_user = &sway;
    for (int c = 0; c < 3; ++c) {
        int f = cdyn_rigid_preset_dof(cases[c].preset);
        cases[c].m = b.m;
        cdyn_rigid *cb = make_rigid(f, &b), *pr = make_rigid(f, &b);
        ck_assert_int_eq(cdyn_rigid_set_model(cb, preset_motion, gravity_loads, &cases[c]),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_set_preset(pr, cases[c].preset, &cases[c].p, gravity_loads,
                                               &cases[c]),
                         CDYN_OK);
        double y[8] = {0.1, -0.2, 0.3, 0.2, 0.5, -0.4, 0.3, 0.1}, ya[8], yb[8];
        ck_assert_int_eq(cdyn_rigid_rhs(cb, 0.7, y, ya), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_rhs(pr, 0.7, y, yb), CDYN_OK);
        ck_assert(memcmp(ya, yb, sizeof(double) * 2 * (size_t)f) == 0);
        double Fa[6], Fb[6];
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(cb, Fa), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_last_constraint_loads(pr, Fb), CDYN_OK);
        ck_assert(memcmp(Fa, Fb, sizeof Fa) == 0);
        if (cases[c].preset == CDYN_RIGID_CARRIAGE) {
            cdyn_rigid_preset_params bad = cases[c].p;
            bad.carriage = carriage_fails;
            ck_assert_int_eq(cdyn_rigid_set_preset(pr, CDYN_RIGID_CARRIAGE, &bad, NULL, NULL),
                             CDYN_OK);
            ck_assert_int_eq(cdyn_rigid_rhs(pr, 0.7, y, yb), CDYN_ERR_CALLBACK);
            ck_assert_int_eq(cdyn_rigid_callback_code(pr), 1);
            ck_assert(strstr(cdyn_rigid_last_error(pr), "carriage") != NULL);
            /* the callback route again, then the preset */
            ck_assert_int_eq(cdyn_rigid_set_model(pr, preset_motion, gravity_loads, &cases[c]),
                             CDYN_OK);
            ck_assert_int_eq(cdyn_rigid_rhs(pr, 0.7, y, yb), CDYN_OK);
            ck_assert(memcmp(ya, yb, sizeof(double) * 2 * (size_t)f) == 0);
        }
        /* refused: another preset's size, unknown preset, NULL params; the model stays */
        ck_assert_int_eq(cdyn_rigid_set_preset(pr, CDYN_RIGID_FREE, NULL, NULL, NULL),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_set_preset(pr, (cdyn_rigid_preset)42, NULL, NULL, NULL),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_set_preset(pr, cases[c].preset, NULL, NULL, NULL),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_rhs(pr, 0.7, y, yb), CDYN_OK);
        ck_assert(memcmp(ya, yb, sizeof(double) * 2 * (size_t)f) == 0);
        cdyn_rigid_free(cb);
        cdyn_rigid_free(pr);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* User kinematics: the projected equations assembled here                   */

static void random_kinematics(tu_rng *g, int f, cdyn_rigid_kinematics *k)
{
    for (int i = 0; i < 18; ++i) { /* columns past f must be ignored */
        k->J_T[i] = i < 3 * f ? tu_uniform(g) : NAN;
        k->J_R[i] = i < 3 * f ? tu_uniform(g) : NAN;
    }
    for (int i = 0; i < 3; ++i) {
        k->L_T[i] = tu_uniform(g);
        k->L_R[i] = tu_uniform(g);
        k->v0[i] = tu_uniform(g);
        k->v0_dot[i] = tu_uniform(g);
        k->w0[i] = tu_uniform(g);
        k->w0_dot[i] = tu_uniform(g);
        k->position[i] = tu_uniform(g);
    }
    euler_zyx(3 * tu_uniform(g), 1.4 * tu_uniform(g), 3 * tu_uniform(g), k->rotation);
}

START_TEST(accelerations_solve_the_projected_equations)
{
    tu_rng g;
    tu_rng_seed(&g, 77);
    for (int f = 1; f <= 6; ++f)
        for (int trial = 0; trial < 5; ++trial) {
            body_t b;
            random_body(&g, &b);
            cdyn_rigid_kinematics k;
            random_kinematics(&g, f, &k);
            double qd[6], F[6], qdd[6], Fq[6], qdd_ref[6], Fq_ref[6];
            for (int i = 0; i < 6; ++i) qd[i] = tu_uniform(&g), F[i] = 5.0 * tu_uniform(&g);
            cdyn_rigid *rb = make_rigid(f, &b);
            double *out = dbuf((size_t)f), *fq = dbuf(6);
            ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, out, fq), CDYN_OK);
            ck_assert(dbuf_guards_intact(out, (size_t)f) && dbuf_guards_intact(fq, 6));
            memcpy(qdd, out, sizeof(double) * (size_t)f);
            memcpy(Fq, fq, sizeof Fq);
            reference_solve(&b, f, &k, qd, F, qdd_ref, Fq_ref);
            ck_assert_msg(reldiff(f, qdd, qdd_ref) <= 1e-10, "f = %d: q'' %g", f,
                          reldiff(f, qdd, qdd_ref));
            ck_assert_msg(loads_diff(Fq, Fq_ref, F) <= 1e-10, "f = %d: F_q %g", f,
                          loads_diff(Fq, Fq_ref, F));
            /* ideal constraints: J^T F_q = 0 (relative to |J| times the loads) */
            double Mbar[36], Nbar[6], J[36], load = fmax(maxabs(6, Fq), maxabs(6, F));
            reference_terms(&b, f, &k, qd, Mbar, Nbar, J);
            for (int c = 0; c < f; ++c) {
                double s = 0.0, sc = 0.0;
                for (int i = 0; i < 6; ++i) {
                    s += J[i + 6 * c] * Fq[i];
                    sc += fabs(J[i + 6 * c]) * load;
                }
                ck_assert_msg(fabs(s) <= 1e-13 * sc, "f = %d: J^T F_q[%d] = %g", f, c, s);
            }
            /* F_q is optional; velocities */
            double qdd2[6], v[3], w[3];
            ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, qdd2, NULL), CDYN_OK);
            ck_assert(memcmp(qdd2, qdd, sizeof(double) * (size_t)f) == 0);
            ck_assert_int_eq(cdyn_rigid_velocities(rb, &k, qd, v, w), CDYN_OK);
            for (int i = 0; i < 3; ++i) {
                double vr = k.v0[i], wr = k.w0[i];
                for (int c = 0; c < f; ++c) {
                    vr += k.J_T[i + 3 * c] * qd[c];
                    wr += k.J_R[i + 3 * c] * qd[c];
                }
                ck_assert_double_eq_tol(v[i], vr, 1e-14 * 8);
                ck_assert_double_eq_tol(w[i], wr, 1e-14 * 8);
            }
            dbuf_free(out);
            dbuf_free(fq);
            cdyn_rigid_free(rb);
        }
}
END_TEST

START_TEST(rhs_may_overwrite_its_input)
{
    body_t b = {.m = 2.0, .I = {1, 0, 0, 0, 2, 0, 0, 0, 3}, .r = {0.1, 0.2, -0.3}};
    cdyn_rigid *rb = make_rigid(6, &b);
    ck_assert_int_eq(cdyn_rigid_set_model(rb, free_motion, NULL, NULL), CDYN_OK);
    double y[12] = {1, 2, 3, 0.1, 0.2, 0.3, 0.5, -0.5, 0.2, 1.0, -0.4, 0.8}, y2[12], ydot[12];
    memcpy(y2, y, sizeof y);
    ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y2, y2), CDYN_OK);
    ck_assert(memcmp(y2, ydot, sizeof y2) == 0);
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Singular coordinates                                                      */

START_TEST(euler_singularity_is_reported_never_nan)
{
    body_t b = {.m = 2.0, .I = {1, 0.1, 0, 0.1, 2, 0, 0, 0, 3}, .r = {0.1, 0, 0}};
    cdyn_rigid *rb = make_rigid(6, &b), *rb4 = make_rigid(4, &b);
    double F[6] = {1, 2, 3, 4, 5, 6}, qd[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    double *qdd = dbuf(6), *Fq = dbuf(6);
    /* at pi/2 - 1e-7 dpotrf itself succeeds (relative pivot ~ cos^2 = 1e-14):
     * the scale-free pivot test must catch it */
    const double thetas[] = {PI / 2, -PI / 2, PI / 2 - 1e-9, PI / 2 - 1e-7, -PI / 2 + 1e-7};
    for (int c = 0; c < 5; ++c) {
        double q[6] = {0, 0, 0, 0.3, thetas[c], -0.2};
        cdyn_rigid_kinematics k;
        ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0, q, qd, &k), CDYN_OK);
        ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, qdd, Fq), CDYN_ERR_SINGULAR);
        ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "not positive definite"));
        ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "cdyn_rigid_accelerations"));
        ck_assert(dbuf_untouched(qdd, 6) && dbuf_untouched(Fq, 6));
    }
    /* near, but usable */
    double q[6] = {0, 0, 0, 0.3, PI / 2 - 0.05, -0.2};
    cdyn_rigid_kinematics k;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0, q, qd, &k), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, qdd, Fq), CDYN_OK);
    /* MANEUVER4 with the pitch fixed at -pi/2: roll and yaw axes coincide */
    cdyn_rigid_preset_params p = {.z0 = 0, .theta0 = -PI / 2};
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &p, 0, q, qd, &k), CDYN_OK);
    dbuf_reset(qdd, 6);
    dbuf_reset(Fq, 6);
    ck_assert_int_eq(cdyn_rigid_accelerations(rb4, &k, qd, F, qdd, Fq), CDYN_ERR_SINGULAR);
    ck_assert(dbuf_untouched(qdd, 6) && dbuf_untouched(Fq, 6));
    /* a coordinate that moves nothing */
    memset(&k, 0, sizeof k);
    euler_zyx(0.1, 0.2, 0.3, k.rotation);
    k.J_T[0] = k.J_T[4] = k.J_T[8] = 1.0; /* x, y, z; column 3 stays zero */
    ck_assert_int_eq(cdyn_rigid_accelerations(rb4, &k, qd, F, qdd, Fq), CDYN_ERR_SINGULAR);
    ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb4), "leading minor 4"));
    ck_assert(dbuf_untouched(qdd, 6) && dbuf_untouched(Fq, 6));
    /* the objects stay usable */
    q[4] = 0.2;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0, q, qd, &k), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_accelerations(rb, &k, qd, F, qdd, Fq), CDYN_OK);
    ck_assert(dbuf_guards_intact(qdd, 6) && dbuf_guards_intact(Fq, 6));
    dbuf_free(qdd);
    dbuf_free(Fq);
    cdyn_rigid_free(rb);
    cdyn_rigid_free(rb4);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad input                                                                 */

static const body_t good_body = {.m = 2.0,
                                 .I = {1.0, 0.1, 0.0, 0.1, 2.0, 0.2, 0.0, 0.2, 3.0},
                                 .r = {0.1, -0.1, 0.2}};


/* Finite inputs whose results overflow: v_P = J_T q' with J_T(0, 0) = 10
 * and q' = 1e308, and F_p's moment r_PC x f with r_PC = 1e300 m and
 * f = 1e308 N, and the FREE preset's |q'|^2 terms at q' = 1e200. Asserts:
 * CDYN_ERR_NONFINITE, a message that says "overflows" (the preset has no
 * object to hold one), the outputs untouched; never CDYN_OK with an Inf. */
START_TEST(velocities_and_moments_that_overflow_are_refused)
{
    const body_t b = {1.0, {1, 0, 0, 0, 1, 0, 0, 0, 1}, {1e300, 0.0, 0.0}};
    cdyn_rigid *rb = make_rigid(6, &b);
    cdyn_rigid_preset_params p;
    memset(&p, 0, sizeof p);
    double q[6] = {0}, qd[6] = {1e308, 0, 0, 0, 0, 0};
    cdyn_rigid_kinematics k;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, &p, 0.0, q, qd, &k), CDYN_OK);
    k.J_T[0] = 10.0;
    double v[3] = {7, 7, 7}, w[3] = {7, 7, 7};
    ck_assert_int_eq(cdyn_rigid_velocities(rb, &k, qd, v, w), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "overflows"));
    for (int i = 0; i < 3; ++i) ck_assert(v[i] == 7.0 && w[i] == 7.0);
    const double F[6] = {0.0, 1e308, 0.0, 0.0, 0.0, 0.0};
    double Fp[6] = {7, 7, 7, 7, 7, 7};
    ck_assert_int_eq(cdyn_rigid_load_about_p(rb, &k, F, Fp), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "overflows"));
    for (int i = 0; i < 6; ++i) ck_assert(Fp[i] == 7.0);
    /* the presets' velocity products |q'|^2 overflow at q' = 1e200 */
    const double qbig[6] = {1e200, 1e200, 1e200, 1e200, 1e200, 1e200};
    cdyn_rigid_kinematics before = k;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, &p, 0.0, q, qbig, &k),
                     CDYN_ERR_NONFINITE);
    ck_assert(memcmp(&before, &k, sizeof k) == 0);
    cdyn_rigid_free(rb);
}
END_TEST

/* A fixed instant for f = 2 and its result, to prove objects stay usable. */
typedef struct {
    cdyn_rigid_kinematics k;
    double qd[2], F[6], qdd[2], Fq[6];
} instant_t;

static void instant_init(instant_t *in)
{
    memset(in, 0, sizeof *in);
    double q[2] = {0.3, -0.2};
    in->qd[0] = 0.5, in->qd[1] = -1.0;
    cdyn_rigid_preset_params p = {.phi0 = 0.2, .carriage = carriage_general};
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &p, 0.7, q, in->qd, &in->k),
                     CDYN_OK);
    for (int i = 0; i < 6; ++i) in->F[i] = i - 2.5;
    reference_solve(&good_body, 2, &in->k, in->qd, in->F, in->qdd, in->Fq);
}

static void still_correct(cdyn_rigid *rb, const instant_t *in, const char *after)
{
    double qdd[2], Fq[6];
    ck_assert_msg(cdyn_rigid_accelerations(rb, &in->k, in->qd, in->F, qdd, Fq) == CDYN_OK,
                  "after %s: %s", after, cdyn_rigid_last_error(rb));
    ck_assert_msg(reldiff(2, qdd, in->qdd) <= 1e-12 && reldiff(6, Fq, in->Fq) <= 1e-12,
                  "after %s: result changed", after);
}

#define EXPECT_FAIL(call, status, rb, word)                                                    \
    do {                                                                                       \
        ck_assert_int_eq((call), (status));                                                    \
        ck_assert_msg(strstr(cdyn_rigid_last_error(rb), (word)) != NULL,                       \
                      "message \"%s\" lacks \"%s\"", cdyn_rigid_last_error(rb), (word));       \
    } while (0)

START_TEST(create_and_null_object)
{
    const int bad[] = {0, -1, 7, 100};
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; ++c) {
        cdyn_status st = CDYN_OK;
        ck_assert_ptr_null(cdyn_rigid_create(bad[c], &st));
        ck_assert_int_eq(st, CDYN_ERR_ARG);
        ck_assert_ptr_null(cdyn_rigid_create(bad[c], NULL));
    }
    for (int f = 1; f <= 6; ++f) {
        cdyn_rigid *rb = cdyn_rigid_create(f, NULL);
        ck_assert_ptr_nonnull(rb);
        ck_assert_str_eq(cdyn_rigid_last_error(rb), "");
        ck_assert_int_eq(cdyn_rigid_callback_code(rb), 0);
        cdyn_rigid_free(rb);
    }
    cdyn_rigid_free(NULL);
    instant_t in;
    instant_init(&in);
    double *qdd = dbuf(2), *Fq = dbuf(6), *v = dbuf(3), *w = dbuf(3), y[4] = {0}, *yd = dbuf(4);
    ck_assert_int_eq(cdyn_rigid_set_body(NULL, 1, good_body.I, 3, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_accelerations(NULL, &in.k, in.qd, in.F, qdd, Fq), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_velocities(NULL, &in.k, in.qd, v, w), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_set_model(NULL, free_motion, NULL, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_rhs(NULL, 0.0, y, yd), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_last_constraint_loads(NULL, Fq), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_callback_code(NULL), 0);
    ck_assert_ptr_nonnull(cdyn_rigid_last_error(NULL));
    ck_assert(dbuf_untouched(qdd, 2) && dbuf_untouched(Fq, 6) && dbuf_untouched(v, 3) &&
              dbuf_untouched(w, 3) && dbuf_untouched(yd, 4));
    dbuf_free(qdd);
    dbuf_free(Fq);
    dbuf_free(v);
    dbuf_free(w);
    dbuf_free(yd);
}
END_TEST

START_TEST(set_body_rejects_bad_bodies_and_keeps_the_old_one)
{
    instant_t in;
    instant_init(&in);
    cdyn_rigid *rb = make_rigid(2, &good_body);
    still_correct(rb, &in, "setup");
    const double *I = good_body.I, *r = good_body.r;
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, NULL, 3, r), CDYN_ERR_ARG, rb, "inertia");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, I, 2, r), CDYN_ERR_ARG, rb, "ldi");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 0.0, I, 3, r), CDYN_ERR_ARG, rb, "mass");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, -1.0, I, 3, r), CDYN_ERR_ARG, rb, "mass");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, NAN, I, 3, r), CDYN_ERR_NONFINITE, rb, "mass");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, INFINITY, I, 3, r), CDYN_ERR_NONFINITE, rb, "mass");
    double Inan[9];
    memcpy(Inan, I, sizeof Inan);
    Inan[5] = NAN;
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Inan, 3, r), CDYN_ERR_NONFINITE, rb, "inertia(2, 1)");
    double rnan[3] = {0, INFINITY, 0};
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, I, 3, rnan), CDYN_ERR_NONFINITE, rb, "r_pc[1]");
    double Iskew[9];
    memcpy(Iskew, I, sizeof Iskew);
    Iskew[3] += 1e-9; /* (0, 1) */
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Iskew, 3, r), CDYN_ERR_SINGULAR, rb, "symmetric");
    double Iindef[9] = {1, 2, 0, 2, 1, 0, 0, 0, 1}, Ineg[9] = {1, 0, 0, 0, -1, 0, 0, 0, 1};
    double Izero[9] = {0};
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Iindef, 3, r), CDYN_ERR_SINGULAR, rb,
                "positive definite");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Ineg, 3, r), CDYN_ERR_SINGULAR, rb,
                "positive definite");
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Izero, 3, r), CDYN_ERR_SINGULAR, rb,
                "positive definite");
    /* singular (null vector (1, 1, 1)) with pivots that pass the pivot test:
     * the Laplacian of a ring of weights 1, 1e-8, 1e-12 (accepted before) */
    double Iring[9] = {1 + 1e-12, -1, -1e-12, -1, 1 + 1e-8, -1e-8, -1e-12, -1e-8, 1e-8 + 1e-12};
    EXPECT_FAIL(cdyn_rigid_set_body(rb, 2.0, Iring, 3, r), CDYN_ERR_SINGULAR, rb,
                "positive definite");
    still_correct(rb, &in, "bad bodies");
    /* leading dimension: NaN padding is not read; tiny asymmetry is accepted */
    double Ipad[12];
    for (int j = 0; j < 3; ++j) {
        for (int i = 0; i < 3; ++i) Ipad[i + 4 * j] = I[i + 3 * j];
        Ipad[3 + 4 * j] = NAN;
    }
    Ipad[1] *= 1.0 + 1e-14;
    ck_assert_int_eq(cdyn_rigid_set_body(rb, good_body.m, Ipad, 4, r), CDYN_OK);
    still_correct(rb, &in, "padded inertia");
    /* r_pc NULL means zero */
    cdyn_rigid *r0 = cdyn_rigid_create(2, NULL);
    body_t b0 = good_body;
    memset(b0.r, 0, sizeof b0.r);
    ck_assert_int_eq(cdyn_rigid_set_body(r0, b0.m, b0.I, 3, NULL), CDYN_OK);
    double qdd[2], Fq[6], qdd_ref[2], Fq_ref[6];
    ck_assert_int_eq(cdyn_rigid_accelerations(r0, &in.k, in.qd, in.F, qdd, Fq), CDYN_OK);
    reference_solve(&b0, 2, &in.k, in.qd, in.F, qdd_ref, Fq_ref);
    ck_assert(reldiff(2, qdd, qdd_ref) <= 1e-12 && reldiff(6, Fq, Fq_ref) <= 1e-12);
    cdyn_rigid_free(r0);
    cdyn_rigid_free(rb);
}
END_TEST

START_TEST(accelerations_and_velocities_reject_bad_input_and_write_nothing)
{
    instant_t in;
    instant_init(&in);
    double *qdd = dbuf(2), *Fq = dbuf(6), *v = dbuf(3), *w = dbuf(3);
    cdyn_rigid *nobody = cdyn_rigid_create(2, NULL);
    EXPECT_FAIL(cdyn_rigid_accelerations(nobody, &in.k, in.qd, in.F, qdd, Fq), CDYN_ERR_ARG,
                nobody, "no body");
    /* velocities need no body */
    ck_assert_int_eq(cdyn_rigid_velocities(nobody, &in.k, in.qd, NULL, NULL), CDYN_OK);
    cdyn_rigid_free(nobody);
    cdyn_rigid *rb = make_rigid(2, &good_body);
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, NULL, in.qd, in.F, qdd, Fq), CDYN_ERR_ARG, rb, "k");
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, &in.k, NULL, in.F, qdd, Fq), CDYN_ERR_ARG, rb,
                "qdot");
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, &in.k, in.qd, NULL, qdd, Fq), CDYN_ERR_ARG, rb,
                "F_i");
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, &in.k, in.qd, in.F, NULL, Fq), CDYN_ERR_ARG, rb,
                "qdd");
    /* NaN in every field the accelerations read */
    struct {
        size_t offset;
        int index;
        const char *name;
    } fields[] = {
        {offsetof(cdyn_rigid_kinematics, J_T), 4, "J_T(1, 1)"},
        {offsetof(cdyn_rigid_kinematics, J_R), 2, "J_R(2, 0)"},
        {offsetof(cdyn_rigid_kinematics, rotation), 8, "rotation(2, 2)"},
        {offsetof(cdyn_rigid_kinematics, L_T), 1, "L_T[1]"},
        {offsetof(cdyn_rigid_kinematics, L_R), 0, "L_R[0]"},
        {offsetof(cdyn_rigid_kinematics, v0_dot), 2, "v0_dot[2]"},
        {offsetof(cdyn_rigid_kinematics, w0), 1, "w0[1]"},
        {offsetof(cdyn_rigid_kinematics, w0_dot), 0, "w0_dot[0]"},
    };
    for (size_t c = 0; c < sizeof fields / sizeof fields[0]; ++c) {
        cdyn_rigid_kinematics bad = in.k;
        double *field = (double *)((char *)&bad + fields[c].offset);
        field[fields[c].index] = c % 2 ? NAN : -INFINITY;
        EXPECT_FAIL(cdyn_rigid_accelerations(rb, &bad, in.qd, in.F, qdd, Fq),
                    CDYN_ERR_NONFINITE, rb, fields[c].name);
    }
    /* a rotation that is none: 2 R (an unnormalized quaternion's matrix
     * gave q'' off by the scaling, with CDYN_OK), a reflection, and R off
     * by 1e-9 in one entry; R off by 1e-13 is accepted */
    for (int c = 0; c < 4; ++c) {
        cdyn_rigid_kinematics bad = in.k;
        if (c == 0)
            for (int i = 0; i < 9; ++i) bad.rotation[i] *= 2.0;
        if (c == 1)
            for (int i = 0; i < 3; ++i) bad.rotation[3 * i] = -bad.rotation[3 * i];
        if (c >= 2) bad.rotation[4] += c == 2 ? 1e-9 : 1e-13;
        if (c < 3) {
            EXPECT_FAIL(cdyn_rigid_accelerations(rb, &bad, in.qd, in.F, qdd, Fq), CDYN_ERR_ARG,
                        rb, "not a rotation");
        } else {
            double qdd_ok[2], Fq_ok[6]; /* (qdd, Fq must stay untouched for the checks below) */
            ck_assert_int_eq(cdyn_rigid_accelerations(rb, &bad, in.qd, in.F, qdd_ok, Fq_ok),
                             CDYN_OK);
        }
    }
    double qdnan[2] = {0.5, NAN}, Fnan[6] = {0, 0, 0, 0, 0, NAN};
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, &in.k, qdnan, in.F, qdd, Fq), CDYN_ERR_NONFINITE,
                rb, "qdot[1]");
    EXPECT_FAIL(cdyn_rigid_accelerations(rb, &in.k, in.qd, Fnan, qdd, Fq), CDYN_ERR_NONFINITE, rb,
                "F_i[5]");
    ck_assert(dbuf_untouched(qdd, 2) && dbuf_untouched(Fq, 6));
    /* finite inputs whose result overflows give no Inf */
    cdyn_rigid *light = cdyn_rigid_create(1, NULL);
    ck_assert_int_eq(cdyn_rigid_set_body(light, 1e-10, good_body.I, 3, NULL), CDYN_OK);
    cdyn_rigid_preset_params along_x = {.axis = {1, 0, 0}};
    cdyn_rigid_kinematics kx;
    double zero = 0.0, Fhuge[6] = {1e300, 0, 0, 0, 0, 0};
    ck_assert_int_eq(
        cdyn_rigid_preset_eval(CDYN_RIGID_TRANSLATION, &along_x, 0, &zero, &zero, &kx), CDYN_OK);
    EXPECT_FAIL(cdyn_rigid_accelerations(light, &kx, &zero, Fhuge, qdd, Fq), CDYN_ERR_NONFINITE,
                light, "overflow");
    ck_assert(dbuf_untouched(qdd, 2) && dbuf_untouched(Fq, 6));
    cdyn_rigid_free(light);
    still_correct(rb, &in, "bad accelerations");
    /* velocities */
    EXPECT_FAIL(cdyn_rigid_velocities(rb, NULL, in.qd, v, w), CDYN_ERR_ARG, rb, "k");
    EXPECT_FAIL(cdyn_rigid_velocities(rb, &in.k, NULL, v, w), CDYN_ERR_ARG, rb, "qdot");
    EXPECT_FAIL(cdyn_rigid_velocities(rb, &in.k, qdnan, v, w), CDYN_ERR_NONFINITE, rb, "qdot[1]");
    cdyn_rigid_kinematics bad = in.k;
    bad.v0[2] = NAN;
    EXPECT_FAIL(cdyn_rigid_velocities(rb, &bad, in.qd, v, w), CDYN_ERR_NONFINITE, rb, "v0[2]");
    bad = in.k;
    bad.J_R[5] = INFINITY;
    EXPECT_FAIL(cdyn_rigid_velocities(rb, &bad, in.qd, v, w), CDYN_ERR_NONFINITE, rb, "J_R(2, 1)");
    ck_assert(dbuf_untouched(v, 3) && dbuf_untouched(w, 3));
    ck_assert_int_eq(cdyn_rigid_velocities(rb, &in.k, in.qd, v, NULL), CDYN_OK);
    ck_assert(dbuf_guards_intact(v, 3) && dbuf_untouched(w, 3));
    still_correct(rb, &in, "bad velocities");
    dbuf_free(qdd);
    dbuf_free(Fq);
    dbuf_free(v);
    dbuf_free(w);
    cdyn_rigid_free(rb);
}
END_TEST

static void sentinel_kinematics(cdyn_rigid_kinematics *k)
{
    double *d = (double *)k;
    for (size_t i = 0; i < sizeof *k / sizeof(double); ++i) d[i] = SENTINEL;
}

static int kinematics_untouched(const cdyn_rigid_kinematics *k)
{
    cdyn_rigid_kinematics s;
    sentinel_kinematics(&s);
    return memcmp(&s, k, sizeof s) == 0;
}

START_TEST(preset_eval_rejects_bad_input_and_writes_nothing)
{
    ck_assert_int_eq(sizeof(cdyn_rigid_kinematics) % sizeof(double), 0);
    cdyn_rigid_kinematics k;
    sentinel_kinematics(&k);
    const double q[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, qd[6] = {1, 2, 3, 4, 5, 6};
    double qnan[6] = {0.1, 0.2, NAN, 0.4, 0.5, 0.6};
    cdyn_rigid_preset_params good = {.axis = {0, 0, 2}, .origin = {1, 2, 3}, .z0 = 1,
                                     .theta0 = 0.1, .phi0 = 0.2, .carriage = carriage_general};
    const cdyn_rigid_preset all[] = {CDYN_RIGID_FREE, CDYN_RIGID_ROTATION, CDYN_RIGID_TRANSLATION,
                                     CDYN_RIGID_MANEUVER4, CDYN_RIGID_CARRIAGE};
    const int dofs[] = {6, 1, 1, 4, 2};
    for (int c = 0; c < 5; ++c) {
        cdyn_rigid_preset pr = all[c];
        ck_assert_int_eq(cdyn_rigid_preset_dof(pr), dofs[c]);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, 0, q, qd, NULL), CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, 0, NULL, qd, &k), CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, 0, q, NULL, &k), CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, NAN, q, qd, &k), CDYN_ERR_NONFINITE);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, INFINITY, q, qd, &k),
                         CDYN_ERR_NONFINITE);
        /* NaN in the last coordinate / rate the preset reads */
        double qb[6], qdb[6];
        memcpy(qb, q, sizeof qb);
        memcpy(qdb, qd, sizeof qdb);
        qb[dofs[c] - 1] = NAN;
        qdb[dofs[c] - 1] = INFINITY;
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, 0, qb, qd, &k), CDYN_ERR_NONFINITE);
        ck_assert_int_eq(cdyn_rigid_preset_eval(pr, &good, 0, q, qdb, &k), CDYN_ERR_NONFINITE);
        if (pr != CDYN_RIGID_FREE)
            ck_assert_int_eq(cdyn_rigid_preset_eval(pr, NULL, 0, q, qd, &k), CDYN_ERR_ARG);
        ck_assert(kinematics_untouched(&k));
    }
    /* entries past f are not read */
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_ROTATION, &good, 0, qnan, qnan, &k),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &good, 0, qnan, qnan, &k),
                     CDYN_OK);
    sentinel_kinematics(&k);
    /* unknown presets */
    ck_assert_int_eq(cdyn_rigid_preset_dof((cdyn_rigid_preset)6), -1);
    ck_assert_int_eq(cdyn_rigid_preset_dof((cdyn_rigid_preset)-1), -1);
    ck_assert_int_eq(cdyn_rigid_preset_eval((cdyn_rigid_preset)6, &good, 0, q, qd, &k),
                     CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_preset_eval((cdyn_rigid_preset)-1, &good, 0, q, qd, &k),
                     CDYN_ERR_ARG);
    /* parameters */
    cdyn_rigid_preset_params bad = good;
    memset(bad.axis, 0, sizeof bad.axis);
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_ROTATION, &bad, 0, q, qd, &k),
                     CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_TRANSLATION, &bad, 0, q, qd, &k),
                     CDYN_ERR_ARG);
    bad = good;
    bad.axis[1] = NAN;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_ROTATION, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    bad = good;
    bad.origin[0] = INFINITY;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_TRANSLATION, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    bad = good;
    bad.z0 = NAN;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    bad = good;
    bad.theta0 = -INFINITY;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    bad = good;
    bad.phi0 = NAN;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    bad = good;
    bad.carriage = NULL;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &bad, 0, q, qd, &k),
                     CDYN_ERR_ARG);
    bad.carriage = carriage_fails;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &bad, 0, q, qd, &k),
                     CDYN_ERR_CALLBACK);
    bad.carriage = carriage_nan;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &bad, 0, q, qd, &k),
                     CDYN_ERR_NONFINITE);
    ck_assert(kinematics_untouched(&k));
    /* unused fields are ignored: a NaN axis does not matter to MANEUVER4 */
    bad = good;
    bad.axis[0] = NAN;
    bad.carriage = NULL;
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, &bad, 0, q, qd, &k), CDYN_OK);
    /* a tiny or huge axis is normalized without underflow or overflow */
    double kk[2][3];
    const double scales[2] = {1e-300, 1e300};
    for (int c = 0; c < 2; ++c) {
        bad = good;
        bad.axis[0] = 3 * scales[c], bad.axis[1] = 4 * scales[c], bad.axis[2] = 0;
        ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_TRANSLATION, &bad, 0, q, qd, &k),
                         CDYN_OK);
        memcpy(kk[c], k.J_T, sizeof kk[c]);
        ck_assert_double_eq_tol(kk[c][0], 0.6, 1e-15);
        ck_assert_double_eq_tol(kk[c][1], 0.8, 1e-15);
    }
}
END_TEST

/* Model callbacks that fail or misbehave on demand. */
typedef struct {
    int motion_code, loads_code, motion_nan, loads_nan, singular;
} mood_t;

/* f = 2: q = (x, roll about e_x); "singular" removes the roll column */
static int moody_motion(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                        void *user)
{
    (void)t, (void)qd;
    const mood_t *m = user;
    if (m->motion_code) return m->motion_code;
    k->position[0] = q[0];
    rot_x(q[1], k->rotation);
    k->J_T[0] = 1.0;
    k->J_R[3] = m->singular ? 0.0 : 1.0;
    if (m->motion_nan) k->L_R[2] = NAN;
    return 0;
}

static int moody_loads(double t, const double *q, const double *qd,
                       const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    (void)t, (void)q, (void)qd, (void)k;
    const mood_t *m = user;
    if (m->loads_code) return m->loads_code;
    F_i[0] = 1.0;
    F_i[4] = 0.5;
    if (m->loads_nan) F_i[3] = NAN;
    return 0;
}

START_TEST(rhs_reports_callback_failures_and_bad_state)
{
    mood_t mood = {0};
    double y[4] = {0.1, 0.2, 0.3, 0.4}, *yd = dbuf(4), *Fq = dbuf(6), good_yd[4], good_Fq[6];
    cdyn_rigid *rb = cdyn_rigid_create(2, NULL);
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_ERR_ARG, rb, "no model");
    EXPECT_FAIL(cdyn_rigid_set_model(rb, NULL, moody_loads, &mood), CDYN_ERR_ARG, rb, "motion");
    ck_assert_int_eq(cdyn_rigid_set_model(rb, moody_motion, moody_loads, &mood), CDYN_OK);
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_ERR_ARG, rb, "no body");
    EXPECT_FAIL(cdyn_rigid_last_constraint_loads(rb, Fq), CDYN_ERR_ARG, rb, "no successful");
    ck_assert_int_eq(cdyn_rigid_set_body(rb, good_body.m, good_body.I, 3, good_body.r), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, good_yd), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_last_constraint_loads(rb, good_Fq), CDYN_OK);
    /* a failed set_model keeps the model */
    EXPECT_FAIL(cdyn_rigid_set_model(rb, NULL, NULL, NULL), CDYN_ERR_ARG, rb, "motion");
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, NULL, yd), CDYN_ERR_ARG, rb, "y");
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, y, NULL), CDYN_ERR_ARG, rb, "ydot");
    EXPECT_FAIL(cdyn_rigid_last_constraint_loads(rb, NULL), CDYN_ERR_ARG, rb, "F_q");
    EXPECT_FAIL(cdyn_rigid_rhs(rb, NAN, y, yd), CDYN_ERR_NONFINITE, rb, "t = ");
    double ynan[4] = {0.1, 0.2, 0.3, INFINITY};
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, ynan, yd), CDYN_ERR_NONFINITE, rb, "y[3]");
    mood.motion_code = -4;
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.5, y, yd), CDYN_ERR_CALLBACK, rb, "motion callback returned -4");
    ck_assert_int_eq(cdyn_rigid_callback_code(rb), -4);
    mood.motion_code = 0;
    mood.loads_code = 9;
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.5, y, yd), CDYN_ERR_CALLBACK, rb, "loads callback returned 9");
    ck_assert_int_eq(cdyn_rigid_callback_code(rb), 9);
    mood.loads_code = 0;
    mood.motion_nan = 1;
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.5, y, yd), CDYN_ERR_NONFINITE, rb, "motion callback");
    ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "L_R[2]"));
    mood.motion_nan = 0;
    mood.loads_nan = 1;
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.5, y, yd), CDYN_ERR_NONFINITE, rb, "loads callback");
    ck_assert_ptr_nonnull(strstr(cdyn_rigid_last_error(rb), "F_i[3]"));
    mood.loads_nan = 0;
    /* coordinates that lose rank */
    mood.singular = 1;
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.5, y, yd), CDYN_ERR_SINGULAR, rb, "not positive definite");
    mood.singular = 0;
    ck_assert(dbuf_untouched(yd, 4));
    /* the loads of the last successful rhs survive the failures */
    ck_assert_int_eq(cdyn_rigid_last_constraint_loads(rb, Fq), CDYN_OK);
    ck_assert(dbuf_guards_intact(Fq, 6) && memcmp(Fq, good_Fq, sizeof good_Fq) == 0);
    /* and the object still works */
    ck_assert_int_eq(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_OK);
    ck_assert(dbuf_guards_intact(yd, 4) && memcmp(yd, good_yd, sizeof good_yd) == 0);
    /* a model whose motion callback forwards a failing carriage */
    preset_user u = {.preset = CDYN_RIGID_CARRIAGE, .m = good_body.m};
    u.p.carriage = carriage_fails;
    ck_assert_int_eq(cdyn_rigid_set_model(rb, preset_motion, NULL, &u), CDYN_OK);
    dbuf_reset(yd, 4);
    EXPECT_FAIL(cdyn_rigid_rhs(rb, 0.0, y, yd), CDYN_ERR_CALLBACK, rb, "motion callback");
    ck_assert_int_eq(cdyn_rigid_callback_code(rb), (int)CDYN_ERR_CALLBACK);
    ck_assert(dbuf_untouched(yd, 4));
    dbuf_free(yd);
    dbuf_free(Fq);
    cdyn_rigid_free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* No allocation after create                                                */

START_TEST(per_instant_calls_do_not_allocate)
{
    instant_t in;
    instant_init(&in);
    cdyn_rigid *rb = cdyn_rigid_create(2, NULL), *r6 = cdyn_rigid_create(6, NULL);
    mood_t mood = {0};
    body_t b = good_body;
    double y[4] = {0.1, 0.2, 0.3, 0.4}, yd[4], Fq[6], qdd[6], v[3], w[3], bad_I[9] = {0};
    double q[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, qd[6] = {1, 2, 3, 4, 5, 6};
    cdyn_rigid_preset_params p = {.axis = {1, 1, 0}, .z0 = 1, .carriage = carriage_general};
    cdyn_rigid_kinematics k;
    cdyn_status st[64];
    int n = 0;
    alloc_count_start();
    st[n++] = cdyn_rigid_set_body(rb, b.m, b.I, 3, b.r);
    st[n++] = cdyn_rigid_set_body(r6, b.m, b.I, 3, NULL);
    st[n++] = cdyn_rigid_accelerations(rb, &in.k, in.qd, in.F, qdd, Fq);
    st[n++] = cdyn_rigid_velocities(rb, &in.k, in.qd, v, w);
    for (int c = 0; c < 5; ++c)
        st[n++] = cdyn_rigid_preset_eval((cdyn_rigid_preset)c, &p, 0.3, q, qd, &k);
    st[n++] = cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0.3, q, qd, &k);
    st[n++] = cdyn_rigid_accelerations(r6, &k, qd, in.F, qdd, NULL);
    st[n++] = cdyn_rigid_set_model(rb, moody_motion, moody_loads, &mood);
    st[n++] = cdyn_rigid_rhs(rb, 0.0, y, yd);
    st[n++] = cdyn_rigid_last_constraint_loads(rb, Fq);
    const int nok = n;
    st[n++] = cdyn_rigid_set_body(rb, b.m, bad_I, 3, b.r);
    st[n++] = cdyn_rigid_set_body(rb, -1, b.I, 3, b.r);
    mood.singular = 1;
    st[n++] = cdyn_rigid_rhs(rb, 0.0, y, yd);
    mood.singular = 0;
    mood.motion_code = 1;
    st[n++] = cdyn_rigid_rhs(rb, 0.0, y, yd);
    st[n++] = cdyn_rigid_accelerations(rb, &in.k, NULL, in.F, qdd, Fq);
    long calls = alloc_count_stop();
    ck_assert_int_eq(calls, 0);
    for (int i = 0; i < nok; ++i) ck_assert_msg(st[i] == CDYN_OK, "call %d: %d", i, (int)st[i]);
    for (int i = nok; i < n; ++i) ck_assert_msg(st[i] != CDYN_OK, "error call %d passed", i);
    cdyn_rigid_free(rb);
    cdyn_rigid_free(r6);
}
END_TEST

static Suite *rigid_suite(void)
{
    Suite *s = suite_create("rigid");

    TCase *kin = tcase_create("preset_kinematics");
    tcase_set_timeout(kin, 120);
    tcase_add_test(kin, free_preset_matches_finite_differences);
    tcase_add_test(kin, maneuver4_preset_matches_finite_differences);
    tcase_add_test(kin, fixed_point_preset_matches_finite_differences);
    tcase_add_test(kin, rotation_and_translation_presets_match_finite_differences);
    tcase_add_test(kin, carriage_preset_matches_finite_differences);
    suite_add_tcase(s, kin);

    TCase *dyn = tcase_create("dynamics");
    tcase_set_timeout(dyn, 300);
    tcase_add_test(dyn, torque_free_body_conserves_momentum_and_energy);
    tcase_add_test(dyn, axisymmetric_body_precesses_at_the_analytic_rate);
    tcase_add_test(dyn, free_preset_is_the_general_free_motion);
    tcase_add_test(dyn, free_preset_spin_about_a_principal_axis);
    tcase_add_test(dyn, presets_through_set_preset_are_the_callback_route);
    tcase_add_test(dyn, one_axis_rotation_is_the_compound_pendulum);
    tcase_add_test(dyn, classical_euler_angles_convert_to_the_fixed_point_coordinates);
    tcase_add_test(dyn, heavy_top_in_steady_precession);
    tcase_add_test(dyn, maneuver4_holds_heave_and_pitch_against_unbalanced_loads);
    tcase_add_test(dyn, pure_sway_carriage_force_matches_hand_calculation);
    tcase_add_test(dyn, small_inertia_on_a_long_arm_keeps_its_own_rate);
    tcase_add_test(dyn, heavy_top_near_the_euler_singularity);
    tcase_add_test(dyn, presets_agree_with_free_body_plus_constraints);
    tcase_add_test(dyn, accelerations_solve_the_projected_equations);
    tcase_add_test(dyn, rhs_may_overwrite_its_input);
    tcase_add_test(dyn, euler_singularity_is_reported_never_nan);
    suite_add_tcase(s, dyn);

    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, create_and_null_object);
    tcase_add_test(bad, set_body_rejects_bad_bodies_and_keeps_the_old_one);
    tcase_add_test(bad, accelerations_and_velocities_reject_bad_input_and_write_nothing);
    tcase_add_test(bad, preset_eval_rejects_bad_input_and_writes_nothing);
    tcase_add_test(bad, velocities_and_moments_that_overflow_are_refused);
    tcase_add_test(bad, rhs_reports_callback_failures_and_bad_state);
    suite_add_tcase(s, bad);

    TCase *alloc = tcase_create("allocation");
    tcase_set_timeout(alloc, 120);
    tcase_add_test(alloc, per_instant_calls_do_not_allocate);
    suite_add_tcase(s, alloc);
    return s;
}

int main(void)
{
    return tu_run_suite(rigid_suite());
}
