// exe_graph/runtime/tiling_context.h -- gert::TilingContext, what a TilingFunc reads and
// fills (metadef inc/external/exe_graph/runtime/tiling_context.h, subset).
#pragma once

#include <cstddef>
#include <cstdint>

#include "exe_graph/runtime/extended_kernel_context.h"
#include "exe_graph/runtime/storage_shape.h"
#include "exe_graph/runtime/tensor.h"
#include "exe_graph/runtime/tiling_data.h"
#include "graph/error_codes.h"

namespace fe {
class PlatFormInfos;
}  // namespace fe

namespace gert {
class TilingContext : public ExtendedKernelContext {
 public:
    // nullptr when index is out of range.
    const StorageShape *GetInputShape(const size_t index) const;
    const StorageShape *GetOutputShape(const size_t index) const;
    // By OpDef index; nullptr when the OPTIONAL input is absent.
    const StorageShape *GetOptionalInputShape(const size_t ir_index) const;
    // The input as a tensor; its data address is the host copy of its values when the OpDef
    // marks it ValueDepend, nullptr otherwise. GetInputTensor: by present-input index.
    const Tensor *GetInputTensor(const size_t index) const;
    const Tensor *GetOptionalInputTensor(const size_t ir_index) const;

    ge::graphStatus SetTilingKey(const uint64_t tiling_key);
    uint64_t GetTilingKey() const;
    ge::graphStatus SetBlockDim(const uint32_t block_dim);
    uint32_t GetBlockDim() const;
    // 0: normal scheduling; 1: batch mode, every block of the launch resident at once (what a
    // kernel that calls SyncAll needs).
    ge::graphStatus SetScheduleMode(const uint32_t schedule_mode);
    uint32_t GetScheduleMode() const;

    // The tiling buffer viewed as T; sets the data size to sizeof(T). nullptr when T does
    // not fit the capacity the op registered (2048 B by default).
    template <typename T>
    auto GetTilingData() -> T * {
        auto tiling_data = GetRawTilingData();
        if (tiling_data == nullptr) return nullptr;
        if (tiling_data->GetCapacity() < sizeof(T)) return nullptr;
        tiling_data->SetDataSize(sizeof(T));
        return static_cast<T *>(tiling_data->GetData());
    }
    TilingData *GetRawTilingData();
    // Sets the number of workspaces and returns their sizes to fill (bytes); ws[0] is the
    // one the kernel receives.
    size_t *GetWorkspaceSizes(const size_t workspace_count);
    size_t GetWorkspaceNum() const;
    fe::PlatFormInfos *GetPlatformInfo() const;

 private:
    friend struct acl_fa_sim::host::NodeData;
    explicit TilingContext(acl_fa_sim::host::NodeData *node) : ExtendedKernelContext(node) {}
};
}  // namespace gert
