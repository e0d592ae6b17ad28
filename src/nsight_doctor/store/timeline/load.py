"""The timeline's inputs, read once from the store as Polars frames.

- ops: every operation on a GPU (kernels, CUDA graph executions, copies, memsets), sorted per
  GPU by start and end, numbered per GPU (`idx`);
- calls: the CUDA API calls of the threads that issue work, with what each call means for
  the thread's state (launching, blocked, loading code, other CUDA work);
- blocking: the blocking calls (the store's blocking_calls), per GPU they may wait for, and the
  waits by polling (polls()).
"""

from __future__ import annotations

from typing import cast

import duckdb
import polars as pl

from nsight_doctor.store.timeline.frames import read

KERNEL, GRAPH, MEMCPY, MEMSET = 0, 1, 2, 3
KIND_NAMES = {KERNEL: "kernel", GRAPH: "graph", MEMCPY: "memcpy", MEMSET: "memset"}

# What a CUDA call (or the time between two calls) says about its thread, from api_names_t's
# categories and blocking_calls ("blocking": a synchronize call or a copy into pageable memory;
# "blocking_copy": a synchronous copy or memset). The time between two calls is "gap_short" when it is under
# SHORT_CPU_NS (the framework's own overhead between the calls that issue work), else
# "gap_long" (the thread ran code outside CUDA).
STATES = [
    "launch",
    "blocking",
    "blocking_copy",
    "module",
    "one_time",
    "alloc",
    "copy",
    "other",
    "gap_short",
    "gap_long",
]
STATE = {s: i for i, s in enumerate(STATES)}
SHORT_CPU_NS = 100_000


def packed(frames: list[pl.DataFrame], keys: list[str]) -> list[pl.Series] | None:
    """The keys of each frame packed into one UInt64, the same way for all of them, or None
    where they are not all integers from 0 up that fit in 64 bits together. A null is one more
    value (the column's largest plus one), as a struct tells (1, null) from (2, null). Ids
    (GPU, process, correlation id, name) fit: marking or joining by one number instead of a
    struct or several columns took a fifth of the memory on 4 M calls (1 GB for a moment)."""
    if not all(f.schema[k].is_integer() for f in frames for k in keys):
        return None
    tops: list[int] = []
    for k in keys:
        lows = [int(v) for f in frames if (v := f[k].min()) is not None]  # type: ignore[arg-type]
        highs = [int(v) for f in frames if (v := f[k].max()) is not None]  # type: ignore[arg-type]
        if min(lows, default=0) < 0:
            return None
        tops.append(max(highs, default=-1) + 1)
    widths = [max(t.bit_length(), 1) for t in tops]
    if sum(widths) > 64:
        return None
    key = pl.lit(0, pl.UInt64)
    for k, top, width in zip(keys, tops, widths):
        key = key * (1 << width) + pl.col(k).fill_null(top).cast(pl.UInt64)
    return [f.select(key.alias("key")).to_series() for f in frames]


def first_distinct(df: pl.DataFrame, keys: list[str]) -> pl.Series:
    """Whether each row is the first with its values of keys (is_first_distinct over a struct
    of them), over packed keys where they pack."""
    one = packed([df], keys)
    if not one or cast(int, one[0].approx_n_unique()) < df.height // 4:
        return (one[0] if one else df.select(pl.struct(keys)).to_series()).is_first_distinct()
    # Mostly distinct keys (correlation ids): is_first_distinct's hash set grows with each new
    # key, 0.7 s on 4.4 M calls on 2 cores; a stable sort finds each key's first row in 0.1 s.
    s = pl.DataFrame({"k": one[0]}).with_row_index("i").sort("k", maintain_order=True)
    first = s["k"].ne_missing(s["k"].shift(1))
    return pl.zeros(df.height, pl.Boolean, eager=True).scatter(s["i"].filter(first), True).alias(one[0].name)


def grouped_order(df: pl.DataFrame, groups: list[str], then: list[pl.Expr], nulls_last: bool = False) -> pl.Series:
    """The rows' order by the groups' columns, then by the `then` expressions, in two sorts: by
    `then`, and stably by the groups. (One sort over all the columns took 1.2 s on 4.4 M calls
    on 2 cores, these two 0.25 s.)"""
    by_then = df.select(pl.arg_sort_by(then, nulls_last=nulls_last)).to_series()
    by_group = df.select(pl.col(groups).gather(by_then)).select(
        pl.arg_sort_by(groups, maintain_order=True, nulls_last=nulls_last)
    )
    return by_then.gather(by_group.to_series())


def load_ops(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    ops = read(
        con,
        f"""
        SELECT device_id, stream_id, start, "end", {KERNEL}::UTINYINT AS kind, correlation_id AS corr, pid,
               short_name_id AS name_id, demangled_name_id AS dn_id,
               hash(short_name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z) AS sig,
               CASE WHEN short_name_id IS NOT NULL AND grid_x IS NOT NULL AND grid_y IS NOT NULL AND grid_z IS NOT NULL
                    THEN hash(short_name_id, grid_x, grid_y, grid_z) END AS gsig,
               graph_node_id IS NOT NULL OR graph_id IS NOT NULL AS in_graph, NULL::BIGINT AS bytes,
               NULL::VARCHAR AS direction
        FROM base_kernels
        UNION ALL
        SELECT device_id, stream_id, start, "end", {GRAPH}::UTINYINT, correlation_id, pid, graph_id, NULL,
               hash('graph', graph_id), NULL, true, NULL, NULL
        FROM base_graph_launches
        UNION ALL
        SELECT device_id, stream_id, start, "end", {MEMCPY}::UTINYINT, correlation_id, pid, NULL, NULL, NULL, NULL,
               graph_node_id IS NOT NULL, bytes, direction
        FROM base_memcpy
        UNION ALL
        SELECT device_id, stream_id, start, "end", {MEMSET}::UTINYINT, correlation_id, pid, NULL, NULL, NULL, NULL,
               graph_node_id IS NOT NULL, bytes, 'memset'
        FROM base_memset
        """,
    )
    classes = read(
        con,
        """
        SELECT DISTINCT ON (short_name_id, demangled_name_id)
               short_name_id AS name_id, demangled_name_id AS dn_id, category
        FROM kernel_classes_t
        """,
    )
    # (each operation's category by its packed name ids: a join copies every column of the
    # operations, 380 MB more for a moment at 2 M kernels instead of 100 MB)
    keys = packed([ops, classes], ["name_id", "dn_id"])
    if keys:
        category = keys[0].replace_strict(keys[1], classes["category"], default=None, return_dtype=pl.String)
    else:
        category = ops.select("name_id", "dn_id").join(
            classes, on=["name_id", "dn_id"], how="left", nulls_equal=True, maintain_order="left"
        )["category"]
    ops = ops.with_columns(category=pl.when(pl.col("kind") == KERNEL).then(category).cast(pl.Categorical))
    del category, keys
    # (kind and correlation id break ties, so that the order, and every "first" below, is the
    # same from run to run)
    kind_corr = packed([ops], ["kind", "corr"])  # (one column sorts faster than two; nulls last too)
    then = [
        pl.col("start"),
        pl.col("end"),
        *([pl.lit(kind_corr[0])] if kind_corr else [pl.col("kind"), pl.col("corr")]),
    ]
    ops = ops[grouped_order(ops, ["device_id"], then, nulls_last=True)]
    return ops.with_columns(idx=pl.int_range(pl.len(), dtype=pl.Int64).over("device_id"))


def looked_up(ids: pl.Series, keys: pl.Series, values: pl.Series, default: int) -> pl.Series:
    """The value of each id's key (default where it has none), as UInt8: a gather from a table
    indexed by id when the keys are small non-negative integers (name ids), else
    replace_strict. (replace_strict joins: 150 MB more for a moment on 4.4 M calls.)"""
    known = keys.is_not_null()
    keys, values = keys.filter(known), values.filter(known)
    low, top = cast(int, keys.min() if keys.len() else -1), cast(int, keys.max() if keys.len() else -1)
    if low < 0 or top >= 1 << 24:
        return ids.replace_strict(keys, values, default=default, return_dtype=pl.UInt8)
    table = cast(pl.Series, pl.repeat(default, top + 1, dtype=pl.UInt8, eager=True)).scatter(keys, values)
    inside = ids.is_between(0, top)
    return table.gather(pl.select(pl.when(inside).then(ids)).to_series()).fill_null(default)


def load_calls(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every CUDA call, with its thread state (STATES) and name id; nested calls are kept
    (flatten() keeps the outermost)."""
    # (the two small tables are joined here, not in SQL: joined there, 4.4 M calls took 0.5-1 s
    # to read on 2 cores and 100 MB more at the peak than here, in 0.2 s)
    calls = read(con, 'SELECT pid, tid, start, "end", correlation_id AS corr, name_id FROM base_api_calls')
    names = read(con, "SELECT name_id, category, coalesce(one_time, false) AS one_time FROM api_names_t")
    by_name = names.select(
        pl.when(pl.col("category").is_in(["launch", "graph_launch"]))
        .then(STATE["launch"])
        .when(pl.col("category") == "module")
        .then(STATE["module"])
        .when(pl.col("one_time"))
        .then(STATE["one_time"])
        .when(pl.col("category") == "alloc")
        .then(STATE["alloc"])
        .when(pl.col("category").is_in(["memcpy", "memset"]))
        .then(STATE["copy"])
        .otherwise(STATE["other"])
        .cast(pl.UInt8)
    ).to_series()
    state = looked_up(calls["name_id"], names["name_id"], by_name, STATE["other"])
    # The blocking calls (few): found among the calls that begin when one of them does.
    blocking = read(
        con,
        """
        SELECT pid, tid, start,
               CASE WHEN min(reason) IN ('sync_copy', 'sync_memset') THEN {copy} ELSE {blocking} END AS state
        FROM blocking_calls GROUP BY ALL
        """.format(copy=STATE["blocking_copy"], blocking=STATE["blocking"]),
    )
    maybe = calls["start"].is_in(blocking["start"].implode()).arg_true()
    hit = (
        calls.select("pid", "tid", "start")
        .gather(maybe)
        .with_columns(row=maybe)
        .join(blocking.with_columns(pl.col("state").cast(pl.UInt8)), on=["pid", "tid", "start"])
    )
    return calls.with_columns(state=state.scatter(hit["row"], hit["state"]))


# A wait by polling: MIN_POLLS or more query calls in a row on a thread that launches work, no
# other CUDA call between them and each within POLL_GAP_NS of the last (a loop of
# `event.query()`, spinning or asleep between polls, as event-loop servers wait instead of a
# blocking sync).
QUERIES = ("cudaEventQuery", "cudaStreamQuery", "cuEventQuery", "cuStreamQuery")
MIN_POLLS = 3
POLL_GAP_NS = 10_000_000


def polls(calls: pl.DataFrame, api_names: pl.DataFrame, gpus: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """The waits by polling, as load_blocking's rows (reason "poll", the query's name), from
    the first poll to the end of the last (the one that found the work done), once per GPU of
    the process (gpus: pid, device_id): a query does not say which GPU its event is on. Only
    runs during which an operation of that GPU ended (ops: device_id, end): the polls saw work
    still running (a caching allocator's walk of its events finds them all done)."""
    out = pl.Schema(
        {
            "pid": pl.Int64(),
            "tid": pl.Int64(),
            "device_id": gpus.schema["device_id"],
            "start": pl.Int64(),
            "end": pl.Int64(),
            "name": pl.String(),
            "reason": pl.String(),
        }
    )
    empty = pl.DataFrame(schema=out)
    ids = api_names.filter(pl.col("name").is_in(QUERIES)).select("name_id", "name")
    if ids.height == 0:
        return empty
    is_query = pl.col("name_id").is_in(ids["name_id"].implode())
    # (the threads that launch work too: a watchdog's queries, such as PyTorch's NCCL
    # watchdog checking its collectives, are no loop's wait)
    launching = calls.filter(pl.col("state") == STATE["launch"]).select("pid", "tid").unique()
    threads = calls.filter(is_query).select("pid", "tid").unique().join(launching, on=["pid", "tid"], how="semi")
    if threads.height == 0:
        return empty
    c = calls.join(threads, on=["pid", "tid"], how="semi").select("pid", "tid", "start", "end", "name_id")
    c = c.sort(["pid", "tid", "start", "end"]).with_columns(q=is_query)
    since = pl.col("start") - pl.col("end").shift(1)
    polling = same_thread(1) & pl.col("q") & pl.col("q").shift(1) & (since <= POLL_GAP_NS)
    runs = (
        c.with_columns(run=(~polling.fill_null(False)).cum_sum())
        .filter("q")
        .group_by("pid", "tid", "run")
        .agg(start=pl.col("start").min(), end=pl.col("end").max(), n=pl.len(), name_id=pl.col("name_id").first())
        .filter(pl.col("n") >= MIN_POLLS)
    )
    runs = runs.join(ids, on="name_id").join(gpus, on="pid")
    if runs.height == 0:
        return empty
    ends = ops.select(pl.col("device_id").cast(gpus.schema["device_id"]), done="end").sort("done")
    runs = runs.sort("end").join_asof(
        ends, left_on="end", right_on="done", by="device_id", strategy="backward", check_sortedness=False
    )
    runs = runs.filter(pl.col("done") > pl.col("start"))
    return runs.select("pid", "tid", "device_id", "start", "end", "name", reason=pl.lit("poll")).cast(out)


def same_thread(n: int) -> pl.Expr:
    """Whether the row n rows back (forward, when negative) is of the same thread (pid, tid)."""
    return pl.col("pid").eq_missing(pl.col("pid").shift(n)) & pl.col("tid").eq_missing(pl.col("tid").shift(n))


def flatten(calls: pl.DataFrame) -> pl.DataFrame:
    """The outermost calls of each thread (a call that begins inside another call of its thread
    is part of it), sorted by thread and start, with a global row number `ci` and the time
    since the thread's previous call ended (`before`) and until its next one (`after`); null
    at the thread's first and last call."""
    # (the order, then the rows gathered once: sorting the whole frame held twice as much
    # memory for a moment, 430 MB more than the frame instead of 280 MB on 4.4 M calls)
    c = calls[grouped_order(calls, ["pid", "tid"], [pl.col("start"), -pl.col("end")])]
    c = c.with_columns(prev_max=pl.col("end").cum_max().shift(1).over("pid", "tid"))
    c = c.filter(pl.col("prev_max").is_null() | (pl.col("start") >= pl.col("prev_max"))).drop("prev_max")
    # (each thread's calls are contiguous: a shift within the thread is a shift masked where
    # the thread changes, ten times cheaper than a window over (pid, tid))
    same_prev, same_next = same_thread(1), same_thread(-1)
    c = c.with_columns(
        before=pl.when(same_prev).then(pl.col("start") - pl.col("end").shift(1)),
        after=pl.when(same_next).then(pl.col("start").shift(-1) - pl.col("end")),
    )
    return c.with_columns(ci=pl.int_range(pl.len(), dtype=pl.Int64))


def load_blocking(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Blocking calls, once per GPU each may have waited for: its own, or every GPU of its
    process when the trace does not say."""
    return read(
        con,
        """
        SELECT c.pid, c.tid, coalesce(c.device_id, d.device_id) AS device_id, c.start, c."end", c.name, c.reason
        FROM blocking_calls c LEFT JOIN process_gpus d ON c.device_id IS NULL AND d.pid = c.pid
        """,
    )
