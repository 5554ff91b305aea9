"""A copy of a run of array elements, callable from compiled (numba) kernels, as one ``memmove``.

``copy_elements(dst, i, src, j, n)`` does what ``dst[i : i + n] = src[j : j + n]`` does in a
kernel, for one-dimensional C-contiguous arrays of the same dtype. numba compiles that slice
assignment to an element loop that LLVM does not turn into a ``memmove`` (it cannot rule out
that the two overlap): on the instance phases' ~900-byte frames the loop copies ~2 GB/s, the
``memmove`` 3.5-4× faster (`benchmarks/RESULTS.md`, sixth stop). The bytes are the same.

Ranges are checked (an ``IndexError`` instead of a write outside the arrays), overlapping ranges
are copied as ``memmove`` copies them. A kernel calling this is cached with it compiled in, but
stamped only by the kernel's own file: after editing this module, delete numba's cache files
(``transforms/__pycache__/*.nbi``, ``*.nbc``) and rerun ``python -m transforms.kernel_cache``.
"""

from __future__ import annotations

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _memmove(typingctx, dst, dst_start, src, src_start, count):
    """``memmove`` of ``count`` elements from ``src[src_start:]`` to ``dst[dst_start:]``."""
    if not (
        isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and dst.ndim == 1
        and src.ndim == 1
        and dst.layout == "C"
        and src.layout == "C"
        and dst.dtype == src.dtype
        and dst.mutable
    ):
        return None
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d, d_start, s, s_start, n = args
        d_array = context.make_array(signature.args[0])(context, builder, d)
        s_array = context.make_array(signature.args[2])(context, builder, s)
        itemsize = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memmove(
            builder,
            builder.gep(d_array.data, [d_start]),
            builder.gep(s_array.data, [s_start]),
            n,
            itemsize,
        )
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, inline="always")
def copy_elements(dst, dst_start, src, src_start, count) -> None:
    """``dst[dst_start : dst_start + count] = src[src_start : src_start + count]`` as one
    ``memmove``; IndexError when a range does not lie inside its array."""
    if (
        count < 0
        or dst_start < 0
        or src_start < 0
        or count > dst.size - dst_start  # (not dst_start + count: that can overflow)
        or count > src.size - src_start
    ):
        raise IndexError("copy_elements: a range lies outside its array")
    if count:
        _memmove(dst, dst_start, src, src_start, count)
