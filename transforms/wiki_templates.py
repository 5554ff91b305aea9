"""The inline templates of Wikipedia's running prose, and how each renders as text.

``INLINE_TEMPLATES`` maps a template's normalized name (lower case, ``_`` as a space, no
``Template:`` prefix) to a renderer: a function of the template's rendered positional and named
parameter values (one line each) that returns the text the template shows, so no hole is left
where it stood: ``{{convert|5|km|mi}}`` → ``5 km``, ``{{lang|fr|texte}}`` → ``texte``,
``{{birth date|1950|5|17}}`` → ``May 17, 1950``. ``INLINE_PREFIXES`` covers the families that go
by prefix (``lang-xx``, ``IPA-xx``, ``script/xx``). Parsing the page and finding the templates is
``transforms.wikitext``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Renderer = Callable[[list[str], dict[str, str]], str]

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


# --- inline templates -------------------------------------------------------------------------


def _first(pos: list[str], named: dict[str, str]) -> str:
    return pos[0] if pos else ""


def _second(pos: list[str], named: dict[str, str]) -> str:
    return pos[1] if len(pos) > 1 else ""


def _last(pos: list[str], named: dict[str, str]) -> str:
    return pos[-1] if pos else ""


def _joined(separator: str) -> Callable[[list[str], dict[str, str]], str]:
    return lambda pos, named: separator.join(p for p in pos if p)


def _constant(value: str) -> Callable[[list[str], dict[str, str]], str]:
    return lambda pos, named: value


def _as_int(value: str) -> int | None:
    value = value.strip()
    return int(value) if value.isdigit() else None


def format_date(year: str, month: str = "", day: str = "", *, day_first: bool = False) -> str:
    """``1950, 5, 17`` → ``May 17, 1950`` (``day_first``: ``17 May 1950``); partial dates too."""
    m, d = _as_int(month), _as_int(day)
    if m is None or not 1 <= m <= 12:
        return " ".join(p for p in (year, month, day) if p.strip())
    name = _MONTHS[m - 1]
    if d is None:
        return f"{name} {year}".strip()
    return f"{d} {name} {year}".strip() if day_first else f"{name} {d}, {year}".strip()


def _day_first(named: dict[str, str]) -> bool:
    return named.get("df", "").lower() in {"y", "yes", "1", "true", "on"}


def _date(pos: list[str], named: dict[str, str]) -> str:
    if len(pos) >= 2 and all(_as_int(p) is not None for p in pos[:2]):
        return format_date(*pos[:3], day_first=_day_first(named))
    return _first(pos, named)


def _as_of(pos: list[str], named: dict[str, str]) -> str:
    lead = "as of" if named.get("lc", "").lower() in {"y", "yes"} else "As of"
    if not pos:
        return lead
    return f"{lead} {format_date(*pos[:3], day_first=_day_first(named))}"


def _circa(pos: list[str], named: dict[str, str]) -> str:
    return f"c. {pos[0]}" if pos else "c."


def _frac(pos: list[str], named: dict[str, str]) -> str:
    if len(pos) == 1:
        return f"1/{pos[0]}"
    if len(pos) == 2:
        return f"{pos[0]}/{pos[1]}"
    if len(pos) >= 3:
        return f"{pos[0]} {pos[1]}/{pos[2]}"
    return ""


_RANGE_WORDS = {
    "-": "–",
    "–": "–",
    "to": " to ",
    "to(-)": " to ",
    "and": " and ",
    "and(-)": " and ",
    "or": " or ",
    "by": " by ",
    "x": " × ",
    "×": " × ",
    "+": " + ",
    "+/-": " ± ",
    "±": " ± ",
}
_UNIT_NAMES = {
    "sqmi": "sq mi",
    "sqkm": "km²",
    "km2": "km²",
    "m2": "m²",
    "sqft": "sq ft",
    "ft2": "sq ft",
    "cuft": "cu ft",
    "m3": "m³",
    "km/h": "km/h",
    "kph": "km/h",
    "mph": "mph",
    "c": "°C",
    "f": "°F",
    "k": "K",
}


def _unit(code: str) -> str:
    return _UNIT_NAMES.get(code.lower(), code)


def _is_number(value: str) -> bool:
    return bool(re.fullmatch(r"[-+−]?[\d,.]+(?:e\d+)?", value.strip()))


def _convert(pos: list[str], named: dict[str, str]) -> str:
    """``{{convert|5|km|mi}}`` → ``5 km``; ranges ``{{convert|3|to|5|km}}`` → ``3 to 5 km``;
    compound ``{{convert|6|ft|2|in}}`` → ``6 ft 2 in``. The converted value is not shown."""
    if not pos:
        return ""
    text = pos[0]
    rest = pos[1:]
    while len(rest) >= 2 and rest[0].lower() in _RANGE_WORDS and _is_number(rest[1]):
        text += _RANGE_WORDS[rest[0].lower()] + rest[1]
        rest = rest[2:]
    if rest and not _is_number(rest[0]):
        text += " " + _unit(rest[0])
        rest = rest[1:]
        while len(rest) >= 2 and _is_number(rest[0]) and not _is_number(rest[1]):
            text += f" {rest[0]} {_unit(rest[1])}"
            rest = rest[2:]
    return text


def _val(pos: list[str], named: dict[str, str]) -> str:
    unit = named.get("u") or named.get("ul") or ""
    return f"{_first(pos, named)} {unit}".strip()


def _height(pos: list[str], named: dict[str, str]) -> str:
    return " ".join(f"{named[u]} {u}" for u in ("m", "cm", "ft", "in") if named.get(u))


def _ordinal(pos: list[str], named: dict[str, str]) -> str:
    n = _as_int(pos[0]) if pos else None
    if n is None:
        return _first(pos, named)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _interlanguage_link(pos: list[str], named: dict[str, str]) -> str:
    return named.get("lt") or _first(pos, named)


def _ship(prefix: str) -> Callable[[list[str], dict[str, str]], str]:
    return lambda pos, named: f"{prefix} {pos[0]}" if pos else prefix


def _currency(symbol: str) -> Callable[[list[str], dict[str, str]], str]:
    return lambda pos, named: f"{symbol}{pos[0]}" if pos else symbol


#: Templates that render running text, by normalized name (lower case, ``_`` as space).
INLINE_TEMPLATES: dict[str, Callable[[list[str], dict[str, str]], str]] = {
    "convert": _convert,
    "cvt": _convert,
    "lang": _second,
    "langx": _second,
    "rtl-lang": _second,
    "script": _second,
    "transl": _last,
    "transliteration": _last,
    "nihongo": _first,
    "nq": _first,
    "ipa": _first,
    "nowrap": _first,
    "nobr": _first,
    "nobreak": _first,
    "small": _first,
    "smaller": _first,
    "big": _first,
    "larger": _first,
    "midsize": _first,
    "resize": _last,
    "sic": _joined(""),
    "not a typo": _joined(""),
    "proper name": _first,
    "mvar": _first,
    "math": _first,
    "em": _first,
    "strong": _first,
    "var": _first,
    "code": _first,
    "sc": _first,
    "smallcaps": _first,
    "small caps": _first,
    "noitalic": _first,
    "nobold": _first,
    "vanchor": _first,
    "visible anchor": _first,
    "unicode": _first,
    "abbr": _first,
    "abbrlink": _first,
    "linktext": _joined(""),
    "chem": _joined(""),
    "angbr": lambda pos, named: f"⟨{_first(pos, named)}⟩",
    "respell": _joined("-"),
    "ill": _interlanguage_link,
    "interlanguage link": _interlanguage_link,
    "interlanguage link multi": _interlanguage_link,
    "sortname": _joined(" "),
    "flag": _first,
    "flagcountry": _first,
    "flagu": _first,
    "date": _date,
    "birth date": _date,
    "birth date and age": _date,
    "bda": _date,
    "death date": _date,
    "death date and age": _date,
    "dda": _date,
    "start date": _date,
    "start date and age": _date,
    "end date": _date,
    "dts": _date,
    "birth year and age": _first,
    "death year and age": _first,
    "as of": _as_of,
    "circa": _circa,
    "c.": _circa,
    "frac": _frac,
    "fraction": _frac,
    "sfrac": _frac,
    "val": _val,
    "height": _height,
    "ordinal": _ordinal,
    "ship": _joined(" "),
    "hms": _ship("HMS"),
    "uss": _ship("USS"),
    "ss": _ship("SS"),
    "rms": _ship("RMS"),
    "hmas": _ship("HMAS"),
    "hmcs": _ship("HMCS"),
    "hmnzs": _ship("HMNZS"),
    "sms": _ship("SMS"),
    "usns": _ship("USNS"),
    "us$": _currency("US$"),
    "usd": _currency("US$"),
    "£": _currency("£"),
    "gbp": _currency("£"),
    "€": _currency("€"),
    "euro": _currency("€"),
    "nbsp": _constant(" "),
    "spaces": _constant(" "),
    "'": _constant("'"),
    "ndash": _constant("–"),
    "mdash": _constant("—"),
    "mdashb": _constant("—"),
    "snd": _constant(" – "),
    "spnd": _constant(" – "),
    "spaced ndash": _constant(" – "),
    "spaced en dash": _constant(" – "),
    "=": _constant("="),
    "middot": _constant("·"),
    "okina": _constant("ʻ"),
}
INLINE_PREFIXES: tuple[tuple[str, Callable[[list[str], dict[str, str]], str]], ...] = (
    ("lang-", _first),
    ("ipa-", _first),
    ("script/", _first),
)


def inline_renderer(name: str) -> Callable[[list[str], dict[str, str]], str] | None:
    """The renderer of the template with the normalized ``name`` (lower case, ``_`` as a space,
    no ``Template:`` prefix), or None when it is not an inline template."""
    render = INLINE_TEMPLATES.get(name)
    if render is None:
        render = next((r for p, r in INLINE_PREFIXES if name.startswith(p)), None)
    return render
