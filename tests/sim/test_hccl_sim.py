"""The simulated HCCL (sim/src/hccl, libhccl.so) and acl_fa.parallel.hccl over it.

Every test runs in fresh processes: loading libhccl.so raises the simulator's default device
count to 8 for the whole process, which the rest of the suite must not see. Multi-process
cliques get their root info out of band (a file, or the parent's bytes); every wait has a
timeout so that a hang fails the test instead of the CI job.
"""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB_DIR = Path(os.environ["ACL_FA_SIM_LIB_DIR"]) if os.environ.get("ACL_FA_SIM_LIB_DIR") else \
    Path(__import__("acl_fa").__file__).parent / "_sim" / "lib"
pytestmark = pytest.mark.skipif(not (LIB_DIR / "libhccl.so").is_file(),
                                reason="simulator libraries not built (set ACL_FA_SIM_LIB_DIR)")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """tests/hccl/hccl_abi_client.cpp built against sim/include and the simulator's libraries."""
    exe = tmp_path_factory.mktemp("hccl") / "hccl_abi_client"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{ROOT / 'sim' / 'include'}",
                    str(ROOT / "tests" / "hccl" / "hccl_abi_client.cpp"), f"-L{LIB_DIR}", "-lhccl", "-lascendcl",
                    f"-Wl,-rpath,{LIB_DIR}", "-lpthread", "-o", str(exe)], check=True, timeout=300)
    return exe


def _env(**extra):
    env = dict(os.environ, ACL_FA_BACKEND="sim", **extra)
    env.pop("ACL_FA_SIM_DEVICE_COUNT", None)
    env.pop("ACL_FA_SIM_FAIL", None)
    return env


@pytest.mark.parametrize("ranks", [2, 4])
def test_c_client_threads_of_one_process(client, ranks):
    proc = subprocess.run([str(client), "threads", str(ranks)], capture_output=True, text=True, timeout=120,
                          env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(ranks):
        assert f"ok collectives rank {r}" in proc.stdout
        assert f"ok link rank {r} bytes {2 * 4 * ((5 << 20) // 4 + 3)} kind HCCS" in proc.stdout


def _cliques_made_by(pid):
    """Shared-memory names of the cliques whose root info process `pid` made (sim/src/hccl/clique.cpp)."""
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"aclfa_hccl_{pid}_")]


def test_c_client_one_process_per_rank(client, tmp_path):
    root = tmp_path / "root.bin"
    maker = subprocess.Popen([str(client), "root", str(root)], env=_env())
    assert maker.wait(timeout=60) == 0
    procs = [subprocess.Popen([str(client), "rank", str(root), "3", str(r)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=_env()) for r in range(3)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, out
        assert f"ok collectives rank {r}" in out and "ok done" in out
    assert not _cliques_made_by(maker.pid)


PRELUDE = """
import threading, numpy as np, acl_fa
from acl_fa.parallel import hccl
from acl_fa.parallel.hccl import Communicator
from acl_fa.runtime.errors import HcclError, HcclParamError, AclError
backend = hccl.use_hccl()
"""


def run_python(code, timeout=120, **env):
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=_env(**env), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_python_ring_gather_and_link_bytes_on_eight_default_devices():
    out = run_python("""
        assert acl_fa.runtime.loader.device_count(backend) == 8  # HCCL loaded: 8 simulated devices by default
        sessions = [acl_fa.Session(device=d) for d in range(4)]
        comms = Communicator.init_all(sessions)
        assert [c.rank for c in comms] == [0, 1, 2, 3] and comms[2].size == 4
        n = 3 * 1000 + 7  # elements per shard, fp16
        shards = [np.arange(n, dtype=np.float16) + 10 * r for r in range(4)]
        bufs = [s.upload(x) for s, x in zip(sessions, shards)]
        incoming = [s.alloc(2 * n) for s in sessions]
        gathered = [s.alloc(2 * n * 4) for s in sessions]
        streams = [s.stream() for s in sessions]
        for r, c in enumerate(comms):
            c.send_recv([("send", bufs[r], n, np.float16, (r + 1) % 4),
                         ("recv", incoming[r], n, np.float16, (r - 1) % 4)], streams[r])
            c.all_gather(bufs[r], gathered[r], n, np.float16, streams[r])
        for s in streams:
            s.synchronize()
        for r in range(4):
            assert np.array_equal(incoming[r].to_numpy((n,), np.float16), shards[(r - 1) % 4])
            assert np.array_equal(gathered[r].to_numpy((4, n), np.float16), np.stack(shards))
            st = comms[r].link_stats(r, (r + 1) % 4)
            # ring message + all-gather block, both one shard
            assert st["bytes"] == 2 * 2 * n and st["messages"] == 2 and st["kind"] == "HCCS", st
            assert st["modeled_seconds"] > 0
        print("ok")
    """)
    assert "ok" in out


def test_python_ranks_as_processes_all_reduce(tmp_path):
    child = textwrap.dedent("""
        import sys, numpy as np, acl_fa
        from acl_fa.parallel import hccl
        hccl.use_hccl()
        rank, root = int(sys.argv[1]), bytes.fromhex(open(sys.argv[2]).read())
        with acl_fa.Session(device=rank) as s:
            comm = hccl.Communicator.join(s, 2, rank, root)
            x = s.upload(np.full(5000, rank + 1.5, np.float32))
            y = s.alloc(4 * 5000)
            st = s.stream()
            comm.all_reduce(x, y, 5000, np.float32, st)
            comm.barrier(st)
            st.synchronize()
            assert np.all(y.to_numpy((5000,), np.float32) == 1.5 + 2.5)
            st.close(); x.close(); y.close(); comm.close()
        print("rank ok", rank)
    """)
    run_python(f"""
        import subprocess, sys
        open({str(tmp_path / 'root')!r}, "w").write(hccl.root_info().hex())
        procs = [subprocess.Popen([sys.executable, "-c", {child!r}, str(r), {str(tmp_path / 'root')!r}],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        assert all(f"rank ok {{r}}" in o for r, o in enumerate(outs)), outs
    """)


def test_all_to_all_v_moves_uneven_blocks_and_counts_each_link():
    """HcclAlltoAllV: rank r sends (r + j + 1) int32 to rank j at its own displacements; every
    block lands where the receiver's rdispls say, own block copied locally; the link counters
    see exactly the off-rank blocks; a receiver expecting another count is named with its peer."""
    run_python("""
        p = 3
        sessions = [acl_fa.Session(device=d) for d in range(p)]
        comms = Communicator.init_all(sessions)
        streams = [s.stream() for s in sessions]
        count = lambda src, dst: src + dst + 1
        sends, recvs, layouts = [], [], []
        for r, s in enumerate(sessions):
            sc = [count(r, j) for j in range(p)]
            sd = [sum(sc[:j]) + 2 * j for j in range(p)]          # gaps between the send blocks
            rc = [count(i, r) for i in range(p)]
            rd = [sum(rc[i + 1:]) for i in range(p)]              # blocks stored in reverse rank order
            data = np.full(sd[-1] + sc[-1], -1, np.int32)
            for j in range(p):
                data[sd[j]:sd[j] + sc[j]] = 1000 * r + 10 * j + np.arange(sc[j])
            sends.append(s.upload(data)); recvs.append(s.alloc(4 * sum(rc))); layouts.append((rc, rd))
            comms[r].all_to_all_v(sends[r], sc, sd, recvs[r], rc, rd, np.int32, streams[r])
        for st in streams:
            st.synchronize()
        for r in range(p):
            rc, rd = layouts[r]
            got = recvs[r].to_numpy((sum(rc),), np.int32)
            for i in range(p):
                assert np.array_equal(got[rd[i]:rd[i] + rc[i]], 1000 * i + 10 * r + np.arange(rc[i])), (r, i, got)
            for j in range(p):
                if j != r:
                    assert comms[r].link_stats(r, j)["bytes"] == 4 * count(r, j)
        # rank 1 expects one element too many from rank 0
        comms[0].all_to_all_v(sends[0], [1, 2, 3], [0, 3, 7], recvs[0], [1, 2, 3], [0, 1, 3], np.int32, streams[0])
        big = sessions[1].alloc(4 * 16)
        comms[1].all_to_all_v(sends[1], [2, 3, 4], [0, 4, 9], big, [3, 3, 4], [0, 3, 6], np.int32, streams[1])
        comms[2].all_to_all_v(sends[2], [3, 4, 5], [0, 5, 11], recvs[2], [3, 4, 5], [0, 3, 7], np.int32, streams[2])
        messages = []
        for st in streams:
            try:
                st.synchronize()
            except AclError as exc:
                messages.append(exc.message)
        assert any("rank 0 sent HcclAlltoAllV of 2 x int32 but rank 1 expects HcclAlltoAllV of 3 x int32" in m
                   for m in messages), messages
        try:
            comms[0].all_to_all_v(sends[0], [1, 2], [0, 3], recvs[0], [1, 2, 3], [0, 1, 3], np.int32, streams[0])
            raise SystemExit("no error")
        except acl_fa.runtime.errors.InvalidArgumentError as exc:
            assert "send_counts must list one element count per rank (3)" in str(exc)
        print("ok")
    """)


def test_ranks_disagreeing_on_a_count_abort_the_clique_naming_both():
    run_python("""
        sessions = [acl_fa.Session(device=d) for d in range(2)]
        comms = Communicator.init_all(sessions)
        a, b = sessions[0].alloc(400), sessions[1].alloc(800)
        streams = [s.stream() for s in sessions]
        comms[0].send(a, 100, np.float32, 1, streams[0])
        comms[1].recv(b, 200, np.float32, 0, streams[1])
        errors = []
        for st in streams:
            try:
                st.synchronize()
            except AclError as exc:
                errors.append(exc)
        # A small send completes once staged (as an eager send does); the receiver finds the mismatch.
        assert len(errors) == 1 and errors[0].name == "ACL_ERROR_RT_PARAM_INVALID", errors
        assert "rank 0 sent HcclSend/HcclRecv of 100 x fp32 but rank 1 expects HcclSend/HcclRecv of 200 x fp32" \\
            in errors[0].message
        # the comm is aborted for every rank: the sender's next call fails at once with the reason
        comms[0].barrier(streams[0])
        try:
            streams[0].synchronize(); raise SystemExit("no error")
        except AclError as exc:
            assert "aborted" in exc.message and "rank 1 expects" in exc.message
    """)


def test_a_rank_that_never_calls_is_reported_as_a_hang():
    run_python("""
        sessions = [acl_fa.Session(device=d) for d in range(3)]
        comms = Communicator.init_all(sessions)
        bufs = [s.alloc(64) for s in sessions]
        outs = [s.alloc(64 * 3) for s in sessions]
        streams = [s.stream() for s in sessions]
        for r in (0, 1):  # rank 2 never calls
            comms[r].all_gather(bufs[r], outs[r], 16, np.float32, streams[r])
        try:
            streams[0].synchronize(); raise SystemExit("no error")
        except AclError as exc:
            assert exc.name == "ACL_ERROR_RT_TASK_TIMEOUT", exc
            assert "HCCL_EXEC_TIMEOUT=1" in exc.message
            assert "receive from rank 2 (rank 2 has not made the matching call)" in exc.message, exc.message
    """, HCCL_EXEC_TIMEOUT="1")


def test_a_rank_that_never_joins_times_out_naming_it():
    out = run_python("""
        import os
        print("pid", os.getpid())
        with acl_fa.Session(device=0) as s:
            try:
                Communicator.join(s, 3, 0, hccl.root_info()); raise SystemExit("no error")
            except HcclError as exc:
                assert exc.name == "HCCL_E_TIMEOUT" and exc.code == 9
                assert "rank(s) 1, 2 of 3 never joined within HCCL_CONNECT_TIMEOUT=1 s" in exc.message, exc
    """, HCCL_CONNECT_TIMEOUT="1")
    # The timed-out clique can never form, so its shared memory is gone with the error.
    assert not _cliques_made_by(int(out.split()[1]))


def test_root_info_nobody_joins_is_swept_once_stale(client, tmp_path):
    """A root info that is never joined leaves shared memory behind its exited maker; the next
    HcclGetRootInfo removes it once it is older than HCCL_CONNECT_TIMEOUT, and not before."""
    makers = []
    for name in ("first.bin", "second.bin"):
        makers.append(subprocess.Popen([str(client), "root", str(tmp_path / name)], env=_env()))
        assert makers[-1].wait(timeout=60) == 0
    assert len(_cliques_made_by(makers[0].pid)) == 1, "a young root info must survive its maker's exit"
    time.sleep(1.5)
    sweeper = subprocess.Popen([str(client), "root", str(tmp_path / "third.bin")],
                               env=_env(HCCL_CONNECT_TIMEOUT="1"))
    assert sweeper.wait(timeout=60) == 0
    assert not _cliques_made_by(makers[0].pid) and not _cliques_made_by(makers[1].pid)
    assert len(_cliques_made_by(sweeper.pid)) == 1
    for name in _cliques_made_by(sweeper.pid):
        os.remove(f"/dev/shm/{name}")


def test_bad_arguments_are_named_at_the_call():
    run_python("""
        from acl_fa.runtime.ffi import ffi
        comms_out = ffi.new("HcclComm[2]")
        try:
            backend.call("HcclCommInitAll", 2, ffi.new("int32_t[]", [3, 3]), comms_out); raise SystemExit("no error")
        except HcclParamError as exc:
            assert exc.name == "HCCL_E_PARA" and "devices[0] and devices[1] are both device 3" in exc.message, exc
        sessions = [acl_fa.Session(device=d) for d in range(2)]
        comms = Communicator.init_all(sessions)
        st = sessions[0].stream()
        buf = sessions[0].alloc(64)
        cases = [
            (lambda: comms[0].send(buf, 16, np.float32, 5, st), "destRank 5 is out of range: the communicator has 2 ranks"),
            (lambda: comms[0].send(buf, 16, np.float32, 0, st), "destRank 0 is this rank itself"),
            (lambda: comms[1].send(buf, 16, np.float32, 0, st), "belongs to device 0 but the current device is 1"),
        ]
        for call, words in cases:
            try:
                call(); raise SystemExit("no error: " + words)
            except HcclError as exc:
                assert words in exc.message, (words, str(exc))
        comms[0].close()
        try:
            backend.call("HcclGetRankSize", comms[1].handle, ffi.NULL); raise SystemExit("no error")
        except HcclParamError as exc:
            assert exc.name == "HCCL_E_PTR" and "rankSize is NULL" in exc.message
    """)


def test_fault_injection_covers_hccl_calls():
    run_python("""
        backend.call("aclfaSimSetFaults", b"HcclCommInitAll:1,HcclSend:2")
        sessions = [acl_fa.Session(device=d) for d in range(2)]
        try:
            Communicator.init_all(sessions); raise SystemExit("no error")
        except HcclError as exc:
            assert exc.name == "HCCL_E_INTERNAL" and "injected fault" in exc.message, exc
        comms = Communicator.init_all(sessions)  # the fault fired once
        st = sessions[0].stream()
        buf = sessions[0].alloc(64)
        comms[0].send(buf, 16, np.float32, 1, st)
        try:
            comms[0].send(buf, 16, np.float32, 1, st); raise SystemExit("no error")
        except HcclError as exc:
            assert exc.api == "HcclSend" and "HcclSend:2" in exc.message
    """)


def test_npu_backend_looks_for_libhccl_next_to_its_runtime_then_in_the_toolkits(tmp_path, monkeypatch):
    """The loader's record says where it looked and why each path failed (nothing is loaded)."""
    from acl_fa.runtime.errors import AclLibraryError
    from acl_fa.runtime.loader import Backend

    runtime_dir, toolkit = tmp_path / "rt", tmp_path / "toolkit"
    (toolkit / "lib64").mkdir(parents=True)
    (toolkit / "lib64" / "libhccl.so").write_text("not an ELF file")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(toolkit))
    backend = Backend("npu", runtime_dir, None, runtime_dir / "libacl_rt.so", None, runtime_dir / "libnnopbase.so",
                      [], {})
    with pytest.raises(AclLibraryError) as info:
        backend.load_hccl()
    text = str(info.value)
    assert f"hccl: {runtime_dir / 'libhccl.so'}: not found" in text
    assert f"hccl: {toolkit / 'lib64' / 'libhccl.so'}: found but failed to load" in text
    with pytest.raises(AclLibraryError):  # remembered, not retried
        backend.load_hccl()


def test_hccl_code_table_matches_the_cdefs():
    """HcclError's names are those of enum HcclResult in the cdefs (checked against HCCL's header)."""
    import re

    from acl_fa.runtime.errors import (
        HCCL_ERROR_CODES, HcclError, HcclMemoryError, HcclParamError, hccl_error_for_code)

    from acl_fa.runtime.cdef_reader import read_cdef

    text = read_cdef(ROOT / "acl_fa" / "cdefs" / "hccl.h")
    members = {name: int(value) for name, value in re.findall(r"\b(HCCL_E_\w+) = (\d+)", text)}
    assert {info.name: code for code, info in HCCL_ERROR_CODES.items()} == members
    assert isinstance(hccl_error_for_code(1, "HcclSend"), (HcclParamError, ValueError))
    assert isinstance(hccl_error_for_code(24, "HcclSend"), (HcclMemoryError, MemoryError))
    error = hccl_error_for_code(9, "HcclCommInitRootInfo", "timeout")
    assert type(error) is HcclError and str(error).startswith(
        "HcclCommInitRootInfo failed with 9 (HCCL_E_TIMEOUT): HCCL timed out")


def test_a_killed_peer_not_yet_reaped_ends_its_survivor_in_bounded_time(tmp_path):
    """Rank 1 is killed while rank 0 waits to receive from it, and nobody reaps it: a zombie,
    for which kill(pid, 0) still succeeds. The survivor must see it as exited (its state in
    /proc/<pid>/stat is Z) and fail with the peer named, well before HCCL_EXEC_TIMEOUT."""
    root = tmp_path / "root"
    subprocess.run([sys.executable, "-c", "from acl_fa.parallel import hccl; "
                    f"open({str(root)!r}, 'w').write(hccl.root_info(hccl.use_hccl()).hex())"],
                   check=True, timeout=60, env=_env(), cwd=ROOT)
    rank = textwrap.dedent("""
        import sys, time, numpy as np, acl_fa
        from acl_fa.parallel import hccl
        from acl_fa.runtime.errors import AclError
        hccl.use_hccl()
        r, root = int(sys.argv[1]), bytes.fromhex(open(sys.argv[2]).read())
        with acl_fa.Session(device=r) as s:
            comm = hccl.Communicator.join(s, 2, r, root)
            print("joined", flush=True)
            if r == 1:
                time.sleep(600)  # killed here, before its matching send
            buf, st = s.alloc(4096), s.stream()
            start = time.monotonic()
            try:
                comm.send_recv([("recv", buf, 1024, np.float32, 1)], st)
                st.synchronize()
                print("no error")
            except AclError as exc:
                print(f"failed after {time.monotonic() - start:.1f} s: {exc}", flush=True)
    """)
    env = _env(HCCL_EXEC_TIMEOUT="600")
    peer = subprocess.Popen([sys.executable, "-c", rank, "1", str(root)], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)
    survivor = subprocess.Popen([sys.executable, "-c", rank, "0", str(root)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        assert peer.stdout.readline().strip() == "joined"
        assert survivor.stdout.readline().strip() == "joined"
        time.sleep(0.5)  # the survivor's receive is waiting
        os.kill(peer.pid, 9)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{peer.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed peer did not become a zombie"
            time.sleep(0.05)
        out = survivor.communicate(timeout=120)[0]
        assert survivor.returncode == 0, out
        assert f"rank 1 (pid {peer.pid}) exited while this call waited for it" in out, out
        assert float(out.split("failed after ")[1].split(" s")[0]) < 60, out
    finally:
        for p in (peer, survivor):
            if p.poll() is None:
                p.kill()
            p.wait()
