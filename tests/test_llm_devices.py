"""Which GPUs run a language model (store/timeline/llm.py), on small frames: the paths that
need a token lookup in the steps, and the ranks of one job sharing it."""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.llm import llm_devices
from nsight_doctor.store.timeline.load import KERNEL

NAMES = pl.DataFrame({"id": [1, 2, 3], "value": ["vectorized_gather_kernel", "flash_fwd_kernel", "nvjet_gemm"]})
CATEGORY = {1: "elementwise", 2: "attention", 3: "gemm"}


def frames(lookups_on: set[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two GPUs, 10 steps of 1 ms each: attention and a GEMM every step, and a token lookup
    (PyTorch's gather) at each step's start on the GPUs in lookups_on (a pipeline's first
    stage)."""
    rows = []
    for d in (0, 1):
        for i in range(10):
            t = i * 1_000_000
            if d in lookups_on:
                rows.append((d, t, t + 5_000, 1))
            rows += [(d, t + 10_000, t + 200_000, 2), (d, t + 300_000, t + 600_000, 3)]
    ops = pl.DataFrame(rows, schema=["device_id", "start", "end", "name_id"], orient="row").with_columns(
        kind=pl.lit(KERNEL), category=pl.col("name_id").replace_strict(CATEGORY, return_dtype=pl.String)
    )
    steps = pl.DataFrame(
        [(d, i * 1_000_000, (i + 1) * 1_000_000, None) for d in (0, 1) for i in range(10)],
        schema={"device_id": pl.Int64, "start": pl.Int64, "end": pl.Int64, "kind_hint": pl.String},
        orient="row",
    )
    return ops, steps


def test_steps_with_attention_and_gemms_are_an_llms_only_where_they_read_tokens():
    ops, steps = frames({0, 1})
    assert llm_devices(ops, steps, NAMES, "pytorch", None, set(), set()) == {0, 1}
    ops, steps = frames(set())
    assert llm_devices(ops, steps, NAMES, "pytorch", None, set(), set()) == set()


def test_the_ranks_of_one_job_read_tokens_where_one_of_them_does():
    ops, steps = frames({0})
    assert llm_devices(ops, steps, NAMES, "pytorch", None, set(), set()) == {0}
    assert llm_devices(ops, steps, NAMES, "pytorch", None, set(), set(), [[0, 1]]) == {0, 1}
    assert llm_devices(ops, steps, NAMES, "pytorch", None, set(), set(), [[0], [1]]) == {0}
