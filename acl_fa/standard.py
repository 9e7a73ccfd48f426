"""What standard (materializing) attention needs, from its algorithm, for comparisons.

Standard attention per head: S = scale * Q K^T written to device memory ([Sq, Skv] in the input
dtype), P = softmax(S) written back ([Sq, Skv]), O = P V. Its intermediate device memory is S and
P; its GM traffic reads Q and K, writes S, reads S, writes P, reads P and V and writes O.
"""

from __future__ import annotations

__all__ = ["standard_intermediate_bytes", "standard_gm_traffic_bytes", "compulsory_bytes"]


def standard_intermediate_bytes(batch, heads, seq_q, seq_kv, itemsize=2) -> int:
    """Bytes of S and P held on the device at once (both [B, N, Sq, Skv] in the input dtype)."""
    return 2 * batch * heads * seq_q * seq_kv * itemsize


def compulsory_bytes(batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize=2) -> int:
    """Q, K, V read once and O written once: the least any attention moves."""
    q = batch * heads * seq_q * head_dim * itemsize
    kv = batch * kv_heads * seq_kv * head_dim * itemsize
    return 2 * q + 2 * kv


def standard_gm_traffic_bytes(batch, heads, kv_heads, seq_q, seq_kv, head_dim, itemsize=2) -> int:
    """GM bytes read + written by the three kernels of standard attention (each K/V head read
    once per query head that uses it, as a batched matmul does)."""
    scores = batch * heads * seq_q * seq_kv * itemsize
    q = batch * heads * seq_q * head_dim * itemsize
    kv_per_query_head = batch * heads * seq_kv * head_dim * itemsize
    return (q + kv_per_query_head + scores) + (2 * scores) + (scores + kv_per_query_head + q)
