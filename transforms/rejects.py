"""A rejected or altered input: the reason (a counter name), where it was, and an excerpt."""

from __future__ import annotations

from dataclasses import asdict, dataclass

EXCERPT_CHARS = 200


@dataclass(frozen=True)
class Reject:
    """Dead-letter record. ``reason`` doubles as the counter name (e.g. ``skipped_invalid_utf8_line``)."""

    reason: str
    location: str
    excerpt: str

    @classmethod
    def of(cls, reason: str, location: str, text: str | bytes) -> Reject:
        if isinstance(text, bytes):
            text = text[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")
        return cls(reason, location, text[:EXCERPT_CHARS])

    def to_json(self) -> dict[str, str]:
        return asdict(self)
