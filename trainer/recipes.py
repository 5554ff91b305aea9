"""Training recipes: today's default and google-research/bert's reference recipe, as one switch.

A recipe fixes what differs between the two (``--recipe``); everything else (AdamW's betas and
epsilon 1e-6, weight decay 0.01 without LayerNorm/biases, global-norm clipping at 1.0, the losses)
is common to both.

``default``
    Warmup ``lr · step / warmup``, then linear from ``lr`` at ``warmup`` to 0 at ``steps``
    (continuous at the peak, as Hugging Face's); Keras' AdamW with bias correction; exact GELU in
    the masked-LM head transform.
``reference``
    google-research/bert's ``optimization.py`` and ``run_pretraining.py``: the rate decays linearly
    (polynomial decay, power 1) from ``lr`` at step 0 to 0 at ``steps`` on the *global* step, and
    the warmup ``lr · step / warmup`` replaces it for ``step < warmup`` (so after warmup the rate is
    ``lr · (1 − step / steps)``); ``AdamWeightDecay`` without bias correction; tanh-approximated
    GELU in the masked-LM head transform (as in the encoder).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    """What a recipe decides."""

    name: str
    schedule: str
    """``"peak_continuous"`` (linear decay from the warmup's end) or ``"global_step"`` (linear
    decay from step 0, overridden by the warmup)."""
    bias_correction: bool
    """Adam's bias correction of the moment estimates."""
    head_activation: str
    """The masked-LM head transform's activation: ``"gelu"`` (exact) or ``"gelu_approximate"``
    (tanh)."""


RECIPES: dict[str, Recipe] = {
    "default": Recipe("default", "peak_continuous", True, "gelu"),
    "reference": Recipe("reference", "global_step", False, "gelu_approximate"),
}


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name`` (``default`` or ``reference``)."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]
