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
- **Packed rows** of several sentence pairs (``transforms.features.PACKED_FEATURES``,
  ``PACKED_ROW_RULES``): the row's layout (instances as runs of ``instance_ids`` 1, 2, ... from
  position 0, each from its ``[CLS]`` at ``cls_positions``, positions restarting per instance,
  ``input_mask`` exactly on the instances, unused slots zero); then every instance, unpacked
  (``transforms.instance_packing.unpack_batch``), by the rules of an unpacked pair of its
  masking. A violation names the row; its detail names the instance.
- ``word_starts`` (unmasked records, ``WORD_START_RULES``): 0/1, 0 outside the maskable tokens
  ([CLS], [SEP], padding), 1 at the first maskable token after a non-maskable one; with the
  vocabulary's ``##`` table it must equal what the writer computes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from transforms.features import DOC_SENTENCES, DYNAMIC, SENTENCE_PAIRS, STATIC
from transforms.instance_packing import unpack_batch
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
PACKED_ROW_RULES: dict[str, str] = {
    "row_layout": "instances are runs of instance_ids 1, 2, ... each starting at its "
    "cls_positions, next_sentence_weights 1.0 for exactly those instances (used slots first), "
    "every used masked position inside an instance and at most max_predictions_per_seq each",
    "row_no_gaps": "instances fill the row from position 0 in order, padding only after the last",
    "row_positions_restart": "position_ids count 0, 1, ... within each instance, 0 in padding",
    "row_mask_matches": "input_mask is 1 exactly where instance_ids is nonzero",
    "row_unused_slots_zero": "unused instance slots have next_sentence_labels 0 and "
    "cls_positions 0",
    "row_predictions_ascending": "used masked_lm_positions come first and strictly ascend across "
    "the row",
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


def rules_for(masking: str, input_mode: str, packed: bool = False) -> dict[str, str]:
    """Every rule a record of this kind is checked by, with its wording."""
    if packed:
        return PACKED_ROW_RULES | rules_for(masking, input_mode)
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


def _packed_row_violations(
    batch: Mapping[str, np.ndarray], broken: dict[int, str], shard: str, first: int
) -> list[Violation]:
    """The row rules of ``PACKED_ROW_RULES`` (the instances' own rules are checked unpacked;
    ``broken``: the rows ``unpack_batch`` could not unpack, and why)."""
    instance = np.asarray(batch["instance_ids"], dtype=np.int64)
    position = np.asarray(batch["position_ids"], dtype=np.int64)
    mask = np.asarray(batch["input_mask"], dtype=np.int64)
    nsw = np.asarray(batch["next_sentence_weights"])
    n, seq_len = instance.shape
    real = instance > 0
    # each real token's instance is the previous token's, or the next one (a new instance)
    previous = np.concatenate((np.zeros((n, 1), np.int64), instance[:, :-1]), axis=1)
    starts = real & (instance != previous)
    in_order = np.where(real, (instance == previous) | (instance == previous + 1), True)
    prefix = (real[:, 1:] <= real[:, :-1]).all(axis=1) & (instance[:, 0] == 1)
    run_start = np.maximum.accumulate(np.where(starts, np.arange(seq_len), 0), axis=1)
    expected_position = np.where(real, np.arange(seq_len) - run_start, 0)
    unused = nsw <= 0
    bad = {
        "row_layout": np.zeros(n, dtype=bool),
        "row_no_gaps": ~in_order.all(axis=1) | ~prefix,
        "row_positions_restart": (position != expected_position).any(axis=1),
        "row_mask_matches": (mask != real).any(axis=1),
        "row_unused_slots_zero": (
            unused
            & (
                (np.asarray(batch["next_sentence_labels"]) != 0)
                | (np.asarray(batch["cls_positions"]) != 0)
            )
        ).any(axis=1),
    }
    if broken:
        bad["row_layout"][list(broken)] = True
    if "masked_lm_weights" in batch:
        w = np.asarray(batch["masked_lm_weights"]) > 0
        pos = np.asarray(batch["masked_lm_positions"], dtype=np.int64)
        first_unused = np.where(w.all(axis=1), w.shape[1], np.argmin(w, axis=1))
        front = w.sum(axis=1) == first_unused
        step = np.diff(pos, axis=1) > 0
        ascending = (step | ~w[:, 1:]).all(axis=1)
        bad["row_predictions_ascending"] = ~front | ~ascending
    out = []
    for name, flags in bad.items():
        for i in np.flatnonzero(flags).tolist():
            detail = broken.get(i) if name == "row_layout" else None
            if detail is None:
                detail = f"instance_ids {instance[i, :12].tolist()}..., {int(real[i].sum())} tokens"
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
    max_predictions_per_seq: int = 0,
) -> list[Violation]:
    """Violations of the rules of this kind (``rules_for``), ordered by record; at most ``limit``.

    ``batch`` holds the kind's features (``transforms.features.features_of``) as (N, length)
    arrays; row i is record ``first_record + i`` of ``shard``. A batch with ``instance_ids`` is
    of packed rows, with ``max_predictions_per_seq`` slots per instance.
    """
    if "instance_ids" in batch:
        unpacked = unpack_batch(dict(batch), max_predictions_per_seq)
        found = _packed_row_violations(batch, unpacked.broken, shard, first_record)
        rows = unpacked.row
        slot = np.arange(len(rows)) - np.searchsorted(rows, rows)
        for v in check_kind_batch(
            unpacked.features, ids, shard, 0, masking, input_mode, None, is_continuation
        ):
            i = v.record
            where = f"instance {int(slot[i]) + 1}: {v.detail}"
            found.append(Violation(shard, first_record + int(rows[i]), v.rule, where))
        order = list(rules_for(masking, input_mode, packed=True))
        found.sort(key=lambda v: (v.record, order.index(v.rule)))
        return found if limit is None else found[:limit]
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
