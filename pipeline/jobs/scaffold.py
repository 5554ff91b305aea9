"""What every job does around its pipeline, done one way: clear its previous output, collect the
workers' counts in one result file, reconcile them against the files written, and write its
manifest last.

- ``prepare_output``: the job's own files from an earlier run go before it runs, so a failed run
  never leaves an old manifest vouching for new files; so does what a killed attempt left
  (``delete_litter``: unfinished ``*.partial-*`` files, Beam's ``beam-temp-*`` directories);
- ``SaveCounts`` / ``take_counts``: the merged Beam-side counts as a JSON result file that the
  launcher reads once and deletes (counts survive runners without metrics);
- ``reconcile``: a count the workers reported against what the output files hold; a mismatch
  fails loudly (``ReconciliationError``): the runner is not trusted blindly;
- ``write_manifest``: the job's commit: what a killed or retried attempt left goes
  (``delete_litter``), then ``manifest.json``, atomically and last, with ``format`` and
  ``elapsed_seconds`` in every job's manifest.
"""

from __future__ import annotations

from collections.abc import Iterable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import (
    delete_litter,
    delete_matching,
    read_json,
    write_json,
    write_json_atomically,
)
from pipeline.runtime.counters import MergeCounts
from pipeline.runtime.interrupts import raise_if_interrupted
from transforms.features import MANIFEST

REJECTS = "rejects.jsonl"
RESULT = ".pipeline-result.json"


class ReconciliationError(RuntimeError):
    """What the workers counted disagrees with what the output files hold."""


def delete_tree(directory: str) -> None:
    """Deletes ``directory`` and every file under it (no error when it is absent)."""
    found = [m.path for m in FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list]
    if found:
        FileSystems.delete(found)
    if FileSystems.exists(directory):
        FileSystems.delete([directory])


def prepare_output(output: str, stale: Iterable[str], trees: Iterable[str] = ()) -> int:
    """Creates ``output`` if needed and deletes the job's files of an earlier run: those matching
    ``stale`` (patterns relative to ``output``; the manifest and result file always), the
    directories ``trees`` (staging, samples) and what killed attempts left (``delete_litter``).
    Returns how many files matched ``stale``."""
    if not FileSystems.exists(output):
        FileSystems.mkdirs(output)
    patterns = dict.fromkeys([*stale, MANIFEST, RESULT])
    removed = delete_matching([FileSystems.join(output, p) for p in patterns])
    for tree in trees:
        delete_tree(FileSystems.join(output, tree))
    delete_litter(output)
    return removed


class SaveCounts(beam.PTransform):
    """A PCollection of counts dicts → their sum, as JSON at ``path``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def expand(self, counts):
        path = self._path
        return (
            counts
            | "MergeCounts" >> beam.CombineGlobally(MergeCounts())
            | "WriteCounts" >> beam.Map(lambda totals: write_json(path, totals))
        )


def take_counts(path: str) -> dict:
    """The result file ``SaveCounts`` wrote, read once and deleted."""
    counts = read_json(path)
    FileSystems.delete([path])
    return counts


def reconcile(
    what: str, counted: int, found: int, error: type[Exception] = ReconciliationError
) -> None:
    """Raises ``error`` unless the workers' ``counted`` equals the ``found`` in the files."""
    if counted != found:
        raise error(f"{what}: the workers counted {counted:,}, the output files hold {found:,}")


def write_manifest(output: str, manifest_format: str, manifest: dict, elapsed: float) -> dict:
    """Commits the job: deletes what killed or retried attempts left in ``output``
    (``delete_litter``), then writes ``output/manifest.json`` atomically (the job's last write:
    its presence says the job finished) with ``format`` and ``elapsed_seconds``; returns what
    was written. Nothing is committed after a Ctrl-C, even one Python swallowed
    (``raise_if_interrupted``)."""
    raise_if_interrupted()
    delete_litter(output)
    manifest = {"format": manifest_format, **manifest, "elapsed_seconds": round(elapsed, 2)}
    write_json_atomically(FileSystems.join(output, MANIFEST), manifest)
    return manifest
