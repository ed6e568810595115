/**
 * @file cdyn.h
 * Umbrella header of cdyn, constrained dynamics for hydraulic networks,
 * mechanisms and rigid bodies. Include this, or the module headers.
 */
#ifndef CDYN_H
#define CDYN_H

#include "cdyn/status.h"
#include "cdyn/nullspace.h"
#include "cdyn/newton.h"
#include "cdyn/dae.h"
#include "cdyn/constraint.h"
#include "cdyn/mbs.h"
#include "cdyn/rigid.h"

#endif /* CDYN_H */
