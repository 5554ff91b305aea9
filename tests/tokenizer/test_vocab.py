"""tokenizer.vocab: parsing vocab.txt, its checks, and the derived tables."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from tokenizer.vocab import REQUIRED_SPECIAL_TOKENS, Vocab, VocabError

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"

BASIC = [
    "[PAD]",
    "[unused0]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "##s",
    "cat",
    "##at",
    "!",
]


def _vocab(tokens: list[str]) -> Vocab:
    return Vocab.from_bytes(("\n".join(tokens) + "\n").encode("utf-8"))


def test_parses_tokens_ids_and_digest() -> None:
    data = ("\n".join(BASIC) + "\n").encode("utf-8")
    vocab = Vocab.from_bytes(data)
    assert vocab.tokens == tuple(BASIC)
    assert len(vocab) == len(BASIC)
    assert vocab.sha256 == hashlib.sha256(data).hexdigest()
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
        0,
        2,
        3,
        4,
        5,
    )
    assert vocab.id_of("cat") == 8


def test_line_endings_and_blank_lines() -> None:
    vocab = Vocab.from_bytes(b"[PAD]\r\n[UNK]\r\n\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nx \r\n\r\n\r\n")
    # a blank line inside keeps its id (ids are line numbers); trailing blank lines are dropped
    assert vocab.tokens == ("[PAD]", "[UNK]", "", "[CLS]", "[SEP]", "[MASK]", "x")
    assert vocab.id_of("x") == 6


def test_duplicate_token_keeps_first_id() -> None:
    vocab = _vocab([*BASIC, "cat"])
    assert vocab.id_of("cat") == 8
    assert len(vocab) == len(BASIC) + 1


@pytest.mark.parametrize("missing", REQUIRED_SPECIAL_TOKENS[1:])
def test_missing_special_token_is_named(missing: str) -> None:
    with pytest.raises(VocabError) as err:
        _vocab([t for t in BASIC if t != missing])
    # "vocab lacks required special token(s) [MASK]; a BERT vocab needs [PAD], ..."
    assert str(err.value).startswith(f"vocab lacks required special token(s) {missing};")


def test_several_missing_special_tokens_are_all_named() -> None:
    with pytest.raises(VocabError) as err:
        _vocab(["[PAD]", "[UNK]", "the"])
    assert str(err.value).startswith("vocab lacks required special token(s) [CLS], [SEP], [MASK];")


def test_pad_must_be_id_zero() -> None:
    with pytest.raises(VocabError, match=r"\[PAD\] must have id 0.*found id 1"):
        _vocab(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"])


@pytest.mark.parametrize("data", [b"", b"\n", b"\n\n \n"])
def test_empty_vocab(data: bytes) -> None:
    with pytest.raises(VocabError, match="vocab is empty"):
        Vocab.from_bytes(data)


def test_invalid_utf8() -> None:
    with pytest.raises(VocabError, match="not valid UTF-8"):
        Vocab.from_bytes(b"[PAD]\n\xff\n")


def test_vocab_error_is_value_error() -> None:
    assert issubclass(VocabError, ValueError)


def test_replacement_ids_exclude_bracketed_and_blank_tokens() -> None:
    vocab = _vocab([*BASIC, "", "[x]", "[", "]", "[a]b", "##[", "ok"])
    ids = vocab.replacement_ids()
    assert ids.dtype == np.int32
    assert [vocab.tokens[i] for i in ids] == [
        "the", "##s", "cat", "##at", "!", "[", "]", "[a]b", "##[", "ok",
    ]  # fmt: skip
    everything = vocab.replacement_ids(include_special=True)
    assert everything.dtype == np.int32
    assert everything.tolist() == list(range(len(vocab)))


def test_replacement_ids_need_an_ordinary_token() -> None:
    vocab = _vocab(list(REQUIRED_SPECIAL_TOKENS) + ["[unused0]"])
    with pytest.raises(VocabError, match="no ordinary tokens"):
        vocab.replacement_ids()
    assert len(vocab.replacement_ids(include_special=True)) == 6


def test_continuation_mask() -> None:
    vocab = _vocab([*BASIC, "#", "#x", "##", "a##"])
    mask = vocab.continuation_mask()
    assert mask.dtype == np.bool_
    assert mask.shape == (len(vocab),)
    assert [t for t, m in zip(vocab.tokens, mask, strict=True) if m] == ["##s", "##at", "##"]


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(BASIC) + "\n", encoding="utf-8")
    assert Vocab.from_file(str(path)) == _vocab(BASIC)


@pytest.mark.parametrize("name", ["vocab.txt.gz", "vocab.TXT.BZ2"])
def test_from_file_decompresses_by_extension(tmp_path: Path, name: str) -> None:
    import bz2
    import gzip

    compress = gzip.compress if name.endswith(".gz") else bz2.compress
    path = tmp_path / name
    path.write_bytes(compress(("\n".join(BASIC) + "\n").encode()))
    assert Vocab.from_file(str(path)) == _vocab(BASIC)


def test_from_file_reads_a_file_url_and_a_home_relative_path(tmp_path, monkeypatch) -> None:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(BASIC) + "\n", encoding="utf-8")
    assert Vocab.from_file(path.as_uri()) == _vocab(BASIC)
    assert Vocab.from_file(path) == _vocab(BASIC)  # a pathlib.Path too
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Vocab.from_file("~/vocab.txt") == _vocab(BASIC)


@pytest.mark.parametrize(
    ("name", "size", "sha256"),
    [
        (
            "bert-base-uncased-vocab.txt",
            30522,
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
        (
            "bert-base-cased-vocab.txt",
            28996,
            "eeaa9875b23b04b4c54ef759d03db9d1ba1554838f8fb26c5d96fa551df93d02",
        ),
    ],
)
def test_google_vocabularies(name: str, size: int, sha256: str) -> None:
    path = CORPORA / "vocab" / name
    if not path.is_file():
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{path} is required in CI")
        pytest.skip(f"{path} not available")
    vocab = Vocab.from_file(str(path))
    assert (len(vocab), vocab.sha256) == (size, sha256)
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
        0,
        100,
        101,
        102,
        103,
    )
    assert len(set(vocab.tokens)) == size
    replacement = set(vocab.replacement_ids().tolist())
    assert not replacement & {0, 1, 100, 101, 102, 103}
    assert vocab.continuation_mask()[vocab.id_of("##s")]


def test_pickles_without_its_id_table_and_unpickles_equal(tmp_path, monkeypatch):
    """Beam pickles (and bz2-compresses) a DoFn's vocab for every bundle processor: the id table
    is rebuilt on load instead of carried, and a repeated token keeps its first id."""
    import pickle

    from tokenizer import vocab as module

    monkeypatch.setattr(module, "_pickle_by_path", False)  # as for a runner on other machines
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "a", "##c"]))
    vocab = Vocab.from_file(str(path))
    data = pickle.dumps(vocab, protocol=5)
    back = pickle.loads(data)
    assert back == vocab and back.token_to_id == vocab.token_to_id
    assert back.id_of("a") == 5 and back.mask_id == 4
    google = Vocab.from_file(str(CORPORA / "vocab" / "bert-base-uncased-vocab.txt"))
    carried = len(pickle.dumps((google.tokens, google.sha256, google.token_to_id), protocol=5))
    assert len(pickle.dumps(google, protocol=5)) < 0.6 * carried
    assert pickle.loads(pickle.dumps(google)).token_to_id == google.token_to_id


def test_the_same_bytes_are_parsed_once_and_other_bytes_anew() -> None:
    data = ("\n".join(BASIC) + "\n").encode("utf-8")
    first = Vocab.from_bytes(data)
    assert Vocab.from_bytes(bytes(data)) is first
    other = Vocab.from_bytes(data + b"extra\n")
    assert other is not first and other.tokens == (*first.tokens, "extra")
    with pytest.raises(VocabError):  # a failed parse is not remembered as anything
        Vocab.from_bytes(b"[PAD]\n")
    with pytest.raises(VocabError):
        Vocab.from_bytes(b"[PAD]\n")
    for i in range(8):  # the memo stays small
        Vocab.from_bytes(data + f"w{i}\n".encode())
    from tokenizer import vocab as module

    assert len(module._PARSED) <= module._PARSED_LIMIT


def test_threads_loading_the_same_new_bytes_share_one_vocab() -> None:
    """Bundles run on several threads of a worker: those that load the same vocab at once get
    one object, and the memo stays within its limit."""
    import concurrent.futures

    from tokenizer import vocab as module

    for round_ in range(20):
        data = ("\n".join(BASIC) + f"\nthread{round_}\n").encode("utf-8")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            loaded = list(pool.map(Vocab.from_bytes, [data] * 16))
        assert all(v is loaded[0] for v in loaded)
        assert len(module._PARSED) <= module._PARSED_LIMIT


UNPICKLE = """
import pickle, sys
from tokenizer.vocab import VocabError
try:
    vocab = pickle.loads(sys.stdin.buffer.read())
    print(len(vocab), vocab.id_of("cat"), vocab.sha256)
except VocabError as e:
    print("VocabError", e)
"""


def _unpickled_elsewhere(data: bytes) -> str:
    """What a new process (a worker that has parsed no vocab) makes of the pickle ``data``."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", UNPICKLE],
        input=data,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
        check=True,
    )
    return done.stdout.decode().strip()


@pytest.fixture
def vocab_by_path(monkeypatch):
    """``tokenizer.vocab`` with ``pickle_by_path`` on and a path memo of the test's own (its files
    are not remembered after it)."""
    from tokenizer import vocab as module

    monkeypatch.setattr(module, "_pickle_by_path", True)
    monkeypatch.setattr(module, "_LOCAL_FILES", {})
    return module


def test_a_local_file_pickles_as_its_path_for_local_workers(tmp_path, monkeypatch, vocab_by_path):
    """``pickle_by_path``: a vocab read from a plain local file pickles as its path and digest;
    a process that has parsed it gets its own object back, a new one reads the file, and a file
    changed since is an error, not another vocabulary. Vocabs not read from a local file, and
    every vocab without the switch, pickle their tokens."""
    import pickle

    module = vocab_by_path
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(BASIC) + "\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.txt").symlink_to(path)
    vocab = Vocab.from_file("link.txt")  # relative, a link: pickled as the real absolute path
    path = Path(os.path.realpath(path))
    data = pickle.dumps(vocab, protocol=5)
    assert b"cat" not in data and str(path).encode() in data and len(data) < 400
    assert pickle.loads(data) is vocab
    assert _unpickled_elsewhere(data) == f"{len(BASIC)} 8 {vocab.sha256}"
    path.write_text("\n".join(BASIC) + "\nextra\n")
    assert _unpickled_elsewhere(data).startswith(
        f"VocabError vocab {path} changed while the job ran"
    )
    path.unlink()
    assert _unpickled_elsewhere(data).startswith(f"VocabError vocab {path} cannot be read again")

    from_bytes = Vocab.from_bytes(("\n".join(BASIC) + "\nbytes\n").encode())
    whole = pickle.dumps(from_bytes, protocol=5)
    assert b"cat" in whole
    assert _unpickled_elsewhere(whole).split()[:2] == [str(len(BASIC) + 1), "8"]
    monkeypatch.setattr(module, "_pickle_by_path", False)
    assert b"cat" in pickle.dumps(vocab, protocol=5)


def test_a_vocab_read_from_a_pipe_pickles_its_tokens(tmp_path, vocab_by_path):
    """A worker cannot read a pipe (``--vocab <(gsutil cat ...)``) again: only regular files
    are pickled as their path."""
    import pickle
    import threading

    module = vocab_by_path
    fifo = tmp_path / "vocab.fifo"
    os.mkfifo(fifo)
    content = ("\n".join(BASIC) + "\npiped\n").encode()
    writer = threading.Thread(target=fifo.write_bytes, args=(content,))
    writer.start()
    vocab = Vocab.from_file(str(fifo))
    writer.join()
    assert b"piped" in pickle.dumps(vocab, protocol=5) and not module._LOCAL_FILES
