/* acl_fa_sim_hccl_kernel.h -- the simulator's kernel-side HCCL server (not part of CANN).
 *
 * On the chip an MC2 kernel's Hccl client (lib/hccl/hccl.h) writes messages into the
 * communication context's message area and the HCCL server (an AICPU kernel) moves the data.
 * In the simulator the context GetHcclContext<index>() returns is an aclfaSimHcclKernelContext
 * made by the simulated libhccl for one communicator and one launch; the client reaches the
 * server through the table of functions the context carries, so a kernel library needs no link
 * to libhccl.so. Made by aclfaSimHcclKernelContextCreate, handed to the launch with
 * acl_fa_sim::SetLaunchHcclContext, destroyed after the launch (which waits for its tasks). */
#ifndef ACL_FA_SIM_HCCL_KERNEL_H
#define ACL_FA_SIM_HCCL_KERNEL_H

#include <stdint.h>

/* (No hccl/hccl_types.h here: kernels include this header through lib/hccl/hccl.h, whose
 * AscendC::HcclDataType enumerators would clash with the host enum's under `using namespace
 * AscendC`. The comm is the host API's HcclComm, a void *; results are HcclResult values.) */

#ifdef __cplusplus
extern "C" {
#endif

/* One collective the client prepared (values of AscendC::HcclCMDType / HcclDataType). */
typedef struct aclfaSimHcclKernelTask {
    uint32_t opType;       /* HcclCMDType: HCCL_CMD_ALLGATHER 6, HCCL_CMD_ALLTOALLV 8, HCCL_CMD_ALLTOALL 10 */
    uint32_t dataType;     /* HcclDataType */
    uint8_t *sendBuf;
    uint8_t *recvBuf;
    uint64_t count;        /* AllGather: sendCount; AlltoAll: dataCount (elements per peer) */
    uint64_t strideCount;  /* 0: blocks packed (count apart) */
    uint32_t repeat;       /* >= 1: tasks on consecutive memory */
    /* AlltoAllV (HCCL_CMD_ALLTOALLV 8) only: rankDim uint64 entries each, in elements; read at
     * prepare. Null for the other collectives. */
    const uint64_t *sendCounts;
    const uint64_t *sdispls;
    const uint64_t *recvCounts;
    const uint64_t *rdispls;
} aclfaSimHcclKernelTask;

typedef struct aclfaSimHcclKernelServer aclfaSimHcclKernelServer;

typedef struct aclfaSimHcclKernelContext {
    uint64_t magic;  /* ACLFA_SIM_HCCL_KERNEL_CONTEXT_MAGIC */
    uint32_t rankId;
    uint32_t rankDim;
    aclfaSimHcclKernelServer *server;
    /* Prepares task `handle` (the n-th Prepare of the launch, from 0): checks it against the
     * communicator and returns 0, or -1 with the reason in err. Called once per handle. */
    int32_t (*prepare)(aclfaSimHcclKernelServer *server, int32_t handle, const aclfaSimHcclKernelTask *task,
                       char *err, uint64_t errLen);
    /* Starts task `handle` on the server's thread; returns its modeled link seconds (the
     * slowest peer's messages, latency + bytes / bandwidth each). */
    double (*commit)(aclfaSimHcclKernelServer *server, int32_t handle);
    /* Waits for task `handle` (HCCL_EXEC_TIMEOUT, or while *abortFlag stays false): 0 when it
     * completed, else -1 with the failure in err. */
    int32_t (*wait)(aclfaSimHcclKernelServer *server, int32_t handle, const volatile bool *abortFlag, char *err,
                    uint64_t errLen);
    /* 1 when task `handle` completed, 0 while it runs, -1 when it failed. */
    int32_t (*query)(aclfaSimHcclKernelServer *server, int32_t handle);
} aclfaSimHcclKernelContext;

#define ACLFA_SIM_HCCL_KERNEL_CONTEXT_MAGIC 0x6b636c6363686b31ULL

#pragma GCC visibility push(default)
/* A context for one launch of a kernel communicating over `comm` (the calling thread's device
 * must be the comm's). */
int32_t aclfaSimHcclKernelContextCreate(void *comm, aclfaSimHcclKernelContext **context);
/* What CANN's runtime does for an MC2 op's HCCL group attr: the live comm of this process named
 * `group` (HcclGetCommName) on `device`, in *comm; HCCL_E_NOT_FOUND when there is none. */
int32_t aclfaSimHcclCommForGroup(const char *group, int32_t device, void **comm);
/* Waits for the context's committed tasks and frees it; returns HCCL_E_INTERNAL when one of
 * them failed (aclGetRecentErrMsg says why). */
int32_t aclfaSimHcclKernelContextDestroy(aclfaSimHcclKernelContext *context);
#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
