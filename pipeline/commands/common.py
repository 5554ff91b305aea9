"""What every subcommand module shares: its parser (help that states defaults) and its progress
lines on stderr."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterable


class HelpFormatter(argparse.HelpFormatter):
    """Help that states each default once: ``(default: X)`` is appended unless the help already
    says it, the option is required, its default is None, or it is a switch (``store_true``,
    ``store_false``, ``store_const``: their help says what they do). An option with several
    spellings shows its metavar once (``--dupe-factor, --dupe_factor DUPE_FACTOR``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if (
            "%(default)" in help_text
            or "(default" in help_text
            or action.required
            or action.default is None
            or action.default is argparse.SUPPRESS
            or action.default == []
            or (action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction))
            or not action.option_strings
        ):
            return help_text
        return help_text + " (default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Descriptions and epilogs keep their paragraphs (blank-line separated)."""
        return "\n\n".join(
            super(HelpFormatter, self)._fill_text(part, width, indent)
            for part in text.strip().split("\n\n")
        )

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        default = self._get_default_metavar_for_optional(action)
        return ", ".join(action.option_strings) + " " + self._format_args(action, default)


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
        formatter_class=lambda prog: HelpFormatter(prog, width=100),
    )


def progress_printer(command: str) -> Callable[[str], None]:
    """Prints ``[bertprep COMMAND] message`` lines to stderr, flushed at once."""

    def progress(message: str) -> None:
        print(f"[bertprep {command}] {message}", file=sys.stderr, flush=True)

    return progress


def parse_bool(text: str) -> bool:
    """``True``/``False`` as google-research/bert's absl flags take them (any case, or 1/0)."""
    value = text.strip().lower()
    if value in ("true", "t", "1", "yes", "y"):
        return True
    if value in ("false", "f", "0", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def closest_option(name: str, known: Iterable[str]) -> str | None:
    """The known option spelled most like ``name`` (``-`` and ``_`` count as the same), if any
    is close."""
    known = sorted(set(known))
    by_key: dict[str, list[str]] = {}
    for k in known:
        by_key.setdefault(k.replace("_", "-"), []).append(k)
    close = difflib.get_close_matches(name.replace("_", "-"), list(by_key), n=1, cutoff=0.6)
    if not close:
        return None
    # Of the spellings of that option, the one written like the user's (--a-b or --a_b).
    return max(by_key[close[0]], key=lambda k: difflib.SequenceMatcher(None, name, k).ratio())


def parser_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every ``--option`` spelling ``parser`` accepts."""
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def typed_spellings(argv: Iterable[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each other spelling of an option the user typed in ``argv`` → the spelling typed
    (``--max-seq-length`` → ``--max_seq_length``, ``--seed`` → ``--random_seed``).

    An option is matched as ``parser`` matches it: in full or by a unique prefix (then the
    full spelling that prefix starts). A ``--x/--no-x`` switch maps each sense only to its own
    sense. Anything after ``--`` and any token ``parser`` does not know is left out."""
    actions = parser._option_string_actions
    spellings: dict[str, str] = {}
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        if name not in actions:
            starting = [s for s in actions if s.startswith(name)]
            if len({id(actions[s]) for s in starting}) != 1:
                continue
            name = min(starting, key=len)
        action = actions[name]
        negative = isinstance(action, argparse.BooleanOptionalAction) and name.startswith("--no-")
        for other in action.option_strings:
            same_sense = not isinstance(action, argparse.BooleanOptionalAction) or (
                other.startswith("--no-") == negative
            )
            if other != name and other.startswith("--") and same_sense:
                spellings[other] = name
    return spellings


def as_typed(message: str, argv: Iterable[str], parser: argparse.ArgumentParser) -> str:
    """``message`` with each option it names spelt as the user typed it in ``argv`` (see
    ``typed_spellings``): an error about ``--max-seq-length`` says ``--max_seq_length`` to a
    user who wrote that. Options the user did not type, and text that merely starts like an
    option (``--max-seq-length-x``), stay as they are."""
    import re

    spellings = typed_spellings(argv, parser)
    if not spellings:
        return message
    pattern = re.compile(
        r"(?<![\w-])("
        + "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
        + r")(?![\w-])"
    )
    return pattern.sub(lambda m: spellings[m.group(1)], message)


def add_job_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    job: type,
    flags: dict[str, str | tuple[str, dict]],
) -> None:
    """One ``--field-name`` flag per entry of ``flags`` (``field: help`` or ``field: (help,
    argparse keywords)``), with the type and default of that field of the dataclass ``job``: a
    bool field that defaults to False is a switch, one that defaults to True a
    ``--x/--no-x`` pair, a list one a repeatable flag. ``aliases`` in the keywords adds other
    spellings."""
    from typing import get_type_hints

    from pipeline.jobs.config import flag_defaults

    hints = get_type_hints(job)
    defaults = flag_defaults(job)
    for name, spec in flags.items():
        help_text, extra = (spec, {}) if isinstance(spec, str) else spec
        extra = dict(extra)
        names = ["--" + name.replace("_", "-"), *extra.pop("aliases", ())]
        kind = hints[name]
        options: dict = {"default": defaults[name], "help": help_text}
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction if defaults[name] else "store_true"
        elif getattr(kind, "__origin__", None) is list:
            options["action"] = "append"
        else:
            plain = [a for a in getattr(kind, "__args__", (kind,)) if a is not type(None)]
            options["type"] = plain[0]
        parser.add_argument(*names, **(options | extra))


def job_config_from_args(job: type, args: argparse.Namespace, **given):
    """``job`` (a config dataclass) from the parsed flags of the same names, and ``given``."""
    import dataclasses

    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(job)
        if f.name not in given and hasattr(args, f.name)
    }
    return job(**values, **given)


def run_job_command(
    command: str, job: type, run_job: Callable[..., dict], args: argparse.Namespace, beam_args
) -> dict:
    """Runs a Beam job from its command's flags: ``run_job(config, options, progress)`` with
    ``job`` (its config dataclass) made from ``args``, Beam's options from ``beam_args`` and
    progress lines on stderr; returns the job's manifest."""
    from pipeline.runtime.beam_options import make_pipeline_options

    config = job_config_from_args(job, args)
    return run_job(config, make_pipeline_options(beam_args), progress_printer(command))
