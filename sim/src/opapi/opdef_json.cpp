// opdef_json.cpp -- acl_fa_sim_cust_opapi.h over the op runtime's registry.
#include "acl_fa_sim_cust_opapi.h"

#include <cstring>
#include <string>

#include "sim_host/op_runtime.h"

extern "C" size_t aclfaSimOpDefJson(const char *opType, char *buf, size_t capacity)
{
    const std::string text = opType != nullptr ? acl_fa_sim::host::OpDefJson(opType) : std::string();
    if (buf != nullptr && capacity > 0) {
        const size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return text.size();
}
