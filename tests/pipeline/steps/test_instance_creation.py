"""The instance-creation tasks: their weights and the largest-first order the workers get them in."""

from __future__ import annotations

import numpy as np

from pipeline.steps.instance_creation import ExpandDupePassesFn, largest_first
from pipeline.steps.tokenize_documents import RefTable


def _table(sizes: list[int]) -> RefTable:
    n = len(sizes)
    return RefTable(
        ("tokens.bin",),
        tuple(f"doc{i}" for i in range(n)),
        np.zeros(n, dtype=np.int32),
        np.cumsum([0, *sizes[:-1]]).astype(np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.ones(n, dtype=np.int64),
    )


def test_each_dupe_pass_carries_the_buckets_token_bytes_times_the_jobs_weight(tmp_path):
    fn = ExpandDupePassesFn(3, str(tmp_path), weight_per_byte=1.5)
    fn.start_bundle()
    tasks = list(fn.process((7, [_table([100, 300]), _table([200])])))
    assert [(task, weight) for task, _, weight in tasks] == [((7, d), 900) for d in range(3)]
    assert {path for _, path, _ in tasks} == {str(tmp_path / "bucket-000007.refs")}


def test_tasks_are_dealt_largest_first_in_a_fixed_order():
    tasks = [
        (1, ((0, 0), "a", 10)),
        (0, ((2, 1), "b", 30)),
        (0, ((2, 0), "b", 30)),
        (2, ((5, 0), "c", 20)),
        (0, ((1, 0), "d", 30)),
    ]
    ordered = largest_first(list(reversed(tasks)))
    assert ordered == largest_first(tasks)
    assert [(job, task[0]) for job, task in ordered] == [
        (0, (1, 0)),
        (0, (2, 0)),
        (0, (2, 1)),
        (2, (5, 0)),
        (1, (0, 0)),
    ]
