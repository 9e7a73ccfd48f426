// op_def_reader.h -- the simulator's read access to registered OpDefs (what CANN's op
// generators read through their friend access). Internal to sim/src/host.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "register/op_def.h"

namespace acl_fa_sim {
namespace host {

struct ParamInfo {
    std::string name;
    ops::Option paramType = ops::REQUIRED;
    ops::Option valueDepend = ops::IGNORE;  // ValueDepend: the TilingFunc sees the values
    std::vector<ge::DataType> dataTypes;  // column i of every param forms one supported combination
    std::vector<ge::Format> formats;
};

enum class AttrKind { kBool, kInt, kFloat, kString, kUnset };

struct AttrDefInfo {
    std::string name;
    ops::Option attrType = ops::OPTIONAL;
    AttrKind kind = AttrKind::kUnset;
    bool hasDefault = false;
    std::variant<bool, int64_t, float, std::string> defaultValue;
};

struct OpInfo {
    std::string type;
    std::vector<ParamInfo> inputs, outputs;
    std::vector<AttrDefInfo> attrs;
    gert::OpImplRegisterV2::InferShapeKernelFunc inferShape = nullptr;
    gert::OpImplRegisterV2::InferDataTypeKernelFunc inferDataType = nullptr;
    gert::OpImplRegisterV2::TilingKernelFunc tiling = nullptr;
    std::vector<std::string> aicoreConfigs;  // SoC short names given to AddConfig
    std::vector<std::string> hcclGroups;     // MC2().HcclGroup: attr names of the comm groups
};

class OpDefReader {
 public:
    // False when no OP_ADD registered `opType`.
    static bool Find(const std::string &opType, OpInfo *info);
    static std::vector<std::string> RegisteredOps();
};

}  // namespace host
}  // namespace acl_fa_sim
