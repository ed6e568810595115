/*
 * water_model.h - the looped water network of examples/water_network.c
 * (a k x k grid of pipes between a reservoir and a valve, consumers at
 * every seventh junction, rigid water columns in SI units) and its
 * minimum-order right-hand side through cdyn_network (loop flows from the
 * spanning tree, THEORY T1.6); shared by water_network.c and
 * ensemble_mpi.c. See water_network.c for the model's equations.
 */
#ifndef CDYN_EXAMPLE_WATER_MODEL_H
#define CDYN_EXAMPLE_WATER_MODEL_H

#include <cdyn/network.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RHO 1000.0       /* kg/m^3 */
#define PI 3.14159265358979323846
#define P_RESERVOIR 4e5  /* Pa (gauge) */
#define FRICTION 0.02    /* Darcy friction factor */
#define K_VALVE 2e7      /* Pa / (m^3/s)^2, fully open */
#define DEMAND 2e-4      /* m^3/s per consumer */

typedef struct {
    int k, n, m;
    int *colptr, *rowind;
    double *W, *L, *R;   /* incidence values, inertances, loss factors */
    double *b;           /* W q = b: minus the demands */
    int supply, outlet;  /* pipe indices */
    int valve_node;
    double t_close, closing; /* the valve closes from t_close to t_close + closing (s) */
} network;

static inline double smoothstep(double x) { return x <= 0 ? 0 : x >= 1 ? 1 : x * x * (3 - 2 * x); }

/* The valve's opening s(t): 1, then down to 0.1 along a smoothstep. */
static inline double opening(const network *net, double t)
{
    return 1.0 - 0.9 * smoothstep((t - net->t_close) / net->closing);
}

/* A pipe of length l and diameter D: inertance and Darcy loss factor. */
static inline void pipe(network *net, int k, double l, double D)
{
    double A = PI * D * D / 4.0;
    net->L[k] = RHO * l / A;
    net->R[k] = FRICTION * (l / D) * RHO / (2.0 * A * A);
}

static inline void add_entry(network *net, int *nnz, int row, double value)
{
    net->rowind[*nnz] = row;
    net->W[(*nnz)++] = value;
}

static inline int build(network *net, int k)
{
    memset(net, 0, sizeof *net);
    net->k = k;
    net->m = k * k;
    net->n = 2 * k * (k - 1) + 2;
    int n = net->n, m = net->m;
    net->colptr = malloc(sizeof(int) * (size_t)(n + 1));
    net->rowind = malloc(sizeof(int) * (size_t)(2 * n));
    net->W = malloc(sizeof(double) * (size_t)(2 * n));
    net->L = malloc(sizeof(double) * (size_t)n);
    net->R = malloc(sizeof(double) * (size_t)n);
    net->b = malloc(sizeof(double) * (size_t)m);
    if (!net->colptr || !net->rowind || !net->W || !net->L || !net->R || !net->b) return 0;
    int p = 0, nnz = 0;
    net->colptr[0] = 0;
    for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
            int node = i * k + j;
            for (int dir = 0; dir < 2; ++dir) {
                int other = dir == 0 ? (j + 1 < k ? node + 1 : -1) : (i + 1 < k ? node + k : -1);
                if (other < 0) continue;
                add_entry(net, &nnz, node, 1.0);   /* leaves node */
                add_entry(net, &nnz, other, -1.0); /* enters other */
                pipe(net, p, 100.0, 0.15 + 0.05 * ((7 * node + 3 * dir) % 4));
                net->colptr[++p] = nnz;
            }
        }
    net->supply = p; /* reservoir -> junction 0 */
    add_entry(net, &nnz, 0, -1.0);
    pipe(net, p, 500.0, 1.0);
    net->colptr[++p] = nnz;
    net->outlet = p; /* last junction -> valve -> atmosphere */
    add_entry(net, &nnz, m - 1, 1.0);
    pipe(net, p, 50.0, 0.3);
    net->colptr[++p] = nnz;
    net->valve_node = m - 1;
    net->t_close = 6.0;
    net->closing = 0.5;
    for (int j = 0; j < m; ++j) net->b[j] = (j % 7 == 3) ? -DEMAND : 0.0;
    return 1;
}

static inline void release(network *net)
{
    free(net->colptr);
    free(net->rowind);
    free(net->W);
    free(net->L);
    free(net->R);
    free(net->b);
}

/* The forces F(q, t): losses, the reservoir and the valve. */
static inline void forces(const network *net, double t, const double *q, double *F)
{
    for (int k = 0; k < net->n; ++k) F[k] = -net->R[k] * q[k] * fabs(q[k]);
    F[net->supply] += P_RESERVOIR;
    double s = opening(net, t);
    F[net->outlet] -= K_VALVE / (s * s) * q[net->outlet] * fabs(q[net->outlet]);
}

/* ---- the sparse run: loop flows through cdyn_network ------------------- */

typedef struct {
    const network *net;
    cdyn_network *obj;
    int d, *indep;
    double *q, *F, *qdot, *p;
} sparse_run;

/* vbar' from vbar at t (q, F, qdot, p hold the evaluation afterwards). */
static inline int sparse_rhs(sparse_run *r, double t, const double *vbar, double *vbar_dot)
{
    for (int j = 0; j < r->d; ++j) r->q[r->indep[j]] = vbar[j];
    if (cdyn_network_complete(r->obj, r->q, r->net->b) != CDYN_OK) return 0;
    forces(r->net, t, r->q, r->F);
    if (cdyn_network_solve(r->obj, r->F, NULL, r->qdot, r->p) != CDYN_OK) return 0;
    for (int j = 0; j < r->d; ++j) vbar_dot[j] = r->qdot[r->indep[j]];
    return 1;
}

/* One RK4 step of size h on y (len) with rhs(ctx, t, y, ydot). */
typedef int (*rhs_fn)(void *ctx, double t, const double *y, double *ydot);
static inline int rk4(rhs_fn f, void *ctx, double t, double h, int len, double *y, double *work)
{
    double *k1 = work, *k2 = k1 + len, *k3 = k2 + len, *k4 = k3 + len, *ys = k4 + len;
    if (!f(ctx, t, y, k1)) return 0;
    for (int i = 0; i < len; ++i) ys[i] = y[i] + 0.5 * h * k1[i];
    if (!f(ctx, t + 0.5 * h, ys, k2)) return 0;
    for (int i = 0; i < len; ++i) ys[i] = y[i] + 0.5 * h * k2[i];
    if (!f(ctx, t + 0.5 * h, ys, k3)) return 0;
    for (int i = 0; i < len; ++i) ys[i] = y[i] + h * k3[i];
    if (!f(ctx, t + h, ys, k4)) return 0;
    for (int i = 0; i < len; ++i) y[i] += h / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    return 1;
}

static inline int sparse_rhs_cb(void *ctx, double t, const double *y, double *ydot)
{
    return sparse_rhs(ctx, t, y, ydot);
}

/* The start: the flow of least kinetic energy that meets the demands,
 * q = M^-1 W^T (W M^-1 W^T)^-1 b, which is the "rate" of the solve with
 * F = 0 and g = b. */
static inline int start_state(sparse_run *r, double *vbar)
{
    for (int k = 0; k < r->net->n; ++k) r->F[k] = 0.0;
    if (cdyn_network_solve(r->obj, r->F, r->net->b, r->q, r->p) != CDYN_OK) return 0;
    for (int j = 0; j < r->d; ++j) vbar[j] = r->q[r->indep[j]];
    return 1;
}

static inline int open_sparse(sparse_run *r, const network *net)
{
    cdyn_status st;
    memset(r, 0, sizeof *r);
    r->net = net;
    r->obj = cdyn_network_create(net->n, net->m, net->colptr, net->rowind, NULL, 0, &st);
    if (!r->obj) {
        fprintf(stderr, "cdyn_network_create: status %d\n", st);
        return 0;
    }
    if (cdyn_network_load(r->obj, net->L, net->W) != CDYN_OK) {
        fprintf(stderr, "load: %s\n", cdyn_network_last_error(r->obj));
        return 0;
    }
    r->d = net->n - net->m;
    r->indep = malloc(sizeof(int) * (size_t)r->d);
    r->q = malloc(sizeof(double) * (size_t)net->n);
    r->F = malloc(sizeof(double) * (size_t)net->n);
    r->qdot = malloc(sizeof(double) * (size_t)net->n);
    r->p = malloc(sizeof(double) * (size_t)net->m);
    if (!r->indep || !r->q || !r->F || !r->qdot || !r->p) return 0;
    if (cdyn_network_partition(r->obj, r->indep, NULL) < 0) {
        fprintf(stderr, "partition: %s\n", cdyn_network_last_error(r->obj));
        return 0;
    }
    return 1;
}

static inline void close_sparse(sparse_run *r)
{
    cdyn_network_free(r->obj);
    free(r->indep);
    free(r->q);
    free(r->F);
    free(r->qdot);
    free(r->p);
}

#endif
