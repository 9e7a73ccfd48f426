"""A roofline per simulated SoC: the simulator's counters become a MODELED lower bound of the
NPU time, and the bound that dominates. Never an NPU timing (docs/simulator.md#modeled-not-measured).

    time >= max(cube MACs / cube peak, vector elements / vector throughput, HBM bytes / HBM bandwidth)

Peaks come from the simulator's chip catalogue (docs/cann-facts.md#chips): cube peak = fp16 TFLOPS / 2
MAC/s; vector throughput = AIV count x clock x 64 elements per cycle (one 256-byte repeat of fp32
per cycle per AIV; the kernel's vector work is fp32 between the two matmuls); HBM bandwidth as
catalogued (several are marked "assumed" there). HBM bytes should be the L2 model's, not raw GM bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..runtime.ffi import ffi
from . import forward as plan

__all__ = ["ChipPeaks", "Roofline", "chip_peaks", "roofline", "VECTOR_BYTES_PER_CYCLE", "VECTOR_ELEM_BYTES"]

VECTOR_BYTES_PER_CYCLE = 256   # one vector repeat per cycle per AIV (docs/cann-facts.md#chips)
VECTOR_ELEM_BYTES = 4          # elements counted as fp32: 64 per cycle per AIV
LABEL = "modeled NPU time lower bound (roofline from simulator counters; not a measurement)"


@dataclasses.dataclass(frozen=True)
class ChipPeaks:
    name: str
    aic_num: int
    aiv_num: int               # for coupled chips (910A, 310P) the AI Cores' vector units are counted
    clock_hz: float
    cube_macs_per_s: float
    vector_elems_per_s: float
    hbm_bytes_per_s: float
    l2_bytes: int
    l2_line_bytes: int


def _peaks_from_c(c) -> ChipPeaks:
    aic, aiv = int(c.aicNum), int(c.aivNum)
    vector_units = aic + aiv if int(c.coupled) else aiv
    clock = float(c.clockMHz) * 1e6
    return ChipPeaks(
        name=ffi.string(c.name).decode(), aic_num=aic, aiv_num=vector_units, clock_hz=clock,
        cube_macs_per_s=float(c.cubeFp16Tflops) * 1e12 / 2,
        vector_elems_per_s=vector_units * clock * (VECTOR_BYTES_PER_CYCLE // VECTOR_ELEM_BYTES),
        hbm_bytes_per_s=float(c.hbmBandwidthGBs) * 1e9, l2_bytes=int(c.l2Bytes),
        l2_line_bytes=int(c.l2LineBytes))


def chip_peaks(name: Optional[str] = None) -> ChipPeaks:
    """Peaks of a chip of the simulator's catalogue (default as acl_fa.plan.forward.chip)."""
    limits = plan.chip(name)  # validates the name with the catalogue's own error
    return _peaks_from_c(plan._catalogue_lib().aclfaSimFindChip(limits.name.encode()))


@dataclasses.dataclass(frozen=True)
class Roofline:
    chip: str
    cube_s: float
    vector_s: float
    hbm_s: float

    @property
    def time_s(self) -> float:
        return max(self.cube_s, self.vector_s, self.hbm_s)

    @property
    def bound(self) -> str:
        """'cube', 'vector' or 'hbm': the term that sets the bound."""
        return max((self.cube_s, "cube"), (self.vector_s, "vector"), (self.hbm_s, "hbm"))[1]

    def to_dict(self) -> dict:
        return {"chip": self.chip, "label": LABEL, "cube_s": self.cube_s, "vector_s": self.vector_s,
                "hbm_s": self.hbm_s, "time_s": self.time_s, "bound": self.bound}


def roofline(peaks: ChipPeaks, cube_macs: int, vector_elems: int, hbm_bytes: int) -> Roofline:
    """The three terms of the bound for one launch's counters on `peaks`."""
    for what, value in (("cube_macs", cube_macs), ("vector_elems", vector_elems), ("hbm_bytes", hbm_bytes)):
        if value < 0:
            raise ValueError(f"roofline: {what} must be >= 0, got {value}")
    return Roofline(peaks.name, cube_macs / peaks.cube_macs_per_s, vector_elems / peaks.vector_elems_per_s,
                    hbm_bytes / peaks.hbm_bytes_per_s)
