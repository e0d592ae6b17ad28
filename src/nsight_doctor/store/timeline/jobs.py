"""Ranks of one job: the GPUs that run the same kernels over the same time (tensor, sequence or
data parallel ranks), which must tell the same steps and phases."""

from __future__ import annotations

import polars as pl


def job_groups(seq: pl.DataFrame) -> list[list[int]]:
    """GPUs that run the same kernels (Jaccard of their kernel names at least 0.5) over
    overlapping time (at least half the shorter activity span)."""
    per = seq.group_by("device_id").agg(
        names=pl.col("name_id").drop_nulls().unique(), t0=pl.col("start").min(), t1=pl.col("end").max()
    )
    rows = per.sort("device_id").iter_rows(named=True)
    devs = [(r["device_id"], set(r["names"]), r["t0"], r["t1"]) for r in rows]
    parent = {d: d for d, *_ in devs}

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for i, (a, na, a0, a1) in enumerate(devs):
        for b, nb, b0, b1 in devs[i + 1 :]:
            jac = len(na & nb) / max(len(na | nb), 1)
            overlap = min(a1, b1) - max(a0, b0)
            if jac >= 0.5 and overlap >= 0.5 * min(a1 - a0, b1 - b0):
                parent[find(b)] = find(a)
    groups: dict[int, list[int]] = {}
    for d, *_ in devs:
        groups.setdefault(find(d), []).append(d)
    return list(groups.values())


def leaders(jobs: list[list[int]], steps: pl.DataFrame) -> dict[int, int]:
    """The ranks of one job in lockstep (as many steps each) that take their steps' kinds from
    another rank, its leader: the rank whose NVTX ranges name the kinds, else the lowest
    device id. (Step i is then the same forward pass on every rank.)"""
    counts = dict(steps.group_by("device_id").len().iter_rows())
    hinted = set(steps.filter(pl.col("kind_hint").is_not_null())["device_id"].unique().to_list())
    out = {}
    for devices in jobs:
        ranks = sorted(d for d in devices if d in counts)
        if len(ranks) < 2 or len({counts[d] for d in ranks}) > 1:
            continue
        leader = min([d for d in ranks if d in hinted] or ranks)
        out.update({d: leader for d in ranks if d != leader})
    return out


def leaders_kinds(kinds: pl.DataFrame, leaders: dict[int, int]) -> pl.DataFrame:
    """Each step of a led rank (leaders) of the kind of its leader's step of the same number,
    where the leader has it (not a warm-up step)."""
    if not leaders or kinds.height == 0:
        return kinds
    lead = pl.col("device_id").replace_strict(leaders, default=None, return_dtype=pl.Int64)
    ref = kinds.select(leader=pl.col("device_id").cast(pl.Int64), step="step", lead_kind="kind")
    return (
        kinds.with_columns(leader=lead)
        .join(ref, on=["leader", "step"], how="left", maintain_order="left")
        .with_columns(kind=pl.coalesce("lead_kind", "kind"))
        .drop("leader", "lead_kind")
    )
