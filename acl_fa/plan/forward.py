"""What the FlashAttention operator will do on a chip: blocks, buffer budget, core split.

The numbers come from the operator's own tiling policy (op_host/tiling_policy.cpp), reached
through its C ABI in ``libaclfa_plan.so`` (native/aclfa_plan.h, declared for cffi in
acl_fa/cdefs/plan.h). Chip limits come from the simulator's chip catalogue in
``libascendcl.so`` (``aclfaSimGetChipAt`` / ``aclfaSimFindChip``), so ``acl-fa plan`` and
the simulated chips share one catalogue; UB and L1 are as ``GetCoreMemSize`` answers them
(910B-class chips reserve 256 B of each).

Both libraries are looked up in ``$ACL_FA_SIM_LIB_DIR`` when set, else in the package's
bundled ``acl_fa/_sim/lib``. Host only: nothing here touches a device.
"""
from __future__ import annotations

import os
import threading
import weakref
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

from ..runtime.ffi import ffi
from ..runtime.errors import AclLibraryError, InvalidArgumentError, LoadAttempt
from ..runtime.loader import ENV_SIM_LIB_DIR, MISSING_SYMBOL, sim_library_dir
from ..spec.problem import HEAD_DIM_MULTIPLE, MAX_HEAD_DIM, Problem, padded_head_dim
from ..spec.band import UNBOUNDED  # pre_tokens / next_tokens without a bound (op_host's kUnboundedTokens)

PLAN_LIBRARY_NAME = "libaclfa_plan.so"
CATALOGUE_LIBRARY_NAME = "libascendcl.so"
ENV_SIM_SOC = "ACL_FA_SIM_SOC"
DEFAULT_SOC = "Ascend910B2"

LAYOUTS = ("BNSD", "BSND", "BSH")  # index = the tiling struct's layout code; the CLI's --layout choices
# TND (a varlen batch, code 3) is planned only with seq_lens_q / seq_lens_kv.
LAYOUT_CODES = LAYOUTS + ("TND",)
DTYPES = ("float16", "bfloat16", "float32")
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
# The op's AddConfig() targets (op_host/flash_attention.cpp): other chips get a plan for
# study, but no kernel runs there.
KERNEL_SOCS = ("ascend910b", "ascend910_93", "ascend310p", "ascend910")
# platform_ascendc GetLibApiWorkSpaceSize(): 16 MiB on arch 2201 (910B / 910_93), else 2 MiB (the
# kernel library's RESERVED_WORKSPACE per arch, docs/memory.md).
_ARCH_910B = 2201
_LIB_API_WORKSPACE_910B = 16 * 1024 * 1024
_LIB_API_WORKSPACE_OTHER = 2 * 1024 * 1024
_SOC_ASCEND910, _SOC_ASCEND310P = 0, 2  # platform_ascendc::SocVersion
_ERR_LEN = 1024
_UINT32_MAX = 2**32 - 1
_STRUCTS = ("aclfaPlanProblem", "aclfaPlanLimits", "aclfaPlanBudgetLine", "aclfaPlan")


# The length arrays a C problem points to, alive as long as the problem is.
_keepalive: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class PlanError(InvalidArgumentError):
    """The problem is invalid or does not fit the chip; the message names the rule/limit."""


@dataclass(frozen=True)
class ChipLimits:
    name: str
    short_soc: str
    npu_arch: int
    aic_num: int
    aiv_num: int
    ub_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    soc_version: int  # platform_ascendc::SocVersion: ASCEND910 0, ASCEND910B 1, ASCEND310P 2
    l2_bytes_per_cycle: int = 0  # one AI Core's L2 rate, as GetCoreMemBw(L2) answers; 0 = unknown

    @property
    def has_kernel(self) -> bool:
        return self.short_soc in KERNEL_SOCS

    @property
    def coupled(self) -> bool:
        """Cube and vector unit in one AI Core (910A, 310P): the operator's coupled-core path."""
        return self.soc_version in (_SOC_ASCEND910, _SOC_ASCEND310P)

    @property
    def lib_api_workspace_bytes(self) -> int:
        if self.npu_arch == _ARCH_910B:
            return _LIB_API_WORKSPACE_910B
        return _LIB_API_WORKSPACE_OTHER


@dataclass(frozen=True)
class BudgetLine:
    name: str
    bytes: int
    capacity: int


def budget_lines(budget: list) -> list:
    """A plan report's budget lines: each BudgetLine's bytes against its capacity."""
    width = max(len(b.name) for b in budget)
    return [f"  {b.name:<{width}}  {b.bytes:>9} B / {b.capacity:>9} B  "
            f"{100.0 * b.bytes / b.capacity if b.capacity else 0.0:5.1f}%" for b in budget]


@dataclass(frozen=True)
class PlannedSizes:
    """The sizes a forward or backward plan was made for, as its report and JSON give them (a
    varlen plan: the count and the longest sequences)."""

    chip: ChipLimits
    batch: int
    heads: int
    kv_heads: int
    seq: int
    seq_kv: int
    head_dim: int
    dtype: str
    layout: str
    causal: bool

    @classmethod
    def of(cls, limits: ChipLimits, p: Problem) -> dict:
        """The keyword arguments of these fields for a plan of `p` on `limits`."""
        return dict(chip=limits, batch=p.batch, heads=p.num_heads, kv_heads=p.num_kv_heads, seq=p.seq_q,
                    seq_kv=p.seq_kv, head_dim=p.head_dim, dtype=p.dtype_name, layout=p.layout, causal=bool(p.causal))


class Workspace:
    """What every plan (forward, backward, decode) asks of ws[0]: its system_workspace_bytes and
    user_workspace_bytes fields added."""

    @property
    def workspace_bytes(self) -> int:
        """ws[0] the operator asks for: library-API (system) workspace + user workspace."""
        return self.system_workspace_bytes + self.user_workspace_bytes


@dataclass(frozen=True)
class Plan(PlannedSizes, Workspace):
    block_m: int
    block_n: int
    sub_block_m: int
    num_q_blocks: int
    num_kv_blocks: int
    q_zigzag: bool
    used_core_num: int
    total_items: int
    core_item_start: list = field(default_factory=list)
    total_work: int = 0
    max_core_work: int = 0
    mean_core_work: float = 0.0
    imbalance: float = 1.0
    budget: list = field(default_factory=list)
    ws_score_offset: int = 0
    ws_prob_offset: int = 0
    ws_pv_offset: int = 0
    ws_bytes_per_core: int = 0
    solo_rows: bool = False  # each AIV issues its own QK and P.V (narrow bands), not one per group
    user_workspace_bytes: int = 0
    system_workspace_bytes: int = 0
    tiling_key: int = 0
    # FlashAttentionV2's band and varlen lengths (unbounded / None for the plain forward).
    pre_tokens: int = UNBOUNDED
    next_tokens: int = UNBOUNDED
    seq_lens_q: Optional[tuple] = None
    seq_lens_kv: Optional[tuple] = None
    # Its mask (the rank-4 device shape, or None) and dropout (keep_prob < 1, keep mask written).
    mask_shape: Optional[tuple] = None
    dropout: bool = False
    dropout_mask_out: bool = False
    # The caller's head dim when the device pads it to head_dim (the cube's multiple of 16), else 0.
    given_head_dim: int = 0

    @property
    def padding_macs_fraction(self) -> float:
        """Extra cube MACs of the padded head dim over the caller's (both matmuls scale with D)."""
        return self.head_dim / self.given_head_dim - 1.0 if self.given_head_dim else 0.0

    @property
    def padding_bytes(self) -> int:
        """Extra device bytes of q, k, v, out held (and read / written by the kernel) with the
        padded head dim."""
        if not self.given_head_dim:
            return 0
        return self.tensor_bytes - replace(self, head_dim=self.given_head_dim).tensor_bytes

    @property
    def tensor_bytes(self) -> int:
        """Device bytes of q, k, v, out (in the dtype) and lse (float32)."""
        tokens_q = sum(self.seq_lens_q) if self.seq_lens_q is not None else self.batch * self.seq
        tokens_kv = sum(self.seq_lens_kv) if self.seq_lens_kv is not None else self.batch * self.seq_kv
        q = tokens_q * self.heads * self.head_dim
        kv = tokens_kv * self.kv_heads * self.head_dim
        return _DTYPE_BYTES[self.dtype] * (2 * q + 2 * kv) + 4 * self.heads * tokens_q

    @property
    def device_bytes(self) -> int:
        """Device memory of one call: the tensors plus the workspace."""
        return self.tensor_bytes + self.workspace_bytes

    def to_dict(self) -> dict:
        out = asdict(self)
        out["workspace_bytes"] = self.workspace_bytes
        out["tensor_bytes"] = self.tensor_bytes
        out["device_bytes"] = self.device_bytes
        out["chip"]["has_kernel"] = self.chip.has_kernel
        return out


_lock = threading.Lock()
_libs: dict = {}


def _open(name: str, flags: int):
    """dlopen `name` from the simulator library directory (cached per directory)."""
    directory = sim_library_dir()
    key = (name, str(directory))
    with _lock:
        if key in _libs:
            return _libs[key]
        path = Path(directory, name)
        if not path.is_file():
            attempt = LoadAttempt(name, str(path), "not found")
        else:
            try:
                lib = ffi.dlopen(str(path), flags)
            except OSError as exc:
                attempt = LoadAttempt(name, str(path), "found but failed to load", str(exc))
            else:
                _libs[key] = lib
                return lib
        raise AclLibraryError(
            f"acl-fa plan needs {name}", [attempt], {ENV_SIM_LIB_DIR: os.environ.get(ENV_SIM_LIB_DIR)}
        )


def _plan_lib():
    lib = _open(PLAN_LIBRARY_NAME, ffi.RTLD_NOW | ffi.RTLD_LOCAL)
    for which, struct in enumerate(_STRUCTS):
        expected, declared = lib.aclfaPlanSizeOf(which), ffi.sizeof(struct)
        if expected != declared:
            raise AclLibraryError(
                f"{PLAN_LIBRARY_NAME} does not match acl_fa/cdefs/plan.h: sizeof({struct}) is "
                f"{expected} in the library, {declared} in the declarations"
            )
    return lib


def _catalogue_lib():
    # RTLD_LOCAL: reading the catalogue must not make the simulator's ACL symbols global in
    # a process that may run on the real CANN libraries.
    lib = _open(CATALOGUE_LIBRARY_NAME, ffi.RTLD_NOW | ffi.RTLD_LOCAL)
    try:
        lib.aclfaSimGetChipCount
    except MISSING_SYMBOL as exc:
        raise AclLibraryError(
            f"{CATALOGUE_LIBRARY_NAME} in {sim_library_dir()} has no chip catalogue "
            "(aclfaSimGetChipAt): it is not the acl-fa simulator"
        ) from exc
    return lib


def _chip_from_c(c) -> ChipLimits:
    return ChipLimits(
        name=ffi.string(c.name).decode(),
        short_soc=ffi.string(c.shortSoc).decode(),
        npu_arch=int(c.npuArch),
        soc_version=int(c.socVersion),
        aic_num=int(c.aicNum),
        aiv_num=int(c.aivNum),
        ub_bytes=int(c.ubBytes),
        l1_bytes=int(c.l1Bytes),
        l0a_bytes=int(c.l0aBytes),
        l0b_bytes=int(c.l0bBytes),
        l0c_bytes=int(c.l0cBytes),
        l2_bytes_per_cycle=int(c.l2Rate),
    )


def chips() -> list:
    """Every chip of the simulator's catalogue, in catalogue order."""
    lib = _catalogue_lib()
    return [_chip_from_c(lib.aclfaSimGetChipAt(i)) for i in range(lib.aclfaSimGetChipCount())]


def chip(name: Optional[str] = None) -> ChipLimits:
    """The catalogue row for `name` (case-insensitive; a short SoC name such as ascend910b gives
    the first chip of that family); default $ACL_FA_SIM_SOC, else Ascend910B2."""
    name = name or os.environ.get(ENV_SIM_SOC) or DEFAULT_SOC
    found = _catalogue_lib().aclfaSimFindChip(name.encode())
    if found != ffi.NULL:
        return _chip_from_c(found)
    family = [c for c in chips() if c.short_soc.lower() == name.lower()]
    if family:  # a short SoC name (as plans print it): the first chip of that family
        return family[0]
    known = ", ".join(c.name for c in chips())
    shorts = ", ".join(dict.fromkeys(c.short_soc for c in chips()))
    raise PlanError(f"unknown SoC {name!r}; the catalogue has: {known} (short names: {shorts})")


def _choice(what: str, value: str, allowed: tuple) -> int:
    if value not in allowed:
        raise PlanError(f"{what} must be one of {', '.join(allowed)}, got {value!r}")
    return allowed.index(value)


@dataclass(frozen=True)
class PlanOptions:
    """What FlashAttentionV2 adds to a plan: the band (pre_tokens / next_tokens, None =
    unbounded), a varlen batch's lengths (seq_lens_q / seq_lens_kv, with layout TND; batch, Sq and
    Skv are then the count and the longest), the rank-4 device mask shape [mb, mn, mq, Skv] or None,
    dropout (keep_prob < 1) and dropout_mask_out (the keep mask written). The forward's policy
    budgets their UB and workspace."""

    pre_tokens: Optional[int] = None
    next_tokens: Optional[int] = None
    seq_lens_q: Optional[tuple] = None
    seq_lens_kv: Optional[tuple] = None
    mask_shape: Optional[tuple] = None
    dropout: bool = False
    dropout_mask_out: bool = False
    # FlashAttentionV5's score modifiers: ALiBi slopes, sinks, the float mask's rank-4 shape
    # [bb, bn, bq, Skv] (or None); each budgets its UB, the coupled chips refuse them.
    alibi: bool = False
    sinks: bool = False
    bias_shape: Optional[tuple] = None
    # FlashAttentionV4's high-performance precision: S's workspace slots in the input dtype.
    narrow_scores: bool = False
    # How the kernel holds S, for the blocks' modeled cost only (tiling_policy.h Problem):
    # half_scores, S leaves the cube as half; half_softmax, the softmax runs in half on
    # 128-column tiles (FlashAttentionInt8 on A2/A3 with a float16 value: both).
    half_scores: bool = False
    half_softmax: bool = False


_NO_OPTIONS = PlanOptions()


def _c_band(options: PlanOptions) -> list:
    band = []
    for key, value in (("pre_tokens", options.pre_tokens), ("next_tokens", options.next_tokens)):
        value = UNBOUNDED if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or not -UNBOUNDED <= value <= UNBOUNDED:
            raise PlanError(f"{key} must be an integer in [-{UNBOUNDED}, {UNBOUNDED}], got {value!r}")
        band.append(value)
    return band


def _c_lengths(problem: Problem, options: PlanOptions) -> tuple:
    """(the problem with a varlen batch's count and longest lengths, the C length arrays or [])."""
    seq_lens_q, seq_lens_kv = options.seq_lens_q, options.seq_lens_kv
    if (problem.layout == "TND") != (seq_lens_q is not None):
        raise PlanError("layout TND goes with seq_lens_q / seq_lens_kv (a varlen batch), and only it")
    if seq_lens_q is None:
        return problem, []
    for key, values in (("seq_lens_q", seq_lens_q), ("seq_lens_kv", seq_lens_kv)):
        if values is None or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in values):
            raise PlanError(f"{key} must be non-negative integer lengths, got {values!r}")
    if len(seq_lens_q) != len(seq_lens_kv) or not seq_lens_q:
        raise PlanError(f"seq_lens_q and seq_lens_kv must have one length per sequence, got {len(seq_lens_q)} "
                        f"and {len(seq_lens_kv)}")
    problem = replace(problem, batch=len(seq_lens_q), seq_q=max(seq_lens_q), seq_kv=max(seq_lens_kv))
    return problem, [ffi.new("uint64_t[]", list(seq_lens_q)), ffi.new("uint64_t[]", list(seq_lens_kv))]


def pad_head_dim(problem: Problem) -> Problem:
    """The problem with a head dim that is not a multiple of 16 (1..256) padded as the ops pad it
    (spec.problem.Problem.given_head_dim); any other problem as it is (the policy judges it)."""
    d = problem.head_dim
    if problem.given_head_dim or isinstance(d, bool) or not isinstance(d, int) or not 0 < d <= MAX_HEAD_DIM \
            or d % HEAD_DIM_MULTIPLE == 0:
        return problem
    return replace(problem, head_dim=padded_head_dim(d), given_head_dim=d)


def c_problem_and_limits(limits: ChipLimits, problem: Problem, options: PlanOptions = _NO_OPTIONS) -> tuple:
    """The policies' C inputs (aclfaPlanProblem, aclfaPlanLimits), validated with the plan's own
    messages (the problem may be unchecked: sized_problem); shared with the backward's plan
    (acl_fa.plan.backward). The C problem keeps the length arrays alive."""
    problem = pad_head_dim(problem)
    _choice("dtype", problem.dtype_name, DTYPES)
    layout_code = _choice("layout", problem.layout, LAYOUT_CODES if options.seq_lens_q is not None else LAYOUTS)
    band = _c_band(options)
    p, lens = _c_lengths(problem, options)
    ints = dict(seq=p.seq_q, seq_kv=p.seq_kv, batch=p.batch, heads=p.num_heads, kv_heads=p.num_kv_heads,
                head_dim=p.head_dim, block_m=p.block_m or 0, block_n=p.block_n or 0)
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PlanError(f"{key} must be a non-negative integer, got {value!r}")
        if value > _UINT32_MAX:  # the tiling's fields: sizes and blocks are uint32 in the kernel
            raise PlanError(f"{key} must be < 2^32, got {value}")
    c = ffi.new("aclfaPlanProblem *")
    c.batch, c.numHeads, c.numKvHeads = p.batch, p.num_heads, p.num_kv_heads
    c.seqQ, c.seqKv, c.headDim = p.seq_q, p.seq_kv, p.head_dim
    c.dtypeBytes, c.bf16 = _DTYPE_BYTES[p.dtype_name], int(p.dtype_name == "bfloat16")
    c.layout, c.causal = layout_code, int(bool(p.causal))
    c.blockM, c.blockN = ints["block_m"], ints["block_n"]
    c.preTokens, c.nextTokens = band
    mask_shape = options.mask_shape
    if mask_shape is not None:
        if len(mask_shape) != 4 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in mask_shape):
            raise PlanError(f"mask_shape must be 4 positive integers [mb, mn, mq, Skv], got {mask_shape!r}")
        c.mask = 1
        c.maskB, c.maskN, c.maskQ = mask_shape[:3]
    c.dropout, c.dropoutMaskOut = int(bool(options.dropout)), int(bool(options.dropout_mask_out))
    c.alibi, c.sinks = int(bool(options.alibi)), int(bool(options.sinks))
    c.narrowScores = int(bool(options.narrow_scores))
    c.halfScores, c.halfSoftmax = int(bool(options.half_scores)), int(bool(options.half_softmax))
    if options.bias_shape is not None:
        bias_shape = tuple(options.bias_shape)
        if len(bias_shape) != 4 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in bias_shape):
            raise PlanError(f"bias_shape must be 4 positive integers [bb, bn, bq, Skv], got {bias_shape!r}")
        c.bias = 1
        c.biasB, c.biasN, c.biasQ = bias_shape[:3]
    if lens:
        c.seqLensQ, c.seqLensKv = lens
        c.tokensQ, c.tokensKv = sum(options.seq_lens_q), sum(options.seq_lens_kv)
        _keepalive[c] = lens
    return c, c_chip_limits(limits)


def c_chip_limits(limits: ChipLimits):
    """The chip as every policy of libaclfa_plan.so takes it (aclfaPlanLimits)."""
    out = ffi.new("aclfaPlanLimits *")
    out.socName = limits.name.encode()[:31]
    out.ubBytes, out.l1Bytes = limits.ub_bytes, limits.l1_bytes
    out.l0aBytes, out.l0bBytes, out.l0cBytes = limits.l0a_bytes, limits.l0b_bytes, limits.l0c_bytes
    out.aicNum, out.aivNum = limits.aic_num, limits.aiv_num
    out.socVersion = limits.soc_version
    out.l2BytesPerCycle = limits.l2_bytes_per_cycle
    return out


def plan(problem: Problem, soc: "Optional[str | ChipLimits]" = None, options: PlanOptions = _NO_OPTIONS) -> Plan:
    """The operator's plan for this problem on `soc` (a catalogue name or ChipLimits), with the
    V2 options. The problem's blocks: 0 lets the policy choose; a value that does not fit raises
    PlanError naming the budget it breaks (never silently changed). The problem may be unchecked
    (sized_problem): the policy refuses what it cannot plan, naming the rule."""
    return _compute(problem, soc, options, None)


def plan_within(problem: Problem, device_bytes: int, soc: "Optional[str | ChipLimits]" = None,
                options: PlanOptions = _NO_OPTIONS) -> Plan:
    """plan() for a device with `device_bytes` free for the call (tensors and workspace): the
    auto plan when its device_bytes fit, else the fastest blocks whose workspace fits (the
    policy's ComputePlanWithin, docs/memory.md), else the plan of least workspace -- the floor,
    whose device_bytes exceed `device_bytes` (the caller refuses it). Blocks the caller fixed
    are never changed."""
    if isinstance(device_bytes, bool) or not isinstance(device_bytes, int) or device_bytes < 0:
        raise PlanError(f"device memory must be a non-negative number of bytes, got {device_bytes!r}")
    auto = plan(problem, soc, options)
    if auto.device_bytes <= device_bytes:
        return auto
    return plan_for_workspace(problem, max(device_bytes - auto.tensor_bytes, 0), soc, options)


def plan_for_workspace(problem: Problem, workspace_bytes: int, soc: "Optional[str | ChipLimits]" = None,
                       options: PlanOptions = _NO_OPTIONS) -> Plan:
    """plan() whose whole workspace (system + user) is at most `workspace_bytes`, chosen as
    plan_within chooses (else the plan of least workspace, over the limit)."""
    limits = soc if isinstance(soc, ChipLimits) else chip(soc)
    return _compute(problem, limits, options, max(workspace_bytes - limits.lib_api_workspace_bytes, 0))


def _compute(problem: Problem, soc, options: PlanOptions, user_workspace_limit: Optional[int]) -> Plan:
    """aclfaPlanCompute, or aclfaPlanComputeWithin with `user_workspace_limit` bytes."""
    limits = soc if isinstance(soc, ChipLimits) else chip(soc)
    problem = pad_head_dim(problem)
    lens_q = None if options.seq_lens_q is None else tuple(options.seq_lens_q)
    lens_kv = None if options.seq_lens_kv is None else tuple(options.seq_lens_kv)
    mask_shape = None if options.mask_shape is None else tuple(options.mask_shape)
    options = replace(options, seq_lens_q=lens_q, seq_lens_kv=lens_kv, mask_shape=mask_shape)
    if lens_q is not None and lens_kv and lens_q:  # varlen: the batch is the sequences
        problem = replace(problem, batch=len(lens_q), seq_q=max(lens_q), seq_kv=max(lens_kv))
    c, c_limits = c_problem_and_limits(limits, problem, options)
    out = ffi.new("aclfaPlan *")
    err = ffi.new("char[]", _ERR_LEN)
    status = (_plan_lib().aclfaPlanCompute(c, c_limits, out, err, _ERR_LEN) if user_workspace_limit is None else
              _plan_lib().aclfaPlanComputeWithin(c, c_limits, user_workspace_limit, out, err, _ERR_LEN))
    if status != 0:
        raise PlanError(ffi.string(err).decode())
    return Plan(
        **PlannedSizes.of(limits, problem), block_m=out.blockM, block_n=out.blockN, sub_block_m=out.subBlockM,
        num_q_blocks=out.numQBlocks, num_kv_blocks=out.numKvBlocks, q_zigzag=bool(out.qZigzag),
        used_core_num=out.usedCoreNum, total_items=out.totalItems,
        core_item_start=[out.coreItemStart[i] for i in range(out.usedCoreNum + 1)],
        total_work=out.totalWork, max_core_work=out.maxCoreWork,
        mean_core_work=out.meanCoreWork, imbalance=out.imbalance,
        budget=[BudgetLine(ffi.string(line.name).decode(), line.bytes, line.capacity)
                for line in out.lines[0:out.numLines]],
        ws_score_offset=out.wsScoreOffset, ws_prob_offset=out.wsProbOffset,
        ws_pv_offset=out.wsPvOffset, ws_bytes_per_core=out.wsBytesPerCore,
        solo_rows=bool(out.soloRows),
        user_workspace_bytes=out.userWorkspaceBytes,
        system_workspace_bytes=limits.lib_api_workspace_bytes, tiling_key=out.tilingKey,
        pre_tokens=c.preTokens, next_tokens=c.nextTokens, seq_lens_q=lens_q, seq_lens_kv=lens_kv,
        mask_shape=mask_shape, dropout=bool(options.dropout), dropout_mask_out=bool(options.dropout_mask_out),
        given_head_dim=problem.given_head_dim if problem.padded else 0,
    )


def analytic_cycles(problem: Problem, soc: "Optional[str | ChipLimits]" = None,
                    options: PlanOptions = _NO_OPTIONS) -> float:
    """The tiling policy's analytic modeled cycles of the forward with the problem's (block_m,
    block_n) (op_host/block_cost.h; MIX path): the cost the auto blocks minimize."""
    limits = soc if isinstance(soc, ChipLimits) else chip(soc)
    c, c_limits = c_problem_and_limits(limits, problem, options)
    return float(_plan_lib().aclfaPlanModeledCycles(c, c_limits, problem.block_m, problem.block_n))


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.2f} MiB"


def _band_text(p: Plan) -> str:
    """' window pre=.. next=..' and ' varlen (k sequences)' where they apply, else ''."""
    text = ""
    if p.pre_tokens < UNBOUNDED or p.next_tokens < UNBOUNDED:
        side = lambda v: "unbounded" if v >= UNBOUNDED else str(v)  # noqa: E731
        text += f" band pre_tokens={side(p.pre_tokens)} next_tokens={side(p.next_tokens)}"
    if p.seq_lens_q is not None:
        text += f" varlen ({len(p.seq_lens_q)} sequences, Sq/Skv above are the longest)"
    if p.mask_shape is not None:
        text += f" mask {list(p.mask_shape)}"
    if p.dropout:
        text += " dropout" + (" (keep mask written)" if p.dropout_mask_out else "")
    return text


def format_plan(p: Plan) -> str:
    """A human-readable report of one plan."""
    c = p.chip
    kernel = "yes" if c.has_kernel else f"no (the op is built for {', '.join(KERNEL_SOCS)})"
    unit = "AI Core" if c.coupled else "AIV"
    unit_rows = (f"one AI Core takes all {p.sub_block_m} rows" if c.coupled
                 else f"each AIV {p.sub_block_m} rows")
    lines = [
        f"chip      {c.name} ({c.short_soc}): {c.aic_num} AIC / {c.aiv_num} AIV, UB {c.ub_bytes} B, "
        f"L1 {c.l1_bytes} B, L0A/B/C {c.l0a_bytes}/{c.l0b_bytes}/{c.l0c_bytes} B; kernel: {kernel}",
        f"problem   B={p.batch} N={p.heads} Nkv={p.kv_heads} Sq={p.seq} Skv={p.seq_kv} D={p.head_dim} "
        f"{p.dtype} {p.layout}{' causal' if p.causal else ''}{_band_text(p)}",
        f"blocks    BLOCK_M={p.block_m} ({unit_rows}) BLOCK_N={p.block_n}; "
        f"{p.num_q_blocks} query x {p.num_kv_blocks} kv blocks per head",
        f"budget    (per {unit} UB buffers in the kernel's InitBuffer order, then totals)",
    ]
    lines += budget_lines(p.budget)
    order = "zigzag query blocks" if p.q_zigzag else "in order"
    cores = "AI Cores" if c.coupled else "AIC cores"
    lines.append(
        f"cores     {p.total_items} items ({order}) on {p.used_core_num} of {c.aic_num} {cores}; "
        f"work (kv blocks) total {p.total_work}, max/core {p.max_core_work}, "
        f"mean {p.mean_core_work:.1f}, max/mean {p.imbalance:.3f}")
    if c.coupled:
        lines.append(f"workspace {p.workspace_bytes} B ({_mib(p.workspace_bytes)}) = system "
                     f"{p.system_workspace_bytes}; no user workspace (S, P and P.V stay in each AI Core)")
    else:
        lines.append(f"workspace {p.workspace_bytes} B ({_mib(p.workspace_bytes)}) = system "
                     f"{p.system_workspace_bytes} + {p.used_core_num} AIC groups x {p.ws_bytes_per_core} B "
                     f"(score @{p.ws_score_offset}, prob @{p.ws_prob_offset} in the score rows, pv @{p.ws_pv_offset})")
    lines += [
        f"memory    {p.device_bytes} B ({_mib(p.device_bytes)}) of device memory per call = q, k, v, out, lse "
        f"{p.tensor_bytes} B ({_mib(p.tensor_bytes)}) + workspace {p.workspace_bytes} B",
        f"tiling key {p.tiling_key:#x}",
    ]
    if p.given_head_dim:
        lines.insert(2, f"padding   head dim {p.given_head_dim} padded to D={p.head_dim} on the device (zero columns, "
                        f"aclrtMemcpy2d row copies; the host copies only the caller's bytes): +"
                        f"{100 * p.padding_macs_fraction:.1f}% cube MACs, +{p.padding_bytes} B "
                        f"({_mib(p.padding_bytes)}) of q, k, v, out on the device")
    return "\n".join(lines)


def format_plan_table(rows: list) -> str:
    """One line per chip: rows are (ChipLimits, Plan or the PlanError message)."""
    header = (f"{'chip':<14} {'AIC/AIV':>8} {'UB':>7} {'L1':>7} {'BLOCK_M':>7} {'BLOCK_N':>7} "
              f"{'UB used':>8} {'cores':>5} {'max/mean':>8} {'workspace':>12} {'device mem':>12}  kernel")
    out = [header]
    for c, p in rows:
        kernel = "yes" if c.has_kernel else "no"
        head = f"{c.name:<14} {f'{c.aic_num}/{c.aiv_num}':>8} {c.ub_bytes:>7} {c.l1_bytes:>7}"
        if isinstance(p, Plan):
            ub = next(b for b in p.budget if b.name.startswith("UB total"))
            out.append(f"{head} {p.block_m:>7} {p.block_n:>7} {ub.bytes:>8} {p.used_core_num:>5} "
                       f"{p.imbalance:>8.3f} {_mib(p.workspace_bytes):>12} {_mib(p.device_bytes):>12}  {kernel}")
        else:
            out.append(f"{head}  rejected: {p}")
    return "\n".join(out)
