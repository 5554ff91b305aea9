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


def test_read_parquet_reads_the_columns_asked_and_names_a_missing_one(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.files.artifacts import read_parquet

    path = tmp_path / "t.parquet"
    table = pa.table({"doc_id": ["a", "b"], "sentences": [["x", "y"], []], "n": [1, 2]})
    pq.write_table(table, path)
    assert read_parquet(str(path), ["sentences", "doc_id"]).to_pydict() == {
        "sentences": [["x", "y"], []],
        "doc_id": ["a", "b"],
    }
    assert read_parquet(str(path)).equals(table)
    with pytest.raises(ValueError, match=r"t\.parquet: no column\(s\) tokens"):
        read_parquet(str(path), ["doc_id", "tokens"])
