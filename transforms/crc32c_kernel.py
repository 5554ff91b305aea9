"""CRC32C (Castagnoli) of a byte range, callable from compiled (numba) kernels.

TFRecord frames carry a masked CRC32C of their length and of their data, so the record encoder
checksums every byte it writes. ``crc32c(buf, start, end)`` is the SSE4.2 ``crc32`` instruction,
8 bytes at a time (~6-8 GB/s), where numba compiles for a host CPU that has it, and slicing-by-8
tables (~1.5 GB/s) otherwise: on other architectures, and when ``NUMBA_CPU_NAME`` or
``NUMBA_CPU_FEATURES`` ask for a portable target. Both give ``google_crc32c.value``'s result
(tested); which one runs is ``HARDWARE``. The instruction form takes only a one-dimensional
C-contiguous uint8 array.

numba caches a kernel that calls ``crc32c`` with it compiled in, keyed by the host CPU's name and
features (so a cache built where the instruction exists is never loaded where it does not), but
stamped only by the kernel's own file: after editing this module, delete numba's cache files
(``transforms/__pycache__/*.nbi``, ``*.nbc``) and rerun ``python -m transforms.kernel_cache``.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _crc32c_tables() -> np.ndarray:
    """Slicing-by-8 tables of the reflected Castagnoli polynomial (0x82F63B78)."""
    tables = np.zeros((8, 256), dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 8):
        previous = tables[k - 1]
        tables[k] = (previous >> 8) ^ tables[0, previous & 0xFF]
    return tables


CRC32C_TABLES = _crc32c_tables()


def _host_has_crc32_instruction() -> bool:
    """Whether numba compiles for this host's own CPU and that CPU is x86-64 with SSE4.2."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    if numba.config.CPU_NAME or numba.config.CPU_FEATURES:
        return False  # a portable target: the instruction may not be there
    try:
        from llvmlite import binding

        return bool(binding.get_host_cpu_features().get("sse4.2", False))
    except RuntimeError:  # llvmlite cannot tell on this host
        return False


HARDWARE = _host_has_crc32_instruction()
"""True when ``crc32c`` is the SSE4.2 instruction, False when it is the table loop."""


_UNSIGNED = {8: types.uint8, 32: types.uint32, 64: types.uint64}


def _crc32_instruction(crc_bits: int, value_bits: int):
    """An intrinsic ``(crc, value) -> crc`` for SSE4.2 ``crc32`` of a ``value_bits`` operand
    (no inversions; ``llvm.x86.sse42.crc32.<crc_bits>.<value_bits>``)."""
    crc_type, value_type = _UNSIGNED[crc_bits], _UNSIGNED[value_bits]
    name = f"llvm.x86.sse42.crc32.{crc_bits}.{value_bits}"

    def step(typingctx, crc, value):
        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(
                ir.IntType(crc_bits), [ir.IntType(crc_bits), ir.IntType(value_bits)]
            )
            return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)

        return crc_type(crc_type, value_type), codegen

    return intrinsic(step)


_crc32_u64 = _crc32_instruction(64, 64)
"""SSE4.2 ``crc32`` of one little-endian 64-bit word."""
_crc32_u8 = _crc32_instruction(32, 8)
"""SSE4.2 ``crc32`` of one byte."""


@intrinsic
def _load_u64(typingctx, array, index):
    """The 8 bytes of a uint8 array from ``index`` as one little-endian word (unaligned load;
    the caller keeps ``index + 8`` within the array). Only a one-dimensional C-contiguous
    uint8 array is accepted (a typing error otherwise): the load ignores strides."""
    if not (
        isinstance(array, types.Array)
        and array.dtype == types.uint8
        and array.ndim == 1
        and array.layout == "C"
    ):
        return None
    sig = types.uint64(array, types.intp)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        word = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)

    return sig, codegen


@numba.njit(cache=True, inline="always")
def _check_range(buf: np.ndarray, start: int, end: int) -> None:
    if start < 0 or end > len(buf) or start > end:
        raise ValueError("crc32c: range outside the buffer")


@numba.njit(cache=True)
def crc32c_by_instruction(buf: np.ndarray, start: int, end: int) -> int:
    """CRC32C of ``buf[start:end]`` (uint8) by the SSE4.2 instruction; only where ``HARDWARE``."""
    _check_range(buf, start, end)
    crc = np.uint64(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        crc = _crc32_u64(crc, _load_u64(buf, i))
        i += 8
    short = np.uint32(crc)
    while i < end:
        short = _crc32_u8(short, buf[i])
        i += 1
    return int(short ^ np.uint32(0xFFFFFFFF))


@numba.njit(cache=True)
def crc32c_by_table(buf: np.ndarray, start: int, end: int) -> int:
    """CRC32C of ``buf[start:end]`` (uint8) by slicing-by-8 tables; runs on every CPU."""
    _check_range(buf, start, end)
    tables = CRC32C_TABLES
    crc = np.uint32(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        lo = crc ^ (
            np.uint32(buf[i])
            | (np.uint32(buf[i + 1]) << 8)
            | (np.uint32(buf[i + 2]) << 16)
            | (np.uint32(buf[i + 3]) << 24)
        )
        hi = (
            np.uint32(buf[i + 4])
            | (np.uint32(buf[i + 5]) << 8)
            | (np.uint32(buf[i + 6]) << 16)
            | (np.uint32(buf[i + 7]) << 24)
        )
        crc = (
            tables[7, lo & 0xFF]
            ^ tables[6, (lo >> 8) & 0xFF]
            ^ tables[5, (lo >> 16) & 0xFF]
            ^ tables[4, lo >> 24]
            ^ tables[3, hi & 0xFF]
            ^ tables[2, (hi >> 8) & 0xFF]
            ^ tables[1, (hi >> 16) & 0xFF]
            ^ tables[0, hi >> 24]
        )
        i += 8
    while i < end:
        crc = tables[0, (crc ^ np.uint32(buf[i])) & 0xFF] ^ (crc >> 8)
        i += 1
    return int(crc ^ np.uint32(0xFFFFFFFF))


crc32c = crc32c_by_instruction if HARDWARE else crc32c_by_table
"""CRC32C of ``buf[start:end]`` (uint8 array; ValueError when the range is outside it)."""
