/*
 * cffi declarations of the simulator's libhccl.so extension functions (NOT part of CANN's ABI):
 * the C part of sim/include/acl_fa_sim_hccl.h. Parsed after hccl.h; only called when the
 * backend is "sim". tests/runtime/test_abi.py compiles them against that header.
 */
typedef struct aclfaSimHcclLink {
    char kind[16];
    double bandwidthGBs;
    double latencyUs;
    uint32_t devicesPerServer;
    uint32_t reserved;
} aclfaSimHcclLink;

typedef struct aclfaSimHcclLinkStats {
    uint64_t bytes;
    uint64_t messages;
    double modeledSeconds;
    aclfaSimHcclLink link;
} aclfaSimHcclLinkStats;

HcclResult aclfaSimHcclGetLinkModel(int32_t srcDevice, int32_t dstDevice, aclfaSimHcclLink *link);
HcclResult aclfaSimHcclGetLinkStats(HcclComm comm, uint32_t srcRank, uint32_t dstRank, aclfaSimHcclLinkStats *stats);
HcclResult aclfaSimHcclResetLinkStats(HcclComm comm);
