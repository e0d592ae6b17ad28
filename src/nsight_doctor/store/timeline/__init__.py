"""The timeline model, in one pass over each GPU's operations and the CUDA calls that issued
them: busy intervals, idle gaps split by the launching thread's state, steps chosen from
scored candidates, each step's time split by what bounded it, and phases.

It runs inside store.create_views once its inputs exist (tables.yaml lists them) and writes
the tables tables.yaml declares: gpu_busy, gpu_gaps, steps, step_sources, phases,
idle_code, the attention chains and the GPU work per NVTX range (nvtx_gpu_t). The
work is done in Polars over frames read from the store, not as a chain of SQL views: one sort
per GPU instead of hundreds of statements.
"""

from __future__ import annotations

import duckdb
import polars as pl

from nsight_doctor.store.timeline import attention as attention_mod
from nsight_doctor.store.timeline import bounds, nvtx_steps, threads
from nsight_doctor.store.timeline import busy as busy_mod
from nsight_doctor.store.timeline import code as code_mod
from nsight_doctor.store.timeline import gaps as gaps_mod
from nsight_doctor.store.timeline import llm as llm_mod
from nsight_doctor.store.timeline import nvtx as nvtx_mod
from nsight_doctor.store.timeline import parts as parts_mod
from nsight_doctor.store.timeline import phases as phases_mod
from nsight_doctor.store.timeline import shared as shared_mod
from nsight_doctor.store.timeline import steps as steps_mod
from nsight_doctor.store.timeline.frames import Writer, inputs, read, tables
from nsight_doctor.store.timeline.jobs import job_groups
from nsight_doctor.store.timeline.load import (
    GRAPH,
    KERNEL,
    first_distinct,
    flatten,
    load_blocking,
    load_calls,
    load_ops,
    polls,
)

__all__ = ["build", "inputs", "tables"]


def build(con: duckdb.DuckDBPyConnection) -> None:
    """Reads the inputs through con and writes the tables, through a writer thread."""
    with Writer(con) as out:
        run(con, out)


def run(con: duckdb.DuckDBPyConnection, out: Writer) -> None:
    """The pass: each table is handed to the writer as soon as it is whole. What it reads of
    the store it reads before the first write, or through the writer (Writer.read): a read of
    this thread's own while the writer's thread writes could wait on it forever."""
    ops = load_ops(con)
    strings = read(con, "SELECT id, value FROM base_strings")
    ranges = read(
        con, 'SELECT range_id, pid, tid, scope_tid, kind, depth, start, "end", text, library FROM nvtx_ranges_t'
    )
    calls = load_calls(con)
    api_names = read(con, "SELECT name_id, name FROM api_names_t")
    gpus = read(con, "SELECT pid, device_id FROM process_gpus")
    blocking = pl.concat(
        [load_blocking(con).cast({"reason": pl.String}), polls(calls, api_names, gpus, ops)], how="vertical_relaxed"
    )
    framework = con.execute("SELECT name, evidence FROM framework").fetchone() or ("unknown", None)
    py_samples = read(con, "SELECT sample_id, time, pid, tid, state FROM base_python_samples")
    py_frames = read(con, "SELECT sample_id, depth, function_id, file_id, line FROM base_python_frames")
    cpu_samples = read(con, "SELECT sample_id, time, pid, tid FROM base_cpu_samples")
    cpu_frames = read(con, "SELECT sample_id, depth, symbol_id, module_id FROM base_cpu_frames")
    # (the program's own calls: a call inside another traced one is part of it)
    os_calls = read(con, 'SELECT start, "end", pid, tid, name_id FROM base_os_calls WHERE coalesce(nesting, 0) = 0')
    # GPU work per NVTX range: each operation by every call of its correlation id, nested
    # calls too (flatten keeps the outermost). The first write: this thread reads no more.
    per_range = nvtx_mod.gpu_per_range(ops, calls, ranges)
    out.write("nvtx_gpu_t", per_range)
    calls = flatten(calls)
    nvr = ranges.filter(~pl.col("library")).drop("library")
    del ranges
    # (the program's ranges with GPU work: the steps' NVTX candidates)
    nv = per_range.filter(pl.col("gpu_ops") > 0).join(nvr.select("range_id", "depth", "text"), on="range_id")
    nv = nv.select("device_id", "range_id", "depth", "text", "gpu_start", "gpu_end", "gpu_time")
    del per_range

    # Each operation's launch call (its thread, null when not traced), and whether it is the
    # first execution of its kernel on its GPU.
    ops = ops.hstack(gaps_mod.launchers(ops, calls))
    calls = calls.drop("corr", "ci")  # (4 M calls: 70 MB; the rest finds calls by position)
    ops = ops.with_columns(
        first_launch=(pl.col("kind") == KERNEL)
        & pl.col("name_id").is_not_null()
        & first_distinct(ops, ["device_id", "name_id", "kind"])
    )

    # The steps first: the gaps are made a chunk at a time, each told the steps it lies in.
    shared = shared_mod.processes(ops)
    seq = shared_mod.main_only(steps_mod.sequence(ops), shared)
    trips = busy_mod.round_trips(ops, blocking)
    # (lazy, here and wherever most rows pass a filter: an eager filter copies every column)
    kernel_ns = (
        ops.lazy()
        .filter(pl.col("kind").is_in([KERNEL, GRAPH]))
        .group_by("device_id")
        .agg(kernel_ns=(pl.col("end") - pl.col("start")).sum())
        .collect()
    )
    st, sources = choose_steps(out, seq, nv, kernel_ns, trips, strings, ops=ops, ranges=nvr)
    jobs = job_groups(seq)  # (the phases of a job's ranks agree too)
    del seq
    ops = attention_chains(out, ops, strings, st)

    busy = busy_mod.busy_intervals(ops)
    mains, readbacks = gaps_mod.main_threads(ops), busy_mod.readbacks(ops)
    # What the rest of the pass reads of the operations (at 2 M kernels the others are 110 MB).
    launch = ["tid", "launch_start", "launch_end", "launch_name_id", "first_launch"]
    ops = ops.select("device_id", "start", "end", "kind", "name_id", "category", "gsig", "pid", *launch)
    g, coded, parts = idle_gaps(
        out, busy, ops, calls, blocking, st, mains=mains, readbacks=readbacks, api_names=api_names, strings=strings
    )
    busy = busy_mod.running_busy(busy)  # (what the steps and phases read of it)
    ops = ops.drop(launch[1:])  # (the steps' launching thread is their operations' tid)
    calls = calls.select("pid", "tid", "start", "end", "after")  # what the code in the gaps needs

    st = step_parts(st, parts, busy, ops, blocking)
    out.write("steps", st)
    out.write("step_sources", shared_mod.described(sources, shared))

    chosen = sources.filter("chosen")
    token = set(chosen.filter(pl.col("marks").fill_null("").str.contains("embedding|sampling"))["device_id"].to_list())
    # GPUs whose every step replays a CUDA graph: the graph launches are the steps, or recur
    # once per step of the steps chosen (an NVTX range around each replay; one more or less
    # where the capture cut a range at its start or end), or the chosen level holds a replay
    # beside its own kernel (sampling after a compiled forward).
    per_step = st.group_by("device_id").agg(steps=pl.len().cast(pl.Int64))
    replays = sources.filter(pl.col("source") == "graph").join(per_step, on="device_id")
    replays = replays.filter(
        (pl.col("occurrences") - pl.col("steps")).abs() <= pl.max_horizontal(1, 0.02 * pl.col("steps"))
    )
    with_replay = chosen.filter(pl.col("marks").fill_null("").str.contains(r"\bgraph\b"))
    graphs = set(replays["device_id"].to_list()) | set(with_replay["device_id"].to_list())
    llm = llm_mod.llm_devices(ops, st, strings, framework[0], framework[1], token, graphs, jobs)
    ph = phases_mod.build(
        busy,
        ops,
        st,
        g,
        llm,
        batching=framework[0] in llm_mod.BATCHING_ENGINES,
        jobs=jobs,
        graphs=graphs,
    )
    out.write("phases", ph)

    steady = ph.filter("steady").select("device_id", p0="start", p1="end")
    sg = coded.join(steady, on="device_id").filter((pl.col("start") >= pl.col("p0")) & (pl.col("end") <= pl.col("p1")))
    # The step ranges themselves name no code: every gap of a step lies in one.
    step_marks = st.filter(pl.col("source") == "nvtx")["marker"].unique().implode()
    nvr = nvr.filter(~nvtx_steps.pattern(pl.col("text")).is_in(step_marks))
    out.write(
        "idle_code",
        code_mod.idle_code(
            sg.drop("p0", "p1"),
            calls,
            py_samples,
            py_frames,
            cpu_samples,
            cpu_frames,
            nvr,
            strings,
            os_calls,
        ),
    )


# Gaps are made and written this many at a time: their frame, the largest of the pass (about
# 40 columns), then never holds more than a chunk's rows, and the calls each chunk reads are
# those of its time span.
GAP_CHUNK = 262_144


def idle_gaps(
    out: Writer,
    busy: pl.DataFrame,
    ops: pl.DataFrame,
    calls: pl.DataFrame,
    blocking: pl.DataFrame,
    st: pl.DataFrame,
    *,
    mains: pl.DataFrame,
    readbacks: pl.DataFrame,
    api_names: pl.DataFrame,
    strings: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Writes gpu_busy and gpu_gaps, GAP_CHUNK busy intervals at a time (each chunk's intervals
    named as gpu_ops names operations, then its gaps made). Returns what the rest of the pass
    needs of the gaps: the phases' columns of every gap; the gaps with CPU or setup time on a
    known thread (the code in the gaps: code.idle_code's columns); each step's parts (ns).

    busy: busy_intervals(); ops: the operations' launch calls (gaps.next_ops); mains:
    gaps.main_threads(); readbacks: busy.readbacks() of the operations."""
    # The gap's launching thread, when no launch call is known: its GPU's main launching
    # thread. (Columns set by mapping, not joins: a join copies all of the gaps.)
    main_pid = dict(zip(mains["device_id"], mains["main_pid"]))
    main_tid = dict(zip(mains["device_id"], mains["main_tid"]))
    names = dict(zip(api_names["name_id"], api_names["name"]))
    lines = threads.Lines(calls)  # (each chunk then finds the calls around it by a search per thread)
    for_phases, for_code, for_steps = [], [], []
    part_sums = [pl.col(f"{p}_ns").sum() for p in gaps_mod.PARTS]  # per step: in a chunk, then over all
    # (busy intervals are in GPU and time order: a chunk and the first interval of the next
    # make each gap exactly once; with no gaps, one empty chunk gives the table its columns)
    for lo in range(0, max(busy.height - 1, 1), GAP_CHUNK):
        named = busy_mod.op_names(busy.slice(lo, GAP_CHUNK + 1), strings)
        # (the interval after the chunk is the next chunk's first, but for the last chunk's)
        out.write("gpu_busy", named if lo + GAP_CHUNK >= busy.height - 1 else named.head(GAP_CHUNK))
        g = busy_mod.gaps(named)
        del named
        g = busy_mod.readback_bytes(g, readbacks)
        g = gaps_mod.next_ops(g, ops).drop("next_idx", "prev_corr", "prev_pid")
        g = gaps_mod.returned_blocking(g, blocking)
        g = g.with_columns(
            tpid=pl.when(pl.col("tid").is_not_null())
            .then(pl.col("pid"))
            .otherwise(pl.col("device_id").replace_strict(main_pid, default=None, return_dtype=pl.Int64)),
            ttid=pl.coalesce("tid", pl.col("device_id").replace_strict(main_tid, default=None, return_dtype=pl.Int64)),
        )
        # Each gap's parts, from the launching thread's state in it.
        cols = ["start", "end", "duration", "pid", "tpid", "ttid", "launch_start", "launch_end", "first_launch"]
        pieces = g.select(*cols, pid_id=pl.int_range(pl.len()), w0="start", w1="end")
        span = g.select(pl.col("start").min(), pl.col("end").max()).row(0)
        near, near_lines = threads.around(calls, lines, *span)
        parts = gaps_mod.split(pieces, near, near_lines)
        del near, near_lines, pieces
        g = pl.concat([g, parts.drop("pid_id")], how="horizontal")
        g = g.with_columns(
            top_api=pl.col("top_name_id").replace_strict(names, default=None, return_dtype=pl.String),
            launch_name=pl.col("launch_name_id").replace_strict(names, default=None, return_dtype=pl.String),
            step=step_of(g.select("device_id", "start", "end"), st),
        ).drop("top_name_id", "launch_name_id")
        long_gap = pl.col("duration") >= gaps_mod.LONG_GAP_NS
        g = g.with_columns(
            cause=gaps_mod.cause(),
            **{
                c: pl.col(c).fill_null(0)
                for c in ("one_time_ns", "module_ns", "alloc_ns", "copy_ns", "other_api_ns", "sync_copy_ns")
            },
            top_api=pl.when(long_gap).then(pl.col("top_api")),
            tid=pl.col("ttid"),
            after_readback=(pl.col("readback_bytes") >= 32768).fill_null(False),
            **{f"{p}_ns": pl.col(p) for p in gaps_mod.PARTS},
        ).with_columns(
            launch_side=pl.when(pl.col("cause") == "launch")
            .then(pl.lit("cpu"))
            .when((pl.col("cause") == "queued") & (pl.col("duration") < gaps_mod.LATENCY_NS))
            .then(pl.lit("gpu"))
        )
        out.write("gpu_gaps", g)  # (readers order it: DuckDB keeps no insertion order here)
        for_phases.append(g.select("device_id", "start", "end", "duration", "cause", "setup_ns"))
        for_code.append(
            g.filter(((pl.col("cpu_ns") > 0) | (pl.col("setup_ns") > 0)) & pl.col("tpid").is_not_null()).select(
                "device_id", "start", "end", "cpu_ns", "setup_ns", "tpid", "ttid", "after_readback"
            )
        )
        for_steps.append(g.filter(pl.col("step").is_not_null()).group_by("device_id", "step").agg(part_sums))
        del g
        out.drain(leave=2)  # (a chunk's two tables waiting to be written are memory too)
    # (a step that spans two chunks has a sum from each)
    step_sums = pl.concat(for_steps, how="vertical_relaxed").group_by("device_id", "step").agg(part_sums)
    return pl.concat(for_phases, how="vertical_relaxed"), pl.concat(for_code, how="vertical_relaxed"), step_sums


def attention_chains(out: Writer, ops: pl.DataFrame, strings: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Writes attention_chains and attention_kernels; returns ops with the chains' kernels in
    category attention-unfused (the phases see attention)."""
    found = attention_mod.per_layer(attention_mod.chains(ops, strings), steps)
    member = attention_mod.members(ops, found)
    out.write("attention_chains", attention_mod.table(ops, found, member, strings))
    keyed = ops.select("device_id", "idx", "stream_id", "start").join(member, on=["device_id", "idx"])
    out.write("attention_kernels", keyed.select("device_id", "stream_id", "start", "chain"))
    if member.height == 0:
        return ops
    flag = member.select("device_id", "idx", in_chain=pl.lit(True))
    ops = ops.join(flag, on=["device_id", "idx"], how="left", maintain_order="left")
    return ops.with_columns(
        category=pl.when(pl.col("in_chain"))
        .then(pl.lit("attention-unfused"))
        .otherwise(pl.col("category").cast(pl.String))
        .cast(pl.Categorical)
    ).drop("in_chain")


def choose_steps(
    out: Writer,
    seq: pl.DataFrame,
    nv: pl.DataFrame,
    kernel_ns: pl.DataFrame,
    trips: pl.DataFrame,
    strings: pl.DataFrame,
    *,
    ops: pl.DataFrame,
    ranges: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The steps of every GPU (device_id, step, start, end, source, marker, confidence,
    kind_hint) and the scored candidates (step_sources). ops: the operations with their
    launch calls; ranges: the program's NVTX ranges (for nvtx_steps.held_work)."""
    pats = nvtx_steps.nvtx_patterns(nv, kernel_ns)
    short = nvtx_steps.short_of_work(pats)
    held = None
    if short.height:
        launches = (
            ops.lazy()
            .filter(pl.col("kind").is_in([KERNEL, GRAPH]) & pl.col("launch_start").is_not_null())
            .select("device_id", "pid", t="launch_start", ns=pl.col("end") - pl.col("start"))
            .collect()
        )
        held = nvtx_steps.held_work(short, ranges, launches)
    gathers = strings.filter(pl.col("value") == steps_mod.GATHER)["id"]
    training = strings.filter(pl.col("value").str.contains(llm_mod.TRAINING))["id"]
    st, occ, two_models = steps_mod.signature_stats(seq, gathers, training)
    st = steps_mod.host_round_trips(st, occ, trips)
    st = steps_mod.marks(st, strings)
    lv = steps_mod.levels(st)
    passes = (
        lv.filter(pl.col("rank") >= 2)
        .group_by("device_id")
        .agg(passes=pl.col("n").filter(pl.col("rank") == 3).max(), most=pl.col("n").max())
    )
    nvc = nvtx_steps.against_passes(nvtx_steps.nvtx_candidates(pats, held), passes)
    nv_pick = nvc.unique("device_id", keep="first", maintain_order=True)
    lv_ = lv.filter(~pl.col("device_id").is_in(nv_pick["device_id"].implode()))
    parts = parts_mod.parts(lv_, occ, steps_mod.key_id(pl.col("anchor")))
    pick = steps_mod.choose_level(lv_, nvtx_steps.part_counts(nv, kernel_ns), parts, two_models)
    pick, agreement = agree(pick, lv, st, seq, two_models)

    keys = lv.select("device_id", "anchor", "a_name", "a_category").unique(["device_id", "anchor"])
    names = steps_mod.labels(out, keys)
    pick = pick.join(names, on=["device_id", "anchor"], how="left")
    anchor = bounds.lead_in(bounds.boundaries(seq, occ, pick, trips), seq)
    chosen = pick.select(
        "device_id",
        "marker",
        "rank",
        "reg",
        "members",
        "marks",
        "n",
        "graph_sigs",
        source=pl.when(pl.col("rank") == 2).then(pl.lit("graph")).otherwise(pl.lit("kernel")),
    )
    # (a GPU's choice has one confidence, given to each of its steps: step_sources')
    chosen = chosen.with_columns(
        confidence=pl.Series(
            [
                steps_mod.confidence(r["rank"], r["reg"], r["members"], r["source"], steps_mod.hedged(r, two_models))
                for r in chosen.iter_rows(named=True)
            ],
            dtype=pl.String,
        )
    )
    anchor = anchor.join(chosen, on="device_id").with_columns(kind_hint=pl.lit(None, pl.String))
    nvs = nvtx_steps.nvtx_steps(nv, nv_pick).with_columns(
        source=pl.lit("nvtx"),
        marker=nvtx_steps.pattern(pl.col("text")),
        confidence=pl.lit("high"),
        kind_hint=nvtx_steps.kind_hint(pl.col("text")),
    )
    cols = ["device_id", "step", "start", "end", "source", "marker", "confidence", "kind_hint"]
    steps = pl.concat([nvs.select(cols), anchor.select(cols)], how="vertical_relaxed").sort(["device_id", "step"])
    steps = steps.with_columns(duration=pl.col("end") - pl.col("start"))
    return steps, sources_table(nvc, nv_pick, lv, pick, agreement, names, two_models)


def agree(
    pick: pl.DataFrame, lv: pl.DataFrame, st: pl.DataFrame, seq: pl.DataFrame, two_models: dict
) -> tuple[pl.DataFrame, dict]:
    """GPUs of one job (the same kernels over overlapping time) use the anchor chosen on the GPU
    with the strongest evidence where it is a candidate on the others too (not for a GPU's rounds
    of two models: two_models). Returns the picks and, per GPU of a job, how they agree."""
    if pick.height < 2:
        return pick, {}
    jobs = job_groups(seq.filter(pl.col("device_id").is_in(pick["device_id"].implode())))
    out = {r["device_id"]: r for r in pick.iter_rows(named=True)}
    notes: dict[int, str] = {}
    for devices in jobs:
        if len(devices) < 2:
            continue
        leader = max(devices, key=lambda d: (out[d]["rank"], out[d]["reg"], -d))
        key = out[leader]["anchor"]
        for d in devices:
            if d == leader or out[d]["anchor"] == key or steps_mod.of_rounds(out[d]["n"], two_models.get(d, (0,))[0]):
                continue
            row = st.filter((pl.col("device_id") == d) & (pl.col("key") == key))
            if row.height:
                new = lv.filter((pl.col("device_id") == d) & pl.col("keys").list.contains(key)).row(0, named=True)
                new.update(anchor=key, n=row["n"][0], reg=row["reg"][0])
                out[d] = new
        counts = {d: out[d]["n"] for d in devices}
        same_key = len({out[d]["anchor"] for d in devices}) == 1
        lo, hi = min(counts.values()), max(counts.values())
        gpus = ", ".join(str(d) for d in sorted(devices))
        if hi <= 1.05 * lo:
            line = f"GPUs {gpus} of one job: " + ("the same anchor, " if same_key else "")
            line += f"{lo:,}" + (f" to {hi:,}" if hi != lo else "") + " steps"
        else:
            line = f"GPUs {gpus} of one job disagree: " + ", ".join(
                f"GPU {d} {counts[d]:,} steps" for d in sorted(devices)
            )
        for d in devices:
            notes[d] = line
    return pl.DataFrame([out[d] for d in sorted(out)], schema=pick.schema), notes


def sources_table(nvc, nv_pick, lv, pick, agreement, labels, two_models) -> pl.DataFrame:
    nv_rows = nvc.select(
        "device_id",
        source=pl.lit("nvtx"),
        marker="pattern",
        occurrences="n",
        regularity=pl.lit(None, pl.Float64),
        host_share=pl.lit(None, pl.Float64),
        members=pl.lit(1),
        marks=pl.lit(None, pl.String),
        rank=pl.lit(4),
    ).join(
        nv_pick.select("device_id", "pattern", chosen=pl.lit(True)),
        left_on=["device_id", "marker"],
        right_on=["device_id", "pattern"],
        how="left",
    )
    lvl = lv.join(labels, on=["device_id", "anchor"], how="left").select(
        "device_id",
        "anchor",
        "level",
        source=pl.when(pl.col("rank") == 2).then(pl.lit("graph")).otherwise(pl.lit("kernel")),
        marker="marker",
        occurrences="n",
        regularity="reg",
        host_share="host",
        members="members",
        marks=pl.col("marks").list.join(",").replace("", None),
        rank="rank",
    )
    lvl = lvl.join(pick.select("device_id", "level", chosen=pl.lit(True)), on=["device_id", "level"], how="left")
    lvl = lvl.drop("anchor", "level")
    out = pl.concat([nv_rows, lvl], how="diagonal_relaxed").with_columns(pl.col("chosen").fill_null(False))
    conf, round_passes = {}, {}
    for r in pick.iter_rows(named=True):
        src = "graph" if r["rank"] == 2 else "kernel"
        n_rounds, others = two_models.get(r["device_id"], (0, 0.0))
        if r["rank"] >= 2 and steps_mod.of_rounds(r["n"], n_rounds):
            round_passes[r["device_id"]] = others
        conf[r["device_id"]] = (
            steps_mod.confidence(r["rank"], r["reg"], r["members"], src, steps_mod.hedged(r, two_models)),
            steps_mod.evidence_text(
                r["rank"], r["marks"], r["host"], r["members"], round_passes.get(r["device_id"]), r["graph_sigs"]
            ),
        )
    for d in nv_pick["device_id"].to_list():
        conf[d] = ("high", "the program's NVTX ranges mark the steps")
    return out.with_columns(
        confidence=pl.when("chosen").then(
            pl.col("device_id").replace_strict(
                {d: c for d, (c, _) in conf.items()}, default=None, return_dtype=pl.String
            )
        ),
        evidence=pl.when("chosen").then(
            pl.col("device_id").replace_strict(
                {d: e for d, (_, e) in conf.items()}, default=None, return_dtype=pl.String
            )
        ),
        agreement=pl.when("chosen").then(
            pl.col("device_id").replace_strict(agreement, default=None, return_dtype=pl.String)
        ),
        round_passes=pl.when("chosen").then(
            pl.col("device_id").replace_strict(round_passes, default=None, return_dtype=pl.Float64)
        ),
    ).sort(["device_id", "chosen", "rank", "occurrences"], descending=[False, True, True, True])


def step_at(frame: pl.DataFrame, t: str, st: pl.DataFrame) -> pl.DataFrame:
    """frame, sorted by its time column t, with the step of its GPU that began last at or
    before t (step; its start s0 and end s1), null before the first."""
    s = st.select("device_id", "step", s0="start", s1="end").sort("s0")
    return frame.sort(t).join_asof(
        s, left_on=t, right_on="s0", by="device_id", strategy="backward", check_sortedness=False
    )


def step_of(g: pl.DataFrame, st: pl.DataFrame) -> pl.Series:
    """The step each gap lies in (its start in the step, its end too), or null; in g's order."""
    out = step_at(g.with_row_index("row"), "start", st).sort("row")
    return out.select(pl.when(pl.col("end") <= pl.col("s1")).then(pl.col("step"))).to_series()


def step_parts(
    st: pl.DataFrame,
    parts: pl.DataFrame,
    busy: pl.DataFrame,
    ops: pl.DataFrame,
    blocking: pl.DataFrame,
) -> pl.DataFrame:
    """Each step's operations, busy time and the split of its time (tables.yaml, steps);
    busy: busy.running_busy(); parts: the parts of its gaps, summed per step (device_id, step, <part>_ns)."""
    if st.height == 0:
        return st.with_columns(
            *[
                pl.lit(0, pl.Int64).alias(c)
                for c in ("busy_ns", "ops", "gpu_ns", "blocked_ns", *[f"{p}_ns" for p in gaps_mod.PARTS])
            ],
            tid=pl.lit(None, pl.Int64),
        )
    st = st.with_columns(busy_ns=busy_mod.busy_between(st.select("device_id", "start", "end"), busy))
    o = ops.select("device_id", t="start").sort("t").with_columns(n=pl.int_range(1, pl.len() + 1).over("device_id"))

    a = (
        st.select("device_id", "step", "start", "end")
        .sort("start")
        .join_asof(
            o,
            left_on="start",
            right_on="t",
            by="device_id",
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .select("device_id", "step", "end", before=pl.col("n").fill_null(0))
    )
    a = a.sort("end").join_asof(
        o,
        left_on="end",
        right_on="t",
        by="device_id",
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    st = st.join(
        a.select("device_id", "step", ops=pl.col("n").fill_null(0) - pl.col("before")), on=["device_id", "step"]
    )
    st = st.join(parts, on=["device_id", "step"], how="left").with_columns(
        *[pl.col(f"{p}_ns").fill_null(0) for p in gaps_mod.PARTS]
    )
    # The step's launching thread, and the GPU busy time while it was blocked in a call.
    lo = step_at(ops.select("device_id", "start", "pid", "tid").filter(pl.col("tid").is_not_null()), "start", st)
    thread = (
        lo.filter(pl.col("step").is_not_null())
        .group_by("device_id", "step", "pid", "tid")
        .agg(n=pl.len())
        .sort(["device_id", "step", "n", "tid"], descending=[False, False, True, False])
        .unique(["device_id", "step"], keep="first", maintain_order=True)
        .select("device_id", "step", tpid="pid", tid="tid")
    )
    st = st.join(thread, on=["device_id", "step"], how="left")
    # Each blocking call cut at the step boundaries it crosses (steps of a GPU are contiguous),
    # kept in the steps whose launching thread made it.
    b = (
        blocking.select("pid", "tid", "device_id", b0="start", b1="end")
        .unique()
        .filter(pl.col("device_id").is_not_null())
    )
    b = step_at(b, "b0", st).rename({"step": "k0"}).drop("s0", "s1")
    b = step_at(b, "b1", st).rename({"step": "k1"}).drop("s0", "s1")
    b = b.with_columns(pl.col("k0").fill_null(pl.col("k1").min().over("device_id"))).filter(pl.col("k1").is_not_null())
    b = b.with_columns(step=pl.int_ranges("k0", pl.col("k1") + 1)).explode("step")
    w = b.join(
        st.select("device_id", "step", "start", "end", "tpid", "tid"),
        left_on=["device_id", "step", "pid", "tid"],
        right_on=["device_id", "step", "tpid", "tid"],
        how="inner",
    )
    w = w.select("device_id", "step", start=pl.max_horizontal("b0", "start"), end=pl.min_horizontal("b1", "end"))
    w = w.filter(pl.col("end") > pl.col("start"))
    if w.height:
        w = w.with_columns(busy=busy_mod.busy_between(w.select("device_id", "start", "end"), busy))
        blocked = w.group_by("device_id", "step").agg(blocked_ns=pl.col("busy").sum())
        st = st.join(blocked, on=["device_id", "step"], how="left")
    else:
        st = st.with_columns(blocked_ns=pl.lit(0))
    return (
        st.with_columns(
            blocked_ns=pl.col("blocked_ns").fill_null(0),
        )
        .with_columns(gpu_ns=pl.col("busy_ns") - pl.col("blocked_ns"))
        .drop("tpid")
    )
