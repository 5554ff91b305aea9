"""How well a vocabulary fits a text: [UNK] rate, fertility, alphabet coverage, overlap.

Words are counted as WordPiece sees them: every token that does not continue a word (``##``)
starts one, so an ``[UNK]`` word counts once. Characters are counted after the BERT normalization
(so accents are gone for an uncased vocabulary), whitespace excluded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer, bert_normalizer

_UNUSED = re.compile(r"^\[unused\d+\]$")


def vocab_figures(vocab: Vocab, do_lower_case: bool, sentences: Sequence[str]) -> dict:
    """Figures of ``vocab`` on ``sentences``: tokens, words, [UNK] rate (per token), fertility
    (tokens per word), alphabet coverage (share of non-space characters that are vocabulary
    tokens by themselves) and the most frequent characters it lacks."""
    tokenizer = BertWordPieceTokenizer(vocab, do_lower_case)
    encoded = tokenizer.encode_batch(list(sentences))
    continuation = vocab.continuation_mask()
    tokens = words = unk = 0
    for ids in encoded:
        tokens += len(ids)
        unk += sum(1 for i in ids if i == vocab.unk_id)
        words += sum(1 for i in ids if not continuation[i])
    normalizer = bert_normalizer(do_lower_case)
    chars: Counter[str] = Counter()
    for s in sentences:
        chars.update(c for c in normalizer.normalize_str(s) if not c.isspace())
    single = {t for t in vocab.tokens if len(t) == 1}
    total_chars = sum(chars.values())
    missing = Counter({c: n for c, n in chars.items() if c not in single})
    return {
        "sentences": len(sentences),
        "words": words,
        "tokens": tokens,
        "unk_tokens": unk,
        "unk_rate": round(unk / tokens, 6) if tokens else None,
        "fertility": round(tokens / words, 4) if words else None,
        "alphabet_coverage": round(1 - sum(missing.values()) / total_chars, 6)
        if total_chars
        else None,
        "missing_characters": [
            {"character": c, "codepoint": f"U+{ord(c):04X}", "count": n}
            for c, n in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
        ],
    }


def vocab_overlap(a: Vocab, b: Vocab) -> dict:
    """Shared tokens of two vocabularies, ``[unusedN]`` slots left out."""
    tokens_a = {t for t in a.tokens if not _UNUSED.match(t)}
    tokens_b = {t for t in b.tokens if not _UNUSED.match(t)}
    shared = tokens_a & tokens_b
    return {
        "tokens": len(tokens_a),
        "other_tokens": len(tokens_b),
        "shared": len(shared),
        "share_of_this": round(len(shared) / len(tokens_a), 6) if tokens_a else None,
        "share_of_other": round(len(shared) / len(tokens_b), 6) if tokens_b else None,
    }
