"""The ``bertprep`` command line: one module per subcommand under ``pipeline.commands``."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
import traceback


def _quiet_logging(verbose: bool, argv: list[str]) -> None:
    """Beam logs start-up chatter at WARNING (missing GCP extras on import, worker arguments),
    in the launcher and in every multi-process worker, and TensorFlow prints its own; show it
    only with --verbose (``pipeline.runtime.quiet``). Our own progress goes to stderr directly."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from pipeline.runtime.quiet import quiet_subprocesses, use_worker_site

    if verbose:
        use_worker_site()
        return

    quiet_subprocesses()
    _start_worker_zygote_early(argv)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        import apache_beam  # noqa: F401  (its import warns through the root logger)
    finally:
        root.setLevel(level)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)


_PIPELINE_COMMANDS = ("run", "clean", "vocab", "instances")


def _start_worker_zygote_early(argv: list[str]) -> None:
    """Starts the multi-process workers' zygote (``pipeline.runtime.worker_zygote``) before the
    launcher imports Beam, when the command line is a pipeline command on the local multi-process
    runner (the default): its imports then overlap the launcher's (~1 s). Anything else (another
    runner, ``in_memory``, one worker, ``--help``, ``--compat``) leaves it to start on first use, if
    ever; the options are checked properly later, and an unused zygote ends with the command."""
    if not argv or argv[0] not in _PIPELINE_COMMANDS:
        return
    words = " ".join(argv[1:])
    if any(w in words for w in ("--help", "-h ", "--runner", "in_memory", "--compat")):
        return
    if argv[-1] == "-h" or "--direct_num_workers=1" in argv or (os.cpu_count() or 1) < 2:
        return
    from pipeline.runtime.worker_zygote import Zygote

    Zygote.get(_kernels_of(argv), _worker_modules_of(argv))


def _kernels_of(argv: list[str]) -> tuple[str, ...] | None:
    """The compiled-kernel groups the command's workers call (None: all): none for ``vocab``,
    near dedup's alone for ``clean`` (and none unless ``near`` is on its line). A guess that
    leaves one out only costs the workers its loading."""
    if argv[0] == "vocab":
        return ()
    if argv[0] == "clean":
        return ("near_dedup",) if any("near" in a for a in argv[1:]) else ()
    return None


def _worker_modules_of(argv: list[str]) -> tuple[str, ...]:
    """Modules the command's workers import while they run, for the zygote to import before its
    first fork: the sentence splitter (NLTK) for ``clean`` and ``run`` (the launcher never
    imports it)."""
    return ("transforms.sentences",) if argv[0] in ("clean", "run") else ()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command`` (one of ``pipeline.commands.SUMMARIES``) only
    that command's module is imported and its options defined, the others listed by name and
    help (what parsing that command's arguments needs)."""
    import importlib

    from pipeline.commands import SUMMARIES

    parser = argparse.ArgumentParser(
        prog="bertprep",
        description="BERT pretraining data preparation on Apache Beam.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log Beam's progress")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in SUMMARIES.items():
        if command in (None, name):
            importlib.import_module(f"pipeline.commands.{name}").register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _command_named(argv: list[str]) -> str | None:
    """The subcommand ``argv`` runs (its first word that is not an option) when it is one of
    ``pipeline.commands.SUMMARIES``, else None (help, a misspelt command: the whole parser)."""
    from pipeline.commands import SUMMARIES

    words = [a for a in argv if not a.startswith("-")]
    return words[0] if words and words[0] in SUMMARIES else None


def _subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def unknown_argument_error(
    command: str, extra: list[str], ours: list[str], takes_beam_options: bool
) -> str | None:
    """Why ``extra`` (what the command's parser did not take) cannot be accepted, or None.

    A command that runs a Beam pipeline passes on exactly the flags of Beam's registered pipeline
    options; anything else (a misspelt option, a stray value) is an error naming it and the
    nearest known option, so that nothing is silently ignored.
    """
    from pipeline.commands.common import closest_option

    if not extra:
        return None
    beam_names: list[str] = []
    unknown = extra
    if takes_beam_options:
        from pipeline.runtime.beam_options import (
            BeamOptionError,
            beam_option_names,
            unknown_beam_arguments,
        )

        try:
            unknown = unknown_beam_arguments(extra)
        except BeamOptionError as e:
            return f"Beam pipeline option {e}"
        if not unknown:
            return None
        beam_names = beam_option_names()
    options = [a.split("=", 1)[0] for a in unknown if a.startswith("-")]
    if not options:
        return f"unexpected argument(s): {' '.join(unknown)}"
    name = options[0]
    close = closest_option(name, ours) or closest_option(name, beam_names)
    hint = f" (did you mean {close}?)" if close else ""
    kind = (
        "an option of this command or a Beam pipeline option"
        if takes_beam_options
        else "an option of this command"
    )
    more = f"; also unknown: {' '.join(options[1:])}" if len(options) > 1 else ""
    return f"unknown option {name}{hint}: not {kind} (see bertprep {command} --help){more}"


def main(argv: list[str] | None = None) -> int:
    """Entry point. Options the command does not define must be Beam pipeline options (for the
    commands that run a pipeline), passed on to Beam; anything else exits 2 naming it, and so
    does every ``transforms.errors.UserError`` a command raises (caught here, once).

    The failures that are not the user's fault but have a plain cause end here too, in one line
    (``pipeline.runtime.failures``): an interrupt (exit 130), a full disk naming the path, a Beam
    worker process that died with its exit status (exit 1); the line names the stage of
    ``bertprep run`` that was running and says that a rerun resumes. Their tracebacks, and the
    local runner's error logs and thread tracebacks that come with them, only with --verbose.
    """
    argv = sys.argv[1:] if argv is None else argv
    from pipeline.runtime.arrow_memory import prefer_system_allocator
    from pipeline.runtime.collector import set_collector_thresholds
    from pipeline.runtime.lean_imports import runner_named, skip_unused_clients

    try:
        set_collector_thresholds()  # before the imports it speeds up; zygote and workers inherit
    except ValueError as e:
        return _user_error(_command_named(argv) or "", str(e))
    prefer_system_allocator()  # before anything imports pyarrow (Beam does), workers inherit it
    verbose = "-v" in argv or "--verbose" in argv
    if not runner_named(argv):  # the local runner calls no cloud client: Beam imports faster
        skip_unused_clients()
    _quiet_logging(verbose, argv)
    parser = build_parser(_command_named(argv))
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a not in ("-v", "--verbose")]  # taken anywhere on the line
    from pipeline.commands.common import as_typed, parser_options

    command = _subcommand_parser(parser, args.command)
    takes_beam = getattr(args, "beam_options", False)
    problem = unknown_argument_error(
        args.command, extra, parser_options(command) + parser_options(parser), takes_beam
    )
    if problem:
        return _user_error(args.command, problem)
    from pipeline.runtime.failures import (
        RunnerNoise,
        classify,
        current_stage,
        describe,
        reset_stage,
    )
    from pipeline.runtime.interrupts import InterruptLatch, raise_if_interrupted
    from transforms.errors import UserError

    reset_stage()
    with InterruptLatch(), RunnerNoise(hold=not verbose) as noise:
        try:
            code = args.run(args, extra)
            raise_if_interrupted()  # a swallowed Ctrl-C ends in the same one line, exit 130
            return code
        except UserError as e:
            noise.drop()  # a worker's error said in one line: its tracebacks add nothing
            return _user_error(args.command, as_typed(str(e), argv, command))
        except BaseException as e:
            failure = classify(e, noise.thread_errors)
            if failure is None:
                raise
            if verbose:
                traceback.print_exc()
            noise.drop()
            line = describe(failure, current_stage(), getattr(args, "output", None))
            print(f"bertprep {args.command}: {line}", file=sys.stderr, flush=True)
            return failure.exit_code


def _user_error(command: str, message: str) -> int:
    """The one way a user error ends a command: ``bertprep COMMAND: error: MESSAGE`` on
    stderr, no traceback, exit status 2."""
    print(f"bertprep{' ' + command if command else ''}: error: {message}", file=sys.stderr)
    return 2


def console_entry() -> None:
    """The ``bertprep`` executable: ``main()``, then the process ends with its exit status.

    After the command has returned, the ``atexit`` handlers run, logging is shut down and stdout
    and stderr are flushed; then the process ends with ``os._exit`` instead of the interpreter's
    teardown. The teardown destroys the native threads of gRPC (Beam's runner) and Arrow while
    they still run, and now and then a finished, successful job died there with
    ``terminate called without an active exception`` and a nonzero status. Nothing of the
    job runs in the teardown: every file is written and renamed before ``main()`` returns.
    An uncaught exception prints its traceback and ends with status 1, Ctrl-C with 130.
    """
    try:
        code = main()
    except SystemExit as e:  # argparse: --help, usage errors
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    end_process(code)


def end_process(code: int) -> None:
    """Runs the ``atexit`` handlers, flushes the logs and both streams, and ends the process
    with ``code`` without the interpreter's teardown (see ``console_entry``)."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console_entry()
