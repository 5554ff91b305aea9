"""Handing back the page cache of finished files: the kernel really drops the pages (counted with
``mincore``), a file's content never changes, and paths it cannot act on are ignored."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

import numpy as np
import pytest

from pipeline.files.page_cache import FinishedFiles, is_local, release_pages
from tests.pipeline.files.test_shard_writer import spills, write_all

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

pytestmark = pytest.mark.skipif(
    not hasattr(os, "POSIX_FADV_DONTNEED"), reason="no posix_fadvise on this platform"
)


def resident_pages(path) -> int:
    """Pages of ``path`` in the page cache now (``mincore`` over a shared mapping, which neither
    reads nor writes the file)."""
    size = os.path.getsize(path)
    vector = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as m:
        first = ctypes.c_char.from_buffer(m)
        try:
            if _libc.mincore(ctypes.c_void_p(ctypes.addressof(first)), size, vector):
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del first  # the mapping closes only once no ctypes object exports it
    return sum(v & 1 for v in vector)


def written_and_synced(path, size: int) -> bytes:
    data = np.random.default_rng(3).bytes(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())  # clean pages: the advice drops them at once
    with open(path, "rb") as f:
        assert f.read() == data  # now cached
    return data


def test_released_pages_leave_the_cache_and_the_content_stays(tmp_path):
    path = tmp_path / "shard.tfrecord"
    data = written_and_synced(path, 64 * PAGE)
    assert resident_pages(path) == 64
    release_pages(str(path))
    assert resident_pages(path) == 0
    assert path.read_bytes() == data


def test_finished_files_drop_earlier_files_when_a_later_one_comes(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    written_and_synced(first, 16 * PAGE)
    written_and_synced(second, 16 * PAGE)
    finished = FinishedFiles()
    finished.add(str(first))
    finished.add(str(second))
    assert resident_pages(first) == 0
    with open(first, "rb") as f:
        f.read()  # cached again; only what was added last is still held
    finished.flush()
    assert resident_pages(second) == 0
    assert resident_pages(first) == 16


def test_every_shard_written_is_handed_back(tmp_path, monkeypatch):
    tasks = spills(tmp_path)
    handed: list[str] = []
    monkeypatch.setattr(FinishedFiles, "add", lambda self, path: handed.append(path))
    results, _ = write_all(tmp_path, "out", tasks, buffer_bytes=1 << 30)
    assert handed == [r["path"] for r in results]


def test_paths_it_cannot_act_on_are_ignored(tmp_path):
    release_pages(str(tmp_path / "missing"))
    release_pages("gs://bucket/shard.tfrecord")
    release_pages(f"file://{tmp_path}/missing")
    FinishedFiles().flush()
    assert is_local("/tmp/x") and is_local("file:///tmp/x")
    assert not is_local("gs://bucket/x") and not is_local("s3://bucket/x")
