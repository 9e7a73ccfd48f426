"""What the forward's tiling fitted to a small device costs (docs/memory.md): the README's small
shape, B1 N8 S1024 D64 float16 on Ascend910B2, planned for devices of decreasing free memory
(acl_fa.plan.forward.plan_within, the policy's ComputePlanWithin), each plan's blocks, memory and
modeled time -- the simulator's pipeline model (`acl-fa profile`, acl_fa.jobs.profile.profile_job)
with those blocks, and the policy's analytic estimate. Modeled, not measured.

Usage: python bench/workspace_fit.py [--mib 41,32,28,24,22,21]
"""
from common import header, list_argument, table

import dataclasses  # noqa: E402

from acl_fa.jobs.profile import profile_job  # noqa: E402
from acl_fa.jobs.settings import JobSettings  # noqa: E402
from acl_fa.plan import forward as planmod  # noqa: E402
from acl_fa.spec.problem import problem_from_sizes  # noqa: E402

SOC = "Ascend910B2"
MIB = 1 << 20


def main():
    sizes = list_argument("mib", "41,32,28,24,22,21", float)
    print(header("The forward's tiling fitted to the device's memory (B1 N8 S1024 D64 float16, Ascend910B2)"))
    rows = []
    for causal in (False, True):
        problem = problem_from_sizes(seq_q=1024, num_heads=8, head_dim=64, causal=causal)
        auto_us = None
        for mib in sizes:
            p = planmod.plan_within(problem, int(mib * MIB), SOC)
            label = f"{'causal' if causal else 'full'}, {mib:g} MiB"
            if p.device_bytes > mib * MIB:
                rows.append([label, "nothing fits", f"floor {p.device_bytes / MIB:.2f} MiB", "", "", "", ""])
                continue
            blocks = dataclasses.replace(problem, block_m=p.block_m, block_n=p.block_n)
            report = profile_job(blocks, JobSettings(backend="sim"))
            us = report.summary["time_s"] * 1e6
            auto_us = us if auto_us is None else auto_us
            analytic = planmod.analytic_cycles(blocks, SOC)
            rows.append([label, f"{p.block_m}x{p.block_n}", f"{p.workspace_bytes / MIB:.2f}",
                         f"{p.device_bytes / MIB:.2f}", f"{us:.1f}", f"{us / auto_us:.2f}", f"{analytic:.0f}"])
            print(f"  {label}: {rows[-1]}", flush=True)
    print(table(["problem, free device memory", "blocks", "workspace MiB", "per call MiB", "modeled us",
                 "vs fastest", "analytic cycles"], rows))


if __name__ == "__main__":
    main()
