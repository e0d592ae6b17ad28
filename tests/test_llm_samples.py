"""End to end on the LLM-serving samples (Hugging Face transformers on an H200): steps,
phases and the LLM rules, each number checked against plain Python over SQLite reads of the
raw export (no DuckDB, no view of ours). What each sample should diagnose is in its README.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

import oracle
from conftest import sample, unxz
from nsight_doctor import analyze
from nsight_doctor.render.json_out import to_dict

# The vocabulary projection (lm_head) of each sample, from its README: one launch per forward.
LM_HEAD = {
    "hf_eager_attn": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
    "hf_sdpa": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
    "hf_cat_cache": "nvjet_sm90_tst_256x16_64x6_2x1_v_bz_TNT",
    "hf_static_cache": "nvjet_sm90_tst_256x16_64x6_2x1_v_bz_TNT",
    "hf_cb_graphs": "nvjet_sm90_tst_256x32_64x5_2x1_v_bz_TNT",
}
GEMM = re.compile(r"gemm|gemv|nvjet|cutlass", re.I)
ELEMENTWISE = re.compile(r"elementwise|softmax", re.I)


def export_path(name: str, tmp_dir: Path) -> Path:
    plain = sample(name)
    return plain if plain.exists() else unxz(sample(name, ".sqlite.xz"), tmp_dir)


def analysed(names, tmp: Path) -> dict:
    """name -> (diagnosis, SQLite connection to the raw export)."""
    out = {}
    for name in names:
        path = export_path(name, tmp)
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        con.execute("ATTACH DATABASE ? AS x", (f"file:{path}?mode=ro&immutable=1",))  # for the oracle
        out[name] = (analyze([path]), con)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return analysed(LM_HEAD, tmp_path_factory.mktemp("llm"))


def kernels(con) -> list[tuple]:
    """(start, end, stream, short name, demangled name, grid size, in graph) of every kernel, in order."""
    return con.execute(
        """SELECT k.start, k.end, k.streamId, s.value, d.value, k.gridX * k.gridY * k.gridZ, k.graphNodeId IS NOT NULL
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        JOIN StringIds d ON d.id = k.demangledName ORDER BY k.start"""
    ).fetchall()


def lm_head_ends(con, name: str) -> list[int]:
    return [k[1] for k in kernels(con) if k[3] == LM_HEAD[name]]


def finding(d, rule_id):
    found = [f for f in d.findings if f.rule_id == rule_id]
    return found[0] if found else None


def phase(d, name):
    found = [p for p in d.summary.phases if p.name == name]
    assert len(found) == 1, [p.name for p in d.summary.phases]
    return found[0]


@pytest.mark.parametrize("name", list(LM_HEAD))
def test_steps_are_the_forward_passes(runs, name):
    """Without NVTX, one step per forward pass: the vocabulary projection recurs once per step,
    and each step begins once the host has read the previous one's token (the oracle)."""
    d, con = runs[name]
    ends = lm_head_ends(con, name)
    st = d.summary.steady_state
    assert st is not None and st.steps == len(ends)
    steps = [p for p in d.summary.phases if p.steps]
    assert sum(p.steps for p in steps) == len(ends)
    durations = oracle.anchor_step_times(con, LM_HEAD[name], (2, 63, 1))
    assert len(durations) == len(ends) - 1
    decode = [p for p in steps if p.name == "decode"]
    if decode and name != "hf_cb_graphs":
        # Generate loops: one prefill step, then decode steps only.
        assert [p.name for p in steps] == ["prefill", "decode"]
        assert decode[0].steps == len(ends) - 1
        assert decode[0].step_ns_median == statistics.median(durations)


def test_generate_loops_start_with_one_prefill_step(runs):
    for name in ("hf_eager_attn", "hf_sdpa", "hf_cat_cache", "hf_static_cache"):
        d, _ = runs[name]
        assert phase(d, "prefill").steps == 1, name
        assert d.summary.steady_state.kind == "decode", name


def test_continuous_batching_has_prefill_mixed_and_decode_steps(runs):
    d, _con = runs["hf_cb_graphs"]
    names = [p.name for p in d.summary.phases if p.steps]
    assert names[0] == "prefill" and "mixed" in names and "decode" in names
    # The README: 7 steps with prefill chunks, then decode steps.
    assert sum(p.steps for p in d.summary.phases if p.name in ("prefill", "mixed")) == 7


RANDOM = re.compile(r"distribution_|normal_kernel|uniform_kernel|curand|randn|random_", re.I)
BETWEEN = re.compile(r"elementwise|softmax|reduce", re.I)


def unfused_chains(con, start: int, end: int, max_between: int = 12) -> tuple[int, int]:
    """(chains, kernel ns between the GEMMs): a softmax with a GEMM at most max_between
    kernels before and after it on its stream, only elementwise kernels and reductions
    between, none of them a random-number kernel, and two GEMMs that differ (name or grid)."""
    by_stream: dict[int, list[tuple]] = {}
    for k in kernels(con):
        if k[0] >= start and k[1] <= end:
            by_stream.setdefault(k[2], []).append(k)
    pairs: dict[tuple, int] = {}
    for stream, ks in by_stream.items():
        for i, k in enumerate(ks):
            if "softmax" not in k[3].lower():
                continue
            before = [j for j in range(max(0, i - max_between - 1), i) if GEMM.search(ks[j][4])]
            after = [j for j in range(i + 1, min(len(ks), i + max_between + 2)) if GEMM.search(ks[j][4])]
            if not before or not after:
                continue
            a, b = before[-1], after[0]
            middle = ks[a + 1 : b]
            same_gemm = (ks[a][3], ks[a][5]) == (ks[b][3], ks[b][5])
            if not same_gemm and all(BETWEEN.search(m[3]) and not RANDOM.search(m[3]) for m in middle):
                pairs[(stream, a, b)] = sum(m[1] - m[0] for m in middle)
    return len(pairs), sum(pairs.values())


def test_eager_attention_is_found_unfused_with_numbers_from_sql(runs):
    d, con = runs["hf_eager_attn"]
    f = finding(d, "unfused-attention")
    assert f is not None
    st = d.summary.steady_state
    chains, between = unfused_chains(con, st.start_ns, st.end_ns)
    assert chains == 128  # 16 forward passes x 8 layers (README)
    assert (f.evidence["chains"], f.evidence["between_ns"]) == (chains, between)
    assert f.impact_ns == between
    # It ranks below the launch-bound decode loop that dominates the profile.
    assert d.findings[0].rule_id == "launch-bound"
    assert "sdpa" in f.recommendation


@pytest.mark.slow
def test_sdpa_math_path_is_unfused_attention_with_numbers_from_sql(tmp_path_factory):
    """SDPA forced onto its math backend (README): QK^T and PV as FP32 GEMMs with nine passes
    after the softmax. Attention, not GEMM and elementwise work: the top finding, and the
    largest kernel category."""
    runs = analysed(["hf_prefill_math", "hf_prefill_flash"], tmp_path_factory.mktemp("prefill"))
    d, con = runs["hf_prefill_math"]
    f = finding(d, "unfused-attention")
    assert f is not None and d.findings[0] is f and f.severity == "high"
    st = d.summary.steady_state
    chains, between = unfused_chains(con, st.start_ns, st.end_ns)
    assert chains == 24  # 3 passes x 8 layers (README)
    assert (f.evidence["chains"], f.evidence["between_ns"], f.impact_ns) == (chains, between, between)
    assert "Per step: 8.0 chains" in f.message
    assert max(d.summary.kernel_categories, key=lambda c: c.total_ns).category == "attention-unfused"
    flash, fcon = runs["hf_prefill_flash"]
    assert finding(flash, "unfused-attention") is None
    assert unfused_chains(fcon, flash.summary.steady_state.start_ns, flash.summary.steady_state.end_ns) == (0, 0)


def test_sdpa_attention_is_not_called_unfused(runs):
    d, con = runs["hf_sdpa"]
    assert finding(d, "unfused-attention") is None
    st = d.summary.steady_state
    assert unfused_chains(con, st.start_ns, st.end_ns) == (0, 0)


# PyTorch's TensorIterator kernels (element-wise, reductions, gathers, scans): each a full pass
# through memory, doing little arithmetic per byte.
MEMORY_BOUND = re.compile(r"elementwise|^reduce_kernel$|gather|scan", re.I)


def memory_bound_chains(con, start: int, end: int, cuts: list[int] | None = None) -> tuple[int, int, int]:
    """(chains, their kernels, ns a fused kernel per chain would save): runs of two or more
    memory-bound kernels in a row on a stream, with no other kernel, copy or memset between
    them, nor one of the times `cuts` (sorted: where iterations begin); a fused kernel costs
    about the run's longest."""
    ops: dict[int, list[tuple]] = {}
    for k in kernels(con):
        if k[0] >= start and k[1] <= end:
            ops.setdefault(k[2], []).append((k[0], k[1], k[3], bool(MEMORY_BOUND.search(k[3]))))
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for a, b, stream in con.execute(f"SELECT start, end, streamId FROM {table}"):
            if a >= start and b <= end:
                ops.setdefault(stream, []).append((a, b, "", False))
    chains = n = saved = 0
    for stream_ops in ops.values():
        run: list[int] = []
        last_cut = None
        for a, b, _, fusible in [*sorted(stream_ops), (0, 0, "", False)]:
            cut = bisect.bisect_right(cuts or [], a) if fusible else None
            if fusible and (not run or cut == last_cut):
                run.append(b - a)
                last_cut = cut
                continue
            if len(run) > 1:
                chains, n, saved = chains + 1, n + len(run), saved + sum(run) - max(run)
            run = [b - a] if fusible else []
            last_cut = cut
    return chains, n, saved


def test_a_busy_prefill_is_gpu_bound_with_chains_to_fuse_counted_as_sql_counts_them(tmp_path):
    """The prefill with FlashAttention keeps the GPU busy (README): the top finding is that the
    kernels set the pace, and the time it claims is what fusing the runs of PyTorch's
    element-wise and reduction kernels would save, counted here from the raw export."""
    d, con = analysed(["hf_prefill_flash"], tmp_path)["hf_prefill_flash"]
    f = d.findings[0]
    assert f.rule_id == "gpu-bound", [x.rule_id for x in d.findings]
    st = d.summary.steady_state
    chains, n, saved = memory_bound_chains(con, st.start_ns, st.end_ns)
    assert chains > 24  # (at least one a layer: 8 layers x 3 prompts)
    assert (f.evidence["chains"], f.evidence["chain_kernels"], f.evidence["saved_ns"]) == (chains, n, saved)
    assert f.impact_ns == saved
    assert f.evidence["busy_pct"] >= 85 and f.evidence["busy_pct"] == pytest.approx(st.busy_pct)
    assert "torch.compile" in f.recommendation


def test_a_heat_solvers_chains_end_with_each_iteration(tmp_path):
    """jacobi_solver: each iteration's five memory-bound kernels (four over the neighbours'
    slices, a copy into the interior) depend on the whole grid of the iteration before, so a
    chain ends with its iteration: 600 chains, counted here from the raw export with an
    iteration beginning at each first neighbour kernel after an interior copy (not 24 chains
    of 127 kernels across the checks' syncs)."""
    d, con = analysed(["jacobi_solver"], tmp_path)["jacobi_solver"]
    f = d.findings[0]
    assert f.rule_id == "gpu-bound", [x.rule_id for x in d.findings]
    assert {p.name for p in d.summary.phases if p.steps} == {"steady"}
    st = d.summary.steady_state
    # (an iteration: three adds over the neighbours' strided slices, the multiply by 0.25 on
    # their contiguous sum, the copy into the strided interior; it begins three kernels before
    # its multiply, the vectorized kernel of 16,384 blocks: the checks' run 16,401)
    ks = kernels(con)
    mul = [i for i, k in enumerate(ks) if k[3] == "vectorized_elementwise_kernel" and k[5] == 16384]
    cuts = sorted(ks[i - 3][0] for i in mul)
    chains, n, saved = memory_bound_chains(con, st.start_ns, st.end_ns, cuts)
    facts = json.loads((sample("jacobi_solver", ".sqlite.xz").parent / "facts.json").read_text())
    assert chains == facts["iterations"] == 600
    assert f.evidence["chains"] == chains and f.evidence["chain_kernels"] == n
    assert f.evidence["saved_ns"] == pytest.approx(saved, rel=0.01)
    # (across iterations, the runs between the checks' copies would claim nearly all of it)
    assert memory_bound_chains(con, st.start_ns, st.end_ns)[2] > 1.2 * saved


def test_launch_bound_decode_is_not_called_gpu_bound(runs):
    for name, (d, _) in runs.items():
        assert finding(d, "gpu-bound") is None, name
        assert d.summary.steady_state.busy_pct < 85, name


def cat_copies_per_step(con, lm_head: str) -> list[tuple[int, int]]:
    """(kernels, ns) per decode step (between two vocabulary projections) of the cache's
    concatenations: CatArrayBatchedCopy_vectorized, grid y 2, 128 threads, leaving out the
    much smaller one that appends to input_ids (README)."""
    rows = con.execute(
        """SELECT k.start, k.end, k.gridX * k.gridY * k.gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName
        WHERE s.value = 'CatArrayBatchedCopy_vectorized' AND k.gridY = 2 AND k.blockX = 128 ORDER BY k.start"""
    ).fetchall()
    out = []
    ends = [k[1] for k in kernels(con) if k[3] == lm_head]
    for a, b in itertools.pairwise(ends):
        ks = [k for k in rows if a <= k[0] < b]
        big = max((k[2] for k in ks), default=0)
        ks = [k for k in ks if 2 * k[2] >= big]
        out.append((len(ks), sum(k[1] - k[0] for k in ks)))
    return out


def test_cat_grown_kv_cache_is_found_with_numbers_from_sql(runs):
    d, con = runs["hf_cat_cache"]
    f = finding(d, "kv-cache-concat")
    assert f is not None
    per_step = cat_copies_per_step(con, LM_HEAD["hf_cat_cache"])
    assert f.evidence["kernels"] == sum(n for n, _ in per_step) == 2032
    assert f.evidence["per_step"] == 16  # 8 layers x keys and values
    assert (f.evidence["first_step_ns"], f.evidence["last_step_ns"]) == (per_step[0][1], per_step[-1][1])
    assert f.evidence["total_ns"] == sum(ns for _, ns in per_step)
    assert per_step[-1][1] > 1.5 * per_step[0][1]
    assert "static" in f.recommendation


@pytest.mark.slow
def test_whole_cache_copies_are_found_in_a_short_capture(tmp_path_factory):
    """16 steps of a 256-token prompt: the copies grow by a few percent, but each step copies
    the whole cache (README)."""
    d, con = analysed(["hf_cat_cache16"], tmp_path_factory.mktemp("cat16"))["hf_cat_cache16"]
    f = finding(d, "kv-cache-concat")
    assert f is not None
    per_step = cat_copies_per_step(con, "nvjet_sm90_tst_256x32_64x5_2x1_v_bz_TNT")  # its lm_head (batch 32)
    assert f.evidence["per_step"] == 16
    assert f.evidence["total_ns"] == sum(ns for _, ns in per_step)
    assert per_step[-1][1] < 1.2 * per_step[0][1]  # under the old rule's 20% growth
    assert f.evidence["first_grid"] == f.evidence["last_grid"]  # a grid at its cap


@pytest.mark.slow
def test_whole_cache_copies_of_a_long_cache_are_found_beside_the_attention(tmp_path_factory):
    """hf_bigbatch: 1,024-token prompts grown by 15 tokens, in two generate() calls: the copies
    barely grow, yet each step's take twice the attention kernels' that read the cache once
    (README). Numbers from the raw export, between the vocabulary projection's launches."""
    d, con = analysed(["hf_bigbatch"], tmp_path_factory.mktemp("big"))["hf_bigbatch"]
    f = finding(d, "kv-cache-concat")
    assert f is not None
    lm_head = "nvjet_sm90_tst_256x64_64x5_2x1_v_bz_TNT"  # its vocabulary projection (README)
    per_step = [c for c in cat_copies_per_step(con, lm_head) if c[0]]
    assert f.evidence["kernels"] == sum(n for n, _ in per_step)
    assert f.evidence["total_ns"] == sum(ns for _, ns in per_step)
    assert f.evidence["median_step_ns"] == statistics.median(ns for _, ns in per_step)
    assert f.evidence["per_step"] >= 32  # 16 layers x keys and values
    # The attention per step: the cuDNN SDPA kernels between two projections.
    ks = kernels(con)
    ends = [k[1] for k in ks if k[3] == lm_head]
    attn = [k for k in ks if "sdpa" in k[3]]
    per_attn = [sum(k[1] - k[0] for k in attn if a <= k[0] < b) for a, b in itertools.pairwise(ends)]
    assert f.evidence["attn_step_ns"] == pytest.approx(statistics.median(per_attn), rel=0.02)
    assert f.evidence["attention_ratio"] >= 1.5
    assert per_step[-1][1] < 1.05 * per_step[1][1]  # no growth to see within a call
    # Two bounds of one size lead, the copies after them: the GPU busy 86% (gpu-bound), and the
    # decode steps' launch waits (launch-bound), each about 12% of the steady state.
    top = {f.rule_id: f.impact_ns for f in d.findings[:2]}
    assert set(top) == {"gpu-bound", "launch-bound"}
    assert min(top.values()) >= 0.98 * max(top.values()) and d.findings[2] is f


def test_compiled_generate_waits_for_the_eager_decoding_loop_around_its_graph_replays(tmp_path):
    """hf_compiled: generate() with a forward compiled with mode="reduce-overhead", traced as
    whole graphs: one replay per token, and around it the decoding loop's eager kernels, which
    the GPU waits for. The advice speaks of that loop, not only of generate_batch's batch
    preparation (the text it once gave), and not of turning CUDA graphs on."""
    d, con = analysed(["hf_compiled"], tmp_path)["hf_compiled"]
    f = finding(d, "launch-bound")
    assert f is not None and d.findings[0] is f
    assert "outside CUDA graphs" in f.title
    st = d.summary.steady_state
    replays = con.execute(
        "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE start >= ? AND end <= ?",
        (st.start_ns, st.end_ns),
    ).fetchone()
    assert f.evidence["graph_launches"] == replays[0] == st.steps == 64
    eager = [k for k in kernels(con) if k[0] >= st.start_ns and k[1] <= st.end_ns]
    assert f.evidence["eager_kernels"] == len(eager)
    eager_ns = sum(k[1] - k[0] for k in eager)
    assert f.evidence["graph_share_pct"] == pytest.approx(100 * replays[1] / (replays[1] + eager_ns))
    assert "already replays" in f.recommendation and "decoding loop" in f.recommendation
    assert "static cache" not in f.recommendation  # (the advice to turn CUDA graphs on)


def test_a_forward_compiled_without_cuda_graphs_is_told_to_replay_them_not_to_compile(tmp_path):
    """hf_inductor: generate() with a forward compiled by torch.compile's default mode: Inductor's
    Triton kernels (triton_poi_..., SQL over the export) launched one by one. Launch-bound is
    first, and its advice is the compile mode that replays CUDA graphs, not to compile or fuse,
    which the workload already does; an eager generate() keeps the advice to compile."""
    d, con = analysed(["hf_inductor"], tmp_path)["hf_inductor"]
    f = finding(d, "launch-bound")
    assert f is not None and d.findings[0] is f
    st = d.summary.steady_state
    eager = [k for k in kernels(con) if k[0] >= st.start_ns and k[1] <= st.end_ns and not k[6]]
    inductor = [k for k in eager if re.match(r"triton_(poi|red|per|tem|for)_", k[3])]
    assert f.evidence["eager_kernels"] == len(eager) and f.evidence["inductor_kernels"] == len(inductor)
    assert 0.3 < len(inductor) / len(eager) < 0.6
    assert f"{100 * len(inductor) / len(eager):.0f}% of them are torch.compile's" in f.message
    assert 'mode="reduce-overhead"' in f.recommendation and "already compiled" in f.recommendation
    assert "Fewer, larger kernels" not in f.recommendation
    eager_run, _ = analysed(["hf_generate"], tmp_path)["hf_generate"]
    g = finding(eager_run, "launch-bound")
    assert g is not None and g.evidence["inductor_kernels"] == 0
    assert "already compiled" not in g.recommendation and "Fewer, larger kernels" in g.recommendation


def test_preallocated_kv_cache_is_not_called_concatenated(runs):
    d, _ = runs["hf_static_cache"]
    assert finding(d, "kv-cache-concat") is None
    assert d.findings[0].rule_id == "launch-bound"


def test_graph_replays_with_eager_work_around_them_are_launch_bound_outside_the_graphs(runs):
    d, con = runs["hf_cb_graphs"]
    f = finding(d, "launch-bound")
    assert f is not None and "outside CUDA graphs" in f.title
    st = d.summary.steady_state
    eager = [k for k in kernels(con) if k[0] >= st.start_ns and k[1] <= st.end_ns and not k[6]]
    assert f.evidence["eager_kernels"] == len(eager)
    assert f.evidence["graph_share_pct"] > 90
    # The advice is about the work around the graphs, not about turning graphs on.
    assert "already replays" in f.recommendation
    # Nine blocking calls per step (README): the scheduler's syncs. They wait while the graphs
    # run (GPU busy, the thread blocked), hardly ever with the GPU idle: no host-sync finding.
    assert 8 <= d.summary.sync.steady_blocking_count / st.steps <= 11
    parts = d.summary.steady_gpus[0].step_parts
    assert parts.blocked_ns > 0.3 * parts.step_ns_mean and parts.sync_ns < 0.02 * parts.step_ns_mean
    assert finding(d, "host-sync") is None


def test_startup_sample_separates_the_model_load_from_a_saturated_steady_state():
    d = analyze([sample("hf_startup", ".sqlite.xz")])
    st = d.summary.steady_state
    assert st is not None and (st.busy_pct or 0) > 90
    steady = [f for f in d.findings if f.scope == "steady"]
    # The load's syncs and pageable copies are not steady-state findings.
    assert not [f for f in steady if f.rule_id in ("host-sync", "launch-bound", "pageable-memcpy", "sync-memcpy")]
    f = finding(d, "startup")
    assert f is not None and f.scope == "startup"
    assert f.evidence["htod_copies"] == 221 and f.evidence["pageable_bytes"] == f.evidence["htod_bytes"]
    assert 2.7e9 < f.evidence["htod_bytes"] < 2.8e9


SKINNY = re.compile(r"^nvjet_[a-z0-9]+_[a-z]+_([0-9]+)x([0-9]+)_")


def test_small_batch_decode_with_numbers_from_sql(runs):
    """Batch 8: the decode GEMMs run in cuBLAS tiles 8 columns wide."""
    d, con = runs["hf_sdpa"]
    f = finding(d, "small-batch-decode")
    assert f is not None and f.impact_ns == 0
    decode = phase(d, "decode")
    skinny = gemm = 0
    for k in kernels(con):
        if k[0] >= decode.start_ns and k[1] <= decode.end_ns and (GEMM.search(k[4]) or "splitKreduce" in k[3]):
            gemm += k[1] - k[0]
            m = SKINNY.search(k[3])
            if "gemv" in k[4].lower() or (m and min(int(m.group(1)), int(m.group(2))) <= 16):
                skinny += k[1] - k[0]
    assert (f.evidence["skinny_ns"], f.evidence["gemm_ns"]) == (skinny, gemm)


def test_no_small_batch_finding_at_batch_512():
    d = analyze([sample("decode_b512")])
    assert not [f for f in d.findings if f.rule_id == "small-batch-decode"]


# ---- MoE routing and sampling on the host (samples captured by `capture.sh ... llm2`) -------

ROUTING = re.compile(r"topk|bitonicsort|radixsortkv|histogram|DeviceSelect|DeviceCompact|write_indices|nonzero", re.I)


@pytest.fixture(scope="module")
def runs2(tmp_path_factory):
    return analysed(
        ("hf_moe_eager", "hf_moe_grouped", "hf_sample_host", "hf_sample_gpu"), tmp_path_factory.mktemp("llm2")
    )


def gpu_ops(con) -> list[tuple]:
    """(start, end, kind, bytes, copyKind) of every operation on the GPU, in order."""
    return con.execute(
        """SELECT start, end, 'kernel', NULL, NULL FROM CUPTI_ACTIVITY_KIND_KERNEL
        UNION ALL SELECT start, end, 'memcpy', bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY
        UNION ALL SELECT start, end, 'memset', bytes, NULL FROM CUPTI_ACTIVITY_KIND_MEMSET
        ORDER BY 1, 2"""
    ).fetchall()


def test_sampling_on_the_host_and_launch_waiting_lead_with_numbers_from_sql(runs2):
    """Each step copies the logits (8 x 32000 fp32 = 1.02 MB) to the host and samples in NumPy:
    the GPU idles from the copy's end until the next step's first operation, while the CPU runs
    the sampling code. The rest of each step is the launch overhead of 351 kernels: the two
    claims are nearly equal (about 47% each) and disjoint."""
    d, con = runs2["hf_sample_host"]
    assert {f.rule_id for f in d.findings[:2]} == {"host-sampling", "launch-bound"}
    f = finding(d, "host-sampling")
    st = d.summary.steady_state
    ops = gpu_ops(con)
    gaps = []
    busy_until = 0
    for (_s, e, kind, nbytes, ck), nxt in itertools.pairwise(ops):
        busy_until = max(busy_until, e)
        # A device-to-host copy (copyKind 2) of 32 KiB or more that the GPU's work ends with.
        if kind == "memcpy" and ck == 2 and nbytes >= 32768 and e == busy_until and nxt[0] > e:
            if st.start_ns <= e and nxt[0] <= st.end_ns:
                gaps.append((e, nxt[0]))
    # (one read-back per token, 32, after each of the 33 passes but the last: the prompt's
    # pass is a step, looked up with PyTorch's gather where the decode steps use index_select)
    assert len(gaps) == 32 == st.steps - 1
    assert f.evidence["copies"] == len(gaps) and f.evidence["median_bytes"] == 8 * 32000 * 4
    # It claims the time the launching thread was not launching: blocked, in CUDA calls, or
    # running code (the oracle's walk of the thread).
    parts = {(g.start, g.end): g.parts for g in oracle.gaps(oracle.open_export(sample("hf_sample_host")))}
    assert f.impact_ns == sum(parts[g]["sync"] + parts[g]["cpu"] + parts[g]["api"] for g in gaps)
    assert f.impact_ns > 0.95 * sum(e - s for s, e in gaps)
    launch = finding(d, "launch-bound")
    busy = sum(g.busy_ns for g in d.summary.steady_gpus)
    assert f.impact_ns + launch.impact_ns <= st.window_ns - busy
    for x in (f, launch):
        assert 0.4 < x.impact_ns / st.window_ns < 0.5
    # The host's sampling is most of the idle time that gpu-idle would otherwise have claimed.
    idle = finding(d, "gpu-idle")
    assert idle is None or idle.impact_ns < f.impact_ns / 4


def test_sampling_on_the_gpu_is_not_called_host_sampling(runs2):
    d, _ = runs2["hf_sample_gpu"]
    host, _ = runs2["hf_sample_host"]
    assert finding(d, "host-sampling") is None
    # What the finding promised: the same loop sampling on the GPU takes well under half the step.
    assert d.summary.steady_state.step_ns_median < host.summary.steady_state.step_ns_median / 2


def test_moe_routing_on_the_host_with_numbers_from_sql(runs2):
    """transformers' eager experts loop: per layer a top-k, then nonzero/where per expert, each
    reading a size back with cudaStreamSynchronize (8 layers, 8 experts)."""
    d, con = runs2["hf_moe_eager"]
    f = finding(d, "moe-routing")
    assert f is not None and d.findings.index(f) <= 1
    assert finding(d, "host-sync") is None  # its gaps are this finding's
    st = d.summary.steady_state
    steps = st.steps
    assert f.evidence["layers_per_step"] == 8
    by_name: dict[str, list[int]] = {}
    for s, e, _stream, short, _dem, _grid, _g in kernels(con):
        if s >= st.start_ns and e <= st.end_ns and ROUTING.search(short):
            by_name.setdefault(short, []).append(e - s)
    routing = {n: v for n, v in by_name.items() if len(v) >= 2 * steps}
    assert f.evidence["routing_kernels"] == sum(len(v) for v in routing.values())
    assert f.evidence["routing_ns"] == sum(sum(v) for v in routing.values())
    syncs = con.execute(
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cudaStreamSynchronize%' AND r.start >= ? AND r.start <= ?""",
        (st.start_ns, st.end_ns),
    ).fetchone()[0]
    assert f.evidence["blocking_calls"] >= syncs > 8 * 8 * steps / 2
    assert f.evidence["syncs_per_layer"] > 8


def test_grouped_moe_routing_is_not_called_host_routed(runs2):
    d, _ = runs2["hf_moe_grouped"]
    eager, _ = runs2["hf_moe_eager"]
    assert finding(d, "moe-routing") is None
    assert d.summary.steady_state.step_ns_median < 0.7 * eager.summary.steady_state.step_ns_median


def test_ties_are_broken_the_same_way_with_any_number_of_threads(runs2, monkeypatch):
    """hf_moe_grouped's decode runs three skinny GEMMs equally often (496 launches each): the
    finding names the one with the most time (128x8: 9.7 ms, against 2.1 and 1.9 ms), not
    whichever a thread counted first, and the whole diagnosis is the same with one DuckDB
    thread as with several."""
    d, _ = runs2["hf_moe_grouped"]
    assert finding(d, "small-batch-decode").evidence["top_skinny"] == "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT"
    monkeypatch.setenv("NSIGHT_DOCTOR_THREADS", "1")
    one = analyze([export_path("hf_moe_grouped", Path("/nonexistent"))])
    assert to_dict(one)["findings"] == to_dict(d)["findings"]
    assert to_dict(one)["summary"] == to_dict(d)["summary"]


def test_kernels_built_per_new_length_are_the_top_finding_with_numbers_from_sql():
    """hf_sdpa_new_shapes: the warm-up decoded 4 tokens, so every measured step meets a new KV
    length and cuDNN builds and loads an SDPA plan for it (cuLibraryLoadData) while the GPU
    waits."""
    path = sample("hf_sdpa_new_shapes")
    d = analyze([path])
    f = d.findings[0]
    assert f.rule_id == "steady-compile"
    st = d.summary.steady_state
    assert st is not None and st.steps
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    busy: list[list[int]] = []
    for s, e, *_ in gpu_ops(con):
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
    loads = con.execute(
        """SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cuLibraryLoad%' OR s.value LIKE 'cuModuleLoad%'"""
    ).fetchall()
    hit = [
        (s, e)
        for s, e in gaps
        if e - s >= 1_000_000 and st.start_ns <= s and e <= st.end_ns and any(a < e and b > s for a, b in loads)
    ]
    assert len(hit) >= st.steps - 5  # one new length per decode step (32 of the 33 passes)
    assert f.evidence["gaps"] == len(hit)
    # It claims their one-time part: all but the time the thread spent blocked, in other CUDA
    # calls, or with the next kernel already queued (the oracle's walk of the thread).
    setup = {(g.start, g.end): g.parts["setup"] for g in oracle.gaps(oracle.open_export(path))}
    assert f.impact_ns == sum(setup[h] for h in hit)
    assert 0.99 * sum(e - s for s, e in hit) < f.impact_ns
    assert f.evidence["idle_pct"] > 50
    # Warmed up over the same lengths, the same loop builds nothing while measured.
    assert finding(analyze([sample("hf_sample_gpu")]), "steady-compile") is None
