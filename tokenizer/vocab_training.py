"""Deterministic WordPiece vocabulary training with Google's ``vocab.txt`` layout.

Text is normalized and split into words with exactly ``wordpiece.bert_normalizer`` and
``wordpiece.bert_pre_tokenizer``; merges are learned by HF ``tokenizers.trainers.WordPieceTrainer``.

The Rust trainer alone is not deterministic: it numbers ``##x`` symbols in hash-map order (so
merges whose counts tie can come out in a different order, or not at all, at the size limit)
and picks ``limit_alphabet`` characters with an unstable sort. So words are counted here first
(one pass over ``sentences``), the alphabet is chosen here (most frequent characters, ties by
code point) and the ``##x`` symbols are registered up front in code point order. Cost: the
counting pass is Python-driven, a few MB/s per process; memory holds one entry per distinct word.

Layout of the result (Google's): ``[PAD]`` = 0, ``[unused0]`` .. ``[unused98]`` = 1..99,
``[UNK]`` = 100, ``[CLS]`` = 101, ``[SEP]`` = 102, ``[MASK]`` = 103, ``[unused99]`` ... up to
``reserved_unused`` unused slots in all, then the learned tokens: the alphabet characters, their
``##`` continuation forms, then merges in the order they were learned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, pre_tokenizers, trainers
from tokenizers.models import WordPiece

from tokenizer.wordpiece import CONTINUATION_PREFIX, UNK_TOKEN, bert_normalizer, bert_pre_tokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_UNUSED_BEFORE_UNK = 99  # [unused0]..[unused98] sit between [PAD] and [UNK] in Google's layout.
_REPEAT_CHUNK = 4096  # a word repeated this many times at most per string fed to the trainer


def effective_reserved_unused(vocab_size: int, reserved_unused: int) -> int:
    """Unused slots actually reserved: at most a tenth of the non-special slots.

    So Google's 30,522-token layout keeps its 994 slots, a 1,000-token vocab keeps 99 (``[UNK]``
    still at id 100) and a 200-token sample vocab keeps 19 (``[UNK]`` then sits at id 20).
    """
    return max(0, min(reserved_unused, (vocab_size - len(SPECIAL_TOKENS)) // 10))


def reserved_layout(n_unused: int) -> list[str]:
    """``[PAD]``, the first 99 ``[unusedN]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``, the rest."""
    unused = [f"[unused{i}]" for i in range(n_unused)]
    head = unused[:_UNUSED_BEFORE_UNK]
    return ["[PAD]", *head, "[UNK]", "[CLS]", "[SEP]", "[MASK]", *unused[len(head) :]]


def count_words(sentences: Iterable[str], do_lower_case: bool) -> Counter[str]:
    """Word frequencies under the BERT normalization and pre-tokenization."""
    normalizer, pre_tokenizer = bert_normalizer(do_lower_case), bert_pre_tokenizer()
    counts: Counter[str] = Counter()
    for sentence in sentences:
        counts.update(
            w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(sentence))
        )
    return counts


def _repeated_words(counts: Counter[str]) -> Iterator[str]:
    """The counted words again, as space-separated text, in a fixed order."""
    for word, n in sorted(counts.items()):
        while n > 0:
            k = min(n, _REPEAT_CHUNK)
            yield " ".join([word] * k)
            n -= k


def train_wordpiece_vocab(
    sentences: Iterable[str],
    vocab_size: int,
    do_lower_case: bool,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    reserved_unused: int = 994,
) -> list[str]:
    """Learns a vocabulary of exactly ``vocab_size`` tokens in Google's layout (module doc).

    Same input and arguments give the same list. ``reserved_unused`` is capped by
    ``effective_reserved_unused``. Raises ValueError when the corpus yields fewer learnable tokens
    than the slots left (too little text for ``vocab_size`` at ``min_frequency``) or when the
    alphabet alone does not fit; the vocabulary is never padded.
    """
    n_unused = effective_reserved_unused(vocab_size, reserved_unused)
    reserved = reserved_layout(n_unused)
    n_learned = vocab_size - len(reserved)
    if n_learned <= 0:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room after {len(reserved)} reserved tokens"
        )

    counts = count_words(sentences, do_lower_case)
    char_counts: Counter[str] = Counter()
    for word, n in counts.items():
        for ch in word:
            char_counts[ch] += n
    ranked = sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    alphabet = sorted(ch for ch, _ in ranked[:limit_alphabet])
    kept = set(alphabet)
    continuations = sorted({ch for word in counts for ch in word[1:] if ch in kept})
    continuation_tokens = [CONTINUATION_PREFIX + ch for ch in continuations]
    if len(alphabet) + len(continuation_tokens) > n_learned:
        raise ValueError(
            f"the alphabet ({len(alphabet)} characters + {len(continuation_tokens)} ## forms) does "
            f"not fit in the {n_learned} learnable slots of vocab_size={vocab_size}; raise "
            "vocab_size or lower limit_alphabet"
        )

    tokenizer = Tokenizer(
        WordPiece(unk_token=UNK_TOKEN, continuing_subword_prefix=CONTINUATION_PREFIX)
    )
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # words are already normalized
    trainer = trainers.WordPieceTrainer(
        vocab_size=len(SPECIAL_TOKENS) + n_learned,
        min_frequency=min_frequency,
        show_progress=False,
        # Registered first, in this order, so that their ids (merge tie-breakers) are fixed.
        special_tokens=[*SPECIAL_TOKENS, *continuation_tokens],
        # Every character beyond the given alphabet is dropped, whatever the sort order of ties.
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        continuing_subword_prefix=CONTINUATION_PREFIX,
    )
    tokenizer.train_from_iterator(_repeated_words(counts), trainer=trainer)
    by_id = sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    registered = {*SPECIAL_TOKENS, *continuation_tokens}
    merged = [t for t, _ in by_id if t not in registered and len(t) > 1]
    learned = alphabet + continuation_tokens + merged
    if len(learned) < n_learned:
        raise ValueError(
            f"learned only {len(learned)} of the {n_learned} tokens needed for vocab_size="
            f"{vocab_size} (min_frequency={min_frequency}): too little text; lower vocab_size "
            "or min_frequency, or train on more text"
        )
    vocab = reserved + learned
    if len(vocab) != vocab_size or len(set(vocab)) != vocab_size:
        raise AssertionError(f"internal error: {len(vocab)} tokens, {len(set(vocab))} distinct")
    return vocab
