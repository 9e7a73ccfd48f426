"""One measured op problem (the forward by default) on a Session: upload, timed launches, outputs, counters.

Shared by ``acl-fa run`` and ``acl-fa bench``. Times come from two events around each launch
on the op's stream: device time on an NPU, the kernel's host wall time on the simulator. On
the simulator, the counters of the last launch are read and, when asked, one more launch runs
with the GM access trace and the instruction trace on (outside the timing: tracing slows it) to
model the chip's L2 and the kernel's NPU time (acl_fa.plan.timing; modeled, not measured).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from ..plan import l2model, timing
from ..runtime import sim_stats
from ..runtime.ffi import ffi
from ..ops.forward import runner_for
from ..ops.problem import check_plan
from ..spec.problem import Problem
from ..plan.roofline import chip_peaks
from ..ops.opcall import OpRunner
from ..runtime.session import DeviceSession

__all__ = ["Measurement", "measure"]


@dataclasses.dataclass
class Measurement:
    plan: object                      # acl_fa.plan.forward.Plan of the problem on the session's chip
    soc: str
    times_ms: list                    # one per timed launch
    out: Optional[np.ndarray]         # attention_out (when downloaded)
    lse: Optional[np.ndarray]         # softmax_lse [B, N, Sq] float32 (when downloaded)
    device_bytes: dict                # inputs, outputs, workspace, intermediate (workspace scratch)
    stats: Optional[dict]             # simulator counters of the last timed launch (None on an NPU)
    l2: Optional[object]              # l2model.L2Stats, trace replayed in launch order
    l2_interleaved: Optional[object]  # l2model.L2Stats, AI Core groups interleaved as on the chip
    traffic: Optional[dict]           # GM trace bytes by tensor: {<role>|workspace|other: {read, write}}
    outputs: dict                     # every output role of the op -> array (when downloaded)
    l2_modeled: Optional[object] = None   # l2model.L2Stats, trace replayed in modeled time order (deterministic)
    model: Optional[object] = None        # timing.ModelReport of the traced launch


def measure(session: DeviceSession, problem: Problem, *inputs, warmup: int, iters: int, download: bool = True,
            per_core: bool = False, l2: bool = False, tick: Optional[Callable[[str, int], None]] = None,
            runner: Optional[OpRunner] = None, check: Optional[Callable] = None,
            host_orders: bool = False) -> Measurement:
    """Uploads the inputs (q, k, v for the forward) once, launches warmup + iters times (timing
    the last iters; both may be 0 when only the traced launch of `l2` is wanted) and reads back the
    outputs (download) and, on the simulator, the counters
    (per_core: also per core) and the L2 model (l2: in modeled order; with host_orders also in
    launch and interleaved order, which `acl-fa bench` shows: each replay of the host-order trace
    costs tens of bytes of host memory per GM access). `tick(stage, steps)` reports progress.
    Another op: its `runner` (acl_fa.ops.opcall.runner_for) and `check(problem, soc) -> plan` (None
    for an op without a plan mirror: the Measurement's plan and intermediate bytes are then None)."""
    tick = tick or (lambda stage, steps: None)
    soc = session.soc_name()
    plan = (check or check_plan)(problem, soc)
    sim = session.backend.name == "sim"
    runner = runner_for(session) if runner is None else runner
    with session.in_flight(), runner.lock:  # close() waits for the measurement
        prepared = runner.prepare(problem)
        if prepared.fitted is not None:  # its tiling fitted to the device's memory (docs/memory.md)
            plan = (check or check_plan)(prepared.fitted, soc)
        prepared.upload(*inputs)
        stream = runner.stream
        start, end = session.event(), session.event()
        try:
            times = []
            for i in range(warmup + iters):
                start.record(stream)
                runner.launch(prepared, stream)
                end.record(stream)
                stream.synchronize()
                if i >= warmup:
                    times.append(start.elapsed_ms(end))
                tick("launch", 1)
        finally:
            start.close()
            end.close()
        # an optional output the call does not ask for has no buffer
        outputs = {role: prepared.read(role) for role in runner.op.outputs if role in prepared.buffers} \
            if download else {}
        # (no untimed or timed launch: no counters of this problem to read)
        stats = sim_stats.last_launch(session.backend, per_core=per_core) if sim and warmup + iters else None
        l2_launch = l2_interleaved = traffic = l2_modeled = model = None
        if sim and l2:
            peaks = chip_peaks(soc)
            with l2model.gm_trace(session.backend), timing.op_trace(session.backend):
                runner.launch(prepared, stream)
                stream.synchronize()
                model = timing.last_model(session.backend)
                l2_modeled = l2model.model_trace(session.backend, peaks.l2_bytes, peaks.l2_line_bytes,
                                                 order="modeled")
                if host_orders:
                    l2_launch = l2model.model_trace(session.backend, peaks.l2_bytes, peaks.l2_line_bytes)
                    l2_interleaved = l2model.model_trace(session.backend, peaks.l2_bytes, peaks.l2_line_bytes,
                                                         order="concurrent")
                regions = {name: (int(ffi.cast("uintptr_t", buf.ptr)), buf.nbytes)
                           for name, buf in prepared.buffers.items()}
                if prepared.workspace is not None:
                    regions["workspace"] = (int(ffi.cast("uintptr_t", prepared.workspace.ptr)),
                                            prepared.workspace.nbytes)
                traffic = l2model.traffic_by_region(session.backend, regions)
        device_bytes = dict(prepared.bytes_by_role(), intermediate=None if plan is None else plan.user_workspace_bytes)
    return Measurement(plan, soc, times, outputs.get("out"), outputs.get("lse"), device_bytes, stats, l2_launch,
                       l2_interleaved, traffic, outputs, l2_modeled, model)
