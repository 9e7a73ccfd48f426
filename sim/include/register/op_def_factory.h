// register/op_def_factory.h -- where OP_ADD records an op's OpDef creator (metadef
// inc/external/asc/register/op_def_factory.h, subset).
#pragma once

#include <functional>

#include "register/op_def.h"

namespace ops {
using OpDefCreator = std::function<OpDef(const char *)>;
class OpDefFactory {
 public:
    // Records `creator` under op type `name`; returns 0.
    static int OpDefRegister(const char *name, OpDefCreator creator);
};
}  // namespace ops
