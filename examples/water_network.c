/*
 * water_network.c - a looped water distribution network of 10 226 pipes
 * and 5 184 junctions (rigid water columns, SI units), with a valve that
 * closes and sends a pressure surge through the network, through the
 * sparse backend (include/cdyn/network.h, cdyn_sparse; THEORY T1.5-T1.7,
 * docs/theory.md "Sparse networks").
 *
 * The network: a 72 x 72 grid of junctions 100 m apart, joined by pipes
 * of 150..300 mm diameter; a reservoir at 4 bar feeds the corner junction
 * through a 1 m main, and the opposite corner discharges to the atmosphere
 * through a valve. Every seventh junction has a consumer drawing a fixed
 * 0.2 L/s. Each pipe k (from junction a to junction b) carries a flow q_k
 * with inertance L_k = rho l_k / A_k and a turbulent (Darcy) loss
 * R_k q_k |q_k|:
 *     L_k q_k' = p_a - p_b - R_k q_k |q_k|          (M q' = F + W^T p)
 *     sum of the flows leaving j - entering j = -d_j   (W q = b)
 * with W the incidence (+1 where a pipe leaves a junction, -1 where it
 * enters), the junction pressures p as multipliers. The valve's opening
 * s(t) goes from 1 to 0.1 between 6 and 6.5 s (smoothstep), adding
 * K_v / s^2 q |q| to the outlet pipe's loss. The run starts from the flow
 * of least kinetic energy that meets the demands (one cdyn_network_solve
 * with F = 0 and g = b) and is left 6 s to settle before the valve moves.
 *
 * Minimum-order ODE (T1.6): the spanning tree of cdyn_network_partition()
 * makes the 5 184 tree flows dependent and the 5 042 loop flows the
 * states; cdyn_network_complete() gives the tree flows from them and the
 * demands (W q = b exactly), cdyn_network_solve() the rates and the
 * pressures. RK4, dt = 10 ms, 8 s, default settings.
 *
 * Checks (exit status 1 if one fails):
 *  - every step: W q = b to 1e-12 of the flow scale (the completion);
 *  - every 0.1 s from 5 s on (printed): the kinetic-energy identity q^T M q' = q^T F + b^T p
 *    (W q = b, M q' = F + W^T p) to 1e-10 of its terms, computed here from
 *    the results, and every solve certified by cdyn (CDYN_OK);
 *  - the surge: the valve junction's pressure rises while the valve
 *    closes, and less at the junction next to the reservoir;
 *  - an independent small run: the same model on a 6 x 6 grid, integrated
 *    (same RK4) once through cdyn_network and once in all 62 flows with
 *    the dense cdyn_nullspace_solve (the pressures as its multipliers): the
 *    flows and pressures agree to 1e-9 at the end.
 *
 * usage: water_network [k]   (grid side, default 72; prints a table)
 */
#include <cdyn/network.h>
#include <cdyn/nullspace.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RHO 1000.0       /* kg/m^3 */
#define PI 3.14159265358979323846
#define P_RESERVOIR 4e5  /* Pa (gauge) */
#define FRICTION 0.02    /* Darcy friction factor */
#define K_VALVE 2e7      /* Pa / (m^3/s)^2, fully open */
#define DEMAND 2e-4      /* m^3/s per consumer */
#define DT 1e-2
#define T_END 8.0
#define T_CLOSE 6.0     /* the valve closes from T_CLOSE to T_CLOSE + 0.5 s */

typedef struct {
    int k, n, m;
    int *colptr, *rowind;
    double *W, *L, *R;   /* incidence values, inertances, loss factors */
    double *b;           /* W q = b: minus the demands */
    int supply, outlet;  /* pipe indices */
    int valve_node;
} network;

static double smoothstep(double x) { return x <= 0 ? 0 : x >= 1 ? 1 : x * x * (3 - 2 * x); }
static double opening(double t) { return 1.0 - 0.9 * smoothstep((t - T_CLOSE) / 0.5); }

/* A pipe of length l and diameter D: inertance and Darcy loss factor. */
static void pipe(network *net, int k, double l, double D)
{
    double A = PI * D * D / 4.0;
    net->L[k] = RHO * l / A;
    net->R[k] = FRICTION * (l / D) * RHO / (2.0 * A * A);
}

static void add_entry(network *net, int *nnz, int row, double value)
{
    net->rowind[*nnz] = row;
    net->W[(*nnz)++] = value;
}

static int build(network *net, int k)
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
    for (int j = 0; j < m; ++j) net->b[j] = (j % 7 == 3) ? -DEMAND : 0.0;
    return 1;
}

static void release(network *net)
{
    free(net->colptr);
    free(net->rowind);
    free(net->W);
    free(net->L);
    free(net->R);
    free(net->b);
}

/* The forces F(q, t): losses, the reservoir and the valve. */
static void forces(const network *net, double t, const double *q, double *F)
{
    for (int k = 0; k < net->n; ++k) F[k] = -net->R[k] * q[k] * fabs(q[k]);
    F[net->supply] += P_RESERVOIR;
    double s = opening(t);
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
static int sparse_rhs(sparse_run *r, double t, const double *vbar, double *vbar_dot)
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
static int rk4(rhs_fn f, void *ctx, double t, double h, int len, double *y, double *work)
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

static int sparse_rhs_cb(void *ctx, double t, const double *y, double *ydot)
{
    return sparse_rhs(ctx, t, y, ydot);
}

/* ---- the dense reference run: all flows through cdyn_nullspace --------- */

typedef struct {
    const network *net;
    cdyn_nullspace *ns;
    double *Md, *Wd, *F, *p;
} dense_run;

static int dense_rhs_cb(void *ctx, double t, const double *q, double *qdot)
{
    dense_run *r = ctx;
    forces(r->net, t, q, r->F);
    /* W q' = 0 (constant demands): c = 0 */
    return cdyn_nullspace_solve(r->ns, r->Md, r->net->n, r->F, NULL, qdot, r->p) == CDYN_OK;
}

/* The start: the flow of least kinetic energy that meets the demands,
 * q = M^-1 W^T (W M^-1 W^T)^-1 b, which is the "rate" of the solve with
 * F = 0 and g = b. */
static int start_state(sparse_run *r, double *vbar)
{
    for (int k = 0; k < r->net->n; ++k) r->F[k] = 0.0;
    if (cdyn_network_solve(r->obj, r->F, r->net->b, r->q, r->p) != CDYN_OK) return 0;
    for (int j = 0; j < r->d; ++j) vbar[j] = r->q[r->indep[j]];
    return 1;
}

static int open_sparse(sparse_run *r, const network *net)
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
    if (cdyn_network_partition(r->obj, r->indep, NULL) != CDYN_OK) {
        fprintf(stderr, "partition: %s\n", cdyn_network_last_error(r->obj));
        return 0;
    }
    return 1;
}

static void close_sparse(sparse_run *r)
{
    cdyn_network_free(r->obj);
    free(r->indep);
    free(r->q);
    free(r->F);
    free(r->qdot);
    free(r->p);
}

/* The 6 x 6 network twice: loop flows through cdyn_network, all flows
 * through the dense null space. Returns the largest relative difference of
 * flows and pressures at the end, or -1. */
static double small_check(void)
{
    network net;
    sparse_run r;
    dense_run dr = {0};
    double result = -1.0;
    if (!build(&net, 6) || !open_sparse(&r, &net)) return -1.0;
    int n = net.n, m = net.m;
    double *vbar = malloc(sizeof(double) * (size_t)r.d);
    double *q = malloc(sizeof(double) * (size_t)n);
    double *work = malloc(sizeof(double) * 5 * (size_t)n);
    dr.net = &net;
    dr.Md = calloc((size_t)n * n, sizeof(double));
    dr.Wd = calloc((size_t)n * m, sizeof(double));
    dr.F = malloc(sizeof(double) * (size_t)n);
    dr.p = malloc(sizeof(double) * (size_t)m);
    cdyn_status st;
    dr.ns = cdyn_nullspace_create(n, m, &st);
    if (!vbar || !q || !work || !dr.Md || !dr.Wd || !dr.F || !dr.p || !dr.ns) goto done;
    for (int k = 0; k < n; ++k) {
        dr.Md[k + (size_t)k * n] = net.L[k];
        for (int p = net.colptr[k]; p < net.colptr[k + 1]; ++p)
            dr.Wd[net.rowind[p] + (size_t)k * m] = net.W[p];
    }
    if (cdyn_nullspace_factor(dr.ns, dr.Wd, m) != CDYN_OK || !start_state(&r, vbar)) goto done;
    memcpy(q, r.q, sizeof(double) * (size_t)n);
    int steps = (int)lround(T_END / DT);
    for (int s = 0; s < steps; ++s) {
        if (!rk4(sparse_rhs_cb, &r, s * DT, DT, r.d, vbar, work) ||
            !rk4(dense_rhs_cb, &dr, s * DT, DT, n, q, work))
            goto done;
    }
    /* final evaluation of both */
    double *vdot = work;
    if (!sparse_rhs(&r, T_END, vbar, vdot) || !dense_rhs_cb(&dr, T_END, q, work + n)) goto done;
    double dq = 0, sq = 0, dp = 0, sp = 0;
    for (int k = 0; k < n; ++k) {
        dq = fmax(dq, fabs(r.q[k] - q[k]));
        sq = fmax(sq, fabs(q[k]));
    }
    for (int j = 0; j < m; ++j) {
        dp = fmax(dp, fabs(r.p[j] - dr.p[j]));
        sp = fmax(sp, fabs(dr.p[j]));
    }
    result = fmax(dq / sq, dp / sp);
done:
    free(vbar);
    free(q);
    free(work);
    free(dr.Md);
    free(dr.Wd);
    free(dr.F);
    free(dr.p);
    cdyn_nullspace_free(dr.ns);
    close_sparse(&r);
    release(&net);
    return result;
}

int main(int argc, char **argv)
{
    int k = argc > 1 ? atoi(argv[1]) : 72;
    if (k < 3 || k > 400) {
        fprintf(stderr, "usage: water_network [k], 3 <= k <= 400\n");
        return 2;
    }
    int failed = 0;
    double small = small_check();
    printf("6 x 6 grid, loop flows (cdyn_network) vs all flows (dense cdyn_nullspace): "
           "largest relative difference %.2e\n", small);
    if (!(small >= 0.0 && small <= 1e-9)) {
        printf("FAIL: the sparse and dense runs differ\n");
        failed = 1;
    }

    network net;
    sparse_run r;
    if (!build(&net, k) || !open_sparse(&r, &net)) return 1;
    int n = net.n, m = net.m;
    printf("network: %d pipes, %d junctions, %d loop flows integrated; pivot ratio of S %.2e\n",
           n, m, r.d, cdyn_network_pivot_ratio(r.obj));
    double *vbar = malloc(sizeof(double) * (size_t)r.d);
    double *work = malloc(sizeof(double) * 5 * (size_t)r.d);
    double *vdot = malloc(sizeof(double) * (size_t)r.d);
    double *res = malloc(sizeof(double) * (size_t)m);
    if (!vbar || !work || !vdot || !res || !start_state(&r, vbar)) return 1;

    int steps = (int)lround(T_END / DT), every = (int)lround(0.1 / DT);
    double worst_balance = 0.0, worst_energy = 0.0, p_valve_before = 0, p_valve_peak = -INFINITY;
    double p_source_before = 0, p_source_peak = -INFINITY;
    clock_t c0 = clock();
    printf("%6s %12s %12s %12s %12s %10s\n", "t [s]", "valve s", "q_out [L/s]", "p_valve [bar]",
           "p_source[bar]", "energy id.");
    for (int s = 0; s <= steps; ++s) {
        double t = s * DT;
        if (!sparse_rhs(&r, t, vbar, vdot)) {
            printf("FAIL at t = %g: %s\n", t, cdyn_network_last_error(r.obj));
            return 1;
        }
        /* W q = b from the completion */
        double qscale = 0.0;
        for (int k2 = 0; k2 < n; ++k2) qscale = fmax(qscale, fabs(r.q[k2]));
        /* W q - b, by columns */
        for (int j = 0; j < m; ++j) res[j] = -net.b[j];
        for (int k2 = 0; k2 < n; ++k2)
            for (int p = net.colptr[k2]; p < net.colptr[k2 + 1]; ++p)
                res[net.rowind[p]] += net.W[p] * r.q[k2];
        for (int j = 0; j < m; ++j) worst_balance = fmax(worst_balance, fabs(res[j]) / qscale);
        double pv = r.p[net.valve_node], ps = r.p[0];
        if (t < T_CLOSE) {
            p_valve_before = pv;
            p_source_before = ps;
        } else if (t <= T_CLOSE + 0.6) {
            p_valve_peak = fmax(p_valve_peak, pv);
            p_source_peak = fmax(p_source_peak, ps);
        }
        if (s % every == 0 && t >= T_CLOSE - 1.0) {
            /* q^T M q' = q^T F + b^T p, each side from the results */
            double lhs = 0, rhs = 0, mag = 0;
            for (int k2 = 0; k2 < n; ++k2) {
                lhs += r.q[k2] * net.L[k2] * r.qdot[k2];
                rhs += r.q[k2] * r.F[k2];
                mag += fabs(r.q[k2] * net.L[k2] * r.qdot[k2]) + fabs(r.q[k2] * r.F[k2]);
            }
            for (int j = 0; j < m; ++j) {
                rhs += net.b[j] * r.p[j];
                mag += fabs(net.b[j] * r.p[j]);
            }
            double e = fabs(lhs - rhs) / mag;
            worst_energy = fmax(worst_energy, e);
            printf("%6.2f %12.3f %12.3f %12.4f %12.4f %10.1e\n", t, opening(t),
                   1e3 * r.q[net.outlet], pv / 1e5, ps / 1e5, e);
        }
        if (s < steps && !rk4(sparse_rhs_cb, &r, t, DT, r.d, vbar, work)) {
            printf("FAIL at t = %g: %s\n", t, cdyn_network_last_error(r.obj));
            return 1;
        }
    }
    double seconds = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("%d RK4 steps, %.0f us per right-hand side (complete + forces + solve)\n", steps,
           1e6 * seconds / (4.0 * steps + steps + 1));
    printf("balances W q = b: worst %.2e of the flow scale\n", worst_balance);
    printf("energy identity: worst %.2e of its terms\n", worst_energy);
    printf("surge while the valve closes: valve junction %+.3f bar, reservoir junction %+.3f bar\n",
           (p_valve_peak - p_valve_before) / 1e5, (p_source_peak - p_source_before) / 1e5);
    if (!(worst_balance <= 1e-12)) {
        printf("FAIL: balances\n");
        failed = 1;
    }
    if (!(worst_energy <= 1e-10)) {
        printf("FAIL: energy identity\n");
        failed = 1;
    }
    if (!(p_valve_peak - p_valve_before > 0.0 &&
          p_source_peak - p_source_before < p_valve_peak - p_valve_before)) {
        printf("FAIL: no surge at the valve, or not larger there than at the reservoir\n");
        failed = 1;
    }
    free(vbar);
    free(work);
    free(vdot);
    free(res);
    close_sparse(&r);
    release(&net);
    printf(failed ? "water_network: FAILED\n" : "water_network: all checks passed\n");
    return failed;
}
