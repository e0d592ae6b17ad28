"""Where the steps of an anchor-chosen GPU (steps.py) begin and end.

A step begins at the same place in each period between two occurrences of the anchor: where
the GPU waited longest for the host in total, after the host read a result where it does so
in every period (boundaries). The host's work between steps is charged to the step it ends.
The first step also takes the work just before it that is a request's own (lead_in): an
encoder, or the start of a prompt longer than a decode step, whose kernels run in few steps
(the first one's own, later requests' first steps).
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.steps import key_id

MANY_UPLOADS = 16  # waits for uploads per period beyond a step's inputs (boundaries)


def boundaries(seq: pl.DataFrame, occ: pl.DataFrame, choice: pl.DataFrame, trips: pl.DataFrame) -> pl.DataFrame:
    """The steps of anchor-chosen GPUs: one per occurrence of the anchor, tiling the run of
    them. A step begins at the same place in every period between two anchors: the operation,
    counted on from the previous anchor or back from the next one, before which the GPU waited
    longest in total over all periods. Where nine periods in ten hold a round trip to the host
    (a blocking call returned, a copy to the host ended), only the first operations after
    one are candidates: the host read a result, then issued the next step (not a wait for an
    upload where they come by the dozen: MANY_UPLOADS). The first step
    begins at that place counted back from the first anchor, or, when it is counted on from an
    anchor, after the GPU's longest wait within two median periods before the first one; the
    last ends where a next one would begin a median period on, or with the GPU's last
    operation before that."""
    a = occ.join(choice.select("device_id", kid=key_id(pl.col("anchor"))), on=["device_id", "kid"], how="semi")
    # Waits for uploads by the dozen in every period (between the first anchor and the last:
    # not a model's load) are a pass's own (layers offloaded to the host, each waiting for its
    # weights), not where the host issues the next step.
    span = a.group_by("device_id").agg(periods=pl.len() - 1, t0=pl.col("start").min(), t1=pl.col("start").max())
    many = (
        trips.join(span, on="device_id")
        .filter(pl.col("upload") & (pl.col("t") >= pl.col("t0")) & (pl.col("t") < pl.col("t1")))
        .group_by("device_id")
        .agg(uploads=pl.len(), periods=pl.col("periods").first())
        .filter(pl.col("uploads") >= MANY_UPLOADS * pl.col("periods"))
    )
    a = a.select("device_id", a_seq="seq").sort(["device_id", "a_seq"])
    trips = trips.filter(~(pl.col("upload") & pl.col("device_id").is_in(many["device_id"].implode())))
    a = a.with_columns(
        k=pl.int_range(1, pl.len() + 1).over("device_id"), nxt=pl.col("a_seq").shift(-1).over("device_id")
    )
    per = a.group_by("device_id").agg(
        med=pl.col("a_seq").diff().median().fill_null(1).cast(pl.Int64),
        n=pl.len(),
        first=pl.col("a_seq").min(),
        last=pl.col("a_seq").max(),
    )
    s = seq.join(per.select("device_id"), on="device_id", how="semi").select(
        "device_id", "seq", "start", "end", "pre_gap"
    )
    after = (
        trips.sort("t")
        .join_asof(
            s.select("device_id", "seq", s_start="start").sort("s_start"),
            left_on="t",
            right_on="s_start",
            by="device_id",
            strategy="forward",
            check_sortedness=False,
        )
        .filter(pl.col("seq").is_not_null())
        .select("device_id", "seq")
        .unique()
        .with_columns(after_trip=pl.lit(True))
    )
    # Each operation of a whole period (a_k, a_k+1]: its offsets from both ends.
    pd = (
        s.with_columns(prev=pl.col("seq") - 1)
        .sort("prev")
        .join_asof(
            a.sort("a_seq"),
            left_on="prev",
            right_on="a_seq",
            by="device_id",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("nxt").is_not_null())
        .join(after, on=["device_id", "seq"], how="left")
        .with_columns(
            fwd=pl.col("seq") - pl.col("a_seq"),
            back=pl.col("nxt") - pl.col("seq"),
            after_trip=pl.col("after_trip").fill_null(False),
        )
    )
    tripped = (
        pd.group_by("device_id", "k")
        .agg(hit=pl.col("after_trip").any())
        .group_by("device_id")
        .agg(share=pl.col("hit").mean())
    )
    pd = pd.join(tripped, on="device_id").filter((pl.col("share") < 0.9) | pl.col("after_trip"))
    score = pl.concat(
        [
            pd.group_by("device_id", "fwd")
            .agg(idle=pl.col("pre_gap").sum())
            .select("device_id", "idle", back=pl.lit(False), off="fwd"),
            pd.group_by("device_id", "back")
            .agg(idle=pl.col("pre_gap").sum())
            .select("device_id", "idle", back=pl.lit(True), off="back"),
        ]
    )
    # (ties: counted back from the anchor, nearest first)
    best = score.sort(["device_id", "idle", "back", "off"], descending=[False, True, True, False]).unique(
        "device_id", keep="first"
    )
    # One anchor: the step begins with it.
    per = per.join(best.select("device_id", "back", "off"), on="device_id", how="left").with_columns(
        back=pl.col("back").fill_null(True), off=pl.col("off").fill_null(0)
    )
    # Boundary b_k (k = 0..n) between anchors k and k + 1, a median period before the first
    # and after the last: step k runs from b_k-1 to b_k.
    ends = pl.concat(
        [
            a.select("device_id", "k", "a_seq", "nxt"),
            per.select("device_id", k=pl.lit(0, pl.Int64), a_seq=pl.col("first") - pl.col("med"), nxt="first"),
        ],
        how="vertical_relaxed",
    ).join(per, on="device_id")
    ends = ends.with_columns(nxt=pl.coalesce("nxt", pl.col("a_seq") + pl.col("med")))
    ends = ends.with_columns(
        b=pl.when(pl.col("back"))
        .then(pl.max_horizontal(pl.col("nxt") - pl.col("off"), pl.col("a_seq") + 1))
        .otherwise(pl.min_horizontal(pl.col("a_seq") + pl.col("off"), pl.col("nxt")))
        .clip(lower_bound=0)
    )
    # Counted on from an anchor, the first step has none before it: it begins after the GPU's
    # longest wait within two median periods before its anchor.
    b0 = (
        s.join(per.filter(~pl.col("back")).select("device_id", "first", "med"), on="device_id")
        .filter((pl.col("seq") >= pl.col("first") - 2 * pl.col("med")) & (pl.col("seq") <= pl.col("first")))
        .sort(["device_id", "pre_gap", "seq"], descending=[False, True, True])
        .unique("device_id", keep="first")
        .select("device_id", k=pl.lit(0, pl.Int64), b0="seq")
    )
    ends = ends.join(b0, on=["device_id", "k"], how="left").with_columns(b=pl.coalesce("b0", "b"))
    ops = s.select("device_id", b="seq", b_start="start")
    ends = ends.join(ops, on=["device_id", "b"], how="left")
    # Past the GPU's last operation: the end of its work.
    tail = s.join(ends.filter(pl.col("k") == pl.col("n") - 1).select("device_id", lo="b"), on="device_id")
    tail = tail.filter(pl.col("seq") >= pl.col("lo")).group_by("device_id").agg(tail_end=pl.col("end").max())
    ends = ends.join(tail, on="device_id", how="left").with_columns(t=pl.coalesce("b_start", "tail_end"))
    starts = ends.filter(pl.col("k") < pl.col("n")).select("device_id", k=pl.col("k") + 1, start="t")
    stops = ends.filter(pl.col("k") >= 1).select("device_id", "k", end="t")
    steps = starts.join(stops, on=["device_id", "k"])
    return steps.sort(["device_id", "k"]).select("device_id", step="k", start="start", end="end")


def lead_in(steps: pl.DataFrame, seq: pl.DataFrame) -> pl.DataFrame:
    """The anchor steps with each GPU's first step begun earlier, over the work just before it
    that is a request's own: the operations back from the first step up to a wait longer than
    a median step, when at least half of their time is in signatures (sig) that run in some of
    the steps but fewer than half of them (an encoder or a prompt, which the first step runs
    the rest of, or later requests run inside their first step). Work that recurs in every
    step (a capture begun mid-decode) or in none (start-up: weights, autotuning) stays before
    the first step."""
    if steps.height == 0:
        return steps
    per = steps.group_by("device_id").agg(
        s1=pl.col("start").min(), med=(pl.col("end") - pl.col("start")).median(), n=pl.len()
    )
    s1 = pl.col("device_id").replace_strict(per["device_id"], per["s1"], default=None)
    # The run of operations that ends at the first step, no wait in it longer than a median step.
    # (lazy: the operations before the first steps are few, and only their columns are copied)
    pre = (
        seq.lazy()
        .select("device_id", "start", "end", "sig")
        .filter(pl.col("start") < s1)
        .collect()
        .join(per, on="device_id")
        .sort("device_id", "start")
    )
    pre = pre.with_columns(
        wait_after=pl.coalesce(pl.col("start").shift(-1).over("device_id"), pl.col("s1"))
        - pl.col("end").cum_max().over("device_id")
    )
    # (after the last wait too long: none when the wait before the first step is one itself)
    cut = pre.group_by("device_id").agg(after=pl.col("start").filter(pl.col("wait_after") > pl.col("med")).max())
    run = pre.join(cut, on="device_id").filter(pl.col("after").is_null() | (pl.col("start") > pl.col("after")))
    # In how many steps each of the run's signatures runs.
    inside = (
        seq.lazy()
        .select("device_id", "start", "sig")
        .filter((pl.col("start") >= s1) & pl.col("sig").is_in(run["sig"].unique().implode()))
        .collect()
        .sort("start")
        .join_asof(
            steps.select("device_id", "step", s_start="start", s_end="end").sort("s_start"),
            left_on="start",
            right_on="s_start",
            by="device_id",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("start") < pl.col("s_end"))
        .group_by("device_id", "sig")
        .agg(in_steps=pl.col("step").n_unique())
    )
    run = run.join(inside, on=["device_id", "sig"], how="left").with_columns(
        ns=pl.col("end") - pl.col("start"), in_steps=pl.col("in_steps").fill_null(0)
    )
    own = (pl.col("in_steps") >= 1) & (pl.col("in_steps") < pl.col("n") / 2)
    begin = (
        run.group_by("device_id")
        .agg(begin=pl.col("start").min(), own_ns=pl.col("ns").filter(own).sum(), ns=pl.col("ns").sum())
        .filter((pl.col("ns") > 0) & (2 * pl.col("own_ns") >= pl.col("ns")))
        .select("device_id", "begin")
    )
    if begin.height == 0:
        return steps
    first = pl.col("step") == pl.col("step").min().over("device_id")
    out = steps.join(begin, on="device_id", how="left")
    out = out.with_columns(start=pl.when(first & pl.col("begin").is_not_null()).then("begin").otherwise("start"))
    return out.select(steps.columns)
