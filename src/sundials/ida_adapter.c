/*
 * cdyn_sundials: IDA adapters (include/cdyn/sundials.h). The adapter object
 * owns a copy of M and the work arrays; the residual and Jacobian allocate
 * nothing.
 */
#include <cdyn/sundials.h>

#include "adapter_internal.h"

#include <ida/ida.h>
#include <ida/ida_ls.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cdyn_ida_dae {
    cdyn_dae *dae; /* not owned */
    int n;
    double *v, *vdot, *y, *ydot; /* n each */
    int *integrated;             /* n */
    char msg[512];
};

static cdyn_status fail(cdyn_ida_dae *a, cdyn_status st, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, args);
    va_end(args);
    return st;
}

static double *vector_data(N_Vector v, int length)
{
    if (!v || N_VGetLength(v) != (sunindextype)length) return NULL;
    return N_VGetArrayPointer(v);
}

static void set_status(cdyn_status *status, cdyn_status value)
{
    if (status) *status = value;
}

cdyn_ida_dae *cdyn_ida_dae_create(cdyn_dae *dae, cdyn_status *status)
{
    int n = cdyn_dae_size(dae);
    if (n < 1 || cdyn_dae_rank(dae) < 0) { /* NULL dae, or no cdyn_dae_set_mass() yet */
        set_status(status, CDYN_ERR_ARG);
        return NULL;
    }
    cdyn_ida_dae *a = calloc(1, sizeof *a);
    if (a) {
        a->v = malloc(sizeof(double) * (size_t)n * 4);
        a->integrated = malloc(sizeof(int) * (size_t)n);
    }
    if (!a || !a->v || !a->integrated) {
        cdyn_ida_dae_free(a);
        set_status(status, CDYN_ERR_NOMEM);
        return NULL;
    }
    a->dae = dae;
    a->n = n;
    a->vdot = a->v + n;
    a->y = a->vdot + n;
    a->ydot = a->y + n;
    a->msg[0] = '\0';
    set_status(status, CDYN_OK);
    return a;
}

int cdyn_ida_dae_size(const cdyn_ida_dae *a) { return a ? a->n : -1; }

void cdyn_ida_dae_free(cdyn_ida_dae *a)
{
    if (!a) return;
    free(a->v);
    free(a->integrated);
    free(a);
}

const char *cdyn_ida_dae_last_error(const cdyn_ida_dae *a)
{
    return a ? a->msg : "cdyn_ida_dae: NULL adapter";
}

/* The SUNDIALS flag for a failed cdyn_dae call, with its message kept. */
static int dae_flag(cdyn_ida_dae *a, const char *fn, cdyn_status st)
{
    fail(a, st, "%s: %s", fn, cdyn_dae_last_error(a->dae));
    return cdyn__sundials_flag(st, cdyn_dae_callback_code(a->dae));
}

int cdyn_ida_dae_residual(sunrealtype t, N_Vector v, N_Vector vdot, N_Vector r,
                          void *user_data)
{
    cdyn_ida_dae *a = user_data;
    if (!a) return -(int)CDYN_ERR_ARG;
    const char *fn = "cdyn_ida_dae_residual";
    int n = a->n;
    const double *vd = vector_data(v, n), *pd = vector_data(vdot, n);
    double *rd = vector_data(r, n);
    if (!vd || !pd || !rd) {
        fail(a, CDYN_ERR_ARG, "%s: a vector is NULL or not of length n = %d", fn, n);
        return -(int)CDYN_ERR_ARG;
    }
    cdyn_status st = cdyn_dae_residual(a->dae, t, vd, pd, rd);
    return st == CDYN_OK ? 0 : dae_flag(a, fn, st);
}

int cdyn_ida_dae_jacobian(sunrealtype t, sunrealtype c_j, N_Vector v, N_Vector vdot,
                          N_Vector r, SUNMatrix J, void *user_data, N_Vector tmp1,
                          N_Vector tmp2, N_Vector tmp3)
{
    (void)vdot, (void)r, (void)tmp1, (void)tmp2, (void)tmp3;
    cdyn_ida_dae *a = user_data;
    if (!a) return -(int)CDYN_ERR_ARG;
    const char *fn = "cdyn_ida_dae_jacobian";
    int n = a->n;
    const double *vd = vector_data(v, n);
    if (!vd || !J || SUNMatGetID(J) != SUNMATRIX_DENSE || SUNDenseMatrix_Rows(J) != n ||
        SUNDenseMatrix_Columns(J) != n) {
        fail(a, CDYN_ERR_ARG, "%s: needs v of length %d and a dense %d x %d SUNMatrix", fn, n,
             n, n);
        return -(int)CDYN_ERR_ARG;
    }
    /* column-major, leading dimension n */
    cdyn_status st = cdyn_dae_residual_jacobian(a->dae, t, c_j, vd, SUNDenseMatrix_Data(J), n);
    return st == CDYN_OK ? 0 : dae_flag(a, fn, st);
}

/* The index-2 form has fewer integrated states than the rank: IDA gets the
 * full residual of an index-1 split only. */
#define INDEX2_REFUSAL                                                                     \
    "the DAE's split is the index-2 form; integrate its minimum-order ODE "               \
    "(cdyn_dae_rhs, cdyn_cvode_dae_rhs) instead"

cdyn_status cdyn_ida_dae_id(cdyn_ida_dae *a, N_Vector id)
{
    if (!a) return CDYN_ERR_ARG;
    double *d = vector_data(id, a->n);
    if (!d)
        return fail(a, CDYN_ERR_ARG, "cdyn_ida_dae_id: id is NULL or not of length n = %d",
                    a->n);
    if (cdyn_dae_index2(a->dae))
        return fail(a, CDYN_ERR_ARG, "cdyn_ida_dae_id: %s", INDEX2_REFUSAL);
    int r = cdyn_dae_split_states(a->dae, a->integrated, NULL);
    if (r < 0)
        return fail(a, CDYN_ERR_ARG, "cdyn_ida_dae_id: %s", cdyn_dae_last_error(a->dae));
    for (int i = 0; i < a->n; ++i) d[i] = 0.0;
    for (int j = 0; j < r; ++j) d[a->integrated[j]] = 1.0;
    return CDYN_OK;
}

cdyn_status cdyn_ida_dae_consistent(cdyn_ida_dae *a, sunrealtype t0, N_Vector v, N_Vector vdot)
{
    if (!a) return CDYN_ERR_ARG;
    const char *fn = "cdyn_ida_dae_consistent";
    int n = a->n;
    double *vd = vector_data(v, n), *pd = vector_data(vdot, n);
    if (!vd || !pd)
        return fail(a, CDYN_ERR_ARG, "%s: v or vdot is NULL or not of length n = %d", fn, n);
    if (cdyn_dae_index2(a->dae)) return fail(a, CDYN_ERR_ARG, "%s: %s", fn, INDEX2_REFUSAL);
    memcpy(a->v, vd, sizeof(double) * (size_t)n);
    cdyn_status st = cdyn_dae_consistent(a->dae, t0, a->v);
    if (st == CDYN_OK || st == CDYN_ERR_NOCONV) memcpy(vd, a->v, sizeof(double) * (size_t)n);
    if (st != CDYN_OK) return fail(a, st, "%s: %s", fn, cdyn_dae_last_error(a->dae));
    /* v' by one evaluation of the minimum-order ODE, which differentiates
     * G0 = 0 for the algebraic rates (T3.3) — with r = 0 (M = 0) too, where
     * y is empty and every rate comes from G_v v' = -G_t */
    int r = cdyn_dae_split_states(a->dae, a->integrated, NULL);
    st = r < 0 ? CDYN_ERR_ARG : CDYN_OK;
    if (st == CDYN_OK) {
        for (int j = 0; j < r; ++j) a->y[j] = a->v[a->integrated[j]];
        st = cdyn_dae_rhs(a->dae, t0, a->y, a->ydot);
    }
    if (st == CDYN_OK) st = cdyn_dae_last_state(a->dae, a->v, a->vdot);
    if (st != CDYN_OK) return fail(a, st, "%s: %s", fn, cdyn_dae_last_error(a->dae));
    memcpy(vd, a->v, sizeof(double) * (size_t)n);
    memcpy(pd, a->vdot, sizeof(double) * (size_t)n);
    return CDYN_OK;
}

int cdyn_ida_attach_dae(void *ida_mem, cdyn_ida_dae *a, N_Vector like)
{
    if (!ida_mem) return IDA_MEM_NULL;
    if (!a || !like) return IDA_ILL_INPUT;
    int flag = IDASetUserData(ida_mem, a);
    if (flag != IDA_SUCCESS) return flag;
    N_Vector id = N_VClone(like);
    if (!id) return IDA_MEM_FAIL;
    if (cdyn_ida_dae_id(a, id) != CDYN_OK) {
        N_VDestroy(id);
        return IDA_ILL_INPUT;
    }
    flag = IDASetId(ida_mem, id); /* IDA keeps its own copy */
    N_VDestroy(id);
    if (flag != IDA_SUCCESS) return flag;
    return IDASetJacFn(ida_mem, cdyn_ida_dae_jacobian);
}

int cdyn_ida_mbs_residual(sunrealtype t, N_Vector y, N_Vector ydot, N_Vector r,
                          void *user_data)
{
    cdyn_mbs *mbs = user_data;
    if (!mbs || !y) return -(int)CDYN_ERR_ARG;
    sunindextype length = N_VGetLength(y);
    if (length < 2 || length % 2 != 0 || !ydot || !r || N_VGetLength(ydot) != length ||
        N_VGetLength(r) != length)
        return -(int)CDYN_ERR_ARG;
    const double *yd = N_VGetArrayPointer(y), *pd = N_VGetArrayPointer(ydot);
    double *rd = N_VGetArrayPointer(r);
    if (!yd || !pd || !rd) return -(int)CDYN_ERR_ARG;
    cdyn_status st = cdyn_mbs_rhs(mbs, t, yd, rd); /* f(t, y) in r */
    if (st != CDYN_OK) return cdyn__sundials_flag(st, cdyn_mbs_callback_code(mbs));
    for (sunindextype i = 0; i < length; ++i) rd[i] = pd[i] - rd[i];
    return 0;
}

int cdyn_ida_mbs_jacobian(sunrealtype t, sunrealtype c_j, N_Vector y, N_Vector ydot, N_Vector r,
                          SUNMatrix J, void *user_data, N_Vector tmp1, N_Vector tmp2,
                          N_Vector tmp3)
{
    (void)ydot, (void)r, (void)tmp1, (void)tmp2, (void)tmp3;
    /* df/dy with CVODE's checks and flags, then dr/dy + c_j dr/dy' = c_j I - df/dy */
    int flag = cdyn_cvode_mbs_jacobian(t, y, NULL, J, user_data, NULL, NULL, NULL);
    if (flag != 0) return flag;
    sunindextype length = N_VGetLength(y);
    double *Jd = SUNDenseMatrix_Data(J); /* column-major, leading dimension 2n */
    for (sunindextype j = 0; j < length; ++j)
        for (sunindextype i = 0; i < length; ++i) {
            double *x = Jd + i + j * length;
            *x = (i == j ? c_j : 0.0) - *x;
        }
    return 0;
}
