/* The hydraulic grid of hydraulic_grid.h. */
#include "hydraulic_grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* state indices: pipes 0..np-1, pressures np.., orifices np+nj.. */
int grid_p(const grid *g, int j) { return g->np + j; }
int grid_o(const grid *g, int j) { return g->np + g->nj + j; }

static double inflow(const grid *g, double t) { return g->b0 * (1.0 + 0.5 * sin(g->w * t)); }
static double inflow_dot(const grid *g, double t) { return g->b0 * 0.5 * g->w * cos(g->w * t); }

/* The pattern: column c lists the equations in which state c appears. */
static void grid_pattern(grid *g)
{
    int n = g->n;
    int *count = calloc((size_t)n, sizeof(int));
    /* entries (row, col): pipe e: (e, e), (e, p_a), (e, p_b); junction
     * rows: (p_j, q_e) for its pipes, (p_j, o_j); orifice: (o_j, p_j), (o_j, o_j) */
    int cap = 3 * g->np + 2 * g->np + 4 * g->nj;
    int *rows = malloc(sizeof(int) * (size_t)cap), *cols = malloc(sizeof(int) * (size_t)cap), m = 0;
#define ADD(r, c) (rows[m] = (r), cols[m] = (c), ++count[c], ++m)
    for (int e = 0; e < g->np; ++e) {
        ADD(e, e);
        ADD(e, grid_p(g, g->from[e]));
        ADD(e, grid_p(g, g->to[e]));
        ADD(grid_p(g, g->from[e]), e);
        ADD(grid_p(g, g->to[e]), e);
    }
    for (int j = 0; j < g->nj; ++j) {
        ADD(grid_p(g, j), grid_o(g, j));
        ADD(grid_o(g, j), grid_p(g, j));
        ADD(grid_o(g, j), grid_o(g, j));
    }
#undef ADD
    g->nnz = m;
    g->colptr = malloc(sizeof(int) * ((size_t)n + 1));
    g->rowind = malloc(sizeof(int) * (size_t)m);
    g->colptr[0] = 0;
    for (int c = 0; c < n; ++c) g->colptr[c + 1] = g->colptr[c] + count[c];
    int *next = calloc((size_t)n, sizeof(int));
    for (int c = 0; c < n; ++c) next[c] = g->colptr[c];
    for (int x = 0; x < m; ++x) g->rowind[next[cols[x]]++] = rows[x];
    free(next);
    free(count);
    free(rows);
    free(cols);
}

void grid_init(grid *g, int k)
{
    memset(g, 0, sizeof *g);
    g->k = k;
    g->nj = k * k;
    g->np = 2 * k * (k - 1);
    g->n = g->np + 2 * g->nj;
    g->from = malloc(sizeof(int) * (size_t)g->np);
    g->to = malloc(sizeof(int) * (size_t)g->np);
    g->L = malloc(sizeof(double) * (size_t)g->np);
    g->R = malloc(sizeof(double) * (size_t)g->np);
    g->K = malloc(sizeof(double) * (size_t)g->np);
    int e = 0;
    for (int r = 0; r < k; ++r)
        for (int c = 0; c < k; ++c) {
            int j = r * k + c;
            if (c + 1 < k) g->from[e] = j, g->to[e++] = j + 1;
            if (r + 1 < k) g->from[e] = j, g->to[e++] = j + k;
        }
    double rho = 1000.0, area = 1.963e-3; /* 50 mm pipes */
    for (e = 0; e < g->np; ++e) {
        int resistive = e % 3 == 1;
        g->L[e] = resistive ? 0.0 : rho * (10.0 + e % 7) / area;
        g->R[e] = 2.0e7 * (1.0 + 0.1 * (e % 5));
        g->K[e] = 1.0e10 * (1.0 + 0.05 * (e % 3));
    }
    g->Ro = 5.0e8;
    g->Ko = 4.0e11;
    g->p0 = 1.0e5;
    g->b0 = 2.0e-3 * g->nj;
    g->w = 3.0;
    g->sq = g->sp = 1.0;
    g->valve = -1;
    g->mass = calloc((size_t)g->n, sizeof(double));
    g->e = malloc(sizeof(double) * (size_t)g->n);
    for (int i = 0; i < g->n; ++i) g->e[i] = 1.0;
    for (e = 0; e < g->np; ++e) g->mass[e] = g->L[e];
    grid_pattern(g);
}

/* rescale: flows by sq, pressures by sp, equation i by e_i (the masses follow) */
void grid_units(grid *g, double sq, double sp, double se)
{
    g->sq = sq;
    g->sp = sp;
    for (int i = 0; i < g->n; ++i) g->e[i] = i % 2 ? se : 1.0 / se;
    for (int e = 0; e < g->np; ++e) g->mass[e] = g->e[e] * g->L[e] / sq;
}

int grid_set_valve(grid *g, double s)
{
    int e = g->np / 2;
    while (e % 3 != 1) ++e; /* resistive: algebraic */
    g->valve = e;
    g->opening = s;
    return e;
}

void grid_free(grid *g)
{
    free(g->from), free(g->to), free(g->L), free(g->R), free(g->K);
    free(g->mass), free(g->colptr), free(g->rowind), free(g->e);
}

int grid_force(double t, const double *v, double *F, void *user)
{
    grid *g = user;
    if (g->force_fail) return g->force_fail;
    if (g->reenter) g->reentry_status = cdyn_sparse_dae_rhs(g->reenter, t, v, F);
    for (int i = 0; i < g->nj; ++i) F[grid_p(g, i)] = 0.0;
    for (int e = 0; e < g->np; ++e) {
        double q = v[e] / g->sq, pa = v[grid_p(g, g->from[e])] / g->sp, pb = v[grid_p(g, g->to[e])] / g->sp;
        if (e == g->valve)
            F[e] = g->opening * g->opening * (pa - pb) - g->K[e] * q * fabs(q) -
                   g->valve_resistance * q;
        else
            F[e] = pa - pb - g->R[e] * q - g->K[e] * q * fabs(q);
        F[grid_p(g, g->from[e])] -= q;
        F[grid_p(g, g->to[e])] += q;
    }
    for (int j = 0; j < g->nj; ++j) {
        double o = v[grid_o(g, j)] / g->sq, p = v[grid_p(g, j)] / g->sp;
        F[grid_p(g, j)] -= o;
        F[grid_o(g, j)] = p - g->p0 - g->Ro * o - g->Ko * o * fabs(o);
    }
    F[grid_p(g, 0)] += inflow(g, t);
    for (int i = 0; i < g->n; ++i) F[i] *= g->e[i];
    return 0;
}

int grid_jacobian(double t, const double *v, double *values, void *user)
{
    grid *g = user;
    (void)t;
    if (g->jac_fail) return g->jac_fail;
    for (int c = 0; c < g->n; ++c)
        for (int x = g->colptr[c]; x < g->colptr[c + 1]; ++x) {
            int r = g->rowind[x];
            double d;
            if (c < g->np) { /* a pipe flow */
                double q = v[c] / g->sq;
                double resistance = c == g->valve ? g->valve_resistance : g->R[c];
                d = r == c ? -resistance - 2.0 * g->K[c] * fabs(q)
                           : (r == grid_p(g, g->from[c]) ? -1.0 : 1.0);
                d /= g->sq;
            } else if (c < g->np + g->nj) { /* a pressure */
                int j = c - g->np;
                d = r < g->np ? (g->from[r] == j ? 1.0 : -1.0) : 1.0;
                if (r == g->valve) d *= g->opening * g->opening;
                d /= g->sp;
            } else { /* an orifice flow */
                double o = v[c] / g->sq;
                d = r == c ? -g->Ro - 2.0 * g->Ko * fabs(o) : -1.0;
                d /= g->sq;
            }
            values[x] = g->e[r] * d;
        }
    if (g->jac_nan) values[0] = NAN;
    return 0;
}

int grid_time(double t, const double *v, double *dFdt, void *user)
{
    grid *g = user;
    (void)v;
    memset(dFdt, 0, sizeof(double) * (size_t)g->n);
    dFdt[grid_p(g, 0)] = g->e[grid_p(g, 0)] * inflow_dot(g, t);
    return 0;
}

void grid_guess(const grid *g, double *v)
{
    for (int e = 0; e < g->np; ++e) v[e] = g->sq * 1e-3 * (1.0 + 0.1 * (e % 4));
    for (int j = 0; j < g->nj; ++j) {
        v[grid_p(g, j)] = g->sp * (g->p0 + 1e5);
        v[grid_o(g, j)] = g->sq * 2e-3;
    }
}

