"""Sessions across fork, close() while other threads call, and Ctrl-C (KeyboardInterrupt)
during a call. Each test runs in a child interpreter with a timeout, so a hang fails the test
instead of stopping the suite; inside, forked children are waited for with a timeout too."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import TESTS, run_python

pytestmark = pytest.mark.usefixtures("sim_only")

# Helpers every child script starts with: inputs, the live-object counts, and in_child()
# (tests/forked.py), which runs a function in a forked child and fails when it fails or hangs.
PRELUDE = """
import gc, json, os, signal, sys, threading, time
import numpy as np
import acl_fa
from acl_fa.runtime.session import live_counts
sys.path.insert(0, TESTS_DIR)
from forked import in_child

backend = acl_fa.get_backend("sim")

def inputs(seed, b=1, n=2, s=48, d=32):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((b, n, s, d)).astype(np.float16) for _ in range(3))

def live():
    return {k: v for k, v in live_counts(backend).items() if v}

"""


def run(code: str, timeout: float = 240, helpers: str = "", **env) -> dict:
    source = PRELUDE.replace("TESTS_DIR", repr(str(TESTS))) + helpers + textwrap.dedent(code)
    return run_python(source, timeout=timeout, ACL_FA_BACKEND="sim", **env)


# ---- fork ----------------------------------------------------------------------------------

def test_forked_child_refuses_inherited_session_and_opens_its_own():
    result = run("""
        q, k, v = inputs(0)
        s = acl_fa.Session()
        expected = s.flash_attention(q, k, v)
        buffer = s.upload(np.arange(8, dtype=np.float32))
        acl_fa.flash_attention(q, k, v)          # the process-wide default session too
        parent_live = live_counts(backend)

        def child():
            with_error = []
            for use in (lambda: s.flash_attention(q, k, v), buffer_ref[0].to_numpy, s.stream, s.synchronize):
                try:
                    use()
                except acl_fa.ClosedObjectError as exc:
                    with_error.append(str(exc))
            assert len(with_error) == 4, with_error
            assert all(f"opened in process {os.getppid()}" in m and "open a new Session in this process" in m
                       for m in with_error), with_error
            assert not live(), live()             # the child starts with no objects at all
            s.close()                             # no hang, no ACL call on the parent's handles
            assert s.closed
            del buffer_ref[:]
            gc.collect()                          # inherited finalizers must not free anything
            with acl_fa.Session() as mine:
                assert np.array_equal(mine.flash_attention(q, k, v), expected)
            assert np.array_equal(acl_fa.flash_attention(q, k, v), expected)
            for session in list(acl_fa.ops.opcall._sessions.values()):
                session.close()
            assert not live(), live()

        buffer_ref = [buffer]
        del buffer
        in_child(child)
        in_child(child)
        # the parent's objects are untouched and still work
        assert live_counts(backend) == parent_live
        assert np.array_equal(s.flash_attention(q, k, v), expected)
        assert buffer_ref[0].to_numpy().tolist() == list(range(8))
        buffer_ref.clear()
        s.close()
        for session in list(acl_fa.ops.opcall._sessions.values()):
            session.close()
        print(json.dumps({"left": live()}))
    """)
    assert result["left"] == {}
    assert "Exception ignored" not in result["_stderr"], result["_stderr"]


def test_multiprocessing_fork_pool_runs_calls_in_its_workers():
    result = run("""
        import multiprocessing

        def work(seed):
            q, k, v = inputs(seed)
            return acl_fa.flash_attention(q, k, v).tobytes()

        s = acl_fa.Session()                      # the parent has a Session and has used it
        expected = [s.flash_attention(*inputs(seed)).tobytes() for seed in range(6)]
        acl_fa.flash_attention(*inputs(0))
        with multiprocessing.get_context("fork").Pool(2) as pool:
            got = pool.map_async(work, range(6)).get(timeout=120)
        assert got == expected
        s.close()
        for session in list(acl_fa.ops.opcall._sessions.values()):
            session.close()
        print(json.dumps({"left": live()}))
    """)
    assert result["left"] == {}


# ---- close() while other threads call ------------------------------------------------------

def test_close_while_threads_call_finishes_or_refuses_each_call_and_leaks_nothing():
    """Three threads call on changing shapes while the main thread closes the Session, over
    many rounds: every call returns the right result or raises ClosedObjectError, and after
    every Session closed no simulator object is left."""
    result = run("""
        shapes = [dict(s=s, d=d) for s in (16, 40, 64) for d in (16, 32)]
        cases = [(inputs(i, **shape)) for i, shape in enumerate(shapes)]
        reference = acl_fa.Session()
        expected = [reference.flash_attention(*case) for case in cases]
        reference.close()
        bad = []
        calls = {"done": 0, "refused": 0}
        lock = threading.Lock()

        def caller(session, start, stop):
            i = start
            while not stop.is_set():
                case = i % len(cases)
                try:
                    out = session.flash_attention(*cases[case])
                except acl_fa.ClosedObjectError:
                    with lock:
                        calls["refused"] += 1
                    return
                except BaseException as exc:
                    bad.append(repr(exc))
                    return
                if not np.array_equal(out, expected[case]):
                    bad.append(f"wrong result for case {case}")
                with lock:
                    calls["done"] += 1
                i += 1

        rng = np.random.default_rng(7)
        for round in range(25):
            session = acl_fa.Session()
            stop = threading.Event()
            threads = [threading.Thread(target=caller, args=(session, t * 2, stop)) for t in range(3)]
            for t in threads:
                t.start()
            time.sleep(float(rng.uniform(0.0, 0.03)))
            session.close()
            stop.set()
            for t in threads:
                t.join(60)
                assert not t.is_alive(), "a caller hung"
            if bad:
                break
        print(json.dumps({"bad": bad[:5], "calls": calls, "left": live()}))
    """, timeout=300, ACL_FA_SIM_THREADS="2")
    assert result["bad"] == []
    assert result["left"] == {}
    assert result["calls"]["refused"] > 0 and result["calls"]["done"] > 0, result["calls"]


# ---- Ctrl-C --------------------------------------------------------------------------------

def test_ctrl_c_stops_a_long_kernel_within_a_second_and_the_session_stays_usable():
    result = run("""
        # As at a terminal: a process started in the background (`cmd &` in a script) inherits
        # SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        s = acl_fa.Session()
        small = inputs(1)
        expected_small = s.flash_attention(*small)
        rng = np.random.default_rng(3)
        long_call = tuple(rng.standard_normal((1, 32, 4096, 128)).astype(np.float16) for _ in range(3))  # ~3 s
        s.flash_attention(*inputs(2, s=256, d=128))   # warm the code paths
        sent = []
        main = threading.main_thread().ident

        def waiting_for_the_kernel():
            frame = sys._current_frames().get(main)
            while frame is not None:
                if frame.f_code.co_name == "synchronize":
                    return True
                frame = frame.f_back
            return False

        def interrupt():  # Ctrl-C 0.3 s into the wait for the kernel
            while not waiting_for_the_kernel():
                time.sleep(0.005)
            time.sleep(0.3)
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt).start()
        try:
            s.flash_attention(*long_call)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        stopped = time.monotonic()
        # the session stays usable: the next call waits for the interrupted kernel, then runs
        usable = np.array_equal(s.flash_attention(*small), expected_small)
        after = time.monotonic()
        s.close()
        print(json.dumps({"interrupted": interrupted, "delay": stopped - sent[0], "usable": usable,
                          "next_call": after - stopped, "left": live()}))
    """, ACL_FA_SIM_THREADS="1")
    assert result["interrupted"], result
    # Stopped within a wait slice, long before the kernel ended: the next call, which first waits
    # for the rest of the interrupted kernel, takes longer than the interrupt took to land. (An
    # absolute bound such as 1 s breaks on a loaded host; this one scales with the load.)
    assert result["delay"] < result["next_call"], result
    assert result["usable"]
    assert result["left"] == {}


INJECT = """
# Interrupts land as a real Ctrl-C does. An interval timer (setitimer) fires SIGALRM after a
# given delay; its handler raises SIGINT, whose handler -- the default one, or the one
# acl_fa.runtime.interrupts puts in place while it holds Ctrl-C back -- runs at once. Python runs signal
# handlers at the main thread's next check for signals (after any call returns, at any loop or
# function start), so KeyboardInterrupt lands where a real Ctrl-C can. The SIGINT handler raises
# only while an action runs ("armed"): a late signal is dropped instead of landing in the
# test's own code.
armed = [False]

def on_sigint(signum, frame):
    if armed[0]:
        raise KeyboardInterrupt

def on_alarm(signum, frame):
    signal.raise_signal(signal.SIGINT)

signal.signal(signal.SIGINT, on_sigint)
signal.signal(signal.SIGALRM, on_alarm)

def interrupted_after(delay, action):
    try:
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, delay)
        action()
        armed[0] = False
        hit = False
    except KeyboardInterrupt:
        armed[0] = False
        hit = True
    signal.setitimer(signal.ITIMER_REAL, 0)
    return hit

def duration(action, repeat=7):
    # The shortest of a few runs: the delays must fall inside the action even when it runs fast.
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); action(); times.append(time.perf_counter() - t0)
    return min(times)
"""


def test_interrupts_anywhere_in_calls_leak_nothing():
    """Hundreds of calls, each interrupted after a different delay spread over its duration
    (building new shapes and evicting cached ones, a cached call, opening and closing a
    Session): every later call still computes right and, once the Sessions are closed, no
    simulator object is left."""
    result = run(helpers=INJECT, code="""
        cases = [inputs(i, s=s, d=d) for i, (s, d) in enumerate([(16, 16), (40, 32), (24, 16), (56, 32), (32, 16)])]
        check = acl_fa.Session()
        expected = [check.flash_attention(*case) for case in cases]
        check.close()
        holder = [acl_fa.Session()]
        holder[0].set_cache_limits(shapes=2)

        def reopen():
            if holder[0].closed:
                holder[0] = acl_fa.Session()
                holder[0].set_cache_limits(shapes=2)

        actions = {
            "new shapes, evicting": lambda: [holder[0].flash_attention(*c) for c in cases[1:4]],
            "cached call": lambda: holder[0].flash_attention(*cases[0]),
            "open and close": lambda: acl_fa.Session().close(),
            "close": lambda: holder[0].close(),
        }
        hits, spans, wrong = {}, {}, []
        for name, action in actions.items():
            span = spans[name] = duration(lambda: (reopen(), action()))
            hits[name] = 0
            for i in range(250):
                reopen()
                holder[0].flash_attention(*cases[0])
                hits[name] += interrupted_after(span * (i + 0.5) / 250, action)
                for c in (0, 4):                          # the session still computes right
                    if holder[0].closed:
                        break
                    if not np.array_equal(holder[0].flash_attention(*cases[c]), expected[c]):
                        wrong.append((name, i, c))
        holder[0].close()
        for s in list(acl_fa.ops.opcall._sessions.values()):
            s.close()
        gc.collect()
        print(json.dumps({"hits": hits, "spans": spans, "wrong": wrong[:5], "left": live()}))
    """, timeout=600)
    assert sum(result["hits"].values()) >= 300 and min(result["hits"].values()) >= 20, result
    assert result["wrong"] == []
    assert result["left"] == {}


FIRST_DECODE = """
import json, signal, sys, time
import numpy as np
import acl_fa

q, cache = np.zeros((1, 1, 2, 64), np.float16), np.zeros((1, 128, 2, 64), np.float16)
delay = DELAY
before = set(sys.modules)
if delay is not None:  # SIGINT after `delay` s of the process's first decode call, as a Ctrl-C lands
    signal.signal(signal.SIGALRM, lambda *_: signal.raise_signal(signal.SIGINT))
    signal.setitimer(signal.ITIMER_REAL, delay)
start = time.perf_counter()
try:
    acl_fa.flash_attention_with_kvcache(q, cache, cache, cache_seqlens=5)
    outcome = "finished"
except KeyboardInterrupt:
    outcome = "KeyboardInterrupt"
except BaseException as exc:  # what a Ctrl-C must never turn into
    outcome = f"{type(exc).__name__}: {exc}"
signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start,
                  "imported": sorted(set(sys.modules) - before)}))
"""


def test_ctrl_c_in_a_processs_first_decode_call_is_a_keyboard_interrupt():
    """The first decode call of a process imports no module (a module body run under a call --
    the lazy import of acl_fa.plan there once was one -- turns a Ctrl-C that lands in a class's
    __set_name__ into RuntimeError on Python 3.11), and Ctrl-C at any point of that call gives
    KeyboardInterrupt: delays spread over its duration, each in a fresh process."""
    first = run_python(FIRST_DECODE.replace("DELAY", "None"), ACL_FA_BACKEND="sim")
    assert first["outcome"] == "finished" and first["imported"] == [], first
    span = first["seconds"]
    outcomes = [run_python(FIRST_DECODE.replace("DELAY", repr(span * (i + 0.5) / 8)), ACL_FA_BACKEND="sim")["outcome"]
                for i in range(8)]
    assert set(outcomes) <= {"KeyboardInterrupt", "finished"} and "KeyboardInterrupt" in outcomes, outcomes
