"""`acl-fa launch -n N -- command ...`: N processes of `command`, one per device, as one HCCL clique.

Each process gets, in its environment (acl_fa.parallel.RankContext.from_env reads them):

    ACL_FA_RANK        its rank, 0 .. N-1
    ACL_FA_WORLD_SIZE  N
    ACL_FA_DEVICE      its device id (--devices, default the rank)
    ACL_FA_ROOT_INFO   a file path, fresh per launch: rank 0 writes HcclGetRootInfo's bytes there
                       (by rename, so a reader never sees half of it); the other ranks wait for it

The launcher forwards every line the ranks print (stdout and stderr) prefixed with "[rank r] ".
When a rank exits non-zero the others are stopped (SIGTERM to each rank's process group, SIGKILL
after a grace period) and the launch exits with that rank's code; when the ranks are still running
after `timeout` seconds (a rank that never joins the clique, a hang) every rank is stopped, the
ranks still running are named and the launch exits with TIMEOUT_EXIT.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional, Sequence

from ..runtime.errors import InvalidArgumentError
from .clique import ENV_DEVICE, ENV_RANK, ENV_ROOT, ENV_SIZE

__all__ = ["launch", "TIMEOUT_EXIT", "rank_environment"]

TIMEOUT_EXIT = 124  # as timeout(1)
GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL of a rank being stopped


def rank_environment(rank: int, size: int, device: int, root_path: str, base: Optional[dict] = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update({ENV_RANK: str(rank), ENV_SIZE: str(size), ENV_DEVICE: str(device), ENV_ROOT: root_path})
    return env


def _check(n, command, devices, timeout) -> list:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"-n must be an integer >= 1, got {n!r}")
    if not command:
        raise InvalidArgumentError("no command to launch: acl-fa launch -n N -- command [args ...]")
    if devices is None:
        devices = list(range(n))
    if len(devices) != n:
        raise InvalidArgumentError(f"--devices lists {len(devices)} devices for -n {n} ranks: one device per rank")
    for i, d in enumerate(devices):
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise InvalidArgumentError(f"--devices[{i}]={d!r} must be a device id >= 0")
        if devices.index(d) != i:
            raise InvalidArgumentError(f"--devices[{i}]={d} repeats --devices[{devices.index(d)}]: "
                                       "each rank needs a device of its own")
    if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0):
        raise InvalidArgumentError(f"--timeout must be a number of seconds > 0, got {timeout!r}")
    return list(devices)


def launch(n: int, command: Sequence[str], *, devices: Optional[Sequence[int]] = None, timeout: float = 3600.0,
           out=None, env: Optional[dict] = None) -> int:
    """Runs `command` as ranks 0..n-1 (see the module doc); returns the launch's exit code: 0 when
    every rank exited 0, else the first failing rank's code (TIMEOUT_EXIT on timeout)."""
    devices = _check(n, list(command), list(devices) if devices is not None else None, timeout)
    out = sys.stdout if out is None else out
    lock = threading.Lock()

    def say(line: str):
        with lock:
            out.write(line)
            out.flush()

    workdir = tempfile.mkdtemp(prefix="acl-fa-launch-")
    root = os.path.join(workdir, "root_info")
    procs: list = []
    readers: list = []
    try:
        for r in range(n):
            procs.append(subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=rank_environment(r, n, devices[r], root, env),
                                          start_new_session=True))  # its own process group: stopped as a whole
            readers.append(threading.Thread(target=_forward, args=(procs[-1].stdout, f"[rank {r}] ", say),
                                            daemon=True))
            readers[-1].start()
        code = _watch(procs, timeout, say)
    finally:
        for p in procs:
            if p.poll() is None:
                _stop([p])
        for t in readers:
            t.join(timeout=GRACE_SECONDS)
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def _forward(stream, prefix: str, say):
    for raw in iter(stream.readline, b""):
        say(prefix + raw.decode(errors="replace").rstrip("\n") + "\n")
    stream.close()


def _watch(procs: list, timeout: float, say) -> int:
    deadline = time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            r, c = failed[0]
            running = [i for i, x in enumerate(codes) if x is None]
            say(f"acl-fa launch: rank {r} exited with code {c}"
                f"{'; stopping ranks ' + ', '.join(map(str, running)) if running else ''}\n")
            _stop([procs[i] for i in running])
            return c if c > 0 else 128 - c  # killed by signal -c: the shell's 128 + signal
        if all(c == 0 for c in codes):
            return 0
        if time.monotonic() > deadline:
            running = [i for i, x in enumerate(codes) if x is None]
            say(f"acl-fa launch: timeout after {timeout:g} s: rank{'s' if len(running) > 1 else ''} "
                f"{', '.join(map(str, running))} still running (a rank that never joined, or a hang); stopping them\n")
            _stop([procs[i] for i in running])
            return TIMEOUT_EXIT
        time.sleep(0.05)


def _stop(procs: list):
    """SIGTERM to each process group, SIGKILL to those still alive after GRACE_SECONDS."""
    for p in procs:
        _signal(p, signal.SIGTERM)
    end = time.monotonic() + GRACE_SECONDS
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(p, signal.SIGKILL)
            p.wait()


def _signal(p, sig):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
