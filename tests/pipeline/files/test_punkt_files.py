"""Finding, reading and writing punkt_tab files (pipeline.files.punkt_files), and the tables' text
format (transforms.punkt_tables)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import nltk.data
import pytest
from nltk.tokenize.punkt import PunktParameters, PunktTokenizer

from pipeline.files.punkt_files import (
    load_punkt_parameters,
    load_punkt_parameters_from,
    load_punkt_tables,
    load_splitter,
    save_punkt_parameters,
)
from tests.conftest import require_corpora
from tests.punkt_fixtures import hand_params, write_tables
from transforms.punkt_tables import PUNKT_FILES, PunktTables
from transforms.sentences import DEFAULT_MAX_SENTENCE_CHARS

ROOT = Path(__file__).resolve().parents[3]


def nltk_data_dir() -> Path:
    return require_corpora("nltk_data")


def test_save_and_load_are_exact(tmp_path: Path):
    params = hand_params()
    save_punkt_parameters(params, tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == sorted(PUNKT_FILES)
    back = load_punkt_parameters_from(tmp_path / "model")
    assert PunktTables.from_parameters(back) == PunktTables.from_parameters(params)
    assert back.ortho_context == params.ortho_context  # the zero entry too


def test_saved_files_are_sorted_lf_terminated_and_stable(tmp_path: Path):
    save_punkt_parameters(hand_params(), tmp_path / "a")
    save_punkt_parameters(load_punkt_parameters_from(tmp_path / "a"), tmp_path / "b")
    for name in PUNKT_FILES:
        first = (tmp_path / "a" / name).read_bytes()
        assert first == (tmp_path / "b" / name).read_bytes()
        assert b"\r" not in first and first.endswith(b"\n")
    assert (tmp_path / "a" / "abbrev_types.txt").read_text() == "dr\ne.g\netc\ni.e\nmr\nmrs\nst\n"
    assert (tmp_path / "a" / "collocations.tab").read_text() == "##number##\tjanuary\ns\tbach\n"
    assert (tmp_path / "a" / "ortho_context.tab").read_text(encoding="utf-8") == (
        "darcy\t4\nthe\t42\nzero\t0\nélan\t3\n"
    )


def test_save_empty_parameters(tmp_path: Path):
    save_punkt_parameters(PunktParameters(), tmp_path)
    assert all((tmp_path / name).read_bytes() == b"" for name in PUNKT_FILES)
    back = load_punkt_parameters_from(tmp_path)
    assert PunktTables.from_parameters(back) == PunktTables((), (), (), ())


def test_save_refuses_words_the_format_cannot_hold(tmp_path: Path):
    params = PunktParameters()
    params.abbrev_types = {"bad\tword"}
    with pytest.raises(ValueError, match="cannot store"):
        save_punkt_parameters(params, tmp_path)


def test_load_from_missing_or_malformed_files(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        load_punkt_parameters_from(tmp_path)
    write_tables(tmp_path, hand_params())
    (tmp_path / "ortho_context.tab").write_text("word\tnot-a-number\n")
    with pytest.raises(ValueError, match="not an integer"):
        load_punkt_parameters_from(tmp_path)
    (tmp_path / "ortho_context.tab").write_text("word\t1\textra\n")
    with pytest.raises(ValueError, match="tab-separated"):
        load_punkt_parameters_from(tmp_path)


def test_load_reads_the_files_nltk_writes(tmp_path: Path):
    # NLTK's own format: no trailing newline, unsorted.
    (tmp_path / "abbrev_types.txt").write_text("mr\ndr")
    (tmp_path / "collocations.tab").write_text("s\tbach")
    (tmp_path / "sent_starters.txt").write_text("the")
    (tmp_path / "ortho_context.tab").write_text("the\t42\ndarcy\t4")
    back = load_punkt_parameters_from(tmp_path)
    assert back.abbrev_types == {"mr", "dr"}
    assert back.collocations == {("s", "bach")}
    assert back.sent_starters == {"the"}
    assert back.ortho_context == {"the": 42, "darcy": 4}


@pytest.fixture
def no_nltk_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setattr(nltk.data, "path", [])


def test_load_punkt_parameters_not_installed(tmp_path: Path, no_nltk_data: None):
    assert load_punkt_parameters("english", paths=[tmp_path]) is None


def test_load_punkt_parameters_honours_nltk_data_set_after_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nltk_data: None
):
    write_tables(tmp_path / "tokenizers" / "punkt_tab" / "english", hand_params())
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    params = load_punkt_parameters()
    assert params is not None
    assert PunktTables.from_parameters(params) == PunktTables.from_parameters(hand_params())
    assert load_punkt_parameters("german") is None


def test_load_punkt_parameters_from_paths(tmp_path: Path, no_nltk_data: None):
    write_tables(tmp_path / "tokenizers" / "punkt_tab" / "english", hand_params())
    params = load_punkt_parameters(paths=[tmp_path])
    assert params is not None and params.abbrev_types == hand_params().abbrev_types


def test_load_punkt_parameters_never_unpickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nltk_data: None
):
    write_tables(tmp_path / "tokenizers" / "punkt_tab" / "english", hand_params())
    (tmp_path / "tokenizers" / "punkt").mkdir()
    (tmp_path / "tokenizers" / "punkt" / "english.pickle").write_bytes(b"not a pickle")

    def refuse(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)
    params = load_punkt_parameters(paths=[tmp_path])
    assert params is not None and params.abbrev_types == hand_params().abbrev_types


@pytest.mark.parametrize("name", ["", "english/../german", "en glish", "../x"])
def test_load_punkt_parameters_refuses_bad_language_names(name: str):
    with pytest.raises(ValueError):
        load_punkt_parameters(name)


def test_load_splitter_missing(tmp_path: Path, no_nltk_data: None):
    with pytest.raises(LookupError, match="NLTK_DATA"):
        load_splitter("english", paths=[tmp_path])


def test_load_splitter_max_chars(tmp_path: Path, no_nltk_data: None):
    """The default when not given; a zero or negative length is refused, not taken as the
    default."""
    write_tables(tmp_path / "tokenizers" / "punkt_tab" / "english", hand_params())
    assert load_splitter(paths=[tmp_path]).max_chars == DEFAULT_MAX_SENTENCE_CHARS
    assert load_splitter(paths=[tmp_path], max_chars=7).max_chars == 7
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_chars must be positive"):
            load_splitter(paths=[tmp_path], max_chars=bad)


def test_shared_punkt_tab_matches_nltks_own_loader(monkeypatch: pytest.MonkeyPatch):
    directory = nltk_data_dir()
    params = load_punkt_parameters(paths=[directory])
    assert params is not None
    monkeypatch.setattr(nltk.data, "path", [str(directory)])
    reference = PunktTokenizer("english")._params  # NLTK's tab loader, no pickle either
    assert PunktTables.from_parameters(params) == PunktTables.from_parameters(reference)
    assert {"mr", "mrs", "dr", "st", "jan", "a.m", "p.m"} <= params.abbrev_types


# ---------------------------------------------------------------------------------------------
# The search without NLTK's import, and NLTK's own search where it must decide
# ---------------------------------------------------------------------------------------------


def test_finding_the_shared_tables_needs_no_nltk_import():
    code = (
        "import sys; from pipeline.files.punkt_files import load_punkt_tables; "
        f"t = load_punkt_tables('english', [{str(nltk_data_dir())!r}]); "
        "assert t is not None and 'mr' in t.abbrev_types, t; "
        "assert not [m for m in sys.modules if m == 'nltk' or m.startswith('nltk.')], 'nltk'"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NLTK_DATA", None)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_the_fast_search_finds_what_nltk_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nltk_data: None
):
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "tokenizers").mkdir(parents=True)  # no punkt_tab: NLTK goes on to the next
    other = hand_params()
    other.abbrev_types = {"only", "here"}
    write_tables(second / "tokenizers" / "punkt_tab" / "english", other)
    write_tables(tmp_path / "third" / "tokenizers" / "punkt_tab" / "english", hand_params())
    monkeypatch.setenv("NLTK_DATA", os.pathsep.join([str(tmp_path / "third")]))
    paths = [tmp_path / "missing", first, second]
    found = nltk.data.find(
        "tokenizers/punkt_tab/english/", paths=[*map(str, paths), str(tmp_path / "third")]
    )
    assert Path(found.path) == second / "tokenizers" / "punkt_tab" / "english"
    assert load_punkt_tables(paths=paths) == PunktTables.from_parameters(other)
    assert load_punkt_tables(paths=[first]) == PunktTables.from_parameters(hand_params())


def test_a_directory_others_may_write_is_left_to_nltk(tmp_path: Path, no_nltk_data: None):
    english = write_tables(tmp_path / "tokenizers" / "punkt_tab" / "english", hand_params())
    english.chmod(0o775)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = load_punkt_tables(paths=[tmp_path])
        try:
            nltk.data.find("tokenizers/punkt_tab/english/", paths=[str(tmp_path)])
            nltk_verdict = "found"
        except LookupError:
            nltk_verdict = "refused"
    assert (tables is not None) == (nltk_verdict == "found")  # NLTK's verdict, either way
    if nltk_verdict == "refused":
        assert any("writable" in str(w.message) for w in caught)
