"""Modeled time of the forward with the blocks the tiling policy chooses by its analytic cost
(op_host/block_cost.h), next to the blocks the previous rule chose (the largest BLOCK_M that fits
with BLOCK_N = 128, then the largest BLOCK_N: 160x128 for D=128 fp16 on Ascend910B2).

Each row runs `acl-fa profile` twice on the simulator (acl_fa.jobs.profile.profile_job): modeled, not
measured. Usage: python bench/block_choice.py [--shapes 32x4096c,1x32768]
"""
import argparse

from acl_fa.jobs.profile import profile_job
from acl_fa.jobs.settings import JobSettings
from acl_fa.spec.problem import problem_from_sizes

PREVIOUS_RULE = (160, 128)  # the largest-fitting choice at D=128 fp16 on Ascend910B2


def parse(shape: str) -> dict:
    """'32x4096c' -> heads 32, S 4096, causal."""
    causal = shape.endswith("c")
    heads, seq = shape.rstrip("c").split("x")
    return dict(heads=int(heads), seq=int(seq), causal=causal)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="32x4096c,1x4096,1x8192,1x16384,1x32768")
    shapes = [parse(s) for s in parser.parse_args().shapes.split(",")]
    print("| B1 N, S, D128 fp16 | previous blocks | modeled us | auto blocks | modeled us | TFLOP/s | previous / auto |")
    print("|---|---|---|---|---|---|---|")
    for shape in shapes:
        sim = JobSettings(backend="sim")
        sizes = dict(head_dim=128, seq_q=shape["seq"], num_heads=shape["heads"], causal=shape["causal"])
        before = profile_job(problem_from_sizes(block_m=PREVIOUS_RULE[0], block_n=PREVIOUS_RULE[1], **sizes), sim)
        after = profile_job(problem_from_sizes(**sizes), sim)
        t0, t1 = before.summary["time_s"], after.summary["time_s"]
        label = f"N{shape['heads']} S{shape['seq']}{' causal' if shape['causal'] else ''}"
        print(f"| {label} | {before.block_m}x{before.block_n} | {t0 * 1e6:.1f} | {after.block_m}x{after.block_n} | "
              f"{t1 * 1e6:.1f} | {after.summary['tflops']:.1f} | {t0 / t1:.2f} |", flush=True)


if __name__ == "__main__":
    main()
