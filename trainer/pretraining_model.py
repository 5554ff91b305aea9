"""The BERT pretraining model: keras-hub's ``BertBackbone`` plus the masked-LM and NSP heads.

The masked-LM head gathers the encoder's output at ``masked_lm_positions``, applies dense + GELU
(exact; tanh-approximated as in google-research/bert with ``head_activation="gelu_approximate"``)
+ LayerNorm and projects back onto the vocabulary with the transposed token embedding (weights
tied to the input embedding, plus an output bias), as in google-research/bert. The next-sentence
head is a two-way dense layer on the pooled ``[CLS]`` output. Losses and accuracies are returned as
*sums* (with their denominators) so that they add up exactly across replicas and batches.

**Packed rows** (``transforms.features.PACKED_FEATURES``: up to K instances end to end in a row)
go through a second Keras model, ``PretrainingModel.packed``, built on the *same layer objects*
(so the same variables) as the standard one: the backbone's token, position and segment
embeddings, their sum, LayerNorm and dropout, its transformer layers and its pooler, and the same
MLM and NSP heads. It differs in three places: positions are gathered at ``position_ids`` (each
instance from 0) instead of 0..L-1; every transformer layer gets a block-diagonal
``attention_mask`` (token i attends to token j iff ``instance_ids[i] == instance_ids[j] != 0``),
so no instance sees another; and the pooler + NSP head run at each instance's ``[CLS]``
(``cls_positions``: ``nsp_logits`` of shape (B, K, 2)). An instance thus gets the logits it gets
unpacked (tests/trainer/test_packed_training.py). Checkpoints hold the standard model only
(the packed one adds no variable), so they are the same whichever rows trained them, and the
exported encoder is the plain ``BertBackbone``.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import tensorflow as tf

from trainer.model_presets import ModelConfig

MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_positions")
PACKED_MODEL_INPUTS = (*MODEL_INPUTS, "position_ids", "instance_ids", "cls_positions")


def _initializer() -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=0.02)


@dataclass
class PretrainingModel:
    """The Keras model that maps the four inputs to ``mlm_logits``/``nsp_logits``, and its encoder;
    ``packed``: the same layers over packed rows (``PACKED_MODEL_INPUTS``; None unless asked for).
    ``model`` holds every variable: it is what checkpoints save."""

    model: keras.Model
    backbone: keras.Model
    packed: keras.Model | None = None

    def forward(self, batch: dict) -> keras.Model:
        """The model for ``batch``: ``packed`` for packed rows, else ``model``."""
        return forward_model(self.model, self.packed, batch)


def is_packed(batch: dict) -> bool:
    """Whether a batch holds packed rows (``transforms.features.PACKED_ONLY`` features)."""
    return "instance_ids" in batch


def forward_model(model: keras.Model, packed: keras.Model | None, batch: dict) -> keras.Model:
    """``packed`` for a batch of packed rows, else ``model``; ValueError when packed rows meet a
    model built without the packed forward pass."""
    if not is_packed(batch):
        return model
    if packed is None:
        raise ValueError("packed rows need the packed model (build_pretraining_model(packed=True))")
    return packed


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
    packed: bool = False,
) -> PretrainingModel:
    """A freshly initialized BERT encoder with tied MLM head and (``nsp``) NSP head; with
    ``packed`` also the packed forward pass over the same layers (``PretrainingModel.packed``).

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
    else:
        nsp_head = None
    model = keras.Model(inputs=inputs, outputs=outputs, name="bert_pretraining")
    packed_model = _packed_model(backbone, mlm_head, nsp_head) if packed else None
    return PretrainingModel(model=model, backbone=backbone, packed=packed_model)


def packed_attention_mask(instance_ids):
    """(B, L, L) int32: 1 where query i and key j are tokens of the same instance
    (``instance_ids[i] == instance_ids[j] != 0``), else 0 (block-diagonal per row)."""
    ids = keras.ops.cast(instance_ids, "int32")
    same = keras.ops.equal(keras.ops.expand_dims(ids, 2), keras.ops.expand_dims(ids, 1))
    real = keras.ops.expand_dims(keras.ops.not_equal(ids, 0), 1)
    return keras.ops.cast(keras.ops.logical_and(same, real), "int32")


def packed_encoder(backbone, token_ids, segment_ids, position_ids, attention_mask):
    """``BertBackbone``'s forward pass over packed rows, with its own layers: positions
    gathered at ``position_ids``, every transformer layer under ``attention_mask``
    (``packed_attention_mask``). Returns the sequence output (B, L, H)."""
    tokens = backbone.token_embedding(token_ids)
    positions = backbone.position_embedding(tokens, positions=position_ids)
    segments = backbone.segment_embedding(segment_ids)
    x = backbone.embeddings_add((tokens, positions, segments))
    x = backbone.embeddings_layer_norm(x)
    x = backbone.embeddings_dropout(x)
    for layer in backbone.transformer_layers:
        x = layer(x, attention_mask=attention_mask)
    return x


def _packed_model(backbone, mlm_head, nsp_head) -> keras.Model:
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name) for name in PACKED_MODEL_INPUTS
    }
    mask = packed_attention_mask(inputs["instance_ids"])
    sequence = packed_encoder(
        backbone, inputs["token_ids"], inputs["segment_ids"], inputs["position_ids"], mask
    )
    outputs = {"mlm_logits": mlm_head(sequence, inputs["mask_positions"])}
    if nsp_head is not None:
        cls = keras.ops.expand_dims(inputs["cls_positions"], -1)
        pooled = backbone.pooled_dense(keras.ops.take_along_axis(sequence, cls, axis=1))
        outputs["nsp_logits"] = nsp_head(pooled)  # (B, K, 2)
    return keras.Model(inputs=inputs, outputs=outputs, name="bert_pretraining_packed")


def model_inputs(batch: dict) -> dict:
    """The model's inputs from a batch with the feature contract's names (packed rows: with
    ``position_ids``, ``instance_ids`` and ``cls_positions``, ``PACKED_MODEL_INPUTS``)."""
    inputs = {
        "token_ids": batch["input_ids"],
        "segment_ids": batch["segment_ids"],
        "padding_mask": batch["input_mask"],
        "mask_positions": batch["masked_lm_positions"],
    }
    if is_packed(batch):
        for name in ("position_ids", "instance_ids", "cls_positions"):
            inputs[name] = batch[name]
    return inputs


def batch_examples(batch: dict) -> tf.Tensor:
    """float32: the instances in a batch: its rows, or for packed rows the used instance slots
    (the sum of ``next_sentence_weights``). The NSP loss is a mean over these."""
    if "next_sentence_weights" in batch:
        return tf.reduce_sum(tf.cast(batch["next_sentence_weights"], tf.float32))
    return tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)


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
    head (``outputs`` without ``nsp_logits``), so the objective is the MLM loss alone. Packed rows
    (``nsp_logits`` (B, K, 2)): per instance slot, weighted by ``next_sentence_weights``, and
    ``examples`` counts instances, so a packed batch sums what its instances sum unpacked.
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
    nsp_logits = tf.reshape(nsp_logits, [-1, 2])
    labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])
    if "next_sentence_weights" in batch:
        nsp_w = tf.reshape(tf.cast(batch["next_sentence_weights"], tf.float32), [-1])
    else:
        nsp_w = tf.ones_like(labels, tf.float32)
    nsp_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=nsp_logits)
    nsp_hit = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels), tf.float32)
    return {
        "mlm_loss_sum": tf.reduce_sum(mlm_nll * weights),
        "mlm_correct": tf.reduce_sum(mlm_hit * weights),
        "mlm_weight": tf.reduce_sum(weights),
        "nsp_loss_sum": tf.reduce_sum(nsp_nll * nsp_w),
        "nsp_correct": tf.reduce_sum(nsp_hit * nsp_w),
        "examples": tf.reduce_sum(nsp_w),
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
