"""GPU work projected onto the program's NVTX ranges (the nvtx_gpu_t table).

An operation belongs to every range open on the thread (push/pop ranges) or in the process
(start/end ranges) that issued it, when its API call began: at each nesting depth of that
scope, the range that began last before the call, if it has not ended. Ranges of one depth in
one scope follow one another (nvtx_ranges_t numbers the depths so), so one backward as-of
search per depth finds it. (In SQL this was an ASOF join with a partition per scope and depth:
one partition, run by one thread, for a program with one launching thread.)
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import packed

PUSH_POP = "push_pop"


def gpu_per_range(ops: pl.DataFrame, calls: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """range_id, device_id, gpu_ops, gpu_time, gpu_start, gpu_end: the operations issued in
    each range, per GPU.

    ops: device_id, start, end, pid, corr; calls: every API call (nested ones too) with pid,
    tid, start, corr: an operation is issued by each call of its process with its correlation
    id; ranges: range_id, kind, pid, scope_tid, depth, start, end (nvtx_ranges_t)."""
    out = pl.Schema(
        {
            "range_id": pl.Int64(),
            "device_id": ops.schema["device_id"],
            "gpu_ops": pl.Int64(),
            "gpu_time": pl.Int64(),
            "gpu_start": pl.Int64(),
            "gpu_end": pl.Int64(),
        }
    )
    if ranges.height == 0 or ops.height == 0:
        return pl.DataFrame(schema=out)
    # (nulls match nothing, as in SQL; the join is on the two ids packed into one number where
    # they fit: half the time of a join on both)
    known = pl.col("pid").is_not_null() & pl.col("corr").is_not_null()
    o = ops.select("device_id", "start", "end", "pid", "corr").filter(known)
    c = calls.select("pid", "corr", "tid", t="start").filter(known)
    keys = packed([o, c], ["pid", "corr"])
    if keys:
        launches = o.drop("corr").with_columns(key=keys[0]).join(c.select("tid", "t", key=keys[1]), on="key")
    else:
        launches = o.join(c, on=["pid", "corr"])
    launches = launches.select("device_id", "start", "end", "pid", "tid", "t").sort("t")
    r = ranges.select("kind", "pid", "scope_tid", "depth", "range_id", r0="start", r1="end").sort("r0")
    per_level = []
    # (one search per kind and depth, each summed at once: a range has one of each, and
    # searching all depths in one join copied the launches once per depth, 500 MB for a
    # moment at 2 M kernels)
    for (kind, _), level in sorted(r.partition_by("kind", "depth", as_dict=True).items()):
        # Push/pop ranges are the launching thread's; start/end ranges its process's (scope 0).
        scope = pl.col("tid") if kind == PUSH_POP else pl.lit(0, pl.Int64)
        m = launches.with_columns(scope_tid=scope.cast(level.schema["scope_tid"])).join_asof(
            level.drop("kind", "depth"),
            left_on="t",
            right_on="r0",
            by=["pid", "scope_tid"],
            strategy="backward",
            check_sortedness=False,
        )
        per_level.append(
            m.filter(pl.col("t") <= pl.col("r1"))
            .group_by("range_id", "device_id")
            .agg(
                gpu_ops=pl.len().cast(pl.Int64),
                gpu_time=(pl.col("end") - pl.col("start")).sum(),
                gpu_start=pl.col("start").min(),
                gpu_end=pl.col("end").max(),
            )
        )
        del m
    return pl.concat(per_level).sort("range_id", "device_id").cast(out)
