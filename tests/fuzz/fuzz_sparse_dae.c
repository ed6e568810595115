/* libFuzzer harness: cdyn_sparse_dae (optional cdyn_sparse) with a decoded
 * pattern (well formed or not), decoded masses (zeros: algebraic states),
 * and the model F_i = sum_j a_ij v_j + c_i + d_i v_i |v_i| on that pattern
 * (its Jacobian exact), in decoded units. Checks that a malformed pattern
 * is refused, that CDYN_OK results are finite, that m v' = F holds for the
 * states with mass and the differentiated constraints for the massless
 * ones (singular blocks included), that nothing is written past the
 * outputs, and, with CDYN_FUZZ_STRICT set in the environment, that the
 * algebraic equations hold at the returned state (a generous model of the
 * default tolerances of newton.h, for campaigns, not CI's 60 s run). */
#include <cdyn/sparse_dae.h>

#include "fuzz_input.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NMAX = 10, NNZ = NMAX * NMAX };

typedef struct {
    int n, colptr[NMAX + 1], rowind[NNZ];
    double a[NNZ], c[NMAX], d[NMAX];
} model;

static int force(double t, const double *v, double *F, void *user)
{
    const model *m = user;
    for (int i = 0; i < m->n; ++i) F[i] = m->c[i] * (1.0 + 0.1 * t) + m->d[i] * v[i] * fabs(v[i]);
    for (int j = 0; j < m->n; ++j)
        for (int e = m->colptr[j]; e < m->colptr[j + 1]; ++e) F[m->rowind[e]] += m->a[e] * v[j];
    return 0;
}

/* The algebraic equations hold at the state an OK right-hand side
 * returns: F_i(w) = 0 for the massless rows within 1e-6 of the size of
 * its terms plus the states' tolerance (the Newton solve converges on the
 * states: 1e-10 of the larger of |w_j| and the largest |v_j| the object
 * was given or returned, with a floor for one of unknown magnitude from
 * the equations with other terms that it enters, newton.h, which judges a
 * state whose own equation is its term alone, like a closed valve, against
 * those; here, generously, their widest others / coefficient, and 1e-6 of
 * the largest state: a gross check). Equations whose coefficients span
 * 1e100 or more, or exceed
 * 1e200, are not judged (the ends of the exponent range). F = F(w, t). */
static void check_constraints_hold(const model *m, const double *mass, double t,
                                   const double *w, const double *F, const double *reach)
{
    int n = m->n;
    double size[NMAX] = {0}, lo[NMAX], hi[NMAX] = {0}, largest = 0.0, terms[NMAX], scale[NMAX];
    for (int i = 0; i < n; ++i) { /* each equation's terms at w */
        lo[i] = INFINITY;
        largest = fmax(largest, fmax(fabs(w[i]), reach[i]));
        terms[i] = fabs(m->c[i]) * (1.0 + 0.1 * fabs(t)) + fabs(m->d[i]) * w[i] * w[i];
    }
    for (int j = 0; j < n; ++j)
        for (int e = m->colptr[j]; e < m->colptr[j + 1]; ++e)
            terms[m->rowind[e]] += fabs(m->a[e] * w[j]);
    for (int j = 0; j < n; ++j) { /* the widest scale an equation with other terms gives state j */
        scale[j] = 0.0;
        for (int e = m->colptr[j]; e < m->colptr[j + 1]; ++e) {
            int i = m->rowind[e];
            double a = fabs(m->a[e] + (i == j ? 2.0 * m->d[i] * fabs(w[i]) : 0.0));
            double others = terms[i] - fabs(m->a[e] * w[j]) - (i == j ? fabs(m->d[i]) * w[i] * w[i] : 0.0);
            if (a > 0.0 && others > 0.0) scale[j] = fmax(scale[j], others / a);
        }
    }
    for (int j = 0; j < n; ++j)
        for (int e = m->colptr[j]; e < m->colptr[j + 1]; ++e) {
            int i = m->rowind[e];
            double a = fabs(m->a[e]);
            double r = fmax(fmax(fabs(w[j]), scale[j]), fmax(reach[j], 1e-6 * largest));
            size[i] += a * (fabs(w[j]) + r);
            if (a > 1e-290) {
                lo[i] = fmin(lo[i], a);
                hi[i] = fmax(hi[i], a);
            }
        }
    for (int i = 0; i < n; ++i) {
        if (mass[i] != 0.0) continue;
        double c = fabs(m->c[i]) * (1.0 + 0.1 * fabs(t)), d = fabs(m->d[i]);
        double r = fmax(fmax(fabs(w[i]), scale[i]), fmax(reach[i], 1e-6 * largest));
        size[i] += c + d * w[i] * w[i] + 2.0 * d * fabs(w[i]) * r;
        if (c > 1e-290) lo[i] = fmin(lo[i], c), hi[i] = fmax(hi[i], c);
        if (d > 1e-290) lo[i] = fmin(lo[i], d), hi[i] = fmax(hi[i], d);
        if (!(hi[i] <= 1e200) || hi[i] > 1e100 * lo[i] || !isfinite(size[i])) continue;
        if (!(fabs(F[i]) <= 1e-6 * size[i])) abort();
    }
}

static int jacobian(double t, const double *v, double *values, void *user)
{
    const model *m = user;
    (void)t;
    for (int j = 0; j < m->n; ++j)
        for (int e = m->colptr[j]; e < m->colptr[j + 1]; ++e)
            values[e] = m->a[e] + (m->rowind[e] == j ? 2.0 * m->d[j] * fabs(v[j]) : 0.0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    model m;
    memset(&m, 0, sizeof m);
    m.n = fuzz_size(&in, 0, NMAX);
    cdyn_status st;
    double mass[NMAX];
    if (m.n < 1 || m.n > NMAX) { /* hostile sizes (no arrays of that size): refused */
        if (cdyn_sparse_dae_create(m.n, NULL, NULL, NULL, &st) || st != CDYN_ERR_ARG) abort();
        return 0;
    }
    int n = m.n;
    uint8_t shape = fuzz_byte(&in);
    for (int j = 0; j < n; ++j) { /* the diagonal first (a regular block is likely), then more */
        int count = fuzz_byte(&in) % 4;
        m.colptr[j + 1] = m.colptr[j];
        if (!(shape & 1)) m.rowind[m.colptr[j + 1]++] = j;
        for (int k = 0; k < count && m.colptr[j + 1] < NNZ; ++k) {
            uint8_t b = fuzz_byte(&in);
            int row = b == 0xFF ? -1 : (int)(b % (unsigned)n);
            int repeat = 0;
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e) repeat |= m.rowind[e] == row;
            if (!repeat || (shape & 2)) m.rowind[m.colptr[j + 1]++] = row; /* 2: keep repeats */
        }
    }
    double scale = fuzz_scale(&in);
    for (int j = 0; j < n; ++j) {
        uint8_t b = fuzz_byte(&in);
        mass[j] = b & 1 ? 0.0 : scale * (0.5 + (b >> 1) / 64.0);
        if (b == 0xFE) mass[j] = -1.0;
    }
    fuzz_fill(&in, m.a, (size_t)m.colptr[n]);
    fuzz_fill(&in, m.c, (size_t)n);
    fuzz_fill(&in, m.d, (size_t)n);
    cdyn_sparse_dae *sd = cdyn_sparse_dae_create(n, mass, m.colptr, m.rowind, &st);
    if (!sd) return 0;
    if (cdyn_sparse_dae_set_model(sd, force, jacobian, NULL, &m) != CDYN_OK) abort();
    double v[NMAX], t = fuzz_double(&in);
    fuzz_fill(&in, v, (size_t)n);
    double reach[NMAX]; /* the largest |v_j| the object was given or returned */
    for (int j = 0; j < n; ++j) reach[j] = fabs(v[j]);
    st = cdyn_sparse_dae_consistent(sd, t, v);
    if (st == CDYN_OK)
        for (int j = 0; j < n; ++j) reach[j] = fmax(reach[j], fabs(v[j]));
    fuzz_ok_finite(st, v, (size_t)n);
    int nd = cdyn_sparse_dae_ode_size(sd), integrated[NMAX];
    if (nd < 0 || nd > n || cdyn_sparse_dae_split_states(sd, integrated, NULL) != nd) abort();
    double y[NMAX], ydot[NMAX + FUZZ_GUARD];
    for (int l = 0; l < nd; ++l) y[l] = v[integrated[l]];
    fuzz_guard_set(ydot, (size_t)nd);
    st = cdyn_sparse_dae_rhs(sd, t, y, ydot);
    fuzz_ok_finite(st, ydot, (size_t)nd);
    if (!fuzz_guard_ok(ydot, (size_t)nd)) abort();
    if (st == CDYN_OK) { /* v' = F / m for the states with mass, to a few roundings
                          * (and the subnormal spacing, where F / m underflows;
                          * m v' itself may overflow where F is near the range) */
        double w[NMAX], wd[NMAX], F[NMAX];
        if (cdyn_sparse_dae_last_state(sd, w, wd) != CDYN_OK) abort();
        fuzz_ok_finite(st, wd, (size_t)n);
        force(t, w, F, &m);
        for (int l = 0; l < nd; ++l) {
            int j = integrated[l];
            double expected = F[j] / mass[j];
            double tol = 8.0 * DBL_EPSILON * fabs(expected) + 2.0 * DBL_TRUE_MIN;
            if (!(fabs(wd[j] - expected) <= tol)) abort();
        }
        /* the differentiated constraints dF_A/dv v' + dF_A/dt = 0, also
         * through a singular block (its rank-revealing step): loosely, as
         * dF/dt is a central difference in t (exact for this model up to
         * rounding of F's size over the step), and with the certificate's
         * floor (sparse_dae.c): an algebraic rate may carry eps times the
         * largest |v_k'| / u_k of its neighbours (sharing a non-zero row
         * entry of the block), u_j = 1 / max_i |A_ij| / max_k |A_ik| (the
         * library's powers of two are within a factor 2, so 4 u_j; its
         * scales are clamped to 2^+-1000, and a column that equilibrates to
         * zero, or underflows, has the unit 1) */
        double jac[NNZ], res[NMAX], bound[NMAX], row_max[NMAX] = {0}, unit[NMAX] = {0};
        double row_size[NMAX] = {0};
        jacobian(t, w, jac, &m);
#define IN_BLOCK(e, j) (mass[j] == 0.0 && mass[m.rowind[e]] == 0.0)
        for (int j = 0; j < n; ++j)
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e)
                if (IN_BLOCK(e, j)) row_max[m.rowind[e]] = fmax(row_max[m.rowind[e]], fabs(jac[e]));
        for (int j = 0; j < n; ++j) {
            double largest = 0.0;
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e)
                if (IN_BLOCK(e, j) && row_max[m.rowind[e]] > 0.0)
                    largest = fmax(largest, fabs(jac[e]) / row_max[m.rowind[e]]);
            unit[j] = largest > 0.0 ? fmax(fmin(1.0 / largest, 0x1p1000), 0x1p-1000) : 1.0;
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e)
                if (IN_BLOCK(e, j) && jac[e] != 0.0)
                    row_size[m.rowind[e]] = fmax(row_size[m.rowind[e]], fabs(wd[j]) / unit[j]);
        }
        for (int i = 0; i < n; ++i) {
            res[i] = 0.1 * m.c[i];
            bound[i] = fabs(res[i]) + fabs(F[i]) + fabs(m.c[i]) * (1.0 + 0.1 * fabs(t));
        }
        for (int j = 0; j < n; ++j) {
            double neighbours = 0.0;
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e)
                if (IN_BLOCK(e, j) && jac[e] != 0.0)
                    neighbours = fmax(neighbours, row_size[m.rowind[e]]);
            double floor = 4.0 * unit[j] * DBL_EPSILON * neighbours;
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e) {
                res[m.rowind[e]] += jac[e] * wd[j];
                bound[m.rowind[e]] += fabs(jac[e] * wd[j]) + fabs(m.a[e] * w[j]);
                if (jac[e] != 0.0 && floor > 0.0) /* (0 times Inf is no bound) */
                    bound[m.rowind[e]] += fabs(jac[e]) * floor;
            }
        }
#undef IN_BLOCK
        /* not judged: rows whose terms are all near the subnormal range (no
         * relative accuracy: a rate of 1.4e-310 for 0 was seen,
         * seeds/sparse_dae_subnormal_rate), and, as in the strict check
         * below, rows whose coefficients span 1e100 or more or exceed 1e200
         * (equilibrating such a block clamps its scales at 2^+-1000, and a
         * right-hand side of 1e-234 beside coefficients of 1e308 underflows:
         * seeds/sparse_dae_wide_row) */
        double lo[NMAX], hi[NMAX];
        for (int i = 0; i < n; ++i) {
            lo[i] = INFINITY;
            hi[i] = 0.0;
            double cd[2] = {fabs(m.c[i]), fabs(m.d[i])};
            for (int e = 0; e < 2; ++e)
                if (cd[e] > 1e-290) lo[i] = fmin(lo[i], cd[e]), hi[i] = fmax(hi[i], cd[e]);
        }
        for (int j = 0; j < n; ++j)
            for (int e = m.colptr[j]; e < m.colptr[j + 1]; ++e) {
                double a = fabs(m.a[e]);
                if (a > 1e-290) lo[m.rowind[e]] = fmin(lo[m.rowind[e]], a), hi[m.rowind[e]] = fmax(hi[m.rowind[e]], a);
            }
        for (int i = 0; i < n; ++i)
            if (mass[i] == 0.0 && bound[i] > 1e6 * DBL_MIN && hi[i] <= 1e200 &&
                !(hi[i] > 1e100 * lo[i]) &&
                !(fabs(res[i]) <= 1e-6 * bound[i] * (1.0 + fabs(t)) + 1e8 * DBL_TRUE_MIN))
                abort(); /* (and the subnormal spacing of F over the time step) */
        if (getenv("CDYN_FUZZ_STRICT")) check_constraints_hold(&m, mass, t, w, F, reach);
    }
    cdyn_sparse_dae_free(sd);
    return 0;
}
