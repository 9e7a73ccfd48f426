// faults.cpp -- fault injection: ACL_FA_SIM_FAIL / aclfaSimSetFaults / aclfaSimShouldFail.
//
// Spec "api:N[,api:N...]": the Nth call (1-based) of `api` counted from when the spec was set
// fails once. An api may be named several times ("aclrtMalloc:1,aclrtMalloc:3").
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {
namespace {

struct ApiFaults {
    std::set<uint64_t> failingCalls;  // 1-based call numbers that fail
    uint64_t calls = 0;               // calls seen since the spec was set
};

std::mutex g_faultMutex;
std::map<std::string, ApiFaults> g_faults;  // guarded by g_faultMutex
std::atomic<bool> g_anyFaults{false};       // fast path: no spec, no lock

// Parses `spec`; on error fills *error and returns false.
bool ParseSpec(const std::string &spec, std::map<std::string, ApiFaults> *faults, std::string *error) {
    size_t pos = 0;
    while (pos < spec.size()) {
        size_t comma = spec.find(',', pos);
        std::string entry = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        pos = comma == std::string::npos ? spec.size() : comma + 1;
        // trim blanks
        size_t first = entry.find_first_not_of(" \t");
        size_t last = entry.find_last_not_of(" \t");
        if (first == std::string::npos) continue;
        entry = entry.substr(first, last - first + 1);
        size_t colon = entry.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
            *error = "fault entry \"" + entry + "\" is not of the form api:N";
            return false;
        }
        std::string api = entry.substr(0, colon);
        std::string count = entry.substr(colon + 1);
        char *end = nullptr;
        unsigned long long n = strtoull(count.c_str(), &end, 10);
        if (*end != '\0' || n == 0 || count[0] == '-') {
            *error = "fault entry \"" + entry + "\": N must be a call number >= 1";
            return false;
        }
        (*faults)[api].failingCalls.insert(n);
    }
    return true;
}

aclError SetFaults(const char *spec) {
    std::map<std::string, ApiFaults> faults;
    std::string error;
    if (spec != nullptr && !ParseSpec(spec, &faults, &error)) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclfaSimSetFaults: %s", error.c_str());
    }
    std::lock_guard<std::mutex> lock(g_faultMutex);
    g_faults.swap(faults);
    g_anyFaults.store(!g_faults.empty());
    return ACL_SUCCESS;
}

struct FaultsFromEnv {
    FaultsFromEnv() {
        const char *spec = getenv("ACL_FA_SIM_FAIL");
        if (spec == nullptr || *spec == '\0') return;
        if (SetFaults(spec) != ACL_SUCCESS) {
            fprintf(stderr, "acl-fa simulator: ignoring ACL_FA_SIM_FAIL=\"%s\": %s\n", spec, aclGetRecentErrMsg());
        }
    }
} g_faultsFromEnv;

}  // namespace

void LockFaults() { g_faultMutex.lock(); }
void UnlockFaults() { g_faultMutex.unlock(); }

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclfaSimSetFaults(const char *spec) { return SetFaults(spec); }

int aclfaSimShouldFail(const char *api) {
    if (!g_anyFaults.load(std::memory_order_relaxed) || api == nullptr) return 0;
    uint64_t call = 0;
    {
        std::lock_guard<std::mutex> lock(g_faultMutex);
        auto it = g_faults.find(api);
        if (it == g_faults.end()) return 0;
        call = ++it->second.calls;
        if (it->second.failingCalls.count(call) == 0) return 0;
    }
    Fail(0, "%s: injected fault (fault spec entry %s:%llu)", api, api, static_cast<unsigned long long>(call));
    return 1;
}

}  // extern "C"
