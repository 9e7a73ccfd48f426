"""Host memory a job may use, checked before it allocates (a clear error, not a numpy
MemoryError or the kernel's OOM killer halfway through)."""

from __future__ import annotations

import os
from typing import Optional

from .errors import InsufficientMemoryError
from .units import format_bytes

__all__ = ["available_bytes", "check_host_memory"]

MEMINFO = "/proc/meminfo"


def available_bytes() -> Optional[int]:
    """Bytes the kernel estimates can be allocated without swapping (Linux MemAvailable), else
    free physical pages (sysconf); None when neither is known."""
    try:
        with open(MEMINFO) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file's unit is kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_host_memory(needed: int, what: str):
    """InsufficientMemoryError("<what>: X of host memory needed, Y available") when `needed`
    bytes exceed what the host has available (no check when that is unknown)."""
    available = available_bytes()
    if available is not None and needed > available:
        raise InsufficientMemoryError(
            f"{what}: {format_bytes(needed)} of host memory needed, this host has {format_bytes(available)} "
            "available (MemAvailable)", "host", needed, available)
