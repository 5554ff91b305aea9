"""Regenerates sample/vocab.txt: a small uncased WordPiece vocab trained on sample/corpus.

    .venv/bin/python scripts/make_sample_vocab.py [--vocab-size 4000]

The file is committed so the demo and fast tests need no third-party vocabulary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenizer.vocab_training import train_wordpiece_vocab

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()
    sentences = [
        line.strip()
        for path in sorted((ROOT / "sample" / "corpus").glob("*.txt"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    tokens = train_wordpiece_vocab(sentences, vocab_size=args.vocab_size, do_lower_case=True)
    out = ROOT / "sample" / "vocab.txt"
    out.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    print(f"{len(tokens)} tokens → {out}")


if __name__ == "__main__":
    main()
