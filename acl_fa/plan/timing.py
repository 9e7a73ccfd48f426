"""Modeled NPU time: the simulator's pipeline model over a launch's instruction trace (sim only).

With the trace on (``op_trace``), every launch records what its Ascend C calls would issue on
each core and replays it in a discrete-event model of the AI Cores (docs/timing_model.md): pipes
in order and in parallel, flags, queue hand-offs, Matmul requests to the AIC, GM bandwidth
shared by the active cores. Costs come from the chip's cost table; each constant is sourced or
marked "assumed" (``cost_fields``). Everything here is MODELED, never a chip measurement, and
deterministic (it depends on the trace, not on host threads).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional

import numpy as np

from ..runtime.ffi import ffi
from ..runtime.errors import AclError, InvalidArgumentError
from ..runtime.loader import Backend

__all__ = ["PIPES", "ModelReport", "op_trace", "last_model", "modeled_ops", "modeled_gm_trace", "pipe_costs",
           "cost_fields", "remodel", "summary", "format_summary", "OPS_DTYPE", "LABEL", "L2_RATE_FIELDS",
           "L2_OVER_HBM", "CALIBRATED_CYCLE_SCALE", "l2_rate_scale", "with_l2_rates", "joint_latency_costs",
           "calibrated_costs"]

PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")   # CANN's pipe names; M is the cube
LABEL = "modeled (acl-fa pipeline model over the simulator's instruction trace; not a measurement)"
TRACE_OPS, TRACE_RACES = 1, 2
OPS_DTYPE = np.dtype([("start", "<f8"), ("end", "<f8"), ("api", "<u8"), ("units", "<u8"), ("core", "<u2"),
                      ("pipe", "u1"), ("kind", "u1"), ("seq", "<u4")])
KINDS = ("instruction", "stall", "cube job")


def _engine(backend: Backend) -> Backend:
    backend.load_op_library()  # the engine (libascendc_sim) comes with the op library
    return backend


@contextlib.contextmanager
def op_trace(backend: Backend, races: bool = False):
    """Records and models the launches inside the block; with `races`, a launch with a pipe race
    fails with ACL_ERROR_RT_AICORE_EXCEPTION naming both instructions."""
    _engine(backend).call("aclfaSimSetOpTrace", TRACE_OPS | (TRACE_RACES if races else 0))
    try:
        yield
    finally:
        backend.call("aclfaSimSetOpTrace", 0)


@dataclasses.dataclass
class ModelReport:
    chip: str
    cycles: float
    clock_mhz: float
    ops: int
    active_cores: int
    core_gm_bytes_per_cycle: float
    races_checked: bool
    aic_busy: np.ndarray      # [aic, pipe] busy cycles
    aiv_busy: np.ndarray      # [aiv, pipe]
    aic_end: np.ndarray
    aiv_end: np.ndarray
    pipeline_cycles: float = 0.0      # the replay's time; cycles is the largest of it and the bounds
    l2_bound_cycles: float = 0.0      # gm_bytes at the chip's L2 rate
    hbm_bound_cycles: float = 0.0     # compulsory_hbm_bytes at the chip's HBM rate
    gm_bytes: float = 0.0
    compulsory_hbm_bytes: float = 0.0

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def bound(self) -> str:
        """What sets the modeled time: "pipeline" (the replay), or the memory bound that exceeds
        it, "l2" (all GM bytes at the chip's L2 rate) or "hbm" (compulsory bytes at the HBM rate)."""
        return max((self.pipeline_cycles, "pipeline"), (self.l2_bound_cycles, "l2"),
                   (self.hbm_bound_cycles, "hbm"), key=lambda t: t[0])[1]

    def busy_fraction(self) -> dict:
        """Per pipe: the busiest core's busy cycles / kernel cycles (AIC and AIV tracks apart)."""
        out = {}
        for side, busy in (("aic", self.aic_busy), ("aiv", self.aiv_busy)):
            if busy.size == 0:
                continue
            peak = busy.max(axis=0) / self.cycles if self.cycles else busy.max(axis=0) * 0
            for i, pipe in enumerate(PIPES):
                if busy[:, i].any():
                    out[f"{side}.{pipe}"] = float(peak[i])
        return out

    @property
    def critical(self) -> str:
        """The memory bound that sets the time ("l2", "hbm"), else the pipe that is busy the
        largest fraction of the kernel time on its busiest core."""
        if self.bound != "pipeline":
            return self.bound
        fractions = self.busy_fraction()
        return max(fractions, key=fractions.get) if fractions else "none"

    def tflops(self, flops: float) -> float:
        return flops / self.seconds / 1e12 if self.cycles else 0.0

    def to_dict(self) -> dict:
        return {"label": LABEL, "chip": self.chip, "cycles": self.cycles, "clock_mhz": self.clock_mhz,
                "seconds": self.seconds, "instructions": self.ops, "active_cores": self.active_cores,
                "core_gm_bytes_per_cycle": self.core_gm_bytes_per_cycle, "races_checked": self.races_checked,
                "busy_fraction": self.busy_fraction(), "critical": self.critical,
                "pipeline_cycles": self.pipeline_cycles, "l2_bound_cycles": self.l2_bound_cycles,
                "hbm_bound_cycles": self.hbm_bound_cycles, "gm_bytes": self.gm_bytes,
                "compulsory_hbm_bytes": self.compulsory_hbm_bytes}


def _report(chip: str, s) -> ModelReport:
    def matrix(rows, n):
        return np.array([[float(rows[i][p]) for p in range(len(PIPES))] for i in range(n)]).reshape(n, len(PIPES))

    return ModelReport(chip, float(s.cycles), float(s.clockMHz), int(s.ops), int(s.activeCores),
                       float(s.coreGmBytesPerCycle), bool(s.racesChecked), matrix(s.aicBusy, int(s.aicUsed)),
                       matrix(s.aivBusy, int(s.aivUsed)), np.array([float(s.aicEnd[i]) for i in range(s.aicUsed)]),
                       np.array([float(s.aivEnd[i]) for i in range(s.aivUsed)]), float(s.pipelineCycles),
                       float(s.l2BoundCycles), float(s.hbmBoundCycles), float(s.gmBytes), float(s.compulsoryHbmBytes))


def _chip(backend: Backend) -> str:
    return ffi.string(backend.fn("aclrtGetSocName")()).decode()


def _modeled(backend: Backend, api: str, *args) -> None:
    """Calls one of the engine's queries of the last modeled launch. The engine answers
    ACL_ERROR_FAILURE when there is none yet (sim/src/engine/timing.cpp); that is a usage error
    that says what to do."""
    try:
        _engine(backend).call(api, *args)
    except AclError as err:
        if err.name != "ACL_ERROR_FAILURE":
            raise
        raise InvalidArgumentError(f"{api}: no launch has been modeled in this process; make the launch "
                                   "inside acl_fa.plan.timing.op_trace(backend) first") from err


def last_model(backend: Backend) -> ModelReport:
    """The model of the last launch made inside ``op_trace``."""
    stats = ffi.new("aclfaSimModelStats *")
    _modeled(backend, "aclfaSimGetModelStats", stats)
    return _report(_chip(backend), stats)


def modeled_ops(backend: Backend) -> tuple:
    """(schedule, api names): the last traced launch's schedule as an OPS_DTYPE array (a copy),
    sorted by core then start, and {api pointer: name} for its "api" column."""
    ops = ffi.new("const aclfaSimModeledOp **")
    count = ffi.new("uint64_t *")
    _modeled(backend, "aclfaSimGetModeledOps", ops, count)
    if ffi.sizeof("aclfaSimModeledOp") != OPS_DTYPE.itemsize:
        raise RuntimeError("OPS_DTYPE does not match aclfaSimModeledOp")
    n = int(count[0])
    if n == 0:
        return np.empty(0, OPS_DTYPE), {}
    array = np.frombuffer(ffi.buffer(ops[0], n * OPS_DTYPE.itemsize), OPS_DTYPE).copy()
    names = {int(p): ffi.string(ffi.cast("const char *", int(p))).decode() for p in np.unique(array["api"]) if p}
    return array, names


def modeled_gm_trace(backend: Backend):
    """(pointer, count) of the last traced launch's GM accesses in modeled order (aclfaSimGmAccess
    records, valid until the next traced launch): the L2 replay input."""
    records = ffi.new("const aclfaSimGmAccess **")
    count = ffi.new("uint64_t *")
    _modeled(backend, "aclfaSimGetModeledGmTrace", records, count)
    return records[0], int(count[0])


def cost_fields(backend: Backend) -> list:
    """[(field, source)] of the cost table, in declaration order; the source starts with
    "assumed" where no public fact backs the value, "derived" where a sourced figure is combined
    by an assumed rule."""
    field = _engine(backend).fn("aclfaSimPipeCostField")
    out = []
    source = ffi.new("const char **")
    i = 0
    while True:
        name = field(i, source)
        if name == ffi.NULL:
            return out
        out.append((ffi.string(name).decode(), ffi.string(source[0]).decode()))
        i += 1


def pipe_costs(backend: Backend, chip: Optional[str] = None) -> dict:
    """The cost table of a catalogue chip (default: the session's)."""
    costs = ffi.new("aclfaSimPipeCosts *")
    _engine(backend).call("aclfaSimGetPipeCosts", chip.encode() if chip else ffi.NULL, costs)
    return {name: float(getattr(costs, name)) for name, _ in cost_fields(backend)}


def remodel(backend: Backend, costs: dict) -> ModelReport:
    """The last traced launch replayed with other costs (a full table, e.g. pipe_costs edited)."""
    table = ffi.new("aclfaSimPipeCosts *")
    for name, value in costs.items():
        setattr(table, name, float(value))
    stats = ffi.new("aclfaSimModelStats *")
    _modeled(backend, "aclfaSimRemodel", table, stats)
    return _report(_chip(backend), stats)


# The chip's L2 rates are the one uncertain rate family of the cost table (docs/timing_model.md
# "Calibration and ranges"): the aggregate rate and the per-core L2 ports (reads, FixPipe and MTE3
# writes) scale together. Nominal: the platform file's per-core rates, the aggregate all AI Cores at
# l2_rate (derived). Fast end: an aggregate of L2_OVER_HBM x the HBM rate, production's own ratio
# (ops-transformer attention/mla_preprocess/op_kernel/mla_hardware.h, HardwareInfo: l2BW 5, hbmBW 1).
L2_RATE_FIELDS = ("gmBytesPerCycle", "corePortBytesPerCycle", "corePortWriteBytesPerCycle", "mte3BytesPerCycle")
L2_OVER_HBM = 5.0
# Calibrated (bench/model_validation.py): with the L2 rates at L2_OVER_HBM x HBM, all assumed cycle
# costs x this scale model the PTO-DSL FlashAttention's measured 3185 us at S = 32768 (fifo_attention
# kernel); validated at S = 16384 (913 us modeled against 1001 measured). The fast end of the ranges.
CALIBRATED_CYCLE_SCALE = 0.587


def l2_rate_scale(costs: dict) -> float:
    """The factor on L2_RATE_FIELDS that takes the chip's aggregate L2 rate to L2_OVER_HBM x its HBM
    rate (1 where the table's rate is already there or above)."""
    return max(1.0, L2_OVER_HBM * costs["hbmBytesPerCycle"] / costs["gmBytesPerCycle"])


def with_l2_rates(costs: dict, scale: float) -> dict:
    """The cost table with every L2 rate (L2_RATE_FIELDS) times `scale`."""
    return dict(costs, **{name: costs[name] * scale for name in L2_RATE_FIELDS})


def joint_latency_costs(fields: list, costs: dict, scale: float) -> dict:
    """The cost table with every assumed cycle cost (of `fields`, cost_fields(): a field whose source
    is "assumed" and whose name ends in "Cycles" -- latencies, issue and flag costs, the Exp
    repeat) times `scale` at once."""
    assumed = {name for name, source in fields if source.startswith("assumed") and name.endswith("Cycles")}
    return dict(costs, **{name: costs[name] * scale for name in assumed})


def calibrated_costs(fields: list, costs: dict) -> dict:
    """The calibrated end of the ranges: the L2 rates at L2_OVER_HBM x HBM and every assumed cycle
    cost (of `fields`, cost_fields()) x CALIBRATED_CYCLE_SCALE."""
    return joint_latency_costs(fields, with_l2_rates(costs, l2_rate_scale(costs)), CALIBRATED_CYCLE_SCALE)


def summary(model: ModelReport, flops: float, hbm_bytes: Optional[int], peaks,
            rates_of: Optional[Backend] = None) -> dict:
    """The modeled kernel time: the pipeline model's, or the HBM time of the L2 model's traffic
    (hbm_bytes, L2 replayed in modeled order) when that is longer; TFLOP/s of `flops` useful
    operations at that time and the fraction of the chip's fp16 cube peak (peaks: roofline.ChipPeaks).
    With `rates_of` (the backend that traced `model`'s launch, its last), also "range_s": the time
    with the calibrated costs (calibrated_costs) and with the nominal table (one replay more)."""
    hbm_s = hbm_bytes / peaks.hbm_bytes_per_s if hbm_bytes is not None else 0.0
    time_s = max(model.seconds, hbm_s)
    extra = {}
    if rates_of is not None:
        costs = pipe_costs(rates_of)
        fast = remodel(rates_of, calibrated_costs(cost_fields(rates_of), costs))
        extra = {"range_s": (max(fast.seconds, hbm_s), time_s), "l2_rate_range_bytes_per_s": (
            costs["gmBytesPerCycle"] * costs["clockMHz"] * 1e6,
            l2_rate_scale(costs) * costs["gmBytesPerCycle"] * costs["clockMHz"] * 1e6)}
    return extra | {"label": LABEL, "time_s": time_s, "pipeline_s": model.seconds, "hbm_s": hbm_s,
            "tflops": flops / time_s / 1e12 if time_s else 0.0,
            "cube_peak_fraction": flops / 2 / time_s / peaks.cube_macs_per_s if time_s else 0.0,
            "critical": "hbm" if hbm_s > model.seconds else model.critical,
            "busy_fraction": model.busy_fraction(), "clock_mhz": model.clock_mhz, "chip": model.chip,
            "instructions": model.ops}


def format_summary(s: dict) -> list:
    """Report lines of a summary(): time, throughput, critical resource, busy pipes."""
    busy = s["busy_fraction"]
    critical = s["critical"]
    bounds = {"hbm": "HBM traffic (memory bound)", "l2": "GM traffic at the chip's L2 rate (memory bound)"}
    what = bounds.get(critical) or f"{critical} busy {100 * busy.get(critical, 0):.0f}%"
    pipes = "  ".join(f"{k} {100 * v:.0f}%" for k, v in busy.items())
    lines = [f"modeled     {s['time_s'] * 1e6:.1f} us on {s['chip']} at {s['clock_mhz']:.0f} MHz, "
             f"{s['tflops']:.1f} TFLOP/s ({100 * s['cube_peak_fraction']:.1f}% of the fp16 cube peak); "
             f"critical: {what} (pipeline model, not a measurement)"]
    if "range_s" in s:
        fast, slow = s["range_s"]
        low, high = s["l2_rate_range_bytes_per_s"]
        lines.append(f"            range {fast * 1e6:.1f} - {slow * 1e6:.1f} us: calibrated (L2 {high / 1e12:.2f} TB/s, "
                     f"assumed cycle costs x{CALIBRATED_CYCLE_SCALE}) to nominal (L2 {low / 1e12:.2f} TB/s) "
                     f"(docs/timing_model.md \"Calibration and ranges\")")
    return lines + [f"            pipe busy on the busiest core: {pipes}"]
