"""The knobs of a job that are not the problem: how long to time it, whether to check it, where
to run it. Every job takes (problem, settings); the CLI builds both once per command."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

__all__ = ["JobSettings", "SIM_TIME_LABEL", "NPU_TIME_LABEL", "time_label"]

NPU_TIME_LABEL = "device time (events)"
SIM_TIME_LABEL = "kernel wall time on the CPU simulator (not NPU time)"


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """warmup / iters: untimed and timed launches; check: compare with the float64 reference;
    backend (None = auto) and device: where to run; seed: of the random inputs (and the dropout);
    l2: replay the GM trace through the L2 model (simulator); progress: called as work completes,
    with the arguments each job documents (for a progress bar)."""

    warmup: int = 1
    iters: int = 3
    check: bool = True
    backend: Optional[str] = None
    device: int = 0
    seed: int = 0
    l2: bool = True
    progress: Optional[Callable] = None

    def tick(self, stage: str, steps: int) -> None:
        """Reports `steps` more steps of `stage` done, when a progress callback is set."""
        if self.progress is not None:
            self.progress(stage, steps)


def time_label(backend_name: str) -> str:
    """What a job's times measure on this backend."""
    return NPU_TIME_LABEL if backend_name == "npu" else SIM_TIME_LABEL
