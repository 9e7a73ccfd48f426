/*
 * acl_fa_sim_hccl.h -- extension functions of the simulator's libhccl.so (NOT part of CANN's
 * ABI): what crossed each link and the link model that turns it into modeled time.
 *
 * Link model: ranks whose devices share a server talk over the chip's intra-server
 * interconnect (HCCS on Atlas A2/A3), others over the scale-out network (RoCE); a message of
 * b bytes takes latencyUs * 1e-6 + b / (bandwidthGBs * 1e9) seconds, modeled, with each figure
 * sourced or marked assumed in docs/hccl.md. The simulated devices of all ranks are
 * numbered as on one host, so "server" = device id / devicesPerServer.
 */
#pragma once

#include <stdint.h>

#include <hccl/hccl_types.h>  /* <>: the include path decides (the ABI test puts the real one first) */

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

typedef struct aclfaSimHcclLink {
    char kind[16];         /* "HCCS", "RoCE", "PCIe" */
    double bandwidthGBs;   /* per direction, 1e9 bytes/s, modeled */
    double latencyUs;      /* per message, modeled */
    uint32_t devicesPerServer;
    uint32_t reserved;
} aclfaSimHcclLink;

typedef struct aclfaSimHcclLinkStats {
    uint64_t bytes;          /* payload bytes sent over the link since the last reset */
    uint64_t messages;       /* messages (a zero-byte barrier message counts) */
    double modeledSeconds;   /* sum over messages of the link model's time */
    aclfaSimHcclLink link;
} aclfaSimHcclLinkStats;

/* The link between two devices of the current chip (ACL_FA_SIM_SOC). */
HcclResult aclfaSimHcclGetLinkModel(int32_t srcDevice, int32_t dstDevice, aclfaSimHcclLink *link);

/* Traffic from srcRank to dstRank of the comm's clique (any rank may ask about any link). */
HcclResult aclfaSimHcclGetLinkStats(HcclComm comm, uint32_t srcRank, uint32_t dstRank,
                                    aclfaSimHcclLinkStats *stats);

/* Zeroes the counters of the links leaving this comm's rank. */
HcclResult aclfaSimHcclResetLinkStats(HcclComm comm);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
