"""Decode with score modifiers (FlashAttentionDecodeV2: softcap, ALiBi, sinks) and with more than
255 query rows per kv head (row groups): the modeled step time of the real kernel on the simulator
(acl_fa.plan.timing: modeled, not measured) against the plain step on the same arrays, issue #30;
the table in bench/RESULTS.md "Decode: flash-attn's KV-cache API, score modifiers, int8 cache".

Usage: python bench/decode_mods.py [--seq-kv 32768] [--paged] [--rows]
  default: B1 N32 Nkv8 D128 float16 Sq1, a contiguous (or --paged, block 128) cache of --seq-kv keys;
  the plain step, then softcap 30, ALiBi (geometric slopes), sinks, and all three;
  --rows: GQA 8 x 64 (N64 Nkv8 Sq64) and 4 x 100 (N32 Nkv8 Sq100), causal, beside Sq 16.
"""
import argparse

import numpy as np

import acl_fa
from acl_fa.plan import timing
from acl_fa.plan.decode import decode_plan


def modeled_us(session, call) -> tuple:
    """(modeled step us, its pipeline term us): the step is at least its HBM bytes (the bound the
    model adds on top of the replay), the pipeline term is what the kernel's own work costs."""
    with timing.op_trace(session.backend):
        call()
        model = timing.last_model(session.backend)
    return model.seconds * 1e6, model.pipeline_cycles / model.cycles * model.seconds * 1e6


def cache(rng, seq_kv, kv_heads, d, paged):
    if not paged:
        k = rng.standard_normal((1, seq_kv, kv_heads, d)).astype(np.float16)
        return k, rng.standard_normal(k.shape).astype(np.float16), None
    blocks = -(-seq_kv // 128)
    k = rng.standard_normal((blocks, 128, kv_heads, d)).astype(np.float16)
    table = rng.permutation(blocks).astype(np.int32).reshape(1, blocks)
    return k, rng.standard_normal(k.shape).astype(np.float16), table


def mods_table(session, rng, seq_kv, paged):
    heads, kv_heads, d = 32, 8, 128
    k, v, table = cache(rng, seq_kv, kv_heads, d, paged)
    q = rng.standard_normal((1, 1, heads, d)).astype(np.float16)
    slopes = (2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)).astype(np.float32)
    sinks = rng.uniform(-1, 3, heads).astype(np.float32)
    variants = [("plain", {}), ("softcap 30", dict(softcap=30.0)), ("alibi", dict(alibi_slopes=slopes)),
                ("sinks", dict(sinks=sinks)), ("all three", dict(softcap=30.0, alibi_slopes=slopes, sinks=sinks))]
    base = None
    cache_name = "paged, block 128" if paged else "contiguous"
    for name, mods in variants:
        us, pipe = modeled_us(session, lambda: session.flash_attention_with_kvcache(
            q, k, v, cache_seqlens=seq_kv, block_table=table, **mods))
        base = base or (us, pipe)
        print(f"| B1 N32 Nkv8 D128 Sq1, {seq_kv} keys {cache_name} | {name} | {us:.1f} us ({us / base[0]:.3f}x) | "
              f"{pipe:.1f} us ({pipe / base[1]:.3f}x) |", flush=True)


def rows_table(session, rng, seq_kv):
    for heads, sq in ((32, 16), (64, 64), (32, 100)):
        k, v, _ = cache(rng, seq_kv, 8, 128, False)
        q = rng.standard_normal((1, sq, heads, 128)).astype(np.float16)
        us, pipe = modeled_us(session, lambda: session.flash_attention_with_kvcache(q, k, v, cache_seqlens=seq_kv))
        p = decode_plan(seq_kv=seq_kv, heads=heads, kv_heads=8, seq_q=sq, head_dim=128)
        print(f"| N{heads} Nkv8 Sq{sq} ({heads // 8} x {sq} = {heads // 8 * sq} rows per kv head), {seq_kv} keys | "
              f"{p.row_groups} x {p.row_group_heads} head(s) x {p.row_group_tokens} token(s) = {p.rows} rows | "
              f"{us:.1f} us (pipeline {pipe:.1f}) | {p.modeled_us:.1f} us |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-kv", type=int, default=32768)
    parser.add_argument("--paged", action="store_true")
    parser.add_argument("--rows", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with acl_fa.Session() as session:
        if args.rows:
            rows_table(session, rng, args.seq_kv)
        else:
            mods_table(session, rng, args.seq_kv, args.paged)


if __name__ == "__main__":
    main()
