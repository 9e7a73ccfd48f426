"""One step of ring attention with the K/V exchange inside the kernel: aclnnRingAttention of our
custom operator (op_host/ring_attention/ring_attention.json; docs/hccl.md, "Communication fused
into the kernel").

A step of rank r: the kernel commits, through the kernel-side HCCL client, the exchange of the
K/V chunk it holds (to rank r + 1; rank r - 1's chunk arrives in ``key_next`` / ``value_next``),
computes the chunk's attention for the rank's query rows (``out``, ``lse``: FlashAttention's
partial, merged by the caller) while the bytes move, and waits for the exchange before it ends.
``compute=False`` (a chunk above the causal diagonal) runs the exchange alone; ``exchange=False``
(the ring's last step) the attention alone. The op is an MC2 op: ``group`` is the name of the
comm (HcclGetCommName), which the runtime resolves on the launching device.

The kernel's exchange is an AlltoAllV, which the kernel-side client offers on Atlas A3 only
(asc-devkit AlltoAllV.md): the op is registered for ascend910_93 and refused elsewhere before any
device work. Layout BNSD, float16 or bfloat16, every rank holding as many rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..plan import forward as planmod
from ..runtime.errors import InvalidArgumentError
from ..runtime.ffi import ffi
from ..spec.problem import Problem, problem_from_sizes
from . import opcall
from .opcall import Op, OpRunner
from .problem import check_plan
from ..runtime.session import DeviceSession

__all__ = ["RingStepProblem", "RING_ATTENTION", "make_step_problem", "runner_for", "fused_ring_unsupported"]

FLOAT32 = np.dtype(np.float32)
# The SoC the op is registered for (ring_attention.cpp: AddConfig("ascend910_93")).
FUSED_RING_SOC = "ascend910_93"


@dataclasses.dataclass(frozen=True)
class RingStepProblem:
    """One ring step of one rank: its query rows against a K/V chunk of as many rows (BNSD)."""

    forward: Problem  # the step's attention (seq_q == seq_kv: the rank's rows)
    group: str        # the comm's name (Communicator.name)
    compute: bool
    exchange: bool

    @property
    def q_shape(self) -> tuple:
        f = self.forward
        return (f.batch, f.num_heads, f.seq_q, f.head_dim)

    @property
    def kv_shape(self) -> tuple:
        f = self.forward
        return (f.batch, f.num_kv_heads, f.seq_kv, f.head_dim)


def make_step_problem(forward: Problem, group: str, *, compute: bool, exchange: bool) -> RingStepProblem:
    """The step of `forward` (a BNSD self-attention block of the rank's rows) over comm `group`."""
    if forward.layout != "BNSD" or forward.seq_q != forward.seq_kv or forward.padded:
        raise InvalidArgumentError("a ring step is a BNSD block of the rank's rows (Sq == Skv) with a head dim "
                                   f"that is a multiple of 16; got layout {forward.layout}, Sq={forward.seq_q}, "
                                   f"Skv={forward.seq_kv}, D={forward.given_head_dim}")
    if not isinstance(group, str) or not group:
        raise InvalidArgumentError("group must be the comm's name (Communicator.name)")
    return RingStepProblem(forward, group, bool(compute), bool(exchange))


def step_forward_problem(batch: int, heads: int, kv_heads: int, rows: int, head_dim: int, dtype: str,
                         scale: float, causal: bool) -> Problem:
    """The forward Problem of one step (the rank's rows against a chunk of as many)."""
    return problem_from_sizes(seq_q=rows, batch=batch, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                              dtype=dtype, layout="BNSD", causal=causal, scale=scale)


def fused_ring_unsupported(soc: str) -> str:
    """Why the fused ring cannot run on `soc`, or "" where it can (Atlas A3)."""
    chip = planmod.chip(soc)
    if chip.short_soc == FUSED_RING_SOC:
        return ""
    return (f"the fused ring's kernel exchanges K/V with the kernel-side HCCL AlltoAllV, which {chip.name} "
            f"({chip.short_soc}) does not offer: Atlas A3 ({FUSED_RING_SOC}) only (asc-devkit AlltoAllV.md); "
            "use the stream ring (fused=False) or ACL_FA_SIM_SOC=Ascend910_93 in the simulator")


class RingAttentionOp(Op):
    """aclnnRingAttention over the shared op-call path; its entries are declared from
    op_host/ring_attention/ring_attention.json (acl_fa/runtime/aclnn_entries.py)."""

    name = "ring_attention"
    inputs = ("q", "k", "v")
    outputs = ("out", "lse", "k_next", "v_next")
    workspace_api = "aclnnRingAttentionGetWorkspaceSize"
    launch_api = "aclnnRingAttention"

    def buffers(self, p: RingStepProblem) -> dict:
        f = p.forward
        return {"q": (p.q_shape, f.dtype), "k": (p.kv_shape, f.dtype), "v": (p.kv_shape, f.dtype),
                "out": (p.q_shape, f.dtype), "lse": (p.q_shape[:3], FLOAT32),
                "k_next": (p.kv_shape, f.dtype), "v_next": (p.kv_shape, f.dtype)}

    def workspace_args(self, p: RingStepProblem, tensors: dict) -> tuple:
        f = p.forward
        return (tensors["q"].handle, tensors["k"].handle, tensors["v"].handle, ffi.new("char[]", p.group.encode()),
                f.scale, f.causal, ffi.new("char[]", b"BNSD"), f.num_heads, f.num_kv_heads, f.block_m, f.block_n,
                p.compute, p.exchange, tensors["out"].handle, tensors["lse"].handle, tensors["k_next"].handle,
                tensors["v_next"].handle)

    def check(self, p: RingStepProblem, soc: str) -> int:
        why = fused_ring_unsupported(soc)
        if why:
            raise InvalidArgumentError(why)
        return check_plan(p.forward, soc).workspace_bytes


RING_ATTENTION = RingAttentionOp()


def runner_for(session: DeviceSession) -> OpRunner:
    """The RingAttention OpRunner of `session` (one per Session)."""
    return opcall.runner_for(session, RING_ATTENTION)
