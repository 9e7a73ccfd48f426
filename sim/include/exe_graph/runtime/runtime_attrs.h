// exe_graph/runtime/runtime_attrs.h -- gert::RuntimeAttrs: an op's attr values by index in
// OpDef declaration order (metadef inc/external/exe_graph/runtime/runtime_attrs.h, subset).
// Int attrs are int64_t, Float attrs float, Bool attrs bool, String attrs NUL-terminated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace acl_fa_sim {
namespace host {
struct AttrStore;  // simulator: owns the values (sim/src/host)
}  // namespace host
}  // namespace acl_fa_sim

namespace gert {
class RuntimeAttrs {
 public:
    template <typename T>
    const T *GetAttrPointer(size_t index) const {
        return reinterpret_cast<const T *>(GetPointerByIndex(index));
    }
    const int64_t *GetInt(const size_t index) const { return GetAttrPointer<int64_t>(index); }
    const char *GetStr(const size_t index) const { return GetAttrPointer<char>(index); }
    const float *GetFloat(const size_t index) const { return GetAttrPointer<float>(index); }
    const bool *GetBool(const size_t index) const { return GetAttrPointer<bool>(index); }
    size_t GetAttrNum() const;

    RuntimeAttrs() = delete;
    RuntimeAttrs(const RuntimeAttrs &) = delete;
    RuntimeAttrs(RuntimeAttrs &&) = delete;
    RuntimeAttrs &operator=(const RuntimeAttrs &) = delete;
    RuntimeAttrs &operator=(RuntimeAttrs &&) = delete;

 private:
    friend struct acl_fa_sim::host::AttrStore;
    explicit RuntimeAttrs(const acl_fa_sim::host::AttrStore *store) : store_(store) {}
    // nullptr when index >= GetAttrNum().
    const void *GetPointerByIndex(size_t index) const;
    const acl_fa_sim::host::AttrStore *store_;
};
}  // namespace gert
