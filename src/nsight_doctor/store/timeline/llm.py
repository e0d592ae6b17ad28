"""Which GPUs run a language model: only their steps get LLM phase names (prefill, decode,
mixed) and LLM advice; the others' steady work is `steady`."""

from __future__ import annotations

import polars as pl

from nsight_doctor.store.timeline.load import KERNEL

LLM_FRAMEWORKS = ["vllm", "sglang", "tensorrt-llm", "transformers"]
BATCHING_ENGINES = ["vllm", "sglang", "tensorrt-llm"]
TRAINING = r"(?i)backward|bwd|_grad|dgrad|wgrad|adam|optimizer|sgd_"
# A GPU whose kernel time is CONV_SHARE or more convolutions (cuDNN's and PyTorch's; not cuDNN's
# SDPA, which says fprop too) runs a convolutional network (a UNet), not a language model.
CONVOLUTION, CONV_SHARE = r"(?i)convolve|winograd|(fprop|dgrad|wgrad)_implicit_gemm|nhwckrsc|conv[23]d|convolution", 0.1
# A token lookup: the embedding kernels, PyTorch's gather (what nn.Embedding runs since 2.x),
# a kernel named for an embedding (Inductor fuses the lookup into the first norm) and
# llama.cpp's get_rows. A language model's forward passes read their tokens so (unless a CUDA
# graph hides it); a transformer over image patches (a ViT, most diffusion transformers) does
# not, and its argmax over classes looks like sampling.
LOOKUP, LOOKUP_SHARE = r"(?i)vectorized_gather_kernel|get_rows|embedding|index_?select", 0.5
NOT_LOOKUP = r"(?i)backward|_bag"


def llm_devices(
    ops: pl.DataFrame,
    steps: pl.DataFrame,
    names: pl.DataFrame,
    framework: str,
    evidence: str | None,
    token_steps: set[int],
    graph_steps: set[int],
    jobs: list[list[int]] | None = None,
) -> set[int]:
    """GPUs whose steps are LLM forward passes: a serving framework was detected (by more than
    an environment variable's name, or by that and steps that are CUDA graph replays), an NVTX
    range names the step kind, the steps are token-shaped (each holds sampling or a token
    embedding lookup: token_steps) and LOOKUP_SHARE of them or more read tokens (a token lookup)
    or are CUDA graph replays, or that share reads tokens and their kernels hold attention or an
    embedding lookup, GEMMs and few convolutions; never with a backward pass or optimizer
    (Trainer is transformers too). The ranks of one job (jobs.job_groups) read tokens where one
    of them does: under pipeline parallelism only the first stage looks them up."""
    devices = set(steps["device_id"].unique().to_list()) if steps.height else set()
    hinted = set(steps.filter(pl.col("kind_hint").is_not_null())["device_id"].unique().to_list())
    k = (
        ops.select("device_id", "start", "end", "kind", "name_id", "category")
        .filter(pl.col("kind") == KERNEL)
        .join(steps.group_by("device_id").agg(s0=pl.col("start").min(), s1=pl.col("end").max()), on="device_id")
        .filter((pl.col("start") >= pl.col("s0")) & (pl.col("start") < pl.col("s1")))
        # (the names' tests on each distinct kernel, not on millions of launches)
        .group_by("device_id", "name_id", "category")
        .agg(ns=(pl.col("end") - pl.col("start")).sum())
    ).join(names.rename({"id": "name_id", "value": "kname"}), on="name_id", how="left")
    cat = pl.col("category").cast(pl.String)
    per = k.group_by("device_id").agg(
        forward=cat.is_in(["attention", "attention-unfused", "embedding"]).any(),
        gemm=(cat == "gemm").any(),
        training=pl.col("kname").fill_null("").str.contains(TRAINING).any(),
        conv=pl.col("ns").filter(pl.col("kname").str.contains(CONVOLUTION)).sum() / pl.col("ns").sum().clip(1),
    )
    training = set(per.filter("training")["device_id"].to_list())
    kname = pl.col("kname").fill_null("")
    lookups = k.filter((cat == "embedding") | (kname.str.contains(LOOKUP) & ~kname.str.contains(NOT_LOOKUP)))
    reading = _reading_tokens(ops, steps, lookups)
    reading |= {d for group in jobs or [] if reading & set(group) for d in group}
    # (a lookup replayed inside a CUDA graph is not in a capture that traced whole graphs)
    token_steps = token_steps & (reading | graph_steps)
    if framework in LLM_FRAMEWORKS:
        if not (evidence or "environment").startswith("environment"):
            return devices - training
        token_steps = token_steps | graph_steps
    found = per.filter(pl.col("forward") & pl.col("gemm") & (pl.col("conv") < CONV_SHARE))
    return devices & (((set(found["device_id"].to_list()) & reading) | hinted | token_steps) - training)


def _reading_tokens(ops: pl.DataFrame, steps: pl.DataFrame, lookups: pl.DataFrame) -> set[int]:
    """GPUs of which LOOKUP_SHARE of the steps or more launch a token lookup (lookups: its
    kernels' device_id and name_id)."""
    if not steps.height or not lookups.height:
        return set()
    at = (
        ops.select("device_id", "name_id", "start", "kind")
        .filter(pl.col("kind") == KERNEL)
        .join(lookups.select("device_id", "name_id"), on=["device_id", "name_id"], how="semi")
        .select("device_id", at="start")
        .sort("device_id", "at")
    )
    first = steps.select("device_id", "start", "end").sort("device_id", "start")
    first = first.join_asof(
        at, left_on="start", right_on="at", by="device_id", strategy="forward", check_sortedness=False
    )
    share = first.group_by("device_id").agg(share=(pl.col("at") < pl.col("end")).fill_null(False).mean())
    return set(share.filter(pl.col("share") >= LOOKUP_SHARE)["device_id"].to_list())
