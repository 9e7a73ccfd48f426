/* cffi declarations of the FlashAttentionGrad tiling policy in libaclfa_plan.so. NOT part of
 * CANN; the Python side checks the struct size against aclfaGradPlanSizeOf(). */
#include "../../native/aclfa_grad_plan.h"
