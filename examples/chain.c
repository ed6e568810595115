/*
 * chain.c - a chain of 1 000 rigid links in absolute coordinates (SI
 * units), falling from 45 degrees, through the sparse backend
 * (include/cdyn/network.h; THEORY T4.3, T4.9; docs/theory.md "Sparse
 * networks"). The model is examples/chain_model.h: links of 5 g and
 * 1 cm (a 10 m, 5 kg chain pinned at the origin), n = 3 000 coordinates,
 * m = 2 000 joint constraints.
 *
 * The same object that gives a hydraulic network its flow rates and
 * junction pressures gives a mechanism its accelerations and joint forces:
 *     M q'' = Q + Phi_q^T lambda,   Phi_q q'' = gamma(q, q')
 * is cdyn_network_solve with W = Phi_q (loaded at every evaluation: the
 * pattern is fixed at create, the values change with q), F = Q, g = gamma.
 * Projection onto the constraint manifold (T4.9) is the same solve again:
 * with F = 0 and g = -Phi(q) its rate is the correction of least kinetic
 * energy, dq = M^-1 Phi_q^T (Phi_q M^-1 Phi_q^T)^-1 (-Phi); with g =
 * -Phi_q q' it removes the velocity error.
 *
 * Run: RK4 on (q, q'), dt = 0.25 ms, 0.1 s (400 steps), each step followed
 * by a position projection (Newton, until |Phi| <= 1e-13 m) and a velocity
 * projection. Default settings.
 *
 * Checks (exit status 1 if one fails):
 *  - at rest hanging straight down (hand calculation): q'' = 0 and the
 *    force in joint i is (N - i) m g upwards, to 1e-12 relative;
 *  - an independent small solve: a 6-link chain at a moving state, the
 *    accelerations and joint forces of cdyn_network against the dense
 *    cdyn_nullspace_solve on the same Phi_q (c = -gamma), to 1e-11;
 *  - the identity M q'' - Q - Phi_q^T lambda = 0 and Phi_q q'' = gamma at
 *    every 25th step (computed here), to 1e-12 of their terms;
 *  - constraints after every projection: |Phi| <= 1e-13 m,
 *    |Phi_q q'| <= 1e-12 m/s;
 *  - energy: the chain has no losses, so the total energy may change only
 *    by RK4's and the projection's error: at most 1e-6 of m g l N over the
 *    run.
 *
 * usage: chain [links]   (default 1000; prints a table)
 */
#include <cdyn/network.h>
#include <cdyn/nullspace.h>

#include "chain_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DT 2.5e-4
#define STEPS 400

typedef struct {
    chain_model c;
    int n, m, nnz;
    int *colptr, *rowind;
    double *M, *Q, *J, *gamma, *phi, *lambda, *zero;
    cdyn_network *net;
} chain_run;

static int open_run(chain_run *r, int links)
{
    memset(r, 0, sizeof *r);
    r->c.links = links;
    r->c.mass = 0.005;
    r->c.length = 0.01;
    r->n = 3 * links;
    r->m = 2 * links;
    r->colptr = malloc(sizeof(int) * (size_t)(r->n + 1));
    r->rowind = malloc(sizeof(int) * (size_t)(8 * links));
    r->M = malloc(sizeof(double) * (size_t)r->n);
    r->Q = malloc(sizeof(double) * (size_t)r->n);
    r->J = malloc(sizeof(double) * (size_t)(8 * links));
    r->gamma = malloc(sizeof(double) * (size_t)r->m);
    r->phi = malloc(sizeof(double) * (size_t)r->m);
    r->lambda = malloc(sizeof(double) * (size_t)r->m);
    r->zero = calloc((size_t)r->n, sizeof(double));
    if (!r->colptr || !r->rowind || !r->M || !r->Q || !r->J || !r->gamma || !r->phi ||
        !r->lambda || !r->zero)
        return 0;
    chain_pattern(&r->c, r->colptr, r->rowind);
    r->nnz = r->colptr[r->n];
    chain_mass_forces(&r->c, r->M, r->Q);
    cdyn_status st;
    r->net = cdyn_network_create(r->n, r->m, r->colptr, r->rowind, NULL, 0, &st);
    if (!r->net) fprintf(stderr, "cdyn_network_create: status %d\n", st);
    return r->net != NULL;
}

static void close_run(chain_run *r)
{
    cdyn_network_free(r->net);
    free(r->colptr);
    free(r->rowind);
    free(r->M);
    free(r->Q);
    free(r->J);
    free(r->gamma);
    free(r->phi);
    free(r->lambda);
    free(r->zero);
}

static int report(const chain_run *r, const char *what)
{
    fprintf(stderr, "%s: %s\n", what, cdyn_network_last_error(r->net));
    return 0;
}

/* q'' and lambda at (q, q'). */
static int accelerations(chain_run *r, const double *q, const double *qd, double *qdd)
{
    chain_jacobian(&r->c, q, r->J);
    chain_gamma(&r->c, q, qd, r->gamma);
    if (cdyn_network_load(r->net, r->M, r->J) != CDYN_OK) return report(r, "load");
    if (cdyn_network_solve(r->net, r->Q, r->gamma, qdd, r->lambda) != CDYN_OK)
        return report(r, "solve");
    return 1;
}

/* Projection (T4.9): positions by Newton with the least-energy correction,
 * then velocities. work: n. Returns the Newton steps taken, or -1. */
static int project(chain_run *r, double *q, double *qd, double *work)
{
    int steps = 0;
    for (;;) {
        chain_residual(&r->c, q, r->phi);
        double worst = 0.0;
        for (int i = 0; i < r->m; ++i) worst = fmax(worst, fabs(r->phi[i]));
        if (worst <= 1e-13) break;
        if (steps == 8) return -1;
        for (int i = 0; i < r->m; ++i) r->phi[i] = -r->phi[i];
        chain_jacobian(&r->c, q, r->J);
        if (cdyn_network_load(r->net, r->M, r->J) != CDYN_OK ||
            cdyn_network_solve(r->net, r->zero, r->phi, work, NULL) != CDYN_OK)
            return report(r, "projection"), -1;
        for (int k = 0; k < r->n; ++k) q[k] += work[k];
        ++steps;
    }
    /* velocities: g = -Phi_q q' */
    chain_jacobian(&r->c, q, r->J);
    for (int i = 0; i < r->m; ++i) r->phi[i] = 0.0;
    for (int k = 0; k < r->n; ++k)
        for (int p = r->colptr[k]; p < r->colptr[k + 1]; ++p)
            r->phi[r->rowind[p]] -= r->J[p] * qd[k];
    if (cdyn_network_load(r->net, r->M, r->J) != CDYN_OK ||
        cdyn_network_solve(r->net, r->zero, r->phi, work, NULL) != CDYN_OK)
        return report(r, "velocity projection"), -1;
    for (int k = 0; k < r->n; ++k) qd[k] += work[k];
    return steps;
}

/* Largest |Phi_q q'| (m/s). */
static double velocity_error(chain_run *r, const double *q, const double *qd)
{
    chain_jacobian(&r->c, q, r->J);
    for (int i = 0; i < r->m; ++i) r->phi[i] = 0.0;
    for (int k = 0; k < r->n; ++k)
        for (int p = r->colptr[k]; p < r->colptr[k + 1]; ++p)
            r->phi[r->rowind[p]] += r->J[p] * qd[k];
    double worst = 0.0;
    for (int i = 0; i < r->m; ++i) worst = fmax(worst, fabs(r->phi[i]));
    return worst;
}

/* M q'' - Q - Phi_q^T lambda and Phi_q q'' - gamma, relative to their
 * terms (J, gamma, lambda from the last accelerations()). */
static double identity_error(const chain_run *r, const double *qdd)
{
    double worst = 0.0;
    double *rg = calloc((size_t)r->m, sizeof(double)), *mg = calloc((size_t)r->m, sizeof(double));
    if (!rg || !mg) {
        free(rg);
        free(mg);
        return INFINITY;
    }
    for (int k = 0; k < r->n; ++k) {
        double res = r->M[k] * qdd[k] - r->Q[k], mag = fabs(r->M[k] * qdd[k]) + fabs(r->Q[k]);
        for (int p = r->colptr[k]; p < r->colptr[k + 1]; ++p) {
            res -= r->J[p] * r->lambda[r->rowind[p]];
            mag += fabs(r->J[p] * r->lambda[r->rowind[p]]);
            rg[r->rowind[p]] += r->J[p] * qdd[k];
            mg[r->rowind[p]] += fabs(r->J[p] * qdd[k]);
        }
        if (mag > 0) worst = fmax(worst, fabs(res) / mag);
    }
    for (int i = 0; i < r->m; ++i) {
        double mag = mg[i] + fabs(r->gamma[i]);
        if (mag > 0) worst = fmax(worst, fabs(rg[i] - r->gamma[i]) / mag);
    }
    free(rg);
    free(mg);
    return worst;
}

/* Hanging at rest: q'' = 0, joint i carries (N - i) m g. */
static int check_hanging(chain_run *r, double *q, double *qd, double *qdd)
{
    chain_straight(&r->c, 0.0, q, qd);
    if (!accelerations(r, q, qd, qdd)) return 0;
    double worst_a = 0.0, worst_f = 0.0, w = r->c.mass * CHAIN_G;
    for (int k = 0; k < r->n; ++k) worst_a = fmax(worst_a, fabs(qdd[k]));
    for (int i = 0; i < r->c.links; ++i) {
        double expect = (r->c.links - i) * w;
        worst_f = fmax(worst_f, fabs(r->lambda[2 * i]) / expect);
        worst_f = fmax(worst_f, fabs(r->lambda[2 * i + 1] - expect) / expect);
    }
    printf("hanging at rest: largest |q''| %.2e, joint forces against (N - i) m g: %.2e\n",
           worst_a, worst_f);
    return worst_a <= 1e-12 * CHAIN_G && worst_f <= 1e-12;
}

/* A 6-link chain at a moving state: sparse against the dense null space. */
static int check_small(void)
{
    chain_run r;
    if (!open_run(&r, 6)) return 0;
    int n = r.n, m = r.m, ok = 0;
    double q[18], qd[18], qdd[18], qdd2[18], lam2[12], c[12];
    double *Md = calloc((size_t)n * n, sizeof(double)), *Wd = calloc((size_t)m * n, sizeof(double));
    cdyn_status st;
    cdyn_nullspace *ns = cdyn_nullspace_create(n, m, &st);
    if (!Md || !Wd || !ns) goto done;
    chain_straight(&r.c, 0.7, q, qd);
    for (int i = 0; i < 6; ++i) { /* bend it and set it moving, then make it consistent */
        q[3 * i + 2] += 0.3 * sin(1.0 + i);
        qd[3 * i + 2] = 2.0 * cos(2.0 + i);
        qd[3 * i] = 0.1 * i;
    }
    double work[18];
    if (project(&r, q, qd, work) < 0 || !accelerations(&r, q, qd, qdd)) goto done;
    for (int k = 0; k < n; ++k) {
        Md[k + (size_t)k * n] = r.M[k];
        for (int p = r.colptr[k]; p < r.colptr[k + 1]; ++p) Wd[r.rowind[p] + (size_t)k * m] = r.J[p];
    }
    for (int i = 0; i < m; ++i) c[i] = -r.gamma[i];
    if (cdyn_nullspace_factor(ns, Wd, m) != CDYN_OK ||
        cdyn_nullspace_solve(ns, Md, n, r.Q, c, qdd2, lam2) != CDYN_OK)
        goto done;
    double da = 0, sa = 0, df = 0, sf = 0;
    for (int k = 0; k < n; ++k) {
        da = fmax(da, fabs(qdd[k] - qdd2[k]));
        sa = fmax(sa, fabs(qdd2[k]));
    }
    for (int i = 0; i < m; ++i) {
        df = fmax(df, fabs(r.lambda[i] - lam2[i]));
        sf = fmax(sf, fabs(lam2[i]));
    }
    printf("6 links, sparse vs dense null space: accelerations %.2e, joint forces %.2e "
           "(relative)\n", da / sa, df / sf);
    ok = da <= 1e-11 * sa && df <= 1e-11 * sf;
done:
    free(Md);
    free(Wd);
    cdyn_nullspace_free(ns);
    close_run(&r);
    return ok;
}

int main(int argc, char **argv)
{
    int links = argc > 1 ? atoi(argv[1]) : 1000;
    if (links < 2 || links > 100000) {
        fprintf(stderr, "usage: chain [links], 2 <= links <= 100000\n");
        return 2;
    }
    int failed = !check_small();
    chain_run r;
    if (!open_run(&r, links)) return 1;
    int n = r.n;
    double *q = malloc(sizeof(double) * (size_t)n), *qd = malloc(sizeof(double) * (size_t)n);
    double *qdd = malloc(sizeof(double) * (size_t)n), *work = malloc(sizeof(double) * 8 * (size_t)n);
    if (!q || !qd || !qdd || !work) return 1;
    if (!check_hanging(&r, q, qd, qdd)) {
        printf("FAIL: the hanging chain\n");
        failed = 1;
    }

    chain_straight(&r.c, 0.7853981633974483, q, qd); /* 45 degrees */
    double scale = r.c.mass * CHAIN_G * r.c.length * links, e0 = chain_energy(&r.c, q, qd);
    double worst_identity = 0, worst_phi = 0, worst_vel = 0, worst_energy = 0;
    int newton_max = 0;
    double *k1 = work, *k2 = k1 + 2 * (size_t)n, *k3 = k2 + 2 * (size_t)n, *k4 = k3 + 2 * (size_t)n;
    double *stage_q = malloc(sizeof(double) * (size_t)n), *stage_qd = malloc(sizeof(double) * (size_t)n);
    if (!stage_q || !stage_qd) return 1;
    clock_t c0 = clock();
    printf("%8s %14s %14s %14s %12s\n", "t [s]", "tip x [m]", "tip y [m]", "support [N]", "energy");
    for (int s = 0; s <= STEPS; ++s) {
        double *k[4] = {k1, k2, k3, k4};
        const double a[4] = {0.0, 0.5, 0.5, 1.0};
        for (int st = 0; st < 4 && s < STEPS; ++st) { /* RK4 stage: k = (q', q'') */
            for (int i = 0; i < n; ++i) {
                stage_q[i] = q[i] + (st ? a[st] * DT * k[st - 1][i] : 0.0);
                stage_qd[i] = qd[i] + (st ? a[st] * DT * k[st - 1][n + i] : 0.0);
            }
            memcpy(k[st], stage_qd, sizeof(double) * (size_t)n);
            if (!accelerations(&r, stage_q, stage_qd, k[st] + n)) return 1;
            if (st == 0 && s % 25 == 0) worst_identity = fmax(worst_identity, identity_error(&r, k[0] + n));
        }
        if (s == STEPS && !accelerations(&r, q, qd, qdd)) return 1; /* the final forces */
        if (s % 40 == 0 || s == STEPS) {
            double e = (chain_energy(&r.c, q, qd) - e0) / scale;
            int tip = 3 * (links - 1);
            double ux = sin(q[tip + 2]), uy = -cos(q[tip + 2]);
            printf("%8.4f %14.6f %14.6f %14.6f %12.2e\n", s * DT, q[tip] + 0.5 * r.c.length * ux,
                   q[tip + 1] + 0.5 * r.c.length * uy, r.lambda[1], e);
        }
        if (s == STEPS) break;
        for (int i = 0; i < 2 * n; ++i) {
            double inc = DT / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
            if (i < n) q[i] += inc;
            else qd[i - n] += inc;
        }
        int steps = project(&r, q, qd, stage_q);
        if (steps < 0) {
            printf("FAIL: projection at t = %g\n", (s + 1) * DT);
            return 1;
        }
        newton_max = steps > newton_max ? steps : newton_max;
        chain_residual(&r.c, q, r.phi);
        for (int i = 0; i < r.m; ++i) worst_phi = fmax(worst_phi, fabs(r.phi[i]));
        worst_vel = fmax(worst_vel, velocity_error(&r, q, qd));
        worst_energy = fmax(worst_energy, fabs(chain_energy(&r.c, q, qd) - e0) / scale);
    }
    double seconds = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("%d links (n = %d, m = %d): %d RK4 steps with projection, %.2f ms per step "
           "(4 load + solve, projection: <= %d Newton steps + velocities)\n",
           links, n, r.m, STEPS, 1e3 * seconds / STEPS, newton_max);
    printf("identities M q'' - Q - Phi_q^T lambda, Phi_q q'' - gamma: worst %.2e\n", worst_identity);
    printf("after projection: |Phi| <= %.2e m, |Phi_q q'| <= %.2e m/s\n", worst_phi, worst_vel);
    printf("energy change: worst %.2e of m g l N\n", worst_energy);
    if (!(worst_identity <= 1e-12)) { printf("FAIL: identities\n"); failed = 1; }
    if (!(worst_phi <= 1e-13 && worst_vel <= 1e-12)) { printf("FAIL: constraints\n"); failed = 1; }
    if (!(worst_energy <= 1e-6)) { printf("FAIL: energy\n"); failed = 1; }
    free(q);
    free(qd);
    free(qdd);
    free(work);
    free(stage_q);
    free(stage_qd);
    close_run(&r);
    printf(failed ? "chain: FAILED\n" : "chain: all checks passed\n");
    return failed;
}
