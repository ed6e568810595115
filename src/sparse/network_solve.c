/* Sparse networks, the per-step call: rates and multipliers from the
 * range-space form (THEORY T1.5; docs/theory.md "Sparse networks"),
 * certified by their backward error. Allocates nothing. */
#include "network_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* x = M^-1 x, block by block. */
static void mass_solve(const cdyn_network *net, double *x)
{
    if (net->diagonal) {
        for (int k = 0; k < net->n; ++k) x[k] *= net->Minv[k];
        return;
    }
    for (int b = 0; b < net->nblocks; ++b) {
        int k0 = net->blk_state[b], size = net->blk_state[b + 1] - k0;
        const double *F = net->Mfac + net->blk_val[b];
        const double *s = net->Mscale + k0;
        if (size == 1) x[k0] *= (s[0] / F[0]) * (s[0] / F[0]);
        else cdyn__net_block_solve(size, F, s, x + k0);
    }
}

/* out = M x and, when abs_out is given, abs_out += |M| |x| (M's lower
 * triangle, mirrored). */
static void mass_multiply(const cdyn_network *net, const double *x, double *out, double *abs_out)
{
    if (net->diagonal) {
        for (int k = 0; k < net->n; ++k) {
            out[k] = net->Mval[k] * x[k];
            if (abs_out) abs_out[k] += fabs(out[k]);
        }
        return;
    }
    for (int b = 0; b < net->nblocks; ++b) {
        int k0 = net->blk_state[b], size = net->blk_state[b + 1] - k0;
        const double *A = net->Mval + net->blk_val[b];
        for (int i = 0; i < size; ++i) {
            double sum = 0.0, mag = 0.0;
            for (int j = 0; j < size; ++j) {
                double a = i >= j ? A[i + (size_t)j * size] : A[j + (size_t)i * size];
                sum += a * x[k0 + j];
                mag += fabs(a * x[k0 + j]);
            }
            out[k0 + i] = sum;
            if (abs_out) abs_out[k0 + i] += mag;
        }
    }
}

/* cdyn__net_schur_solve: network_internal.h. */
void cdyn__net_schur_solve(const cholmod_factor *L, const int *perm, double *y, double *work)
{
    int m = (int)L->n;
    const double *Lx = L->x;
    for (int k = 0; k < m; ++k) work[k] = y[perm[k]];
    if (L->is_super) {
        const int *super = L->super, *pi = L->pi, *px = L->px, *Ls = L->s;
        int ns = (int)L->nsuper;
        for (int s = 0; s < ns; ++s) { /* forward: L w = P y */
            int k1 = super[s], nscol = super[s + 1] - k1, nsrow = pi[s + 1] - pi[s];
            const double *A = Lx + px[s];
            const int *rows = Ls + pi[s];
            for (int c = 0; c < nscol; ++c) {
                double wc = work[k1 + c] /= A[c + (size_t)c * nsrow];
                for (int r = c + 1; r < nsrow; ++r) work[rows[r]] -= A[r + (size_t)c * nsrow] * wc;
            }
        }
        for (int s = ns - 1; s >= 0; --s) { /* backward: L^T w = w */
            int k1 = super[s], nscol = super[s + 1] - k1, nsrow = pi[s + 1] - pi[s];
            const double *A = Lx + px[s];
            const int *rows = Ls + pi[s];
            for (int c = nscol - 1; c >= 0; --c) {
                double sum = work[k1 + c];
                for (int r = c + 1; r < nsrow; ++r) sum -= A[r + (size_t)c * nsrow] * work[rows[r]];
                work[k1 + c] = sum / A[c + (size_t)c * nsrow];
            }
        }
    } else {
        const int *Lp = L->p, *Li = L->i, *Lnz = L->nz;
        for (int j = 0; j < m; ++j) {
            double wj = work[j] /= Lx[Lp[j]];
            for (int q = Lp[j] + 1; q < Lp[j] + Lnz[j]; ++q) work[Li[q]] -= Lx[q] * wj;
        }
        for (int j = m - 1; j >= 0; --j) {
            double sum = work[j];
            for (int q = Lp[j] + 1; q < Lp[j] + Lnz[j]; ++q) sum -= Lx[q] * work[Li[q]];
            work[j] = sum / Lx[Lp[j]];
        }
    }
    for (int k = 0; k < m; ++k) y[perm[k]] = work[k];
}

/* The range-space solve of [M -W^T; W 0] [x; y] = [f; g] (g NULL: 0):
 * S y = g - W M^-1 f, x = M^-1 (f + W^T y), with S equilibrated. */
static void range_solve(cdyn_network *net, const double *f, const double *g, double *x, double *y)
{
    int n = net->n, m = net->m;
    memcpy(x, f, sizeof(double) * (size_t)n);
    mass_solve(net, x);
    if (m == 0) return;
    for (int i = 0; i < m; ++i) y[i] = g ? g[i] : 0.0;
    for (int k = 0; k < n; ++k)
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
            y[net->rowind[p]] -= net->Wval[p] * x[k];
    for (int i = 0; i < m; ++i) y[i] *= net->dropped[i] ? 0.0 : net->Sscale[i];
    cdyn__net_schur_solve(net->L, net->perm, y, net->t);
    for (int i = 0; i < m; ++i) y[i] *= net->dropped[i] ? 0.0 : net->Sscale[i]; /* kept out: 0 */
    double *t = net->t;
    for (int k = 0; k < n; ++k) {
        double sum = 0.0;
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p)
            sum += net->Wval[p] * y[net->rowind[p]];
        t[k] = sum;
    }
    mass_solve(net, t);
    for (int k = 0; k < n; ++k) x[k] += t[k];
}

/* Residuals rf = f + W^T y - M x, rg = g - W x and the backward error of
 * (x, y): max |r_i| / bound_i, where bound_i sums the magnitudes of row
 * i's terms plus a floor of one rounding error at the system's scale in
 * the kinetic metric,
 *     phi = max(sqrt(x^T M x), max_k (|f_k| + (|W|^T |y|)_k) / sqrt(M_kk)),
 * i.e. eps sqrt(M_kk) phi for a dynamics row and eps sum_k |W_ik| phi /
 * sqrt(M_kk) for a constraint row: a row whose terms cancel or vanish
 * (a rate that is zero up to the rounding of the forces it comes from) may
 * carry that rounding. Every part changes with a scaling of states or
 * equations exactly as the residual does (docs/theory.md "Sparse
 * networks"). Uses net->t (m) for the constraint rows' floor weights. */
static double backward_error(cdyn_network *net, const double *f, const double *g,
                             const double *x, const double *y)
{
    int n = net->n, m = net->m;
    double *ux = net->ux, *uy = net->uy, *rf = net->rf, *rg = net->rg, *sw = net->t;
    for (int k = 0; k < n; ++k) ux[k] = 0.0;
    mass_multiply(net, x, rf, ux);
    double nu2 = 0.0;
    for (int k = 0; k < n; ++k) nu2 += x[k] * rf[k];
    double phi = sqrt(fabs(nu2));
    for (int i = 0; i < m; ++i) {
        rg[i] = g ? g[i] : 0.0;
        uy[i] = fabs(rg[i]);
        sw[i] = 0.0;
    }
    for (int k = 0; k < n; ++k) {
        double root = net->Mroot[k], force = fabs(f[k]);
        rf[k] = f[k] - rf[k];
        for (int p = net->colptr[k]; p < net->colptr[k + 1]; ++p) {
            int i = net->rowind[p];
            double w = net->Wval[p];
            rf[k] += w * y[i];
            force += fabs(w * y[i]);
            rg[i] -= w * x[k];
            uy[i] += fabs(w * x[k]);
            sw[i] += fabs(w) / root;
        }
        ux[k] += force;
        if (force / root > phi) phi = force / root;
    }
    double worst = 0.0;
    for (int k = 0; k < n; ++k) {
        double e = rf[k] == 0.0 ? 0.0 : fabs(rf[k]) / (ux[k] + DBL_EPSILON * net->Mroot[k] * phi);
        if (!(e <= worst)) worst = e;
    }
    for (int i = 0; i < m; ++i) {
        double e = rg[i] == 0.0 ? 0.0 : fabs(rg[i]) / (uy[i] + DBL_EPSILON * sw[i] * phi);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

cdyn_status cdyn_network_solve(cdyn_network *net, const double *F, const double *g,
                               double *vdot, double *lambda)
{
    if (!net) return CDYN_ERR_ARG;
    net->msg[0] = '\0';
    int n = net->n, m = net->m;
    if (!F || !vdot)
        return cdyn__fail(net->msg, CDYN_ERR_ARG, "cdyn_network_solve: F or vdot is NULL");
    if (lambda && m > 0 &&
        cdyn__overlap(vdot, sizeof(double) * (size_t)n, lambda, sizeof(double) * (size_t)m))
        return cdyn__fail(net->msg, CDYN_ERR_ARG, "cdyn_network_solve: vdot and lambda overlap");
    if (!net->loaded)
        return cdyn__fail(net->msg, CDYN_ERR_ARG,
                          "cdyn_network_solve: no successful cdyn_network_load");
    long bad = cdyn__first_nonfinite(n, 1, F, n);
    if (bad >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE, "cdyn_network_solve: F[%ld] is not finite", bad);
    bad = g && m > 0 ? cdyn__first_nonfinite(m, 1, g, m) : -1;
    if (bad >= 0)
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE, "cdyn_network_solve: g[%ld] is not finite", bad);

    /* solve, then refine with the same factor until the backward error is
     * certified: each step gains about -log10(cond(S) eps) digits */
    double *x = net->x, *y = net->y;
    range_solve(net, F, g, x, y);
    double e = backward_error(net, F, g, x, y);
    for (int step = 0; step < CDYN__NET_REFINE && !(e <= net->berr_tol); ++step) {
        range_solve(net, net->rf, net->rg, net->dx, net->dy);
        for (int k = 0; k < n; ++k) x[k] += net->dx[k];
        for (int i = 0; i < m; ++i) y[i] += net->dy[i];
        e = backward_error(net, F, g, x, y);
    }
    if (!(e <= net->berr_tol) && net->nredundant > 0 && net->allow_redundant)
        return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                          "cdyn_network_solve: backward error %.3g above its tolerance %.3g: "
                          "the constraints are inconsistent (g does not satisfy the %d "
                          "redundant row%s, first %d, as the others imply) or W M^-1 W^T is "
                          "too ill-conditioned",
                          e, net->berr_tol, net->nredundant, net->nredundant > 1 ? "s" : "",
                          net->redundant[0]);
    if (!(e <= net->berr_tol))
        return cdyn__fail(net->msg, CDYN_ERR_SINGULAR,
                          "cdyn_network_solve: backward error %.3g above its tolerance %.3g "
                          "after %d refinement steps: W M^-1 W^T is too ill-conditioned "
                          "(pivot ratio %.3g)",
                          e, net->berr_tol, CDYN__NET_REFINE, net->pivot_ratio);
    /* the certificate judges each row by its own terms: a multiplier that no
     * row sees (a row without entries) must still be finite */
    if (cdyn__first_nonfinite(n, 1, x, n) >= 0 || (m > 0 && cdyn__first_nonfinite(m, 1, y, m) >= 0))
        return cdyn__fail(net->msg, CDYN_ERR_NONFINITE,
                          "cdyn_network_solve: the solution overflows (F or g too large for "
                          "W M^-1 W^T)");
    net->berr = e;
    memcpy(vdot, x, sizeof(double) * (size_t)n);
    if (lambda && m > 0) memcpy(lambda, y, sizeof(double) * (size_t)m);
    return CDYN_OK;
}
