/* One rigid body constrained to f <= 6 degrees of freedom: the projected
 * Newton-Euler equations with an offset centre of rotation (THEORY T5.1-T5.3)
 * and the model layer (callbacks → right-hand side). The ready-made motions
 * of T5.4 are in rigid_preset.c. */
#include "cdyn/rigid.h"

#include "internal.h"
#include "linalg.h"
#include "rank.h"
#include "rigid_internal.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>


/* Relative tolerance of the inertia's symmetry check. */
#define SYMMETRY_TOL 1e-12
/* How far R^T R may be from I (entry by entry) for R to count as a rotation. */
#define ROTATION_TOL 1e-10

struct cdyn_rigid {
    int f;
    /* the body */
    int has_body;
    double mass;
    double inertia[9]; /* about C, body frame, symmetrized */
    double inertia_l[9], inertia_s[3]; /* its equilibrated Cholesky factor (rank.h) */
    double r_pc[3];    /* P to C, body frame */
    /* the model layer: a motion callback, or a preset cdyn evaluates */
    int has_preset;
    cdyn_rigid_preset preset;
    cdyn_rigid_preset_params params;
    cdyn_rigid_motion_fn motion;
    cdyn_rigid_loads_fn loads;
    void *user;
    int callback_code;
    cdyn__guard guard;
    int has_loads;
    double last_fq[6]; /* F_q of the last successful rhs */
    /* workspace: f <= 6, so everything has a fixed size */
    cdyn_rigid_kinematics kin;
    double F_i[6], qdd[6], F_q[6];
    double Mbar[36], Nbar[6], J[36]; /* 6 x f, leading dimension 6 */
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

cdyn_rigid *cdyn_rigid_create(int f, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (f < 1 || f > 6) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_rigid *rb = cdyn__object_alloc(sizeof *rb, offsetof(cdyn_rigid, msg));
    if (!rb) {
        *status = CDYN_ERR_NOMEM;
        return NULL;
    }
    rb->f = f;
    *status = CDYN_OK;
    return rb;
}

void cdyn_rigid_free(cdyn_rigid *rb) { free(rb); }

int cdyn_rigid_size(const cdyn_rigid *rb) { return rb ? rb->f : -1; }

int cdyn_rigid_callback_code(const cdyn_rigid *rb) { return rb ? rb->callback_code : 0; }

const char *cdyn_rigid_last_error(const cdyn_rigid *rb)
{
    return rb ? rb->msg : "cdyn_rigid: NULL object";
}

/* ---- small 3-vector algebra ----------------------------------------- */

static void cross(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* y = A x for a 3 x 3 column-major A. */
static void mat3_vec(const double *A, const double *x, double *y)
{
    for (int i = 0; i < 3; ++i) y[i] = A[i] * x[0] + A[i + 3] * x[1] + A[i + 6] * x[2];
}

static double dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* ---- the body --------------------------------------------------------- */

cdyn_status cdyn_rigid_set_body(cdyn_rigid *rb, double mass, const double *inertia, int ldi,
                                const double *r_pc)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_set_body";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    if (!inertia) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: inertia is NULL", fn);
    if (ldi < 3) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: ldi = %d < 3", fn, ldi);
    if (!isfinite(mass))
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: mass = %g is not finite", fn, mass);
    if (!(mass > 0.0))
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: mass = %g is not > 0", fn, mass);
    long bad = cdyn__first_nonfinite(3, 3, inertia, ldi);
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: inertia(%ld, %ld) is not finite", fn,
                          bad % 3, bad / 3);
    bad = r_pc ? cdyn__first_nonfinite(3, 1, r_pc, 3) : -1;
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: r_pc[%ld] is not finite", fn, bad);
    double scale = 0.0, sym[9];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) scale = fmax(scale, fabs(inertia[i + (size_t)j * ldi]));
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double a = inertia[i + (size_t)j * ldi], b = inertia[j + (size_t)i * ldi];
            if (fabs(a - b) > SYMMETRY_TOL * scale)
                return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                                  "%s: inertia is not symmetric (entries (%d, %d) = %g and "
                                  "(%d, %d) = %g)",
                                  fn, i, j, a, j, i, b);
            sym[i + 3 * j] = 0.5 * (a + b);
        }
    double chol[9], scale3[3], x[3], inv[3];
    int info = cdyn__spd_factor(3, sym, 3, chol, 3, scale3);
    if (info == 0 && cdyn__spd_nearly_singular(3, chol, 3, x, inv) != 0) info = 3;
    if (info != 0)
        return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                          "%s: inertia is not positive definite (leading minor %d)", fn, info);
    rb->mass = mass;
    memcpy(rb->inertia, sym, sizeof sym);
    memcpy(rb->inertia_l, chol, sizeof chol);
    memcpy(rb->inertia_s, scale3, sizeof scale3);
    for (int i = 0; i < 3; ++i) rb->r_pc[i] = r_pc ? r_pc[i] : 0.0;
    rb->has_body = 1;
    return CDYN_OK;
}

/* ---- checks ----------------------------------------------------------- */

/* name is printed after prefix ("" or the callback that produced it). */
static cdyn_status check_vec(cdyn_rigid *rb, const char *fn, const char *prefix,
                             const char *name, int len, const double *x)
{
    long bad = cdyn__first_nonfinite(len, 1, x, len);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s%s[%ld] is not finite", fn, prefix,
                      name, bad);
}

static cdyn_status check_mat(cdyn_rigid *rb, const char *fn, const char *prefix,
                             const char *name, int cols, const double *A)
{
    long bad = cdyn__first_nonfinite(3, cols, A, 3);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s%s(%ld, %ld) is not finite", fn,
                      prefix, name, bad % 3, bad / 3);
}

/* The fields of k the accelerations use. */
/* R must be a rotation: R^T R = I within ROTATION_TOL entry by entry and
 * det R > 0 (2 I, or an unnormalized quaternion's matrix, gave q'' off by
 * its scaling with CDYN_OK; a reflection the mirrored motion). */
static cdyn_status check_rotation(cdyn_rigid *rb, const char *fn, const char *prefix,
                                  const double *R)
{
    double worst = 0.0;
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i <= j; ++i) {
            double d = dot3(R + 3 * i, R + 3 * j) - (i == j ? 1.0 : 0.0);
            worst = fmax(worst, fabs(d));
        }
    double c[3];
    cross(R, R + 3, c);
    if (worst <= ROTATION_TOL && dot3(c, R + 6) > 0.0) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_ARG,
                      "%s: %sk->rotation is not a rotation (R^T R - I off by %.3g, det %s 0)",
                      fn, prefix, worst, dot3(c, R + 6) > 0.0 ? ">" : "<=");
}

/* k's fields finite, and its rotation one unless cdyn made it (a preset) */
static cdyn_status check_kinematics(cdyn_rigid *rb, const char *fn, const char *prefix,
                                    const cdyn_rigid_kinematics *k, int callers)
{
    int f = rb->f;
    cdyn_status st = check_mat(rb, fn, prefix, "k->J_T", f, k->J_T);
    if (!st) st = check_mat(rb, fn, prefix, "k->J_R", f, k->J_R);
    if (!st) st = check_mat(rb, fn, prefix, "k->rotation", 3, k->rotation);
    if (!st && callers) st = check_rotation(rb, fn, prefix, k->rotation);
    if (!st) st = check_vec(rb, fn, prefix, "k->L_T", 3, k->L_T);
    if (!st) st = check_vec(rb, fn, prefix, "k->L_R", 3, k->L_R);
    if (!st) st = check_vec(rb, fn, prefix, "k->v0_dot", 3, k->v0_dot);
    if (!st) st = check_vec(rb, fn, prefix, "k->w0", 3, k->w0);
    if (!st) st = check_vec(rb, fn, prefix, "k->w0_dot", 3, k->w0_dot);
    return st;
}

static cdyn_status check_body(cdyn_rigid *rb, const char *fn)
{
    if (rb->has_body) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: no body set; call cdyn_rigid_set_body", fn);
}

/* ---- T5.2, T5.3 --------------------------------------------------------- */

/* q'' (f) into rb->qdd from the equations J^T diag(m 1, M_g) J q'' =
 * J^T rest (rest = F_i - Nbar, 6), which are the normal equations of the
 * least-squares problem min |G J q'' - G^-T rest| for any G with G^T G =
 * diag(m 1, M_g): here G = [sqrt(m) 1, 0; 0, L^T S^-1 R^T] with the body's
 * equilibrated factor S I S = L L^T (its rows are then all in the units
 * of sqrt(energy), and commensurate). A Householder QR of B = G J C, C the
 * powers of two that give its columns norms in [1/sqrt 2, sqrt 2), solves
 * it without forming J^T Mbar J, whose condition is B's squared: near a
 * singular pose (Euler angles 4.8e-7 rad from theta = pi/2) the normal
 * equations gave q'' 7.9e-4 off, with CDYN_OK; a free body (f = 6, B
 * square) is now within B's condition times the rounding, as its own
 * equations in closed form. The verdict is the definiteness policy's on
 * J^T Mbar: its equilibrated Cholesky factor is R of this QR (up to
 * signs), so a pivot R_jj^2 <= CDYN__DEFINITE_TOL times the smallest
 * column norm^2 is a leading minor that fails; returns its order (0:
 * positive definite). R: the rotation (3 x 3). */
static int least_squares_accelerations(cdyn_rigid *rb, const double *R, const double *rest)
{
    const int f = rb->f;
    const double *L = rb->inertia_l, *S = rb->inertia_s;
    double B[36], s[6], u[3], scale[6];
    double root = sqrt(rb->mass), smallest = INFINITY;
    for (int c = 0; c <= f; ++c) {
        const double *v = c < f ? rb->J + 6 * c : rest;
        double *out = c < f ? B + 6 * c : s;
        for (int i = 0; i < 3; ++i) {
            u[i] = (R[3 * i] * v[3] + R[1 + 3 * i] * v[4] + R[2 + 3 * i] * v[5]);
            out[i] = c < f ? root * v[i] : v[i] / root;
        }
        if (c < f) { /* L^T S^-1 R^T v, and the column's scale */
            for (int i = 0; i < 3; ++i) u[i] /= S[i];
            for (int i = 0; i < 3; ++i) {
                double t = 0.0;
                for (int j = i; j < 3; ++j) t += L[j + 3 * i] * u[j];
                out[3 + i] = t;
            }
            double norm2 = 0.0;
            for (int i = 0; i < 6; ++i) norm2 += out[i] * out[i];
            scale[c] = cdyn__sym_scale(norm2);
            for (int i = 0; i < 6; ++i) out[i] *= scale[c];
            smallest = fmin(smallest, norm2 * scale[c] * scale[c]);
        } else { /* G^-T: L_I^-1 R^T = L^-1 S R^T, by forward substitution */
            for (int i = 0; i < 3; ++i) {
                double t = S[i] * u[i];
                for (int j = 0; j < i; ++j) t -= L[i + 3 * j] * out[3 + j];
                out[3 + i] = t / L[i + 3 * i];
            }
        }
    }
    /* Householder QR of B (6 x f), applied to s as it goes */
    for (int j = 0; j < f; ++j) {
        double *col = B + 6 * j, norm2 = 0.0;
        for (int i = j; i < 6; ++i) norm2 += col[i] * col[i];
        double alpha = col[j] >= 0.0 ? -sqrt(norm2) : sqrt(norm2);
        if (!(alpha * alpha > CDYN__DEFINITE_TOL * smallest)) return j + 1;
        /* v = col(j:6) - alpha e_1, H = I - v v^T / (-alpha v_0) */
        double v0 = col[j] - alpha, beta = -alpha * v0; /* v^T v / 2 */
        col[j] = v0;
        for (int c = j + 1; c <= f; ++c) {
            double *other = c < f ? B + 6 * c : s, dot = 0.0;
            for (int i = j; i < 6; ++i) dot += col[i] * other[i];
            double factor = dot / beta;
            for (int i = j; i < 6; ++i) other[i] -= factor * col[i];
        }
        col[j] = alpha; /* R_jj (the rest of v is no longer needed) */
    }
    for (int i = f - 1; i >= 0; --i) { /* R x = (Q^T s)(1:f), q'' = C x */
        double t = s[i];
        for (int j = i + 1; j < f; ++j) t -= B[i + 6 * j] * rb->qdd[j];
        rb->qdd[i] = t / B[i + 6 * i];
    }
    for (int i = 0; i < f; ++i) rb->qdd[i] *= scale[i];
    return 0;
}

/* q'' into rb->qdd and F_q into rb->F_q; inputs already checked. */
static cdyn_status solve(cdyn_rigid *rb, const char *fn, const cdyn_rigid_kinematics *k,
                         const double *qdot, const double *F_i)
{
    const int f = rb->f;
    const double m = rb->mass, *R = k->rotation;
    double RI[9], Mg[9], r[3], w[3], arot[3], tmp[3], tmp2[3];
    /* M_g = R I R^T (symmetric by construction), r_PC in the lab frame */
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i)
            RI[i + 3 * j] = R[i] * rb->inertia[3 * j] + R[i + 3] * rb->inertia[1 + 3 * j] +
                            R[i + 6] * rb->inertia[2 + 3 * j];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i <= j; ++i) {
            double s = RI[i] * R[j] + RI[i + 3] * R[j + 3] + RI[i + 6] * R[j + 6];
            Mg[i + 3 * j] = s;
            Mg[j + 3 * i] = s;
        }
    mat3_vec(R, rb->r_pc, r);
    /* omega = J_R q' + w0, a_rot = L_R + w0' (the angular acceleration at q'' = 0) */
    for (int i = 0; i < 3; ++i) {
        double s = k->w0[i];
        for (int c = 0; c < f; ++c) s += k->J_R[i + 3 * c] * qdot[c];
        w[i] = s;
        arot[i] = k->L_R[i] + k->w0_dot[i];
    }
    /* J = [J_T - [r]x J_R; J_R], Mbar = [m (J_T - [r]x J_R); M_g J_R] */
    for (int c = 0; c < f; ++c) {
        const double *jt = k->J_T + 3 * c, *jr = k->J_R + 3 * c;
        double *Jc = rb->J + 6 * c, *Mc = rb->Mbar + 6 * c;
        cross(r, jr, tmp);
        for (int i = 0; i < 3; ++i) {
            Jc[i] = jt[i] - tmp[i];
            Jc[3 + i] = jr[i];
            Mc[i] = m * Jc[i];
        }
        mat3_vec(Mg, jr, Mc + 3);
    }
    /* Nbar = [m (L_T + v0' + a_rot x r + w x (w x r)); M_g a_rot + w x (M_g w)] */
    double axr[3], wxr[3], wxwxr[3];
    cross(arot, r, axr);
    cross(w, r, wxr);
    cross(w, wxr, wxwxr);
    for (int i = 0; i < 3; ++i)
        rb->Nbar[i] = m * (k->L_T[i] + k->v0_dot[i] + axr[i] + wxwxr[i]);
    mat3_vec(Mg, arot, rb->Nbar + 3);
    mat3_vec(Mg, w, tmp);
    cross(w, tmp, tmp2);
    for (int i = 0; i < 3; ++i) rb->Nbar[3 + i] += tmp2[i];
    /* the verdict and the solution by the least-squares form */
    double rest[6];
    for (int i = 0; i < 6; ++i) rest[i] = F_i[i] - rb->Nbar[i];
    int info = least_squares_accelerations(rb, R, rest);
    if (info != 0)
        return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                          "%s: J^T Mbar is not positive definite (leading minor %d): the "
                          "coordinates are singular here (J loses rank, e.g. Euler angles at "
                          "theta = +-pi/2)",
                          fn, info);
    /* F_q = Mbar q'' + Nbar - F_i */
    for (int i = 0; i < 6; ++i) {
        double s = rb->Nbar[i] - F_i[i];
        for (int c = 0; c < f; ++c) s += rb->Mbar[i + 6 * c] * rb->qdd[c];
        rb->F_q[i] = s;
    }
    long bad = cdyn__first_nonfinite(f, 1, rb->qdd, f);
    if (bad < 0) bad = cdyn__first_nonfinite(6, 1, rb->F_q, 6);
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE,
                          "%s: the result overflowed (inputs too large)", fn);
    return CDYN_OK;
}

cdyn_status cdyn_rigid_accelerations(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                     const double *qdot, const double *F_i, double *qdd,
                                     double *F_q)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_accelerations";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    cdyn_status st = check_body(rb, fn);
    if (st) return st;
    if (!k || !qdot || !F_i || !qdd)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !k ? "k" : !qdot ? "qdot" : !F_i ? "F_i" : "qdd");
    st = check_kinematics(rb, fn, "", k, 1);
    if (!st) st = check_vec(rb, fn, "", "qdot", rb->f, qdot);
    if (!st) st = check_vec(rb, fn, "", "F_i", 6, F_i);
    if (!st) st = solve(rb, fn, k, qdot, F_i);
    if (st) return st;
    memcpy(qdd, rb->qdd, sizeof(double) * (size_t)rb->f);
    if (F_q) memcpy(F_q, rb->F_q, sizeof rb->F_q);
    return CDYN_OK;
}

cdyn_status cdyn_rigid_load_about_p(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                    const double *F, double *F_p)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_load_about_p";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    if (!k || !F || !F_p)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !k ? "k" : !F ? "F" : "F_p");
    if (!rb->has_body)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: call cdyn_rigid_set_body first", fn);
    cdyn_status st = check_vec(rb, fn, "", "k->rotation", 9, k->rotation);
    if (!st) st = check_vec(rb, fn, "", "F", 6, F);
    if (st) return st;
    double r[3], m[3];
    mat3_vec(k->rotation, rb->r_pc, r);
    cross(r, F, m);
    double out[6] = {F[0], F[1], F[2], F[3] + m[0], F[4] + m[1], F[5] + m[2]};
    long bad = cdyn__first_nonfinite(6, 1, out, 6);
    if (bad >= 0) /* finite inputs, but the moment overflows */
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: F_p[%ld] overflows", fn, bad);
    memcpy(F_p, out, sizeof out); /* last: F_p may alias F */
    return CDYN_OK;
}

cdyn_status cdyn_rigid_velocities(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                  const double *qdot, double *v_p, double *omega)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_velocities";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    int f = rb->f;
    if (!k || !qdot)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !k ? "k" : "qdot");
    cdyn_status st = check_mat(rb, fn, "", "k->J_T", f, k->J_T);
    if (!st) st = check_mat(rb, fn, "", "k->J_R", f, k->J_R);
    if (!st) st = check_vec(rb, fn, "", "k->v0", 3, k->v0);
    if (!st) st = check_vec(rb, fn, "", "k->w0", 3, k->w0);
    if (!st) st = check_vec(rb, fn, "", "qdot", f, qdot);
    if (st) return st;
    double out[6]; /* v_P, omega */
    for (int i = 0; i < 3; ++i) {
        double v = k->v0[i], w = k->w0[i];
        for (int c = 0; c < f; ++c) {
            v += k->J_T[i + 3 * c] * qdot[c];
            w += k->J_R[i + 3 * c] * qdot[c];
        }
        out[i] = v;
        out[3 + i] = w;
    }
    long bad = cdyn__first_nonfinite(6, 1, out, 6);
    if (bad >= 0) /* finite inputs, but a velocity overflows */
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] overflows", fn,
                          bad < 3 ? "v_p" : "omega", bad % 3);
    if (v_p) memcpy(v_p, out, sizeof(double) * 3); /* last: may alias the inputs */
    if (omega) memcpy(omega, out + 3, sizeof(double) * 3);
    return CDYN_OK;
}

/* ---- model layer ------------------------------------------------------ */

cdyn_status cdyn_rigid_set_model(cdyn_rigid *rb, cdyn_rigid_motion_fn motion,
                                 cdyn_rigid_loads_fn loads, void *user)
{
    if (!rb) return CDYN_ERR_ARG;
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, "cdyn_rigid_set_model");
    if (!motion)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "cdyn_rigid_set_model: motion callback is NULL");
    rb->motion = motion;
    rb->has_preset = 0;
    rb->loads = loads;
    rb->user = user;
    return CDYN_OK;
}

cdyn_status cdyn_rigid_set_preset(cdyn_rigid *rb, cdyn_rigid_preset preset,
                                  const cdyn_rigid_preset_params *params,
                                  cdyn_rigid_loads_fn loads, void *user)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_set_preset";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    int dof = cdyn_rigid_preset_dof(preset);
    if (dof < 0) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: unknown preset %d", fn, (int)preset);
    if (dof != rb->f)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG,
                          "%s: the preset has %d coordinates, this object %d", fn, dof, rb->f);
    cdyn_status st = cdyn__rigid_preset_check(preset, params);
    if (st != CDYN_OK)
        return cdyn__fail(rb->msg, st,
                          "%s: the preset's parameters are %s", fn,
                          st == CDYN_ERR_NONFINITE ? "not finite"
                                                   : "missing (NULL params, a zero axis or no "
                                                     "carriage callback)");
    memset(&rb->params, 0, sizeof rb->params);
    if (params) rb->params = *params;
    rb->preset = preset;
    rb->has_preset = 1;
    rb->motion = NULL;
    rb->loads = loads;
    rb->user = user;
    memset(&rb->kin, 0, sizeof rb->kin); /* the free body writes only its non-zeros */
    return CDYN_OK;
}

static cdyn_status callback_failed(cdyn_rigid *rb, const char *fn, const char *which, int code,
                                   double t)
{
    rb->callback_code = code;
    return cdyn__fail(rb->msg, CDYN_ERR_CALLBACK, "%s: %s callback returned %d at t = %g", fn,
                      which, code, t);
}

/* The kinematics at (t, q, q') into rb->kin: the motion callback's, or
 * the preset's (a CARRIAGE's callback runs under the guard), checked. */
static cdyn_status motion_at(cdyn_rigid *rb, const char *fn, double t, const double *q,
                             const double *qdot)
{
    memset(&rb->kin, 0, sizeof rb->kin);
    rb->guard.in_callback++;
    int code = 0;
    cdyn_status st = CDYN_OK;
    if (rb->has_preset)
        st = cdyn_rigid_preset_eval(rb->preset, &rb->params, t, q, qdot, &rb->kin);
    else
        code = rb->motion(t, q, qdot, &rb->kin, rb->user);
    rb->guard.in_callback--;
    if (code != 0) return callback_failed(rb, fn, "motion", code, t);
    if (st == CDYN_ERR_CALLBACK) return callback_failed(rb, fn, "carriage", 1, t);
    if (st != CDYN_OK) /* finite q, q': a velocity product or the carriage overflowed */
        return cdyn__fail(rb->msg, st, "%s: the preset's kinematics at t = %g are not finite",
                          fn, t);
    return check_kinematics(rb, fn, rb->has_preset ? "the preset's " : "the motion callback's ",
                            &rb->kin, !rb->has_preset);
}

/* F_i from the loads callback (0 without one), checked. */
static cdyn_status loads_at(cdyn_rigid *rb, const char *fn, double t, const double *q,
                            const double *qdot)
{
    memset(rb->F_i, 0, sizeof rb->F_i);
    if (!rb->loads) return CDYN_OK;
    rb->guard.in_callback++;
    int code = rb->loads(t, q, qdot, &rb->kin, rb->F_i, rb->user);
    rb->guard.in_callback--;
    if (code != 0) return callback_failed(rb, fn, "loads", code, t);
    return check_vec(rb, fn, "loads callback gave NaN/Inf: ", "F_i", 6, rb->F_i);
}

/* The free body (preset FREE): nothing constrains it, so the equations of
 * T5.2 decouple about C. With F_i = (f; n) and omega = J_R q'_rot:
 *   omega' = R I^-1 (R^T n - w_b x I w_b),  w_b = R^T omega (Euler, body frame),
 *   a_C = f / m,   a_P = a_C - omega' x r - omega x (omega x r),  r = R r_PC,
 * and omega' = J_R q''_rot + L_R solved in closed form for the z-y-x
 * angles (J_R = [e_phi e_theta e_z], det J_R = cos theta). F_q = 0. The
 * angles are singular where cos^2 theta, the determinant of the Gram
 * matrix J_R^T J_R of J_R's unit columns, fails the definiteness policy
 * (rank.h): CDYN_ERR_SINGULAR. Results into rb->qdd, rb->F_q. */
static cdyn_status free_solve(cdyn_rigid *rb, const char *fn, const double *qdot)
{
    const cdyn_rigid_kinematics *k = &rb->kin;
    const double *R = k->rotation, *e_phi = k->J_R + 9, *e_theta = k->J_R + 12, *n = rb->F_i + 3;
    double sp = -e_theta[0], cp = e_theta[1], st = -e_phi[2];
    double ct = cp * e_phi[0] + sp * e_phi[1];
    if (!(ct * ct > CDYN__DEFINITE_TOL))
        return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                          "%s: the Euler angles are singular at theta = %.17g (cos theta = %g): "
                          "J_R loses rank",
                          fn, atan2(st, ct), ct);
    double w[3], wb[3], nb[3], Iw[3], alpha_b[3], alpha[3], r[3];
    for (int i = 0; i < 3; ++i) w[i] = e_phi[i] * qdot[3] + e_theta[i] * qdot[4];
    w[2] += qdot[5];
    for (int i = 0; i < 3; ++i) { /* R^T, to the body frame */
        wb[i] = R[3 * i] * w[0] + R[3 * i + 1] * w[1] + R[3 * i + 2] * w[2];
        nb[i] = R[3 * i] * n[0] + R[3 * i + 1] * n[1] + R[3 * i + 2] * n[2];
    }
    mat3_vec(rb->inertia, wb, Iw);
    cross(wb, Iw, alpha_b);
    for (int i = 0; i < 3; ++i) alpha_b[i] = rb->inertia_s[i] * (nb[i] - alpha_b[i]);
    cdyn__potrs(3, 1, rb->inertia_l, 3, alpha_b, 3); /* I^-1 through its scaled factor */
    for (int i = 0; i < 3; ++i) alpha_b[i] *= rb->inertia_s[i];
    mat3_vec(R, alpha_b, alpha);
    mat3_vec(R, rb->r_pc, r);
    double axr[3], wxr[3], wxwxr[3], a[3];
    cross(alpha, r, axr);
    cross(w, r, wxr);
    cross(w, wxr, wxwxr);
    for (int i = 0; i < 3; ++i) {
        rb->qdd[i] = rb->F_i[i] / rb->mass - axr[i] - wxwxr[i];
        a[i] = alpha[i] - k->L_R[i];
    }
    rb->qdd[3] = (cp * a[0] + sp * a[1]) / ct;
    rb->qdd[4] = -sp * a[0] + cp * a[1];
    rb->qdd[5] = a[2] + st * rb->qdd[3];
    memset(rb->F_q, 0, sizeof rb->F_q);
    if (cdyn__first_nonfinite(6, 1, rb->qdd, 6) >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE,
                          "%s: the result overflowed (inputs too large)", fn);
    return CDYN_OK;
}

cdyn_status cdyn_rigid_rhs(cdyn_rigid *rb, double t, const double *y, double *ydot)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_rhs";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    const int f = rb->f;
    if (!rb->motion && !rb->has_preset)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG,
                          "%s: no model set; call cdyn_rigid_set_model or cdyn_rigid_set_preset",
                          fn);
    cdyn_status st = check_body(rb, fn);
    if (st) return st;
    if (!y || !ydot)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "ydot");
    if (!isfinite(t))
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: t = %g is not finite", fn, t);
    st = check_vec(rb, fn, "", "y", 2 * f, y);
    if (st) return st;
    const double *q = y, *qdot = y + f;
    int free_body = rb->has_preset && rb->preset == CDYN_RIGID_FREE;
    if (free_body) { /* |q'|^2 terms of finite rates can overflow */
        cdyn__rigid_free_motion(q, qdot, &rb->kin);
        st = check_vec(rb, fn, "the free body's ", "k->L_R", 3, rb->kin.L_R);
    } else {
        st = motion_at(rb, fn, t, q, qdot);
    }
    if (!st) st = loads_at(rb, fn, t, q, qdot);
    if (!st) st = free_body ? free_solve(rb, fn, qdot) : solve(rb, fn, &rb->kin, qdot, rb->F_i);
    if (st) return st;
    for (int i = 0; i < f; ++i) ydot[i] = y[f + i]; /* forward: ydot may be y */
    memcpy(ydot + f, rb->qdd, sizeof(double) * (size_t)f);
    memcpy(rb->last_fq, rb->F_q, sizeof rb->F_q);
    rb->has_loads = 1;
    return CDYN_OK;
}

cdyn_status cdyn_rigid_last_constraint_loads(const cdyn_rigid *rb, double *F_q)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_last_constraint_loads";
    if (!F_q) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: F_q is NULL", fn);
    if (!rb->has_loads)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: no successful cdyn_rigid_rhs yet", fn);
    memcpy(F_q, rb->last_fq, sizeof rb->last_fq);
    return CDYN_OK;
}
