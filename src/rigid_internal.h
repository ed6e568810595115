/* What rigid.c's model layer takes from the ready-made motions of
 * rigid_preset.c (THEORY T5.4). */
#ifndef CDYN_RIGID_INTERNAL_H
#define CDYN_RIGID_INTERNAL_H

#include "cdyn/rigid.h"

/* Is preset known and are the params it reads present and finite (a
 * non-zero axis, a carriage callback)? CDYN_OK, CDYN_ERR_ARG or
 * CDYN_ERR_NONFINITE; q, q' and t are checked per evaluation. */
cdyn_status cdyn__rigid_preset_check(cdyn_rigid_preset preset,
                                     const cdyn_rigid_preset_params *params);

/* The FREE preset's kinematics at (q, q') (6 each, finite) into k: the
 * position, J_T's identity, J_R's Euler-angle columns, L_R and R. Writes
 * only those entries; the others must already be zero. */
void cdyn__rigid_free_motion(const double *q, const double *qd, cdyn_rigid_kinematics *k);

#endif
