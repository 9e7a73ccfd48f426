// op_runtime.cpp -- sim_host/op_runtime.h: look up a registered OpDef, check tensors against
// it, and run its InferShape / InferDataType / TilingFunc on gert contexts.
#include "sim_host/op_runtime.h"

#include <sstream>

#include "log_capture.h"
#include "node_data.h"
#include "op_def_reader.h"

namespace acl_fa_sim {
namespace host {
namespace {

// Capacity of a tiling buffer: OpImplRegisterV2::Tiling's default max_tiling_data_size.
constexpr size_t kMaxTilingDataSize = 2048;

std::string Join(const std::vector<std::string> &items) {
    std::string out;
    for (const auto &s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

// The op's info, or false with *error when it is not registered or has no kernel config
// for the simulated chip.
bool FindForChip(const std::string &opType, OpInfo *info, std::string *error) {
    if (!OpDefReader::Find(opType, info)) {
        *error = "operator " + opType + " is not registered (registered: " + Join(OpDefReader::RegisteredOps()) + ")";
        return false;
    }
    const aclfaSimChip *chip = aclfaSimGetChip();
    for (const auto &soc : info->aicoreConfigs) {
        if (soc == chip->shortSoc) return true;
    }
    *error = opType + " has no kernel for " + chip->name + " (configs: " + Join(info->aicoreConfigs) + ")";
    return false;
}


gert::StorageShape ToStorageShape(const std::vector<int64_t> &dims) {
    gert::StorageShape s;
    for (int64_t d : dims) {
        s.MutableOriginShape().AppendDim(d);
        s.MutableStorageShape().AppendDim(d);
    }
    return s;
}

std::vector<int64_t> FromShape(const gert::Shape &shape) {
    std::vector<int64_t> dims;
    for (size_t i = 0; i < shape.GetDimNum(); ++i) dims.push_back(shape.GetDim(i));
    return dims;
}

gert::CompileTimeTensorDesc ToDesc(const TensorInfo &t) {
    gert::CompileTimeTensorDesc desc;
    desc.SetDataType(static_cast<ge::DataType>(t.dtype));
    desc.SetOriginFormat(static_cast<ge::Format>(t.format));
    desc.SetStorageFormat(static_cast<ge::Format>(t.format));
    return desc;
}

// Index of the dtype/format column of the OpDef that every given tensor matches, or -1.
int MatchColumn(const std::vector<ParamInfo> &params, const std::vector<TensorInfo> &tensors) {
    if (params.empty()) return 0;
    const size_t columns = params[0].dataTypes.size();
    for (size_t col = 0; col < columns; ++col) {
        bool all = true;
        for (size_t i = 0; i < tensors.size() && all; ++i) {
            const ParamInfo &p = params[i];
            if (!tensors[i].present) continue;  // an absent OPTIONAL input matches every column
            all = col < p.dataTypes.size() && p.dataTypes[col] == tensors[i].dtype &&
                  (p.formats.empty() || (col < p.formats.size() && p.formats[col] == tensors[i].format));
        }
        if (all) return static_cast<int>(col);
    }
    return -1;
}

std::string DtypeColumnsText(const std::vector<ParamInfo> &params) {
    std::ostringstream os;
    for (const auto &p : params) {
        os << (&p == &params[0] ? "" : "; ") << p.name << ':';
        for (auto dt : p.dataTypes) os << ' ' << static_cast<int>(dt);
    }
    return os.str();
}

bool CheckTensors(const OpInfo &op, const char *what, const std::vector<ParamInfo> &params,
                  const std::vector<TensorInfo> &tensors, std::string *error) {
    if (tensors.size() != params.size()) {
        *error = op.type + " takes " + std::to_string(params.size()) + " " + what + ", got " +
                 std::to_string(tensors.size());
        return false;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].present && params[i].paramType != ops::OPTIONAL) {
            *error = op.type + ": " + what + " '" + params[i].name + "' is required and was not given";
            return false;
        }
    }
    if (MatchColumn(params, tensors) < 0) {
        std::ostringstream os;
        os << op.type << ": no supported dtype/format combination matches the " << what << " (";
        for (size_t i = 0; i < tensors.size(); ++i) {
            os << (i ? ", " : "") << params[i].name << " dtype " << tensors[i].dtype << " format " << tensors[i].format;
        }
        os << "); supported ge::DataType columns: " << DtypeColumnsText(params);
        *error = os.str();
        return false;
    }
    return true;
}

const char *KindName(AttrKind kind) {
    switch (kind) {
        case AttrKind::kBool: return "bool";
        case AttrKind::kInt: return "int";
        case AttrKind::kFloat: return "float";
        case AttrKind::kString: return "string";
        default: return "unset";
    }
}

bool KindMatches(AttrKind kind, const AttrValue &v) {
    switch (kind) {
        case AttrKind::kBool: return std::holds_alternative<bool>(v);
        case AttrKind::kInt: return std::holds_alternative<int64_t>(v);
        case AttrKind::kFloat: return std::holds_alternative<float>(v);
        case AttrKind::kString: return std::holds_alternative<std::string>(v);
        default: return false;
    }
}

// The attr values in OpDef order: given ones by name, defaults for the rest.
bool BuildAttrs(const OpInfo &op, const std::vector<AttrInfo> &given, AttrStore *store, std::string *error) {
    std::vector<AttrValue> values;
    for (const auto &g : given) {
        bool known = false;
        for (const auto &def : op.attrs) known = known || def.name == g.name;
        if (!known) {
            *error = op.type + " has no attr '" + g.name + "'";
            return false;
        }
    }
    for (const auto &def : op.attrs) {
        const AttrInfo *found = nullptr;
        for (const auto &g : given) {
            if (g.name == def.name) found = &g;
        }
        if (found != nullptr) {
            if (!KindMatches(def.kind, found->value)) {
                *error = op.type + " attr '" + def.name + "' must be " + KindName(def.kind);
                return false;
            }
            values.push_back(found->value);
        } else if (def.hasDefault) {
            values.push_back(def.defaultValue);
        } else {
            *error = op.type + " attr '" + def.name + "' is required and was not given";
            return false;
        }
    }
    // Size the value vectors before taking pointers into them.
    for (const auto &v : values) {
        if (std::holds_alternative<bool>(v)) store->bools.push_back(std::get<bool>(v) ? 1 : 0);
        if (std::holds_alternative<int64_t>(v)) store->ints.push_back(std::get<int64_t>(v));
        if (std::holds_alternative<float>(v)) store->floats.push_back(std::get<float>(v));
        if (std::holds_alternative<std::string>(v)) store->strs.push_back(std::get<std::string>(v));
    }
    size_t b = 0, i = 0, f = 0, s = 0;
    for (const auto &v : values) {
        if (std::holds_alternative<bool>(v)) store->pointers.push_back(&store->bools[b++]);
        if (std::holds_alternative<int64_t>(v)) store->pointers.push_back(&store->ints[i++]);
        if (std::holds_alternative<float>(v)) store->pointers.push_back(&store->floats[f++]);
        if (std::holds_alternative<std::string>(v)) store->pointers.push_back(store->strs[s++].c_str());
    }
    return true;
}

std::string Failure(const char *stage, const OpInfo &op, uint32_t rc, const LogCapture &log) {
    std::string msg = op.type + " " + stage + " failed (status " + std::to_string(rc) + ")";
    return log.Errors().empty() ? msg + " without logging a reason" : msg + ": " + log.Joined();
}

}  // namespace

bool HasOp(const std::string &opType) {
    OpInfo info;
    std::string error;
    return FindForChip(opType, &info, &error);
}

std::vector<std::string> KernelConfigs(const std::string &opType) {
    OpInfo info;
    return OpDefReader::Find(opType, &info) ? info.aicoreConfigs : std::vector<std::string>{};
}

namespace {
const char *DtypeText(int32_t dtype) {
    switch (dtype) {
        case ge::DT_FLOAT: return "float32";
        case ge::DT_FLOAT16: return "float16";
        case ge::DT_INT8: return "int8";
        case ge::DT_INT16: return "int16";
        case ge::DT_INT32: return "int32";
        case ge::DT_INT64: return "int64";
        case ge::DT_UINT8: return "uint8";
        case ge::DT_BOOL: return "bool";
        case ge::DT_BF16: return "bfloat16";
        default: return nullptr;
    }
}
std::string DtypeString(int32_t dtype) {
    const char *text = DtypeText(dtype);
    return text != nullptr ? text : "dtype " + std::to_string(dtype);
}
}  // namespace

bool CheckSignature(const std::string &opType, const std::vector<TensorInfo> &inputs,
                    const std::vector<TensorInfo> &outputs, const std::vector<std::string> &argNames,
                    std::string *error) {
    OpInfo op;
    if (!OpDefReader::Find(opType, &op)) {
        *error = "operator " + opType + " is not registered (registered: " + Join(OpDefReader::RegisteredOps()) + ")";
        return false;
    }
    std::vector<ParamInfo> params = op.inputs;
    params.insert(params.end(), op.outputs.begin(), op.outputs.end());
    std::vector<TensorInfo> tensors = inputs;
    tensors.insert(tensors.end(), outputs.begin(), outputs.end());
    if (tensors.size() != params.size() || argNames.size() != params.size()) {
        *error = opType + " takes " + std::to_string(params.size()) + " tensors, got " + std::to_string(tensors.size());
        return false;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].present && params[i].paramType != ops::OPTIONAL) {
            *error = argNames[i] + " is required and was not given";
            return false;
        }
    }
    if (MatchColumn(params, tensors) >= 0) return true;
    std::ostringstream os;
    os << "no dtype/format combination of " << opType << " takes ";
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].present) continue;
        os << (i ? ", " : "") << argNames[i] << ' ' << DtypeString(tensors[i].dtype);
        if (tensors[i].format != ge::FORMAT_ND) os << " format " << tensors[i].format;
    }
    os << "; it takes (" << Join(argNames) << ") as";
    for (size_t col = 0; col < params[0].dataTypes.size(); ++col) {
        os << (col ? "," : "") << " (";
        for (size_t i = 0; i < params.size(); ++i) {
            os << (i ? ", " : "") << (col < params[i].dataTypes.size() ? DtypeString(params[i].dataTypes[col]) : "?");
        }
        os << ')';
    }
    *error = os.str();
    return false;
}

namespace {
std::string Quoted(const std::string &s) { return "\"" + s + "\""; }
const char *OptionText(ops::Option option) {
    switch (option) {
        case ops::REQUIRED: return "required";
        case ops::OPTIONAL: return "optional";
        case ops::DYNAMIC: return "dynamic";
        default: return "ignore";
    }
}
std::string ParamsJson(const std::vector<ParamInfo> &params) {
    std::string out = "[";
    for (const auto &p : params) {
        out += std::string(&p == &params[0] ? "" : ", ") + "{\"name\": " + Quoted(p.name) +
               ", \"param_type\": " + Quoted(OptionText(p.paramType));
        if (p.valueDepend != ops::IGNORE) out += ", \"value_depend\": " + Quoted(OptionText(p.valueDepend));
        out += ", \"format\": [";
        for (size_t i = 0; i < p.formats.size(); ++i) {
            out += std::string(i ? ", " : "") + (p.formats[i] == ge::FORMAT_ND ? "\"ND\"" : Quoted(std::to_string(p.formats[i])));
        }
        out += "], \"type\": [";
        for (size_t i = 0; i < p.dataTypes.size(); ++i) {
            const char *text = DtypeText(p.dataTypes[i]);
            const std::string name = text == nullptr ? std::to_string(p.dataTypes[i])
                                                     : (std::string(text) == "float32" ? "float" : text);
            out += std::string(i ? ", " : "") + Quoted(name);
        }
        out += "]}";
    }
    return out + "]";
}
}  // namespace

std::string OpDefJson(const std::string &opType) {
    OpInfo op;
    if (!OpDefReader::Find(opType, &op)) return "";
    std::ostringstream os;
    os.precision(9);
    os << "{\"op\": " << Quoted(op.type) << ", \"input_desc\": " << ParamsJson(op.inputs)
       << ", \"output_desc\": " << ParamsJson(op.outputs) << ", \"attr\": [";
    for (size_t i = 0; i < op.attrs.size(); ++i) {
        const AttrDefInfo &a = op.attrs[i];
        os << (i ? ", " : "") << "{\"name\": " << Quoted(a.name) << ", \"param_type\": " << Quoted(OptionText(a.attrType))
           << ", \"type\": " << Quoted(KindName(a.kind));
        if (a.hasDefault) {
            os << ", \"default_value\": ";
            const auto &v = a.defaultValue;
            if (std::holds_alternative<bool>(v)) os << (std::get<bool>(v) ? "true" : "false");
            if (std::holds_alternative<int64_t>(v)) os << std::get<int64_t>(v);
            if (std::holds_alternative<float>(v)) os << std::get<float>(v);
            if (std::holds_alternative<std::string>(v)) os << Quoted(std::get<std::string>(v));
        }
        os << '}';
    }
    os << "], \"aicore_config\": [";
    for (size_t i = 0; i < op.aicoreConfigs.size(); ++i) os << (i ? ", " : "") << Quoted(op.aicoreConfigs[i]);
    os << "]}";
    return os.str();
}

// The names of the registered op's inputs (or outputs: the OpInfo member `params`) in OpDef order.
static std::vector<std::string> ParamNames(const std::string &opType, std::vector<ParamInfo> OpInfo::*params) {
    OpInfo info;
    std::vector<std::string> names;
    if (OpDefReader::Find(opType, &info)) {
        for (const auto &p : info.*params) names.push_back(p.name);
    }
    return names;
}

std::vector<std::string> InputNames(const std::string &opType) { return ParamNames(opType, &OpInfo::inputs); }

std::vector<std::string> OutputNames(const std::string &opType) { return ParamNames(opType, &OpInfo::outputs); }

std::vector<AttrInfo> AttrDefaults(const std::string &opType) {
    OpInfo info;
    std::vector<AttrInfo> attrs;
    if (OpDefReader::Find(opType, &info)) {
        for (const auto &a : info.attrs) {
            if (a.hasDefault) attrs.push_back({a.name, a.defaultValue});
        }
    }
    return attrs;
}

std::vector<std::string> HcclGroups(const std::string &opType) {
    OpInfo info;
    return OpDefReader::Find(opType, &info) ? info.hcclGroups : std::vector<std::string>{};
}

namespace {

// The node the contexts of one InferShape or TilingFunc call read: its type, attrs and inputs.
NodeData MakeNode(const OpInfo &op, const AttrStore &attrs, const std::vector<TensorInfo> &inputs) {
    NodeData node;
    node.nodeType = op.type;
    node.nodeName = op.type;
    node.attrs = &attrs;
    for (size_t ir = 0; ir < inputs.size(); ++ir) {
        const TensorInfo &t = inputs[ir];
        if (!t.present) {
            node.irToPresent.push_back(-1);
            continue;
        }
        node.irToPresent.push_back(static_cast<int>(node.inputShapes.size()));
        node.inputShapes.push_back(ToStorageShape(t.shape));
        node.inputDescs.push_back(ToDesc(t));
        const gert::CompileTimeTensorDesc &desc = node.inputDescs.back();
        node.inputTensors.emplace_back(node.inputShapes.back(), desc.GetFormat(), desc.GetDataType());
        const bool valueDepend = ir < op.inputs.size() && op.inputs[ir].valueDepend != ops::IGNORE;
        node.inputValues.push_back(valueDepend ? t.values : std::vector<uint8_t>{});
    }
    // Addresses after the vectors stop growing.
    for (size_t i = 0; i < node.inputTensors.size(); ++i) {
        const auto &values = node.inputValues[i];
        NodeData::SetTensorData(&node.inputTensors[i], values.empty() ? nullptr : values.data(), values.size());
    }
    return node;
}

}  // namespace

uint32_t RunInferShape(const std::string &opType, const std::vector<TensorInfo> &inputs,
                       const std::vector<AttrInfo> &attrs, std::vector<TensorInfo> *outputs, std::string *error) {
    OpInfo op;
    if (!FindForChip(opType, &op, error) || !CheckTensors(op, "inputs", op.inputs, inputs, error)) {
        return ge::GRAPH_FAILED;
    }
    if (op.inferShape == nullptr || op.inferDataType == nullptr) {
        *error = op.type + " registers no InferShape/InferDataType function";
        return ge::GRAPH_FAILED;
    }
    AttrStore store;
    if (!BuildAttrs(op, attrs, &store, error)) return ge::GRAPH_FAILED;
    NodeData node = MakeNode(op, store, inputs);
    node.outputShapes.resize(op.outputs.size());
    node.outputDescs.resize(op.outputs.size());
    for (auto &d : node.outputDescs) {
        d.SetOriginFormat(ge::FORMAT_ND);
        d.SetStorageFormat(ge::FORMAT_ND);
    }
    LogCapture log;
    auto shapeCtx = node.MakeContext<gert::InferShapeContext>();
    uint32_t rc = op.inferShape(&shapeCtx);
    if (rc != ge::GRAPH_SUCCESS) {
        *error = Failure("InferShape", op, rc, log);
        return rc;
    }
    auto dtypeCtx = node.MakeContext<gert::InferDataTypeContext>();
    rc = op.inferDataType(&dtypeCtx);
    if (rc != ge::GRAPH_SUCCESS) {
        *error = Failure("InferDataType", op, rc, log);
        return rc;
    }
    outputs->clear();
    for (size_t i = 0; i < op.outputs.size(); ++i) {
        TensorInfo t;
        t.shape = FromShape(node.outputShapes[i].GetOriginShape());
        t.dtype = node.outputDescs[i].GetDataType();
        t.format = node.outputDescs[i].GetStorageFormat();
        outputs->push_back(t);
    }
    if (!CheckTensors(op, "inferred outputs", op.outputs, *outputs, error)) return ge::GRAPH_FAILED;
    return ge::GRAPH_SUCCESS;
}

uint32_t RunTiling(const std::string &opType, const std::vector<TensorInfo> &inputs,
                   const std::vector<TensorInfo> &outputs, const std::vector<AttrInfo> &attrs, TilingResult *result,
                   std::string *error) {
    OpInfo op;
    if (!FindForChip(opType, &op, error) || !CheckTensors(op, "inputs", op.inputs, inputs, error) ||
        !CheckTensors(op, "outputs", op.outputs, outputs, error)) {
        return ge::GRAPH_FAILED;
    }
    if (op.tiling == nullptr) {
        *error = op.type + " registers no TilingFunc (AICore().SetTiling)";
        return ge::GRAPH_FAILED;
    }
    AttrStore store;
    if (!BuildAttrs(op, attrs, &store, error)) return ge::GRAPH_FAILED;
    NodeData node = MakeNode(op, store, inputs);
    for (const auto &t : outputs) {
        if (!t.present) continue;  // an OPTIONAL output the caller did not give
        node.outputShapes.push_back(ToStorageShape(t.shape));
        node.outputDescs.push_back(ToDesc(t));
    }
    fe::PlatFormInfos platform(aclfaSimGetChip());
    node.platform = &platform;
    node.tilingBuffer = gert::TilingData::CreateCap(kMaxTilingDataSize);
    LogCapture log;
    auto ctx = node.MakeContext<gert::TilingContext>();
    const uint32_t rc = op.tiling(&ctx);
    if (rc != ge::GRAPH_SUCCESS) {
        *error = Failure("TilingFunc", op, rc, log);
        return rc;
    }
    const gert::TilingData *data = ctx.GetRawTilingData();
    const uint8_t *bytes = static_cast<const uint8_t *>(data->GetData());
    result->blockDim = node.blockDim;
    result->tilingKey = node.tilingKey;
    result->tilingData.assign(bytes, bytes + data->GetDataSize());
    result->workspaceSizes.assign(node.workspaceSizes.begin(), node.workspaceSizes.end());
    if (result->blockDim == 0) {
        *error = op.type + " TilingFunc succeeded but set no block dim (SetBlockDim)";
        return ge::GRAPH_FAILED;
    }
    return ge::GRAPH_SUCCESS;
}

}  // namespace host
}  // namespace acl_fa_sim
