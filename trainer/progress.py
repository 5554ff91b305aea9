"""The training loop's progress: one line rewritten in place (``\\r``) on a terminal, a plain line
per update otherwise (a log), never terminal control codes; and metric values as a person reads
them (counts as integers)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Sequence
from typing import TextIO


def format_value(value: float | int) -> str:
    """``15`` for a count (an int), ``0.1234`` for a float (a rate, a loss), ``1.0e-04`` for a
    small one (a learning rate)."""
    if isinstance(value, int):
        return f"{value:,}"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.4f}"


def format_metrics(values: dict[str, float | int]) -> str:
    """``examples=15, loss=7.1234``."""
    return ", ".join(f"{k}={format_value(v)}" for k, v in values.items())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_progress(
    step: int, total: int, values: Sequence[tuple[str, float]], eta_seconds: float | None
) -> str:
    """``step 120/1,000 (12%) loss 7.1234 lr 1.0e-04 ETA 0:01:23``."""
    text = f"step {step:,}/{total:,} ({step / total:.0%})" if total else f"step {step:,}"
    for name, value in values:
        text += f" {name} {format_value(value)}"
    if eta_seconds is not None:
        text += f" ETA {_duration(eta_seconds)}"
    return text


class TrainProgress:
    """``update(step, values)`` after each logged interval. The stream (default: ``sys.stdout``
    at the time of the call) is asked ``isatty()``: a terminal gets one line rewritten with
    ``\\r``, anything else a newline-terminated line per update."""

    def __init__(self, total_steps: int, start_step: int = 0, stream: TextIO | None = None):
        self.total = total_steps
        self._start_step = start_step
        self._started = time.monotonic()
        self._stream = stream
        self._width = 0

    def _out(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def update(self, step: int, values: Sequence[tuple[str, float]]) -> None:
        done = step - self._start_step
        elapsed = time.monotonic() - self._started
        eta = (self.total - step) * elapsed / done if done > 0 and elapsed > 0 else None
        line = format_progress(step, self.total, values, eta)
        out = self._out()
        if getattr(out, "isatty", lambda: False)():
            line = line[: shutil.get_terminal_size().columns - 1]
            out.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
            if step >= self.total:
                out.write("\n")
                self._width = 0
        else:
            out.write(line + "\n")
        out.flush()

    def close(self) -> None:
        """Ends a line left open on a terminal."""
        if self._width:
            self._out().write("\n")
            self._out().flush()
            self._width = 0
