// aclnn_init.cpp -- aclnnInit / aclnnFinalize. They do not call aclInit (hicann/opbase
// src/nnopbase/common/api/aclnn_init.cpp). The simulator keeps no state for them: aclnnInit only checks
// its config file argument, and either may be repeated.
#include <cstdio>

#include "nnopbase_internal.h"

extern "C" {

aclnnStatus aclnnInit(const char *configPath) {
    if (aclfaSimShouldFail("aclnnInit")) return ACLNN_ERR_INNER;
    if (configPath != nullptr && *configPath != '\0') {
        FILE *file = fopen(configPath, "rb");
        if (file == nullptr) {
            aclfaSimSetErrMsg("aclnnInit: cannot open config file \"%s\"", configPath);
            return ACLNN_ERR_PARAM_INVALID;
        }
        fclose(file);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize() {
    if (aclfaSimShouldFail("aclnnFinalize")) return ACLNN_ERR_INNER;
    return ACLNN_SUCCESS;
}

}  // extern "C"
