"""Ascend C's kernel-side HCCL client (sim/include/lib/hccl/hccl.h) over the simulated libhccl's
server (sim/src/hccl/kernel_server.cpp), through the test kernel tests/kernels/hccl_exchange.cpp:
the bytes an in-kernel AllGather / AlltoAll moves between simulated devices (ranks as threads of
one process, HcclCommInitAll), the link counters, the client's rules, and the timing model's
overlap of a committed task with the cores' compute (COMM_START / COMM_WAIT in the trace).

Each case runs in a fresh process: loading libhccl.so raises the simulator's default device count
for the whole process (tests/sim/test_hccl_sim.py)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB_DIR = Path(os.environ["ACL_FA_SIM_LIB_DIR"]) if os.environ.get("ACL_FA_SIM_LIB_DIR") else \
    Path(__import__("acl_fa").__file__).parent / "_sim" / "lib"
pytestmark = pytest.mark.skipif(not (LIB_DIR / "libhccl.so").is_file(),
                                reason="simulator libraries not built (set ACL_FA_SIM_LIB_DIR)")

# What both drivers start with: the simulator's ACL runtime and libhccl, and the test kernels'
# cffi declarations with the kernel-side HCCL context entries (a format template: {kernels!r}).
DRIVER_PREAMBLE = """
import json, sys
import cffi, numpy as np
sys.path.insert(0, {kernels!r})
import simlib
ffi = cffi.FFI()
ffi.cdef(simlib.CDEF + '''
int aclfaSimHcclKernelContextCreate(void *comm, void **context);
int aclfaSimHcclKernelContextDestroy(void *context);
''')
lib_dir = simlib.lib_dir()
rt = ffi.dlopen(str(lib_dir / "libascendcl.so"))
hccl = ffi.dlopen(str(lib_dir / "libhccl.so"))
"""

# Runs `ranks` ranks of one clique on threads, each launching hccl_exchange once with its own
# context, and prints one JSON line: per rank the launch's rc / message, what recv and z hold,
# the modeled cycles of the launch (when traced) and the bytes it sent to each peer.
DRIVER = DRIVER_PREAMBLE + """
import threading
engine = ffi.dlopen(str(lib_dir / "libascendc_sim.so"))
k = ffi.dlopen(str(simlib.kernel_library(lib_dir)))
assert rt.aclInit(ffi.NULL) in (0, 100002)
ranks, mode, count, tile, tiles, block_dim, trace, no_context, device_ids = {args}
devices = ffi.new("int32_t[]", device_ids or list(range(ranks)))
comms = ffi.new("HcclComm[]", ranks)
assert hccl.HcclCommInitAll(ranks, devices, comms) == 0
if trace:
    assert engine.aclfaSimSetOpTrace(1) == 0
out = [None] * ranks
barrier = threading.Barrier(ranks)

def rank(r):
    assert rt.aclrtSetDevice(devices[r]) == 0
    blocks = ranks
    send = (np.arange(count * blocks) % 1000 + 1000 * r).astype(np.float16)
    x = np.random.default_rng(r).uniform(-1, 1, block_dim * tiles * tile).astype(np.float32)
    bufs = []
    def dev(a_or_n):
        n = a_or_n if isinstance(a_or_n, int) else a_or_n.nbytes
        p = ffi.new("void **")
        assert rt.aclrtMalloc(p, n, 0) == 0
        if not isinstance(a_or_n, int):
            assert rt.aclrtMemcpy(p[0], n, ffi.from_buffer(a_or_n), n, 1) == 0
        bufs.append(p[0])
        return p[0]
    dsend, drecv, dx, dz = dev(send), dev(count * blocks * 2), dev(x), dev(x.nbytes)
    ctx = ffi.new("void **")
    if not no_context:
        assert hccl.aclfaSimHcclKernelContextCreate(comms[r], ctx) == 0
    err = ffi.new("char[4096]")
    barrier.wait()
    my_mode = mode[r] if isinstance(mode, list) else mode
    rc = k.aclfaSimTestHcclExchange(ctx[0], my_mode, dsend, drecv, count, dx, dz, tile, tiles, block_dim, err, 4096)
    done = hccl.aclfaSimHcclKernelContextDestroy(ctx[0]) if not no_context else 0
    barrier.wait()
    res = {{"rc": rc, "msg": ffi.string(err).decode(), "destroy": done}}
    if trace and r == 0:
        st = ffi.new("aclfaSimModelStats *")
        assert engine.aclfaSimGetModelStats(st) == 0
        res["cycles"] = st.cycles
    recv = np.empty(count * blocks, np.float16)
    assert rt.aclrtMemcpy(ffi.from_buffer(recv), recv.nbytes, drecv, recv.nbytes, 2) == 0
    z = np.empty_like(x)
    assert rt.aclrtMemcpy(ffi.from_buffer(z), z.nbytes, dz, z.nbytes, 2) == 0
    res["recv_ok"] = bool(all(np.array_equal(recv[i * count:(i + 1) * count],
                                             ((np.arange(count * blocks) % 1000 + 1000 * i).astype(np.float16)
                                              [(r * count if my_mode & 2 else 0):][:count]))
                              for i in range(ranks)))
    res["z_ok"] = bool(np.array_equal(z, x * 2 + 1))
    res["recv_head"] = [float(e) for e in recv[:8]]
    sent = []
    for peer in range(ranks):
        s = ffi.new("aclfaSimHcclLinkStats *")
        assert hccl.aclfaSimHcclGetLinkStats(comms[r], r, peer, s) == 0
        sent.append(int(s.bytes))
    res["sent"] = sent
    for p in bufs:
        rt.aclrtFree(p)
    out[r] = res

threads = [threading.Thread(target=rank, args=(r,)) for r in range(ranks)]
for t in threads: t.start()
for t in threads: t.join(timeout=300)
print(json.dumps(out))
"""

COMMUNICATE, ALLTOALL, COMPUTE, NEVER_COMMIT, RING_ALLTOALLV, TWICE = 1, 2, 4, 8, 16, 32


def run(ranks, mode, count=4096, tile=1024, tiles=4, block_dim=4, trace=False, no_context=False, devices=None,
        soc=None):
    code = DRIVER.format(kernels=str(ROOT / "tests" / "kernels"),
                         args=(ranks, mode, count, tile, tiles, block_dim, int(trace), int(no_context), devices))
    env = dict(os.environ, ACL_FA_BACKEND="sim", HCCL_EXEC_TIMEOUT="120", PYTHONPATH=str(ROOT))
    env.pop("ACL_FA_SIM_DEVICE_COUNT", None)
    if soc:
        env["ACL_FA_SIM_SOC"] = soc
    if devices and max(devices) >= 8:
        env["ACL_FA_SIM_DEVICE_COUNT"] = str(max(devices) + 1)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("ranks, mode", [(2, COMMUNICATE | COMPUTE), (4, COMMUNICATE | COMPUTE),
                                         (4, COMMUNICATE | ALLTOALL | COMPUTE)],
                         ids=["allgather-2", "allgather-4", "alltoall-4"])
def test_collective_inside_the_kernel_moves_the_bytes(ranks, mode):
    """Every rank's recv holds each peer's block in rank order, the cores' compute is right, and each
    link carried exactly one block of count fp16 (the own block is copied locally)."""
    count = 4096
    res = run(ranks, mode, count=count)
    for r, rank in enumerate(res):
        assert rank["rc"] == 0 and rank["destroy"] == 0, rank["msg"]
        assert rank["recv_ok"], f"rank {r}: recv does not hold the peers' blocks"
        assert rank["z_ok"], f"rank {r}: z != 2 x + 1"
        assert rank["sent"] == [0 if p == r else count * 2 for p in range(ranks)]


def test_modeled_time_overlaps_the_committed_task_with_compute():
    """The trace's COMM_START / COMM_WAIT: communication alone, compute alone and both in one launch;
    the fused launch takes about the longer of the two, not their sum."""
    # 2 ranks on one server (HCCS, 56 GB/s, 2 us assumed): 512 Ki fp16 = 1 MiB per peer, about 20.7 us.
    kw = dict(count=512 * 1024, tile=4096, tiles=48, block_dim=8, trace=True)
    comm = run(2, COMMUNICATE, **kw)[0]["cycles"]
    compute = run(2, COMPUTE, **kw)[0]["cycles"]
    both = run(2, COMMUNICATE | COMPUTE, **kw)[0]["cycles"]
    print(f"modeled cycles: comm {comm:.0f}, compute {compute:.0f}, fused {both:.0f}")
    link_cycles = (2e-6 + 1048576 / 56e9) * 1800e6
    assert comm >= link_cycles
    assert max(comm, compute) <= both < 0.8 * (comm + compute)


def test_task_to_another_server_is_costed_on_its_roce_link():
    """Devices 0 and 8 sit in two servers (8 devices each on Ascend910B): the committed task's
    modeled time is the RoCE link's (10 us + 1 MiB / 25 GB/s, assumed), not HCCS's."""
    kw = dict(count=512 * 1024, tile=1024, tiles=1, block_dim=1, trace=True)
    roce = run(2, COMMUNICATE, devices=[0, 8], **kw)
    hccs = run(2, COMMUNICATE, devices=[0, 1], **kw)
    for rank in roce:
        assert rank["rc"] == 0 and rank["recv_ok"], rank["msg"]
    roce_cycles = (10e-6 + 1048576 / 25e9) * 1800e6
    hccs_cycles = (2e-6 + 1048576 / 56e9) * 1800e6
    assert roce_cycles <= roce[0]["cycles"] < roce_cycles * 1.05
    assert hccs_cycles <= hccs[0]["cycles"] < hccs_cycles * 1.05


def test_prepared_task_never_committed_is_a_violation():
    res = run(2, NEVER_COMMIT)
    for rank in res:
        assert rank["rc"] == 507015
        assert "Hccl::Finalize" in rank["msg"] and "never committed" in rank["msg"]


def test_launch_without_a_context_is_refused():
    res = run(2, COMMUNICATE, no_context=True)
    for rank in res:
        assert rank["rc"] == 507015
        assert "Hccl::InitV2" in rank["msg"] and "not a communication context" in rank["msg"]


def test_peers_making_different_collectives_fail_both_launches_naming_both_calls():
    """Rank 0's kernel gathers while rank 1's all-to-alls: the receiver sees the other call's
    header, the clique aborts, and both launches fail with the message naming both calls."""
    res = run(2, [COMMUNICATE, COMMUNICATE | ALLTOALL], count=256)
    for rank in res:
        assert rank["rc"] == 507015 and rank["destroy"] != 0
        assert "Hccl::Wait" in rank["msg"] and "HcclAllGather" in rank["msg"] and "HcclAlltoAll" in rank["msg"]


# One rank per process: the root info comes from a file the parent wrote (HcclGetRootInfo), each
# process joins with HcclCommInitRootInfo on its own device and runs hccl_exchange once.
RANK_PROCESS = DRIVER_PREAMBLE + """
k = ffi.dlopen(str(simlib.kernel_library(lib_dir)))
ranks, rank, root_file, count = {args}
assert rt.aclInit(ffi.NULL) in (0, 100002)
assert rt.aclrtSetDevice(rank) == 0
info = ffi.new("HcclRootInfo *")
ffi.memmove(info, open(root_file, "rb").read(), ffi.sizeof("HcclRootInfo"))
comm = ffi.new("HcclComm *")
assert hccl.HcclCommInitRootInfo(ranks, info, rank, comm) == 0
send = (np.arange(count) + 1000 * rank).astype(np.float16)
def dev(n):
    p = ffi.new("void **")
    assert rt.aclrtMalloc(p, n, 0) == 0
    return p[0]
dsend, drecv, dx = dev(send.nbytes), dev(send.nbytes * ranks), dev(4096)
assert rt.aclrtMemcpy(dsend, send.nbytes, ffi.from_buffer(send), send.nbytes, 1) == 0
ctx = ffi.new("void **")
assert hccl.aclfaSimHcclKernelContextCreate(comm[0], ctx) == 0
err = ffi.new("char[4096]")
rc = k.aclfaSimTestHcclExchange(ctx[0], 1, dsend, drecv, count, dx, dx, 1024, 1, 2, err, 4096)
done = hccl.aclfaSimHcclKernelContextDestroy(ctx[0])
recv = np.empty(count * ranks, np.float16)
assert rt.aclrtMemcpy(ffi.from_buffer(recv), recv.nbytes, drecv, recv.nbytes, 2) == 0
ok = all(np.array_equal(recv[i * count:(i + 1) * count], (np.arange(count) + 1000 * i).astype(np.float16))
         for i in range(ranks))
print(json.dumps({{"rc": rc, "msg": ffi.string(err).decode(), "destroy": done, "recv_ok": bool(ok)}}))
hccl.HcclCommDestroy(comm[0])
"""

ROOT_MAKER = """
import sys
import cffi
sys.path.insert(0, {kernels!r})
import simlib
ffi = cffi.FFI()
ffi.cdef(simlib.CDEF)
hccl = ffi.dlopen(str(simlib.lib_dir() / "libhccl.so"))
info = ffi.new("HcclRootInfo *")
assert hccl.HcclGetRootInfo(info) == 0
open({root!r}, "wb").write(bytes(ffi.buffer(info)))
"""


def test_ranks_as_processes_gather_inside_their_kernels(tmp_path):
    """Three ranks, one process each (the clique in shared memory): every kernel's AllGather
    leaves every rank's block in every rank's recv."""
    ranks, count = 3, 2048
    kernels = str(ROOT / "tests" / "kernels")
    env = dict(os.environ, ACL_FA_BACKEND="sim", HCCL_EXEC_TIMEOUT="120", PYTHONPATH=str(ROOT))
    env.pop("ACL_FA_SIM_DEVICE_COUNT", None)
    root = tmp_path / "root.bin"
    subprocess.run([sys.executable, "-c", ROOT_MAKER.format(kernels=kernels, root=str(root))], check=True,
                   timeout=120, env=env, cwd=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", RANK_PROCESS.format(kernels=kernels,
                                                                         args=(ranks, r, str(root), count))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for r in range(ranks)]
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, out + err
        res = json.loads(out.strip().splitlines()[-1])
        assert res["rc"] == 0 and res["destroy"] == 0, res["msg"]
        assert res["recv_ok"], f"rank {r}: recv does not hold every rank's block"


@pytest.mark.parametrize("ranks", [2, 3])
def test_alltoallv_ring_step_inside_the_kernel_on_atlas_a3(ranks):
    """Hccl::AlltoAllV with one non-zero block per direction (the fused ring's exchange): rank r's
    first `count` elements land in rank r + 1's recv; only that link carries bytes."""
    count = 512
    res = run(ranks, COMMUNICATE | RING_ALLTOALLV, count=count, soc="Ascend910_93")
    for r, rank in enumerate(res):
        assert rank["rc"] == 0, rank["msg"]
        prev = (r - 1) % ranks
        assert rank["recv_head"] == [float(i % 1000 + 1000 * prev) for i in range(8)], rank["recv_head"]
        assert rank["sent"] == [count * 2 if peer == (r + 1) % ranks else 0 for peer in range(ranks)], rank["sent"]


def test_alltoallv_inside_the_kernel_is_refused_on_atlas_a2():
    """AlltoAllV.md: Atlas A2 does not offer it; the simulated Ascend910B2 refuses the call."""
    res = run(2, COMMUNICATE | RING_ALLTOALLV, count=256, soc="Ascend910B2")
    for rank in res:
        assert rank["rc"] != 0
        assert "AlltoAllV does not exist on Ascend910B2 (Atlas A2)" in rank["msg"], rank["msg"]


def test_tasks_of_one_context_are_modeled_one_after_the_other():
    """Two AlltoAllV tasks committed back to back (the fused ring's K and V) over one link: the
    server runs them in commit order, so the launch is modeled at about twice one task's time,
    not as if both moved at once (timing.cpp, docs/hccl.md "Timing model")."""
    kw = dict(count=1 << 20, trace=True, soc="Ascend910_93")  # 2 MiB per task: ~37 us over HCCS
    one = run(2, COMMUNICATE | RING_ALLTOALLV, **kw)[0]["cycles"]
    two = run(2, COMMUNICATE | RING_ALLTOALLV | TWICE, **kw)[0]["cycles"]
    assert 1.9 * one <= two <= 2.1 * one, (one, two)
