"""Value checks for records of every kind (``transforms.features``): unmasked records
(``masking=dynamic``) and packed sentences (``full-sentences``, ``doc-sentences``).

Static sentence pairs are ``transforms.record_checks.check_batch`` exactly. The other kinds reuse
its prediction-slot rules where the records have slots, and add their own:

- **Unmasked sentence pairs** are checked as static pairs without predictions (every structural
  rule applies, with no wildcard positions), plus ``word_starts``.
- **Packed sentences** (``PACKED_RULES``): ``[CLS]`` first, the last real token ``[SEP]``, one
  segment (all ``segment_ids`` 0), no ``[CLS]`` or pad inside; ``doc-sentences`` has exactly one
  ``[SEP]`` (the last), ``full-sentences`` may hold ``[SEP]`` between documents but never two in
  a row or right after ``[CLS]``. With static masks, used prediction positions are wildcards as in
  ``record_checks``.
- ``word_starts`` (unmasked records, ``WORD_START_RULES``): 0/1, 0 outside the maskable tokens
  ([CLS], [SEP], padding), 1 at the first maskable token after a non-maskable one; with the
  vocabulary's ``##`` table it must equal what the writer computes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from transforms.features import DOC_SENTENCES, DYNAMIC, SENTENCE_PAIRS, STATIC
from transforms.masking import word_starts
from transforms.record_checks import RULES, Violation, check_batch
from transforms.special_ids import SpecialIds

PACKED_RULES: dict[str, str] = {
    "packed_cls_first": "input_ids[0] is [CLS]",
    "packed_last_sep": "the last real token is [SEP] and the record holds text (L >= 3)",
    "packed_separators": "doc-sentences: one [SEP], the last; full-sentences: [SEP]s between "
    "documents, never two in a row nor right after [CLS] (masked positions aside)",
    "packed_no_cls_or_pad_inside": "no [CLS] and no pad id within L after position 0 (masked "
    "positions aside)",
    "packed_single_segment": "segment_ids are all 0",
}
WORD_START_RULES: dict[str, str] = {
    "word_starts_binary": "word_starts values are 0 or 1",
    "word_starts_on_maskable": "word_starts is 0 at [CLS], [SEP] and padding, and 1 at the first "
    "maskable token after one of them",
    "word_starts_match_vocab": "word_starts marks exactly the tokens that are not ## pieces "
    "continuing a word (checked when the vocabulary is known)",
}
PREDICTION_RULES = (
    "id_range",
    "weights_binary",
    "weights_prefix",
    "unused_slots_zero",
    "positions_ascending",
    "positions_in_range",
    "masked_ids_not_special",
    "mask_binary",
    "mask_prefix",
    "padding_zero",
)
"""``record_checks`` rules that hold for packed records as they do for pairs."""


def rules_for(masking: str, input_mode: str) -> dict[str, str]:
    """Every rule a record of this kind is checked by, with its wording."""
    if input_mode == SENTENCE_PAIRS:
        base = dict(RULES)
    else:
        base = {k: RULES[k] for k in PREDICTION_RULES} | PACKED_RULES
    if masking == DYNAMIC:
        base |= WORD_START_RULES
    return base


def _with_empty_slots(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(np.asarray(batch["input_ids"]))
    out = dict(batch)
    out["masked_lm_positions"] = np.zeros((n, 1), np.int64)
    out["masked_lm_ids"] = np.zeros((n, 1), np.int64)
    out["masked_lm_weights"] = np.zeros((n, 1), np.float32)
    return out


def _packed_violations(
    batch: Mapping[str, np.ndarray], ids: SpecialIds, input_mode: str, shard: str, first: int
) -> list[Violation]:
    tok = np.asarray(batch["input_ids"], dtype=np.int64)
    mask = np.asarray(batch["input_mask"]) != 0
    seg = np.asarray(batch["segment_ids"])
    n, s = tok.shape
    length = mask.sum(axis=1)
    col = np.arange(s)[None, :]
    real = col < length[:, None]
    wild = np.zeros_like(real)
    if "masked_lm_weights" in batch:
        used = np.asarray(batch["masked_lm_weights"]) > 0
        pos = np.asarray(batch["masked_lm_positions"], dtype=np.int64)
        r, j = np.nonzero(used)
        p = pos[r, j]
        ok = (p > 0) & (p < length[r] - 1)
        wild[r[ok], p[ok]] = True
    inner = real & (col > 0) & ~wild
    is_sep = (tok == ids.sep_id) & inner
    last = tok[np.arange(n), np.maximum(length - 1, 0)]
    bad = {
        "packed_cls_first": tok[:, 0] != ids.cls_id,
        "packed_last_sep": (length < 3) | (last != ids.sep_id),
        "packed_no_cls_or_pad_inside": (((tok == ids.cls_id) | (tok == ids.pad_id)) & inner).any(
            axis=1
        ),
        "packed_single_segment": (seg != 0).any(axis=1),
    }
    if input_mode == DOC_SENTENCES:
        bad["packed_separators"] = is_sep.sum(axis=1) != 1
    else:
        adjacent = is_sep[:, 1:] & is_sep[:, :-1]
        bad["packed_separators"] = adjacent.any(axis=1) | is_sep[:, 1]
    out = []
    for name, flags in bad.items():
        for i in np.flatnonzero(flags).tolist():
            seps = np.flatnonzero(is_sep[i]).tolist()
            detail = f"length {int(length[i])}, [SEP] at {seps[:5]}, input_ids[0]={tok[i, 0]}"
            out.append(Violation(shard, first + i, name, detail))
    return out


def _word_start_violations(
    batch: Mapping[str, np.ndarray],
    ids: SpecialIds,
    is_continuation: np.ndarray | None,
    shard: str,
    first: int,
) -> list[Violation]:
    tok = np.asarray(batch["input_ids"], dtype=np.int64)
    ws = np.asarray(batch["word_starts"], dtype=np.int64)
    mask = np.asarray(batch["input_mask"]) != 0
    n, s = tok.shape
    real = np.arange(s)[None, :] < mask.sum(axis=1)[:, None]
    candidate = real & (tok != ids.cls_id) & (tok != ids.sep_id)
    previous = np.zeros_like(candidate)
    previous[:, 1:] = candidate[:, :-1]
    bad = {
        "word_starts_binary": ((ws != 0) & (ws != 1)).any(axis=1),
        "word_starts_on_maskable": ((ws != 0) & ~candidate).any(axis=1)
        | (candidate & ~previous & (ws == 0)).any(axis=1),
    }
    if is_continuation is not None and tok.size and tok.max() < len(is_continuation):
        expected = word_starts(np.maximum(tok, 0), candidate, is_continuation)
        bad["word_starts_match_vocab"] = ((ws != 0) != expected).any(axis=1)
    out = []
    for name, flags in bad.items():
        for i in np.flatnonzero(flags).tolist():
            where = np.flatnonzero((ws[i] != 0) != (candidate[i] & ~previous[i]))[:5].tolist()
            out.append(Violation(shard, first + i, name, f"word_starts differs at {where}"))
    return out


def check_kind_batch(
    batch: Mapping[str, np.ndarray],
    ids: SpecialIds,
    shard: str,
    first_record: int,
    masking: str = STATIC,
    input_mode: str = SENTENCE_PAIRS,
    limit: int | None = None,
    is_continuation: np.ndarray | None = None,
) -> list[Violation]:
    """Violations of the rules of this kind (``rules_for``), ordered by record; at most ``limit``.

    ``batch`` holds the kind's features (``transforms.features.features_of``) as (N, length)
    arrays; row i is record ``first_record + i`` of ``shard``.
    """
    if masking == STATIC and input_mode == SENTENCE_PAIRS:
        return check_batch(batch, ids, shard, first_record, limit)
    full = dict(batch) if masking == STATIC else _with_empty_slots(batch)
    if input_mode == SENTENCE_PAIRS:
        found = check_batch(full, ids, shard, first_record)
    else:
        n = len(np.asarray(batch["input_ids"]))
        full.setdefault("next_sentence_labels", np.zeros((n, 1), np.int64))
        found = [
            v for v in check_batch(full, ids, shard, first_record) if v.rule in PREDICTION_RULES
        ]
        found += _packed_violations(batch, ids, input_mode, shard, first_record)
    if masking == DYNAMIC:
        found += _word_start_violations(batch, ids, is_continuation, shard, first_record)
    order = list(rules_for(masking, input_mode))
    found.sort(key=lambda v: (v.record, order.index(v.rule)))
    return found if limit is None else found[:limit]
