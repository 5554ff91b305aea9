"""bertprep's Beam option defaults (``pipeline.beam_options.make_pipeline_options``)."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import DirectOptions, TypeOptions

from pipeline.beam_options import UnsafeRunnerModeError, make_pipeline_options


def test_construction_type_check_is_off_unless_asked(monkeypatch):
    monkeypatch.delenv("BERTPREP_PIPELINE_TYPE_CHECK", raising=False)
    assert make_pipeline_options([]).view_as(TypeOptions).pipeline_type_check is False
    monkeypatch.setenv("BERTPREP_PIPELINE_TYPE_CHECK", "1")
    assert make_pipeline_options([]).view_as(TypeOptions).pipeline_type_check is True


def test_direct_runner_defaults_to_multi_processing_and_refuses_multi_threading():
    direct = make_pipeline_options([]).view_as(DirectOptions)
    assert direct.direct_running_mode == "multi_processing" and direct.direct_num_workers >= 1
    given = make_pipeline_options(["--direct_running_mode=in_memory"]).view_as(DirectOptions)
    assert given.direct_running_mode == "in_memory"
    with pytest.raises(UnsafeRunnerModeError, match="multi_threading is refused"):
        make_pipeline_options(["--direct_running_mode=multi_threading"])
