"""Sentence splitting with Punkt from punkt_tab tables (transforms.sentences).

Unit tests use hand-built parameters and hand-written text; the real-data tests use the shared
punkt_tab English parameters and the Gutenberg books in ../shared/corpora.
"""

from __future__ import annotations

import functools
import pickle
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from nltk.tokenize.punkt import (
    PunktLanguageVars,
    PunktParameters,
    PunktSentenceTokenizer,
)

from pipeline.files.punkt_files import (
    load_punkt_parameters_from,
    load_splitter,
    save_punkt_parameters,
)
from tests.conftest import require_corpora
from tests.punkt_fixtures import hand_params
from transforms.book_text import clean_book
from transforms.punkt_tables import PUNKT_FILES, PunktTables
from transforms.sentences import (
    TITLES,
    QuoteAwareLanguageVars,
    SentenceSplitter,
    _sample,
    split_overlong,
    train_punkt_parameters,
)

# ---------------------------------------------------------------------------------------------
# Tables, saving and loading
# ---------------------------------------------------------------------------------------------


def test_tables_round_trip():
    params = hand_params()
    tables = PunktTables.from_parameters(params)
    assert tables.abbrev_types == ("dr", "e.g", "etc", "i.e", "mr", "mrs", "st")
    back = tables.to_parameters()
    assert back.abbrev_types == params.abbrev_types
    assert back.collocations == params.collocations
    assert back.sent_starters == params.sent_starters
    assert dict(back.ortho_context) == dict(params.ortho_context)
    assert PunktTables.from_parameters(back) == tables
    assert back.ortho_context["unseen"] == 0  # still a defaultdict(int)


# ---------------------------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------------------------


def test_split_with_abbreviations():
    splitter = SentenceSplitter(hand_params())
    text = (
        "Mr. Darcy met Dr. Watson near St. Paul's at noon. They spoke of tea, e.g. green tea, "
        "and sugar. However, nobody listened! Was it late? It was."
    )
    assert splitter.split(text) == [
        "Mr. Darcy met Dr. Watson near St. Paul's at noon.",
        "They spoke of tea, e.g. green tea, and sugar.",
        "However, nobody listened!",
        "Was it late?",
        "It was.",
    ]


def test_split_keeps_closing_quotes_with_their_sentence():
    splitter = SentenceSplitter(hand_params())
    text = "“Single, my dear.” He left. (It was late.) ‘Yes,’ she said. “Go!” ‘Now.’ Done."
    assert splitter.split(text) == [
        "“Single, my dear.”",
        "He left.",
        "(It was late.)",
        "‘Yes,’ she said.",
        "“Go!”",
        "‘Now.’",
        "Done.",
    ]


def test_split_known_punkt_limitation_question_before_lowercase():
    # Punkt always ends a sentence at "?" and "!", even before "she asked".
    splitter = SentenceSplitter(hand_params())
    assert splitter.split("“Is he married?” she asked.") == ["“Is he married?”", "she asked."]


@pytest.mark.parametrize(
    "text",
    [
        "“Mr. Darcy is not worth listening to.”",  # curly quote glued to the title
        "‘Mr. Darcy is not worth listening to.’",
        "“You are an adept yourself, Mr. Darcy.”",  # the name's own period before the quote
        '"You are an adept yourself, Mr. Darcy."',
        "You are an adept yourself, Mr. Darcy.",
    ],
)
def test_title_is_never_cut_from_the_name(text: str):
    splitter = SentenceSplitter(hand_params())
    assert splitter.split(f"{text} She left.") == [text, "She left."]


def test_breaks_inside_a_chunk_without_spaces():
    splitter = SentenceSplitter(hand_params())
    assert splitter.split("It was only for a few days.--Mr. Knightley came in.") == [
        "It was only for a few days.",
        "--Mr. Knightley came in.",
    ]
    assert splitter.split(
        '"No; to-night!--to-night!" she cried. Very bad acting!!! I promise.'
    ) == [
        '"No; to-night!--to-night!"',
        "she cried.",
        "Very bad acting!!!",
        "I promise.",
    ]


def test_titles_before_names_that_are_common_words():
    params = hand_params()
    params.ortho_context["guest"] = 32  # seen lowercase mid-sentence only: Punkt's sentence starter
    text = "He sat with Mr. Guest, his clerk. It was late."
    assert SentenceSplitter(params).split(text) == [
        "He sat with Mr. Guest, his clerk.",
        "It was late.",
    ]
    assert SentenceSplitter(params, titles=()).split(text) == [
        "He sat with Mr.",
        "Guest, his clerk.",
        "It was late.",
    ]


def test_split_gives_one_line_sentences():
    splitter = SentenceSplitter(hand_params())
    assert splitter.split("First line\nstill the first   sentence. Second\tone.") == [
        "First line still the first sentence.",
        "Second one.",
    ]
    assert splitter.split("") == []
    assert splitter.split("   \n ") == []


def test_split_overlong_prefers_semicolons_then_whitespace():
    sentence = "alpha beta gamma; delta epsilon zeta eta theta iota kappa lambda mu"
    assert split_overlong(sentence, 30) == [
        "alpha beta gamma;",
        "delta epsilon zeta eta theta",
        "iota kappa lambda mu",
    ]
    assert split_overlong("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert split_overlong("short", 10) == ["short"]


def test_splitter_guard_counts_overlong_sentences():
    splitter = SentenceSplitter(hand_params(), max_chars=40)
    long_sentence = "It rained; " * 4 + "and then it rained again all through the night."
    sentences, overlong = splitter.split_counted(f"{long_sentence} It stopped.")
    assert overlong == 1
    assert all(len(s) <= 40 for s in sentences)
    assert sentences[-1] == "It stopped."
    assert " ".join(sentences) == f"{long_sentence} It stopped."
    assert splitter.split_counted("Short. Fine.") == (["Short.", "Fine."], 0)


def test_splitter_validates_max_chars():
    with pytest.raises(ValueError):
        SentenceSplitter(hand_params(), max_chars=0)


def test_splitter_is_picklable_without_its_tokenizer():
    splitter = SentenceSplitter(hand_params(), max_chars=500)
    text = "Mr. Darcy bowed. Dr. Watson left."
    before = splitter.split(text)  # builds the tokenizer
    assert splitter._tokenizer is not None
    clone = pickle.loads(pickle.dumps(splitter))
    assert clone._tokenizer is None
    assert clone.max_chars == 500
    assert clone.tables == splitter.tables
    assert clone.titles == splitter.titles
    assert clone.split(text) == before == ["Mr. Darcy bowed.", "Dr. Watson left."]
    assert b"PunktSentenceTokenizer" not in pickle.dumps(splitter)


def test_splitting_does_not_change_the_tables():
    splitter = SentenceSplitter(hand_params())
    tables = splitter.tables
    splitter.split("Completely unseen words appear here. Another one follows.")
    assert splitter.tables == tables == PunktTables.from_parameters(hand_params())


def test_splitter_accepts_tables():
    tables = PunktTables.from_parameters(hand_params())
    assert SentenceSplitter(tables).split("Mr. Darcy bowed. He left.") == [
        "Mr. Darcy bowed.",
        "He left.",
    ]


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

NAMES = ["Darcy", "Bennet", "Watson", "Holmes", "Harker", "Seward", "Morris", "Weston"]
VERBS = ["met", "called on", "wrote to", "dined with", "walked with", "argued with"]
PLACES = ["garden", "library", "town", "house", "park", "rain", "evening", "morning"]
TEMPLATES = [
    "{t1} {a} {verb} {t2} {b} in the {p1}.",
    "In the {p1} it was cold, and {t1} {a} stayed in the {p2}.",
    "Nobody came to the {p1} that {p2}.",
    "{t1} {a} said nothing about the {p1}.",
    "The {p1} was quiet when {t1} {a} {verb} {t2} {b}.",
    "It was the {p1}, and the {p2} was dark.",
]


def synthetic_corpus(paragraphs: int = 400, seed: int = 7) -> list[str]:
    """Hand-made sentences where titles are always followed by a name and every other word also
    appears inside sentences."""
    rng = random.Random(seed)
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rng.randint(2, 6)):
            a, b = rng.sample(NAMES, 2)
            p1, p2 = rng.sample(PLACES, 2)
            t1, t2 = rng.choice(["Mr.", "Dr.", "Mrs."]), rng.choice(["Mr.", "Dr.", "Mrs."])
            template = rng.choice(TEMPLATES)
            sentences.append(
                template.format(t1=t1, t2=t2, a=a, b=b, p1=p1, p2=p2, verb=rng.choice(VERBS))
            )
        out.append(" ".join(sentences))
    return out


def test_sample_is_bounded_and_order_independent():
    texts = [f"text number {i} " + "word " * (i % 7) for i in range(200)]
    sample = _sample(texts, 1_000)
    assert sum(map(len, sample)) <= 1_000
    assert len(sample) > 20
    shuffled = texts[:]
    random.Random(1).shuffle(shuffled)
    assert _sample(shuffled, 1_000) == sample
    assert _sample(texts, 10**9) == _sample(reversed(texts), 10**9)
    assert len(_sample(texts, 10**9)) == 200


def test_sample_cuts_a_long_text_at_whitespace():
    assert _sample(["aaaa bbbb cccc dddd"], 12) == ["aaaa bbbb"]
    assert _sample(["x" * 30], 12) == ["x" * 12]
    assert _sample(["", "   "], 100) == []


def test_train_learns_abbreviations_deterministically(tmp_path: Path):
    corpus = synthetic_corpus()
    params = train_punkt_parameters(corpus)
    assert {"mr", "dr", "mrs"} <= params.abbrev_types
    shuffled = corpus[:]
    random.Random(3).shuffle(shuffled)
    again = train_punkt_parameters(shuffled)
    assert PunktTables.from_parameters(again) == PunktTables.from_parameters(params)
    save_punkt_parameters(params, tmp_path)
    back = load_punkt_parameters_from(tmp_path)
    assert PunktTables.from_parameters(back) == PunktTables.from_parameters(params)
    splitter = SentenceSplitter(back, titles=())  # the learned abbreviations alone
    assert splitter.split("Mr. Holmes met Dr. Watson in the park. It rained in the town.") == [
        "Mr. Holmes met Dr. Watson in the park.",
        "It rained in the town.",
    ]


def test_train_with_the_abbreviation_penalty_misses_mixed_style_abbreviations():
    corpus = synthetic_corpus()
    corpus += [p.replace("Mr.", "Mr") for p in synthetic_corpus(60, seed=11)]  # British style
    assert "mr" in train_punkt_parameters(corpus).abbrev_types
    assert "mr" not in train_punkt_parameters(corpus, ignore_abbrev_penalty=False).abbrev_types


# ---------------------------------------------------------------------------------------------
# Real data: the shared punkt_tab parameters and the Gutenberg books
# ---------------------------------------------------------------------------------------------


def nltk_data_dir() -> Path:
    return require_corpora("nltk_data")


@functools.cache
def english_splitter() -> SentenceSplitter:
    return load_splitter("english", paths=[nltk_data_dir()])


@functools.cache
def _book(path: Path) -> tuple[str, ...]:
    paragraphs, _ = clean_book(path.read_bytes(), path.name, Counter())
    return tuple(paragraphs)


def book(name: str) -> tuple[str, ...]:
    return _book(require_corpora("books", name))


def test_shared_punkt_tab_splits_sensibly():
    splitter = english_splitter()
    text = (
        "“My dear Mr. Bennet,” said his lady to him one day, “have you heard that Netherfield "
        "Park is let at last?” Mr. Bennet replied that he had not. Dr. Watson arrived at "
        "9 a.m. on Jan. 5th. St. Paul's was closed, etc. He left."
    )
    assert splitter.split(text) == [
        "“My dear Mr. Bennet,” said his lady to him one day, “have you heard that Netherfield "
        "Park is let at last?”",
        "Mr. Bennet replied that he had not.",
        "Dr. Watson arrived at 9 a.m. on Jan. 5th.",
        "St. Paul's was closed, etc.",
        "He left.",
    ]


def test_pride_and_prejudice_sentences():
    splitter = english_splitter()
    sentences = [s for p in book("1342-0.txt") for s in splitter.split(p)]
    assert 5_000 <= len(sentences) <= 8_000  # 6,066 with these parameters
    assert sentences[0] == (
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife."
    )
    # "Mr. Darcy" / "Mrs. Bennet" are never cut after the title
    assert not [s for s in sentences if s.endswith((" Mr.", " Mrs.", "“Mr.", " Dr."))]
    assert any(s.startswith("Mr. Darcy") for s in sentences)
    mean = sum(map(len, sentences)) / len(sentences)
    assert 60 <= mean <= 200


@pytest.mark.slow
def test_every_book_splits_into_bounded_sentences():
    splitter = english_splitter()
    total = overlong_total = 0
    for name in sorted(p.name for p in require_corpora("books").glob("*.txt")):
        counted = [splitter.split_counted(p) for p in book(name)]
        sentences = [s for ss, _ in counted for s in ss]
        overlong_total += sum(n for _, n in counted)
        total += len(sentences)
        assert len(sentences) >= 1_000, name
        assert all(0 < len(s) <= splitter.max_chars and "\n" not in s for s in sentences), name
    assert 50_000 <= total <= 80_000  # 59,110
    assert overlong_total <= 5  # 2: one in 9198-8.txt, one in pg174.txt


@pytest.mark.slow
def test_training_on_the_books(tmp_path: Path):
    books = sorted(require_corpora("books").glob("*.txt"))
    texts = (p for path in books for p in _book(path))
    params = train_punkt_parameters(texts, max_chars=1_500_000)
    assert {"mr", "mrs", "dr", "st", "etc", "esq", "i.e"} <= params.abbrev_types
    assert not {"darcy", "bennet", "bingley"} & params.sent_starters
    save_punkt_parameters(params, tmp_path / "books")
    back = load_punkt_parameters_from(tmp_path / "books")
    assert PunktTables.from_parameters(back) == PunktTables.from_parameters(params)
    assert back.ortho_context == params.ortho_context
    save_punkt_parameters(back, tmp_path / "again")
    for name in PUNKT_FILES:
        assert (tmp_path / "books" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    splitter = SentenceSplitter(back, titles=())  # the learned parameters alone
    paragraph = (
        "Mr. Darcy and Mrs. Bennet called on Dr. Jekyll in St. James's Street. They brought "
        "tea, sugar, etc. for the journey. The letter was for John Knightley, Esq. of Donwell, "
        "i.e. the elder brother. It was late."
    )
    assert splitter.split(paragraph) == [
        "Mr. Darcy and Mrs. Bennet called on Dr. Jekyll in St. James's Street.",
        "They brought tea, sugar, etc. for the journey.",
        "The letter was for John Knightley, Esq. of Donwell, i.e. the elder brother.",
        "It was late.",
    ]


# ---------------------------------------------------------------------------------------------
# The fast splitter (bare regex engine, cheap tokens, list-based annotation) against the
# straightforward one: NLTK's own tokens, patterns and generator pipeline.
# ---------------------------------------------------------------------------------------------


class _LiteralLanguageVars(PunktLanguageVars):
    __slots__ = ()
    _re_word_start = QuoteAwareLanguageVars._re_word_start


class _LiteralTokenizer(PunktSentenceTokenizer):
    """The splitter's decision rule written plainly (as before the speed-up)."""

    titles: frozenset[str] = frozenset()

    def _slices_from_text(self, text):
        last_break = 0
        for match, context in self._match_potential_end_contexts(text):
            for end, next_start in self._breaks(match, context):
                if end > last_break:
                    yield slice(last_break, end)
                    last_break = next_start
        yield slice(last_break, len(text.rstrip()))

    def _breaks(self, match, context):
        after = match.group("after_tok")
        head = context[: len(context) - len(after)]
        next_tok = match.group("next_tok")
        if next_tok:
            trimmed = re.sub(r"[.?!]+[\"')\]}\u2019\u201d\xbb]*$", "", next_tok) or next_tok
            after = after[: len(after) - len(next_tok)] + trimmed
        tokens = list(self._annotate_tokens(self._tokenize_words(head + after)))
        head_words = [token.tok for token in self._tokenize_words(head)]
        if [token.tok for token in tokens[: len(head_words)]] != head_words:
            if self.text_contains_sentbreak(context):
                return [(match.end(), match.start("next_tok") if next_tok else match.end())]
            return []
        # written apart from the fast splitter's loop: word ends first, then one test per word
        word_ends, cursor = [], 0
        for word in head_words:
            cursor = head.index(word, cursor) + len(word)
            word_ends.append(cursor)
        head_start = match.end() - len(head)
        breaks = []
        for index, (token, word_end) in enumerate(
            zip(tokens[: len(word_ends)], word_ends, strict=True)
        ):
            following = (head_words[index + 1 :] or [""])[0]
            candidate = (
                token.sentbreak
                and index != len(tokens) - 1
                and token.type_no_period.lstrip("\"'“‘«(") not in self.titles
                and not (following and re.fullmatch(r"[.?!…\"')\]}\u2019\u201d\xbb]+", following))
            )
            if not candidate:
                continue
            end = head_start + word_end
            if end == match.end():
                breaks.append((end, match.start("next_tok") if next_tok else end))
            elif re.compile(r"[^\w]*(\w?)").match(head, word_end)[1].isupper():
                breaks.append((end, end))
        return breaks


def _literal_splitter(params: PunktParameters, titles: frozenset[str]):
    tokenizer = _LiteralTokenizer(params, lang_vars=_LiteralLanguageVars())
    tokenizer.titles = titles

    def split(text: str) -> list[str]:
        sentences = (re.sub(r"\s+", " ", s).strip() for s in tokenizer.tokenize(text))
        return [s for s in sentences if s]

    return split


_PIECES = [
    "Mr.", "Dr.", "Mrs.", "etc.", "e.g.", "U.S.", "1.", "12.", "...", "!", "?", "!!", "--", "“",
    "”", "‘", "’", "«", "»", "(", ")", '"', "'", "a", "The", "the", "However", "Smith.", "J.",
    "St.", "no.", "x!", "y?", "\n", "\n\n", "Jan.", "5th.", "a.m.", ";", ":", "Darcy", "élan",
    "ÉLAN.", "3.14", "-", "—", "…", "[1]", "Guest",
    # chunks the certain-break check decides alone, or must leave to Punkt
    "word.", "Words.", "word).", 'word".', "Word?", "word)!", 'ab"?', "jan.", "Jan.", "b.", "i.",
    "s.", "Mr.", "mrs.", "etc.", "ab.", "x.", "1990.", "élan.", "x²y.", "(word.", "word.)",
    "\x1c", "\xa0", "Bach", "January",
    # chunks followed by one of NLTK's non-word characters instead of whitespace
    'it."', "it.'", "you?)", 'Oh!"', "Mr.)", 'Dr."', "it.:", "so.@", "no.*", "ab.{", "end.[",
    "etc.)", "i.'", "Mr.;", "\t", "\r", "\x0b", "\x0c",
]  # fmt: skip


@pytest.mark.parametrize("titles", [TITLES, frozenset()])
def test_fast_splitter_equals_the_literal_one(titles: frozenset[str]):
    rng = random.Random(20261201)
    texts = [
        "".join(rng.choice(_PIECES) + rng.choice(["", " ", " ", "  "]) for _ in range(n))
        for n in (rng.randint(1, 30) for _ in range(1000))
    ]
    texts += _random_texts(20261204, 1000) + synthetic_corpus(30)
    for params in (hand_params(), PunktParameters()):
        splitter = SentenceSplitter(params, titles=titles)
        literal = _literal_splitter(splitter.tables.to_parameters(), titles)
        for text in texts:
            assert splitter.split(text) == literal(text), repr(text)


def _wiki_paragraphs() -> list[str]:
    """The normalized paragraphs of every article of every shared wiki dump."""
    import bz2

    from transforms.mediawiki_xml import WikiPage, iter_pages
    from transforms.text_normalization import normalize_text
    from transforms.wikitext import wikitext_to_paragraphs

    paragraphs = []
    for path in sorted(require_corpora("wiki").iterdir()):
        with (bz2.open if path.suffix == ".bz2" else open)(path, "rb") as f:
            for page in iter_pages(f, path.name, Counter()):
                if isinstance(page, WikiPage):
                    paragraphs += map(normalize_text, wikitext_to_paragraphs(page.text))
    return paragraphs


def test_fast_splitter_equals_the_literal_one_on_the_wiki_dumps():
    splitter = english_splitter()
    literal = _literal_splitter(splitter.tables.to_parameters(), TITLES)
    paragraphs = _wiki_paragraphs()
    assert len(paragraphs) > 5000
    for paragraph in paragraphs:
        assert splitter.split(paragraph) == literal(paragraph), repr(paragraph)


def _random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(_PIECES) + rng.choice(["", " ", " ", "  ", "\n"]) for _ in range(n))
        for n in (rng.randint(1, 30) for _ in range(count))
    ]


def test_normalized_paragraphs_split_as_any_other():
    """``split_counted(p, normalized=True)`` for ``normalize_text``'s output: the same sentences
    and count (one-line paragraphs skip the per-sentence whitespace collapse)."""
    from transforms.text_normalization import normalize_text

    splitter = SentenceSplitter(hand_params(), max_chars=60)
    texts = _random_texts(20261207, 2000) + [
        "  Lead. and  trail.  ",
        "a\u00a0b. C\td.",
        "x.\ny. Z.",
    ]
    for text in map(normalize_text, texts):
        assert splitter.split_counted(text, normalized=True) == splitter.split_counted(text)


def test_candidates_are_nltks_potential_end_contexts():
    """``_candidates`` gives NLTK's candidates and contexts (runs like "!!!" overlap, every
    whitespace character ends a chunk, a chunk may start at the text's first character)."""
    tokenizer = SentenceSplitter(hand_params())._get_tokenizer()
    texts = _random_texts(20261205, 2000) + [" x. y", "\tx. y", "a!!! B", "!. ?", ".", ""]
    for text in texts:
        ours = [
            (m.span(), text[start : m.end("after_tok")]) for m, start in tokenizer._candidates(text)
        ]
        nltk = [(m.span(), context) for m, context in tokenizer._match_potential_end_contexts(text)]
        assert ours == nltk, repr(text)


def test_candidate_patterns_match_as_nltks_engine_does():
    """The ``re`` candidate patterns give NLTK's ``regex`` pattern's matches and groups, on
    texts with every kind of whitespace either engine knows; the "."-only one on texts without
    "?" or "!"."""
    lang_vars = QuoteAwareLanguageVars()
    nltk_pattern = lang_vars.period_context_re()
    every_end, period_only = lang_vars.candidate_patterns()

    def found(pattern, text):
        return [
            (m.span(), m.span("after_tok"), m.group("after_tok"), m.group("next_tok"))
            for m in pattern.finditer(text)
        ]

    pieces = [*_PIECES, "\x1d", "\x1e", "\x1f", "\x85", "\u2028", "\u3000", "\u2009", "\u200b"]
    rng = random.Random(20261208)
    for _ in range(20000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
        expected = found(nltk_pattern, text)
        assert found(every_end, text) == expected, repr(text)
        if "?" not in text and "!" not in text:
            assert found(period_only, text) == expected, repr(text)


def test_whitespace_class_is_the_regex_engines():
    import regex

    from transforms.sentences import REGEX_WHITESPACE

    everything = (
        "".join(map(chr, range(0x110000)))
        .encode("utf-8", "surrogatepass")
        .decode("utf-8", "replace")
    )
    assert re.findall(f"[{REGEX_WHITESPACE}]", everything) == regex.findall(r"\s", everything)


def test_realignment_starts_with_one_of_its_characters():
    """A sentence is realigned only when it starts with one of ``REALIGNMENT_FIRST``: NLTK's
    pattern matches after no other character."""
    from transforms.sentences import REALIGNMENT_FIRST

    realignment = QuoteAwareLanguageVars.re_boundary_realignment
    starts = {chr(c) for c in range(0x10000) if realignment.match(chr(c) + " ")}
    assert starts == REALIGNMENT_FIRST


def test_realigned_sentences_are_nltks():
    """``tokenize``'s one loop realigns closing punctuation as NLTK's generator chain does."""
    tokenizer = SentenceSplitter(hand_params(), titles=())._get_tokenizer()
    texts = _random_texts(20261206, 2000) + ['He left. ") Then.', 'Go. "', "a. )--b. c", "x. )"]
    for text in texts:
        assert tokenizer.tokenize(text) == PunktSentenceTokenizer.tokenize(tokenizer, text), repr(
            text
        )


def test_most_wiki_candidates_are_decided_without_punkts_annotation():
    splitter = SentenceSplitter(english_splitter().tables)
    tokenizer = splitter._get_tokenizer()
    annotated = Counter()
    breaks = tokenizer._breaks

    def counted(match, context):
        annotated["calls"] += 1
        return breaks(match, context)

    tokenizer._breaks = counted  # the instance's own method, counted
    paragraphs = _wiki_paragraphs()[:3000]
    candidates = sum(len(list(tokenizer._match_potential_end_contexts(p))) for p in paragraphs)
    for paragraph in paragraphs:
        splitter.split(paragraph)
    assert candidates > 5000
    assert annotated["calls"] < 0.2 * candidates  # ~0.14 on the shared dumps (~0.06 on books)


def test_certain_breaks_respect_abbreviations_collocations_and_titles():
    params = hand_params()  # abbreviation "etc", collocation ("s", "bach"), title "mr"
    splitter = SentenceSplitter(params)
    assert splitter.split("They sold tea etc. for the rest. Stay. Mr. Smith came.") == [
        "They sold tea etc. for the rest.",
        "Stay.",
        "Mr. Smith came.",
    ]
    params.abbrev_types.discard("mr")
    assert SentenceSplitter(params).split("I saw Mr. Smith.") == ["I saw Mr. Smith."]
    assert SentenceSplitter(params, titles=()).split("I saw Mr. Smith.") == ["I saw Mr.", "Smith."]
    params.collocations.add(("sorry", "bach"))
    assert SentenceSplitter(params).split("We are sorry. Bach played.") == [
        "We are sorry. Bach played."
    ]
    assert splitter.split("We are sorry. Bach played. Was it (loud)? Yes!") == [
        "We are sorry.",
        "Bach played.",
        "Was it (loud)?",
        "Yes!",
    ]


@pytest.mark.parametrize("name", ["1342-0.txt", "pg1260.txt"])  # curly, straight quotes
def test_fast_splitter_equals_the_literal_one_on_a_book(name: str):
    splitter = english_splitter()
    literal = _literal_splitter(splitter.tables.to_parameters(), TITLES)
    for paragraph in book(name)[:1500]:
        assert splitter.split(paragraph) == literal(paragraph)
