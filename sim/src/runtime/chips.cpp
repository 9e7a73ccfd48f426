// chips.cpp -- the simulated SoC catalogue and the environment configuration
// (ACL_FA_SIM_SOC, ACL_FA_SIM_HBM_BYTES, ACL_FA_SIM_DEVICE_COUNT).
//
// Numbers: docs/cann-facts.md#chips. UB/L1 are what PlatformAscendC::GetCoreMemSize answers
// (910B family: 256 B reserved). Clocks marked "derived" are fp16 peak / (cores * 8192
// FLOP/cycle); bandwidths and capacities marked "assumed" have no first-hand source and only
// feed the simulator's traffic model and its default HBM capacity.
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <strings.h>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// One AI Core's [AICoreMemoryRates] in bytes per cycle, from CANN 8.1.RC1's
// data/platform_config/<SoC>.ini (docs/chips.md "Memory rates"): ddr, l2, l2 read, l2 write,
// L1 -> L0A, L1 -> L0B, L0C -> UB, UB -> L2. The 910B1-4 files and Ascend910_9391.ini (A3) agree.
#define RATES_910B 32, 110, 110, 86, 512, 256, 256, 64
#define RATES_310P3 17, 114, 114, 114, 512, 256, 512, 114

// clang-format off
const aclfaSimChip kChips[] = {
    // name, shortSoc, socVersion, npuArch, aic, aiv, coupled,
    // ub, l1, l0a, l0b, l0c, l2, hbm, GB/s, fp16 TFLOPS, MHz, L2 line, reserved, memory rates
    // (910A: no platform file in CANN 8.1.RC1; its rates are the 910B's, assumed)
    {"Ascend910B1", "ascend910b", 1, 2201, 24, 48, 0,
     196352, 524032, 64 * KiB, 64 * KiB, 128 * KiB, 192 * MiB, 64 * GiB,
     1600.0 /* assumed */, 363.7, 1850.0, 512 /* assumed */, 0, RATES_910B},
    {"Ascend910B2", "ascend910b", 1, 2201, 24, 48, 0,
     196352, 524032, 64 * KiB, 64 * KiB, 128 * KiB, 192 * MiB, 64 * GiB,
     1500.0, 353.9, 1800.0, 512 /* assumed */, 0, RATES_910B},
    {"Ascend910B3", "ascend910b", 1, 2201, 20, 40, 0,
     196352, 524032, 64 * KiB, 64 * KiB, 128 * KiB, 192 * MiB, 64 * GiB /* assumed */,
     1500.0 /* assumed */, 294.9, 1800.0 /* derived */, 512 /* assumed */, 0, RATES_910B},
    {"Ascend910B4", "ascend910b", 1, 2201, 20, 40, 0,
     196352, 524032, 64 * KiB, 64 * KiB, 128 * KiB, 96 * MiB, 32 * GiB,
     800.0 /* assumed */, 245.8, 1500.0 /* derived */, 512 /* assumed */, 0, RATES_910B},
    {"Ascend910_93", "ascend910_93", 1, 2201, 24, 48, 0,
     196352, 524032, 64 * KiB, 64 * KiB, 128 * KiB, 192 * MiB, 64 * GiB,
     1600.0 /* assumed */, 353.9, 1800.0, 512 /* assumed */, 0, RATES_910B},
    // Coupled cores: aicNum counts AI Cores, aivNum the extra vector cores.
    {"Ascend910A", "ascend910", 0, 1001, 32, 0, 1,
     256 * KiB, 1024 * KiB, 64 * KiB, 64 * KiB, 256 * KiB, 32 * MiB, 32 * GiB /* assumed */,
     1200.0 /* assumed */, 256.0, 976.6 /* derived */, 128 /* assumed */, 0, RATES_910B /* assumed */},
    // One 310P3 chip: LPDDR4X, half of the Duo card's 408 GB/s; 24 GiB as a 300I Pro card.
    {"Ascend310P3", "ascend310p", 2, 2002, 8, 7, 1,
     256 * KiB, 1024 * KiB, 64 * KiB, 64 * KiB, 256 * KiB, 16 * MiB, 24 * GiB /* assumed */,
     204.0, 70.0, 1068.0 /* derived */, 128 /* assumed */, 0, RATES_310P3},
};
// clang-format on
#undef RATES_910B
#undef RATES_310P3
constexpr uint32_t kChipCount = sizeof(kChips) / sizeof(kChips[0]);
constexpr const char *kDefaultChip = "Ascend910B2";

// Simulated devices when ACL_FA_SIM_DEVICE_COUNT is unset: an 8-device host, as an Atlas 800T A2
// server carries 8 NPUs, so `flash_attention(device=3)` and the parallel ops find the same devices
// whether or not libhccl.so has been loaded yet (docs/simulator.md#settings).
constexpr uint32_t kDefaultDeviceCount = 8;

struct Config {
    aclfaSimChip chip;  // the catalogue row with hbmBytes possibly overridden
    uint32_t deviceCount = kDefaultDeviceCount;
};

std::mutex g_configMutex;
Config g_config;
// Device count when ACL_FA_SIM_DEVICE_COUNT is unset (aclfaSimSetDefaultDeviceCount).
std::atomic<uint32_t> g_defaultDeviceCount{kDefaultDeviceCount};  // guarded by g_configMutex for writes; read as a whole under it too

const aclfaSimChip *FindChip(const char *name) {
    for (const aclfaSimChip &chip : kChips) {
        if (strcasecmp(chip.name, name) == 0) return &chip;
    }
    return nullptr;
}

std::string ChipNames() {
    std::string names;
    for (const aclfaSimChip &chip : kChips) {
        if (!names.empty()) names += ", ";
        names += chip.name;
    }
    return names;
}

// Parses a positive decimal integer; false on anything else.
bool ParseUnsigned(const char *text, uint64_t *value) {
    if (text == nullptr || *text == '\0' || *text == '-' || *text == '+') return false;
    errno = 0;
    char *end = nullptr;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *value = parsed;
    return true;
}

// Builds the configuration the environment asks for; on a bad value fills *error.
bool ConfigFromEnv(Config *config, std::string *error) {
    const char *socEnv = getenv("ACL_FA_SIM_SOC");
    const char *socName = (socEnv != nullptr && *socEnv != '\0') ? socEnv : kDefaultChip;
    const aclfaSimChip *chip = FindChip(socName);
    if (chip == nullptr) {
        *error = std::string("ACL_FA_SIM_SOC=\"") + socName + "\" is not a simulated SoC; known: " + ChipNames();
        return false;
    }
    config->chip = *chip;

    const char *hbmEnv = getenv("ACL_FA_SIM_HBM_BYTES");
    if (hbmEnv != nullptr && *hbmEnv != '\0') {
        uint64_t bytes = 0;
        if (!ParseUnsigned(hbmEnv, &bytes) || bytes == 0) {
            *error = std::string("ACL_FA_SIM_HBM_BYTES=\"") + hbmEnv +
                     "\" must be a positive decimal number of bytes";
            return false;
        }
        config->chip.hbmBytes = bytes;
    }

    config->deviceCount = g_defaultDeviceCount.load();
    const char *countEnv = getenv("ACL_FA_SIM_DEVICE_COUNT");
    if (countEnv != nullptr && *countEnv != '\0') {
        uint64_t count = 0;
        if (!ParseUnsigned(countEnv, &count) || count == 0 || count > kMaxDevices) {
            *error = std::string("ACL_FA_SIM_DEVICE_COUNT=\"") + countEnv + "\" must be an integer in [1, " +
                     std::to_string(kMaxDevices) + "]";
            return false;
        }
        config->deviceCount = static_cast<uint32_t>(count);
    }
    return true;
}

// The configuration at library load: the environment's, or the defaults when it is invalid
// (aclInit then reports the bad value).
struct LoadTimeConfig {
    LoadTimeConfig() {
        Config config;
        std::string error;
        if (!ConfigFromEnv(&config, &error)) {
            config.chip = *FindChip(kDefaultChip);
            config.deviceCount = kDefaultDeviceCount;
        }
        g_config = config;
    }
} g_loadTimeConfig;

}  // namespace

aclError LoadConfigFromEnv() {
    Config config;
    std::string error;
    if (!ConfigFromEnv(&config, &error)) return Fail(ACL_ERROR_INVALID_PARAM, "%s", error.c_str());
    std::lock_guard<std::mutex> lock(g_configMutex);
    g_config = config;
    return ACL_SUCCESS;
}

uint32_t DeviceCount() {
    std::lock_guard<std::mutex> lock(g_configMutex);
    return g_config.deviceCount;
}

uint64_t HbmCapacityBytes() {
    std::lock_guard<std::mutex> lock(g_configMutex);
    return g_config.chip.hbmBytes;
}

void LockConfig() { g_configMutex.lock(); }
void UnlockConfig() { g_configMutex.unlock(); }

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

// The current chip row is only rewritten when aclInit takes the first reference, before any
// device work of the process, so handing out a pointer to it is safe.
const aclfaSimChip *aclfaSimGetChip(void) { return &g_config.chip; }

uint32_t aclfaSimGetChipCount(void) { return kChipCount; }

const aclfaSimChip *aclfaSimGetChipAt(uint32_t index) { return index < kChipCount ? &kChips[index] : nullptr; }

const aclfaSimChip *aclfaSimFindChip(const char *name) { return name == nullptr ? nullptr : FindChip(name); }

const char *aclrtGetSocName() { return g_config.chip.name; }

void aclfaSimSetDefaultDeviceCount(uint32_t count) {
    if (count == 0 || count > kMaxDevices) return;
    std::lock_guard<std::mutex> lock(g_configMutex);
    if (count <= g_defaultDeviceCount.load()) return;
    g_defaultDeviceCount.store(count);
    const char *countEnv = getenv("ACL_FA_SIM_DEVICE_COUNT");
    if ((countEnv == nullptr || *countEnv == '\0') && g_config.deviceCount < count) g_config.deviceCount = count;
}

aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value) {
    if (aclfaSimShouldFail("aclGetDeviceCapability")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (value == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclGetDeviceCapability: value is NULL");
    if (deviceId >= DeviceCount()) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclGetDeviceCapability: deviceId %u is out of range [0, %u)",
                    deviceId, DeviceCount());
    }
    const aclfaSimChip &chip = g_config.chip;
    switch (deviceInfo) {
        case ACL_DEVICE_INFO_AI_CORE_NUM: *value = chip.aicNum; return ACL_SUCCESS;
        case ACL_DEVICE_INFO_VECTOR_CORE_NUM: *value = chip.aivNum; return ACL_SUCCESS;
        case ACL_DEVICE_INFO_L2_SIZE: *value = static_cast<int64_t>(chip.l2Bytes); return ACL_SUCCESS;
        default:
            return Fail(ACL_ERROR_INVALID_PARAM,
                        "aclGetDeviceCapability: deviceInfo %d is not an aclDeviceInfo value (0, 1, 2)",
                        static_cast<int>(deviceInfo));
    }
}

}  // extern "C"
