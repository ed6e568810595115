/* cdyn_sundials: helpers shared by the CVODE and IDA adapters (not installed). */
#ifndef CDYN_SUNDIALS_ADAPTER_INTERNAL_H
#define CDYN_SUNDIALS_ADAPTER_INTERNAL_H

#include <cdyn/status.h>

/*
 * SUNDIALS' callback convention from a cdyn status: 0 for success, > 0 for
 * a failure a smaller step may cure (non-finite values, a Newton iteration
 * at its cap, a model callback that returned a positive code), < 0 for one
 * that stops the integrator: CDYN_ERR_SINGULAR among them, because a
 * singular configuration (a kinematic fold, a rank-deficient Jacobian) is a
 * property of the state the integrator has reached, which a smaller step
 * only approaches (CVODE would shrink the step to nothing and end with
 * CV_TOO_MUCH_WORK, the diagnosis lost). |result| is the status; the
 * message stays in the cdyn object (cdyn_mbs_last_error(),
 * cdyn_dae_last_error()).
 */
static inline int cdyn__sundials_flag(cdyn_status status, int callback_code)
{
    switch (status) {
    case CDYN_OK: return 0;
    case CDYN_ERR_NONFINITE:
    case CDYN_ERR_NOCONV: return (int)status;
    case CDYN_ERR_CALLBACK: return callback_code > 0 ? (int)status : -(int)status;
    default: return -(int)status;
    }
}

#endif /* CDYN_SUNDIALS_ADAPTER_INTERNAL_H */
