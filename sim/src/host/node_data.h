// node_data.h -- the plain storage behind the simulator's gert contexts, RuntimeAttrs and
// fe::PlatFormInfos. Internal to sim/src/host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "exe_graph/runtime/compute_node_info.h"
#include "exe_graph/runtime/runtime_attrs.h"
#include "exe_graph/runtime/storage_shape.h"
#include "exe_graph/runtime/tensor.h"
#include "exe_graph/runtime/tiling_data.h"

namespace fe {
// The platform a TilingFunc queries: one row of the simulator's chip catalogue.
class PlatFormInfos {
 public:
    explicit PlatFormInfos(const aclfaSimChip *chip) : chip_(chip) {}
    const aclfaSimChip &Chip() const { return *chip_; }

 private:
    const aclfaSimChip *chip_;
};
}  // namespace fe

namespace acl_fa_sim {
namespace host {

// Attr values by OpDef index; pointers[i] points into the value vectors (stable: sized
// before the pointers are taken).
struct AttrStore {
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<uint8_t> bools;  // bool storage that can be pointed to
    std::vector<std::string> strs;
    std::vector<const void *> pointers;
    gert::RuntimeAttrs view{this};
};

// Everything one InferShape / InferDataType / Tiling call sees and fills.
struct NodeData {
    std::string nodeType;
    std::string nodeName;
    std::vector<gert::StorageShape> inputShapes;
    std::vector<gert::StorageShape> outputShapes;
    std::vector<gert::CompileTimeTensorDesc> inputDescs;
    std::vector<gert::CompileTimeTensorDesc> outputDescs;
    // Inputs present, in OpDef order (inputShapes/inputDescs/inputTensors are indexed by these
    // positions); irToPresent[ir] = that position, or -1 for an absent OPTIONAL input.
    std::vector<int> irToPresent;
    std::vector<gert::Tensor> inputTensors;
    std::vector<std::vector<uint8_t>> inputValues;  // host copies behind ValueDepend tensors
    const AttrStore *attrs = nullptr;
    // Tiling outputs.
    fe::PlatFormInfos *platform = nullptr;
    std::unique_ptr<uint8_t[]> tilingBuffer;  // gert::TilingData header + capacity bytes
    uint64_t tilingKey = 0;
    uint32_t blockDim = 0;
    uint32_t scheduleMode = 0;  // SetScheduleMode: 1 = batch mode (all blocks resident; SyncAll)
    std::vector<size_t> workspaceSizes;

    template <typename Context>
    Context MakeContext() { return Context(this); }
    // Present-input position of OpDef input `ir`, or -1.
    int Present(size_t ir) const { return ir < irToPresent.size() ? irToPresent[ir] : -1; }
    static void SetTensorData(gert::Tensor *t, const void *addr, size_t size) {
        t->addr_ = addr;
        t->size_ = size;
    }
};

}  // namespace host
}  // namespace acl_fa_sim
