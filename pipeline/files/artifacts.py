"""Small artifact helpers shared by the jobs: JSON files (atomic when they mark completion) and
the dead-letter ``rejects.jsonl`` writer."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files import direct_io


def write_json(path: str, payload: object) -> None:
    """Writes ``payload`` as indented, key-sorted UTF-8 JSON (local or remote path), through a
    temporary name: the result files that DoFns write survive a retried or duplicated attempt."""
    data = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")
    write_bytes_atomically(path, data)


def write_json_atomically(path: str, payload: object) -> None:
    """Writes through a temporary name and renames, so a reader never sees half a file."""
    write_json(path, payload)


def read_json(path: str) -> dict:
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


class WriteJobRejects(beam.PTransform):
    """A PCollection of (job, Reject dict) → ``<outputs[job]>/rejects.jsonl`` for every job, one
    JSON object per line (``RejectsPart``) in the order the runner delivers them (as Beam's text
    sink writes them), streamed to the file: a job's rejects are never held in memory at once.
    A job with none gets an empty file."""

    def __init__(self, outputs: Mapping[int, str]) -> None:
        super().__init__()
        self._paths = {job: FileSystems.join(out, "rejects.jsonl") for job, out in outputs.items()}

    def expand(self, rejects):
        paths = self._paths

        def write(job_rejects: tuple[int, Iterable[dict | None]]) -> None:
            job, items = job_rejects
            part = RejectsPart(paths[job])
            try:
                for reject in items:
                    if reject is not None:
                        part.write(reject)
            except BaseException:
                part.abandon()
                raise
            if part.count:
                part.close()
            else:
                write_bytes_atomically(paths[job], b"")

        every = rejects.pipeline | "EveryJob" >> beam.Create([(job, None) for job in paths])
        return (
            (rejects, every)
            | "AllRejects" >> beam.Flatten()
            | "RejectsOfJob" >> beam.GroupByKey()
            | "WriteRejects" >> beam.Map(write)
        )


_WRITE_PIECE = 8 << 20  # bytes per write() of a large buffer


def write_bytes_atomically(
    path: str, data: bytes | memoryview | np.ndarray, direct: bool = False
) -> None:
    """Writes ``data`` (any contiguous buffer: a numpy array is written as its raw bytes, in
    pieces, without a copy) to ``path`` through a temporary name, so a reader never sees half a
    file.

    Side-effect files of DoFns use this with deterministic names: a retried bundle rewrites the
    same content under the same name, so retries neither duplicate nor lose data.
    """
    temp = temporary_name(path)
    try:
        view = memoryview(data).cast("B")
        opened = direct_io.create(temp) if direct else FileSystems.create(temp)
        with naming(path), opened as f:
            for start in range(0, len(view), _WRITE_PIECE):
                f.write(view[start : start + _WRITE_PIECE])
    except BaseException:
        _delete_quietly(temp)
        raise
    commit(temp, path)


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """An ``OSError`` raised inside without a file name (a failed ``write()`` or ``close()``
    names none: ``[Errno 28] No space left on device``) is raised again as one naming ``path``,
    the file being written, chained to the original; so a full disk says which file it refused,
    also when Beam passes the error on as text."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror, path) from e
        raise


def commit(temp: str, path: str) -> None:
    """Renames the finished ``temp`` to ``path``, replacing an earlier or a concurrent attempt's
    file.

    A rename replaces the target in one step on local disks (POSIX rename) and object stores
    (copy over it), so a reader never finds ``path`` missing and two attempts committing at once
    both succeed; only where a rename refuses an existing target is that deleted first.
    """
    try:
        FileSystems.rename([temp], [path])
        return
    except BeamIOError:
        if not FileSystems.exists(temp):
            raise
    _delete_quietly(path)  # a concurrent attempt may delete it too
    FileSystems.rename([temp], [path])


def _delete_quietly(path: str) -> None:
    with contextlib.suppress(BeamIOError):
        FileSystems.delete([path])


def write_parquet_atomically(path: str, table) -> None:
    """Writes a pyarrow Table as one Parquet file at ``path`` (temporary name, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    write_bytes_atomically(path, sink.getvalue().to_pybytes())


def parquet_metadata(path: str):
    """A Parquet file's footer (``pyarrow.parquet.FileMetaData``): rows, row groups, columns
    and their statistics, without reading any column."""
    import pyarrow.parquet as pq

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return pq.ParquetFile(f).metadata


def parquet_rows(path: str) -> int:
    """Number of rows of a Parquet file, from its footer."""
    return parquet_metadata(path).num_rows


def read_parquet(path: str, columns: list[str] | None = None):
    """A Parquet file (local or remote) as a pyarrow Table; ValueError naming the file when one
    of ``columns`` is not in it. Read as one file (``ParquetFile``), not through
    ``pq.read_table``'s datasets layer, whose import (``pyarrow.dataset``) costs a process
    ~0.06 s (and which raised for a missing column itself; ``ParquetFile.read`` drops it)."""
    import pyarrow.parquet as pq

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        parquet = pq.ParquetFile(f)
        if columns is not None:
            missing = [c for c in columns if c not in parquet.schema_arrow.names]
            if missing:
                raise ValueError(f"{path}: no column(s) {', '.join(missing)} in this Parquet file")
        return parquet.read(columns=columns)


def temporary_name(path: str) -> str:
    """An attempt-unique name beside ``path`` under which a file is written before ``commit``;
    no consumer's pattern matches it, so a half-written file is never read."""
    return f"{path}.partial-{uuid.uuid4().hex[:12]}"


class TextPart:
    """A UTF-8 text file streamed under a temporary name (opened on the first write) and
    committed by ``close()``; a part nothing was written to leaves no file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._temp = temporary_name(path)
        self._file = None

    def write(self, text: str) -> None:
        with naming(self.path):
            if self._file is None:
                self._file = FileSystems.create(self._temp)
            self._file.write(text.encode("utf-8"))

    def close(self) -> None:
        if self._file is not None:
            with naming(self.path):
                self._file.close()
            self._file = None
            commit(self._temp, self.path)

    def abandon(self) -> None:
        """Closes and deletes the temporary file: nothing is committed."""
        if self._file is not None:
            self._file.close()
            self._file = None
            FileSystems.delete([self._temp])


class RejectsPart(TextPart):
    """Reject dicts streamed as JSON lines to one part file, committed by ``close()``;
    ``merge_reject_parts`` concatenates committed parts in name order into rejects.jsonl."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.count = 0

    def write(self, reject: dict) -> None:  # type: ignore[override]
        super().write(json.dumps(reject, sort_keys=True, ensure_ascii=False) + "\n")
        self.count += 1


def merge_reject_parts(pattern: str, output: str) -> int:
    """Concatenates the reject part files matching ``pattern`` (in name order) into ``output``,
    streaming, then deletes them; returns the number of lines written."""
    parts = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    lines = 0
    temp = temporary_name(output)
    with naming(output), FileSystems.create(temp) as out:
        for part in parts:
            with FileSystems.open(part, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                while chunk := f.read(1 << 20):
                    out.write(chunk)
                    lines += chunk.count(b"\n")
    commit(temp, output)
    if parts:
        FileSystems.delete(parts)
    return lines


PARTIAL = ".partial-"
"""What ``temporary_name`` puts in a name: a file still being written, or left by a killed or
retried attempt."""
BEAM_TEMP = "beam-temp-"
"""The prefix of the directories Beam's file sinks (``WriteToText``) write in before they
finalize; a killed job leaves them behind."""


def delete_litter(directory: str) -> int:
    """Deletes what killed or retried attempts leave in ``directory`` and its subdirectories
    (one level down, where the jobs write): unfinished temporary files (``*.partial-*``) and
    Beam's temporary directories (``beam-temp-*``, with everything in them). Only for a
    directory no job is writing to: before a job runs, or once it has finished. Returns how
    many files were deleted."""
    patterns = [f"{level}*{PARTIAL}*" for level in ("", "*/")] + [
        f"{level}{BEAM_TEMP}*/**" for level in ("", "*/")
    ]
    litter = sorted(
        {path for p in patterns for path in matching_paths(FileSystems.join(directory, p))}
    )
    if litter:
        FileSystems.delete(litter)
    for level in ("", "*/"):  # the (local) directories themselves, emptied above or empty
        for temp in _local_directories(FileSystems.join(directory, f"{level}{BEAM_TEMP}*")):
            FileSystems.delete([temp])
    return len(litter)


def _local_directories(pattern: str) -> list[str]:
    """Directories matching ``pattern`` on a local disk (an object store has none)."""
    import glob
    import os

    if "://" in pattern and not pattern.startswith("file://"):
        return []
    return [p for p in glob.glob(pattern.removeprefix("file://")) if os.path.isdir(p)]


def matching_paths(pattern: str) -> list[str]:
    """Sorted paths of the files matching ``pattern`` (none is not an error)."""
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def delete_matching(patterns: list[str]) -> int:
    """Deletes every file matching ``patterns``; returns how many."""
    stale = [path for pattern in patterns for path in matching_paths(pattern)]
    if stale:
        FileSystems.delete(stale)
    return len(stale)


class ParquetPart:
    """A Parquet file written in row groups as they come (memory: one batch), committed by
    ``close()`` under its final name; until then it sits under a temporary name."""

    def __init__(self, path: str, schema) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.rows = 0
        self._temp = temporary_name(path)
        with naming(path):
            self._file = FileSystems.create(
                self._temp, compression_type=CompressionTypes.UNCOMPRESSED
            )
            self._writer = pq.ParquetWriter(self._file, schema, compression="snappy")
        self._schema = schema

    def write(self, rows: list[dict]) -> None:
        import pyarrow as pa

        if rows:
            with naming(self.path):
                self._writer.write_table(pa.Table.from_pylist(rows, schema=self._schema))
            self.rows += len(rows)

    def close(self) -> None:
        with naming(self.path):
            self._writer.close()
            self._file.close()
        commit(self._temp, self.path)

    def abandon(self) -> None:
        """Closes and deletes the temporary file (nothing to commit)."""
        self._writer.close()
        self._file.close()
        FileSystems.delete([self._temp])


def iter_parquet_rows(path: str, columns: list[str], batch_size: int = 256):
    """The rows of a Parquet file as dicts, one batch in memory at a time."""
    import pyarrow.parquet as pq

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=columns):
            yield from batch.to_pylist()


def delete_exactly(paths: list[str]) -> None:
    """Deletes exactly these files: Beam's ``FileSystems.delete`` matches local paths as globs
    (``data[1].tfrecord`` would delete ``data1.tfrecord``), so local files go by ``os.remove``."""
    remote = [p for p in paths if "://" in p]
    for path in paths:
        if "://" not in path:
            os.remove(path)
    if remote:
        FileSystems.delete(remote)
