"""Throughput of ``bertprep clean`` on the shared Wikipedia dump (bz2) and books.

    .venv/bin/python -m benchmarks.clean_benchmark [--copies 8]

Each input is copied ``--copies`` times into benchmarks/work/clean-in (so every core has files to
read; dedup is off so every copy is cleaned), then cleaned as a new process with the multi-process
DirectRunner. Reports raw input MB/s (compressed bytes for bz2, and the uncompressed XML MB/s), MB/s
per core, and the peak RSS of the whole process tree.
"""

from __future__ import annotations

import argparse
import bz2
import datetime
import json
import os
import shutil

from benchmarks.books_corpus import CORPORA, ROOT
from benchmarks.process_tree import bertprep_command, measure

WORK = ROOT / "benchmarks" / "work"
WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    inputs = WORK / "clean-in"
    shutil.rmtree(inputs, ignore_errors=True)
    (inputs / "wiki").mkdir(parents=True)
    (inputs / "books").mkdir(parents=True)
    for i in range(args.copies):
        shutil.copy(CORPORA / "wiki" / WIKI, inputs / "wiki" / f"copy{i}-{WIKI}")
        for book in sorted((CORPORA / "books").glob("*.txt")):
            shutil.copy(book, inputs / "books" / f"copy{i}-{book.name}")
    xml_bytes = len(bz2.decompress((CORPORA / "wiki" / WIKI).read_bytes())) * args.copies
    env = dict(os.environ, NLTK_DATA=str(CORPORA / "nltk_data"))
    today = datetime.date.today().isoformat()
    print(
        "| date | input | raw MB | wall s | raw MB/s | per core | XML MB/s | documents | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in ("wikipedia", "books"):
        folder = inputs / ("wiki" if kind == "wikipedia" else "books")
        size = sum(p.stat().st_size for p in folder.iterdir())
        out = WORK / f"clean-out-{kind}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [
            *bertprep_command(),
            "clean",
            f"--{kind}",
            str(folder / "*"),
            "--output",
            str(out),
            "--dedup",
            "none",
            "--direct_running_mode=multi_processing",
            f"--direct_num_workers={args.workers}",
        ]
        m = measure(cmd, env=env)
        if m.returncode != 0:
            raise SystemExit(f"clean failed:\n{m.output[-3000:]}")
        manifest = json.loads((out / "manifest.json").read_text())
        mbps = size / 1e6 / m.wall_seconds
        xml = f"{xml_bytes / 1e6 / m.wall_seconds:.2f}" if kind == "wikipedia" else ""
        print(
            f"| {today} | {kind} ×{args.copies} | {size / 1e6:.1f} | {m.wall_seconds:.1f} | "
            f"{mbps:.2f} | {mbps / args.workers:.2f} | {xml} | {manifest['totals']['documents']:,} | "
            f"{m.peak_rss_bytes / 2**20:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
