"""AdamW/LAMB with the BERT schedule: warmup then linear decay, no decay on LayerNorm and biases;
the reference recipe's schedule and AdamWeightDecay against google-research/bert's formulas."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.conftest import SMALL
from trainer.model_presets import get_preset
from trainer.optimization import (
    AdamWeightDecay,
    OptimizerConfig,
    ReferenceWarmupDecay,
    WarmupLinearDecay,
    build_optimizer,
    build_schedule,
    uses_weight_decay,
)
from trainer.pretraining_model import build_pretraining_model

MODEL = get_preset("tiny").with_(**SMALL, vocabulary_size=500)


def test_schedule_warms_up_then_decays_linearly():
    schedule = WarmupLinearDecay(peak=1e-3, warmup_steps=10, total_steps=110)
    values = {s: float(schedule(s)) for s in (0, 1, 5, 10, 60, 110, 200)}
    assert values[0] == 0.0
    assert values[1] == pytest.approx(1e-4)
    assert values[5] == pytest.approx(5e-4)
    assert values[10] == pytest.approx(1e-3)
    assert values[60] == pytest.approx(5e-4)
    assert values[110] == pytest.approx(0.0, abs=1e-12)
    assert values[200] == pytest.approx(0.0, abs=1e-12)
    no_warmup = WarmupLinearDecay(peak=2.0, warmup_steps=0, total_steps=4)
    assert [float(no_warmup(s)) for s in range(5)] == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])
    assert (
        WarmupLinearDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()
    )


def _decay_step(name: str):
    model = build_pretraining_model(MODEL).model
    config = OptimizerConfig(
        name=name, learning_rate=0.1, warmup_steps=0, total_steps=10, weight_decay=0.5
    )
    optimizer, _ = build_optimizer(config, model)
    before = [v.numpy().copy() for v in model.trainable_variables]
    # Zero gradients: the Adam/LAMB update is zero, only decoupled weight decay moves weights.
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in model.trainable_variables])
    return model, optimizer, before


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_biases(name):
    model, optimizer, before = _decay_step(name)
    layer_norm_ids = {
        id(w)
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.LayerNormalization)
        for w in layer.weights
    }
    kinds = {"decayed": [], "kept": []}
    for variable, old in zip(model.trainable_variables, before, strict=True):
        excluded = id(variable) in layer_norm_ids or "bias" in variable.name
        moved = not np.allclose(variable.numpy(), old)
        assert uses_weight_decay(optimizer, variable) == (not excluded), variable.path
        if excluded:
            assert not moved, variable.path
            kinds["kept"].append(variable.path)
        else:
            # w ← w − lr·wd·w
            np.testing.assert_allclose(variable.numpy(), old * (1 - 0.1 * 0.5), rtol=1e-5)
            kinds["decayed"].append(variable.path)
    kept = " ".join(kinds["kept"])
    assert "embeddings_layer_norm/gamma" in kept and "mlm_head/output_bias" in kept
    assert "mlm_head/intermediate_layer_norm/beta" in kept and "attention_output/bias" in kept
    decayed = " ".join(kinds["decayed"])
    assert "token_embedding/embeddings" in decayed and "query/kernel" in decayed


def test_unknown_optimizer_is_refused():
    model = build_pretraining_model(MODEL).model
    with pytest.raises(ValueError, match="unknown optimizer"):
        build_optimizer(OptimizerConfig(name="sgd"), model)


def _reference_rate(step: int, peak: float, warmup: int, total: int) -> float:
    """google-research/bert's ``create_optimizer``: polynomial decay (power 1, end 0) on the
    global step, replaced by ``peak * step / warmup`` while ``step < warmup``."""
    decayed = peak * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


def test_reference_schedule_is_google_research_berts():
    peak, warmup, total = 1e-4, 10_000, 1_000_000
    reference = build_schedule(
        OptimizerConfig(
            learning_rate=peak, warmup_steps=warmup, total_steps=total, recipe="reference"
        )
    )
    default = build_schedule(
        OptimizerConfig(learning_rate=peak, warmup_steps=warmup, total_steps=total)
    )
    assert isinstance(reference, ReferenceWarmupDecay)
    assert isinstance(default, WarmupLinearDecay)
    steps = (0, warmup // 2, warmup - 1, warmup, 505_000, total - 1, total, total + 10)
    for step in steps:
        expected = _reference_rate(step, peak, warmup, total)
        assert float(reference(step)) == pytest.approx(expected, rel=1e-6, abs=1e-14), step
    assert float(reference(warmup // 2)) == pytest.approx(peak / 2)
    assert float(reference(warmup)) == pytest.approx(peak * (1 - warmup / total))  # not the peak
    assert float(reference(505_000)) == pytest.approx(peak * 0.495)
    # The same warmup; after it the default is total / (total - warmup) times the reference.
    for step in (0, warmup // 2):
        assert float(default(step)) == pytest.approx(float(reference(step)), abs=1e-14)
    for step in (warmup, 505_000, total - 1):
        ratio = float(default(step)) / float(reference(step))
        assert ratio == pytest.approx(total / (total - warmup), rel=1e-4), step
    no_warmup = ReferenceWarmupDecay(peak=2.0, warmup_steps=0, total_steps=4)
    assert [float(no_warmup(s)) for s in range(5)] == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])
    restored = ReferenceWarmupDecay.from_config(reference.get_config())
    assert restored.get_config() == reference.get_config()


def _two_variable_model() -> keras.Model:
    inputs = keras.Input(shape=(3,))
    hidden = keras.layers.Dense(4, name="dense")(inputs)
    outputs = keras.layers.LayerNormalization(name="layer_norm")(hidden)
    return keras.Model(inputs, outputs)


def _reference_adam_weight_decay(weights, grads, decayed, rate, wd, b1=0.9, b2=0.999, eps=1e-6):
    """google-research/bert's ``AdamWeightDecayOptimizer.apply_gradients`` in numpy, over steps:
    no bias correction; ``wd * w`` added to the update of decayed variables only."""
    weights = [w.astype(np.float64) for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for step, step_grads in enumerate(grads):
        lr = rate(step)
        for i, g in enumerate(step_grads):
            m[i] = b1 * m[i] + (1.0 - b1) * g
            v[i] = b2 * v[i] + (1.0 - b2) * g * g
            update = m[i] / (np.sqrt(v[i]) + eps)
            if decayed[i]:
                update = update + wd * weights[i]
            weights[i] = weights[i] - lr * update
    return weights


def test_reference_optimizer_is_adam_weight_decay_without_bias_correction():
    peak, warmup, total, wd = 0.05, 2, 6, 0.3
    start = [np.linspace(-1, 1, 12).reshape(3, 4), np.full(4, 0.5), np.full(4, 1.5)]
    start = [w.astype("float32") for w in [*start, np.full(4, -0.2)]]
    results = {}
    for recipe in ("reference", "default"):
        model = _two_variable_model()
        model.set_weights(start)
        initial = [w.copy() for w in model.get_weights()]
        config = OptimizerConfig(
            learning_rate=peak,
            warmup_steps=warmup,
            total_steps=total,
            weight_decay=wd,
            recipe=recipe,
        )
        optimizer, _ = build_optimizer(config, model)
        assert isinstance(optimizer, AdamWeightDecay) == (recipe == "reference")
        grad_rng = np.random.default_rng(7)
        grads = [[grad_rng.normal(scale=0.1, size=w.shape) for w in initial] for _ in range(total)]
        for step_grads in grads:
            optimizer.apply_gradients(
                [
                    (tf.constant(g, tf.float32), v)
                    for g, v in zip(step_grads, model.trainable_variables, strict=True)
                ]
            )
        results[recipe] = (model.get_weights(), initial, grads, model, optimizer)

    weights, initial, grads, model, optimizer = results["reference"]
    decayed = [uses_weight_decay(optimizer, v) for v in model.trainable_variables]
    assert decayed == [True, False, False, False]  # kernel; its bias, LayerNorm gamma and beta
    expected = _reference_adam_weight_decay(
        initial, grads, decayed, lambda s: _reference_rate(s, peak, warmup, total), wd
    )
    for got, want in zip(weights, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # Keras' AdamW (the default recipe; bias-corrected, its own schedule) lands elsewhere.
    default_weights = results["default"][0]
    assert max(np.abs(a - b).max() for a, b in zip(default_weights, weights, strict=True)) > 1e-2


def test_reference_recipe_has_no_lamb():
    model = build_pretraining_model(MODEL).model
    with pytest.raises(ValueError, match="reference recipe's optimizer is adamw"):
        build_optimizer(OptimizerConfig(name="lamb", recipe="reference"), model)
    with pytest.raises(ValueError, match="unknown recipe"):
        build_optimizer(OptimizerConfig(recipe="bert"), model)
