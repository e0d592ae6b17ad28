"""Nsight Compute reports end to end: the curated view's numbers against values read with
ncu_report directly, the bottleneck class of named kernels, one ranking across nsys and ncu,
coverage, compatibility over the corpus, and bad .ncu-rep input."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import CORPUS, SAMPLES, requires_corpus, run_cli, sample, sha256, unxz
from nsight_doctor import analyze, store

NCU = SAMPLES / "ncu"
SDPA = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1_cga1x1x1_kernel0_0"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    """The xz-compressed samples, unpacked once for ncu_report."""
    d = tmp_path_factory.mktemp("ncu")
    return {
        name: unxz(NCU / f"{name}.ncu-rep.xz", d)
        for name in (
            "ncu_decode_b1_full",
            "ncu_decode_b512_full",
            "ncu_decode_b1_basic",
            "ncu_prefill_flash",
            "ncu_prefill_math",
        )
    }


def direct(path, index: int, metric: str):
    """A metric of one kernel, read with ncu_report itself."""
    import ncu_report

    action = ncu_report.load_report(str(path))[0][index]
    m = action.metric_by_name(metric)
    return None if m is None else m.value()


def kernels_of(paths):
    built = store.build(paths)
    try:
        con = built.connect()
        cur = con.execute("SELECT * FROM ncu_kernels ORDER BY action_id")
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        built.close()


def test_curated_view_matches_ncu_report(unpacked):
    path = unpacked["ncu_decode_b512_full"]
    rows = kernels_of([path])
    assert len(rows) == 24
    sdpa = next(r for r in rows if r["name"] == SDPA)
    i = sdpa["action_id"]
    pairs = {
        "duration_ns": "gpu__time_duration.sum",
        "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "mem_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
        "waves_per_sm": "launch__waves_per_multiprocessor",
        "l2_hit_pct": "lts__t_sector_hit_rate.pct",
        "issue_active": "smsp__issue_active.avg.per_cycle_active",
        "registers_per_thread": "launch__registers_per_thread",
        "long_scoreboard_ratio": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    }
    for col, metric in pairs.items():
        assert sdpa[col] == pytest.approx(direct(path, i, metric)), col
    read = direct(path, i, "dram__bytes_read.sum") + direct(path, i, "dram__bytes_write.sum")
    assert sdpa["dram_bytes"] == pytest.approx(read)
    peak = (
        direct(path, i, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
        * 2
        * direct(path, i, "sm__cycles_elapsed.avg.per_second")
    )
    assert sdpa["peak_fp32_flops_per_s"] == pytest.approx(peak)
    assert (sdpa["grid_x"], sdpa["grid_y"], sdpa["grid_z"], sdpa["block_x"]) == (1, 16, 512, 128)
    assert sdpa["device_name"] == "NVIDIA H200" and sdpa["sm_count"] == 132
    assert sdpa["nvtx"] == "decode_step"
    assert sdpa["bottleneck"] == "memory-bound" and sdpa["family"] == "attention"
    assert sdpa["dram_pct"] > 75


# Hopper's dense peaks per SM and cycle (NVIDIA's H100 whitepaper), written out here rather
# than read from the tool's gpu_peaks.yaml: the oracle shares no data with the tool.
HOPPER_PER_SM_CYCLE = {"bf16": 4096, "fp32": 256}


def independent_roofline(path, index: int) -> tuple[str, float]:
    """A kernel's binding roof and the share of it reached, from ncu_report's raw counters:
    the largest of bytes / bandwidth (DRAM, L2) and operations / peak (BF16 tensor, FP32)
    over its duration."""
    dur = direct(path, index, "gpu__time_duration.sum") * 1e-9
    sm_hz = direct(path, index, "sm__cycles_elapsed.avg.per_second")
    sms = direct(path, index, "device__attribute_multiprocessor_count")
    fp32 = (
        sum(
            (2 if op.endswith("fma") else 1)
            * direct(path, index, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
            for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
        )
        * direct(path, index, "smsp__cycles_elapsed.avg.per_second")
        * dur
    )
    dram_peak = direct(path, index, "dram__bytes.sum.peak_sustained") * direct(
        path, index, "dram__cycles_elapsed.avg.per_second"
    )
    l2_peak = direct(path, index, "lts__t_sectors.avg.peak_sustained") * direct(
        path, index, "lts__cycles_elapsed.sum.per_second"
    )
    times = {
        "DRAM": (direct(path, index, "dram__bytes_read.sum") + direct(path, index, "dram__bytes_write.sum"))
        / dram_peak,
        "L2": direct(path, index, "lts__t_sectors.sum") / l2_peak,
        "tensor BF16": direct(path, index, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")
        / (HOPPER_PER_SM_CYCLE["bf16"] * sms * sm_hz),
        "FP32": fp32 / (HOPPER_PER_SM_CYCLE["fp32"] * sms * sm_hz),
    }
    roof = max(times, key=lambda k: times[k])
    return roof, 100 * times[roof] / dur


def test_each_kernel_sits_on_the_roof_an_independent_pass_finds(unpacked):
    """Every kernel of both full reports: the binding roof and the share of it reached equal a
    pass over ncu_report's raw counters. At batch 512 the QKV GEMM is bound by its BF16 tensor
    roof (compute-bound, not memory-bound: its shared-memory traffic made the old throughput
    test call it memory-bound) and decode attention by DRAM; at batch 1 the GEMV is a
    memory-bound kernel at about half of its DRAM roof with a grid that cannot fill the GPU."""
    for name in ("ncu_decode_b512_full", "ncu_decode_b1_full", "ncu_prefill_flash", "ncu_prefill_math"):
        path = unpacked[name]
        for r in kernels_of([path]):
            roof, pct = independent_roofline(path, r["action_id"])
            assert r["roof_basis"] == "roofline", (name, r["name"])
            assert (r["roof"], r["roof_pct"]) == (roof, pytest.approx(pct, rel=1e-6)), (name, r["name"])
            assert r["regime"] == ("memory" if roof in ("DRAM", "L2") else "compute")
    b512 = kernels_of([unpacked["ncu_decode_b512_full"]])
    qkv = next(r for r in b512 if r["name"].startswith("nvjet_sm90_tst_192x128"))
    assert qkv["roof"] == "tensor BF16" and qkv["bottleneck"] == "compute-bound" and 60 < qkv["roof_pct"] < 75
    assert qkv["arithmetic_intensity"] > qkv["ridge_flop_per_byte"]  # right of the ridge
    sdpa = next(r for r in b512 if r["name"] == SDPA)
    assert sdpa["roof"] == "DRAM" and sdpa["bottleneck"] == "memory-bound"
    gemv = next(r for r in kernels_of([unpacked["ncu_decode_b1_full"]]) if r["name"].startswith("nvjet"))
    assert gemv["roof"] == "DRAM" and 40 < gemv["roof_pct"] < 60 and gemv["waves_per_sm"] < 1
    assert gemv["arithmetic_intensity"] < gemv["ridge_flop_per_byte"] / 10


def test_prefill_attention_on_the_roofline(unpacked):
    """Prefill on both SDPA backends: FlashAttention 2's sm80 kernel sits right of the ridge far
    below Hopper's BF16 tensor roof, next to projections near it; the math path's QK^T and PV
    run on the FP32 roof with idle tensor cores, and its softmax is bound by SM pipes the
    roofline does not count. The library kernel gets backend advice, not register advice."""
    flash = kernels_of([unpacked["ncu_prefill_flash"]])
    fa2 = next(r for r in flash if r["name"] == "flash_fwd_kernel")
    assert fa2["roof"] == "tensor BF16" and fa2["regime"] == "compute" and 20 < fa2["roof_pct"] < 50
    assert fa2["arithmetic_intensity"] > fa2["ridge_flop_per_byte"]
    proj = [r for r in flash if r["name"].startswith("nvjet")]
    assert len(proj) == 4 and all(r["roof"] == "tensor BF16" and r["bottleneck"] == "compute-bound" for r in proj)
    assert all(r["roof_pct"] > 80 for r in proj)
    math = kernels_of([unpacked["ncu_prefill_math"]])
    gemms = [r for r in math if "xmma_gemm_f32f32" in r["name"]]
    assert len(gemms) == 2 and all(r["roof"] == "FP32" and r["bottleneck"] == "compute-bound" for r in gemms)
    softmax = next(r for r in math if r["name"] == "cunn_SoftMaxForwardReg")
    assert softmax["regime"] == "memory" and softmax["roof_pct"] < 60 and softmax["sm_pct"] > 60
    assert softmax["bottleneck"] == "compute-bound"

    d = analyze([unpacked["ncu_prefill_flash"]])
    advice = [f.recommendation for f in d.findings if "flash_fwd_kernel" in f.title]
    assert advice and all("FlashAttention 3" in a and "launch_bounds" not in a for a in advice)
    text = run_cli("analyze", str(unpacked["ncu_prefill_math"])).stdout
    assert "compute-bound on SM pipes other than FLOPs (SM 76%)" in " ".join(text.split())


def test_the_summary_places_each_kernel_on_its_roof():
    """The summary, the finding and compare say the same roof and share for the same kernel."""
    d = analyze([NCU / "ncu_decode_b512_full.ncu-rep.xz"])
    assert d.summary.ncu is not None
    qkv = next(g for g in d.summary.ncu.groups if (g.name or "").startswith("nvjet_sm90_tst_192x128"))
    assert qkv.roof == "tensor BF16" and qkv.roof_pct is not None
    said = f"{qkv.roof_pct:.0f}% of its tensor BF16 roof"
    [f] = [f for f in d.findings if f.rule_id == "compute-bound-kernel"]
    assert said in f.title and said in f.message
    assert not any(f.rule_id == "memory-bound-kernel" and "192x128" in f.title for f in d.findings)
    r = run_cli("analyze", str(NCU / "ncu_decode_b512_full.ncu-rep.xz"))
    assert "compute-bound, at " + said in " ".join(r.stdout.split())


def test_basic_set_keeps_the_throughput_view(unpacked):
    """Without the roofline's counters (--set basic) the regime comes from ncu's throughput
    percentages and says so."""
    rows = kernels_of([unpacked["ncu_decode_b1_basic"]])
    assert all(r["roof_basis"] == "speed of light" and r["roof"] is None and r["regime"] for r in rows)


def test_batch_1_kernels_are_latency_bound_except_the_gemv(unpacked):
    rows = kernels_of([unpacked["ncu_decode_b1_full"]])
    gemv = [r for r in rows if r["name"].startswith("nvjet") and r["grid_y"] == 24]
    assert gemv and all(r["bottleneck"] == "memory-bound" for r in gemv)
    assert all(40 < r["dram_pct"] < 60 and r["sm_pct"] < 15 for r in gemv)
    elementwise = [r for r in rows if r["family"] == "elementwise"]
    assert elementwise and all(r["bottleneck"] == "latency-bound" for r in elementwise)
    assert all(r["waves_per_sm"] < 1 for r in rows)


def test_basic_set_computes_what_it_can_and_says_what_is_missing(unpacked):
    d = analyze([unpacked["ncu_decode_b1_basic"]])
    n = d.summary.to_json()["ncu"]
    assert n["kernels_profiled"] == 24
    assert n["with_stall_reasons"] == 0 and n["with_cache_metrics"] == 0
    assert n["memory_bound"] + n["compute_bound"] + n["latency_bound"] == 24
    rows = kernels_of([unpacked["ncu_decode_b1_basic"]])
    assert all(r["top_stall"] is None and r["sm_pct"] is not None for r in rows)
    assert [f.rule_id for f in d.findings] == ["small-grid"]  # no timeline: no nsys rules


def test_one_ranking_across_nsys_and_ncu():
    """b512 timeline + its ncu report: the attention kernel's finding is ranked by its real
    time in the timeline times ncu's own estimate, below the launch-bound finding."""
    d = analyze([sample("decode_b512"), NCU / "ncu_decode_b512_full.ncu-rep.xz"])
    ids = [f.rule_id for f in d.findings]
    assert ids[0] == "launch-bound" and ids[1] == "attention-kv-bound"
    f = d.findings[1]
    import sqlite3

    con = sqlite3.connect(f"file:{sample('decode_b512')}?mode=ro&immutable=1", uri=True)
    total = con.execute(
        """SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName WHERE s.value = ? AND gridY = 16 AND gridZ = 512""",
        (SDPA,),
    ).fetchone()[0]
    assert f.evidence["weight_ns"] == total and f.evidence["time_basis"] == "nsys"
    assert f.evidence["ncu_rules"] == "MemoryCacheAccessPattern"
    assert f.impact_ns == pytest.approx(total * f.evidence["ncu_speedup_pct"] / 100, abs=1)
    cov = d.summary.to_json()["ncu"]["coverage_pct"]
    assert 80 < cov < 95
    note = next(f for f in d.findings if f.rule_id == "ncu-coverage")
    assert note.evidence["covered_pct"] == pytest.approx(cov)
    assert note.evidence["command"].startswith("ncu --set full --clock-control none -k 'regex:^(")
    assert "--launch-skip" in note.evidence["command"] and "--launch-count" in note.evidence["command"]


def test_ncu_only_report_on_the_command_line():
    r = run_cli("analyze", str(NCU / "ncu_decode_b1_full.ncu-rep.xz"), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"][0]["kind"] == "ncu-rep" and d["inputs"][0]["producer_version"] == "2025.3.1"
    assert d["summary"]["ncu"]["kernels_profiled"] == 24
    assert "no-gpu-activity" not in [f["rule_id"] for f in d["findings"]]


# --- bad input -------------------------------------------------------------------------


def one_error_line(r, *needles):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


def test_ncu_report_cut_in_half(unpacked, tmp_path):
    p = tmp_path / "half.ncu-rep"
    data = unpacked["ncu_decode_b1_basic"].read_bytes()
    p.write_bytes(data[: len(data) // 2])
    one_error_line(run_cli("analyze", str(p)), "half.ncu-rep", "no profiled kernels")


def test_ncu_report_with_its_last_kernel_cut(unpacked, tmp_path):
    p = tmp_path / "cut.ncu-rep"
    data = unpacked["ncu_decode_b1_basic"].read_bytes()
    p.write_bytes(data[: int(len(data) * 0.97)])
    before = sha256(p)
    one_error_line(run_cli("analyze", str(p)), "cut.ncu-rep", "truncated")
    assert sha256(p) == before


def test_file_named_ncu_rep_that_is_something_else(tmp_path):
    p = tmp_path / "fake.ncu-rep"
    shutil.copy(sample("decode_b1_graphs"), p)  # an SQLite export with the wrong name
    r = run_cli("analyze", str(p), "--format", "json")
    assert r.returncode == 0  # detected by content: it is an nsys export
    assert json.loads(r.stdout)["inputs"][0]["kind"] == "nsys-sqlite"
    p.write_text("ncu report\n" * 50)
    one_error_line(run_cli("analyze", str(p)), "not a valid .ncu-rep")


def test_magic_only_ncu_file(tmp_path):
    p = tmp_path / "magic.ncu-rep"
    p.write_bytes(b"NVR\x00\x02\x00\x00\x00")
    one_error_line(run_cli("analyze", str(p)), "magic.ncu-rep")


# --- other people's reports --------------------------------------------------------------

CORPUS_NCU = sorted(CORPUS.glob("*/*.ncu-rep")) if CORPUS.is_dir() else []


@requires_corpus
@pytest.mark.parametrize("path", CORPUS_NCU, ids=[f"{p.parent.name}/{p.name}" for p in CORPUS_NCU])
def test_every_corpus_ncu_report_analyses(path):
    before = sha256(path)
    d = analyze([path])
    n = d.summary.to_json()["ncu"]
    assert n["kernels_profiled"] >= 1 and n["reports"][0]["ncu_version"].startswith("202")
    assert sha256(path) == before


@requires_corpus
def test_fp32_sgemm_on_a10g_gets_the_tensor_core_advice():
    path = CORPUS / "AveryClapp__ESMM-Research" / "fcf10798__profile.ncu-rep"
    d = analyze([path])
    f = next(f for f in d.findings if f.rule_id == "tensor-cores-idle")
    assert f.evidence["name"].startswith("ampere_sgemm")
    assert "allow_tf32" in f.recommendation
