"""Beam's type-hint module without beartype until its first use
(``pipeline.runtime.deferred_beartype``, installed by ``pipeline.runtime.lean_imports``).

The checks that import Beam run in a new interpreter: the test process imported it long ago."""

from __future__ import annotations

import json
import sys
import textwrap
import typing

import pytest

from pipeline.runtime import deferred_beartype
from tests.pipeline.runtime.test_lean_imports import run_script

HINT_PAIRS = """[
    (bool, int), (str, int), (int, float), (list, typing.Sequence),
    (dict, typing.Mapping[str, int]), ("not a hint", int), (typing.List[int], list),
    (bytes, typing.Iterable), (type(None), int),
]"""
"""(sub, base) pairs for ``is_consistent_with``: plain classes (beartype's ``is_subhint``), one
that beartype refuses (``BeartypeDoorException``: False), and Beam's own constraints."""

PROBE = textwrap.dedent(
    """
    import json, sys, typing
    from pipeline.runtime.lean_imports import skip_unused_clients

    if sys.argv[1] == "lean":
        skip_unused_clients()
    import apache_beam
    from apache_beam.typehints.typehints import is_consistent_with

    report = {"after_beam": "beartype" in sys.modules}
    report["answers"] = [is_consistent_with(a, b) for a, b in HINT_PAIRS]
    import beartype
    from beartype.door import is_subhint
    from beartype.vale import Is  # a submodule the stand-in never had
    report["real_after_use"] = hasattr(beartype, "__version__") and callable(beartype.beartype)
    report["is_subhint"] = is_subhint(bool, int)
    print(json.dumps(report))
    """
).replace("HINT_PAIRS", " ".join(HINT_PAIRS.split()))


def _probe(tmp_path, mode: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    return json.loads(run_script(script, mode).stdout.splitlines()[-1])


def test_beam_imports_without_beartype_and_answers_as_with_it(tmp_path):
    lean, full = _probe(tmp_path, "lean"), _probe(tmp_path, "full")
    assert full["after_beam"] is True
    assert lean["after_beam"] is False  # the saving
    assert lean["answers"] == full["answers"]
    assert lean["answers"] == [True, False, True, True, True, False, True, False, False]
    assert lean["real_after_use"] and lean["is_subhint"]


def test_the_stand_in_raises_its_own_exception_for_what_beartype_refuses():
    pytest.importorskip("beartype")
    with pytest.raises(deferred_beartype.BeartypeDoorException) as raised:
        deferred_beartype.is_subhint("not a hint", int)
    from beartype.roar import BeartypeDoorException

    assert isinstance(raised.value.__cause__, BeartypeDoorException)
    assert deferred_beartype.is_subhint(bool, int) is True
    assert deferred_beartype.is_subhint(list[int], typing.Sequence[int]) is True


def test_stand_ins_leave_sys_modules_once_the_module_has_run(tmp_path):
    """The wrapped loader runs a module with the stand-ins present, then takes them out; a stand-in
    module's other attributes are the real module's."""
    module_file = tmp_path / "uses_beartype_probe.py"
    module_file.write_text(
        "import sys\n"
        "from beartype.door import is_subhint\n"
        "from beartype.roar import BeartypeDoorException\n"
        "import beartype\n"
        "SEEN = type(sys.modules['beartype']).__name__\n"
        "STAND_IN = beartype\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("uses_beartype_probe", module_file)
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] == "beartype"}
    try:
        spec.loader = deferred_beartype.ImportWithoutBeartype(spec.loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert module.SEEN == "_StandInModule"
        assert module.is_subhint is deferred_beartype.is_subhint
        assert module.BeartypeDoorException is deferred_beartype.BeartypeDoorException
        assert not any(  # the loader took them out
            getattr(sys.modules.get(n), "_bertprep_stand_in", False)
            for n in deferred_beartype.STAND_IN_NAMES
        )
        assert not any(n.split(".")[0] == "beartype" for n in sys.modules)  # nothing real yet
        assert isinstance(module.STAND_IN.__version__, str)  # asked of it: the real attribute
        assert "beartype" in sys.modules and sys.modules["beartype"] is not module.STAND_IN
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "beartype"]:
            del sys.modules[name]
        sys.modules.update(saved)
