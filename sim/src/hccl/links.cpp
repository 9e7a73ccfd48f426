// links.cpp -- the interconnect model: which link joins two devices, its bandwidth and latency.
// Every figure is "assumed" unless docs/hccl.md gives its source; they feed only the
// modeled seconds of aclfaSimHcclGetLinkStats, never the simulator's behaviour.
#include <cstring>
#include <strings.h>

#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

struct Interconnect {
    const char *chipPrefix;     // matched case-insensitively against the current chip's name
    uint32_t devicesPerServer;  // devices joined by the intra-server link
    aclfaSimHcclLink intra;
    aclfaSimHcclLink inter;
};

// clang-format off
const Interconnect kInterconnects[] = {
    // Atlas 800T A2: 8 x 910B, HCCS full mesh (assumed 56 GB/s per direction per peer link,
    // 2 us per message); scale-out 200 Gb/s RoCE per NPU (assumed 25 GB/s, 10 us).
    {"Ascend910B", 8, {"HCCS", 56.0, 2.0, 8, 0}, {"RoCE", 25.0, 10.0, 8, 0}},
    // Atlas A3 server: 16 devices (8 chips x 2 dies); assumed 56 GB/s HCCS per peer link as A2,
    // RoCE 400 Gb/s per device (assumed 50 GB/s, 10 us).
    {"Ascend910_93", 16, {"HCCS", 56.0, 2.0, 16, 0}, {"RoCE", 50.0, 10.0, 16, 0}},
    // Atlas 800 (910A): two groups of 4 chips on HCCS (assumed 30 GB/s), PCIe between groups
    // (assumed 16 GB/s, 5 us).
    {"Ascend910A", 4, {"HCCS", 30.0, 2.0, 4, 0}, {"PCIe", 16.0, 5.0, 4, 0}},
    // 310P cards: PCIe only (assumed 16 GB/s, 5 us).
    {"Ascend310P", 1, {"PCIe", 16.0, 5.0, 1, 0}, {"PCIe", 16.0, 5.0, 1, 0}},
};
// clang-format on

}  // namespace

namespace {

// The interconnect row of the current chip (the first row when none matches).
const Interconnect &CurrentInterconnect() {
    const aclfaSimChip *chip = aclfaSimGetChip();
    for (const Interconnect &row : kInterconnects) {
        if (chip != nullptr && strncasecmp(chip->name, row.chipPrefix, strlen(row.chipPrefix)) == 0) return row;
    }
    return kInterconnects[0];
}

}  // namespace

aclfaSimHcclLink LinkBetween(int32_t srcDevice, int32_t dstDevice) {
    const Interconnect &found = CurrentInterconnect();
    const bool sameServer = srcDevice / static_cast<int32_t>(found.devicesPerServer) ==
                            dstDevice / static_cast<int32_t>(found.devicesPerServer);
    return sameServer ? found.intra : found.inter;
}

aclfaSimHcclLink LinkBetweenRanks(const Control &control, uint32_t src, uint32_t dst) {
    // Ranks on different (simulated) servers: the scale-out link, whatever their device ids
    // (each server numbers its devices from 0). One server: by device id, as LinkBetween.
    if (strncmp(control.rankServer[src], control.rankServer[dst], kServerIdBytes) != 0) {
        return CurrentInterconnect().inter;
    }
    return LinkBetween(control.rankDevice[src], control.rankDevice[dst]);
}

}  // namespace hccl
}  // namespace acl_fa_sim
