"""Named BERT encoder sizes, as in google-research/bert's releases (BERT-Tiny ... BERT-Large).

A preset fixes only the architecture (layers, hidden size, attention heads, feed-forward size); the
vocabulary size comes from the shards and the position table from ``max_position_embeddings``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to build a ``keras_hub.models.BertBackbone`` (plus the pretraining heads).

    ``max_position_embeddings`` is the size of the position table, not the training sequence
    length: it must cover every phase trained from the same weights (BERT uses 512 for both the
    128- and the 512-token phase), because phase 2 restores phase 1's table.
    """

    num_layers: int
    hidden_dim: int
    num_heads: int
    intermediate_dim: int
    vocabulary_size: int = 30522
    max_position_embeddings: int = 512
    num_segments: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim {self.hidden_dim} is not divisible by num_heads {self.num_heads}"
            )
        for name in ("num_layers", "hidden_dim", "num_heads", "intermediate_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.vocabulary_size < 1 or self.max_position_embeddings < 1:
            raise ValueError("vocabulary_size and max_position_embeddings must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def with_(self, **changes) -> ModelConfig:
        """A copy with some fields changed (e.g. the vocabulary size read from the shards)."""
        return replace(self, **changes)

    def backbone_kwargs(self) -> dict:
        """Keyword arguments of ``keras_hub.models.BertBackbone``."""
        return {
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_position_embeddings,
            "num_segments": self.num_segments,
        }

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _bert(layers: int, hidden: int) -> ModelConfig:
    """The BERT releases' rule: heads = hidden / 64, feed-forward = 4 * hidden."""
    return ModelConfig(
        num_layers=layers, hidden_dim=hidden, num_heads=hidden // 64, intermediate_dim=4 * hidden
    )


PRESETS: dict[str, ModelConfig] = {
    "tiny": _bert(2, 128),
    "mini": _bert(4, 256),
    "small": _bert(4, 512),
    "medium": _bert(8, 512),
    "base": _bert(12, 768),
    "large": _bert(24, 1024),
}
"""L/H/A/I of BERT-Tiny/Mini/Small/Medium (Turc et al. 2019) and BERT-Base/Large (Devlin et al.)."""


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str) -> ModelConfig:
    """The preset called ``name``; ``bert_base``, ``bert-base`` and ``BERT-Base`` also work."""
    key = name.strip().lower().replace("-", "_")
    key = key.removeprefix("bert_")
    if key not in PRESETS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[key]
