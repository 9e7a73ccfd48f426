// lib/matmul_intf.h -- the Matmul high-level API (asc-devkit include/adv_api/matmul/matmul_intf.h),
// for the acl-fa CPU simulator: MatmulType, Matmul, REGIST_MATMUL_OBJ.
#pragma once

#include "kernel_operator.h"
#include "ascendc_sim/matmul.h"
