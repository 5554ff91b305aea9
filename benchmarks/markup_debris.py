"""Cleaning quality: wiki markup left in a sentence (the benchmarks' and the tests' check)."""

from __future__ import annotations

# Markup that should never survive cleaning, in the order ``markup_debris`` reports them.
DEBRIS_MARKERS: tuple[str, ...] = ("{{", "}}", "[[", "]]", "|", "<ref", "==")


def markup_debris(sentence: str) -> list[str]:
    """The ``DEBRIS_MARKERS`` found in ``sentence`` (``==`` stands for any run of 2+ ``=``;
    ``<ref`` in any case)."""
    lowered = sentence.lower()
    return [marker for marker in DEBRIS_MARKERS if marker in lowered]
