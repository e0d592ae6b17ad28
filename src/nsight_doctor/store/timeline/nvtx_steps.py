"""Steps from the program's NVTX ranges: the candidate patterns and the steps of the GPUs whose
steps they mark (steps.py's module docstring says how they are chosen against the work's own
signatures).
"""

from __future__ import annotations

import re

import polars as pl

ENGINE = re.compile(r"^execute_context_#\(#\)_generation_#\(#\)$|^\[Executor\] _forward_step|^scheduler\.run_batch$")
STEP_WORDS = re.compile(r"(^|[^a-z])(step|decode|prefill|forward|iter|iteration|batch)([^a-z]|$)")
PART_WORDS = re.compile(
    r"(^|[^a-z])(layer|layers|block|attn|attention|mlp|ffn|moe|expert|experts|head|heads)([^a-z]|$)"
)


PASS_RATIO = 1.5  # ranges per forward pass that no step range has
MANY_PASSES = 3  # passes per range, at least, of a range that holds many (a request's)


def pattern(text: pl.Expr) -> pl.Expr:
    """An NVTX range's pattern: its text with each run of digits as # (step_3 and step_4 are one
    pattern)."""
    return text.fill_null("").str.replace_all(r"[0-9]+", "#")


def words(text: pl.Expr) -> pl.Expr:
    """A pattern in lower case with its CamelCase words apart (DecodeStep says step, MLPBlock
    mlp and block)."""
    split = text.str.replace_all(r"([a-z#])([A-Z])", "${1} ${2}").str.replace_all(r"([A-Z])([A-Z][a-z])", "${1} ${2}")
    return split.str.to_lowercase()


def part_words(text: pl.Expr) -> pl.Expr:
    """The words that say whether a pattern names a part of a step: a CamelCase class name's
    last word (a module hook's LlamaDecoderLayer is a layer, GPT#Block a block, but
    Qwen#MoeForCausalLM a model, not an MoE layer), else all of them."""
    last = text.str.extract(r"([A-Z][a-z0-9#]*)$", 1).str.to_lowercase()
    camel = text.str.contains(r"[a-z#][A-Z]")
    return pl.when(camel & last.is_not_null()).then(last).otherwise(words(text))


def nvtx_patterns(nv: pl.DataFrame, kernel_ns: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and pattern of nv (device_id, range_id, depth, text, gpu_start, gpu_end,
    gpu_time: the program's ranges with GPU work): its ranges' statistics, usable (a repeated
    range that can partition the timeline) and need_ns (the GPU work a step's ranges must hold:
    half of the GPU's kernel time, a fifth for an engine's own ranges)."""
    if nv.height == 0:
        return nv.clear().with_columns(
            pattern=pl.lit(""), priority=pl.lit(0), n=pl.lit(0), usable=pl.lit(False), need_ns=pl.lit(0.0)
        )
    nv = nv.with_columns(pattern=pattern(pl.col("text")))
    low, part = words(pl.col("pattern")), part_words(pl.col("pattern"))
    pats = nv.group_by("device_id", "pattern").agg(
        n=pl.len(),
        depth=pl.col("depth").min(),
        gpu_time=pl.col("gpu_time").sum(),
        # overlapping GPU work: a range's work begins before the previous one's ended
        overlaps=(pl.col("gpu_start").sort_by("gpu_start").shift(-1) < pl.col("gpu_end").sort_by("gpu_start")).sum(),
    )
    pats = pats.with_columns(
        priority=pl.when(pl.col("pattern").str.contains(ENGINE.pattern))
        .then(0)
        .when(part.str.contains(PART_WORDS.pattern))
        .then(9)
        .when(low.str.contains(STEP_WORDS.pattern))
        .then(1)
        .otherwise(2)
    )
    pats = pats.join(kernel_ns, on="device_id", how="left")
    return pats.with_columns(
        usable=(pl.col("n") >= 3) & (pl.col("priority") < 9) & (pl.col("overlaps") <= 0.1 * (pl.col("n") - 1)),
        need_ns=pl.when(pl.col("priority") == 0).then(0.2).otherwise(0.5) * pl.col("kernel_ns"),
    )


def short_of_work(pats: pl.DataFrame) -> pl.DataFrame:
    """device_id, pattern: of nvtx_patterns, the ranges named for a step that would be
    candidates but for the GPU work issued on their own thread (held_work looks at every thread
    of the process)."""
    short = pl.col("usable") & (pl.col("gpu_time") < pl.col("need_ns")) & (pl.col("priority") == 1)
    return pats.filter(short).select("device_id", "pattern")


def held_work(short: pl.DataFrame, ranges: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """device_id, pattern, held_ns: per pattern of `short`, the GPU time of the operations that
    any thread of a range's process launched while a range of the pattern was open. (A training
    loop's backward is launched by autograd's own thread, outside the loop thread's ranges.)
    ranges: pid, start, end, text; launches: device_id, pid, t (the launch call's start), ns."""
    r = ranges.with_columns(pattern=pattern(pl.col("text")))
    r = r.join(short.select("pattern").unique(), on="pattern", how="semi")
    launches = launches.sort("t")
    parts = [
        pl.DataFrame(
            schema=pl.Schema({"device_id": launches.schema["device_id"], "held_ns": pl.Int64(), "pattern": pl.String()})
        )
    ]
    for (name,), rp in sorted(r.partition_by("pattern", as_dict=True).items()):
        spans = rp.select("pid", r0="start", r1="end").sort("r0")
        m = launches.join_asof(spans, left_on="t", right_on="r0", by="pid", strategy="backward", check_sortedness=False)
        got = m.filter(pl.col("t") <= pl.col("r1")).group_by("device_id").agg(held_ns=pl.col("ns").sum())
        parts.append(got.with_columns(pattern=pl.lit(name)))
    return pl.concat(parts, how="vertical_relaxed").join(short, on=["device_id", "pattern"], how="semi")


def nvtx_candidates(pats: pl.DataFrame, held: pl.DataFrame | None = None) -> pl.DataFrame:
    """Of nvtx_patterns, one row per usable pattern and GPU whose ranges hold the work a step
    must, in the order they are preferred. held: device_id, pattern, held_ns (held_work) for
    patterns whose own threads' work is short of it: a range that holds, in time, the launches
    of the GPU's work is a step too."""
    if held is not None and held.height:
        pats = pats.join(held.cast({"device_id": pats.schema["device_id"]}), on=["device_id", "pattern"], how="left")
    else:
        pats = pats.with_columns(held_ns=pl.lit(None, pl.Int64))
    enough = pl.max_horizontal("gpu_time", pl.col("held_ns").fill_null(0)) >= pl.col("need_ns")
    return (
        pats.filter(pl.col("usable") & enough)
        .drop("held_ns")
        .sort(["device_id", "priority", "depth", "gpu_time"], descending=[False, False, False, True])
    )


def against_passes(cands: pl.DataFrame, passes: pl.DataFrame) -> pl.DataFrame:
    """Of nvtx_candidates, those whose count agrees with the forward passes that the kernels
    show where they show them (passes: device_id; passes, the count of a pass's own kernel, the
    embedding lookup or sampling; most, that or the graph replays', whichever is more: a
    graph traced whole hides the lookups of the passes it replays). A range that recurs
    PASS_RATIO times as often as `most` or more marks a part of a pass (a hook on every decoder
    layer, whatever its name); one that recurs MANY_PASSES times less often than `passes`,
    unless its name says step (or an engine's), holds many passes (a request, a generate()
    call). A range named for a step that holds several passes stays: a training step of
    micro-batches, a round of speculative decoding; so does a range a pass where a pass looks
    up tokens and positions (two lookups)."""
    if cands.height == 0 or passes.height == 0:
        return cands
    c = cands.join(passes.cast({"device_id": cands.schema["device_id"]}), on="device_id", how="left")
    n = pl.col("n").cast(pl.Float64)
    finer = (pl.col("priority") >= 1) & (n >= PASS_RATIO * pl.col("most").cast(pl.Float64))
    coarser = (pl.col("priority") >= 2) & (n * MANY_PASSES <= pl.col("passes").cast(pl.Float64))
    return c.filter(~(finer | coarser).fill_null(False)).drop("passes", "most")


def part_counts(nv: pl.DataFrame, kernel_ns: pl.DataFrame) -> dict[int, int]:
    """Per GPU, the count of the most frequent NVTX pattern named for a part of a step (a
    layer, a block, attention) whose ranges hold half of the GPU's kernel time."""
    if nv.height == 0:
        return {}
    p = nv.with_columns(pattern=pattern(pl.col("text")))
    p = p.filter(part_words(pl.col("pattern")).str.contains(PART_WORDS.pattern))
    p = (
        p.group_by("device_id", "pattern")
        .agg(n=pl.len(), gpu_time=pl.col("gpu_time").sum())
        .join(kernel_ns, on="device_id")
    )
    p = p.filter((pl.col("n") >= 2) & (pl.col("gpu_time") >= 0.5 * pl.col("kernel_ns")))
    return {d: n for d, n in p.group_by("device_id").agg(pl.col("n").max()).iter_rows()}


def nvtx_steps(nv: pl.DataFrame, pick: pl.DataFrame) -> pl.DataFrame:
    """The steps of NVTX-chosen GPUs: each range's GPU work, extended to the next one's start."""
    r = nv.with_columns(pattern=pattern(pl.col("text")))
    r = r.join(pick.select("device_id", "pattern"), on=["device_id", "pattern"], how="semi")
    r = r.sort(["device_id", "gpu_start", "gpu_end"]).with_columns(
        step=pl.int_range(1, pl.len() + 1).over("device_id"),
        next_s=pl.col("gpu_start").shift(-1).over("device_id"),
    )
    return r.select(
        "device_id",
        "step",
        start="gpu_start",
        end=pl.when(pl.col("next_s").is_not_null())
        .then(pl.max_horizontal("next_s", "gpu_end"))
        .otherwise(pl.col("gpu_end")),
        text="text",
    )


def by_counts(prefills: pl.Expr, decodes: pl.Expr) -> pl.Expr:
    """decode with no prefill requests in the step, prefill with no decode requests, else
    mixed (the counts as the range's text gives them)."""
    return (
        pl.when(prefills.cast(pl.Int64) == 0)
        .then(pl.lit("decode"))
        .when(decodes.cast(pl.Int64) == 0)
        .then(pl.lit("prefill"))
        .otherwise(pl.lit("mixed"))
    )


def kind_hint(text: pl.Expr) -> pl.Expr:
    """prefill, decode or mixed when a step's NVTX range says so."""
    t = text.fill_null("")
    low = t.str.to_lowercase()
    vllm = t.str.extract(r"^execute_context_([0-9]+)\([0-9]+\)_generation_([0-9]+)\([0-9]+\)$", 1)
    vllm_gen = t.str.extract(r"^execute_context_[0-9]+\([0-9]+\)_generation_([0-9]+)\([0-9]+\)$", 1)
    ctx = t.str.extract(r"_forward_step.*: ([0-9]+) ctx reqs.* [0-9]+ gen reqs", 1)
    gen = t.str.extract(r"_forward_step.*: [0-9]+ ctx reqs.* ([0-9]+) gen reqs", 1)
    return (
        pl.when(vllm.is_not_null())
        .then(by_counts(vllm, vllm_gen))
        .when(ctx.is_not_null())
        .then(by_counts(ctx, gen))
        .when(low.str.contains("prefill|extend|context"))
        .then(pl.lit("prefill"))
        .when(low.str.contains("decode|generation"))
        .then(pl.lit("decode"))
        .otherwise(pl.lit(None, pl.String))
    )
