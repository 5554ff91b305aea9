"""The layers hold: every module of ``transforms/`` and ``tokenizer/`` imports with Beam,
TensorFlow and Keras unavailable, and every module of ``shards/`` with Beam unavailable (it reads
files through ``shards.files``; the trainer uses it without Beam). Each check runs in a fresh
interpreter whose meta-path finder refuses the blocked packages, so an import anywhere below the
module (even a lazy one at import time) fails the test with the module's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_CHECK = r"""
import importlib, importlib.abc, json, os, sys

BLOCKED = set(sys.argv[1].split(","))


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"layer violation: {name} imported")
        return None


sys.meta_path.insert(0, Refuse())
failures = {}
for module in sys.argv[2:]:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 (the report names it)
        failures[module] = f"{type(e).__name__}: {e}"
then = os.environ.get("LAYER_CHECK_THEN")
if then and not failures:
    try:
        exec(then)
    except Exception as e:  # noqa: BLE001
        failures["LAYER_CHECK_THEN"] = f"{type(e).__name__}: {e}"
leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"failures": failures, "leaked": leaked}))
"""


def modules_of(package: str) -> list[str]:
    return sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / package).rglob("*.py")
    )


def imports_without(blocked: tuple[str, ...], modules: list[str], then: str = "") -> dict:
    """Imports ``modules`` (then runs the code ``then``) in a fresh interpreter that refuses
    ``blocked``: the failures by module, and any blocked module that got imported anyway."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LAYER_CHECK_THEN": then}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, ",".join(blocked), *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("packages", "blocked"),
    [
        (("transforms", "tokenizer"), ("apache_beam", "tensorflow", "keras")),
        (("shards",), ("apache_beam",)),
    ],
)
def test_lower_layers_import_without_the_frameworks(packages, blocked):
    modules = [m for p in packages for m in modules_of(p)]
    assert len(modules) > 5
    result = imports_without(blocked, modules)
    assert result == {"failures": {}, "leaked": []}


def test_the_check_catches_a_violation():
    result = imports_without(("apache_beam",), ["pipeline.files.artifacts"])
    assert "layer violation: apache_beam" in result["failures"]["pipeline.files.artifacts"]
    result = imports_without(
        ("apache_beam",),
        [],
        then="from pipeline.files.shard_files import BeamFiles\nBeamFiles().exists('x')",
    )
    assert "layer violation: apache_beam" in result["failures"]["LAYER_CHECK_THEN"]


def test_shards_resolve_and_scan_local_shards_without_beam(tmp_path):
    """Not only imports: the resolver, the shard set and a scan run with Beam refused."""
    from tests.shards.test_resolve import write_shard

    write_shard(tmp_path / "s.tfrecord", 3)
    script = (
        "from shards.shard_set import open_shard_set\n"
        "from shards.validation import validate_shard_set\n"
        f"s = open_shard_set([{str(tmp_path)!r}])\n"
        "r = validate_shard_set(s, whole_set=True, workers=1)\n"
        "assert r.valid and r.records == 3, r\n"
    )
    result = imports_without(("apache_beam",), [], then=script)
    assert result == {"failures": {}, "leaked": []}


PIPELINE_ORDER = ("runtime", "files", "steps", "jobs", "commands")
"""``pipeline/``'s subpackages, lowest first: a module imports only from its own subpackage or a
lower one (so no two subpackages import each other), and top-level modules (``cli``) from any."""


def pipeline_imports() -> list[tuple[str, str, list[str]]]:
    """(importing module, imported ``pipeline.*`` module, names imported) for every import
    statement of ``pipeline/``, lazy ones inside functions included."""
    import ast

    found = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "pipeline":
                    for alias in node.names:
                        found.append((module, f"pipeline.{alias.name}", []))
                elif node.module.startswith("pipeline."):
                    found.append((module, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                found.extend(
                    (module, a.name, []) for a in node.names if a.name.startswith("pipeline.")
                )
    return found


def subpackage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in PIPELINE_ORDER else None


def test_pipeline_subpackages_import_downward_only():
    imports = pipeline_imports()
    assert len(imports) > 50
    upward = []
    for importer, imported, _ in imports:
        mine, theirs = subpackage_of(importer), subpackage_of(imported)
        if mine is None or theirs is None or importer == "pipeline.moved":
            continue
        if PIPELINE_ORDER.index(theirs) > PIPELINE_ORDER.index(mine):
            upward.append(f"{importer} imports {imported}")
    assert upward == []


def test_no_module_reaches_into_another_subpackages_private_names():
    private = [
        f"{importer} imports {imported}.{name}"
        for importer, imported, names in pipeline_imports()
        for name in names
        if name.startswith("_") and subpackage_of(importer) != subpackage_of(imported)
    ]
    assert private == []


def test_the_old_flat_module_paths_still_import_as_the_new_modules():
    import importlib

    from pipeline.moved import OLD_TO_NEW

    for old, new in OLD_TO_NEW.items():
        assert importlib.import_module(f"pipeline.{old}") is importlib.import_module(
            f"pipeline.{new}"
        ), old
    assert sorted(p.name for p in (ROOT / "pipeline").glob("*.py")) == [
        "__init__.py",
        "cli.py",
        "moved.py",
    ]
