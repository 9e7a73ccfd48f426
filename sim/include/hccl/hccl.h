/*
 * hccl/hccl.h -- the subset of CANN's HCCL API that acl-fa uses, mirrored from the real header
 * (torch-npu wheel: torch_npu/include/third_party/hccl/inc/hccl/hccl.h): names, parameter types
 * and order as there. Implemented by the simulator's libhccl.so (sim/src/hccl/).
 *
 * Semantics the simulator keeps (and the real library documents): every collective and
 * point-to-point call is asynchronous -- it enqueues a task on `stream` and returns; the task
 * completes only when the matching calls of every rank involved have met. A comm belongs to the
 * device current when it was created; its calls take streams of that device.
 */
#pragma once

#include <acl/acl.h>
#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Root info for HcclCommInitRootInfo: made once (by any one rank), passed to all ranks. */
extern HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
extern HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                       HcclComm *comm);
/* One process, one comm per device: comms[i] is rank i on devices[i]. */
extern HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);
/* From a rank table file (JSON, version 1.0 or 1.2: server_list[].device[] with device_id,
 * device_ip, rank_id): rank `rank` of the table, on the device current on the calling thread,
 * which must be the table's device_id of that rank (aclrtSetDevice first). */
extern HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);
extern HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                                HcclCommConfig *config, HcclComm *comm);
extern HcclResult HcclCommDestroy(HcclComm comm);

extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
/* The comm's name (at most 128 bytes with its NUL), the same on every rank: what an MC2 op's group
 * attr takes ("通过Hccl提供的接口HcclGetCommName获取，其中commName即为group", ops-transformer mc2 docs). */
extern HcclResult HcclGetCommName(HcclComm comm, char *commName);

extern HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                HcclReduceOp op, HcclComm comm, aclrtStream stream);
/* recvBuf holds nRanks * sendCount elements, rank i's at i * sendCount. */
extern HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                HcclComm comm, aclrtStream stream);
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
/* count elements of buf on rank `root` are copied into buf on every other rank. */
extern HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                aclrtStream stream);
extern HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                           HcclComm comm, aclrtStream stream);
extern HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                           HcclComm comm, aclrtStream stream);
/* Block j (sendCount elements at j * sendCount) of sendBuf goes to rank j; block i of recvBuf
 * comes from rank i. */
extern HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                               const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                               HcclComm comm, aclrtStream stream);
/* sendCounts/sdispls/recvCounts/rdispls: uint64_t arrays of nRanks entries, in elements of
 * sendType/recvType: sendCounts[j] elements at sdispls[j] go to rank j; recvCounts[i] elements
 * from rank i land at rdispls[i]. */
extern HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                                const void *rdispls, HcclDataType recvType, HcclComm comm, aclrtStream stream);
extern const char *HcclGetErrorString(HcclResult code);
/* The items run together: no order among them (a ring's send and receive cannot deadlock). */
extern HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
/* As the real header's inline helper: the config's header words and every field "not set". */
inline void HcclCommConfigInit(HcclCommConfig *config)
{
    if (config == nullptr) {
        return;
    }
    typedef struct {
        size_t size;
        uint32_t magicWord;
        uint32_t version;
        uint64_t reserved;
    } configInfo_t;
    configInfo_t *info = (configInfo_t *)config;
    info->size = sizeof(HcclCommConfig);
    info->magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
    info->version = HCCL_COMM_CONFIG_VERSION;
    info->reserved = 0;
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}
#endif
