// tiling_sizes.h -- the sizes every attention op's tiling struct starts with, filled one way
// from the op's problem (forward, backward and decode alike). No CANN include.
#pragma once

#include <cstdint>

namespace fa_host {

// batch, numHeads, numKvHeads, groupSize (query heads per kv head), seqQ, headDim of `td` from
// `problem` (any problem type with those sizes: fa_policy::Problem, the decode policy's).
template <typename Problem, typename TilingData>
void FillHeadSizes(const Problem &problem, TilingData *td) {
    td->batch = static_cast<uint32_t>(problem.batch);
    td->numHeads = static_cast<uint32_t>(problem.numHeads);
    td->numKvHeads = static_cast<uint32_t>(problem.numKvHeads);
    td->groupSize = static_cast<uint32_t>(problem.numHeads / problem.numKvHeads);
    td->seqQ = static_cast<uint32_t>(problem.seqQ);
    td->headDim = static_cast<uint32_t>(problem.headDim);
}

}  // namespace fa_host
