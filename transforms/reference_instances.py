"""google-research/bert's instance creation and masking, draw for draw, as compiled kernels.

``create_reference_instances`` gives, for one invocation of ``create_pretraining_data.py`` (its
documents, flags and ``--random_seed``), the instances that script writes, in the order it writes
them: the same document shuffle, target lengths, A/B splits, random next sentences (with their
retries, and from the same document when the retries run out, as there), truncation sides, mask
choices and 80/10/10 decisions, replacement tokens (any vocab entry), and the final instance
shuffle, all drawn from ``transforms.reference_stream`` in the script's order. With whole-word
masking the rule is that of the script's ``--do_whole_word_mask`` (google-research/bert master):
a ``##`` piece joins the previous candidate (across a ``[SEP]`` too), a word that would overflow
the prediction budget is skipped, and [MASK]/keep/random is drawn per piece.

Documents are token spans, not lists of strings: instances are kept as spans of the flat token
array (``transforms.reference_layout.ReferenceInstances``), ``45 + 6 * max_predictions_per_seq``
bytes each, made ``BATCH_INSTANCES`` at a time, and become records only when written
(``record_features``).
"""

from __future__ import annotations

import numba
import numpy as np

from transforms.reference_layout import ReferenceDocuments, ReferenceInstances, ReferenceSettings
from transforms.reference_stream import (
    rand_int,
    random_float,
    shuffle_in_place,
    shuffled_range,
)


@numba.njit(cache=True)
def _token_at(ids, a_start, la, b_start, p):
    """The token at position ``p`` of ``[CLS] A [SEP] B [SEP]``, ``p`` a candidate position."""
    if p <= la:
        return ids[a_start + p - 1]
    return ids[b_start + p - la - 2]


@numba.njit(cache=True)
def _mask(
    state,
    ids,
    a_start,
    la,
    b_start,
    lb,
    num_to_predict,
    whole_word,
    is_continuation,
    mask_id,
    vocab_word_ids,
    out_positions,
    out_replacements,
):
    """The reference's ``create_masked_lm_predictions`` on one instance; returns the number of
    predictions, their positions ascending in ``out_positions`` and the ids placed there."""
    n = la + lb
    positions = np.empty(n, dtype=np.int64)
    for k in range(la):
        positions[k] = 1 + k
    for k in range(lb):
        positions[la + k] = la + 2 + k
    group_start = np.empty(n + 1, dtype=np.int64)
    groups = 0
    for k in range(n):
        p = positions[k]
        if whole_word and groups >= 1 and is_continuation[_token_at(ids, a_start, la, b_start, p)]:
            continue
        group_start[groups] = k
        groups += 1
    group_start[groups] = n
    order = np.arange(groups)
    shuffle_in_place(state, order)
    count = 0
    for g in range(groups):
        if count >= num_to_predict:
            break
        first = group_start[order[g]]
        last = group_start[order[g] + 1]
        if count + (last - first) > num_to_predict:
            continue
        for k in range(first, last):
            p = positions[k]
            if random_float(state) < 0.8:
                token = mask_id
            elif random_float(state) < 0.5:
                token = _token_at(ids, a_start, la, b_start, p)
            else:
                token = vocab_word_ids[rand_int(state, 0, len(vocab_word_ids) - 1)]
            out_positions[count] = p
            out_replacements[count] = token
            count += 1
    ranked = np.argsort(out_positions[:count], kind="mergesort")
    sorted_positions = out_positions[:count][ranked].copy()
    sorted_replacements = out_replacements[:count][ranked].copy()
    out_positions[:count] = sorted_positions
    out_replacements[:count] = sorted_replacements
    return count


@numba.njit(cache=True)
def _create_pass(
    state,
    shuffled,
    ids,
    token_starts,
    sentence_starts,
    max_seq_length,
    short_seq_prob,
    predictions_by_length,
    whole_word,
    is_continuation,
    mask_id,
    vocab_word_ids,
    a_start,
    a_end,
    b_start,
    b_end,
    random_next,
    predictions,
    positions,
    replacements,
    cursor,
):
    """The reference's ``create_instances_from_document`` over the documents (in shuffled
    order) from where ``cursor`` stands, filling the arrays from 0 until they are full or the
    pass is over; returns the fill.

    ``cursor`` (int64[6]: document, sentence, chunk start, chunk tokens, target, paused) is where
    the pass stands: when the arrays are full before the pass ends, the kernel stops at the next
    instance, before any of its draws, sets ``paused`` and returns; called again (with emptied
    arrays) it goes on from there, so a pass is the same whatever the arrays' size."""
    max_num_tokens = max_seq_length - 3
    documents = len(shuffled)
    capacity = len(a_start)
    filled = 0
    resume = cursor[5] == 1
    cursor[5] = 0
    document_index = cursor[0]
    while document_index < documents:
        doc = shuffled[document_index]
        first_sentence = sentence_starts[doc]
        sentences = sentence_starts[doc + 1] - first_sentence
        if resume:
            i, chunk_first, chunk_length, target = cursor[1], cursor[2], cursor[3], cursor[4]
        else:
            target = max_num_tokens
            if random_float(state) < short_seq_prob:
                target = rand_int(state, 2, max_num_tokens)
            chunk_first = 0
            chunk_length = 0
            i = 0
        while i < sentences:
            s = first_sentence + i
            if resume:
                resume = False  # this sentence's tokens were counted before the pause
            else:
                chunk_length += token_starts[s + 1] - token_starts[s]
            if i == sentences - 1 or chunk_length >= target:
                if filled == capacity:
                    cursor[0], cursor[1], cursor[2] = document_index, i, chunk_first
                    cursor[3], cursor[4], cursor[5] = chunk_length, target, 1
                    return filled
                chunk_sentences = i - chunk_first + 1
                a_sentences = 1
                if chunk_sentences >= 2:
                    a_sentences = rand_int(state, 1, chunk_sentences - 1)
                sa = token_starts[first_sentence + chunk_first]
                ea = token_starts[first_sentence + chunk_first + a_sentences]
                if chunk_sentences == 1 or random_float(state) < 0.5:
                    is_random = 1
                    target_b = target - (ea - sa)
                    other = 0
                    for _ in range(10):
                        other = rand_int(state, 0, documents - 1)
                        if other != document_index:
                            break
                    other_doc = shuffled[other]
                    other_first = sentence_starts[other_doc]
                    other_sentences = sentence_starts[other_doc + 1] - other_first
                    start = rand_int(state, 0, other_sentences - 1)
                    sb = token_starts[other_first + start]
                    eb = sb
                    for j in range(start, other_sentences):
                        eb = token_starts[other_first + j + 1]
                        if eb - sb >= target_b:
                            break
                    i -= chunk_sentences - a_sentences
                else:
                    is_random = 0
                    sb = ea
                    eb = token_starts[s + 1]
                while (ea - sa) + (eb - sb) > max_num_tokens:
                    front = random_float(state) < 0.5
                    if (ea - sa) > (eb - sb):
                        if front:
                            sa += 1
                        else:
                            ea -= 1
                    elif front:
                        sb += 1
                    else:
                        eb -= 1
                la = ea - sa
                lb = eb - sb
                count = _mask(
                    state,
                    ids,
                    sa,
                    la,
                    sb,
                    lb,
                    predictions_by_length[la + lb + 3],
                    whole_word,
                    is_continuation,
                    mask_id,
                    vocab_word_ids,
                    positions[filled],
                    replacements[filled],
                )
                a_start[filled] = sa
                a_end[filled] = ea
                b_start[filled] = sb
                b_end[filled] = eb
                random_next[filled] = is_random
                predictions[filled] = count
                filled += 1
                chunk_first = i + 1
                chunk_length = 0
            i += 1
        document_index += 1
    cursor[0] = documents
    return filled


def create_reference_instances(
    documents: ReferenceDocuments, settings: ReferenceSettings, state: np.ndarray
) -> ReferenceInstances:
    """Everything ``create_training_instances`` draws after reading: the document shuffle, every
    pass, the final shuffle; ``state`` (``reference_stream.stream_state(seed)``) is advanced."""
    if settings.max_seq_length < 5:
        raise ValueError("max_seq_length must be at least 5 (the reference asserts otherwise)")
    shuffled = shuffled_range(state, documents.documents)
    table = settings.predictions_by_length()
    parts: list[tuple[np.ndarray, ...]] = []
    capacity = max(1, min(BATCH_INSTANCES, documents.sentences))
    for _ in range(settings.dupe_factor if documents.documents else 0):
        cursor = np.zeros(6, dtype=np.int64)
        while cursor[0] < documents.documents:
            parts.append(
                _create_some(documents, settings, table, state, shuffled, cursor, capacity)
            )
    order = shuffled_range(state, sum(len(p[0]) for p in parts))
    fields = [
        np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype)
        for k, dtype in enumerate(_FIELD_DTYPES)
    ]
    mp = settings.max_predictions_per_seq
    for k in (6, 7):
        fields[k] = fields[k].reshape(-1, mp)
    return ReferenceInstances(*fields, order=order)


BATCH_INSTANCES = 1 << 16
"""Instances made per kernel call (the arrays a call fills: ~11 MB at 128/20)."""
_FIELD_DTYPES = (np.int64, np.int64, np.int64, np.int64, np.int8, np.int32, np.int16, np.int32)


def _create_some(documents, settings, table, state, shuffled, cursor, capacity: int):
    """Up to ``capacity`` instances of the pass, from ``cursor`` on (trimmed arrays)."""
    mp = settings.max_predictions_per_seq
    arrays = [np.empty(capacity, dtype) for dtype in _FIELD_DTYPES[:6]]
    positions = np.zeros((capacity, mp), np.int16)
    replacements = np.zeros((capacity, mp), np.int32)
    filled = _create_pass(
        state,
        shuffled,
        documents.ids,
        documents.token_starts,
        documents.sentence_starts,
        settings.max_seq_length,
        settings.short_seq_prob,
        table,
        settings.whole_word_mask,
        settings.is_continuation,
        settings.mask_id,
        settings.vocab_word_ids,
        *arrays,
        positions,
        replacements,
        cursor,
    )
    return (
        *(a[:filled].copy() for a in arrays),
        positions[:filled].copy(),
        replacements[:filled].copy(),
    )


@numba.njit(cache=True)
def _fill_rows(
    picks,
    ids,
    a_start,
    a_end,
    b_start,
    b_end,
    predictions,
    positions,
    replacements,
    cls_id,
    sep_id,
    input_ids,
    input_mask,
    segment_ids,
    masked_positions,
    masked_ids,
    masked_weights,
):
    for r in range(len(picks)):
        k = picks[r]
        la = a_end[k] - a_start[k]
        lb = b_end[k] - b_start[k]
        input_ids[r, 0] = cls_id
        input_ids[r, 1 : 1 + la] = ids[a_start[k] : a_end[k]]
        input_ids[r, 1 + la] = sep_id
        input_ids[r, 2 + la : 2 + la + lb] = ids[b_start[k] : b_end[k]]
        input_ids[r, 2 + la + lb] = sep_id
        input_mask[r, : 3 + la + lb] = 1
        segment_ids[r, 2 + la : 3 + la + lb] = 1
        for m in range(predictions[k]):
            p = positions[k, m]
            masked_positions[r, m] = p
            masked_ids[r, m] = input_ids[r, p]
            masked_weights[r, m] = 1.0
        for m in range(predictions[k]):
            input_ids[r, positions[k, m]] = replacements[k, m]


def record_features(
    instances: ReferenceInstances,
    picks: np.ndarray,
    ids: np.ndarray,
    settings: ReferenceSettings,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The reference's features (int64 and float, one row per instance in ``picks``), zero
    padded as ``write_instance_to_example_files`` pads them: ready for ``encode_examples``."""
    n = len(picks)
    seq, mp = settings.max_seq_length, settings.max_predictions_per_seq
    input_ids = np.zeros((n, seq), np.int32)
    input_mask = np.zeros((n, seq), np.int8)
    segment_ids = np.zeros((n, seq), np.int8)
    masked_positions = np.zeros((n, mp), np.int32)
    masked_ids = np.zeros((n, mp), np.int32)
    masked_weights = np.zeros((n, mp), np.float32)
    _fill_rows(
        np.asarray(picks, dtype=np.int64),
        ids,
        instances.a_start,
        instances.a_end,
        instances.b_start,
        instances.b_end,
        instances.predictions,
        instances.positions,
        instances.replacements,
        settings.cls_id,
        settings.sep_id,
        input_ids,
        input_mask,
        segment_ids,
        masked_positions,
        masked_ids,
        masked_weights,
    )
    ints = {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": masked_positions,
        "masked_lm_ids": masked_ids,
        "next_sentence_labels": instances.random_next[picks][:, None],
    }
    return ints, {"masked_lm_weights": masked_weights}
