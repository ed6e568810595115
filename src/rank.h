/* The one rank policy of cdyn (DESIGN 7): every decision on the rank or the
 * definiteness of a matrix, in every module, is made here, on an
 * equilibrated copy, so that the verdict does not change when a caller
 * writes the same model in other units.
 *
 * Equilibration scales rows and columns by powers of two (exact: it adds
 * no rounding), rows first and then columns, so that every column has its
 * largest entry in [1/2, 1) and no row exceeds 1 (as LAPACK's dgeequb
 * does). That is cheap and right for most matrices, but it is not
 * invariant under rescaling: a matrix whose rows' largest entries sit in
 * the next column (an upper bidiagonal M with states in units 1e-8 ...
 * 1e8) is balanced by it into a bidiagonal with a small diagonal, whose
 * pivots fall below the tolerance although the matrix is regular in other
 * units. So a decision that finds rank lost asks a second opinion in a
 * frame the units cannot move: the scaling of a maximum-product matching
 * (rows and columns paired so that the product of the paired |entries| is
 * largest, which no rescaling changes; then every paired entry is 1 and
 * no entry exceeds 1 after scaling, the duals of the matching). The rank
 * is the larger of the two verdicts, so rank is never lost to a change
 * of units the matching sees through, and a matrix that the first frame
 * judges regular costs nothing more.
 *
 * Rank: column-pivoted QR (dgeqp3) of the equilibrated matrix B or of B^T;
 * the rank is the number of pivots |R_jj| > tol |R_00| (THEORY T2.2). One
 * default tolerance, CDYN__RANK_TOL, for every module.
 *
 * Definiteness: Cholesky of the symmetrically equilibrated matrix S A S
 * (S_jj a power of two near 1/sqrt(a_jj)); positive definite when it
 * exists and every pivot keeps L_jj^2 > CDYN__DEFINITE_TOL times the
 * smallest diagonal entry of S A S, all of which lie in [1/2, 2) (a pivot
 * below that is rounding of a semidefinite matrix). How
 * accurate a solve with the factor is, is then certified by the backward
 * error of the result (kkt.h), not guessed from a condition number.
 */
#ifndef CDYN_RANK_H
#define CDYN_RANK_H

/* The default relative rank tolerance of every module (docs/api.md). */
#define CDYN__RANK_TOL 1e-10

/* Smallest relative Cholesky pivot of a positive definite matrix. */
#define CDYN__DEFINITE_TOL (1e3 * 2.220446049250313e-16)

/* What a rank decision found. All values are relative (unit-free). */
typedef struct cdyn__rank {
    int rank;       /* pivots |R_jj| > tol |R_00| */
    double ratio;   /* |R_kk| / |R_00| of the smallest kept pivot: how far from rank
                       loss (1 for one pivot, 0 when rank = 0) */
    double dropped; /* |R_rr| / |R_00| of the first dropped pivot, 0 at full rank */
} cdyn__rank;

/* Workspace for decisions on a rows x cols matrix or its transpose, all
 * allocated once (LAPACK workspace queried with lwork = -1). */
typedef struct cdyn__rank_ws {
    int rows, cols;     /* capacity */
    double *row_scale;  /* max(rows, cols): factors of the last decision */
    double *col_scale;  /* max(rows, cols) */
    double *qr;         /* rows * cols: the factored equilibrated matrix */
    double *tau;        /* max(rows, cols) */
    int *jpvt;          /* max(rows, cols): 0-based pivot order after a decision */
    double *work;
    int lwork;
    double *match;      /* 5 (max(rows, cols) + 1): the matching's duals and scratch */
    int *match_index;   /* 3 (max(rows, cols) + 1) */
} cdyn__rank_ws;

/* Allocate for rows x cols (and the transpose) with at least min_lwork
 * doubles of LAPACK workspace. Returns 0 when out of memory (w is then
 * freed and zeroed). */
int cdyn__rank_ws_init(cdyn__rank_ws *w, int rows, int cols, int min_lwork);
void cdyn__rank_ws_free(cdyn__rank_ws *w);

/* The history of a matrix that changes along a motion: amax (rows x cols,
 * leading dimension rows) holds the largest |entry| each position has had,
 * updated by every decision that uses it, and the equilibration is that of
 * amax rather than of the present matrix. A row or column that shrinks
 * towards zero (the gradient of a constraint vanishing at a fold, THEORY
 * T6.2) then shows as nearly dependent instead of being scaled back to
 * unit size; and since amax changes under any scaling of rows and columns
 * exactly as the matrix does, the decisions keep the unit-independence of
 * the rank policy. Start from zeros. */
typedef struct cdyn__rank_ref {
    double *amax;
} cdyn__rank_ref;

/* The power of two p with x p in [1/2, 1) for x > 0 (exponent clamped so
 * that p stays a normal number); 1 for x = 0 or non-finite x. */
double cdyn__inverse_power_of_two(double x);

/* Row factors r (rows) and column factors c (cols), powers of two, that
 * equilibrate the rows x cols A as described above; 1 for a zero row or
 * column. */
void cdyn__equilibrate(int rows, int cols, const double *A, int lda, double *r, double *c);

/* The same against a history (ref may be NULL): ref->amax is updated
 * with A and equilibrated in its place. */
void cdyn__equilibrate_ref(int rows, int cols, const double *A, int lda, cdyn__rank_ref *ref,
                           double *r, double *c);

/* What a decision ranks. ROWS_METRIC equilibrates the rows only: for
 * minimum-norm problems, whose column metric is the caller's choice (the
 * conditioning that matters is the one in that metric). */
enum cdyn__rank_mode {
    CDYN__RANK_COLUMNS,    /* QR of B (rows x cols, ld rows) ranks the columns */
    CDYN__RANK_ROWS,       /* QR of B^T (cols x rows, ld cols) ranks the rows */
    CDYN__RANK_ROWS_METRIC /* as ROWS, columns not scaled */
};


/* Decide the rank of the rows x cols A (finite; rows, cols within the
 * capacity) with relative tolerance tol. leading (flags over the ranked
 * rows or columns, or NULL) marks those the QR must take first, in their
 * order, before it pivots the rest. ref (or NULL): equilibrate against
 * that history, updated with A (the factored matrix is still A, scaled).
 * Afterwards w->qr, w->tau hold the
 * pivoted QR of the equilibrated matrix (or transpose) as dgeqp3 leaves it,
 * w->jpvt the 0-based pivot order (the ranked rows or columns, strongest
 * first), w->row_scale and w->col_scale the factors (B = D_r A D_c) of
 * the frame whose verdict was taken (the matching's when it found the
 * higher rank; not in ROWS_METRIC mode, whose columns keep the metric).
 * Returns the rank (pivots above tol times the largest) and fills *out
 * (may be NULL); -1 if LAPACK reports an internal error. */
int cdyn__rank_decide(cdyn__rank_ws *w, enum cdyn__rank_mode mode, int rows, int cols,
                      const double *A, int lda, double tol, const int *leading,
                      cdyn__rank_ref *ref, cdyn__rank *out);

/* A cheaper way to the verdict of cdyn__rank_decide(CDYN__RANK_ROWS) when
 * it is full row rank (rows <= cols): with B = D_r A D_c equilibrated as
 * that decision does (against ref when given), every pivot of the pivoted
 * QR of B^T satisfies |R_kk| >= sigma_min(B), and |R_00| is the largest row
 * norm of B; so sigma_min(B) > tol |R_00| (with room for the rounding of
 * both computations) proves that the QR would keep every row. sigma_min
 * is bounded from below through the Cholesky factor of the Gram matrix
 * B B^T: lambda_min >= 1 / ||L^-1||_F^2, less the rounding of forming and
 * factoring it (rows^2 cols + rows^3 flops, all BLAS-3, against the
 * BLAS-2 pivoted QR). Returns 1 when certified: *out = {rows, that lower
 * bound of sigma_min / |R_00| (never above the QR's pivot ratio), 0},
 * w->jpvt the identity, w->row_scale and w->col_scale the factors; w->qr
 * and w->tau do not hold a QR then. Returns 0 when it cannot certify
 * (nearly or truly rank deficient, or rows > cols): the caller decides
 * with cdyn__rank_decide. Needs w->lwork >= 2 rows^2. */
int cdyn__rank_full_rows(cdyn__rank_ws *w, int rows, int cols, const double *A, int lda,
                         double tol, cdyn__rank_ref *ref, cdyn__rank *out);

/* The power of two s near 1/sqrt(a) with s^2 a in [1/2, 2) (1 for a <= 0
 * or non-finite a): one diagonal entry of the symmetric equilibration. */
double cdyn__sym_scale(double a);

/* Powers of two s (n) near 1/sqrt(a_jj) for the symmetric A (1 where
 * a_jj <= 0), so that S A S has a diagonal in [1/2, 2). */
void cdyn__sym_equilibrate(int n, const double *A, int lda, double *s);

/* The definiteness policy: L (lower triangle, ld ldl) = Cholesky factor of
 * S A S with s from cdyn__sym_equilibrate (written to s, n entries); only
 * the lower triangle of A is read, and L may be A itself (ld equal). Returns
 * 0 when A is positive definite, else the order of the first minor that is
 * not (LAPACK's info, or the first pivot below CDYN__DEFINITE_TOL). */
int cdyn__spd_factor(int n, const double *A, int lda, double *L, int ldl, double *s);

/* The second half of the definiteness policy, for matrices from the
 * caller's data: the pivots of an unpivoted Cholesky factor can hide a
 * singular matrix (a pivot is the smallest eigenvalue over the square of
 * the null vector's entry at its row, and that entry can be 1e-4). One
 * step of inverse iteration with the factor L (n x n, ld ldl, from
 * cdyn__spd_factor: of S A S, whose diagonal lies in [1/2, 2)) bounds the
 * smallest eigenvalue of S A S from above, up to the start's overlap with
 * its eigenvector: at or below CDYN__DEFINITE_TOL / 2 the matrix counts as
 * singular. The start is oriented by the factor (cdyn__factor_orientation),
 * so that its overlap is at least 1 / (2 sqrt(n)) for every matrix that is
 * a Laplacian up to the signs of its rows and columns (a ring's, with each
 * state's orientation the caller's choice), and the verdict is the same
 * for D A D as for A, D any diagonal of +-1 (a fixed positive start
 * missed 12 of 20000 such rings). Returns 0, or 1 + the row of the largest
 * entry of the near null vector. x, inv: n each (the iterate, the
 * reciprocals of L's diagonal). */
int cdyn__spd_nearly_singular(int n, const double *L, int ldl, double *x, double *inv);

/* The orientation d (n, +-1) of the probe's start from a Cholesky factor L
 * (lower, ld ldl): top down, d_i = -d_j sign(L_ji) for the largest |L_ji|,
 * j > i (1 where column i has none below the diagonal: a root of the
 * elimination tree). If A = D A0 D with A0 a Z-matrix (off-diagonal
 * entries <= 0) then L = D L0 D with L0's off-diagonal entries <= 0, also
 * as computed (no cancellation: every update has one sign), so d = +-D on
 * each part; and the eigenvector of A0's smallest eigenvalue is positive
 * (Perron-Frobenius), that of A is D times it. O(n^2) reads, no flops. */
void cdyn__factor_orientation(int n, const double *L, int ldl, double *d);

/* The probe of cdyn__spd_nearly_singular, for a factor it cannot solve
 * with itself (a network's CHOLMOD factor): x (n) = the start
 * sign_i (1 + (i mod 8) / 8) (sign NULL: +1; the caller orients it as the
 * null vector's signs would be), returning its squared norm; after one
 * solve x <- A^-1 x, the verdict: 0 when ||x|| / ||start|| stays below 1 /
 * floor (no eigenvalue of A at or below floor, up to the start's overlap
 * with the null vector), else 1 + the row of x's largest entry. */
double cdyn__null_probe_start(int n, const double *sign, double *x);
int cdyn__null_probe_verdict(int n, const double *x, double before, double floor);

#endif
