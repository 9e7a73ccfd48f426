/* cffi declarations of libaclfa_plan.so: the FlashAttention tiling policy behind a C ABI, for
 * `acl-fa plan`. NOT part of CANN; the Python side checks every struct size against
 * aclfaPlanSizeOf(). */
#include "../../native/aclfa_plan.h"
