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

#include "water_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DT 1e-2
#define T_END 8.0

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
        if (t < net.t_close) {
            p_valve_before = pv;
            p_source_before = ps;
        } else if (t <= net.t_close + 0.6) {
            p_valve_peak = fmax(p_valve_peak, pv);
            p_source_peak = fmax(p_source_peak, ps);
        }
        if (s % every == 0 && t >= net.t_close - 1.0) {
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
            printf("%6.2f %12.3f %12.3f %12.4f %12.4f %10.1e\n", t, opening(&net, t),
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
