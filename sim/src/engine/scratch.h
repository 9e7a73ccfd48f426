// scratch.h -- per-thread scratch buffers of the engine's hot paths (Matmul operand conversion,
// GEMM packing). Their contents are always written before they are read, so they only ever grow:
// std::vector::resize would zero-fill again every time a call needs more than the previous one
// (QK and PV alternate between [m, 128] and [m, blockN] operands), a memset per Matmul call.
#pragma once

#include <cstddef>
#include <vector>

namespace acl_fa_sim {
namespace kernel {

// At least n elements of `buffer` (contents unspecified), without shrinking it.
template <typename T>
T *Scratch(std::vector<T> &buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
    return buffer.data();
}

}  // namespace kernel
}  // namespace acl_fa_sim
