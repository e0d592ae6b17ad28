"""The steps (forward passes) of each GPU's timeline, chosen from scored candidates.

A step is one iteration of the loop that drives the GPU: in LLM serving, one forward pass of
the model. Candidates, per GPU:
- nvtx (nvtx_steps.py): a repeated NVTX range of the program (a serving engine's step range, a range whose
  name says step, decode, prefill, forward, iteration or batch, else the outermost repeated
  range with GPU work; digits in names are ignored). Ranges named for a layer or a block of
  one (layer_3_forward, attention, mlp, LlamaDecoderLayer) are parts of a step, not steps, as
  are ranges that recur PASS_RATIO times as often as the passes that a pass's own kernel or a
  graph replay marks (below), and unnamed ranges that recur MANY_PASSES times less often hold
  many (a request: nvtx_steps.against_passes); a library's own ranges never count; ranges
  whose GPU work overlaps (work enqueued ahead on several streams) cannot partition the
  timeline. The chosen ranges must hold half of the GPU's kernel time
  (a fifth for an engine's own ranges): the work issued on their own thread, or for ranges
  named for a step, the work any thread of the process launched while one was open (a
  training loop's backward is launched by autograd's own thread).
- levels of the work itself: signatures that recur (a kernel by name and launch
  configuration; a step's own kernel, sampling or the embedding lookup, also by name alone
  where its launch dimensions vary with the batch; the embedding lookup by any kernel where
  there are several, as a long prompt's chunks use PyTorch's gather and the decode steps
  index_select's small-index kernel; a CUDA graph, or any graph launch) at a
  regular stride (graph launches that run half of the GPU's kernel time need none: the eager
  work between replays follows the batch), grouped by how often they recur (within 3%). Each
  level is ranked by its evidence of being one forward pass: 3, it holds the step's own
  kernels (the token embedding lookup, or sampling: argmax, multinomial, top-p); 2, it is the
  replay of CUDA graphs; 1, every period holds a round trip to the host (a blocking call or a
  copy to the host), or a sort/top-k kernel; 0, none. The highest rank wins, and within a rank
  the finest level (most occurrences): a layer recurs more often than a step but holds none of
  the step's own kernels, a request less often. A kernel launched back to back with itself is
  no step's own kernel by name (beam search reorders each layer's KV cache with the embedding's
  index_select). Where the embedding lookup wins, a top-k level up to NEAR_LEVEL finer with a
  round trip in every period holds every pass: the prompts' passes looked their tokens up with
  another kernel (beam search ranks its beams with a top-k in each pass). Where two models take
  turns (speculative decoding), the rarer one's passes mark the steps: a round (rounds.py).
Ranks of one job (GPUs running the same kernels over the same time) use one signature, the
one chosen on the GPU with the strongest evidence, when it recurs on all of them.

Where each step begins: bounds.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from nsight_doctor.store.timeline.frames import Writer
from nsight_doctor.store.timeline.load import GRAPH, KERNEL, first_distinct
from nsight_doctor.store.timeline.rounds import ROUND_GRAPH_KEY, graph_occurrences, rounds

MIN_REG = 0.7  # share of periods within 25% of the median period, in operations
BURST_STRIDE = 2  # a launch this many operations after the previous one of its signature is in a burst
MIN_SPAN = 0.5  # share of the GPU's operations between the first and the last occurrence
# CUDA graph replays that run this share of a GPU's kernel time mark its steps however irregular
# their period in operations: the eager work between replays follows the batch (a continuous
# batching scheduler prepares each request's inputs), not the forward pass.
GRAPH_SHARE = 0.5
BY_NAME = ("sampling", "embedding")  # kernel categories also signed by name alone (signature_stats)
NAME_SEED = 7  # (the hash of a name-alone signature)
LEVEL_TOL = 0.03
NEAR_LEVEL = 0.1  # a top-k level this much finer than the embedding lookup's (choose_level)
GATHER = "vectorized_gather_kernel"  # (PyTorch's index_select fast path: lookups())
LOOKUP_LAYERS = 3  # an attention kernel's launches per gather's, at least, for a lookup
STRONG_SAMPLING = re.compile(r"argmax|multinomial|sampl|top_?p|renorm|min_?p|penalt")


@dataclass
class Choice:
    device_id: int
    source: str  # nvtx, graph or kernel
    marker: str  # the NVTX pattern, or the anchor's label
    key: object  # the anchor signature (kernel or graph), or the NVTX pattern
    rank: int
    evidence: str
    confidence: str
    reg: float
    n: int


def sequence(ops: pl.DataFrame) -> pl.DataFrame:
    """The operations steps are counted in: kernels and CUDA graph executions, numbered per GPU
    (seq), each with the idle time before it (pre_gap) and its signatures: sig (kernel name and
    launch configuration, or the graph) and graph_start (the first operation of a graph
    launch: a graph execution, or the first node kernel of one cudaGraphLaunch)."""
    # (only the columns the steps read: a filter copies every column it is given)
    cols = [
        "device_id",
        "start",
        "end",
        "kind",
        "pid",
        "corr",
        "name_id",
        "dn_id",
        "sig",
        "gsig",
        "in_graph",
        "category",
    ]
    s = ops.select(cols).filter(pl.col("kind").is_in([KERNEL, GRAPH]))
    # (a window over (GPU, process, correlation id) has a group per launch: hashing the
    # triple once is six times faster)
    s = s.with_columns(
        pre_gap=(pl.col("start") - pl.col("end").cum_max().shift(1).over("device_id")).clip(lower_bound=0).fill_null(0),
        graph_start=(pl.col("kind") == GRAPH) | (pl.col("in_graph") & first_distinct(s, ["device_id", "pid", "corr"])),
    )
    return s.with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64).over("device_id"))


GRAPH_KEY = 0  # the integer key of "graph launch" (kernel keys are 64-bit hashes)
LOOKUP_KEY = 2  # the key of a token lookup by any of the GPU's lookup kernels
# Keys in words, no kernel's: any graph's launch; where two models' graphs take turns, the
# longer's; the token lookup, whichever kernel ran it.
NAMED_KEYS = {
    GRAPH_KEY: "graph launch",
    ROUND_GRAPH_KEY: "the longer graphs' launch",
    LOOKUP_KEY: "token embedding lookup (any kernel)",
}


def key_name(kid: pl.Expr) -> pl.Expr:
    """A signature's key in words: one of NAMED_KEYS, or its hash as text."""
    return kid.replace_strict(NAMED_KEYS, default=kid.cast(pl.String), return_dtype=pl.String)


def key_id(key: pl.Expr) -> pl.Expr:
    """The integer key (kid) of a key in words."""
    kid = key.cast(pl.UInt64, strict=False)
    return key.replace_strict({v: k for k, v in NAMED_KEYS.items()}, default=kid, return_dtype=pl.UInt64)


def labels(writer: Writer, keys: pl.DataFrame) -> pl.DataFrame:
    """marker for each (device_id, anchor): the kernel's name with its launch dimensions, the
    name alone for a signature by name (its a_name), one graph's launch, or a key named in words
    (steps.NAMED_KEYS)."""
    named = list(NAMED_KEYS.values())
    kernel_keys = keys.filter(~pl.col("anchor").is_in(named))["anchor"].unique().to_list()
    found = pl.DataFrame(schema={"device_id": pl.Int32, "anchor": pl.String, "marker": pl.String})
    if kernel_keys:
        # (compared as numbers: the hash of every kernel in words cost half a second at 2 M)
        wanted = ", ".join(f"{int(k)}::UBIGINT" for k in kernel_keys)
        found = writer.read(
            f"""
            SELECT k.device_id, k.key::VARCHAR AS anchor,
                   any_value(coalesce(s.value, '?') || '<<<(' || k.grid_x || ',' || k.grid_y || ',' || k.grid_z
                             || '),(' || k.block_x || ',' || k.block_y || ',' || k.block_z || ')>>>') AS marker
            FROM (SELECT *, hash(short_name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z) AS key
                  FROM base_kernels) k
            LEFT JOIN base_strings s ON s.id = k.short_name_id
            WHERE k.key IN ({wanted})
            GROUP BY k.device_id, k.key
            """,
        )
    out = keys.join(
        found.with_columns(pl.col("device_id").cast(keys["device_id"].dtype)), on=["device_id", "anchor"], how="left"
    )
    by_name = pl.col("a_name").fill_null("?") + pl.lit(" (any launch dimensions)")
    return out.with_columns(
        marker=pl.when(pl.col("anchor").is_in(named))
        .then(pl.col("anchor"))
        .when(pl.col("a_category").cast(pl.String) == "graph")
        .then(pl.col("a_name").fill_null("a CUDA graph") + pl.lit("'s launch"))
        .otherwise(pl.coalesce(pl.col("marker"), by_name))
    ).drop("a_name", "a_category")


def signature_stats(
    seq: pl.DataFrame, gathers: pl.Series | None = None, training: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[int, tuple[int, float]]]:
    """Per GPU and signature (kernel signatures, and "graph launch"): occurrences, regularity
    of the period and span; the occurrences themselves; and the rounds of two models
    (rounds.py). Occurrences are keyed by an integer (kid: sorting two million strings cost a
    second); the signatures also by key, the same in words. gathers: the name ids of GATHER;
    training: those of training's kernels (llm.TRAINING), for lookups()."""
    dur = pl.col("end") - pl.col("start")
    total = seq.group_by("device_id").agg(
        total=pl.len(),
        graph_share=dur.filter((pl.col("kind") == GRAPH) | pl.col("in_graph")).sum() / dur.sum(),
    )
    cols = ["device_id", "seq", "start", "end", "category", "name_id", "dn_id"]
    # (a graph traced whole is a signature of its own, of category graph: a CUDA graph replay)
    graph = pl.when(pl.col("kind") == GRAPH).then(pl.lit("graph", pl.Categorical)).otherwise("category")
    kern = seq.filter(pl.col("sig").is_not_null()).select(
        *cols[:4], category=graph, name_id="name_id", dn_id="dn_id", kid=pl.col("sig").cast(pl.UInt64)
    )
    if gathers is not None and gathers.len():
        kern = lookups(kern, gathers, training if training is not None else pl.Series([], dtype=gathers.dtype))
    # A step's own kernels (sampling, the embedding lookup) also by name alone, where their
    # launch dimensions vary: with the batch, under continuous batching, so that no single
    # launch recurs once per step.
    # A launch that mostly follows its own previous one (BURST_STRIDE operations on) is a loop
    # over layers or tensors, not a pass's own kernel: beam search reorders each layer's KV
    # cache with the embedding's index_select kernel, 16 launches back to back per step.
    own = kern.filter(pl.col("category").cast(pl.String).is_in(list(BY_NAME)))
    burst = (pl.col("seq").diff() <= BURST_STRIDE).mean().over("device_id", "kid") > 0.5
    own = own.filter(~burst.fill_null(False))
    own = own.with_columns(sig=pl.col("kid"), kid=pl.struct("name_id", "dn_id").hash(NAME_SEED))
    own = own.filter(pl.col("sig").n_unique().over("device_id", "kid") > 1)
    two, two_models = rounds(own, kern, seq)
    # The token lookup by whichever kernel ran it, where a GPU runs it with two or more: a
    # long prompt's chunks look their tokens up with PyTorch's gather, the decode steps with
    # index_select's small-index kernel (chunked prefill). Not in training: its backward's
    # embedding kernel is no lookup.
    train_ids = training if training is not None else pl.Series([], dtype=pl.Int64)
    emb = kern.filter(
        (pl.col("category").cast(pl.String) == "embedding") & ~burst.fill_null(False) & ~trains(train_ids)
    )
    emb = emb.filter(pl.col("name_id").n_unique().over("device_id") > 1).with_columns(kid=pl.lit(LOOKUP_KEY, pl.UInt64))
    own = pl.concat([own.drop("sig"), two, emb], how="vertical_relaxed")
    graphs = graph_occurrences(seq.filter("graph_start"), GRAPH_KEY)
    occ = pl.concat([kern, own, graphs], how="vertical_relaxed")
    occ = occ.with_columns(n=pl.len().over("device_id", "kid")).filter(pl.col("n") >= 3)
    # (the rows are in seq order per GPU in three blocks, launches, names and graphs, that
    # share no key: a stable sort by signature keeps each one's occurrences in seq order, 3x
    # faster than sorting by seq too)
    occ = occ.sort(["device_id", "kid"], maintain_order=True)
    occ = occ.with_columns(stride=pl.col("seq").diff().over("device_id", "kid"))
    st = occ.group_by("device_id", "kid").agg(
        n=pl.len(),
        first=pl.col("seq").min(),
        last=pl.col("seq").max(),
        med=pl.col("stride").median(),
        category=pl.col("category").first(),
        name_id=pl.col("name_id").first(),
        dn_id=pl.col("dn_id").first(),
        gpu_ns=(pl.col("end") - pl.col("start")).sum(),
        reg_hits=((pl.col("stride") - pl.col("stride").median()).abs() <= 0.25 * pl.col("stride").median()).sum(),
    )
    st = st.join(total, on="device_id").with_columns(
        key=key_name(pl.col("kid")),
        reg=pl.col("reg_hits") / (pl.col("n") - 1),
        span=(pl.col("last") - pl.col("first")) / pl.col("total"),
    )
    regular = (pl.col("reg") >= MIN_REG) | ((pl.col("kid") == GRAPH_KEY) & (pl.col("graph_share") >= GRAPH_SHARE))
    return st.filter(regular & (pl.col("span") >= MIN_SPAN)).drop("graph_share"), occ, two_models


def trains(training: pl.Series) -> pl.Expr:
    """Whether the row's GPU runs a kernel of training (training: their name ids; a graph
    traced whole has its graph id for a name id: never a kernel's)."""
    return (pl.col("name_id").is_in(training.implode()) & (pl.col("category") != "graph")).any().over("device_id")


def lookups(kern: pl.DataFrame, gathers: pl.Series, training: pl.Series) -> pl.DataFrame:
    """kern with PyTorch's vectorized gather taken for the token embedding lookup on GPUs where
    the most frequent attention kernel runs at least LOOKUP_LAYERS times as often: once a pass
    before three layers or more, an encoder's or a large batch's lookup (index_select's fast
    path). Where it runs once a layer (a paged KV cache, an MoE layer's tokens), an attention
    kernel runs once or twice as often (split-KV and its combine are two kernels; self- and
    cross-attention one kernel twice): no pass's own kernel. Not in training (kernels of
    training): the lookup begins a forward pass, not the iteration that a loss or an optimizer
    step marks, and taken as the anchor it made the first iteration's head a step of its own
    (train_gpt2). (A graph traced whole has its graph id for a name id: never a kernel's.)"""
    kernel = pl.col("category") != "graph"
    is_gather = pl.col("name_id").is_in(gathers.implode()) & kernel
    n = is_gather.sum().over("device_id")
    per_name = (pl.col("category") == "attention").sum().over("device_id", "name_id")
    attention = per_name.max().over("device_id")
    lookup = is_gather & (LOOKUP_LAYERS * n <= attention) & ~trains(training)
    return kern.with_columns(category=pl.when(lookup).then(pl.lit("embedding", pl.Categorical)).otherwise("category"))


def host_round_trips(st: pl.DataFrame, occ: pl.DataFrame, trips: pl.DataFrame) -> pl.DataFrame:
    """host: the share of each signature's periods that hold a round trip to the host.
    trips: busy.round_trips()."""
    o = occ.join(st.select("device_id", "kid"), on=["device_id", "kid"], how="semi").select("device_id", "kid", "start")
    if trips.height == 0:
        return st.with_columns(host=pl.lit(0.0))
    cum = trips.sort("t").with_columns(k=pl.int_range(1, pl.len() + 1).over("device_id"))
    o = o.sort("start").join_asof(
        cum, left_on="start", right_on="t", by="device_id", strategy="backward", check_sortedness=False
    )
    o = o.with_columns(k=pl.col("k").fill_null(0)).sort(["device_id", "kid", "start"])
    o = o.with_columns(hit=(pl.col("k").diff().over("device_id", "kid") > 0))
    h = o.group_by("device_id", "kid").agg(host=pl.col("hit").sum() / (pl.len() - 1))
    return st.join(h, on=["device_id", "kid"], how="left").with_columns(pl.col("host").fill_null(0.0))


def marks(st: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """mark: what a signature says of a step: embedding, sampling (argmax, multinomial,
    top-p...), graph, sort (a sort or top-k kernel), or null."""
    st = st.join(names.rename({"id": "name_id", "value": "name"}), on="name_id", how="left")
    st = st.join(names.rename({"id": "dn_id", "value": "dn"}), on="dn_id", how="left")
    cat = pl.col("category").cast(pl.String)
    # (a graph's name_id is its graph id)
    graph_id = pl.lit("CUDA graph ") + pl.col("name_id").cast(pl.String)
    is_graph = (cat == "graph") & pl.col("name_id").is_not_null()
    st = st.with_columns(name=pl.when(is_graph).then(graph_id).otherwise("name"))
    low = pl.col("name").fill_null("").str.to_lowercase()
    strong = (cat == "sampling") & (
        low.str.contains(STRONG_SAMPLING.pattern) | pl.col("dn").fill_null("").str.contains("ArgMaxOps")
    )
    return st.with_columns(
        mark=pl.when(cat == "embedding")
        .then(pl.lit("embedding"))
        .when(strong)
        .then(pl.lit("sampling"))
        .when(cat == "graph")
        .then(pl.lit("graph"))
        .when(cat == "sampling")
        .then(pl.lit("sort"))
        .otherwise(pl.lit(None, pl.String))
    )


def levels(st: pl.DataFrame) -> pl.DataFrame:
    """Signatures grouped into levels of about the same count (within LEVEL_TOL), with each
    level's rank (module docstring) and its anchor: of the signatures that mark a step (a
    step's own kernel, the graph launch, a sort), the one that recurs most often, then the one
    that marks it best; without such a signature, the most regular, then the most GPU time."""
    st = st.sort(["device_id", "n"]).with_columns(
        level=(pl.col("n") > pl.col("n").shift(1) * (1 + LEVEL_TOL)).fill_null(True).cum_sum().over("device_id")
    )
    mark_order = pl.col("mark").replace_strict(
        {"sampling": 0, "embedding": 1, "graph": 2, "sort": 3}, default=4, return_dtype=pl.Int64
    )
    lv = st.group_by("device_id", "level").agg(
        members=pl.len(),
        n_max=pl.col("n").max(),
        strong=pl.col("mark").is_in(["embedding", "sampling"]).any(),
        graph=(pl.col("mark") == "graph").any(),
        # (the graphs replayed, one signature each: "graph launch" counts them all)
        graph_sigs=((pl.col("mark") == "graph") & ~pl.col("key").is_in(list(NAMED_KEYS.values()))).sum(),
        weak=(pl.col("mark") == "sort").any() | (pl.col("host") >= 0.9).any(),
        # (a pass's own kernel that another kind of pass launches with other dimensions, such
        # as the embedding lookup of a prefill, recurs a little less often than the sampling
        # of every pass: anchored on it, each prefill would fold into the step before it)
        anchor=pl.col("key")
        .sort_by(
            [
                pl.col("mark").is_null(),
                pl.when(pl.col("mark").is_not_null()).then(-pl.col("n").cast(pl.Int64)).otherwise(0),
                mark_order,
                ~pl.col("key").is_in(list(NAMED_KEYS.values())),  # ("graph launch" before one graph's)
                -pl.col("reg"),
                -pl.col("gpu_ns"),
                pl.col("key"),
            ]
        )
        .first(),
        marks=pl.col("mark").drop_nulls().unique().sort(),
        keys=pl.col("key"),
        host=pl.col("host").max(),
        gemm=(pl.col("category").cast(pl.String) == "gemm").any(),
    )
    lv = lv.with_columns(rank=pl.when("strong").then(3).when("graph").then(2).when("weak").then(1).otherwise(0))
    anchors = st.select(
        "device_id",
        "level",
        anchor="key",
        n="n",
        reg="reg",
        a_mark="mark",
        a_category="category",
        a_name="name",
        a_host="host",
    )
    return lv.join(anchors, on=["device_id", "level", "anchor"], how="left")


def choose_level(
    lv: pl.DataFrame,
    part_counts: dict[int, int],
    parts_: set[tuple[int, object, object]],
    rounds_: dict[int, tuple[int, float]] | None = None,
) -> pl.DataFrame:
    """Per GPU, the level that wins (the module docstring): rank 3, else rank 2, the finest of
    them (for an embedding lookup's rank 3 without sampling, a top-k level up to NEAR_LEVEL
    finer, regular and with a round trip in 90% of its periods, instead); else the finest
    level regular in 90% of its periods (or with a round trip to the host in each, or three
    signatures recurring together) that is not a sub-period of a coarser one, where a level
    that recurs a whole number of times (2 or more) in each period of a coarser level's that
    holds a GEMM (a forward pass's own work, such as the vocabulary projection) is one of its
    parts, a layer (parts.py), and a level of few signatures a little finer than one of many
    is that one's (_also_outside).
    part_counts: per GPU, how often the program's NVTX ranges of one layer or block recur: a
    step holds two or more. rounds_: rounds.rounds() (where two models take turns, the winning
    rank's level at their rounds wins: finer ones are one model's passes). parts_: parts.parts()."""
    rows = []
    for (device,), g in lv.group_by("device_id", maintain_order=True):
        cap = part_counts.get(device)
        cands = [
            r
            for r in g.iter_rows(named=True)
            if (r["rank"] > 0 or r["reg"] >= 0.9 or r["members"] >= 3)
            and (r["n"] >= 4 or r["rank"] >= 1)
            and (cap is None or r["n"] <= cap / 2)
        ]
        best = None
        for rank in (3, 2):
            top = [r for r in cands if r["rank"] == rank]
            if top:
                best = max(top, key=lambda r: (r["n"], r["reg"]))
                break
        n_rounds = (rounds_ or {}).get(device, (0, 0.0))[0]
        in_rounds = [r for r in cands if best is not None and r["rank"] == best["rank"] and of_rounds(r["n"], n_rounds)]
        if best is not None and in_rounds:
            best = max(in_rounds, key=lambda r: (r["n"], r["reg"]))
        elif best is not None and best["rank"] == 2:
            best = graph_cycle(best, cands, list(g.iter_rows(named=True)))
        elif best is not None and best["rank"] == 3 and "sampling" not in best["marks"]:
            # Beam search ranks its beams with a top-k in every pass, where a prompt's pass
            # looks its tokens up with another kernel than a decode step's: the top-k's level,
            # a little finer than the embedding's, holds every pass.
            near = [
                r
                for r in cands
                if r["rank"] == 1
                and "sort" in r["marks"]
                and r["host"] >= 0.9
                and r["reg"] >= 0.9
                and best["n"] < r["n"] <= best["n"] * (1 + NEAR_LEVEL)
            ]
            if near:
                best = min(near, key=lambda r: r["n"])
        if best is None:
            rest = [r for r in cands if r["rank"] <= 1]
            kept = [r for r in rest if not any((device, r["anchor"], c["anchor"]) in parts_ for c in rest)]
            kept = [r for r in kept if not any(_also_outside(r, c) for c in kept)]
            if kept:
                best = max(kept, key=lambda r: (r["n"], r["reg"]))
        if best is not None:
            rows.append(best)
    return pl.DataFrame(rows, schema=lv.schema) if rows else lv.clear()


def graph_cycle(fine: dict, cands: list[dict], rows: list[dict]) -> dict:
    """The level of graph launches `fine`, or where p CUDA graphs replay in turn, once each per
    period with a round trip to the host while the launches' own periods lack one, the graphs'
    level: a pass captured as p graphs (a graph break that launches no GPU work), or one draft
    pass and the target's (speculative decoding with one proposal), replayed back to back.
    rows: the GPU's levels. Every graph must recur as often, give or take a replay cut by the
    capture (a graph that runs once every few passes, such as a stop check, is no part of a
    pass; two levels when a cut graph falls outside LEVEL_TOL)."""
    graphs = [r for r in rows if r["graph_sigs"]]
    p = sum(r["graph_sigs"] for r in graphs)
    if fine["host"] >= 0.9 or p < 2:
        return fine
    turns = [
        c
        for c in cands
        if c["rank"] == 2
        and c["graph_sigs"]
        and c["host"] >= 0.9
        and all(abs(r["n"] - c["n"]) <= 1 + LEVEL_TOL * c["n"] for r in graphs)
        and abs(fine["n"] - p * c["n"]) <= LEVEL_TOL * fine["n"] + p
    ]
    if not turns:
        return fine
    # (the most frequent, where a replay cut by the capture put a graph on a level of its own;
    # all p graphs are the step's)
    return {**max(turns, key=lambda c: (c["n"], c["reg"])), "graph_sigs": p}


def _also_outside(fine: dict, coarse: dict) -> bool:
    """Whether `fine` is a few signatures that recur up to NEAR_LEVEL more often than the many
    of `coarse`, no more regularly: the step's own kernels launched outside the loop too (a
    diffusion pipeline's UNet passes and the image decoder after them both run cuDNN's layout
    transform)."""
    return (
        coarse["n"] < fine["n"] <= coarse["n"] * (1 + NEAR_LEVEL)
        and coarse["members"] >= max(3, 3 * fine["members"])
        and coarse["reg"] >= fine["reg"]
    )


def confidence(rank: int, reg: float, members: int, source: str, rounds_: bool = False) -> str:
    """rounds_: steps that are rounds of graphs traced whole, which a prefill graph mimics, or
    graphs replayed in turn (graph_cycle), which may be one pass or a round of two models."""
    if source == "nvtx":
        return "high"
    if rank == 3:
        return "high" if reg >= 0.9 and members >= 2 else "medium"
    if rank == 2:
        return "high" if reg >= 0.9 and not rounds_ else "medium"
    if rank == 1:
        return "medium" if reg >= 0.9 else "low"
    return "low"


def hedged(level: dict, rounds_: dict[int, tuple[int, float]]) -> bool:
    """Whether a chosen level's steps are rounds of two models (rounds_: rounds.rounds()) or
    CUDA graphs replayed in turn (graph_cycle): confidence's rounds_."""
    in_rounds = level["rank"] >= 2 and of_rounds(level["n"], rounds_.get(level["device_id"], (0, 0.0))[0])
    return in_rounds or (level["rank"] == 2 and level["graph_sigs"] >= 2)


def of_rounds(n: int, n_rounds: int) -> bool:
    """Whether a level that recurs n times is at the rounds of two models."""
    return n_rounds > 0 and n_rounds * (1 - LEVEL_TOL) - 1 <= n <= n_rounds * (1 + LEVEL_TOL) + 1


def evidence_text(
    rank: int, marks_: list[str], host: float, members: int, round_passes: float | None = None, graphs: int = 0
) -> str:
    """round_passes: where the steps are rounds of two models (rounds.py), the other model's
    passes per round; graphs: the CUDA graphs at the chosen level (graph_cycle)."""
    named = {
        "embedding": "the token embedding lookup",
        "sampling": "sampling",
        "graph": "a CUDA graph replay",
        "sort": "a sort or top-k",
    }
    bits = [named[m] for m in named if m in marks_] + (["a round trip to the host"] if host >= 0.9 else [])
    text = "once per period: " + ", ".join(bits) if bits else "a regular period with no step marker"
    if members > 1:
        text += f"; {members} signatures recur with it"
    if round_passes is None and rank == 2 and graphs >= 2:
        text += (
            f"; {graphs} CUDA graphs replayed in turn, each once a step (a pass captured in {graphs} graphs, "
            "or a draft pass and the target's in speculative decoding)"
        )
    if round_passes is not None:
        # (graphs traced whole show no kernel that says what they run: "as in")
        turns = f"two models: one pass of one and {round_passes:.1f} of the other ("
        if rank == 2:
            turns = f"CUDA graphs: one replay of a longer graph and {round_passes:.1f} of shorter ones (as in "
        text += (
            f"; a round of {turns}speculative decoding: a draft model's proposals, checked in one pass of the target)"
        )
    return text
