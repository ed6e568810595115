/* Sparse networks: create (pattern analysis) and load (values, the
 * factorization of S = W M^-1 W^T). THEORY T1.1, T1.5; docs/theory.md
 * "Sparse networks". */
#include "network_internal.h"
#include "rank.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void cdyn_network_free(cdyn_network *net)
{
    if (!net) return;
    if (net->S) cholmod_free_sparse(&net->S, &net->cm);
    if (net->L) cholmod_free_factor(&net->L, &net->cm);
    cholmod_finish(&net->cm);
    void *arrays[] = {net->colptr, net->rowind, net->blk_state, net->blk_val, net->state_blk,
                      net->brow_ptr, net->brow, net->local_row, net->pair_ptr, net->pair_pos,
                      net->rowptr, net->rowcol, net->rowpos, net->tree_pipe, net->tree_order,
                      net->dependent, net->Mval, net->Mfac, net->Mscale, net->Mroot,
                      net->Minv, net->Wval,
                      net->Sscale, net->perm, net->pinv, net->sdiag, net->row_sign, net->blockwork, net->x, net->y, net->dx, net->dy, net->rf,
                      net->rg, net->t, net->ux, net->uy, net->redundant, net->dropped};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(net);
}

/* Check the pattern and the blocks; 0 when valid. */
static int valid_pattern(int n, int m, const int *colptr, const int *rowind, const int *blocks,
                         int nblocks)
{
    if (n < 1 || m < 0 || m > n || !colptr || colptr[0] != 0) return 0;
    for (int k = 0; k < n; ++k)
        if (colptr[k + 1] < colptr[k]) return 0;
    if (colptr[n] > 0 && !rowind) return 0;
    for (int k = 0; k < n; ++k)
        for (int p = colptr[k]; p < colptr[k + 1]; ++p)
            if (rowind[p] < 0 || rowind[p] >= m || (p > colptr[k] && rowind[p] <= rowind[p - 1]))
                return 0;
    if (blocks) {
        if (nblocks < 1 || nblocks > n) return 0;
        long total = 0;
        for (int b = 0; b < nblocks; ++b) {
            if (blocks[b] < 1) return 0;
            total += blocks[b];
        }
        if (total != n) return 0;
    }
    return 1;
}

#define NET_ALLOC(ptr, count) \
    ((ptr) = malloc(sizeof *(ptr) * (size_t)((count) > 0 ? (count) : 1)))

/* Block layout, the rows of each block, and W by rows. */
static int build_blocks(cdyn_network *net, const int *blocks)
{
    int n = net->n, m = net->m, nb = net->nblocks;
    if (!NET_ALLOC(net->blk_state, nb + 1) || !NET_ALLOC(net->blk_val, nb + 1) ||
        !NET_ALLOC(net->state_blk, n) || !NET_ALLOC(net->brow_ptr, nb + 1) ||
        !NET_ALLOC(net->local_row, net->nnz))
        return 0;
    net->blk_state[0] = 0;
    net->blk_val[0] = 0;
    net->max_block = 1;
    for (int b = 0; b < nb; ++b) {
        int size = blocks ? blocks[b] : 1;
        net->blk_state[b + 1] = net->blk_state[b] + size;
        net->blk_val[b + 1] = net->blk_val[b] + (long)size * size;
        if (size > net->max_block) net->max_block = size;
        for (int k = net->blk_state[b]; k < net->blk_state[b + 1]; ++k) net->state_blk[k] = b;
    }
    net->nmass = net->blk_val[nb];

    /* rows of each block: at most the block's entries of W */
    int *mark = malloc(sizeof *mark * (size_t)(m > 0 ? m : 1));
    if (!mark || !NET_ALLOC(net->brow, net->nnz)) {
        free(mark);
        return 0;
    }
    for (int i = 0; i < m; ++i) mark[i] = -1;
    int count = 0;
    net->max_rows = 0;
    for (int b = 0; b < nb; ++b) {
        net->brow_ptr[b] = count;
        for (int k = net->blk_state[b]; k < net->blk_state[b + 1]; ++k)
            for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
                if (mark[net->rowind[p]] != b) {
                    mark[net->rowind[p]] = b;
                    net->brow[count++] = net->rowind[p];
                }
        qsort(net->brow + net->brow_ptr[b], (size_t)(count - net->brow_ptr[b]), sizeof(int),
              cmp_int);
        int rows = count - net->brow_ptr[b];
        if (rows > net->max_rows) net->max_rows = rows;
        for (int r = 0; r < rows; ++r) mark[net->brow[net->brow_ptr[b] + r]] = r;
        for (int k = net->blk_state[b]; k < net->blk_state[b + 1]; ++k)
            for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
                net->local_row[p] = mark[net->rowind[p]];
        for (int r = 0; r < rows; ++r) mark[net->brow[net->brow_ptr[b] + r]] = -1;
    }
    net->brow_ptr[nb] = count;
    free(mark);

    /* W by rows */
    if (!NET_ALLOC(net->rowptr, m + 1) || !NET_ALLOC(net->rowcol, net->nnz) ||
        !NET_ALLOC(net->rowpos, net->nnz))
        return 0;
    for (int i = 0; i <= m; ++i) net->rowptr[i] = 0;
    for (int p = 0; p < net->nnz; ++p) net->rowptr[net->rowind[p] + 1]++;
    for (int i = 0; i < m; ++i) net->rowptr[i + 1] += net->rowptr[i];
    int *next = malloc(sizeof *next * (size_t)(m > 0 ? m : 1));
    if (!next) return 0;
    memcpy(next, net->rowptr, sizeof *next * (size_t)m);
    for (int k = 0; k < n; ++k)
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p) {
            int q = next[net->rowind[p]]++;
            net->rowcol[q] = k;
            net->rowpos[q] = p;
        }
    free(next);

    /* the longest row of [M W^T; W 0], for the backward-error tolerance */
    net->row_length = 1;
    for (int k = 0; k < n; ++k) {
        int b = net->state_blk[k];
        int len = net->blk_state[b + 1] - net->blk_state[b] + net->colptr[k + 1] - net->colptr[k];
        if (len > net->row_length) net->row_length = len;
    }
    for (int i = 0; i < m; ++i)
        if (net->rowptr[i + 1] - net->rowptr[i] > net->row_length)
            net->row_length = net->rowptr[i + 1] - net->rowptr[i];
    return 1;
}

/* Place of the entry in row i of column j of S (present by construction). */
static int s_place(const cholmod_sparse *S, int i, int j)
{
    const int *Sp = S->p, *Si = S->i;
    int lo = Sp[j], hi = Sp[j + 1] - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (Si[mid] == i) return mid;
        if (Si[mid] < i) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1; /* not reached: every pair is in the pattern */
}

/* The upper triangle (with the whole diagonal) of S = W M^-1 W^T's pattern
 * in the natural order: column j holds the rows i <= j of every block that
 * touches row j. NULL when out of memory. */
static cholmod_sparse *natural_pattern(cdyn_network *net)
{
    int m = net->m;
    cholmod_sparse *S0 = NULL;
    int *mark = malloc(sizeof *mark * (size_t)m);
    int *count = calloc((size_t)m + 1, sizeof *count);
    if (!mark || !count) goto done;
    for (int pass = 0; pass < 2; ++pass) {
        int *Sp = pass ? S0->p : NULL, *Si = pass ? S0->i : NULL;
        for (int i = 0; i < m; ++i) mark[i] = -1;
        for (int j = 0; j < m; ++j) {
            int base = pass ? Sp[j] : 0, c = 0;
            mark[j] = j;
            if (pass) Si[base] = j;
            c++;
            for (int q = net->rowptr[j]; q < net->rowptr[j + 1]; ++q) {
                int b = net->state_blk[net->rowcol[q]];
                for (int r = net->brow_ptr[b]; r < net->brow_ptr[b + 1]; ++r) {
                    int i = net->brow[r];
                    if (i < j && mark[i] != j) {
                        mark[i] = j;
                        if (pass) Si[base + c] = i;
                        c++;
                    }
                }
            }
            if (!pass) count[j + 1] = c;
        }
        if (!pass) {
            for (int j = 0; j < m; ++j) count[j + 1] += count[j];
            S0 = cholmod_allocate_sparse((size_t)m, (size_t)m, (size_t)count[m], 0, 1, 1,
                                         CHOLMOD_PATTERN, &net->cm);
            if (!S0) break;
            memcpy(S0->p, count, sizeof(int) * ((size_t)m + 1));
        }
    }
done:
    free(mark);
    free(count);
    return S0;
}

/* S's storage: P S P^T with P the fill-reducing order CHOLMOD chooses for
 * S, held as the triangle its numeric factorization reads without a copy
 * (lower for a supernodal factor, upper for a simplicial one), and
 * analysed in that (natural) order; so a load assembles straight into what
 * CHOLMOD factors (no permuted transpose per load). Also the place of
 * every block pair and of every diagonal entry. */
static int build_schur(cdyn_network *net)
{
    int m = net->m, nb = net->nblocks, ok = 0;
    cholmod_sparse *S0 = natural_pattern(net);
    if (!S0) return 0;
    cholmod_factor *L0 = cholmod_analyze(S0, &net->cm);
    int *count = calloc((size_t)m + 1, sizeof *count);
    if (!L0 || !count || !NET_ALLOC(net->perm, m) || !NET_ALLOC(net->pinv, m) ||
        !NET_ALLOC(net->sdiag, m))
        goto done;
    memcpy(net->perm, L0->Perm, sizeof(int) * (size_t)m);
    for (int k = 0; k < m; ++k) net->pinv[net->perm[k]] = k;
    int lower = L0->is_super; /* the triangle CHOLMOD factors as it is */

    /* P S P^T: entry (i, j) of S0 goes to (pinv i, pinv j), in the triangle */
    const int *S0p = S0->p, *S0i = S0->i;
    for (int j = 0; j < m; ++j)
        for (int q = S0p[j]; q < S0p[j + 1]; ++q) {
            int a = net->pinv[S0i[q]], b = net->pinv[j];
            count[1 + ((lower ? a < b : a > b) ? a : b)]++;
        }
    for (int k = 0; k < m; ++k) count[k + 1] += count[k];
    net->S = cholmod_allocate_sparse((size_t)m, (size_t)m, (size_t)count[m], 1, 1,
                                     lower ? -1 : 1, CHOLMOD_REAL, &net->cm);
    if (!net->S) goto done;
    int *Sp = net->S->p, *Si = net->S->i;
    memcpy(Sp, count, sizeof(int) * ((size_t)m + 1));
    for (int j = 0; j < m; ++j)
        for (int q = S0p[j]; q < S0p[j + 1]; ++q) {
            int a = net->pinv[S0i[q]], b = net->pinv[j];
            int col = (lower ? a < b : a > b) ? a : b, row = a + b - col;
            Si[count[col]++] = row;
        }
    for (int k = 0; k < m; ++k) {
        qsort(Si + Sp[k], (size_t)(Sp[k + 1] - Sp[k]), sizeof(int), cmp_int);
        net->sdiag[k] = s_place(net->S, k, k);
    }
    memset(net->S->x, 0, sizeof(double) * net->S->nzmax);

    /* block pairs (a <= c in the block's sorted rows) */
    if (!NET_ALLOC(net->pair_ptr, nb + 1)) goto done;
    net->pair_ptr[0] = 0;
    for (int b = 0; b < nb; ++b) {
        long r = net->brow_ptr[b + 1] - net->brow_ptr[b];
        net->pair_ptr[b + 1] = net->pair_ptr[b] + r * (r + 1) / 2;
    }
    if (net->pair_ptr[nb] > INT_MAX || !NET_ALLOC(net->pair_pos, net->pair_ptr[nb])) goto done;
    for (int b = 0; b < nb; ++b) {
        const int *R = net->brow + net->brow_ptr[b];
        int rows = net->brow_ptr[b + 1] - net->brow_ptr[b];
        long q = net->pair_ptr[b];
        for (int c = 0; c < rows; ++c)
            for (int a = 0; a <= c; ++a) {
                int x = net->pinv[R[a]], y = net->pinv[R[c]];
                int col = (lower ? x < y : x > y) ? x : y;
                net->pair_pos[q++] = s_place(net->S, x + y - col, col);
            }
    }

    /* analyse P S P^T in its own order: the factor needs no permutation */
    int nmethods = net->cm.nmethods, ordering = net->cm.method[0].ordering;
    int postorder = net->cm.postorder;
    net->cm.nmethods = 1;
    net->cm.method[0].ordering = CHOLMOD_NATURAL;
    net->cm.postorder = 0;
    net->L = cholmod_analyze(net->S, &net->cm);
    net->cm.nmethods = nmethods;
    net->cm.method[0].ordering = ordering;
    net->cm.postorder = postorder;
    ok = net->L != NULL;
done:
    cholmod_free_factor(&L0, &net->cm);
    cholmod_free_sparse(&S0, &net->cm);
    free(count);
    return ok;
}

cdyn_network *cdyn_network_create(int n, int m, const int *colptr, const int *rowind,
                                  const int *blocks, int nblocks, cdyn_status *status)
{
    if (status) *status = CDYN_ERR_ARG;
    if (!valid_pattern(n, m, colptr, rowind, blocks, nblocks)) return NULL;
    if (status) *status = CDYN_ERR_NOMEM;
    cdyn_network *net = cdyn__object_alloc(sizeof *net, offsetof(cdyn_network, msg));
    if (!net) return NULL;
    cholmod_start(&net->cm);
    net->cm.final_ll = 1; /* L L^T: the pivots are L's diagonal */
    net->cm.print = 0;
    net->n = n;
    net->m = m;
    net->nnz = colptr[n];
    net->nblocks = blocks ? nblocks : n;
    net->diagonal = net->nblocks == n;
    net->pivot_ratio = NAN;
    net->berr = NAN;
    int ok = NET_ALLOC(net->colptr, n + 1) && NET_ALLOC(net->rowind, net->nnz);
    if (ok) {
        memcpy(net->colptr, colptr, sizeof(int) * ((size_t)n + 1));
        if (net->nnz) memcpy(net->rowind, rowind, sizeof(int) * (size_t)net->nnz);
        ok = build_blocks(net, blocks);
    }
    int big = n > m ? n : m;
    ok = ok && NET_ALLOC(net->Mval, net->nmass) && NET_ALLOC(net->Mfac, net->nmass) &&
         NET_ALLOC(net->Mscale, n) && NET_ALLOC(net->Mroot, n) && NET_ALLOC(net->Minv, n) &&
         NET_ALLOC(net->Wval, net->nnz) &&
         NET_ALLOC(net->Sscale, m) && NET_ALLOC(net->row_sign, m) &&
         NET_ALLOC(net->blockwork, (long)net->max_block * (net->max_rows + 1)) &&
         NET_ALLOC(net->x, n) && NET_ALLOC(net->y, m) && NET_ALLOC(net->dx, n) &&
         NET_ALLOC(net->dy, m) && NET_ALLOC(net->rf, n) && NET_ALLOC(net->rg, m) &&
         NET_ALLOC(net->t, big) && NET_ALLOC(net->ux, n) && NET_ALLOC(net->uy, m) &&
         NET_ALLOC(net->redundant, m) && NET_ALLOC(net->dropped, m) &&
         NET_ALLOC(net->tree_pipe, m) &&
         NET_ALLOC(net->tree_order, m) && NET_ALLOC(net->dependent, n);
    if (ok && net->nnz) /* copy_w reads the previous values */
        memset(net->Wval, 0, sizeof(double) * (size_t)net->nnz);
    if (ok && m > 0) ok = build_schur(net);
    if (!ok) {
        cdyn_network_free(net);
        return NULL;
    }
    /* the tolerance of every solve's certificate: a few rounding errors per
     * entry of the longest row of the bordered system */
    net->berr_tol = 8.0 * (net->row_length + 2) * 2.220446049250313e-16;
    net->msg[0] = '\0';
    if (status) *status = CDYN_OK;
    return net;
}

int cdyn_network_size(const cdyn_network *net) { return net ? net->n : -1; }
int cdyn_network_rows(const cdyn_network *net) { return net ? net->m : -1; }
long cdyn_network_mass_values(const cdyn_network *net) { return net ? net->nmass : -1; }
long cdyn_network_nonzeros(const cdyn_network *net) { return net ? net->nnz : -1; }
double cdyn_network_pivot_ratio(const cdyn_network *net)
{
    return net && net->loaded ? net->pivot_ratio : NAN;
}
double cdyn_network_backward_error(const cdyn_network *net) { return net ? net->berr : NAN; }
const char *cdyn_network_last_error(const cdyn_network *net)
{
    return net ? net->msg : "cdyn_network: NULL object";
}

cdyn_status cdyn_network_set_allow_redundant(cdyn_network *net, int allow)
{
    if (!net) return CDYN_ERR_ARG;
    net->msg[0] = '\0';
    net->allow_redundant = allow != 0;
    return CDYN_OK;
}

int cdyn_network_redundant_rows(const cdyn_network *net, int *rows)
{
    if (!net) return -1;
    if (rows)
        for (int i = 0; i < net->nredundant; ++i) rows[i] = net->redundant[i];
    return net->nredundant;
}

void cdyn__net_block_solve(int b, const double *L, const double *s, double *x)
{
    cdyn__net_half_solve(b, L, s, x);
    for (int i = b - 1; i >= 0; --i) {
        double r = x[i];
        for (int k = i + 1; k < b; ++k) r -= L[k + (size_t)i * b] * x[k];
        x[i] = r / L[i + (size_t)i * b];
    }
    for (int i = 0; i < b; ++i) x[i] *= s[i];
}

/* Factor every block of M by the definiteness policy (src/rank.h);
 * returns -1 when all are positive definite, else the failing block. */
static int factor_mass(cdyn_network *net)
{
    for (int b = 0; b < net->nblocks; ++b) {
        int k0 = net->blk_state[b], size = net->blk_state[b + 1] - k0;
        const double *A = net->Mval + net->blk_val[b];
        double *F = net->Mfac + net->blk_val[b];
        double *s = net->Mscale + k0;
        if (size == 1) {
            if (!(A[0] > 0.0)) return b;
            s[0] = cdyn__sym_scale(A[0]);
            F[0] = sqrt(s[0] * A[0] * s[0]);
            net->Minv[k0] = 1.0 / A[0];
        } else if (cdyn__spd_factor(size, A, size, F, size, s) != 0 ||
                   cdyn__spd_nearly_singular(size, F, size, net->blockwork, net->x) != 0) {
            return b; /* (blockwork: max_block (max_rows + 1) >= size; x: n) */
        }
        for (int j = 0; j < size; ++j) net->Mroot[k0 + j] = sqrt(A[j + (size_t)j * size]);
    }
    return -1;
}

/* S <- D S D with D the symmetric equilibration of S (powers of two), in
 * S's (permuted) order; Sscale is kept in W's row order. Uses net->t. */
static void equilibrate_schur(cdyn_network *net)
{
    double *Sx = net->S->x;
    const int *Sp = net->S->p, *Si = net->S->i;
    double *sp = net->t;
    for (int k = 0; k < net->m; ++k) {
        sp[k] = cdyn__sym_scale(Sx[net->sdiag[k]]);
        net->Sscale[net->perm[k]] = sp[k];
    }
    for (int k = 0; k < net->m; ++k)
        for (int q = Sp[k]; q < Sp[k + 1]; ++q) Sx[q] *= sp[Si[q]] * sp[k];
}

/* S = W M^-1 W^T (its stored triangle, permuted), equilibrated: S <- D S D. */
static void assemble_schur(cdyn_network *net)
{
    double *Sx = net->S->x;
    memset(Sx, 0, sizeof(double) * net->S->nzmax);
    for (int b = 0; b < net->nblocks; ++b) {
        int k0 = net->blk_state[b], size = net->blk_state[b + 1] - k0;
        int rows = net->brow_ptr[b + 1] - net->brow_ptr[b];
        const double *F = net->Mfac + net->blk_val[b];
        const double *s = net->Mscale + k0;
        const int *pos = net->pair_pos + net->pair_ptr[b];
        if (size == 1) { /* one state: S_ac += w_a w_c / M_kk */
            int p0 = net->colptr[k0];
            double inv = s[0] / F[0];
            for (int c = 0; c < rows; ++c) {
                double wc = net->Wval[p0 + c] * inv; /* a column's rows are sorted */
                for (int a = 0; a <= c; ++a) Sx[*pos++] += net->Wval[p0 + a] * inv * wc;
            }
            continue;
        }
        /* Y = L^-1 s W_B^T (size x rows), then S_ac += Y_a . Y_c */
        double *Y = net->blockwork;
        memset(Y, 0, sizeof(double) * (size_t)size * (size_t)rows);
        for (int j = 0; j < size; ++j)
            for (int p = net->colptr[k0 + j]; p < net->colptr[k0 + j + 1]; ++p)
                Y[j + (size_t)net->local_row[p] * size] = net->Wval[p];
        for (int c = 0; c < rows; ++c) cdyn__net_half_solve(size, F, s, Y + (size_t)c * size);
        for (int c = 0; c < rows; ++c)
            for (int a = 0; a <= c; ++a) {
                double sum = 0.0;
                for (int j = 0; j < size; ++j) sum += Y[j + (size_t)a * size] * Y[j + (size_t)c * size];
                Sx[*pos++] += sum;
            }
    }
    equilibrate_schur(net);
}

/* Diagonal entry k of the factor (in the factor's order). */
static double factor_diag(const cholmod_factor *L, int k)
{
    const double *Lx = L->x;
    if (!L->is_super) return Lx[((const int *)L->p)[k]];
    const int *super = L->super, *pi = L->pi, *px = L->px;
    int lo = 0, hi = (int)L->nsuper - 1; /* the supernode holding column k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (super[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    int nsrow = pi[lo + 1] - pi[lo], c = k - super[lo];
    return Lx[px[lo] + (size_t)c * nsrow + c];
}

/* Factor the equilibrated S; returns the factor's first column whose pivot
 * fails the definiteness policy, or -1. Sets pivot_ratio on success. */
static int factor_schur(cdyn_network *net, double smallest)
{
    cholmod_factorize(net->S, net->L, &net->cm);
    if (net->cm.status < 0 || !net->L->is_ll) return -2;
    int m = net->m;
    int stop = net->cm.status == CHOLMOD_NOT_POSDEF ? (int)net->L->minor : m;
    double lo = INFINITY, hi = 0.0;
    for (int k = 0; k < stop; ++k) {
        double d = factor_diag(net->L, k);
        if (!(d * d > CDYN__DEFINITE_TOL * smallest)) return k;
        lo = fmin(lo, d * d);
        hi = fmax(hi, d * d);
    }
    if (stop < m) return stop;
    net->pivot_ratio = m > 0 ? lo / hi : 1.0;
    return -1;
}

/* A pivot test alone misses dependent rows: in a closed ring of three
 * pipes (no reservoir; S exactly singular) with inertances 1, 1e8 and
 * 1e12, the junction reached only through the heavy pipes was scaled by
 * about 1e4, the null vector's entry at the last pivot was 1e-4 and that
 * pivot 1.9e-9: the load returned CDYN_OK, and the pressures' level was
 * arbitrary (2e5 Pa apart in Pa and in bar). So the factor that passed is
 * also checked by the probe of cdyn__spd_nearly_singular (rank.h): one
 * solve with the factor of the equilibrated S (three solves cost a third
 * of a load) from a start oriented by net->row_sign (orient_rows).
 * Returns the place k (S's order) of a row to take out, the largest entry
 * of the iterate, when an eigenvalue is at or below the pivot policy's
 * CDYN__DEFINITE_TOL times the smallest diagonal entry; else -1. Uses
 * net->dy and net->t. */
static int nearly_dependent_row(cdyn_network *net, double smallest)
{
    double before = cdyn__null_probe_start(net->m, net->row_sign, net->dy);
    cdyn__net_schur_solve(net->L, net->perm, net->dy, net->t);
    int row = cdyn__null_probe_verdict(net->m, net->dy, before, CDYN__DEFINITE_TOL * smallest);
    return row > 0 ? net->pinv[row - 1] : -1;
}

/* The probe's orientation (THEORY T1.5): d_i = +-1 with d_a w_ak and d_b w_bk
 * of opposite signs for every pipe k joining junctions a and b (a column of
 * two entries), set breadth first along such pipes (1 at the first row of
 * each part they join). A null vector u of S = W M^-1 W^T, whatever the
 * blocks of M, has u^T W = 0 (u^T S u = |M^-1/2 W^T u|^2), so along such a
 * pipe u_b = -u_a w_ak / w_bk: d u has one sign on each part, and a
 * start d_i (1 + (i mod 8) / 8) overlaps it by at least 1 / (2 sqrt(m)).
 * With a diagonal M and every balance written with one convention
 * (each cycle of pipes then oriented consistently), d S d is an M-matrix
 * and the eigenvector of its smallest eigenvalue is positive too
 * (Perron-Frobenius), nearly singular or not. A positive start assumed
 * every balance written "in - out": with some rows written "out - in" (a
 * ring of 5 junctions, rows 2 and 4 flipped) its overlap was nearly 0 and
 * 85 of 400 unit systems loaded the closed ring with CDYN_OK. Flipping
 * rows now flips d with them (up to one sign per part), and the probe's
 * arithmetic only changes signs: where those parts are S's own (pipes of
 * one or two entries, a diagonal M) the verdict is bit for bit that of
 * the uniform convention.
 * Columns of one entry (the ambient) or more than two orient nothing. It depends only on the signs of W's values:
 * copy_w keeps it while none changes. Uses net->redundant (m) as the
 * queue: call before the loop that fills it. */
static void orient_rows(cdyn_network *net)
{
    net->oriented = 1;
    double *d = net->row_sign;
    int *queue = net->redundant, m = net->m;
    for (int i = 0; i < m; ++i) d[i] = 0.0;
    for (int root = 0; root < m; ++root) {
        if (d[root] != 0.0) continue;
        d[root] = 1.0;
        int tail = 0;
        queue[tail++] = root;
        for (int head = 0; head < tail; ++head) {
            int i = queue[head];
            for (int q = net->rowptr[i]; q < net->rowptr[i + 1]; ++q) {
                int k = net->rowcol[q], p = net->colptr[k];
                if (net->colptr[k + 1] - p != 2) continue;
                int j = net->rowind[p] == i ? p + 1 : p, other = net->rowind[j];
                double wi = net->Wval[net->rowpos[q]], wj = net->Wval[j];
                if (d[other] != 0.0 || wi == 0.0 || wj == 0.0) continue;
                d[other] = (wi > 0.0) == (wj > 0.0) ? -d[i] : d[i];
                queue[tail++] = other;
            }
        }
    }
}

/* Make row and column k of the equilibrated (permuted) S those of the
 * identity. */
static void decouple_row(cholmod_sparse *S, int k)
{
    const int *Sp = S->p, *Si = S->i;
    double *Sx = S->x;
    for (int j = 0; j < (int)S->ncol; ++j)
        for (int q = Sp[j]; q < Sp[j + 1]; ++q)
            if (j == k || Si[q] == k) Sx[q] = (j == k && Si[q] == k) ? 1.0 : 0.0;
}

/* For the message of a refused load only: whether W itself has full row
 * rank by the same policy, judged on S with M^-1 replaced by the metric
 * of W's own equilibration, diag(c_k^2) with c the column factors of
 * rank.h (rows to largest entries in [1/2, 1), then columns): the Gram
 * matrix of the equilibrated W, whatever the conductances. When it passes
 * the pivot test and the probe, the rows S lost were lost to the spread
 * of the conductances (a supply line of inertance 1e13 times that of the
 * dead-end stub after it: the stub's pressure is the line's to 1e-13),
 * not to W. Overwrites S and its factor (the load fails anyway) and
 * net->t, net->x, net->dy. */
static int w_has_full_rank(cdyn_network *net)
{
    int n = net->n, m = net->m;
    double *r = net->t, *c = net->x, *Sx = net->S->x;
    for (int i = 0; i < m; ++i) r[i] = 0.0;
    for (int p = 0; p < net->nnz; ++p)
        r[net->rowind[p]] = fmax(r[net->rowind[p]], fabs(net->Wval[p]));
    for (int i = 0; i < m; ++i) r[i] = cdyn__inverse_power_of_two(r[i]);
    for (int k = 0; k < n; ++k) {
        double largest = 0.0;
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
            largest = fmax(largest, fabs(net->Wval[p]) * r[net->rowind[p]]);
        c[k] = cdyn__inverse_power_of_two(largest);
    }
    /* S_ac = sum_k w_ak c_k^2 w_ck, at the places of column k's block */
    memset(Sx, 0, sizeof(double) * net->S->nzmax);
    for (int k = 0; k < n; ++k) {
        int b = net->state_blk[k];
        const int *pos = net->pair_pos + net->pair_ptr[b];
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
            for (int q = net->colptr[k]; q <= p; ++q) {
                int a = net->local_row[q], e = net->local_row[p]; /* a <= e */
                Sx[pos[e * (e + 1) / 2 + a]] += net->Wval[q] * c[k] * c[k] * net->Wval[p];
            }
    }
    equilibrate_schur(net);
    double smallest = INFINITY;
    for (int i = 0; i < m; ++i)
        if (Sx[net->sdiag[i]] > 0.0) smallest = fmin(smallest, Sx[net->sdiag[i]]);
    return smallest < INFINITY && factor_schur(net, smallest) == -1 &&
           nearly_dependent_row(net, smallest) == -1;
}

/* Wval <- W, and the orientation marked stale when an entry may have
 * changed its sign or become or stopped being 0: old and new values that
 * differ with a product not positive (an underflowing product only costs
 * a needless orientation). One multiply and two compares per entry, in
 * doubles so that it vectorizes (2 % of the instructions of a load of
 * 114 pipes); orienting at every load cost 13 % of them, 6 % at 1014. */
static void copy_w(cdyn_network *net, const double *W)
{
    double *restrict to = net->Wval;
    const double *restrict from = W;
    double changed = 0.0;
    for (int p = 0; p < net->nnz; ++p) {
        double before = to[p], after = from[p];
        changed += before * after <= 0.0 && before != after ? 1.0 : 0.0;
        to[p] = after;
    }
    if (changed > 0.0) net->oriented = 0;
}

cdyn_status cdyn_network_load(cdyn_network *net, const double *M, const double *W)
{
    if (!net) return CDYN_ERR_ARG;
    net->msg[0] = '\0';
    if (!M || (!W && net->nnz > 0))
        return cdyn__fail(net->msg, CDYN_ERR_ARG, "cdyn_network_load: M or W is NULL");
    long bad = cdyn__first_nonfinite((int)net->nmass, 1, M, (int)net->nmass);
    if (bad >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE, "cdyn_network_load: M value %ld is not finite", bad);
    bad = net->nnz ? cdyn__first_nonfinite(net->nnz, 1, W, net->nnz) : -1;
    if (bad >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE, "cdyn_network_load: W value %ld is not finite", bad);

    net->loaded = 0;
    net->nredundant = 0;
    for (int i = 0; i < net->m; ++i) net->dropped[i] = 0;
    memcpy(net->Mval, M, sizeof(double) * (size_t)net->nmass);
    copy_w(net, W);
    int b = factor_mass(net);
    if (b >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                          "cdyn_network_load: block %d of M (states %d..%d) is not positive definite",
                          b, net->blk_state[b], net->blk_state[b + 1] - 1);
    if (net->m == 0) {
        net->pivot_ratio = 1.0;
        net->loaded = 1;
        return CDYN_OK;
    }
    assemble_schur(net);
    double smallest = INFINITY;
    const double *Sx = net->S->x;
    for (int k = 0; k < net->m; ++k)
        if (Sx[net->sdiag[k]] > 0.0) smallest = fmin(smallest, Sx[net->sdiag[k]]);
    /* S = 0 (no row has an entry): every row is redundant, and the rows
     * taken out become those of the identity, so 1 is the scale to judge
     * the pivots against (with INFINITY the same row would be named again
     * and again and the others never taken out) */
    if (!(smallest < INFINITY)) smallest = 1.0;

    /* rank loss: name the dependent row (pivot k is row perm[k] of W), take
     * it out, go on (at most m) */
    if (!net->oriented) orient_rows(net);
    int k;
    for (;;) {
        k = factor_schur(net, smallest);
        if (k == -1) k = nearly_dependent_row(net, smallest);
        if (k < 0 || net->nredundant >= net->m) break;
        net->redundant[net->nredundant++] = net->perm[k];
        decouple_row(net->S, k);
    }
    if (k == -2)
        return cdyn__fail(net->msg, CDYN_ERR_NOMEM,
                          "cdyn_network_load: CHOLMOD failed (status %d)", net->cm.status);
    if (net->nredundant > 0 && net->allow_redundant) { /* kept out: multipliers 0 */
        for (int i = 0; i < net->nredundant; ++i) net->dropped[net->redundant[i]] = 1;
    } else if (net->nredundant > 0) {
        char list[160] = "";
        size_t used = 0;
        for (int i = 0; i < net->nredundant && i < 8 && used < sizeof list - 16; ++i)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "",
                                     net->redundant[i]);
        int plural = net->nredundant > 1;
        if (w_has_full_rank(net))
            return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                              "cdyn_network_load: S = W M^-1 W^T is singular to working "
                              "accuracy: %d constraint row%s (%s%s) depend%s on the others in S "
                              "although W has full row rank: the conductances W M^-1 W^T "
                              "combines are too far apart for double precision "
                              "(cdyn_network_redundant_rows)",
                              net->nredundant, plural ? "s" : "", list,
                              net->nredundant > 8 ? ", ..." : "", plural ? "" : "s");
        return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                          "cdyn_network_load: W is rank deficient: %d constraint row%s (%s%s) "
                          "depend%s on the others (cdyn_network_redundant_rows)",
                          net->nredundant, plural ? "s" : "", list,
                          net->nredundant > 8 ? ", ..." : "", plural ? "" : "s");
    }
    net->loaded = 1;
    return CDYN_OK;
}
