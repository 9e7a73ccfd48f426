"""Sequence parallelism over several devices: ring attention (forward and backward) and Ulysses,
on HCCL (acl_fa.parallel.hccl), with the rank context of a multi-process launch (acl-fa launch)."""
from .ring import (
    ACCUMULATE, BLOCK_ROWS, DEFAULT_ACCUMULATE, ENV_DEVICE, ENV_RANK, ENV_ROOT, ENV_SIZE, MemoryBound, RankContext,
    RankReport, RingReport, ring_attention, ring_attention_backward, ring_calls, ring_plan, ring_report, ring_units,
    shard_rows, sub_blocks, zigzag_chunks)
from .ulysses import UlyssesReport, ulysses_attention
from .ulysses_backward import UlyssesBackwardReport, ulysses_attention_backward
from .usp import usp_attention, usp_attention_backward

__all__ = ["ring_attention", "ring_attention_backward", "RingReport", "MemoryBound", "sub_blocks", "ring_units",
           "ring_calls", "BLOCK_ROWS", "RankContext", "RankReport", "ring_report", "zigzag_chunks", "ring_plan",
           "ulysses_attention", "UlyssesReport", "ulysses_attention_backward", "UlyssesBackwardReport", "usp_attention",
           "usp_attention_backward"]
