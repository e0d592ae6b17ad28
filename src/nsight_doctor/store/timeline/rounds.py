"""Rounds of two models that take turns on one GPU: speculative decoding, where a draft model
proposes tokens in passes of its own and the target checks them in one pass. A step of such a
loop is a round (steps.py), not each model's pass: the other model's passes are part of it.
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import GRAPH

# One model's passes this many times longer than another's (in operations, from one embedding
# lookup to the next): two models. A model's prompt passes and decode passes differ by 30% at
# most on every sample; a draft model has a fraction of its target's layers.
MODEL_PASS_RATIO = 2.0
ROUND_SEED = 11  # (the hash of a round's signature)
ROUND_GRAPH_KEY = 1  # the signature of the longer graphs' launches (steps.GRAPH_KEY is 0; kernels' are hashes)
# Without a lookup that says a pass reads tokens (the sampling and graph markers), a round is the
# rarer and longer pass (the target's) after the same number of the other's each round, 2 to
# MAX_PROPOSALS: a draft proposes a few tokens. One model's two picks a pass, a pass captured in
# two graphs, and a request's prefill graph before its decodes' are not rounds.
MAX_PROPOSALS = 10


def rounds(
    own: pl.DataFrame, kern: pl.DataFrame, seq: pl.DataFrame
) -> tuple[pl.DataFrame, dict[int, tuple[int, float]]]:
    """Where two models take turns on a GPU, one's passes between runs of the other's
    (speculative decoding: a draft model proposes tokens, the target checks them in one pass):
    the rarer model's passes as one more signature (a hash with ROUND_SEED; traced whole,
    ROUND_GRAPH_KEY), and per GPU the rounds' count and the other model's passes per round.

    own: the step kernels' launches signed by name (kid), with their launch signatures (sig);
    kern: every kernel launch (seq, category); seq: steps.sequence(), for the graph executions.
    A pass is marked by its token embedding lookup; on a GPU where no lookup tells two models
    apart (a model that indexes its embedding table, whose lookup is an indexing kernel like any
    other), by its sampling kernel (the two models pick their tokens with launches of different
    dimensions: the target one per proposal and one more); else, with CUDA graphs traced whole,
    by each graph's executions (MAX_PROPOSALS)."""
    extra, out = by_marker(own, kern, "embedding")
    rest = own.filter(~pl.col("device_id").is_in(list(out)))
    extra2, out2 = by_marker(rest, kern, "sampling")
    # (graph executions traced whole, signed by graph: no kernel inside them is seen)
    execs = seq.filter((pl.col("kind") == GRAPH) & ~pl.col("device_id").is_in(list(out) + list(out2)))
    extra3, out3 = by_marker(
        graph_occurrences(execs, ROUND_GRAPH_KEY, sig=pl.col("sig").cast(pl.UInt64)), kern, "graph"
    )
    return pl.concat([extra, extra2, extra3], how="vertical_relaxed"), {**out, **out2, **out3}


def graph_occurrences(rows: pl.DataFrame, kid: int, **more: pl.Expr) -> pl.DataFrame:
    """Graph launches (rows of steps.sequence()) as occurrences of the signature kid, in the
    columns of the kernels' (steps.signature_stats): category graph, no names; more columns."""
    return rows.select(
        "device_id",
        "seq",
        "start",
        "end",
        category=pl.lit("graph", pl.Categorical),
        name_id=pl.lit(None, pl.Int64),
        dn_id=pl.lit(None, pl.Int64),
        kid=pl.lit(kid, pl.UInt64),
        **more,
    )


def by_marker(own: pl.DataFrame, kern: pl.DataFrame, marker: str) -> tuple[pl.DataFrame, dict[int, tuple[int, float]]]:
    """rounds() by one kind of pass marker, a category of own's launches.
    The launch dimensions tell the passes apart, and their length (operations to the next
    marker of the same dimensions) the models: one model's prompts and decode steps are within
    MODEL_PASS_RATIO. A marker of a dimension seen less than 3 times (a prompt's) goes by its
    own pass's length. Each model's passes pick a token (a sampling kernel in 90% of them: T5's
    decoder looks up its position bias too, 33 operations before its tokens), and each round
    holds a pass of the other model (90% of them)."""
    emb = own.filter(pl.col("category").cast(pl.String) == marker).sort(["device_id", "kid", "seq"])
    if emb.height == 0:
        return own.drop("sig").clear(), {}
    if marker == "sampling":
        # (a pass ends with its pick: its length runs back to the previous pick)
        emb = emb.with_columns(length=pl.col("seq") - pl.col("seq").shift(1).over("device_id", "kid"), sampled=True)
        emb = emb.sort("seq")
    elif marker == "graph":
        # (a graph's kernels are not seen: its pass's length is its time)
        emb = emb.with_columns(length=pl.col("end") - pl.col("start"), sampled=True).sort("seq")
    else:
        emb = emb.with_columns(length=pl.col("seq").shift(-1).over("device_id", "kid") - pl.col("seq"))
        # (whether a pass picks a token: the first sampling launch at or after its lookup comes
        # before the next lookup)
        picks = kern.lazy().filter(pl.col("category") == "sampling").select("device_id", pick="seq").collect()
        emb = emb.sort("seq").join_asof(
            picks.sort("pick"),
            left_on="seq",
            right_on="pick",
            by="device_id",
            strategy="forward",
            check_sortedness=False,
        )
        emb = emb.with_columns(sampled=pl.col("pick") < pl.col("seq") + pl.col("length")).drop("pick")
    per_sig = emb.group_by("device_id", "kid", "sig").agg(
        n=pl.len(), length=pl.col("length").median(), sampled=pl.col("sampled").mean()
    )
    per_sig = per_sig.filter((pl.col("n") >= 3) & (pl.col("sampled") >= 0.9)).with_columns(
        long=pl.col("length") >= MODEL_PASS_RATIO * pl.col("length").min().over("device_id", "kid")
    )
    extra, out = [], {}
    for (device, kid), g in per_sig.group_by("device_id", "kid", maintain_order=True):
        if device in out or g["long"].all() or not g["long"].any():
            continue
        # (between the two models' typical passes, for a lookup of a rare dimension)
        cut = (g.filter("long")["length"].min() * g.filter(~pl.col("long"))["length"].max()) ** 0.5  # type: ignore[operator]
        lookups = emb.filter((pl.col("device_id") == device) & (pl.col("kid") == kid))
        lookups = lookups.join(g.select("sig", "long"), on="sig", how="left")
        lookups = lookups.with_columns(long=pl.coalesce("long", pl.col("length") >= cut).fill_null(False))
        if marker == "graph" and lookups.group_by("long").agg(pl.col("sig").n_unique())["sig"].max() != 1:
            # (a draft model's pass is one graph, and the target's another; graphs of many
            # lengths in a cycle are one pass's pieces, as in vLLM's piecewise graphs)
            continue
        n_long = int(lookups["long"].sum())
        rare_long = n_long <= lookups.height - n_long
        rare = lookups.filter(pl.col("long") == rare_long).drop("sampled")
        # (the other model's lookups in each round, between one rare pass and the next)
        per_round = lookups.with_columns(r=pl.col("seq").is_in(rare["seq"].implode()).cum_sum())
        others = per_round.filter(pl.col("r") > 0).group_by("r").agg(n=pl.len() - 1).sort("r").head(-1)["n"]
        if others.len() < 3 or (others >= 1).mean() < 0.9:  # type: ignore[operator]
            continue
        if marker != "embedding":
            # (a server's two batch-size graphs also differ in length, but take turns as the
            # batches come: a draft proposes as many tokens every round)
            usual = int(others.mode().min())  # type: ignore[arg-type]
            if not (rare_long and 2 <= usual <= MAX_PROPOSALS and (others == usual).mean() >= 0.9):  # type: ignore[operator]
                continue
        # (graphs' rounds keep their key, ROUND_GRAPH_KEY: steps names it in words)
        kid = pl.col("kid") if marker == "graph" else pl.col("kid").hash(ROUND_SEED)
        extra.append(rare.drop("length", "long", "sig").with_columns(kid=kid))
        out[device] = (rare.height, (lookups.height - rare.height) / rare.height)
    return (pl.concat(extra) if extra else own.drop("sig").clear()), out
