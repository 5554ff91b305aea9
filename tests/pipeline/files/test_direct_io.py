"""Files written and read around the page cache: exact bytes and lengths at every size and
offset, the ordinary path where ``O_DIRECT`` is refused (at open or at the first write), errors
that name the file, background writes that report their failure, and no page cache kept."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from pipeline.files import direct_io
from pipeline.files.direct_io import ALIGN, STAGING_BYTES, BackgroundWrites

SIZES = [0, 1, ALIGN - 1, ALIGN, ALIGN + 1, STAGING_BYTES - 1, STAGING_BYTES, 2 * STAGING_BYTES + 5]


def payload(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def write_in_pieces(path, data: bytes, piece: int) -> None:
    with direct_io.create(str(path)) as f:
        for start in range(0, len(data), piece):
            f.write(data[start : start + piece])


@pytest.mark.parametrize("size", SIZES)
def test_written_file_holds_exactly_the_bytes_written(tmp_path, size):
    data = payload(size, size)
    for piece in (1000, ALIGN, 3 * STAGING_BYTES):
        path = tmp_path / f"f-{piece}"
        write_in_pieces(path, data, piece)
        assert os.path.getsize(path) == size
        assert path.read_bytes() == data


def test_local_files_are_written_direct_and_leave_no_page_cache(tmp_path):
    from tests.pipeline.files.test_page_cache import resident_pages

    with direct_io.create(str(tmp_path / "probe")) as f:
        direct = isinstance(f, direct_io.DirectWriter)
        f.write(payload(1))
    if not direct:
        pytest.skip("this file system refuses O_DIRECT")
    path = tmp_path / "spill"
    write_in_pieces(path, payload(4 * STAGING_BYTES), STAGING_BYTES // 3)
    assert resident_pages(path) == 0


def test_a_file_system_that_refuses_direct_io_gets_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(direct_io, "_open_direct", lambda local, flags: -1)
    data = payload(STAGING_BYTES + 123)
    with direct_io.create(str(tmp_path / "f")) as f:
        assert not isinstance(f, direct_io.DirectWriter)
        f.write(data)
    assert (tmp_path / "f").read_bytes() == data
    got = direct_io.read_ranges_into([(str(tmp_path / "f"), 7, len(data) - 3)])
    assert got.tobytes() == data[7:-3]


def test_a_device_that_refuses_the_alignment_goes_on_through_the_cache(tmp_path, monkeypatch):
    real_write = os.write
    refused = []

    def write(fd, view):
        if not refused:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, view)

    monkeypatch.setattr(direct_io.os, "write", write)
    data = payload(2 * STAGING_BYTES + 77)
    write_in_pieces(tmp_path / "f", data, 5 << 20)
    assert refused and (tmp_path / "f").read_bytes() == data


def test_other_write_errors_are_raised_by_the_next_filling_write_or_by_close(tmp_path, monkeypatch):
    def write(fd, view):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(direct_io.os, "write", write)
    f = direct_io.create(str(tmp_path / "f"))
    f.write(payload(STAGING_BYTES + 1))  # the first piece goes to the writer's thread
    with pytest.raises(OSError, match="No space left"):
        f.close()
    f.close()  # closing again does nothing
    g = direct_io.create(str(tmp_path / "g"))
    with pytest.raises(OSError, match="No space left"):
        g.write(payload(2 * STAGING_BYTES))  # the second full buffer waits for the first
    with pytest.raises(OSError, match="No space left"):
        g.close()


def test_a_device_that_refuses_direct_reads_is_read_the_ordinary_way(tmp_path, monkeypatch):
    path = tmp_path / "spill"
    data = payload(3 * STAGING_BYTES + 5)
    write_in_pieces(path, data, STAGING_BYTES)
    refused = []

    def preadv(fd, buffers, offset):
        refused.append(offset)
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(direct_io.os, "preadv", preadv)
    ranges = [(str(path), 3, STAGING_BYTES + 9), (str(path), 2 * STAGING_BYTES, len(data))]
    got = direct_io.read_ranges_into(ranges)
    assert refused and got.tobytes() == data[3 : STAGING_BYTES + 9] + data[2 * STAGING_BYTES :]


def test_a_read_error_after_the_first_piece_is_raised(tmp_path, monkeypatch):
    path = tmp_path / "spill"
    write_in_pieces(path, payload(3 * STAGING_BYTES), STAGING_BYTES)
    real = os.preadv
    calls = []

    def preadv(fd, buffers, offset):
        calls.append(offset)
        if len(calls) > 1:
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, buffers, offset)

    monkeypatch.setattr(direct_io.os, "preadv", preadv)
    with pytest.raises(OSError, match="Input/output error"):
        direct_io.read_ranges_into([(str(path), 0, 3 * STAGING_BYTES)])


def test_ranges_read_back_exactly_at_any_offset(tmp_path):
    files = []
    for i, size in enumerate((STAGING_BYTES * 2 + 999, 5000, ALIGN)):
        path = tmp_path / f"spill-{i}"
        data = payload(size, i)
        write_in_pieces(path, data, STAGING_BYTES)
        files.append((str(path), data))
    rng = np.random.default_rng(1)
    ranges = []
    for _ in range(40):
        path, data = files[int(rng.integers(0, len(files)))]
        start = int(rng.integers(0, len(data)))
        ranges.append((path, start, int(rng.integers(start, len(data) + 1))))
    ranges.append((files[0][0], ALIGN - 1, STAGING_BYTES + ALIGN + 1))  # crosses a staging piece
    ranges.append((files[0][0], 0, len(files[0][1])))
    expected = b"".join(dict(files)[p][s:e] for p, s, e in ranges)
    assert direct_io.read_ranges_into(ranges).tobytes() == expected
    assert direct_io.read_ranges_ahead(ranges).result().tobytes() == expected
    assert direct_io.read_ranges_into([]).size == 0


def test_a_range_past_the_end_of_its_file_fails_naming_it(tmp_path):
    path = tmp_path / "short.spill"
    path.write_bytes(payload(10_000))
    with pytest.raises(RuntimeError, match=r"short.spill is shorter than recorded \(9000..10001\)"):
        direct_io.read_ranges_into([(str(path), 0, 10), (str(path), 9000, 10_001)])
    with pytest.raises(FileNotFoundError):
        direct_io.read_ranges_into([(str(tmp_path / "missing"), 0, 1)])


def test_background_writes_finish_by_wait_and_report_failures(tmp_path):
    from pipeline.files.artifacts import write_bytes_atomically

    writes = BackgroundWrites()
    expected = {}
    for i in range(5):
        data = payload(ALIGN * i + i, i)
        path = tmp_path / f"task-{i}.spill"
        writes.submit(lambda path=path, data=data: write_bytes_atomically(str(path), data, True))
        expected[path] = data
    writes.wait()
    assert {p: p.read_bytes() for p in expected} == expected

    def fail() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    writes.submit(fail)
    other = BackgroundWrites()
    other.submit(lambda: None)  # waits for the failed write, does not take its error
    other.wait()
    with pytest.raises(OSError, match="No space left"):
        writes.wait()
    writes.wait()  # reported once


def test_one_background_write_at_a_time_in_a_process_whoever_submits():
    import threading

    release = threading.Event()
    first, second = BackgroundWrites(), BackgroundWrites()
    first.submit(release.wait)
    submitted = threading.Event()

    def submit_second() -> None:
        second.submit(lambda: None)
        submitted.set()

    thread = threading.Thread(target=submit_second)
    thread.start()
    assert not submitted.wait(0.3)  # the second object's submit waits for the first's write
    release.set()
    thread.join(5)
    assert submitted.is_set()
    first.wait()
    second.wait()


def test_staging_buffers_are_reused(tmp_path, monkeypatch):
    # The pool is the process's: start this test from an empty one, whatever ran before on this
    # worker (an in-process pipeline run may have held more buffers at once).
    monkeypatch.setattr(direct_io, "_pool", [])
    for i in range(5):
        write_in_pieces(tmp_path / f"f-{i}", payload(STAGING_BYTES + 1), STAGING_BYTES)
        direct_io.read_ranges_into([(str(tmp_path / f"f-{i}"), 1, 2)])
    assert len(direct_io._pool) <= 2 + direct_io.READ_THREADS
