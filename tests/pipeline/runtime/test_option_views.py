"""``pipeline.runtime.option_views``: one view per options object and class, reading and
writing the same options as Beam's own views, a new one when the object's options are replaced."""

from __future__ import annotations

import gc

from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
)

from pipeline.runtime import option_views


def test_views_are_remembered_and_share_the_options():
    option_views.install()
    options = PipelineOptions(["--direct_num_workers=3", "--runner=DirectRunner"])
    first = options.view_as(DirectOptions)
    assert options.view_as(DirectOptions) is first
    assert first.direct_num_workers == 3
    first.direct_running_mode = "in_memory"
    assert options.view_as(DirectOptions).direct_running_mode == "in_memory"
    original = PipelineOptions.view_as.__wrapped__
    assert original(options, DirectOptions).direct_running_mode == "in_memory"  # Beam's own view
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    assert options.view_as(TypeOptions) is not first
    other = PipelineOptions(["--direct_num_workers=5"])
    assert other.view_as(DirectOptions) is not first
    assert other.view_as(DirectOptions).direct_num_workers == 5
    assert options.view_as(DirectOptions).direct_num_workers == 3


def test_a_replaced_options_dict_gets_a_new_view_and_a_dead_object_is_forgotten():
    option_views.install()
    options = PipelineOptions(["--direct_num_workers=2"])
    view = options.view_as(DirectOptions)
    options._all_options = dict(options._all_options, direct_num_workers=7)
    again = options.view_as(DirectOptions)
    assert again is not view and again.direct_num_workers == 7
    key = (id(options), DirectOptions)
    assert key in option_views._views
    del options, view, again
    gc.collect()
    assert key not in option_views._views
