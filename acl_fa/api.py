"""The public faces of the ops, assembled in one place.

``Session`` is the runtime's DeviceSession with one method per op; the module-level functions
run an op on the caller's session or on the process-wide one of (backend, device). The runtime
and the op-call path know no op; each op module (attention.py for the forward) knows only the
op-call path; this module is the one that knows them all.
"""

from __future__ import annotations

from . import attention
from .attention import flash_attention
from .runtime import DeviceSession

__all__ = ["Session", "flash_attention"]


class Session(DeviceSession):
    """One device of one backend, used from any number of threads, with the ops as methods.

    ``Session(device=0, backend=None)``; backend None = ACL_FA_BACKEND (default auto). Each op
    keeps, per problem shape, its device buffers, tensors, executor and workspace on the
    session, so repeated calls on one shape only copy and launch.
    """

    def flash_attention(self, q, k, v, **options):
        """acl_fa.flash_attention on this session."""
        return attention.flash_attention(q, k, v, session=self, **options)
