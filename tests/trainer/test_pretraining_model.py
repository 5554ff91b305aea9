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


# --- Packed rows: the same logits, loss and update as the instances unpacked --------------------

PACK_SEQ, PACK_P, PACK_K, MASK_ID = 24, 3, 3, 4
LENGTHS = (10, 7, 13, 5, 9, 12)
GROUPS = [[0, 2], [1, 5], [3, 4]]
"""Six instances in three rows of two (23, 19 and 14 of 24 tokens; the third slot unused)."""


def _instances(vocab=300, seed=3) -> dict[str, np.ndarray]:
    """Six ``[CLS] A [SEP] B [SEP]`` instances of ``LENGTHS`` tokens, padded to 24, with 1-3
    masked positions each (ascending, [MASK] in the input) and NSP labels."""
    rng = np.random.default_rng(seed)
    n_inst = len(LENGTHS)
    ids = np.zeros((n_inst, PACK_SEQ), np.int32)
    mask = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    positions = np.zeros((n_inst, PACK_P), np.int32)
    labels = np.zeros((n_inst, PACK_P), np.int32)
    weights = np.zeros((n_inst, PACK_P), np.float32)
    for i, n in enumerate(LENGTHS):
        a = int(rng.integers(1, n - 3))
        ids[i, :n] = rng.integers(10, vocab, n)
        ids[i, [0, a + 1, n - 1]] = [2, 3, 3]
        mask[i, :n] = 1
        segments[i, a + 2 : n] = 1
        ordinary = [j for j in range(1, n - 1) if j != a + 1]
        chosen = np.sort(rng.choice(ordinary, 1 + i % PACK_P, replace=False))
        c = len(chosen)
        positions[i, :c], labels[i, :c], weights[i, :c] = chosen, ids[i, chosen], 1.0
        ids[i, chosen] = MASK_ID
    return {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": (np.arange(n_inst) % 2)[:, None].astype(np.int32),
    }


@pytest.fixture(scope="module")
def packed_case():
    from tests.trainer.packing import pack_by_hand
    from trainer.pretraining_model import model_inputs

    unpacked = _instances()
    packed = pack_by_hand(unpacked, GROUPS, PACK_K)
    config = MODEL.with_(num_layers=2, max_position_embeddings=PACK_SEQ)
    built = build_pretraining_model(config, packed=True)
    un_out = built.model(model_inputs(unpacked), training=False)
    pk_out = built.packed(model_inputs(packed), training=False)
    return built, unpacked, packed, un_out, pk_out


def _used(logits, weights) -> np.ndarray:
    """The logits of the used prediction slots, in row order."""
    logits = np.asarray(logits)
    return logits[np.asarray(weights) > 0]


def test_packed_rows_give_the_unpacked_logits(packed_case):
    built, unpacked, packed, un_out, pk_out = packed_case
    assert pk_out["mlm_logits"].shape == (3, PACK_K * PACK_P, 300)
    assert pk_out["nsp_logits"].shape == (3, PACK_K, 2)
    # Masked positions of the instances in row order = the packed slots' order.
    order = [i for group in GROUPS for i in group]
    un_mlm = _used(np.asarray(un_out["mlm_logits"])[order], unpacked["masked_lm_weights"][order])
    pk_mlm = _used(pk_out["mlm_logits"], packed["masked_lm_weights"])
    assert un_mlm.shape == pk_mlm.shape == (12, 300)
    np.testing.assert_allclose(pk_mlm, un_mlm, atol=1e-5, rtol=0)
    un_nsp = np.asarray(un_out["nsp_logits"])[order]
    pk_nsp = _used(pk_out["nsp_logits"], packed["next_sentence_weights"])
    np.testing.assert_allclose(pk_nsp, un_nsp, atol=1e-5, rtol=0)
    # The same loss: NSP is a mean over instances, not rows.
    un_sums, pk_sums = loss_sums(un_out, unpacked), loss_sums(pk_out, packed)
    assert float(pk_sums["examples"]) == float(un_sums["examples"]) == 6.0
    un_summary = summarize({k: float(v) for k, v in un_sums.items()})
    pk_summary = summarize({k: float(v) for k, v in pk_sums.items()})
    assert pk_summary == pytest.approx(un_summary, abs=1e-6)


def test_a_wrong_attention_mask_or_wrong_positions_change_the_logits(packed_case):
    """The check above tells: letting instances see each other, or numbering positions along
    the row instead of within each instance, moves the logits far beyond its tolerance."""
    from trainer.pretraining_model import packed_attention_mask, packed_encoder

    built, _, packed, _, pk_out = packed_case
    head = built.model.get_layer("mlm_head")
    ids, seg = packed["input_ids"], packed["segment_ids"]
    right_mask = packed_attention_mask(packed["instance_ids"])
    real = packed["input_mask"][:, None, :].repeat(PACK_SEQ, 1)  # every real token of the row
    row_positions = np.tile(np.arange(PACK_SEQ, dtype=np.int32), (3, 1))
    weights = packed["masked_lm_weights"]

    def logits(positions, mask):
        sequence = packed_encoder(built.backbone, ids, seg, positions, mask)
        return _used(head(sequence, packed["masked_lm_positions"]), weights)

    right = _used(pk_out["mlm_logits"], weights)
    np.testing.assert_allclose(logits(packed["position_ids"], right_mask), right, atol=1e-5)
    assert np.abs(logits(packed["position_ids"], real) - right).max() > 1e-3
    assert np.abs(logits(row_positions, right_mask) - right).max() > 1e-3


def test_one_packed_step_makes_the_unpacked_update(packed_case):
    import keras

    from trainer.optimization import PreReducedGradients
    from trainer.training import make_train_loop

    class SGD(PreReducedGradients, keras.optimizers.SGD):
        pass  # linear in the gradient: any difference in the gradients shows in the update

    built, unpacked, packed, _, _ = packed_case
    model = built.model
    init = model.get_weights()
    strategy = tf.distribute.get_strategy()

    def one_step(batch):
        model.set_weights(init)
        optimizer = SGD(learning_rate=0.5)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False)
        data = tf.data.Dataset.from_tensors(batch).repeat()
        loop = make_train_loop(model, optimizer, step, strategy, 1.0, packed_model=built.packed)
        sums = loop(iter(strategy.experimental_distribute_dataset(data)), tf.constant(1))
        return model.get_weights(), {k: float(v) for k, v in sums.items()}

    w_un, s_un = one_step(unpacked)
    w_pk, s_pk = one_step(packed)
    assert max(float(np.abs(a - b).max()) for a, b in zip(w_un, init, strict=True)) > 1e-3
    assert max(float(np.abs(a - b).max()) for a, b in zip(w_un, w_pk, strict=True)) < 1e-6
    for key in ("mlm_loss_sum", "mlm_weight", "nsp_loss_sum", "examples", "grad_norm", "tokens"):
        assert s_pk[key] == pytest.approx(s_un[key], rel=1e-5), key
    assert s_pk["examples"] == 6.0 and s_pk["tokens"] == float(sum(LENGTHS))
    model.set_weights(init)


def test_packed_model_under_mixed_precision_shares_the_variables():
    from tests.trainer.packing import pack_by_hand
    from trainer.pretraining_model import model_inputs

    config = MODEL.with_(max_position_embeddings=PACK_SEQ)
    built = build_pretraining_model(config, "mixed_bfloat16", packed=True)
    assert {id(v) for v in built.packed.trainable_variables} == {
        id(v) for v in built.model.trainable_variables
    }
    assert all(v.dtype == "float32" for v in built.packed.trainable_variables)
    packed = pack_by_hand(_instances(), GROUPS, PACK_K)
    out = built.forward(packed)(model_inputs(packed))
    assert out["mlm_logits"].dtype == "bfloat16" and out["nsp_logits"].shape == (3, PACK_K, 2)
    with pytest.raises(ValueError, match="packed rows need the packed model"):
        build_pretraining_model(config).forward(packed)
