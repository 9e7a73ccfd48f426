// tiling/matmul/matmul_tiling.h -- matmul_tiling::MatmulApiTiling, the single-core Matmul
// API tiling (asc-devkit include/adv_api/matmul/matmul_tiling.h, subset).
#pragma once

#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"
#include "tiling/matmul/matmul_tiling_base.h"
#include "tiling/platform/platform_ascendc.h"

namespace matmul_tiling {
class MatmulApiTiling : public MatmulApiTilingBase {
 public:
    explicit MatmulApiTiling(const platform_ascendc::PlatformAscendC &ascendcPlatform)
        : MatmulApiTilingBase(ascendcPlatform) {}
    ~MatmulApiTiling() override = default;
    int64_t GetTiling(AscendC::tiling::TCubeTiling &tiling) override;
};
}  // namespace matmul_tiling
