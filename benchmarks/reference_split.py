"""The hand-built sentence split users run before google-research/bert's create_pretraining_data.py.

    NLTK_DATA=../shared/corpora/nltk_data .venv/bin/python -m benchmarks.reference_split \\
        --output DIR --processes 2 corpus/*.jsonl

Not part of the product: the baseline of ``benchmarks.run_benchmark``. Reads JSONL documents
(``{"title", "text"}``, paragraphs separated by a blank line), splits every paragraph with NLTK's
``sent_tokenize`` (punkt_tab) and writes google-research/bert's text format: one sentence per line,
a blank line between documents, one ``DIR/<input stem>.txt`` per input file. The input files are
cut into ``--processes`` contiguous halves (thirds...), each handled by one ``multiprocessing``
worker, as a user's script would. Prints one JSON line: documents, sentences, bytes written.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
from pathlib import Path


def split_files(job: tuple[list[str], str]) -> dict:
    from nltk.tokenize import sent_tokenize

    paths, output = job
    documents = sentences = written = 0
    for path in paths:
        target = Path(output) / (Path(path).stem + ".txt")
        with open(path, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
            for line in src:
                if not line.strip():
                    continue
                doc = json.loads(line)
                lines = []
                for paragraph in doc["text"].split("\n\n"):
                    for sentence in sent_tokenize(" ".join(paragraph.split())):
                        sentence = sentence.strip()
                        if sentence:
                            lines.append(sentence)
                if not lines:
                    continue
                text = "\n".join(lines) + "\n\n"
                out.write(text)
                documents += 1
                sentences += len(lines)
                written += len(text.encode("utf-8"))
    return {"documents": documents, "sentences": sentences, "bytes": written}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    Path(args.output).mkdir(parents=True, exist_ok=True)
    files = sorted(args.inputs)
    n = max(1, min(args.processes, len(files)))
    groups = [files[len(files) * i // n : len(files) * (i + 1) // n] for i in range(n)]
    with multiprocessing.Pool(n) as pool:
        results = pool.map(split_files, [(g, args.output) for g in groups])
    totals = {k: sum(r[k] for r in results) for k in ("documents", "sentences", "bytes")}
    print(json.dumps(totals), flush=True)


if __name__ == "__main__":
    main()
