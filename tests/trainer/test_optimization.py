"""AdamW/LAMB with the BERT schedule: warmup then linear decay, no decay on LayerNorm and biases."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.conftest import SMALL
from trainer.model_presets import get_preset
from trainer.optimization import (
    OptimizerConfig,
    WarmupLinearDecay,
    build_optimizer,
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
