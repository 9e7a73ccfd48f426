// graph/error_codes.h -- GE graph status codes (subset of metadef inc/external/graph/error_codes.h).
#pragma once

#include <cstdint>

namespace ge {
using graphStatus = uint32_t;
const graphStatus GRAPH_FAILED = 0xFFFFFFFF;
const graphStatus GRAPH_SUCCESS = 0;
const graphStatus GRAPH_PARAM_INVALID = 50331649;
}  // namespace ge
