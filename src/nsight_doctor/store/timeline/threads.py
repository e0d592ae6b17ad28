"""What a CPU thread was doing during a window of time, from its CUDA calls.

A thread is, at any moment, inside one of its (outermost) CUDA calls or between two of them.
Inside a call, its state is the call's (load.STATES: launching, blocked, loading code, ...);
between two calls it is running code outside CUDA, "gap_short" when that stretch is shorter
than load.SHORT_CPU_NS (a framework's overhead between the calls that issue work) and
"gap_long" otherwise. `integrate` gives, for many windows at once, the time each window spent
in each state.
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import SHORT_CPU_NS, STATE, STATES

FAR = 1 << 62  # "no previous or next call": a stretch that runs out of the window


def integrate(windows: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Time per state of each window on its thread.

    windows: wid, pid, tid, w0, w1 (w0 <= w1); calls: load.flatten's frame. Returns wid,
    state and ns, one row per state with time in it, and, for each window, its calls' time by
    name (top_api needs it) as rows with state null and name_id set."""
    w = windows.filter(pl.col("w1") > pl.col("w0"))
    if w.height == 0 or calls.height == 0:
        return _all_long(w).with_columns(name_id=pl.lit(None, pl.Int64))
    by_end = calls.select("pid", "tid", "end", first="ci").sort("end")
    by_start = calls.select("pid", "tid", "start", last="ci").sort("start")
    w = (
        w.sort("w0")
        .join_asof(
            by_end,
            left_on="w0",
            right_on="end",
            by=["pid", "tid"],
            strategy="forward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop("end")
    )
    w = (
        w.sort("w1")
        .join_asof(
            by_start,
            left_on="w1",
            right_on="start",
            by=["pid", "tid"],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop("start")
    )
    # No call of the thread ends after the window begins: it ran code outside CUDA throughout
    # (after its last call, or on a thread with no calls).
    outside = w.filter(pl.col("first").is_null())
    w = w.filter(pl.col("first").is_not_null())
    w = w.with_columns(last=pl.max_horizontal("first", pl.col("last").fill_null(pl.col("first"))))
    x = w.select("wid", "w0", "w1", "last", ci=pl.int_ranges("first", pl.col("last") + 1)).explode("ci")
    c = calls.select("start", "end", "state", "name_id", "before", "after")
    x = pl.concat([x, c[x["ci"]]], how="horizontal")

    def clip(a: pl.Expr, b: pl.Expr) -> pl.Expr:
        return (pl.min_horizontal(b, pl.col("w1")) - pl.max_horizontal(a, pl.col("w0"))).clip(lower_bound=0)

    def stretch(length: pl.Expr) -> pl.Expr:
        return (
            pl.when(length.is_not_null() & (length < SHORT_CPU_NS))
            .then(STATE["gap_short"])
            .otherwise(STATE["gap_long"])
        )

    parts = pl.concat(
        [
            x.select("wid", state="state", ns=clip(pl.col("start"), pl.col("end")), name_id="name_id"),
            x.select(
                "wid",
                state=stretch(pl.col("before")),
                ns=clip(pl.col("start") - pl.col("before").fill_null(FAR), pl.col("start")),
                name_id=pl.lit(None, pl.Int64),
            ),
            x.filter(pl.col("ci") == pl.col("last")).select(
                "wid",
                state=stretch(pl.col("after")),
                ns=clip(pl.col("end"), pl.col("end") + pl.col("after").fill_null(FAR)),
                name_id=pl.lit(None, pl.Int64),
            ),
        ],
        how="vertical_relaxed",
    ).filter(pl.col("ns") > 0)
    states = parts.group_by("wid", "state").agg(ns=pl.col("ns").sum())
    names = (
        parts.filter(pl.col("name_id").is_not_null())
        .group_by("wid", "name_id")
        .agg(ns=pl.col("ns").sum())
        .with_columns(state=pl.lit(None, pl.UInt8))
    )
    return pl.concat(
        [
            _all_long(outside).with_columns(name_id=pl.lit(None, pl.Int64)),
            states.with_columns(name_id=pl.lit(None, pl.Int64)),
            names,
        ],
        how="diagonal_relaxed",
    ).select("wid", "state", "name_id", "ns")


def _all_long(w: pl.DataFrame) -> pl.DataFrame:
    return w.select("wid", state=pl.lit(STATE["gap_long"], pl.UInt8), ns=pl.col("w1") - pl.col("w0"))


def by_state(parts: pl.DataFrame) -> pl.DataFrame:
    """integrate's rows as one row per window, one column per state (ns; 0 when none)."""
    s = parts.filter(pl.col("state").is_not_null())
    wide = s.pivot(on="state", index="wid", values="ns", aggregate_function="sum")
    cols = []
    for name, i in STATE.items():
        cols.append((pl.col(str(i)) if str(i) in wide.columns else pl.lit(0)).fill_null(0).cast(pl.Int64).alias(name))
    return wide.select("wid", *cols)


__all__ = ["STATES", "by_state", "integrate"]
