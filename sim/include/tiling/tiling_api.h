// tiling/tiling_api.h -- host tiling APIs of the Ascend C libraries (asc-devkit
// include/adv_api/tiling_api.h; the subset acl-fa uses: matmul tiling and the platform).
#pragma once

#include "tiling/matmul/matmul_tiling.h"
#include "tiling/platform/platform_ascendc.h"
