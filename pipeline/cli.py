"""The ``bertprep`` command line: one module per subcommand under ``pipeline.commands``."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from pipeline.commands import instances

SUBCOMMANDS = (instances,)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertprep",
        description="BERT pretraining data preparation on Apache Beam.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log Beam's progress")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: parses known flags; unknown ``--flags`` are passed to Beam as pipeline options."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    stray = [a for a in beam_args if not a.startswith("-") and "=" not in a]
    if beam_args and not beam_args[0].startswith("-"):
        parser.error(f"unexpected argument(s): {' '.join(stray)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return args.run(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
