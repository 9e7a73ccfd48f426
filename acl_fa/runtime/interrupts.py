"""Ctrl-C held back over the few steps that must not be cut in two.

Python runs a SIGINT handler -- and so raises KeyboardInterrupt -- in the main thread only, at
its next check for signals, which comes after any call returns. Cut between a C call that
creates a handle and the object that owns it, or between a finalizer's bookkeeping and the
free it stands for, an interrupt leaks the handle. ``deferred()`` covers such a step: in the
main thread it swaps in a handler that only notes the signal, and on leaving restores the
previous handler and hands it the noted signal, so the KeyboardInterrupt arrives right after
the step. Elsewhere (other threads, which never receive KeyboardInterrupt) it does nothing.

Swapping handlers costs two sigaction calls, so it covers only rare steps (creating and
releasing objects, closing a Session), never the per-call path; long waits are not covered
either: they wait in slices (see runtime.Stream.synchronize) so that Ctrl-C stops them.
"""
from __future__ import annotations

import signal
import threading

__all__ = ["deferred"]


class _Deferral:
    """State of the main thread's deferral (only the main thread touches it)."""

    depth = 0             # nesting of deferred() sections
    previous = None       # the handler to restore when the outermost section ends
    pending = False       # a SIGINT arrived inside


_main = _Deferral()


def _note(signum, frame):
    _main.pending = True


class deferred:
    """``with deferred(): ...`` -- SIGINT arriving inside is delivered when the block ends."""

    __slots__ = ("_active",)

    def __enter__(self):
        self._active = threading.current_thread() is threading.main_thread()
        if not self._active:
            return self
        if _main.depth == 0:
            # Once the swap is made a pending SIGINT finds _note, so no KeyboardInterrupt can
            # land between the swap and recording what to restore.
            previous = signal.signal(signal.SIGINT, _note)
            _main.previous = previous
            _main.pending = False
        _main.depth += 1
        return self

    def __exit__(self, *exc_info):
        if not self._active:
            return False
        _main.depth -= 1
        if _main.depth:
            return False
        previous, _main.previous = _main.previous, None
        signal.signal(signal.SIGINT, previous)
        if _main.pending:
            _main.pending = False
            _deliver(previous)
        return False


def _deliver(handler):
    """Hands a held-back SIGINT to the handler that was in place."""
    if callable(handler):
        handler(signal.SIGINT, None)   # default_int_handler raises KeyboardInterrupt
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)
