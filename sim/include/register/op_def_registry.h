// register/op_def_registry.h -- OP_ADD(OpType): registers the OpDef subclass OpType
// (metadef inc/external/asc/register/op_def_registry.h; the op-API/library variant that
// records a creator with OpDefFactory::OpDefRegister at static-initialization time).
#pragma once

#include "register/op_def.h"
#include "register/op_def_factory.h"

#define OP_ADD(opType, ...)                                                                                   \
    static int g_##opType##_added = []() {                                                                    \
        return ops::OpDefFactory::OpDefRegister(#opType, [](const char *name) { return ops::OpDef(opType(name)); }); \
    }()
