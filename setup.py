"""bertprep: BERT pretraining data preparation on Apache Beam.

Usable as Beam's ``--setup_file`` (Dataflow installs it on every worker) and by ``pip install``.
Runtime pins are exact so that workers and the launcher agree; ``requirements.lock`` pins the
whole environment (including test and training tools) for local use and CI.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup


def _version() -> str:
    """``PACKAGE_VERSION`` in pipeline/jobs/config.py: one place, also in every stage fingerprint."""
    text = (Path(__file__).resolve().parent / "pipeline" / "jobs" / "config.py").read_text()
    return re.search(r'^PACKAGE_VERSION = "([^"]+)"', text, re.M).group(1)


PACKAGES = ["pipeline", "transforms", "tokenizer", "trainer", "shards"]
"""The top-level packages: setup.py installs them, the Dockerfile copies exactly these."""

RUNTIME = [
    "apache-beam==2.77.0",
    "tokenizers==0.23.3",
    "nltk==3.10.4",
    "smart-open==9.0.2",
    "pyarrow==25.0.1",
    "protobuf>=6.33.5,<7",
    "numpy==2.4.6",
    # compiled kernels (numba): the instance phases (pairs, masks, record encoding) and
    # --compat reference, both replaying Python's random stream exactly
    "numba==0.68.1",
    "google-crc32c==1.9.0",
    "PyYAML==6.0.4",
    "mwparserfromhell==0.7.2",
    # .bz2 Wikipedia dumps decompressed ~1.35x faster than libbz2, on one thread
    # (pipeline/files/bzip2_stream.py)
    "indexed-bzip2==1.7.0",
    "charset-normalizer==3.5.3",
]

EXTRAS = {
    "gcp": ["apache-beam[gcp]==2.77.0"],
    # --runner DaskRunner: a dask.distributed cluster (pipeline/runtime/dask_runner.py)
    "dask": ["dask[distributed]==2026.8.0", "distributed==2026.8.0"],
    "train": [
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "keras-hub==0.32.0",
        "tensorflow-text==2.21.1",
    ],
    "test": [
        "pytest==9.2.0",
        "pytest-xdist==3.8.0",
        "ruff==0.17.6",
        "transformers==5.24.0",
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "keras-hub==0.32.0",
        "tensorflow-text==2.21.1",
        # the gs:// tests: an emulated bucket, Beam's GCS filesystem, offline Dataflow jobs
        "gcp-storage-emulator==2026.7.19",
        "google-cloud-storage==3.17.1",
        "google-apitools==0.5.31",
        "google-cloud-dataflow-client==0.13.0",
        "build==1.6.1",
        # the Dask tests start a real dask.distributed cluster
        "dask[distributed]==2026.8.0",
        "distributed==2026.8.0",
    ],
}

setup(
    name="bertprep",
    version=_version(),
    description="BERT pretraining data preparation: clean, vocab, instances, shards, trainer.",
    python_requires=">=3.11,<3.13",
    packages=find_packages(include=[f"{name}*" for name in PACKAGES]),
    package_data={"tokenizer": ["unicode_tables.json"]},
    install_requires=RUNTIME,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["bertprep=pipeline.cli:console_entry"]},
)
