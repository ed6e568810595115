/* The sparse network object (include/cdyn/network.h), shared by
 * network.c (create, load), network_solve.c (per-step solve) and
 * network_tree.c (spanning-tree partition). */
#ifndef CDYN_NETWORK_INTERNAL_H
#define CDYN_NETWORK_INTERNAL_H

#include "cdyn/network.h"
#include "internal.h"

#include <suitesparse/cholmod.h>

/* Refinement steps a solve may take to reach its backward-error tolerance. */
#define CDYN__NET_REFINE 4

struct cdyn_network {
    int n, m, nnz, nblocks;
    long nmass;          /* values of M read by a load */
    int *colptr, *rowind; /* W's pattern (copied) */
    int *blk_state;      /* nblocks + 1: first state of each block */
    long *blk_val;       /* nblocks + 1: first value of each block in M */
    int *state_blk;      /* n: block of each state */

    /* S = W M^-1 W^T assembled block by block: the rows each block touches
     * (sorted), the place of each W entry in its block's row list, and for
     * every pair of those rows (a <= b) the place of S_ab in S->x. */
    int *brow_ptr, *brow, *local_row;
    long *pair_ptr;
    int *pair_pos;
    int max_block, max_rows; /* largest block, most rows of one block */

    /* W by rows (for the tree): row pointers, columns, places in W's values */
    int *rowptr, *rowcol, *rowpos;
    int row_length;      /* longest row of the bordered system [M W^T; W 0] */

    /* spanning tree (network_tree.c): 0 not built, 1 built, -1 none */
    int tree;
    int *tree_pipe;      /* m: the pipe joining each junction to its parent */
    int *tree_order;     /* m: junctions in breadth-first order from the ambient */
    char *dependent;     /* n: 1 for tree pipes */

    /* values of the last load */
    double *Mval;        /* nmass: M as given */
    double *Mfac;        /* nmass: Cholesky factors of the scaled blocks s M s */
    double *Mscale;      /* n: the scaling s */
    double *Mroot;       /* n: sqrt(M_kk), the kinetic-metric scale of each state */
    double *Minv;        /* n: 1 / M_kk when M is diagonal (diagonal = 1) */
    int diagonal;        /* every block has size 1 */
    double *Wval;        /* nnz */
    double *Sscale;      /* m: equilibration of S (powers of two), W's row order */
    int *perm, *pinv;    /* m: S is stored as P S P^T; row perm[k] of W is S's k */
    int *sdiag;          /* m: place of S's diagonal entry k in S->x */
    double *row_sign;    /* m: +-1, the orientation of the rows' probe (network.c) */
    int oriented;        /* row_sign holds for the signs of Wval */
    double *blockwork;   /* max_block * max_rows */
    double *x, *y, *dx, *dy, *rf, *rg, *t; /* n, m, n, m, n, m, max(n, m) */
    double *ux, *uy;     /* n, m: backward-error bounds */

    int *redundant, nredundant; /* rows found dependent by the last load */
    char *dropped;       /* m: 1 for those rows when the load kept them out */
    int allow_redundant; /* cdyn_network_set_allow_redundant() */
    int loaded;
    double pivot_ratio, berr, berr_tol;

    cholmod_common cm;
    cholmod_sparse *S;   /* P S P^T, equilibrated: one triangle (build_schur) */
    cholmod_factor *L;

    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* y = s L^-1 s x for one block of M (b x b factor L of s M s, lower,
 * leading dimension b): half of M^-1, in place. */
static inline void cdyn__net_half_solve(int b, const double *L, const double *s, double *x)
{
    for (int i = 0; i < b; ++i) {
        double r = s[i] * x[i];
        for (int k = 0; k < i; ++k) r -= L[i + (size_t)k * b] * x[k];
        x[i] = r / L[i + (size_t)i * b];
    }
}

/* x = M_B^-1 x for one block, in place. */
void cdyn__net_block_solve(int b, const double *L, const double *s, double *x);

/* Build the spanning tree from the pattern if not yet tried; returns
 * CDYN_OK or CDYN_ERR_SINGULAR with net->msg set. */
cdyn_status cdyn__net_tree(cdyn_network *net);

/* y = S^-1 y with CHOLMOD's factor P S P^T = L L^T (simplicial or
 * supernodal; perm = P: y in W's row order, the factor in S's), written
 * out so that nothing is allocated per call. work: m. */
void cdyn__net_schur_solve(const cholmod_factor *L, const int *perm, double *y, double *work);

#endif
