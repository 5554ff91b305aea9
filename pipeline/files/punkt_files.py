"""Finding, reading and writing Punkt's ``punkt_tab`` files (the I/O around ``transforms``' tables).

``load_punkt_tables`` searches ``tokenizers/punkt_tab/<language>/`` in the given paths, then the
``NLTK_DATA`` directories (read at call time, so setting the variable after importing nltk
works), then ``nltk.data.path``, as ``nltk.data.find`` resolves it (a directory or a zip). Only
the four tab files are read: no pickle is ever loaded.

The common case costs no NLTK import (~0.3-0.5 s of a process's start-up, on the launcher's
critical path): a plain directory found in the given paths or ``NLTK_DATA`` is read directly
when it and everything on the way to it passes NLTK's own trust rule (owned by this user or
root, not group- or world-writable, no symbolic link). Anything else — a zip, a path that fails
the rule, a resource only on ``nltk.data.path`` — is left to ``nltk.data.find``, which decides
(and refuses or warns) exactly as before.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from transforms.punkt_tables import PUNKT_FILES, PunktTables

_LANGUAGE = re.compile(r"[A-Za-z0-9_-]+")


def _trusted(path: str) -> bool:
    """NLTK's rule for a data root (``nltk.pathsec._private_stat``), stricter on links: a real
    file or directory owned by this user or root, neither group- nor world-writable."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _plain_directory(root: str, language: str) -> str | None:
    """``root/tokenizers/punkt_tab/<language>`` when every directory on the way and every
    entry in it is trusted; None when it is absent or anything is doubtful."""
    path = root
    for part in ("tokenizers", "punkt_tab", language):
        if not _trusted(path):
            return None
        path = os.path.join(path, part)
    if not os.path.isdir(path) or not _trusted(path):
        return None
    entries = [os.path.join(path, name) for name in os.listdir(path)]
    if not all(_trusted(entry) for entry in entries):
        return None
    return path


def _search(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    search = [os.fspath(p) for p in paths]
    return search + [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]


def _fast_find(language: str, search: list[str]) -> str | None:
    """The directory NLTK's search would return, when it is the first entry of ``search``
    holding it as a plain, trusted directory; None when NLTK must decide."""
    for root in search:
        if not root:
            return None  # the absolute-path entry: NLTK's rules
        if not os.path.isdir(root):
            if os.path.exists(root):
                return None  # a zip (or another file): NLTK's rules
            continue  # NLTK skips a missing entry too
        if not _trusted(root):
            return None  # NLTK refuses it, with a warning
        resource = os.path.join(root, "tokenizers", "punkt_tab", language)
        if not os.path.exists(resource):
            if os.path.exists(os.path.join(root, "tokenizers", "punkt_tab.zip")):
                return None  # NLTK would look inside the zip
            continue
        return _plain_directory(root, language)
    return None


def _read(open_file: Callable[[str], IO[str]]) -> PunktTables:
    texts = {}
    for name in PUNKT_FILES:
        with open_file(name) as f:
            texts[name] = f.read()
    return PunktTables.from_texts(texts)


def load_punkt_tables(
    language: str = "english", paths: Sequence[str | os.PathLike[str]] = ()
) -> PunktTables | None:
    """The ``tokenizers/punkt_tab/<language>/`` tables, or None when not installed (see the
    module doc for the search)."""
    if not _LANGUAGE.fullmatch(language):
        raise ValueError(f"not a punkt_tab language name: {language!r}")
    search = _search(paths)
    directory = _fast_find(language, search)
    if directory is not None:
        return load_punkt_tables_from(directory)
    import nltk.data

    search += [p for p in nltk.data.path if p not in search]
    try:
        found = nltk.data.find(f"tokenizers/punkt_tab/{language}/", paths=search)
    except LookupError:
        return None
    if isinstance(found, nltk.data.FileSystemPathPointer):
        return load_punkt_tables_from(found.path)
    return _read(lambda name: found.join(name).open(encoding="utf-8"))  # a zip


def load_punkt_tables_from(directory: str | os.PathLike[str]) -> PunktTables:
    """The tables in ``directory`` (the four punkt_tab files); FileNotFoundError when one is
    missing, ValueError when one is malformed."""
    root = Path(directory)
    return _read(lambda name: (root / name).open(encoding="utf-8", newline=""))


def load_punkt_parameters(language: str = "english", paths: Sequence[str | os.PathLike[str]] = ()):
    """``load_punkt_tables`` as NLTK's ``PunktParameters`` (or None when not installed)."""
    tables = load_punkt_tables(language, paths)
    return tables.to_parameters() if tables is not None else None


def load_punkt_parameters_from(directory: str | os.PathLike[str]):
    """``load_punkt_tables_from`` as NLTK's ``PunktParameters``."""
    return load_punkt_tables_from(directory).to_parameters()


def save_punkt_parameters(params, directory: str | os.PathLike[str]) -> Path:
    """Writes the four punkt_tab files of ``params`` (PunktTables or NLTK's PunktParameters)
    into ``directory`` (created if needed) and returns it: rows sorted, one per line,
    ``\\n``-terminated (``PunktTables.to_texts``); ``load_punkt_tables_from`` gives back equal
    tables (``ortho_context`` entries included, zeros too). ValueError when a word contains a
    tab or a line break."""
    tables = params if isinstance(params, PunktTables) else PunktTables.from_parameters(params)
    contents = tables.to_texts()
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in contents.items():
        with (root / name).open("w", encoding="utf-8", newline="") as f:
            f.write(text)
    return root


def load_splitter(
    language: str = "english",
    paths: Sequence[str | os.PathLike[str]] = (),
    max_chars: int | None = None,
):
    """A ``transforms.sentences.SentenceSplitter`` with the installed punkt_tab tables (and
    ``max_chars``, default ``DEFAULT_MAX_SENTENCE_CHARS``; ValueError when not positive);
    LookupError when not installed."""
    from transforms.sentences import DEFAULT_MAX_SENTENCE_CHARS, SentenceSplitter

    tables = load_punkt_tables(language, paths)
    if tables is None:
        raise LookupError(
            f"punkt_tab parameters for {language!r} not found: set NLTK_DATA to a directory "
            f"holding tokenizers/punkt_tab/{language}/"
        )
    return SentenceSplitter(tables, DEFAULT_MAX_SENTENCE_CHARS if max_chars is None else max_chars)
