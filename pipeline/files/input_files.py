"""Expanding input patterns (local paths, globs, gs://) into a fingerprinted, ordered file list."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from apache_beam.io.filesystems import FileSystems

from transforms.errors import UserError


class NoInputFilesError(UserError, ValueError):
    """An input pattern matched nothing."""


@dataclass(frozen=True)
class InputFile:
    """A matched input file. ``name`` is its path relative to the common directory of all inputs,
    so document keys (and therefore the output) do not depend on where the corpus lives."""

    path: str
    name: str
    size_bytes: int
    last_updated: float

    def fingerprint(self) -> dict[str, object]:
        return asdict(self)


def _common_dir(paths: list[str]) -> str:
    """The deepest directory that contains every path, compared component by component, so
    ``gs://b/books/x.txt`` and ``gs://b/books/y.txt`` share ``gs://b/books`` exactly as
    ``/data/books/x.txt`` and ``/data/books/y.txt`` share ``/data/books``."""
    split = [p.replace(os.sep, "/").split("/")[:-1] for p in paths]
    if not split:
        return ""
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return "/".join(common)


def _is_directory(path: str) -> bool:
    if "://" not in path:
        return os.path.isdir(path)
    if path.endswith("/"):
        return FileSystems.exists(path)
    return False


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/"))


def _files_under(directory: str) -> list:
    """Every file under ``directory``, recursively, except hidden ones (a name starting with
    ``.`` or ``_``, or inside such a directory: ``.git``, ``_SUCCESS``, temporary files)."""
    base = directory.rstrip("/") + "/"
    if "://" not in directory:
        results = FileSystems.match([os.path.join(directory, "**")])[0].metadata_list
    else:
        results = FileSystems.match([base + "**"])[0].metadata_list
    files = []
    for m in results:
        rel = m.path.replace(os.sep, "/")
        rel = rel[len(base) :] if rel.startswith(base) else rel.rsplit("/", 1)[-1]
        if m.path.endswith("/") or _hidden(rel) or _is_directory(m.path):
            continue
        files.append(m)
    return files


def expand_inputs(patterns: list[str]) -> list[InputFile]:
    """Every file matched by ``patterns``, sorted by path, duplicates removed.

    A directory stands for every file under it, recursively, hidden files (``.name``, ``_name``)
    excepted; a glob matching directories takes only the files it matches.

    Raises NoInputFilesError naming the pattern that matched nothing.
    """
    found: dict[str, tuple[int, float]] = {}
    for pattern in patterns:
        if _is_directory(pattern):
            files = _files_under(pattern)
            if not files:
                raise NoInputFilesError(f"input directory holds no files: {pattern}")
        else:
            results = FileSystems.match([pattern])[0].metadata_list
            files = [m for m in results if not m.path.endswith("/") and not _is_directory(m.path)]
            if not files:
                raise NoInputFilesError(f"input pattern matched no files: {pattern}")
        for m in files:
            found[m.path] = (m.size_in_bytes, float(m.last_updated_in_seconds or 0.0))
    paths = sorted(found)
    common = _common_dir(paths)
    out = []
    for p in paths:
        rel = p.replace(os.sep, "/")
        if common and rel.startswith(common + "/"):
            rel = rel[len(common) + 1 :]
        size, updated = found[p]
        out.append(InputFile(path=p, name=rel, size_bytes=size, last_updated=updated))
    return out
