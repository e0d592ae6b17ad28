"""GPUs that run the work of two or more processes at once (programs sharing a GPU): each GPU's
steps are counted in the work of the process with the most kernel time on it, and its step
source says which processes share it. Busy and idle time stay the GPU's: both programs' work.
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import GRAPH, KERNEL

SHARE = 0.1  # a process whose kernels take this share of a GPU's kernel time is one of its programs


def processes(ops: pl.DataFrame) -> pl.DataFrame:
    """Per GPU shared by two or more processes of SHARE or more of its kernel time: device_id,
    pid (the one with the most kernel time, whose work the steps are counted in) and text (the
    processes in words, for step_sources.processes)."""
    k = (
        ops.lazy()
        .filter(pl.col("kind").is_in([KERNEL, GRAPH]) & pl.col("pid").is_not_null())
        .group_by("device_id", "pid")
        .agg(ns=(pl.col("end") - pl.col("start")).sum())
        .collect()
    )
    k = k.with_columns(share=pl.col("ns") / pl.col("ns").sum().over("device_id")).filter(pl.col("share") >= SHARE)
    k = k.sort(["device_id", "ns", "pid"], descending=[False, True, False])
    words = pl.format("PID {} {}%", "pid", (100 * pl.col("share")).round(0).cast(pl.Int64))
    out = k.group_by("device_id", maintain_order=True).agg(
        n=pl.len(), pid=pl.col("pid").first(), listed=words.str.join(", ")
    )
    out = out.filter(pl.col("n") >= 2)
    return out.select(
        "device_id",
        "pid",
        text=pl.format(
            "{} processes share this GPU (of its kernel time: {}); the steps are PID {}'s",
            "n",
            "listed",
            "pid",
        ),
    )


def main_only(seq: pl.DataFrame, shared: pl.DataFrame) -> pl.DataFrame:
    """seq (steps.sequence) with a shared GPU's operations those of its main process alone,
    numbered again (the steps count positions in one program's work)."""
    if shared.height == 0:
        return seq
    main = dict(zip(shared["device_id"].to_list(), shared["pid"].to_list(), strict=True))
    owner = pl.col("device_id").replace_strict(main, default=None, return_dtype=pl.Int64)
    mine = seq.filter(owner.is_null() | (pl.col("pid") == owner))
    return mine.with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64).over("device_id"))


def described(sources: pl.DataFrame, shared: pl.DataFrame) -> pl.DataFrame:
    """step_sources with its processes column: a shared GPU's text, on its chosen row."""
    text = dict(zip(shared["device_id"].to_list(), shared["text"].to_list(), strict=True))
    owners = pl.col("device_id").replace_strict(text, default=None, return_dtype=pl.String)
    return sources.with_columns(processes=pl.when("chosen").then(owners))
