/* cffi declarations of the FlashAttentionDecode tiling policy and work split in
 * libaclfa_plan.so. NOT part of CANN; the Python side checks the struct sizes against
 * aclfaDecodePlanSizeOf(). */
#include "../../native/aclfa_decode_plan.h"
