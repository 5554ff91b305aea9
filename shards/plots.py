"""Renders a shard-set statistics report as a self-contained HTML page or a PNG image.

``write_report(report, path)`` takes the dict of ``ShardSetStats.to_json()``
(``transforms.record_stats``) and writes, by the suffix of ``path``:

- ``.html``: one self-contained file (inline CSS and SVG, no scripts, no external assets) with a
  table of the headline figures, bar charts of the real length, records per shard, masked-LM
  predictions per record and segment A/B lengths, and the most frequent tokens. Bars carry SVG
  ``<title>`` tooltips (shard names on the per-shard chart). The page is well-formed XML.
- ``.png``: an image drawn with Pillow (imported only then): the same five charts and the headline
  figures.

Besides the ``to_json`` keys, the report may carry two optional keys:

- ``title`` (str): the page/image heading; default ``"bertprep stats"``;
- ``source`` (str): a line saying what was measured (an output directory, a glob), shown under
  the heading.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

SUPPORTED_SUFFIXES: tuple[str, ...] = (".html", ".png")

DEFAULT_TITLE = "bertprep stats"

# -- formatting and chart data ---------------------------------------------------------------------


def _int(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _pct(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _compact(value: float) -> str:
    """Axis label: 950, 1.5k, 12k, 3M."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold:
            scaled = value / threshold
            return f"{scaled:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{value:g}"


def nice_step(span: float, target: int) -> float:
    """A 1/2/5 × 10^k step that cuts ``span`` into at most about ``target`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / max(target, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 5, 10):
        if multiple * magnitude >= raw:
            return multiple * magnitude
    return 10 * magnitude


def y_ticks(maximum: float, target: int = 5) -> list[float]:
    """Ticks from 0 up to the first tick at or above ``maximum`` (integer steps at least 1)."""
    step = max(nice_step(maximum, target), 1.0)
    top = max(step, math.ceil(maximum / step) * step)
    count = round(top / step)
    return [i * step for i in range(count + 1)]


def log_ticks(maximum: float) -> list[int]:
    """Ticks of a log-scaled count axis: 0, 1, 10, 100, ... up to the first power of ten at or
    above ``maximum``."""
    ticks = [0, 1]
    while ticks[-1] < maximum:
        ticks.append(ticks[-1] * 10)
    return ticks


def axis(values: Sequence[int], log_scale: bool) -> tuple[list[float], Callable[[float], float]]:
    """The y ticks and the height fraction (0..1) of a value: linear from 0, or ``log10(1 + v)``
    so that zero stays at the baseline and a bin of one record is still visible."""
    top_value = max(values, default=0)
    if log_scale:
        ticks: list[float] = [float(t) for t in log_ticks(top_value)]
        top = math.log10(1 + ticks[-1])
        return ticks, lambda v: math.log10(1 + v) / top
    ticks = y_ticks(top_value)
    return ticks, lambda v: v / ticks[-1]


def x_ticks(count: int, start: int = 0, target: int = 10) -> list[int]:
    """Bin values (``start`` … ``start + count - 1``) to label on the x axis."""
    if count <= 0:
        return []
    step = max(int(nice_step(count, target)), 1)
    first = math.ceil(start / step) * step
    return list(range(first, start + count, step))


@dataclass(frozen=True)
class Chart:
    """One bar chart: a value per bin, bins numbered from ``start``."""

    title: str
    subtitle: str
    x_label: str
    y_label: str
    values: Sequence[int]
    color: str
    start: int = 0
    bar_names: Sequence[str] | None = None  # tooltip names per bar; default: bin_name + number
    bin_name: str = ""
    log_scale: bool = False  # y axis log10(1 + count): a spike does not flatten the rest


def _trim(histogram: Sequence[int]) -> list[int]:
    """The histogram up to its last non-zero bin (at least one bin)."""
    last = max((i for i, c in enumerate(histogram) if c), default=0)
    return list(histogram[: last + 1])


def charts(report: dict[str, Any]) -> list[Chart]:
    """The charts of a report, in display order."""
    length = report["length"]
    per_shard = report["records_per_shard"]
    shard_counts = list(per_shard.values())
    predictions = report["predictions_per_instance"]
    seg_a = report["segment_a_length"]
    seg_b = report["segment_b_length"]
    half = report["max_seq_length"] // 2
    return [
        Chart(
            "Real length per record",
            f"mean {_num(length['mean'])} · full length (= {report['max_seq_length']}, every "
            f"truncated pair among them) {_pct(report['full_length_share'])}"
            f" · short (< {half}) {_pct(report['short_share'])}",
            "real length (tokens, sum of input_mask)",
            "records (log scale)",
            length["histogram"],
            "#4c72b0",
            bin_name="length",
            log_scale=True,
        ),
        Chart(
            "Records per shard",
            f"{len(shard_counts):,} shards · min {_int(min(shard_counts, default=None))}"
            f" · max {_int(max(shard_counts, default=None))}",
            "shard (sorted by name)",
            "records",
            shard_counts,
            "#55a868",
            bar_names=list(per_shard),
        ),
        Chart(
            "Masked-LM predictions per record",
            f"mean {_num(predictions['mean'])} · total {_int(predictions['total'])}",
            "used prediction slots (weight > 0)",
            "records (log scale)",
            predictions["histogram"],
            "#c44e52",
            bin_name="predictions",
            log_scale=True,
        ),
        Chart(
            "Segment A length",
            f"mean {_num(seg_a['mean'])} · min {_int(seg_a['min'])} · max {_int(seg_a['max'])}",
            "tokens between [CLS] and the first [SEP]",
            "records",
            _trim(seg_a["histogram"]),
            "#8172b2",
            bin_name="A length",
        ),
        Chart(
            "Segment B length",
            f"mean {_num(seg_b['mean'])} · min {_int(seg_b['min'])} · max {_int(seg_b['max'])}",
            "tokens between the first and the last [SEP]",
            "records",
            _trim(seg_b["histogram"]),
            "#937860",
            bin_name="B length",
        ),
    ]


def headline(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) rows of the summary table."""
    per_shard = list(report["records_per_shard"].values())
    length = report["length"]
    split = report["masked_lm_split"]
    counts, fractions = split["counts"], split["fractions"]
    half = report["max_seq_length"] // 2
    return [
        ("Records", _int(report["records"])),
        ("Shards", _int(len(per_shard))),
        (
            "Records per shard (min / max)",
            f"{_int(min(per_shard, default=None))} / {_int(max(per_shard, default=None))}",
        ),
        (
            "max_seq_length / max_predictions_per_seq",
            f"{report['max_seq_length']} / {report['max_predictions_per_seq']}",
        ),
        ("IsNext ratio", _pct(report["is_next_ratio"])),
        (
            "Real length (min / mean / max)",
            f"{_int(length['min'])} / {_num(length['mean'])} / {_int(length['max'])}",
        ),
        (
            f"Full-length share (length = {report['max_seq_length']}; every truncated pair is "
            "full length, so this bounds the truncated share)",
            _pct(report["full_length_share"]),
        ),
        (f"Short share (length < {half})", _pct(report["short_share"])),
        ("Padding fraction", _pct(report["padding_fraction"])),
        ("Predictions per record (mean)", _num(report["predictions_per_instance"]["mean"])),
        (
            "Masked-LM split: mask / random / kept",
            " / ".join(f"{_pct(fractions[k])} ({_int(counts[k])})" for k in counts),
        ),
        ("UNK rate", _pct(report["unk_rate"], 3)),
        (
            "Segment A / B length (mean)",
            f"{_num(report['segment_a_length']['mean'])}"
            f" / {_num(report['segment_b_length']['mean'])}",
        ),
        ("Malformed records", _int(report.get("malformed_records"))),
    ]


# -- HTML ------------------------------------------------------------------------------------------

_SVG_WIDTH, _SVG_HEIGHT = 600, 280
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 64, 16, 48, 48

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif;
       margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 17px; margin: 28px 0 8px 0; }
p.source { color: #555; margin: 0 0 16px 0; font-family: ui-monospace, Menlo, Consolas, monospace; }
table { border-collapse: collapse; font-size: 14px; }
th, td { padding: 4px 12px; border-bottom: 1px solid #e4e4e4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
div.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #e4e4e4; border-radius: 4px; padding: 4px; }
svg text { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; }
p.note { color: #666; font-size: 13px; max-width: 900px; }
"""


def _svg_chart(chart: Chart) -> str:
    width, height = _SVG_WIDTH, _SVG_HEIGHT
    left, top = _MARGIN_LEFT, _MARGIN_TOP
    plot_w = width - left - _MARGIN_RIGHT
    plot_h = height - top - _MARGIN_BOTTOM
    bottom = top + plot_h
    values = list(chart.values)
    ticks, height_of = axis(values, chart.log_scale)
    n = max(len(values), 1)
    bar_w = plot_w / n
    gap = min(1.0, bar_w * 0.15) if bar_w >= 3 else 0.0

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">',
        f"<title>{escape(chart.title)}</title>",
        f'<text x="{left}" y="18" font-size="15" font-weight="600">{escape(chart.title)}</text>',
        f'<text x="{left}" y="36" font-size="12" fill="#555">{escape(chart.subtitle)}</text>',
    ]
    for tick in ticks:
        y = bottom - plot_h * height_of(tick)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
            f'stroke="#e6e6e6" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#444">{_compact(tick)}</text>'
        )
    for i, value in enumerate(values):
        if not value:
            continue
        bar_h = max(plot_h * height_of(value), 1.0)  # a non-empty bin stays visible
        x = left + i * bar_w
        if chart.bar_names is not None:
            name = chart.bar_names[i]
        else:
            name = f"{chart.bin_name} {chart.start + i}".strip()
        out.append(
            f'<rect x="{x + gap / 2:.2f}" y="{bottom - bar_h:.2f}" '
            f'width="{max(bar_w - gap, 0.5):.2f}" height="{bar_h:.2f}" fill="{chart.color}">'
            f"<title>{escape(name)}: {value:,} {escape(chart.y_label)}</title></rect>"
        )
    out.append(
        f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="#333"/>'
    )
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>')
    for tick in x_ticks(len(values), chart.start):
        x = left + (tick - chart.start + 0.5) * bar_w
        out.append(
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#333"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle" '
            f'fill="#444">{tick}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" font-size="12" '
        f'text-anchor="middle">{escape(chart.x_label)}</text>'
    )
    mid_y = top + plot_h / 2
    out.append(
        f'<text x="14" y="{mid_y:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid_y:.1f})">{escape(chart.y_label)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def render_html(report: dict[str, Any]) -> str:
    """The report as one self-contained, well-formed (X)HTML page."""
    title = str(report.get("title") or DEFAULT_TITLE)
    parts = [
        "<!DOCTYPE html>",
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en">',
        "<head>",
        '<meta charset="utf-8"/>',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
    ]
    if report.get("source"):
        parts.append(f'<p class="source">{escape(str(report["source"]))}</p>')

    parts.append("<h2>Headline figures</h2>")
    parts.append("<table>")
    for name, value in headline(report):
        parts.append(f'<tr><th>{escape(name)}</th><td class="num">{escape(value)}</td></tr>')
    parts.append("</table>")

    parts.append("<h2>Distributions</h2>")
    parts.append('<div class="charts">')
    for chart in charts(report):
        parts.append(f"<figure>{_svg_chart(chart)}</figure>")
    parts.append("</div>")

    top = report.get("top_tokens") or []
    parts.append("<h2>Most frequent tokens</h2>")
    if top:
        real = report.get("real_tokens") or 0
        parts.append(
            '<table><tr><th>#</th><th>id</th><th>token</th><th class="num">count</th>'
            '<th class="num">share of real tokens</th></tr>'
        )
        for rank, entry in enumerate(top, 1):
            token = "—" if entry.get("token") is None else entry["token"]
            share = _pct(entry["count"] / real if real else None, 3)
            parts.append(
                f"<tr><td>{rank}</td><td>{entry['id']}</td><td>{escape(token)}</td>"
                f'<td class="num">{_int(entry["count"])}</td><td class="num">{share}</td></tr>'
            )
        parts.append("</table>")
    else:
        parts.append("<p>none</p>")

    parts.append(
        '<p class="note">Tokens are counted after putting the masked-LM labels back at their '
        "positions; [CLS], [SEP] and padding are left out of the token ranking. The masked-LM "
        "split compares the token at each used prediction slot with its label: [MASK] is "
        "&#8220;mask&#8221;, the label itself &#8220;kept&#8221;, anything else "
        "&#8220;random&#8221;. The real-length chart counts records on a log scale: most records "
        "of a long-document corpus are full length (real length = max_seq_length), which on a "
        "linear scale hides every other bin. So does the masked-LM chart: most records use the "
        "whole prediction budget, and the counts of the other bins are orders of magnitude "
        "smaller. A pair longer than max_seq_length is truncated to "
        "exactly it, so every truncated pair is full length and the full-length share is an upper "
        "bound of the truncated share (the instance manifest counts the truncated pairs exactly)."
        "</p>"
    )
    parts.append("</body>")
    parts.append("</html>")
    return "\n".join(parts) + "\n"


# -- PNG -------------------------------------------------------------------------------------------

_PNG_PANEL_W, _PNG_PANEL_H = 680, 300
_PNG_COLUMNS = 2
_PNG_HEADER_H = 64
_PNG_PAD = 16


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: the fixed bitmap font only
        return ImageFont.load_default()


_PNG_SUBSTITUTES = str.maketrans({"\u2014": "-", "\u2013": "-", "\u2018": "'", "\u2019": "'"})


def _plain(text: str) -> str:
    """Text for the PNG: dashes and quotes the default font lacks become ASCII."""
    return text.translate(_PNG_SUBSTITUTES)


def _draw_text(draw, xy: tuple[int, int], text: str, fill: str, font) -> None:
    draw.text(xy, _plain(text), fill=fill, font=font)


def _text_size(draw, text: str, font) -> tuple[int, int]:
    left, top, right, bottom = draw.textbbox((0, 0), _plain(text), font=font)
    return right - left, bottom - top


def _png_chart(image, origin: tuple[int, int], chart: Chart, fonts: dict) -> None:
    from PIL import Image, ImageDraw

    draw = ImageDraw.Draw(image)
    ox, oy = origin
    width, height = _PNG_PANEL_W, _PNG_PANEL_H
    left, right, top, bottom_margin = 70, 16, 52, 50
    plot_w, plot_h = width - left - right, height - top - bottom_margin
    x0, y1 = ox + left, oy + top + plot_h  # plot's left edge, baseline

    draw.rectangle([ox, oy, ox + width - 1, oy + height - 1], outline="#dddddd")
    _draw_text(draw, (ox + left, oy + 8), chart.title, "#222222", fonts["title"])
    _draw_text(draw, (ox + left, oy + 28), chart.subtitle, "#555555", fonts["small"])

    values = list(chart.values)
    ticks, height_of = axis(values, chart.log_scale)
    for tick in ticks:
        y = y1 - round(plot_h * height_of(tick))
        draw.line([(x0, y), (x0 + plot_w, y)], fill="#e6e6e6")
        label = _compact(tick)
        tw, th = _text_size(draw, label, fonts["small"])
        _draw_text(draw, (x0 - 6 - tw, y - th // 2 - 2), label, "#444444", fonts["small"])

    n = max(len(values), 1)
    bar_w = plot_w / n
    gap = 1 if bar_w >= 4 else 0
    for i, value in enumerate(values):
        if not value:
            continue
        bx0 = x0 + round(i * bar_w)
        bx1 = max(x0 + round((i + 1) * bar_w) - 1 - gap, bx0)
        by = y1 - max(round(plot_h * height_of(value)), 1)
        draw.rectangle([bx0, by, bx1, y1 - 1], fill=chart.color)

    draw.line([(x0, y1), (x0 + plot_w, y1)], fill="#333333")
    draw.line([(x0, oy + top), (x0, y1)], fill="#333333")
    for tick in x_ticks(len(values), chart.start):
        x = x0 + round((tick - chart.start + 0.5) * bar_w)
        draw.line([(x, y1), (x, y1 + 4)], fill="#333333")
        label = str(tick)
        tw, _ = _text_size(draw, label, fonts["small"])
        _draw_text(draw, (x - tw // 2, y1 + 6), label, "#444444", fonts["small"])

    tw, _ = _text_size(draw, chart.x_label, fonts["label"])
    _draw_text(
        draw,
        (x0 + (plot_w - tw) // 2, oy + height - 22),
        chart.x_label,
        fill="#222222",
        font=fonts["label"],
    )
    # The y label, drawn horizontally on a scratch image and rotated.
    lw, lh = _text_size(draw, chart.y_label, fonts["label"])
    scratch = Image.new("RGB", (lw + 4, lh + 8), "white")
    _draw_text(ImageDraw.Draw(scratch), (2, 0), chart.y_label, "#222222", fonts["label"])
    rotated = scratch.rotate(90, expand=True)
    image.paste(rotated, (ox + 8, oy + top + (plot_h - rotated.height) // 2))


def _png_summary(image, origin: tuple[int, int], report: dict[str, Any], fonts: dict) -> None:
    from PIL import ImageDraw

    draw = ImageDraw.Draw(image)
    ox, oy = origin
    draw.rectangle([ox, oy, ox + _PNG_PANEL_W - 1, oy + _PNG_PANEL_H - 1], outline="#dddddd")
    _draw_text(draw, (ox + 16, oy + 8), "Headline figures", "#222222", fonts["title"])
    y = oy + 34
    for name, value in headline(report):
        _draw_text(draw, (ox + 16, y), name, "#444444", fonts["small"])
        tw, _ = _text_size(draw, value, fonts["small"])
        _draw_text(draw, (ox + _PNG_PANEL_W - 16 - tw, y), value, "#222222", fonts["small"])
        y += 18


def render_png(report: dict[str, Any]):
    """The report as a ``PIL.Image.Image`` (RGB): headline figures and the five charts."""
    from PIL import Image, ImageDraw

    fonts = {"title": _font(16), "label": _font(13), "small": _font(12), "heading": _font(22)}
    chart_list = charts(report)
    panels = len(chart_list) + 1  # + the headline figures
    rows = math.ceil(panels / _PNG_COLUMNS)
    width = _PNG_PAD + _PNG_COLUMNS * (_PNG_PANEL_W + _PNG_PAD)
    height = _PNG_HEADER_H + rows * (_PNG_PANEL_H + _PNG_PAD)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    title = str(report.get("title") or DEFAULT_TITLE)
    _draw_text(draw, (_PNG_PAD, 12), title, "#111111", fonts["heading"])
    if report.get("source"):
        _draw_text(draw, (_PNG_PAD, 40), str(report["source"]), "#555555", fonts["small"])

    def origin(index: int) -> tuple[int, int]:
        row, column = divmod(index, _PNG_COLUMNS)
        return (
            _PNG_PAD + column * (_PNG_PANEL_W + _PNG_PAD),
            _PNG_HEADER_H + row * (_PNG_PANEL_H + _PNG_PAD),
        )

    for index, chart in enumerate(chart_list):
        _png_chart(image, origin(index), chart, fonts)
    _png_summary(image, origin(len(chart_list)), report, fonts)
    return image


# -- entry point -----------------------------------------------------------------------------------


def write_report(report: dict[str, Any], path: str) -> None:
    """Writes ``report`` (``ShardSetStats.to_json()`` output) as HTML or PNG, by ``path``'s suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".html":
        Path(path).write_text(render_html(report), encoding="utf-8")
    elif suffix == ".png":
        render_png(report).save(path, format="PNG")
    else:
        raise ValueError(
            f"cannot tell the report format of {path!r}: the supported suffixes are "
            f"{', '.join(SUPPORTED_SUFFIXES)}"
        )
