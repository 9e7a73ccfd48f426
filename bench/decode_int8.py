"""Decode with an int8 KV cache (FlashAttentionDecodeV3, issue #31 item 1): the modeled step time
of the real kernel on the simulator (acl_fa.plan.timing: modeled, not measured) against the float16
cache's on the same keys, the int8 step's HBM bound (its int8 K/V, the V token scales and K channel
scales, q, out, LSE, lengths, block table at the chip's HBM rate) and the caches' device bytes; the
table in bench/RESULTS.md "Int8 KV cache (decode, #31)".

Usage: python bench/decode_int8.py [--seq-kv 32768] [--soc-check]
  B1 N32 Nkv8 D128 float16 Sq1, a contiguous and a paged (block 128) cache of --seq-kv keys.
  --soc-check: what the other chips of the catalogue say (the decode kernel is Atlas A2/A3 only).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

import acl_fa
from acl_fa.jobs.decode_run import step_hbm_bound_us
from acl_fa.plan import timing

HEADS, KV_HEADS, D = 32, 8, 128


def modeled_us(session, call) -> tuple:
    """(modeled step us, what bounds it, the step us at the calibrated end of the model's ranges:
    the L2 rates at 5x HBM and the assumed cycle costs x0.587, docs/timing_model.md "Calibration and
    ranges"). The int8 step is L2-bound at the nominal rates (its dequantized tiles cross GM)."""
    costs = timing.pipe_costs(session.backend)
    fields = timing.cost_fields(session.backend)
    with timing.op_trace(session.backend):
        call()
        model = timing.last_model(session.backend)
        calibrated = timing.remodel(session.backend, timing.calibrated_costs(fields, costs))
    return model.seconds * 1e6, model.bound, calibrated.seconds * 1e6


def caches(rng, seq_kv, paged):
    rows, slots = (-(-seq_kv // 128), 128) if paged else (1, seq_kv)
    k = rng.standard_normal((rows, slots, KV_HEADS, D)).astype(np.float16)
    v = rng.standard_normal(k.shape).astype(np.float16)
    table = rng.permutation(rows).astype(np.int32).reshape(1, rows) if paged else None
    return k, v, table


def row(session, rng, seq_kv, paged):
    k, v, table = caches(rng, seq_kv, paged)
    kq, vq, ks, vs = acl_fa.quantize_kv_cache(k, v)
    q = rng.standard_normal((1, 1, HEADS, D)).astype(np.float16)
    soc = session.soc_name()
    fp16_us, fp16_bound, fp16_cal = modeled_us(session, lambda: session.flash_attention_with_kvcache(
        q, k, v, cache_seqlens=seq_kv, block_table=table))
    int8_us, int8_bound, int8_cal = modeled_us(session, lambda: session.flash_attention_with_kvcache(
        q, kq, vq, k_scale=ks, v_scale=vs, cache_seqlens=seq_kv, block_table=table))
    table_entries = 0 if table is None else table.size
    held_fp16 = 2 * seq_kv * KV_HEADS * D * 2
    held_int8 = 2 * seq_kv * KV_HEADS * D + seq_kv * KV_HEADS * 4 + KV_HEADS * D * 4
    bound_fp16 = step_hbm_bound_us(soc, held_fp16, 1, HEADS, 1, D, 2, table_entries)
    bound_int8 = step_hbm_bound_us(soc, held_int8, 1, HEADS, 1, D, 2, table_entries)
    device_fp16 = k.nbytes + v.nbytes
    device_int8 = kq.nbytes + vq.nbytes + ks.nbytes + vs.nbytes
    name = "paged, block 128" if paged else "contiguous"
    print(f"| {soc} B1 N32 Nkv8 D128 Sq1, {seq_kv} keys {name} | {fp16_us:.1f} us ({fp16_bound}; HBM bound "
          f"{bound_fp16:.1f}) - {fp16_cal:.1f} us | {int8_us:.1f} us ({int8_bound}) - {int8_cal:.1f} us | "
          f"{int8_us / fp16_us:.3f}x - {int8_cal / fp16_cal:.3f}x | {bound_int8:.1f} us | "
          f"{bound_int8 / int8_us:.0%} - {bound_int8 / int8_cal:.0%} | {device_int8 / 2**20:.2f} MiB = "
          f"{device_int8 / device_fp16:.4f}x of {device_fp16 / 2**20:.2f} MiB |", flush=True)


SOC_CHECK = """
import numpy as np, acl_fa
q = np.zeros((1, 1, 32, 128), np.float16)
k = np.zeros((1, 256, 8, 128), np.int8)
with acl_fa.Session() as s:
    try:
        s.flash_attention_with_kvcache(q, k, k, cache_seqlens=256, k_scale=np.ones((8, 128), np.float32),
                                       v_scale=np.ones((1, 8, 256), np.float32))
        print("ran")
    except acl_fa.InvalidArgumentError as exc:
        print(f"refused: {exc}")
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-kv", type=int, default=32768)
    parser.add_argument("--soc-check", action="store_true")
    args = parser.parse_args()
    if args.soc_check:
        for soc in ("Ascend310P3", "Ascend910A"):
            result = subprocess.run([sys.executable, "-c", SOC_CHECK], capture_output=True, text=True,
                                    env=dict(os.environ, ACL_FA_SIM_SOC=soc))
            print(f"{soc}: {(result.stdout or result.stderr).strip()}", flush=True)
        return
    print("| step | float16 cache (modeled: nominal (bound by) - calibrated end) | int8 cache (same) | "
          "int8 / float16 | int8 HBM bound | bound / modeled | int8 cache device bytes |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    with acl_fa.Session() as session:
        for paged in (False, True):
            row(session, rng, args.seq_kv, paged)


if __name__ == "__main__":
    main()
