"""Statistics over pretraining records, accumulated batch by batch and merged exactly.

``ShardSetStats`` is fed batches of parsed records (the feature contract of
``transforms.features``: one ``(N, width)`` numpy array per feature) and keeps only raw counts —
histograms, totals and a per-token-id count array — so that accumulators built in separate worker
processes pickle, merge and report exactly as one pass over all the records would. Fractions and
means are computed only in ``to_json``.

Figures are taken on the *original* tokens: the ``masked_lm_ids`` labels are put back at their
positions before tokens are counted, ``[UNK]`` is measured and ``[SEP]`` is located. The realized
masked-LM split compares, for every used prediction slot (weight > 0), the token at the position
with its label: ``[MASK]`` → "mask", the label itself → "kept", anything else → "random".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from transforms.features import FEATURE_NAMES, IS_NEXT
from transforms.masking import prediction_budget
from transforms.special_ids import GOOGLE_IDS, SpecialIds

SPLIT_NAMES: tuple[str, ...] = ("mask", "random", "kept")
"""The realized masked-LM outcomes, in report order."""


def _mean(histogram: np.ndarray) -> float | None:
    total = int(histogram.sum())
    if total == 0:
        return None
    return float(np.dot(np.arange(histogram.size, dtype=np.float64), histogram) / total)


def _extent(histogram: np.ndarray) -> tuple[int | None, int | None]:
    nonzero = np.flatnonzero(histogram)
    if nonzero.size == 0:
        return None, None
    return int(nonzero[0]), int(nonzero[-1])


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _distribution(histogram: np.ndarray) -> dict:
    low, high = _extent(histogram)
    return {
        "histogram": [int(c) for c in histogram],
        "min": low,
        "mean": _mean(histogram),
        "max": high,
    }


class ShardSetStats:
    """Accumulates record statistics over a set of shards; see the module docstring.

    ``update`` takes one batch of one shard; ``merge`` adds another accumulator (same sizes and
    ids) in place; ``to_json`` reports. Instances pickle with the standard library.
    """

    def __init__(
        self,
        max_seq_length: int,
        max_predictions_per_seq: int,
        ids: SpecialIds | None = None,
        top_k: int = 20,
        max_instances_per_row: int = 0,
    ) -> None:
        if max_seq_length < 1:
            raise ValueError(f"max_seq_length must be at least 1, got {max_seq_length}")
        if max_predictions_per_seq < 0:
            raise ValueError(
                f"max_predictions_per_seq must be non-negative, got {max_predictions_per_seq}"
            )
        if top_k < 0:
            raise ValueError(f"top_k must be non-negative, got {top_k}")
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.ids = ids if ids is not None else GOOGLE_IDS
        self.top_k = top_k
        self.max_instances_per_row = max_instances_per_row
        self.instances_per_row_histogram = np.zeros(max_instances_per_row + 1, dtype=np.int64)
        """Packed shards: rows by the number of instances they hold (records then count
        instances, every figure per instance; ``records_per_shard`` counts rows)."""

        length_bins = max_seq_length + 1
        self.records_per_shard: dict[str, int] = {}
        self.is_next_records = 0
        self.length_histogram = np.zeros(length_bins, dtype=np.int64)
        self.predictions_histogram = np.zeros(max_predictions_per_seq + 1, dtype=np.int64)
        self.split_counts = np.zeros(len(SPLIT_NAMES), dtype=np.int64)
        self.segment_a_histogram = np.zeros(length_bins, dtype=np.int64)
        self.segment_b_histogram = np.zeros(length_bins, dtype=np.int64)
        self.malformed_records = 0
        # Counts of original tokens at real (non-padding) positions, indexed by token id; grows.
        self.token_counts = np.zeros(0, dtype=np.int64)

    # -- accumulation ---------------------------------------------------------------------------

    @property
    def records(self) -> int:
        return int(self.length_histogram.sum())

    def _arrays(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [name for name in FEATURE_NAMES if name not in batch]
        if missing:
            raise ValueError(f"batch lacks feature(s): {', '.join(missing)}")
        widths = {
            "input_ids": self.max_seq_length,
            "input_mask": self.max_seq_length,
            "segment_ids": self.max_seq_length,
            "masked_lm_positions": self.max_predictions_per_seq,
            "masked_lm_ids": self.max_predictions_per_seq,
            "masked_lm_weights": self.max_predictions_per_seq,
            "next_sentence_labels": 1,
        }
        arrays: dict[str, np.ndarray] = {}
        rows: int | None = None
        for name, width in widths.items():
            array = np.asarray(batch[name])
            if name == "next_sentence_labels" and array.ndim == 1:
                array = array.reshape(-1, 1)
            if array.ndim != 2 or array.shape[1] != width:
                raise ValueError(f"{name} must have shape (N, {width}), got {array.shape}")
            if rows is None:
                rows = array.shape[0]
            elif array.shape[0] != rows:
                raise ValueError(
                    f"{name} has {array.shape[0]} rows where input_ids has {rows}: "
                    "every feature of a batch must have the same number of records"
                )
            arrays[name] = array
        return arrays

    def update(
        self,
        batch: Mapping[str, np.ndarray],
        shard: str,
        instances_per_row: np.ndarray | None = None,
    ) -> None:
        """Adds one batch of records read from ``shard`` (feature name → ``(N, width)`` array).

        Packed shards: ``batch`` holds the instances of a batch of rows, unpacked, and
        ``instances_per_row`` how many each row held (``records_per_shard`` counts rows).
        A batch that fails a check (missing feature, wrong shape, position out of range,
        negative id) raises ValueError and leaves the accumulator unchanged.
        """
        arrays = self._arrays(batch)
        input_ids = arrays["input_ids"]
        n, seq_len = input_ids.shape
        rows = n
        if instances_per_row is not None:
            rows = len(instances_per_row)
            self.instances_per_row_histogram += np.bincount(
                instances_per_row, minlength=self.max_instances_per_row + 1
            )
        if n == 0:
            self.records_per_shard[shard] = self.records_per_shard.get(shard, 0) + rows
            return

        real = arrays["input_mask"] != 0
        lengths = np.count_nonzero(real, axis=1)

        # Masked-LM slots: realized split, then the original tokens put back.
        used = arrays["masked_lm_weights"] > 0
        slot_rows = np.nonzero(used)[0]
        positions = arrays["masked_lm_positions"][used]
        labels = arrays["masked_lm_ids"][used]
        if positions.size and (positions.min() < 0 or positions.max() >= seq_len):
            raise ValueError(
                f"masked_lm_positions of used slots must lie in [0, {seq_len}), "
                f"got values in [{positions.min()}, {positions.max()}]"
            )
        current = input_ids[slot_rows, positions]
        is_mask = current == self.ids.mask_id
        n_mask = int(np.count_nonzero(is_mask))
        n_kept = int(np.count_nonzero(~is_mask & (current == labels)))

        original = np.where(real, input_ids, 0)
        in_record = real[slot_rows, positions]
        original[slot_rows[in_record], positions[in_record]] = labels[in_record]

        # Token counts over real positions: padding was set to 0 above, so take it back off id 0.
        flat = original.ravel()
        if flat.min() < 0:
            raise ValueError(f"token ids must be non-negative, got {flat.min()}")
        counts = np.bincount(flat)
        counts[0] -= real.size - int(lengths.sum())

        # A = tokens between [CLS] and the first [SEP], B = between the first and the last [SEP].
        is_sep = (original == self.ids.sep_id) & real
        sep_count = np.count_nonzero(is_sep, axis=1)
        has_sep = sep_count > 0
        first = np.where(has_sep, is_sep.argmax(axis=1), lengths)
        last = np.where(has_sep, seq_len - 1 - is_sep[:, ::-1].argmax(axis=1), first)
        a_len = np.clip(first - 1, 0, seq_len)
        b_len = np.clip(last - first - 1, 0, seq_len)
        # Well formed: [CLS] first, exactly two [SEP], the second one the last real token.
        well_formed = (original[:, 0] == self.ids.cls_id) & (sep_count == 2) & (last == lengths - 1)

        # Every check passed: commit.
        self.records_per_shard[shard] = self.records_per_shard.get(shard, 0) + rows
        self.length_histogram += np.bincount(lengths, minlength=seq_len + 1)
        self.is_next_records += int(np.count_nonzero(arrays["next_sentence_labels"] == IS_NEXT))
        self.predictions_histogram += np.bincount(
            np.count_nonzero(used, axis=1), minlength=self.max_predictions_per_seq + 1
        )
        self.split_counts += np.array([n_mask, labels.size - n_mask - n_kept, n_kept])
        if counts.size > self.token_counts.size:
            counts[: self.token_counts.size] += self.token_counts
            self.token_counts = counts
        else:
            self.token_counts[: counts.size] += counts
        self.segment_a_histogram += np.bincount(a_len, minlength=seq_len + 1)
        self.segment_b_histogram += np.bincount(b_len, minlength=seq_len + 1)
        self.malformed_records += int(n - np.count_nonzero(well_formed))

    def merge(self, other: ShardSetStats) -> None:
        """Adds ``other``'s counts to this accumulator (exactly; ``other`` is left unchanged)."""
        if (
            other.max_seq_length != self.max_seq_length
            or other.max_predictions_per_seq != self.max_predictions_per_seq
            or other.ids != self.ids
            or other.max_instances_per_row != self.max_instances_per_row
        ):
            raise ValueError(
                "cannot merge statistics of different record sizes or special ids: "
                f"({self.max_seq_length}, {self.max_predictions_per_seq}, {self.ids}) vs "
                f"({other.max_seq_length}, {other.max_predictions_per_seq}, {other.ids})"
            )
        for shard, count in other.records_per_shard.items():
            self.records_per_shard[shard] = self.records_per_shard.get(shard, 0) + count
        self.is_next_records += other.is_next_records
        self.instances_per_row_histogram += other.instances_per_row_histogram
        self.length_histogram += other.length_histogram
        self.predictions_histogram += other.predictions_histogram
        self.split_counts += other.split_counts
        self.segment_a_histogram += other.segment_a_histogram
        self.segment_b_histogram += other.segment_b_histogram
        self.malformed_records += other.malformed_records
        if other.token_counts.size > self.token_counts.size:
            grown = other.token_counts.copy()
            grown[: self.token_counts.size] += self.token_counts
            self.token_counts = grown
        else:
            self.token_counts[: other.token_counts.size] += other.token_counts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardSetStats):
            return NotImplemented
        return self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def _state(self) -> tuple:
        nonzero = np.flatnonzero(self.token_counts)
        token_counts = self.token_counts[: nonzero[-1] + 1] if nonzero.size else nonzero
        return (
            self.max_seq_length,
            self.max_predictions_per_seq,
            self.ids,
            self.top_k,
            dict(sorted(self.records_per_shard.items())),
            self.is_next_records,
            self.malformed_records,
            tuple(int(v) for v in self.instances_per_row_histogram),
            *(
                tuple(int(v) for v in array)
                for array in (
                    self.length_histogram,
                    self.predictions_histogram,
                    self.split_counts,
                    self.segment_a_histogram,
                    self.segment_b_histogram,
                    token_counts,
                )
            ),
        )

    # -- report ---------------------------------------------------------------------------------

    def top_tokens(self, tokens: Sequence[str] | None = None) -> list[dict]:
        """The ``top_k`` most frequent original tokens, [CLS]/[SEP]/pad excluded, ties by id."""
        counts = self.token_counts.copy()
        for special in (self.ids.cls_id, self.ids.sep_id, self.ids.pad_id):
            if 0 <= special < counts.size:
                counts[special] = 0
        candidates = np.flatnonzero(counts)
        order = np.lexsort((candidates, -counts[candidates]))[: self.top_k]
        top = []
        for token_id in candidates[order]:
            token_id = int(token_id)
            name = tokens[token_id] if tokens is not None and token_id < len(tokens) else None
            top.append({"id": token_id, "token": name, "count": int(counts[token_id])})
        return top

    def to_json(self, tokens: Sequence[str] | None = None) -> dict:
        """The report, JSON-serializable; ``tokens`` (the vocabulary, by id) names top tokens.

        Ratios, shares and means are ``None`` when their denominator is zero (no records, no
        used prediction slots), as are min/max of an empty histogram.
        """
        seq_len = self.max_seq_length
        records = self.records
        lengths = np.arange(seq_len + 1)
        real_tokens = int(np.dot(lengths, self.length_histogram))
        rows = sum(self.records_per_shard.values()) if self.max_instances_per_row else records
        token_slots = rows * seq_len
        used_slots = int(self.split_counts.sum())
        unk_id = self.ids.unk_id
        unk_tokens = None
        if unk_id is not None:
            unk_tokens = int(self.token_counts[unk_id]) if unk_id < self.token_counts.size else 0
        split = {name: int(self.split_counts[i]) for i, name in enumerate(SPLIT_NAMES)}
        full_length = int(self.length_histogram[seq_len])
        short = int(self.length_histogram[: seq_len // 2].sum())
        return {
            "max_seq_length": seq_len,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "special_ids": self.ids.ids(),
            "records": records,
            "records_per_shard": dict(sorted(self.records_per_shard.items())),
            "is_next_records": self.is_next_records,
            "is_next_ratio": _ratio(self.is_next_records, records),
            "length": _distribution(self.length_histogram),
            "full_length_records": full_length,
            "full_length_share": _ratio(full_length, records),
            "short_records": short,
            "short_share": _ratio(short, records),
            "real_tokens": real_tokens,
            "padding_tokens": token_slots - real_tokens,
            "padding_fraction": _ratio(token_slots - real_tokens, token_slots),
            "predictions_per_instance": {
                "histogram": [int(c) for c in self.predictions_histogram],
                "mean": _mean(self.predictions_histogram),
                "total": used_slots,
            },
            "masked_lm_split": {
                "counts": split,
                "fractions": {name: _ratio(count, used_slots) for name, count in split.items()},
            },
            "unk_tokens": unk_tokens,
            "unk_rate": None if unk_tokens is None else _ratio(unk_tokens, real_tokens),
            "top_tokens": self.top_tokens(tokens),
            "segment_a_length": _distribution(self.segment_a_histogram),
            "segment_b_length": _distribution(self.segment_b_histogram),
            "malformed_records": self.malformed_records,
            "packing": {
                "max_instances_per_row": self.max_instances_per_row,
                "rows": rows,
                "instances_per_row": _distribution(self.instances_per_row_histogram),
                "efficiency": _ratio(real_tokens, token_slots),
                "rows_saved_factor": _ratio(records, rows),
            }
            if self.max_instances_per_row
            else None,
        }


def dynamic_mask_expectation(
    length_histogram: np.ndarray, masked_lm_prob: float, max_predictions_per_seq: int
) -> dict:
    """What the trainer's dynamic masking draws for records with these lengths
    (``length_histogram[n]`` records of ``n`` real tokens): per record
    ``min(P, max(1, round(n * masked_lm_prob)))`` predictions (exact for token-level masking, an
    upper bound with whole-word masking), the share of real tokens predicted, and how many
    records the cap ``P`` holds below the asked rate."""
    hist = np.asarray(length_histogram, dtype=np.int64)
    n = np.arange(len(hist))
    want = prediction_budget(n, masked_lm_prob)
    budget = np.minimum(max_predictions_per_seq, want)
    records = int(hist.sum())
    predictions = int(np.dot(budget, hist))
    tokens = int(np.dot(n, hist))
    capped = int(hist[want > max_predictions_per_seq].sum())
    return {
        "expected_predictions_per_instance": round(predictions / records, 4) if records else None,
        "expected_predicted_share": round(predictions / tokens, 6) if tokens else None,
        "expected_predictions": predictions,
        "capped_records": capped,
        "capped_share": round(capped / records, 6) if records else None,
    }
