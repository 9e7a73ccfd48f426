// kernel_operator.h -- the Ascend C kernel API, for the acl-fa CPU simulator.
// The subset the FlashAttention operator and the simulator's test kernels use, with the
// names, namespaces and signatures of asc-devkit (include/basic_api/*); kernels compile
// unchanged against this header and against CANN's.
#pragma once

#include "ascendc_sim/kernel_macros.h"
#include "ascendc_sim/sync.h"
#include "ascendc_sim/tensor.h"
#include "ascendc_sim/tpipe.h"
#include "ascendc_sim/data_copy.h"
#include "ascendc_sim/vec.h"
#include "ascendc_sim/vec_int.h"
#include "ascendc_sim/cross_core.h"
#include "ascendc_sim/hccl_context.h"
