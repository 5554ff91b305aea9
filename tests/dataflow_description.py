"""A Beam runner for tests: writes each pipeline's Dataflow job description offline, then runs the
pipeline locally, so that a multi-stage job (``bertprep run``) can be described stage by stage
with every stage's inputs really there.

Use ``--runner=tests.dataflow_description.DescribeThenRunLocally`` with the Dataflow options
(``--project``, ``--region``, ``--temp_location gs://...``, ``--no_auth``,
``--sdk_location=container``, ``--setup_file``...) and ``BERTPREP_DESCRIBE_DIR`` naming the
directory for the descriptions (``NN.json``, one per pipeline, in run order). The description is
what DataflowRunner writes for ``--template_location``: no Dataflow service is called, but staging
goes to ``--temp_location``, so point the process at a GCS emulator.
"""

from __future__ import annotations

import os
from pathlib import Path

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.runner import PipelineRunner

DESCRIBE_DIR = "BERTPREP_DESCRIBE_DIR"


class DescribeThenRunLocally(PipelineRunner):
    """Runs the pipeline with the DirectRunner, then describes it with the DataflowRunner."""

    def run_pipeline(self, pipeline, options: PipelineOptions):
        result = SwitchingDirectRunner().run_pipeline(pipeline, options)
        result.wait_until_finish()
        directory = Path(os.environ[DESCRIBE_DIR])
        directory.mkdir(parents=True, exist_ok=True)
        index = len(list(directory.glob("*.json")))
        described = PipelineOptions.from_dictionary(
            {**options.get_all_options(drop_default=True), "runner": "DataflowRunner"}
        )
        described.view_as(GoogleCloudOptions).template_location = str(
            directory / f"{index:02d}.json"
        )
        from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

        DataflowRunner().run_pipeline(pipeline, described)
        return result
