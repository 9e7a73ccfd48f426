"""The timing model on our forward at B=1 N=1 D=128 fp16 (not causal), next to published
torch_npu FlashAttention times on an Ascend910B2.

Published (hw-native-sys/pto-isa kernels/manual/common/flash_atten/README.md, "910B2 Multi-Core
Comparison", torch_npu column; Q, K, V of one sequence length, FLOPs = 4 * S^2 * 128).
Each row runs `acl-fa profile` (acl_fa.jobs.profile.profile_job) on the simulator: modeled, not
measured. Needs ACL_FA_SIM_LIB_DIR. Usage: python bench/fa_model.py [--seqs 1024,2048,...]
"""
import argparse

from acl_fa.jobs.profile import profile_job
from acl_fa.jobs.settings import JobSettings
from acl_fa.spec.problem import problem_from_sizes

PUBLISHED_US = {1024: 58.461, 2048: 70.801, 4096: 118.302, 8192: 353.147, 16384: 1118.462, 32768: 3646.173}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384,32768")
    seqs = [int(s) for s in parser.parse_args().seqs.split(",")]
    print("| S | blocks | modeled us | modeled TFLOP/s | critical | torch_npu us | torch_npu TFLOP/s | modeled / torch_npu time |")
    print("|---|---|---|---|---|---|---|---|")
    for seq in seqs:
        r = profile_job(problem_from_sizes(seq_q=seq, num_heads=1, head_dim=128), JobSettings(backend="sim"))
        s = r.summary
        flops = 4.0 * seq * seq * 128
        pub = PUBLISHED_US.get(seq)
        pub_cols = f"{pub:.1f} | {flops / pub / 1e6:.1f} | {s['time_s'] * 1e6 / pub:.2f}" if pub else "- | - | -"
        print(f"| {seq} | {r.block_m}x{r.block_n} | {s['time_s'] * 1e6:.1f} | {s['tflops']:.1f} | {s['critical']} | "
              f"{pub_cols} |", flush=True)


if __name__ == "__main__":
    main()
