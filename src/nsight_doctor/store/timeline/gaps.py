"""Each idle gap of a GPU, split by what held the next operation back.

The thread that launched the operation that ended a gap tells where the gap's time went:
- queued: the operation had been issued before the gap began (the GPU waited for another
  stream, an event or another process, or paid its own cost between queued operations), and
  the time between its launch call's return and its start when that is 20 us or more;
- launch: the thread was inside launch calls, or between CUDA calls for under 100 us (a
  framework's per-operation overhead), or the launch had just returned (under 20 us to start);
- sync: inside a blocking call (synchronize, a synchronous copy) while the GPU sat idle
  (sync_copy_ns: the part inside synchronous copies and memsets);
- cpu: running code outside CUDA for 100 us or more at a stretch;
- api: inside other CUDA calls: alloc_ns (allocation), copy_ns (non-blocking copy and memset
  calls, such as staging pageable data), other_api_ns (queries, events...);
- setup: loading code, building graphs, other one-time CUDA work; and, in a gap of 1 ms or more
  in which code was loaded by any thread of the process (or before a kernel's first execution
  whose launch call lasted 1 ms or more), the gap's cpu and launch time too: compiling and
  loading a kernel.
The parts of a gap add up to its duration.
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline import threads
from nsight_doctor.store.timeline.load import first_distinct, packed

PARTS = ["launch", "queued", "sync", "cpu", "api", "setup"]
LATENCY_NS = 20_000  # from a launch call's return to the operation's start
COMPILE_GAP_NS = 1_000_000
LONG_GAP_NS = 100_000  # gaps this long get the CPU's CUDA time by kind and top_api


def launchers(ops: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """The call that issued each operation, matched by process and correlation id (a null
    matches nothing): tid, launch_start, launch_end, launch_name_id (the first such call when
    several share the id; null when none is traced), a row per operation in ops' order."""
    keys = packed([ops, calls], ["pid", "corr"])
    if keys:
        # The calls' keys sorted stably (a key's first call comes first), and a binary search
        # per operation for the leftmost: 0.18 s on 2 M operations and 4.4 M calls on 2 cores,
        # where marking each key's first call and joining took 0.47 s.
        by_key = (
            pl.DataFrame({"key": keys[1], "ci": calls["ci"]})
            .filter(calls["corr"].is_not_null() & calls["pid"].is_not_null())
            .sort("key", maintain_order=True)
        )
        at = by_key["key"].search_sorted(keys[0], side="left")
        at = pl.select(pl.when(at < by_key.height).then(at)).to_series()
        found = (by_key["key"].gather(at) == keys[0]) & ops["corr"].is_not_null() & ops["pid"].is_not_null()
        ci = pl.select(pl.when(found).then(by_key["ci"].gather(at))).to_series()
    else:
        # (is_first_distinct keeps the first row as unique(keep="first", maintain_order=True)
        # does; only the calls' row numbers are joined, and their columns gathered after)
        first = calls.select("pid", "corr", "ci").filter(
            pl.col("corr").is_not_null() & first_distinct(calls, ["pid", "corr"])
        )
        ci = ops.select("pid", "corr").join(first, on=["pid", "corr"], how="left", maintain_order="left")["ci"]
    # (a gather in an expression: frame[ci] fails when every ci is null)
    return calls.select("tid", launch_start="start", launch_end="end", launch_name_id="name_id").select(
        pl.all().gather(ci)
    )


def next_ops(gaps: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Each gap with what it needs of the operation that ended it (next_idx on its GPU): the
    call that issued it (tid, launch_start, launch_end, launch_name_id; null when not traced)
    and first_launch, whether it is the first execution of its kernel (by name) on its GPU.
    ops is sorted by GPU and idx (load.load_ops), so the operation is a row number away."""
    offsets = ops.select("device_id").with_row_index("row").group_by("device_id").agg(pl.col("row").min())
    g = gaps.join(offsets, on="device_id", how="left", maintain_order="left")
    rows = g["row"] + g["next_idx"]
    cols = ops.select("tid", "launch_start", "launch_end", "launch_name_id", "first_launch")[rows]
    return pl.concat([g.drop("row"), cols], how="horizontal")


def main_threads(ops: pl.DataFrame) -> pl.DataFrame:
    """Each GPU's main launching thread (pid, tid): the one that issued most of its operations
    (ops.tid, the thread of each operation's launch call)."""
    return (
        ops.select("device_id", "pid", "tid")
        .filter(pl.col("tid").is_not_null())
        .group_by("device_id", "pid", "tid")
        .agg(n=pl.len())
        .sort(["device_id", "n", "pid", "tid"], descending=[False, True, False, False])
        .unique("device_id", keep="first", maintain_order=True)
        .select("device_id", main_pid="pid", main_tid="tid")
    )


def returned_blocking(gaps: pl.DataFrame, blocking: pl.DataFrame) -> pl.DataFrame:
    """blocking_name, blocking_end, blocking_reason: the last blocking call of the gap's process
    (waiting for this GPU or an unknown one) that returned in the first half of the gap;
    blocking_waited: whether a blocking call of the process was in progress when the gap began
    (it waited for the work that had just finished; a wait called later, as an asynchronous
    scheduler calls it a step late, found the work done)."""
    g = gaps.with_columns(mid=pl.col("start") + pl.col("duration") // 2)
    calls = blocking.filter(pl.col("device_id").is_not_null())
    b = (
        calls.select("pid", "device_id", blocking_end="end", blocking_name="name", blocking_reason="reason")
        # (a tie on the end goes to the greater name)
        .sort(["blocking_end", "blocking_name"])
    )
    g = g.sort("mid").join_asof(
        b, left_on="mid", right_on="blocking_end", by=["pid", "device_id"], strategy="backward", check_sortedness=False
    )
    # (the latest end of the process's calls begun before the gap: one was in progress when it
    # began if that end is not before it; a cumulative maximum, as calls of two threads overlap)
    w = (
        calls.select("pid", "device_id", w0="start", w1="end")
        .sort("w0")
        .with_columns(pl.col("w1").cum_max().over("pid", "device_id"))
    )
    g = g.with_columns(before=pl.col("start") - 1).sort("before")
    g = g.join_asof(
        w, left_on="before", right_on="w0", by=["pid", "device_id"], strategy="backward", check_sortedness=False
    )
    synced = pl.col("blocking_end") >= pl.col("start")
    return g.with_columns(
        blocking_end=pl.when(synced).then(pl.col("blocking_end")),
        blocking_name=pl.when(synced).then(pl.col("blocking_name")),
        blocking_reason=pl.when(synced).then(pl.col("blocking_reason")),
        blocking_waited=(pl.col("w1") >= pl.col("start")).fill_null(False),
    ).drop("mid", "before", "w0", "w1")


def process_module_ns(gaps: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """module_ns: the time any thread of each gap's process spent loading code (cuModuleLoad*,
    cuLibraryLoad*, cuLink*: the module state) within gaps of COMPILE_GAP_NS or more (summed
    over threads); 0 for shorter gaps. A compiler thread loads what the launching thread waits
    for (XLA, Triton's compile threads)."""
    mod = calls.filter(pl.col("state") == threads.STATE["module"]).select("pid", m0="start", m1="end")
    long = gaps.filter(pl.col("duration") >= COMPILE_GAP_NS).select("pid_id", "pid", "start", "end")
    if mod.height == 0 or long.height == 0:
        return gaps.select("pid_id", module_ns=pl.lit(0, pl.Int64))
    j = long.join(mod, on="pid", how="inner").filter((pl.col("m0") < pl.col("end")) & (pl.col("m1") > pl.col("start")))
    ns = j.group_by("pid_id").agg(module_ns=(pl.min_horizontal("m1", "end") - pl.max_horizontal("m0", "start")).sum())
    return gaps.select("pid_id").join(ns, on="pid_id", how="left").with_columns(pl.col("module_ns").fill_null(0))


def split(pieces: pl.DataFrame, calls: pl.DataFrame, lines: threads.Lines) -> pl.DataFrame:
    """The parts (PARTS, ns) of each piece of a gap.

    pieces: pid_id, w0, w1 (the piece), start, end (its gap), thread (tpid, ttid: the launching
    thread, else the GPU's main one, else null), launch_start, launch_end, first_launch.
    Returns pid_id with one column per part, plus the thread's time in the piece by state
    (load.STATES) and top_name_id (the CUDA call, not a launch or blocking one, with the most
    time in the piece), a row per piece in the pieces' order. calls: every call a piece can
    touch, and lines their Lines (threads.around gives both)."""
    issued_before = pl.col("launch_end").is_not_null() & (pl.col("launch_end") <= pl.col("start"))
    late_launch = pl.col("launch_end").is_not_null() & ~issued_before
    p = pieces.with_columns(
        # The thread's window: from the piece's start until the launch returned (or its end).
        tw0=pl.col("w0"),
        tw1=pl.when(issued_before)
        .then(pl.col("w0"))
        .when(late_launch)
        .then(pl.min_horizontal("w1", "launch_end"))
        .otherwise(pl.col("w1")),
    )
    after = (pl.col("w1") - pl.max_horizontal("w0", "tw1")).clip(lower_bound=0)
    latency_short = (pl.col("end") - pl.max_horizontal("start", "launch_end")) < LATENCY_NS
    p = p.with_columns(
        after_launch=pl.when(late_launch & latency_short).then(after).otherwise(0),
        queued=pl.when(issued_before)
        .then(pl.col("w1") - pl.col("w0"))
        .when(late_launch & ~latency_short)
        .then(after)
        .otherwise(0),
    )
    windows = p.filter(pl.col("tpid").is_not_null()).select(wid="pid_id", pid="tpid", tid="ttid", w0="tw0", w1="tw1")
    touched = threads.bounds(windows, calls, lines)
    st = threads.by_state(touched, calls)
    # The CUDA call with the most time in the piece, for the gaps that report it (top_api).
    long = p.filter(pl.col("tpid").is_not_null() & (pl.col("end") - pl.col("start") >= LONG_GAP_NS))["pid_id"]
    # (by call, not by name: a copy call may block or not, call by call)
    held = (threads.STATE["launch"], threads.STATE["blocking"], threads.STATE["blocking_copy"])
    names = threads.by_name(touched.filter(pl.col("wid").is_in(long.implode())), calls, skip=held)
    top = (
        names.sort(["wid", "ns", "name_id"], descending=[False, True, True])
        .unique("wid", keep="first")
        .select(pid_id="wid", top_name_id="name_id", top_ns="ns")
    )
    # (joins keep the pieces' order: the parts line up with them row by row)
    p = p.join(st.rename({"wid": "pid_id"}), on="pid_id", how="left", maintain_order="left")
    p = p.join(top, on="pid_id", how="left", maintain_order="left")
    p = p.join(process_module_ns(pieces, calls), on="pid_id", how="left", maintain_order="left")
    s = {name: pl.col(name).fill_null(0) for name in threads.STATES}
    # No thread known (no API trace): the old rule of thumb, a short gap is launch overhead.
    no_thread = pl.col("tpid").is_null()
    untracked = pl.col("tw1") - pl.col("tw0")
    short = (pl.col("end") - pl.col("start")) < threads.SHORT_CPU_NS
    launch = (
        s["launch"] + s["gap_short"] + pl.col("after_launch") + pl.when(no_thread & short).then(untracked).otherwise(0)
    )
    cpu = s["gap_long"] + pl.when(no_thread & ~short).then(untracked).otherwise(0)
    setup = s["module"] + s["one_time"]
    # Compiling and loading a kernel: the CPU's work in a long gap that loaded code, or before
    # a first execution whose launch call itself took long (lazy loading, JIT in the call).
    compiling = (pl.col("end") - pl.col("start") >= COMPILE_GAP_NS) & (
        (pl.col("module_ns") > 0)
        | (pl.col("first_launch") & (pl.col("launch_end") - pl.col("launch_start") >= COMPILE_GAP_NS)).fill_null(False)
    )
    return p.select(
        "pid_id",
        launch=pl.when(compiling).then(0).otherwise(launch),
        queued=pl.col("queued"),
        sync=s["blocking"] + s["blocking_copy"],
        sync_copy_ns=s["blocking_copy"],
        cpu=pl.when(compiling).then(0).otherwise(cpu),
        api=s["alloc"] + s["copy"] + s["other"],
        setup=setup + pl.when(compiling).then(launch + cpu).otherwise(0),
        module_ns=pl.col("module_ns"),
        one_time_ns=s["module"] + s["one_time"],
        alloc_ns=s["alloc"],
        copy_ns=s["copy"],
        other_api_ns=s["other"],
        top_name_id="top_name_id",
    )


def cause(parts_prefix: str = "") -> pl.Expr:
    """The part with the most time (ties: the order of PARTS)."""
    cols = [pl.col(parts_prefix + p) for p in PARTS]
    best = pl.max_horizontal(*cols)
    expr = pl.lit(None, pl.String)
    for p, c in reversed(list(zip(PARTS, cols))):
        expr = pl.when(c == best).then(pl.lit(p)).otherwise(expr)
    return expr
