"""The ``bertprep`` command line: one module per subcommand under ``pipeline.commands``."""

from __future__ import annotations

import argparse
import logging
import sys


def _quiet_logging(verbose: bool) -> None:
    """Beam logs start-up chatter at WARNING (missing GCP extras on import, worker arguments),
    in the launcher and in every multi-process worker, and TensorFlow prints its own; show it
    only with --verbose (``pipeline.quiet``). Our own progress goes to stderr directly."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if verbose:
        return
    from pipeline.quiet import quiet_subprocesses

    quiet_subprocesses()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        import apache_beam  # noqa: F401  (its import warns through the root logger)
    finally:
        root.setLevel(level)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)


def build_parser() -> argparse.ArgumentParser:
    from pipeline.commands import clean, inspect, instances, run, stats, train, validate, vocab

    parser = argparse.ArgumentParser(
        prog="bertprep",
        description="BERT pretraining data preparation on Apache Beam.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log Beam's progress")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run, clean, vocab, instances, inspect, stats, validate, train):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: parses known flags; unknown ``--flags`` are passed to Beam as pipeline options."""
    argv = sys.argv[1:] if argv is None else argv
    _quiet_logging("-v" in argv or "--verbose" in argv)
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    stray = [a for a in beam_args if not a.startswith("-") and "=" not in a]
    if beam_args and not beam_args[0].startswith("-"):
        parser.error(f"unexpected argument(s): {' '.join(stray)}")
    return args.run(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
