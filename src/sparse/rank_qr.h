/* A rank-revealing sparse QR of a square block for the Newton steps and
 * rates of cdyn_sparse_dae where the block is singular (THEORY T2.3, sparse
 * form; docs/theory.md "Sparse index-1 DAEs", singular blocks): SuiteSparseQR
 * factors the transpose of the equilibrated block, A^T E = Q R, its rank
 * from the columns of A^T (the rows of A) that Heath's test finds
 * dependent. The step is the minimum-norm solution of the independent
 * rows, x = Q [R_11^-T (E^T b)_1; 0]: an outer inverse of A (X A X = X)
 * that equals A's pseudo-inverse on consistent right-hand sides, as the
 * dense SVD step does.
 *
 * Each factorization allocates (SuiteSparseQR has no in-place numeric
 * refactorization through its C interface); the applies allocate nothing. */
#ifndef CDYN_SPARSE_RANK_QR_H
#define CDYN_SPARSE_RANK_QR_H

#include <suitesparse/cholmod.h>

typedef struct cdyn__rank_qr {
    int q;
    int started;            /* cc is started (cholmod_l_start) */
    cholmod_common cc;      /* SuiteSparseQR's (long indices) */
    cholmod_sparse *at;     /* q x q: the block's transpose; pattern fixed at init */
    int *to_transpose;      /* nnz: the position of each block entry in at */
    /* the last factorization (NULL before the first) */
    cholmod_sparse *r, *h;
    cholmod_dense *tau;
    SuiteSparse_long *e, *hpinv;
    int rank;               /* rows of R: the independent rows of the block */
    int *live;              /* rank: the columns of R that carry its diagonal */
    SuiteSparse_long *diagonal; /* rank: where in R those diagonals are */
    int *dependent;         /* q - rank: the block's rows ranked dependent */
    double *y, *z, *w;      /* q each: the applies and the condition estimate */
    long factorizations;
} cdyn__rank_qr;

/* Set up for a q x q block given by columns (colptr q + 1, rowind nnz =
 * colptr[q]). 1, or 0 when out of memory (free with cdyn__rank_qr_free). */
int cdyn__rank_qr_init(cdyn__rank_qr *f, int q, const int *colptr, const int *rowind);

/* Factor the block with these values (nnz, on the pattern of init;
 * equilibrated by the caller) by the rank tolerance tol (relative to the
 * largest row 2-norm). Returns its rank (0..q) and sets *rcond to the
 * estimated reciprocal 1-norm condition of the kept triangle R_11 (it
 * vouches for the rank: near 0 means the rank was not decided cleanly);
 * -1 when out of memory, -2 when SuiteSparseQR failed otherwise (the
 * previous factorization is gone either way). */
int cdyn__rank_qr_factor(cdyn__rank_qr *f, const double *values, double tol, double *rcond);

/* x (q) = X b (q), X the outer inverse above, with the last factorization;
 * x and b may alias. No allocation. */
void cdyn__rank_qr_apply(cdyn__rank_qr *f, const double *b, double *x);

/* The rows of the block the last factorization ranked dependent (q - rank
 * of them, in rows, which may be NULL); their count. */
int cdyn__rank_qr_dependent(const cdyn__rank_qr *f, int *rows);

/* Release everything (f may be zero-filled and never initialised). */
void cdyn__rank_qr_free(cdyn__rank_qr *f);

#endif
