/* Ready-made motions of a constrained rigid body (THEORY T5.4): each is a
 * choice of P(q, t), R(q, t) and the derivative terms of T5.1.
 *
 * Euler angles: R = Rz(psi) Ry(theta) Rx(phi). Differentiating,
 *   R' R^T = psi' [e_z]x + theta' [Rz e_y]x + phi' [Rz Ry e_x]x,
 * so omega = e_phi phi' + e_theta theta' + e_psi psi' with
 *   e_phi = Rz(psi) Ry(theta) e_x = (c_th c_ps, c_th s_ps, -s_th),
 *   e_theta = Rz(psi) e_y = (-s_ps, c_ps, 0),  e_psi = e_z.
 * The columns depend on q only (theta, psi), so L_R = (J_R q')_q q' =
 * d/dt(e_phi) phi' + d/dt(e_theta) theta' with
 *   d/dt e_phi = (-s_th c_ps th' - c_th s_ps ps', -s_th s_ps th' + c_th c_ps ps', -c_th th'),
 *   d/dt e_theta = (-c_ps ps', -s_ps ps', 0). */
#include "cdyn/rigid.h"
#include "rigid_internal.h"

#include <math.h>
#include <string.h>

int cdyn_rigid_preset_dof(cdyn_rigid_preset preset)
{
    switch (preset) {
    case CDYN_RIGID_FREE: return 6;
    case CDYN_RIGID_ROTATION: return 1;
    case CDYN_RIGID_TRANSLATION: return 1;
    case CDYN_RIGID_MANEUVER4: return 4;
    case CDYN_RIGID_CARRIAGE: return 2;
    case CDYN_RIGID_FIXED_POINT: return 3;
    }
    return -1;
}

static int all_finite(int n, const double *x)
{
    for (int i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int kinematics_finite(const cdyn_rigid_kinematics *k)
{
    return all_finite(18, k->J_T) && all_finite(18, k->J_R) && all_finite(3, k->L_T) &&
           all_finite(3, k->L_R) && all_finite(3, k->v0) && all_finite(3, k->v0_dot) &&
           all_finite(3, k->w0) && all_finite(3, k->w0_dot) && all_finite(9, k->rotation) &&
           all_finite(3, k->position);
}

static void set3(double *v, double x, double y, double z)
{
    v[0] = x;
    v[1] = y;
    v[2] = z;
}

/* R = Rz(psi) Ry(theta) Rx(phi), column-major. */
static void euler_rotation(double phi, double theta, double psi, double *R)
{
    double cf = cos(phi), sf = sin(phi), ct = cos(theta), st = sin(theta), cp = cos(psi),
           sp = sin(psi);
    set3(R, cp * ct, sp * ct, -st);
    set3(R + 3, cp * st * sf - sp * cf, sp * st * sf + cp * cf, ct * sf);
    set3(R + 6, cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf);
}

/* e_phi = Rz(psi) Ry(theta) e_x */
static void e_phi(double theta, double psi, double *e)
{
    set3(e, cos(theta) * cos(psi), cos(theta) * sin(psi), -sin(theta));
}

/* The rotation by Euler angles a = (phi, theta, psi) with rates da: R,
 * the columns of J_R (3 x 3, ld 3, from J_R) and L_R. */
static void euler_motion(const double *a, const double *da, double *J_R, cdyn_rigid_kinematics *k)
{
    double th = a[1], ps = a[2], dph = da[0], dth = da[1], dps = da[2];
    double ct = cos(th), st = sin(th), cp = cos(ps), sp = sin(ps);
    euler_rotation(a[0], th, ps, k->rotation);
    e_phi(th, ps, J_R);
    set3(J_R + 3, -sp, cp, 0.0);
    set3(J_R + 6, 0.0, 0.0, 1.0);
    set3(k->L_R, dph * (-st * cp * dth - ct * sp * dps) - dth * cp * dps,
         dph * (-st * sp * dth + ct * cp * dps) - dth * sp * dps, -dph * ct * dth);
}

void cdyn__rigid_free_motion(const double *q, const double *qd, cdyn_rigid_kinematics *k)
{
    set3(k->position, q[0], q[1], q[2]);
    for (int i = 0; i < 3; ++i) k->J_T[i + 3 * i] = 1.0;
    euler_motion(q + 3, qd + 3, k->J_R + 9, k);
}

/* P fixed at origin: FREE without its translations */
static void fixed_point_motion(const double *origin, const double *q, const double *qd,
                               cdyn_rigid_kinematics *k)
{
    memcpy(k->position, origin, 3 * sizeof(double));
    euler_motion(q, qd, k->J_R, k);
}

/* z = z0, theta = theta0: q = (x, y, phi, psi); L_R = d/dt(e_phi) phi' at theta' = 0 */
static void maneuver4_motion(const cdyn_rigid_preset_params *p, const double *q,
                             const double *qd, cdyn_rigid_kinematics *k)
{
    double th = p->theta0, ps = q[3], dph = qd[2], dps = qd[3];
    set3(k->position, q[0], q[1], p->z0);
    euler_rotation(q[2], th, ps, k->rotation);
    set3(k->J_T, 1.0, 0.0, 0.0);
    set3(k->J_T + 3, 0.0, 1.0, 0.0);
    e_phi(th, ps, k->J_R + 6);
    set3(k->J_R + 9, 0.0, 0.0, 1.0);
    set3(k->L_R, -dph * dps * cos(th) * sin(ps), dph * dps * cos(th) * cos(ps), 0.0);
}

/* Rotation by q about the unit axis a (Rodrigues): R = cos q I + sin q [a]x
 * + (1 - cos q) a a^T; omega = a q', nothing else. */
static void rotation_motion(const double *a, const double *origin, double q,
                            cdyn_rigid_kinematics *k)
{
    double c = cos(q), s = sin(q), v = 1.0 - c;
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) k->rotation[i + 3 * j] = v * a[i] * a[j] + (i == j ? c : 0.0);
    k->rotation[1] += s * a[2]; /* (1, 0) */
    k->rotation[2] -= s * a[1]; /* (2, 0) */
    k->rotation[3] -= s * a[2]; /* (0, 1) */
    k->rotation[5] += s * a[0]; /* (2, 1) */
    k->rotation[6] += s * a[1]; /* (0, 2) */
    k->rotation[7] -= s * a[0]; /* (1, 2) */
    memcpy(k->position, origin, 3 * sizeof(double));
    memcpy(k->J_R, a, 3 * sizeof(double));
}

static void translation_motion(const double *a, const double *origin, double q,
                               cdyn_rigid_kinematics *k)
{
    for (int i = 0; i < 3; ++i) {
        k->position[i] = origin[i] + q * a[i];
        k->rotation[i + 3 * i] = 1.0;
    }
    memcpy(k->J_T, a, 3 * sizeof(double));
}

/* P = (x_c(t), y_c(t), z), R = Rz(psi_c(t)) Ry(theta) Rx(phi0), q = (z, theta):
 * v_P = e_z z' + v0, omega = Rz(psi_c) e_y theta' + psi_c' e_z; the only
 * velocity-product term is (dJ_R/dt) q' = psi_c' (-c_psi, -s_psi, 0) theta'. */
static void carriage_motion(double phi0, const double *pos, const double *vel,
                            const double *acc, const double *q, const double *qd,
                            cdyn_rigid_kinematics *k)
{
    double ps = pos[2], cp = cos(ps), sp = sin(ps);
    set3(k->position, pos[0], pos[1], q[0]);
    euler_rotation(phi0, q[1], ps, k->rotation);
    set3(k->J_T, 0.0, 0.0, 1.0);
    set3(k->J_R + 3, -sp, cp, 0.0);
    set3(k->v0, vel[0], vel[1], 0.0);
    set3(k->v0_dot, acc[0], acc[1], 0.0);
    set3(k->w0, 0.0, 0.0, vel[2]);
    set3(k->w0_dot, 0.0, 0.0, acc[2]);
    set3(k->L_R, -vel[2] * cp * qd[1], -vel[2] * sp * qd[1], 0.0);
}

cdyn_status cdyn__rigid_preset_check(cdyn_rigid_preset preset,
                                     const cdyn_rigid_preset_params *params)
{
    if (cdyn_rigid_preset_dof(preset) < 0) return CDYN_ERR_ARG;
    if (preset == CDYN_RIGID_FREE) return CDYN_OK;
    if (!params) return CDYN_ERR_ARG;
    switch (preset) {
    case CDYN_RIGID_MANEUVER4:
        return isfinite(params->z0) && isfinite(params->theta0) ? CDYN_OK : CDYN_ERR_NONFINITE;
    case CDYN_RIGID_ROTATION:
    case CDYN_RIGID_TRANSLATION: {
        if (!all_finite(3, params->axis) || !all_finite(3, params->origin))
            return CDYN_ERR_NONFINITE;
        const double *a = params->axis;
        return fmax(fabs(a[0]), fmax(fabs(a[1]), fabs(a[2]))) > 0.0 ? CDYN_OK : CDYN_ERR_ARG;
    }
    case CDYN_RIGID_FIXED_POINT:
        return all_finite(3, params->origin) ? CDYN_OK : CDYN_ERR_NONFINITE;
    case CDYN_RIGID_CARRIAGE:
        if (!isfinite(params->phi0)) return CDYN_ERR_NONFINITE;
        return params->carriage ? CDYN_OK : CDYN_ERR_ARG;
    default: return CDYN_OK;
    }
}

cdyn_status cdyn_rigid_preset_eval(cdyn_rigid_preset preset,
                                   const cdyn_rigid_preset_params *params, double t,
                                   const double *q, const double *qdot,
                                   cdyn_rigid_kinematics *k)
{
    int f = cdyn_rigid_preset_dof(preset);
    if (!k || !q || !qdot || f < 0) return CDYN_ERR_ARG;
    cdyn_status st = cdyn__rigid_preset_check(preset, params);
    if (st != CDYN_OK) return st;
    if (!isfinite(t) || !all_finite(f, q) || !all_finite(f, qdot)) return CDYN_ERR_NONFINITE;
    cdyn_rigid_kinematics out;
    memset(&out, 0, sizeof out);
    double axis[3];
    switch (preset) {
    case CDYN_RIGID_FREE: cdyn__rigid_free_motion(q, qdot, &out); break;
    case CDYN_RIGID_MANEUVER4: maneuver4_motion(params, q, qdot, &out); break;
    case CDYN_RIGID_ROTATION:
    case CDYN_RIGID_TRANSLATION: {
        const double *a = params->axis;
        double amax = fmax(fabs(a[0]), fmax(fabs(a[1]), fabs(a[2])));
        for (int i = 0; i < 3; ++i) axis[i] = a[i] / amax; /* no overflow */
        double norm = sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
        for (int i = 0; i < 3; ++i) axis[i] /= norm;
        if (preset == CDYN_RIGID_ROTATION)
            rotation_motion(axis, params->origin, q[0], &out);
        else
            translation_motion(axis, params->origin, q[0], &out);
        break;
    }
    case CDYN_RIGID_FIXED_POINT: fixed_point_motion(params->origin, q, qdot, &out); break;
    case CDYN_RIGID_CARRIAGE: {
        double pos[3] = {0.0, 0.0, 0.0}, vel[3] = {0.0, 0.0, 0.0}, acc[3] = {0.0, 0.0, 0.0};
        if (params->carriage(t, pos, vel, acc, params->carriage_user) != 0)
            return CDYN_ERR_CALLBACK;
        if (!all_finite(3, pos) || !all_finite(3, vel) || !all_finite(3, acc))
            return CDYN_ERR_NONFINITE;
        carriage_motion(params->phi0, pos, vel, acc, q, qdot, &out);
        break;
    }
    }
    if (!kinematics_finite(&out)) /* finite inputs, but a |q'|^2 term overflows */
        return CDYN_ERR_NONFINITE;
    *k = out;
    return CDYN_OK;
}

cdyn_status cdyn_rigid_euler_zxz(const double *zxz, const double *zxz_rate, double *q,
                                 double *qdot)
{
    if (!zxz || !zxz_rate || !q || !qdot) return CDYN_ERR_ARG;
    if (!all_finite(3, zxz) || !all_finite(3, zxz_rate)) return CDYN_ERR_NONFINITE;
    /* R = Rz(a) Rx(b) Rz(c), column-major */
    double ca = cos(zxz[0]), sa = sin(zxz[0]), cb = cos(zxz[1]), sb = sin(zxz[1]);
    double cc = cos(zxz[2]), sc = sin(zxz[2]);
    double R00 = ca * cc - sa * cb * sc, R10 = sa * cc + ca * cb * sc, R20 = sb * sc;
    double R21 = sb * cc, R22 = cb;
    /* z-y-x angles of the same R: R20 = -sin(theta), R10 / R00 = tan(psi),
     * R21 / R22 = tan(phi) */
    double horizontal = hypot(R00, R10);
    if (!(horizontal > 1e-8))
        return CDYN_ERR_SINGULAR; /* pitch +-pi/2: psi and phi not separable */
    double theta = atan2(-R20, horizontal), psi = atan2(R10, R00), phi = atan2(R21, R22);
    /* omega = a' e_z + b' Rz(a) e_x + c' Rz(a) Rx(b) e_z, then the z-y-x
     * rates from omega = phi' e_phi + theta' e_theta + psi' e_z */
    double w[3] = {zxz_rate[1] * ca + zxz_rate[2] * sb * sa,
                   zxz_rate[1] * sa - zxz_rate[2] * sb * ca,
                   zxz_rate[0] + zxz_rate[2] * cb};
    double ct = cos(theta), st = sin(theta), cp = cos(psi), sp = sin(psi);
    double dphi = (cp * w[0] + sp * w[1]) / ct;
    double dtheta = -sp * w[0] + cp * w[1];
    double dpsi = w[2] + st * dphi;
    double rates[3] = {dphi, dtheta, dpsi};
    if (!all_finite(3, rates)) return CDYN_ERR_NONFINITE; /* finite rates that overflow */
    q[0] = phi, q[1] = theta, q[2] = psi; /* written last: may alias the inputs */
    qdot[0] = dphi, qdot[1] = dtheta, qdot[2] = dpsi;
    return CDYN_OK;
}
