/*
 * cffi declarations of the acl-fa simulator's extension functions (NOT part of CANN's ABI),
 * declared once in the simulator's headers: chip catalogue, live-object accounting, fault
 * injection and plumbing (libascendcl.so, libnnopbase.so), launch statistics and the modeled
 * time (libascendc_sim.so). Parsed after acl_rt.h and aclnn_base.h; only called when the
 * backend is "sim".
 */
#include "../../sim/include/acl_fa_sim.h"
#include "../../sim/include/acl_fa_sim_kernel.h"
