"""Cutting a line or sentence longer than a limit into pieces that fit, at the best break
inside each window: the one rule behind ``split_overlong_sentence`` (BERT text files) and
Punkt sentences over ``max_chars`` (clean)."""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"\s+")


def cut_overlong(text: str, max_chars: int, *, prefer_semicolon: bool = False) -> list[str]:
    """``text`` (stripped first) cut into stripped, non-empty pieces of at most ``max_chars``
    characters each. Each cut goes, in the window of the next ``max_chars`` characters: after the
    last ``;`` in its second half when ``prefer_semicolon``; else at the last whitespace (any
    kind: spaces, tabs); else hard, after ``max_chars`` characters. ``""`` gives ``[]``."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > max_chars:
        window = rest[: max_chars + 1]
        semicolon = window.rfind(";", 0, max_chars) if prefer_semicolon else -1
        if semicolon >= max_chars // 2:
            cut = semicolon + 1
        else:
            space = max((m.start() for m in _WHITESPACE.finditer(window)), default=-1)
            cut = space if space > 0 else max_chars
        piece, rest = rest[:cut].strip(), rest[cut:].strip()
        if piece:
            pieces.append(piece)
    if rest:
        pieces.append(rest)
    return pieces
