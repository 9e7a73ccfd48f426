// ascendc_sim/core.h -- the per-core state of the kernel engine and the calls the
// Ascend C headers make into it (libascendc_sim.so). Simulator-internal: kernels never
// include this directly; kernel_operator.h and lib/matmul_intf.h do.
//
// Every Ascend C API call first calls Enter() (O(1)): it finds the calling thread's
// simulated core and stops this core when another core of the launch has failed.
// A broken hardware rule raises Violation(), which unwinds the core's kernel body back
// into the launcher (acl_fa_sim::LaunchKernel) as a C++ exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "acl_fa_sim_kernel.h"

namespace acl_fa_sim {
namespace kernel {

// One on-chip memory of a core: a host buffer of the chip's size and a bump allocator.
// Offsets are the local "physical addresses" (GetPhyAddr) of tensors placed in it.
struct Arena {
    uint8_t *base = nullptr;
    uint64_t capacity = 0;   // bytes, as the chip has them
    uint64_t used = 0;       // bytes handed out by TPipe::InitBuffer since the last Reset
    uint64_t highWater = 0;  // max of used over the launch
};

// Event flags of one core: pending SetFlag count per (HardEvent, event id).
constexpr int kMaxHardEvents = 40;
constexpr int kEventIdsPerEvent = 8;  // EVENT_ID0..EVENT_ID7

// Cross-core state of one launch (SyncAll barrier), defined by the engine.
struct CrossCore;
struct OpTrace;  // ascendc_sim/optrace.h

struct CoreContext {
    bool isAic = false;
    bool coupled = false;       // cube and vector in one core (910A, 310P): UB and L1 both local
    int32_t npuArch = 2201;     // __NPU_ARCH__ of the chip: 2201 (910B, 910_93), 2002 (310P), 1001 (910A)
    const char *socName = "";   // the chip, for messages
    uint32_t blockIdx = 0;      // GetBlockIdx(): AIC [0, blockDim), AIV [0, ratio * blockDim)
    uint32_t blockNum = 0;      // GetBlockNum(): blockDim of the launch
    uint32_t subBlockIdx = 0;   // GetSubBlockIdx(): AIV index inside its AIC group
    uint32_t taskRatio = 1;     // GetTaskRatio(): AIVs per AIC (MIX 1:2 -> 2)
    uint32_t kernelType = 0;    // KernelMetaType of the launch
    uint64_t tilingKey = 0;     // TILING_KEY_IS
    uint8_t *sysWorkspace = nullptr;  // GetSysWorkSpacePtr()
    uint64_t sysWorkspaceBytes = 0;   // GetLibApiWorkSpaceSize() of the chip
    Arena ub, l1;
    uint64_t l0aBytes = 0, l0bBytes = 0, l0cBytes = 0;
    aclfaSimCoreStats *stats = nullptr;      // this core's counters (only this thread writes)
    aclfaSimCoreStats *cubeStats = nullptr;  // where Matmul work is counted (the AIC of the group); atomic adds
    uint16_t traceCore = 0;                  // aclfaSimGmAccess::core of this core
    uint8_t eventPending[kMaxHardEvents][kEventIdsPerEvent] = {};
    void *currentPipe = nullptr;             // the most recently constructed TPipe (GetTPipePtr)
    const volatile bool *abortFlag = nullptr;  // set when another core of the launch failed
    bool atomicAdd = false;                  // SetAtomicAdd<T>() in effect (until SetAtomicNone)
    int atomicType = -1;                     // TypeTag of that T
    CrossCore *crossCore = nullptr;          // the launch's barrier
    uint32_t launchIndex = 0;                // this core's index among the launch's cores
    OpTrace *opTrace = nullptr;              // instruction trace of this core; null when not recording
    // GetHcclContext<index>() (index 0, 1): the communication contexts the launch was given
    // (SetLaunchHcclContext); SetHcclContext<index> replaces this core's copy.
    uint8_t *hcclContext[2] = {nullptr, nullptr};
};

// Thrown by a core that stops because another core failed; carries no message.
struct CoreStopped {};

// The calling thread's core; nullptr outside a launch. Every API call reads it, so it is an
// initial-exec __thread pointer (in the static TLS block; __thread has no dynamic initializer,
// so no TLS wrapper call): the kernel libraries read it inline, without a call into the engine
// or __tls_get_addr. glibc keeps static TLS room for libraries loaded later by dlopen, as the
// engine and the kernels are.
extern __thread CoreContext *tlsCurrentCore __attribute__((tls_model("initial-exec")));
inline CoreContext *CurrentCore() { return tlsCurrentCore; }

// Describes the core, e.g. "AIV 3 (block 1, sub-block 1)".
std::string DescribeCore(const CoreContext &core);

// Raises a rule violation on the current core: "rule <rule> violated on <core> in <api>: <detail>".
[[noreturn]] void Violation(const char *rule, const char *api, const std::string &detail);

// The calling core is about to wait for work outside its launch (Hccl::Wait): the cores of the
// launch not started yet run on another host thread meanwhile (cross_core.cpp).
void LendHostThread(CoreContext &core);

// Raises a rule violation for an instruction, data path or dtype `what` that the current chip's
// architecture does not have: "rule '<rule>' violated on <core> in <api>: <what> does not exist
// on <soc> (arch <npuArch>)<why>".
[[noreturn]] void MissingOnArch(const CoreContext &core, const char *rule, const char *api, const std::string &what,
                                const std::string &why = "");

// Called outside a launch (no current core).
[[noreturn]] void NoCore(const char *api);

// Entry of every API call: returns the current core, stops it when the launch is failing.
inline CoreContext &Enter(const char *api) {
    CoreContext *core = CurrentCore();
    if (core == nullptr) NoCore(api);
    if (*core->abortFlag) throw CoreStopped{};
    return *core;
}

// Checks that [addr, addr + bytes) lies in [lo, hi) of a GlobalTensor, counts the bytes
// and appends to the GM trace when enabled. `what` names the API for messages.
void GmAccess(CoreContext &core, const char *api, const void *addr, uint64_t bytes, const void *lo,
              const void *hi, bool isWrite);

// Bounds check only (no counting): [addr, addr + bytes) inside [lo, hi).
void GmCheck(CoreContext &core, const char *api, const void *addr, uint64_t bytes, const void *lo, const void *hi);

// SetGlobalBuffer check: [ptr, ptr + bytes) must lie inside one live device allocation.
// bytes == 0 (size unknown) checks only the start. Returns the end of the usable range
// (the end of the allocation when bytes == 0).
const uint8_t *CheckGlobalBuffer(CoreContext &core, const void *ptr, uint64_t bytes);

// Counts work done for Matmul on the core's cube counters (AIC of the group).
void CountCube(CoreContext &core, uint64_t macs, uint64_t gmReadBytes, uint64_t gmWriteBytes,
               uint64_t l1Bytes);

// Records a Matmul operand or result for the trace on behalf of the cube (the group's AIC):
// `rows` rows of `rowBytes` bytes, `strideBytes` apart in GM. Only the bytes of the rows are
// recorded (one record when the rows are contiguous, else one per row): a strided operand,
// such as one head's rows of a BSND tensor, does not touch the other heads' rows between them.
void TraceCube(CoreContext &core, const void *addr, uint64_t rows, uint64_t rowBytes, uint64_t strideBytes,
               bool isWrite);

// Bulk conversions with hardware rounding (round to nearest, ties to even), vectorized
// on CPUs that have F16C / AVX-512; used by Cast, the Matmul and the GEMM packing.
void ConvertF32ToF16(const float *src, uint16_t *dst, size_t n);
void ConvertF16ToF32(const uint16_t *src, float *dst, size_t n);
void ConvertF32ToBf16(const float *src, uint16_t *dst, size_t n);
void ConvertBf16ToF32(const uint16_t *src, float *dst, size_t n);

// fp32 GEMM: C[m, n] (row stride ldc) = A[m, k] (row stride lda) * B[k, n] (row stride ldb),
// accumulate into C when `accumulate`; with transB, b holds B^T [n, k] (row stride ldb). The
// products and their order are the same either way. Cache-blocked, AVX-512 / AVX2 / generic by CPU.
void Sgemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *c, int ldc,
           bool accumulate, bool transB = false);

}  // namespace kernel
}  // namespace acl_fa_sim
