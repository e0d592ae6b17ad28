"""What a CPU thread was doing during a window of time, from its CUDA calls.

A thread is, at any moment, inside one of its (outermost) CUDA calls or between two of them.
Inside a call, its state is the call's (load.STATES: launching, blocked, loading code, ...);
between two calls it is running code outside CUDA, "gap_short" when that stretch is shorter
than load.SHORT_CPU_NS (a framework's overhead between the calls that issue work) and
"gap_long" otherwise. `by_state` gives, for many windows at once (their `bounds`), the time
each window spent in each state; `by_name` the time in each call by name, for the windows that
need it.
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import SHORT_CPU_NS, STATE, STATES

FAR = 1 << 62  # "no previous or next call": a stretch that runs out of the window


class Lines:
    """Each thread's calls moved onto a line of their own, offset past the previous thread's,
    so that one binary search over all calls finds, for many (thread, time) pairs at once,
    where the time falls among that thread's calls, instead of a join per thread.

    calls is in thread order and its calls do not overlap, so both their starts and their ends
    rise within a thread, and so along the line. threads: each thread's rows of calls (lo to
    hi), its first call's start (t0), the span of its calls and where its line begins (base)."""

    def __init__(self, calls: pl.DataFrame):
        self.threads = (
            calls.group_by("pid", "tid", maintain_order=True)
            .agg(n=pl.len(), t0=pl.col("start").first(), t1=pl.col("end").max())
            .with_columns(hi=pl.col("n").cum_sum().cast(pl.Int64) - 1, span=pl.col("t1") - pl.col("t0"))
            .with_columns(
                lo=pl.col("hi") - pl.col("n") + 1, base=(pl.col("span") + 2).cum_sum().shift(1, fill_value=0) + 1
            )
            .drop("n", "t1")
        )
        repeat = pl.col("hi") - pl.col("lo") + 1
        base = self.threads.select(pl.col("base").repeat_by(repeat).explode()).to_series()
        t0 = self.threads.select(pl.col("t0").repeat_by(repeat).explode()).to_series()
        self.starts = calls["start"] - t0 + base
        self.ends = calls["end"] - t0 + base

    def part(self, first: pl.Series, last: pl.Series) -> tuple[pl.Series, Lines]:
        """The rows of calls first..last of each thread (in the threads' order; none where
        last < first), and the Lines of those rows: the same lines, so no group_by again."""
        n = (last - first + 1).clip(lower_bound=0).fill_null(0)
        rows = (
            pl.DataFrame({"first": first, "last": last})
            .filter(pl.col("last") >= pl.col("first"))
            .select(ci=pl.int_ranges("first", pl.col("last") + 1))
            .explode("ci")["ci"]
        )
        sub = Lines.__new__(Lines)  # (its fields, set here rather than made from calls)
        hi = n.cum_sum().cast(pl.Int64) - 1
        sub.threads = self.threads.with_columns(hi=hi, lo=hi - n + 1)
        sub.starts, sub.ends = self.starts.gather(rows), self.ends.gather(rows)
        return rows, sub

    @staticmethod
    def at(t: pl.Expr) -> pl.Expr:
        """Time t on its thread's line (a frame with the thread's t0, span and base): -1 and
        span + 1 keep a time before or after all of the thread's calls on its own line."""
        return (t - pl.col("t0")).clip(-1, pl.col("span") + 1) + pl.col("base")


def bounds(windows: pl.DataFrame, calls: pl.DataFrame, lines: Lines | None = None) -> pl.DataFrame:
    """Each window (wid, pid, tid, w0, w1 with w1 > w0) with the range of its thread's calls
    that touch it: first, the first call that ends after w0; last, the last that begins before
    w1 (at least first). first is null when no call of the thread ends after w0: it ran code
    outside CUDA throughout (after its last call, or on a thread with no calls). lines:
    Lines(calls), when made already (around gives the lines of the calls it gives)."""
    w = windows.filter(pl.col("w1") > pl.col("w0")).select("wid", "pid", "tid", "w0", "w1")
    if calls.height == 0:
        return w.with_columns(first=pl.lit(None, pl.Int64), last=pl.lit(None, pl.Int64))
    if lines is None:
        lines = Lines(calls)
    w = w.join(lines.threads, on=["pid", "tid"], how="left")
    w = w.with_columns(x0=Lines.at(pl.col("w0")).fill_null(0), x1=Lines.at(pl.col("w1")).fill_null(0))
    first = lines.ends.search_sorted(w["x0"], side="right").cast(pl.Int64)
    last = lines.starts.search_sorted(w["x1"], side="left").cast(pl.Int64) - 1
    w = w.with_columns(first=first, last=last).with_columns(
        first=pl.when(pl.col("lo").is_not_null() & (pl.col("first") <= pl.col("hi"))).then("first"),
        last=pl.when(pl.col("lo").is_not_null() & (pl.col("last") >= pl.col("lo"))).then("last"),
    )
    w = w.select("wid", "pid", "tid", "w0", "w1", "first", "last")
    return w.with_columns(last=pl.max_horizontal("first", pl.col("last").fill_null(pl.col("first"))))


def around(calls: pl.DataFrame, lines: Lines, t0: int | None, t1: int | None) -> tuple[pl.DataFrame, Lines]:
    """The calls that windows within [t0, t1] can touch, and their Lines: on each thread, from
    the first call that ends after t0 to the first that begins at or after t1. (bounds and
    by_state then give what they give over all of the calls: the stretches before and after
    each call are the thread's, not the selection's.) lines: Lines(calls), made once for all
    the spans asked about, so that each asks only a search per thread."""
    if t0 is None or t1 is None or calls.height == 0:
        return calls.head(0), Lines(calls.head(0))
    x = lines.threads.select("lo", "hi", x0=Lines.at(pl.lit(t0)), x1=Lines.at(pl.lit(t1)))
    first = lines.ends.search_sorted(x["x0"], side="right").cast(pl.Int64)
    stop = lines.starts.search_sorted(x["x1"], side="left").cast(pl.Int64)
    rows, near = lines.part(first, x.select(pl.min_horizontal(stop, "hi")).to_series())
    return calls[rows], near


def _stretch(length: pl.Expr) -> pl.Expr:
    """The state of the time between two calls, from its length (null: unbounded)."""
    return pl.when(length.is_not_null() & (length < SHORT_CPU_NS)).then(STATE["gap_short"]).otherwise(STATE["gap_long"])


def by_state(touched: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Time per state of each window on its thread: wid and one column per state (ns).

    touched: bounds() of the windows over calls, load.flatten's frame (non-overlapping, in order
    per thread), or a part of it (around). Of the calls a window touches, only the
    first (and the stretch before it), the last (and the stretch after it) can stick out of the
    window; the ones between lie inside it whole, so their time per state is a difference of
    prefix sums over the calls, without listing them window by window."""
    b = touched
    outside = b.filter(pl.col("first").is_null())
    out = outside.select(
        "wid",
        *[((pl.col("w1") - pl.col("w0")) if s == "gap_long" else pl.lit(0, pl.Int64)).alias(s) for s in STATES],
    )
    w = b.filter(pl.col("first").is_not_null())
    if w.height == 0:
        return out
    c = calls.select(
        "start",
        "end",
        "state",
        gap_state=_stretch(pl.col("before")).cast(pl.UInt8),
        gap=pl.col("before").fill_null(0),
        after_state=_stretch(pl.col("after")).cast(pl.UInt8),
        after=pl.col("after").fill_null(FAR),
        before=pl.col("before").fill_null(FAR),
    )
    # (each edge gathers only the columns it reads: a gather copies what it is given)
    f = c.select("start", "end", "state", "gap_state", "before")[w["first"]]
    la = c.select("start", "end", "state", "after_state", "after")[w["last"]]
    w0, w1 = w["w0"], w["w1"]

    def clip(a: pl.Series, z: pl.Series) -> pl.Series:
        lo = pl.select(pl.max_horizontal(a, w0)).to_series()
        hi = pl.select(pl.min_horizontal(z, w1)).to_series()
        return (hi - lo).clip(lower_bound=0)

    several = w["last"] > w["first"]
    # The edges: the stretch before the first call, the first call, the last call (when it is
    # another), and the stretch after the last.
    g_first = clip(f["start"] - f["before"], f["start"])
    c_first = clip(f["start"], f["end"])
    c_last = pl.select(pl.when(several).then(clip(la["start"], la["end"])).otherwise(0)).to_series()
    a_last = clip(la["end"], la["end"] + la["after"])
    # The inside: calls first+1 .. last-1 whole (only windows with such calls: few, where the
    # GPU waits for launches), and the stretches before calls first+1 .. last.
    inner = (w["last"] > w["first"] + 1).arg_true()
    inner_lo, inner_hi = (w["first"] + 1).gather(inner), w["last"].gather(inner)
    first1, last1 = w["first"] + 1, w["last"] + 1
    dur = c["end"] - c["start"]
    present = set(c["state"].unique().to_list())  # the calls' states; a stretch is gap_short or gap_long

    def prefix(x: pl.Series) -> pl.Series:
        return pl.concat([pl.Series([0], dtype=pl.Int64), x.cast(pl.Int64).cum_sum()])

    def masked(cond: pl.Series, values: pl.Series) -> pl.Series:
        return pl.select(pl.when(cond).then(values).otherwise(0)).to_series()

    cols = {}
    for name, k in STATE.items():
        ns = pl.zeros(w.height, pl.Int64, eager=True)
        if k in present:
            pc = prefix(masked(c["state"] == k, dur))
            ns = ns.scatter(inner, pc.gather(inner_hi) - pc.gather(inner_lo))
            ns = ns + masked(f["state"] == k, c_first) + masked(la["state"] == k, c_last)
        if name in ("gap_short", "gap_long"):
            pg = prefix(masked(c["gap_state"] == k, c["gap"]))
            ns = ns + (pg.gather(last1) - pg.gather(first1))
            ns = ns + masked(f["gap_state"] == k, g_first) + masked(la["after_state"] == k, a_last)
        cols[name] = ns
    inside = pl.DataFrame({"wid": w["wid"], **cols})
    return pl.concat([out, inside], how="vertical_relaxed")


def by_name(touched: pl.DataFrame, calls: pl.DataFrame, skip: tuple[int, ...] = ()) -> pl.DataFrame:
    """Each window's time inside its thread's calls, by the call's name: wid, name_id, ns (one
    row per name with time in the window), from bounds() of the windows, leaving out the calls
    in the states `skip`. It lists the calls window by window: give it the windows that need it."""
    w = touched.filter(pl.col("first").is_not_null())
    if w.height == 0:
        return pl.DataFrame(schema={"wid": pl.Int64, "name_id": pl.Int64, "ns": pl.Int64})
    x = w.select("wid", "w0", "w1", ci=pl.int_ranges("first", pl.col("last") + 1)).explode("ci")
    x = pl.concat([x, calls.select("start", "end", "name_id", "state")[x["ci"]]], how="horizontal")
    ns = (pl.min_horizontal("end", "w1") - pl.max_horizontal("start", "w0")).clip(lower_bound=0)
    return (
        x.filter(pl.col("name_id").is_not_null() & ~pl.col("state").is_in(skip))
        .with_columns(ns=ns)
        .filter(pl.col("ns") > 0)
        .group_by("wid", "name_id")
        .agg(pl.col("ns").sum())
    )


__all__ = ["STATES", "Lines", "around", "bounds", "by_name", "by_state"]
