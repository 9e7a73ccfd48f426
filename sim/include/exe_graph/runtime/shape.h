// exe_graph/runtime/shape.h -- gert::Shape (metadef inc/external/exe_graph/runtime/shape.h):
// up to kMaxDimNum dims held inline; a plain standard-layout value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

namespace gert {
struct Shape {
 public:
    static constexpr size_t kMaxDimNum = 25;
    static constexpr int64_t kInvalidDimValue = std::numeric_limits<int64_t>::min();

    Shape() : dim_num_(0), dims_{0} {}
    Shape(const std::initializer_list<int64_t> &args) : Shape() {
        if (args.size() > kMaxDimNum) return;
        for (const int64_t v : args) dims_[dim_num_++] = v;
    }
    bool operator==(const Shape &rht) const {
        if (dim_num_ != rht.dim_num_) return false;
        for (size_t i = 0; i < dim_num_; ++i) {
            if (dims_[i] != rht.dims_[i]) return false;
        }
        return true;
    }
    bool operator!=(const Shape &rht) const { return !(*this == rht); }
    // Product of the dims; kInvalidDimValue on int64 overflow.
    int64_t GetShapeSize() const {
        int64_t size = 1;
        for (size_t i = 0; i < dim_num_; ++i) {
            if (__builtin_mul_overflow(size, dims_[i], &size)) return kInvalidDimValue;
        }
        return size;
    }
    bool IsScalar() const { return dim_num_ == 0; }
    void SetScalar() { dim_num_ = 0; }
    size_t GetDimNum() const { return dim_num_; }
    void SetDimNum(const size_t dim_num) { dim_num_ = dim_num; }
    int64_t GetDim(const size_t idx) const { return idx < kMaxDimNum ? dims_[idx] : kInvalidDimValue; }
    const int64_t &operator[](const size_t idx) const { return dims_[idx]; }
    int64_t &operator[](const size_t idx) { return dims_[idx]; }
    // As in CANN: SetDim does not grow dim_num_ past idx (use SetDimNum / AppendDim).
    void SetDim(size_t idx, const int64_t dim_value) {
        if (idx >= kMaxDimNum) return;
        dims_[idx] = dim_value;
        dim_num_ = (dim_num_ < idx) ? idx : dim_num_;
    }
    Shape &AppendDim(const int64_t value) {
        if (dim_num_ < kMaxDimNum) dims_[dim_num_++] = value;
        return *this;
    }

 private:
    size_t dim_num_;
    int64_t dims_[kMaxDimNum];
};
static_assert(std::is_standard_layout<Shape>::value, "The class Shape must be a POD");
}  // namespace gert
