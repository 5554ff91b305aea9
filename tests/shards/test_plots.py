"""HTML and PNG renderings of a statistics report (shards.plots)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from shards.plots import (
    SUPPORTED_SUFFIXES,
    log_ticks,
    render_html,
    write_report,
    x_ticks,
    y_ticks,
)
from transforms.record_stats import ShardSetStats
from transforms.special_ids import SpecialIds

L, P = 32, 5
IDS = SpecialIds(cls_id=1, sep_id=2, mask_id=3, unk_id=4, pad_id=0)
TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [f"w{i}" for i in range(95)]
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
CHART_TITLES = (
    "Real length per record",
    "Records per shard",
    "Masked-LM predictions per record",
    "Segment A length",
    "Segment B length",
)


def records(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    out = {
        "input_ids": np.zeros((n, L), np.int64),
        "input_mask": np.zeros((n, L), np.int64),
        "segment_ids": np.zeros((n, L), np.int64),
        "masked_lm_positions": np.zeros((n, P), np.int64),
        "masked_lm_ids": np.zeros((n, P), np.int64),
        "masked_lm_weights": np.zeros((n, P), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
    }
    for i in range(n):
        length = L if rng.random() < 0.6 else int(rng.integers(5, L))
        a = int(rng.integers(1, length - 3))
        ids = rng.integers(4, len(TOKENS), length)
        ids[0], ids[a + 1], ids[length - 1] = 1, 2, 2
        out["input_mask"][i, :length] = 1
        out["segment_ids"][i, a + 2 : length] = 1
        candidates = [j for j in range(1, length - 1) if j != a + 1]
        k = int(rng.integers(1, min(P, len(candidates)) + 1))
        positions = np.sort(rng.choice(candidates, k, replace=False))
        out["masked_lm_positions"][i, :k] = positions
        out["masked_lm_ids"][i, :k] = ids[positions]
        out["masked_lm_weights"][i, :k] = 1.0
        ids[positions] = 3
        out["input_ids"][i, :length] = ids
    return out


def report(shards: int = 6, per_shard: int = 40, names: str = "instances-{:05d}.tfrecord") -> dict:
    rng = np.random.default_rng(5)
    stats = ShardSetStats(L, P, IDS)
    for s in range(shards):
        stats.update(records(rng, per_shard + s % 2), names.format(s))
    result = stats.to_json(TOKENS)
    result["title"] = "stats <of> test & co"
    result["source"] = "out/seq32/instances-*.tfrecord"
    return result


class TagBalance(HTMLParser):
    """Checks that every opened tag is closed in order (void elements aside)."""

    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()


def test_html_is_one_well_formed_self_contained_page(tmp_path):
    path = tmp_path / "stats.html"
    data = report()
    write_report(data, str(path))
    text = path.read_text(encoding="utf-8")

    root = ET.fromstring(text)  # well-formed XML (XHTML)
    assert root.tag == f"{XHTML}html"
    svgs = list(root.iter(f"{SVG}svg"))
    assert len(svgs) == len(CHART_TITLES)
    svg_titles = [svg.find(f"{SVG}title").text for svg in svgs]
    assert svg_titles == list(CHART_TITLES)
    assert root.find(f"{XHTML}head/{XHTML}title").text == "stats <of> test & co"

    checker = TagBalance()
    checker.feed(text)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []

    # No scripts and no external assets.
    lowered = text.lower()
    assert "<script" not in lowered
    assert "src=" not in lowered
    assert "href=" not in lowered
    assert "url(" not in lowered

    # Headline figures and top tokens made it in.
    figures = {
        row.find(f"{XHTML}th").text: row.find(f"{XHTML}td").text
        for row in root.iter(f"{XHTML}tr")
        if row.find(f"{XHTML}th") is not None and row.find(f"{XHTML}td") is not None
    }
    assert figures["Records"] == f"{data['records']:,}"
    assert figures["Shards"] == "6"
    assert figures["IsNext ratio"] == f"{100 * data['is_next_ratio']:.2f}%"
    assert figures["Malformed records"] == "0"
    page_text = " ".join(root.itertext())
    assert data["top_tokens"][0]["token"] in page_text
    assert "out/seq32/instances-*.tfrecord" in page_text

    # One bar per shard, each with its shard name as tooltip.
    shard_svg = svgs[1]
    bars = shard_svg.findall(f"{SVG}rect")
    assert len(bars) == 6
    assert bars[0].find(f"{SVG}title").text == "instances-00000.tfrecord: 40 records"


def test_html_escapes_names_and_handles_many_shards():
    data = report(shards=300, per_shard=2, names="gs://b/<odd> & {:04d}.tfrecord")
    root = ET.fromstring(render_html(data))
    shard_svg = list(root.iter(f"{SVG}svg"))[1]
    names = [rect.find(f"{SVG}title").text for rect in shard_svg.findall(f"{SVG}rect")]
    assert len(names) == 300
    assert names[0].startswith("gs://b/<odd> & 0000.tfrecord")


def test_empty_report_renders(tmp_path):
    empty = ShardSetStats(L, P, IDS).to_json()
    write_report(empty, str(tmp_path / "empty.html"))
    ET.fromstring((tmp_path / "empty.html").read_text(encoding="utf-8"))
    write_report(empty, str(tmp_path / "empty.png"))
    with Image.open(tmp_path / "empty.png") as image:
        assert image.format == "PNG"


def test_png_opens_with_pillow(tmp_path):
    path = tmp_path / "stats.PNG"  # the suffix is matched without regard to case
    write_report(report(), str(path))
    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG"
        assert image.mode == "RGB"
        width, height = image.size
        assert 1000 <= width <= 2000
        assert 700 <= height <= 1500
        colors = {color for _, color in image.getcolors(maxcolors=1 << 16)}
    # The bar colors of the length and per-shard charts are there, on a white page.
    assert (0x4C, 0x72, 0xB0) in colors
    assert (0x55, 0xA8, 0x68) in colors
    assert (255, 255, 255) in colors


@pytest.mark.parametrize("name", ["stats.svg", "stats.json", "stats", "stats.html.gz"])
def test_other_suffixes_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match=r"\.html, \.png"):
        write_report(report(), str(tmp_path / name))
    assert not (tmp_path / name).exists()
    assert SUPPORTED_SUFFIXES == (".html", ".png")


def test_ticks():
    assert y_ticks(0) == [0, 1]
    assert y_ticks(7) == [0, 2, 4, 6, 8]
    assert y_ticks(3839) == [0, 1000, 2000, 3000, 4000]
    assert y_ticks(250) == [0, 50, 100, 150, 200, 250]
    assert x_ticks(129) == list(range(0, 129, 20))
    assert x_ticks(21) == [0, 5, 10, 15, 20]
    assert x_ticks(3) == [0, 1, 2]
    assert x_ticks(0) == []


def test_length_histogram_is_log_scaled_so_the_full_length_spike_hides_nothing():
    data = report(shards=10, per_shard=100)  # ~60% of ~1,000 records at full length
    spike = data["length"]["histogram"][L]
    assert spike > 300
    root = ET.fromstring(render_html(data))
    length_svg = list(root.iter(f"{SVG}svg"))[0]
    heights = [float(r.get("height")) for r in length_svg.findall(f"{SVG}rect")]
    # On a linear scale a bin of a few records is 1 px next to the spike's ~200 px.
    assert min(heights) >= 0.05 * max(heights)
    labels = [t.text for t in length_svg.findall(f"{SVG}text")]
    assert "records (log scale)" in labels
    assert {"1", "10", "100", "1k"} <= set(labels)
    subtitle = labels[1]
    assert f"full length (= {L}, every truncated pair among them)" in subtitle
    page = " ".join(root.itertext())
    assert "every truncated pair is full length" in page and "log scale" in page


def test_log_ticks():
    assert log_ticks(0) == [0, 1]
    assert log_ticks(1) == [0, 1]
    assert log_ticks(7) == [0, 1, 10]
    assert log_ticks(3839) == [0, 1, 10, 100, 1000, 10000]


def test_masked_lm_chart_is_log_scaled_so_small_bins_stay_visible():
    """Most records fill the prediction budget: the other bins are orders of magnitude smaller,
    and on a linear scale 3 records next to 20,000 would be drawn as the 1 px minimum."""
    from shards.plots import charts

    data = report()
    data["predictions_per_instance"]["histogram"] = [0, 3, 5, 40, 900, 20_000]
    masked = next(c for c in charts(data) if c.title == "Masked-LM predictions per record")
    assert masked.log_scale and masked.y_label == "records (log scale)"
    svgs = list(ET.fromstring(render_html(data)).iter(f"{SVG}svg"))
    svg = svgs[CHART_TITLES.index("Masked-LM predictions per record")]
    heights = [float(r.get("height")) for r in svg.findall(f"{SVG}rect")]
    assert len(heights) == 5
    assert min(heights) >= 0.1 * max(heights)  # linear: 3 / 20,000 of it
    labels = [t.text for t in svg.findall(f"{SVG}text")]
    assert {"1", "10", "100", "1k", "10k", "records (log scale)"} <= set(labels)
