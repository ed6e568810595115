/* Stiff index-1 DAEs through cdyn + CVODE BDF against SUNDIALS IDA on the
 * hand-written residual (issue 14's stiff benchmarks). Built only with the
 * SUNDIALS adapters (cdyn_sundials).
 *
 * Models (SI units, cdyn with its default settings):
 *  (a) a hydraulic line of P = 25 pipes in series (n = 49 states: the 25
 *      flows are integrated, the 24 junction pressures are algebraic; the
 *      junctions have no storage, each drains to a tank through an orifice
 *      with a laminar-turbulent characteristic). Pipe k:
 *        L_k Q_k' = p_{k-1} - p_k - (a_k + b_k |Q_k|) Q_k,
 *      p_0 = ps(t) = 3e5 (1 + 0.2 sin 2 pi t) Pa, p_P = 1e5 Pa; junction k:
 *        0 = Q_k - Q_{k+1} - Q_or(p_k - p_tank),
 *        Q_or(d) = d / sqrt(k_or (|d| + d_lam)).
 *      Every fifth pipe is short (L = 2e5 kg/m^4 beside 1e9): eigenvalues
 *      from about -1 to -1e5 /s.
 *  (b) a diode-RC ladder of 12 nodes (node voltages; conductances 1e-3 S
 *      between neighbours, capacitors of 1 uF to ground at nodes 1, 4, 7,
 *      10 and of 1 nF across the pairs (2,3), (5,6), (8,9), (11,12), diodes
 *      Is = 1e-14 A to ground at nodes 3, 6, 9, 12, a 1 kHz current source
 *      of 2 mA into node 1): M is the capacitance Laplacian, constant,
 *      non-diagonal and singular (rank 8: each pair's charge is fixed by
 *      the sum of its currents), the algebraic states carry capacitance
 *      (P^T M_a != 0), so cdyn's Jacobian needs the second derivatives.
 *  (c) a grid water network of 4 x 4 junctions without storage (index 2:
 *      n = 42 states, 26 pipes and 16 pressures; 10 loops), pipes as in
 *      (a) between neighbouring junctions, a supply pipe from a tank at
 *      ps(t) into one corner, an outlet pipe from the opposite corner, and
 *      demands drawn at two junctions as functions of time. cdyn_dae
 *      takes it in its index-2 form (cdyn_dae_split); the fourth path is
 *      the same network wired by hand through cdyn_nullspace (the
 *      balances W q = b(t) as the constraint, pressures as multipliers,
 *      THEORY T1.7), the route a user had before the index-2 form.
 *
 * Paths, each a whole integration from the same consistent initial values
 * (found once by cdyn_dae_consistent; IDA gets v and v' from it):
 *   IDA   : IDA on r = M v' - F(v, t) with the hand-written dense Jacobian
 *           c_j M - dF/dv (the baseline);
 *   cdyn+J: cdyn_dae + CVODE BDF, dense, cdyn_cvode_attach_dae (cdyn's
 *           Jacobian);
 *   cdyn  : cdyn_dae + CVODE BDF with CVODE's difference-quotient Jacobian;
 *   ns    : (c) only: cdyn_nullspace_complete + cdyn_nullspace_solve in a
 *           hand-written CVODE right-hand side, CVODE's difference
 *           quotients. IDA there suppresses the pressures in its error test
 *           (IDASetId, IDASetSuppressAlg), as index 2 requires.
 * Accuracy: the error of the integrated states at the end against IDA at
 * rtol 1e-12 (absolute tolerances 1e-2 rtol of the state's size), in units
 * of the largest state; for (c), where IDA fails at rtol 1e-12, against
 * the null-space route at rtol 1e-12 (IDA there starts with a step of
 * 1e-6 t_end: from its own tiny first step the index-2 corrector fails). Time per integration: median [min, max] over the
 * samples, the paths taken in turn; ratio = path / IDA. Not a pass/fail
 * test. */
#include "bench_util.h"

#include <cdyn.h>
#include <cdyn/sundials.h>

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <ida/ida.h>
#include <ida/ida_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if SUNDIALS_VERSION_MAJOR >= 7
#define SUN_NO_COMM SUN_COMM_NULL
#else
#define SUN_NO_COMM NULL
#endif

#define PI 3.14159265358979323846

enum { NMAX = 64 };

/* A model: M (n x n), F and dF/dv, the consistent initial state, the end
 * time, the scale of its integrated states. */
typedef struct {
    const char *name;
    int n;
    double M[NMAX * NMAX];
    cdyn_dae_force_fn force;
    cdyn_dae_jacobian_fn jacobian;
    double v0[NMAX], vdot0[NMAX];
    double t_end, state_scale;
    /* (c): the network for the hand-wired null-space path (pipes flows
     * first, then one pressure per junction) */
    int pipes, junctions;
    const double *W;                       /* junctions x pipes, W q = b(t) */
    void (*pipe_forces)(double t, const double *q, double *f); /* F without pressures */
    void (*inflows)(double t, double *b, double *bdot);
} model;

/* ---- (a) hydraulic line --------------------------------------------------- */

enum { PIPES = 25, LINE_N = 2 * PIPES - 1 };
static const double P_TANK = 1e5, P_OUT = 1e5, K_OR = 2e12, D_LAM = 1e3;

static double line_inertance(int k) { return k % 5 == 2 ? 2e5 : 1e9; }
static double line_laminar(int k) { return 1e8 * (1.0 + 0.1 * k); }
static double line_turbulent(int k) { return 4e11 * (1.0 + 0.05 * k); }
static double line_source(double t) { return 3e5 * (1.0 + 0.2 * sin(2.0 * PI * t)); }

/* pressure at node k (0: source, PIPES: outlet, else algebraic state) */
static double line_pressure(const double *v, double t, int k)
{
    return k == 0 ? line_source(t) : k == PIPES ? P_OUT : v[PIPES + k - 1];
}

static double orifice(double d) { return d / sqrt(K_OR * (fabs(d) + D_LAM)); }
static double orifice_slope(double d)
{
    double s = fabs(d) + D_LAM;
    return (s - 0.5 * fabs(d)) / (sqrt(K_OR * s) * s);
}

static int line_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    for (int k = 0; k < PIPES; ++k) {
        double Q = v[k];
        F[k] = line_pressure(v, t, k) - line_pressure(v, t, k + 1) -
               (line_laminar(k) + line_turbulent(k) * fabs(Q)) * Q;
    }
    for (int j = 1; j < PIPES; ++j)
        F[PIPES + j - 1] = v[j - 1] - v[j] - orifice(v[PIPES + j - 1] - P_TANK);
    return 0;
}

static int line_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    for (int c = 0; c < LINE_N; ++c) memset(J + (size_t)c * ld, 0, sizeof(double) * LINE_N);
    for (int k = 0; k < PIPES; ++k) {
        J[k + (size_t)k * ld] = -(line_laminar(k) + 2.0 * line_turbulent(k) * fabs(v[k]));
        if (k > 0) J[k + (size_t)(PIPES + k - 1) * ld] = 1.0;
        if (k < PIPES - 1) J[k + (size_t)(PIPES + k) * ld] = -1.0;
    }
    for (int j = 1; j < PIPES; ++j) {
        int row = PIPES + j - 1;
        J[row + (size_t)(j - 1) * ld] = 1.0;
        J[row + (size_t)j * ld] = -1.0;
        J[row + (size_t)row * ld] = -orifice_slope(v[row] - P_TANK);
    }
    return 0;
}

static void line_model(model *m)
{
    memset(m, 0, sizeof *m);
    m->name = "hydraulic line, 25 pipes";
    m->n = LINE_N;
    for (int k = 0; k < PIPES; ++k) m->M[k + (size_t)k * LINE_N] = line_inertance(k);
    m->force = line_force;
    m->jacobian = line_jacobian;
    for (int k = 0; k < PIPES; ++k) m->v0[k] = 2e-4 - 5e-6 * k;
    for (int j = 1; j < PIPES; ++j) m->v0[PIPES + j - 1] = 3e5 - 8e3 * j;
    m->t_end = 2.0;
    m->state_scale = 2e-4;
}

/* ---- (b) diode-RC ladder ---------------------------------------------------- */

enum { NODES = 12 };
static const double G_LINK = 1e-3, C_GROUND = 1e-6, C_PAIR = 1e-9, I_S = 1e-14,
                    V_T = 0.02585, I_SRC = 2e-3, F_SRC = 1e3;

static int is_diode_node(int i) { return i % 3 == 2; } /* nodes 3, 6, 9, 12 (0-based 2, 5, ...) */

static int ladder_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    for (int i = 0; i < NODES; ++i) {
        double f = 0.0;
        if (i > 0) f -= G_LINK * (v[i] - v[i - 1]);
        if (i < NODES - 1) f -= G_LINK * (v[i] - v[i + 1]);
        if (is_diode_node(i)) f -= I_S * expm1(v[i] / V_T);
        F[i] = f;
    }
    F[0] += I_SRC * sin(2.0 * PI * F_SRC * t);
    return 0;
}

static int ladder_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    for (int c = 0; c < NODES; ++c) memset(J + (size_t)c * ld, 0, sizeof(double) * NODES);
    for (int i = 0; i < NODES; ++i) {
        if (i > 0) {
            J[i + (size_t)i * ld] -= G_LINK;
            J[i + (size_t)(i - 1) * ld] += G_LINK;
        }
        if (i < NODES - 1) {
            J[i + (size_t)i * ld] -= G_LINK;
            J[i + (size_t)(i + 1) * ld] += G_LINK;
        }
        if (is_diode_node(i)) J[i + (size_t)i * ld] -= I_S / V_T * exp(v[i] / V_T);
    }
    return 0;
}

static void ladder_model(model *m)
{
    memset(m, 0, sizeof *m);
    m->name = "diode-RC ladder, 12 nodes";
    m->n = NODES;
    for (int i = 0; i < NODES; i += 3) m->M[i + (size_t)i * NODES] = C_GROUND;
    for (int i = 1; i < NODES; i += 3) { /* the pair (i, i + 1) */
        int a = i, b = i + 1;
        m->M[a + (size_t)a * NODES] += C_PAIR;
        m->M[b + (size_t)b * NODES] += C_PAIR;
        m->M[a + (size_t)b * NODES] -= C_PAIR;
        m->M[b + (size_t)a * NODES] -= C_PAIR;
    }
    m->force = ladder_force;
    m->jacobian = ladder_jacobian;
    m->t_end = 2e-3; /* two periods */
    m->state_scale = 1.0;
}

/* ---- (c) grid network, index 2 ------------------------------------------------ */

enum { GRID = 4, GRID_J = GRID * GRID, GRID_P = 2 * GRID * (GRID - 1) + 2, GRID_N = GRID_P + GRID_J };
static int GRID_FROM[GRID_P], GRID_TO[GRID_P]; /* -1: the supply tank / the outlet */
static double GRID_W[GRID_J * GRID_P];

static double grid_inertance(int k) { return k % 5 == 2 ? 2e5 : 1e9; }
static double grid_laminar(int k) { return 1e8 * (1.0 + 0.05 * k); }
static double grid_turbulent(int k) { return 4e11 * (1.0 + 0.03 * k); }

/* demands at junctions 5 and 10 (negative inflows) and their rates */
static void grid_inflows(double t, double *b, double *bdot)
{
    memset(b, 0, sizeof(double) * GRID_J);
    double w = 2.0 * PI * 0.5;
    b[5] = -1e-4 * (1.0 + 0.5 * sin(w * t));
    b[10] = -8e-5 * (1.0 + 0.5 * cos(w * t));
    if (bdot) {
        memset(bdot, 0, sizeof(double) * GRID_J);
        bdot[5] = -1e-4 * 0.5 * w * cos(w * t);
        bdot[10] = 8e-5 * 0.5 * w * sin(w * t);
    }
}

/* the pipe equations without the junction pressures: losses and the tanks */
static void grid_pipe_forces(double t, const double *q, double *f)
{
    for (int k = 0; k < GRID_P; ++k) f[k] = -(grid_laminar(k) + grid_turbulent(k) * fabs(q[k])) * q[k];
    f[GRID_P - 2] += line_source(t); /* supply pipe: from the tank at ps(t) */
    f[GRID_P - 1] -= P_OUT;          /* outlet pipe: into the tank at P_OUT */
}

static int grid_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    const double *q = v, *p = v + GRID_P;
    double b[GRID_J];
    grid_pipe_forces(t, q, F);
    for (int k = 0; k < GRID_P; ++k) {
        if (GRID_FROM[k] >= 0) F[k] += p[GRID_FROM[k]];
        if (GRID_TO[k] >= 0) F[k] -= p[GRID_TO[k]];
    }
    grid_inflows(t, b, NULL);
    for (int j = 0; j < GRID_J; ++j) F[GRID_P + j] = b[j];
    for (int k = 0; k < GRID_P; ++k) {
        if (GRID_FROM[k] >= 0) F[GRID_P + GRID_FROM[k]] -= q[k];
        if (GRID_TO[k] >= 0) F[GRID_P + GRID_TO[k]] += q[k];
    }
    return 0;
}

static int grid_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    for (int c = 0; c < GRID_N; ++c) memset(J + (size_t)c * ld, 0, sizeof(double) * GRID_N);
    for (int k = 0; k < GRID_P; ++k) {
        J[k + (size_t)k * ld] = -(grid_laminar(k) + 2.0 * grid_turbulent(k) * fabs(v[k]));
        if (GRID_FROM[k] >= 0) {
            J[k + (size_t)(GRID_P + GRID_FROM[k]) * ld] = 1.0;
            J[GRID_P + GRID_FROM[k] + (size_t)k * ld] = -1.0;
        }
        if (GRID_TO[k] >= 0) {
            J[k + (size_t)(GRID_P + GRID_TO[k]) * ld] = -1.0;
            J[GRID_P + GRID_TO[k] + (size_t)k * ld] = 1.0;
        }
    }
    return 0;
}

static void grid_model(model *m)
{
    int k = 0;
    for (int j = 0; j < GRID; ++j)
        for (int i = 0; i < GRID; ++i) {
            if (i < GRID - 1) GRID_FROM[k] = j * GRID + i, GRID_TO[k++] = j * GRID + i + 1;
            if (j < GRID - 1) GRID_FROM[k] = j * GRID + i, GRID_TO[k++] = (j + 1) * GRID + i;
        }
    GRID_FROM[k] = -1, GRID_TO[k++] = 0;          /* supply into the first corner */
    GRID_FROM[k] = GRID_J - 1, GRID_TO[k++] = -1; /* outlet from the opposite one */
    memset(GRID_W, 0, sizeof GRID_W);
    for (k = 0; k < GRID_P; ++k) {
        if (GRID_FROM[k] >= 0) GRID_W[GRID_FROM[k] + (size_t)k * GRID_J] = 1.0;
        if (GRID_TO[k] >= 0) GRID_W[GRID_TO[k] + (size_t)k * GRID_J] = -1.0;
    }
    memset(m, 0, sizeof *m);
    m->name = "grid network, 4 x 4 junctions (index 2)";
    m->n = GRID_N;
    for (k = 0; k < GRID_P; ++k) m->M[k + (size_t)k * GRID_N] = grid_inertance(k);
    m->force = grid_force;
    m->jacobian = grid_jacobian;
    for (k = 0; k < GRID_P; ++k) m->v0[k] = 1e-4;
    for (int j = 0; j < GRID_J; ++j) m->v0[GRID_P + j] = 2e5;
    m->t_end = 2.0;
    m->state_scale = 2e-4;
    m->pipes = GRID_P;
    m->junctions = GRID_J;
    m->W = GRID_W;
    m->pipe_forces = grid_pipe_forces;
    m->inflows = grid_inflows;
}

/* ---- set-up: cdyn object and consistent initial values ----------------------- */

static cdyn_dae *make_dae(const model *m)
{
    cdyn_dae *dae = cdyn_dae_create(m->n, NULL);
    if (!dae || cdyn_dae_set_mass(dae, m->M, m->n) != CDYN_OK ||
        cdyn_dae_set_model(dae, m->force, m->jacobian, NULL, NULL) != CDYN_OK ||
        cdyn_dae_split(dae, 0.0, m->v0) != CDYN_OK) {
        fprintf(stderr, "bench_stiff: %s: set-up failed: %s\n", m->name,
                dae ? cdyn_dae_last_error(dae) : "no memory");
        exit(EXIT_FAILURE);
    }
    return dae;
}

/* Consistent v0 and v'0 (cdyn), written into the model. */
static void make_consistent(model *m)
{
    cdyn_dae *dae = make_dae(m);
    int r = cdyn_dae_ode_size(dae), integrated[NMAX];
    double y[NMAX], ydot[NMAX];
    cdyn_dae_split_states(dae, integrated, NULL);
    if (cdyn_dae_consistent(dae, 0.0, m->v0) != CDYN_OK) {
        fprintf(stderr, "bench_stiff: %s: %s\n", m->name, cdyn_dae_last_error(dae));
        exit(EXIT_FAILURE);
    }
    for (int j = 0; j < r; ++j) y[j] = m->v0[integrated[j]];
    if (cdyn_dae_rhs(dae, 0.0, y, ydot) != CDYN_OK ||
        cdyn_dae_last_state(dae, m->v0, m->vdot0) != CDYN_OK) {
        fprintf(stderr, "bench_stiff: %s: %s\n", m->name, cdyn_dae_last_error(dae));
        exit(EXIT_FAILURE);
    }
    cdyn_dae_free(dae);
}

/* ---- the three paths --------------------------------------------------------- */

typedef struct {
    model *m;
    SUNContext ctx;
    double rtol;
    int kind;            /* 0 IDA, 1 cdyn + J, 2 cdyn with CVODE's DQ Jacobian, 3 nullspace,
                            4 IDA through cdyn's adapter */
    cdyn_dae *dae;       /* kinds 1, 2 (and the split the errors are judged on) */
    cdyn_ida_dae *ida;   /* kind 4 */
    cdyn_nullspace *ns;  /* kind 3 */
    int integrated[NMAX];
    double v_end[NMAX];  /* full state at t_end of the last run */
    long steps, rhs;     /* of the last run: steps, residuals or cdyn rhs (incl. Jacobians) */
    char failure[400];   /* why the last failed run failed ("" if none) */
} run;

static const char *KIND_NAME[] = {"IDA (hand residual + J)", "cdyn + CVODE, cdyn J",
                                  "cdyn + CVODE, DQ J", "nullspace by hand + CVODE",
                                  "cdyn + IDA (adapter)"};
enum { KINDS = 5 };

typedef struct {
    const double *M;
    cdyn_dae_force_fn force;
    cdyn_dae_jacobian_fn jacobian;
    int n;
    double F[NMAX];
} ida_data;

static int ida_residual(sunrealtype t, N_Vector v, N_Vector vdot, N_Vector r, void *user)
{
    ida_data *d = user;
    const double *pv = N_VGetArrayPointer(v), *pd = N_VGetArrayPointer(vdot);
    double *pr = N_VGetArrayPointer(r);
    d->force(t, pv, d->F, NULL);
    for (int i = 0; i < d->n; ++i) {
        double s = -d->F[i];
        for (int j = 0; j < d->n; ++j) s += d->M[i + (size_t)j * d->n] * pd[j];
        pr[i] = s;
    }
    return 0;
}

static int ida_jacobian(sunrealtype t, sunrealtype cj, N_Vector v, N_Vector vdot, N_Vector r,
                        SUNMatrix J, void *user, N_Vector t1, N_Vector t2, N_Vector t3)
{
    (void)vdot, (void)r, (void)t1, (void)t2, (void)t3;
    ida_data *d = user;
    double *Jd = SUNDenseMatrix_Data(J);
    int n = d->n;
    d->jacobian(t, N_VGetArrayPointer(v), Jd, n, NULL);
    for (size_t i = 0; i < (size_t)n * n; ++i) Jd[i] = cj * d->M[i] - Jd[i];
    return 0;
}

/* atol: 1e-2 rtol times each state's size (flows, pressures, voltages) */
static void set_atol(N_Vector atol, const model *m, double rtol, const int *pick, int count)
{
    double *a = N_VGetArrayPointer(atol);
    for (int i = 0; i < count; ++i) {
        int s = pick ? pick[i] : i;
        double size = fmax(fabs(m->v0[s]), m->state_scale);
        if ((m->n == LINE_N && s >= PIPES) || (m->W && s >= m->pipes)) size = 1e5; /* pressures */
        a[i] = 1e-2 * rtol * size;
    }
}

/* IDA on M v' = F: the hand-written residual and Jacobian (kind 0) or
 * cdyn's adapter on the same model (kind 4: cdyn_ida_dae_residual and
 * _jacobian, which check their inputs and outputs), from the same
 * consistent values and with the same options. */
static int run_ida(run *R)
{
    const model *m = R->m;
    int n = m->n, adapter = R->kind == 4;
    ida_data d = {m->M, m->force, m->jacobian, n, {0}};
    N_Vector v = N_VNew_Serial(n, R->ctx), vd = N_VNew_Serial(n, R->ctx),
             atol = N_VNew_Serial(n, R->ctx);
    memcpy(N_VGetArrayPointer(v), m->v0, sizeof(double) * (size_t)n);
    memcpy(N_VGetArrayPointer(vd), m->vdot0, sizeof(double) * (size_t)n);
    set_atol(atol, m, R->rtol, NULL, n);
    void *mem = IDACreate(R->ctx);
    SUNMatrix A = SUNDenseMatrix(n, n, R->ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(v, A, R->ctx);
    int flag = IDAInit(mem, adapter ? cdyn_ida_dae_residual : ida_residual, 0.0, v, vd);
    flag |= IDASVtolerances(mem, R->rtol, atol);
    flag |= IDASetLinearSolver(mem, LS, A);
    if (adapter) {
        flag |= cdyn_ida_attach_dae(mem, R->ida, v);
    } else {
        flag |= IDASetUserData(mem, &d);
        flag |= IDASetJacFn(mem, ida_jacobian);
    }
    flag |= IDASetMaxNumSteps(mem, 1000000);
    N_Vector id = NULL;
    if (m->W) { /* index 2: the pressures out of the error test */
        id = N_VNew_Serial(n, R->ctx);
        for (int i = 0; i < n; ++i) N_VGetArrayPointer(id)[i] = i < m->pipes ? 1.0 : 0.0;
        flag |= IDASetId(mem, id);
        flag |= IDASetSuppressAlg(mem, SUNTRUE);
        flag |= IDASetInitStep(mem, 1e-6 * m->t_end);
    }
    sunrealtype t = 0.0;
    if (flag == 0) flag = IDASolve(mem, m->t_end, &t, v, vd, IDA_NORMAL);
    if (flag < 0)
        snprintf(R->failure, sizeof R->failure, "IDA flag %d at t = %.3g s%s%s", flag, (double)t,
                 adapter ? ": " : "", adapter ? cdyn_ida_dae_last_error(R->ida) : "");
    memcpy(R->v_end, N_VGetArrayPointer(v), sizeof(double) * (size_t)n);
    IDAGetNumSteps(mem, &R->steps);
    IDAGetNumResEvals(mem, &R->rhs);
    IDAFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(v);
    N_VDestroy(vd);
    N_VDestroy(atol);
    if (id) N_VDestroy(id);
    return flag < 0;
}

/* ---- (c) by hand through cdyn_nullspace (THEORY T1.7) ------------------------ */

typedef struct {
    const model *m;
    cdyn_nullspace *ns;
    int independent[NMAX], dependent[NMAX];
    double M[NMAX * NMAX]; /* pipes x pipes */
    double q[NMAX], qdot[NMAX], f[NMAX], b[NMAX], bdot[NMAX], c[NMAX], p[NMAX];
    long calls;
} ns_data;

/* the flows from the loop flows y (W q = b(t)), their rates and the
 * pressures: M q' = f + W^T p, W q' = b'(t) */
static int ns_state(ns_data *d, double t, const double *y)
{
    const model *m = d->m;
    int J = m->junctions;
    m->inflows(t, d->b, d->bdot);
    for (int j = 0; j < J; ++j) d->c[j] = -d->b[j];
    if (cdyn_nullspace_complete(d->ns, y, d->c, d->q) != CDYN_OK) return -1;
    m->pipe_forces(t, d->q, d->f);
    for (int j = 0; j < J; ++j) d->c[j] = -d->bdot[j];
    return cdyn_nullspace_solve(d->ns, d->M, m->pipes, d->f, d->c, d->qdot, d->p) == CDYN_OK
               ? 0
               : -1;
}

static int ns_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user)
{
    ns_data *d = user;
    d->calls++;
    if (ns_state(d, t, N_VGetArrayPointer(y)) != 0) return -1;
    double *yd = N_VGetArrayPointer(ydot);
    for (int j = 0; j < d->m->pipes - d->m->junctions; ++j) yd[j] = d->qdot[d->independent[j]];
    return 0;
}

static int run_ns(run *R)
{
    const model *m = R->m;
    static ns_data d; /* large; one run at a time */
    memset(&d, 0, sizeof d);
    d.m = m;
    d.ns = R->ns;
    for (int k = 0; k < m->pipes; ++k) d.M[k + (size_t)k * m->pipes] = m->M[k + (size_t)k * m->n];
    cdyn_nullspace_partition(d.ns, d.independent, d.dependent);
    int ny = m->pipes - m->junctions;
    N_Vector y = N_VNew_Serial(ny, R->ctx), atol = N_VNew_Serial(ny, R->ctx);
    for (int j = 0; j < ny; ++j) N_VGetArrayPointer(y)[j] = m->v0[d.independent[j]];
    set_atol(atol, m, R->rtol, d.independent, ny);
    void *mem = CVodeCreate(CV_BDF, R->ctx);
    SUNMatrix A = SUNDenseMatrix(ny, ny, R->ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, R->ctx);
    int flag = CVodeInit(mem, ns_rhs, 0.0, y);
    flag |= CVodeSVtolerances(mem, R->rtol, atol);
    flag |= CVodeSetLinearSolver(mem, LS, A);
    flag |= CVodeSetUserData(mem, &d);
    flag |= CVodeSetMaxNumSteps(mem, 1000000);
    sunrealtype t = 0.0;
    if (flag == 0) flag = CVode(mem, m->t_end, y, &t, CV_NORMAL);
    if (flag >= 0 && ns_state(&d, t, N_VGetArrayPointer(y)) != 0) flag = -1;
    if (flag < 0)
        snprintf(R->failure, sizeof R->failure, "CVODE flag %d at t = %.3g s: %s", flag,
                 (double)t, cdyn_nullspace_last_error(d.ns));
    memcpy(R->v_end, d.q, sizeof(double) * (size_t)m->pipes);
    memcpy(R->v_end + m->pipes, d.p, sizeof(double) * (size_t)m->junctions);
    long dq = 0;
    CVodeGetNumSteps(mem, &R->steps);
    CVodeGetNumLinRhsEvals(mem, &dq);
    R->rhs = d.calls;
    (void)dq;
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    N_VDestroy(atol);
    return flag < 0;
}

static int run_cvode(run *R)
{
    const model *m = R->m;
    int r = cdyn_dae_ode_size(R->dae);
    double v[NMAX];
    memcpy(v, m->v0, sizeof v);
    if (cdyn_dae_consistent(R->dae, 0.0, v) != CDYN_OK) return 1; /* warm start reset */
    N_Vector y = N_VNew_Serial(r, R->ctx), atol = N_VNew_Serial(r, R->ctx);
    for (int j = 0; j < r; ++j) N_VGetArrayPointer(y)[j] = m->v0[R->integrated[j]];
    set_atol(atol, m, R->rtol, R->integrated, r);
    void *mem = CVodeCreate(CV_BDF, R->ctx);
    SUNMatrix A = SUNDenseMatrix(r, r, R->ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, R->ctx);
    cdyn_dae_counters before, after;
    cdyn_dae_get_counters(R->dae, &before);
    int flag = CVodeInit(mem, cdyn_cvode_dae_rhs, 0.0, y);
    flag |= CVodeSVtolerances(mem, R->rtol, atol);
    flag |= CVodeSetLinearSolver(mem, LS, A);
    flag |= R->kind == 1 ? cdyn_cvode_attach_dae(mem, R->dae) : CVodeSetUserData(mem, R->dae);
    flag |= CVodeSetMaxNumSteps(mem, 1000000);
    sunrealtype t = 0.0;
    if (flag == 0) flag = CVode(mem, m->t_end, y, &t, CV_NORMAL);
    /* the full state at the end: one more evaluation there */
    double ydot[NMAX];
    if (flag >= 0 && (cdyn_dae_rhs(R->dae, t, N_VGetArrayPointer(y), ydot) != CDYN_OK ||
                      cdyn_dae_last_state(R->dae, R->v_end, NULL) != CDYN_OK))
        flag = -1;
    cdyn_dae_get_counters(R->dae, &after);
    if (flag < 0)
        snprintf(R->failure, sizeof R->failure, "CVODE flag %d at t = %.3g s: %s", flag,
                 (double)t, cdyn_dae_last_error(R->dae));
    CVodeGetNumSteps(mem, &R->steps);
    R->rhs = after.rhs - before.rhs;
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    N_VDestroy(atol);
    return flag < 0;
}

static int run_path(void *ctx)
{
    run *R = ctx;
    return R->kind == 0 || R->kind == 4 ? run_ida(R) : R->kind == 3 ? run_ns(R) : run_cvode(R);
}

/* Error of the integrated states at the end against the reference, in
 * units of the largest integrated state of the reference. */
static double end_error(const run *R, const double *reference)
{
    double err = 0.0, size = 0.0;
    for (int j = 0; j < cdyn_dae_ode_size(R->dae); ++j) {
        int s = R->integrated[j];
        err = fmax(err, fabs(R->v_end[s] - reference[s]));
        size = fmax(size, fabs(reference[s]));
    }
    return err / size;
}

static FILE *csv_out; /* NULL without --csv */

static void bench_model(model *m, SUNContext ctx, int quick)
{
    make_consistent(m);
    cdyn_dae *dae_j = make_dae(m), *dae_dq = make_dae(m), *dae_ida = make_dae(m);
    int integrated[NMAX];
    cdyn_dae_split_states(dae_j, integrated, NULL);
    int ny = cdyn_dae_ode_size(dae_j);
    /* the paths of this model: the null space by hand for the index-2
     * network, IDA through cdyn's adapter where the split is index 1 (the
     * adapter refuses the index-2 form) */
    int kinds = 0, kind_of[KINDS];
    for (int kind = 0; kind < KINDS; ++kind)
        if ((kind != 3 || m->W) && (kind != 4 || !cdyn_dae_index2(dae_j))) kind_of[kinds++] = kind;
    cdyn_ida_dae *ida = cdyn_ida_dae_create(dae_ida, NULL);
    if (!ida) {
        fprintf(stderr, "bench_stiff: %s: the IDA adapter could not be created\n", m->name);
        exit(EXIT_FAILURE);
    }
    printf("\n%s: n = %d, %d integrated, %d algebraic%s, t in [0, %g] s\n", m->name, m->n, ny,
           m->n - ny, cdyn_dae_index2(dae_j) ? " (index-2 form: dependent flows and pressures)" : "",
           m->t_end);
    cdyn_nullspace *ns = NULL;
    if (m->W) {
        ns = cdyn_nullspace_create(m->pipes, m->junctions, NULL);
        if (!ns || cdyn_nullspace_factor(ns, m->W, m->junctions) != CDYN_OK) {
            fprintf(stderr, "bench_stiff: %s: the null-space set-up failed\n", m->name);
            exit(EXIT_FAILURE);
        }
    }

    /* the reference: IDA at rtol 1e-12; for the index-2 network, where
     * IDA's corrector fails at that tolerance (its iteration matrix has
     * condition ~ 1/h^2 at small steps), the hand-wired null-space route */
    run ref = {.m = m, .ctx = ctx, .rtol = 1e-12, .kind = m->W ? 3 : 0, .ns = ns};
    if (run_path(&ref)) {
        fprintf(stderr, "bench_stiff: %s: the reference run failed: %s\n", m->name, ref.failure);
        exit(EXIT_FAILURE);
    }
    printf("  %-8s %-26s %12s %22s %7s %8s %8s %10s\n", "rtol", "path", "median [s]",
           "[min, max]", "ratio", "steps", "evals", "error");
    static const double rtols[] = {1e-6, 1e-8, 1e-10};
    for (int k = 0; k < 3; ++k) {
        run R[KINDS];
        bu_path p[KINDS];
        for (int i = 0; i < kinds; ++i) {
            int kind = kind_of[i];
            R[i] = (run){.m = m, .ctx = ctx, .rtol = rtols[k], .kind = kind,
                         .dae = kind == 2 ? dae_dq : dae_j, .ida = ida, .ns = ns};
            memcpy(R[i].integrated, integrated, sizeof integrated);
            p[i] = (bu_path){.fn = run_path, .ctx = &R[i]};
        }
        bu_measure(p, kinds, quick ? 3 : 11, quick ? 1e-3 : 0.2);
        for (int i = 0; i < kinds; ++i) {
            int kind = R[i].kind;
            /* the counts and the end state of one more run, outside the timing */
            int failed = run_path(&R[i]);
            printf("  %-8.0e %-26s %12.4e [%9.3e, %9.3e] %7.2f %8ld %8ld %10.2e%s\n", rtols[k],
                   KIND_NAME[kind], p[i].t.median, p[i].t.min, p[i].t.max,
                   p[i].t.median / p[0].t.median, R[i].steps, R[i].rhs,
                   end_error(&R[i], ref.v_end),
                   failed || p[i].failures ? "  FAILED" : "");
            if (R[i].failure[0]) printf("           (%s)\n", R[i].failure);
            if (csv_out)
                fprintf(csv_out, "\"%s\",%g,\"%s\",%.6e,%.6e,%.6e,%.4f,%ld,%ld,%.3e,%d\n",
                        m->name, rtols[k], KIND_NAME[kind], p[i].t.median, p[i].t.min,
                        p[i].t.max, p[i].t.median / p[0].t.median, R[i].steps,
                        R[i].rhs, end_error(&R[i], ref.v_end),
                        failed || p[i].failures ? 1 : 0);
        }
    }
    cdyn_ida_dae_free(ida);
    cdyn_dae_free(dae_j);
    cdyn_dae_free(dae_dq);
    cdyn_dae_free(dae_ida);
    cdyn_nullspace_free(ns);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_stiff", &quick, &csv_path) != 0) return EXIT_FAILURE;
    csv_out = bu_open_csv(csv_path, "bench_stiff", quick,
                          "model,rtol,path,median_s,min_s,max_s,ratio,steps,evals,error,failed");
    printf("cdyn %s stiff DAE benchmark (%s mode): time per integration, median [min, max]; "
           "ratio = path / IDA of the same run; evals = residuals (IDA) or cdyn right-hand "
           "sides incl. Jacobian evaluations; error = end state against IDA at rtol 1e-12, "
           "relative to the largest integrated state\n",
           cdyn_version(), quick ? "quick" : "full");
    bu_print_machine(stdout, "  ");
    SUNContext ctx = NULL;
    if (SUNContext_Create(SUN_NO_COMM, &ctx) != 0) return EXIT_FAILURE;
    static model line, ladder, grid;
    line_model(&line);
    ladder_model(&ladder);
    grid_model(&grid);
    bench_model(&line, ctx, quick);
    bench_model(&ladder, ctx, quick);
    bench_model(&grid, ctx, quick);
    SUNContext_Free(&ctx);
    if (csv_out) fclose(csv_out);
    return EXIT_SUCCESS;
}
