"""Checkpoints: periodic saves with ``tf.train.CheckpointManager``, automatic resume from the
latest, and initialization of phase 2 from phase 1's weights.

A checkpoint holds the pretraining model (encoder and heads), the optimizer (slots and iteration
count, which drives the learning-rate schedule) and the step counter. ``--init-checkpoint`` restores
the model only: the next phase gets a fresh optimizer, schedule and step count.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import tensorflow as tf

from trainer.model_presets import ModelConfig
from trainer.run_config import read_record
from transforms.errors import UserError

CHECKPOINTS = "checkpoints"


class CheckpointError(UserError, ValueError):
    """A checkpoint cannot be found or does not match the model."""


def checkpoint_dir(out: str) -> str:
    return out.rstrip("/") + "/" + CHECKPOINTS


def find_checkpoint(path: str) -> str:
    """The checkpoint prefix named by ``path``: a run's output directory, its ``checkpoints/``
    directory, or a checkpoint prefix itself."""
    for candidate in (checkpoint_dir(path), path):
        if tf.io.gfile.isdir(candidate):
            latest = tf.train.latest_checkpoint(candidate)
            if latest:
                return latest
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise CheckpointError(f"no checkpoint found at {path}")


def check_init_compatible(path: str, model: ModelConfig, max_seq_length: int) -> None:
    """Clear errors when ``--init-checkpoint`` comes from a run whose model differs from this one
    (read from its ``trainer_config.json`` when there is one)."""
    record = read_record(path)
    if record is None or "model" not in record:
        return
    before = ModelConfig.from_dict(record["model"])
    if before.max_position_embeddings < max_seq_length:
        raise CheckpointError(
            f"{path} was trained with a position table of {before.max_position_embeddings}, too "
            f"small for max_seq_length {max_seq_length}: train phase 1 with "
            "max_position_embeddings covering every phase (BERT: 512)"
        )
    different = [
        f"{k}: {v} there, {getattr(model, k)} here"
        for k, v in before.to_dict().items()
        if k != "dropout" and v != getattr(model, k)
    ]
    if different:
        raise CheckpointError(f"{path} holds a different model ({'; '.join(different)})")


@dataclass
class Checkpointing:
    """The checkpoint object, its manager, and how training started."""

    checkpoint: tf.train.Checkpoint
    manager: tf.train.CheckpointManager
    step: tf.Variable
    restored_from: str | None = None
    initialized_from: str | None = None
    core: tf.train.Checkpoint | None = None
    """Model, optimizer and step only: what must match when resuming."""
    loss_scale: keras.optimizers.Optimizer | None = None

    def save(self, step: int) -> str:
        return self.manager.save(checkpoint_number=step)


def make_checkpointing(
    out: str,
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    step: tf.Variable,
    keep: int = 5,
) -> Checkpointing:
    """A checkpoint manager under ``OUT/checkpoints`` for the model, optimizer and step.

    Under fp16 the ``LossScaleOptimizer``'s state is saved beside the inner optimizer's, so a run
    can resume with another precision (the loss scale then starts afresh).
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    extra = {"loss_scale": optimizer} if inner is not optimizer else {}
    checkpoint = tf.train.Checkpoint(model=model, optimizer=inner, step=step, **extra)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir(out), max_to_keep=keep)
    core = tf.train.Checkpoint(model=model, optimizer=inner, step=step)
    return Checkpointing(checkpoint, manager, step, core=core, loss_scale=extra.get("loss_scale"))


def restore_latest(state: Checkpointing) -> bool:
    """Restores the latest checkpoint of the run, if any (model, optimizer, step)."""
    latest = state.manager.latest_checkpoint
    if not latest:
        return False
    try:
        (state.core or state.checkpoint).restore(latest).assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:
        raise CheckpointError(f"cannot resume from {latest}: {e}") from e
    if state.loss_scale is not None:
        tf.train.Checkpoint(loss_scale=state.loss_scale).restore(latest).expect_partial()
    state.restored_from = latest
    return True


def restore_model(model: keras.Model, path: str) -> str:
    """Restores only the model's weights from a checkpoint (``find_checkpoint`` rules)."""
    prefix = find_checkpoint(path)
    try:
        status = tf.train.Checkpoint(model=model).restore(prefix)
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:
        raise CheckpointError(f"cannot initialize the model from {prefix}: {e}") from e
    return prefix
