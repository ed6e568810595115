/* The one rank policy (rank.h): equilibration by powers of two, rank by
 * pivoted QR of the equilibrated matrix, definiteness by Cholesky of the
 * symmetrically equilibrated matrix. */
#include "rank.h"

#include "internal.h"
#include "linalg.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cdyn__rank_ws_init(cdyn__rank_ws *w, int rows, int cols, int min_lwork)
{
    memset(w, 0, sizeof *w);
    int big = cdyn__max(cdyn__max(rows, cols), 1);
    w->rows = rows;
    w->cols = cols;
    w->lwork = cdyn__max(min_lwork, 1);
    if (rows > 0 && cols > 0) {
        w->lwork = cdyn__max(w->lwork, cdyn__geqp3_lwork(rows, cols));
        w->lwork = cdyn__max(w->lwork, cdyn__geqp3_lwork(cols, rows));
    }
    w->row_scale = malloc(sizeof(double) * (size_t)big);
    w->col_scale = malloc(sizeof(double) * (size_t)big);
    w->qr = malloc(sizeof(double) * (size_t)cdyn__max(rows * cols, 1));
    w->tau = malloc(sizeof(double) * (size_t)big);
    w->jpvt = malloc(sizeof(int) * (size_t)big);
    w->work = malloc(sizeof(double) * (size_t)w->lwork);
    w->match = malloc(sizeof(double) * 5 * ((size_t)big + 1));
    w->match_index = malloc(sizeof(int) * 3 * ((size_t)big + 1));
    if (w->row_scale && w->col_scale && w->qr && w->tau && w->jpvt && w->work && w->match &&
        w->match_index)
        return 1;
    cdyn__rank_ws_free(w);
    return 0;
}

void cdyn__rank_ws_free(cdyn__rank_ws *w)
{
    free(w->row_scale);
    free(w->col_scale);
    free(w->qr);
    free(w->tau);
    free(w->jpvt);
    free(w->work);
    free(w->match);
    free(w->match_index);
    memset(w, 0, sizeof *w);
}

/* The power of two p with x p in [1/2, 1) for x > 0 (exponent clamped so
 * that p stays a normal number); 1 for x = 0 or non-finite x. */
double cdyn__inverse_power_of_two(double x)
{
    if (!(x > 0.0) || !isfinite(x)) return 1.0;
    /* x = f 2^e, f in [1/2, 1): e from the exponent bits (frexp for a
     * subnormal x) */
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7FF), e;
    if (biased == 0) frexp(x, &e);
    else e = biased - 1022;
    if (e > 1021) e = 1021;
    if (e < -1021) e = -1021;
    uint64_t out = (uint64_t)(1023 - e) << 52;
    double p;
    memcpy(&p, &out, sizeof p);
    return p;
}

/* Row factors r so that every row's largest entry of the matrix that is
 * equilibrated is in [1/2, 1); that matrix is A itself, or with ref its
 * history, updated with A in the same pass (then *ld = rows). Returns it. */
static const double *row_factors(int rows, int cols, const double *A, int lda,
                                 cdyn__rank_ref *ref, double *r, int *ld)
{
    for (int i = 0; i < rows; ++i) r[i] = 0.0;
    if (ref) {
        for (int j = 0; j < cols; ++j) {
            const double *col = A + (size_t)j * lda;
            double *h = ref->amax + (size_t)j * rows;
            for (int i = 0; i < rows; ++i) {
                h[i] = cdyn__larger(h[i], fabs(col[i]));
                r[i] = cdyn__larger(r[i], h[i]);
            }
        }
    } else {
        for (int j = 0; j < cols; ++j) {
            const double *col = A + (size_t)j * lda;
            for (int i = 0; i < rows; ++i) r[i] = cdyn__larger(r[i], fabs(col[i]));
        }
    }
    for (int i = 0; i < rows; ++i) r[i] = cdyn__inverse_power_of_two(r[i]);
    *ld = ref ? rows : lda;
    return ref ? ref->amax : A;
}

/* Column factors of the row-scaled A (largest entry in [1/2, 1)). */
static void col_factors(int rows, int cols, const double *A, int lda, const double *r,
                        double *c)
{
    for (int j = 0; j < cols; ++j) {
        const double *col = A + (size_t)j * lda;
        double largest = 0.0;
        for (int i = 0; i < rows; ++i) largest = cdyn__larger(largest, fabs(col[i]) * r[i]);
        c[j] = cdyn__inverse_power_of_two(largest);
    }
}

void cdyn__equilibrate(int rows, int cols, const double *A, int lda, double *r, double *c)
{
    cdyn__equilibrate_ref(rows, cols, A, lda, NULL, r, c);
}

void cdyn__equilibrate_ref(int rows, int cols, const double *A, int lda, cdyn__rank_ref *ref,
                           double *r, double *c)
{
    int ld;
    const double *S = row_factors(rows, cols, A, lda, ref, r, &ld);
    col_factors(rows, cols, S, ld, r, c);
}

/* ---- the second opinion: the scaling of a maximum-product matching ------- */

/* The costs of the matching: -log2 |a| for a non-zero entry (within
 * +-1075), less LEAD_BONUS on a line the decision must take first, and
 * NO_PAIR for a zero entry; each beyond every sum the smaller can make over
 * `lines` pairs, so that the matching covers the leading lines first, then
 * avoids zero entries, then maximizes the product. */
#define LEAD_BONUS(lines) (4096.0 * ((lines) + 1.0))
#define NO_PAIR(lines) (4.0 * ((lines) + 1.0) * LEAD_BONUS(lines))

/* Minimum-cost assignment of the na rows of cost (na x ma, ld na, na <= ma)
 * to distinct columns, by shortest augmenting paths with potentials (the
 * Hungarian method, O(na^2 ma)). u (na + 1) and v (ma + 1) get duals with
 * u_i + v_j <= cost_ij everywhere and equality on the pairs (1-based;
 * index 0 is the algorithm's own). Scratch: minv (ma + 1) and the ints p,
 * way, used (ma + 1 each). */
static void assign(int na, int ma, const double *cost, double *u, double *v, double *minv,
                   int *p, int *way, int *used)
{
    for (int i = 0; i <= na; ++i) u[i] = 0.0;
    for (int j = 0; j <= ma; ++j) v[j] = 0.0, p[j] = 0, way[j] = 0;
    for (int i = 1; i <= na; ++i) {
        p[0] = i;
        int j0 = 0;
        for (int j = 0; j <= ma; ++j) minv[j] = INFINITY, used[j] = 0;
        do {
            used[j0] = 1;
            int i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            for (int j = 1; j <= ma; ++j) {
                if (used[j]) continue;
                double cur = cost[(i0 - 1) + (size_t)(j - 1) * na] - u[i0] - v[j];
                if (cur < minv[j]) minv[j] = cur, way[j] = j0;
                if (minv[j] < delta) delta = minv[j], j1 = j;
            }
            for (int j = 0; j <= ma; ++j) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        do { /* flip the augmenting path */
            int j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0 != 0);
    }
}

/* 2^e for the dual d rounded to an integer e (clamped to normal numbers);
 * 1 for a line without a non-zero entry (d = NAN). */
static double dual_scale(double d)
{
    if (!(d == d)) return 1.0;
    double e = floor(d + 0.5);
    return ldexp(1.0, (int)(e > 1000.0 ? 1000.0 : e < -1000.0 ? -1000.0 : e));
}

/* Row factors r and column factors c (powers of two) of the maximum-
 * product matching of S (rows x cols, ld lds): |s_ij| r_i c_j <= 2 with
 * every paired entry near 1, and each line tightened so that its largest
 * entry is near 1. The pairing does not change when rows or columns are
 * rescaled (every pairing's product scales alike), so neither does the
 * scaled matrix, up to the freedom the duals leave where the matching is
 * not unique. lead (flags, or NULL) marks lines that must be paired first
 * (the decision's leading rows, by_rows, or columns). Uses w->qr for the
 * costs and w->match, w->match_index. */
static void matching_scales(cdyn__rank_ws *w, int rows, int cols, const double *S, int lds,
                            const int *lead, int by_rows, double *r, double *c)
{
    int flip = rows > cols, na = flip ? cols : rows, ma = flip ? rows : cols;
    double bonus = LEAD_BONUS(na), none = NO_PAIR(na);
    double *cost = w->qr, *u = w->match, *v = u + (ma + 1), *minv = v + (ma + 1);
    int *p = w->match_index, *way = p + (ma + 1), *used = way + (ma + 1);
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            double a = fabs(S[i + (size_t)j * lds]), k = a > 0.0 ? -log2(a) : none;
            if (lead && lead[by_rows ? i : j]) k -= bonus;
            if (flip) cost[j + (size_t)i * na] = k;
            else cost[i + (size_t)j * na] = k;
        }
    assign(na, ma, cost, u, v, minv, p, way, used);
    /* back to the true costs: a leading line's dual takes the bonus back
     * (still feasible, still tight on the pairs) */
    for (int i = 0; lead && by_rows && i < rows; ++i)
        if (lead[i]) (flip ? v : u)[i + 1] += bonus;
    for (int j = 0; lead && !by_rows && j < cols; ++j)
        if (lead[j]) (flip ? u : v)[j + 1] += bonus;
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            double *k = flip ? cost + j + (size_t)i * na : cost + i + (size_t)j * na;
            if (lead && lead[by_rows ? i : j]) *k += bonus;
        }
    /* tighten: u_i = min_j (cost_ij - v_j), then v_j = min_i (cost_ij - u_i),
     * over the non-zero entries (NAN where a line has none) */
    for (int i = 1; i <= na; ++i) {
        double best = NAN;
        for (int j = 1; j <= ma; ++j) {
            double k = cost[(i - 1) + (size_t)(j - 1) * na];
            if (k < none && !(k - v[j] >= best)) best = k - v[j];
        }
        u[i] = best;
    }
    for (int j = 1; j <= ma; ++j) {
        double best = NAN;
        for (int i = 1; i <= na; ++i) {
            double k = cost[(i - 1) + (size_t)(j - 1) * na];
            if (k < none && u[i] == u[i] && !(k - u[i] >= best)) best = k - u[i];
        }
        v[j] = best;
    }
    /* the duals are fixed only up to u + t, v - t (the same scaled matrix);
     * the bonus and the zero entries' costs shift them far: centre them */
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 1; i <= na; ++i)
        if (u[i] == u[i]) lo = fmin(lo, u[i]), hi = fmax(hi, u[i]);
    double t = lo <= hi ? 0.5 * (lo + hi) : 0.0;
    for (int i = 1; i <= na; ++i) u[i] -= t;
    for (int j = 1; j <= ma; ++j) v[j] += t;
    for (int i = 0; i < rows; ++i) r[i] = dual_scale(flip ? v[i + 1] : u[i + 1]);
    for (int j = 0; j < cols; ++j) c[j] = dual_scale(flip ? u[j + 1] : v[j + 1]);
}

/* ---- decisions ----------------------------------------------------------- */

/* The pivoted QR of B = D_r A D_c (w->row_scale, w->col_scale) or of B^T,
 * and its verdict (cdyn__rank_decide). */
static int factor_scaled(cdyn__rank_ws *w, enum cdyn__rank_mode mode, int rows, int cols,
                         const double *A, int lda, double tol, const int *leading,
                         cdyn__rank *out)
{
    const double *r = w->row_scale, *c = w->col_scale;
    int by_columns = mode == CDYN__RANK_COLUMNS;
    int m = by_columns ? rows : cols, n = by_columns ? cols : rows; /* the factored m x n */
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            double b = r[i] * A[i + (size_t)j * lda] * c[j];
            if (by_columns)
                w->qr[i + (size_t)j * rows] = b;
            else
                w->qr[j + (size_t)i * cols] = b;
        }
    int count = m < n ? m : n, rank = 0;
    double r00 = 0.0; /* the largest pivot (the first, unless some lead) */
    if (count > 0) {
        /* dgeqp3 moves the columns with jpvt != 0 to the front unpivoted */
        for (int k = 0; k < n; ++k) w->jpvt[k] = leading && leading[k] ? 1 : 0;
        if (cdyn__geqp3(m, n, w->qr, m, w->jpvt, w->tau, w->work, w->lwork) != 0) return -1;
        for (int k = 0; k < n; ++k) --w->jpvt[k];
        for (int k = 0; k < count; ++k) r00 = cdyn__larger(r00, fabs(w->qr[k + (size_t)k * m]));
        while (rank < count && r00 > 0.0 && fabs(w->qr[rank + (size_t)rank * m]) > tol * r00)
            ++rank;
    }
    if (out) {
        out->rank = rank;
        out->ratio = rank > 0 ? fabs(w->qr[(rank - 1) + (size_t)(rank - 1) * m]) / r00 : 0.0;
        out->dropped = rank < count && r00 > 0.0 ? fabs(w->qr[rank + (size_t)rank * m]) / r00 : 0.0;
    }
    return rank;
}

int cdyn__rank_decide(cdyn__rank_ws *w, enum cdyn__rank_mode mode, int rows, int cols,
                      const double *A, int lda, double tol, const int *leading,
                      cdyn__rank_ref *ref, cdyn__rank *out)
{
    double *r = w->row_scale, *c = w->col_scale;
    int ld;
    const double *S = row_factors(rows, cols, A, lda, ref, r, &ld);
    if (mode == CDYN__RANK_ROWS_METRIC)
        for (int j = 0; j < cols; ++j) c[j] = 1.0;
    else
        col_factors(rows, cols, S, ld, r, c);
    int rank = factor_scaled(w, mode, rows, cols, A, lda, tol, leading, out);
    int count = rows < cols ? rows : cols;
    if (rank < 0 || rank >= count || mode == CDYN__RANK_ROWS_METRIC) return rank;
    /* rank lost in this frame: the matching's frame (rank.h), the first
     * frame's factors kept aside in case it finds no more */
    int big = cdyn__max(rows, cols);
    double *kept_r = w->match + 3 * ((size_t)big + 1), *kept_c = kept_r + big + 1;
    memcpy(kept_r, r, sizeof(double) * (size_t)rows);
    memcpy(kept_c, c, sizeof(double) * (size_t)cols);
    matching_scales(w, rows, cols, S, ld, leading, mode == CDYN__RANK_ROWS, r, c);
    int second = factor_scaled(w, mode, rows, cols, A, lda, tol, leading, out);
    if (second < 0 || second > rank) return second;
    memcpy(r, kept_r, sizeof(double) * (size_t)rows);
    memcpy(c, kept_c, sizeof(double) * (size_t)cols);
    return factor_scaled(w, mode, rows, cols, A, lda, tol, leading, out);
}

int cdyn__rank_full_rows(cdyn__rank_ws *w, int rows, int cols, const double *A, int lda,
                         double tol, cdyn__rank_ref *ref, cdyn__rank *out)
{
    if (rows < 1 || rows > cols || w->lwork < 2 * rows * rows) return 0;
    double *r = w->row_scale, *c = w->col_scale, *B = w->qr;
    double *gram = w->work, *inverse = w->work + (size_t)rows * rows;
    cdyn__equilibrate_ref(rows, cols, A, lda, ref, r, c);
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
            B[i + (size_t)j * rows] = r[i] * A[i + (size_t)j * lda] * c[j];
    /* |R_00| = the largest row norm; ||B||_F^2 for the rounding terms */
    double r00_sq = 0.0, frob_sq = 0.0;
    cdyn__syrk('L', 'N', rows, cols, 1.0, B, rows, 0.0, gram, rows);
    for (int i = 0; i < rows; ++i) {
        double row_sq = gram[i + (size_t)i * rows];
        r00_sq = cdyn__larger(r00_sq, row_sq);
        frob_sq += row_sq;
    }
    if (!(r00_sq > 0.0) || cdyn__potrf(rows, gram, rows) != 0) return 0;
    for (int j = 0; j < rows; ++j) /* L^-1 (rows^3 / 3 flops) */
        memcpy(inverse + (size_t)j * rows + j, gram + (size_t)j * rows + j,
               sizeof(double) * (size_t)(rows - j));
    if (cdyn__trtri_lower(rows, inverse, rows) != 0) return 0;
    double inv_sq = 0.0;
    for (int j = 0; j < rows; ++j)
        for (int i = j; i < rows; ++i) {
            double x = inverse[i + (size_t)j * rows];
            inv_sq += x * x;
        }
    /* lambda_min(B B^T) >= 1 / ||L^-1||_F^2 for the computed factor (halved
     * for the rounding of the inverse), less the rounding of forming the
     * product and of the Cholesky (each <= (cols + rows) eps ||B||_F^2) */
    const double eps = 2.220446049250313e-16;
    double lambda_low = 0.5 / inv_sq - 4.0 * (rows + cols + 2) * eps * frob_sq;
    if (!(lambda_low > 0.0)) return 0;
    double sigma_low = sqrt(lambda_low), r00 = sqrt(r00_sq);
    /* the computed QR is that of B^T + E, ||E|| <= rows cols eps ||B||_F */
    double qr_rounding = 4.0 * rows * (double)cols * eps * sqrt(frob_sq);
    if (!(sigma_low - qr_rounding > 2.0 * tol * r00)) return 0;
    for (int i = 0; i < rows; ++i) w->jpvt[i] = i;
    if (out) *out = (cdyn__rank){rows, fmin(sigma_low / r00, 1.0), 0.0};
    return 1;
}

double cdyn__sym_scale(double a)
{
    if (!(a > 0.0) || !isfinite(a)) return 1.0;
    /* a = f 2^e with f in [1/2, 1), read from the bits for a normal a
     * (frexp for a subnormal one): s = 2^-floor(e/2) gives s^2 a in [1/2, 2) */
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7FF), e;
    if (biased == 0) frexp(a, &e);
    else e = biased - 1022;
    int half = e >= 0 ? e / 2 : -((1 - e) / 2);
    if (half > 511) half = 511;
    if (half < -511) half = -511;
    uint64_t out = (uint64_t)(1023 - half) << 52;
    double s;
    memcpy(&s, &out, sizeof s);
    return s;
}

void cdyn__sym_equilibrate(int n, const double *A, int lda, double *s)
{
    for (int j = 0; j < n; ++j) s[j] = cdyn__sym_scale(A[j + (size_t)j * lda]);
}

int cdyn__spd_factor(int n, const double *A, int lda, double *L, int ldl, double *s)
{
    cdyn__sym_equilibrate(n, A, lda, s);
    for (int j = 0; j < n; ++j) {
        for (int i = j; i < n; ++i)
            L[i + (size_t)j * ldl] = s[i] * A[i + (size_t)j * lda] * s[j];
    }
    /* the smallest scaled diagonal entry, for the pivot test, taken before
     * the factorization overwrites it (A may be L itself) */
    int info = 0;
    for (int j = 0; j < n && info == 0; ++j)
        if (!(L[j + (size_t)j * ldl] > 0.0)) info = j + 1;
    if (info) return info;
    double smallest = INFINITY;
    for (int j = 0; j < n; ++j) smallest = fmin(smallest, L[j + (size_t)j * ldl]);
    info = cdyn__potrf(n, L, ldl);
    /* the diagonal of S A S lies in [1/2, 2): the pivot test is relative */
    for (int j = 0; info == 0 && j < n; ++j) {
        double l = L[j + (size_t)j * ldl];
        if (!(l * l > CDYN__DEFINITE_TOL * smallest)) info = j + 1;
    }
    return info;
}

/* x = (L L^T)^-1 x, L lower triangular (ld ldl) with the reciprocals of
 * its diagonal in inv: the substitutions written out, without divisions
 * (at the sizes of a step, LAPACK's call overhead and the divisions'
 * latency were most of the check's time). */
static void cholesky_solve(int n, const double *L, int ldl, const double *inv, double *x)
{
    for (int j = 0; j < n; ++j) {
        const double *col = L + (size_t)j * ldl;
        double xj = x[j] *= inv[j];
        for (int i = j + 1; i < n; ++i) x[i] -= col[i] * xj;
    }
    for (int j = n - 1; j >= 0; --j) {
        const double *col = L + (size_t)j * ldl;
        double sum = x[j];
        for (int i = j + 1; i < n; ++i) sum -= col[i] * x[i];
        x[j] = sum * inv[j];
    }
}

double cdyn__null_probe_start(int n, const double *sign, double *x)
{
    double norm2 = 0.0;
    for (int i = 0; i < n; ++i) {
        x[i] = 1.0 + 0.125 * (double)(i % 8);
        if (sign) x[i] *= sign[i];
        norm2 += x[i] * x[i];
    }
    return norm2;
}

void cdyn__factor_orientation(int n, const double *L, int ldl, double *d)
{
    /* top down: every row below i in column i is oriented already; the
     * strongest of them (in A = D A0 D all of them agree) orients i */
    for (int i = n - 1; i >= 0; --i) {
        const double *col = L + (size_t)i * ldl;
        int parent = -1;
        for (int j = i + 1; j < n; ++j)
            if (col[j] != 0.0 && (parent < 0 || fabs(col[j]) > fabs(col[parent]))) parent = j;
        d[i] = parent < 0 ? 1.0 : (col[parent] > 0.0 ? -d[parent] : d[parent]);
    }
}

int cdyn__null_probe_verdict(int n, const double *x, double before, double floor)
{
    double after = 0.0;
    for (int i = 0; i < n; ++i) after += x[i] * x[i];
    /* ||x_1|| / ||x_0|| >= 1 / floor: an eigenvalue at or below floor (NaN
     * or Inf: overflowed, as singular as it gets) */
    double bound = 1.0 / floor;
    if (after < INFINITY && !(after >= bound * bound * before)) return 0;
    int row = 0;
    for (int i = 1; i < n; ++i)
        if (fabs(x[i]) > fabs(x[row]) || isnan(x[row])) row = i;
    return row + 1;
}

int cdyn__spd_nearly_singular(int n, const double *L, int ldl, double *x, double *inv)
{
    cdyn__factor_orientation(n, L, ldl, inv);
    double before = cdyn__null_probe_start(n, inv, x);
    for (int i = 0; i < n; ++i) inv[i] = 1.0 / L[i + (size_t)i * ldl];
    cholesky_solve(n, L, ldl, inv, x);
    return cdyn__null_probe_verdict(n, x, before, 0.5 * CDYN__DEFINITE_TOL);
}
