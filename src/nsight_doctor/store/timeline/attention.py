"""Attention computed as separate kernels, found by its shape on each stream: a GEMM (Q times
K), a few elementwise passes (scale, mask, cast), a softmax, a few more (cast, dropout, the
SDPA math path's checks) and a second, different GEMM (P times V), with nothing else between.

A name cannot say this: the math path of PyTorch's SDPA and hand-written (eager) attention run
cuBLAS GEMMs, `elementwise_kernel` and `cunn_SoftMaxForward`, which alone are a GEMM, an
elementwise kernel and a reduction. The pattern is strict where look-alikes differ: the two
GEMMs are not the same kernel with the same launch (a loop of GEMM then softmax repeated: the
"second" GEMM is the next iteration's), and no random-number kernel sits between them (a
loop of randn, randn, GEMM, softmax: those are not a scale and a mask).
"""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import KERNEL

# At most this many kernels on each side of the softmax before the GEMM: eager attention puts
# one to four (scale, mask, cast); SDPA's math path up to nine after it (cast, dropout,
# the check for fully masked rows).
MAX_BETWEEN = 12
SOFTMAX = r"(?i)softmax"
RANDOM = r"(?i)distribution_|normal_kernel|uniform_kernel|curand|randn|randperm|random_"
BETWEEN_OK = ["elementwise", "reduction", "attention-unfused"]
PER_STEP = 1.5  # chains per step, on average, for attention (one per layer)


def chains(ops: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """The chains: device_id, stream_id, chain (numbered per GPU from 1), the row range of
    their kernels in `ops` (first_idx .. last_idx: the two GEMMs and everything between, as
    ops' idx), and the softmax's name id. ops: load.load_ops' frame."""
    soft = names.filter(pl.col("value").str.contains(SOFTMAX))["id"].implode()
    rand = names.filter(pl.col("value").str.contains(RANDOM))["id"].implode()
    k = (
        ops.lazy()
        .filter(pl.col("kind") == KERNEL)
        .select(
            "device_id",
            "stream_id",
            "idx",
            "start",
            "sig",
            "name_id",
            cat=pl.col("category").cast(pl.String),
            softmax=pl.col("name_id").is_in(soft)
            & pl.col("category").cast(pl.String).is_in(["reduction", "attention-unfused"]),
            rand=pl.col("name_id").is_in(rand),
        )
        .collect()
    )
    streams = k.filter("softmax").select("device_id", "stream_id").unique()
    empty = pl.DataFrame(
        schema={
            "device_id": k.schema["device_id"],
            "stream_id": k.schema["stream_id"],
            "chain": pl.Int64,
            "first_idx": pl.Int64,
            "last_idx": pl.Int64,
            "softmax_id": pl.Int64,
        }
    )
    if streams.height == 0:
        return empty
    k = k.join(streams, on=["device_id", "stream_id"], how="semi").sort("device_id", "stream_id", "start", "idx")
    g = ["device_id", "stream_id"]
    gemm = pl.col("cat") == "gemm"
    k = k.with_columns(
        rn=pl.int_range(pl.len(), dtype=pl.Int64),
        # kernels that may not sit between the GEMMs, counted so far (the GEMMs themselves too)
        bad=(~pl.col("cat").is_in(BETWEEN_OK) | pl.col("cat").is_null() | pl.col("rand")).cast(pl.Int64).cum_sum(),
    )
    k = k.with_columns(
        before=pl.when(gemm).then(pl.col("rn")).shift(1).forward_fill().over(g),
        after=pl.when(gemm).then(pl.col("rn")).shift(-1).backward_fill().over(g),
    )
    sm = k.filter(
        pl.col("softmax")
        & pl.col("before").is_not_null()
        & pl.col("after").is_not_null()
        & (pl.col("rn") - pl.col("before") <= MAX_BETWEEN + 1)
        & (pl.col("after") - pl.col("rn") <= MAX_BETWEEN + 1)
    )
    if sm.height == 0:
        return empty
    at = k.select("bad", "sig", "idx")  # row rn of k: gathered by the rows before and after
    b, a = at[sm["before"]], at[sm["after"]]
    last_between = at[sm["after"] - 1]
    ok = (last_between["bad"] == b["bad"]) & (b["sig"] != a["sig"])
    found = pl.DataFrame(
        {
            "device_id": sm["device_id"],
            "stream_id": sm["stream_id"],
            "first_idx": b["idx"],
            "last_idx": a["idx"],
            "softmax_id": sm["name_id"],
        }
    ).filter(ok)
    # One chain per pair of GEMMs, however many softmaxes sit between them.
    found = found.group_by("device_id", "stream_id", "first_idx", "last_idx").agg(pl.col("softmax_id").min())
    found = found.sort("device_id", "first_idx").with_columns(
        chain=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("device_id")
    )
    return found.select(empty.columns).cast(empty.schema)


def per_layer(found: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The chains of GPUs where they recur as attention does, once per layer: more than once
    per step on average where steps were found (a sampling softmax between the vocabulary
    projection and the next step's first GEMM comes once per step), at least twice without."""
    per = found.group_by("device_id").agg(n=pl.len())
    if steps.height:
        per = per.join(steps.group_by("device_id").agg(steps=pl.len()), on="device_id", how="left")
    else:
        per = per.with_columns(steps=pl.lit(None, pl.UInt32))
    recurs = pl.col("n") >= PER_STEP * pl.col("steps")
    keep = per.filter(pl.when(pl.col("steps").is_not_null()).then(recurs).otherwise(pl.col("n") >= 2))
    # (a GPU's chains are kept or left out together: their numbers stand)
    return found.join(keep.select("device_id"), on="device_id", how="semi")


def members(ops: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """Every kernel of every chain: device_id, idx (ops' row) and chain. A GEMM that ends one
    chain and begins the next is the later one's."""
    device: pl.DataType = found.schema["device_id"]
    schema = pl.Schema([("device_id", device), ("idx", pl.Int64()), ("chain", pl.Int64())])
    if found.height == 0:
        return pl.DataFrame(schema=schema)
    k = ops.select("device_id", "stream_id", "idx", "kind").filter(pl.col("kind") == KERNEL).drop("kind")
    k = k.join(found.select("device_id", "stream_id").unique(), on=["device_id", "stream_id"], how="semi")
    # The chains of a stream do not overlap: each kernel's is the last one begun by it.
    m = k.sort("idx").join_asof(
        found.select("device_id", "stream_id", "chain", "first_idx", "last_idx").sort("first_idx"),
        left_on="idx",
        right_on="first_idx",
        by=["device_id", "stream_id"],
        strategy="backward",
        check_sortedness=False,  # (both sorted by idx, so within each stream too)
    )
    return m.filter(pl.col("idx") <= pl.col("last_idx")).select("device_id", "idx", "chain").cast(schema)


def table(ops: pl.DataFrame, found: pl.DataFrame, member: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """attention_chains (tables.yaml): each chain's span, GEMM time and time between."""
    k = ops.select("device_id", "idx", "start", "end", "name_id").join(member, on=["device_id", "idx"])
    spans = found.select("device_id", "chain", "first_idx", "last_idx", "stream_id", "softmax_id")
    k = k.join(spans, on=["device_id", "chain"])
    gemm = (pl.col("idx") == pl.col("first_idx")) | (pl.col("idx") == pl.col("last_idx"))
    dur = pl.col("end") - pl.col("start")
    per = k.group_by("device_id", "chain").agg(
        stream_id=pl.col("stream_id").first(),
        start=pl.col("start").min(),
        end=pl.col("end").max(),
        kernels=pl.len(),
        gemm_ns=dur.filter(gemm).sum(),
        between_ns=dur.filter(~gemm).sum(),
        softmax_id=pl.col("softmax_id").first(),
        qk_id=pl.col("name_id").filter(pl.col("idx") == pl.col("first_idx")).first(),
        pv_id=pl.col("name_id").filter(pl.col("idx") == pl.col("last_idx")).first(),
    )
    n = names.select(pl.col("id"), pl.col("value"))
    for col, out in (("softmax_id", "softmax"), ("qk_id", "qk_gemm"), ("pv_id", "pv_gemm")):
        per = per.join(n.rename({"id": col, "value": out}), on=col, how="left")
    return per.sort("device_id", "chain")
