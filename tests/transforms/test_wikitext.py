"""Wikitext to prose paragraphs (transforms.wikitext): one rule at a time, then real dumps."""

from __future__ import annotations

import bz2
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.markup_debris import DEBRIS_MARKERS, markup_debris
from tests.conftest import require_corpora
from transforms.mediawiki_xml import WikiPage, iter_pages
from transforms.wiki_templates import format_date
from transforms.wikitext import (
    strip_non_prose,
    wikitext_to_paragraphs,
)


def one(text: str, **kwargs) -> str:
    """The single paragraph ``text`` renders to."""
    paragraphs = wikitext_to_paragraphs(text, **kwargs)
    assert len(paragraphs) == 1, paragraphs
    return paragraphs[0]


# --- paragraphs -------------------------------------------------------------------------------


def test_blank_lines_separate_paragraphs_and_lines_join():
    text = "First line\nsame paragraph.\n\n\nSecond paragraph.\n  \nThird."
    assert wikitext_to_paragraphs(text) == [
        "First line same paragraph.",
        "Second paragraph.",
        "Third.",
    ]


def test_empty_and_letterless_input():
    assert wikitext_to_paragraphs("") == []
    assert wikitext_to_paragraphs("\n\n  \n") == []
    assert wikitext_to_paragraphs("1990–2000\n\n{{Infobox}}\n\n12, 13.") == []


def test_whitespace_is_normalized():
    assert one("a  b\tc\u00a0d&nbsp;e  \n f") == "a b c d e"  # " f" is preformatted: dropped
    assert one("a  b\tc\u00a0d&nbsp;e\nf") == "a b c d e f"


# --- links ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("[[Paris]] is big.", "Paris is big."),
        ("[[Paris, Texas|Paris]] is small.", "Paris is small."),
        ("Many [[apple]]s here.", "Many apples here."),
        ("The [[Paris (band)|]] played.", "The Paris played."),
        ("See [[Help:Contents|]] now.", "See Contents now."),
        ("See [[#History]] above.", "See History above."),
        ("See [[France#History|its history]].", "See its history."),
        ("See [[France#History]].", "See France."),
        ("A [[Foo|''styled'' '''anchor''']] here.", "A styled anchor here."),
        ("A [[Foo|anchor with [[nested]] link]] here.", "A anchor with nested link here."),
        ("Listed in [[:Category:Rivers|the river category]].", "Listed in the river category."),
        ("A [[wikt:word]] and [[wiktionary:other|others]].", "A word and others."),
        ("The game [[Ys: The Vanished Omens]] sold.", "The game Ys: The Vanished Omens sold."),
        ("Under [[New_York_City]] streets.", "Under New York City streets."),
    ],
)
def test_wikilinks_become_their_anchor_text(wikitext, expected):
    assert one(wikitext) == expected


@pytest.mark.parametrize(
    "link",
    [
        "[[File:Eiffel.jpg|thumb|The tower, seen from the [[Seine]].]]",
        "[[Image:Eiffel.jpg|right|200px]]",
        "[[image:eiffel.jpg]]",
        "[[FILE:Eiffel.jpg|frameless|upright=1.2|alt=Tower|Caption]]",
        "[[Media:Anthem.ogg]]",
        "[[Category:Towers]]",
        "[[category:Towers|Eiffel]]",
        "[[ Category : Towers ]]",
        "[[fr:Tour Eiffel]]",
        "[[de:Eiffelturm|Eiffelturm]]",
        "[[zh-yue:巴黎鐵塔]]",
        "[[be-x-old:Эйфелева вежа]]",
        "[[simple:Eiffel Tower]]",
        "[[Datei:Eiffel.jpg|mini|Localized file namespace: known by its extension]]",
        "[[Fichier:Sans extension|vignette|250px|by its image options]]",
    ],
)
def test_media_category_and_interlanguage_links_removed(link):
    assert one(f"The tower {link} is tall.") == "The tower is tall."


def test_localized_namespaces():
    text = "Text [[Kategorie:Türme]] more.\n[[Kategorie:Paris|Eiffel]]\n[[Kategorie:Türme]] [[Kategorie:Paris]]"
    # Unknown prefix: kept inline (it might be an article), but a line of only such links goes.
    assert wikitext_to_paragraphs(text) == ["Text Kategorie:Türme more."]
    assert wikitext_to_paragraphs(text, extra_drop_namespaces=["kategorie"]) == ["Text more."]


# --- removed markup ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    [
        "<ref>Smith 2001, p. 4.</ref>",
        '<ref name="smith">{{cite book|title=T|year=2001}}</ref>',
        '<ref name="smith" />',
        "<ref name=smith/>",
        "<REF group=n>note</REF>",
        "<math>x^2 + y^2</math>",
        "<chem>H2O</chem>",
        "<ce>H2O</ce>",
        "<score>\\relative c' { c d e }</score>",
        "<!-- a comment with [[links]] and {{templates}} -->",
        "<!-- multi\nline\n\ncomment -->",
        "{{citation needed|date=May 2020}}",
        "{{sfn|Smith|2001|p=4}}",
        "{{#if:{{{1|}}}|yes|no}}",
        "{{{argument|default}}}",
        "__NOTOC__",
        "[http://example.org]",
        " http://example.org/path?q=1",
    ],
)
def test_inline_markup_removed(markup):
    assert one(f"Water boils{markup} at 100 degrees.") == "Water boils at 100 degrees."


@pytest.mark.parametrize(
    "block",
    [
        '{| class="wikitable"\n|-\n! Year !! Value\n|-\n| 1990 || 5\n|}',
        "<table><tr><td>cell [[link]]</td></tr></table>",
        "<gallery>\nFile:A.jpg|Caption A\nFile:B.jpg|Caption B\n</gallery>",
        "<timeline>\nImageSize = width:100\n</timeline>",
        '<syntaxhighlight lang="python">\nprint("hi")\n</syntaxhighlight>',
        "<source lang=c>int main;</source>",
        "<pre>preformatted</pre>",
        "<poem>Verse one\nverse two</poem>",
        "<references />",
        "{{Infobox river\n| name = Seine\n| length = {{convert|777|km}}\n}}",
        "{{Reflist|30em}}",
        "== History ==",
        "=== Sub section ===",
        "==Tight==",
        "====== Level six ======",
        "* bullet item with [[link]]",
        "** nested bullet",
        "# numbered item",
        "#: continuation",
        "; term : definition",
        ": indented reply",
        "::: deeper indent",
        " preformatted line (leading space)",
        "| a leftover table row || cell",
        "----",
    ],
)
def test_blocks_removed_and_paragraphs_kept_apart(block):
    text = f"Before the block.\n{block}\nAfter the block."
    assert wikitext_to_paragraphs(text) == ["Before the block.", "After the block."]


def test_heading_text_never_leaks():
    text = "== Early life ==\nHe was born.\n=== Education ===\nHe studied."
    assert wikitext_to_paragraphs(text) == ["He was born.", "He studied."]


def test_list_only_page():
    assert wikitext_to_paragraphs("* [[A]]\n* [[B]]\n# c\n; d\n: e") == []


def test_preformatted_first_line():
    assert wikitext_to_paragraphs(" code line\nProse line.") == ["Prose line."]


def test_nowiki_content_is_text():
    assert one("Type <nowiki>''not italic''</nowiki> here.") == "Type not italic here."
    assert one("Write <nowiki>a|b</nowiki> to pipe.") == "Write a|b to pipe."


# --- templates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{convert|5|km}}", "5 km"),
        ("{{convert|5|km|mi}}", "5 km"),
        ("{{convert|5|km|mi|abbr=on}}", "5 km"),
        ("{{Convert|1,300|mi|km}}", "1,300 mi"),
        ("{{cvt|3|to|5|km|mi}}", "3 to 5 km"),
        ("{{convert|1|-|2|m|ft}}", "1–2 m"),
        ("{{convert|6|ft|2|in|m}}", "6 ft 2 in"),
        ("{{convert|100|sqmi|km2}}", "100 sq mi"),
        ("{{convert|30|C|F}}", "30 °C"),
        ("{{lang|fr|texte}}", "texte"),
        ("{{lang|1=fr|2=a=b}}", "a=b"),
        ("{{lang-fr|texte}}", "texte"),
        ("{{Lang-grc-gre|λόγος}}", "λόγος"),
        ("{{transl|ar|DIN|al-Qāhira}}", "al-Qāhira"),
        ("{{nihongo|Tokyo|東京|Tōkyō}}", "Tokyo"),
        ("{{nowrap|10 km}}", "10 km"),
        ("{{Nowrap|x}}", "x"),
        ("{{nobr|y z}}", "y z"),
        ("{{small|small print}}", "small print"),
        ("{{sic|teh}}", "teh"),
        ("{{sic|hide=y|recieve}}", "recieve"),
        ("{{not a typo|colour}}", "colour"),
        ("{{date|2010-01-05}}", "2010-01-05"),
        ("{{birth date|1950|5|17}}", "May 17, 1950"),
        ("{{Birth date|1950|5|17|df=y}}", "17 May 1950"),
        ("{{birth date and age|1950|05|07}}", "May 7, 1950"),
        ("{{death date and age|2000|1|2|1950|5|17}}", "January 2, 2000"),
        ("{{Birth_date|1950|5}}", "May 1950"),
        ("{{start date|1999}}", "1999"),
        ("{{as of|2010}}", "As of 2010"),
        ("{{as of|2010|5|lc=y}}", "as of May 2010"),
        ("{{circa|1500}}", "c. 1500"),
        ("{{frac|1|2}}", "1/2"),
        ("{{frac|4}}", "1/4"),
        ("{{frac|2|1|4}}", "2 1/4"),
        ("{{sfrac|3|8}}", "3/8"),
        ("{{IPA|ˈpærɪs}}", "ˈpærɪs"),
        ("{{IPA-fr|paʁi|lang}}", "paʁi"),
        ("{{val|1.5|u=kg}}", "1.5 kg"),
        ("{{formatnum:1234567}}", "1234567"),
        ("{{ill|Jean Dupont|fr|Jean Dupont (peintre)}}", "Jean Dupont"),
        ("{{chem|H|2|O}}", "H2O"),
        ("{{ordinal|22}}", "22nd"),
        ("{{ordinal|13}}", "13th"),
        ("{{US$|100}}", "US$100"),
        ("{{HMS|Victory}}", "HMS Victory"),
        ("{{nbsp}}", " "),
        ("{{ndash}}", "–"),
        ("{{mdash}}", "—"),
        ("{{Template:Nowrap|t}}", "t"),
        ("{{nowrap|{{convert|5|km|mi}} long}}", "5 km long"),
        ("{{nowrap|[[Paris|the city]]<ref>r</ref>}}", "the city"),
    ],
)
def test_inline_templates_render_their_text(template, expected):
    assert one(f"It is {template} here.") == " ".join(f"It is {expected} here.".split())


def test_no_holes_in_a_typical_lead():
    text = (
        "{{Infobox person\n| name = Jane Roe\n| birth_date = {{birth date|1950|5|17}}\n}}\n"
        "'''Jane Roe''' ({{IPAc-en|r|oʊ}}; born {{birth date|1950|5|17}} in [[Mobile, Alabama|Mobile]],"
        " {{lang|fr|Alabama}}) is an [[United States|American]] [[singer]].<ref>{{cite web|url=u}}</ref>"
        " She lives {{convert|5|km|mi}} from the coast.{{citation needed|date=May 2020}}"
    )
    assert one(text) == (
        "Jane Roe (born May 17, 1950 in Mobile, Alabama) is an American singer."
        " She lives 5 km from the coast."
    )


def test_format_date():
    assert format_date("1950", "5", "17") == "May 17, 1950"
    assert format_date("1950", "5", "17", day_first=True) == "17 May 1950"
    assert format_date("1950", "12") == "December 1950"
    assert format_date("1950") == "1950"
    assert format_date("1950", "13", "1") == "1950 13 1"


# --- HTML, entities, quotes, brackets -----------------------------------------------------------


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("a <b>bold</b> word", "a bold word"),
        ("an <i>italic</i> word", "an italic word"),
        ('a <span style="color:red">red</span> word', "a red word"),
        ("E = mc<sup>2</sup> and H<sub>2</sub>O", "E = mc2 and H2O"),
        (
            "<small>small</small> <big>big</big> <u>u</u> <s>s</s> <abbr title=x>AB</abbr>",
            "small big u s AB",
        ),
        ("one<br>two<br/>three<br />four", "one two three four"),
        ('<div class="x">boxed text</div>', "boxed text"),
        ("<center>centered</center>", "centered"),
        ("stray </span> closing <font color=red>tag", "stray closing tag"),
        ("AT&amp;T &lt;b&gt; &quot;q&quot; &eacute;t&#233; &#x41;", 'AT&T <b> "q" été A'),
        ("less &lt;10 ppm", "less <10 ppm"),
        ("'''bold''' ''italic'' '''''both''''' done", "bold italic both done"),
        ("unbalanced ''' bold", "unbalanced bold"),
        ("Smith (; born 1950) sang", "Smith (born 1950) sang"),
        ("Smith ( , ) sang", "Smith sang"),
        ("Smith () sang", "Smith sang"),
        ("Smith ( ) sang", "Smith sang"),
        ("Smith [ ] sang", "Smith sang"),
        ("Smith (, in Paris) sang", "Smith (in Paris) sang"),
        ("Smith (in Paris, ) sang", "Smith (in Paris) sang"),
        ("Smith (a) and [b] [...] sang", "Smith (a) and [b] [...] sang"),
        ("Paris , France .", "Paris, France."),
        ("Born in , Alabama", "Born in, Alabama"),
    ],
)
def test_html_entities_quotes_and_brackets(wikitext, expected):
    assert one(wikitext) == expected


def test_block_html_separates_paragraphs():
    assert wikitext_to_paragraphs("Before<div>inside</div>after") == ["Before", "inside", "after"]


# --- unparsed markup ----------------------------------------------------------------------------


def test_unparsed_markup_paragraph_dropped_or_kept():
    text = "Good paragraph.\n\nBroken {{template that never closes.\n\nAnother good one."
    assert wikitext_to_paragraphs(text) == ["Good paragraph.", "Another good one."]
    kept = wikitext_to_paragraphs(text, drop_unparsed=False)
    assert kept[1] == "Broken {{template that never closes."


def test_broken_image_caption_dropped():
    # An unbalanced bold inside a caption defeats the parser: the debris is dropped, not kept.
    text = "Prose.\n\n[[File:X.svg|thumb|A '''caption'' here]]\n\nMore prose."
    assert wikitext_to_paragraphs(text) == ["Prose.", "More prose."]


# --- markup_debris ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "found"),
    [
        ("Clean text, with = signs and a } brace.", []),
        ("", []),
        ("left {{ over", ["{{"]),
        ("left }} over", ["}}"]),
        ("[[Link", ["[["]),
        ("Link]]", ["]]"]),
        ("a | b", ["|"]),
        ("see <ref name=x>", ["<ref"]),
        ("see <REF>", ["<ref"]),
        ("== Heading ==", ["=="]),
        ("=== Heading", ["=="]),
        ("{{a|b}} [[c]] <ref> ==", list(DEBRIS_MARKERS)),
    ],
)
def test_markup_debris(sentence, found):
    assert markup_debris(sentence) == found


# --- real dumps -------------------------------------------------------------------------------

WIKI_FILES = {
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": 98,
    "smallwiki-latest-pages-articles.xml": 903,
    "enwiki-table-markup.xml.bz2": 5,
    "enwiki-pages-articles-sample.xml.bz2": 2,
    "article-pear-0.10.xml": 1,
}


def _articles(name: str) -> list[WikiPage]:
    path = require_corpora("wiki", name)
    opener = bz2.open if path.suffix == ".bz2" else Path.open
    with opener(path, "rb") as stream:
        out = list(iter_pages(stream, name, Counter()))
    pages = [o for o in out if isinstance(o, WikiPage)]
    assert len(pages) == len(out) == WIKI_FILES[name]
    return pages


@pytest.fixture(scope="module")
def real_paragraphs() -> dict[str, dict[str, list[str]]]:
    """file → title → paragraphs, unparsed markup kept (``drop_unparsed=False``)."""
    return {
        name: {
            p.title: wikitext_to_paragraphs(p.text, drop_unparsed=False) for p in _articles(name)
        }
        for name in WIKI_FILES
    }


def test_real_single_article_lead():
    (pear,) = _articles("article-pear-0.10.xml")
    paragraphs = wikitext_to_paragraphs(pear.text)
    assert paragraphs[0].startswith(
        "The pear is any of several tree and shrub species of genus Pyrus, in the family Rosaceae."
    )
    assert len(paragraphs) >= 15
    assert not any(markup_debris(p) for p in paragraphs)


def _debris_rates(paragraphs: list[str]) -> tuple[int, float, float]:
    sentences = [s for p in paragraphs for s in p.split(". ")]
    with_debris = sum(1 for s in sentences if markup_debris(s))
    with_pipe = sum(1 for s in sentences if "|" in s)
    return len(sentences), with_debris / len(sentences), with_pipe / len(sentences)


UNPARSED = ("{{", "}}", "[[", "]]")


@pytest.mark.slow
def test_real_dumps_markup_debris_rate(real_paragraphs):
    """Measured when written: 7,636 paragraphs, 25,716 sentences after the default drop of 7
    unparsed paragraphs; 0.012% of sentences carry debris (3, all '|' that the articles' own
    text holds: ASCII's "\\|", Afghanistan's "Pashto |"); without the drop 0.051% (13 of 25,728;
    '|' 0.043%). Thresholds leave room for parser changes, not for a broken rule."""
    everything = [
        p for by_title in real_paragraphs.values() for ps in by_title.values() for p in ps
    ]
    default = [p for p in everything if not any(m in p for m in UNPARSED)]
    assert len(everything) - len(default) < 0.01 * len(everything)  # the drop rule is rare

    sentences, debris, pipes = _debris_rates(default)
    assert sentences > 25_000
    assert debris < 0.001, f"{debris:.4%} of sentences carry markup debris"
    assert pipes < 0.001, f"{pipes:.4%} of sentences carry '|'"

    _, raw_debris, raw_pipes = _debris_rates(everything)
    assert raw_debris < 0.005, f"{raw_debris:.4%} before dropping unparsed paragraphs"
    assert raw_pipes < 0.002

    for name, by_title in real_paragraphs.items():  # every file yields prose for most articles
        with_prose = sum(1 for ps in by_title.values() if ps)
        assert with_prose >= 0.9 * len(by_title), name


@pytest.mark.slow
def test_real_enwiki_leads(real_paragraphs):
    enwiki = real_paragraphs["enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"]
    assert enwiki["Alabama"][0].startswith(
        "Alabama is a state located in the southeastern region of the United States."
    )
    assert enwiki["Anarchism"][0].startswith("Anarchism is a political philosophy")
    assert (
        "At 1300 mi, Alabama has one of the longest navigable inland waterways"
        in (enwiki["Alabama"][0])
    )
    tables = real_paragraphs["enwiki-table-markup.xml.bz2"]
    assert tables["Economy of Estonia"][0].startswith("Estonian economy is an advanced economy")
    no_table_cells = [p for ps in tables.values() for p in ps if "||" in p or p.startswith("!")]
    assert no_table_cells == []
    assert sum(len(ps) for ps in enwiki.values()) > 2_000


# --- pre-pass and fast path ---------------------------------------------------------------------


def test_strip_non_prose_cuts_what_never_renders_and_keeps_inline_templates():
    text = (
        "A<!-- c -->B<ref name=x/>C<ref>r {{cite web|u}}</ref>{{Infobox|a={{b}}}}"
        "{{convert|5|km|mi}}[[File:X.jpg|thumb|a [[link]] here]][[Category:Y]][[fr:Z]] [[Paris]]"
        "\n{|\n| cell {{x}}\n|}\nD<math>{{a}}</math>E"
    )
    stripped = strip_non_prose(text)
    for gone in ("<!--", "<ref", "cite", "Infobox", "File:", "Category:", "fr:", "cell", "math"):
        assert gone not in stripped, gone
    assert "{{convert|5|km|mi}}" in stripped and "[[Paris]]" in stripped
    assert wikitext_to_paragraphs(text) == ["ABC5 km Paris", "DE"]


def test_unbalanced_markup_is_left_for_the_parser():
    text = "Good.\n\n{{Infobox that never closes\n| a = b\n\nMore prose."
    assert strip_non_prose(text) == text
    assert wikitext_to_paragraphs(text) == wikitext_to_paragraphs(text, parse_all=True)


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("''Eagle''{{'}}s ascent", ["Eagle's ascent"]),
        ("the '[[Epoch (astronomy)|''epoch'' year]], which", ["the 'epoch year, which"]),
        ("''A Modest Proposal'''s satire", ["A Modest Proposal's satire"]),
        ("[[File:A.jpg|thumb|[http://example.org caption]]]\nProse.", ["Prose."]),
        (
            "<table><tr><td>\n<table><tr><td>inner</td></tr></table>\n<tr><td>outer</td></table>"
            "\nProse.",
            ["Prose."],
        ),
        (
            "Intro:<blockquote>\nQuoted.\n\nMore quoted.\n</blockquote>\nAfter.",
            ["Intro:", "Quoted.", "More quoted.", "After."],
        ),
        ("An [http://example.org example] and [//example.org/x] link.", ["An example and link."]),
        ("CO<sub>2</sub> and ''x''<sup>2</sup> and [sic] text", ["CO2 and x2 and [sic] text"]),
        ("{{nowrap|[[Paris|the city]]}} and {{lang|fr|[[La Voz]]}}", ["the city and La Voz"]),
    ],
)
def test_fast_path_cases(wikitext, expected):
    assert wikitext_to_paragraphs(wikitext) == expected
    assert wikitext_to_paragraphs(wikitext, parse_all=True) == expected


@pytest.mark.slow
def test_fast_path_equals_parser_path_on_real_dumps():
    """Plain segments rendered by regular expressions give exactly the parser's paragraphs."""
    differing = []
    for name in WIKI_FILES:
        for page in _articles(name):
            for drop_unparsed in (True, False):
                fast = wikitext_to_paragraphs(page.text, drop_unparsed=drop_unparsed)
                parsed = wikitext_to_paragraphs(
                    page.text, drop_unparsed=drop_unparsed, parse_all=True
                )
                if fast != parsed:
                    differing.append((name, page.title, drop_unparsed))
    assert differing == []


def _plain_clean(paragraph: str) -> str:
    """``_clean`` with every step run unconditionally (the rule the guarded one must match);
    as in ``_clean``, link marks go only where a link was (a ``\x01``), and brackets are tidied
    only where an opening one is."""
    import html

    from transforms import wikitext as w

    text = w._NS_LINK_MARKS.sub("", paragraph) if "\x01" in paragraph else paragraph
    text = w._HTML_TAG.sub("", w._COMMENT.sub("", w._REF.sub("", text)))
    text = w._MAGIC_WORD.sub("", w._QUOTES.sub("", html.unescape(text)))
    text = w._WHITESPACE.sub(" ", text).strip()
    if "(" in text or "[" in text:
        previous = None
        while previous != text:
            previous = text
            text = w._EMPTY_BRACKETS.sub("", text)
            text = w._PUNCT_AFTER_OPEN.sub(r"\1", text)
            text = w._PUNCT_BEFORE_CLOSE.sub(r"\1", text)
        text = w._SPACE_AFTER_OPEN.sub(r"\1", text)
    text = w._SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = w._REPEATED_COMMA.sub(r"\1", text)
    text = w._COMMA_BEFORE_STOP.sub("", text)
    return w._WHITESPACE.sub(" ", text).strip()


_CLEAN_PIECES = list("()[],;:.!? -–—'\x01\x02\nab") + ["''", "&amp;", "<b>", "__TOC__", "\t", "  "]


def test_guarded_paragraph_cleanup_equals_the_plain_rule():
    import random

    from transforms.wikitext import _BRACKET_TIDY, _bracket_tidy_applies, _clean

    rng = random.Random(20261201)
    texts = ["".join(rng.choices(_CLEAN_PIECES, k=rng.randint(0, 25))) for _ in range(20000)]
    for text in texts:
        assert _clean(text) == _plain_clean(text), repr(text)
        joined = " ".join(text.split())
        assert _bracket_tidy_applies(joined) == bool(_BRACKET_TIDY.search(joined)), repr(joined)


def test_needs_parser_check_equals_its_pattern():
    import random

    from transforms.wikitext import _NEEDS_PARSER, _needs_parser

    pieces = list("{}<[]/:-\nahtpfHTPF ") + ["http:", "HTTPS:", "ftp:", "[//", "----", "://"]
    rng = random.Random(7)
    for _ in range(20000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
        assert _needs_parser(text) == bool(_NEEDS_PARSER.search(text)), repr(text)


def test_free_link_check_equals_its_pattern():
    """``_has_free_link`` tries the scheme pattern only before colons: the same answer as a
    search of the whole text, word boundaries and case folding (``ſ`` as ``s``) included."""
    import random

    from transforms.wikitext import _FREE_LINK_SCHEME, _has_free_link

    pieces = [*"geotlsmpnurbicaxGTSK:_1 ſ.-é", "sips", "mailto", "bitcoin", "xmpp", "magnet"]
    rng = random.Random(11)
    for _ in range(30000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 10)))
        assert _has_free_link(text) == bool(_FREE_LINK_SCHEME.search(text)), repr(text)


_LINE_RULES = (r"^[*#:;]", r"^(?:\{\||\|\}|\||!)", r"\s*(?:\x01[^\x02]*\x02\s*)+")


def test_dropped_line_check_equals_the_line_patterns():
    """``_is_dropped_line`` decides by first and last characters what these patterns decided:
    list and definition lines, table rows, headings (``^=+.*=+$`` once stripped), marked lines
    and lines of namespace links only."""
    import random
    import re

    from transforms.wikitext import _DROP, _is_dropped_line

    listed, table, links_only = (re.compile(p) for p in _LINE_RULES)
    heading = re.compile(r"^=+.*=+$")
    pieces = [*"*#:;{|}!= \tab\x01\x02\u3000", _DROP, "==", "{|", "|}"]
    rng = random.Random(5)
    for _ in range(30000):
        line = "".join(rng.choices(pieces, k=rng.randint(1, 8)))
        expected = bool(
            _DROP in line
            or links_only.fullmatch(line)
            or listed.match(line)
            or table.match(line)
            or heading.match(line.strip())
        )
        assert _is_dropped_line(line, line.strip()) == expected, repr(line)


def test_table_check_ignores_case_as_lowering_did():
    from transforms.wikitext import _TABLE_OPEN

    for text in ("<table>", "<TABLE class=x>", "<TaBlE", "< table", "<tabl", "x<tAble"):
        assert bool(_TABLE_OPEN.search(text)) == ("<table" in text.lower()), text


def test_brace_pairs_by_find_equal_the_regex_scan():
    """``_balanced_braces`` finds ``{{`` and ``}}`` with ``str.find`` (``_brace_marks``): the same
    pairs as the left-to-right regex scan it replaced (``{{{``, ``}}}``, ``{}}`` included)."""
    import random

    from transforms.wikitext import _BRACES, _balanced_braces

    def by_regex(text: str) -> list[tuple[int, int]]:
        stack, pairs = [], []
        for match in _BRACES.finditer(text):
            if match.group() == "{{":
                stack.append(match.start())
            elif stack:
                pairs.append((stack.pop(), match.end()))
        return pairs

    rng = random.Random(8)
    for _ in range(50000):
        text = "".join(rng.choices("{{}}a|\n", k=rng.randint(0, 16)))
        assert list(_balanced_braces(text)) == by_regex(text), repr(text)
    lone = "{a}" * 1000 + "{{b}}" + "}{" * 1000  # lone braces: one pair search each, at most
    assert list(_balanced_braces(lone)) == by_regex(lone) == [(3000, 3005)]


def test_closed_comments_cut_by_find_equal_the_pattern():
    import random

    from transforms.wikitext import _CLOSED_COMMENT, _REMOVED, _cut_closed_comments

    pieces = ["<!--", "-->", "<!-", "->", "-", "a", "\n", "<", ">", "!", " "]
    rng = random.Random(14)
    for _ in range(50000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
        assert _cut_closed_comments(text) == _CLOSED_COMMENT.sub(_REMOVED, text), repr(text)


def test_quote_check_by_counts_equals_the_run_by_run_rule():
    import random
    import re

    from transforms.wikitext import _plain_quotes

    def run_by_run(text: str) -> bool:
        for line in text.split("\n"):
            italic = bold = 0
            for run in re.findall(r"'{2,}", line):
                if len(run) not in (2, 3, 5):
                    return False
                italic += len(run) in (2, 5)
                bold += len(run) in (3, 5)
            if italic % 2 or bold % 2:
                return False
        return True

    rng = random.Random(15)
    for _ in range(50000):
        text = "".join(rng.choices(["'", "''", "'''", "a", "\n", " "], k=rng.randint(0, 12)))
        assert _plain_quotes(text) == run_by_run(text), repr(text)


def test_table_edges_equal_the_line_start_pattern():
    import random

    from transforms.wikitext import _TABLE_EDGE, _table_edges

    def edges(matches):
        return [(m.group(1), m.span(1)) for m in matches]

    pieces = ["{|", "|}", "\n", " ", "\t", "{", "|", "}", "a", "\n{|", "|}\n"]
    rng = random.Random(9)
    for _ in range(50000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 10)))
        assert edges(_table_edges(text)) == edges(_TABLE_EDGE.finditer(text)), repr(text)


def test_segments_equal_the_recounting_rule():
    """``_segments`` adds the pieces' counts up; the rule it replaced recounted the joined text
    at each blank line."""
    import random

    from transforms.wikitext import _SEGMENT_BREAK, _segments

    def recounted(text: str) -> list[str]:
        out, pending = [], ""
        for piece in _SEGMENT_BREAK.split(text):
            pending = f"{pending}\n\n{piece}" if pending else "\n" + piece
            if pending.count("{{") <= pending.count("}}") and pending.count("[[") <= pending.count(
                "]]"
            ):
                out.append(pending)
                pending = ""
        return out + [pending] if pending else out

    pieces = ["{{", "}}", "[[", "]]", "{", "]", "\n", "\n\n", "\n \n", "a", " "]
    rng = random.Random(10)
    for _ in range(50000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 14)))
        assert list(_segments(text)) == recounted(text), repr(text)


def test_paragraph_checks_equal_their_patterns():
    """The whitespace, ``,.``-before-a-stop and leftover-markup checks of ``_clean`` and
    ``flush`` give what the patterns and calls they replaced give."""
    import random

    from transforms.text_normalization import collapse_whitespace
    from transforms.wikitext import (
        _MARK_BEFORE_STOP,
        _has_unparsed,
        _mark_before_stop,
    )

    pieces = [
        *",;:.!?ab{}[] \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2009\u3000\u200b\xad",
        "{{", "}}", "[[", "]]", "  ",
    ]  # fmt: skip
    rng = random.Random(12)
    for _ in range(50000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
        assert collapse_whitespace(text) == " ".join(text.split()), repr(text)
        assert _mark_before_stop(text) == bool(_MARK_BEFORE_STOP.search(text)), repr(text)
        assert _has_unparsed(text) == any(m in text for m in ("{{", "}}", "[[", "]]")), repr(text)


def test_tag_patterns_equal_the_plain_ones():
    """The dropped-tag patterns share the names' prefixes, take attributes whole and skip
    content to each ``<``: the same matches as the flat, backtracking patterns."""
    import random
    import re

    from transforms.wikitext import (
        _PAIRED_TAG,
        _SELF_CLOSED_TAG,
        DROPPED_TAGS,
        _prefix_tree,
        _tag_mark,
    )

    names = "|".join(sorted(DROPPED_TAGS - {"table"}, key=len, reverse=True))
    self_closed = re.compile(rf"<({names})(?:\s[^<>]*)?/>", re.IGNORECASE)
    paired = re.compile(rf"<({names})(?:\s[^<>]*)?(?<!/)>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
    tree = re.compile(_prefix_tree(DROPPED_TAGS), re.IGNORECASE)
    flat = re.compile(f"(?:{'|'.join(sorted(DROPPED_TAGS, key=len, reverse=True))})", re.I)
    for name in DROPPED_TAGS:
        for text in (name, name.upper(), name[:-1], name + "x", name + "s"):
            expected, found = flat.match(text), tree.match(text)
            assert (found and found.group()) == (expected and expected.group()), text
    pieces = [
        "<ref>", "</ref>", "<ref name=a>", "</REF >", "</ref\n>", "<", "/", ">", "ref", "a", " ",
        "\n", "<ref/>", "<ref />", "<ref name=a/>", "<math>", "</math>", "</ref", "<Ref>",
        "</rEf>", "< /ref>", "</ ref>", "<references/>", "<REFERENCES >", "</references>",
        "erences", "<refx>", "<ce>", "</ce>", "<chem/>", "/>", "<br>", "<b>",
    ]  # fmt: skip
    rng = random.Random(13)
    for _ in range(50000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 10)))
        assert _SELF_CLOSED_TAG.sub(_tag_mark, text) == self_closed.sub(_tag_mark, text), text
        assert _PAIRED_TAG.sub(_tag_mark, text) == paired.sub(_tag_mark, text), repr(text)
