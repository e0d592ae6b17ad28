"""The timeline model on real captures whose workloads measured themselves (samples/*/facts.json):
steps that are the model's forward passes, ranks of one job that agree, and each step's time
split by what bounded it, checked against the workloads' own counts and clocks and against the
independent oracle (tests/oracle.py: plain Python over the raw export).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import re
import shutil
import sqlite3
import statistics

import polars as pl
import pytest

import oracle
from conftest import CORPUS, SAMPLES, cropped, requires_corpus, unxz
from nsight_doctor import analyze, store
from nsight_doctor.model import Diagnosis

PARTS = ("gpu_ns", "blocked_ns", "launch_ns", "queued_ns", "sync_ns", "cpu_ns", "api_ns", "setup_ns")
LLM_PHASES = {"prefill", "decode", "mixed"}


def export_of(name: str):
    folder = SAMPLES / name
    return next(p for p in sorted(folder.iterdir()) if p.name.endswith((".sqlite", ".sqlite.xz")))


def facts(name: str) -> dict:
    return json.loads((SAMPLES / name / "facts.json").read_text())


_CACHE: dict[str, Diagnosis] = {}


def diagnosis(name: str) -> Diagnosis:
    if name not in _CACHE:
        _CACHE[name] = analyze([export_of(name)])
    return _CACHE[name]


def steps_of(path) -> dict[int, list[tuple]]:
    """Each GPU's steps (step, start, end, source, marker, confidence) from a store built from path."""
    built = store.build([path])
    try:
        con = built.connect()
        out: dict[int, list[tuple]] = {}
        for row in con.execute(
            'SELECT device_id, step, start, "end", source, marker, confidence FROM steps ORDER BY device_id, step'
        ).fetchall():
            out.setdefault(row[0], []).append(row[1:])
        return out
    finally:
        built.close()


def finding(d: Diagnosis, rule_id: str):
    return next((f for f in d.findings if f.rule_id == rule_id), None)


# Steps are the model's forward passes, counted as the workload counted them ----------------------

# sample: the workload's own count of forward passes (or steps, graph replays, timed launches)
COUNTS = {
    "hf_requests": "forwards",  # 3 generate() requests: 144 passes, not 3 (or 4) calls
    "hf_cb_graph_trace": "graph_replays",  # every replay, whichever of the 4 graphs it replays
    "stream_python": "steps",
    "stream_sleep": "steps",
    "triton_sweep": "launches",  # a benchmark's timed launches, not one per shape
    "hf_prefill_math": "passes",  # 3 passes, not the 24 layers
    "hf_prefill_flash": "passes",
    "hf_cat_cache16": "forwards",
    "hf_cb_eager": "steps",  # continuous batching without graphs: every step's launches differ
    "hf_cb_graphs_varied": "graph_replays",  # the eager work between replays follows the batch
    "hf_bigbatch": "forwards",  # the GPU busy 86%: prefills of 940 ms beside decode steps of 29 ms
    "t5_generate": "forwards",  # an encoder-decoder: one step per decoder pass
    "hf_compiled": "forwards",  # a compiled forward: one graph replay per token, eager work around it
    "hf_beam": "forwards",  # beam search: the KV cache reordered by the embedding's kernel, 16 times a pass
    "hf_inductor": "forwards",  # a compiled forward launched kernel by kernel (no graphs)
    "hf_ngram": "forwards",  # n-gram blocking: Python after a read-back, every pass
    "hf_server": "forwards",  # batch-1 requests after sleeps: the sleeps are between steps
    "hf_assisted_defaults": "forwards",  # speculative decoding, one draft pass a round: rounds, not passes
    "train_loader": "iterations",  # training that waits for its DataLoader, its backward on autograd's thread
    "hf_trainer_loader": "iterations",  # HF Trainer: a training step per step, its DataLoader keeping up
    "sd_diffusion": "unet_passes",  # latent diffusion: a step per denoising pass, not per image
    "train_accum": "micro_batches",  # gradient accumulation: a step per forward and backward
    "hf_offload": "forwards",  # layers offloaded to the host: their uploads wait inside every pass
    "hf_offload_sampled": "forwards",
    "hf_emit_nvtx": "forwards",  # an NVTX range per operator (emit_nvtx): none of them a step
    "dit_diffusion": "dit_passes",  # a diffusion transformer: a step per denoising pass
    "vit_classify": "forwards",  # a ViT serving batches: a step per forward pass
    "hf_empty_cache": "forwards",  # the allocator's cache emptied before every pass
    "prefetch_pipeline": "steps",  # uploads a step ahead on a side stream, results read two steps late
    "hf_piecewise_graphs": "forwards",  # 11 graph replays a pass, eager attention between them
    "hf_streamer_thread": "forwards",  # generate() in a worker thread, the main thread streaming
    "spec_graphs": "rounds",  # speculative decoding, both models' graphs traced whole: rounds
    "spec_graphs_node": "rounds",  # the same traced node by node: rounds, not both models' argmaxes
    "hf_no_alloc_cache": "forwards",  # PyTorch's caching allocator off
    "split_graphs": "steps",  # a pass in two CUDA graphs replayed back to back: one step, not two
    "spec_graphs_k1": "rounds",  # one draft pass a round, both models' graphs traced whole
    "graph_prefill_decode": "forwards",  # a prefill graph, then 31 decode replays a request
    "jacobi_solver": "iterations",  # a heat solver: an iteration a step, not the checks every 25
    "embed_server": "batches",  # an encoder's batches: a step per pass, not per layer
    "async_overlap": "steps",  # asynchronous scheduling: each wait is for the step before
    "graph_buckets": "steps",  # CUDA graphs per batch-size bucket, the batch shrinking
    "rag_requests": "decoder_passes",  # an encoder pass and a search, then 24 decoder passes a request
    "spin_wait": "steps",  # a graph replay a step, waited for by polling an event
    "poll_sleep": "steps",  # the same, asleep between polls
    "layer_nvtx": "forwards",  # an NVTX range on every decoder layer: 8 a pass, none a step
    "request_ranges": "steps",  # continuous batching by hand, each request an NVTX start/end range
    "hf_kv_offload": "forwards",  # the KV cache in host memory, copied in and out layer by layer
    "hf_flex_attn": "forwards",  # flex attention: Triton attention kernels, a block mask every pass
    "hf_chunked_prefill": "forwards",  # a prompt's chunks looked up with one kernel, decode steps another
    "hf_prompt_lookup": "forwards",  # prompt lookup decoding: a pass a round
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_steps_are_the_workloads_forward_passes(name):
    got = steps_of(export_of(name))
    assert list(got) == [0]
    assert len(got[0]) == facts(name)[COUNTS[name]]


def test_speculative_decoding_in_cuda_graphs_steps_are_rounds(tmp_path):
    """spec_graphs: a 2-layer draft model's graph replayed 4 times a round, then a 16-layer
    target's graph once, then one read of the number accepted. Traced whole, the replays by
    graph (SQL over the export) are the workload's 192 and 48; traced node by node, the two
    models' argmaxes differ by grid. The steps are the 48 rounds, as far apart as the target's
    passes, all decode; not every replay, and not graph pieces for launch-bound."""
    f = facts("spec_graphs")
    for name, sql in (
        ("spec_graphs", "SELECT start FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE graphId = ?"),
        (
            "spec_graphs_node",
            """SELECT k.start FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
               JOIN x.StringIds d ON d.id = k.demangledName
               WHERE s.value = 'reduce_kernel' AND d.value LIKE '%ArgMax%' AND k.gridX = ?""",
        ),
    ):
        src = unxz(export_of(name), tmp_path)
        con = oracle.open_export(src)
        if name == "spec_graphs":
            by = con.execute(
                "SELECT graphId, count(*) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE GROUP BY 1 ORDER BY 2"
            ).fetchall()
            assert [n for _, n in by] == [f["target_replays"], f["draft_replays"]] == [48, 192]
            key = by[0][0]
        else:
            key = 5  # (the target's argmax: one pick per proposal and one more)
            assert len(con.execute(sql, (1,)).fetchall()) == f["draft_replays"]
        target = sorted(r[0] for r in con.execute(sql, (key,)).fetchall())
        assert len(target) == f["rounds"] == 48
        got = steps_of(src)
        assert len(got[0]) == f["rounds"]
        ours = [s[2] - s[1] for s in got[0]]
        apart = [b - a for a, b in itertools.pairwise(target)]
        assert statistics.median(ours) == pytest.approx(statistics.median(apart), rel=0.02)
        d = analyze([src])
        g = d.summary.steady_gpus[0]
        assert g.step_source is not None and "and 4.0 of" in (g.step_source.evidence or "")
        # (traced whole, a request's prefill graph before a few decode replays would look alike)
        assert g.step_source.confidence == ("medium" if name == "spec_graphs" else "high")
        assert {p.name for p in d.summary.phases if p.steps} == {"decode"}
        # (traced whole, the graphs run 99% of the work: no launch-bound; node by node, the
        # eager work between replays, but not a step in pieces)
        launch = finding(d, "launch-bound")
        assert (launch is None) == (name == "spec_graphs")
        assert launch is None or not launch.evidence["pieces"]
        built = store.build([src])
        try:
            chosen = built.connect().execute("SELECT round_passes FROM step_sources WHERE chosen").fetchall()
        finally:
            built.close()
        assert chosen == [(4.0,)]


@pytest.mark.parametrize("name", ["split_graphs", "spec_graphs_k1"])
def test_cuda_graphs_replayed_in_turn_are_one_step_a_turn(name, tmp_path):
    """split_graphs: a pass captured as two graphs (8 layers, then 8 with the head), replayed
    back to back, its token read each step; spec_graphs_k1: one draft graph and the target's a
    round. Traced whole, SQL over the export finds two graphs replayed 48 times each, in turn:
    48 steps as far apart as either graph's replays, all decode, at medium confidence (nothing
    in the trace tells one from the other); not 96 steps of "decode" and "prefill" in turn."""
    f = facts(name)
    src = unxz(export_of(name), tmp_path)
    con = oracle.open_export(src)
    rows = con.execute("SELECT graphId, start FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start").fetchall()
    by = {g: [t for h, t in rows if h == g] for g in sorted({g for g, _ in rows})}
    turns = f.get("steps", f.get("rounds"))
    assert [len(starts) for starts in by.values()] == [turns, turns] == [48, 48]
    assert all(a != b for (a, _), (b, _) in itertools.pairwise(rows))  # (in turn)
    got = steps_of(src)
    assert len(got[0]) == turns
    ours = [s[2] - s[1] for s in got[0]]
    apart = [b - a for a, b in itertools.pairwise(next(iter(by.values())))]
    assert statistics.median(ours) == pytest.approx(statistics.median(apart), rel=0.02)
    d = analyze([src])
    g = d.summary.steady_gpus[0]
    assert g.step_source is not None and g.step_source.confidence == "medium"
    assert "2 CUDA graphs replayed in turn" in (g.step_source.evidence or "")
    assert {p.name for p in d.summary.phases if p.steps} == {"decode"}


def test_irregular_generate_steps_are_found_with_confidence_and_match_the_lm_head(tmp_path):
    """hf_requests: every decode step builds a cuDNN plan (12 to 65 ms steps, a 363 ms one),
    yet each forward pass is one step; the step times match those between the vocabulary
    projection's launches (hand-written SQL over the export)."""
    d = diagnosis("hf_requests")
    g = d.summary.steady_gpus[0]
    assert g.step_source is not None and g.step_source.confidence == "high"
    assert "sampling" in (g.step_source.evidence or "")
    built = store.build([export_of("hf_requests")])
    try:
        con = built.connect()
        ours = [r[0] for r in con.execute("SELECT duration FROM steps ORDER BY step").fetchall()]
    finally:
        built.close()
    ends = lm_head_step_times("hf_requests", "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1), tmp_path)
    assert len(ends) == len(ours) - 1 == 143
    assert statistics.median(ours) == pytest.approx(statistics.median(ends), rel=0.02)
    # Three requests: three prefills (the first is warm-up: it also built its plans), the rest decode.
    names = [p.name for p in d.summary.phases]
    assert names.count("prefill") + names.count("warmup") == 3 and names.count("decode") == 3


def lm_head_step_times(name: str, kernel: str, grid: tuple[int, int, int], tmp_path) -> list[int]:
    src = export_of(name)
    if src.name.endswith(".xz"):
        src = unxz(src, tmp_path)
    return oracle.anchor_step_times(oracle.open_export(src), kernel, grid)


def test_beam_search_steps_are_its_passes_not_the_cache_reorders_bursts(tmp_path):
    """hf_beam: beam search reorders each layer's KV cache after every pass with the embedding
    lookup's own kernel (indexSelectSmallIndex), 16 launches back to back; the prompts' lookups
    run another kernel (SQL over the export). The steps are the 64 passes, as the vocabulary
    projection counts them, not that kernel's 1,086 launches, and each prompt's pass is a
    prefill step of its own."""
    src = unxz(export_of("hf_beam"), tmp_path)
    con = oracle.open_export(src)
    index_select, prompt_lookups = con.execute(
        """SELECT count(*) FILTER (WHERE s.value = 'indexSelectSmallIndex'),
                  count(*) FILTER (WHERE s.value = 'vectorized_gather_kernel')
        FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName"""
    ).fetchone()
    assert index_select == 1086 and prompt_lookups == 2
    got = steps_of(src)
    assert len(got[0]) == facts("hf_beam")["forwards"] == 64
    ends = oracle.anchor_step_times(con, "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1))
    ours = [s[2] - s[1] for s in got[0]]
    assert len(ends) == len(ours) - 1
    assert statistics.median(ours) == pytest.approx(statistics.median(ends), rel=0.02)
    d = diagnosis("hf_beam")
    assert [(p.name, p.steps) for p in d.summary.phases if p.steady] == [
        ("prefill", 1),
        ("decode", 31),
        ("prefill", 1),
        ("decode", 31),
    ]


def test_speculative_decoding_steps_are_rounds_not_both_models_passes(tmp_path):
    """hf_assisted: a 2-layer draft model proposes 4 tokens, one pass of the target checks them.
    Both models look their tokens up with indexSelectSmallIndex, of other launch dimensions and
    passes of other lengths (SQL over the export); the target's check runs a cumulative sum
    once a round. The steps are the rounds, as that sum counts them (each call's prompt round,
    looked up by another kernel, folds into a neighbour: 2 of 96), not both models' passes."""
    src = unxz(export_of("hf_assisted"), tmp_path)
    con = oracle.open_export(src)
    lookups = con.execute(
        """SELECT k.gridX, count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
        WHERE s.value = 'indexSelectSmallIndex' GROUP BY 1 ORDER BY 1"""
    ).fetchall()
    f = facts("hf_assisted")
    assert lookups == [(4, f["draft_forwards"] - 2), (8, f["forwards"] - 2)] == [(4, 362), (8, 94)]
    got = steps_of(src)
    rounds = oracle.anchor_step_times(con, "DeviceScanKernel", (1, 1, 1))
    assert len(rounds) + 1 == f["forwards"] == 96
    assert len(got[0]) == f["forwards"] - 2
    ours = [s[2] - s[1] for s in got[0]]
    assert statistics.median(ours) == pytest.approx(statistics.median(rounds), rel=0.02)
    d = diagnosis("hf_assisted")
    g = d.summary.steady_gpus[0]
    assert g.step_source is not None and "a round of two models" in (g.step_source.evidence or "")
    assert {p.name for p in d.summary.phases if p.steady} == {"decode"}
    # transformers' own drafting settings: one draft pass a round (COUNTS holds its 128 steps)
    d = diagnosis("hf_assisted_defaults")
    g = d.summary.steady_gpus[0]
    assert g.step_source is not None and "one pass of one and 1.0 of the other" in (g.step_source.evidence or "")
    assert [(p.name, p.steps) for p in d.summary.phases if p.steady] == [("prefill", 1), ("decode", 63)] * 2


def test_sampled_generate_captured_whole_has_a_step_per_forward_pass_prefills_included(tmp_path):
    """hf_qwen_sample: the embedding lookup that starts each decode is a different kernel in a
    prefill, so it recurs 117 times for 120 passes; the steps follow the kernels that run once
    in every pass (the vocabulary projection, sampling), and no prefill folds into a step."""
    f = facts("hf_qwen_sample")
    got = steps_of(export_of("hf_qwen_sample"))
    assert len(got[0]) == f["warmup_forwards"] + f["forwards"] == 120
    src = unxz(export_of("hf_qwen_sample"), tmp_path)
    con = oracle.open_export(src)
    lm_head = con.execute(
        """SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
        WHERE s.value = 'nvjet_sm90_tst_512x8_64x3_4x1_v_bz_TNT' AND k.gridX = 4 AND k.gridY = 25"""
    ).fetchone()[0]
    assert lm_head == 120
    d = diagnosis("hf_qwen_sample")
    g = d.summary.steady_gpus[0]
    assert g.step_source is not None and "indexSelect" not in (g.step_source.marker or "")
    steady = [p for p in d.summary.phases if p.steady]
    assert sum(p.steps or 0 for p in steady) == f["forwards"] == 80
    assert [p.name for p in steady] == ["prefill", "decode", "prefill", "decode"]
    # The steps' times are those between the vocabulary projection's launches.
    ends = oracle.anchor_step_times(con, "nvjet_sm90_tst_512x8_64x3_4x1_v_bz_TNT", (4, 25, 1))
    ours = [s[2] - s[1] for s in got[0]]
    assert len(ends) == len(ours) - 1
    assert statistics.median(ours) == pytest.approx(statistics.median(ends), rel=0.02)


def test_continuous_batching_steps_follow_the_sampling_kernel_whatever_its_launch(tmp_path):
    """hf_cb_eager: the batch changes every step, and with it every kernel's launch dimensions;
    the sampling argmax runs once per step (SQL over the export), with many grids."""
    con = oracle.open_export(unxz(export_of("hf_cb_eager"), tmp_path))
    n, grids = con.execute(
        """SELECT count(*), count(DISTINCT k.gridX) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN x.StringIds d ON d.id = k.demangledName WHERE d.value LIKE '%ArgMaxOps%'"""
    ).fetchone()
    assert n == facts("hf_cb_eager")["steps"] == 31 and grids > 1
    src = diagnosis("hf_cb_eager").summary.steady_gpus[0].step_source
    assert src is not None and src.marker == "reduce_kernel (any launch dimensions)"


def test_continuous_batching_without_a_known_engine_is_one_prefill_then_mixed_steps():
    """hf_cb_eager (transformers' generate_batch, not a serving engine the tool knows): prompts
    join running decodes all through the run, so after the first step's prefill every step is
    mixed; a later run of prompt-heavy steps is mixed too, not another prefill."""
    d = diagnosis("hf_cb_eager")
    assert [p.name for p in d.summary.phases if p.steps] == ["prefill", "mixed"]


def test_graph_replays_that_run_most_of_the_work_are_the_steps_however_irregular(tmp_path):
    """hf_cb_graphs_varied: 37 replays with 8 to 568 eager kernels between them (SQL over the
    export); the steps are the replays, not the per-request kernel of the eager work."""
    con = oracle.open_export(unxz(export_of("hf_cb_graphs_varied"), tmp_path))
    replays = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone()[0]
    between = [
        r[0]
        for r in con.execute(
            """SELECT (SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.start > g.start
                       AND k.start < coalesce((SELECT min(h.start) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE h
                                               WHERE h.start > g.start), 0))
            FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE g"""
        ).fetchall()[:-1]
    ]
    assert replays == facts("hf_cb_graphs_varied")["graph_replays"] == 37
    assert max(between) > 4 * statistics.median(between)  # irregular in operations
    src = diagnosis("hf_cb_graphs_varied").summary.steady_gpus[0].step_source
    assert src is not None and src.source == "graph"


def test_a_training_loops_iteration_ranges_are_its_steps_though_autograd_launches_the_backward(tmp_path):
    """cnn_train_nvtx: an NVTX range `iter` per iteration on the loop's thread; the backward's
    kernels (70% of the GPU time, SQL over the export) are launched by autograd's own thread,
    outside it. The ranges hold those launches in time, so they are the steps: one per
    iteration, each starting at the first operation its range launched (hand-written SQL)."""
    con = oracle.open_export(unxz(export_of("cnn_train_nvtx"), tmp_path))
    ranges = con.execute(
        """SELECT n.start, n."end", n.globalTid FROM x.NVTX_EVENTS n LEFT JOIN x.StringIds s ON s.id = n.textId
        WHERE n.eventType = 59 AND coalesce(n.text, s.value) = 'iter' ORDER BY n.start"""
    ).fetchall()
    assert len(ranges) == facts("cnn_train_nvtx")["iterations"] == 40
    loop_tid = ranges[0][2]
    by_thread = dict(
        con.execute(
            """SELECT r.globalTid = ?, sum(k."end" - k.start) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN x.CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId GROUP BY 1""",
            (loop_tid,),
        ).fetchall()
    )
    assert by_thread[0] > 0.5 * (by_thread[0] + by_thread[1])  # the loop's thread launches the lesser part
    firsts = [
        con.execute(
            """SELECT min(o.start) FROM (SELECT start, correlationId FROM x.CUPTI_ACTIVITY_KIND_KERNEL
                  UNION ALL SELECT start, correlationId FROM x.CUPTI_ACTIVITY_KIND_MEMCPY
                  UNION ALL SELECT start, correlationId FROM x.CUPTI_ACTIVITY_KIND_MEMSET) o
            JOIN x.CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId
            WHERE r.globalTid = ? AND r.start BETWEEN ? AND ?""",
            (tid, s, e),
        ).fetchone()[0]
        for s, e, tid in ranges
    ]
    got = steps_of(export_of("cnn_train_nvtx"))[0]
    assert [(src, marker, conf) for _, _, _, src, marker, conf in got] == [("nvtx", "iter", "high")] * 40
    assert [start for _, start, *_ in got] == firsts
    d = diagnosis("cnn_train_nvtx")
    assert {p.name for p in d.summary.phases} <= {"startup", "warmup", "steady"}  # no LLM phase names
    # The per-range numbers still hold only the loop thread's work, and the note says why the
    # steps are whole nonetheless.
    note = finding(d, "nvtx-coverage")
    assert note is not None and note.evidence["covered_pct"] < 50
    assert "The steps follow NVTX ranges nonetheless" in note.message


def test_a_step_is_one_graph_replay_of_any_graph():
    d = diagnosis("hf_cb_graph_trace")
    src = d.summary.steady_gpus[0].step_source
    assert src is not None and src.source == "graph" and src.marker == "graph launch"
    con = oracle.open_export(export_of("hf_cb_graph_trace"))
    replays, per_graph = con.execute(
        "SELECT sum(n), max(n) FROM (SELECT count(*) AS n FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE GROUP BY graphId)"
    ).fetchone()
    assert replays == 55 and per_graph < replays  # no single graph marks every step
    assert (
        sum(k.steps for k in d.summary.steady_gpus[0].step_kinds)
        + sum(p.steps or 0 for p in d.summary.phases if not p.steady)
        == replays
    )


def test_a_training_loop_has_a_step_per_iteration_and_no_serving_phases(tmp_path):
    """train_gpt2: 40 iterations of forward, backward and AdamW of a GPT-2-shaped model, the loss
    read on the host every 10, no NVTX, the whole process traced: one step per iteration, as
    many as the loss kernel ran (hand-written SQL over the export), and phases named by evidence,
    not prefill or decode."""
    con = oracle.open_export(unxz(export_of("train_gpt2"), tmp_path))
    (iterations,) = con.execute(
        """SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
           WHERE s.value = 'nll_loss_forward_reduce_cuda_kernel_2d'"""
    ).fetchone()
    got = steps_of(export_of("train_gpt2"))
    assert iterations == 40 and list(got) == [0] and len(got[0]) == iterations
    d = diagnosis("train_gpt2")
    assert not {p.name for p in d.summary.phases} & LLM_PHASES
    steady = [p for p in d.summary.phases if p.steady]
    assert [p.name for p in steady] == ["steady"] and steady[0].steps == iterations - 1


def test_layers_are_parts_of_a_step_not_steps():
    """hf_prefill_math: the 8 layers' kernels recur 24 times, the vocabulary projection 3:
    3 steps. The same holds without the round trip to the host that each pass ends with."""
    for name in ("hf_prefill_math", "hf_prefill_flash"):
        got = steps_of(export_of(name))
        assert len(got[0]) == 3
        durations = [e - s for _, s, e, *_ in got[0]]
        assert min(durations) > 0.9 * statistics.median(facts(name)["pass_ms"]) * 1e6


def test_a_prompt_prefilled_in_chunks_is_prefill_steps_then_decode(tmp_path):
    """hf_chunked_prefill: generate() of a 4,096-token prompt in chunks of 512 tokens, then 31
    decode steps, twice. Plain SQL over the export: the chunks look their tokens up with
    PyTorch's gather and the decode steps with index_select's small-index kernel, one lookup a
    pass either way (78), and the vocabulary projection runs once a pass too. The steps are the
    78 passes, from the lookup by either kernel; each call is 8 prefill steps, then 31 decode.
    Before, the steps followed index_select alone (62: the 8 chunks were one step), and then
    the chunks after the first, and every step after them, were "mixed"."""
    f = facts("hf_chunked_prefill")
    con = oracle.open_export(unxz(export_of("hf_chunked_prefill"), tmp_path))
    by_name = dict(
        con.execute(
            """SELECT s.value, count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
               WHERE s.value IN ('vectorized_gather_kernel', 'indexSelectSmallIndex') GROUP BY 1"""
        ).fetchall()
    )
    (head,) = con.execute(
        """SELECT max(n) FROM (SELECT count(*) AS n FROM x.CUPTI_ACTIVITY_KIND_KERNEL k
           JOIN x.StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nvjet%'
           GROUP BY s.value, k.gridX, k.gridY, k.gridZ HAVING count(*) <= ?)""",
        (f["forwards"],),
    ).fetchone()
    con.close()
    assert by_name == {
        "vectorized_gather_kernel": f["calls"] * f["prefill_passes_per_call"],
        "indexSelectSmallIndex": f["calls"] * f["decode_passes_per_call"],
    }
    assert head == f["forwards"] == 78
    d = diagnosis("hf_chunked_prefill")
    g = d.summary.steady_gpus[0]
    assert len(d.summary.steps) == f["forwards"]
    assert g.step_source is not None and g.step_source.marker == "token embedding lookup (any kernel)"
    kinds = [(p.name, p.steps) for p in d.summary.phases if p.steps]
    assert kinds == [("prefill", f["prefill_passes_per_call"]), ("decode", f["decode_passes_per_call"])] * f["calls"]


def test_a_range_on_every_decoder_layer_is_part_of_a_pass_not_a_step(tmp_path):
    """layer_nvtx: generate() with an NVTX range from a module hook on each decoder layer
    (`LlamaDecoderLayer`, with `attention` and `mlp` inside), and none around a pass. Plain SQL
    over the export: the layer ranges number the passes times the layers (768 = 96 x 8), and
    the vocabulary projection's argmax runs once a pass. The steps are the 96 passes, from the
    kernels; before, each layer's range was a step (768 steps of 1.7 ms)."""
    f = facts("layer_nvtx")
    con = oracle.open_export(unxz(export_of("layer_nvtx"), tmp_path))
    (layer_ranges,) = con.execute(
        """SELECT count(*) FROM x.NVTX_EVENTS n LEFT JOIN x.StringIds s ON s.id = n.textId
           WHERE coalesce(n.text, s.value) = 'LlamaDecoderLayer'"""
    ).fetchone()
    (argmaxes,) = con.execute(
        """SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.demangledName
           WHERE s.value LIKE '%ArgMax%' OR s.value LIKE '%argmax%'"""
    ).fetchone()
    con.close()
    assert layer_ranges == f["forwards"] * f["layers"] == 768
    assert argmaxes == f["forwards"]
    d = diagnosis("layer_nvtx")
    g = d.summary.steady_gpus[0]
    assert len(d.summary.steps) == f["forwards"]
    assert g.step_source is not None and g.step_source.source == "kernel"
    kinds = [(p.name, p.steps) for p in d.summary.phases if p.steps]
    assert kinds == [("prefill", 1), ("decode", f["new_tokens"] - 1)] * f["calls"]


def test_a_range_per_request_that_overlaps_the_others_is_no_step_and_covers_the_work(tmp_path):
    """request_ranges: continuous batching by hand, each request an NVTX start/end range from
    its arrival to its last token, so that the ranges overlap. The steps are the 154 passes
    (COUNTS), not the 32 requests. Plain SQL over the export: every kernel was launched while
    some request's range was open, so nvtx-coverage stays quiet; before, it counted only the
    ranges opened while no other was open and said they held 31% of the work."""
    con = oracle.open_export(unxz(export_of("request_ranges"), tmp_path))
    spans = con.execute(
        """SELECT n.start, n."end" FROM x.NVTX_EVENTS n LEFT JOIN x.StringIds s ON s.id = n.textId
           WHERE coalesce(n.text, s.value) = 'request' AND n."end" IS NOT NULL ORDER BY n.start"""
    ).fetchall()
    kernel_ns, covered_ns, covered_ops = con.execute(
        """WITH r AS (
               SELECT n.start, n."end" FROM x.NVTX_EVENTS n LEFT JOIN x.StringIds s ON s.id = n.textId
               WHERE coalesce(n.text, s.value) = 'request' AND n."end" IS NOT NULL),
           ops AS (SELECT start, "end", correlationId, globalPid FROM x.CUPTI_ACTIVITY_KIND_KERNEL
                   UNION ALL SELECT start, "end", correlationId, globalPid FROM x.CUPTI_ACTIVITY_KIND_MEMCPY),
           o AS (SELECT o."end" - o.start AS ns, EXISTS (
                     SELECT 1 FROM x.CUPTI_ACTIVITY_KIND_RUNTIME a, r
                     WHERE a.correlationId = o.correlationId AND a.globalTid / 16777216 = o.globalPid / 16777216
                       AND a.start BETWEEN r.start AND r."end") AS inside
                 FROM ops o)
           SELECT sum(ns), sum(ns) FILTER (WHERE inside), count(*) FILTER (WHERE inside) FROM o"""
    ).fetchone()
    con.close()
    union, end = 0, None
    for a, b in spans:  # (the time some request's range was open)
        if end is None or a > end:
            union, end = union + b - a, b
        elif b > end:
            union, end = union + b - end, b
    assert len(spans) == facts("request_ranges")["requests"] == 32
    assert covered_ns / kernel_ns > 0.99
    d = diagnosis("request_ranges")
    assert len(d.summary.steps) == facts("request_ranges")["steps"]
    src = d.summary.steady_gpus[0].step_source
    assert src is not None and src.source == "kernel"
    assert "nvtx-coverage" not in [f.rule_id for f in d.findings]
    # The NVTX table counts the ranges' time once where they overlap: within the capture, and
    # the work issued while one was open (before: 6.08 s of CPU and 523.6 ms of GPU, summed).
    (row,) = [n for n in d.summary.nvtx if n.text == "request"]
    assert row.count == 32 and row.cpu_ns == union <= (d.summary.capture.capture_ns or 0)
    assert (row.gpu_ns, row.gpu_ops) == (covered_ns, covered_ops)


def test_nvtx_ranges_that_disagree_with_the_passes_are_no_steps():
    """nvtx_steps.against_passes: where the kernels show the passes (a pass's own kernel, 96
    times), a range 8 times a pass is a part of one whatever its name, and an unnamed range
    of 32 passes holds many (a request); a range named for a step holds several passes and
    stays (a training step of micro-batches), as does one a pass, and one a pass where each
    pass looks up tokens and positions (GPU 2: 2 lookups a pass). Where graphs traced whole
    hide the decode steps' lookups (GPU 3: 4 prompts' lookups, 124 replays), a step's range is
    no part. CamelCase words count: `LlamaDecoderLayer` names a layer, `DecodeStep` a step; a
    class name's last word says what it is (`Qwen2MoeForCausalLM` is a model, not an MoE
    layer)."""
    from nsight_doctor.store.timeline import nvtx_steps

    cands = pl.DataFrame(
        {
            "device_id": [0, 0, 0, 0, 0, 1, 2, 3],
            "pattern": ["blk", "request", "train_step", "forward", "model", "blk", "model", "decode_step"],
            "priority": [2, 2, 1, 1, 2, 2, 2, 1],
            "n": [768, 3, 24, 96, 95, 768, 96, 128],
        }
    )
    passes = pl.DataFrame({"device_id": [0, 2, 3], "passes": [96, 192, 4], "most": [96, 192, 124]})
    kept = nvtx_steps.against_passes(cands, passes)
    assert kept.rows() == [
        (0, "train_step", 1, 24),
        (0, "forward", 1, 96),
        (0, "model", 2, 95),
        (1, "blk", 2, 768),
        (2, "model", 2, 96),
        (3, "decode_step", 1, 128),
    ]
    names = ["LlamaDecoderLayer", "GPT#Block", "DecodeStep", "lm_head", "Qwen#MoeForCausalLM", "MLPBlock"]
    got = pl.DataFrame({"t": names}).select(w=nvtx_steps.words(pl.col("t")), part=nvtx_steps.part_words(pl.col("t")))
    assert got["w"].to_list() == [
        "llama decoder layer",
        "gpt# block",
        "decode step",
        "lm_head",
        "qwen# moe for causal lm",
        "mlp block",
    ]
    parts = [bool(nvtx_steps.PART_WORDS.search(w)) for w in got["part"]]
    assert parts == [True, True, False, True, False, True]
    assert [bool(nvtx_steps.STEP_WORDS.search(w)) for w in got["w"]] == [False, False, True, False, False, False]


def test_a_part_recurs_evenly_in_each_period_not_only_as_often():
    """parts.evenly: a layer's kernel falls k times into each step (a cut step or a prompt's
    aside); counts that fit a whole ratio by chance do not (sd_diffusion: 62 launches of a
    layout kernel, once per UNet pass and once per image decoder, against the text encoder's
    8 GEMMs, 4 at each image's start: 7.75, "about 8")."""
    from nsight_doctor.store.timeline.parts import evenly

    steps = pl.Series(range(0, 1000, 100))
    layers = pl.Series([s + 10 * j + 1 for s in range(0, 1000, 100) for j in range(4)][2:])  # (cut first step)
    assert evenly(layers, steps)
    encoder = pl.Series([0, 1, 2, 3, 500, 501, 502, 503])
    passes = pl.Series([4 + 16 * i for i in range(31)] + [505 + 16 * i for i in range(31)])
    assert len(passes) / len(encoder) == 7.75 and not evenly(passes, encoder)
    assert not evenly(steps, steps)  # (once a period is no part)


# Ranks of one job agree ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["exposed", "overlap", "straggler"])
def test_ranks_of_one_job_agree_without_nvtx(tmp_path, variant):
    """The tensor-parallel samples with their NVTX ranges removed (from a copy): both GPUs find
    the same anchor and the same steps as the NVTX ranges mark, within a few percent."""
    src = unxz(SAMPLES / f"tp2_{variant}" / f"tp2_{variant}.sqlite.xz", tmp_path)
    nvtx = steps_of(src)
    bare = tmp_path / "bare.sqlite"
    shutil.copy(src, bare)
    con = sqlite3.connect(bare)
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    found = steps_of(bare)
    assert sorted(found) == [0, 1]
    assert {r[3] for g in found.values() for r in g} == {"kernel"}
    assert len({r[4] for g in found.values() for r in g}) == 1  # one anchor on both GPUs
    for dev in (0, 1):
        assert len(found[dev]) == len(nvtx[dev]) == 16
        ours = statistics.median(e - s for _, s, e, *_ in found[dev])
        marked = statistics.median(e - s for _, s, e, *_ in nvtx[dev])
        assert ours == pytest.approx(marked, rel=0.03)
        # Each step begins where its NVTX range's work begins, within 2% of a step (the ranks'
        # own skew, up to 17% of a step on the first step here, is the job's, not ours).
        for a, b in zip(found[dev], nvtx[dev]):
            assert abs(a[1] - b[1]) < 0.02 * marked


def phases_of(path) -> dict[int, list[tuple[str, int | None]]]:
    """Each GPU's phases (name, steps) but start-up, from a store built from path."""
    built = store.build([path])
    try:
        rows = built.connect().execute(
            "SELECT device_id, name, steps FROM phases WHERE name <> 'startup' ORDER BY device_id, phase"
        )
        out: dict[int, list[tuple[str, int | None]]] = {}
        for dev, name, steps in rows.fetchall():
            out.setdefault(dev, []).append((name, steps))
        return out
    finally:
        built.close()


@pytest.mark.parametrize("variant", ["exposed", "overlap", "straggler"])
def test_ranks_of_one_job_tell_the_same_phases(tmp_path, variant):
    """Every step of the tensor-parallel samples is the same decode step on both GPUs (each an
    NVTX range decode_step). With the ranges removed (from a copy), from both ranks or from GPU
    1's only (a program that marks rank 0 alone), both GPUs tell one phase of 16 steps, of one
    name: once, a step in which GPU 1 waited long in its all-reduces looked twice as busy as the
    others and began a "prefill", and the GEMMs' mean, a little apart on the two GPUs, named one
    rank's phase decode and the other's steady."""
    src = unxz(SAMPLES / f"tp2_{variant}" / f"tp2_{variant}.sqlite.xz", tmp_path)
    con = sqlite3.connect(src)
    names = con.execute("SELECT DISTINCT text FROM NVTX_EVENTS WHERE text LIKE '%step%'").fetchall()
    ranks = con.execute("SELECT DISTINCT globalTid >> 24 FROM NVTX_EVENTS WHERE text = 'decode_step'").fetchall()
    con.close()
    assert names == [("decode_step",)] and len(ranks) == 2
    for which, where in (("none", "text = 'decode_step'"), ("rank0", f"globalTid >> 24 = {max(ranks)[0]}")):
        copy = tmp_path / f"{which}.sqlite"
        shutil.copy(src, copy)
        con = sqlite3.connect(copy)
        con.execute(f"DELETE FROM NVTX_EVENTS WHERE {where}")
        con.commit()
        con.close()
        got = phases_of(copy)
        assert sorted(got) == [0, 1]
        assert got[0] == got[1] and len(got[0]) == 1, (which, got)
        name, steps = got[0][0]
        assert steps == 16
        if which == "rank0":
            assert name == "decode"  # (GPU 0's ranges name the steps' kind, for both)


# Each step's time, split by what bounded it -----------------------------------------------------


def test_streaming_split_matches_the_workloads_clocks():
    """stream_python: the workload timed its graph (CUDA events), its `.tolist()` wait and its
    Python work per step; the tool's split of the mean step agrees."""
    parts = diagnosis("stream_python").summary.steady_gpus[0].step_parts
    f = facts("stream_python")
    assert parts is not None and parts.steps == f["steps"]
    assert parts.cpu_ns / 1e6 == pytest.approx(f["cpu_ms_per_step"], rel=0.05)
    assert (parts.blocked_ns + parts.sync_ns) / 1e6 == pytest.approx(f["sync_ms_per_step"], rel=0.1)
    assert (parts.gpu_ns + parts.blocked_ns) / 1e6 == pytest.approx(f["gpu_ms_per_step"], rel=0.15)
    assert parts.step_ns_mean / 1e6 == pytest.approx(f["ms_per_step"], rel=0.03)


def test_streaming_loop_is_cpu_bound_in_the_named_code_not_host_sync():
    d = diagnosis("stream_python")
    top = d.findings[0]
    assert top.rule_id == "gpu-idle"
    assert "`match_stop_strings` (timeline.py:129)" in top.message
    code = [c for c in d.summary.steady_gpus[0].idle_code if c.part == "cpu" and c.source == "python"]
    assert code[0].name == "match_stop_strings" and (code[0].share_pct or 0) > 80
    # The sync itself costs only the time the CPU is still inside it with the GPU idle.
    hs = finding(d, "host-sync")
    assert hs is None or hs.impact_ns < 0.01 * hs.window_ns
    # Deferring the read-back would hide at most the GPU time the CPU waited for.
    assert "which would hide up to" in top.message
    assert top.evidence["blocked_ns"] < 0.2 * top.impact_ns


def test_gpu_idle_names_the_call_that_holds_most_of_its_api_time():
    """hf_generate's gaps spend 4.1 ms in CUDA calls other than launches and syncs; the oracle's
    gaps, and the export's calls clipped to them, put most of it in cuKernelGetName (13,600
    short calls). Naming the gaps' longest call most often gave cuKernelGetAttribute; weighting
    it by the gaps' API time gave cuKernelSetAttribute, a one-time call outside that time."""
    src = export_of("hf_generate")
    con = oracle.open_export(src)
    windows = sorted((g.start, g.end) for g in oracle.gaps(con) if g.parts["alloc"] + g.parts["other"] > 0)
    starts = [w[0] for w in windows]
    time_by_name: dict[str, int] = {}
    rows = con.execute(
        "SELECT r.start, r.end, s.value FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId"
    )
    for a, b, raw in rows:
        name = oracle.base(raw)
        if any(r.match(name) for r in (oracle.LAUNCH, oracle.SYNC, oracle.COPY, oracle.MODULE, oracle.ONE_TIME)):
            continue
        i = max(bisect.bisect_right(starts, a) - 1, 0)
        while i < len(windows) and windows[i][0] < b:
            w0, w1 = windows[i]
            if w1 > a:
                time_by_name[name] = time_by_name.get(name, 0) + min(b, w1) - max(a, w0)
            i += 1
    top = max(time_by_name, key=lambda n: time_by_name[n])
    assert top == "cuKernelGetName" and time_by_name[top] > 0.5 * sum(time_by_name.values())
    f = finding(diagnosis("hf_generate"), "gpu-idle")
    assert f.evidence["top_api"] == top
    assert "(mostly cuKernelGetName)" in f.message


def test_sleep_after_each_sync_is_cpu_time_not_sync():
    d = diagnosis("stream_sleep")
    top = d.findings[0]
    assert top.rule_id == "gpu-idle"
    assert "(timeline.py:181)" in top.message  # the time.sleep line
    assert finding(d, "host-sync") is None


def test_a_sleeping_launching_thread_is_said_to_be_blocked_in_the_os_not_running_code():
    """stream_sleep was traced with -t osrt: its 200 clock_nanosleep calls are on the thread that
    launches the GPU's work, between a read-back and the next replay (SQL over the export). The
    gaps' CPU time is that sleep, call for call (idle_code, source osrt), and the finding says
    the thread was blocked in the OS and advises about the wait, not about Python overhead."""
    con = oracle.open_export(export_of("stream_sleep"))
    launcher = con.execute(
        """SELECT r.globalTid FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cudaGraphLaunch%' GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"""
    ).fetchone()[0]
    calls, slept = con.execute(
        """SELECT count(*), sum(o."end" - o.start) FROM x.OSRT_API o JOIN x.StringIds s ON s.id = o.nameId
        WHERE s.value = 'clock_nanosleep' AND o.globalTid = ?""",
        (launcher,),
    ).fetchone()
    assert calls == facts("stream_sleep")["steps"] == 200
    built = store.build([export_of("stream_sleep")])
    try:
        rows = (
            built.connect()
            .execute(
                "SELECT name, ns, share_pct FROM idle_code WHERE source = 'osrt' AND part = 'cpu' ORDER BY ns DESC"
            )
            .fetchall()
        )
    finally:
        built.close()
    assert rows[0][0] == "clock_nanosleep" and rows[0][1] == slept
    top = diagnosis("stream_sleep").findings[0]
    assert top.rule_id == "gpu-idle"
    assert top.evidence["os_pct"] == pytest.approx(100 * slept / top.evidence["cpu_ns"], abs=1.0)
    assert "blocked in the OS (mostly clock_nanosleep)" in top.title
    assert "waits in the OS" in top.recommendation


def test_a_server_asleep_between_requests_is_told_to_find_the_wait_not_to_defer_a_read_back(tmp_path):
    """hf_server: six batch-1 requests, each after a think time slept in clock_nanosleep on the
    launching thread (SQL over the export: the first sleep comes before any GPU work of the
    capture). The five sleeps between requests are the gaps' OS time, call for call; gpu-idle
    says the thread was blocked in the OS, and neither names code nor advises deferring the
    read-back that came before the sleep (it did, and asked for samples, before)."""
    src = unxz(export_of("hf_server"), tmp_path)
    con = oracle.open_export(src)
    calls, slept = con.execute(
        """SELECT count(*), sum(o."end" - o.start) FROM x.OSRT_API o JOIN x.StringIds s ON s.id = o.nameId
        WHERE s.value = 'clock_nanosleep' AND o.start > (SELECT min(start) FROM x.CUPTI_ACTIVITY_KIND_KERNEL)"""
    ).fetchone()
    assert calls == facts("hf_server")["calls"] - 1 == 5
    assert slept / 1e6 == pytest.approx(sum(facts("hf_server")["think_ms"][1:]), rel=0.01)
    built = store.build([src])
    try:
        row = (
            built.connect()
            .execute("SELECT ns FROM idle_code WHERE source = 'osrt' AND part = 'cpu' AND name = 'clock_nanosleep'")
            .fetchone()
        )
    finally:
        built.close()
    assert row is not None and row[0] == slept
    d = diagnosis("hf_server")
    assert len(d.summary.steps) == facts("hf_server")["forwards"] == 144
    idle = next(f for f in d.findings if f.rule_id == "gpu-idle")
    assert "blocked in the OS (mostly clock_nanosleep)" in idle.title
    assert "no CPU or Python samples" not in idle.message
    assert "ran right after a blocking call" not in idle.message
    assert "A server waiting for requests idles for lack of load" in idle.recommendation


def test_a_loop_waiting_for_its_dataloader_is_told_so(tmp_path):
    """train_loader: a CNN trained from a DataLoader too slow for the GPU, with Python samples.
    Plain SQL over the export: of the main thread's Python samples taken while the GPU was idle
    and the thread outside CUDA calls, 81% have a frame in torch/utils/data/dataloader.py. The
    tool's share counts only the gaps' cpu time (stretches of 100 us or more between CUDA
    calls), so it is at least that. gpu-idle says the loop waited for its DataLoader and gives
    the input-pipeline advice; before, it named only a `threading` wait and advised on waits."""
    src = unxz(export_of("train_loader"), tmp_path)
    con = oracle.open_export(src)
    sampled, in_loader = con.execute(
        """WITH f AS (SELECT id FROM x.StringIds WHERE value LIKE '%/torch/utils/data/dataloader.py'),
        ops AS (SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_KERNEL
                UNION ALL SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_MEMCPY
                UNION ALL SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_MEMSET),
        w AS (SELECT min(start) AS t0, max("end") AS t1 FROM ops),
        main AS (SELECT r.globalTid AS tid FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds n ON n.id = r.nameId
                 WHERE n.value LIKE 'cudaStreamSynchronize%' GROUP BY 1 ORDER BY count(*) DESC LIMIT 1),
        s AS (SELECT e.start AS t, e.jsonText FROM x.NVTX_EVENTS e, w, main
              WHERE e.domainId = (SELECT domainId FROM x.NVTX_EVENTS
                                  WHERE eventType = 75 AND text = 'Python Periodic Sampling')
                AND e.eventType = 34 AND e.start BETWEEN w.t0 AND w.t1 AND e.globalTid = main.tid)
        SELECT count(*), sum(EXISTS (SELECT 1 FROM json_each(s.jsonText, '$."Python Periodic Sampling".Frames') j
                                     WHERE json_extract(j.value, '$.File') IN (SELECT id FROM f)))
        FROM s WHERE NOT EXISTS (SELECT 1 FROM ops WHERE ops.start <= s.t AND s.t < ops."end")
          AND NOT EXISTS (SELECT 1 FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r, main
                          WHERE r.globalTid = main.tid AND r.start <= s.t AND s.t < r."end")"""
    ).fetchone()
    assert (sampled, in_loader) == (539, 439)
    d = diagnosis("train_loader")
    top = d.findings[0]
    assert top.rule_id == "gpu-idle"
    assert 100 * in_loader / sampled <= top.evidence["loader_pct"] <= 100
    assert "waited for its DataLoader" in top.title
    assert "in __next__ (torch/utils/data/dataloader.py:" in top.message
    assert "`num_workers`" in top.recommendation
    assert {p.name for p in d.summary.phases if p.steps} == {"steady"}
    # the summary's line names the library call too
    from nsight_doctor.render import text

    assert d.summary.steady_gpus[0].idle_code[0].entry == "__next__ (torch/utils/data/dataloader.py:741)"
    line = " ".join(text.render(d).split())
    assert re.search(r"\d+% wait \(threading\.py:\d+\) in __next__ \(torch/utils/data/", line)


def test_the_code_after_a_read_back_is_named_not_guessed_to_be_sampling(tmp_path):
    """embed_server: an encoder reads each batch's embeddings back (98 KB), then tokenizes the
    next batch in Python while the GPU idles. Plain SQL over the export: of the launching
    thread's Python samples taken between a read-back of 32 KiB or more and the GPU's next
    operation, outside CUDA calls, 68% are in `<genexpr>` (probe5.py:82). host-sampling names
    that code, from the Python samples in its own gaps (idle_code's readback part), instead of
    guessing "likely sampling"; before, only the summary named it."""
    con = oracle.open_export(unxz(export_of("embed_server"), tmp_path))
    rows = con.execute(
        """WITH ops AS (SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_KERNEL
                        UNION ALL SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_MEMCPY
                        UNION ALL SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_MEMSET),
        rb AS (SELECT m."end" AS t0, (SELECT min(o.start) FROM ops o WHERE o.start >= m."end") AS t1
               FROM x.CUPTI_ACTIVITY_KIND_MEMCPY m WHERE m.copyKind = 2 AND m.bytes >= 32768),
        main AS (SELECT r.globalTid AS tid FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r
                 JOIN x.CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
                 GROUP BY 1 ORDER BY count(*) DESC LIMIT 1),
        s AS (SELECT e.start AS t, json_extract(e.jsonText, '$."Python Periodic Sampling".Frames[0].Function') AS fn,
                     json_extract(e.jsonText, '$."Python Periodic Sampling".Frames[0].Line') AS line
              FROM x.NVTX_EVENTS e, main
              WHERE e.eventType = 34 AND e.jsonText LIKE '%Python Periodic Sampling%' AND e.globalTid = main.tid)
        SELECT f.value, s.line, count(*) FROM s JOIN rb ON s.t >= rb.t0 AND s.t < rb.t1
        JOIN x.StringIds f ON f.id = s.fn
        WHERE NOT EXISTS (SELECT 1 FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r, main
                          WHERE r.globalTid = main.tid AND r.start <= s.t AND s.t < r."end")
        GROUP BY 1, 2 ORDER BY 3 DESC"""
    ).fetchall()
    con.close()
    (fn, line, n), *_ = rows
    share = 100 * n / sum(r[2] for r in rows)
    assert (fn, line) == ("&lt;genexpr&gt;", 82) and 60 < share < 75
    d = diagnosis("embed_server")
    hs = finding(d, "host-sampling")
    assert "likely sampling" not in hs.title and "% of it in `<genexpr>` (probe5.py:82)" in hs.title
    named = re.search(r"Python samples put (\d+)% in `<genexpr>` \(probe5\.py:82\)", hs.message)
    assert named and abs(int(named.group(1)) - share) <= 5
    assert "the logits" not in hs.message and "tokenizing" in hs.recommendation
    # The summary names the same code on its own line; gpu-idle's gaps (the rest) hold too few
    # samples to name any.
    g = d.summary.steady_gpus[0]
    top = next(c for c in g.idle_code if c.part == "readback" and c.source == "python")
    assert (top.name, top.location) == ("<genexpr>", "probe5.py:82")
    assert f"{top.share_pct:.0f}%" == named.group(1) + "%"
    assert not [c for c in g.idle_code if c.part == "cpu" and c.source == "python"]


def test_an_asynchronous_scheduler_is_not_told_to_defer_its_read_back(tmp_path):
    """async_overlap: each step launches its pass and copies its token into pinned memory
    without blocking; only then does the CPU wait for the step before (cudaEventSynchronize)
    and process that token in Python. Plain SQL over the export: at almost every wait the GPU
    had finished all the work issued so far (its launches take longer than its kernels), so the
    wait held nothing back. gpu-idle names the Python and says that overlapping it hides no
    more; before, it advised deferring the read-back a step late, which the loop already does."""
    con = oracle.open_export(unxz(export_of("async_overlap"), tmp_path))
    waits, done = con.execute(
        """WITH ops AS (SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_KERNEL
                        UNION ALL SELECT start, "end" FROM x.CUPTI_ACTIVITY_KIND_MEMCPY),
        w AS (SELECT r.start FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
              WHERE s.value LIKE 'cudaEventSynchronize%')
        SELECT count(*), count(*) FILTER (WHERE (SELECT max(o."end") FROM ops o WHERE o.start < w.start) < w.start)
        FROM w"""
    ).fetchone()
    con.close()
    assert waits == facts("async_overlap")["steps"] and done > 0.9 * waits
    idle = finding(diagnosis("async_overlap"), "gpu-idle")
    assert "deferring that read-back" not in idle.message
    assert "found its work already done" in idle.message
    assert idle.evidence["after_done_ns"] > 0.9 * idle.evidence["cpu_ns"]


@pytest.mark.parametrize("name", ["spin_wait", "poll_sleep"])
def test_a_wait_by_polling_an_event_is_a_wait(name, tmp_path):
    """spin_wait, poll_sleep: each step replays a graph, copies its token into pinned memory
    without blocking, then polls an event (`while not event.query()`, spinning or asleep 200 us
    between polls) and runs 1.5 ms of Python. Plain SQL over the export: every replay is polled
    through (queries begin while it runs, and none is blocking), and the GPU time from a
    replay's first poll to its end is the time the CPU sat waiting. The tool counts that time
    as the GPU busy while the CPU waited (within 5%), and gpu-idle says that the code ran right
    after a wait by polling and that waiting a step late overlaps it. Before, the polls were
    other CUDA calls: no wait, and the generic advice for Python between tokens alone."""
    con = oracle.open_export(unxz(export_of(name), tmp_path))
    replays, polled, waited_ns = con.execute(
        """WITH q AS (SELECT r.start FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
                      WHERE s.value LIKE 'cudaEventQuery%'),
           g AS (SELECT g.start, g."end", (SELECT min(q.start) FROM q WHERE q.start BETWEEN g.start AND g."end") AS p
                 FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE g)
           SELECT count(*), count(p), sum(g."end" - p) FROM g"""
    ).fetchone()
    con.close()
    f = facts(name)
    assert replays == f["graph_replays"] == 200 and polled >= replays - 1
    d = diagnosis(name)
    parts = d.summary.steady_gpus[0].step_parts
    assert parts is not None and parts.steps == f["steps"]
    assert parts.blocked_ns * parts.steps == pytest.approx(waited_ns, rel=0.05)
    idle = finding(d, "gpu-idle")
    assert "after a wait for the GPU by polling (`cudaEventQuery` in a loop)" in idle.message
    assert "waiting a step late" in idle.message and "deferring that read-back" not in idle.message
    assert idle.evidence["after_poll_ns"] > 0.9 * idle.evidence["cpu_ns"]


def test_an_encoder_whose_batches_pad_to_new_lengths_is_prefill_not_mixed(tmp_path):
    """embed_server: an encoder over batches padded to their longest text (facts.json: 40
    batches, 14 lengths, most of them in under half of the batches). Plain SQL over the
    export: no kernel samples a token (no argmax, top-k or multinomial), and the token lookup
    runs 40 times. Every step is a prompt of its own: prefill. Before, its shapes' novelty
    made it a prefill, then 31 "mixed" steps (prompts joining decodes that do not exist), and
    steady-compile spoke of a KV cache growing with each decode step."""
    f = facts("embed_server")
    lengths = collections.Counter(f["padded_lengths"])
    assert len(lengths) == 14 and lengths.most_common(1)[0][1] < f["batches"] / 2
    con = oracle.open_export(unxz(export_of("embed_server"), tmp_path))
    names = [
        r[0]
        for r in con.execute(
            """SELECT s.value FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName"""
        )
    ]
    con.close()
    assert not [n for n in names if re.search(r"(?i)argmax|topk|top_k|multinomial|sampl", n)]
    assert names.count("vectorized_gather_kernel") == f["batches"]
    d = diagnosis("embed_server")
    with_steps = [p for p in d.summary.phases if p.steps]
    assert {p.name for p in with_steps if p.steady} == {"prefill"}
    assert sum(p.steps or 0 for p in with_steps) == f["batches"]
    sc = finding(d, "steady-compile")
    assert "pad_to_multiple_of" in sc.recommendation and "KV cache" not in sc.recommendation


def test_a_trainer_whose_loader_keeps_up_gets_training_advice_not_generate_advice(tmp_path):
    """hf_trainer_loader: HF Trainer, its DataLoader keeping up (SQL: 5 of the main thread's 696
    Python samples in the GPU's idle time are in a DataLoader). No DataLoader claim; and a
    training loop under transformers gets PyTorch's advice, not that for generate() and serving
    engines (it did before). Python's <genexpr> frames are named so, not HTML-escaped, and a
    frozen module's frames (`&lt;frozen os&gt;` in the export) are a library's, not the
    program's: they have the program's caller."""
    src = unxz(export_of("hf_trainer_loader"), tmp_path)
    con = oracle.open_export(src)
    (escaped,) = con.execute(
        "SELECT count(*) FROM x.StringIds WHERE value IN ('&lt;genexpr&gt;', '&lt;frozen os&gt;')"
    ).fetchone()
    assert escaped == 2
    built = store.build([src])
    try:
        rows = (
            built.connect().execute("SELECT name, location, caller FROM idle_code WHERE source = 'python'").fetchall()
        )
    finally:
        built.close()
    assert not [r for r in rows if "&lt;" in r[0] + r[1]]
    frozen = [r for r in rows if r[1].startswith("<frozen ")]
    assert frozen and all(r[2] is not None for r in frozen)
    d = diagnosis("hf_trainer_loader")
    assert d.summary.framework.name == "transformers"
    assert "Python samples: transformers Trainer" in (d.summary.framework.evidence or "")
    assert {p.name for p in d.summary.phases if p.steps} == {"steady"}
    top = d.findings[0]
    assert top.rule_id == "launch-bound"
    assert "torch.cuda.CUDAGraph" in top.recommendation
    for f in d.findings:
        assert "generate" not in f.recommendation and "vLLM" not in f.recommendation, f.rule_id
        assert "DataLoader" not in f.title
        assert "&lt;" not in f.message
    idle = next(f for f in d.findings if f.rule_id == "gpu-idle")
    assert idle.evidence["loader_pct"] < 5


def test_a_diffusion_loop_has_a_step_per_denoising_pass_and_no_llm_phases(tmp_path):
    """sd_diffusion: a UNet (convolutions, attention, GEMMs) run 30 times per image after a text
    encoder's pass. A step per UNet pass, each holding one of the timestep embedding's arange
    kernels (SQL over the export); the attention and GEMMs are not a language model's: no
    prefill or decode, and no LLM serving advice."""
    con = oracle.open_export(unxz(export_of("sd_diffusion"), tmp_path))
    aranges = [
        r[0]
        for r in con.execute(
            """SELECT k.start FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
               WHERE s.value = 'elementwise_kernel_with_index' ORDER BY k.start"""
        ).fetchall()
    ]
    assert len(aranges) == facts("sd_diffusion")["unet_passes"] == 60
    (steps,) = steps_of(export_of("sd_diffusion")).values()
    assert [sum(s <= t < e for t in aranges) for _, s, e, *_ in steps] == [1] * 60
    d = diagnosis("sd_diffusion")
    assert not {p.name for p in d.summary.phases} & LLM_PHASES
    top = d.findings[0]
    assert top.rule_id == "launch-bound"
    assert "static cache" not in top.recommendation and "vLLM" not in top.recommendation


@pytest.mark.parametrize("name", ["dit_diffusion", "vit_classify"])
def test_transformers_over_image_patches_are_not_language_models(name, tmp_path):
    """dit_diffusion (a diffusion transformer: attention, GEMMs, few convolutions) and
    vit_classify (a ViT whose every pass ends in an argmax over 1,000 classes) run transformer
    passes that read no tokens: a token lookup (an embedding kernel, index_select or PyTorch's
    gather) runs in none of the ViT's steps, and in 2 of the diffusion's 40: its text encoder's,
    once per image before the image's first pass (SQL over the export). No prefill or decode,
    and no LLM serving advice."""
    con = oracle.open_export(unxz(export_of(name), tmp_path))
    lookups = [
        r[0]
        for r in con.execute(
            """SELECT k.start FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
               WHERE lower(s.value) LIKE '%embedding%' OR lower(s.value) LIKE '%indexselect%'
                  OR lower(s.value) LIKE '%index_select%' OR lower(s.value) LIKE '%gather%'"""
        ).fetchall()
    ]
    (steps,) = steps_of(export_of(name)).values()
    assert len(steps) == facts(name)[COUNTS[name]] == 40
    reading = [s for _, s, e, *_ in steps if any(s <= t < e for t in lookups)]
    assert len(reading) == len(lookups) == facts(name).get("images", 0)
    d = diagnosis(name)
    assert {p.name for p in d.summary.phases} & LLM_PHASES == set()
    top = d.findings[0]
    assert top.rule_id == "launch-bound"
    for f in d.findings:
        assert "static cache" not in f.recommendation and "vLLM" not in f.recommendation, f.rule_id


def test_a_pipelined_loop_whose_uploads_overlap_its_compute_is_quiet(tmp_path):
    """prefetch_pipeline: each step's 64 MiB input is uploaded a step ahead on a side stream and
    the host waits only for results two steps old. By an independent pass over the export, 90%
    or more of the uploads' time overlaps a kernel; the GPU is busy throughout, and no finding
    says otherwise (transfers, syncs, launches, idle time)."""
    con = sqlite3.connect(f"file:{unxz(export_of('prefetch_pipeline'), tmp_path)}?mode=ro", uri=True)
    kernels = sorted(con.execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall())
    uploads = con.execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1').fetchall()
    con.close()
    overlapped = sum(max(0, min(b, e) - max(a, s)) for s, e in uploads for a, b in kernels)
    assert overlapped >= 0.9 * sum(e - s for s, e in uploads)
    d = diagnosis("prefetch_pipeline")
    (g,) = d.summary.steady_gpus
    assert g.busy_pct is not None and g.busy_pct >= 95
    assert {p.name for p in d.summary.phases if p.steps} == {"steady"}
    quiet = {"transfer-heavy", "host-sync", "launch-bound", "gpu-idle", "pageable-memcpy", "sync-memcpy"}
    assert not quiet & {f.rule_id for f in d.findings}


def test_an_emptied_allocator_cache_that_costs_little_is_not_blamed(tmp_path):
    """hf_empty_cache: torch.cuda.empty_cache() before every pass of generate(). Once warm, the
    allocator freed and allocated again 10 times in 48 passes (SQL: cudaFree and cudaMalloc
    under 1% of the window): launch-bound leads, and no finding gives allocation advice."""
    con = sqlite3.connect(f"file:{unxz(export_of('hf_empty_cache'), tmp_path)}?mode=ro", uri=True)
    (alloc_ns,) = con.execute(
        """SELECT sum(r."end" - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
           WHERE s.value LIKE 'cudaFree%' OR s.value LIKE 'cudaMalloc%'"""
    ).fetchone()
    (t0, t1) = con.execute('SELECT min(start), max("end") FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    con.close()
    assert 0 < alloc_ns < 0.01 * (t1 - t0)
    d = diagnosis("hf_empty_cache")
    assert d.findings[0].rule_id == "launch-bound"
    for f in d.findings:
        assert "allocat" not in f.recommendation, f.rule_id


def test_a_step_replayed_in_pieces_is_told_to_replay_whole(tmp_path):
    """hf_piecewise_graphs: a compiled forward split at each layer's attention (as vLLM's
    piecewise CUDA graphs): 11 graph launches a pass by SQL. Launch-bound says the step is
    captured in pieces and advises removing the graph breaks, not compiling with a static
    cache, which the workload already does."""
    con = sqlite3.connect(f"file:{unxz(export_of('hf_piecewise_graphs'), tmp_path)}?mode=ro", uri=True)
    (launches,) = con.execute(
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
           WHERE s.value LIKE 'cudaGraphLaunch%'"""
    ).fetchone()
    con.close()
    passes = facts("hf_piecewise_graphs")["forwards"]
    assert launches // passes == 11
    d = diagnosis("hf_piecewise_graphs")
    top = d.findings[0]
    assert top.rule_id == "launch-bound" and top.evidence["pieces"]
    assert round(top.evidence["replays_per_step"]) == 11
    assert "captured in pieces" in top.message
    assert "fullgraph=True" in top.recommendation and "static" not in top.recommendation


def test_a_generate_thread_streaming_to_the_main_thread_is_stepped_by_its_own_work():
    """hf_streamer_thread: generate() runs in a worker thread (a new one per call) and the main
    thread streams its tokens. The steps are the workers' passes (COUNTS), and the true
    bottleneck leads: cuDNN building an attention plan for every new KV length."""
    d = diagnosis("hf_streamer_thread")
    assert d.findings[0].rule_id == "steady-compile"
    assert {p.name for p in d.summary.phases if p.steps} == {"prefill", "decode"}


def test_the_python_that_holds_the_gil_while_the_launching_thread_waits_is_named(tmp_path):
    """hf_streamer_thread: while the main thread runs its per-token Python, the generating
    thread waits for the GIL in pthread_cond_timedwait. By an independent pass over the export
    (the non-launching threads' running Python samples taken inside the launching threads' waits,
    by innermost frame), the main thread's <genexpr> (probe3.py:261) holds most of that time;
    gpu-idle names it first among the other threads' code and gives the GIL advice."""
    con = sqlite3.connect(f"file:{unxz(export_of('hf_streamer_thread'), tmp_path)}?mode=ro", uri=True)
    launching = {
        r[0]
        for r in con.execute(
            """SELECT DISTINCT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r
               JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId"""
        )
    }
    waits = sorted(
        (start, end)
        for start, end, tid in con.execute(
            """SELECT o.start, o."end", o.globalTid FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
               WHERE s.value = 'pthread_cond_timedwait'"""
        )
        if tid in launching
    )
    samples = con.execute(
        """SELECT e.start, e.globalTid, json_extract(e.jsonText, '$."Python Periodic Sampling"."Thread state"'),
                  f.value, json_extract(e.jsonText, '$."Python Periodic Sampling".Frames[0].Line')
           FROM NVTX_EVENTS e
           JOIN StringIds f ON f.id = json_extract(e.jsonText, '$."Python Periodic Sampling".Frames[0].Function')
           WHERE e.eventType = 34 AND e.jsonText LIKE '%Python Periodic Sampling%'"""
    ).fetchall()
    con.close()
    starts = [w[0] for w in waits]
    held: collections.Counter = collections.Counter()
    for t, tid, state, fn, line in samples:
        i = bisect.bisect_right(starts, t) - 1
        if tid not in launching and state in ("Running", "Uninterruptible") and i >= 0 and t < waits[i][1]:
            held[(fn.replace("&lt;", "<").replace("&gt;", ">"), line)] += 1
    (top, n), *_ = held.most_common()
    assert top == ("<genexpr>", 261) and n > 0.5 * sum(held.values())
    idle = finding(diagnosis("hf_streamer_thread"), "gpu-idle")
    assert "Meanwhile the process's other threads ran Python" in idle.message
    assert idle.evidence["held_code"].split("; ")[0].endswith("in `<genexpr>` (probe3.py:261)")
    assert "GIL" in idle.recommendation


def test_offloaded_layers_do_not_move_the_step_boundaries_into_the_pass(tmp_path):
    """hf_offload: half of the layers live in host memory, and each waits for its weights'
    upload (a pageable copy, then a synchronize) in every pass: the GPU's longest waits are
    inside the pass. The steps still end where the host read the token back: each holds one
    pass's lookup, its vocabulary projection and its argmax, in that order (SQL over the
    export), and the phases are each call's prefill and its decodes."""
    con = oracle.open_export(unxz(export_of("hf_offload"), tmp_path))

    def starts(name: str, grid: tuple[int, int, int] | None = None) -> list[int]:
        where = " AND k.gridX = ? AND k.gridY = ? AND k.gridZ = ?" if grid else ""
        return [
            r[0]
            for r in con.execute(
                f"""SELECT k.start FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
                    WHERE s.value = ?{where} ORDER BY k.start""",
                (name, *(grid or ())),
            ).fetchall()
        ]

    # (the decodes look their tokens up with indexSelectSmallIndex, the prompts with a gather)
    lookups = sorted(starts("indexSelectSmallIndex") + starts("vectorized_gather_kernel", (256, 1, 1)))
    heads = starts("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1))
    (uploads,) = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1").fetchone()
    n = facts("hf_offload")["forwards"]
    assert len(lookups) == len(heads) == n == 32 and uploads > 10 * n
    (steps,) = steps_of(export_of("hf_offload")).values()
    assert len(steps) == n
    for (_, s, e, *_), lookup, head in zip(steps, lookups, heads):
        assert s <= lookup < head < e
    d = diagnosis("hf_offload")
    # transfer-heavy says what each step uploads: the offloaded layers' weights, by the workload's count
    upload = finding(d, "transfer-heavy")
    assert upload is d.findings[0]
    assert upload.evidence["upload_bytes_per_step"] == pytest.approx(facts("hf_offload")["offloaded_bytes"], rel=1e-6)
    assert upload.evidence["uploads_per_step"] == pytest.approx(uploads / n, abs=1)
    assert "offloaded" in upload.message and "uploaded again in every step" in upload.recommendation
    assert [(p.name, p.steps) for p in d.summary.phases if p.steps] == [
        ("prefill", 1),
        ("decode", 15),
        ("prefill", 1),
        ("decode", 15),
    ]


def test_operator_ranges_of_emit_nvtx_are_no_steps_and_go_by_operator(tmp_path):
    """hf_emit_nvtx: every PyTorch operator in an NVTX range of its own, numbered ("aten::linear,
    op_id = 32617"). The steps are the 48 passes from the kernels, and the GPU time per NVTX
    range and the code in the gaps go by operator: as many aten::linear ranges as SQL over the
    export counts."""
    con = oracle.open_export(unxz(export_of("hf_emit_nvtx"), tmp_path))
    (linear,) = con.execute(
        """SELECT count(*) FROM x.NVTX_EVENTS n LEFT JOIN x.StringIds s ON s.id = n.textId
           WHERE coalesce(n.text, s.value) LIKE 'aten::linear, %'"""
    ).fetchone()
    d = diagnosis("hf_emit_nvtx")
    g = d.summary.steady_gpus[0]
    assert len(d.summary.steps) == facts("hf_emit_nvtx")["forwards"] == 48
    assert g.step_source is not None and g.step_source.source == "kernel"
    by_text = {n.text: n for n in d.summary.nvtx}
    assert linear == 2736 and by_text["aten::linear"].count == linear
    assert not any("op_id" in (n.text or "") for n in d.summary.nvtx)
    assert not any("op_id" in (c.name or "") for c in g.idle_code)


def test_the_code_of_offloaded_layers_is_named_from_python_samples():
    """hf_offload_sampled: with Python samples, the CPU time in the gaps is put in Accelerate's
    upload of each offloaded tensor, inside generate()."""
    g = diagnosis("hf_offload_sampled").summary.steady_gpus[0]
    names = {c.name: c for c in g.idle_code if c.source == "python"}
    assert "set_module_tensor_to_device" in names
    assert "generate" in (names["set_module_tensor_to_device"].entry or "")


def test_a_gpu_shared_by_two_processes_counts_the_steps_of_one_and_says_so(tmp_path):
    """hf_shared_gpu: two processes run generate() on one GPU at once, 144 passes each. The steps
    are those of the process with the most kernel time (SQL over the export: kernel time by
    process), each holding one of its vocabulary projections, and a note names both processes."""
    con = oracle.open_export(unxz(export_of("hf_shared_gpu"), tmp_path))
    pid = "(k.globalPid >> 24) & 16777215"
    by_pid = con.execute(
        f"SELECT {pid} AS p, sum(k.end - k.start) AS ns FROM x.CUPTI_ACTIVITY_KIND_KERNEL k GROUP BY p ORDER BY ns DESC"
    ).fetchall()
    main = by_pid[0][0]
    heads = [
        r[0]
        for r in con.execute(
            f"""SELECT k.start FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
                WHERE s.value = 'nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT' AND k.gridY = 63 AND {pid} = ?
                ORDER BY k.start""",
            (main,),
        ).fetchall()
    ]
    assert len(by_pid) == 2 and len(heads) == 144
    assert [p["forwards"] for p in facts("hf_shared_gpu")["processes"]] == [144, 144]
    (steps,) = steps_of(export_of("hf_shared_gpu")).values()
    assert [sum(s <= t < e for t in heads) for _, s, e, *_ in steps] == [1] * 144
    d = diagnosis("hf_shared_gpu")
    src = d.summary.steady_gpus[0].step_source
    assert src is not None and f"the steps are PID {main}'s" in (src.processes or "")
    assert any("2 processes share this GPU" in n for n in d.notes)


def test_compiles_inside_every_step_are_named():
    d = diagnosis("hf_requests")
    top = d.findings[0]
    assert top.rule_id == "steady-compile"
    assert "`sdpa_attention_forward`" in top.message
    parts = d.summary.steady_gpus[0].step_parts
    assert parts is not None and parts.setup_ns > 0.5 * parts.step_ns_mean


def test_python_samples_in_a_frameworks_package_name_it(tmp_path):
    """hf_requests was captured with Python samples: frames in transformers' installed package
    name the framework, evidence stronger than an environment variable (its command line runs
    the repository's own script). stream_python's samples hold only torch and the script."""
    src = unxz(SAMPLES / "hf_requests" / "hf_requests.sqlite.xz", tmp_path)
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    paths = con.execute("SELECT count(*) FROM StringIds WHERE value LIKE '%site-packages/transformers/%.py'").fetchone()
    command = con.execute(
        "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:COMMAND' OR name LIKE 'PROCESS_0:ARGUMENT_%'"
    ).fetchall()
    con.close()
    assert paths[0] > 0 and command and not any("transformers" in c for (c,) in command)
    fw = diagnosis("hf_requests").summary.framework
    assert fw.name == "transformers"
    assert (fw.evidence or "").startswith("Python samples: transformers")
    assert "Python samples" not in (diagnosis("stream_python").summary.framework.evidence or "")


def test_a_shape_sweep_is_steady_state_cost_not_llm_phases():
    """triton_sweep: a Triton kernel timed over 7 shapes, compiled anew for each: after the first
    shape's compile (start-up) one steady phase holds the others; no LLM phase names."""
    d = diagnosis("triton_sweep")
    names = [p.name for p in d.summary.phases]
    assert not set(names) & LLM_PHASES
    assert names.count("steady") == 1 and "startup" in names
    assert d.findings[0].rule_id == "steady-compile"
    assert d.findings[0].evidence["gaps"] == facts("triton_sweep")["shapes"] - 1
    # It ran under HF_HUB_OFFLINE (the capture script's, as a machine-wide setting would be),
    # but no kernel is a language model's: not transformers, and no KV-cache advice.
    con = sqlite3.connect(f"file:{export_of('triton_sweep')}?mode=ro", uri=True)
    env = con.execute(
        "SELECT count(*) FROM META_DATA_CAPTURE"
        " WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' AND value LIKE 'HF\\_%' ESCAPE '\\'"
    ).fetchone()[0]
    assert env > 0
    assert d.summary.framework.name == "pytorch"
    rec = d.findings[0].recommendation
    assert "KV" not in rec and "cache_implementation" not in rec and "generate" not in rec


def test_a_decode_loop_of_graph_replays_is_decode_whatever_marks_its_steps(tmp_path):
    """stream_python and stream_sleep run the same decode loop, one CUDA graph replay per token
    (every GEMM inside it): steps from the graph launches or from an NVTX range around each
    replay are decode steps either way. hf_compiled replays its compiled forward beside its
    sampling: each of its two generate() calls replays one graph once, its prompt's (SQL over
    the export), then the decode graph 31 times: prefill, then decode, per call."""
    for name in ("stream_python", "stream_sleep"):
        d = diagnosis(name)
        assert [p.name for p in d.summary.phases if p.steps] == ["decode"], name
        steady = d.summary.steady_state
        assert steady is not None and steady.kind == "decode"
    con = oracle.open_export(unxz(export_of("hf_compiled"), tmp_path))
    by = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE GROUP BY graphId ORDER BY 1").fetchall()
    assert [n for (n,) in by] == [facts("hf_compiled")["calls"], 62]
    d = diagnosis("hf_compiled")
    assert [(p.name, p.steps) for p in d.summary.phases if p.steps] == [("prefill", 1), ("decode", 31)] * 2


def test_decode_graphs_per_batch_size_are_decode_not_prompts(tmp_path):
    """graph_buckets: batched decoding with a CUDA graph captured per batch-size bucket (1, 2, 4
    and 8), the batch shrinking as requests finish. Plain SQL over the export: each graph
    replays as often as facts.json says, in runs (a replay's graph is that of the replay before
    or after it), and no graph's mean replay is 15% longer than the median replay (a decode
    pass reads the same weights at any batch size). Every step is decode. Before, each
    bucket's graph replayed in under half of the steps, so every step looked like a new prompt:
    a prefill, then "mixed" steps (or all prefill)."""
    f = facts("graph_buckets")
    con = oracle.open_export(unxz(export_of("graph_buckets"), tmp_path))
    replays = con.execute(
        'SELECT graphId, "end" - start FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start'
    ).fetchall()
    con.close()
    ids = [g for g, _ in replays]
    assert sorted(collections.Counter(ids).values()) == sorted(n * f["rounds"] for n in f["replays_per_round"].values())
    in_runs = sum(1 for i, g in enumerate(ids) if (i > 0 and ids[i - 1] == g) or (i + 1 < len(ids) and ids[i + 1] == g))
    assert in_runs == len(ids)
    median = statistics.median(d for _, d in replays)
    means = [statistics.mean(d for g2, d in replays if g2 == g) for g in set(ids)]
    assert max(means) < 1.15 * median
    d = diagnosis("graph_buckets")
    assert [(p.name, p.steps) for p in d.summary.phases if p.steps] == [("decode", f["steps"])]


def test_each_request_of_an_encoder_decoder_begins_with_its_prefill_the_first_too(tmp_path):
    """t5_generate: two generate() calls, each an encoder run then 32 decoder passes. The first
    call's encoder comes before the first anchored step, the second's inside a step: the first
    step takes the first call's (it begins at the capture's first kernel, by plain SQL), and
    both calls are prefill then decode."""
    d = diagnosis("t5_generate")
    assert [(p.name, p.steps) for p in d.summary.phases if p.steps] == [
        ("prefill", 1),
        ("decode", 31),
        ("prefill", 1),
        ("decode", 31),
    ]
    con = oracle.open_export(unxz(export_of("t5_generate"), tmp_path))
    (first_kernel,) = con.execute("SELECT min(start) FROM x.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    assert d.summary.steps[0].start == first_kernel


# Where the first kernel by name id that runs once per pass as often is not the pass's own
# (hf_server: a prompt's elementwise kernel runs 144 times too), the sample's README names it.
PASS_MARKERS = {
    "hf_server": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "train_loader": ("nll_loss_forward_reduce_cuda_kernel_2d", (1, 1, 1)),
    "hf_trainer_loader": ("nll_loss_forward_reduce_cuda_kernel_2d", (1, 1, 1)),
    "train_accum": ("nll_loss_forward_reduce_cuda_kernel_2d", (1, 1, 1)),
    "sd_diffusion": ("elementwise_kernel_with_index", (1, 1, 1)),  # the timestep's arange
    "hf_offload": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "hf_offload_sampled": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "hf_emit_nvtx": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "dit_diffusion": ("elementwise_kernel_with_index", (2, 1, 1)),  # the timestep's arange
    "vit_classify": ("reduce_kernel", (2, 1, 1)),  # the argmax over the classes
    "hf_empty_cache": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "prefetch_pipeline": ("reduce_kernel", (512, 1, 1)),  # the argmax of each step
    "hf_prompt_lookup": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),  # the LM head
    "hf_piecewise_graphs": ("reduce_kernel", (4, 1, 1)),
    "hf_streamer_thread": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "spec_graphs_node": ("reduce_kernel", (5, 1, 1)),  # the target's argmax
    "hf_no_alloc_cache": ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT", (2, 63, 1)),
    "embed_server": ("vectorized_gather_kernel", None),  # the embedding lookup, its grid the batch's
}


def pass_starts(path, n: int, marker: tuple[str, tuple[int, int, int] | None] | None = None) -> list[int]:
    """The start of each forward pass, by plain SQL over the export: a kernel (name and grid,
    else name alone: a batch's grid changes) that runs exactly n times, the workload's count of
    passes (the LM head, the sampling kernel; the first by name id, a fixed choice that is the
    pass's own kernel on these samples: a layer's GEMM run only in the prompts can run n times
    too, as on hf_bigbatch), else the n graph launches (on the GPU where the capture traced
    whole graphs, else the launch calls)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        starts = marker_starts(con, n, marker)
    finally:
        con.close()
    assert len(starts) == n
    return starts


def marker_starts(con: sqlite3.Connection, n: int, marker: tuple[str, tuple[int, int, int] | None] | None) -> list[int]:
    if marker is not None:
        name, grid = marker
        by_grid = "" if grid is None else " AND k.gridX = ? AND k.gridY = ? AND k.gridZ = ?"
        rows = con.execute(
            f"""SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
               WHERE s.value = ?{by_grid}""",
            (name, *(grid or ())),
        )
        return sorted(r[0] for r in rows)
    for key in (["shortName", "gridX", "gridY", "gridZ"], ["shortName"]):
        cols = ", ".join(key)
        found = con.execute(
            f"""SELECT {cols} FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY {cols} HAVING count(*) = ?
                ORDER BY {cols} LIMIT 1""",
            (n,),
        ).fetchone()
        if found:
            where = " AND ".join(f"{c} = ?" for c in key)
            return sorted(
                r[0] for r in con.execute(f"SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE {where}", found)
            )
    traced = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE'")
    rows = con.execute(
        "SELECT start FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        if traced.fetchone()
        else """SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
           WHERE s.value LIKE 'cudaGraphLaunch%'"""
    )
    return sorted(r[0] for r in rows)


def cut(name: str, first: int, last: int, tmp_path):
    """The sample's export cut halfway through a pass at first% of its passes and again at
    last%, and the number of passes that begin in the window."""
    src = export_of(name)
    if src.name.endswith(".xz"):
        src = unxz(src, tmp_path)
    n = facts(name)[COUNTS[name]]
    starts = pass_starts(src, n, PASS_MARKERS.get(name))
    i0, i1 = first * n // 100, min(last * n // 100, n - 2)
    t0, t1 = (starts[i0] + starts[i0 + 1]) // 2, (starts[i1] + starts[i1 + 1]) // 2
    return cropped(src, tmp_path, t0, t1), sum(t0 <= t <= t1 for t in starts)


@pytest.mark.parametrize(
    ("name", "first", "last"),
    [
        ("hf_bigbatch", 30, 80),  # decodes, a prefill of large GEMMs, decodes
        ("hf_requests", 5, 50),
        ("t5_generate", 50, 95),
        ("hf_cb_graph_trace", 30, 80),  # whole-graph replays, the prompts' steps long done
        ("hf_cb_graphs_varied", 50, 95),
        ("stream_sleep", 30, 80),  # an NVTX range around each replay, one of them cut
    ],
)
def test_a_capture_started_mid_decode_has_the_same_steps_and_calls_them_decode(name, first, last, tmp_path):
    """A serving capture seldom starts at a request's prompt: in a window cut mid-pass, the
    steps are still the passes in it (give or take the two cut ones), and each is an LLM step:
    the decodes before the window's first prefill are decodes as the ones after it are, not
    "steady"."""
    path, inside = cut(name, first, last, tmp_path)
    got = steps_of(path)
    assert list(got) == [0]
    assert inside - 1 <= len(got[0]) <= inside
    d = analyze([path])
    with_steps = [p for p in d.summary.phases if p.steps]
    assert with_steps and {p.name for p in with_steps} <= LLM_PHASES, [(p.name, p.steps) for p in with_steps]
    assert "decode" in {p.name for p in with_steps}


@pytest.mark.parametrize("name", sorted(set(COUNTS) - {"hf_prefill_math", "hf_prefill_flash"}))  # (3 passes each)
def test_steps_in_a_window_cut_mid_pass_are_the_passes_in_it(name, tmp_path):
    """Whatever the loop, a capture that starts and stops in the middle of a pass finds the
    passes that begin in the window, give or take the cut ones."""
    # (train_loader's marker is the loss in the forward; a cut half-way to the next one can
    # fall in the backward of the pass before the window, a cut pass with its work inside)
    more = 1 if name in {"train_loader"} else 0
    for first, last in ((5, 45), (40, 95)):
        path, inside = cut(name, first, last, tmp_path)
        got = steps_of(path)
        assert list(got) == [0]
        assert inside - 1 <= len(got[0]) <= inside + more, (first, last)


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.iterdir() if (p / "facts.json").exists()))
def test_gap_parts_match_the_oracle(name, tmp_path):
    src = export_of(name)
    if src.name.endswith(".xz"):
        src = unxz(src, tmp_path)
    gaps = oracle.gaps(oracle.open_export(src))
    idle = {c.cause: (c.count, c.total_ns) for c in diagnosis(name).summary.idle.by_cause}
    for part in oracle.PARTS:
        assert oracle.totals(gaps, part) == idle.get(part, (0, 0)), part


def timeline_tables(path) -> dict[str, list[tuple]]:
    """Every table the timeline writes, its rows in order of all columns."""
    from nsight_doctor.store.timeline import tables

    built = store.build([path])
    try:
        con = built.connect()
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in tables()}
    finally:
        built.close()


@pytest.mark.parametrize("name", ["stream_python", "tp2_exposed"])
def test_gaps_made_in_chunks_are_the_gaps_made_at_once(name, tmp_path, monkeypatch):
    """Gaps are made a chunk of busy intervals at a time, each chunk reading only the calls
    of its time span: in chunks of 97 (a gap on each boundary, a GPU changing inside a chunk,
    steps spanning chunks) every table is as made in one chunk."""
    import nsight_doctor.store.timeline as timeline

    src = export_of(name)
    path = unxz(src, tmp_path) if src.name.endswith(".xz") else src
    whole = timeline_tables(path)
    assert len(whole["gpu_gaps"]) > 3 * 97
    assert len(whole["gpu_gaps"]) < timeline.GAP_CHUNK
    monkeypatch.setattr(timeline, "GAP_CHUNK", 97)
    chunked = timeline_tables(path)
    for table, rows in whole.items():
        assert chunked[table] == rows, table


def test_the_outermost_calls_are_what_a_plain_loop_keeps():
    """flatten keeps each thread's outermost calls (a call that begins inside another of its
    thread is part of it, the longer first at one start), in thread and start order, with the
    time since the previous and until the next; as a loop over the sorted calls finds them,
    with threads whose ids pack into one number or not (a null id)."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.load import flatten

    ids = hs.one_of(hs.none(), hs.integers(0, 3))
    call = hs.tuples(ids, hs.integers(0, 2), hs.integers(0, 40), hs.integers(1, 15))

    @settings(max_examples=200, deadline=None)
    @given(hs.lists(call, max_size=25))
    def check(rows):
        # (distinct (thread, start, end): which of two identical calls is kept is not defined)
        rows = list({(p, t, s, s + d): None for p, t, s, d in rows})
        calls = pl.DataFrame(
            rows, schema={"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64}, orient="row"
        )
        got = flatten(calls)
        key = lambda r: (r[0] is not None, r[0] or 0, r[1], r[2], -r[3])  # noqa: E731 (nulls first, as Polars)
        kept: list = []
        last: dict = {}
        for p, t, s, e in sorted(rows, key=key):
            if (p, t) in last and s < last[(p, t)][1]:
                last[(p, t)] = (last[(p, t)][0], max(last[(p, t)][1], e))
                continue
            kept.append((p, t, s, e))
            last[(p, t)] = (len(kept) - 1, max(e, last.get((p, t), (0, e))[1]))
        assert got.select("pid", "tid", "start", "end").rows() == kept
        for i, (p, t, s, e) in enumerate(kept):
            before = s - kept[i - 1][3] if i and kept[i - 1][:2] == (p, t) else None
            after = kept[i + 1][2] - e if i + 1 < len(kept) and kept[i + 1][:2] == (p, t) else None
            assert got.row(i, named=True)["before"] == before and got.row(i, named=True)["after"] == after
        assert got["ci"].to_list() == list(range(len(kept)))

    check()


def test_the_calls_around_a_span_give_its_windows_what_all_calls_give():
    """A chunk's windows read only the calls around its span: from the first call ending
    after it begins to the first beginning after it ends. A window between two calls of its
    thread, the next one after the span, is still in a short stretch between them (launch
    overhead), not code outside CUDA."""
    import polars as pl

    from nsight_doctor.store.timeline import threads
    from nsight_doctor.store.timeline.load import STATE, flatten

    calls = flatten(
        pl.DataFrame(
            {
                "pid": [1, 1, 1, 1, 2],
                "tid": [1, 1, 1, 1, 2],
                "start": [0, 50, 70, 500_000, 0],
                "end": [10, 60, 80, 500_010, 1_000_000],
                "corr": [1, 2, 3, 4, 5],
                "name_id": [1, 1, 1, 1, 2],
                "state": [STATE["launch"]] * 4 + [STATE["blocking"]],
            }
        )
    )
    windows = pl.DataFrame({"wid": [0, 1], "pid": [1, 2], "tid": [1, 2], "w0": [20, 22], "w1": [30, 28]})
    near, near_lines = threads.around(calls, threads.Lines(calls), 20, 30)
    assert near.height < calls.height
    got = threads.by_state(threads.bounds(windows, near, near_lines), near).sort("wid")
    assert got.equals(threads.by_state(threads.bounds(windows, calls), calls).sort("wid"))
    assert got.equals(threads.by_state(threads.bounds(windows, near), near).sort("wid"))
    assert got.row(0, named=True)["gap_short"] == 10
    assert got.row(1, named=True)["blocking"] == 6


def test_a_calls_time_by_name_leaves_out_calls_by_their_own_state():
    """top_api leaves out launch and blocking calls call by call: a copy call that blocked in
    one place and not in another counts where it did not block (a state per name made the
    answer depend on which of its calls a unique() kept)."""
    import polars as pl

    from nsight_doctor.store.timeline import threads
    from nsight_doctor.store.timeline.load import STATE, flatten

    calls = flatten(
        pl.DataFrame(
            {
                "pid": [1, 1, 1],
                "tid": [1, 1, 1],
                "start": [0, 100, 300],
                "end": [50, 250, 320],
                "corr": [1, 2, 3],
                "name_id": [7, 7, 8],
                "state": [STATE["blocking"], STATE["copy"], STATE["other"]],
            }
        )
    )
    windows = pl.DataFrame({"wid": [0], "pid": [1], "tid": [1], "w0": [0], "w1": [400]})
    touched = threads.bounds(windows, calls)
    every = threads.by_name(touched, calls).sort("name_id")
    assert every.select("name_id", "ns").rows() == [(7, 200), (8, 20)]
    kept = threads.by_name(touched, calls, skip=(STATE["blocking"],)).sort("name_id")
    assert kept.select("name_id", "ns").rows() == [(7, 150), (8, 20)]


def test_the_calls_around_a_span_are_found_by_search_as_by_reading_every_call():
    """threads.around searches each thread's calls; a plain loop over every call, thread by
    thread, picks the same ones: from the first that ends after t0 through the first that
    begins at or after t1, with spans before, inside, between and after the threads' calls."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline import threads
    from nsight_doctor.store.timeline.load import STATE, flatten

    call = hs.tuples(hs.integers(1, 3), hs.integers(0, 200), hs.integers(1, 30))

    @settings(max_examples=300, deadline=None)
    @given(hs.lists(call, max_size=25), hs.integers(-20, 260), hs.integers(0, 60))
    def check(rows, t0, width):
        t1 = t0 + width
        raw = pl.DataFrame(
            {
                "pid": [1 for _ in rows],
                "tid": [r[0] for r in rows],
                "start": [r[1] for r in rows],
                "end": [r[1] + r[2] for r in rows],
                "corr": list(range(len(rows))),
                "name_id": [1 for _ in rows],
                "state": [STATE["launch"] for _ in rows],
            },
            schema_overrides={"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64},
        )
        calls = flatten(raw)
        want: list[int] = []
        began: dict[tuple, bool] = {}
        for r in calls.iter_rows(named=True):
            key = (r["pid"], r["tid"])
            if r["end"] > t0 and not began.get(key):
                want.append(r["ci"])
            if r["start"] >= t1:
                began[key] = True
        near, near_lines = threads.around(calls, threads.Lines(calls), t0, t1)
        assert calls[want]["start"].to_list() == near["start"].to_list()
        assert calls[want]["tid"].to_list() == near["tid"].to_list()
        # A window within the span, on each thread (and one with no calls), reads the same from
        # the calls around it, with the lines around gives, as from all of the calls.
        windows = pl.DataFrame(
            {"wid": [0, 1, 2, 3], "pid": [1] * 4, "tid": [1, 2, 3, 4], "w0": [t0] * 4, "w1": [t1] * 4},
            schema_overrides={"pid": pl.Int64, "tid": pl.Int64, "w0": pl.Int64, "w1": pl.Int64},
        )
        if calls.height:
            got = threads.by_state(threads.bounds(windows, near, near_lines), near).sort("wid")
            assert got.equals(threads.by_state(threads.bounds(windows, calls), calls).sort("wid"))

    check()


def test_busy_intervals_are_the_union_of_the_operations_as_a_plain_loop_finds_it():
    """busy.busy_intervals picks rows by position; a loop over the operations, GPU by GPU,
    finds the same intervals: where each begins and ends, how many operations it holds, its
    first operation, and the first operation to reach its end (ties, nesting, touching ends)."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline import busy

    op = hs.tuples(hs.integers(0, 1), hs.integers(0, 60), hs.integers(0, 12))

    @settings(max_examples=300, deadline=None)
    @given(hs.lists(op, max_size=30))
    def check(rows):
        ops = pl.DataFrame(
            {
                "device_id": [r[0] for r in rows],
                "start": [r[1] for r in rows],
                "end": [r[1] + r[2] for r in rows],
                "kind": [0 for _ in rows],
                "corr": list(range(len(rows))),
                "pid": [7 for _ in rows],
                "name_id": [i % 3 for i in range(len(rows))],
                "direction": [None for _ in rows],
            },
            schema_overrides={"device_id": pl.Int32, "start": pl.Int64, "end": pl.Int64, "kind": pl.UInt8},
        ).with_columns(direction=pl.col("direction").cast(pl.String))
        ops = ops.sort(["device_id", "start", "end", "kind", "corr"])
        ops = ops.with_columns(idx=pl.int_range(pl.len(), dtype=pl.Int64).over("device_id"))
        want: list[dict] = []
        for r in ops.iter_rows(named=True):
            cur = want[-1] if want else None
            if cur is None or cur["device_id"] != r["device_id"] or r["start"] > cur["end"]:
                want.append({**r, "first": r["corr"], "last": r["corr"], "n": 1})
            else:
                cur["n"] += 1
                if r["end"] > cur["end"]:
                    cur["end"], cur["last"] = r["end"], r["corr"]
        got = busy.busy_intervals(ops)
        assert got.select("device_id", "start", "end", "ops", "first_correlation_id", "last_correlation_id").rows() == [
            (w["device_id"], w["start"], w["end"], w["n"], w["first"], w["last"]) for w in want
        ]
        assert (got["duration"] == got["end"] - got["start"]).all()

    check()


def test_packed_keys_mark_and_join_as_the_columns_do():
    """Rows marked first of their keys, and a join on them, are the same over packed keys as
    over the columns, with nulls, and unpacked where keys are negative or too wide."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.load import first_distinct, packed

    values = hs.one_of(hs.none(), hs.integers(0, 5), hs.integers(-2, 2), hs.integers(0, 1 << 40))

    @settings(max_examples=200, deadline=None)
    @given(hs.lists(hs.tuples(values, values), max_size=30), hs.lists(hs.tuples(values, values), max_size=30))
    def check(left, right):
        a = pl.DataFrame(left, schema={"x": pl.Int64, "y": pl.Int64}, orient="row")
        b = pl.DataFrame(right, schema={"x": pl.Int64, "y": pl.Int64}, orient="row").with_row_index("i")
        expected = a.select(pl.struct("x", "y").is_first_distinct()).to_series()
        assert first_distinct(a, ["x", "y"]).to_list() == expected.to_list()
        # (mostly distinct keys are sorted, mostly repeated ones hashed: five copies are the latter)
        five = pl.concat([a] * 5)
        expected = five.select(pl.struct("x", "y").is_first_distinct()).to_series()
        assert first_distinct(five, ["x", "y"]).to_list() == expected.to_list()
        # (as gaps.launchers joins: the right side has no nulls, a null on the left matches none)
        right = b.drop_nulls()
        want = a.join(right, on=["x", "y"], how="left", maintain_order="left")["i"]
        keys = packed([a, right], ["x", "y"])
        if keys is not None:
            got = pl.DataFrame({"key": keys[0]}).join(
                right.select("i", key=keys[1]), on="key", how="left", maintain_order="left"
            )["i"]
            assert got.to_list() == want.to_list()

    check()


def test_two_sorts_order_rows_as_one_sort_over_all_the_keys():
    """grouped_order (a sort by the later keys, then a stable one by the groups) orders rows as
    one sort over the groups and the later keys does, nulls first or last, with descending
    keys as negated ones (load.flatten's calls) and with packed keys (load.load_ops)."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.load import grouped_order, packed

    ids = hs.one_of(hs.none(), hs.integers(0, 3))
    row = hs.tuples(ids, ids, hs.integers(0, 20), hs.integers(0, 20), hs.one_of(hs.none(), hs.integers(0, 9)))

    @settings(max_examples=200, deadline=None)
    @given(hs.lists(row, max_size=40), hs.booleans())
    def check(rows, nulls_last):
        # (distinct keys: rows that tie on every key may come in either order)
        rows = list(dict.fromkeys(rows))
        df = pl.DataFrame(rows, schema={k: pl.Int64 for k in "ghsec"}, orient="row")
        want = df.select(
            pl.arg_sort_by(
                ["g", "h", "s", "e", "c"], descending=[False, False, False, True, False], nulls_last=nulls_last
            )
        ).to_series()
        got = grouped_order(df, ["g", "h"], [pl.col("s"), -pl.col("e"), pl.col("c")], nulls_last=nulls_last)
        assert df[got].rows() == df[want].rows()
        # (a packed key sorts as its columns do, nulls last)
        key = packed([df], ["e", "c"])
        if key is not None and nulls_last:
            by_key = grouped_order(df, ["g"], [pl.col("s"), pl.lit(key[0])], nulls_last=True)
            want = df.select(pl.arg_sort_by(["g", "s", "e", "c"], nulls_last=True)).to_series()
            assert df[by_key].rows() == df[want].rows()

    check()


def test_a_lookup_by_id_is_what_a_dict_gives():
    """looked_up gives each id its key's value, the default for an id with none (null, unknown,
    outside the table), by a table indexed by id and, for negative or huge keys, by
    replace_strict."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.load import looked_up

    small = hs.one_of(hs.none(), hs.integers(0, 40))
    key = hs.one_of(small, hs.integers(-3, -1), hs.integers(1 << 24, 1 << 40))

    @settings(max_examples=200, deadline=None)
    @given(
        hs.lists(hs.one_of(key, hs.integers(41, 90)), max_size=30), hs.dictionaries(key, hs.integers(0, 9), max_size=8)
    )
    def check(ids, table):
        keys = [k for k in table if k is not None]
        got = looked_up(
            pl.Series(ids, dtype=pl.Int64),
            pl.Series([*keys, None], dtype=pl.Int64),
            pl.Series([table[k] for k in keys] + [5], dtype=pl.UInt8),
            default=7,
        )
        assert got.dtype == pl.UInt8
        assert got.to_list() == [table.get(i, 7) if i is not None else 7 for i in ids]

    check()


def test_a_gap_is_waited_for_when_any_blocking_call_spans_its_start():
    """gaps.returned_blocking's blocking_waited: some blocking call of the gap's process (for its
    GPU) began before the gap and had not returned when it began, whichever thread made it, and
    however many shorter calls other threads made in between (a reviewer's case: a long wait on
    one thread and a short one begun later on another)."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.gaps import returned_blocking

    span = hs.tuples(hs.integers(0, 60), hs.integers(0, 30))

    @settings(max_examples=300, deadline=None)
    @given(hs.lists(span, max_size=8), hs.lists(hs.integers(0, 80), min_size=1, max_size=4))
    def check(calls, starts):
        g = pl.DataFrame(
            {"device_id": [0] * len(starts), "start": starts, "duration": [10] * len(starts), "pid": [1] * len(starts)},
            schema_overrides={"device_id": pl.Int32},
        )
        b = pl.DataFrame(
            {
                "pid": [1] * len(calls),
                "device_id": [0] * len(calls),
                "start": [a for a, _ in calls],
                "end": [a + d for a, d in calls],
                "name": ["cudaStreamSynchronize"] * len(calls),
                "reason": ["sync"] * len(calls),
            },
            schema_overrides={"device_id": pl.Int32, "start": pl.Int64, "end": pl.Int64, "pid": pl.Int64},
        )
        got = dict(returned_blocking(g, b).select("start", "blocking_waited").iter_rows())
        for t in starts:
            assert got[t] == any(a < t <= a + d for a, d in calls), (t, calls)

    check()


def test_a_wait_by_polling_is_three_queries_in_a_row_on_a_launching_thread():
    """load.polls: a run of MIN_POLLS or more query calls with no other CUDA call between them,
    on a thread that launches work, from its first poll to the end of its last, once per GPU of
    the process. A launch between two queries ends a run; two queries are no loop; a thread
    that only queries (PyTorch's NCCL watchdog) is no loop's wait."""
    from nsight_doctor.store.timeline.load import STATE, polls

    q, launch, other = 7, 8, 9
    rows = [  # (tid, start, end, name_id)
        (1, 0, 5, launch),
        *[(1, 10 + 10 * i, 12 + 10 * i, q) for i in range(4)],  # a run of 4: [10, 42]
        (1, 50, 55, launch),
        (1, 60, 62, q),
        (1, 70, 72, q),  # two: no loop
        (1, 80, 85, other),
        *[(2, 100 + 10 * i, 102 + 10 * i, q) for i in range(5)],  # the watchdog's thread
    ]
    calls = pl.DataFrame(
        {
            "pid": [5] * len(rows),
            "tid": [r[0] for r in rows],
            "start": [r[1] for r in rows],
            "end": [r[2] for r in rows],
            "name_id": [r[3] for r in rows],
            "state": [STATE["launch"] if r[3] == launch else STATE["other"] for r in rows],
        },
        schema_overrides={"state": pl.UInt8},
    )
    names = pl.DataFrame({"name_id": [q, launch, other], "name": ["cudaEventQuery", "cudaLaunchKernel", "cudaFree"]})
    gpus = pl.DataFrame({"pid": [5, 5], "device_id": [0, 1]}, schema_overrides={"device_id": pl.Int32})
    # (GPU 0's work ends at 30, while the run polls; GPU 1's at 5, before it: its run found
    # the work done, as a caching allocator's walk of its events does)
    ops = pl.DataFrame({"device_id": [0, 1], "end": [30, 5]}, schema_overrides={"device_id": pl.Int32})
    got = polls(calls, names, gpus, ops).sort("device_id")
    assert got.select("tid", "device_id", "start", "end", "name", "reason").rows() == [
        (1, 0, 10, 42, "cudaEventQuery", "poll"),
    ]
    # (polls 100 ms apart, more than POLL_GAP_NS, are no loop, though work ends among them)
    far = calls.filter(pl.col("tid") == 1).with_columns(
        pl.when(pl.col("name_id") == q).then(pl.col("start") * 10**7).otherwise("start")
    )
    ops_far = pl.DataFrame({"device_id": [0], "end": [25 * 10**7]}, schema_overrides={"device_id": pl.Int32})
    assert polls(far.with_columns(end=pl.col("start") + 2), names, gpus, ops_far).height == 0
    near = far.with_columns(pl.when(pl.col("name_id") == q).then(pl.col("start") // 10**4).otherwise("start"))
    ops_near = ops_far.with_columns(end=pl.lit(25 * 10**3))
    assert polls(near.with_columns(end=pl.col("start") + 2), names, gpus, ops_near).height == 1


def test_each_operation_gets_the_first_call_of_its_correlation_id():
    """gaps.launchers: each operation's launch call is the first call (in the calls' order) of
    its process and correlation id, none when either is null or no call has them; by a binary
    search over packed keys, and by a join where keys do not pack (a negative id)."""
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store.timeline.gaps import launchers

    pid = hs.one_of(hs.none(), hs.integers(0, 2))
    corr = hs.one_of(hs.none(), hs.integers(0, 6))

    @settings(max_examples=300, deadline=None)
    @given(hs.lists(hs.tuples(pid, corr), max_size=25), hs.lists(hs.tuples(pid, corr), max_size=25), hs.booleans())
    def check(ops, calls, unpackable):
        calls = calls + [(-1, 0)] * unpackable  # (a negative id: the join)
        o = pl.DataFrame(ops, schema={"pid": pl.Int64, "corr": pl.Int64}, orient="row")
        c = pl.DataFrame(
            [(p, k, 100 + i, 10 * i, 10 * i + 5, 1000 + i, i) for i, (p, k) in enumerate(calls)],
            schema={k: pl.Int64 for k in ("pid", "corr", "tid", "start", "end", "name_id", "ci")},
            orient="row",
        )
        got = launchers(o, c).rows()
        want = []
        for p, k in ops:
            i = next((i for i, (q, m) in enumerate(calls) if None not in (p, k) and (q, m) == (p, k)), None)
            want.append((None,) * 4 if i is None else (100 + i, 10 * i, 10 * i + 5, 1000 + i))
        assert got == want

    check()


# Invariants over every sample and the corpus ------------------------------------------------------


def profiles() -> list:
    out = sorted(p for p in SAMPLES.glob("*/*") if p.name.endswith((".sqlite", ".sqlite.xz")))
    if CORPUS.is_dir():
        out += sorted(p for p in CORPUS.glob("*/*") if p.name.endswith((".sqlite", ".nvvp", ".prof")))
    return out


@pytest.fixture(scope="module", params=profiles(), ids=lambda p: f"{p.parent.name}/{p.name}")
def built(request):
    s = store.build([request.param])
    yield s.connect()
    s.close()


def test_each_steps_parts_add_up_to_the_step(built):
    bad = built.execute(f"SELECT count(*) FROM steps WHERE {' + '.join(PARTS)} <> duration").fetchone()[0]
    assert bad == 0
    bad = built.execute(
        "SELECT count(*) FROM gpu_gaps WHERE launch_ns + queued_ns + sync_ns + cpu_ns + api_ns + setup_ns <> duration "
        "OR alloc_ns + copy_ns + other_api_ns <> api_ns OR sync_copy_ns > sync_ns"
    ).fetchone()[0]
    assert bad == 0
    row = built.execute(
        f"SELECT coalesce(max(abs({' + '.join(PARTS)} - step_ns_mean)), 0) FROM summary_step_parts"
    ).fetchone()
    assert row[0] < 1e-3 * 1e6


def test_steps_tile_their_span_and_never_overlap(built):
    rows = built.execute('SELECT device_id, start, "end" FROM steps ORDER BY device_id, step').fetchall()
    for (d1, _, e1), (d2, s2, _) in itertools.pairwise(rows):
        if d1 == d2:
            assert s2 == e1
    assert built.execute('SELECT count(*) FROM steps WHERE "end" < start').fetchone()[0] == 0


def test_warm_up_is_one_phase_with_the_steps_it_spans(built):
    """Warm-up steps, the compile stretch after them and the work before the last compile are
    one warm-up phase, not several in a row; it counts the steps that lie in it."""
    rows = built.execute('SELECT device_id, name, start, "end" FROM phases ORDER BY device_id, start').fetchall()
    for (d1, n1, _, e1), (d2, n2, s2, _) in itertools.pairwise(rows):
        assert not (d1 == d2 and n1 == n2 == "warmup" and s2 == e1)
    bad = built.execute(
        """SELECT count(*) FROM phases p WHERE p.name = 'warmup' AND p.steps IS NOT NULL AND p.steps <> (
               SELECT count(*) FROM steps t
               WHERE t.device_id = p.device_id AND t.start >= p.start AND t."end" <= p."end")"""
    ).fetchone()[0]
    assert bad == 0


def test_ranks_of_one_job_agree_or_say_so(built):
    rows = built.execute("SELECT device_id, occurrences, agreement FROM step_sources WHERE chosen").fetchall()
    for _, _, agreement in rows:
        if agreement and "the same anchor" in agreement:
            others = [m for d, m, a in rows if a == agreement]
            assert max(others) <= 1.05 * min(others)
    # Ranks of one job in lockstep (as many steps each) tell the same phases of steady work.
    counts = dict(built.execute("SELECT device_id, count(*) FROM steps GROUP BY 1").fetchall())
    told = dict(
        built.execute(
            "SELECT device_id, list(name ORDER BY start) FROM phases "
            "WHERE name IN ('prefill', 'decode', 'mixed', 'steady') GROUP BY 1"
        ).fetchall()
    )
    for agreement in {a for _, _, a in rows if a and "the same anchor" in a}:
        ranks = [d for d, _, a in rows if a == agreement]
        if len({counts.get(d) for d in ranks}) == 1:
            assert len({tuple(told.get(d) or ()) for d in ranks}) == 1


@requires_corpus
@pytest.mark.parametrize(
    "rel",
    [
        "teektonik__reports/task2_1024.export-nsys2022.4.sqlite",  # an OpenACC heat solver
        "teektonik__reports/with_cublas.export-nsys2022.4.sqlite",
        "skycs97__darknet/report2.export-nsys2022.4.sqlite",  # a CNN
        "Raphael-Hao__Abacus/report2.export-nsys2022.4.sqlite",  # CNN operators
        "FlagOpen__FlagGems/report1.export-nsys2025.3.sqlite",  # a kernel benchmark sweep
    ],
)
def test_work_that_is_not_llm_serving_gets_no_llm_phase_names(rel):
    d = analyze([CORPUS / rel])
    assert not {p.name for p in d.summary.phases} & LLM_PHASES


@requires_corpus
def test_a_sweep_is_not_called_start_up():
    """FlagGems' benchmark: Triton compiles each new shape; the compiles that recur between
    timed runs stay in the steady state instead of cutting it into warm-up pieces."""
    d = analyze([CORPUS / "FlagOpen__FlagGems/report1.export-nsys2025.3.sqlite"])
    assert [p.name for p in d.summary.phases].count("warmup") <= 1


@requires_corpus
def test_layer_ranges_are_not_steps():
    """A single forward pass annotated per layer (layer_N_forward) holds no repeated step."""
    d = analyze([CORPUS / "Sh1mwww__llama3-inference/demo.sqlite"])
    assert d.summary.steady_state is not None and d.summary.steady_state.steps is None


@requires_corpus
def test_overlapping_nvtx_ranges_are_not_steps():
    """Ranges whose GPU work overlaps (work enqueued ahead on several streams) cannot be steps."""
    built = store.build([CORPUS / "Newboyleo__llm-community/report1.export-nsys2025.3.sqlite"])
    try:
        con = built.connect()
        markers = {r[0] for r in con.execute("SELECT DISTINCT marker FROM steps").fetchall()}
        assert "overlap enqueue chunk #" not in markers
    finally:
        built.close()


@requires_corpus
def test_idle_gaps_inside_the_programs_ranges_are_named():
    d = analyze([CORPUS / "Sh1mwww__llama3-inference/demo.sqlite"])
    f = finding(d, "gpu-idle")
    assert f is not None and "by the program's NVTX ranges" in f.message and "`h2d_w3`" in f.message


# The projection as SQL once made it (an ASOF join per scope and depth), over every call of an
# operation's correlation id: the oracle for nvtx.gpu_per_range.
NVTX_GPU_SQL = """
WITH launches AS (
    SELECT o.device_id, o.start, o."end", o."end" - o.start AS duration, a.pid, a.tid, a.start AS t
    FROM ops o JOIN calls a ON a.corr = o.corr AND a.pid = o.pid
), levels AS (
    SELECT DISTINCT kind, pid, scope_tid, depth FROM nvtx_ranges_t
), keyed AS (
    SELECT l.*, v.kind, v.depth, v.scope_tid
    FROM launches l JOIN levels v
      ON v.pid = l.pid AND v.scope_tid = CASE WHEN v.kind = 'push_pop' THEN l.tid ELSE 0 END
), m AS (
    SELECT keyed.*, r.range_id, r."end" AS r_end
    FROM keyed ASOF JOIN nvtx_ranges_t r
      ON r.kind = keyed.kind AND r.pid = keyed.pid AND r.scope_tid = keyed.scope_tid
         AND r.depth = keyed.depth AND keyed.t >= r.start
)
SELECT range_id, device_id, count(*) AS gpu_ops, sum(duration)::BIGINT AS gpu_time, min(start) AS gpu_start,
       max("end") AS gpu_end
FROM m WHERE t <= r_end GROUP BY range_id, device_id ORDER BY range_id, device_id
"""


def test_gpu_work_per_nvtx_range_is_what_an_asof_join_per_depth_finds():
    """nvtx.gpu_per_range (as-of searches in Polars) against the SQL it replaced, on nested and
    overlapping push/pop and start/end ranges of two threads of one process (ranges built by
    the store's own _nvtx.sql), with operations issued by several calls of one correlation id."""
    import duckdb
    import polars as pl
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from nsight_doctor.store import view_files
    from nsight_doctor.store.timeline import nvtx

    rng = hs.tuples(
        hs.sampled_from(["push_pop", "start_end"]), hs.integers(1, 2), hs.integers(0, 40), hs.integers(0, 15)
    )
    corr = hs.none() | hs.integers(0, 30)  # (a null matches nothing)
    op = hs.tuples(hs.integers(0, 1), corr, hs.integers(0, 70))  # device, corr, start
    call = hs.tuples(corr, hs.integers(1, 2), hs.integers(0, 60))  # corr, tid, start

    @settings(max_examples=150, deadline=None)
    @given(hs.lists(rng, max_size=12), hs.lists(op, max_size=20), hs.lists(call, max_size=25))
    def check(ranges, ops, calls):
        con = duckdb.connect()
        con.execute(
            'CREATE TABLE base_nvtx (start BIGINT, "end" BIGINT, kind VARCHAR, text VARCHAR, text_id BIGINT, '
            "pid BIGINT, tid BIGINT, domain_id BIGINT)"
        )
        for k, t, s, d in ranges:
            con.execute("INSERT INTO base_nvtx VALUES (?, ?, ?, 'r', NULL, 7, ?, NULL)", [s, s + d, k, t])
        con.execute("CREATE TABLE base_strings (id BIGINT, value VARCHAR)")
        con.execute("CREATE TABLE base_nvtx_domains (domain_id BIGINT, name VARCHAR)")
        con.execute(view_files()["_nvtx"])
        con.execute('CREATE TABLE ops (device_id INTEGER, start BIGINT, "end" BIGINT, pid BIGINT, corr BIGINT)')
        for device, corr, start in ops:
            con.execute("INSERT INTO ops VALUES (?, ?, ?, 7, ?)", [device, start, start + 5, corr])
        con.execute("CREATE TABLE calls (pid BIGINT, tid BIGINT, start BIGINT, corr BIGINT)")
        for corr, tid, start in calls:
            con.execute("INSERT INTO calls VALUES (7, ?, ?, ?)", [tid, start, corr])
        want = con.execute(NVTX_GPU_SQL).fetchall()
        o, c = pl.DataFrame(con.sql("SELECT * FROM ops")), pl.DataFrame(con.sql("SELECT * FROM calls"))
        r = pl.DataFrame(con.sql('SELECT range_id, pid, tid, scope_tid, kind, depth, start, "end" FROM nvtx_ranges_t'))
        got = nvtx.gpu_per_range(o, c, r)
        assert got.rows() == want

    check()
