"""``acl-fa profile``: one problem's modeled NPU timeline (sim only; acl_fa.plan.timing).

Runs the problem once with the instruction trace on and returns the pipeline model's schedule:
as a Chrome/Perfetto trace (one process per core, one thread per pipe; flag, Matmul and SyncAll
waits as "wait" slices), as a timeline picture of one AI Core group over its first work item,
and, when asked, the sensitivity of the modeled time to each assumed or derived cost (x0.5 and x1.5).
Everything here is modeled, never measured.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..plan import timing
from ..spec.problem import Problem
from .measure import measure
from ..plan.roofline import chip_peaks
from .run import random_inputs
from .settings import JobSettings
from ..runtime.session import DeviceSession
from ..runtime.errors import InvalidArgumentError

__all__ = ["ProfileReport", "profile_job", "chrome_trace", "plot_timeline", "sensitivity", "format_profile"]

KIND_NAMES = ("instruction", "wait", "cube job")


@dataclasses.dataclass
class ProfileReport:
    problem: Problem
    soc: str
    block_m: int
    block_n: int
    summary: dict                 # timing.summary
    ops: np.ndarray               # timing.OPS_DTYPE schedule
    api_names: dict               # api pointer -> name
    clock_mhz: float
    sensitivity: Optional[list]   # [(field, change at x0.5, change at x1.5)] fractions of the pipeline time

    def to_dict(self) -> dict:
        data = {"soc": self.soc, "block_m": self.block_m, "block_n": self.block_n, "modeled_time": self.summary}
        if self.sensitivity is not None:
            data["sensitivity"] = [{"cost": f, "x0.5": lo, "x1.5": hi} for f, lo, hi in self.sensitivity]
        return data


JOINT = "all assumed cycle costs"   # the row of timing.joint_latency_costs


def sensitivity(backend, factor: float = 0.5) -> list:
    """[(field, relative change of the modeled time at x(1-factor), at x(1+factor))] for each
    cost marked "assumed" or "derived" (a sourced figure combined by an assumed rule), on the
    last traced launch; first the row JOINT, every assumed cycle cost scaled at once."""
    base_costs = timing.pipe_costs(backend)
    base = timing.remodel(backend, base_costs).cycles
    fields = timing.cost_fields(backend)
    joint = [timing.remodel(backend, timing.joint_latency_costs(fields, base_costs, scale)).cycles / base - 1
             for scale in (1 - factor, 1 + factor)]
    rows = []
    for field, source in fields:
        if not source.startswith(("assumed", "derived")):
            continue
        changes = []
        for scale in (1 - factor, 1 + factor):
            cycles = timing.remodel(backend, dict(base_costs, **{field: base_costs[field] * scale})).cycles
            changes.append(cycles / base - 1)
        rows.append((field, changes[0], changes[1]))
    return [(JOINT, joint[0], joint[1])] + sorted(rows, key=lambda r: -max(abs(r[1]), abs(r[2])))


def profile_job(problem: Problem, settings: JobSettings = JobSettings(), *,
                with_sensitivity: bool = False) -> ProfileReport:
    """One launch of `problem` with the instruction trace on, modeled (warmup, iters, check, l2 and
    progress of the settings do not apply)."""
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        if session.backend.name != "sim":
            raise InvalidArgumentError("acl-fa profile models the NPU on the simulator; use --backend sim")
        q, k, v = random_inputs(problem, settings.seed)
        m = measure(session, problem, q, k, v, warmup=0, iters=1, download=False, l2=True)
        ops, names = timing.modeled_ops(session.backend)
        summary = timing.summary(m.model, problem.flops(), m.l2_modeled.hbm_bytes, chip_peaks(m.soc))
        sens = sensitivity(session.backend) if with_sensitivity else None
    return ProfileReport(problem, m.soc, m.plan.block_m, m.plan.block_n, summary, ops, names, m.model.clock_mhz,
                         sens)


def _core_name(core: int) -> str:
    return f"AIC {core - 1000}" if core >= 1000 else f"AIV {core}"


def chrome_trace(report: ProfileReport) -> dict:
    """The schedule in the Chrome trace event format (chrome://tracing, ui.perfetto.dev):
    microseconds at the chip clock; process = core, thread = pipe."""
    us = 1.0 / report.clock_mhz
    events = []
    cores = np.unique(report.ops["core"])
    for pid, core in enumerate(cores):
        events.append({"ph": "M", "name": "process_name", "pid": int(pid), "args": {"name": _core_name(int(core))}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": int(pid), "args": {"sort_index": int(core)}})
        for tid, pipe in enumerate(timing.PIPES):
            events.append({"ph": "M", "name": "thread_name", "pid": int(pid), "tid": tid,
                           "args": {"name": f"pipe {pipe}"}})
    pid_of = {int(c): i for i, c in enumerate(cores)}
    for op in report.ops:
        api = report.api_names.get(int(op["api"]), "?")
        kind = int(op["kind"])
        events.append({"ph": "X", "pid": pid_of[int(op["core"])], "tid": int(op["pipe"]),
                       "ts": float(op["start"]) * us, "dur": float(op["end"] - op["start"]) * us,
                       "name": f"wait: {api}" if kind == 1 else api, "cat": KIND_NAMES[kind],
                       "args": {"units": int(op["units"]), "instruction": int(op["seq"])}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"label": timing.LABEL, "soc": report.soc}}


def _first_item_end(ops: np.ndarray, names: dict) -> Optional[float]:
    """End of AIV 0's first work item: its first LSE write (DataCopyPad on MTE3) closes an item."""
    pad = [p for p, n in names.items() if n == "DataCopyPad"]
    mine = ops[(ops["core"] == 0) & (ops["pipe"] == timing.PIPES.index("MTE3")) & np.isin(ops["api"], pad)]
    return float(mine["end"].min()) if len(mine) else None


def plot_timeline(report: ProfileReport, path: str) -> None:
    """A picture of AI Core group 0 (AIC 0, AIV 0 and 1) over its first work item: one row per
    busy pipe, instructions as bars, waits hatched, cube job stages in the AIC rows."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - the plot extra is installed in CI
        raise ImportError("--plot needs matplotlib (pip install 'acl-fa[plot]')") from exc
    ops = report.ops
    end = _first_item_end(ops, report.api_names) or float(ops["end"].max())
    us = 1.0 / report.clock_mhz
    rows = []
    for core in (1000, 0, 1):
        for pipe in range(len(timing.PIPES)):
            mine = ops[(ops["core"] == core) & (ops["pipe"] == pipe) & (ops["start"] < end)]
            if len(mine):
                rows.append((f"{_core_name(core)} {timing.PIPES[pipe]}", mine))
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.5))
    colors = {"V": "tab:orange", "MTE2": "tab:blue", "MTE3": "tab:green", "M": "tab:red", "MTE1": "tab:purple",
              "FIX": "tab:brown", "S": "tab:gray"}
    for y, (label, mine) in enumerate(rows):
        pipe = label.split()[-1]
        for kind in (0, 2, 1):
            sel = mine[mine["kind"] == kind]
            if not len(sel):
                continue
            spans = [(float(a) * us, float(b - a) * us) for a, b in zip(sel["start"], np.minimum(sel["end"], end))]
            ax.broken_barh(spans, (y - 0.4, 0.8), facecolors="none" if kind == 1 else colors[pipe],
                           edgecolors="black" if kind == 1 else colors[pipe], hatch="///" if kind == 1 else None,
                           linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, end * us)
    ax.set_xlabel("modeled time (us at the chip clock)")
    p = report.problem
    ax.set_title(f"{report.soc}, B={p.batch} N={p.num_heads} S={p.seq_q} D={p.head_dim}"
                 f"{' causal' if p.causal else ''}, BLOCK_M={report.block_m} BLOCK_N={report.block_n}: "
                 f"AI Core group 0, first work item (modeled; hatched = waiting)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_profile(report: ProfileReport) -> str:
    p = report.problem
    lines = [f"problem     B={p.batch} N={p.num_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} {p.dtype_name} "
             f"{p.layout}{' causal' if p.causal else ''} on {report.soc}, BLOCK_M={report.block_m} "
             f"BLOCK_N={report.block_n}"]
    lines += timing.format_summary(report.summary)
    if report.sensitivity is not None:
        lines.append("sensitivity of the modeled time to the assumed cycle costs together, then to each assumed or "
                     "derived cost (x0.5 / x1.5):")
        for field, lo, hi in report.sensitivity:
            lines.append(f"            {field:24s} {100 * lo:+7.1f}%  {100 * hi:+7.1f}%")
    return "\n".join(lines)
