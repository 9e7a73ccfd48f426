"""``acl-fa plan --sweep``: modeled NPU time for each (BLOCK_M, BLOCK_N) that fits (sim only).

Every candidate the tiling policy accepts as a user override is run once on the simulator with the
instruction trace on, and the pipeline model (acl_fa.plan.timing) gives its modeled time: the "too small
and the loop count explodes, too large and it does not fit" trade-off as a table and a plot.
Candidates the policy refuses are listed with the budget line they break. Modeled, not measured.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..plan import forward as plan_module
from ..plan import timing
from ..spec.problem import Problem
from .settings import JobSettings
from .run import random_inputs
from ..api import Session

__all__ = ["SweepRow", "sweep", "candidate_pairs", "analytic_error", "format_sweep", "plot_sweep", "BLOCK_M_CANDIDATES", "BLOCK_N_CANDIDATES"]

BLOCK_M_CANDIDATES = (32, 64, 96, 128, 160, 192, 256)
BLOCK_N_CANDIDATES = (64, 128, 192, 256, 384, 512)


@dataclasses.dataclass
class SweepRow:
    block_m: int
    block_n: int
    time_s: Optional[float]       # modeled (None when the blocks do not fit)
    analytic_s: Optional[float]   # the tiling policy's analytic estimate (op_host/block_cost.h; MIX path only)
    tflops: Optional[float]
    critical: Optional[str]
    refused: Optional[str]        # why the policy refuses the blocks
    chosen: bool = False          # the policy's own choice

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def candidate_pairs(problem: Problem, soc: str, block_ms=BLOCK_M_CANDIDATES, block_ns=BLOCK_N_CANDIDATES) -> list:
    """The (block_m, block_n) pairs a sweep visits: the grid, and the policy's own choice where the
    grid does not hold it (host-side planning only: no device work)."""
    chosen = plan_module.plan(dataclasses.replace(problem, block_m=0, block_n=0), soc)
    pairs = [(bm, bn) for bm in block_ms for bn in block_ns]
    if (chosen.block_m, chosen.block_n) not in pairs:
        pairs.append((chosen.block_m, chosen.block_n))
    return pairs


def sweep(problem: Problem, settings: JobSettings = JobSettings(backend="sim"), *,
          block_ms=BLOCK_M_CANDIDATES, block_ns=BLOCK_N_CANDIDATES) -> list:
    """One SweepRow per pair of candidate_pairs, on the session's (simulated) chip; the problem's
    own blocks are not used. `settings.tick("pairs", 1)` after each pair, refused or timed."""
    p = dataclasses.replace(problem, block_m=0, block_n=0)
    rows = []
    with Session(device=settings.device, backend=settings.backend) as session:
        soc = session.soc_name()
        chosen = plan_module.plan(p, soc)
        clock_hz = timing.pipe_costs(session.backend)["clockMHz"] * 1e6
        q, k, v = random_inputs(problem, settings.seed)
        for bm, bn in candidate_pairs(p, soc, block_ms, block_ns):
            try:
                plan_module.plan(dataclasses.replace(p, block_m=bm, block_n=bn), soc)
            except plan_module.PlanError as exc:
                rows.append(SweepRow(bm, bn, None, None, None, None, str(exc)))
                settings.tick("pairs", 1)
                continue
            with timing.op_trace(session.backend):
                session.flash_attention(q, k, v, causal=p.causal, layout=p.layout, num_heads=p.num_heads,
                                        num_kv_heads=p.num_kv_heads, block_m=bm, block_n=bn)
            model = timing.last_model(session.backend)
            # The closed form describes the MIX path only; the coupled path chooses without it.
            analytic = (None if chosen.chip.coupled else
                        plan_module.analytic_cycles(dataclasses.replace(p, block_m=bm, block_n=bn), soc) / clock_hz)
            rows.append(SweepRow(bm, bn, model.seconds, analytic, p.flops() / model.seconds / 1e12,
                                 model.critical, None, (bm, bn) == (chosen.block_m, chosen.block_n)))
            settings.tick("pairs", 1)
    return rows


def analytic_error(rows: list) -> dict:
    """How well the policy's analytic cost stands in for the model over the fitting rows:
    median and largest |analytic / modeled - 1|, and how much slower the policy's choice models
    than the sweep's fastest candidate (0 = it is the fastest)."""
    fit = [r for r in rows if r.time_s is not None and r.analytic_s is not None]
    if not fit:
        return {}
    errors = sorted(abs(r.analytic_s / r.time_s - 1) for r in fit)
    best = min(r.time_s for r in fit)
    chosen = [r.time_s for r in fit if r.chosen]
    return {"median_abs_error": errors[len(errors) // 2], "max_abs_error": errors[-1],
            "choice_vs_best": chosen[0] / best - 1 if chosen else None}


def format_sweep(rows: list, title: str) -> str:
    lines = [title, "modeled kernel time (pipeline model, not a measurement; * = the policy's choice;",
             "analytic = the policy's closed-form estimate it chooses by, op_host/block_cost.h)", "",
             "| BLOCK_M | BLOCK_N | modeled us | analytic us | TFLOP/s | critical |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r.time_s is None:
            continue
        mark = " *" if r.chosen else ""
        analytic = "-" if r.analytic_s is None else f"{r.analytic_s * 1e6:.1f}"
        lines.append(f"| {r.block_m}{mark} | {r.block_n} | {r.time_s * 1e6:.1f} | {analytic} | "
                     f"{r.tflops:.1f} | {r.critical} |")
    err = analytic_error(rows)
    if err:
        lines.append("")
        choice = ("not in the sweep" if err["choice_vs_best"] is None
                  else f"{err['choice_vs_best'] * 100:+.1f}% modeled time vs the fastest candidate")
        lines.append(f"analytic vs model: median |error| {err['median_abs_error'] * 100:.1f}%, "
                     f"largest {err['max_abs_error'] * 100:.1f}%; the policy's choice: {choice}")
    refused = [r for r in rows if r.time_s is None]
    if refused:
        lines.append("")
        lines.append("does not fit: " + ", ".join(f"{r.block_m}x{r.block_n}" for r in refused))
    return "\n".join(lines)


def plot_sweep(rows: list, path: str, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("--plot needs matplotlib (pip install 'acl-fa[plot]')") from exc
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for bn in sorted({r.block_n for r in rows}):
        mine = [r for r in rows if r.block_n == bn and r.time_s is not None]
        if mine:
            ax.plot([r.block_m for r in mine], [r.time_s * 1e6 for r in mine], marker="o", label=f"BLOCK_N={bn}")
    for r in rows:
        if r.chosen and r.time_s is not None:
            ax.plot([r.block_m], [r.time_s * 1e6], marker="*", markersize=16, color="black", linestyle="none",
                    label="policy's choice")
    ax.set_xlabel("BLOCK_M")
    ax.set_ylabel("modeled kernel time (us)")
    ax.set_title(title + " (modeled)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
