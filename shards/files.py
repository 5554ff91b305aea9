"""How ``shards/`` reaches files: a six-call seam, so this package imports no filesystem library.

``LocalFiles`` (the default everywhere in ``shards/``) reads local paths. Remote paths (``gs://``,
``s3://``) are read through the caller's access: ``pipeline.files.shard_files.BeamFiles`` (Beam's
FileSystems) for the shard tools, ``trainer.input_pipeline.TfFileSystem`` (``tf.io.gfile``) for
the trainer. An access object must pickle: the parallel scan sends it to worker processes.
"""

from __future__ import annotations

import glob
import os
from typing import BinaryIO, Protocol

from transforms.errors import UserError


class ShardPathError(UserError, ValueError):
    """A shard path or pattern matched nothing usable, or the shards it names do not agree."""


class FileAccess(Protocol):
    """The calls ``shards/`` makes on a filesystem. Paths are strings, ``/``-separated."""

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (on an object store: a prefix with objects under it)."""

    def glob(self, pattern: str) -> list[str]:
        """Full paths matching ``pattern`` (``*``, ``?``, ``[...]``)."""

    def list_dir(self, path: str) -> list[str]:
        """Full paths of the entries directly in ``path`` (files and directories), sorted."""

    def exists(self, path: str) -> bool:
        """Whether a file ``path`` exists."""

    def open(self, path: str) -> BinaryIO:
        """The file's bytes as stored (never decompressed), seekable."""

    def size(self, path: str) -> int:
        """The size of file ``path`` as stored, in bytes (compressed size for a gzip file)."""


class LocalFiles:
    """``FileAccess`` on the local filesystem; a remote path is a clear ShardPathError."""

    @staticmethod
    def _local(path: str) -> str:
        if path.startswith("file://"):
            return path[len("file://") :]
        if "://" in path:
            raise ShardPathError(
                f"{path}: a remote path needs a file access that reaches it (the shard tools "
                "read remote paths through Beam's FileSystems: pipeline.files.shard_files.BeamFiles)"
            )
        return path

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._local(path))

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(self._local(pattern), recursive=True))

    def list_dir(self, path: str) -> list[str]:
        base = self._local(path).rstrip("/")
        return [f"{base}/{name}" for name in sorted(os.listdir(base))]

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._local(path))

    def open(self, path: str) -> BinaryIO:
        return open(self._local(path), "rb")  # noqa: SIM115 (the caller closes it)

    def size(self, path: str) -> int:
        return os.path.getsize(self._local(path))


def read_text(path: str, files: FileAccess | None = None) -> str:
    """The UTF-8 text of ``path``."""
    with (files or LocalFiles()).open(path) as f:
        return f.read().decode("utf-8")
