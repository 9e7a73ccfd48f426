"""op_host (OpDef, InferShape, TilingFunc) run by the simulator's op runtime.

libophost_probe.so (sim/src/host/ophost_probe.cpp, a test-only build product) links the real
op_host/flash_attention.cpp with the simulated CANN host APIs and exposes RunInferShape /
RunTiling of sim_host/op_runtime.h. The tiling bytes are decoded with a cffi declaration of
FlashAttentionTilingData, checked against the C++ struct's size and offsets.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cffi
import pytest

from acl_fa.runtime.loader import sim_library_dir
from acl_fa.plan.forward import chip, plan
from acl_fa.spec.problem import sized_problem

DT_FLOAT, DT_FLOAT16, DT_INT32, DT_BF16 = 0, 1, 3, 27
ATTRS = ("scale_value", "causal", "input_layout", "num_heads", "num_kv_heads", "block_m", "block_n")

ffi = cffi.FFI()
ffi.cdef("""
typedef struct { int64_t dims[8]; uint32_t dimNum; int32_t dtype; } aclfaProbeTensor;
typedef struct {
    float scaleValue; int32_t causal; const char *inputLayout;
    int64_t numHeads, numKvHeads, blockM, blockN; uint32_t given;
} aclfaProbeAttrs;
int32_t aclfaProbeHasOp(char *err, size_t errLen);
uint32_t aclfaProbeInferShape(const aclfaProbeTensor *inputs, const aclfaProbeAttrs *attrs,
                              aclfaProbeTensor *outputs, char *err, size_t errLen);
uint32_t aclfaProbeTiling(const aclfaProbeTensor *inputs, const aclfaProbeTensor *outputs,
                          const aclfaProbeAttrs *attrs, uint32_t *blockDim, uint64_t *tilingKey,
                          uint8_t *tiling, size_t tilingCap, size_t *tilingSize, uint64_t *workspace0,
                          char *err, size_t errLen);
size_t aclfaProbeTilingDataSize(void);
size_t aclfaProbeTilingOffset(int32_t which);

typedef struct { int32_t f[50]; } TCubeTilingRaw;
typedef struct {
    int32_t usedCoreNum, M, N, Ka, Kb, singleCoreM, singleCoreN, singleCoreK, baseM, baseN, baseK,
        depthA1, depthB1, stepM, stepN, isBias, transLength, iterateOrder, shareMode, shareL1Size,
        shareL0CSize, shareUbSize, batchM, batchN, singleBatchM, singleBatchN, stepKa, stepKb,
        depthAL1CacheUB, depthBL1CacheUB, dbL0A, dbL0B, dbL0C, rest[17];
} TCubeTiling;
typedef struct {
    uint32_t batch, numHeads, numKvHeads, groupSize, seqQ, seqKv, headDim, layout, causal;
    float scaleValue;
    uint32_t blockM, blockN, subBlockM, numQBlocks, numKvBlocks, qZigzag;
    uint32_t usedCoreNum, totalItems;
    uint32_t coreItemStart[65];
    uint64_t wsScoreOffset, wsProbOffset, wsPvOffset, wsBytesPerCore;
    uint32_t mmUbBytes, reserved;
    int64_t preTokens, nextTokens;
    uint32_t varlen, tokensQ, tokensKv, chunkRows;
    TCubeTiling qkTiling;
    TCubeTiling pvTiling;
    uint32_t hasMask, maskB, maskN, maskQ, maskRows;
    float softcap;
    uint64_t wsMaskSummaryOffset;
    uint32_t philoxLanes, keepThreshold;
    float invKeepProb;
    uint32_t hasDropoutMask;
    uint64_t seed, offset;
    uint32_t innerPrecise, reservedTail;
    uint32_t hasAlibi, hasSinks, hasBias, biasB, biasN, biasQ, biasRows, reservedMods;
} FlashAttentionTilingData;
""")
PROBE = Path(os.environ.get("ACL_FA_PROBE_LIB", sim_library_dir() / "libophost_probe.so"))
if not PROBE.is_file():
    pytest.skip(f"{PROBE} not built (a test-only product of sim/src/host)", allow_module_level=True)
lib = ffi.dlopen(str(PROBE))


def tensors(shapes, dtype):
    out = ffi.new("aclfaProbeTensor[]", len(shapes))
    for t, shape in zip(out, shapes):
        t.dimNum, t.dtype = len(shape), dtype
        for i, v in enumerate(shape):
            t.dims[i] = v
    return out


def attrs(**given):
    a = ffi.new("aclfaProbeAttrs *")
    keep = []
    for name, value in given.items():
        a.given |= 1 << ATTRS.index(name)
        if name == "input_layout":
            keep.append(ffi.new("char[]", value.encode()))
            a.inputLayout = keep[-1]
        else:
            setattr(a, {"scale_value": "scaleValue", "num_heads": "numHeads", "num_kv_heads": "numKvHeads",
                        "block_m": "blockM", "block_n": "blockN"}.get(name, name), value)
    return a, keep


def infer(shapes, dtype=DT_FLOAT16, **given):
    a, _keep = attrs(**given)
    outs = ffi.new("aclfaProbeTensor[2]")
    err = ffi.new("char[]", 2048)
    rc = lib.aclfaProbeInferShape(tensors(shapes, dtype), a, outs, err, 2048)
    if rc != 0:
        raise RuntimeError(ffi.string(err).decode())
    return [(list(o.dims)[:o.dimNum], o.dtype) for o in outs]


def tiling(shapes, dtype=DT_FLOAT16, **given):
    outs = infer(shapes, dtype, **given)
    a, _keep = attrs(**given)
    out_t = ffi.new("aclfaProbeTensor[2]")
    for t, (shape, dt) in zip(out_t, outs):
        t.dimNum, t.dtype = len(shape), dt
        for i, v in enumerate(shape):
            t.dims[i] = v
    bd, key, size, ws = ffi.new("uint32_t *"), ffi.new("uint64_t *"), ffi.new("size_t *"), ffi.new("uint64_t *")
    buf = ffi.new("uint8_t[]", 4096)
    err = ffi.new("char[]", 2048)
    rc = lib.aclfaProbeTiling(tensors(shapes, dtype), out_t, a, bd, key, buf, 4096, size, ws, err, 2048)
    if rc != 0:
        raise RuntimeError(ffi.string(err).decode())
    assert size[0] == ffi.sizeof("FlashAttentionTilingData")
    td = ffi.new("FlashAttentionTilingData *")
    ffi.memmove(td, buf, size[0])
    return td, bd[0], key[0], ws[0]


def test_struct_declaration_matches_cpp():
    assert lib.aclfaProbeTilingDataSize() == ffi.sizeof("FlashAttentionTilingData")
    fields = ("scaleValue", "coreItemStart", "wsScoreOffset", "qkTiling", "pvTiling", "preTokens", "tokensQ",
              "hasMask", "wsMaskSummaryOffset", "seed")
    for i, name in enumerate(fields):
        assert lib.aclfaProbeTilingOffset(i) == ffi.offsetof("FlashAttentionTilingData", name), name


def test_op_is_available_on_the_default_chip():
    err = ffi.new("char[]", 512)
    assert lib.aclfaProbeHasOp(err, 512) == 1


@pytest.mark.parametrize("layout, q, k, extra, lse", [
    ("BNSD", [2, 8, 97, 64], [2, 2, 203, 64], {}, [2, 8, 97]),
    ("BSND", [2, 97, 8, 64], [2, 203, 2, 64], {}, [2, 8, 97]),
    ("BSH", [2, 97, 512], [2, 203, 128], {"num_heads": 8, "num_kv_heads": 2}, [2, 8, 97]),
])
def test_infer_shape_and_dtype(layout, q, k, extra, lse):
    (out_shape, out_dt), (lse_shape, lse_dt) = infer([q, k, k], DT_BF16, input_layout=layout, **extra)
    assert (out_shape, out_dt) == (q, DT_BF16)
    assert (lse_shape, lse_dt) == (lse, DT_FLOAT)


@pytest.mark.parametrize("shapes, given, message", [
    ([[1, 8, 64, 64], [1, 8, 64, 64], [1, 8, 32, 64]], {}, "must have the same shape"),
    ([[1, 64, 512], [1, 64, 512], [1, 64, 512]], {"input_layout": "BSH"}, "BSH needs num_heads > 0"),
    ([[1, 8, 64, 64]] * 3, {"num_heads": 4}, "num_heads=4 but query [1, 8, 64, 64] has 8 heads"),
    ([[1, 8, 64, 64]] * 3, {"input_layout": "SBH"}, "input_layout must be BNSD, BSND or BSH"),
])
def test_infer_shape_rejections(shapes, given, message):
    with pytest.raises(RuntimeError, match="InferShape failed") as info:
        infer(shapes, **given)
    assert message in str(info.value)


def test_wrong_dtype_is_rejected_before_infer_shape():
    with pytest.raises(RuntimeError, match="no supported dtype/format combination"):
        infer([[1, 1, 16, 16]] * 3, DT_INT32)


def check_cube(t, m, n, k, limits):
    assert (t.singleCoreM, t.singleCoreN, t.singleCoreK) == (m, n, k)
    assert t.baseM % 16 == 0 and t.baseN % 16 == 0 and t.baseK % 16 == 0
    assert t.baseM * t.baseK * 2 * t.dbL0A <= limits.l0a_bytes
    assert t.baseK * t.baseN * 2 * t.dbL0B <= limits.l0b_bytes
    assert t.baseM * t.baseN * 4 * t.dbL0C <= limits.l0c_bytes
    used = t.depthA1 * t.baseM * t.baseK * 2 + t.depthB1 * t.baseN * t.baseK * 2
    assert used == t.shareL1Size
    assert t.depthA1 % t.stepKa == 0 and t.depthB1 % t.stepKb == 0
    # B (K or V) resident: all its K tiles of stepN N blocks in one buffer, which the Norm
    # template caches and ORDER_M (iterateOrder 0) serves to every M block (op_host KeepBResident).
    assert t.stepKb == -(-k // t.baseK) and t.depthB1 == t.stepN * t.stepKb and t.iterateOrder == 0
    return used


@pytest.mark.parametrize("case", [
    dict(b=1, n=32, nkv=32, sq=4096, skv=4096, d=128, causal=True, dtype=DT_FLOAT16),
    dict(b=2, n=8, nkv=2, sq=97, skv=203, d=64, causal=False, dtype=DT_BF16),
    dict(b=1, n=4, nkv=4, sq=1, skv=1, d=256, causal=True, dtype=DT_FLOAT16),
], ids=["b1n32s4096c", "gqa-odd", "tiny-d256"])
def test_tiling_matches_the_policy(case):
    q = [case["b"], case["n"], case["sq"], case["d"]]
    k = [case["b"], case["nkv"], case["skv"], case["d"]]
    td, block_dim, key, ws0 = tiling([q, k, k], case["dtype"], causal=case["causal"], scale_value=0.125)
    limits = chip("Ascend910B2")
    p = plan(sized_problem(seq_q=case["sq"], seq_kv=case["skv"], batch=case["b"], num_heads=case["n"],
                           num_kv_heads=case["nkv"], head_dim=case["d"], causal=case["causal"],
                           dtype="bfloat16" if case["dtype"] == DT_BF16 else "float16"), limits)
    assert (td.batch, td.numHeads, td.numKvHeads, td.groupSize) == (case["b"], case["n"], case["nkv"],
                                                                      case["n"] // case["nkv"])
    assert (td.seqQ, td.seqKv, td.headDim, td.causal, td.scaleValue) == (
        case["sq"], case["skv"], case["d"], int(case["causal"]), 0.125)
    assert (td.blockM, td.blockN, td.subBlockM) == (p.block_m, p.block_n, p.sub_block_m)
    assert (td.numQBlocks, td.numKvBlocks, td.qZigzag) == (p.num_q_blocks, p.num_kv_blocks, int(p.q_zigzag))
    assert td.usedCoreNum == block_dim == p.used_core_num and td.totalItems == p.total_items
    assert list(td.coreItemStart)[:p.used_core_num + 1] == p.core_item_start
    assert (td.wsScoreOffset, td.wsProbOffset, td.wsPvOffset, td.wsBytesPerCore) == (
        p.ws_score_offset, p.ws_prob_offset, p.ws_pv_offset, p.ws_bytes_per_core)
    assert key == p.tiling_key
    assert ws0 == 16 * 1024 * 1024 + block_dim * td.wsBytesPerCore  # one slice per AIC group
    # The slice: two S slots [blockM, blockN] fp32, P written over S's rows, two P.V slots
    # [blockM, D] fp32, each region 512-B aligned.
    def align512(v):
        return -(-v // 512) * 512
    assert td.wsProbOffset == td.wsScoreOffset == 0
    assert td.wsPvOffset == align512(2 * td.blockM * td.blockN * 4)
    assert td.wsBytesPerCore == td.wsPvOffset + align512(2 * td.blockM * td.headDim * 4)
    l1 = (check_cube(td.qkTiling, td.blockM, td.blockN, td.headDim, limits)  # one QK and one P.V per item
          + check_cube(td.pvTiling, td.blockM, td.headDim, td.blockN, limits))
    lines = {b.name: b.bytes for b in p.budget}
    assert l1 == lines["L1 QK+PV Matmul buffers"] <= limits.l1_bytes  # the AIC holds both
    assert td.qkTiling.shareL1Size <= limits.l1_bytes // 2
    assert 2 * td.chunkRows * td.blockN * 4 == lines["scoreQue S 2 x [c,n] fp32"] and td.chunkRows % 8 == 0


def test_tiling_rejection_reaches_the_caller():
    with pytest.raises(RuntimeError) as info:
        tiling([[1, 8, 4096, 128]] * 3, block_m=256, block_n=2048)
    text = str(info.value)
    assert "TilingFunc failed" in text
    assert "block_n must be 0 (auto) or a multiple of 16 up to 1024, got 2048" in text


@pytest.mark.parametrize("soc", ["Ascend910B2", "Ascend910_93", "Ascend310P3", "Ascend910A"])
def test_every_chip_family_has_a_kernel_config(soc):
    # The child imports this module and the acl_fa this process uses (the repository root on
    # sys.path would make its source-tree acl_fa shadow an installed one).
    import acl_fa
    code = ("import sys; sys.path[:0] = [%r, %r]; import test_op_host as t; "
            "e = t.ffi.new('char[]', 512); r = t.lib.aclfaProbeHasOp(e, 512); "
            "print(r, t.ffi.string(e).decode())") % (
                str(Path(acl_fa.__file__).resolve().parents[1]), str(Path(__file__).resolve().parent))
    env = dict(os.environ, ACL_FA_SIM_SOC=soc)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
