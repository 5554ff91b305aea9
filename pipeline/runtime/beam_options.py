"""Beam pipeline options for bertprep jobs: sensible local defaults, and refusing unsafe modes."""

from __future__ import annotations

import argparse
import os

from apache_beam.options import pipeline_options as beam_po
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
)

from tokenizer.vocab import pickle_by_path
from transforms.errors import UserError

UNSAFE_DIRECT_MODE = "multi_threading"


class UnsafeRunnerModeError(UserError, ValueError):
    """The requested runner mode is known to lose records."""


def runs_on_a_cluster(options: PipelineOptions) -> bool:
    """Whether ``options`` run the job on workers that do not share the launcher's working
    directory (Dask): local paths must then be absolute (``cluster_path``)."""
    runner = options.view_as(StandardOptions).runner or ""
    return runner.rsplit(".", 1)[-1].lower() == "daskrunner"


def cluster_path(path: str) -> str:
    """``path`` made absolute when local (a worker resolves a relative path against its own
    working directory, not the launcher's); URLs (``gs://``...) unchanged."""
    if "://" in path and not path.startswith("file://"):
        return path
    return os.path.abspath(path.removeprefix("file://"))


class BeamOptionError(UserError, ValueError):
    """An argument is not a Beam pipeline option Beam knows, or has a value Beam rejects."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class _StrictParser(beam_po._BeamArgumentParser):
    """Beam's own option parser, raising instead of exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise BeamOptionError(message)


def _option_classes() -> list[type]:
    """Every registered PipelineOptions subclass (at any depth), one per class name, in the order
    Beam itself registers them (``PipelineOptions.get_all_options`` uses direct subclasses)."""
    seen: dict[str, type] = {}
    stack = list(PipelineOptions.__subclasses__())
    while stack:
        cls = stack.pop(0)
        seen.setdefault(str(cls), cls)
        stack.extend(cls.__subclasses__())
    return list(seen.values())


class MissingRunnerError(UserError, ImportError):
    """The requested runner needs an optional dependency that is not installed."""


def register_runner_options(beam_args: list[str]) -> None:
    """Imports the modules whose pipeline options ``beam_args`` mention and Beam registers only
    on import: Beam's Dask options (``--dask_client_address``...) when Dask is asked for. Not
    imported otherwise (``dask.bag`` costs ~0.5 s of start-up)."""
    if not any("dask" in a.lower() for a in beam_args):
        return
    try:
        import apache_beam.runners.dask.dask_runner  # noqa: F401 (registers DaskOptions)
    except ImportError as e:
        raise MissingRunnerError(
            f"--runner DaskRunner needs dask.distributed ({e}): install bertprep with its dask "
            "extra (pip install '.[dask]'; scripts/bootstrap.sh installs it from the lock)"
        ) from e


def beam_parser() -> argparse.ArgumentParser:
    """An argument parser holding exactly the flags of Beam's registered pipeline options."""
    parser = _StrictParser(allow_abbrev=False, add_help=False)
    for cls in _option_classes():
        try:
            cls._add_argparse_args(parser)  # the hook Beam's get_all_options calls
        except argparse.ArgumentError:  # a subclass re-registering a flag: Beam keeps the first
            continue
    return parser


def beam_option_names() -> list[str]:
    """Every ``--flag`` spelling of Beam's registered pipeline options."""
    return [s for a in beam_parser()._actions for s in a.option_strings if s.startswith("--")]


def unknown_beam_arguments(beam_args: list[str]) -> list[str]:
    """The arguments Beam's pipeline options would silently ignore (unknown flags, stray values).

    Raises BeamOptionError when a known Beam flag has a value Beam rejects.
    """
    register_runner_options(beam_args)
    _, unknown = beam_parser().parse_known_args(beam_args)
    return unknown


def make_pipeline_options(beam_args: list[str]) -> PipelineOptions:
    """PipelineOptions from the Beam flags a user passed, with bertprep's local defaults.

    With the DirectRunner (the default) and no ``--direct_running_mode``, runs multi-process with
    one worker per CPU. ``--direct_running_mode=multi_threading`` is refused: on Beam 2.77 it was
    seen silently losing records between a GroupByKey and the writer.

    Beam's construction-time type check is off (as ``--no_pipeline_type_check``; set
    ``BERTPREP_PIPELINE_TYPE_CHECK=1`` to keep it): it builds an option parser for every type
    comparison, ~1 s per pipeline of the instance stage, and checks nothing a run depends on
    (the test pipelines built without this function keep it).

    Beam's DoFn state/timer introspection is remembered per DoFn (``pipeline.runtime.dofn_specs``;
    ~1 s of the phases pipeline's construction otherwise) and its option views per options
    object (``pipeline.runtime.option_views``: ~840 argument parsers otherwise), and a
    multi-process DirectRunner's worker zygote is started at once, unless the CLI already did
    (``pipeline.runtime.worker_zygote.Zygote``).

    With the DirectRunner, a vocab read from a local file is pickled into DoFns as its path and
    digest (``tokenizer.vocab.pickle_by_path``); with any other runner, as its tokens.

    The DirectRunner is run as ``pipeline.runtime.local_runner.FnApiDirectRunner``: the same runner,
    without Beam's attempt to download and use the Prism runner first. Beam's DaskRunner
    (``--runner DaskRunner``, any spelling) runs as ``pipeline.runtime.dask_runner.DaskRunner``:
    Beam's Dask options, with a translation that computes every branch and keeps tagged outputs,
    ``finish_bundle`` outputs and counters (Beam's own drops them).
    """
    from pipeline.runtime.dofn_specs import install as remember_dofn_specs
    from pipeline.runtime.option_views import install as remember_option_views

    remember_dofn_specs()
    remember_option_views()
    if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        beam_args = [*beam_args, "--default_sdk_harness_log_level=WARNING"]
    register_runner_options(beam_args)
    options = PipelineOptions(beam_args)
    if not os.environ.get("BERTPREP_PIPELINE_TYPE_CHECK"):
        options.view_as(TypeOptions).pipeline_type_check = False
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    pickle_by_path(False)  # a vocab's tokens travel in its DoFns, unless the local runner runs them
    if runner.rsplit(".", 1)[-1].lower() == "daskrunner":
        from pipeline.runtime.dask_runner import RUNNER as DASK_RUNNER

        options.view_as(StandardOptions).runner = DASK_RUNNER
        return options
    direct = options.view_as(DirectOptions)
    if runner in ("DirectRunner", "direct", "BundleBasedDirectRunner"):
        given = {a.split("=", 1)[0] for a in beam_args}
        if direct.direct_running_mode == UNSAFE_DIRECT_MODE:
            raise UnsafeRunnerModeError(
                "--direct_running_mode=multi_threading is refused: Beam's multi-threaded "
                "DirectRunner has been seen to drop records on this job. Use "
                "--direct_running_mode=multi_processing (fast, the default here) or in_memory."
            )
        if "--direct_running_mode" not in given:
            direct.direct_running_mode = "multi_processing"
        if "--direct_num_workers" not in given and direct.direct_running_mode == "multi_processing":
            direct.direct_num_workers = os.cpu_count() or 1
        if runner in ("DirectRunner", "direct"):
            from pipeline.runtime.local_runner import RUNNER, start_zygote

            options.view_as(StandardOptions).runner = RUNNER
            pickle_by_path(True)  # its workers read a local vocab file themselves
            if direct.direct_running_mode == "multi_processing" and direct.direct_num_workers > 1:
                start_zygote()  # its imports overlap the launcher's own start
    return options
