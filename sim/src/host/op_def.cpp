// op_def.cpp -- the OpDef DSL (register/op_def.h), OpDefFactory and the registry the op
// runtime reads.
#include <deque>
#include <map>
#include <mutex>
#include <pthread.h>

#include "op_def_reader.h"
#include "register/op_def_factory.h"

namespace ops {

class OpParamDefImpl {
 public:
    acl_fa_sim::host::ParamInfo info;
};

class OpAttrDefImpl {
 public:
    acl_fa_sim::host::AttrDefInfo info;
};

class OpAICoreDefImpl {
 public:
    gert::OpImplRegisterV2::TilingKernelFunc tiling = nullptr;
    std::vector<std::string> configs;
};

class OpMC2DefImpl {
 public:
    std::vector<std::string> groups;  // attr names, in HcclGroup order
};

class OpDefImpl {
 public:
    std::string type;
    // deques: references returned by Input()/Output()/Attr() stay valid as more are added.
    std::deque<OpParamDef> inputs, outputs;
    std::deque<OpAttrDef> attrs;
    gert::OpImplRegisterV2::InferShapeKernelFunc inferShape = nullptr;
    gert::OpImplRegisterV2::InferDataTypeKernelFunc inferDataType = nullptr;
    OpAICoreDef aicore;
    OpMC2Def mc2;
};

// ---- OpParamDef ----
OpParamDef::OpParamDef(const char *name) : impl_(new OpParamDefImpl) { impl_->info.name = name; }
OpParamDef::OpParamDef(const OpParamDef &def) : impl_(new OpParamDefImpl(*def.impl_)) {}
OpParamDef::~OpParamDef() = default;
OpParamDef &OpParamDef::operator=(const OpParamDef &def) {
    if (this != &def) *impl_ = *def.impl_;
    return *this;
}
OpParamDef &OpParamDef::ParamType(Option param_type) {
    impl_->info.paramType = param_type;
    return *this;
}
OpParamDef &OpParamDef::ValueDepend(Option value_depend) {
    impl_->info.valueDepend = value_depend;
    return *this;
}
OpParamDef &OpParamDef::DataType(std::vector<ge::DataType> types) {
    impl_->info.dataTypes = std::move(types);
    return *this;
}
OpParamDef &OpParamDef::Format(std::vector<ge::Format> formats) {
    impl_->info.formats = std::move(formats);
    return *this;
}
// Formats for dynamic-shape compilation; the simulator always runs with known shapes.
OpParamDef &OpParamDef::UnknownShapeFormat(std::vector<ge::Format>) { return *this; }

// ---- OpAttrDef ----
OpAttrDef::OpAttrDef(const char *name) : impl_(new OpAttrDefImpl) { impl_->info.name = name; }
OpAttrDef::OpAttrDef(const OpAttrDef &attr_def) : impl_(new OpAttrDefImpl(*attr_def.impl_)) {}
OpAttrDef::~OpAttrDef() = default;
OpAttrDef &OpAttrDef::operator=(const OpAttrDef &attr_def) {
    if (this != &attr_def) *impl_ = *attr_def.impl_;
    return *this;
}
OpAttrDef &OpAttrDef::AttrType(Option attr_type) {
    impl_->info.attrType = attr_type;
    return *this;
}

namespace {
template <typename T>
OpAttrDef &SetKind(OpAttrDef &def, acl_fa_sim::host::AttrDefInfo &info, acl_fa_sim::host::AttrKind kind,
                   const T *value) {
    info.kind = kind;
    info.hasDefault = value != nullptr;
    if (value != nullptr) info.defaultValue = *value;
    return def;
}
}  // namespace

using acl_fa_sim::host::AttrKind;
OpAttrDef &OpAttrDef::Bool(void) { return SetKind<bool>(*this, impl_->info, AttrKind::kBool, nullptr); }
OpAttrDef &OpAttrDef::Bool(bool value) { return SetKind(*this, impl_->info, AttrKind::kBool, &value); }
OpAttrDef &OpAttrDef::Float(void) { return SetKind<float>(*this, impl_->info, AttrKind::kFloat, nullptr); }
OpAttrDef &OpAttrDef::Float(float value) { return SetKind(*this, impl_->info, AttrKind::kFloat, &value); }
OpAttrDef &OpAttrDef::Int(void) { return SetKind<int64_t>(*this, impl_->info, AttrKind::kInt, nullptr); }
OpAttrDef &OpAttrDef::Int(int64_t value) { return SetKind(*this, impl_->info, AttrKind::kInt, &value); }
OpAttrDef &OpAttrDef::String(void) { return SetKind<std::string>(*this, impl_->info, AttrKind::kString, nullptr); }
OpAttrDef &OpAttrDef::String(const char *value) {
    const std::string s(value != nullptr ? value : "");
    return SetKind(*this, impl_->info, AttrKind::kString, &s);
}
bool OpAttrDef::IsRequired(void) { return impl_->info.attrType == REQUIRED; }

// ---- OpAICoreDef ----
OpAICoreDef::OpAICoreDef() : impl_(new OpAICoreDefImpl) {}
OpAICoreDef::OpAICoreDef(const OpAICoreDef &aicore_def) : impl_(new OpAICoreDefImpl(*aicore_def.impl_)) {}
OpAICoreDef::~OpAICoreDef() = default;
OpAICoreDef &OpAICoreDef::operator=(const OpAICoreDef &aicore_def) {
    if (this != &aicore_def) *impl_ = *aicore_def.impl_;
    return *this;
}
OpAICoreDef &OpAICoreDef::SetTiling(gert::OpImplRegisterV2::TilingKernelFunc func) {
    impl_->tiling = func;
    return *this;
}
gert::OpImplRegisterV2::TilingKernelFunc &OpAICoreDef::GetTiling(void) { return impl_->tiling; }
OpAICoreDef &OpAICoreDef::AddConfig(const char *soc) {
    impl_->configs.emplace_back(soc);
    return *this;
}

// ---- OpDef ----
OpDef::OpDef(const char *type) : impl_(new OpDefImpl) { impl_->type = type; }
OpDef::OpDef(const OpDef &op_def) : impl_(new OpDefImpl(*op_def.impl_)) {}
OpDef::~OpDef() = default;
OpDef &OpDef::operator=(const OpDef &op_def) {
    if (this != &op_def) *impl_ = *op_def.impl_;
    return *this;
}
OpParamDef &OpDef::Input(const char *name) {
    impl_->inputs.emplace_back(name);
    return impl_->inputs.back();
}
OpParamDef &OpDef::Output(const char *name) {
    impl_->outputs.emplace_back(name);
    return impl_->outputs.back();
}
OpAttrDef &OpDef::Attr(const char *name) {
    impl_->attrs.emplace_back(name);
    return impl_->attrs.back();
}
OpDef &OpDef::SetInferShape(gert::OpImplRegisterV2::InferShapeKernelFunc func) {
    impl_->inferShape = func;
    return *this;
}
OpDef &OpDef::SetInferDataType(gert::OpImplRegisterV2::InferDataTypeKernelFunc func) {
    impl_->inferDataType = func;
    return *this;
}
gert::OpImplRegisterV2::InferShapeKernelFunc &OpDef::GetInferShape(void) { return impl_->inferShape; }
gert::OpImplRegisterV2::InferDataTypeKernelFunc &OpDef::GetInferDataType(void) { return impl_->inferDataType; }
OpAICoreDef &OpDef::AICore(void) { return impl_->aicore; }
OpMC2Def &OpDef::MC2(void) { return impl_->mc2; }

// ---- OpMC2Def ----
OpMC2Def::OpMC2Def() : impl_(new OpMC2DefImpl) {}
OpMC2Def::OpMC2Def(const OpMC2Def &mc2_def) : impl_(new OpMC2DefImpl(*mc2_def.impl_)) {}
OpMC2Def::~OpMC2Def() = default;
OpMC2Def &OpMC2Def::operator=(const OpMC2Def &mc2_def) {
    if (this != &mc2_def) *impl_ = *mc2_def.impl_;
    return *this;
}
OpMC2Def &OpMC2Def::HcclGroup(const char *value) {
    impl_->groups.assign(1, value);
    return *this;
}
OpMC2Def &OpMC2Def::HcclGroup(std::vector<const char *> value) {
    impl_->groups.assign(value.begin(), value.end());
    return *this;
}

// ---- registry ----
namespace {
std::mutex &RegistryMutex() {
    static std::mutex m;
    return m;
}
std::map<std::string, OpDefCreator> &Registry() {
    static std::map<std::string, OpDefCreator> creators;
    return creators;
}

// The registry is kept by a forked child: its (leaf) lock is held across fork so that the
// child never inherits it locked by a thread it does not have.
struct RegistryForkHandlers {
    RegistryForkHandlers() {
        pthread_atfork([] { RegistryMutex().lock(); }, [] { RegistryMutex().unlock(); },
                       [] { RegistryMutex().unlock(); });
    }
} g_registryForkHandlers;
}  // namespace

int OpDefFactory::OpDefRegister(const char *name, OpDefCreator creator) {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    Registry()[name] = std::move(creator);
    return 0;
}

}  // namespace ops

namespace acl_fa_sim {
namespace host {

bool OpDefReader::Find(const std::string &opType, OpInfo *info) {
    ops::OpDefCreator creator;
    {
        std::lock_guard<std::mutex> lock(ops::RegistryMutex());
        auto it = ops::Registry().find(opType);
        if (it == ops::Registry().end()) return false;
        creator = it->second;
    }
    const ops::OpDef def = creator(opType.c_str());
    const ops::OpDefImpl &d = *def.impl_;
    OpInfo out;
    out.type = d.type;
    for (const auto &p : d.inputs) out.inputs.push_back(p.impl_->info);
    for (const auto &p : d.outputs) out.outputs.push_back(p.impl_->info);
    for (const auto &a : d.attrs) out.attrs.push_back(a.impl_->info);
    out.inferShape = d.inferShape;
    out.inferDataType = d.inferDataType;
    out.tiling = d.aicore.impl_->tiling;
    out.aicoreConfigs = d.aicore.impl_->configs;
    out.hcclGroups = d.mc2.impl_->groups;
    *info = std::move(out);
    return true;
}

std::vector<std::string> OpDefReader::RegisteredOps() {
    std::lock_guard<std::mutex> lock(ops::RegistryMutex());
    std::vector<std::string> names;
    for (const auto &kv : ops::Registry()) names.push_back(kv.first);
    return names;
}

}  // namespace host
}  // namespace acl_fa_sim
