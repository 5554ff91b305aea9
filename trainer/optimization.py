"""The BERT recipe's optimizer: AdamW (or LAMB), linear warmup then linear decay, weight decay
not applied to LayerNorm parameters and biases. Gradient clipping is done by the train step on the
all-reduced gradients (see ``trainer.training``), so the optimizer itself does not clip.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import tensorflow as tf

NO_DECAY_NAMES = ("gamma", "beta", "bias")
"""Variable names excluded from weight decay: LayerNorm scale/offset, every bias (incl. the MLM
head's ``output_bias``)."""


@keras.saving.register_keras_serializable(package="bertprep")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """``peak * step / warmup`` for ``step < warmup``, then linear from ``peak`` to ``end`` at
    ``total_steps`` (constant ``end`` after)."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, end: float = 0.0):
        if total_steps < 1 or warmup_steps < 0:
            raise ValueError("total_steps must be >= 1 and warmup_steps >= 0")
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.end = float(end)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        warm = self.peak * step / warmup
        span = float(max(self.total_steps - self.warmup_steps, 1))
        frac = tf.clip_by_value((step - self.warmup_steps) / span, 0.0, 1.0)
        decay = self.peak + (self.end - self.peak) * frac
        if self.warmup_steps == 0:
            return decay
        return tf.where(step < self.warmup_steps, warm, decay)

    def get_config(self) -> dict:
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "end": self.end,
        }


@dataclass(frozen=True)
class OptimizerConfig:
    """Optimizer settings (BERT: AdamW, lr 1e-4, 10k warmup, weight decay 0.01, clip 1.0)."""

    name: str = "adamw"
    learning_rate: float = 1e-4
    warmup_steps: int = 10_000
    total_steps: int = 1_000_000
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float = 1.0


def no_decay_variables(model: keras.Model) -> list:
    """Variables of LayerNormalization layers and biases (by name) in ``model``."""
    excluded = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.LayerNormalization):
            excluded.extend(layer.weights)
    excluded.extend(v for v in model.trainable_variables if "bias" in v.name)
    seen, unique = set(), []
    for v in excluded:
        if id(v) not in seen:
            seen.add(id(v))
            unique.append(v)
    return unique


def build_optimizer(
    config: OptimizerConfig, model: keras.Model
) -> tuple[keras.optimizers.Optimizer, WarmupLinearDecay]:
    """The optimizer (not yet built) with its schedule; call inside the strategy's scope.

    ``lamb``: Keras' LAMB with the same decoupled weight decay and exclusions (its layer-wise trust
    ratio applies to every variable, as in Keras).
    """
    schedule = WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.total_steps)
    common = dict(
        learning_rate=schedule,
        weight_decay=config.weight_decay or None,
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
    )
    name = config.name.lower()
    if name == "adamw":
        optimizer = keras.optimizers.AdamW(**common)
    elif name == "lamb":
        optimizer = keras.optimizers.Lamb(**common)
    else:
        raise ValueError(f"unknown optimizer {config.name!r} (adamw or lamb)")
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(
            var_list=no_decay_variables(model), var_names=list(NO_DECAY_NAMES)
        )
    return optimizer, schedule


def uses_weight_decay(optimizer: keras.optimizers.Optimizer, variable) -> bool:
    """Whether ``optimizer`` applies weight decay to ``variable``."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return inner.weight_decay is not None and inner._use_weight_decay(variable)
