// register/op_def.h -- the OpDef DSL an op's *_def.cpp uses to describe its interface
// (metadef inc/external/asc/register/op_def.h, subset: inputs/outputs with dtypes and
// formats, attrs with defaults, InferShape/InferDataType, AICore tiling and SoC configs, MC2
// HCCL groups).
// Implemented by the simulator's host library (sim/src/host/op_def.cpp); its op runtime
// reads a registered OpDef through acl_fa_sim::host::OpDefReader.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/types.h"
#include "register/op_impl_registry.h"

namespace acl_fa_sim {
namespace host {
class OpDefReader;
}  // namespace host
}  // namespace acl_fa_sim

namespace ops {
enum Option { IGNORE = 0, OPTIONAL = 1, REQUIRED = 2, DYNAMIC = 3, VIRTUAL = 4 };

class OpParamDefImpl;
class OpParamDef {
 public:
    explicit OpParamDef(const char *name);
    OpParamDef(const OpParamDef &def);
    ~OpParamDef();
    OpParamDef &operator=(const OpParamDef &def);
    OpParamDef &ParamType(Option param_type);
    OpParamDef &DataType(std::vector<ge::DataType> types);
    OpParamDef &Format(std::vector<ge::Format> formats);
    OpParamDef &UnknownShapeFormat(std::vector<ge::Format> formats);
    // REQUIRED / OPTIONAL: TilingFunc reads the input's values (host copy) through
    // GetInputTensor / GetOptionalInputTensor; IGNORE (default): shape and dtype only.
    OpParamDef &ValueDepend(Option value_depend);

 private:
    friend class acl_fa_sim::host::OpDefReader;
    std::unique_ptr<OpParamDefImpl> impl_;
};

class OpAttrDefImpl;
class OpAttrDef {
 public:
    explicit OpAttrDef(const char *name);
    OpAttrDef(const OpAttrDef &attr_def);
    ~OpAttrDef();
    OpAttrDef &operator=(const OpAttrDef &attr_def);
    OpAttrDef &AttrType(Option attr_type);
    OpAttrDef &Bool(void);
    OpAttrDef &Bool(bool value);
    OpAttrDef &Float(void);
    OpAttrDef &Float(float value);
    OpAttrDef &Int(void);
    OpAttrDef &Int(int64_t value);
    OpAttrDef &String(void);
    OpAttrDef &String(const char *value);
    bool IsRequired(void);

 private:
    friend class acl_fa_sim::host::OpDefReader;
    std::unique_ptr<OpAttrDefImpl> impl_;
};

class OpAICoreDefImpl;
class OpAICoreDef {
 public:
    OpAICoreDef();
    OpAICoreDef(const OpAICoreDef &aicore_def);
    ~OpAICoreDef();
    OpAICoreDef &operator=(const OpAICoreDef &aicore_def);
    OpAICoreDef &SetTiling(gert::OpImplRegisterV2::TilingKernelFunc func);
    gert::OpImplRegisterV2::TilingKernelFunc &GetTiling(void);
    OpAICoreDef &AddConfig(const char *soc);

 private:
    friend class acl_fa_sim::host::OpDefReader;
    std::unique_ptr<OpAICoreDefImpl> impl_;
};

// An MC2 op's communication groups: the names of its string attrs that carry an HCCL comm name
// (HcclGetCommName); the runtime hands the kernel a context per group, in this order, for
// GetHcclContext<0> and <1> (metadef op_def.h OpMC2Def, subset: HcclGroup).
class OpMC2DefImpl;
class OpMC2Def {
 public:
    OpMC2Def();
    OpMC2Def(const OpMC2Def &mc2_def);
    ~OpMC2Def();
    OpMC2Def &operator=(const OpMC2Def &mc2_def);
    OpMC2Def &HcclGroup(const char *value);
    OpMC2Def &HcclGroup(std::vector<const char *> value);

 private:
    friend class acl_fa_sim::host::OpDefReader;
    std::unique_ptr<OpMC2DefImpl> impl_;
};

class OpDefImpl;
class OpDef {
 public:
    explicit OpDef(const char *type);
    OpDef(const OpDef &op_def);
    ~OpDef();
    OpDef &operator=(const OpDef &op_def);
    OpParamDef &Input(const char *name);
    OpParamDef &Output(const char *name);
    OpAttrDef &Attr(const char *name);
    OpDef &SetInferShape(gert::OpImplRegisterV2::InferShapeKernelFunc func);
    OpDef &SetInferDataType(gert::OpImplRegisterV2::InferDataTypeKernelFunc func);
    gert::OpImplRegisterV2::InferShapeKernelFunc &GetInferShape(void);
    gert::OpImplRegisterV2::InferDataTypeKernelFunc &GetInferDataType(void);
    OpAICoreDef &AICore(void);
    OpMC2Def &MC2(void);

 private:
    friend class acl_fa_sim::host::OpDefReader;
    std::unique_ptr<OpDefImpl> impl_;
};
}  // namespace ops
