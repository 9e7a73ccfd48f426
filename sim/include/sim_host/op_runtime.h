// op_runtime.h -- the simulator's host-side op runtime: what CANN's op-API framework
// does with a registered OpDef (look it up, run InferShape and TilingFunc against a
// gert context built from concrete tensors and attrs). Simulator-internal, C++ only;
// used by the generated-style aclnn layer (sim/src/opapi) and by tests.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace acl_fa_sim {
namespace host {

// One concrete tensor as the op sees it. dtype/format are ge::DataType / ge::Format values.
// present = false: an OPTIONAL input the caller left out (null in aclnn). values: the host copy
// of the elements, which the op runtime hands the TilingFunc for a ValueDepend input.
struct TensorInfo {
    std::vector<int64_t> shape;
    int32_t dtype = 0;
    int32_t format = 2;  // ge::FORMAT_ND
    bool present = true;
    std::vector<uint8_t> values;
};

// Attr values in the order the OpDef declares them (bool, int64, float, string).
using AttrValue = std::variant<bool, int64_t, float, std::string>;

struct AttrInfo {
    std::string name;
    AttrValue value;
};

// The result of the registered TilingFunc for the current simulated chip.
struct TilingResult {
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;       // exactly the bytes the kernel receives
    std::vector<uint64_t> workspaceSizes;  // as set through GetWorkspaceSizes()
};

// True when an op of this type was registered with OP_ADD and has a config (AddConfig)
// for the current simulated chip's short SoC name.
bool HasOp(const std::string &opType);

// The SoC short names the op's AICore config lists (AddConfig); empty when not registered.
std::vector<std::string> KernelConfigs(const std::string &opType);

// The inputs and outputs of a call together (absent optional ones skipped) against the OpDef:
// each required one given, and their dtypes/formats one of its columns. False with *error
// naming the arguments by `argNames` (inputs then outputs).
bool CheckSignature(const std::string &opType, const std::vector<TensorInfo> &inputs,
                    const std::vector<TensorInfo> &outputs, const std::vector<std::string> &argNames,
                    std::string *error);

// The registered OpDef as msopgen's op JSON would state it ({"op", "input_desc",
// "output_desc", "attr"} plus "value_depend" and the AICore configs under "aicore_config");
// empty when not registered.
std::string OpDefJson(const std::string &opType);

// Names of the registered op's inputs, outputs and attrs in declaration order.
std::vector<std::string> InputNames(const std::string &opType);
std::vector<std::string> OutputNames(const std::string &opType);
std::vector<AttrInfo> AttrDefaults(const std::string &opType);
// The attr names of the op's HCCL groups (OpDef MC2().HcclGroup), in order; empty for an op
// that does not communicate.
std::vector<std::string> HcclGroups(const std::string &opType);

// Checks the inputs' dtypes/formats against the OpDef's DataType/Format lists, runs the
// registered InferShape and InferDataType, and fills `outputs` (shape and dtype).
// Returns 0 (ge::GRAPH_SUCCESS) or non-zero with *error explaining which check failed.
uint32_t RunInferShape(const std::string &opType, const std::vector<TensorInfo> &inputs,
                       const std::vector<AttrInfo> &attrs, std::vector<TensorInfo> *outputs,
                       std::string *error);

// Runs the registered TilingFunc with a gert::TilingContext holding the given inputs,
// outputs, attrs and the current chip's platform info. Returns 0 (ge::GRAPH_SUCCESS) or
// non-zero with *error holding what the TilingFunc reported (its log lines).
uint32_t RunTiling(const std::string &opType, const std::vector<TensorInfo> &inputs,
                   const std::vector<TensorInfo> &outputs, const std::vector<AttrInfo> &attrs,
                   TilingResult *result, std::string *error);

}  // namespace host
}  // namespace acl_fa_sim
