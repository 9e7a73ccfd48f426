// ring_attention.cpp -- kernel entry of the RingAttention op: one step of ring attention with the
// exchange fused into the kernel (docs/hccl.md, "Communication fused into the kernel").
//
//   rank r holds query chunk Q_r and, at this step, the K/V chunk of rank s; the kernel
//   1. commits two AlltoAllV tasks through the kernel-side HCCL client (lib/hccl/hccl.h): K and V
//      to rank r + 1 (only sendCounts[r + 1] non-zero) and the next step's K and V from rank r - 1
//      (only recvCounts[r - 1] non-zero) into key_next / value_next;
//   2. computes softmax(scale Q_r K_s^T [+ causal mask]) V_s and its LSE with the FlashAttention
//      kernel (flash_attention_entry.h) while the server moves the bytes;
//   3. waits for both tasks, so the launch ends with the next chunk in hand.
// The host merges the steps' (O, LSE) partials (AttentionLseMerge, docs/lse_merge.md).
//
// AlltoAllV, not Send/Recv: the kernel-side client has no point-to-point call; AlltoAllV with one
// non-zero block per direction is the ring's exchange. It exists on Atlas A3 (and Ascend 950),
// not on Atlas A2 (AlltoAllV.md, 产品支持情况), so the op is registered for ascend910_93 only. On
// A2 the same exchange would be a write into the neighbour's window (GetWindowsInAddr, within a
// server) and BatchWrite between servers; not built.
#include <cstddef>  // offsetof

#include "flash_attention_entry.h"  // kernel_operator.h, lib/matmul_intf.h, the forward's instances
#include "lib/hccl/hccl.h"
#include "ring_attention_tiling.h"

namespace ring_attn {

// Largest communication domain of the A3 kernel-side client (AlltoAllV.md: 128 cards).
constexpr uint32_t kMaxRanks = 128;

// Commits the exchange of this step's K and V (two AlltoAllV tasks) into handles[0], handles[1].
__aicore__ inline void CommitExchange(AscendC::Hccl<> &hccl, GM_ADDR key, GM_ADDR value, GM_ADDR keyNext,
                                      GM_ADDR valueNext, uint64_t elements, AscendC::HcclDataType type,
                                      AscendC::HcclHandle handles[2])
{
    const uint32_t rank = hccl.GetRankId();
    const uint32_t ranks = hccl.GetRankDim();
    uint64_t sendCounts[kMaxRanks] = {};
    uint64_t recvCounts[kMaxRanks] = {};
    uint64_t displs[kMaxRanks] = {};  // every block at offset 0 of its buffer
    sendCounts[(rank + 1) % ranks] = elements;
    recvCounts[(rank + ranks - 1) % ranks] = elements;
    handles[0] = hccl.AlltoAllV<true>(key, sendCounts, displs, type, keyNext, recvCounts, displs, type);
    handles[1] = hccl.AlltoAllV<true>(value, sendCounts, displs, type, valueNext, recvCounts, displs, type);
}

// The step's attention: the FlashAttention kernel's instance for the tiling key (float16 or
// bfloat16; fixed lengths, no mask, no dropout, as FlashAttention V1).
__aicore__ inline void RunStepAttention(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                                        GM_ADDR softmax_lse, GM_ADDR workspace,
                                        const FlashAttentionTilingData &tilingData)
{
    GM_ADDR actual_seq_qlen = nullptr;
    GM_ADDR actual_seq_kvlen = nullptr;
    GM_ADDR atten_mask = nullptr;
    GM_ADDR dropout_mask = nullptr;
    FA_CASES_FOR_DTYPE(0, half)
    FA_CASES_FOR_DTYPE(FA_KEY_BF16, bfloat16_t)
}

}  // namespace ring_attn

extern "C" __global__ __aicore__ void ring_attention(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                     GM_ADDR attention_out, GM_ADDR softmax_lse, GM_ADDR key_next,
                                                     GM_ADDR value_next, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(RingAttentionTilingData);
    GET_TILING_DATA_WITH_STRUCT(RingAttentionTilingData, ringTiling, tiling);
    const bool exchange = (ringTiling.stepFlags & RING_STEP_EXCHANGE) != 0;
    AscendC::Hccl<> hccl;
    AscendC::HcclHandle handles[2] = {-1, -1};
    // The AIVs drive the client (the AIC runs the matmul server below and leaves through it).
    if (ASCEND_IS_AIV && exchange) {
        hccl.InitV2(AscendC::GetHcclContext<AscendC::HCCL_GROUP_ID_0>(), &ringTiling);
        hccl.SetCcTilingV2(offsetof(RingAttentionTilingData, alltoAllV));
        ring_attn::CommitExchange(hccl, key, value, key_next, value_next, ringTiling.kvElements,
                                  static_cast<AscendC::HcclDataType>(ringTiling.hcclDataType), handles);
    }
    if ((ringTiling.stepFlags & RING_STEP_COMPUTE) != 0) {
        ring_attn::RunStepAttention(query, key, value, attention_out, softmax_lse, workspace, ringTiling.fa);
    }
    if (ASCEND_IS_AIV && exchange) {
        hccl.Wait(handles[0]);
        hccl.Wait(handles[1]);
        hccl.Finalize();
    }
}
