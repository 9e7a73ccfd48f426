"""``acl-fa profile``: one problem's modeled NPU timeline (sim only; acl_fa.plan.timing).

Runs the problem once with the instruction trace on and returns the pipeline model's schedule:
the cube busy fraction of every AIC (the busiest one reported), a Chrome/Perfetto trace (one
process per core, one thread per pipe; flag, Matmul and SyncAll waits as "wait" slices; by default
whole AI Core groups up to DEFAULT_TRACE_EVENTS events, all of them on request), a timeline picture
of one AI Core group over its first work item or over the whole launch, and, when asked, the
sensitivity of the modeled time to each assumed or derived cost (x0.5 and x1.5).
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

__all__ = ["ProfileReport", "profile_job", "chrome_trace", "core_groups", "plot_timeline", "legend_handles",
           "sensitivity", "format_profile", "DEFAULT_TRACE_EVENTS"]

KIND_NAMES = ("instruction", "wait", "cube job")

# The default trace's size: whole AI Core groups are kept while their events fit in this many
# (about 170 B each in the JSON: ~35 MB, which chrome://tracing and Perfetto open in seconds; the
# full trace of B1 N32 S4096 causal is 1.26 M events, 216 MB).
DEFAULT_TRACE_EVENTS = 200_000

# Core ids in the schedule: AIV v as v, AIC c as AIC_BASE + c (sim/include/acl_fa_sim_kernel.h).
AIC_BASE = 1000


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
    cube_busy: np.ndarray         # [AIC]: cube pipe (M) busy cycles / pipeline cycles, per core

    @property
    def busiest_cube(self) -> Optional[tuple]:
        """(AIC index, busy fraction) of the core whose cube is busy longest; None without a cube."""
        if not len(self.cube_busy):
            return None
        core = int(np.argmax(self.cube_busy))
        return core, float(self.cube_busy[core])

    def to_dict(self) -> dict:
        data = {"soc": self.soc, "block_m": self.block_m, "block_n": self.block_n, "modeled_time": self.summary}
        if self.busiest_cube is not None:
            core, busy = self.busiest_cube
            data["cube_busy"] = {"busiest_aic": core, "busiest": busy, "mean": float(self.cube_busy.mean()),
                                 "per_aic": [float(x) for x in self.cube_busy]}
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
    """One launch of `problem` with the instruction trace on, modeled (warmup, iters, check and l2
    of the settings do not apply). Progress: settings.tick(stage, 0) as each stage starts."""
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        if session.backend.name != "sim":
            raise InvalidArgumentError("acl-fa profile models the NPU on the simulator; use --backend sim")
        settings.tick("random inputs", 0)
        q, k, v = random_inputs(problem, settings.seed)
        settings.tick("the launch on the simulator with the instruction and GM traces, its pipeline model and "
                      "L2 replay", 0)
        m = measure(session, problem, q, k, v, warmup=0, iters=0, download=False, l2=True)
        ops, names = timing.modeled_ops(session.backend)
        summary = timing.summary(m.model, problem.flops(), m.l2_modeled.hbm_bytes, chip_peaks(m.soc))
        sens = None
        if with_sensitivity:
            settings.tick("sensitivity: the model replayed with each assumed cost at x0.5 and x1.5", 0)
            sens = sensitivity(session.backend)
    cube = m.model.aic_busy[:, timing.PIPES.index("M")] / m.model.cycles if m.model.cycles else np.zeros(0)
    return ProfileReport(problem, m.soc, m.plan.block_m, m.plan.block_n, summary, ops, names, m.model.clock_mhz,
                         sens, cube)


def _core_name(core: int) -> str:
    return f"AIC {core - AIC_BASE}" if core >= AIC_BASE else f"AIV {core}"


def core_groups(ops: np.ndarray) -> np.ndarray:
    """The AI Core group of each op: AIC c is group c, and its AIVs (c * r .. c * r + r - 1, r = AIVs
    per AIC in the launch: 2 on the MIX path) too; on a chip without AIV tracks each core is its group."""
    core = ops["core"].astype(np.int64)
    aic = core >= AIC_BASE
    n_aic = len(np.unique(core[aic]))
    n_aiv = len(np.unique(core[~aic]))
    ratio = max(1, round(n_aiv / n_aic)) if n_aic else 1
    return np.where(aic, core - AIC_BASE, core // ratio)


def _kept_groups(ops: np.ndarray, max_events: Optional[int]) -> tuple:
    """(mask of the ops kept, groups kept, group count): whole groups in order while their ops fit
    in max_events (None: all), at least one group."""
    groups = core_groups(ops)
    ids, counts = np.unique(groups, return_counts=True)
    if max_events is None:
        return np.ones(len(ops), bool), len(ids), len(ids)
    kept = max(1, int(np.searchsorted(np.cumsum(counts), max_events, side="right")))
    return np.isin(groups, ids[:kept]), kept, len(ids)


def chrome_trace(report: ProfileReport, max_events: Optional[int] = DEFAULT_TRACE_EVENTS) -> dict:
    """The schedule in the Chrome trace event format (chrome://tracing, ui.perfetto.dev):
    microseconds at the chip clock; process = core, thread = pipe. With max_events, only the first
    AI Core groups whose events fit (whole timelines, at least one group); otherData says which."""
    us = 1.0 / report.clock_mhz
    events = []
    keep, kept, total = _kept_groups(report.ops, max_events)
    ops = report.ops[keep]
    cores = np.unique(ops["core"])
    for pid, core in enumerate(cores):
        events.append({"ph": "M", "name": "process_name", "pid": int(pid), "args": {"name": _core_name(int(core))}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": int(pid), "args": {"sort_index": int(core)}})
        for tid, pipe in enumerate(timing.PIPES):
            events.append({"ph": "M", "name": "thread_name", "pid": int(pid), "tid": tid,
                           "args": {"name": f"pipe {pipe}"}})
    pid_of = {int(c): i for i, c in enumerate(cores)}
    for op in ops:
        api = report.api_names.get(int(op["api"]), "?")
        kind = int(op["kind"])
        events.append({"ph": "X", "pid": pid_of[int(op["core"])], "tid": int(op["pipe"]),
                       "ts": float(op["start"]) * us, "dur": float(op["end"] - op["start"]) * us,
                       "name": f"wait: {api}" if kind == 1 else api, "cat": KIND_NAMES[kind],
                       "args": {"units": int(op["units"]), "instruction": int(op["seq"])}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"label": timing.LABEL, "soc": report.soc, "core_groups_kept": kept,
                          "core_groups": total, "ops_kept": int(len(ops)), "ops": int(len(report.ops))}}


def _first_item_end(ops: np.ndarray, names: dict) -> Optional[float]:
    """End of AIV 0's first work item: its first LSE write (DataCopyPad on MTE3) closes an item."""
    pad = [p for p, n in names.items() if n == "DataCopyPad"]
    mine = ops[(ops["core"] == 0) & (ops["pipe"] == timing.PIPES.index("MTE3")) & np.isin(ops["api"], pad)]
    return float(mine["end"].min()) if len(mine) else None


# Bar colours per pipe in plot_timeline (and its legend).
PIPE_COLORS = {"V": "tab:orange", "MTE2": "tab:blue", "MTE3": "tab:green", "M": "tab:red", "MTE1": "tab:purple",
               "FIX": "tab:brown", "S": "tab:gray"}


def _timeline_rows(report: ProfileReport, group: int, end: float) -> list:
    """[(label, ops)] of each busy (core, pipe) of AI Core group `group` before `end` (cycles):
    the AIC first, then its AIVs."""
    ops = report.ops[(core_groups(report.ops) == group) & (report.ops["start"] < end)]
    rows = []
    for core in sorted(np.unique(ops["core"]), key=lambda c: (c < AIC_BASE, c)):
        for pipe in range(len(timing.PIPES)):
            mine = ops[(ops["core"] == core) & (ops["pipe"] == pipe)]
            if len(mine):
                rows.append((f"{_core_name(int(core))} {timing.PIPES[pipe]}", mine))
    return rows


def legend_handles(patches, pipes: list) -> list:
    """One entry per pipe drawn (its colour), one for waits (hatched)."""
    handles = [patches.Patch(facecolor=PIPE_COLORS[p], label=f"pipe {p}" + (" (cube)" if p == "M" else ""))
               for p in timing.PIPES if p in pipes]
    return handles + [patches.Patch(facecolor="none", edgecolor="black", hatch="///",
                                    label="waiting (flag, Matmul, SyncAll)")]


def plot_timeline(report: ProfileReport, path: str, group: Optional[int] = None) -> None:
    """A picture of one AI Core group (its AIC and AIVs), one row per busy pipe, instructions as
    bars, waits hatched, cube job stages in the AIC rows, a legend of the pipes: group 0 over its
    first work item (group None), or the given group over the whole launch."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.patches as patches
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - the plot extra is installed in CI
        raise ImportError("--plot needs matplotlib (pip install 'acl-fa[plot]')") from exc
    ops = report.ops
    groups = np.unique(core_groups(ops))
    if group is not None and group not in groups:
        raise InvalidArgumentError(f"AI Core group {group} did no work in this launch: groups "
                                   f"{int(groups.min())}..{int(groups.max())} did")
    whole = group is not None
    end = float(ops["end"].max()) if whole else (_first_item_end(ops, report.api_names) or float(ops["end"].max()))
    rows = _timeline_rows(report, group if whole else 0, end)
    us = 1.0 / report.clock_mhz
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 2.0))
    for y, (label, mine) in enumerate(rows):
        pipe = label.split()[-1]
        for kind in (0, 2, 1):
            sel = mine[mine["kind"] == kind]
            if not len(sel):
                continue
            spans = [(float(a) * us, float(b - a) * us) for a, b in zip(sel["start"], np.minimum(sel["end"], end))]
            ax.broken_barh(spans, (y - 0.4, 0.8), facecolors="none" if kind == 1 else PIPE_COLORS[pipe],
                           edgecolors="black" if kind == 1 else PIPE_COLORS[pipe], hatch="///" if kind == 1 else None,
                           linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, end * us)
    ax.set_xlabel("modeled time (us at the chip clock)")
    ax.legend(handles=legend_handles(patches, sorted({r[0].split()[-1] for r in rows})), loc="upper center",
              bbox_to_anchor=(0.5, -0.12 - 0.3 / max(1, len(rows))), ncol=4, fontsize=8, frameon=False)
    p = report.problem
    span = f"AI Core group {group}, the whole launch" if whole else "AI Core group 0, first work item"
    ax.set_title(f"{report.soc}, B={p.batch} N={p.num_heads} S={p.seq_q} D={p.head_dim}"
                 f"{' causal' if p.causal else ''}, BLOCK_M={report.block_m} BLOCK_N={report.block_n}: "
                 f"{span} (modeled)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def format_profile(report: ProfileReport) -> str:
    p = report.problem
    lines = [f"problem     B={p.batch} N={p.num_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} {p.dtype_name} "
             f"{p.layout}{' causal' if p.causal else ''} on {report.soc}, BLOCK_M={report.block_m} "
             f"BLOCK_N={report.block_n}"]
    lines += timing.format_summary(report.summary)
    if report.busiest_cube is not None:
        core, busy = report.busiest_cube
        lines.append(f"cube busy   {100 * busy:.0f}% on AIC {core}, the busiest cube (pipe M busy / modeled pipeline "
                     f"time); mean over the {len(report.cube_busy)} AIC {100 * report.cube_busy.mean():.0f}%")
    if report.sensitivity is not None:
        lines.append("sensitivity of the modeled time to the assumed cycle costs together, then to each assumed or "
                     "derived cost (x0.5 / x1.5):")
        for field, lo, hi in report.sensitivity:
            lines.append(f"            {field:24s} {100 * lo:+7.1f}%  {100 * hi:+7.1f}%")
    return "\n".join(lines)
