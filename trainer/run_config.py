"""A training run's settings, the model they resolve to, and the run record in ``OUT/trainer_config.json``.

The record holds the data sizes under the keys ``bertprep validate --trainer-config`` reads
(``max_seq_length``, ``max_predictions_per_seq``, ``vocab_size``), the model architecture, and the
training settings. Resuming from a directory's checkpoints when its record names another model or
other data sizes is refused before anything is built.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import tensorflow as tf

from trainer.input_pipeline import DataSpec, ShardConfigError, ShardInfo
from trainer.model_presets import ModelConfig, get_preset
from trainer.optimization import OptimizerConfig
from trainer.recipes import get_recipe
from transforms.seeding import DEFAULT_SEED

RECORD = "trainer_config.json"
RECORD_FORMAT = "bertprep.trainer/1"
TPU_STEPS_PER_LOOP = 100
"""``--steps-per-loop`` on TPU when not given: one host round trip per 100 steps (the default
``--log-every``). A call never runs past the next log, checkpoint or evaluation step, so smaller
``--log-every``/``--checkpoint-every`` still take effect."""


def setting_problems(
    value: Callable[[str], Any], name: Callable[[str], str] = lambda key: key
) -> list[str]:
    """What is wrong with the numeric training settings (empty when nothing).

    ``value(key)`` gives the setting of a TrainConfig field; ``name(key)`` says how the user wrote
    it (the field name by default; ``bertprep train`` passes its flags), so that the messages name
    what the user typed.
    """
    problems = []
    for key in ("batch_size", "steps", "checkpoint_every", "log_every"):
        if value(key) < 1:
            problems.append(f"{name(key)} must be at least 1, got {value(key)}")
    if value("steps_per_loop") is not None and value("steps_per_loop") < 1:
        problems.append(
            f"{name('steps_per_loop')} must be at least 1, got {value('steps_per_loop')}"
        )
    if value("stop_after") is not None and value("stop_after") < 1:
        problems.append(f"{name('stop_after')} must be at least 1, got {value('stop_after')}")
    warmup, steps = value("warmup_steps"), value("steps")
    if warmup < 0 or warmup > steps:
        problems.append(
            f"{name('warmup_steps')} must be in [0, {name('steps')}] = [0, {steps}], got {warmup}"
        )
    if value("learning_rate") <= 0:
        problems.append(f"{name('learning_rate')} must be positive, got {value('learning_rate')}")
    return problems


@dataclass
class TrainConfig:
    """Everything ``bertprep train`` can be told (the defaults are BERT-base phase 1's)."""

    data: list[str]
    out: str
    model: str = "base"
    model_overrides: dict = field(default_factory=dict)
    """ModelConfig fields to change after the preset (``max_position_embeddings``, ``dropout``...)."""
    batch_size: int = 256
    """Global batch size (split across replicas)."""
    steps: int = 1_000_000
    learning_rate: float = 1e-4
    warmup_steps: int = 10_000
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    clip_norm: float = 1.0
    recipe: str = "default"
    """``default`` or ``reference`` (google-research/bert's schedule, optimizer, head GELU); see
    ``trainer.recipes``."""
    spec: DataSpec = field(default_factory=DataSpec)
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    log_every: int = 100
    steps_per_loop: int | None = None
    """Train steps per host call; None: ``resolve_steps_per_loop`` (100 on TPU, 1 elsewhere)."""
    stop_after: int | None = None
    """Train at most this many steps in this call, then checkpoint and return (time-limited jobs,
    preemptible slices); the schedule still runs to ``steps``."""
    init_checkpoint: str | None = None
    eval_data: list[str] | None = None
    eval_every: int = 0
    eval_batches: int | None = None
    tpu: str | None = None
    gpus: int | None = None
    precision: str = "auto"
    initial_loss_scale: float = 2.0**15
    """fp16 only: the dynamic loss scale to start from (Keras' default)."""
    jit_compile: bool | None = None
    seed: int = DEFAULT_SEED
    shuffle_buffer: int = 10_000
    deterministic: bool | None = None
    progress: bool = True
    vocab: str | None = None
    """vocab.txt saved with the encoder (default: the manifest's, when readable and unchanged)."""
    save_encoder: bool = True
    synthetic: bool = False
    """Benchmark mode: repeat one real batch from memory (measures the model without input cost)."""

    def __post_init__(self) -> None:
        problems = setting_problems(lambda key: getattr(self, key))
        if problems:
            raise ValueError(problems[0])
        recipe = get_recipe(self.recipe)
        if not recipe.bias_correction and self.optimizer.lower() != "adamw":
            raise ValueError(f"the {recipe.name} recipe's optimizer is adamw, not {self.optimizer}")

    def optimizer_config(self) -> OptimizerConfig:
        return OptimizerConfig(
            name=self.optimizer,
            learning_rate=self.learning_rate,
            warmup_steps=self.warmup_steps,
            total_steps=self.steps,
            weight_decay=self.weight_decay,
            clip_norm=self.clip_norm,
            recipe=self.recipe,
        )


def resolve_steps_per_loop(requested: int | None, platform: str) -> int:
    """``requested``, else ``TPU_STEPS_PER_LOOP`` on TPU (each host round trip idles the TPU)
    and 1 elsewhere (a round trip costs little next to a GPU step; ``python -m trainer.benchmark
    --steps-per-loop`` measures it)."""
    if requested is not None:
        return requested
    return TPU_STEPS_PER_LOOP if platform == "tpu" else 1


def resolve_model(
    model: str, overrides: dict, info: ShardInfo | None, spec: DataSpec
) -> ModelConfig:
    """The preset with its vocabulary size from ``--vocab-size``, else the shards' manifest."""
    config = get_preset(model)
    vocab = overrides.get("vocabulary_size") or spec.vocab_size or (info and info.vocab_size)
    if not vocab:
        raise ShardConfigError(
            "the shards' vocabulary size is unknown (no manifest.json); pass --vocab-size"
        )
    return config.with_(**{**overrides, "vocabulary_size": int(vocab)})


def _path(out: str, name: str) -> str:
    return out.rstrip("/") + "/" + name


def read_record(directory: str) -> dict | None:
    """The run record of a training output directory, or None."""
    path = _path(directory, RECORD)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as f:
        return json.load(f)


def write_record(config: TrainConfig, model: ModelConfig, info: ShardInfo, extra: dict) -> None:
    """Writes ``OUT/trainer_config.json`` (atomically where the filesystem allows)."""
    record = {
        "format": RECORD_FORMAT,
        "max_seq_length": info.max_seq_length,
        "max_predictions_per_seq": info.max_predictions_per_seq,
        "masking": info.masking,
        "input_mode": info.input_mode,
        "next_sentence_prediction": info.nsp,
        "packing": {
            "max_instances_per_row": info.max_instances_per_row,
            "max_predictions_per_row": info.max_predictions_per_row,
        }
        if info.packed
        else None,
        "vocab_size": model.vocabulary_size,
        "model_name": config.model,
        "model": model.to_dict(),
        "training": {
            "data_patterns": list(config.data),
            "batch_size": config.batch_size,
            "steps": config.steps,
            "optimizer": asdict(config.optimizer_config()),
            "precision": config.precision,
            "seed": config.seed,
            "init_checkpoint": config.init_checkpoint,
            **extra,
        },
    }
    tf.io.gfile.makedirs(config.out)
    tmp = _path(config.out, RECORD + ".tmp")
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    tf.io.gfile.rename(tmp, _path(config.out, RECORD), overwrite=True)


def recorded_recipe(record: dict | None) -> str:
    """The recipe a run record names (records from before the switch: ``default``)."""
    if not record:
        return "default"
    return record.get("training", {}).get("optimizer", {}).get("recipe", "default")


def resume_conflicts(
    record: dict, model: ModelConfig, info: ShardInfo, recipe: str = "default"
) -> list[str]:
    """Why a run recorded in ``record`` cannot be resumed with this model, data and recipe."""
    problems = []
    if recorded_recipe(record) != recipe:
        problems.append(
            f"the output directory's run used --recipe {recorded_recipe(record)}, not {recipe} "
            "(its schedule, optimizer state and head would change mid-run)"
        )
    recorded = ModelConfig.from_dict(record.get("model", {}))
    if recorded != model:
        diff = {
            k: (v, getattr(model, k))
            for k, v in recorded.to_dict().items()
            if v != getattr(model, k)
        }
        problems.append(
            "the output directory holds a run of another model: "
            + ", ".join(f"{k} was {a}, now {b}" for k, (a, b) in diff.items())
        )
    recorded_nsp = record.get("next_sentence_prediction")
    if recorded_nsp is not None and recorded_nsp != info.nsp:
        problems.append(
            f"the output directory's run {'had' if recorded_nsp else 'had no'} an NSP head "
            f"(input_mode={record.get('input_mode')}), these shards are {info.input_mode} "
            f"({'with' if info.nsp else 'without'} next_sentence_labels); start in a new --out "
            "with --init-checkpoint"
        )
    for key in ("max_seq_length", "max_predictions_per_seq"):
        if record.get(key) not in (None, getattr(info, key)):
            problems.append(
                f"the output directory's run used {key}={record[key]}, these shards have "
                f"{getattr(info, key)}; start the next phase in a new --out with --init-checkpoint"
            )
    return problems
