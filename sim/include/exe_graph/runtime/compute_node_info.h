// exe_graph/runtime/compute_node_info.h -- gert::CompileTimeTensorDesc and StorageFormat
// (metadef inc/external/exe_graph/runtime/compute_node_info.h, storage_format.h; subset).
#pragma once

#include <type_traits>

#include "graph/types.h"

namespace gert {
struct StorageFormat {
 public:
    StorageFormat() = default;
    StorageFormat(const ge::Format origin_format, const ge::Format storage_format)
        : origin_format_(origin_format), storage_format_(storage_format) {}
    ge::Format GetOriginFormat() const { return origin_format_; }
    void SetOriginFormat(const ge::Format origin_format) { origin_format_ = origin_format; }
    ge::Format GetStorageFormat() const { return storage_format_; }
    void SetStorageFormat(const ge::Format storage_format) { storage_format_ = storage_format; }

 private:
    ge::Format origin_format_ = ge::FORMAT_ND;
    ge::Format storage_format_ = ge::FORMAT_ND;
};

class CompileTimeTensorDesc {
 public:
    ge::DataType GetDataType() const { return data_type_; }
    const StorageFormat &GetFormat() const { return storage_format_; }
    ge::Format GetOriginFormat() const { return storage_format_.GetOriginFormat(); }
    ge::Format GetStorageFormat() const { return storage_format_.GetStorageFormat(); }
    void SetDataType(const ge::DataType data_type) { data_type_ = data_type; }
    void SetOriginFormat(const ge::Format format) { storage_format_.SetOriginFormat(format); }
    void SetStorageFormat(const ge::Format format) { storage_format_.SetStorageFormat(format); }

 private:
    ge::DataType data_type_ = ge::DT_UNDEFINED;
    StorageFormat storage_format_;
};
static_assert(std::is_standard_layout<CompileTimeTensorDesc>::value, "The class CompileTimeTensorDesc must be a POD");
}  // namespace gert
