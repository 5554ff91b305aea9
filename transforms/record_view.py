"""A pretraining record as a person reads it: segments A and B, what was masked, the NSP label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transforms.special_ids import GOOGLE_IDS, SpecialIds

NSP_WORDS = {0: "IsNext (B follows A)", 1: "RandomNext (B is from another document)"}


def _name(token_id: int, tokens: Sequence[str] | None) -> str:
    if tokens is not None and 0 <= token_id < len(tokens):
        return tokens[token_id]
    return f"#{token_id}"


def describe_record(
    features: Mapping[str, Sequence], tokens: Sequence[str] | None, ids: SpecialIds = GOOGLE_IDS
) -> dict:
    """A JSON-ready description of one decoded record (lists of values by feature name).

    ``segments`` hold A and B as token strings (ids as ``#123`` without a vocab); each masked slot
    gives its position, segment, the original token, what the model sees instead and the kind:
    ``mask`` ([MASK]), ``kept`` (unchanged) or ``random`` (another token).
    """
    input_ids = [int(x) for x in features["input_ids"]]
    length = int(sum(int(x) for x in features["input_mask"]))
    seps = [i for i in range(length) if input_ids[i] == ids.sep_id]
    first_sep = seps[0] if seps else length
    last_sep = seps[-1] if len(seps) > 1 else length
    weights = [float(w) for w in features.get("masked_lm_weights", [])]
    positions = [int(p) for p in features.get("masked_lm_positions", [])]
    labels = [int(x) for x in features.get("masked_lm_ids", [])]
    masked = []
    for slot, weight in enumerate(weights):
        if weight <= 0:
            continue
        pos, label = positions[slot], labels[slot]
        shown = input_ids[pos] if 0 <= pos < len(input_ids) else -1
        kind = "mask" if shown == ids.mask_id else "kept" if shown == label else "random"
        masked.append(
            {
                "position": pos,
                "segment": "A" if pos < first_sep else "B",
                "original": _name(label, tokens),
                "shown": _name(shown, tokens),
                "kind": kind,
            }
        )
    extra: dict = {}
    if "word_starts" in features:  # unmasked (masking=dynamic): the trainer masks it
        extra["unmasked"] = True
        extra["words"] = int(sum(int(x) for x in features["word_starts"]))
    if "next_sentence_labels" not in features:  # packed sentences: pieces between [SEP]s
        bounds = [0, *seps] if seps else [0, length]
        pieces = [input_ids[a + 1 : b] for a, b in zip(bounds, bounds[1:], strict=False)]
        return {
            "length": length,
            "pieces": [[_name(t, tokens) for t in piece] for piece in pieces],
            "masked": masked,
            "next_sentence_label": None,
            "next_sentence": "no NSP (packed sentences)",
            **extra,
        }
    label = int(features["next_sentence_labels"][0])
    return {
        **extra,
        "length": length,
        "segments": {
            "A": [_name(t, tokens) for t in input_ids[1:first_sep]],
            "B": [_name(t, tokens) for t in input_ids[first_sep + 1 : last_sep]],
        },
        "masked": masked,
        "next_sentence_label": label,
        "next_sentence": NSP_WORDS.get(label, f"invalid label {label}"),
    }


def render_record(description: dict, title: str) -> str:
    """Plain-text rendering: masked tokens appear as ``[shown←original]``."""
    by_position = {m["position"]: m for m in description["masked"]}
    lines = [title, f"  next sentence: {description['next_sentence']}"]
    if description.get("unmasked"):
        lines.append(
            f"  length: {description['length']} tokens, {description['words']} words, unmasked "
            "(masked by the trainer)"
        )
    else:
        lines.append(f"  length: {description['length']} tokens, {len(by_position)} masked")
    position = 1
    parts = (
        [(f"{i + 1}", piece) for i, piece in enumerate(description["pieces"])]
        if "pieces" in description
        else [(segment, description["segments"][segment]) for segment in ("A", "B")]
    )
    for segment, segment_tokens in parts:
        words = []
        for token in segment_tokens:
            m = by_position.get(position)
            words.append(f"[{m['shown']}←{m['original']}]" if m else token)
            position += 1
        position += 1  # the [SEP] after the segment
        lines.append(f"  {segment}: " + " ".join(words))
    if description.get("unmasked"):
        return "\n".join(lines)
    kinds = {
        k: sum(1 for m in description["masked"] if m["kind"] == k)
        for k in ("mask", "kept", "random")
    }
    lines.append(
        f"  masks: {kinds['mask']} [MASK], {kinds['random']} random, {kinds['kept']} kept unchanged"
    )
    return "\n".join(lines)
