/* libFuzzer harness: the cdyn_mbs model layer on a planar pendulum in
 * Cartesian coordinates (n = 2, m = 1) or the slider crank of THEORY T6.1
 * (n = 3, m = 2), optionally rheonomic and with a redundant constraint row,
 * with decoded masses, lengths, gains and units (coordinates q = S^-1 p of
 * the physical p, constraints scaled by R), and callbacks that return a code
 * or NaN once when the input says so. Drives set_model, set_time_terms,
 * set_formulation, set_periods (the crank angles' own periods, or any), the
 * stabilizer and penalty on cdyn_mbs_constraint(), rhs
 * with a few Euler steps, project (both metrics), reactions, residuals,
 * rhs_jacobian, partition, partition_gather, partition_rhs and
 * partition_jacobian. */
#include <cdyn.h>

#include "fuzz_input.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { NMAX = 3, MMAX = 3 };
enum { F_MASS, F_FORCE, F_PHI, F_JAC, F_PHI_T, F_XI, F_COUNT };

typedef struct {
    int crank, redundant, n, m;
    double mass[3], len[2], grav, damp, coupling, amp, omega, w;
    double R[MMAX], S[NMAX];
    int fail_fn, fail_at, fail_nan, calls[F_COUNT];
} model;

/* The injected failure: call fail_at of callback fail_fn returns a code or
 * puts a NaN in out[0]. */
static int inject(model *md, int fn, double *out)
{
    if (fn != md->fail_fn || md->calls[fn]++ != md->fail_at) return 0;
    if (!md->fail_nan) return -1 - fn;
    out[0] = NAN;
    return 0;
}

static void physical(const model *md, const double *q, double *p)
{
    for (int j = 0; j < md->n; ++j) p[j] = md->S[j] * q[j];
}

/* The drive u(t) = amp sin(omega t): pendulum length len0 + u, slider line
 * offset u; d1 = u', d2 = u''. */
static double drive(const model *md, double t, double *d1, double *d2)
{
    double u = md->amp * sin(md->omega * t);
    if (d1) *d1 = md->amp * md->omega * cos(md->omega * t);
    if (d2) *d2 = -md->omega * md->omega * u;
    return u;
}

/* Rows out: the redundant row is w times row 0, then units R. */
static void rows_out(const model *md, double *v)
{
    if (md->redundant) v[md->m - 1] = md->w * v[0];
    fuzz_scale_vector(v, md->m, md->R);
}

static int mass(double t, const double *q, double *M, int ldm, void *user)
{
    model *md = user;
    double p[NMAX], *k = md->mass;
    (void)t;
    physical(md, q, p);
    for (int j = 0; j < md->n; ++j)
        for (int i = 0; i < md->n; ++i) M[i + ldm * j] = i == j ? k[i] : 0.0;
    if (md->crank) /* T6.1 */
        M[2] = M[2 * ldm] = md->coupling * sin(p[2]);
    else
        M[1] = M[ldm] = md->coupling;
    fuzz_scale_matrix(M, md->n, md->n, ldm, md->S, md->S);
    return inject(md, F_MASS, M);
}

static int force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    model *md = user;
    double p[NMAX], v[NMAX];
    (void)t;
    physical(md, q, p);
    physical(md, qdot, v);
    if (md->crank) { /* T6.1 with g = grav */
        Q[0] = -md->coupling * v[2] * v[2] * cos(p[2]);
        Q[1] = -0.03 * md->grav * cos(p[1]);
        Q[2] = 0.25 * md->grav * cos(p[2]);
    } else {
        Q[0] = 0.0;
        Q[1] = -md->mass[0] * md->grav;
    }
    for (int j = 0; j < md->n; ++j) Q[j] = md->S[j] * (Q[j] - md->damp * v[j]);
    return inject(md, F_FORCE, Q);
}

static int phi(double t, const double *q, double *Phi, void *user)
{
    model *md = user;
    double p[NMAX], r = md->len[0], l = md->len[1], u = drive(md, t, NULL, NULL);
    physical(md, q, p);
    if (md->crank) {
        Phi[0] = r * cos(p[1]) + l * cos(p[2]) - p[0];
        Phi[1] = r * sin(p[1]) - l * sin(p[2]) - u;
    } else {
        Phi[0] = p[0] * p[0] + p[1] * p[1] - (r + u) * (r + u);
    }
    rows_out(md, Phi);
    return inject(md, F_PHI, Phi);
}

static int jacobian(double t, const double *q, double *J, int ld, void *user)
{
    model *md = user;
    double p[NMAX], r = md->len[0], l = md->len[1];
    (void)t;
    physical(md, q, p);
    if (md->crank) {
        double row0[3] = {-1.0, -r * sin(p[1]), -l * sin(p[2])};
        double row1[3] = {0.0, r * cos(p[1]), -l * cos(p[2])};
        for (int j = 0; j < 3; ++j) {
            J[ld * j] = row0[j];
            J[1 + ld * j] = row1[j];
        }
    } else {
        J[0] = 2.0 * p[0];
        J[ld] = 2.0 * p[1];
    }
    if (md->redundant)
        for (int j = 0; j < md->n; ++j) J[md->m - 1 + ld * j] = md->w * J[ld * j];
    fuzz_scale_matrix(J, md->m, md->n, ld, md->R, md->S);
    return inject(md, F_JAC, J);
}

static int phi_t(double t, const double *q, double *Phi_t, void *user)
{
    model *md = user;
    double du, u = drive(md, t, &du, NULL);
    (void)q;
    Phi_t[0] = md->crank ? 0.0 : -2.0 * (md->len[0] + u) * du;
    if (md->crank) Phi_t[1] = -du;
    rows_out(md, Phi_t);
    return inject(md, F_PHI_T, Phi_t);
}

/* xi = -(Phi_q q')_q q' - 2 Phi_qt q' - Phi_tt (T4.1) */
static int xi(double t, const double *q, const double *qdot, double *xi_out, void *user)
{
    model *md = user;
    double p[NMAX], v[NMAX], r = md->len[0], l = md->len[1], du, ddu;
    double u = drive(md, t, &du, &ddu);
    physical(md, q, p);
    physical(md, qdot, v);
    if (md->crank) {
        xi_out[0] = r * cos(p[1]) * v[1] * v[1] + l * cos(p[2]) * v[2] * v[2];
        xi_out[1] = r * sin(p[1]) * v[1] * v[1] - l * sin(p[2]) * v[2] * v[2] + ddu;
    } else {
        xi_out[0] = -2.0 * (v[0] * v[0] + v[1] * v[1]) + 2.0 * (du * du + (r + u) * ddu);
    }
    rows_out(md, xi_out);
    return inject(md, F_XI, xi_out);
}

/* The invariants of a call that wrote out (count entries, then the guard):
 * guard intact; on CDYN_OK a finite out; otherwise a message, a callback
 * code for CDYN_ERR_CALLBACK and, when before (a copy) is given, out
 * untouched. */
static void check(const cdyn_mbs *mbs, cdyn_status st, const double *out, int count,
                  const double *before)
{
    if (out && !fuzz_guard_ok(out, (size_t)count)) abort();
    if (st == CDYN_OK) {
        for (int i = 0; out && i < count; ++i)
            if (!isfinite(out[i])) abort();
        return;
    }
    if (cdyn_mbs_last_error(mbs)[0] == '\0') abort();
    if (st == CDYN_ERR_CALLBACK && cdyn_mbs_callback_code(mbs) == 0) abort();
    if (before && memcmp(out, before, sizeof(double) * (size_t)count) != 0) abort();
}

static void check_setter(cdyn_constraint *c, cdyn_status st)
{
    if (st != CDYN_OK && cdyn_constraint_last_error(c)[0] == '\0') abort();
}

/* Force and multipliers of the last success, and the residuals. */
static void check_reactions(cdyn_mbs *mbs, int n, int m)
{
    double force_out[NMAX + FUZZ_GUARD], mult[MMAX + FUZZ_GUARD], res[2 + FUZZ_GUARD];
    fuzz_guard_set(force_out, (size_t)n);
    fuzz_guard_set(mult, (size_t)m);
    fuzz_guard_set(res, 2);
    cdyn_status st = cdyn_mbs_last_reactions(mbs, force_out, mult);
    check(mbs, st, force_out, n, NULL);
    check(mbs, st, mult, m, NULL);
    st = cdyn_mbs_last_residuals(mbs, &res[0], &res[1]);
    check(mbs, st, res, 2, NULL);
}

/* The size of each constraint row's terms at q (for the strict check). */
static void phi_terms(const model *md, double t, const double *q, double *terms)
{
    double p[NMAX], r = fabs(md->len[0]), l = fabs(md->len[1]), u = drive(md, t, NULL, NULL);
    physical(md, q, p);
    if (md->crank) { /* the decoded lengths may be negative */
        terms[0] = r * fabs(cos(p[1])) + l * fabs(cos(p[2])) + fabs(p[0]);
        terms[1] = r * fabs(sin(p[1])) + l * fabs(sin(p[2])) + fabs(u);
    } else {
        terms[0] = p[0] * p[0] + p[1] * p[1] + (r + u) * (r + u);
    }
    rows_out(md, terms);
    for (int i = 0; i < md->m; ++i) terms[i] = fabs(terms[i]);
}

/* |x| without underflow or overflow in the squares */
static double norm3(const double *x) { return hypot(hypot(x[0], x[1]), x[2]); }

/* The slider crank's speed correction in the minimum-norm metric lies in
 * range(Phi_q^T): orthogonal to t = a x b for Phi_q's rows a, b scaled to
 * unit length, within 1e-8 |t| (|dq'| + |q'|) (q' before the projection:
 * the stored q' + dq' rounds to it) where |t|, the sine of the rows'
 * angle, is at least 1e-3 (the correction's part along t is then a few
 * thousand eps of it: Householder QR of Phi_q^T is backward stable row by
 * row, as is a product Phi_q^T y). */
static void check_crank_speeds(const double *J, const double *qdot_in, const double *qdot)
{
    double a[3], b[3], t[3], change[3];
    for (int j = 0; j < 3; ++j) {
        a[j] = J[2 * j];
        b[j] = J[1 + 2 * j];
        change[j] = qdot[j] - qdot_in[j];
    }
    double na = norm3(a), nb = norm3(b);
    if (!(na > 0.0 && nb > 0.0 && isfinite(na) && isfinite(nb))) return;
    for (int j = 0; j < 3; ++j) {
        a[j] /= na;
        b[j] /= nb;
    }
    t[0] = a[1] * b[2] - a[2] * b[1];
    t[1] = a[2] * b[0] - a[0] * b[2];
    t[2] = a[0] * b[1] - a[1] * b[0];
    double nt = norm3(t);
    if (!(nt >= 1e-3)) return;
    double along = t[0] * change[0] + t[1] * change[1] + t[2] * change[2];
    double measure = nt * (norm3(change) + norm3(qdot_in));
    /* this check's own products overflow, or its bound underflows */
    if (!isfinite(measure) || !(measure >= 1e-290)) return;
    if (!(fabs(along) <= 1e-8 * measure)) abort();
}

/* With CDYN_FUZZ_STRICT set, an OK projection of `in` to `out` (2n each)
 * must be right (mbs.h): Phi(q) = 0 and Phi_q q' + Phi_t = 0 at the
 * result, each row within 1e-8 of its terms (the Newton's tolerance is
 * about 1e-12 of each coordinate's size, which moves Phi by 1e-12
 * sum_j |Phi_q,ij| size_j: those count as terms, as the speeds' terms
 * before the projection do for Phi'; the
 * speeds only with Phi_t given: differences of Phi in t carry the rounding
 * of Phi's terms over their step, which no bound here models),
 * and for the pendulum (one row) the speed correction dq' in W Phi_q^T's
 * range: t^T W^-1 dq' = 0 for the tangent t, within 1e-8 of
 * |t| ||W^-1| (|dq'| + |q'|)| (2-norms: the range holds to rounding
 * normwise, mbs.h; a component of dq' 1e-228 of the others' may be
 * lost; W^-1 = M at the unprojected q, or I; q' before the projection:
 * the stored q' + dq' rounds to it).
 * The slider crank's correction likewise, in the minimum-norm metric
 * (check_crank_speeds). Loose bounds, for a wrong answer rather than its
 * last digits; only for
 * inputs with no injected failure and the default Newton settings. */
static void check_projection(model *md, int metric, int exact_phi_t, double t, const double *in,
                             const double *out)
{
    int n = md->n, m = md->m;
    double Phi[MMAX], terms[MMAX], J[MMAX * NMAX], Phi_t[MMAX] = {0}, p[NMAX];
    const double *q = out, *qdot = out + n;
    physical(md, q, p);
    if (metric == CDYN_PROJECT_MASS) {
        /* the mass metric's tolerances are mass-weighted (mbs.h): an entry
         * of M beyond 1e8 of its smallest diagonal resolves the light
         * coordinates only to the heavy ones' rounding */
        double M[NMAX * NMAX], big = 0.0, small = INFINITY;
        if (mass(t, in, M, n, md)) abort();
        for (int j = 0; j < n; ++j) {
            small = fmin(small, M[j + n * j]);
            for (int i = 0; i < n; ++i) big = fmax(big, fabs(M[i + n * j]));
        }
        if (!(big <= 1e8 * small)) return;
    }
    /* crank angles beyond 1e6 rad: sin and cos change by more than 1e-10
     * within one ulp, Phi is noise there and no tolerance rule can tell
     * (an OK at angles of 5e24 rad with the slider 1e53 m off was seen) */
    if (md->crank && !(fabs(p[1]) <= 1e6 && fabs(p[2]) <= 1e6)) return;
    if (phi(t, q, Phi, md) || jacobian(t, q, J, m, md) || phi_t(t, q, Phi_t, md)) abort();
    phi_terms(md, t, q, terms);
    /* each coordinate's size: |q_j|, or its nominal one where it is near 0
     * (the crank's angles, 1 rad; the slider and the bob, the lengths) */
    double reach = md->crank ? fmax(fabs(md->len[0]), fabs(md->len[1])) : fabs(md->len[0]);
    double nominal[NMAX]; /* may overflow to Inf: only non-zero J_ij multiply it */
    for (int j = 0; j < n; ++j) nominal[j] = (md->crank && j > 0 ? 1.0 : reach) / md->S[j];
    for (int i = 0; i < m; ++i) {
        double moved = 0.0; /* what the Newton's tolerance on q moves Phi by, over 1e-12 */
        for (int j = 0; j < n; ++j)
            if (J[i + m * j] != 0.0) moved += fabs(J[i + m * j]) * fmax(fabs(q[j]), nominal[j]);
        if (!(fabs(Phi[i]) <= 1e-8 * (terms[i] + moved))) abort();
        double residual = Phi_t[i], size = fabs(Phi_t[i]); /* of the speeds before, too */
        for (int j = 0; j < n; ++j) {
            residual += J[i + m * j] * qdot[j];
            size += fabs(J[i + m * j]) * (fabs(qdot[j]) + fabs(in[n + j]));
        }
        if (exact_phi_t && isfinite(size) && !(fabs(residual) <= 1e-8 * size)) abort();
    }
    if (md->redundant) return;
    if (md->crank) {
        if (metric == CDYN_PROJECT_MIN_NORM) check_crank_speeds(J, in + n, qdot);
        return;
    }
    double tangent[2] = {-J[1], J[0]}, change[2], size[2], M[4], weighted[2], bound[2];
    for (int j = 0; j < 2; ++j) { /* the change as stored: q' + dq' rounded */
        change[j] = qdot[j] - in[n + j];
        size[j] = fabs(change[j]) + fabs(in[n + j]);
    }
    if (metric == CDYN_PROJECT_MASS) {
        if (mass(t, in, M, 2, md)) abort();
        /* M's condition (2 x 2) within 1e8: beyond it the rounding of the
         * solves with M, amplified, is no longer below this bound (masses
         * of 1e235 beside 7e-9 and speeds of 3e235: 1e-6 seen) */
        double tr = M[0] + M[3], det = M[0] * M[3] - M[1] * M[2];
        double disc = sqrt(fmax(0.0, 0.25 * tr * tr - det));
        double big = 0.5 * tr + disc, small = det / big;
        if (!(small > 0.0 && big <= 1e8 * small)) return;
    }
    for (int i = 0; i < 2; ++i) {
        weighted[i] = metric == CDYN_PROJECT_MASS ? M[i] * change[0] + M[i + 2] * change[1]
                                                  : change[i];
        bound[i] = metric == CDYN_PROJECT_MASS ? fabs(M[i]) * size[0] + fabs(M[i + 2]) * size[1]
                                               : size[i];
    }
    double along = tangent[0] * weighted[0] + tangent[1] * weighted[1];
    double measure = hypot(tangent[0], tangent[1]) * hypot(bound[0], bound[1]);
    /* this check's own products overflow, or its bound underflows */
    if (!isfinite(measure) || !(measure >= 1e-290)) return;
    if (!(fabs(along) <= 1e-8 * measure)) abort();
}

/* A decoded parameter around its typical value (raw bits sometimes). */
static double param(fuzz_input *in, double typical) { return typical * (1.0 + fuzz_double(in)); }

/* The stabilizer, penalty, rank tolerance, Newton and partition settings. */
static void settings(fuzz_input *in, cdyn_mbs *mbs, int m, uint8_t setup)
{
    cdyn_constraint *c = cdyn_mbs_constraint(mbs);
    double k[MMAX], KD[MMAX * MMAX], KP[MMAX * MMAX];
    switch (setup & 3) {
    case 1: check_setter(c, cdyn_constraint_set_baumgarte(c, param(in, 5), param(in, 5))); break;
    case 2:
        for (int i = 0; i < m; ++i) k[i] = param(in, 5);
        check_setter(c, cdyn_constraint_set_critical_gains(c, k));
        break;
    case 3: {
        double off = fuzz_double(in);
        for (int j = 0; j < m; ++j) {
            double kj = param(in, 5);
            for (int i = 0; i < m; ++i) KD[i + m * j] = KP[i + m * j] = off;
            KD[j + m * j] = 2.0 * kj;
            KP[j + m * j] = kj * kj;
        }
        check_setter(c, cdyn_constraint_set_gains(c, KD, m, KP, m));
    } break;
    default: break;
    }
    if (setup & 4) {
        for (int i = 0; i < m; ++i) k[i] = param(in, 10);
        check_setter(c, cdyn_constraint_set_penalty(c, k));
    }
    if (setup & 8) check_setter(c, cdyn_constraint_set_rank_tolerance(c, fuzz_double(in)));
    cdyn_newton *nt = cdyn_mbs_newton(mbs);
    if ((setup & 16) && nt) {
        cdyn_newton_set_max_iterations(nt, (int)(fuzz_byte(in) % 30) - 1);
        cdyn_newton_set_max_backtracks(nt, fuzz_byte(in) % 8);
        double rtol = fuzz_double(in), a = fuzz_double(in), atol[3] = {a, a, a};
        cdyn_newton_set_tolerances(nt, rtol, a < 0.0 ? NULL : atol);
    }
    if (setup & 32) cdyn_mbs_set_partition_limit(mbs, fuzz_double(in));
}

/* A state near the manifold at t in physical units (p, p'), then perturbed. */
static void initial_state(fuzz_input *in, const model *md, double t, double *y)
{
    int n = md->n;
    double a = fuzz_double(in), da = fuzz_double(in), du, u = drive(md, t, &du, NULL);
    double r = md->len[0], l = md->len[1];
    if (md->crank) {
        double s3 = fmax(-1.0, fmin(1.0, (r * sin(a) - u) / l)), a3 = asin(s3);
        double da3 = (r * cos(a) * da - du) / (l * cos(a3));
        double pos[3] = {r * cos(a) + l * cos(a3), a, a3};
        double vel[3] = {-r * sin(a) * da - l * s3 * da3, da, da3};
        memcpy(y, pos, sizeof pos);
        memcpy(y + n, vel, sizeof vel);
    } else {
        double len = r + u;
        y[0] = len * sin(a);
        y[1] = -len * cos(a);
        y[2] = len * da * cos(a) + du * sin(a);
        y[3] = len * da * sin(a) - du * cos(a);
    }
    for (int i = 0; i < 2 * n; ++i) y[i] += fuzz_double(in) / 64.0;
    for (int j = 0; j < n; ++j) {
        y[j] /= md->S[j];
        y[n + j] /= md->S[j];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    uint8_t shape = fuzz_byte(&in), fail = fuzz_byte(&in), setup = fuzz_byte(&in);
    uint8_t steps = fuzz_byte(&in);
    model md = {0};
    md.crank = shape & 1;
    md.redundant = (shape >> 1) & 1;
    md.n = md.crank ? 3 : 2;
    md.m = (md.crank ? 2 : 1) + md.redundant;
    md.fail_fn = (fail & 7) - 1; /* -1 and 6: none */
    md.fail_at = (fail >> 3) & 15;
    md.fail_nan = fail >> 7;
    double typical_mass[3] = {2.5, md.crank ? 0.0075 : 2.5, 0.129};
    for (int i = 0; i < 3; ++i) md.mass[i] = param(&in, typical_mass[i]);
    md.len[0] = param(&in, 1.0);
    md.len[1] = param(&in, 2.0);
    md.grav = param(&in, 9.81);
    md.damp = param(&in, 0.1);
    md.coupling = param(&in, 0.25);
    md.amp = (shape & 4) ? param(&in, 0.1) : 0.0;
    md.omega = param(&in, 2.0);
    md.w = param(&in, 1.0);
    fuzz_scales(&in, md.R, md.m);
    fuzz_scales(&in, md.S, md.n);
    double t = fuzz_double(&in), h = param(&in, 0.01);
    int n = md.n, m = md.m, d = n - m;
    double y[2 * NMAX + FUZZ_GUARD], ydot[2 * NMAX + FUZZ_GUARD] = {0}, before[2 * NMAX];
    initial_state(&in, &md, t, y);
    fuzz_guard_set(y, 2 * (size_t)n);
    fuzz_guard_set(ydot, 2 * (size_t)n);

    cdyn_status st;
    if (setup & 64) { /* hostile sizes: refused with a status, or usable and freed */
        int hn = fuzz_size(&in, -1, 4), hm = fuzz_size(&in, -1, 4);
        cdyn_mbs *h_mbs = cdyn_mbs_create(hn, hm, &st);
        if (!h_mbs && st == CDYN_OK) abort();
        cdyn_mbs_free(h_mbs);
    }
    cdyn_mbs *mbs = cdyn_mbs_create(n, m, &st);
    if (!mbs) abort();
    memcpy(before, ydot, sizeof before);
    check(mbs, cdyn_mbs_rhs(mbs, t, y, ydot), ydot, 2 * n, before); /* no model yet */
    check(mbs, cdyn_mbs_last_reactions(mbs, NULL, NULL), NULL, 0, NULL);
    if (cdyn_mbs_set_model(mbs, mass, NULL, phi, jacobian, &md) != CDYN_ERR_ARG) abort();
    check(mbs, cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, &md), NULL, 0, NULL);
    check(mbs, cdyn_mbs_set_time_terms(mbs, (shape & 32) ? phi_t : NULL, (shape & 64) ? xi : NULL),
          NULL, 0, NULL);
    int formulation = (shape >> 3) & 3; /* 3 is not a formulation */
    st = cdyn_mbs_set_formulation(mbs, (cdyn_mbs_formulation)formulation);
    if ((st == CDYN_OK) != (formulation < 3)) abort();
    check(mbs, st, NULL, 0, NULL);
    if (cdyn_mbs_set_projection_metric(mbs, (cdyn_mbs_metric)2) != CDYN_ERR_ARG) abort();
    cdyn_mbs_metric metric = (cdyn_mbs_metric)(shape >> 7);
    settings(&in, mbs, m, setup);
    if (steps & (64 | 128)) { /* periods: the crank angles' own (2 pi in their units), or any */
        double period[NMAX];
        int valid = 1;
        for (int j = 0; j < n; ++j) {
            period[j] = (steps & 128) ? fuzz_double(&in)
                                      : md.crank && j > 0 ? 6.283185307179586 / fabs(md.S[j]) : 0.0;
            valid &= period[j] >= 0.0 && isfinite(period[j]);
        }
        st = cdyn_mbs_set_periods(mbs, period);
        if ((st == CDYN_OK) != valid) abort();
        check(mbs, st, NULL, 0, NULL);
    }
    if (setup & 128) fuzz_fill(&in, y, 2 * (size_t)n); /* a raw state */

    /* rhs, explicit Euler steps and projection, alternating the metric */
    int strict = getenv("CDYN_FUZZ_STRICT") != NULL;
    for (int k = 0; k <= (steps & 3); ++k) {
        memcpy(before, ydot, sizeof before);
        st = cdyn_mbs_rhs(mbs, t, y, ydot);
        check(mbs, st, ydot, 2 * n, before);
        if (st != CDYN_OK) break;
        check_reactions(mbs, n, m);
        for (int i = 0; i < 2 * n; ++i) y[i] += h * ydot[i];
        t += h;
        cdyn_mbs_set_projection_metric(mbs, (cdyn_mbs_metric)(metric ^ (k & 1)));
        memcpy(before, y, sizeof before);
        st = cdyn_mbs_project(mbs, t, y);
        check(mbs, st, y, 2 * n, st == CDYN_ERR_NOCONV ? NULL : before);
        if (st == CDYN_OK) check_reactions(mbs, n, m);
        if (st == CDYN_OK && strict && (md.fail_fn < 0 || md.fail_fn >= F_COUNT) &&
            !(setup & 16))
            check_projection(&md, metric ^ (k & 1), (shape & 32) != 0, t, before, y);
    }

    /* the Jacobian of the right-hand side (the Lagrange form's goes through
     * the evaluation's factorization): finite on OK, untouched otherwise */
    if (steps & 16) {
        double J[4 * NMAX * NMAX + FUZZ_GUARD], J_before[4 * NMAX * NMAX];
        int count = 4 * n * n;
        for (int i = 0; i < count; ++i) J[i] = J_before[i] = 7.0;
        fuzz_guard_set(J, (size_t)count);
        st = cdyn_mbs_rhs_jacobian(mbs, t, y, NULL, J, 2 * n);
        check(mbs, st, J, count, J_before);
        if (st == CDYN_OK) check_reactions(mbs, n, m);
    }

    /* coordinate partitioning: refused unless 0 < m < n */
    st = cdyn_mbs_partition(mbs, t, y);
    check(mbs, st, NULL, 0, NULL);
    if (st == CDYN_OK) {
        int ind[NMAX], dep[MMAX], seen = 0;
        if (cdyn_mbs_partition_coordinates(mbs, ind, dep) < 0) abort();
        for (int j = 0; j < d; ++j) seen |= 1 << ind[j];
        for (int i = 0; i < m; ++i) seen |= 1 << dep[i];
        if (seen != (1 << n) - 1) abort();
        double z[2 * NMAX + FUZZ_GUARD], zdot[2 * NMAX + FUZZ_GUARD];
        fuzz_guard_set(z, 2 * (size_t)d);
        fuzz_guard_set(zdot, 2 * (size_t)d);
        st = cdyn_mbs_partition_gather(mbs, y, z);
        check(mbs, st, z, 2 * d, NULL);
        for (int k = 0; st == CDYN_OK && k <= ((steps >> 2) & 3); ++k) {
            memcpy(before, zdot, sizeof before);
            st = cdyn_mbs_partition_rhs(mbs, t, z, zdot);
            check(mbs, st, zdot, 2 * d, before);
            if (st == CDYN_OK) check_reactions(mbs, n, m);
            for (int i = 0; st == CDYN_OK && i < 2 * d; ++i) z[i] += h * zdot[i];
            t += h;
        }
        if (st == CDYN_OK && (steps & 32)) { /* the state matrix: finite, or untouched */
            double A[4 * NMAX * NMAX + FUZZ_GUARD], A_before[4 * NMAX * NMAX];
            int count = 4 * d * d;
            for (int i = 0; i < count; ++i) A[i] = A_before[i] = 7.0;
            fuzz_guard_set(A, (size_t)count);
            st = cdyn_mbs_partition_jacobian(mbs, t, z, NULL, A, 2 * d);
            check(mbs, st, A, count, A_before);
        }
        cdyn_mbs_partition_event(mbs);
    }
    cdyn_mbs_free(mbs);
    return 0;
}
