"""Chunked prefill into a paged KV cache: flash-attn's ``flash_attn_varlen_func(..., block_table=...)``.

k_cache / v_cache are paged caches [num_blocks, block_size, Nkv, D]; sequence s's keys are its
first L_s = cu_seqlens_k[s+1] - cu_seqlens_k[s] rows read through block_table[s] (row r of the
sequence is row r % block_size of block block_table[s, r // block_size]), as flash-attn 2.5+
reads them. The general forward reads contiguous TND keys, so ``gather_paged_kv`` gathers the
used rows into contiguous [sum L_s, Nkv, D] arrays (one gather per cache, only the blocks the
sequences use) that flash_attention_varlen then uploads; docs/compat.md "Paged KV for varlen"
states the extra traffic. Every block index the sequences use is checked
before any device work.
"""

from __future__ import annotations

import numpy as np

from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..spec.options import cu_seqlens_ends
from ..spec.problem import as_array

__all__ = ["gather_paged_kv", "paged_rows"]


def _last_entry(cu_seqlens) -> int:
    """cu_seqlens' last entry (its token count) when it reads as integers, else -1 (then
    cu_seqlens_ends names what is wrong with it)."""
    try:
        arr = np.asarray(cu_seqlens)
    except Exception:  # noqa: BLE001 - cu_seqlens_ends reports the type
        return -1
    return int(arr.reshape(-1)[-1]) if arr.size and arr.dtype.kind in "iu" else -1


def paged_rows(block_table, cu_seqlens_k, num_blocks: int, block_size: int) -> tuple:
    """(rows, ends_kv): the flat cache rows (block * block_size + offset, int64 [sum L_s]) holding
    the sequences' keys in order, and cu_seqlens_k's cumulative ends. InvalidTypeError /
    InvalidArgumentError naming block_table or cu_seqlens_k for a table that is not an integer
    [num_seqs, max_blocks] array, too short for a sequence's keys, or pointing outside the cache."""
    ends = cu_seqlens_ends("cu_seqlens_k", cu_seqlens_k, _last_entry(cu_seqlens_k))
    if isinstance(block_table, DeviceArray) or isinstance(block_table, (str, bytes)) or block_table is None:
        raise InvalidTypeError(f"block_table must be an int32/int64 numpy array, got {type(block_table).__name__}")
    table = np.asarray(block_table)
    if table.dtype.kind not in "iu":
        raise InvalidTypeError(f"block_table must be an integer array (int32), got dtype {table.dtype}")
    if table.ndim != 2 or table.shape[0] != len(ends):
        raise InvalidArgumentError(f"block_table must be [num_seqs={len(ends)}, max_blocks_per_seq], got shape "
                                   f"{table.shape}")
    lengths = np.diff(np.asarray((0,) + ends, dtype=np.int64))
    needed = -(-lengths // block_size)  # blocks each sequence reads
    rows = []
    for s, (length, blocks) in enumerate(zip(lengths, needed)):
        if blocks > table.shape[1]:
            raise InvalidArgumentError(
                f"block_table has {table.shape[1]} blocks per sequence; sequence {s} has {length} keys, which need "
                f"{blocks} blocks of {block_size}")
        used = table[s, :blocks].astype(np.int64)
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            at = int(np.argmax(bad))
            raise InvalidArgumentError(f"block_table[{s}, {at}] = {int(used[at])} is outside the cache's blocks "
                                       f"0..{num_blocks - 1}")
        offsets = np.arange(length, dtype=np.int64)
        rows.append(used[offsets // block_size] * block_size + offsets % block_size)
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64)), ends


def gather_paged_kv(k_cache, v_cache, block_table, cu_seqlens_k) -> tuple:
    """(k, v) [sum L_s, Nkv, D]: the sequences' keys and values gathered from the paged caches
    (numpy arrays [num_blocks, block_size, Nkv, D] of one shape and dtype) through block_table."""
    caches = []
    for name, x in (("k", k_cache), ("v", v_cache)):
        x = as_array(name, x)
        if isinstance(x, DeviceArray):
            raise InvalidTypeError(f"{name}: a paged cache with block_table is read from a numpy array here, not a "
                                   "DeviceArray")
        if x.ndim != 4:
            raise InvalidArgumentError(f"{name} with block_table must be a paged cache [num_blocks, block_size, "
                                       f"nheads_k, headdim], got shape {x.shape}")
        caches.append(x)
    k, v = caches
    if k.shape != v.shape:
        raise InvalidArgumentError(f"k {k.shape} and v {v.shape} must be paged caches of one shape")
    num_blocks, block_size, heads, dim = k.shape
    rows, _ = paged_rows(block_table, cu_seqlens_k, num_blocks, block_size)
    flat = (num_blocks * block_size, heads, dim)
    return k.reshape(flat)[rows], v.reshape(flat)[rows]
