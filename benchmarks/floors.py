"""Floors for the stages of ``bertprep run``: what the same bytes cost done by one library alone.

    .venv/bin/python -m benchmarks.floors [--run benchmarks/work/profile-100mb]

On the output of a finished run (``benchmarks.profile_run`` leaves one), each on one core:

- **shard bytes written by numpy alone**: as many bytes as the phases' shards hold, written from
  a numpy buffer to files in 8 MiB blocks (then deleted);
- **token files read alone**: every ``tokens/*/tokens-*.bin`` read and viewed as int32;
- **tokenizer alone**: the project's WordPiece tokenizer (HF ``tokenizers``) on every sentence of
  the split stage's documents, as the tokenize stage calls it (batches of 4,096 sentences);
- **Punkt alone**: NLTK's English punkt_tab ``sent_tokenize`` (shared/corpora/nltk_data) on the
  same documents' text, each document's sentences joined by spaces.

Prints a Markdown table (seconds, MB/s) to set beside the stage times of ``run_summary.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"


def shard_bytes(run: Path) -> int:
    return sum(p.stat().st_size for p in run.glob("seq*/*/*.tfrecord*"))


def write_floor(total: int, where: Path) -> float:
    where.mkdir(parents=True, exist_ok=True)
    block = np.random.default_rng(0).integers(0, 255, 8 << 20, dtype=np.uint8)
    started = time.perf_counter()
    written, index = 0, 0
    while written < total:
        with (where / f"part-{index:05d}").open("wb") as f:
            for _ in range(16):  # 128 MiB files, as the default shard size
                n = min(len(block), total - written)
                f.write(block[:n].tobytes())
                written += n
                if written >= total:
                    break
            f.flush()
            os.fsync(f.fileno())
        index += 1
    seconds = time.perf_counter() - started
    shutil.rmtree(where)
    return seconds


def read_floor(run: Path) -> tuple[float, int]:
    started = time.perf_counter()
    tokens = 0
    for path in sorted(run.glob("tokens/*/tokens-*.bin")):
        tokens += np.frombuffer(path.read_bytes(), dtype=np.uint8).size // 4
    return time.perf_counter() - started, tokens


def documents_text(run: Path) -> list[list[str]]:
    import pyarrow.parquet as pq

    docs = []
    for path in sorted(run.glob("split/*/documents-*.parquet")):
        docs += [s or [] for s in pq.read_table(path, columns=["sentences"]).column(0).to_pylist()]
    return docs


def tokenizer_floor(docs: list[list[str]], vocab: Path) -> float:
    from tokenizer.vocab import Vocab
    from tokenizer.wordpiece import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(Vocab.from_file(str(vocab)), True)
    sentences = [s for d in docs for s in d]
    tokenizer.encode_batch_flat(sentences[:100])  # builds the Rust tokenizer
    started = time.perf_counter()
    for i in range(0, len(sentences), 4096):
        tokenizer.encode_batch_flat(sentences[i : i + 4096])
    return time.perf_counter() - started


def punkt_floor(docs: list[list[str]]) -> float:
    from benchmarks.books_corpus import punkt_sentence_splitter

    splitter = punkt_sentence_splitter()
    texts = [" ".join(d) for d in docs]
    splitter.tokenize(texts[0])
    started = time.perf_counter()
    for text in texts:
        splitter.tokenize(text)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=ROOT / "benchmarks" / "work" / "profile-100mb")
    ap.add_argument("--vocab", type=Path, default=CORPORA / "vocab" / "bert-base-uncased-vocab.txt")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core, like one worker
    total = shard_bytes(args.run)
    docs = documents_text(args.run)
    text_mb = sum(len(s.encode()) for d in docs for s in d) / 1e6
    rows = [("shard bytes written by numpy alone", write_floor(total, args.run / "floor"), total)]
    seconds, tokens = read_floor(args.run)
    rows.append(("token files read alone", seconds, tokens * 4))
    rows.append(("tokenizer alone (sentences of the split)", tokenizer_floor(docs, args.vocab), 0))
    rows.append(("Punkt alone (the same documents' text)", punkt_floor(docs), 0))
    print(f"run: {args.run} ({text_mb:.1f} MB of document text, {total / 1e6:,.0f} MB of shards)")
    print("\n| floor (one core) | seconds | MB/s |")
    print("|---|---|---|")
    for name, seconds, size in rows:
        mb = size / 1e6 if size else text_mb
        print(f"| {name} | {seconds:.2f} | {mb / seconds:,.0f} |")


if __name__ == "__main__":
    main()
