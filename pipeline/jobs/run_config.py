"""The end-to-end job's configuration: a YAML file (safe-loaded), validated key by key.

Unknown keys, wrong types and impossible values are errors that name the key (``phases[1].dupe
_factor``); a key an earlier version read (``REMOVED``) says what replaces it; ``--set
a.b=value`` overrides any key with a YAML scalar.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from pipeline.jobs.clean import CleanJobConfig
from pipeline.jobs.config import section
from pipeline.jobs.instances import InstancesJobConfig
from pipeline.jobs.vocab import VocabJobConfig
from transforms.errors import UserError
from transforms.features import INPUT_MODES, MASKINGS
from transforms.seeding import DEFAULT_SEED


class ConfigError(UserError, ValueError):
    """The configuration is invalid; the message names the key."""


SOURCES = ("wikipedia", "books", "jsonl", "parquet")

InputsConfig = section("InputsConfig", CleanJobConfig, only=(*SOURCES, "text_field", "title_field"))
"""``inputs``: the clean job's sources (path patterns) and its JSONL/Parquet field names."""

CleanConfig = section(
    "CleanConfig",
    CleanJobConfig,
    exclude=("output", *SOURCES, "text_field", "title_field", "export_text", "seed"),
    defaults={"dedup": "near"},
)
"""``clean``: the clean job's filters and sizes. One default differs from ``bertprep clean``:
``dedup`` is ``near`` here (near-duplicates go before the eval split, so none straddles it) and
``exact`` there (the cheaper pass, for a corpus of its own)."""

VocabConfig = section(
    "VocabConfig",
    VocabJobConfig,
    exclude=("input", "output", "seed", "compare_vocab", "exclude_eval_fraction"),
    extra=(("path", str | None, None),),
)
"""``vocab``: the vocab job's settings, or ``path``: a given vocab.txt (no vocab stage)."""

ALIASES = {"vocab": {"lowercase": "do_lower_case"}}
"""Older spellings still read (the job's name is the one written)."""

REMOVED = {
    "clean": {
        "num_shards": (
            "the clean output is no longer cut into a fixed number of files; each file now holds "
            "about clean.chunk_mb MB of text (default 16): set chunk_mb instead, or drop the key"
        ),
    },
}
"""Keys an earlier version read and this one does not, by section (``phases`` for every
``phases[i]``): key → what replaces it. A config that still carries one is an error that says
so (not a bare "unknown key"), so that nothing it asks for is silently ignored."""


def _section_of(where: str) -> str:
    """The section a key path lies in, without list indexes: ``phases[1]`` → ``phases``."""
    return re.sub(r"\[\d+\]", "", where)


@dataclass
class EvalConfig:
    fraction: float = 0.01


PhaseConfig = section(
    "PhaseConfig",
    InstancesJobConfig,
    exclude=("inputs", "vocab", "output", "seed", "do_lower_case", "shard_names", "pretokenized"),
    extra=(("name", str, "seq128"), ("eval_num_shards", int, 4)),
    defaults={"dupe_factor": None},
)
"""``phases[i]``: one instance phase, every setting of the instances job (``dupe_factor`` None:
10 for static masking, 1 for dynamic), its ``name`` and ``eval_num_shards``. The seed is the
run's, the casing the vocab's."""


@dataclass
class RunConfig:
    output: str = "bertprep-out"
    seed: int = DEFAULT_SEED
    inputs: InputsConfig = field(default_factory=InputsConfig)
    clean: CleanConfig = field(default_factory=CleanConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    phases: list[PhaseConfig] = field(default_factory=lambda: [PhaseConfig()])


def _check(value: Any, kind: Any, where: str) -> Any:
    """``value`` converted to ``kind`` (a dataclass, list[...], scalar or optional scalar)."""
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ConfigError(
                f"{where or 'config'}: expected a mapping, got {type(value).__name__}"
            )
        hints = get_type_hints(kind)
        known = [f.name for f in dataclasses.fields(kind)]
        out = {}
        aliases = ALIASES.get(where, {})
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            key = aliases.get(key, key)
            if key not in known and key in REMOVED.get(_section_of(where), {}):
                note = REMOVED[_section_of(where)][key]
                raise ConfigError(f"{path}: removed in an earlier version: {note}")
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"
                raise ConfigError(f"{path}: unknown key{hint}")
            out[key] = _check(item, hints[key], path)
        return kind(**out)
    origin = getattr(kind, "__origin__", None)
    if origin is list:
        (inner,) = kind.__args__
        if isinstance(value, str) and inner is str:
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return [_check(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    args = getattr(kind, "__args__", ())
    if type(None) in args:  # Optional scalar
        if value is None:
            return None
        kind = next(a for a in args if a is not type(None))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def _validate(config: RunConfig) -> RunConfig:
    if config.clean.dedup not in ("exact", "near", "none"):
        raise ConfigError("clean.dedup: must be exact, near or none")
    if config.clean.chunk_mb <= 0:
        raise ConfigError("clean.chunk_mb: must be positive")
    if not 0 < config.clean.near_threshold <= 1:
        raise ConfigError("clean.near_threshold: must lie in (0, 1]")
    if not 0 <= config.eval.fraction < 1:
        raise ConfigError("eval.fraction: must lie in [0, 1)")
    if not config.phases:
        raise ConfigError("phases: at least one phase is needed")
    names = [p.name for p in config.phases]
    if len(set(names)) != len(names):
        raise ConfigError(f"phases: names must differ, got {names}")
    for i, phase in enumerate(config.phases):
        if not phase.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"phases[{i}].name: letters, digits, - and _ only")
        if phase.masking not in MASKINGS:
            raise ConfigError(f"phases[{i}].masking: must be static or dynamic")
        if phase.input_mode not in INPUT_MODES:
            raise ConfigError(
                f"phases[{i}].input_mode: must be sentence-pairs, full-sentences or doc-sentences"
            )
        if phase.dupe_factor is None:
            phase.dupe_factor = 1 if phase.masking == "dynamic" else 10
        for key in (
            "max_seq_length",
            "max_predictions_per_seq",
            "dupe_factor",
            "num_shards",
            "eval_num_shards",
        ):
            value = getattr(phase, key)  # num_shards None: follows the data
            if value is not None and value < 1:
                raise ConfigError(f"phases[{i}].{key}: must be positive")
    if not any(getattr(config.inputs, k) for k in SOURCES):
        raise ConfigError("inputs: give at least one of wikipedia, books, jsonl, parquet")
    return config


def _set(data: dict, dotted: str, raw: str) -> None:
    keys = dotted.split(".")
    node: Any = data
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if key.isdigit() and isinstance(node, list):
            index = int(key)
            if index >= len(node):
                raise ConfigError(f"--set {dotted}: no element {index} in {'.'.join(keys[:i])}")
            if last:
                node[index] = yaml.safe_load(raw)
            else:
                node = node[index]
        else:
            if last:
                node[key] = yaml.safe_load(raw)
            else:
                node = node.setdefault(key, {})
                if not isinstance(node, dict | list):
                    raise ConfigError(f"--set {dotted}: {key} is not a section")


def load_run_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """The validated configuration from ``path`` (YAML) with ``key.path=value`` overrides.

    Relative input and vocab paths are taken relative to the config file's directory; the
    output stays relative to the working directory.
    """
    data: dict = {}
    base = Path(".")
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError as e:
            raise ConfigError(f"--config {path}: no such file") from e
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"--config {path}: cannot be read ({e})") from e
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        base = Path(path).resolve().parent
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item}: expected key.path=value")
        key, value = item.split("=", 1)
        _set(data, key.strip(), value)
    config = _validate(_check(data, RunConfig, ""))

    def resolve(p: str) -> str:
        return p if "://" in p or Path(p).is_absolute() else str(base / p)

    for kind in SOURCES:
        setattr(config.inputs, kind, [resolve(p) for p in getattr(config.inputs, kind)])
    if config.vocab.path:
        config.vocab.path = resolve(config.vocab.path)
    return config
