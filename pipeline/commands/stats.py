"""``bertprep stats``: streaming statistics of a shard set, as tables, JSON or a plot."""

from __future__ import annotations

import argparse
import json
import math
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.shard_set import add_shard_command, add_workers_argument, command_shard_set

HELP = SUMMARIES["stats"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_shard_command(
        subparsers, "stats", HELP, "Streams every shard (or a sample) on every core."
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plot", help="also write charts to a .html (single file) or .png")
    p.add_argument("--sample", type=int, help="read about this many records, spread over shards")
    add_workers_argument(p)
    p.set_defaults(run=run)


def _table(title: str, rows: list[tuple[str, object]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text without rich
        print(title)
        for k, v in rows:
            print(f"  {k:<28} {v}")
        return
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for k, v in rows:
        table.add_row(k, str(v))
    Console().print(table)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _kind_rows(report: dict) -> list[tuple[str, object]]:
    """Rows for records other than static sentence pairs: their kind, and for unmasked records
    what the trainer's dynamic mask would produce on them."""
    kind = (report.get("masking", "static"), report.get("input_mode", "sentence-pairs"))
    if kind == ("static", "sentence-pairs"):
        return []
    rows: list[tuple[str, object]] = [("kind", f"{kind[0]} masking, {kind[1]}")]
    dyn = report.get("dynamic_masking")
    if dyn:
        bound = " (at most: whole words)" if dyn["whole_word_mask"] else ""
        rows += [
            (
                "dynamic mask: predictions / instance",
                _num(dyn["expected_predictions_per_instance"]) + bound,
            ),
            ("dynamic mask: share of tokens predicted", _pct(dyn["expected_predicted_share"])),
            ("dynamic mask: records held by the cap", _pct(dyn["capped_share"])),
        ]
    return rows


def _packing_rows(report: dict) -> list[tuple[str, str]]:
    """Packed shards: rows, instances per row and how full the rows are ("records" below then
    counts instances, and every figure is per instance)."""
    packing = report.get("packing")
    if not packing:
        return []
    per_row = packing["instances_per_row"]
    histogram = ", ".join(f"{k}: {c:,}" for k, c in enumerate(per_row["histogram"]) if c and k)
    return [
        ("packed rows", f"{packing['rows']:,} (up to {packing['max_instances_per_row']} each)"),
        ("instances per row (mean; rows by count)", f"{_num(per_row['mean'])} ({histogram})"),
        ("packing efficiency (real tokens / slots)", _pct(packing["efficiency"])),
    ]


def print_report(report: dict) -> None:
    lengths = report["length"]
    ml = report["masked_lm_split"]
    segment_b = report["segment_b_length"]
    _table(
        "shards",
        [
            *_kind_rows(report),
            *_packing_rows(report),
            ("instances" if report.get("packing") else "records", f"{report['records']:,}"),
            ("shards", len(report["records_per_shard"])),
            (
                "IsNext ratio",
                f"{report['is_next_ratio']:.4f}"
                if report["records"] and report["is_next_ratio"] is not None
                else "n/a",
            ),
            (
                "length min / mean / max",
                f"{lengths['min']} / {_num(lengths['mean'])} / {lengths['max']}",
            ),
            ("padding", _pct(report["padding_fraction"])),
            (
                f"full length (= {report['max_seq_length']}, incl. all truncated pairs)",
                _pct(report["full_length_share"]),
            ),
            ("short (< half the length)", _pct(report["short_share"])),
            ("predictions / instance", _num(report["predictions_per_instance"]["mean"])),
            (
                "masked / random / kept",
                f"{_pct(ml['fractions']['mask'])} / {_pct(ml['fractions']['random'])} / "
                f"{_pct(ml['fractions']['kept'])}",
            ),
            ("[UNK] rate", _pct(report.get("unk_rate"))),
            (
                "segment A / B mean length",
                f"{_num(report['segment_a_length']['mean'])} / "
                f"{_num(segment_b['mean'] if segment_b else None)}",
            ),
        ],
    )
    top = report.get("top_tokens", [])
    if top:
        _table(
            "top tokens",
            [(t.get("token") or f"#{t['id']}", f"{t['count']:,}") for t in top],
        )
    per_shard = report["records_per_shard"]
    counts = list(per_shard.values())
    if counts:
        _table(
            "records per shard",
            [("min / max", f"{min(counts):,} / {max(counts):,}"), ("shards", len(counts))],
        )


def add_kind_figures(report: dict, total, shard_set) -> None:
    """The record kind in the report; for unmasked shards what a dynamic mask would produce on
    this sample (``dynamic_masking``); NSP figures and the malformed count (a pairs rule) set to None where the records have
    no NSP (packed sentences)."""
    from transforms.features import DYNAMIC, has_nsp
    from transforms.record_stats import dynamic_mask_expectation

    sizes = shard_set.sizes
    report["masking"] = sizes.masking
    report["input_mode"] = sizes.input_mode
    if not has_nsp(sizes.input_mode):
        for key in ("is_next_records", "is_next_ratio", "malformed_records"):
            report[key] = None
    if sizes.masking == DYNAMIC:
        spec = (shard_set.manifest or {}).get("dynamic_masking", {})
        prob = float(spec.get("masked_lm_prob", 0.15))
        figures = dynamic_mask_expectation(
            total.length_histogram, prob, sizes.max_predictions_per_seq
        )
        figures["masked_lm_prob"] = prob
        figures["whole_word_mask"] = bool(spec.get("whole_word_mask", False))
        figures["split"] = {
            "mask": spec.get("mask_token_prob", 0.8),
            "random": spec.get("random_token_prob", 0.1),
            "kept": spec.get("keep_token_prob", 0.1),
        }
        report["dynamic_masking"] = figures


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from shards.scan import ScanRequest, scan_shards

    shard_set = command_shard_set(args, extra)
    for note in shard_set.notes:
        print(f"note: {note}", file=sys.stderr)
    limit = math.ceil(args.sample / len(shard_set.paths)) if args.sample else None
    request = ScanRequest(
        sizes=shard_set.sizes,
        stats_ids=shard_set.ids,
        files=shard_set.files,
        limit_records=limit,
    )
    scans = scan_shards(shard_set.paths, request, args.workers or None)
    total = scans[0].stats
    for scan in scans[1:]:
        total.merge(scan.stats)
    report = total.to_json(shard_set.tokens)
    add_kind_figures(report, total, shard_set)
    problems = [str(s.problem) for s in scans if s.problem]
    report["problems"] = problems
    report["sampled"] = limit is not None
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    for p in problems:
        print(f"bertprep stats: {p}", file=sys.stderr)
    if args.plot:
        from shards.plots import write_report

        write_report(report, args.plot)
        print(f"charts written to {args.plot}", file=sys.stderr)
    return 1 if problems else 0
