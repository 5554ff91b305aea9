"""A BERT WordPiece vocabulary (``vocab.txt``: one token per line, id = line number) and its checks."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from dataclasses import dataclass, field

import numpy as np

from transforms.errors import UserError
from transforms.special_ids import SpecialIds

REQUIRED_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_COMPRESSED_SUFFIX = re.compile(r"\.(bz2|gz|lz4|xz|zst)$", re.IGNORECASE)
"""File names smart_open decompresses (``smart_open.compression.get_supported_extensions()``)."""
_BRACKETED = re.compile(r"^\[[^\[\]]+\]$")


class VocabError(UserError, ValueError):
    """The vocabulary file is unusable (missing special tokens, duplicates, empty)."""


def _special_id(token: str) -> property:
    """A read-only attribute: the id of ``token`` (one of ``REQUIRED_SPECIAL_TOKENS``)."""
    return property(lambda self: self.token_to_id[token], doc=f"The id of {token}.")


def _first_ids(tokens: tuple[str, ...]) -> dict[str, int]:
    """token → id of its first line (google-research/bert's ``load_vocab`` keeps every line;
    a repeated token keeps its first id)."""
    token_to_id: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        token_to_id.setdefault(tok, i)
    return token_to_id


_PARSED: dict[str, Vocab] = {}
"""Vocabularies parsed in this process by the digest of their bytes (oldest first)."""
_PARSED_LIMIT = 4
_PARSED_LOCK = threading.Lock()
"""Guards ``_PARSED``: a worker process runs bundles, and so loads vocabs, on several threads."""
_LOCAL_FILES: dict[str, str] = {}
"""digest → the real path of a regular local file this process read those bytes from."""
_pickle_by_path = False
"""See ``pickle_by_path``."""


def pickle_by_path(enabled: bool) -> None:
    """With ``enabled``, a Vocab read from a regular local file pickles as that file's path and
    digest (~100 bytes) instead of its tokens (~290 kB; Beam compresses every DoFn pickle with
    bz2, ~30 ms per dump or load, and a worker loads each DoFn once per bundle processor). Only
    for workers that read the same files as this process: Beam's local runners. Unpickled, the
    vocab is the process's already parsed one of that digest, or the file read and parsed once;
    a file changed or gone since is a ``VocabError``."""
    global _pickle_by_path
    _pickle_by_path = enabled


def _vocab_at(path: str, sha256: str) -> Vocab:
    """The vocab of digest ``sha256``, read from ``path`` unless this process has parsed it."""
    known = _PARSED.get(sha256)
    if known is not None:
        return known
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise VocabError(f"vocab {path} cannot be read again while the job runs: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise VocabError(
            f"vocab {path} changed while the job ran: sha256 {digest}, the job started with {sha256}"
        )
    return Vocab._remembered(data, digest)


def _vocab_of(tokens: tuple[str, ...], sha256: str) -> Vocab:
    """The vocab of ``tokens`` (pickled whole): the process's parsed one of that digest if any."""
    known = _PARSED.get(sha256)
    if known is not None:
        return known
    return Vocab(tokens=tokens, sha256=sha256, token_to_id=_first_ids(tokens))


@dataclass(frozen=True)
class Vocab:
    """Tokens in id order, plus the derived tables instance creation needs.

    ``sha256`` is the digest of the file bytes, so manifests can pin the exact vocabulary.
    """

    tokens: tuple[str, ...]
    sha256: str
    token_to_id: dict[str, int] = field(repr=False)

    @classmethod
    def from_bytes(cls, data: bytes) -> Vocab:
        """Parses vocab.txt bytes (UTF-8); raises VocabError with the reason when unusable.

        The same bytes give the same (immutable, shared) Vocab: a process remembers the last
        few it parsed by digest, so the stages of one ``bertprep run`` that each load the vocab
        parse it once."""
        return cls._remembered(data, hashlib.sha256(data).hexdigest())

    @classmethod
    def _remembered(cls, data: bytes, digest: str) -> Vocab:
        """``from_bytes`` for ``data`` whose sha256 is ``digest``."""
        known = _PARSED.get(digest)
        if known is not None:
            return known
        vocab = cls._parse(data, digest)
        with _PARSED_LOCK:
            if digest not in _PARSED and len(_PARSED) >= _PARSED_LIMIT:
                _PARSED.pop(next(iter(_PARSED)))
            return _PARSED.setdefault(digest, vocab)

    @classmethod
    def _parse(cls, data: bytes, digest: str) -> Vocab:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise VocabError(f"vocab is not valid UTF-8: {e}") from e
        tokens = tuple(line.strip() for line in text.splitlines())
        # google-research/bert's load_vocab strips each line and keeps every line (even blank).
        while tokens and tokens[-1] == "":
            tokens = tokens[:-1]
        if not tokens:
            raise VocabError("vocab is empty")
        token_to_id = _first_ids(tokens)
        missing = [t for t in REQUIRED_SPECIAL_TOKENS if t not in token_to_id]
        if missing:
            raise VocabError(
                f"vocab lacks required special token(s) {', '.join(missing)}; a BERT vocab needs "
                f"{', '.join(REQUIRED_SPECIAL_TOKENS)}"
            )
        if token_to_id["[PAD]"] != 0:
            raise VocabError(
                f"[PAD] must have id 0 (padding is written as 0), found id {token_to_id['[PAD]']}"
            )
        return cls(tokens=tokens, sha256=digest, token_to_id=token_to_id)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Vocab:
        """Reads vocab.txt from a local path or any URL smart_open understands (gs://, ...),
        decompressed by its extension (``.gz``, ``.bz2``...) as smart_open does. A plain local
        file is read directly (importing smart_open costs the launcher ~0.15 s)."""
        path = os.fspath(path)
        if "://" not in path and not _COMPRESSED_SUFFIX.search(path):
            path = os.path.abspath(os.path.expanduser(path))
            with open(path, "rb") as f:
                vocab = cls.from_bytes(f.read())
                regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            real = os.path.realpath(path)  # /dev/stdin, /dev/fd/N: what they point at
            if regular and not real.startswith(("/dev/", "/proc/")):
                _LOCAL_FILES[vocab.sha256] = real  # a pipe cannot be read again by a worker
            return vocab
        from smart_open import open as smart_open

        with smart_open(path, "rb") as f:
            return cls.from_bytes(f.read())

    def __reduce__(self):
        """Pickled as its file's path and digest (``pickle_by_path``), else as its tokens and
        digest: the id table is rebuilt when unpickled. Beam pickles a DoFn holding a vocab,
        compresses it with bz2 and unpickles it for every bundle processor a worker builds:
        without the table that is ~half the bytes."""
        path = _LOCAL_FILES.get(self.sha256) if _pickle_by_path else None
        if path is not None:
            return _vocab_at, (path, self.sha256)
        return _vocab_of, (self.tokens, self.sha256)

    def __len__(self) -> int:
        return len(self.tokens)

    def id_of(self, token: str) -> int:
        return self.token_to_id[token]

    pad_id = _special_id("[PAD]")
    cls_id = _special_id("[CLS]")
    sep_id = _special_id("[SEP]")
    mask_id = _special_id("[MASK]")
    unk_id = _special_id("[UNK]")

    def special_ids(self) -> SpecialIds:
        """This vocabulary's special ids and size."""
        return SpecialIds(
            self.cls_id, self.sep_id, self.mask_id, self.unk_id, self.pad_id, len(self.tokens)
        )

    def continuation_mask(self) -> np.ndarray:
        """bool[len(vocab)]: True where the token is a WordPiece continuation (``##x``)."""
        return np.array([t.startswith("##") for t in self.tokens], dtype=bool)

    def replacement_ids(self, include_special: bool = False) -> np.ndarray:
        """int32 ids eligible as the random token of the 10% "random" mask branch.

        By default excludes every bracketed token (``[PAD]``, ``[CLS]``, ``[unused7]`` ...) and blank
        lines; ``include_special=True`` returns all ids (google-research/bert's behaviour).
        """
        if include_special:
            return np.arange(len(self.tokens), dtype=np.int32)
        keep = [i for i, t in enumerate(self.tokens) if t and not _BRACKETED.match(t)]
        if not keep:
            raise VocabError("vocab has no ordinary tokens to use as random replacements")
        return np.array(keep, dtype=np.int32)
