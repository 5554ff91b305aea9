"""Punkt's parameters as plain data, and their ``punkt_tab`` text format (no I/O, no NLTK import).

Punkt's parameters are four tables, stored as the ``punkt_tab`` files nltk_data ships:

- ``abbrev_types.txt``: one abbreviation per line, lowercase, without its final period (``mr``);
- ``collocations.tab``: ``word1<TAB>word2`` pairs where a period after word1 is not a sentence end;
- ``sent_starters.txt``: one frequent sentence-starting word per line;
- ``ortho_context.tab``: ``word<TAB>flags``, the orthographic contexts (case at sentence start,
  inside a sentence...) a word was seen in, as an integer bit set.

``PunktTables`` holds them as plain, immutable, picklable data. ``to_texts`` writes sorted,
``\\n``-terminated rows, so the same parameters always give the same bytes; ``from_texts`` also
reads NLTK's own files (unsorted, no final newline). Finding and reading the files is the
pipeline layer's job (``pipeline.files.punkt_files``). Importing this module does not import NLTK,
so a process that only passes the tables on (the job's launcher) never pays for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktParameters

ABBREV_TYPES = "abbrev_types.txt"
COLLOCATIONS = "collocations.tab"
ORTHO_CONTEXT = "ortho_context.tab"
SENT_STARTERS = "sent_starters.txt"
PUNKT_FILES = (ABBREV_TYPES, COLLOCATIONS, ORTHO_CONTEXT, SENT_STARTERS)


def _rows(name: str, text: str, columns: int) -> list[list[str]]:
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise ValueError(f"{name}:{number}: expected {columns} tab-separated fields: {line!r}")
        rows.append(fields)
    return rows


def _lines(values: Iterable[str]) -> str:
    return "".join(f"{value}\n" for value in values)


@dataclass(frozen=True)
class PunktTables:
    """Punkt parameters as plain sorted tuples (hashable, picklable, comparable)."""

    abbrev_types: tuple[str, ...]
    collocations: tuple[tuple[str, str], ...]
    sent_starters: tuple[str, ...]
    ortho_context: tuple[tuple[str, int], ...]

    @classmethod
    def from_parameters(cls, params: PunktParameters) -> PunktTables:
        return cls(
            abbrev_types=tuple(sorted(params.abbrev_types)),
            collocations=tuple(sorted((a, b) for a, b in params.collocations)),
            sent_starters=tuple(sorted(params.sent_starters)),
            ortho_context=tuple(sorted(params.ortho_context.items())),
        )

    def to_parameters(self) -> PunktParameters:
        """A new PunktParameters (NLTK's tokenizer adds zero entries to ``ortho_context`` as it
        reads it, so every tokenizer gets its own)."""
        from nltk.tokenize.punkt import PunktParameters

        params = PunktParameters()
        params.abbrev_types = set(self.abbrev_types)
        params.collocations = set(self.collocations)
        params.sent_starters = set(self.sent_starters)
        params.ortho_context = defaultdict(int, self.ortho_context)
        return params

    @classmethod
    def from_texts(cls, texts: Mapping[str, str]) -> PunktTables:
        """The tables in the contents of the four files (``texts[name]`` for each of
        ``PUNKT_FILES``); ValueError naming the file and row when one is malformed."""
        abbrev = {row[0] for row in _rows(ABBREV_TYPES, texts[ABBREV_TYPES], 1)}
        starters = {row[0] for row in _rows(SENT_STARTERS, texts[SENT_STARTERS], 1)}
        collocations = {(a, b) for a, b in _rows(COLLOCATIONS, texts[COLLOCATIONS], 2)}
        ortho: dict[str, int] = {}
        for number, (word, flags) in enumerate(_rows(ORTHO_CONTEXT, texts[ORTHO_CONTEXT], 2), 1):
            try:
                ortho[word] = int(flags)
            except ValueError:
                message = f"{ORTHO_CONTEXT}: row {number}: flags not an integer: {flags!r}"
                raise ValueError(message) from None
        return cls(
            abbrev_types=tuple(sorted(abbrev)),
            collocations=tuple(sorted(collocations)),
            sent_starters=tuple(sorted(starters)),
            ortho_context=tuple(sorted(ortho.items())),
        )

    def to_texts(self) -> dict[str, str]:
        """The contents of the four files: rows sorted, one per line, ``\\n``-terminated.
        ValueError when a word contains a tab or a line break (the format cannot hold it;
        Punkt never produces one)."""
        words = [*self.abbrev_types, *self.sent_starters, *(w for w, _ in self.ortho_context)]
        words += [w for pair in self.collocations for w in pair]
        for word in words:
            if not word or "\t" in word or "\n" in word or "\r" in word:
                raise ValueError(f"cannot store Punkt word {word!r} in a punkt_tab file")
        return {
            ABBREV_TYPES: _lines(self.abbrev_types),
            COLLOCATIONS: _lines(f"{a}\t{b}" for a, b in self.collocations),
            ORTHO_CONTEXT: _lines(f"{word}\t{flags}" for word, flags in self.ortho_context),
            SENT_STARTERS: _lines(self.sent_starters),
        }
