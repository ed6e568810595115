/* A hydraulic grid in SI units for the sparse DAE's suite and bench
 * (tests/hydraulic_grid.c): k x k junctions, a pipe on every edge, an
 * orifice from every junction to ambient and an inflow b(t) into junction 0.
 * States: the pipe flows q_e, the junction pressures p_j and the orifice
 * flows o_j. Pipes on every third edge are short and resistive (no
 * inertance: algebraic); the others have inertance L_e. Junctions have no
 * storage, and their orifices no inertance, so p and o are algebraic too,
 * one equation each:
 *     L_e q_e' = p_a - p_b - R_e q_e - K_e q_e |q_e|   (pipe a -> b; L_e = 0 resistive)
 *     0 = b_j(t) + sum_in q - sum_out q - o_j           (junction j: p_j's equation)
 *     0 = p_j - p_0 - R_o o_j - K_o o_j |o_j|           (orifice j: o_j's equation)
 * dF_A/dv_A couples the pressures through the resistive pipes: index 1.
 * Optionally one resistive pipe is a valve of opening s (grid_set_valve):
 *     0 = s^2 (p_a - p_b) - K_e q_e |q_e| - R_v q_e    (R_v = 0 by default)
 * closed (s = 0) at q_e = 0 its row of dF_A/dv_A vanishes when R_v = 0: a
 * singular block that the sparse DAE steps through with its rank-revealing
 * QR; R_v > 0 gives the same states through a regular block.
 * The callbacks take a grid as user data; dF/dv is given on the pattern
 * colptr/rowind in that order. */
#ifndef CDYN_TEST_HYDRAULIC_GRID_H
#define CDYN_TEST_HYDRAULIC_GRID_H

#include <cdyn/sparse_dae.h>

typedef struct {
    int k, nj, np, n, nnz;
    int *from, *to;           /* np: junctions of each pipe */
    double *L, *R, *K;        /* np */
    double Ro, Ko, p0, b0, w; /* orifices, ambient, inflow b0 (1 + 0.5 sin w t) */
    double *mass;             /* n */
    int *colptr, *rowind;     /* the pattern of dF/dv */
    double sq, sp;            /* units: flows and pressures in the state = s * SI */
    double *e;                /* n: equation scales */
    int valve;                /* the pipe that is a valve (-1: none) */
    double opening, valve_resistance; /* its s and R_v */
    int force_fail, jac_fail, jac_nan; /* fault injection: codes returned, a NaN */
    cdyn_sparse_dae *reenter; /* a callback calls rhs on it */
    cdyn_status reentry_status;
} grid;

/* The state index of junction j's pressure and of its orifice flow. */
int grid_p(const grid *g, int j);
int grid_o(const grid *g, int j);

/* The k x k grid in SI units (allocates; grid_free releases). */
void grid_init(grid *g, int k);
/* States in other units (flows times sq, pressures times sp) and equation
 * i scaled by se or 1 / se alternately; the masses follow. */
void grid_units(grid *g, double sq, double sp, double se);
void grid_free(grid *g);
/* Make a resistive pipe near the middle of the grid a valve of opening s;
 * returns that pipe's index (its state and its equation). */
int grid_set_valve(grid *g, double s);

/* F, the values of dF/dv on the pattern, dF/dt (cdyn_sparse_dae callbacks). */
int grid_force(double t, const double *v, double *F, void *user);
int grid_jacobian(double t, const double *v, double *values, void *user);
int grid_time(double t, const double *v, double *dFdt, void *user);

/* A start: flows spread, pressures ambient + 1 bar (in the grid's units). */
void grid_guess(const grid *g, double *v);

#endif
