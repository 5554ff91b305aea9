"""Module paths from before ``pipeline/`` was regrouped into subpackages (``files/``,
``runtime/``, ``steps/``, ``jobs/``), kept importable: ``import pipeline.clean_job`` gives the
module ``pipeline.jobs.clean`` itself (the same object, so classes and isinstance checks agree).
Nothing in this repository imports the old paths; they are for users' scripts and notebooks."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

OLD_TO_NEW: dict[str, str] = {
    "artifacts": "files.artifacts",
    "input_files": "files.input_files",
    "multistream": "files.multistream",
    "punkt_files": "files.punkt_files",
    "shard_files": "files.shard_files",
    "shard_writer": "files.shard_writer",
    "source_readers": "files.source_readers",
    "spill_groups": "files.spill_groups",
    "token_files": "files.token_files",
    "beam_options": "runtime.beam_options",
    "counting": "runtime.counters",
    "stats": "runtime.counters",
    "local_runner": "runtime.local_runner",
    "progress": "runtime.progress",
    "quiet": "runtime.quiet",
    "worker_site": "runtime.worker_site",
    "bert_text_source": "steps.bert_text_source",
    "clean_stages": "steps.clean_stages",
    "instance_creation": "steps.instance_creation",
    "tokenize_documents": "steps.tokenize_documents",
    "clean_job": "jobs.clean",
    "instances_job": "jobs.instances",
    "job_config": "jobs.config",
    "job_scaffold": "jobs.scaffold",
    "run_config": "jobs.run_config",
    "run_job": "jobs.run",
    "split_job": "jobs.split",
    "tokenize_job": "jobs.tokenize",
    "vocab_job": "jobs.vocab",
}
"""Old module name under ``pipeline`` → its new name under ``pipeline``."""


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        sys.modules[module.__spec__.name] = module


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``pipeline.<old>`` to ``pipeline.<new>`` for the names in ``OLD_TO_NEW``."""

    def find_spec(self, name, path=None, target=None):
        package, _, old = name.partition(".")
        if package != "pipeline" or old not in OLD_TO_NEW:
            return None
        return importlib.machinery.ModuleSpec(name, _Alias(f"pipeline.{OLD_TO_NEW[old]}"))


def install() -> None:
    """Adds the finder once (idempotent)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
