"""The BERT pretraining model: keras-hub's ``BertBackbone`` plus the masked-LM and NSP heads.

The masked-LM head gathers the encoder's output at ``masked_lm_positions``, applies dense + GELU
(exact; tanh-approximated as in google-research/bert with ``head_activation="gelu_approximate"``)
+ LayerNorm and projects back onto the vocabulary with the transposed token embedding (weights
tied to the input embedding, plus an output bias), as in google-research/bert. The next-sentence
head is a two-way dense layer on the pooled ``[CLS]`` output. Losses and accuracies are returned as
*sums* (with their denominators) so that they add up exactly across replicas and batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import tensorflow as tf

from trainer.model_presets import ModelConfig

MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_positions")


def _initializer() -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=0.02)


@dataclass
class PretrainingModel:
    """The Keras model that maps the four inputs to ``mlm_logits``/``nsp_logits``, and its encoder."""

    model: keras.Model
    backbone: keras.Model


HEAD_ACTIVATIONS = ("gelu", "gelu_approximate")


@keras.saving.register_keras_serializable(package="bertprep")
def gelu_approximate(x):
    """``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``: google-research/bert's ``gelu``."""
    return keras.activations.gelu(x, approximate=True)


def head_activation_fn(name: str):
    """``gelu``: exact (``0.5·x·(1 + erf(x/√2))``); ``gelu_approximate``: the tanh form."""
    if name == "gelu":
        return keras.activations.gelu
    if name == "gelu_approximate":
        return gelu_approximate
    raise ValueError(
        f"unknown head activation {name!r}; choose one of {', '.join(HEAD_ACTIVATIONS)}"
    )


def build_pretraining_model(
    config: ModelConfig,
    dtype: str | None = None,
    head_activation: str = "gelu",
    nsp: bool = True,
) -> PretrainingModel:
    """A freshly initialized BERT encoder with tied MLM head and (``nsp``) NSP head.

    Without ``nsp`` (inputs of the full-sentences and doc-sentences modes) the model has no NSP
    head and outputs ``mlm_logits`` only.

    ``dtype`` is a Keras dtype policy name (``"mixed_bfloat16"``, ``"mixed_float16"`` or None for
    float32); variables stay float32 under the mixed policies. ``head_activation`` is the MLM head
    transform's (``HEAD_ACTIVATIONS``; the encoder's is keras-hub's tanh GELU either way).
    """
    import keras_hub

    backbone = keras_hub.models.BertBackbone(**config.backbone_kwargs(), dtype=dtype)
    mlm_head = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding,
        intermediate_activation=head_activation_fn(head_activation),
        layer_norm_epsilon=1e-12,
        kernel_initializer=_initializer(),
        dtype=backbone.dtype_policy,
        name="mlm_head",
    )
    inputs = {
        "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
        "padding_mask": keras.Input(shape=(None,), dtype="int32", name="padding_mask"),
        "mask_positions": keras.Input(shape=(None,), dtype="int32", name="mask_positions"),
    }
    encoded = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    outputs = {"mlm_logits": mlm_head(encoded["sequence_output"], inputs["mask_positions"])}
    if nsp:
        nsp_head = keras.layers.Dense(
            2, kernel_initializer=_initializer(), dtype=backbone.dtype_policy, name="nsp_head"
        )
        outputs["nsp_logits"] = nsp_head(encoded["pooled_output"])
    model = keras.Model(inputs=inputs, outputs=outputs, name="bert_pretraining")
    return PretrainingModel(model=model, backbone=backbone)


def model_inputs(batch: dict) -> dict:
    """The model's inputs from a batch with the feature contract's names."""
    return {
        "token_ids": batch["input_ids"],
        "segment_ids": batch["segment_ids"],
        "padding_mask": batch["input_mask"],
        "mask_positions": batch["masked_lm_positions"],
    }


SUM_KEYS = (
    "mlm_loss_sum",
    "mlm_correct",
    "mlm_weight",
    "nsp_loss_sum",
    "nsp_correct",
    "examples",
)


def loss_sums(outputs: dict, batch: dict) -> dict[str, tf.Tensor]:
    """Weighted sums for one batch (float32 scalars, see ``SUM_KEYS``).

    Masked LM: cross-entropy and hits at each prediction slot weighted by ``masked_lm_weights``
    (padding slots weigh 0). NSP: cross-entropy and hits per example; 0 when the model has no NSP
    head (``outputs`` without ``nsp_logits``), so the objective is the MLM loss alone.
    """
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    ids = tf.cast(batch["masked_lm_ids"], tf.int32)
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)
    mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    if "nsp_logits" not in outputs:
        zero = tf.constant(0.0)
        return {
            "mlm_loss_sum": tf.reduce_sum(mlm_nll * weights),
            "mlm_correct": tf.reduce_sum(mlm_hit * weights),
            "mlm_weight": tf.reduce_sum(weights),
            "nsp_loss_sum": zero,
            "nsp_correct": zero,
            "examples": tf.cast(tf.shape(ids)[0], tf.float32),
        }
    nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
    labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])
    nsp_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=nsp_logits)
    nsp_hit = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels), tf.float32)
    return {
        "mlm_loss_sum": tf.reduce_sum(mlm_nll * weights),
        "mlm_correct": tf.reduce_sum(mlm_hit * weights),
        "mlm_weight": tf.reduce_sum(weights),
        "nsp_loss_sum": tf.reduce_sum(nsp_nll),
        "nsp_correct": tf.reduce_sum(nsp_hit),
        "examples": tf.cast(tf.shape(labels)[0], tf.float32),
    }


def objective(sums: dict, mlm_weight_total, examples_total) -> tf.Tensor:
    """The pretraining loss: weighted mean MLM loss + mean NSP loss.

    The totals are the denominators over the whole (global) batch, so that the per-replica
    objectives sum to the global one and their gradients add up exactly.
    """
    mlm = sums["mlm_loss_sum"] / (mlm_weight_total + 1e-5)
    nsp = sums["nsp_loss_sum"] / tf.maximum(examples_total, 1.0)
    return mlm + nsp


def summarize(sums: dict[str, float]) -> dict[str, float]:
    """Losses and accuracies from accumulated sums (plain floats)."""
    mlm_w = max(float(sums["mlm_weight"]), 1e-9)
    n = max(float(sums["examples"]), 1e-9)
    mlm_loss = float(sums["mlm_loss_sum"]) / mlm_w
    nsp_loss = float(sums["nsp_loss_sum"]) / n
    return {
        "loss": mlm_loss + nsp_loss,
        "mlm_loss": mlm_loss,
        "mlm_accuracy": float(sums["mlm_correct"]) / mlm_w,
        "nsp_loss": nsp_loss,
        "nsp_accuracy": float(sums["nsp_correct"]) / n,
    }
