"""Sentence splitting with NLTK's Punkt, from plain-text parameter tables (never from a pickle).

``SentenceSplitter`` takes already-loaded ``transforms.punkt_tables.PunktTables`` (plain,
immutable, picklable data; ``pipeline.files.punkt_files`` finds and reads the ``punkt_tab`` files)
and builds the NLTK tokenizer from them lazily in each process. ``train_punkt_parameters``
learns new parameters from text.

Splitting is Punkt's algorithm with three corrections for book text, each tested: opening curly
quotes are split from words (``QuoteAwareLanguageVars``: “Mr. is “ + Mr.), each candidate break
is decided on its own token (``_Tokenizer``: "Mr. Darcy.”" and "days.--Mr. Knightley"), and no
sentence ends after a title (``TITLES``). Known Punkt limitation kept: "?" and "!" always end a
sentence, also in “Is he married?” she asked.

Speed: the decisions are NLTK's own code and patterns, minus three per-candidate costs — NLTK's
patterns run on their ``regex`` engine directly rather than through ``nltk.redos``'s timeout
wrapper (so no per-call time limit: Punkt's patterns are linear), tokens are a cheaper
``PunktToken`` with a memo of token types, and each candidate's few tokens are annotated as a
list rather than through generator chains. Same sentences (tested against the plain
implementation), ~2.3x the throughput, more than NLTK's own ``sent_tokenize``. On top of that,
the commonest candidates ("word. Next", "word?", "word).", "word.\"", "Mr. Darcy") are decided
from their chunk alone when Punkt's answer cannot differ (``_Tokenizer._decided_break``): ~9 in 10
on Wikipedia and books, and the candidates are found without NLTK's per-character loop
(``_Tokenizer._candidates``), by NLTK's candidate pattern spelt for Python's ``re``, which finds
them faster than the ``regex`` engine (``QuoteAwareLanguageVars.candidate_patterns``).
"""

from __future__ import annotations

import hashlib
import heapq
import re
from collections.abc import Iterable, Iterator

from nltk.tokenize.punkt import (
    PunktLanguageVars,
    PunktParameters,
    PunktSentenceTokenizer,
    PunktToken,
    PunktTrainer,
)

from transforms.overlong_text import cut_overlong
from transforms.punkt_tables import PunktTables
from transforms.text_normalization import collapse_whitespace

DEFAULT_MAX_SENTENCE_CHARS = 2_000
DEFAULT_TRAINING_CHARS = 5_000_000
TRAINING_BATCH_CHARS = 1_000_000
"""Training text goes to PunktTrainer in batches of about this many characters (memory)."""

_TRAILING_SENTENCE_END = re.compile(r"[.?!]+[\"')\]}\u2019\u201d\xbb]*$")
_END_PUNCTUATION = re.compile(r"[.?!…\"')\]}\u2019\u201d\xbb]+")
_NEXT_LETTER = re.compile(r"[^\w]*(\w?)")
_PLAIN_END = re.compile(r"[^\W\d_]+(?:[)\"]?[?!]|[)\"]\.)|([^\W\d_]{2,})\.")
"""A chunk of letters ending in a candidate whose decision is known (``_Tokenizer._decided_break``);
group 1 is the word when the decision still depends on it."""
_LAST_WHITESPACE = re.compile(r".*[ \t\n\r\x0b\x0c]", re.DOTALL)
"""Matches up to the last of ``string.whitespace`` (NLTK's ``_get_last_whitespace_index``)."""
REALIGNMENT_FIRST = frozenset("\"')]}\u2018\u2019\u201c\u201d\xab\xbb")
"""The characters NLTK's ``re_boundary_realignment`` can start with (its first character class;
tests/transforms/test_sentences.py checks it against the pattern): a sentence starting with
any other is not realigned, and the pattern is not tried."""
TITLES = frozenset({"mr", "mrs", "ms", "messrs", "mme", "mlle", "dr"})
"""Titles that a name always follows: a sentence never ends after one (Punkt would end one
before a name that is also a common word: "Mr. Guest", "Mrs. Leaf", "Mr. Given")."""


def _engine(pattern):
    """The compiled ``regex`` pattern inside an NLTK pattern.

    NLTK 3.10 wraps each of its patterns in ``nltk.redos.TimedPattern``, which resolves a
    timeout and re-dispatches on every call; on Punkt's short strings that wrapper costs more
    than the match. The engine behind it matches identically. Any other pattern is returned
    as it is (slower, same result)."""
    return getattr(pattern, "_rx", pattern)


class QuoteAwareLanguageVars(PunktLanguageVars):
    """NLTK's English language variables, with opening curly quotes and guillemets (“ ‘ « „ ‚)
    kept out of word starts as the ASCII ``"`` already is: otherwise “Mr. is one token whose
    type "“mr" is not the abbreviation "mr", and every “Mr. Darcy opening a quotation is split.

    Its patterns are NLTK's, run on the bare engine (``_engine``); the candidate pattern also
    as an ``re`` pattern (``candidate_patterns``).
    """

    __slots__ = ()
    _re_word_start = r"[^\(\"\`{\[:;&\#\*@\)}\]\-,\u201c\u2018\xab\u201e\u201a]"
    re_boundary_realignment = _engine(PunktLanguageVars.re_boundary_realignment)

    def word_tokenize(self, s: str) -> list[str]:
        return _engine(self._word_tokenizer_re()).findall(s)

    def period_context_re(self):  # type: ignore[no-untyped-def]
        return _engine(super().period_context_re())

    def candidate_patterns(self) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """(``period_context_re()``, the same for a text without ``?`` or ``!``, where only
        ``.`` can be a candidate), as ``re`` patterns: NLTK's pattern text with ``\\s`` and
        ``\\S`` spelt as the character classes the ``regex`` engine gives them
        (``REGEX_WHITESPACE``). Same matches and groups (tested); ``re`` finds them ~1.6×
        faster, and the "." pattern starts with a literal, which it skips to."""
        cached = _CANDIDATE_PATTERNS.get(type(self))
        if cached is None:
            fmt = self._period_context_fmt
            sent_end = self._re_sent_end_chars
            cached = _CANDIDATE_PATTERNS[type(self)] = tuple(  # type: ignore[assignment]
                re.compile(
                    (fmt % {"NonWord": self._re_non_word_chars, "SentEndChars": ends})
                    .replace(r"\s", f"[{REGEX_WHITESPACE}]")
                    .replace(r"\S", f"[^{REGEX_WHITESPACE}]"),
                    re.VERBOSE,
                )
                # a text without "?" or "!" has only "." candidates (NLTK's ends: [.?!])
                for ends in (sent_end, r"\." if sent_end == r"[\.\?!]" else sent_end)
            )
        return cached  # type: ignore[return-value]


REGEX_WHITESPACE = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""What ``\\s`` matches in the ``regex`` engine NLTK's patterns run on (Unicode White_Space),
as a character class body; ``re``'s ``\\s`` also takes ``\\x1c``-``\\x1f``."""
_CANDIDATE_PATTERNS: dict[type, tuple[re.Pattern[str], re.Pattern[str]]] = {}


_TOKEN_TYPES_LIMIT = 1 << 17
"""Token strings whose Punkt type is remembered (per process) before the memo starts over."""


class _Token(PunktToken):
    """A PunktToken with the same attributes, made cheaply: the type of a token string
    (lowercase, numbers as ``##number##``) is computed once per process, and the pattern
    properties run on the bare engine."""

    __slots__ = ()
    _types: dict[str, str] = {}
    _numeric = _engine(PunktToken._RE_NUMERIC)
    _ellipsis = _engine(PunktToken._RE_ELLIPSIS)
    _initial = _engine(PunktToken._RE_INITIAL)
    _alpha = _engine(PunktToken._RE_ALPHA)

    def __init__(self, tok: str, parastart: bool | None = None, linestart: bool | None = None):
        types = self._types
        typ = types.get(tok)
        if typ is None:
            if len(types) >= _TOKEN_TYPES_LIMIT:
                types.clear()
            typ = types[tok] = self._numeric.sub("##number##", tok.lower())
        self.tok = tok
        self.type = typ
        self.period_final = tok.endswith(".")
        self.parastart = parastart
        self.linestart = linestart
        self.sentbreak = None
        self.abbr = None
        self.ellipsis = None

    @property
    def is_ellipsis(self):  # type: ignore[no-untyped-def]
        return self._ellipsis.match(self.tok)

    @property
    def is_initial(self):  # type: ignore[no-untyped-def]
        return self._initial.match(self.tok)

    @property
    def is_alpha(self):  # type: ignore[no-untyped-def]
        return self._alpha.match(self.tok)


class _Tokenizer(PunktSentenceTokenizer):
    """PunktSentenceTokenizer that decides each candidate break on its own token.

    NLTK (3.10.4) checks a candidate ("." "?" "!") by tokenizing a context — the
    whitespace-delimited chunk ending at the candidate plus the next token — and breaking at the
    candidate when *any* token of it but the last is a sentence end. Two Gutenberg-common cases go
    wrong: in ``Mr. Darcy.”`` the next token's own break (before ``”``) cuts after "Mr.", and in
    ``days.--Mr. Knightley`` the break after "days." is placed after "Mr.". Here the next token
    is read without its final punctuation, and a break is placed after the token that ends the
    sentence, wherever it is in the chunk (after the last of a run like "!!!"; inside a chunk only
    before a capital: "thought.--Mr. Knightley" but not "to-night!--to-night!"); Punkt's
    annotation rules are unchanged, except that no break follows one of ``titles``.
    """

    titles: frozenset[str] = frozenset()
    uncertain: frozenset[str] | None = None
    """Lowercase words whose "word." break Punkt may revise (see ``_decided_break``): the
    abbreviations, the collocations' first words and ``titles``; made from them on first use
    when not set."""

    def tokenize(self, text: str, realign_boundaries: bool = True) -> list[str]:
        """NLTK's ``tokenize``: the sentences of ``_slices_from_text``, with closing punctuation
        that starts a sentence moved to the one before (``_realign_boundaries``), in one loop
        over a list instead of NLTK's chain of generators."""
        if not realign_boundaries:
            return super().tokenize(text, realign_boundaries)
        slices = list(self._slices_from_text(text))
        realignment = self._lang_vars.re_boundary_realignment.match
        sentences: list[str] = []
        realign = 0
        for index, current in enumerate(slices):
            start = current.start + realign
            if index + 1 == len(slices):
                sentence = text[start : current.stop]
                if sentence:
                    sentences.append(sentence)
                break
            following = slices[index + 1]
            # as NLTK matches text[following]: the same string bounds, no slice
            moved = (
                realignment(text, following.start, following.stop)
                if following.start < following.stop and text[following.start] in REALIGNMENT_FIRST
                else None
            )
            if moved:
                sentences.append(text[start : following.start + len(moved.group(0).rstrip())])
                realign = moved.end() - following.start
            else:
                realign = 0
                sentence = text[start : current.stop]
                if sentence:
                    sentences.append(sentence)
        return sentences

    def _slices_from_text(self, text: str) -> Iterator[slice]:  # type: ignore[override]
        if self.uncertain is None:
            params = self._params
            firsts = (first for first, _ in params.collocations)
            self.uncertain = frozenset({*params.abbrev_types, *firsts, *self.titles})
        last_break = 0
        decided = self._decided_break
        for match, word_start in self._candidates(text):
            decision = decided(text, word_start, match)
            if decision is not None:
                end = match.end()
                if decision and end > last_break:
                    yield slice(last_break, end)
                    next_start = match.start("next_tok")
                    last_break = next_start if next_start >= 0 else end
                continue
            context = text[word_start : match.end("after_tok")]
            for end, next_start in self._breaks(match, context):
                if end > last_break:
                    yield slice(last_break, end)
                    last_break = next_start
        yield slice(last_break, len(text.rstrip()))

    def _candidates(self, text: str) -> list[tuple[re.Match[str], int]]:
        """``(match, start of its chunk)`` for each candidate that NLTK's
        ``_match_potential_end_contexts(text)`` yields, in order; its context is
        ``text[start : match.end("after_tok")]``. The same rule (a candidate whose chunk reaches
        back into the next one's is dropped), found with a pattern instead of a character loop
        and without building the contexts (tested against NLTK's)."""
        found: list[tuple[re.Match[str], int]] = []
        last_space = _LAST_WHITESPACE.match
        # without the rest of string.whitespace, the last whitespace before a position is the
        # last space (str.rfind, not _LAST_WHITESPACE's scan there and back)
        spaces_only = not (
            "\n" in text or "\t" in text or "\r" in text or "\x0b" in text or "\x0c" in text
        )
        previous = None
        previous_start = previous_stop = 0
        every_end, period_only = self._lang_vars.candidate_patterns()
        pattern = every_end if "?" in text or "!" in text else period_only
        for match in pattern.finditer(text):
            match_start = match.start()
            # NLTK: the last whitespace's index in text[previous_stop:match_start], 0 if none
            # (also when it is the first character: then the chunk starts where the previous did)
            if spaces_only:
                space_at = text.rfind(" ", previous_stop, match_start)
            else:
                space = last_space(text, previous_stop, match_start)
                space_at = -1 if space is None else space.end() - 1
            word_start = space_at + 1 if space_at > previous_stop else previous_start
            if previous is not None and previous_stop <= word_start:
                found.append((previous, previous_start))
            previous, previous_start, previous_stop = match, word_start, match_start
        if previous is not None:
            found.append((previous, previous_start))
        return found

    def _decided_break(self, text: str, start: int, match: re.Match[str]) -> bool | None:
        """Whether ``_breaks`` surely gives ``[(match.end(), start of the next sentence)]``
        (True) or surely ``[]`` (False), told from the chunk ``text[start : match.end()]``
        alone, for the commonest candidates (about 9 in 10 on Wikipedia and books); None when
        Punkt's annotation must decide. The chunk is followed by whitespace and a token, or by
        one of NLTK's non-word characters (``)";}]*:@'({[``) that ends its last word either way:

        - ``word?``, ``word!``, ``word).``, ``word".`` (letters, then the candidate as a token
          of its own): a sentence-end token, which no second-pass rule revises: True;
        - ``word.`` (two letters or more): a sentence end (True) unless the word is a title
          (never a break after one: False), an abbreviation (first pass) or the first word of a
          collocation (second pass) (None); initials, numbers and ellipses never look like this.

        ``tests/transforms/test_sentences.py`` checks that the splitter gives the same sentences
        as one that sends every candidate through ``_breaks``.
        """
        next_tok = match.group("next_tok")
        if next_tok is not None and (not next_tok or next_tok[0].isspace()):
            return None
        found = _PLAIN_END.fullmatch(text, start, match.end())
        if found is None:
            return None
        word = found.group(1)
        if word is None:
            return True
        word = word.lower()
        if word in self.titles:
            return False
        return None if word in self.uncertain else True  # type: ignore[operator]

    def _tokenize_words(self, plaintext: str) -> list[PunktToken]:  # type: ignore[override]
        """NLTK's word tokens (lines split, blank lines mark a paragraph start), as a list."""
        word_tokenize = self._lang_vars.word_tokenize
        token = self._Token
        tokens: list[PunktToken] = []
        parastart = False
        for line in plaintext.split("\n"):
            if line.strip():
                words = word_tokenize(line)
                if not words:
                    continue
                tokens.append(token(words[0], parastart=parastart, linestart=True))
                parastart = False
                tokens.extend(map(token, words[1:]))
            else:
                parastart = True
        return tokens

    def _words(self, text: str) -> list[str]:
        """The strings of ``_tokenize_words(text)``."""
        if "\n" not in text:
            return self._lang_vars.word_tokenize(text) if text.strip() else []
        word_tokenize = self._lang_vars.word_tokenize
        return [word for line in text.split("\n") if line.strip() for word in word_tokenize(line)]

    def _annotated(self, text: str) -> list[PunktToken]:
        """``list(self._annotate_tokens(self._tokenize_words(text)))``, without the generator
        chain: first pass on every token, then the second pass on each pair (token i's second
        pass sees token i + 1 after its first pass only, as in NLTK's lazy pipeline)."""
        tokens = self._tokenize_words(text)
        first, second = self._first_pass_annotation, self._second_pass_annotation
        for token in tokens:
            first(token)
        for token, following in zip(tokens, tokens[1:], strict=False):
            second(token, following)
        return tokens

    def _breaks(self, match: re.Match[str], context: str) -> list[tuple[int, int]]:
        """(end of sentence, start of the next) for the breaks in ``context``'s chunk."""
        after = match.group("after_tok")
        head = context[: len(context) - len(after)]  # the chunk, ending at match.end()
        next_tok = match.group("next_tok")
        if next_tok:
            trimmed = _TRAILING_SENTENCE_END.sub("", next_tok) or next_tok
            after = after[: len(after) - len(next_tok)] + trimmed
        tokens = self._annotated(head + after)
        head_words = self._words(head)
        if len(tokens) < len(head_words) or any(
            token.tok != word for token, word in zip(tokens, head_words, strict=False)
        ):
            # unexpected tokenization: NLTK's own decision
            if self.text_contains_sentbreak(context):
                return [(match.end(), match.start("next_tok") if next_tok else match.end())]
            return []
        breaks = []
        head_start, cursor = match.end() - len(head), 0
        for index, word in enumerate(head_words):
            cursor = head.index(word, cursor) + len(word)
            token = tokens[index]
            if not token.sentbreak or index + 1 >= len(tokens):
                continue
            if token.type_no_period.lstrip("\"'“‘«(") in self.titles:
                continue
            following = head_words[index + 1] if index + 1 < len(head_words) else ""
            if following and _END_PUNCTUATION.fullmatch(following):
                continue  # "!!!": the break goes after the last one
            end = head_start + cursor
            if end == match.end():
                breaks.append((end, match.start("next_tok") if next_tok else end))
            elif _NEXT_LETTER.match(head, cursor)[1].isupper():
                # inside the chunk ("thought.--Mr. Knightley"): a break when a capital follows,
                # not in "to-night!--to-night!"; no whitespace to skip
                breaks.append((end, end))
        return breaks


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def _sample(texts: Iterable[str], max_chars: int) -> list[str]:
    """The texts with the smallest sha256 whose lengths add up to at most ``max_chars`` (a text
    longer than that is cut at whitespace first), in hash order: the same sample whatever the
    order of ``texts``, in memory bounded by ``max_chars``."""
    heap: list[tuple[bytes, str]] = []  # max-heap on the hash via inverted bytes
    total = 0
    for text in texts:
        text = text.strip()
        if not text:
            continue
        if len(text) > max_chars:
            cut = text.rfind(" ", 0, max_chars + 1)
            text = text[: cut if cut > 0 else max_chars]
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        heapq.heappush(heap, (bytes(255 - b for b in digest), text))
        total += len(text)
        while total > max_chars:
            _, dropped = heapq.heappop(heap)
            total -= len(dropped)
    return [text for _, text in sorted(heap, reverse=True)]


def train_punkt_parameters(
    texts: Iterable[str],
    max_chars: int = DEFAULT_TRAINING_CHARS,
    ignore_abbrev_penalty: bool = True,
) -> PunktParameters:
    """Unsupervised Punkt training (``nltk.tokenize.punkt.PunktTrainer``) on a deterministic sample
    of ``texts`` of at most ``max_chars`` characters.

    ``texts`` are paragraphs or documents; the sample is the texts with the smallest sha256 that
    fit (``_sample``), so it does not depend on their order. Texts are joined with blank lines
    and fed in batches of ``TRAINING_BATCH_CHARS``.

    ``ignore_abbrev_penalty`` (PunktTrainer.IGNORE_ABBREV_PENALTY, NLTK's default is False):
    NLTK's penalty divides a candidate's score by ``len ** (occurrences without a period)``, so a
    corpus that mixes British "Mr Smith" with "Mr. Smith" never learns "mr" — and then learns
    the surnames after "Mr." as frequent sentence starters, splitting every "Mr. Darcy". On the
    Gutenberg test books the penalty-free training adds only "mr" and "mrs" to the abbreviations.
    """
    trainer = PunktTrainer(lang_vars=QuoteAwareLanguageVars())
    trainer.IGNORE_ABBREV_PENALTY = ignore_abbrev_penalty
    batch: list[str] = []
    size = 0
    for text in _sample(texts, max_chars):
        batch.append(text)
        size += len(text) + 2
        if size >= TRAINING_BATCH_CHARS:
            trainer.train("\n\n".join(batch), finalize=False)
            batch, size = [], 0
    if batch:
        trainer.train("\n\n".join(batch), finalize=False)
    trainer.finalize_training()
    return trainer.get_params()


# ---------------------------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------------------------


def split_overlong(sentence: str, max_chars: int) -> list[str]:
    """``sentence`` cut into pieces of at most ``max_chars`` characters: after the last ``;`` in
    the second half of the window, else at the last whitespace, else hard (``cut_overlong``)."""
    return cut_overlong(sentence, max_chars, prefer_semicolon=True)


class SentenceSplitter:
    """Splits paragraphs into one-line sentences with Punkt.

    Punkt runs with ``QuoteAwareLanguageVars`` and the candidate-by-candidate decision of
    ``_Tokenizer``; no sentence ends after one of ``titles`` (lowercase, without the period;
    pass ``()`` for plain Punkt decisions).

    Picklable (Beam ships it to workers): it holds ``PunktTables``, ``max_chars`` and
    ``titles``; the NLTK tokenizer is built on first use and never pickled.
    """

    def __init__(
        self,
        params: PunktParameters | PunktTables,
        max_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
        titles: Iterable[str] = TITLES,
    ) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be positive, not {max_chars}")
        self.tables = (
            params if isinstance(params, PunktTables) else PunktTables.from_parameters(params)
        )
        self.max_chars = max_chars
        self.titles = frozenset(titles)
        self._tokenizer: PunktSentenceTokenizer | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"tables": self.tables, "max_chars": self.max_chars, "titles": self.titles}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.tables = state["tables"]  # type: ignore[assignment]
        self.max_chars = state["max_chars"]  # type: ignore[assignment]
        self.titles = state["titles"]  # type: ignore[assignment]
        self._tokenizer = None

    def _get_tokenizer(self) -> PunktSentenceTokenizer:
        if self._tokenizer is None:
            tokenizer = _Tokenizer(
                self.tables.to_parameters(), lang_vars=QuoteAwareLanguageVars(), token_cls=_Token
            )
            tokenizer.titles = self.titles
            self._tokenizer = tokenizer
        return self._tokenizer

    def split_counted(self, paragraph: str, normalized: bool = False) -> tuple[list[str], int]:
        """``(sentences, overlong)``: the sentences of ``paragraph``, each on one line (whitespace
        runs collapsed), none longer than ``max_chars``; ``overlong`` counts the sentences that
        were longer and had to be cut (``split_overlong``) — the caller counts them.

        ``normalized``: the paragraph is ``normalize_text``'s output, so a paragraph of one line
        is collapsed already and each sentence only loses a space at either end (the same
        sentences, without checking each one)."""
        sentences: list[str] = []
        overlong = 0
        collapsed = normalized and "\n" not in paragraph
        for sentence in self._get_tokenizer().tokenize(paragraph):
            # whitespace runs → one space, stripped
            sentence = sentence.strip(" ") if collapsed else collapse_whitespace(sentence)
            if not sentence:
                continue
            if len(sentence) > self.max_chars:
                overlong += 1
                sentences.extend(split_overlong(sentence, self.max_chars))
            else:
                sentences.append(sentence)
        return sentences, overlong

    def split(self, paragraph: str) -> list[str]:
        """The sentences of ``paragraph`` (see ``split_counted``, which also says how many were
        cut for length)."""
        return self.split_counted(paragraph)[0]
