"""Input expansion: names (and so document ids) relative to the inputs' common directory, the
same for a corpus on local disk, in another directory or in a bucket."""

from __future__ import annotations

import pytest

from pipeline.files.input_files import NoInputFilesError, _common_dir, expand_inputs


@pytest.mark.parametrize(
    ("paths", "common"),
    [
        (["gs://b/books/x.txt", "gs://b/books/y.txt"], "gs://b/books"),
        (["/data/books/x.txt", "/data/books/y.txt"], "/data/books"),
        (["gs://b/in/wiki/a.xml"], "gs://b/in/wiki"),
        (["/data/a/x.txt", "/data/b/y.txt"], "/data"),
        (["gs://b/books/x.txt", "gs://b/bookshelf/y.txt"], "gs://b"),
        (["/data/books/x.txt", "/data/bookshelf/y.txt"], "/data"),
        (["rel/x.txt", "rel/y.txt"], "rel"),
    ],
)
def test_common_dir_is_compared_component_by_component(paths, common):
    assert _common_dir(paths) == common


def test_names_do_not_depend_on_the_corpus_directory(tmp_path):
    names = []
    for where in (tmp_path / "one", tmp_path / "two" / "books"):
        (where / "sub").mkdir(parents=True)
        (where / "a.txt").write_text("a")
        (where / "sub" / "b.txt").write_text("b")
        names.append([f.name for f in expand_inputs([str(where / "*.txt"), str(where / "sub/*")])])
    assert names[0] == names[1] == ["a.txt", "sub/b.txt"]


def test_a_single_file_is_named_by_its_basename(tmp_path):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "x.txt").write_text("x")
    assert [f.name for f in expand_inputs([str(tmp_path / "books" / "x.txt")])] == ["x.txt"]


def test_a_pattern_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(NoInputFilesError, match="nothing.txt"):
        expand_inputs([str(tmp_path / "nothing.txt")])
