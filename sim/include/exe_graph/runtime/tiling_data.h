// exe_graph/runtime/tiling_data.h -- gert::TilingData: the fixed-capacity byte buffer a
// TilingFunc fills (metadef inc/external/exe_graph/runtime/tiling_data.h, subset).
// The header object is followed in memory by `capacity` data bytes (CreateCap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "graph/error_codes.h"

namespace gert {
class TilingData {
 public:
    size_t GetCapacity() const { return capacity_; }
    size_t GetDataSize() const { return data_size_; }
    void SetDataSize(const size_t size) { data_size_ = size; }
    void *GetData() { return data_; }
    const void *GetData() const { return data_; }

    template <typename T, typename std::enable_if<std::is_standard_layout<T>::value, int>::type = 0>
    ge::graphStatus Append(const T &data) {
        void *p = Expand(sizeof(data));
        if (p == nullptr) return ge::GRAPH_FAILED;
        std::memcpy(p, &data, sizeof(data));
        return ge::GRAPH_SUCCESS;
    }
    // Reserves `size` more bytes after the current data; nullptr past the capacity.
    void *Expand(size_t size) {
        if (size > capacity_ - data_size_) return nullptr;
        void *ret = static_cast<uint8_t *>(data_) + data_size_;
        data_size_ += size;
        return ret;
    }
    // One allocation: the TilingData header, then cap_size zeroed data bytes.
    static std::unique_ptr<uint8_t[]> CreateCap(const size_t cap_size) {
        auto buf = std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[sizeof(TilingData) + cap_size]());
        if (buf == nullptr) return nullptr;
        reinterpret_cast<TilingData *>(buf.get())->Init(cap_size, buf.get() + sizeof(TilingData));
        return buf;
    }
    void Init(const size_t cap_size, void *const data) {
        capacity_ = cap_size;
        data_size_ = 0;
        data_ = data;
    }
    TilingData(const TilingData &) = delete;
    TilingData(TilingData &&) = delete;
    TilingData operator=(const TilingData &) = delete;
    TilingData operator=(TilingData &&) = delete;

 private:
    TilingData() = default;
    size_t capacity_;
    size_t data_size_;
    void *data_;
};
static_assert(std::is_standard_layout<TilingData>::value, "The class TilingData must be a POD");
}  // namespace gert
