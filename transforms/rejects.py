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
    source: str = ""
    """The kind of input (``wikipedia``, ``books``, ...), where a job reads several."""

    @classmethod
    def of(cls, reason: str, location: str, text: str | bytes, source: str = "") -> Reject:
        if isinstance(text, bytes):
            text = text[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")
        return cls(reason, location, text[:EXCERPT_CHARS], source)

    def with_source(self, source: str) -> Reject:
        return Reject(self.reason, self.location, self.excerpt, source)

    def to_json(self) -> dict[str, str]:
        return asdict(self)
