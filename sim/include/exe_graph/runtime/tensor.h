// exe_graph/runtime/tensor.h -- gert::Tensor, what GetInputTensor / GetOptionalInputTensor give a
// TilingFunc (metadef inc/external/exe_graph/runtime/tensor.h, subset: shape, format, dtype and
// the data address). As in CANN, the address is the host copy of the values for an input the
// OpDef marks ValueDepend, nullptr for any other input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exe_graph/runtime/compute_node_info.h"
#include "exe_graph/runtime/storage_shape.h"
#include "exe_graph/runtime/sim_node_data.h"
#include "graph/types.h"

namespace gert {
class Tensor {
 public:
    Tensor() = default;
    Tensor(const StorageShape &storage_shape, const StorageFormat &storage_format, ge::DataType data_type)
        : storage_shape_(storage_shape), storage_format_(storage_format), data_type_(data_type) {}
    // Elements of the storage shape.
    int64_t GetShapeSize() const { return storage_shape_.GetStorageShape().GetShapeSize(); }
    template <class T>
    const T *GetData() const {
        return static_cast<const T *>(GetAddr());
    }
    const void *GetAddr() const { return addr_; }
    size_t GetSize() const { return size_; }  // bytes at GetAddr()
    ge::DataType GetDataType() const { return data_type_; }
    const Shape &GetStorageShape() const { return storage_shape_.GetStorageShape(); }
    const Shape &GetOriginShape() const { return storage_shape_.GetOriginShape(); }
    const StorageShape &GetShape() const { return storage_shape_; }
    ge::Format GetStorageFormat() const { return storage_format_.GetStorageFormat(); }
    ge::Format GetOriginFormat() const { return storage_format_.GetOriginFormat(); }
    const StorageFormat &GetFormat() const { return storage_format_; }

 private:
    friend struct acl_fa_sim::host::NodeData;
    StorageShape storage_shape_;
    StorageFormat storage_format_;
    ge::DataType data_type_ = ge::DT_UNDEFINED;
    const void *addr_ = nullptr;
    size_t size_ = 0;
};
}  // namespace gert
