// init.cpp -- aclInit / aclFinalize / aclFinalizeReference and the version queries.
//
// Semantics (RT docs/zh/api_ref/02_initialization_and_deinitialization.md): every aclInit
// adds a reference; a repeated aclInit returns ACL_ERROR_REPEAT_INITIALIZE (callers ignore
// it) but still counts; aclFinalize drops all references at once; aclFinalizeReference drops
// one and reports how many remain. Releasing the last reference resets every device.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {
namespace {

struct InitState {
    std::mutex mutex;
    int64_t count = 0;  // aclInit references; guarded by mutex
};

// Replaced (the old one abandoned) in a forked child: its mutex may be held by a thread that
// does not exist there.
InitState *g_init = new InitState;

// The simulator reports its own version, never a CANN release: it mirrors the ACL 1.17
// headers, and says "sim" so nobody mistakes it for an installed CANN.
constexpr const char *kSimVersion = "1.17.0.sim";

}  // namespace

bool IsInitialized() { return InitCount() > 0; }

int64_t InitCount() {
    std::lock_guard<std::mutex> lock(g_init->mutex);
    return g_init->count;
}

void AbandonInitInChild() { g_init = new InitState; }

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclInit(const char *configPath) {
    if (aclfaSimShouldFail("aclInit")) return ACL_ERROR_FAILURE;
    InitState &init = *g_init;
    std::lock_guard<std::mutex> lock(init.mutex);
    if (init.count > 0) {
        ++init.count;
        return Fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized (%lld references); the repeat is counted",
                    static_cast<long long>(init.count));
    }
    if (configPath != nullptr && *configPath != '\0') {
        FILE *file = fopen(configPath, "rb");
        if (file == nullptr) {
            return Fail(ACL_ERROR_INVALID_FILE, "aclInit: cannot open config file \"%s\": %s", configPath,
                        strerror(errno));
        }
        fclose(file);
    }
    aclError ret = LoadConfigFromEnv();
    if (ret != ACL_SUCCESS) return ret;
    init.count = 1;
    return ACL_SUCCESS;
}

aclError aclFinalize() {
    if (aclfaSimShouldFail("aclFinalize")) return ACL_ERROR_FAILURE;
    InitState &init = *g_init;
    std::lock_guard<std::mutex> lock(init.mutex);
    if (init.count == 0) return Fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialized (call aclInit first)");
    ReleaseAllDevices();
    init.count = 0;
    return ACL_SUCCESS;
}

aclError aclFinalizeReference(uint64_t *refCount) {
    if (aclfaSimShouldFail("aclFinalizeReference")) return ACL_ERROR_FAILURE;
    InitState &init = *g_init;
    std::lock_guard<std::mutex> lock(init.mutex);
    if (init.count == 0) {
        return Fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalizeReference: not initialized (call aclInit first)");
    }
    if (--init.count == 0) ReleaseAllDevices();
    if (refCount != nullptr) *refCount = static_cast<uint64_t>(init.count);
    return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion) {
    if (majorVersion == nullptr || minorVersion == nullptr || patchVersion == nullptr) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: majorVersion, minorVersion and patchVersion must not be NULL");
    }
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion *version) {
    if (version == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: version is NULL");
    if (name < ACL_PKG_NAME_CANN || name > ACL_PKG_NAME_DRIVER) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: name %d is not an aclCANNPackageName (0..7)",
                    static_cast<int>(name));
    }
    memset(version, 0, sizeof(*version));
    snprintf(version->version, sizeof(version->version), "%s", kSimVersion);
    snprintf(version->majorVersion, sizeof(version->majorVersion), "%d", ACL_MAJOR_VERSION);
    snprintf(version->minorVersion, sizeof(version->minorVersion), "%d", ACL_MINOR_VERSION);
    snprintf(version->releaseVersion, sizeof(version->releaseVersion), "%d", ACL_PATCH_VERSION);
    snprintf(version->patchVersion, sizeof(version->patchVersion), "sim");
    return ACL_SUCCESS;
}

aclError aclsysGetVersionStr(char *pkgName, char *versionStr) {
    // Package names as the directories of ${INSTALL_DIR}/share/info, plus driver/firmware.
    static const char *const kPackages[] = {"runtime", "compiler", "hccl", "toolkit", "opp",
                                            "opp_kernel", "driver", "firmware", "cann"};
    if (pkgName == nullptr || versionStr == nullptr) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclsysGetVersionStr: pkgName and versionStr must not be NULL");
    }
    for (const char *package : kPackages) {
        if (strcmp(package, pkgName) == 0) {
            snprintf(versionStr, ACL_PKG_VERSION_MAX_SIZE, "%s", kSimVersion);
            return ACL_SUCCESS;
        }
    }
    return Fail(ACL_ERROR_INVALID_FILE, "aclsysGetVersionStr: no version.info for package \"%s\" in the simulator",
                pkgName);
}

}  // extern "C"
