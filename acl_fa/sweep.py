"""``acl-fa plan --sweep``: modeled NPU time for each (BLOCK_M, BLOCK_N) that fits (sim only).

Every candidate the tiling policy accepts as a user override is run once on the simulator with the
instruction trace on, and the pipeline model (acl_fa.timing) gives its modeled time: the "too small
and the loop count explodes, too large and it does not fit" trade-off as a table and a plot.
Candidates the policy refuses are listed with the budget line they break. Modeled, not measured.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from . import plan as plan_module
from . import timing
from .attention import problem_from_sizes
from .run import random_inputs
from .api import Session

__all__ = ["SweepRow", "sweep", "format_sweep", "plot_sweep", "BLOCK_M_CANDIDATES", "BLOCK_N_CANDIDATES"]

BLOCK_M_CANDIDATES = (32, 64, 96, 128, 160, 192, 256)
BLOCK_N_CANDIDATES = (64, 128, 192, 256, 384, 512)


@dataclasses.dataclass
class SweepRow:
    block_m: int
    block_n: int
    time_s: Optional[float]       # modeled (None when the blocks do not fit)
    tflops: Optional[float]
    critical: Optional[str]
    refused: Optional[str]        # why the policy refuses the blocks
    chosen: bool = False          # the policy's own choice

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def sweep(*, seq: int, seq_kv: Optional[int] = None, batch: int = 1, heads: int = 32,
          kv_heads: Optional[int] = None, head_dim: int = 128, dtype: str = "float16", layout: str = "BNSD",
          causal: bool = False, backend: Optional[str] = "sim", device: int = 0, seed: int = 0,
          block_ms=BLOCK_M_CANDIDATES, block_ns=BLOCK_N_CANDIDATES, progress=None) -> list:
    """One SweepRow per (block_m, block_n) pair, on the session's (simulated) chip."""
    sizes = dict(seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                 dtype=dtype, layout=layout, causal=causal)
    rows = []
    with Session(device=device, backend=backend) as session:
        soc = session.soc_name()
        chosen = plan_module.plan(soc=soc, **sizes)
        base = problem_from_sizes(**sizes)
        q, k, v = random_inputs(base, seed)
        for bm in block_ms:
            for bn in block_ns:
                try:
                    plan_module.plan(soc=soc, block_m=bm, block_n=bn, **sizes)
                except plan_module.PlanError as exc:
                    rows.append(SweepRow(bm, bn, None, None, None, str(exc)))
                    continue
                with timing.op_trace(session.backend):
                    session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=heads,
                                            num_kv_heads=kv_heads, block_m=bm, block_n=bn)
                model = timing.last_model(session.backend)
                rows.append(SweepRow(bm, bn, model.seconds, base.flops() / model.seconds / 1e12, model.critical, None,
                                     (bm, bn) == (chosen.block_m, chosen.block_n)))
                if progress:
                    progress()
    return rows


def format_sweep(rows: list, title: str) -> str:
    lines = [title, "modeled kernel time (pipeline model, not a measurement; * = the policy's choice)", "",
             "| BLOCK_M | BLOCK_N | modeled us | TFLOP/s | critical |", "|---|---|---|---|---|"]
    for r in rows:
        if r.time_s is None:
            continue
        mark = " *" if r.chosen else ""
        lines.append(f"| {r.block_m}{mark} | {r.block_n} | {r.time_s * 1e6:.1f} | {r.tflops:.1f} | {r.critical} |")
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
