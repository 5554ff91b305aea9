"""Packages whose ``__init__`` runs on the first name asked of them
(``pipeline.runtime.deferred_package_init``; NLTK's, through ``pipeline.runtime.lean_imports``)."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import textwrap

import pytest

from pipeline.runtime.deferred_package_init import DeferredInitLoader, init_pending
from tests.pipeline.runtime.test_lean_imports import run_script

PACKAGE = "deferred_init_probe"


class _Finder:
    """Loads ``PACKAGE`` (only) through ``DeferredInitLoader``."""

    def __init__(self, root) -> None:
        self.root = str(root)

    def find_spec(self, name, path=None, target=None):
        if name != PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [self.root])
        spec.loader = DeferredInitLoader(spec.loader)
        return spec


@pytest.fixture
def package(tmp_path):
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text(
        "import sys\n"
        "sys.modules['deferred_init_log'].append('init')\n"
        "from deferred_init_probe.helper import VALUE\n"
        "__all__ = ['greet', 'VALUE']\n"
        "def greet():\n"
        "    return 'hello'\n"
    )
    (root / "helper.py").write_text("VALUE = 42\n")
    (root / "sub.py").write_text("from deferred_init_probe import helper\nANSWER = helper.VALUE\n")
    log = type(sys)("deferred_init_log")
    log_list: list[str] = []
    sys.modules["deferred_init_log"] = log_list  # type: ignore[assignment]
    finder = _Finder(tmp_path)
    sys.meta_path.insert(0, finder)
    try:
        yield log_list
    finally:
        sys.meta_path.remove(finder)
        del sys.modules["deferred_init_log"]
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]
        del log


def test_submodules_import_without_running_the_package_init(package):
    from deferred_init_probe import sub  # noqa: PLC0415

    assert sub.ANSWER == 42  # ``from package import helper``: the submodule, imported
    parent = sys.modules[PACKAGE]
    assert package == [] and init_pending(parent)


def test_a_name_of_the_package_runs_its_init_once(package):
    import deferred_init_probe.sub  # noqa: F401, PLC0415

    parent = sys.modules[PACKAGE]
    assert parent.greet() == "hello"
    assert package == ["init"] and not init_pending(parent)
    assert parent.VALUE == 42 and parent.__all__ == ["greet", "VALUE"]
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = parent.missing
    assert package == ["init"]


def test_star_import_and_dunder_names_run_the_init(package):
    namespace: dict = {}
    exec(f"from {PACKAGE} import *", namespace)
    assert namespace["greet"]() == "hello" and namespace["VALUE"] == 42
    assert package == ["init"]


PROBE = textwrap.dedent(
    """
    import json, sys
    from pipeline.runtime.lean_imports import skip_unused_clients

    skip_unused_clients()
    from transforms.sentences import SentenceSplitter
    from pipeline.files.punkt_files import load_punkt_tables_from
    import nltk

    report = {"pending": "_bertprep_pending" in vars(nltk), "loaded": len(
        [m for m in sys.modules if m.startswith("nltk")])}
    splitter = SentenceSplitter(load_punkt_tables_from(sys.argv[1]), 2000)
    text = "Dr. Smith went to Washington, D.C. on Jan. 5. He arrived at 3 p.m. It rained."
    report["sentences"] = list(splitter.split(text))
    report["version"] = nltk.__version__
    report["full"] = len([m for m in sys.modules if m.startswith("nltk")])
    print(json.dumps(report))
    """
)


def test_the_sentence_splitter_loads_punkt_without_the_rest_of_nltk(tmp_path):
    """In a new interpreter with the lean imports: NLTK's own ``__init__`` waits; splitting
    gives what it gives with every module of NLTK imported (``nltk.__version__`` asked later)."""
    import nltk  # noqa: PLC0415  (this process: the real package, fully imported)

    from pipeline.files.punkt_files import save_punkt_parameters  # noqa: PLC0415
    from transforms.sentences import (  # noqa: PLC0415
        PunktTables,
        SentenceSplitter,
        train_punkt_parameters,
    )

    sample = ["Dr. Smith met Mr. Jones at 5 p.m. today.", "They spoke of D.C. and more."] * 40
    tables = PunktTables.from_parameters(train_punkt_parameters(sample))
    save_punkt_parameters(tables, tmp_path / "punkt")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    report = json.loads(run_script(script, str(tmp_path / "punkt")).stdout.splitlines()[-1])
    assert report["pending"] is True
    assert report["loaded"] < 40 < report["full"]
    assert report["version"] == nltk.__version__
    text = "Dr. Smith went to Washington, D.C. on Jan. 5. He arrived at 3 p.m. It rained."
    assert report["sentences"] == list(SentenceSplitter(tables, 2000).split(text))
