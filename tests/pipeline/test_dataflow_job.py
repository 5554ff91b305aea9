"""Every pipeline of ``bertprep run``, built as a Dataflow job description offline (no Dataflow
service; staging goes to an emulated bucket; fixture ``cloud``), and checked: runner v2, the SDK container Beam
picks is the Dockerfile's base image for the launcher's Beam and Python versions, the setup file
staged, pipeline options passed through, and every DoFn of each stage in its job.

The descriptions are written by ``tests.dataflow_description.DescribeThenRunLocally``, which also
runs each pipeline locally so the next stage is built on real artifacts.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import apache_beam
import pytest
from apache_beam.internal import pickler
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cloud")]  # one emulator run

ROOT = Path(__file__).resolve().parents[2]

STAGES = ["clean", "split", "vocab", "tokenize", "phase:seq128", "phase:seq512"]
# One pipeline per stage, except the phases: all of them (train and eval sides) run as one.
PIPELINE_DOFNS = [
    ("clean", {"StageDocumentsFn", "ExactDuplicatesFn", "BandCandidatesFn", "FinishChunkFn"}),
    ("split", {"SplitFileFn"}),
    ("vocab", set()),
    ("tokenize", {"TokenizeFileFn"}),
    ("phases", {"BucketSlicesFn", "ExpandDupePassesFn", "CreateInstancesFn", "WriteShardFn"}),
]


def dockerfile_base_image() -> str:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM "):
            return line.split()[1]
    raise AssertionError("the Dockerfile has no FROM line")


def dofn_names(pipeline: beam_runner_api_pb2.Pipeline) -> set[str]:
    """Class names of every DoFn of the pipeline's ParDo transforms, and of the DoFns each
    ``PerJobFn`` runs."""
    names = set()
    for transform in pipeline.components.transforms.values():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        if payload.do_fn.urn != "beam:dofn:pickled_python_info:v1":
            continue
        fn = pickler.loads(payload.do_fn.payload)[0]
        names.add(type(fn).__name__)
        # A stage shared by several jobs runs each job's own DoFn (pipeline.runtime.per_job).
        names.update(type(inner).__name__ for inner in getattr(fn, "fns", {}).values())
    return names


@pytest.fixture(scope="module")
def described(cloud):
    """[(description JSON, pipeline proto)] for every pipeline of the local run, and its summary."""
    jobs = [(job, beam_runner_api_pb2.Pipeline.FromString(proto)) for job, proto in cloud.jobs]
    summary = json.loads((cloud.local_out / "run_summary.json").read_text())
    return jobs, summary


def test_one_job_per_pipeline_of_the_run(described):
    jobs, summary = described
    assert [s["name"] for s in summary["stages"]] == STAGES
    assert len(jobs) == len(PIPELINE_DOFNS)
    phases = [s for s in summary["stages"] if s["name"].startswith("phase:")]
    assert [s["shared_with"] for s in phases] == [["phase:seq512"], ["phase:seq128"]]


def test_jobs_use_runner_v2_and_pass_the_options_through(described):
    for job, _ in described[0]:
        options = job["environment"]["sdkPipelineOptions"]["options"]
        assert "use_runner_v2" in options["experiments"]
        assert options["max_num_workers"] == 7
        assert options["machine_type"] == "n2-highmem-4"
        assert options["project"] == "test-project" and options["region"] == "us-central1"
        assert options["setup_file"] == "./setup.py"
        staged = [p["name"] for p in job["environment"]["workerPools"][0]["packages"]]
        assert "workflow.tar.gz" in staged  # the sdist of --setup_file


def test_the_sdk_container_is_the_dockerfiles_base_image(described):
    base = dockerfile_base_image()
    python = re.escape(f"python{sys.version_info.major}.{sys.version_info.minor}")
    assert re.fullmatch(rf"apache/beam_{python}_sdk:{re.escape(apache_beam.__version__)}", base)
    for _, proto in described[0]:
        images = {
            beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image
            for env in proto.components.environments.values()
            if env.urn == common_urns.environments.DOCKER.urn
        }
        # Dataflow's mirror of the same SDK image (gcr.io/cloud-dataflow/v1beta3/...).
        assert {image.rsplit("/", 1)[-1] for image in images} == {base.rsplit("/", 1)[-1]}


def test_every_dofn_of_each_stage_is_in_its_job(described):
    for (name, expected), (_, proto) in zip(PIPELINE_DOFNS, described[0], strict=True):
        assert expected <= dofn_names(proto), name
