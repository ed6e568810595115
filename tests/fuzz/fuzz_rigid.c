/* libFuzzer harness: cdyn_rigid presets and accelerations on decoded body
 * data, kinematics, speeds and loads; body and loads in decoded mass and
 * length units mu, L (mass mu, inertia mu L^2, r_pc L, force mu L, moment
 * mu L^2); then the same preset through cdyn_rigid_set_preset and
 * cdyn_rigid_rhs. */
#include <cdyn.h>

#include "fuzz_input.h"

#include <stdlib.h>
#include <string.h>

/* Loads callback: the decoded F_i (user) as they are. */
static int fixed_loads(double t, const double *q, const double *qd,
                       const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    (void)t, (void)q, (void)qd, (void)k;
    memcpy(F_i, user, 6 * sizeof(double));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int carriage(double t, double *pos, double *vel, double *acc, void *user)
{
    const double *c = user;
    for (int i = 0; i < 3; ++i) {
        pos[i] = c[i] * t;
        vel[i] = c[3 + i];
        acc[i] = c[6 + i];
    }
    return c[9] > 100.0; /* sometimes fail */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int preset = (int)(fuzz_byte(&in) % 7); /* 6 is not a preset */
    int f = cdyn_rigid_preset_dof((cdyn_rigid_preset)preset);
    if (fuzz_byte(&in) == 0xFF) f = fuzz_size(&in, -3, 9); /* hostile f */
    cdyn_status st;
    cdyn_rigid *rb = cdyn_rigid_create(f, &st);
    if (!rb) return 0;
    if (f > 6) { /* refused above, but keep the harness safe */
        cdyn_rigid_free(rb);
        return 0;
    }
    double inertia[9], r_pc[3], q[6] = {0}, qdot[6] = {0}, F_i[6], qdd[6 + FUZZ_GUARD],
                                F_q[6 + FUZZ_GUARD], v[3], w[3], cdata[10];
    double mass = fuzz_double(&in);
    fuzz_fill(&in, inertia, 9);
    fuzz_fill(&in, r_pc, 3);
    fuzz_fill(&in, q, (size_t)f);
    fuzz_fill(&in, qdot, (size_t)f);
    fuzz_fill(&in, F_i, 6);
    fuzz_fill(&in, cdata, 10);
    cdyn_rigid_preset_params params = {{0}, {0}, 0, 0, 0, carriage, cdata};
    fuzz_fill(&in, params.axis, 3);
    fuzz_fill(&in, params.origin, 3);
    params.z0 = fuzz_double(&in);
    params.theta0 = fuzz_double(&in);
    params.phi0 = fuzz_double(&in);
    double mu = fuzz_scale(&in), L = fuzz_scale(&in);
    mass *= mu;
    for (int i = 0; i < 9; ++i) inertia[i] *= mu * L * L;
    for (int i = 0; i < 3; ++i) {
        r_pc[i] *= L;
        F_i[i] *= mu * L;
        F_i[3 + i] *= mu * L * L;
    }
    cdyn_rigid_kinematics k;
    fuzz_guard_set(qdd, (size_t)f);
    fuzz_guard_set(F_q, 6);
    cdyn_rigid_set_body(rb, mass, inertia, 3, (fuzz_byte(&in) & 1) ? r_pc : NULL);
    st = cdyn_rigid_preset_eval((cdyn_rigid_preset)preset, &params, fuzz_double(&in), q, qdot, &k);
    if (st == CDYN_OK) {
        fuzz_ok_finite(st, k.L_T, 3);
        fuzz_ok_finite(st, k.L_R, 3);
        st = cdyn_rigid_accelerations(rb, &k, qdot, F_i, qdd, F_q);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)f), F_q, 6);
        st = cdyn_rigid_velocities(rb, &k, qdot, v, w);
        fuzz_ok_finite(fuzz_ok_finite(st, v, 3), w, 3);
    } else { /* user-defined kinematics: raw decoded values */
        fuzz_fill(&in, (double *)&k, sizeof k / sizeof(double));
        st = cdyn_rigid_accelerations(rb, &k, qdot, F_i, qdd, F_q);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)f), F_q, 6);
    }
    if (!fuzz_guard_ok(qdd, (size_t)f) || !fuzz_guard_ok(F_q, 6)) abort();
    /* the model layer with the preset cdyn evaluates itself (FREE: the free
     * body's own equations), loads from the decoded F_i */
    double y[12], ydot[12 + FUZZ_GUARD];
    memcpy(y, q, sizeof(double) * (size_t)f);
    memcpy(y + f, qdot, sizeof(double) * (size_t)f);
    fuzz_guard_set(ydot, 2 * (size_t)f);
    st = cdyn_rigid_set_preset(rb, (cdyn_rigid_preset)preset, &params,
                               (fuzz_byte(&in) & 1) ? fixed_loads : NULL, F_i);
    if (st == CDYN_OK) {
        st = cdyn_rigid_rhs(rb, fuzz_double(&in), y, ydot);
        fuzz_ok_finite(st, ydot, 2 * (size_t)f);
        if (st == CDYN_OK) {
            st = cdyn_rigid_last_constraint_loads(rb, F_q);
            fuzz_ok_finite(st, F_q, 6);
        }
    }
    if (!fuzz_guard_ok(ydot, 2 * (size_t)f)) abort();
    cdyn_rigid_free(rb);
    return 0;
}
