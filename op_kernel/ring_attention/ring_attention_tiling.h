// ring_attention_tiling.h -- the tiling of the RingAttention op (one ring step of sequence-parallel
// attention with the K/V exchange inside the kernel), shared by op_host/ring_attention and the
// kernel. The HCCL client's tilings come first: Hccl::InitV2 takes the address of the
// Mc2InitTiling and SetCcTilingV2 the offset of each Mc2CcTiling from it (asc-devkit
// HCCL-Kernel侧接口/InitV2.md, SetCcTilingV2.md: the TilingData struct opens with them).
#pragma once

#include <cstdint>

#include "flash_attention_tiling.h"       // FlashAttentionTilingData: the step's attention
#include "kernel_tiling/kernel_tiling.h"  // Mc2InitTiling, Mc2CcTiling

// What a ring step does besides the exchange (RingAttentionTilingData::stepFlags).
constexpr uint32_t RING_STEP_COMPUTE = 1;   // attention of the query chunk with the K/V chunk in hand
constexpr uint32_t RING_STEP_EXCHANGE = 2;  // K/V chunk to rank + 1, the next one from rank - 1

struct RingAttentionTilingData {
    Mc2InitTiling init;           // first: InitV2's initTiling
    Mc2CcTiling alltoAllV;        // HCCL_CMD_ALLTOALLV: the K and V exchanges
    FlashAttentionTilingData fa;  // the step's attention, as FlashAttention tiles it
    uint64_t kvElements;          // elements of key (= of value) this rank holds: B * Nkv * Skv * D
    uint32_t stepFlags;           // RING_STEP_COMPUTE | RING_STEP_EXCHANGE
    uint32_t hcclDataType;        // HcclDataType of K and V: HCCL_DATA_TYPE_FP16 3, HCCL_DATA_TYPE_BFP16 11
};
