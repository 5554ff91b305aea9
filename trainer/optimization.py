"""The BERT recipe's optimizer: AdamW (or LAMB), linear warmup then linear decay, weight decay
not applied to LayerNorm parameters and biases. Gradient clipping is done by the train step on the
all-reduced gradients (see ``trainer.training``), so the optimizer itself does not clip.

The train step all-reduces the gradients itself (the clipping needs the summed gradients), so the
optimizers here skip Keras' own all-reduce in ``apply_gradients``: with several replicas the
gradients cross the interconnect once per step, not twice. ``--recipe reference`` switches the
schedule to google-research/bert's and the optimizer to its ``AdamWeightDecay`` (no bias
correction); see ``trainer.recipes``.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import tensorflow as tf
from keras import ops

from trainer.recipes import get_recipe

NO_DECAY_NAMES = ("gamma", "beta", "bias")
"""Variable names excluded from weight decay: LayerNorm scale/offset, every bias (incl. the MLM
head's ``output_bias``)."""

if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):  # pragma: no cover
    raise ImportError(
        f"Keras {keras.__version__}'s TensorFlow optimizer has no _all_reduce_sum_gradients: "
        "trainer.optimization needs updating (gradients would be all-reduced twice)"
    )


class _WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A schedule with a linear warmup to ``peak`` over ``warmup_steps``, ``total_steps`` long."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        if total_steps < 1 or warmup_steps < 0:
            raise ValueError("total_steps must be >= 1 and warmup_steps >= 0")
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)

    def get_config(self) -> dict:
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }


@keras.saving.register_keras_serializable(package="bertprep")
class WarmupLinearDecay(_WarmupSchedule):
    """``peak * step / warmup`` for ``step < warmup``, then linear from ``peak`` to ``end`` at
    ``total_steps`` (constant ``end`` after). The default recipe's schedule."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, end: float = 0.0):
        super().__init__(peak, warmup_steps, total_steps)
        self.end = float(end)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        warm = self.peak * step / warmup
        span = float(max(self.total_steps - self.warmup_steps, 1))
        # Steps left over the span (not 1 - steps done / span): exact near the end in float32.
        left = tf.clip_by_value(float(self.total_steps) - step, 0.0, span)
        decay = self.end + (self.peak - self.end) * left / span
        if self.warmup_steps == 0:
            return decay
        return tf.where(step < self.warmup_steps, warm, decay)

    def get_config(self) -> dict:
        return {**super().get_config(), "end": self.end}


@keras.saving.register_keras_serializable(package="bertprep")
class ReferenceWarmupDecay(_WarmupSchedule):
    """google-research/bert's schedule, on the global step ``step`` (updates done so far):
    ``peak * step / warmup`` for ``step < warmup``, else ``peak * (1 - min(step, total) / total)``
    (polynomial decay of power 1 to 0 at ``total_steps``, which the warmup overrides)."""

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        # (total - step) / total rather than 1 - step / total: exact near the end in float32.
        left = float(self.total_steps) - tf.minimum(step, float(self.total_steps))
        decay = self.peak * left / float(self.total_steps)
        if self.warmup_steps == 0:
            return decay
        warm = self.peak * step / float(self.warmup_steps)
        return tf.where(step < self.warmup_steps, warm, decay)


class PreReducedGradients:
    """Mixin: the gradients handed to ``apply_gradients`` are already summed over the replicas
    (by the train step), so Keras' all-reduce of them is skipped (each replica applies its copy).

    Keras 3 has no ``skip_gradients_aggregation``; this overrides the TensorFlow backend
    optimizer's ``_all_reduce_sum_gradients`` (the one place it reduces).
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


@keras.saving.register_keras_serializable(package="bertprep")
class AdamW(PreReducedGradients, keras.optimizers.AdamW):
    """Keras' AdamW (bias-corrected) on pre-reduced gradients."""


@keras.saving.register_keras_serializable(package="bertprep")
class Lamb(PreReducedGradients, keras.optimizers.Lamb):
    """Keras' LAMB on pre-reduced gradients."""


@keras.saving.register_keras_serializable(package="bertprep")
class AdamWeightDecay(PreReducedGradients, keras.optimizers.AdamW):
    """google-research/bert's ``AdamWeightDecayOptimizer`` on pre-reduced gradients.

    Per variable, with gradient ``g`` and rate ``lr``: ``m ← β1·m + (1−β1)·g``,
    ``v ← β2·v + (1−β2)·g²`` (no bias correction), ``w ← w − lr·(m / (√v + ε) + wd·w)``, the
    ``wd·w`` term only for variables not excluded from weight decay. The decay is Keras'
    decoupled one (``w ← w − lr·wd·w`` before the moment update, on the same ``w``): the same
    update. Slots are AdamW's (``momentum``, ``velocity``).
    """

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign(
            m, ops.add(ops.multiply(m, self.beta_1), ops.multiply(gradient, 1 - self.beta_1))
        )
        self.assign(
            v,
            ops.add(
                ops.multiply(v, self.beta_2), ops.multiply(ops.square(gradient), 1 - self.beta_2)
            ),
        )
        self.assign_sub(
            variable, ops.multiply(lr, ops.divide(m, ops.add(ops.sqrt(v), self.epsilon)))
        )


@dataclass(frozen=True)
class OptimizerConfig:
    """Optimizer settings (BERT: AdamW, lr 1e-4, 10k warmup, weight decay 0.01, clip 1.0).

    ``recipe``: ``default`` or ``reference`` (``trainer.recipes``): the schedule and whether Adam
    corrects its moments' bias.
    """

    name: str = "adamw"
    learning_rate: float = 1e-4
    warmup_steps: int = 10_000
    total_steps: int = 1_000_000
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float = 1.0
    recipe: str = "default"


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


def build_schedule(config: OptimizerConfig) -> keras.optimizers.schedules.LearningRateSchedule:
    """The recipe's schedule: rate as a function of the number of updates already applied."""
    recipe = get_recipe(config.recipe)
    if recipe.schedule == "global_step":
        return ReferenceWarmupDecay(config.learning_rate, config.warmup_steps, config.total_steps)
    return WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.total_steps)


def build_optimizer(
    config: OptimizerConfig, model: keras.Model
) -> tuple[keras.optimizers.Optimizer, keras.optimizers.schedules.LearningRateSchedule]:
    """The optimizer (not yet built) with its schedule; call inside the strategy's scope.

    ``lamb``: Keras' LAMB with the same decoupled weight decay and exclusions (its layer-wise trust
    ratio applies to every variable, as in Keras); not part of the reference recipe.
    """
    recipe = get_recipe(config.recipe)
    schedule = build_schedule(config)
    common = dict(
        learning_rate=schedule,
        weight_decay=float(config.weight_decay),  # AdamW wants a float; 0: nothing excluded
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
    )
    name = config.name.lower()
    if name == "adamw":
        optimizer = AdamW(**common) if recipe.bias_correction else AdamWeightDecay(**common)
    elif name == "lamb":
        if not recipe.bias_correction:
            raise ValueError(f"the {recipe.name} recipe's optimizer is adamw, not lamb")
        optimizer = Lamb(**common)
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
    return bool(inner.weight_decay) and inner._use_weight_decay(variable)
