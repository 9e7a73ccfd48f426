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
extern HcclResult HcclCommDestroy(HcclComm comm);

extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

extern HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                HcclReduceOp op, HcclComm comm, aclrtStream stream);
/* recvBuf holds nRanks * sendCount elements, rank i's at i * sendCount. */
extern HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                HcclComm comm, aclrtStream stream);
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
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
