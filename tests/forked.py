"""in_child(): runs a function in a forked child and waits for it with a timeout. Imported by
the child interpreters of the fork tests (they put tests/ on sys.path)."""
import os
import signal
import sys
import time
import traceback


def in_child(body, seconds=60):
    """Runs body() in a forked child. A failure (its traceback printed) or a hang (the child
    killed after `seconds`) raises AssertionError here."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (its traceback is above)"
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child hung for {seconds} s")
