"""``shards.files.FileAccess`` through Beam's FileSystems: local paths, ``gs://`` (with
``apache-beam[gcp]``), ``s3://`` and every filesystem Beam registers. What the shard tools
(``bertprep inspect/stats/validate``) read with.

Object stores have no directories: a "directory" there is a prefix with objects under it, at any
depth (``gs://b/run/seq128`` holds only ``seq128/train/...`` and ``seq128/eval/...``). ``is_dir``
and ``list_dir`` answer for such prefixes as the local filesystem does for directories, from one
recursive listing (Beam's ``match`` with ``**``), so a run directory resolves to the same phases
and files on a bucket as on local disk.
"""

from __future__ import annotations

import os
from typing import BinaryIO


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


class BeamFiles:
    """The six ``FileAccess`` calls on Beam's FileSystems (stateless: pickles to workers)."""

    def is_dir(self, path: str) -> bool:
        if not _is_remote(path):
            return os.path.isdir(path.removeprefix("file://"))
        fs = _filesystems()
        base = path.rstrip("/")  # match() reads a trailing "/" as "/*"
        if fs.match([base])[0].metadata_list:
            return False  # an object of that name
        # A prefix with an object under it, at any depth (``*`` stops at ``/``, ``**`` does not).
        return bool(fs.match([base + "/**"], limits=[1])[0].metadata_list)

    def glob(self, pattern: str) -> list[str]:
        return sorted(m.path for m in _filesystems().match([pattern])[0].metadata_list)

    def list_dir(self, path: str) -> list[str]:
        """Entries directly under ``path``; on an object store, the objects directly under the
        prefix and the sub-prefixes ("directories") that objects deeper down imply."""
        base = path.rstrip("/")
        if not _is_remote(base):
            local = base.removeprefix("file://")
            return [f"{base}/{name}" for name in sorted(os.listdir(local))]
        entries = set()
        for m in _filesystems().match([f"{base}/**"])[0].metadata_list:
            rest = m.path[len(base) + 1 :] if m.path.startswith(base + "/") else ""
            first = rest.split("/", 1)[0]
            if first:  # "" for a placeholder object named like the prefix itself
                entries.add(f"{base}/{first}")
        return sorted(entries)

    def exists(self, path: str) -> bool:
        return _filesystems().exists(path)

    def open(self, path: str) -> BinaryIO:
        from apache_beam.io.filesystem import CompressionTypes

        return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def size(self, path: str) -> int:
        if not _is_remote(path):  # exactly this file (match would read [, *, ? as a glob)
            local = path.removeprefix("file://")
            if not os.path.isfile(local):
                raise FileNotFoundError(path)
            return os.path.getsize(local)
        found = _filesystems().match([path])[0].metadata_list
        if not found:
            raise FileNotFoundError(path)
        return int(found[0].size_in_bytes)
