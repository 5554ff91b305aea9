"""Value checks of pretraining records against the feature contract, vectorized over a batch.

``bertprep validate`` parses shards (ours, or google-research/bert ``create_pretraining_data.py``
output: same feature spec) into numpy arrays batch by batch; feature names, dtypes and lengths are
enforced there. ``check_batch`` checks the values: every rule of ``RULES`` is computed for the whole
batch with numpy, and Python only runs for the records that fail, to word their ``Violation``.

How the rules read a record (``L`` is its real length, the number of leading non-zero
``input_mask`` entries):

- **Masked positions are wildcards.** The token at a used ``masked_lm_positions`` slot (weight 1.0)
  strictly inside the record (``0 < p < L - 1``) may be any vocabulary id: the 10% random
  replacement of google-research/bert draws from the whole vocabulary, so reference shards (and
  ours with ``--reference-random-tokens``) legitimately carry ``[PAD]``, ``[CLS]`` or ``[SEP]``
  there. The structural rules (``sep_layout``, ``cls_unique``, ``no_pad_inside``) therefore skip
  such positions; what was really there is ``masked_lm_ids``, which ``masked_ids_not_special``
  checks. A consequence: a writer that masks the first ``[SEP]`` shows up as
  ``masked_ids_not_special`` (it predicts ``[SEP]``) plus ``sep_layout`` (one unmasked ``[SEP]``
  left); masking the last one shows up as ``positions_in_range`` (plus ``masked_ids_not_special``).
- **Dependent rules are gated, so one fault is reported once.** When ``input_mask`` is not a prefix
  the real length is undefined and the rules that need it (``min_length``, ``sep_layout``,
  ``cls_unique``, ``no_pad_inside``, ``padding_zero``, ``segment_ids``, ``positions_in_range``) are
  not evaluated for that record; ``segment_ids`` and the non-empty-segment half of ``min_length``
  also need a valid ``sep_layout`` (they are measured from the first ``[SEP]``). Position 0 belongs
  to ``cls_first`` alone.
- **Minimum length 5**: ``[CLS] A [SEP] B [SEP]`` with both segments non-empty, as the reference
  asserts (``len(tokens_a) >= 1`` and ``len(tokens_b) >= 1``).
- Unused prediction slots (weight 0.0) hold position 0 and id 0, as both writers pad them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from transforms.special_ids import SpecialIds


@dataclass(frozen=True)
class Violation:
    """One broken rule in one record."""

    shard: str
    record: int  # index of the record within its shard
    rule: str  # a key of RULES
    detail: str  # concrete values, e.g. "masked_lm_positions[3]=130 >= length 57"


RULES: dict[str, str] = {
    "mask_binary": "input_mask values are 0 or 1",
    "mask_prefix": "input_mask is a run of 1s then 0s (real length L = number of 1s)",
    "min_length": "L >= 5 and segments A and B are non-empty: [CLS] A [SEP] B [SEP]",
    "cls_first": "input_ids[0] is [CLS]",
    "sep_layout": "exactly two [SEP] within L (masked positions aside), the last real token is [SEP]",
    "cls_unique": "no [CLS] within L after position 0 (masked positions aside)",
    "no_pad_inside": "no pad id within L (masked positions aside)",
    "padding_zero": "beyond L, input_ids are the pad id and segment_ids are 0",
    "segment_ids": "segment_ids are 0 through the first [SEP] and 1 after it through position L-1",
    "id_range": "input_ids and masked_lm_ids are >= 0 (and < vocab_size when it is known)",
    "weights_binary": "masked_lm_weights are exactly 0.0 or 1.0",
    "weights_prefix": "masked_lm_weights are 1.0s then 0.0s (used slots first)",
    "unused_slots_zero": "slots with weight 0.0 have masked_lm_positions 0 and masked_lm_ids 0",
    "positions_ascending": "masked_lm_positions of used slots strictly ascend (so are unique)",
    "positions_in_range": "used masked_lm_positions lie in [1, L-2]: not [CLS], not the last "
    "[SEP], not padding",
    "masked_ids_not_special": "masked_lm_ids of used slots are not [CLS], [SEP] or the pad id",
    "nsp_label": "next_sentence_labels is 0 (IsNext) or 1 (random next)",
}

_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)
_SHOW = 5  # positions listed in a detail before "..."
_CHUNK_CELLS = 1 << 18  # rows are checked max_seq_length * rows <= this at a time (cache-sized)
_NO_UPPER = np.uint64(1 << 63)  # as uint64, every negative int64 is >= this


def _ints(batch: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    a = np.asarray(batch[name])
    if a.dtype.kind not in "iu":
        if a.size and not np.array_equal(a, np.trunc(a)):
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
        a = a.astype(np.int64)
    return a


def _as_unsigned(a: np.ndarray) -> np.ndarray:
    """View of a signed int array as unsigned, so one comparison catches negatives too."""
    if a.dtype.kind == "i":
        return a.view(np.dtype(f"u{a.dtype.itemsize}"))
    return a


def _row_any(flags: np.ndarray) -> np.ndarray:
    """``flags.any(axis=1)`` for a 2-D bool array, 8 flags at a time where the layout allows."""
    if flags.flags.c_contiguous and flags.shape[1] % 8 == 0 and flags.shape[1]:
        return flags.view(np.uint64).any(axis=1)
    return flags.any(axis=1)


def _row_count(flags: np.ndarray) -> np.ndarray:
    """Trues per row of a 2-D bool array (a narrow sum is faster than ``count_nonzero``)."""
    dtype = np.int16 if flags.shape[1] < 1 << 15 else np.int64
    return flags.sum(axis=1, dtype=dtype).astype(np.int64)


def _prefix_ok(nonzero: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count of True per row, whether the Trues of each row form a prefix)."""
    count = _row_count(nonzero)
    if nonzero.shape[1] == 0:
        return count, np.ones(len(nonzero), dtype=bool)
    first_false = np.argmin(nonzero, axis=1)  # 0 when the row is all True
    return count, (first_false == count) | (count == nonzero.shape[1])


@lru_cache(maxsize=8)
def _after(s: int) -> np.ndarray:
    """bool (s, s): row f is True at the positions after f."""
    ar = np.arange(s)
    return ar[None, :] > ar[:, None]


def _listing(positions: np.ndarray) -> str:
    shown = ", ".join(str(int(p)) for p in positions[:_SHOW])
    return f"[{shown}{', ...' if len(positions) > _SHOW else ''}]"


class _Batch:
    """The arrays of one batch and the per-row quantities the rules and their details share."""

    def __init__(self, batch: Mapping[str, np.ndarray], ids: SpecialIds) -> None:
        missing = [name for name in _FEATURES if name not in batch]
        if missing:
            raise KeyError(f"batch lacks features {missing}")
        self.ids = ids
        self.input_ids = _ints(batch, "input_ids")
        self.input_mask = _ints(batch, "input_mask")
        self.segment_ids = _ints(batch, "segment_ids")
        self.positions = _ints(batch, "masked_lm_positions")
        self.masked_ids = _ints(batch, "masked_lm_ids")
        self.weights = np.asarray(batch["masked_lm_weights"])
        labels = _ints(batch, "next_sentence_labels")
        seq = (self.input_ids, self.input_mask, self.segment_ids)
        pred = (self.positions, self.masked_ids, self.weights)
        shapes = {name: np.shape(batch[name]) for name in _FEATURES}
        self.n = self.input_ids.shape[0] if self.input_ids.ndim == 2 else -1
        self.labels = labels[:, None] if labels.ndim == 1 else labels
        if (
            self.n < 0
            or any(a.ndim != 2 or a.shape != seq[0].shape for a in seq)
            or any(a.ndim != 2 or a.shape != pred[0].shape for a in pred)
            or pred[0].shape[0] != self.n
            or self.labels.shape != (self.n, 1)
            or seq[0].shape[1] == 0
        ):
            raise ValueError(f"inconsistent feature shapes: {shapes}")

    def compute(self) -> np.ndarray:
        """bool (N, len(RULES)): True where a record breaks a rule (columns in RULES order).

        Rows are processed in chunks so that the temporaries stay in cache.
        """
        n = self.n
        self.used = self.weights != 0
        self.length = np.zeros(n, np.int64)
        self.first_sep = np.zeros(n, np.int64)
        self.wild_rows: list[np.ndarray] = []
        self.wild_positions: list[np.ndarray] = []
        table = np.empty((n, len(RULES)), dtype=bool)
        chunk = max(64, _CHUNK_CELLS // self.input_ids.shape[1])
        for lo in range(0, n, chunk):
            rows = slice(lo, min(lo + chunk, n))
            bad = self._compute_rows(rows)
            for k, name in enumerate(RULES):
                table[rows, k] = bad[name]
        wild_rows = np.concatenate(self.wild_rows) if self.wild_rows else np.zeros(0, np.int64)
        wild_positions = np.concatenate(self.wild_positions) if self.wild_rows else wild_rows
        self.wild = (wild_rows, wild_positions)
        self.table = table
        return table

    def _compute_rows(self, rows: slice) -> dict[str, np.ndarray]:
        """Rule name → bool array over ``rows``, True where the record breaks the rule."""
        ids = self.ids
        tok, seg, mask = self.input_ids[rows], self.segment_ids[rows], self.input_mask[rows]
        pos, mids, w = self.positions[rows], self.masked_ids[rows], self.weights[rows]
        used = self.used[rows]
        n, s = tok.shape
        bad: dict[str, np.ndarray] = {}

        # input_mask: values, prefix, real length L.
        real = mask != 0
        bad["mask_binary"] = _row_any(_as_unsigned(mask) > 1)
        length, prefix_ok = _prefix_ok(real)
        bad["mask_prefix"] = ~prefix_ok
        self.length[rows] = length

        # Prediction slots.
        bad["weights_binary"] = _row_any(used & (w != 1))
        _, weights_prefix_ok = _prefix_ok(used)
        bad["weights_prefix"] = ~weights_prefix_ok
        bad["unused_slots_zero"] = _row_any(~used & ((pos != 0) | (mids != 0)))
        both_used = used[:, 1:] & used[:, :-1]
        bad["positions_ascending"] = _row_any(both_used & (pos[:, 1:] <= pos[:, :-1]))
        interior = used & (pos >= 1) & (pos < (length - 1)[:, None])  # the wildcard positions
        bad["positions_in_range"] = prefix_ok & _row_any(used & ~interior)
        bad["masked_ids_not_special"] = _row_any(
            used & ((mids == ids.cls_id) | (mids == ids.sep_id) | (mids == ids.pad_id))
        )

        # Ids: one unsigned comparison catches negatives and ids past the vocabulary.
        upper = _NO_UPPER if ids.vocab_size is None else np.uint64(ids.vocab_size)
        bad["id_range"] = _row_any(_as_unsigned(tok) >= upper) | _row_any(
            _as_unsigned(mids) >= upper
        )
        bad["nsp_label"] = _as_unsigned(self.labels[rows, 0]) > 1

        # Special tokens. Position 0 belongs to cls_first alone; padding reads is_pad there first
        # (position 0 is padding when L = 0).
        bad["cls_first"] = tok[:, 0] != ids.cls_id
        is_cls = tok == ids.cls_id
        is_sep = tok == ids.sep_id
        is_pad = tok == ids.pad_id
        seg_zero = seg == 0
        bad["padding_zero"] = prefix_ok & _row_any(~(real | (is_pad & seg_zero)))
        is_cls[:, 0] = is_sep[:, 0] = is_pad[:, 0] = False
        is_cls &= real
        is_sep &= real
        is_pad &= real
        # Rows with a special id inside other than two [SEP]s: clear the wildcard positions (a
        # masked interior position may hold any id) before judging them.
        suspects = np.flatnonzero(_row_any(is_cls) | _row_any(is_pad) | (_row_count(is_sep) != 2))
        if len(suspects):
            shown = tok[suspects[:, None], np.clip(pos[suspects], 0, s - 1)]
            wild = interior[suspects] & (
                (shown == ids.cls_id) | (shown == ids.sep_id) | (shown == ids.pad_id)
            )
            r, j = np.nonzero(wild)
            if len(r):
                rr, p = suspects[r], pos[suspects[r], j]
                is_cls[rr, p] = is_sep[rr, p] = is_pad[rr, p] = False
                self.wild_rows.append(rr + rows.start)
                self.wild_positions.append(p)
        bad["cls_unique"] = prefix_ok & _row_any(is_cls)
        bad["no_pad_inside"] = prefix_ok & _row_any(is_pad)

        last_is_sep = (length >= 1) & (tok[np.arange(n), np.maximum(length - 1, 0)] == ids.sep_id)
        sep_ok = prefix_ok & (_row_count(is_sep) == 2) & last_is_sep
        bad["sep_layout"] = prefix_ok & ~sep_ok
        first_sep = np.argmax(is_sep, axis=1)
        self.first_sep[rows] = first_sep
        empty_segment = sep_ok & ((first_sep == 1) | (first_sep == length - 2))
        bad["min_length"] = prefix_ok & ((length < 5) | empty_segment)

        # Segment B (1s) starts right after the first [SEP]: expected 1 where position > f.
        after_first_sep = _after(s)[first_sep]
        seg_one = seg == 1
        wrong = (after_first_sep & ~seg_one) | (~after_first_sep & ~seg_zero)
        bad["segment_ids"] = sep_ok & _row_any(real & wrong)
        return bad

    # --- details, for failing rows only ---------------------------------------------------

    def _wild_positions(self, i: int) -> set[int]:
        r, p = self.wild
        return {int(x) for x in p[r == i]}

    def _specials_inside(self, i: int, token: int) -> np.ndarray:
        """Positions 1..L-1 of row i holding ``token``, wildcard positions excluded."""
        length = int(self.length[i])
        hits = np.flatnonzero(self.input_ids[i, 1:length] == token) + 1
        wild = self._wild_positions(i)
        return np.array([p for p in hits if int(p) not in wild], dtype=np.int64)

    def detail(self, rule: str, i: int) -> str:
        return _DETAILS[rule](self, i)


def _how_many(where, what: str) -> str:
    """`` (N what)`` when a rule fails at N > 1 places, else nothing (the first is named)."""
    return f" ({len(where)} {what})" if len(where) > 1 else ""


def _d_mask_binary(b: _Batch, i: int) -> str:
    m = b.input_mask[i]
    where = np.flatnonzero((m != 0) & (m != 1))
    return f"input_mask[{where[0]}]={m[where[0]]}" + _how_many(where, "values not 0/1")


def _first_gap(flags: np.ndarray) -> tuple[int, int]:
    """Where a True-prefix row is broken: its first False, and the first True after it."""
    gap = int(np.argmin(flags))
    return gap, gap + int(np.argmax(flags[gap:]))


def _d_mask_prefix(b: _Batch, i: int) -> str:
    first_zero, later = _first_gap(b.input_mask[i] != 0)
    return (
        f"input_mask[{first_zero}]=0 but input_mask[{later}]={b.input_mask[i, later]}"
        f" (real length ambiguous)"
    )


def _d_min_length(b: _Batch, i: int) -> str:
    length = int(b.length[i])
    parts = []
    if length < 5:
        parts.append(f"real length {length} < 5")
    if not b.table[i, list(RULES).index("sep_layout")]:
        f = int(b.first_sep[i])
        if f == 1:
            parts.append("segment A is empty (first [SEP] at position 1)")
        if f == length - 2:
            parts.append(f"segment B is empty ([SEP]s at positions {f} and {length - 1})")
    return "; ".join(parts)


def _d_cls_first(b: _Batch, i: int) -> str:
    return f"input_ids[0]={b.input_ids[i, 0]}, expected [CLS]={b.ids.cls_id}"


def _d_sep_layout(b: _Batch, i: int) -> str:
    length = int(b.length[i])
    seps = b._specials_inside(i, b.ids.sep_id)
    aside = ", masked positions aside" if b._wild_positions(i) else ""
    text = (
        f"{len(seps)} [SEP] ({b.ids.sep_id}) at positions {_listing(seps)} within length"
        f" {length}{aside}, expected 2 with the last at {length - 1}"
    )
    if length >= 1 and b.input_ids[i, length - 1] != b.ids.sep_id:
        text += f"; last real token input_ids[{length - 1}]={b.input_ids[i, length - 1]}"
    return text


def _d_cls_unique(b: _Batch, i: int) -> str:
    where = b._specials_inside(i, b.ids.cls_id)
    return f"[CLS] ({b.ids.cls_id}) at positions {_listing(where)} within length {b.length[i]}"


def _d_no_pad_inside(b: _Batch, i: int) -> str:
    where = b._specials_inside(i, b.ids.pad_id)
    return f"pad id {b.ids.pad_id} at positions {_listing(where)} within length {b.length[i]}"


def _d_padding_zero(b: _Batch, i: int) -> str:
    length = int(b.length[i])
    parts = []
    tok = b.input_ids[i, length:]
    seg = b.segment_ids[i, length:]
    for name, values, expected in (("input_ids", tok, b.ids.pad_id), ("segment_ids", seg, 0)):
        where = np.flatnonzero(values != expected)
        if len(where):
            p = int(where[0]) + length
            more = _how_many(where, "positions")
            parts.append(f"{name}[{p}]={values[where[0]]} beyond length {length}{more}")
    return "; ".join(parts)


def _d_segment_ids(b: _Batch, i: int) -> str:
    length = int(b.length[i])
    f = int(b.first_sep[i])
    seg = b.segment_ids[i, :length]
    expected = (np.arange(length) > f).astype(np.int64)
    p = int(np.flatnonzero(seg != expected)[0])
    return (
        f"segment_ids[{p}]={seg[p]}, expected {expected[p]} (first [SEP] at {f}, length {length})"
    )


def _d_id_range(b: _Batch, i: int) -> str:
    upper = b.ids.vocab_size
    bound = f"outside [0, {upper})" if upper is not None else "negative"
    parts = []
    for name, values in (("input_ids", b.input_ids[i]), ("masked_lm_ids", b.masked_ids[i])):
        out = (values < 0) | (values >= upper if upper is not None else False)
        where = np.flatnonzero(out)
        if len(where):
            more = _how_many(where, "values")
            parts.append(f"{name}[{where[0]}]={values[where[0]]} {bound}{more}")
    return "; ".join(parts)


def _d_weights_binary(b: _Batch, i: int) -> str:
    w = b.weights[i]
    where = np.flatnonzero((w != 0) & (w != 1))
    return f"masked_lm_weights[{where[0]}]={float(w[where[0]])!r}"


def _d_weights_prefix(b: _Batch, i: int) -> str:
    gap, later = _first_gap(b.used[i])
    return (
        f"masked_lm_weights[{gap}]=0.0 before masked_lm_weights[{later}]="
        f"{float(b.weights[i, later])!r}"
    )


def _d_unused_slots_zero(b: _Batch, i: int) -> str:
    pos, mids = b.positions[i], b.masked_ids[i]
    where = np.flatnonzero(~b.used[i] & ((pos != 0) | (mids != 0)))
    j, more = int(where[0]), _how_many(where, "slots")
    return (
        f"unused slot {j} (weight 0.0) has masked_lm_positions[{j}]={pos[j]}, "
        f"masked_lm_ids[{j}]={mids[j]}{more}"
    )


def _d_positions_ascending(b: _Batch, i: int) -> str:
    pos, used = b.positions[i], b.used[i]
    where = np.flatnonzero(used[1:] & used[:-1] & (pos[1:] <= pos[:-1]))
    j = int(where[0]) + 1
    return f"masked_lm_positions[{j}]={pos[j]} <= masked_lm_positions[{j - 1}]={pos[j - 1]}"


def _d_positions_in_range(b: _Batch, i: int) -> str:
    length = int(b.length[i])
    pos = b.positions[i]
    for j in np.flatnonzero(b.used[i]):
        p = int(pos[j])
        if p < 0:
            return f"masked_lm_positions[{j}]={p} is negative"
        if p == 0:
            return f"masked_lm_positions[{j}]=0 is the [CLS] position"
        if p >= length:
            return f"masked_lm_positions[{j}]={p} >= length {length}"
        if p == length - 1:
            return f"masked_lm_positions[{j}]={p} is the last [SEP] (length {length})"
    raise AssertionError("positions_in_range detail for a passing row")


def _d_masked_ids_not_special(b: _Batch, i: int) -> str:
    names = {b.ids.cls_id: "[CLS]", b.ids.sep_id: "[SEP]", b.ids.pad_id: "the pad id"}
    mids = b.masked_ids[i]
    where = [j for j in np.flatnonzero(b.used[i]) if int(mids[j]) in names]
    j, more = int(where[0]), _how_many(where, "slots")
    return (
        f"masked_lm_ids[{j}]={mids[j]} is {names[int(mids[j])]}"
        f" (at masked_lm_positions[{j}]={b.positions[i, j]}){more}"
    )


def _d_nsp_label(b: _Batch, i: int) -> str:
    return f"next_sentence_labels={b.labels[i, 0]}, expected 0 or 1"


_DETAILS: dict[str, Callable[[_Batch, int], str]] = {
    "mask_binary": _d_mask_binary,
    "mask_prefix": _d_mask_prefix,
    "min_length": _d_min_length,
    "cls_first": _d_cls_first,
    "sep_layout": _d_sep_layout,
    "cls_unique": _d_cls_unique,
    "no_pad_inside": _d_no_pad_inside,
    "padding_zero": _d_padding_zero,
    "segment_ids": _d_segment_ids,
    "id_range": _d_id_range,
    "weights_binary": _d_weights_binary,
    "weights_prefix": _d_weights_prefix,
    "unused_slots_zero": _d_unused_slots_zero,
    "positions_ascending": _d_positions_ascending,
    "positions_in_range": _d_positions_in_range,
    "masked_ids_not_special": _d_masked_ids_not_special,
    "nsp_label": _d_nsp_label,
}
assert _DETAILS.keys() == RULES.keys()


def check_batch(
    batch: Mapping[str, np.ndarray],
    ids: SpecialIds,
    shard: str,
    first_record: int,
    limit: int | None = None,
) -> list[Violation]:
    """batch: feature name -> array of shape (N, length): input_ids, input_mask, segment_ids (int64,
    length max_seq_length), masked_lm_positions, masked_lm_ids (int64, length
    max_predictions_per_seq), masked_lm_weights (float32, same), next_sentence_labels (int64,
    length 1). Row i is record first_record + i of `shard`.

    Returns violations ordered by record then rule (in ``RULES`` order; at most `limit` if given);
    one Violation per (record, rule).
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    b = _Batch(batch, ids)
    if b.n == 0 or limit == 0:
        return []
    table = b.compute()  # (N, rules)
    names = list(RULES)
    failing = np.flatnonzero(table.any(axis=1))
    out: list[Violation] = []
    for i in failing.tolist():
        for k in np.flatnonzero(table[i]).tolist():
            rule = names[k]
            out.append(Violation(shard, first_record + i, rule, b.detail(rule, i)))
            if limit is not None and len(out) >= limit:
                return out
    return out
