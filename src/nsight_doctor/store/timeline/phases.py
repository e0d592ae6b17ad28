"""Each GPU's activity window split into phases (tables.yaml, phases, says what each is)."""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline import busy as busy_mod
from nsight_doctor.store.timeline import jobs as jobs_mod
from nsight_doctor.store.timeline.load import GRAPH, KERNEL

IDLE_NS = 100_000_000
STEADY = ["prefill", "decode", "mixed", "steady"]
REGIME_SPREAD = 1.15  # a graph's mean replay over the GPU's median replay, at most, for a regime
# A phase's source: nvtx when all of its steps (or pieces) come from NVTX ranges.
SOURCE = pl.when(pl.col("source").eq("nvtx").all()).then(pl.lit("nvtx")).otherwise(pl.lit("inferred"))


def build(
    busy: pl.DataFrame,
    ops: pl.DataFrame,
    steps: pl.DataFrame,
    gaps: pl.DataFrame,
    llm: set[int],
    batching: bool = False,
    jobs: list[list[int]] | None = None,
    graphs: set[int] | None = None,
) -> pl.DataFrame:
    """The phases table (tables.yaml); batching: a continuous-batching engine was detected;
    jobs: GPUs that are ranks of one job (jobs.job_groups); graphs: GPUs whose every step
    replays a CUDA graph.
    busy: busy.running_busy(); steps: device_id, step, start, end, duration, busy_ns, source, kind_hint;
    gaps: device_id, start, end, duration, cause, setup_ns."""
    act = busy.group_by("device_id").agg(w0=pl.col("start").min(), w1=pl.col("end").max())
    act = act.with_columns(window_ns=pl.col("w1") - pl.col("w0"))
    with_steps = steps["device_id"].unique() if steps.height else pl.Series("device_id", [], pl.Int32)
    no_steps = act.filter(~pl.col("device_id").is_in(with_steps.implode()))
    # Without steps, start-up is what came before the first kernel; a GPU that ran no kernel
    # and few operations did nothing but start-up.
    firsts = ops.group_by("device_id").agg(
        first_kernel=pl.col("start").filter(pl.col("kind").is_in([KERNEL, GRAPH])).min(), nops=pl.len()
    )
    setup_end = no_steps.join(firsts, on="device_id", how="left").select(
        "device_id", e=pl.coalesce("first_kernel", pl.when(pl.col("nops") < 1000).then(pl.col("w1")))
    )

    kernels = _step_kernels(ops, steps)
    # A step's work: its busy time less its collectives' (a rank waiting in an all-reduce for
    # another is busy, not working: tp2 without NVTX once had a "prefill" where GPU 1 waited).
    comm = (
        kernels.filter(pl.col("category").cast(pl.String) == "communication")
        .group_by("device_id", "step")
        .agg(comm_ns=pl.col("dur").sum())
    )
    st = (
        steps.join(comm, on=["device_id", "step"], how="left")
        .with_columns(work_ns=(pl.col("busy_ns") - pl.col("comm_ns").fill_null(0)).clip(lower_bound=0))
        .drop("comm_ns")
        .with_columns(
            med_dur=pl.col("duration").median().over("device_id"),
            med_share=(pl.col("busy_ns") / pl.col("duration").replace(0, None)).median().over("device_id"),
            med_work=pl.col("work_ns").median().over("device_id"),
        )
    )
    novelty = _novelty(kernels, steps)
    warm = st.join(novelty, on=["device_id", "step"], how="left").with_columns(
        pl.col("novel_share").fill_null(0.0), pl.col("novel_body_share").fill_null(0.0)
    )
    # Leading steps that are long and idle, and the steps before the first of those that are
    # all mostly one-time work (a first pass's head alone is a step where the steps begin a
    # little after their anchor). Steps that are all one-time work are a sweep's, not warm-up.
    classic = (pl.col("duration") > 3 * pl.col("med_dur")) & (
        pl.col("busy_ns") / pl.col("duration").replace(0, None) < 0.5 * pl.col("med_share")
    ).fill_null(False)
    head = (2 * pl.col("setup_ns").fill_null(0) >= pl.col("duration")) & (
        pl.col("step") < pl.col("step").filter(classic).min().over("device_id")
    ).fill_null(False)
    warm = warm.sort(["device_id", "step"]).with_columns(warmup=(classic | head).cum_min().over("device_id"))

    first = st.group_by("device_id").agg(
        s0=pl.col("start").min(), e1=pl.col("end").max(), med_dur=pl.col("med_dur").first()
    )
    g = (
        gaps.join(act, on="device_id")
        .join(first, on="device_id", how="left")
        .join(setup_end, on="device_id", how="left")
    )
    idle = g.filter(
        (pl.col("duration") >= IDLE_NS)
        & (
            pl.col("duration")
            >= pl.when(pl.col("med_dur").is_not_null())
            .then(10 * pl.col("med_dur"))
            .otherwise(0.1 * pl.col("window_ns"))
        )
        & (pl.col("start") >= pl.coalesce("s0", "e", "w0"))
    ).select(
        "device_id",
        "start",
        "end",
        name=pl.when(pl.col("cause") == "setup").then(pl.lit("warmup")).otherwise(pl.lit("idle")),
    )
    idle = _keep_recurring_compiles(idle, ops, first, setup_end)

    seg = warm.filter(~pl.col("warmup"))
    seg = _segment(seg, idle)
    seg = seg.with_columns(
        different=(pl.col("novel_share") >= 0.3)
        | (
            (pl.col("work_ns") >= 2 * pl.col("med_work"))
            & (pl.col("work_ns") - pl.col("med_work") >= 0.2 * pl.col("med_dur"))
        )
    )
    leaders = jobs_mod.leaders(jobs or [], steps)
    kinds = _kinds(seg, kernels, llm, batching, leaders, graphs or set())
    kinds = jobs_mod.leaders_kinds(kinds, leaders)
    kinds = kinds.sort(["device_id", "step"]).with_columns(
        run=((pl.col("kind") != pl.col("kind").shift(1)) | (pl.col("segment") != pl.col("segment").shift(1)))
        .fill_null(True)
        .cum_sum()
        .over("device_id")
    )
    kinds = kinds.join(_interrupted(kinds, idle), on=["device_id", "step"], how="left").with_columns(
        pl.col("interrupted").fill_null(False)
    )

    step_phases = pl.concat(
        [
            kinds.group_by("device_id", "run", "kind")
            .agg(start=pl.col("start").min(), end=pl.col("end").max(), source=SOURCE)
            .rename({"kind": "name"}),
            warm.filter("warmup")
            .group_by("device_id")
            .agg(start=pl.col("start").min(), end=pl.col("end").max(), source=SOURCE)
            .with_columns(run=pl.lit(-1, pl.Int64), name=pl.lit("warmup")),
        ],
        how="diagonal_relaxed",
    )
    framed = pl.concat(
        [
            step_phases.select("device_id", "run", "name", "start", "end", "source"),
            # Start-up: from the first operation to the first step (or the end of one-time work).
            act.join(first, on="device_id", how="left")
            .join(setup_end, on="device_id", how="left")
            .with_columns(e=pl.coalesce("s0", "e"))
            .filter(pl.col("e") > pl.col("w0"))
            .select(
                "device_id",
                run=pl.lit(None, pl.Int64),
                name=pl.lit("startup"),
                start="w0",
                end="e",
                source=pl.lit("inferred"),
            ),
            # Without steps: the rest is steady work.
            no_steps.join(setup_end, on="device_id", how="left")
            .with_columns(s=pl.coalesce("e", "w0"))
            .filter(pl.col("w1") > pl.col("s"))
            .select(
                "device_id",
                run=pl.lit(None, pl.Int64),
                name=pl.lit("steady"),
                start="s",
                end="w1",
                source=pl.lit("inferred"),
            ),
            # After the last step, a tail longer than a median step is steady work of its own.
            act.join(first, on="device_id")
            .filter(pl.col("w1") - pl.col("e1") > pl.col("med_dur"))
            .select(
                "device_id",
                run=pl.lit(None, pl.Int64),
                name=pl.lit("steady"),
                start="e1",
                end="w1",
                source=pl.lit("inferred"),
            ),
        ],
        how="vertical_relaxed",
    ).with_columns(id=pl.int_range(pl.len()))
    # A short tail after the last step (drained copies, final kernels) belongs to the last phase.
    framed = (
        framed.join(act.select("device_id", "w1"), on="device_id")
        .join(first.select("device_id", "e1", "med_dur"), on="device_id", how="left")
        .with_columns(
            end=pl.when((pl.col("end") == pl.col("e1")) & (pl.col("w1") - pl.col("e1") <= pl.col("med_dur")))
            .then(pl.col("w1"))
            .otherwise(pl.col("end"))
        )
        .drop("w1", "e1", "med_dur")
    )

    pieces = _cut(framed, idle)
    pieces, step_rows = _piece_steps(pieces, kinds, warm)
    pieces = pl.concat(
        [pieces, idle.select("device_id", "name", "start", "end", source=pl.lit("inferred"))], how="diagonal_relaxed"
    )
    pieces = _first_pass(pieces, idle)
    pieces = _setup_idle(pieces, gaps, no_steps)
    pieces = pieces.filter(pl.col("end") > pl.col("start"))
    pieces = _merge_warmups(pieces, step_rows)
    pieces = pieces.with_columns(busy_ns=_busy_in(pieces, busy))
    return pieces.sort(["device_id", "start", "end"]).select(
        "device_id",
        phase=pl.int_range(1, pl.len() + 1).over("device_id"),
        name="name",
        start="start",
        end="end",
        duration=pl.col("end") - pl.col("start"),
        source="source",
        steps="steps",
        step_ns_median="step_ns_median",
        step_ns_p90="step_ns_p90",
        busy_ns="busy_ns",
        busy_pct=100.0 * pl.col("busy_ns") / (pl.col("end") - pl.col("start")),
        steady=pl.col("name").is_in(STEADY),
    )


def _keep_recurring_compiles(
    idle: pl.DataFrame, ops: pl.DataFrame, first: pl.DataFrame, setup_end: pl.DataFrame
) -> pl.DataFrame:
    """Compile stretches (idle gaps of one-time work) that recur once steady work has begun, each
    followed by repeated work (10 operations or more before the next), are steady-state cost
    (a sweep of shapes, each compiled on its first launch): they are left out of the idle
    stretches, so that they stay inside the steady phases instead of cutting them."""
    begin = first.select("device_id", "s0").join(setup_end, on="device_id", how="full", coalesce=True)
    c = idle.filter(pl.col("name") == "warmup").join(begin, on="device_id", how="left")
    c = c.filter(pl.col("start") >= pl.coalesce("s0", "e", pl.lit(-1)))
    if c.height < 2:
        return idle
    counts = (
        ops.select("device_id", t="start").sort("t").with_columns(k=pl.int_range(1, pl.len() + 1).over("device_id"))
    )
    c = c.sort(["device_id", "start"]).with_columns(next_start=pl.col("start").shift(-1).over("device_id"))

    def ops_before(col: str) -> pl.DataFrame:
        left = c.select("device_id", "start", t=pl.col(col).fill_null(1 << 62)).sort("t")
        j = left.join_asof(counts, on="t", by="device_id", strategy="backward", check_sortedness=False)
        return j.select("device_id", "start", pl.col("k").fill_null(0).alias(col))

    c = c.join(ops_before("end"), on=["device_id", "start"]).join(ops_before("next_start"), on=["device_id", "start"])
    c = c.with_columns(work=pl.col("next_start") - pl.col("end"))
    recurring = c.group_by("device_id").agg(n=pl.len(), busy=(pl.col("work") >= 10).all())
    devices = recurring.filter((pl.col("n") >= 2) & pl.col("busy"))["device_id"]
    drop = c.filter(pl.col("device_id").is_in(devices.implode())).select("device_id", "start")
    return idle.join(drop, on=["device_id", "start"], how="anti")


def _novelty(k: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """novel_share: the share of a step's kernel time in signatures (name and grid, or a graph
    traced whole but for a regime's) that occur in fewer than half of the GPU's steps (k:
    _step_kernels of the steps). By time, not count: a request's last step that gathers its tokens in one small
    kernel is no prompt, and a prefill graph's replay is one, though it is one launch."""
    if k.height == 0:
        return pl.DataFrame(
            schema={"device_id": pl.Int32, "step": pl.Int64, "novel_share": pl.Float64, "novel_body_share": pl.Float64}
        )
    nsteps = steps.group_by("device_id").agg(nst=pl.len())
    k = k.with_columns(in_steps=pl.col("step").n_unique().over("device_id", "gsig")).join(nsteps, on="device_id")
    # A graph that replays in runs (in the step before or after too) and takes about as long
    # as the GPU's other replays is a regime, not a prompt: decode graphs captured per batch
    # size replay in runs as the batch shrinks, and a decode pass reads the same weights at any
    # batch size. A prompt's graph replays once among others, or runs longer.
    g = k.filter("graph").with_columns(
        alike=pl.col("dur").mean().over("device_id", "gsig") <= REGIME_SPREAD * pl.col("dur").median().over("device_id")
    )
    g = g.filter("alike").select("device_id", "gsig", "step").unique()
    near = pl.concat([g.with_columns(step=pl.col("step") + d) for d in (-1, 1)]).unique()
    k = k.join(near.with_columns(regime=pl.lit(True)), on=["device_id", "gsig", "step"], how="left")
    novel = (pl.col("in_steps") < 0.5 * pl.col("nst")) & pl.col("gsig").is_not_null() & pl.col("regime").is_null()
    # (the kernels other than attention and KV-cache writes, whose shapes a decode step's
    # growing cache changes: a prompt's tokens change theirs)
    body = ~pl.col("category").cast(pl.String).is_in(["attention", "attention-unfused", "kv-cache"])
    return k.group_by("device_id", "step").agg(
        novel_share=pl.col("dur").filter(novel).sum() / pl.col("dur").sum().clip(lower_bound=1),
        novel_body_share=pl.col("dur").filter(novel & body).sum()
        / pl.col("dur").filter(body).sum().clip(lower_bound=1),
    )


def _step_kernels(ops: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Kernels and graphs traced whole with the step they start in (gsig: name and grid, null
    when a part is; a graph's, its graph id's hash)."""
    k = (
        ops.lazy()
        .filter(pl.col("kind").is_in([KERNEL, GRAPH]))
        .select(
            "device_id",
            "start",
            "category",
            # (a graph's name_id is its graph id)
            gsig=pl.when(pl.col("kind") == GRAPH)
            .then(pl.col("name_id").hash(GRAPH))
            .otherwise(pl.col("gsig").cast(pl.UInt64)),
            graph=pl.col("kind") == GRAPH,
            dur=pl.col("end") - pl.col("start"),
        )
        .collect()
    )
    s = steps.select("device_id", "step", s_start="start", s_end="end").sort("s_start")
    k = k.sort("start").join_asof(
        s, left_on="start", right_on="s_start", by="device_id", strategy="backward", check_sortedness=False
    )
    return k.filter(pl.col("step").is_not_null() & (pl.col("start") < pl.col("s_end")))


def _segment(seg: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """segment: the number of idle stretches that ended before the step began."""
    ends = (
        idle.select("device_id", t="end")
        .sort("t")
        .with_columns(segment=pl.int_range(1, pl.len() + 1).over("device_id"))
    )
    out = seg.sort("start").join_asof(
        ends, left_on="start", right_on="t", by="device_id", strategy="backward", check_sortedness=False
    )
    return out.with_columns(pl.col("segment").fill_null(0)).drop("t")


def _kinds(
    seg: pl.DataFrame,
    kernels: pl.DataFrame,
    llm: set[int],
    batching: bool,
    leaders: dict[int, int],
    graphs: set[int],
) -> pl.DataFrame:
    """Each non-warm-up step's kind (the phases doc in tables.yaml); kernels: _step_kernels of
    every step. A job's ranks in lockstep (leaders) are judged on the GEMMs of them all."""
    if seg.height == 0:
        return seg.with_columns(kind=pl.lit(None, pl.String))
    k = kernels.join(seg.select("device_id", "step"), on=["device_id", "step"], how="semi")
    job = pl.col("device_id").replace_strict(leaders, default=pl.col("device_id"), return_dtype=pl.Int64)
    gemm = (
        k.filter(pl.col("category").cast(pl.String) == "gemm")
        .with_columns(job=job)
        .with_columns(gemm_mean=pl.col("dur").mean().over("job"))
        .group_by("device_id")
        .agg(pl.col("gemm_mean").first())
    )
    # Steps that sample a token on the GPU (argmax, top-k/top-p, multinomial): generation.
    sampling = k.filter(pl.col("category").cast(pl.String) == "sampling").select("device_id", "step").unique()
    seg = seg.join(sampling.with_columns(samples=pl.lit(True)), on=["device_id", "step"], how="left")
    first_step = pl.col("step").min().over("device_id", "segment")
    # A run of different steps begins with a prefill (a request's prompt) and goes on mixed
    # (prompts beside running decodes); in a continuous-batching engine, only a stretch's first
    # run does: later prompts join running decodes.
    prev_different = pl.col("different").shift(1).over("device_id", "segment", order_by="step").fill_null(False)
    starts_run = pl.col("different") & ~prev_different & ((pl.col("step") == first_step) | pl.lit(not batching))
    # A different step after a run of different steps none of which sampled a token, on a GPU
    # whose steps sample: a long prompt's next chunk (chunked prefill), not prompts beside
    # running decodes, which sample every step. (Not where graphs traced whole hide sampling.)
    sampled = pl.col("samples").fill_null(False).cast(pl.Int64)
    # (a block: a light step and the different steps after it; the different ones' samples)
    seg = seg.with_columns(
        block=(~pl.col("different")).cum_sum().over("device_id", "segment", order_by="step"),
        run_sample=sampled * pl.col("different").cast(pl.Int64),
    )
    run_sampled = pl.col("run_sample").cum_sum() - pl.col("run_sample")
    seg = seg.with_columns(sampled_before=run_sampled.over("device_id", "segment", "block", order_by="step"))
    chunk = (
        pl.col("different")
        & ~starts_run
        & prev_different
        & (pl.col("sampled_before") == 0)
        & (sampled.sum().over("device_id", "segment") > 0)
        & ~pl.col("device_id").is_in(list(graphs))
    )
    later = pl.col("different") & ~starts_run & ~chunk
    seg = seg.with_columns(
        starts_run=starts_run,
        chunk=chunk,
        first_step=first_step,
        first_mixed=pl.col("step").filter(later).min().over("device_id", "segment"),
        last_mixed=pl.col("step").filter(later).max().over("device_id", "segment"),
        first_light=pl.col("step").filter(~pl.col("different")).min().over("device_id", "segment"),
        light_steps=(~pl.col("different")).sum().over("device_id", "segment"),
        sampled_steps=pl.col("samples").fill_null(False).sum().over("device_id", "segment"),
        body_new_steps=(pl.col("novel_body_share") >= 0.3).sum().over("device_id", "segment"),
        different_steps=pl.col("different").sum().over("device_id", "segment"),
        light_share=(pl.col("work_ns") / pl.col("duration").replace(0, None))
        .filter(~pl.col("different"))
        .median()
        .over("device_id", "segment"),
    ).join(gemm, on="device_id", how="left")
    # Recurring different steps with light ones among them: continuous batching, detected or
    # not (decodes running beside prefills). There the light steps are mixed, and so is a later
    # run of different steps: its prompts join the running decodes.
    batched = (
        pl.col("first_mixed").is_not_null()
        & (pl.col("first_light") < pl.col("last_mixed"))
        & (pl.col("different_steps") >= 0.1 * pl.col("light_steps"))
    )
    # Steps whose shapes are mostly new beyond attention and KV-cache writes (a decode step's
    # growing cache changes only theirs; a prompt's tokens change the norms', activations' and
    # GEMMs' too), none of them sampling a token, outside a serving engine: each is a prompt of
    # its own (an encoder or an embedding server padding each batch to its longest text), not
    # prompts joining decodes.
    steps_in = pl.col("different_steps") + pl.col("light_steps")
    prompts = (
        pl.lit(not batching)
        # (a graph traced whole hides its sampling kernel)
        & ~pl.col("device_id").is_in(list(graphs))
        & (3 * pl.col("different_steps") >= 2 * steps_in)
        & (3 * pl.col("body_new_steps") >= 2 * steps_in)
        & (pl.col("sampled_steps") == 0)
    )
    inferred = (
        pl.when(prompts)
        .then(pl.lit("prefill"))
        .when(pl.col("starts_run") & ~(batched & (pl.col("step") != pl.col("first_step"))))
        .then(pl.lit("prefill"))
        .when(pl.col("chunk"))
        .then(pl.lit("prefill"))
        .when(pl.col("different"))
        .then(pl.lit("mixed"))
        .when(batched)
        .then(pl.lit("mixed"))
        # A light step in a stretch that holds prefills is a decode, before the first prefill
        # too: a capture that starts mid-decode (the prefills' large GEMMs would otherwise
        # raise gemm_mean and call the same steps "steady" there and "decode" after).
        .when(pl.col("different_steps") > 0)
        .then(pl.lit("decode"))
        .when(pl.col("gemm_mean") < 30_000)
        .then(pl.lit("decode"))
        .when((pl.col("gemm_mean") >= 100_000) & (pl.col("light_share") >= 0.8))
        .then(pl.lit("prefill"))
        # Alike CUDA graph replays with their GEMMs inside the graph: serving engines replay
        # graphs for decode batches (prompts run eager, or are the different steps above).
        .when(pl.col("gemm_mean").is_null() & pl.col("device_id").is_in(list(graphs)))
        .then(pl.lit("decode"))
        .otherwise(pl.lit("steady"))
    )
    is_llm = pl.col("device_id").is_in(list(llm))
    return seg.with_columns(
        kind=pl.coalesce(pl.col("kind_hint"), pl.when(is_llm).then(inferred).otherwise(pl.lit("steady")))
    )


def _interrupted(kinds: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """interrupted: the step holds an idle stretch (left out of the step times)."""
    j = kinds.select("device_id", "step", "start", "end").join(
        idle.select("device_id", i0="start", i1="end"), on="device_id"
    )
    hit = j.filter((pl.col("i0") >= pl.col("start")) & (pl.col("i1") <= pl.col("end")))
    return hit.select("device_id", "step").unique().with_columns(interrupted=pl.lit(True))


def _cut(framed: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """The phases with the idle stretches inside them cut out."""
    cuts = framed.select("id", "device_id", "start", "end").join(
        idle.select("device_id", i0="start", i1="end"), on="device_id"
    )
    cuts = cuts.filter((pl.col("i0") >= pl.col("start")) & (pl.col("i1") <= pl.col("end"))).select("id", "i0", "i1")
    starts = pl.concat([framed.select("id", s="start"), cuts.select("id", s="i1")]).sort(["id", "s"])
    ends = pl.concat([framed.select("id", e="end"), cuts.select("id", e="i0")]).sort(["id", "e"])
    starts = starts.with_columns(n=pl.int_range(pl.len()).over("id"))
    ends = ends.with_columns(n=pl.int_range(pl.len()).over("id"))
    p = starts.join(ends, on=["id", "n"]).join(framed.drop("start", "end"), on="id")
    return p.select("device_id", "run", "name", start="s", end="e", source="source")


# A phase's steps: how many, and the median and 90th percentile of those not interrupted.
STEP_STATS = [
    pl.len().alias("steps"),
    pl.col("duration").filter(~pl.col("interrupted")).median().alias("step_ns_median"),
    pl.col("duration").filter(~pl.col("interrupted")).quantile(0.9, interpolation="linear").alias("step_ns_p90"),
]


def _piece_steps(pieces: pl.DataFrame, kinds: pl.DataFrame, warm: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each piece's own steps: a step goes with the last piece of its run that begins before
    its last nanosecond. Also returns the steps so placed (device_id, run, p_start: the start
    of their piece, duration, interrupted)."""
    rows = pl.concat(
        [
            kinds.select(
                "device_id", "run", "duration", "interrupted", last_ns=pl.max_horizontal(pl.col("end") - 1, "start")
            ),
            warm.filter("warmup").select(
                "device_id",
                run=pl.lit(-1, pl.Int64),
                duration="duration",
                interrupted=pl.lit(False),
                last_ns=pl.max_horizontal(pl.col("end") - 1, "start"),
            ),
        ],
        how="vertical_relaxed",
    )
    valid = pieces.filter((pl.col("end") > pl.col("start")) & pl.col("run").is_not_null())
    j = (
        rows.sort("last_ns")
        .join_asof(
            valid.select("device_id", "run", p_start="start").sort("p_start"),
            left_on="last_ns",
            right_on="p_start",
            by=["device_id", "run"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("p_start").is_not_null())
    )
    stats = j.group_by("device_id", "run", "p_start").agg(STEP_STATS)
    placed = pieces.join(
        stats, left_on=["device_id", "run", "start"], right_on=["device_id", "run", "p_start"], how="left"
    )
    return placed, j.select("device_id", "run", "p_start", "duration", "interrupted")


def _merge_warmups(pieces: pl.DataFrame, step_rows: pl.DataFrame) -> pl.DataFrame:
    """Warm-up pieces that touch (warm-up steps, the compile stretch after them, work before
    the last compile) are one warm-up phase, with the steps of each (step_rows: _piece_steps')."""
    p = pieces.sort(["device_id", "start", "end"])
    warmup = pl.col("name") == "warmup"
    touching = (
        warmup
        & warmup.shift(1)
        & (pl.col("device_id") == pl.col("device_id").shift(1))
        & (pl.col("start") == pl.col("end").shift(1))
    ).fill_null(False)
    p = p.with_columns(group=(~touching).cum_sum())
    size = pl.len().over("group")
    if p.select(size.max()).item() in (None, 1):
        return pieces
    alone, merged = p.filter(size == 1).drop("group"), p.filter(size > 1)
    stats = (
        step_rows.join(
            merged.select("device_id", "run", "start", "group"),
            left_on=["device_id", "run", "p_start"],
            right_on=["device_id", "run", "start"],
        )
        .group_by("group")
        .agg(STEP_STATS)
    )
    merged = (
        merged.group_by("group")
        .agg(
            pl.col("device_id").first(),
            pl.col("name").first(),
            pl.col("start").min(),
            pl.col("end").max(),
            source=SOURCE,
        )
        .join(stats, on="group", how="left")
        .drop("group")
    )
    return pl.concat([alone, merged], how="diagonal_relaxed")


def _first_pass(pieces: pl.DataFrame, idle: pl.DataFrame) -> pl.DataFrame:
    """The last compile stretch with less steady work before it than its own length: everything
    before it is the first pass (warm-up)."""
    w = idle.filter(pl.col("name") == "warmup")
    if w.height == 0:
        return pieces
    steady_before = w.join(
        pieces.filter(pl.col("name").is_in(STEADY)).select("device_id", ps="start", pe="end"),
        on="device_id",
        how="left",
    )
    steady_before = steady_before.group_by("device_id", "start", "end").agg(
        work=(pl.col("pe") - pl.col("ps")).filter(pl.col("pe") <= pl.col("start")).sum()
    )
    until = (
        steady_before.filter(pl.col("work") < pl.col("end") - pl.col("start"))
        .group_by("device_id")
        .agg(until=pl.col("start").max())
    )
    p = pieces.join(until, on="device_id", how="left")
    return p.with_columns(
        name=pl.when(pl.col("name").is_in(STEADY) & (pl.col("end") <= pl.col("until")))
        .then(pl.lit("warmup"))
        .otherwise(pl.col("name"))
    ).drop("until")


def _setup_idle(pieces: pl.DataFrame, gaps: pl.DataFrame, no_steps: pl.DataFrame) -> pl.DataFrame:
    """Without steps: steady work in which the GPU waited for new code at least half the time is
    warm-up."""
    p = pieces.with_columns(pid=pl.int_range(pl.len()))
    cand = p.filter((pl.col("name") == "steady") & pl.col("device_id").is_in(no_steps["device_id"].implode()))
    if cand.height == 0:
        return pieces
    j = (
        cand.select("pid", "device_id", ps="start", pe="end")
        .join(gaps.filter(pl.col("cause") == "setup").select("device_id", g0="start", g1="end"), on="device_id")
        .filter((pl.col("g0") < pl.col("pe")) & (pl.col("g1") > pl.col("ps")))
    )
    s = j.group_by("pid").agg(setup_ns=(pl.min_horizontal("g1", "pe") - pl.max_horizontal("g0", "ps")).sum())
    p = p.join(s, on="pid", how="left")
    warmup = (pl.col("name") == "steady") & (2 * pl.col("setup_ns").fill_null(0) >= pl.col("end") - pl.col("start"))
    return p.with_columns(name=pl.when(warmup).then(pl.lit("warmup")).otherwise(pl.col("name"))).drop("pid", "setup_ns")


def _busy_in(pieces: pl.DataFrame, busy: pl.DataFrame) -> pl.Series:
    return busy_mod.busy_between(pieces.select("device_id", "start", "end"), busy)
