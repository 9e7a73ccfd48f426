// tiling_policy.h -- the FlashAttention tiling policy: a pure function
//   (problem, chip limits) -> plan or a rejection naming the broken limit.
//
// No CANN include: op_host/flash_attention/flash_attention.cpp adapts it to gert::TilingContext and
// PlatformAscendC, native/plan_capi.cpp exports it to Python (`acl-fa plan`), and the
// tests drive it directly. Chip limits are inputs, never globals.
//
// The buffers it budgets are exactly the kernel's (op_kernel/common/flash_attention_tiling.h): per
// vector unit, m = subBlockM rows (blockM / 2 on an AIV of the MIX path, blockM on a coupled
// AI Core), n = blockN, d = headDim, T = dtypeBytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention_band.h"  // the band rule (op_kernel/common), shared with the kernels

namespace fa_policy {

// platform_ascendc::SocVersion values (tiling/platform/platform_ascendc.h) the policy knows.
constexpr uint32_t kSocAscend910 = 0;   // 910A: arch 1001 (dav-c100), coupled AI Cores
constexpr uint32_t kSocAscend910B = 1;  // 910B1-4, 910_93: arch 2201 (dav-c220), AIC + 2 AIV
constexpr uint32_t kSocAscend310P = 2;  // 310P: arch 2002 (dav-m200), coupled AI Cores

// What an architecture's AI Core can do, as far as the kernel's path depends on it
// (docs/chips.md cites the asc-devkit headers each fact comes from).
struct ArchFeatures {
    bool coupled = false;   // cube and vector unit in one AI Core (L0C -> UB path, no AIC/AIV split)
    bool cubeFp32 = false;  // Mmad takes float operands (float += float * float)
    bool bf16 = false;      // bfloat16 exists (Mmad and vector Cast)
    bool known = false;     // the SocVersion is one of the above
};
ArchFeatures FeaturesOfSoc(uint32_t socVersion);

// Limits of one chip, as the CANN adapter queries them (PlatformAscendC::GetCoreMemSize:
// UB and L1 already without the bytes the chip reserves, e.g. 256 B on 910B;
// GetSocVersion for the architecture's features).
struct ChipLimits {
    std::string socName;   // for messages, e.g. "Ascend910B2"
    uint32_t socVersion = kSocAscend910B;
    uint64_t ubBytes = 0;  // per vector unit (AIV, or coupled AI Core)
    uint64_t l1Bytes = 0;  // per cube unit (AIC, or coupled AI Core)
    uint64_t l0aBytes = 0;
    uint64_t l0bBytes = 0;
    uint64_t l0cBytes = 0;
    uint32_t aicNum = 0;   // cube cores (AI Cores when coupled): the launch's block dim is at most this
    uint32_t aivNum = 0;
    // One AI Core's L2 rate in bytes per cycle (PlatformAscendC::GetCoreMemBw(L2), the platform
    // file's l2_rate); 0 = not reported, and then GM reads and the chip's rate do not bound the
    // block cost.
    uint64_t l2BytesPerCycle = 0;
};

struct Problem {
    uint64_t batch = 0;       // B
    uint64_t numHeads = 0;    // N
    uint64_t numKvHeads = 0;  // Nkv
    uint64_t seqQ = 0;        // Sq
    uint64_t seqKv = 0;       // Skv
    uint64_t headDim = 0;     // D
    uint32_t dtypeBytes = 2;  // bytes of the input dtype (fp16 / bf16: 2, fp32: 4)
    bool bf16 = false;        // tiling-key dtype bit (with dtypeBytes 2)
    uint32_t layout = 0;      // FA_LAYOUT_* code: 0 BNSD, 1 BSND, 2 BSH, 3 TND
    bool causal = false;      // the V1 attr: the same as nextTokens 0 (intersected with the band below)
    // Band (FlashAttentionV2): key j is visible to query i of a sequence iff
    //   i + diag - preTokens <= j <= i + diag + nextTokens,  diag = Skv - Sq of that sequence;
    // values >= kUnboundedTokens mean no bound on that side. preTokens + nextTokens >= 0.
    int64_t preTokens = 2147483647;
    int64_t nextTokens = 2147483647;
    // Variable-length batch (layout TND): the query and key lengths of each of the `batch`
    // sequences; empty for a fixed-length batch. seqQ / seqKv are then the longest lengths.
    std::vector<uint64_t> seqLensQ, seqLensKv;
    uint64_t tokensQ = 0, tokensKv = 0;  // varlen: Tq and Tkv, the packed token counts
    uint32_t userBlockM = 0;  // 0 = choose
    uint32_t userBlockN = 0;  // 0 = choose
    // FlashAttentionV2's mask and dropout (MIX path only): each takes UB and workspace only when
    // on. The device mask is uint8 [maskB, maskN, maskQ, seqKv] (each 1 or B / N / Sq).
    bool mask = false;
    uint64_t maskB = 1, maskN = 1, maskQ = 1;
    bool dropout = false;         // keep_prob < 1
    bool dropoutMaskOut = false;  // the dropout_mask output is written
    // FlashAttentionV4 inner_precise 1 (the high-performance precision): S leaves the cube in the
    // input dtype (float16 / bfloat16) instead of float32 (MIX path only). The kernel's UB holds the
    // same bytes either way (two [c,n] T tiles and one [c,n] fp32 tile in place of two [c,n] fp32).
    bool narrowScores = false;
    // Score modifiers (docs/attention_options.md "Score modifiers"): FlashAttentionV5 (forward, MIX path
    // only) and FlashAttentionGradV3 (backward). ALiBi slopes float32 [B, N] (UB: the key and row ramps in
    // the forward, a small index buffer in the backward), attention sinks float32 [N] (no UB: one logit
    // per item), an additive float mask [biasB, biasN, biasQ, seqKv] in the input dtype (forward; each
    // 1 or B / N / Sq; UB: its tiles of kBiasRows rows).
    bool alibi = false;
    bool sinks = false;
    bool bias = false;
    uint64_t biasB = 1, biasN = 1, biasQ = 1;
    // How the kernel holds S, for the blocks' modeled cost only (block_cost.h ScoreForm; the plan's
    // buffers, workspace and key do not change): halfScores, S leaves the cube as half (2 B an
    // element through FixPipe, GM and UB: FlashAttentionInt8 on A2/A3, FixPipe's dequantization);
    // halfSoftmax, the softmax runs in half on tiles of whole 128-column repeats (its float16
    // value). Both false: S and the softmax in fp32, as the forward's default precision.
    bool halfScores = false;
    bool halfSoftmax = false;
};

// One line of the buffer budget: `bytes` of `capacity` used.
struct BudgetLine {
    std::string name;
    uint64_t bytes = 0;
    uint64_t capacity = 0;
};

struct Plan {
    uint32_t blockM = 0, blockN = 0, subBlockM = 0;
    uint32_t numQBlocks = 0, numKvBlocks = 0;
    uint32_t qZigzag = 0;
    // Work split over AIC cores: core c runs items [coreItemStart[c], coreItemStart[c+1]).
    uint32_t usedCoreNum = 0;
    uint64_t totalItems = 0;
    std::vector<uint32_t> coreItemStart;  // usedCoreNum + 1 entries
    // Work = kv blocks computed (blocks fully above the causal diagonal are skipped).
    uint64_t totalWork = 0;
    uint64_t maxCoreWork = 0;
    double meanCoreWork = 0;  // totalWork / usedCoreNum
    double imbalance = 0;     // maxCoreWork / meanCoreWork (1.0 = perfect)
    bool coupled = false;  // the coupled-core path (one AI Core per item, no GM hand-off)
    // Budget: the per-vector-unit UB buffers in the kernel's InitBuffer order, then the totals.
    std::vector<BudgetLine> budget;
    // GM workspace per AIC group, bytes, each region 512-B aligned (MIX path; 0 when coupled).
    // P lives in S's rows: wsProbOffset == wsScoreOffset (no P region).
    uint64_t wsScoreOffset = 0, wsProbOffset = 0, wsPvOffset = 0, wsBytesPerCore = 0;
    uint64_t userWorkspaceBytes = 0;  // usedCoreNum * wsBytesPerCore (+ the mask summary)
    uint64_t mmUbBytes = 0;           // coupled: UB for the Matmul API's ND <-> NZ (SetLocalWorkspace)
    uint32_t soloRows = 0;            // MIX: 1 = each AIV's own QK and P.V (narrow bands; FlashAttentionTilingData)
    uint32_t chunkRows = 0;           // score rows per vector tile (FlashAttentionTilingData::chunkRows)
    uint64_t tilingKey = 0;
    // Mask and dropout (0 when off): mask tile rows per pass, the block summary's bytes and its
    // offset in the user workspace (after the AIV slices, included in userWorkspaceBytes), Philox
    // counters per chunk.
    uint32_t maskRows = 0;
    uint64_t maskSummaryBytes = 0, wsMaskSummaryOffset = 0;
    uint32_t philoxLanes = 0;
};

// UB of op_kernel/common/attention_mask.h MaskTiles::UbBytes(rows, n) and op_kernel/common/philox_dropout.h
// PhiloxKeepMask::UbBytes(lanes), which this pure header cannot include (they pull in
// kernel_operator.h); tests/ops/flash_attention/test_mask_dropout_forward.py checks them against the kernel's.
uint64_t MaskTilesUbBytes(uint64_t rows, uint64_t n);
uint64_t PhiloxUbBytes(uint64_t lanes);
// Philox counters per chunk for key blocks of n keys: at least a row (n / 16), a multiple of 8;
// the floor the forward budgets (its chunk takes the UB the other buffers leave on top,
// docs/dropout_and_mask.md#chunk-size).
uint32_t PhiloxLanes(uint32_t n);
constexpr uint32_t kMaskRows = 16;  // mask tile rows per pass (a multiple of 4)
// UB of op_kernel/common/score_mods.h (AlibiRamps::UbBytes(m, n), FloatBiasTiles::UbBytes(rows, n,
// dtypeBytes)); tests/ops/flash_attention/test_score_mods.py checks them against the kernel's.
uint64_t AlibiUbBytes(uint64_t m, uint64_t n);
uint64_t FloatBiasUbBytes(uint64_t rows, uint64_t n, uint64_t dtypeBytes);
constexpr uint32_t kBiasRows = 16;  // float mask tile rows per pass (a multiple of 8)

// Largest values the policy chooses by itself (a user block may not exceed them either):
// beyond these the kernel gains no reuse and the item count (core balance) suffers.
constexpr uint32_t kMaxBlockM = 256;
constexpr uint32_t kMaxBlockN = 1024;
// blockN assumed while searching blockM: a cube-friendly 128 (or all of Skv if shorter).
constexpr uint32_t kReferenceBlockN = 128;
constexpr uint32_t kMaxCores = 64;  // FA_MAX_CORES of the tiling struct
constexpr uint64_t kWorkspaceAlign = 512;

// Tiling-key bits and layout codes; op_host/flash_attention/flash_attention.cpp static_asserts that they
// equal FA_KEY_* / FA_LAYOUT_* of op_kernel/common/flash_attention_tiling.h (which this pure
// header cannot include: it pulls in a CANN header).
constexpr uint64_t kKeyBf16 = 1u << 0;
constexpr uint64_t kKeyCausal = 1u << 1;
constexpr uint32_t kKeyLayoutShift = 2;
constexpr uint64_t kKeySqTail = 1u << 4;
constexpr uint64_t kKeySkvTail = 1u << 5;
constexpr uint64_t kKeyFp32 = 1u << 6;
constexpr uint64_t kKeyCoupled = 1u << 7;
constexpr uint64_t kKeyNarrowScores = 1u << 8;  // MIX path: S in the input dtype (FlashAttentionV4 inner_precise 1)
constexpr uint32_t kLayoutBnsd = 0;
constexpr uint32_t kLayoutBsnd = 1;
constexpr uint32_t kLayoutBsh = 2;
constexpr uint32_t kLayoutTnd = 3;  // [T, N, D]: BSND's memory order with sequences packed
constexpr int64_t kUnboundedTokens = attn_band::kUnboundedTokens;  // pre/next_tokens at or above: unbounded

// UB bytes the kernel gives the Matmul API for its ND<->NZ conversions on the coupled path
// (SetLocalWorkspace) for m rows, n = blockN, d = headDim and a t-byte dtype.
uint64_t MatmulLocalWorkspaceBytes(uint64_t m, uint64_t n, uint64_t d, uint64_t t);

// Computes the plan. Returns true and fills *plan, or false with *error saying which
// argument or limit failed (e.g. "block_m=512 needs 278528 B of UB per AIV ...;
// Ascend910B2 has 196352 B").
bool ComputePlan(const Problem &problem, const ChipLimits &chip, Plan *plan, std::string *error);

// Shared with the other ops' policies (flash_attention_grad_policy.h):
// printf into a std::string;
std::string Format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// "" or what is wrong with the problem's sizes, dtype, layout and user blocks;
std::string ValidateProblem(const Problem &p);
// "" or what is wrong with the head sizes every attention op takes alike: head_dim a multiple of
// 16 and at most 256, num_heads a multiple of num_kv_heads (whole GQA groups);
std::string ValidateHeads(uint64_t headDim, uint64_t numHeads, uint64_t numKvHeads);
// "" or what is wrong with the per-sequence lengths (varlen; none given is not wrong): one per
// sequence each, none longer than seq_q / seq_kv;
std::string ValidateSequenceLengths(const Problem &p);
// "" or which of the chip's limits is missing;
std::string ValidateChip(const ChipLimits &c);
// items of cost work[i] split into at most `cores` contiguous ranges with the smallest maximum
// range cost: the start of each range, then work.size().
std::vector<uint32_t> SplitContiguous(const std::vector<uint64_t> &work, uint32_t cores);

// Modeled cycles of the forward kernel with (blockM, blockN) on the MIX path (block_cost.h): the
// K/V-block steps of the busiest core -- the larger of an even share of all steps and the
// largest item -- times one step's cycles. The auto blocks minimize it.
double ModeledKernelCycles(const Problem &problem, const ChipLimits &chip, uint32_t blockM, uint32_t blockN);

// Dropout's keep rule: an 8-bit Philox draw u keeps its element iff u >= DropoutThreshold(keepProb)
// = floor((1 - keepProb) * 256 + 1/2) in [0, 256], computed in double from the float32 keep_prob
// (the float64 reference's formula, acl_fa/philox.py dropout_threshold).
uint32_t DropoutThreshold(float keepProb);

// The band the kernel applies: (preTokens, nextTokens) with causal folded in (next <= 0).
struct Band {
    int64_t pre = kUnboundedTokens;
    int64_t next = kUnboundedTokens;
    bool Restricted() const { return attn_band::Bounded(pre) || attn_band::Bounded(next); }
};
Band EffectiveBand(const Problem &problem);

// Keys [*first, *end) that query rows [row0, rowEnd) of a sequence of sq queries and skv keys
// see under `band` (the union of the rows' intervals, contiguous since pre + next >= 0).
// False (and an empty range) when none of the rows sees a key.
bool VisibleKeys(const Band &band, uint64_t sq, uint64_t skv, uint64_t row0, uint64_t rowEnd, uint64_t *first,
                 uint64_t *end);

// Kv blocks the query block `qb` of sequence `seq` computes (0 when all its rows see no key):
// the blocks that hold a visible key of any of its rows.
uint64_t KvBlocksForQueryBlock(const Problem &problem, uint32_t blockM, uint32_t blockN, uint64_t qb,
                               uint64_t seq = 0);
// Keys the cube computes for query block `qb`: from its first computed block's start to its last
// visible key (the MIX kernel's QK and P.V stop there).
uint64_t ExecutedKeys(const Problem &problem, uint32_t blockM, uint32_t blockN, uint64_t qb, uint64_t seq = 0);
// Query / key length of sequence `seq` (the fixed lengths when the batch is not varlen).
uint64_t SeqLenQ(const Problem &problem, uint64_t seq);
uint64_t SeqLenKv(const Problem &problem, uint64_t seq);

// ---- The workspace sized to the device's memory (docs/memory.md) ----
// One AIC group's slice of the user workspace for (blockM, blockN) on the MIX path, in the
// kernel's order, each region 512-B aligned: two S slots [blockM, blockN] (float32, or the input
// dtype with narrowScores) -- P is written over S's rows -- then two P.V slots [blockM, D] float32.
struct WorkspaceSlots {
    uint64_t scoreOffset = 0, pvOffset = 0, bytesPerCore = 0;
};
WorkspaceSlots SlotsOf(const Problem &problem, uint32_t blockM, uint32_t blockN);
// The mask's block summary (bytes, before alignment): one byte per (mask batch, mask head, query
// block, key block); 0 without a mask.
uint64_t MaskSummaryBytes(const Problem &problem, uint32_t blockM, uint32_t blockN);
// ComputePlan for a device whose free memory leaves `userWorkspaceLimit` bytes for the user
// workspace (the device's free bytes less the tensors and GetLibApiWorkSpaceSize()). The auto
// plan when its user workspace fits, or when the caller fixed both blocks or the path has none
// (coupled); else, of the blocks that fit UB and L1 and whose workspace fits, the plan of least
// modeled time (ModeledKernelCycles); when none fits, the plan of least user workspace (the
// floor: the caller tells it by Plan::userWorkspaceBytes > userWorkspaceLimit). False, with
// *error, only where ComputePlan refuses the problem.
bool ComputePlanWithin(const Problem &problem, const ChipLimits &chip, uint64_t userWorkspaceLimit, Plan *plan,
                       std::string *error);

}  // namespace fa_policy
