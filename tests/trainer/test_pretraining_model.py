"""Presets, the keras-hub encoder with tied MLM head and NSP head, and the weighted losses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.conftest import SMALL
from trainer.model_presets import PRESETS, ModelConfig, get_preset
from trainer.pretraining_model import build_pretraining_model, loss_sums, summarize
from trainer.recipes import get_recipe

MODEL = get_preset("tiny").with_(**SMALL, vocabulary_size=300, dropout=0.0)


def test_presets_are_the_bert_release_sizes():
    sizes = {
        k: (c.num_layers, c.hidden_dim, c.num_heads, c.intermediate_dim) for k, c in PRESETS.items()
    }
    assert sizes == {
        "tiny": (2, 128, 2, 512),
        "mini": (4, 256, 4, 1024),
        "small": (4, 512, 8, 2048),
        "medium": (8, 512, 8, 2048),
        "base": (12, 768, 12, 3072),
        "large": (24, 1024, 16, 4096),
    }
    assert get_preset("bert_base") == get_preset("BERT-Base") == PRESETS["base"]
    assert PRESETS["base"].max_position_embeddings == 512
    with pytest.raises(ValueError, match="unknown model 'huge'"):
        get_preset("huge")
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(num_layers=1, hidden_dim=100, num_heads=3, intermediate_dim=10)


def _inputs(batch=3, seq=12, preds=4, vocab=300, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(5, vocab, (batch, seq)).astype("int32"),
        "segment_ids": np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch, 0).astype(
            "int32"
        ),
        "padding_mask": np.ones((batch, seq), "int32"),
        "mask_positions": np.sort(rng.choice(np.arange(1, seq), (batch, preds)), 1).astype("int32"),
    }


def test_mlm_head_is_tied_to_the_token_embedding():
    built = build_pretraining_model(MODEL)
    model, backbone = built.model, built.backbone
    x = _inputs()
    out = model(x)
    assert out["mlm_logits"].shape == (3, 4, 300) and out["nsp_logits"].shape == (3, 2)
    # No separate output matrix: besides its bias, the head's only vocabulary-sized weight is the
    # encoder's token embedding itself (one variable, trained once).
    head = model.get_layer("mlm_head")
    vocab_sized = [w for w in head.weights if 300 in tuple(w.shape)]
    assert sorted(tuple(w.shape) for w in vocab_sized) == [(300,), (300, 64)]
    assert any(w is backbone.token_embedding.embeddings for w in vocab_sized)
    paths = [v.path for v in model.trainable_variables]
    assert paths.count("token_embedding/embeddings") == 1
    # Recompute the logits by hand: gather → dense+gelu → LayerNorm → E^T + b.
    seq = backbone({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")})[
        "sequence_output"
    ]
    gathered = tf.gather(seq, x["mask_positions"], batch_dims=1)
    h = head._intermediate_layer_norm(head._intermediate_dense(gathered))
    embedding = backbone.token_embedding.embeddings
    expected = tf.matmul(h, embedding, transpose_b=True) + head._bias
    np.testing.assert_allclose(out["mlm_logits"], expected, atol=1e-5)
    # Changing the input embedding changes the output projection.
    embedding.assign(embedding * 2.0)
    assert not np.allclose(model(x)["mlm_logits"], out["mlm_logits"])
    # NSP reads the pooled [CLS] output.
    pooled = backbone({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    nsp = model.get_layer("nsp_head")(pooled["pooled_output"])
    np.testing.assert_allclose(model(x)["nsp_logits"], nsp, atol=1e-5)


def test_losses_are_weighted_by_masked_lm_weights():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    batch = {
        "masked_lm_ids": np.array([[1, 2, 0], [3, 0, 0]]),
        "masked_lm_weights": np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], "float32"),
        "next_sentence_labels": np.array([[0], [1]]),
    }
    nsp_logits = np.array([[2.0, 0.0], [3.0, 0.0]], "float32")
    sums = {
        k: float(v)
        for k, v in loss_sums({"mlm_logits": logits, "nsp_logits": nsp_logits}, batch).items()
    }
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = [-log_p[0, 0, 1], -log_p[0, 1, 2], -log_p[1, 0, 3]]
    assert sums["mlm_weight"] == 3.0 and sums["examples"] == 2.0
    assert sums["mlm_loss_sum"] == pytest.approx(sum(nll), rel=1e-5)
    hits = [logits[0, 0].argmax() == 1, logits[0, 1].argmax() == 2, logits[1, 0].argmax() == 3]
    assert sums["mlm_correct"] == sum(hits)
    assert sums["nsp_correct"] == 1.0  # the first is right, the second wrong
    # Padding slots (weight 0) do not count, whatever their ids and logits.
    batch2 = dict(batch, masked_lm_ids=np.array([[1, 2, 5], [3, 6, 4]]))
    logits2 = logits.copy()
    logits2[0, 2] = 100.0
    sums2 = loss_sums({"mlm_logits": logits2, "nsp_logits": nsp_logits}, batch2)
    assert float(sums2["mlm_loss_sum"]) == pytest.approx(sums["mlm_loss_sum"], rel=1e-6)
    summary = summarize(sums)
    assert summary["mlm_loss"] == pytest.approx(sum(nll) / 3, rel=1e-5)
    assert summary["nsp_accuracy"] == 0.5
    assert summary["loss"] == pytest.approx(summary["mlm_loss"] + summary["nsp_loss"])


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """google-research/bert's ``modeling.gelu``."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(
    ("recipe", "formula"), [("default", _gelu_exact), ("reference", _gelu_tanh)]
)
def test_mlm_head_transform_activation_follows_the_recipe(recipe, formula):
    model = build_pretraining_model(MODEL, head_activation=get_recipe(recipe).head_activation).model
    dense = model.get_layer("mlm_head")._intermediate_dense
    x = np.linspace(-5.0, 5.0, 201).astype("float32")
    np.testing.assert_allclose(np.asarray(dense.activation(x)), formula(x), atol=2e-6)
    # The two forms differ by more than that tolerance (the check tells them apart).
    assert np.abs(_gelu_exact(x) - _gelu_tanh(x)).max() > 1e-4
    with pytest.raises(ValueError, match="unknown head activation"):
        build_pretraining_model(MODEL, head_activation="relu")
