"""bertprep's Beam layer: ``jobs/`` (one per stage), ``steps/`` (their DoFns and PTransforms),
``files/`` (formats and sinks), ``runtime/`` (options, runner, progress, counters) and
``commands/`` (the CLI)."""

from pipeline.moved import install as _install_moved_paths

_install_moved_paths()
