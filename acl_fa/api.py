"""The public faces of the ops, assembled in one place.

``Session`` is the runtime's DeviceSession with one method per op; the module-level functions
run an op on the caller's session or on the process-wide one of (backend, device). The runtime
and the op-call path know no op; each op module (ops/forward.py for the forward) knows only the
op-call path; this module is the one that knows them all.
acl_fa.flash_attention (and the flash-attn and SDPA faces over it) is the routed forward:
decode-shaped calls run on the decode op's split-KV kernel (acl_fa.ops.routed, acl_fa.plan.routing).
"""

from __future__ import annotations

from typing import Optional

from .ops import backward, decode, lse_merge, opcall, quant, routed, varlen
from .ops.routed import flash_attention, last_route
from .ops.backward import flash_attention_backward
from .ops.compat import scaled_dot_product_attention
from .ops.flash_attn_interface import flash_attn_func
from .ops.decode import flash_attention_with_kvcache
from .ops.lse_merge import merge_partials as merge_attention_partials
from .ops.quant import flash_attention_int8
from .ops.varlen import flash_attention_varlen, flash_attention_varlen_backward
from .runtime.device_array import DeviceArray
from .runtime.session import DeviceSession

__all__ = ["Session", "DeviceArray", "flash_attention", "flash_attention_backward", "flash_attention_with_kvcache",
           "flash_attention_varlen", "flash_attention_varlen_backward", "flash_attn_func",
           "merge_attention_partials", "scaled_dot_product_attention", "clear_cache", "flash_attention_int8"]


def clear_cache() -> None:
    """Releases the device memory the module-level functions (acl_fa.flash_attention and the
    others called without a Session) keep cached per problem shape on their process-wide
    sessions, as Session.clear_cache does for a Session; waits for calls running on them."""
    for session in opcall.default_sessions():
        opcall.clear_cache(session)


class Session(DeviceSession):
    """One device of one backend, used from any number of threads, with the ops as methods.

    ``Session(device=0, backend=None)``; backend None = ACL_FA_BACKEND (default auto). Each op
    keeps, per problem shape, its device buffers, tensors, executor and workspace on the
    session, so repeated calls on one shape only copy and launch.
    """

    def to_device(self, array) -> DeviceArray:
        """A device array holding a copy of `array` (see acl_fa.runtime.device_array)."""
        return DeviceArray.from_host(self, array)

    def empty(self, shape, dtype) -> DeviceArray:
        """An uninitialized device array of `shape` and `dtype`."""
        return DeviceArray.empty(self, shape, dtype)

    def flash_attention(self, q, k, v, **options):
        """acl_fa.flash_attention on this session (routed: acl_fa.ops.routed)."""
        return routed.flash_attention(q, k, v, session=self, **options)

    def last_route(self):
        """Which op served this session's last flash_attention call and why (acl_fa.plan.routing.Route),
        or None before the first."""
        return last_route(self)

    def flash_attention_backward(self, dout, q, k, v, out, lse, **options):
        """acl_fa.flash_attention_backward on this session."""
        return backward.flash_attention_backward(dout, q, k, v, out, lse, session=self, **options)

    def flash_attention_varlen(self, q, k, v, cu_seqlens_q, cu_seqlens_k, **options):
        """acl_fa.flash_attention_varlen on this session."""
        return varlen.flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, session=self, **options)

    def flash_attention_varlen_backward(self, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, **options):
        """acl_fa.flash_attention_varlen_backward on this session."""
        return varlen.flash_attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                                      session=self, **options)

    def clear_cache(self):
        """Releases the device buffers, tensors, executors and workspaces every op keeps per
        problem shape on this session (the next call of a shape builds them again)."""
        opcall.clear_cache(self)

    def set_cache_limits(self, shapes: Optional[int] = None, nbytes: Optional[int] = None):
        """Caps what each op keeps per problem shape: at most `shapes` problems (default
        4) and `nbytes` of device memory (default half of the device's total).
        A new shape also evicts cached ones when the device's free memory is short."""
        opcall.set_cache_limits(self, shapes, nbytes)

    def flash_attention_with_kvcache(self, q, k_cache, v_cache, **options):
        """acl_fa.flash_attention_with_kvcache on this session."""
        return decode.flash_attention_with_kvcache(q, k_cache, v_cache, session=self, **options)

    def merge_attention_partials(self, out_a, lse_a, out_b, lse_b, **options):
        """acl_fa.merge_attention_partials (acl_fa.ops.lse_merge.merge_partials) on this session."""
        return lse_merge.merge_partials(out_a, lse_a, out_b, lse_b, session=self, **options)

    def flash_attention_int8(self, q, k, v, q_scale=None, k_scale=None, **options):
        """acl_fa.flash_attention_int8 (acl_fa.ops.quant: Q and K quantized already) on this session."""
        return quant.flash_attention_int8(q, k, v, q_scale, k_scale, session=self, **options)
