"""The ``bertprep`` command line: one module per subcommand."""
import sys


def main(argv: list[str] | None = None) -> int:
    print("bertprep: not yet implemented", file=sys.stderr)
    return 2
