"""The runner bertprep uses for Beam's DirectRunner: Beam's portable FnApiRunner, always.

Beam 2.77's ``DirectRunner`` first hands every pipeline it considers supported to the Prism
runner, a Go binary it downloads from GitHub on first use: offline, that attempt fails after
translating the whole pipeline (0.3-1.9 s per pipeline measured here, five pipelines per
``bertprep run``); online, the job silently runs on Prism instead, whose modes and worker
processes are not the ones bertprep is tested with. ``FnApiDirectRunner`` goes straight to the
runner the DirectRunner falls back to here, with the same options (``--direct_running_mode``,
``--direct_num_workers``), so where a job runs does not depend on the network.
"""

from __future__ import annotations

from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner

RUNNER = f"{__name__}.FnApiDirectRunner"
"""The ``--runner`` value ``pipeline.runtime.beam_options`` gives a job that asked for the DirectRunner."""


class FnApiDirectRunner(SwitchingDirectRunner):
    """Beam's DirectRunner without its Prism attempt: every pipeline runs on the FnApiRunner."""

    def run_pipeline(self, pipeline, options):
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        )
        return fn_runner.FnApiRunner(provision_info=info).run_pipeline(pipeline, options)
