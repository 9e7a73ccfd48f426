/* cffi declarations of the simulator's libhccl.so extension functions (NOT part of CANN's ABI).
 * Parsed after hccl.h; only called when the backend is "sim". */
#include "../../sim/include/acl_fa_sim_hccl.h"
