"""Test helper: google-research/bert's ``create_pretraining_data.py`` (the ``bert-tensorflow``
1.0.4 wheel from PyPI, unpacked in benchmarks/work, never committed) run on the same inputs as
``--compat reference``, in this process or as its own command line.

``reference_rows`` calls the script's ``create_training_instances`` (its reading, tokenizer and
random draws) and ``compat_rows`` the project's reading + kernels; both give, per written record,
the unpadded values of every feature, plus the random stream's state afterwards.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

from tests.conftest import require_corpora


def reference_modules():
    """(create_pretraining_data, tokenization) of the reference package, imported here."""
    from benchmarks.instances_benchmark import reference_package

    path = str(reference_package())
    if path not in sys.path:
        sys.path.insert(0, path)
    from absl import flags
    from bert import create_pretraining_data, tokenization

    if not flags.FLAGS.is_parsed():
        flags.FLAGS(["reference"])
    return create_pretraining_data, tokenization


def vocab_path() -> Path:
    return require_corpora("vocab") / "bert-base-uncased-vocab.txt"


def reference_rows(
    files: list[Path],
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    dupe_factor: int = 1,
    short_seq_prob: float = 0.1,
    masked_lm_prob: float = 0.15,
    seed: int = 12345,
) -> tuple[list[dict], tuple]:
    """The reference's instances, in the order it writes them, and its generator's state."""
    create, tokenization = reference_modules()
    tokenizer = tokenization.FullTokenizer(str(vocab_path()), do_lower_case=True)
    rng = random.Random(seed)
    instances = create.create_training_instances(
        [str(f) for f in files],
        tokenizer,
        max_seq_length,
        dupe_factor,
        short_seq_prob,
        masked_lm_prob,
        max_predictions_per_seq,
        rng,
    )
    rows = [
        {
            "input_ids": tokenizer.convert_tokens_to_ids(i.tokens),
            "segment_ids": list(i.segment_ids),
            "masked_lm_positions": list(i.masked_lm_positions),
            "masked_lm_ids": tokenizer.convert_tokens_to_ids(i.masked_lm_labels),
            "next_sentence_labels": int(i.is_random_next),
        }
        for i in instances
    ]
    return rows, rng.getstate()


def compat_documents(files: list[Path]):
    from tokenizer.vocab import Vocab
    from tokenizer.wordpiece import BertWordPieceTokenizer
    from transforms.reference_text import ReferenceDocumentBuilder

    vocab = Vocab.from_file(str(vocab_path()))
    builder = ReferenceDocumentBuilder(BertWordPieceTokenizer(vocab, True).encode_batch_flat)
    for f in files:
        with f.open("rb") as stream:
            builder.add_stream(stream, str(f))
    return vocab, builder.finish()


def compat_settings(vocab, **overrides):
    from transforms.reference_layout import ReferenceSettings
    from transforms.reference_text import reference_vocab_word_ids

    values = {
        "max_seq_length": 128,
        "max_predictions_per_seq": 20,
        "masked_lm_prob": 0.15,
        "short_seq_prob": 0.1,
        "dupe_factor": 1,
        "whole_word_mask": False,
        "cls_id": vocab.cls_id,
        "sep_id": vocab.sep_id,
        "mask_id": vocab.mask_id,
        "vocab_word_ids": reference_vocab_word_ids(vocab_path().read_bytes(), vocab.tokens),
        "is_continuation": vocab.continuation_mask(),
    }
    return ReferenceSettings(**(values | overrides))


def compat_rows(files: list[Path], seed: int = 12345, **settings) -> tuple[list[dict], np.ndarray]:
    """``--compat reference``'s instances for the same call as ``reference_rows``, and the
    state of its replayed stream."""
    from transforms.reference_instances import create_reference_instances, record_features
    from transforms.reference_stream import stream_state

    vocab, documents = compat_documents(files)
    config = compat_settings(vocab, **settings)
    state = stream_state(seed)
    instances = create_reference_instances(documents, config, state)
    ints, _ = record_features(instances, instances.order, documents.ids, config)
    rows = []
    for g in range(len(instances)):
        length = int(ints["input_mask"][g].sum())
        used = int(instances.predictions[instances.order[g]])
        rows.append(
            {
                "input_ids": ints["input_ids"][g][:length].tolist(),
                "segment_ids": ints["segment_ids"][g][:length].tolist(),
                "masked_lm_positions": ints["masked_lm_positions"][g][:used].tolist(),
                "masked_lm_ids": ints["masked_lm_ids"][g][:used].tolist(),
                "next_sentence_labels": int(ints["next_sentence_labels"][g][0]),
            }
        )
    return rows, state


def book_sentences(count: int, skip: int = 0) -> list[str]:
    """``count`` sentence-like lines of real text (a Gutenberg book cut at full stops)."""
    books = sorted(require_corpora("books").glob("*.txt"))
    text = books[0].read_bytes().decode("utf-8", "replace").replace("\r\n", "\n")
    pieces = [" ".join(p.split()) for p in text.split(".")]
    sentences = [p + "." for p in pieces if len(p.split()) >= 4]
    return sentences[skip : skip + count]
