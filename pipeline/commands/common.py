"""What every subcommand module shares: its parser (help that states defaults) and its progress
lines on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    help_text: str,
    *,
    description: str | None = None,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand parser whose help shows every default; ``description`` defaults to the help."""
    return subparsers.add_parser(
        name,
        help=help_text,
        description=description or help_text + ".",
        epilog=epilog,
        formatter_class=lambda prog: argparse.ArgumentDefaultsHelpFormatter(prog, width=100),
    )


def progress_printer(command: str) -> Callable[[str], None]:
    """Prints ``[bertprep COMMAND] message`` lines to stderr, flushed at once."""

    def progress(message: str) -> None:
        print(f"[bertprep {command}] {message}", file=sys.stderr, flush=True)

    return progress
