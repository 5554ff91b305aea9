"""Each job's ``*JobConfig`` dataclass is the one definition of its settings: names, types and
defaults. The command-line flags take their defaults from it (``flag_defaults``), and ``bertprep
run``'s YAML sections and ``--set`` keys are made from its fields (``section``), under the same
names, so a setting added to a job is settable in both places.

A stage's resume fingerprint is computed from the whole job config (``stage_fingerprint``), never
from a hand-picked list of its settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, get_type_hints

PACKAGE_VERSION = "0.1.0"
"""bertprep's version (setup.py reads it from here); part of every stage fingerprint, so an
upgrade reruns the stages rather than resuming on another version's artifacts."""

ARTIFACT_FORMAT = 3
"""Bumped whenever a stage's artifact layout or fingerprint recipe changes."""


def flag_defaults(job: type) -> dict[str, Any]:
    """Every field of the dataclass ``job`` that has a default, by name (factories called)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(job):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def section(
    name: str,
    job: type,
    *,
    only: tuple[str, ...] | None = None,
    exclude: tuple[str, ...] = (),
    extra: tuple[tuple[str, Any, Any], ...] = (),
    defaults: dict[str, Any] | None = None,
) -> type:
    """A ``bertprep run`` config section made from the fields of ``job`` (``only`` these, or all
    but ``exclude``): same names, types and defaults, except ``defaults`` (stated where the
    section is made). ``extra`` adds ``(name, type, default)`` fields that only ``run`` has."""
    hints = get_type_hints(job)
    defaults = defaults or {}
    fields: list[tuple[str, Any, Any]] = [(n, t, d) for n, t, d in extra]
    for f in dataclasses.fields(job):
        if (only is not None and f.name not in only) or f.name in exclude:
            continue
        if f.name in defaults:
            value = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = dataclasses.field(default_factory=f.default_factory)
        else:
            raise TypeError(f"{job.__name__}.{f.name} has no default: not a run config key")
        kind = hints[f.name]
        if f.name in defaults and defaults[f.name] is None:
            kind = kind | None
        fields.append((f.name, kind, value))
    made = dataclasses.make_dataclass(name, fields)
    made.__doc__ = f"``bertprep run`` keys of {job.__name__} (same names and defaults)."
    made.__module__ = "pipeline.jobs.run_config"
    return made


def job_settings(section_value: object, job: type) -> dict[str, Any]:
    """The fields of ``section_value`` that ``job`` has, as keyword arguments for ``job``."""
    names = {f.name for f in dataclasses.fields(job)}
    return {
        f.name: getattr(section_value, f.name)
        for f in dataclasses.fields(section_value)
        if f.name in names
    }


LOCATION_FIELDS = ("output", "input", "inputs", "vocab")
"""Fields that say where a stage reads or writes inside the run's output directory: not part of
its fingerprint (what it reads enters through the upstream stage's fingerprint instead), so a
moved output directory still resumes."""


def stage_fingerprint(stage: str, *parts: object) -> str:
    """16 hex digits of a hash of ``stage``, the package version, the artifact format and
    ``parts``: job configs (dataclasses, taken whole but for ``LOCATION_FIELDS``), upstream
    fingerprints, input file fingerprints."""

    def plain(part: object) -> object:
        if dataclasses.is_dataclass(part) and not isinstance(part, type):
            d = dataclasses.asdict(part)
            return {
                "__config__": type(part).__name__,
                **{k: v for k, v in d.items() if k not in LOCATION_FIELDS},
            }
        if isinstance(part, list | tuple):
            return [plain(p) for p in part]
        return part

    data = json.dumps(
        (ARTIFACT_FORMAT, PACKAGE_VERSION, stage, *(plain(p) for p in parts)),
        sort_keys=True,
        default=str,
    ).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:16]
