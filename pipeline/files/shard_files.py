"""``shards.files.FileAccess`` through Beam's FileSystems: local paths, ``gs://`` (with
``apache-beam[gcp]``), ``s3://`` and every filesystem Beam registers. What the shard tools
(``bertprep inspect/stats/validate``) read with."""

from __future__ import annotations

import os
from typing import BinaryIO


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


class BeamFiles:
    """The five ``FileAccess`` calls on Beam's FileSystems (stateless: pickles to workers)."""

    def is_dir(self, path: str) -> bool:
        if "://" not in path:
            return os.path.isdir(path)
        fs = _filesystems()
        if fs.match([path])[0].metadata_list:
            return False  # an object of that name
        # Object stores have no directories: a prefix with objects under it stands for one.
        return bool(fs.match([path.rstrip("/") + "/*"], limits=[1])[0].metadata_list)

    def glob(self, pattern: str) -> list[str]:
        return sorted(m.path for m in _filesystems().match([pattern])[0].metadata_list)

    def list_dir(self, path: str) -> list[str]:
        base = path.rstrip("/")
        if "://" not in base:
            return [f"{base}/{name}" for name in sorted(os.listdir(base))]
        return self.glob(f"{base}/*")

    def exists(self, path: str) -> bool:
        return _filesystems().exists(path)

    def open(self, path: str) -> BinaryIO:
        from apache_beam.io.filesystem import CompressionTypes

        return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
