"""The op-call path every aclnn op of the package shares.

An aclnn op is called in two phases: ``aclnn<Op>GetWorkspaceSize(<inputs>, <attributes>,
<outputs>, &workspaceSize, &executor)`` builds an executor for fixed tensors, then
``aclnn<Op>(workspace, workspaceSize, executor, stream)`` launches it. Marked repeatable
(aclSetAclOpExecutorRepeatable) the executor launches any number of times on the same tensors,
so a Session keeps, per validated problem, everything phase 1 needs -- one device buffer and one
aclTensor per input/output role, the executor and the workspace -- and a repeated call only
uploads the inputs, launches phase 2 on the op's stream and reads the outputs into new arrays.

Layers: ``runtime`` (devices, streams, memory, events, the checked call) and ``tensor`` know no
op; this module knows the two-phase protocol but no particular op; each op is one module that
describes itself with an :class:`Op`; ``api`` assembles the public faces (``acl_fa.Session``
with one method per op, the module-level functions).

How to add an op (e.g. aclnnFlashAttentionGrad: inputs q, k, v, out, dout, lse -> dq, dk, dv)
----------------------------------------------------------------------------------------------
1. A frozen, hashable problem type: the validated call (sizes, dtype, attributes). Validate
   types before any cache lookup (1, 1.0 and True hash alike) and every limit before device
   work, raising InvalidTypeError / InvalidArgumentError naming the argument.
2. An :class:`Op` subclass instance giving
   - ``inputs`` / ``outputs``: the role names, in the order the caller passes / receives arrays;
   - ``buffers(problem)``: ``{role: (shape, numpy dtype)}`` for every input and output role;
   - ``workspace_api`` and ``workspace_args(problem, tensors)``: phase 1's name and its
     arguments before ``(uint64_t *workspaceSize, aclOpExecutor **executor)``, with the
     aclTensor of each role in ``tensors``;
   - ``launch_api``: phase 2's name (its arguments are always workspace, size, executor,
     stream);
   - optionally ``check(problem, soc)``: a host-side check against the chip (tiling policy)
     run once per problem new to a Session, before any device work, returning the workspace
     bytes phase 1 will ask for (so the memory check before device work counts them).
3. The op's call face: ``runner_for(session, OP).run(problem, *inputs, outputs=...)`` with
   ``session`` the caller's or ``default_session(backend, device)``; a method on
   ``api.Session`` and an export in ``acl_fa/__init__.py``.
An op of our custom operator package need not write step 2's phase-one arguments at all: an
:class:`EntryOp` reads them from the op's JSON (the order, the optional tensors, the attrs and
their defaults; acl_fa/runtime/aclnn_entries.py), given which role holds each JSON tensor and the
attr values of a problem. Its cffi declarations are derived from the same JSON.
"""

from __future__ import annotations

import collections
import dataclasses
import numbers
import os
import threading
from typing import Optional

import numpy as np

from ..runtime import aclnn_entries
from ..runtime.ffi import ffi
from ..runtime.errors import (
    AclMemoryError, ClosedObjectError, InsufficientMemoryError, InvalidArgumentError, InvalidTypeError)
from ..runtime.device_array import DeviceArray, check_device_array
from ..runtime.interrupts import deferred
from ..runtime.loader import check_device_id, get_backend
from ..runtime.session import (
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, MALLOC_SLACK, DeviceBuffer, DeviceSession, Stream, Child,
    malloc_bytes)
from ..runtime.tensor import Tensor
from ..runtime.units import format_bytes

__all__ = ["Op", "EntryOp", "PreparedCall", "OpRunner", "runner_for", "default_session", "default_sessions", "clear_cache",
           "set_cache_limits", "CACHED_SHAPES", "CACHED_FRACTION"]

# What one OpRunner keeps, least recently used dropped first: at most CACHED_SHAPES problems and
# at most CACHED_FRACTION of the device's total memory (the problem just built always stays).
# A new problem also evicts what it needs to fit the device's free memory -- from its own cache,
# then from the idle caches of the process-wide sessions on the same device (those of the
# module-level functions, which the caller cannot reach otherwise) -- and when an allocation
# still fails for memory the cache is emptied and the build tried once more.
CACHED_SHAPES = 4
CACHED_FRACTION = 0.5

# aclrtMemcpy2d's largest height (rows per call): 5 * 1024 * 1024 (hicann/runtime API reference,
# aclrtMemcpy2dAsync; the synchronous call is assumed to share it: docs/compat.md "Any head dim").
MEMCPY2D_MAX_ROWS = 5 * 1024 * 1024


class Op:
    """What an op supplies to the shared path (see the module docstring). Instances are
    stateless descriptions; one instance per op."""

    name: str = ""
    inputs: tuple = ()
    outputs: tuple = ()
    workspace_api: str = ""
    launch_api: str = ""

    def buffers(self, problem) -> dict:
        """{role: (shape tuple, numpy dtype)} for every role of `inputs` and `outputs`."""
        raise NotImplementedError

    def workspace_args(self, problem, tensors: dict) -> tuple:
        """Phase 1's arguments before (workspaceSize *, executor **)."""
        raise NotImplementedError

    def check(self, problem, soc: str) -> int:
        """Host-side check of a problem new to a Session on chip `soc` (raises to refuse);
        returns the workspace bytes phase 1 will ask for (0 if unknown)."""
        return 0

    def fit(self, problem, soc: str, workspace_bytes: int):
        """For a problem new to a Session whose call does not fit the device's free memory: the
        problem with the tiling of least modeled time whose workspace is at most
        `workspace_bytes` (the blocks the caller left to the policy chosen for the memory,
        docs/memory.md), as ``(problem, workspace bytes, what the workspace holds -- "at its
        smallest tiling: ..." or "with the blocks given: ...")``; when
        nothing fits, that of the least workspace (the floor: its bytes exceed the limit). None
        when the op's workspace does not depend on its tiling."""
        return None

    def padded_rows(self, problem) -> dict:
        """{role: (given, padded)} of roles whose device buffer holds the caller's rows of `given`
        elements each zero-padded to `padded` (a head dim that is not the cube's multiple): the
        caller's arrays are copied row by row into the padded buffer (aclrtMemcpy2d), which is
        zeroed once when built, and outputs read back the same way; no host copy pads them."""
        return {}

    def constants(self, problem) -> dict:
        """{role: array} of input roles of `buffers` that the problem itself fixes and the caller
        does not pass (e.g. value-depend sequence lengths, which phase 1 reads from the device):
        uploaded once, before phase 1."""
        return {}


def _attr_argument(desc: dict, value):
    """One attr of phase one as its C type wants it (msopgen's types: docs/cann-facts.md
    #custom-operator-api): float -> double, int -> int64_t, bool -> bool, string -> char * (NULL for
    an optional string left unset). The char[] lives as long as the argument tuple."""
    kind = desc["type"]
    if kind == "string":
        return ffi.NULL if value is None else ffi.new("char[]", str(value).encode())
    return {"float": float, "int": int, "bool": bool}[kind](value)


class EntryOp(Op):
    """An op of our custom operator package whose phase-one arguments follow its op JSON.

    ``op_type`` names the JSON's op (and so the two entries, ``aclnn<op_type>GetWorkspaceSize`` /
    ``aclnn<op_type>``); ``roles`` maps a JSON tensor name to the role holding it (a name not in
    it is its own role); ``attr_values(problem)`` gives ``{JSON attr name: value}`` -- attrs the
    JSON has but the dict lacks take the JSON's default, names the JSON lacks are ignored (one
    function serves every version of a family: a version without an attr ignores it). An optional
    tensor whose role has no buffer is passed as NULL. ``inputs`` default to the roles of the
    JSON's inputs that are not ``constants`` (``constant_roles``), in the JSON's order."""

    op_type: str = ""
    roles: dict = {}
    constant_roles: tuple = ()

    def __init__(self, op_type: str = ""):
        self.op_type = op_type or self.op_type
        self.entry = aclnn_entries.by_op(aclnn_entries.load()).get(self.op_type)
        if self.entry is None:
            raise InvalidArgumentError(f"{self.op_type}: no op JSON of this tree describes it (op_host/*/*.json)")
        self.name = self.entry["snake"]
        self.workspace_api, self.launch_api = self.entry["phase1"], self.entry["phase2"]
        if not type(self).inputs:
            self.inputs = tuple(self.role(p[3]["name"]) for p in self.entry["params"]
                                if p[2] == "input" and self.role(p[3]["name"]) not in self.constant_roles)

    def role(self, json_name: str) -> str:
        return self.roles.get(json_name, json_name)

    def attr_values(self, problem) -> dict:
        """{JSON attr name: value} of a problem (see the class docstring)."""
        return {}

    def workspace_args(self, problem, tensors: dict) -> tuple:
        values = self.attr_values(problem)
        args = []
        for _, name, kind, desc in self.entry["params"]:
            if kind == "attr":
                args.append(_attr_argument(desc, values.get(desc["name"], desc.get("default_value"))))
            elif kind in ("input", "output"):
                role = self.role(desc["name"])
                if role in tensors:
                    args.append(tensors[role].handle)
                elif desc["param_type"] == "optional":
                    args.append(ffi.NULL)
                else:
                    raise InvalidArgumentError(f"{self.name}: the required tensor {name} (role {role}) has no buffer")
        return tuple(args)


def _destroy_executor(backend, executor):
    backend.call("aclDestroyAclOpExecutor", executor)


class Executor(Child):
    """A repeatable aclOpExecutor, destroyed before the tensors it refers to. `create` runs
    phase 1 and returns the executor it made (owned before anything can raise)."""

    _kind = "executor"

    def __init__(self, session: DeviceSession, create):
        self._create(session, _destroy_executor, create)

    @property
    def handle(self):
        return self._live_handle()


@dataclasses.dataclass
class PreparedCall:
    """Device state of one problem of one op on one Session. Input roles given as DeviceArrays
    ("bound") have a Tensor over the caller's memory and no buffer of their own."""

    op: Op
    buffers: dict          # role -> DeviceBuffer (inputs and outputs not bound to a DeviceArray)
    tensors: dict          # role -> Tensor over buffers[role] or over the bound DeviceArray
    executor: Executor
    workspace: Optional[DeviceBuffer]
    workspace_size: int    # bytes phase 1 asked for (0: no workspace)
    bound: dict = dataclasses.field(default_factory=dict)  # role -> DeviceArray used in place
    owns_workspace: bool = True  # False: `workspace` is the caller's (OpRunner.prepare(workspace=...))
    rows: dict = dataclasses.field(default_factory=dict)  # role -> (given, padded): Op.padded_rows
    fitted: object = None  # the problem phase 1 was given when Op.fit chose its tiling for the memory, else None

    def __post_init__(self):
        # The raw handles of the cache's own objects that a repeated call passes to C, resolved
        # once. Valid whenever the caller is in flight on the Session and holds the runner's
        # lock (upload's contract): the cache frees them only under that lock, and
        # Session.close() only after the calls in flight returned. A workspace of the caller's
        # is not the cache's: its address is taken (and its liveness checked) per launch.
        self.addresses = {role: buffer.ptr for role, buffer in self.buffers.items()}
        self.executor_handle = self.executor.handle
        self._workspace_address = self.workspace.ptr if self.workspace is not None and self.owns_workspace \
            else ffi.NULL

    @property
    def workspace_address(self):
        """The workspace's device address for phase 2 (NULL without a workspace)."""
        if self.workspace is not None and not self.owns_workspace:
            return self.workspace.ptr
        return self._workspace_address

    def close(self):
        with deferred():
            self.executor.close()
            for tensor in self.tensors.values():
                tensor.close()
            for buffer in self.buffers.values():
                buffer.close()
            if self.workspace is not None and self.owns_workspace:
                self.workspace.close()

    def upload(self, *arrays):
        """Synchronous H2D copies of the input arrays (in ``op.inputs`` order), each of the
        problem's shape and dtype (validated by the op; any layout, copied C-contiguous once).

        Runs within the caller's call in flight on the Session, holding the runner's lock
        (OpRunner.run, measure, decode): the buffers are the cache's and live until the runner
        evicts them under that lock, so their addresses are used as they are, and the in-flight
        registration and device binding of the caller's call serve every copy."""
        if len(arrays) != len(self.op.inputs):
            raise InvalidArgumentError(
                f"{self.op.name} takes {len(self.op.inputs)} inputs ({', '.join(self.op.inputs)}), got {len(arrays)}")
        state = self.executor._state
        call = state.bound_call()
        copies = nbytes = 0
        for role, array in zip(self.op.inputs, arrays):
            if array is None and role not in self.buffers:
                continue  # an optional input the call does not use (no buffer, NULL to phase 1)
            if role in self.bound:
                if array is not self.bound[role]:
                    raise InvalidArgumentError(f"{self.op.name}: input {role} is not the DeviceArray this call was "
                                               "prepared with")
                continue
            buffer = self.buffers[role]
            host = np.ascontiguousarray(array)
            if role in self.rows:
                self._copy_rows(call, role, host, ACL_MEMCPY_HOST_TO_DEVICE)
                copies += 1
                nbytes += host.nbytes
                continue
            if host.nbytes != buffer.nbytes or host.dtype != buffer.dtype:
                raise InvalidArgumentError(f"{self.op.name}: input {role} is {host.shape} {host.dtype}; the call was "
                                           f"prepared for {buffer.shape} {buffer.dtype}")
            call("aclrtMemcpy", self.addresses[role], buffer.nbytes, ffi.from_buffer(host), host.nbytes,
                 ACL_MEMCPY_HOST_TO_DEVICE)
            copies += 1
            nbytes += host.nbytes
        if copies:
            state.count_copy(ACL_MEMCPY_HOST_TO_DEVICE, nbytes, calls=copies)

    def read(self, role: str) -> np.ndarray:
        """A new host array holding output (or input) `role` (called as upload is)."""
        buffer = self.buffers[role]
        state = self.executor._state
        if role in self.rows:
            out = np.empty(self._caller_shape(role), buffer.dtype)
            self._copy_rows(state.bound_call(), role, out, ACL_MEMCPY_DEVICE_TO_HOST)
            state.count_copy(ACL_MEMCPY_DEVICE_TO_HOST, out.nbytes)
            return out
        out = np.empty(buffer.shape, buffer.dtype)
        state.bound_call()("aclrtMemcpy", ffi.from_buffer(out, require_writable=True), out.nbytes,
                           self.addresses[role], out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
        state.count_copy(ACL_MEMCPY_DEVICE_TO_HOST, out.nbytes)
        return out

    def _caller_shape(self, role: str) -> tuple:
        """The caller's shape of a padded role: the buffer's with its rows of the caller's length."""
        given, padded = self.rows[role]
        shape = self.buffers[role].shape
        return tuple(shape[:-1]) + (shape[-1] // padded * given,)

    def _copy_rows(self, call, role: str, host: np.ndarray, kind: int) -> None:
        """Copies the C-contiguous caller's array `host` of a padded role to (H2D) or from (D2H)
        its buffer, row by row: aclrtMemcpy2d with the caller's row pitch on the host side and the
        padded one on the device (docs/compat.md "Any head dim"), in chunks of at
        most MEMCPY2D_MAX_ROWS rows (the runtime's height limit)."""
        buffer = self.buffers[role]
        given, padded = self.rows[role]
        if host.dtype != buffer.dtype or host.shape != self._caller_shape(role):
            raise InvalidArgumentError(f"{self.op.name}: {role} is {host.shape} {host.dtype}; the call was prepared "
                                       f"for {self._caller_shape(role)} {buffer.dtype}")
        item = buffer.dtype.itemsize
        height = host.size // given
        host_ptr = ffi.cast("char *", ffi.from_buffer(host, require_writable=kind == ACL_MEMCPY_DEVICE_TO_HOST))
        device_ptr = ffi.cast("char *", self.addresses[role])
        for start in range(0, height, MEMCPY2D_MAX_ROWS):
            rows = min(MEMCPY2D_MAX_ROWS, height - start)
            h, d = host_ptr + start * given * item, device_ptr + start * padded * item
            if kind == ACL_MEMCPY_HOST_TO_DEVICE:
                call("aclrtMemcpy2d", d, padded * item, h, given * item, given * item, rows, kind)
            else:
                call("aclrtMemcpy2d", h, given * item, d, padded * item, given * item, rows, kind)

    def device_bytes(self) -> int:
        """Device memory held (aclrtMalloc sizes)."""
        held = sum(malloc_bytes(b.nbytes) for b in self.buffers.values())
        return held + (malloc_bytes(self.workspace_size) if self.workspace_size and self.owns_workspace else 0)

    def bytes_by_role(self) -> dict:
        """Device bytes held: inputs, outputs and the workspace."""
        return {"inputs": sum(self.buffers[r].nbytes for r in self.op.inputs if r in self.buffers),
                "outputs": sum(self.buffers[r].nbytes for r in self.op.outputs if r in self.buffers),
                "workspace": self.workspace_size}


class OpRunner:
    """One op on one Session: cached device state per problem, one stream, thread-safe.
    Callers that drive the phases themselves (measure, benchmarks) hold ``lock`` around
    prepare/upload/launch/read.

    A launch whose wait was stopped (Ctrl-C) is still running on the stream, on the cached
    buffers of its problem: the runner is then *unsettled*, and the next call, eviction or
    close first waits for it (its outputs are dropped), so no buffer is overwritten or freed
    under a running kernel."""

    def __init__(self, session: DeviceSession, op: Op):
        self.session = session
        self.op = op
        self.lock = threading.Lock()
        self._cache: collections.OrderedDict = collections.OrderedDict()
        # Device bytes the cached calls hold, kept as they come and go (inside deferred() with
        # the cache itself). Never summed over self._cache.values(): that iteration looks each
        # key up with PyDict_GetItem, which swallows an exception raised in the key's Python
        # __hash__ -- a Ctrl-C landing there surfaced as a KeyError instead of KeyboardInterrupt.
        self._held_bytes = 0
        self._stream: Optional[Stream] = None
        self._soc: Optional[str] = None  # the session's SoC name, asked once
        self._unsettled = False  # work launched on the stream and not yet waited for

    def close(self):
        with self.session.in_flight(), self.lock:
            self._settle()
            self._evict(0)
            if self._stream is not None:
                self._stream.close()
                self._stream = None

    def clear(self):
        """Releases the cached device state of every problem (the stream stays)."""
        with self.session.in_flight(), self.lock:
            self._settle()
            self._evict(0)

    def _settle(self):
        """Waits for work a launch left on the stream (a call whose wait was stopped, or a
        caller driving the phases itself); caller holds the lock."""
        if self._unsettled:
            if self._stream is not None and not self._stream.closed:
                self._stream.synchronize()
            self._unsettled = False

    @property
    def stream(self) -> Stream:
        if self._stream is None or self._stream.closed:
            self._stream = self.session.stream()
        return self._stream

    def cached_bytes(self) -> int:
        return self._held_bytes

    def release_if_idle(self) -> int:
        """Drops every cached problem unless a call holds the runner or its last launch may still
        run (never waits: a runner in use keeps its cache); returns the bytes released."""
        if not self.lock.acquire(blocking=False):
            return 0
        try:
            if self._unsettled or self.session.closed:
                return 0
            with self.session.in_flight():
                return self._evict(0)
        except ClosedObjectError:  # closed meanwhile: close() releases the cache itself
            return 0
        finally:
            self.lock.release()

    def _evict(self, keep: int, nbytes: Optional[int] = None) -> int:
        """Drops least recently used problems until at most `keep` remain and (when `nbytes`
        is given) at most `nbytes` of device memory is held; returns the bytes released."""
        released = 0
        while self._cache and (len(self._cache) > keep or (nbytes is not None and self.cached_bytes() > nbytes)):
            with deferred():  # out of the cache and closed, or neither
                prepared = self._cache.popitem(last=False)[1]
                held = prepared.device_bytes()
                self._held_bytes -= held
                released += held
                prepared.close()
        return released

    def bound_inputs(self, inputs) -> dict:
        """{role: DeviceArray} of the inputs given as DeviceArrays, each checked to be open and
        of this Session (before any device work)."""
        bound = {}
        for role, array in zip(self.op.inputs, inputs):
            if isinstance(array, DeviceArray):
                check_device_array(role, array, self.session)
                bound[role] = array
        return bound

    def prepare(self, problem, bound: Optional[dict] = None, workspace: Optional[DeviceArray] = None) -> PreparedCall:
        """Device state for `problem` with the roles of `bound` ({role: DeviceArray}) used in place
        and, when `workspace` (a DeviceArray of at least workspace_bytes(problem)) is given, that
        memory as the call's workspace instead of one of its own (cached per problem and arrays);
        caller holds the lock. A call whose roles are all bound and whose workspace is the
        caller's holds no device memory in the cache. A problem new to this Session is first
        checked by the op for the session's chip and against the device's free memory, before
        device work."""
        self._settle()
        bound = bound or {}
        if bound:
            self._refuse_padded_bound(problem, bound)
        arrays = sorted(bound.items()) + ([("(workspace)", workspace)] if workspace is not None else [])
        # Checked again in flight: a DeviceArray.close() that began since the caller's check
        # either sees this call and waits for it, or is seen here.
        for role, array in arrays:
            check_device_array(role.strip("()"), array, self.session)
        # Keyed by the problem alone when every buffer is the cache's own.
        key = (problem, tuple((role, array.serial) for role, array in arrays)) if arrays else problem
        prepared = self._cache.get(key)
        if prepared is not None:
            self._cache.move_to_end(key)
            return prepared
        if self._soc is None:
            self._soc = self.session.soc_name()
        ws_bytes = int(self.op.check(problem, self._soc) or 0)
        if workspace is not None:
            check_device_array("workspace", workspace, self.session)
            if workspace.nbytes < ws_bytes:
                raise InvalidArgumentError(f"{self.op.name}: the workspace given is {workspace.nbytes} B; this call "
                                           f"needs {ws_bytes} B")
        needed = {role: malloc_bytes(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
                  for role, (shape, dtype) in self.op.buffers(problem).items() if role not in bound}
        needed["workspace"] = malloc_bytes(ws_bytes) if ws_bytes and workspace is None else 0
        build = problem  # what phase 1 is given: the problem, or its tiling fitted to the memory
        try:
            self._make_room(needed)
        except InsufficientMemoryError as refused:
            if workspace is not None or not needed["workspace"]:
                raise
            build = self._fit_workspace(problem, needed, refused)
        with deferred():  # built and cached, or released
            try:
                prepared = self._build(build, bound, workspace)
            except AclMemoryError:
                if not self._cache:
                    raise
                self._evict(0)  # what the other problems hold may be what is missing: retry once
                prepared = self._build(build, bound, workspace)
            if build is not problem:
                prepared.fitted = build
            self._cache[key] = prepared
            self._held_bytes += prepared.device_bytes()
        return prepared

    def _refuse_padded_bound(self, problem, bound: dict) -> None:
        """A DeviceArray is used in place, so it cannot be padded by the copies: refused (before
        any device work) for a role whose rows the op pads (Op.padded_rows)."""
        rows = self.op.padded_rows(problem)
        for role in sorted(set(rows) & set(bound)):
            raise InvalidArgumentError(
                f"{self.op.name}: {role} is a DeviceArray but its head dim {rows[role][0]} is not a multiple of 16; "
                f"the op pads such rows while copying host arrays (pass a numpy array, or pad the head dim to "
                f"{rows[role][1]} with zeros on the device)")

    def _make_room(self, needed: dict):
        """Evicts for the cache limits and for the device's free memory; InsufficientMemoryError
        (before any device work) when the call does not fit even with the cache emptied."""
        total_needed = sum(needed.values())
        free, total = self.session.mem_info()
        limits = self.session.__dict__.get("_op_cache_limits", {})
        max_bytes = limits.get("nbytes", int(total * CACHED_FRACTION))
        free += self._evict(limits.get("shapes", CACHED_SHAPES) - 1, max(max_bytes - total_needed, 0))
        if total_needed > free:
            free += self._evict(0)
        if total_needed > free:  # the idle caches of the session's other ops, then of the process-wide sessions
            free += sum(runner.release_if_idle() for runner in self._session_runners_beside())
        if total_needed > free:
            free += sum(runner.release_if_idle() for runner in self._default_runners_beside())
        if total_needed <= free:
            return
        raise self._refusal(needed, f"workspace {format_bytes(needed['workspace'])}", free, total)

    def _refusal(self, needed: dict, workspace_text: str, free: int, total: int,
                 prefix: str = "needs") -> InsufficientMemoryError:
        """InsufficientMemoryError: what the call needs (its buffers, then `workspace_text`) against
        the device's free memory, and what the module-level functions' session holds beside."""
        total_needed = sum(needed.values())
        roles = ", ".join(r for r in needed if r != "workspace")
        held = sum(runner.cached_bytes() for runner in self._default_runners_beside())
        return InsufficientMemoryError(
            f"{self.op.name} {prefix} {format_bytes(total_needed)} of device memory ({roles}: "
            f"{format_bytes(total_needed - needed['workspace'])}, {workspace_text}); "
            f"the device has {format_bytes(free)} free of {format_bytes(total)}"
            + (f"; {format_bytes(held)} more is cached by calls running now on the process-wide session of the "
               f"module-level functions" if held else ""),
            "device", total_needed, free)

    def _fit_workspace(self, problem, needed: dict, refused: InsufficientMemoryError):
        """The problem to build when its tiling's workspace does not fit the free memory (the cache
        already emptied by _make_room): the op's fit for the bytes the buffers leave; `refused`
        when the op cannot fit, the floor's InsufficientMemoryError when even its smallest tiling
        does not fit."""
        buffers = sum(v for role, v in needed.items() if role != "workspace")
        room = refused.free - buffers - MALLOC_SLACK  # malloc_bytes(ws) <= ws + MALLOC_SLACK
        fitted = self.op.fit(problem, self._soc, room) if room > 0 else None
        if fitted is None:  # no tiling helps when the buffers alone take the free memory
            raise refused
        build, ws_bytes, holds = fitted
        needed = dict(needed, workspace=malloc_bytes(ws_bytes))
        if ws_bytes > room:
            _, total = self.session.mem_info()
            raise self._refusal(needed, f"workspace {format_bytes(needed['workspace'])} {holds}",
                                refused.free, total, prefix="needs at least")
        self._make_room(needed)
        return build

    def _session_runners_beside(self) -> list:
        """The op runners of this runner's session for the other ops (e.g. the forward's cache
        when the backward does not fit beside it)."""
        with _runners_lock:
            return [runner for runner in self.session.__dict__.get("_op_runners", {}).values() if runner is not self]

    def _default_runners_beside(self) -> list:
        """The op runners of the other process-wide sessions on this runner's device and backend."""
        here = self.session
        with _runners_lock:
            return [runner for session in default_sessions() if session is not here
                    and session.device == here.device and session.backend is here.backend
                    for runner in session.__dict__.get("_op_runners", {}).values()]

    def workspace_bytes(self, problem) -> int:
        """Workspace bytes a call of `problem` asks for (the op's host-side check; raises as
        prepare would for a problem the chip cannot run)."""
        if self._soc is None:
            self._soc = self.session.soc_name()
        return int(self.op.check(problem, self._soc) or 0)

    def discard(self, arrays) -> None:
        """Drops the cached calls bound to any of `arrays` (DeviceArrays about to be freed, whose
        serials no later call can present again); caller holds the lock."""
        serials = {array.serial for array in arrays}
        buffers = {id(array.buffer) for array in arrays}

        def uses(prepared: PreparedCall) -> bool:
            return (any(array.serial in serials for array in prepared.bound.values())
                    or (not prepared.owns_workspace and id(prepared.workspace) in buffers))

        with deferred():
            for key in [key for key in list(self._cache) if uses(self._cache[key])]:
                prepared = self._cache.pop(key)
                self._held_bytes -= prepared.device_bytes()
                prepared.close()

    def _build(self, problem, bound: dict, borrowed: Optional[DeviceArray] = None) -> PreparedCall:
        session, op = self.session, self.op
        rows = op.padded_rows(problem)
        buffers: dict = {}
        tensors: dict = {}
        executor = None
        workspace = None
        try:
            for role, (shape, dtype) in op.buffers(problem).items():
                dtype = np.dtype(dtype)
                array = bound.get(role)
                if array is not None:
                    if tuple(array.shape) != tuple(shape) or array.dtype != dtype:
                        raise InvalidArgumentError(
                            f"{op.name}: {role} is a DeviceArray {array.shape} {array.dtype}; the call needs "
                            f"{tuple(shape)} {dtype}")
                    tensors[role] = Tensor(array.buffer, shape=shape, dtype=dtype)
                    continue
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                buffers[role] = DeviceBuffer(session, nbytes, shape=shape, dtype=dtype)
                tensors[role] = Tensor(buffers[role])
                if role in rows and role in op.inputs:  # the padding columns stay zero: uploads write the rest
                    session.call("aclrtMemset", buffers[role].ptr, nbytes, 0, nbytes)
            for role, array in op.constants(problem).items():
                buffers[role].copy_from_host(array)
            ws_size = ffi.new("uint64_t *")
            handle = ffi.new("aclOpExecutor **")

            def phase1():
                session.call(op.workspace_api, *op.workspace_args(problem, tensors), ws_size, handle)
                return handle[0]

            # Repeatable, so it runs once per call and is destroyed with the cache.
            executor = Executor(session, phase1)
            session.call("aclSetAclOpExecutorRepeatable", executor.handle)
            size = int(ws_size[0])
            if size and borrowed is not None:
                if borrowed.nbytes < size:
                    raise InvalidArgumentError(f"{op.name}: phase 1 asked for a workspace of {size} B; the one given "
                                               f"is {borrowed.nbytes} B")
                return PreparedCall(op, buffers, tensors, executor, borrowed.buffer, size, dict(bound), False, rows)
            if size:
                workspace = DeviceBuffer(session, size)
            return PreparedCall(op, buffers, tensors, executor, workspace, size, dict(bound), rows=rows)
        except BaseException:
            for obj in [executor, workspace, *tensors.values(), *buffers.values()]:
                if obj is not None:
                    obj.close()
            raise

    def launch(self, prepared: PreparedCall, stream: Stream):
        """Phase 2 of the prepared call on `stream` (asynchronous); the runner is unsettled
        until run() has waited for it (or the next prepare() does)."""
        self._unsettled = True
        self.session.call(self.op.launch_api, prepared.workspace_address, prepared.workspace_size,
                          prepared.executor_handle, stream.handle)

    def run(self, problem, *inputs, outputs: Optional[tuple] = None) -> tuple:
        """Uploads `inputs` (``op.inputs`` order; DeviceArrays are used in place), launches,
        waits; returns new host arrays of the `outputs` roles (default: all of ``op.outputs``),
        in that order."""
        outputs = self.op.outputs if outputs is None else outputs
        bound = self.bound_inputs(inputs)
        with self.session.in_flight(), self.lock:
            prepared = self.prepare(problem, bound)
            prepared.upload(*inputs)
            stream = self.stream
            self.launch(prepared, stream)
            stream.synchronize()  # Ctrl-C stops the wait; the launch stays unsettled
            self._unsettled = False
            return tuple(prepared.read(role) for role in outputs)


_runners_lock = threading.Lock()
_sessions: dict = {}


def _forget_after_fork():
    """In a forked child the lock may be held by a thread the child does not have; the
    process-wide sessions are the parent's (default_session opens new ones)."""
    global _runners_lock
    _runners_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def clear_cache(session: DeviceSession):
    """Releases the cached device state of every op on `session`."""
    with _runners_lock:
        runners = list(session.__dict__.get("_op_runners", {}).values())
    for runner in runners:
        runner.clear()


def set_cache_limits(session: DeviceSession, shapes: Optional[int] = None, nbytes: Optional[int] = None):
    """Caps what each op keeps cached on `session`: `shapes` problems (default CACHED_SHAPES)
    and `nbytes` of device memory (default CACHED_FRACTION of the device's total). Takes
    effect at each op's next new problem."""
    limits = {}
    for name, value, minimum in (("shapes", shapes, 1), ("nbytes", nbytes, 0)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
        if value < minimum:
            raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
        limits[name] = int(value)
    session.__dict__["_op_cache_limits"] = limits


def runner_for(session: DeviceSession, op: Op) -> OpRunner:
    """The OpRunner of `op` on `session` (one per Session and op, kept on the Session)."""
    with _runners_lock:
        runners = session.__dict__.setdefault("_op_runners", {})
        runner = runners.get(op.name)
        if runner is None:
            runner = runners[op.name] = OpRunner(session, op)
        return runner


def default_sessions() -> list:
    """The open process-wide sessions of this process (those default_session opened)."""
    return [s for s in list(_sessions.values()) if not s.closed and s.in_this_process]


def default_session(backend: Optional[str] = None, device: Optional[int] = None) -> DeviceSession:
    """The process-wide session for (backend, device), opened on first use."""
    key = (backend, check_device_id(get_backend(backend), 0 if device is None else device))
    with _runners_lock:
        session = _sessions.get(key)
        if session is not None and not session.in_this_process:
            session.close()  # inherited through fork: releases nothing, the handles are the parent's
        if session is None or session.closed:
            session = DeviceSession(device=key[1], backend=backend)
            _sessions[key] = session
        return session
