"""nsight-doctor compare on real pairs of samples: verdicts, gate exit codes and deltas, with the
step times computed independently from the raw exports by SQLite (tests/oracle.py), and the
numbers checked against what analyze gives for each profile."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
import statistics
from pathlib import Path

import jsonschema
import pytest

import oracle
from browser import Browser, keep_artifact, requires_chromium
from conftest import CORPUS, REPO, SAMPLES, cropped, requires_corpus, run_cli, sample, unxz
from nsight_doctor import analyze
from nsight_doctor.compare import METRICS, CompareError, CompareOptions, Profile, compare, step_gpu
from nsight_doctor.compare.warnings import OUTPUT_OPTION
from nsight_doctor.model import Diagnosis, fmt_ns
from nsight_doctor.render.compare import render_markdown, render_text, to_dict
from test_render import check_snapshot

# The vocabulary projection (lm_head) GEMM of the transformers samples: one launch per forward
# step (their READMEs).
LM_HEAD = {
    "hf_eager_attn": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
    "hf_sdpa": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
    "hf_cat_cache": "nvjet_sm90_tst_256x16_64x6_2x1_v_bz_TNT",
    "hf_static_cache": "nvjet_sm90_tst_256x16_64x6_2x1_v_bz_TNT",
    "hf_moe_eager": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
    "hf_moe_grouped": "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT",
}
HOSTILE = "<img src=x onerror=alert(1)>|](javascript:alert(1))`**b**`\x1b[31m"


def export_path(name: str) -> Path:
    return next((SAMPLES / name).glob(f"{name}.sqlite*"))


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """name → an SQLite connection to the raw export (decompressed when it is .xz)."""
    folder = tmp_path_factory.mktemp("exports")
    cache: dict[str, sqlite3.Connection] = {}

    def get(name: str) -> sqlite3.Connection:
        if name not in cache:
            p = export_path(name)
            if p.suffix == ".xz":
                dest = folder / p.name.removesuffix(".xz")
                dest.write_bytes(lzma.decompress(p.read_bytes()))
                p = dest
            cache[name] = oracle.open_export(p)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def diagnoses():
    cache: dict[str, Diagnosis] = {}

    def get(name: str) -> Diagnosis:
        if name not in cache:
            cache[name] = analyze([export_path(name)])
        return cache[name]

    return get


def cmp(diagnoses, *names: str, **options):
    return compare([Profile(n, n, diagnoses(n)) for n in names], CompareOptions(**options))


def decode_step_median(exports, name: str) -> dict[int, float]:
    """The oracle's median decode step per GPU: NVTX decode_step ranges, or for the transformers
    samples (no NVTX) the time between lm_head launches, the prefill being the first step."""
    if name in LM_HEAD:
        return {0: statistics.median(oracle.anchor_step_times(exports(name), LM_HEAD[name], (2, 63, 1)))}
    return {dev: statistics.median(v) for dev, v in oracle.nvtx_step_times(exports(name), "decode_step").items()}


def oracle_pair(exports, a: str, b: str) -> tuple[float, float]:
    """The two profiles' median decode steps, of single-GPU profiles (or of their first GPU)."""
    ma, mb = decode_step_median(exports, a), decode_step_median(exports, b)
    return ma[min(ma)], mb[min(mb)]


# Verdicts and gates against the oracle -------------------------------------------------------


@pytest.mark.slow
def test_graphs_against_eager(diagnoses, exports):
    eager, graphs = oracle_pair(exports, "decode_b1", "decode_b1_graphs")
    c = cmp(diagnoses, "decode_b1", "decode_b1_graphs")
    v = c.verdict
    assert (c.gate.metric, c.gate.baseline, c.gate.candidate) == ("decode_step", eager, graphs)
    assert v.direction == "faster" and v.ratio == pytest.approx(graphs / eager)
    assert f"{eager / graphs:.1f}x faster per decode step" in v.text
    assert f"({fmt_ns(eager)} → {fmt_ns(graphs)})" in v.text
    # The cause: launch waiting, from most of the step to a small part of it.
    main = v.causes[0]
    assert main.role == "main" and main.component == "idle:launch"
    assert main.baseline_share_pct > 80 and main.candidate_share_pct < 15
    assert "waiting for kernel launches fell" in v.text and "1 CUDA graph" in v.text
    codes = {w.code for w in c.warnings}
    assert "graph-trace" in codes and "kernel-mix" not in codes and "launch-shapes" not in codes
    diff = {(x.rule_id, x.status) for x in c.findings_diff[0].changes}
    assert ("launch-bound", "resolved") in diff
    # Neither blocks with the GPU idle: their per-step syncs wait while it works.
    assert "host-sync" not in {r for r, _ in diff}


@pytest.mark.slow
def test_b512_is_slower_per_step_but_not_per_token(diagnoses, exports):
    b1, b512 = oracle_pair(exports, "decode_b1", "decode_b512")
    assert b512 > 1.1 * b1  # the premise
    # The steps do different work (the same kernels launch 512x the threads per step): not
    # compared per step, but per token, the tokens per step inferred from that; the gate passes.
    c = cmp(diagnoses, "decode_b1", "decode_b512", fail_on_regression=10)
    assert "launch-shapes" in {w.code for w in c.warnings}
    assert (c.gate.metric, c.gate.baseline) == ("token_inferred", b1)
    assert c.gate.candidate == pytest.approx(b512 / 512) and not c.gate.failed
    assert c.verdict.text.startswith("The steps do different work: the kernels both ran launch 512x the threads")
    assert "holds 512 times the tokens (give --tokens-per-step to be exact)" in c.verdict.text
    assert c.verdict.direction == "faster" and not c.verdict.causes
    # Asked per step, it says the steps differ, and the gate fails.
    s = cmp(diagnoses, "decode_b1", "decode_b512", metric="decode_step", fail_on_regression=10)
    assert (s.gate.baseline, s.gate.candidate) == (b1, b512)
    assert s.gate.change_pct == pytest.approx(100 * (b512 - b1) / b1) and s.gate.failed
    assert s.verdict.direction == "slower" and f"{100 * (b512 / b1 - 1):.0f}% slower" in s.verdict.text
    assert "The steps do different work" in s.verdict.text and "--tokens-per-step" in s.verdict.text
    assert s.verdict.causes[0].component == "gpu:attention"
    # Per token as given (batch 1 against batch 512), the gate passes and the verdict says why.
    t = cmp(diagnoses, "decode_b1", "decode_b512", tokens_per_step=[1, 512], fail_on_regression=10)
    assert t.gate.metric == "token" and not t.gate.failed
    assert (t.gate.baseline, t.gate.candidate) == (b1, pytest.approx(b512 / 512))
    assert f"{b1 / (b512 / 512):.0f}x faster per token" in t.verdict.text
    assert "Each step yields 512 tokens instead of 1" in t.verdict.text


@pytest.mark.parametrize(
    "base,cand,direction",
    [
        ("tp2_exposed", "tp2_overlap", "slower"),
        ("tp2_exposed", "tp2_straggler", "slower"),
        ("tp2_straggler", "tp2_exposed", "faster"),
    ],
)
@pytest.mark.slow
def test_tensor_parallel_variants(diagnoses, exports, base, cand, direction):
    mb, mc = decode_step_median(exports, base), decode_step_median(exports, cand)
    c = cmp(diagnoses, base, cand)
    # Equal steps on both GPUs: the step time is that of the GPU the other waits for (GPU 1 in
    # every variant), as analyze's summary gives it.
    pb, pc = oracle.pacing_gpu(exports(base)), oracle.pacing_gpu(exports(cand))
    assert pb == pc == 1
    assert c.gate.baseline == mb[pb] and c.gate.candidate == mc[pc]
    assert diagnoses(base).summary.steady_state.step_ns_median == mb[pb]
    assert c.verdict.direction == direction
    # Both GPUs step together: each GPU's own median moves the same way.
    for dev in (0, 1):
        assert (mc[dev] > mb[dev]) == (direction == "slower")
    assert [g.device_id for g in c.deltas.gpus] == [0, 1]
    # The cause is told on GPU 1, which GPU 0 waits for in its all-reduces.
    roles = {(x.role, x.device_id) for x in c.verdict.causes}
    assert ("main", 1) in roles and ("wait", 0) in roles
    assert "on GPU 1 (the GPU the others wait for)" in c.verdict.text
    assert "GPU 0 waits for it in collectives" in c.verdict.text
    assert not {"gpu-count", "gpu-model", "kernel-mix"} & {w.code for w in c.warnings}
    # "Where the time goes" is that GPU's too: its row of the verdict's main cause holds the
    # numbers the verdict gives (the table once showed GPU 0, which waits for GPU 1).
    main = next(x for x in c.verdict.causes if x.role == "main")
    row = next(r for r in c.deltas.step_time if r.label == main.label)
    assert row.values == pytest.approx([main.baseline_ns, main.candidate_ns])


@pytest.mark.slow
def test_overlap_doubles_the_launches(diagnoses):
    c = cmp(diagnoses, "tp2_exposed", "tp2_overlap")
    main = c.verdict.causes[0]
    assert main.component == "idle:launch"
    s0, s1 = (diagnoses(n).summary for n in ("tp2_exposed", "tp2_overlap"))
    k0 = next(g for g in s0.steady_gpus if g.device_id == 1)
    k1 = next(g for g in s1.steady_gpus if g.device_id == 1)
    assert k1.kernels / k1.steps > 1.8 * k0.kernels / k0.steps
    assert f"{k0.kernels / k0.steps:,.0f} kernels → {k1.kernels / k1.steps:,.0f} kernels" in c.verdict.text
    # Two micro-batches launch half the grids twice: the same work per step, compared per step.
    assert c.gate.metric == "decode_step" and not {"step-work", "launch-shapes"} & {w.code for w in c.warnings}


@pytest.mark.slow
def test_sdpa_against_eager_attention(diagnoses, exports):
    eager, sdpa = oracle_pair(exports, "hf_eager_attn", "hf_sdpa")
    c = cmp(diagnoses, "hf_eager_attn", "hf_sdpa", fail_on_regression=0)
    assert (c.gate.metric, c.gate.baseline, c.gate.candidate) == ("decode_step", eager, sdpa)
    assert not c.gate.failed and c.verdict.direction == "faster"
    assert f"{100 * (1 - sdpa / eager):.0f}% faster per decode step" in c.verdict.text
    # Fewer kernels to launch per token: the launch waiting falls.
    assert c.verdict.causes[0].component == "idle:launch" and "kernels launched per step" in c.verdict.text
    assert not {"kernel-mix", "launch-shapes", "capture-length"} & {w.code for w in c.warnings}
    # The same kernels at the same shapes match; the unfused softmax is only in the eager run.
    matched = [k for k in c.deltas.kernels if k.match == "shape"]
    assert len(matched) >= 5
    everything = {k.name: k for k in cmp(diagnoses, "hf_eager_attn", "hf_sdpa").deltas.kernels}
    assert all(k.match != "shape" or k.shapes[0] == k.shapes[1] for k in everything.values())


@pytest.mark.slow
def test_flash_against_the_sdpa_math_path_names_attention(diagnoses):
    """The same prefill on SDPA's math backend and on FlashAttention: attention is the cause,
    in whichever form it ran, and another attention backend is not another workload."""
    c = cmp(diagnoses, "hf_prefill_math", "hf_prefill_flash")
    assert c.verdict.direction == "faster"
    assert c.verdict.causes[0].component == "gpu:attention"
    assert "attention kernels fell" in c.verdict.text
    assert "kernel-mix" not in {w.code for w in c.warnings}


@pytest.mark.slow
def test_static_cache_is_slower_eagerly(diagnoses, exports):
    dyn, static = oracle_pair(exports, "hf_cat_cache", "hf_static_cache")
    c = cmp(diagnoses, "hf_cat_cache", "hf_static_cache", fail_on_regression=10)
    assert (c.gate.baseline, c.gate.candidate) == (dyn, static)
    assert c.gate.failed and c.gate.change_pct == pytest.approx(100 * (static - dyn) / dyn)
    assert c.verdict.direction == "slower"
    assert "370 kernels → 430 kernels" in c.verdict.text
    # The masked attention over the whole preallocated cache: the same kernel, slower per call.
    attn = next(k for k in c.deltas.kernels if "sdpa" in k.name)
    assert attn.match == "shape" and attn.mean_ns[1] > 1.5 * attn.mean_ns[0]


@pytest.mark.slow
def test_grouped_experts_against_the_eager_expert_loop(diagnoses, exports):
    """The same MoE generate loop with transformers' grouped experts: faster because the
    per-expert loop's kernels (and the host syncs between them) are gone. The syncs wait while
    the GPU works; the GPU then idles while the CPU launches the loop's next kernels, so the
    time that falls is launch waiting; moe-routing is resolved."""
    eager, grouped = oracle_pair(exports, "hf_moe_eager", "hf_moe_grouped")
    c = cmp(diagnoses, "hf_moe_eager", "hf_moe_grouped", fail_on_regression=0)
    assert (c.gate.metric, c.gate.baseline, c.gate.candidate) == ("decode_step", eager, grouped)
    assert not c.gate.failed and c.verdict.direction == "faster"
    assert f"{100 * (1 - grouped / eager):.0f}% faster per decode step" in c.verdict.text
    main = c.verdict.causes[0]
    assert main.role == "main" and main.component == "idle:launch"
    assert "waiting for kernel launches fell" in c.verdict.text
    kb, kc = (step_gpu(diagnoses(n).summary) for n in ("hf_moe_eager", "hf_moe_grouped"))
    assert kb and kc and kb.steps and kc.steps and kc.kernels / kc.steps < 0.5 * kb.kernels / kb.steps
    # The parts of the step add up to it, and the blocked-with-the-GPU-idle part falls too.
    sync = next(r for r in c.deltas.step_time if r.key == "idle:sync")
    assert sync.values[1] < sync.values[0]
    diff = {(x.rule_id, x.status) for x in c.findings_diff[0].changes}
    assert ("moe-routing", "resolved") in diff


@pytest.mark.slow
def test_sampling_on_the_gpu_against_the_host(diagnoses):
    c = cmp(diagnoses, "hf_sample_host", "hf_sample_gpu")
    assert c.verdict.direction == "faster" and "waiting for the CPU (work outside CUDA) fell" in c.verdict.text
    diff = {(x.rule_id, x.status) for x in c.findings_diff[0].changes}
    assert ("host-sampling", "resolved") in diff


@pytest.mark.slow
def test_decode_phase_is_the_decode_step_time(diagnoses, exports):
    """The prefill step is not in the decode step time (the steady state's median has it)."""
    s = diagnoses("hf_eager_attn").summary
    g = step_gpu(s)
    assert g is not None and s.steady_state is not None
    kinds = {k.kind: k for k in g.step_kinds}
    assert kinds["prefill"].steps == 1 and kinds["decode"].steps == s.steady_state.steps - 1
    assert METRICS["decode_step"].value(s, None) == decode_step_median(exports, "hf_eager_attn")[0]
    assert METRICS["step"].value(s, None) == s.steady_state.step_ns_median


# One definition per quantity: compare shows what analyze shows ---------------------------------


@pytest.mark.slow
def test_compare_numbers_equal_analyze_numbers(tmp_path):
    a = run_cli("analyze", str(sample("decode_b1")), "--format", "json")
    b = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "json")
    c = run_cli("compare", str(sample("decode_b1")), str(sample("decode_b1_graphs")), "--format", "json")
    assert a.returncode == b.returncode == c.returncode == 0, c.stderr
    out = json.loads(c.stdout)
    jsonschema.validate(out, json.loads((REPO / "src/nsight_doctor/render/compare_schema.json").read_text()))
    for p, one in zip(out["profiles"], (json.loads(a.stdout), json.loads(b.stdout))):
        assert p["summary"] == one["summary"]
        assert [(f["rule_id"], f["impact_ns"], f["evidence"]) for f in p["findings"]] == [
            (f["rule_id"], f["impact_ns"], f["evidence"]) for f in one["findings"]
        ]
    rows = {r["key"]: r["values"] for r in out["deltas"]["overview"]}
    sums = [p["summary"] for p in out["profiles"]]
    assert rows["step_ns_median"] == [s["steady_state"]["step_ns_median"] for s in sums]
    assert rows["gpu_busy_pct"] == [s["gpu_busy_pct"] for s in sums]
    assert rows["capture_ns"] == [s["capture_ns"] for s in sums]
    gpu = [s["steady_gpus"][0] for s in sums]
    assert rows["busy_per_step_ns"] == [g["busy_ns"] / g["steps"] for g in gpu]
    assert rows["kernels_per_step"] == [g["kernels"] / g["steps"] for g in gpu]
    steps = {r["key"]: r["values"] for r in out["deltas"]["step_time"]}
    assert steps["idle:launch"] == [
        sum(i["total_ns"] for i in g["idle"] if i["cause"] == "launch") / g["steps"] for g in gpu
    ]
    assert out["gate"]["baseline"] == sums[0]["steady_gpus"][0]["step_kinds"][0]["step_ns_median"]
    phases = out["deltas"]["phases"]
    assert phases[0]["step_ns_median"] == [s["phases"][0]["step_ns_median"] for s in sums]
    transfers = {r["key"]: r["values"] for r in out["deltas"]["transfers"]}
    assert transfers["blocking_count"] == [s["sync"]["blocking_count"] for s in sums]
    assert transfers["memcpy_bytes"] == [s["memcpy"]["bytes"] for s in sums]


@pytest.mark.slow
def test_steady_categories_sum_to_the_summary_categories(diagnoses):
    for name in ("decode_b1", "tp2_straggler", "hf_sdpa"):
        s = diagnoses(name).summary
        per_gpu: dict[str, int] = {}
        for g in s.steady_gpus:
            for c in g.kernel_categories:
                per_gpu[c.category or "?"] = per_gpu.get(c.category or "?", 0) + c.total_ns
        assert per_gpu == {c.category or "?": c.total_ns for c in s.kernel_categories if c.scope == "steady"}


@pytest.mark.slow
def test_ncu_deltas_are_the_reports_numbers():
    b1 = analyze([sample("decode_b1"), SAMPLES / "ncu" / "ncu_decode_b1_full.ncu-rep.xz"])
    b512 = analyze([sample("decode_b512"), SAMPLES / "ncu" / "ncu_decode_b512_full.ncu-rep.xz"])
    c = compare([Profile("b1", "b1", b1), Profile("b512", "b512", b512)])
    assert c.deltas.ncu
    groups = [{g.launch: g for g in d.summary.ncu.groups} for d in (b1, b512)]  # type: ignore[union-attr]
    for r in c.deltas.ncu:
        for i in (0, 1):
            g = groups[i][r.launches[i]]
            assert (r.duration_ns[i], r.dram_pct[i], r.achieved_occupancy_pct[i]) == (
                g.duration_ns,
                g.dram_pct,
                g.achieved_occupancy_pct,
            )
            assert list(r.stalls[i]) == [s.reason for s in g.stalls[:4]]
    # At batch 512 the attention kernel becomes memory-bound: DRAM from a few % to most of its peak.
    attn = next(r for r in c.deltas.ncu if "sdpa" in r.kernel)
    assert attn.match == "name" and attn.dram_pct[0] < 10 < 60 < attn.dram_pct[1]  # type: ignore[operator]
    assert attn.bottleneck[1] == "memory-bound"
    text = render_text(c)
    assert "Nsight Compute" in text and all(len(line) <= 100 for line in text.splitlines())


# Comparability ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_gpu_count_and_capture_length_are_flagged(diagnoses):
    codes = {w.code for w in cmp(diagnoses, "decode_b1", "tp2_exposed").warnings}
    assert "gpu-count" in codes and "gpu-model" not in codes
    codes = {w.code for w in cmp(diagnoses, "hf_eager_attn", "hf_cat_cache").warnings}
    assert "capture-length" in codes and "gpu-count" not in codes  # 181 ms against 1.05 s
    # Another batch size changes GEMM and attention kernel variants, not the workload.
    for pair in (("decode_b1", "decode_b512"), ("hf_eager_attn", "hf_sdpa"), ("tp2_exposed", "tp2_overlap")):
        assert "kernel-mix" not in {w.code for w in cmp(diagnoses, *pair).warnings}, pair


def test_cuda_graphs_traced_whole_are_never_the_same_work_across_captures(diagnoses, exports):
    """A graph traced whole is known by its id alone: decode_b1_graphs' graph 1 is a 16-layer
    model's decode step (1.6 ms), spec_graphs' graph 1 a 2-layer draft model's pass (207 µs, SQL
    over the exports). They match by name at most, and no figure of "the kernels both ran alike"
    compares them."""
    for name in ("decode_b1_graphs", "spec_graphs"):
        row = (
            exports(name).execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE graphId = 1").fetchone()
        )
        assert row is not None and row[0] > 0, name
    c = cmp(diagnoses, "decode_b1_graphs", "spec_graphs")
    graph_1 = next(k for k in c.deltas.kernels if k.name == "graph 1")
    assert graph_1.match == "kernel"
    assert all(k.match != "shape" for k in c.deltas.kernels if k.category == "cuda-graph")
    assert c.gate.metric != "same_kernels" and "kernels both ran alike" not in c.verdict.text
    # A round of speculative decoding yields a token and each accepted proposal: unlike steps.
    why = next(w.message for w in c.warnings if w.code == "step-work")
    assert "the steps are passes → rounds of 4.0 draft passes and a target's" in why
    c = cmp(diagnoses, "spec_graphs", "spec_graphs_node")  # the same rounds, traced two ways
    assert "step-work" not in {w.code for w in c.warnings}


# Options naming where the workloads write their facts: not settings of the work.
OUTPUT_OPTIONS = {"--json"}


def recorded_options(con: sqlite3.Connection) -> dict[str, tuple]:
    """The long options of the launched process's arguments in META_DATA_CAPTURE, parsed here:
    "--name=value", or "--name" followed by its value unless the next argument is an option;
    not OUTPUT_OPTIONS."""
    rows = con.execute("SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchall()
    args = [v for _, v in sorted(rows, key=lambda r: int(r[0].rsplit("_", 1)[1]))]
    out: dict[str, tuple] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            nxt = args[i + 1] if i + 1 < len(args) else None
            if name not in OUTPUT_OPTIONS:
                out[name] = (*out.get(name, ()), value if eq else (nxt if nxt and not nxt.startswith("-") else None))
    return out


def test_steps_of_another_batch_do_different_work_when_graphs_hide_the_kernels(diagnoses, exports):
    """hf_compiled replays its forward as CUDA graphs traced whole: no kernel that both profiles
    ran says how much work a step does. The recorded command lines do (--batch 16 → 4, read
    here from the raw exports' arguments), and the verdict says the steps differ instead of
    only "faster per step". Two captures of the same loop, one traced per graph node, stay
    alike."""
    oa, ob = recorded_options(exports("hf_static_cache")), recorded_options(exports("hf_compiled"))
    assert oa["--batch"] != ob["--batch"]
    c = cmp(diagnoses, "hf_static_cache", "hf_compiled")
    said = f"--batch {oa['--batch'][0]} → {ob['--batch'][0]}"
    assert any("steps do different work" in n and said in n for n in c.verdict.notes), c.verdict.notes
    assert recorded_options(exports("decode_b1_graphs")) == recorded_options(exports("decode_b1_graphs_node"))
    alike = cmp(diagnoses, "decode_b1_graphs", "decode_b1_graphs_node")
    assert not any("different work" in n for n in alike.verdict.notes)
    assert "step-work" not in {w.code for w in alike.warnings}


# The environment variables store/launch_settings.yaml shows, as these samples set them.
SHOWN_VARIABLES = {"CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING"}


def recorded_variables(con: sqlite3.Connection) -> dict[str, tuple]:
    """The launched process's environment variables of SHOWN_VARIABLES, from its NAME="VALUE"
    rows in META_DATA_CAPTURE."""
    rows = con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'")
    pairs = [v.split("=", 1) for (v,) in rows]
    return {n: (v.strip('"'),) for n, v in pairs if n in SHOWN_VARIABLES}


def test_the_settings_that_differ_between_the_recorded_launches_are_listed(diagnoses, exports):
    """compare says what differs in the launches that were captured, checked against the raw
    exports' arguments and environment: one option between the batch-1 and batch-512 decode
    loops; several between two continuous-batching runs (and so more than the setting under
    test); one between the two prefill backends, whose output files (--json) differ too and are
    no setting; CUDA_LAUNCH_BLOCKING (and the visible GPUs) against the same loop run with it;
    none against itself."""
    pairs = (
        ("decode_b1", "decode_b512"),
        ("hf_cb_eager", "hf_cb_graph_trace"),
        ("hf_prefill_math", "hf_prefill_flash"),
        ("decode_b1", "decode_b1_launch_blocking"),
    )
    messages = {}
    for a, b in pairs:
        oa = recorded_options(exports(a)) | recorded_variables(exports(a))
        ob = recorded_options(exports(b)) | recorded_variables(exports(b))
        differ = [n for n in dict.fromkeys([*oa, *ob]) if oa.get(n) != ob.get(n)]
        (w,) = [w for w in cmp(diagnoses, a, b).warnings if w.code == "launch"]
        assert f"differ in {len(differ)} setting{'s' if len(differ) > 1 else ''} ({a} → {b})" in w.message
        for n in differ:
            if n in oa and n in ob:
                assert f"{n} {', '.join(oa[n])} → {', '.join(ob[n])}" in w.message
            else:
                assert f"only in {a if n in oa else b}" in w.message and n in w.message
        assert ("more than one of them" in w.message) == (len(differ) > 1)
        messages[a, b] = w.message
    assert (
        "differ in 1 setting (hf_prefill_math → hf_prefill_flash): --backend math → flash"
        in messages["hf_prefill_math", "hf_prefill_flash"]
    )
    assert "--json" not in messages["hf_prefill_math", "hf_prefill_flash"]
    assert "CUDA_LAUNCH_BLOCKING=1 only in decode_b1_launch_blocking" in w.message
    assert "launch" not in {w.code for w in cmp(diagnoses, "decode_b1", "decode_b1").warnings}


def test_a_capture_with_a_distorting_setting_is_a_caution(diagnoses):
    """A step time measured with CUDA_LAUNCH_BLOCKING=1 is not the program's: the comparison
    says so, and its verdict ends with a caution."""
    c = cmp(diagnoses, "decode_b1", "decode_b1_launch_blocking")
    (w,) = [w for w in c.warnings if w.code == "capture-settings"]
    assert w.message.startswith("decode_b1_launch_blocking ran with CUDA_LAUNCH_BLOCKING=1")
    assert "Caution: a capture ran with a setting that distorts it" in c.verdict.text
    assert "capture-settings" not in {w.code for w in cmp(diagnoses, "decode_b1", "decode_b512").warnings}


@requires_corpus
@pytest.mark.slow
def test_another_workload_on_another_gpu_is_flagged(diagnoses):
    heat = CORPUS / "teektonik__reports" / "task2_1024.export-nsys2022.4.sqlite"
    if not heat.exists():
        pytest.skip(f"{heat} is not in the corpus")
    c = compare([Profile("b1", "b1", diagnoses("decode_b1")), Profile("heat", "heat", analyze([heat]))])
    codes = {w.code for w in c.warnings}
    assert {"kernel-mix", "gpu-model"} <= codes
    assert "Caution: the GPUs differ, and the kernels differ" in c.verdict.text


@pytest.mark.slow
def test_two_windows_of_one_run_are_not_called_another_workload(tmp_path):
    """hf_cb_graphs_varied cut in two: the first window holds the prompts' eager steps beside the
    graph replays, the second only replays. Their kernels differ, but the second's are nearly all
    the first's: the warning says the first holds more work, not that it is another workload."""
    src = export_path("hf_cb_graphs_varied")
    if src.name.endswith(".xz"):
        src = unxz(src, tmp_path)
    con = sqlite3.connect(src)
    lo, hi = con.execute("SELECT min(start), max([end]) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    con.close()
    span = hi - lo
    early = cropped(src, tmp_path, lo, lo + span * 45 // 100)
    late = cropped(src, tmp_path, lo + span * 55 // 100, hi)
    c = compare([Profile("early", "early", analyze([early])), Profile("late", "late", analyze([late]))])
    (w,) = [w for w in c.warnings if w.code == "kernel-mix"]
    assert "early's steady state holds work that the other's lacks" in w.message


@pytest.mark.slow
def test_a_profile_without_steps_compares_the_steady_state(diagnoses):
    """Without steps on one side, the verdict falls back to the GPU activity window, and the
    per-step tables to steady-state totals."""
    d = diagnoses("decode_b1")
    import copy

    flat = copy.deepcopy(diagnoses("decode_b1_graphs"))
    assert flat.summary.steady_state is not None
    flat.summary.steady_state.steps = flat.summary.steady_state.step_ns_median = None
    flat.summary.steady_state.step_ns_p90 = None
    for g in flat.summary.steady_gpus:
        g.steps = g.step_ns_median = g.step_ns_p90 = None
        g.step_kinds = []
    c = compare([Profile("a", "a", d), Profile("b", "b", flat)])
    assert c.gate.metric == "gpu_window" and c.deltas.basis == "steady"
    assert "no-steps" in {w.code for w in c.warnings}
    assert c.gate.baseline == d.summary.capture.gpu_window_ns


# Output ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_text_fits_a_terminal_and_names_the_gate(diagnoses):
    c = cmp(diagnoses, "decode_b1", "decode_b512", "decode_b1_graphs", fail_on_regression=10)
    text = render_text(c, verbose=True)
    assert all(len(line) <= 100 for line in text.splitlines()), max(text.splitlines(), key=len)
    assert "median decode step time (decode_step)" in text and "passed" in text
    for title in ("Verdict", "Gate", "Overview", "Phases", "Where the time goes", "Top kernels"):
        assert title in text


@pytest.mark.slow
def test_json_follows_the_schema_and_the_issue(diagnoses):
    c = cmp(diagnoses, "tp2_exposed", "tp2_straggler", fail_on_regression=5)
    out = json.loads(json.dumps(to_dict(c)))
    jsonschema.validate(out, json.loads((REPO / "src/nsight_doctor/render/compare_schema.json").read_text()))
    assert [p["label"] for p in out["profiles"]] == ["tp2_exposed", "tp2_straggler"]
    assert set(out["gate"]) >= {"metric", "baseline", "candidate", "change_pct", "failed"} and out["gate"]["failed"]
    assert out["findings_diff"][0]["changes"] and out["verdict"]["text"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """decode_b1 with its busiest kernel renamed to markup (as in test_render.py), and markup for
    the value of its command line's --batch (which compare's launch warning quotes)."""
    p = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    shutil.copy(sample("decode_b1"), p)
    con = sqlite3.connect(p)
    kid = con.execute(
        "SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName ORDER BY sum(end - start) DESC LIMIT 1"
    ).fetchone()[0]
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (HOSTILE, kid))
    con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE name = 'PROCESS_0:ARGUMENT_2'", (HOSTILE,))
    con.commit()
    con.close()
    return analyze([p])


@pytest.mark.slow
def test_untrusted_names_and_labels_stay_inert(hostile, diagnoses):
    c = compare([Profile(HOSTILE, "x", diagnoses("decode_b1")), Profile("h<b>", "y", hostile)])
    assert any(HOSTILE in w.message for w in c.warnings if w.code == "launch")
    md = render_markdown(c)
    assert "<img" not in md and "<b>" not in md and "\x1b" not in md
    assert not re.search(r"(?<!\\)\]\(javascript:", md)
    text = render_text(c)
    assert "\x1b" not in text
    from nsight_doctor.render import compare_html

    page = compare_html.render(c, charts=[[], []])
    assert "<img src=x" not in page and "h<b>" not in page and "&lt;img src=x" in page


@pytest.mark.slow
def test_markdown_tables_keep_their_columns(hostile, diagnoses):
    c = compare([Profile("a|b", "x", diagnoses("decode_b1")), Profile("h", "y", hostile)])
    md = render_markdown(c)
    for block in md.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        if len(lines) > 2:
            n = len(re.findall(r"(?<!\\)\|", lines[0]))
            assert all(len(re.findall(r"(?<!\\)\|", ln)) == n for ln in lines), block[:200]


# The command line ------------------------------------------------------------------------------


B1, GRAPHS = "samples/decode_b1/decode_b1.sqlite", "samples/decode_b1_graphs/decode_b1_graphs.sqlite"


def test_cli_compare_snapshot_and_passed_gate():
    ok = run_cli("compare", B1, GRAPHS, "--fail-on-regression", "10", "--label", "eager", "--label", "graphs")
    assert ok.returncode == 0, ok.stderr
    assert "The graphs run is" in ok.stdout and "passed" in ok.stdout
    check_snapshot("compare_eager_graphs.txt", ok.stdout)


@pytest.mark.slow
def test_cli_gate_exit_codes():
    b1, graphs = B1, GRAPHS
    bad = run_cli("compare", graphs, b1, "--fail-on-regression", "10", "--format", "json")
    assert bad.returncode == 1, bad.stderr
    gate = json.loads(bad.stdout)["gate"]
    assert gate["failed"] and gate["change_pct"] > 10 and gate["metric"] == "decode_step"
    # Per step, batch 512 is a regression; by default the steps' work differs, and per token
    # (inferred from the kernels' launches) it is not.
    b512 = str(sample("decode_b512"))
    worse = run_cli("compare", b1, b512, "--fail-on-regression", "10", "-q", "--metric", "decode_step")
    assert worse.returncode == 1 and "FAILED" in worse.stdout
    inferred = run_cli("compare", b1, b512, "--fail-on-regression", "10", "--format", "json")
    assert inferred.returncode == 0 and json.loads(inferred.stdout)["gate"]["metric"] == "token_inferred"
    per_token = run_cli(
        "compare", b1, str(sample("decode_b512")), "--fail-on-regression", "10",
        "--tokens-per-step", "1", "--tokens-per-step", "512",
    )  # fmt: skip
    assert per_token.returncode == 0 and "time per token (token)" in per_token.stdout


@pytest.fixture(scope="module")
def html_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "cmp.html"
    r = run_cli(
        "compare", str(sample("decode_b1")), str(sample("decode_b1_graphs")),
        "--format", "html", "-o", str(out), "--label", "eager", "--label", "<graphs>",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("nsight-doctor: wrote ")
    return out


@pytest.mark.slow
def test_cli_html_report(html_report):
    page = html_report.read_text()
    assert "The &lt;graphs&gt; run is" in page and "<graphs>" not in page
    ids = re.findall(r'id="(chart-[^"]+)"', page)
    assert ids and len(ids) == len(set(ids))
    assert any(i.startswith("chart-p1-") for i in ids) and any(i.startswith("chart-p2-") for i in ids)
    for table in ("table-overview", "table-phases", "table-step-time", "table-kernels", "table-findings-1"):
        assert f'id="{table}"' in page


@requires_chromium
@pytest.mark.browser
def test_html_report_draws_offline(html_report, tmp_path):
    browser = Browser()
    try:
        browser.open(
            html_report,
            "document.querySelectorAll('[data-rendered]').length === "
            "document.querySelectorAll('script[data-chart]').length",
            timeout=120,
        )
        assert browser.errors() == []
        assert [u for u in browser.requests() if not u.startswith(("file:", "data:"))] == []
        drawn = browser.evaluate("document.querySelectorAll('[data-rendered=\"true\"]').length")
        assert drawn == browser.evaluate("document.querySelectorAll('script[data-chart]').length") > 10
        # Side by side: the two profiles' charts share their row.
        tops = browser.evaluate(
            "[...document.querySelectorAll('.side')].slice(0, 3).map(s => "
            "[...s.children].map(c => Math.round(c.getBoundingClientRect().top)))"
        )
        assert tops and all(len(set(row)) == 1 and len(row) == 2 for row in tops)
        shot = tmp_path / "compare.png"
        browser.screenshot(shot)
        keep_artifact(shot)
    finally:
        browser.close()


@pytest.mark.parametrize(
    "args,message",
    [
        (["samples/decode_b1/decode_b1.sqlite"], "at least two profiles"),
        (["samples/decode_b1/decode_b1.sqlite", "missing.sqlite"], "missing.sqlite"),
        (["samples/decode_b1/decode_b1.sqlite", "samples/decode_b1/decode_b1.sqlite", "--label", "a"], "--label"),
        (
            ["samples/decode_b1/decode_b1.sqlite", "samples/decode_b1/decode_b1.sqlite", "--metric", "token"],
            "--tokens-per-step",
        ),
        (
            ["samples/decode_b1/decode_b1.sqlite", "samples/decode_b1/decode_b1.sqlite", "--tokens-per-step", "1"],
            "--tokens-per-step",
        ),
        (["samples/decode_b1/decode_b1.sqlite", "samples/decode_b1/decode_b1.sqlite", "--format", "pdf"], "pdf"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, message):
    r = run_cli("compare", *args)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr


def test_analyze_with_two_timelines_points_to_compare():
    r = run_cli("analyze", str(sample("decode_b1")), str(sample("decode_b1_graphs")))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "nsight-doctor compare" in r.stderr


@pytest.mark.slow
def test_gate_without_a_value_is_bad_input(diagnoses):
    with pytest.raises(CompareError, match="'decode_step' has no value for hf_startup"):
        cmp(diagnoses, "decode_b1", "hf_startup", metric="decode_step", fail_on_regression=1)
    with pytest.raises(CompareError, match="no metric 'nope'"):
        cmp(diagnoses, "decode_b1", "decode_b1_graphs", metric="nope")


def test_graphs_traced_whole_hide_kernel_findings_rather_than_resolve_them(diagnoses):
    """decode_b1 against the same loop in CUDA graphs traced whole: small-batch-decode reads
    the GEMMs' names, which the graph launches keep out of sight."""
    c = cmp(diagnoses, "decode_b1", "decode_b1_graphs")
    status = {ch.rule_id: ch.status for ch in c.findings_diff[0].changes}
    assert status["small-batch-decode"] == "hidden"
    assert status["launch-bound"] == "resolved"  # what graphs do fix


def test_nsight_compute_reports_alone_compare_what_they_profiled():
    r = run_cli(
        "compare",
        str(SAMPLES / "ncu" / "ncu_decode_b1_full.ncu-rep.xz"),
        str(SAMPLES / "ncu" / "ncu_decode_b512_full.ncu-rep.xz"),
    )
    assert r.returncode == 0, r.stderr
    overview = r.stdout.split("Overview", 1)[1].split("\n\n", 1)[0]
    assert "Kernels profiled" in overview and "Profiled kernel time" in overview
    assert "Copies and synchronisation" not in r.stdout
    assert "% of its L2 roof" in r.stdout.split("roofline", 1)[1].splitlines()[0]  # each kernel's place on it


@pytest.mark.slow
def test_a_kernel_finding_whose_time_fell_is_changed_between_nsight_compute_reports():
    """Two Nsight Compute reports: each finding's share is of its own report's profiled time,
    so a small-grid finding at 160 -> 44 us can keep its share; its time moved, so it changed."""
    import copy

    from nsight_doctor.compare.findings import findings_diff

    base = analyze([SAMPLES / "ncu" / "ncu_decode_b1_basic.ncu-rep.xz"])
    cand = copy.deepcopy(base)
    [f] = [f for f in cand.findings if f.rule_id == "small-grid"]
    assert f.window_ns is not None
    f.impact_ns = round(f.impact_ns * 44 / 160)
    f.window_ns = round(f.window_ns * 44 / 160)  # the same share of a smaller report
    changes = findings_diff(Profile("a", "a", base), Profile("b", "b", cand)).changes
    assert {c.rule_id: c.status for c in changes}["small-grid"] == "changed"


def test_options_that_name_an_output_are_no_launch_setting():
    """Where a program writes its results is no setting of its work; how much it generates is."""
    for name in ("--json", "--output-json", "--output-dir", "--result-filename", "--log-file", "--save_path"):
        assert OUTPUT_OPTION.fullmatch(name), name
    for name in ("--output-len", "--max-num-seqs", "--log-level", "--jsonl-mode", "--model", "--outputs"):
        assert not OUTPUT_OPTION.fullmatch(name), name


def test_the_verdict_names_the_launches_only_where_they_changed(diagnoses):
    """stream_python → stream_sleep: the same graph replay and kernel each step, the CPU's work
    between steps shorter; the verdict blames the CPU's work and says nothing of launches (it
    once said "with 1 CUDA graph and 1 kernel → 1 CUDA graph and 1 kernel launched per step")."""
    c = cmp(diagnoses, "stream_python", "stream_sleep")
    assert c.verdict.causes[0].component == "idle:cpu"
    g0, g1 = (step_gpu(diagnoses(n).summary) for n in ("stream_python", "stream_sleep"))
    assert g0 is not None and g1 is not None
    assert g0.graphs == g0.steps == g1.graphs == g1.steps
    assert "launched per step" not in c.verdict.text
    # Where the CPU's work and launch waiting both moved, the launches go with the launch waiting.
    text = cmp(diagnoses, "hf_sample_host", "hf_sample_gpu").verdict.text
    assert re.search(r"waiting for kernel launches fell [^,]*, with [\d,]+ kernels → [\d,]+ kernels launched", text)
