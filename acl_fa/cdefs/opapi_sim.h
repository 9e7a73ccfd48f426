/* The simulator's libopapi.so extension (backend "sim" only): GM traffic of the builtin ops it
 * ran, per device. */
#include "../../sim/include/acl_fa_sim_opapi.h"
