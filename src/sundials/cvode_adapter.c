/*
 * cdyn_sundials: CVODE adapters (include/cdyn/sundials.h). The right-hand
 * sides and the projection work on the N_Vectors' own arrays and allocate
 * nothing.
 */
#include <cdyn/sundials.h>

#include "adapter_internal.h"

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <cvode/cvode_proj.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <math.h>
#include <string.h>

/* The contiguous data of v if it has `length` entries, else NULL. */
static double *vector_data(N_Vector v, sunindextype length)
{
    if (!v || N_VGetLength(v) != length) return NULL;
    return N_VGetArrayPointer(v);
}

int cdyn_cvode_mbs_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user_data)
{
    cdyn_mbs *mbs = user_data;
    if (!mbs || !y) return -(int)CDYN_ERR_ARG;
    sunindextype length = N_VGetLength(y);
    if (length < 2 || length % 2 != 0) return -(int)CDYN_ERR_ARG;
    const double *yd = N_VGetArrayPointer(y);
    double *fd = vector_data(ydot, length);
    if (!yd || !fd) return -(int)CDYN_ERR_ARG;
    cdyn_status st = cdyn_mbs_rhs(mbs, t, yd, fd);
    return cdyn__sundials_flag(st, cdyn_mbs_callback_code(mbs));
}

int cdyn_cvode_mbs_jacobian(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix J, void *user_data,
                            N_Vector tmp1, N_Vector tmp2, N_Vector tmp3)
{
    (void)fy, (void)tmp1, (void)tmp2, (void)tmp3;
    cdyn_mbs *mbs = user_data;
    if (!mbs || !y || !J) return -(int)CDYN_ERR_ARG;
    sunindextype length = N_VGetLength(y);
    const double *yd = N_VGetArrayPointer(y);
    if (length < 2 || length % 2 != 0 || !yd || SUNMatGetID(J) != SUNMATRIX_DENSE ||
        SUNDenseMatrix_Rows(J) != length || SUNDenseMatrix_Columns(J) != length)
        return -(int)CDYN_ERR_ARG;
    /* column-major with leading dimension 2n */
    cdyn_status st = cdyn_mbs_rhs_jacobian(mbs, t, yd, NULL, SUNDenseMatrix_Data(J), (int)length);
    return cdyn__sundials_flag(st, cdyn_mbs_callback_code(mbs));
}

int cdyn_cvode_mbs_project(sunrealtype t, N_Vector ycur, N_Vector corr, sunrealtype epsProj,
                           N_Vector err, void *user_data)
{
    (void)epsProj; /* the projection's own Newton tolerances apply (sundials.h) */
    cdyn_mbs *mbs = user_data;
    if (!mbs || !ycur) return -(int)CDYN_ERR_ARG;
    sunindextype length = N_VGetLength(ycur);
    if (length < 2 || length % 2 != 0) return -(int)CDYN_ERR_ARG;
    const double *y = N_VGetArrayPointer(ycur);
    double *c = vector_data(corr, length);
    double *e = err ? vector_data(err, length) : NULL;
    if (!y || !c || (err && !e)) return -(int)CDYN_ERR_ARG;

    /* the projection of ycur, in corr; then err <- P err with the
     * projection's factorization (its tangent space at the projected q) */
    memcpy(c, y, sizeof(double) * (size_t)length);
    cdyn_status st = cdyn_mbs_project(mbs, t, c);
    if (st == CDYN_OK && e) st = cdyn_mbs_project_tangent(mbs, e);
    if (st != CDYN_OK) return cdyn__sundials_flag(st, cdyn_mbs_callback_code(mbs));
    for (sunindextype i = 0; i < length; ++i) c[i] -= y[i];
    return 0;
}

int cdyn_cvode_attach_mbs(void *cvode_mem, cdyn_mbs *mbs)
{
    if (!cvode_mem) return CV_MEM_NULL;
    if (!mbs) return CV_ILL_INPUT;
    int flag = CVodeSetUserData(cvode_mem, mbs);
    if (flag != CV_SUCCESS) return flag;
    return CVodeSetProjFn(cvode_mem, cdyn_cvode_mbs_project);
}

int cdyn_cvode_dae_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user_data)
{
    cdyn_dae *dae = user_data;
    if (!dae) return -(int)CDYN_ERR_ARG;
    int r = cdyn_dae_ode_size(dae); /* the length of y */
    if (r < 1) return -(int)CDYN_ERR_ARG;
    const double *yd = vector_data(y, r);
    double *fd = vector_data(ydot, r);
    if (!yd || !fd) return -(int)CDYN_ERR_ARG;
    cdyn_status st = cdyn_dae_rhs(dae, t, yd, fd);
    return cdyn__sundials_flag(st, cdyn_dae_callback_code(dae));
}

int cdyn_cvode_dae_jacobian(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix J, void *user_data,
                            N_Vector tmp1, N_Vector tmp2, N_Vector tmp3)
{
    (void)fy, (void)tmp1, (void)tmp2, (void)tmp3;
    cdyn_dae *dae = user_data;
    if (!dae) return -(int)CDYN_ERR_ARG;
    int r = cdyn_dae_ode_size(dae); /* the length of y */
    if (r < 1) return -(int)CDYN_ERR_ARG;
    const double *yd = vector_data(y, r);
    if (!yd || !J || SUNMatGetID(J) != SUNMATRIX_DENSE || SUNDenseMatrix_Rows(J) != r ||
        SUNDenseMatrix_Columns(J) != r)
        return -(int)CDYN_ERR_ARG;
    /* column-major with leading dimension r */
    cdyn_status st = cdyn_dae_rhs_jacobian(dae, t, yd, NULL, SUNDenseMatrix_Data(J), r);
    return cdyn__sundials_flag(st, cdyn_dae_callback_code(dae));
}

int cdyn_cvode_attach_dae(void *cvode_mem, cdyn_dae *dae)
{
    if (!cvode_mem) return CV_MEM_NULL;
    if (!dae) return CV_ILL_INPUT;
    int flag = CVodeSetUserData(cvode_mem, dae);
    if (flag != CV_SUCCESS) return flag;
    return CVodeSetJacFn(cvode_mem, cdyn_cvode_dae_jacobian);
}
