"""Busy intervals (the union of each GPU's operations) and the idle gaps between them."""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import GRAPH, KERNEL, MEMCPY


def busy_intervals(ops: pl.DataFrame) -> pl.DataFrame:
    """Maximal intervals in which at least one operation ran, per GPU, with the operation that
    began each one (first_*) and the one that ended last in it (last_*).

    ops is sorted per GPU by start (load.load_ops), so an interval's rows are consecutive: it
    begins at a row that starts after every earlier row of its GPU ended. Its last_* row is the
    first to reach its end: the latest row, up to its last one, that ends after every earlier
    row. (Rows picked by position, not a group_by: that one took 0.25 GB more at 2 M kernels.)"""
    before = pl.col("end").cum_max().shift(1).over("device_id")  # null at each GPU's first row
    o = ops.select(
        "device_id",
        "start",
        "end",
        row=pl.int_range(pl.len(), dtype=pl.Int64),
        begins=before.is_null() | (pl.col("start") > before),
        top=before.is_null() | (pl.col("end") > before),
    )
    o = o.with_columns(
        # (the next row begins an interval, or there is none)
        ends=pl.col("begins").shift(-1, fill_value=True),
        top_row=pl.when("top").then("row").forward_fill(),
    )
    first = o.filter("begins").select("device_id", "start", "row")
    last = o.filter("ends").select("row", "top_row")
    firsts = ops.select(
        first_idx="idx",
        first_correlation_id="corr",
        first_pid="pid",
        first_kind="kind",
        first_name_id="name_id",
        first_direction="direction",
    )[first["row"]]
    lasts = ops.select("end", last_correlation_id="corr", last_pid="pid")[last["top_row"]]
    return pl.concat(
        [
            first.select("device_id", "start"),
            lasts.select("end"),
            pl.DataFrame({"ops": last["row"] - first["row"] + 1}).cast(pl.UInt32),
            firsts,
            lasts.drop("end"),
        ],
        how="horizontal",
    ).with_columns(duration=pl.col("end") - pl.col("start"))


def op_names(busy: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """first_name and first_kind as gpu_ops spells them."""
    names = busy.join(strings, left_on="first_name_id", right_on="id", how="left", maintain_order="left")
    return names.with_columns(
        first_name=pl.when(pl.col("first_kind") == KERNEL)
        .then(pl.col("value"))
        .when(pl.col("first_kind") == GRAPH)
        .then(pl.lit("graph ") + pl.col("first_name_id").cast(pl.String).fill_null("?"))
        .when(pl.col("first_kind") == MEMCPY)
        .then(pl.col("first_direction"))
        .otherwise(pl.lit("memset")),
        first_kind=pl.col("first_kind").replace_strict(
            {0: "kernel", 1: "graph", 2: "memcpy", 3: "memset"}, return_dtype=pl.String
        ),
    ).drop("value")


def gaps(busy: pl.DataFrame) -> pl.DataFrame:
    """The idle gaps between consecutive busy intervals of each GPU: [start, end), with the
    operation that ended each one (next_*) and the last one before it (prev_*)."""
    b = busy.select(
        "device_id",
        "end",
        "last_correlation_id",
        "last_pid",
        next_start=pl.col("start").shift(-1).over("device_id"),
        next_idx=pl.col("first_idx").shift(-1).over("device_id"),
        next_pid=pl.col("first_pid").shift(-1).over("device_id"),
        next_kind=pl.col("first_kind").shift(-1).over("device_id"),
        next_name=pl.col("first_name").shift(-1).over("device_id"),
    ).filter(pl.col("next_start").is_not_null())
    return b.select(
        "device_id",
        start=pl.col("end"),
        end=pl.col("next_start"),
        duration=pl.col("next_start") - pl.col("end"),
        pid=pl.col("next_pid"),
        next_idx="next_idx",
        next_op="next_name",
        next_kind="next_kind",
        prev_corr="last_correlation_id",
        prev_pid="last_pid",
    )


TO_HOST = (pl.col("kind") == MEMCPY) & pl.col("direction").is_in(["DtoH", "AtoH"])  # a copy to the host


def readbacks(ops: pl.DataFrame) -> pl.DataFrame:
    """The bytes of each device-to-host copy (device_id, pid, corr, readback_bytes)."""
    return ops.filter(TO_HOST).group_by("device_id", "pid", "corr").agg(readback_bytes=pl.col("bytes").max())


def round_trips(ops: pl.DataFrame, blocking: pl.DataFrame) -> pl.DataFrame:
    """When the host read a result (device_id, t, upload): a copy to the host ended, or a
    blocking call returned; upload: the call's GPU had last finished a copy to the GPU (the host
    waited for its own data: a step's inputs, or weights offloaded to the host)."""
    reads = ops.filter(TO_HOST).select("device_id", t="end", upload=pl.lit(False))
    up = (pl.col("kind") == MEMCPY) & (pl.col("direction") == "HtoD")
    # (each GPU's operations by end: the last one finished before a call returned)
    done = ops.lazy().select("device_id", u="end", upload=up.fill_null(False)).sort("u").collect()
    waits = (
        blocking.filter(pl.col("device_id").is_not_null())
        .select("device_id", t="end")
        .sort("t")
        .join_asof(done, left_on="t", right_on="u", by="device_id", strategy="backward", check_sortedness=False)
        .select("device_id", "t", upload=pl.col("upload").fill_null(False))
    )
    return pl.concat([waits, reads], how="vertical_relaxed")


def readback_bytes(gaps_: pl.DataFrame, readbacks_: pl.DataFrame) -> pl.DataFrame:
    """readback_bytes: the bytes of the device-to-host copy the GPU finished just before each
    gap (its last operation; readbacks() of the operations), else null."""
    return gaps_.join(
        readbacks_,
        left_on=["device_id", "prev_pid", "prev_corr"],
        right_on=["device_id", "pid", "corr"],
        how="left",
        nulls_equal=True,
    )


def running_busy(busy: pl.DataFrame) -> pl.DataFrame:
    """The busy intervals (device_id, start, end) with `before`, their GPU's busy time before
    each: what busy_between reads, made once for all its calls. Sorted by start."""
    return (
        busy.select("device_id", "start", "end")
        .sort(["device_id", "start"])
        .with_columns(before=(pl.col("end") - pl.col("start")).cum_sum().shift(1, fill_value=0).over("device_id"))
        .sort("start")
    )


def busy_between(windows: pl.DataFrame, busy: pl.DataFrame) -> pl.Series:
    """GPU busy time in each window [start, end) of windows (device_id, start, end), in the
    windows' order: a difference of two lookups in the running busy total (busy:
    running_busy())."""
    cum = busy.select("device_id", "before", b0="start", b1="end")

    def at(col: str) -> pl.Expr:
        return pl.col("before").fill_null(0) + (pl.min_horizontal(pl.col(col), "b1") - pl.col("b0")).clip(
            lower_bound=0
        ).fill_null(0)

    w = windows.with_columns(_row=pl.int_range(pl.len()))
    a = (
        w.sort("start")
        .join_asof(cum, left_on="start", right_on="b0", by="device_id", strategy="backward", check_sortedness=False)
        .with_columns(bs=at("start"))
    )
    a = (
        a.select("_row", "bs", "end", "device_id")
        .sort("end")
        .join_asof(cum, left_on="end", right_on="b0", by="device_id", strategy="backward", check_sortedness=False)
        .with_columns(be=at("end"))
    )
    return a.sort("_row").select((pl.col("be") - pl.col("bs")).alias("busy_ns"))["busy_ns"]
