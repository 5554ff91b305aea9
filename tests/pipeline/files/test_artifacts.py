"""Atomic artifacts: a failed write says which file it was writing."""

from __future__ import annotations

import errno
import os

import pytest

from pipeline.files.artifacts import naming


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_write_refused_by_a_full_device_names_the_file():
    """A real ENOSPC (``/dev/full``): ``write``/``close`` name no file; ``naming`` adds it."""
    with (
        pytest.raises(OSError) as raised,
        naming("/out/clean/documents-0.parquet"),
        open("/dev/full", "wb") as f,
    ):
        f.write(b"x" * 10)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == "/out/clean/documents-0.parquet"
    assert "No space left on device: '/out/clean/documents-0.parquet'" in str(raised.value)
    assert raised.value.__cause__.filename is None


def test_an_error_naming_its_own_file_is_left_as_it_is(tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError) as raised, naming("/elsewhere"):
        missing.open("wb").close()
    assert raised.value.filename == str(missing)
