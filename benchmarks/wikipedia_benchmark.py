"""`bertprep clean --wikipedia` against WikiExtractor + an NLTK sentence split, side by side.

    .venv/bin/python -m benchmarks.wikipedia_benchmark [--copies 8] [--workers 2] [--repeat 3]
        [--baseline REV]

Everything is made under benchmarks/work/wikipedia (git-ignored): ``--copies`` copies of the shared
enwiki chunk (as separate .bz2 files for us; concatenated into one .bz2 dump for WikiExtractor, as
its users run it on one dump file), and a throwaway virtual environment with WikiExtractor 3.1.0
and NLTK (a benchmark tool only: never a dependency of the product). In one run it times:

1. WikiExtractor ``--no-templates --processes W`` on the one dump;
2. NLTK ``sent_tokenize`` (punkt_tab from the shared corpora) of its output in W processes;
3. ``bertprep clean --wikipedia ... --dedup none`` with W multi-process DirectRunner workers;
4. the same on one multistream dump of the copies (with its index) split into ranges;
5. our stage alone in one process, no Beam: XML → paragraphs, and the Punkt split on its own;
6. the wikitext steps on one copy: before (``--baseline``), pre-pass only, pre-pass + fast path;

steps 1-4 (and ``--baseline REV``'s clean) ``--repeat`` times in rotation, keeping each one's best
wall and CPU time (the machine is shared: a busy spell then costs every step alike); then prints
the wall and CPU times, MB/s of XML (per core), the ratio (1 + 2) / 3 and a quality
comparison on the same pages (one copy): sentences with template holes or markup debris.
"""

from __future__ import annotations

import argparse
import bz2
import datetime
import io
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.books_corpus import CORPORA, ROOT
from benchmarks.multistream_dump import write_multistream_dump
from benchmarks.process_tree import bertprep_command, measure

WORK = ROOT / "benchmarks" / "work" / "wikipedia"
WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
WIKIEXTRACTOR = "wikiextractor==3.1.0"
NLTK = "nltk==3.9.1"
NLTK_DATA = CORPORA / "nltk_data"

#: Holes a removed template leaves in running text: "Albedo () or", "At , Alabama", "(; born".
TEMPLATE_HOLE = re.compile(r"\(\s*[,;:]?\s*\)|\(\s*[,;:]|\s[,;:.](?=\s|$)|^\s*[,;:.]")

NLTK_SPLIT = r"""
import re, sys
from multiprocessing import Pool
import nltk

def split(doc):
    return [s for para in doc.split("\n") if para.strip() for s in nltk.sent_tokenize(para)]

def main(src, dst, processes):
    text = open(src, encoding="utf-8").read()
    docs = [d.split("\n", 2)[-1] for d in re.findall(r"<doc[^>]*>(.*?)</doc>", text, re.S)]
    with Pool(processes) as pool:
        out = pool.map(split, docs, chunksize=8)
    with open(dst, "w", encoding="utf-8") as f:
        for sentences in out:
            f.write("\n".join(sentences) + "\n\n")

main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def _venv() -> Path:
    """The throwaway environment with WikiExtractor and NLTK (made once, reused)."""
    venv = WORK.parent / "wikiextractor-venv"
    python = venv / "bin" / "python"
    if not (venv / "bin" / "wikiextractor").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", WIKIEXTRACTOR, NLTK], check=True)
    return venv


def _renumbered(xml: str, copy: int) -> str:
    """The dump's pages with page ids made unique per copy (ids are document keys)."""
    return re.sub(
        r"(<page>\s*<title>[^<]*</title>\s*<ns>[^<]*</ns>\s*<id>)(\d+)",
        lambda m: f"{m.group(1)}{int(m.group(2)) + copy * 10_000_000}",
        xml,
    )


def _make_inputs(copies: int) -> tuple[Path, Path, Path, int]:
    """(folder of per-copy .bz2 files, one concatenated .bz2 dump, multistream folder, XML bytes)."""
    raw = (CORPORA / "wiki" / WIKI).read_bytes()
    xml = bz2.decompress(raw).decode("utf-8")
    corpus = WORK / f"copies-{copies}"
    files = corpus / "files"
    files.mkdir(parents=True, exist_ok=True)
    for i in range(copies):
        (files / f"copy{i}-{WIKI}").write_bytes(raw)
    head_end = xml.index("</siteinfo>") + len("</siteinfo>\n")
    body = xml[head_end : xml.rindex("</mediawiki>")]
    bodies = [_renumbered(body, i) for i in range(copies)]
    one = corpus / "one-dump.xml.bz2"
    if not one.exists():
        one.write_bytes(
            bz2.compress((xml[:head_end] + "".join(bodies) + "</mediawiki>\n").encode())
        )
    multistream = corpus / "multistream"
    multistream.mkdir(exist_ok=True)
    dump = multistream / "enwiki-copies-multistream.xml.bz2"
    if not dump.exists():
        pages = [p + "</page>\n" for b in bodies for p in b.split("</page>")[:-1]]
        index = multistream / "enwiki-copies-multistream-index.txt.bz2"
        # 100 pages a stream, as Wikimedia's dumps
        write_multistream_dump(xml[:head_end], pages, dump, index, pages_per_stream=100)
    return files, one, multistream, len(xml.encode()) * copies


def _clean(inputs: str, out: Path, workers: int, *extra: str, source: Path = ROOT) -> Timing:
    cmd = [
        *bertprep_command(),
        "clean",
        "--wikipedia",
        inputs,
        "--output",
        str(out),
        "--dedup",
        "none",
        "--direct_running_mode=multi_processing",
        f"--direct_num_workers={workers}",
        *extra,
    ]
    env = dict(os.environ, NLTK_DATA=str(NLTK_DATA), PYTHONPATH=str(source))
    m, cpu = _timed(cmd, env=env, cwd=source)
    if m.returncode != 0:
        raise SystemExit(f"bertprep clean failed:\n{m.output[-3000:]}")
    return m.wall_seconds, cpu


Timing = tuple[float, float]
"""(wall seconds, CPU seconds)."""


def _timed(cmd: list[str], env: dict | None = None, cwd: Path | None = None):
    """``measure(cmd)`` unsampled (memory is not reported here, and sampling slows the run it
    watches) and the CPU seconds (user + sys) of the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = measure(cmd, env=env, cwd=cwd, memory="none")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return m, cpu


def _our_sentences(out: Path) -> dict[str, list[str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(sorted(str(p) for p in out.glob("documents-*.parquet")))
    return {r["title"]: r["sentences"] for r in table.to_pylist()}


def _their_sentences(path: Path, titles: set[str]) -> dict[str, str]:
    """WikiExtractor's text per title (of the first copy of each title)."""
    out: dict[str, str] = {}
    text = path.read_text(encoding="utf-8")
    for title, body in re.findall(r'<doc [^>]*title="([^"]*)">\n(.*?)</doc>', text, re.S):
        if title in titles and title not in out:
            out[title] = body
    return out


def _stage_alone() -> tuple[float, float, float, int]:
    """(XML MB, seconds XML → paragraphs, seconds Punkt split, sentences) in this process."""
    from pipeline.files.punkt_files import load_splitter
    from transforms.mediawiki_xml import WikiPage, iter_pages
    from transforms.text_normalization import normalize_text
    from transforms.wikitext import wikitext_to_paragraphs

    data = bz2.decompress((CORPORA / "wiki" / WIKI).read_bytes())
    splitter = load_splitter("english")
    splitter.split("Warm up. The tables load.")
    start = time.perf_counter()
    paragraphs = [
        [normalize_text(p) for p in wikitext_to_paragraphs(page.text)]
        for page in iter_pages(io.BytesIO(data), WIKI, Counter())
        if isinstance(page, WikiPage)
    ]
    extracted = time.perf_counter() - start
    start = time.perf_counter()
    sentences = sum(len(splitter.split(p)) for ps in paragraphs for p in ps)
    return len(data) / 1e6, extracted, time.perf_counter() - start, sentences


STEP_TIMER = r"""
import bz2, io, sys, time
from collections import Counter
from transforms.mediawiki_xml import WikiPage, iter_pages
from transforms.wikitext import wikitext_to_paragraphs
data = bz2.decompress(open(sys.argv[1], "rb").read())
pages = [p for p in iter_pages(io.BytesIO(data), "x", Counter()) if isinstance(p, WikiPage)]
kwargs = {"parse_all": True} if sys.argv[2] == "parse_all" else {}
start = time.perf_counter()
for page in pages:
    wikitext_to_paragraphs(page.text, **kwargs)
print(time.perf_counter() - start)
"""


def _steps(baseline: Path | None) -> list[tuple[str, float]]:
    """Seconds of ``wikitext_to_paragraphs`` over one copy: the baseline's code (``--baseline``),
    with the pre-pass only (every segment parsed), with the fast path (as shipped)."""
    runs = [("pre-pass, then the parser on every segment", ROOT, "parse_all")]
    runs.append(("pre-pass + fast path (the parser only where needed)", ROOT, "fast"))
    if baseline is not None:
        runs.insert(0, (f"at the baseline ({baseline.name[len('src-') :]})", baseline, "fast"))
    out = []
    for name, source, mode in runs:
        result = subprocess.run(
            [sys.executable, "-c", STEP_TIMER, str(CORPORA / "wiki" / WIKI), mode],
            env=dict(os.environ, PYTHONPATH=str(source), PYTHONDONTWRITEBYTECODE="1"),
            cwd=source,
            check=True,
            capture_output=True,
            text=True,
        )
        out.append((name, float(result.stdout.strip())))
    return out


def _quality(sentences: list[str]) -> tuple[int, int, int]:
    from benchmarks.markup_debris import markup_debris

    holes = sum(1 for s in sentences if TEMPLATE_HOLE.search(s))
    debris = sum(1 for s in sentences if markup_debris(s))
    return len(sentences), holes, debris


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also time `bertprep clean` of this git revision (extracted under benchmarks/work)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of each step (the best counts)")
    args = ap.parse_args()
    os.environ["NLTK_DATA"] = str(NLTK_DATA)  # before NLTK is imported
    WORK.mkdir(parents=True, exist_ok=True)
    venv = _venv()
    files, one, multistream, xml_bytes = _make_inputs(args.copies)
    mb = xml_bytes / 1e6
    w = args.workers
    rows = []

    we_out = WORK / "wikiextractor-out"
    split_script = WORK / "nltk_split.py"
    split_script.write_text(NLTK_SPLIT)
    we_sentences = WORK / "wikiextractor-sentences.txt"
    ours_out = WORK / "bertprep-out"
    ms_out = WORK / "bertprep-multistream-out"
    source = WORK / f"src-{args.baseline}"
    if args.baseline and not source.exists():
        source.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)

    def wikiextractor() -> Timing:
        subprocess.run(["rm", "-rf", str(we_out)], check=True)
        cmd = [str(venv / "bin" / "wikiextractor"), "--no-templates", "--processes", str(w)]
        m, cpu = _timed([*cmd, "-b", "10G", "-q", "-o", str(we_out), str(one)])
        if m.returncode != 0:
            raise SystemExit(f"wikiextractor failed:\n{m.output[-3000:]}")
        return m.wall_seconds, cpu

    def nltk_split() -> Timing:
        (extracted,) = sorted(we_out.glob("*/wiki_*"))
        m, cpu = _timed(
            [str(venv / "bin" / "python"), str(split_script), str(extracted), str(we_sentences)]
            + [str(w)],
            env=dict(os.environ, NLTK_DATA=str(NLTK_DATA)),
        )
        if m.returncode != 0:
            raise SystemExit(f"nltk split failed:\n{m.output[-3000:]}")
        return m.wall_seconds, cpu

    def ours() -> Timing:
        subprocess.run(["rm", "-rf", str(ours_out)], check=True)
        return _clean(str(files / "*"), ours_out, w)

    def baseline() -> Timing:
        base_out = WORK / "baseline-out"
        subprocess.run(["rm", "-rf", str(base_out)], check=True)
        return _clean(str(files / "*"), base_out, w, source=source)

    def multistream_dump() -> Timing:
        subprocess.run(["rm", "-rf", str(ms_out)], check=True)
        return _clean(str(multistream / "*"), ms_out, w, "--multistream-mb", "1")

    steps = {"we": wikiextractor, "nltk": nltk_split, "ours": ours, "ms": multistream_dump}
    if args.baseline:
        steps["base"] = baseline
    best: dict[str, Timing] = {}
    for _ in range(args.repeat):  # in rotation, so a busy spell hits every step alike
        for key, step in steps.items():
            wall, cpu = step()
            old = best.get(key, (float("inf"), float("inf")))
            best[key] = (min(old[0], wall), min(old[1], cpu))
    (extracted,) = sorted(we_out.glob("*/wiki_*"))
    text_mb = extracted.stat().st_size / 1e6
    parts = json.loads((ms_out / "manifest.json").read_text())["counts"]["wikipedia"]
    rows = [
        ("WikiExtractor --no-templates", *best["we"], f"{mb:.1f} MB XML, one file"),
        ("NLTK sent_tokenize of its output", *best["nltk"], f"{text_mb:.1f} MB text"),
        ("bertprep clean --wikipedia", *best["ours"], f"{args.copies} files"),
    ]
    if args.baseline:
        rows.append((f"bertprep clean at {args.baseline}", *best["base"], f"{args.copies} files"))
    ranges = parts.get("multistream_parts", 0)
    rows.append(("bertprep clean, one multistream dump", *best["ms"], f"{ranges} ranges"))

    today = datetime.date.today().isoformat()
    print(f"## {today}: {mb:.1f} MB of XML ({args.copies} copies of the enwiki chunk), {w} workers")
    print(f"(best of {args.repeat} runs in rotation; CPU s = user + sys of the process tree)")
    print("| step | wall s | CPU s | XML MB/s | per core | notes |")
    print("|---|---|---|---|---|---|")
    for name, seconds, cpu, note in rows:
        print(
            f"| {name} | {seconds:.1f} | {cpu:.1f} | {mb / seconds:.2f} | {mb / seconds / w:.2f}"
            f" | {note} |"
        )
    theirs = best["we"][0] + best["nltk"][0]
    theirs_cpu = best["we"][1] + best["nltk"][1]
    print(
        f"| WikiExtractor + NLTK | {theirs:.1f} | {theirs_cpu:.1f} | {mb / theirs:.2f} |"
        f" {mb / theirs / w:.2f} | |"
    )
    print(f"\nratio (WikiExtractor + NLTK) / bertprep: {theirs / best['ours'][0]:.2f}")
    print(f"ratio for the multistream dump: {theirs / best['ms'][0]:.2f}")
    if args.baseline:
        print(f"ratio at {args.baseline}: {theirs / best['base'][0]:.2f}")

    one_mb, extract_s, split_s, n = _stage_alone()
    print(
        f"\nour stage alone, one process, no Beam: XML → paragraphs {one_mb / extract_s:.2f} MB/s"
        f" of XML; Punkt {n:,} sentences in {split_s:.2f} s ({one_mb / split_s:.2f} MB/s of XML,"
        f" {one_mb / (extract_s + split_s):.2f} MB/s together)"
    )

    xml_mb = one_mb
    print("\n| wikitext → paragraphs, one copy, one process | seconds | MB/s of XML |")
    print("|---|---|---|")
    for name, seconds in _steps(WORK / f"src-{args.baseline}" if args.baseline else None):
        print(f"| {name} | {seconds:.2f} | {xml_mb / seconds:.2f} |")

    ours_by_title = _our_sentences(ours_out)
    theirs_raw = _their_sentences(extracted, set(ours_by_title))
    import nltk  # the product's own NLTK, with the same punkt_tab

    common = sorted(set(ours_by_title) & set(theirs_raw))
    mine = [s for t in common for s in ours_by_title[t]]
    their = [
        s
        for t in common
        for p in theirs_raw[t].split("\n")
        if p.strip()
        for s in nltk.sent_tokenize(p)
    ]
    print(f"\nquality on the same {len(common)} pages:")
    print("| output | sentences | with template holes | with markup debris |")
    print("|---|---|---|---|")
    for name, sentences in (("bertprep", mine), ("WikiExtractor + NLTK", their)):
        total, holes, debris = _quality(sentences)
        print(
            f"| {name} | {total:,} | {holes:,} ({holes / total:.2%}) |"
            f" {debris:,} ({debris / total:.2%}) |"
        )


if __name__ == "__main__":
    main()
