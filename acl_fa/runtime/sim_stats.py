"""Counters of the simulator's last kernel launch (aclfaSimGetLastLaunchStats; sim only).

They count what the operator's source did on the simulated chip -- GM bytes, cube MACs, vector
elements, scalar accesses, UB/L1 high-water marks -- and are not NPU timings (docs/simulator.md#counters).
"""

from __future__ import annotations

from typing import Optional

from .ffi import ffi
from .loader import Backend, get_backend

__all__ = ["last_launch", "core_loads"]

_FIELDS = (("gm_read_bytes", "gmReadBytes"), ("gm_write_bytes", "gmWriteBytes"), ("cube_macs", "cubeMacs"),
           ("vector_elems", "vectorElems"), ("scalar_accesses", "scalarAccesses"),
           ("ub_high_water", "ubHighWater"), ("l1_high_water", "l1HighWater"), ("work_items", "workItems"),
           ("atomic_add_bytes", "atomicAddBytes"), ("sync_all_calls", "syncAllCalls"),
           ("inter_block_flag_calls", "interBlockFlagCalls"))


def _core(c) -> dict:
    return {name: int(getattr(c, field)) for name, field in _FIELDS}


def last_launch(backend: Optional[Backend] = None, per_core: bool = False) -> dict:
    """Totals (and, with per_core, the per-AIC and per-AIV counters) of the last launch on
    `backend` (default: the current one, acl_fa.get_backend()). ``work_items``: the
    (batch, head, query block) items the launch's tiling gave the AIC cores."""
    backend = backend if backend is not None else get_backend()
    stats = ffi.new("aclfaSimLaunchStats *")
    backend.call("aclfaSimGetLastLaunchStats", stats)
    result = _core(stats.total)
    result.update(kernel=ffi.string(stats.kernelName).decode(), block_dim=int(stats.blockDim),
                  kernel_type=int(stats.kernelType),
                  wall_seconds=float(stats.wallSeconds),
                  gm_bytes=result["gm_read_bytes"] + result["gm_write_bytes"])
    if per_core:
        result["aic"] = [_core(stats.aic[i]) for i in range(stats.aicUsed)]
        result["aiv"] = [_core(stats.aiv[i]) for i in range(stats.aivUsed)]
    return result


def core_loads(stats: dict, key: str = "cube_macs") -> tuple:
    """(max, mean) of `key` over the AIC cores of a per_core stats dict."""
    values = [core[key] for core in stats["aic"]]
    return max(values), sum(values) / len(values)
