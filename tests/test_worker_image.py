"""The Dataflow worker image: the Dockerfile copies exactly setup.py's packages, and bertprep
installed from exactly the files the Dockerfile copies runs every DoFn of every job.

No Docker engine here: the image's files are installed into a fresh virtual environment (the
pinned dependencies come from the project's environment, on the path after it), and the whole
``bertprep run`` on the embedded sample runs there in multi-process mode, so every DoFn is
unpickled and run in a worker process that sees only the installed files. TensorFlow is blocked,
as on the image, which installs no TensorFlow.
"""

from __future__ import annotations

import ast
import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def setup_packages() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["PACKAGES"]:
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py defines no PACKAGES list")


def dockerfile_copies() -> list[str]:
    """The build-context sources of every COPY instruction, in order."""
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY":
            sources += [w for w in words[1:-1] if not w.startswith("--")]
    return sources


def test_the_dockerfile_copies_exactly_the_packages_setup_py_installs():
    copied = dockerfile_copies()
    directories = [s for s in copied if (ROOT / s).is_dir()]
    assert sorted(directories) == sorted(setup_packages())
    assert "setup.py" in copied
    for name in setup_packages():
        assert (ROOT / name / "__init__.py").exists(), name


@pytest.mark.slow
def test_an_install_of_the_image_files_alone_runs_every_job(tmp_path):
    context = tmp_path / "image"
    for source in dockerfile_copies():
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            context.mkdir(exist_ok=True)
            shutil.copy(src, context / source)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            target,
            str(context),
        ],
        check=True,
        capture_output=True,
    )
    blocker = tmp_path / "blocked"
    (blocker / "tensorflow").mkdir(parents=True)
    (blocker / "tensorflow" / "__init__.py").write_text(
        "raise ImportError('TensorFlow is not installed on the worker image')\n"
    )
    dependencies = site.getsitepackages()[0]  # the pinned dependencies; .pth files not applied
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{blocker}:{dependencies}",
        "HOME": str(tmp_path),
    }
    where = subprocess.run(
        [str(python), "-c", "import pipeline, shards; print(pipeline.__file__, shards.__file__)"],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert str(ROOT) not in where and target in where
    out = tmp_path / "out"
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pipeline.cli",
            "run",
            "--config",
            str(ROOT / "configs" / "sample.yaml"),
            "--set",
            f"output={out}",
            "--direct_running_mode=multi_processing",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == ["ran"] * len(summary["stages"])
    assert list(out.glob("seq128/train/*.tfrecord")) and list(out.glob("seq512/eval/*.tfrecord"))
