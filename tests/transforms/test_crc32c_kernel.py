"""The compiled CRC32C: both ways (instruction and table) against google_crc32c, at every
alignment and length around the 8-byte step, and refusal of ranges outside the buffer."""

from __future__ import annotations

import google_crc32c
import numba
import numpy as np
import pytest

from transforms import crc32c_kernel
from transforms.crc32c_kernel import crc32c, crc32c_by_instruction, crc32c_by_table

WAYS = [crc32c_by_table]
if crc32c_kernel.HARDWARE:
    WAYS.append(crc32c_by_instruction)


@pytest.mark.parametrize("way", WAYS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 15, 16, 17, 1000, 1 << 16])
@pytest.mark.parametrize("start", [0, 1, 3, 8])
def test_crc32c_matches_the_library(way, size, start):
    data = np.random.default_rng(size).integers(0, 256, size=size + start + 5).astype(np.uint8)
    assert way(data, start, start + size) == google_crc32c.value(
        data[start : start + size].tobytes()
    )


@pytest.mark.parametrize("way", WAYS, ids=lambda f: f.__name__)
def test_the_standard_check_value(way):
    data = np.frombuffer(b"123456789", dtype=np.uint8)
    assert way(data, 0, 9) == 0xE3069283


@pytest.mark.parametrize("way", WAYS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("start", "end"), [(-1, 4), (0, 17), (5, 4), (16, 17)])
def test_a_range_outside_the_buffer_is_refused(way, start, end):
    with pytest.raises(ValueError, match="outside"):
        way(np.zeros(16, dtype=np.uint8), start, end)


@pytest.mark.skipif(not crc32c_kernel.HARDWARE, reason="no SSE4.2 instruction here")
@pytest.mark.parametrize(
    "array",
    [
        np.arange(64, dtype=np.uint8)[::2],
        np.arange(64, dtype=np.uint8)[::-1],
        np.zeros(8, np.int32),
    ],
    ids=["strided", "reversed", "int32"],
)
def test_the_instruction_refuses_arrays_it_would_misread(array):
    """The 8-byte loads ignore strides and element sizes: such arrays are a typing error, not a
    wrong checksum or a read past the buffer."""
    with pytest.raises(numba.core.errors.TypingError):
        crc32c_by_instruction(array, 0, 8)


def test_the_instruction_is_used_where_the_host_has_it():
    """On an x86-64 host compiling for itself with SSE4.2 (this machine and CI), the kernels use
    the instruction; elsewhere the table (a portable numba target included)."""
    from llvmlite import binding

    native = not (numba.config.CPU_NAME or numba.config.CPU_FEATURES)
    has_it = bool(binding.get_host_cpu_features().get("sse4.2", False))
    import platform

    expected = native and has_it and platform.machine().lower() in {"x86_64", "amd64"}
    assert crc32c_kernel.HARDWARE is expected
    assert (crc32c is crc32c_by_instruction) is expected


def test_records_framed_on_a_portable_target_are_the_same_bytes(tmp_path):
    """With ``NUMBA_CPU_NAME=generic`` (a portable build) the encoder takes the table and frames
    the same bytes as the Python framing over the protobuf encoding."""
    import subprocess
    import sys
    from pathlib import Path

    script = """
import numpy as np
from transforms import crc32c_kernel
from transforms.example_encoding import encode_examples
from transforms.framed_examples import frame_examples
from transforms.tfrecord import frame_record
assert not crc32c_kernel.HARDWARE
rs = np.random.default_rng(7)
ints = {"input_ids": rs.integers(0, 30522, size=(40, 128)), "label": rs.integers(0, 2, size=(40, 1))}
floats = {"weights": rs.random((40, 20), dtype=np.float32)}
framed = frame_examples(ints, floats)
expected = b"".join(frame_record(r) for r in encode_examples(ints, floats))
assert framed.data.tobytes() == expected
print("same")
"""
    root = Path(__file__).resolve().parents[2]
    env = {
        **__import__("os").environ,
        "NUMBA_CPU_NAME": "generic",
        "NUMBA_CACHE_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "same"
