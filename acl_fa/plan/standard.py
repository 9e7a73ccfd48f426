"""What standard (materializing) attention needs, from its algorithm, for comparisons.

Standard attention per head: S = scale * Q K^T written to device memory ([Sq, Skv] in the input
dtype), P = softmax(S) written back ([Sq, Skv]), O = P V. Its intermediate device memory is S and
P; its GM traffic reads Q and K, writes S, reads S, writes P, reads P and V and writes O.
"""

from __future__ import annotations

from ..spec.problem import Problem

__all__ = ["standard_intermediate_bytes", "standard_gm_traffic_bytes", "compulsory_bytes",
           "standard_backward_intermediate_bytes", "standard_backward_gm_traffic_bytes", "backward_compulsory_bytes"]


def _sizes(p: Problem) -> tuple:
    return p.batch, p.num_heads, p.num_kv_heads, p.seq_q, p.seq_kv, p.head_dim, p.dtype.itemsize


def standard_intermediate_bytes(problem: Problem) -> int:
    """Bytes of S and P held on the device at once (both [B, N, Sq, Skv] in the input dtype)."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    return 2 * batch * heads * seq_q * seq_kv * itemsize


def compulsory_bytes(problem: Problem) -> int:
    """Q, K, V read once and O written once: the least any attention moves."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    q = batch * heads * seq_q * head_dim * itemsize
    kv = batch * kv_heads * seq_kv * head_dim * itemsize
    return 2 * q + 2 * kv


def standard_gm_traffic_bytes(problem: Problem) -> int:
    """GM bytes read + written by the three kernels of standard attention (each K/V head read
    once per query head that uses it, as a batched matmul does)."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    scores = batch * heads * seq_q * seq_kv * itemsize
    q = batch * heads * seq_q * head_dim * itemsize
    kv_per_query_head = batch * heads * seq_kv * head_dim * itemsize
    return (q + kv_per_query_head + scores) + (2 * scores) + (scores + kv_per_query_head + q)


# Standard attention's backward per head, from the P its forward kept: dV = P^T dO, dP = dO V^T,
# dS = P * (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q -- with S (the forward's
# scores), P and dS of [Sq, Skv] each in device memory.

def standard_backward_intermediate_bytes(problem: Problem) -> int:
    """Bytes of S, P and dS held on the device ([B, N, Sq, Skv] each, in the input dtype)."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    return 3 * batch * heads * seq_q * seq_kv * itemsize


def standard_backward_gm_traffic_bytes(problem: Problem) -> int:
    """GM bytes read + written by its kernels: dV (reads P, dO), dP (reads dO, V; writes dP),
    dS (reads P, dP, dO, O; writes dS), dQ (reads dS, K), dK (reads dS, Q); gradients written
    once; each K/V head read once per query head that uses it."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    scores = batch * heads * seq_q * seq_kv * itemsize
    rows = batch * heads * seq_q * head_dim * itemsize          # one [B, N, Sq, D] tensor
    kv = batch * heads * seq_kv * head_dim * itemsize            # K or V read per query head
    grads_kv = 2 * batch * kv_heads * seq_kv * head_dim * itemsize
    return (scores + rows) + (rows + kv + scores) + (3 * scores + 2 * rows) + (scores + kv) + (scores + rows) + \
        rows + grads_kv


def backward_compulsory_bytes(problem: Problem) -> int:
    """Q, K, V, O, dO (and the fp32 LSE) read once, dQ, dK, dV written once."""
    batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize = _sizes(problem)
    rows = batch * heads * seq_q * head_dim * itemsize
    kv = batch * kv_heads * seq_kv * head_dim * itemsize
    return 4 * rows + 4 * kv + batch * heads * seq_q * 4
