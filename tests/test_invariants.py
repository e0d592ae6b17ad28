"""Invariants every diagnosis must keep, on every sample and every profile of the corpus: the
numbers the tool prints agree with each other (one definition per quantity), breakdowns sum to
their totals, and no finding claims more time than there is."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from conftest import CORPUS, SAMPLES
from nsight_doctor import analyze
from nsight_doctor.ingest.detect import detect
from nsight_doctor.model import Diagnosis
from nsight_doctor.render.text import render as render_text


def profiles() -> list:
    samples = sorted(p for p in SAMPLES.glob("*/*") if p.name.endswith((".sqlite", ".sqlite.xz")))
    corpus = []
    if CORPUS.is_dir():
        for p in sorted(CORPUS.glob("*/*")):
            if p.name.endswith((".sqlite", ".nvvp", ".prof")) and detect(p).kind in ("nsys-sqlite", "nvprof"):
                corpus.append(p)
    return samples + corpus


PROFILES = profiles()


@pytest.fixture(scope="module", params=PROFILES, ids=[f"{p.parent.name}/{p.name}" for p in PROFILES])
def diagnosis(request) -> Diagnosis:
    return analyze([request.param])


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1)


def test_phases_tile_each_gpu_window(diagnosis):
    s = diagnosis.summary
    for g in s.gpus:
        if not g.busy_ns:
            continue
        phases = [p for p in s.phases if p.device_id == g.device_id]
        assert phases, f"GPU {g.device_id} has work but no phase"
        assert phases[0].start_ns == g.first_op_ns and phases[-1].end_ns == g.last_op_ns
        for a, b in itertools.pairwise(phases):
            assert a.end_ns == b.start_ns, (a.name, b.name)
        assert sum(p.duration_ns for p in phases) == g.last_op_ns - g.first_op_ns
        for p in phases:
            assert p.busy_pct is None or -1e-9 <= p.busy_pct <= 100 + 1e-9
            assert p.name in ("startup", "warmup", "prefill", "decode", "mixed", "steady", "idle")


def test_busy_and_idle_add_up_to_each_window(diagnosis):
    s = diagnosis.summary
    windows = sum(g.last_op_ns - g.first_op_ns for g in s.gpus if g.busy_ns)
    busy = sum(g.busy_ns for g in s.gpus)
    assert s.idle.idle_ns == windows - busy
    assert sum(c.total_ns for c in s.idle.by_cause) == s.idle.idle_ns
    # A gap's parts add up to it; each part counts the gaps with time in it.
    assert all(c.count <= s.idle.gap_count for c in s.idle.by_cause)
    assert s.idle.gap_count <= sum(c.count for c in s.idle.by_cause) <= len(s.idle.by_cause) * s.idle.gap_count
    assert sum(h.count for h in s.idle.histogram) == s.idle.gap_count
    assert sum(h.total_ns for h in s.idle.histogram) == s.idle.idle_ns


def test_breakdowns_sum_to_their_totals(diagnosis):
    s = diagnosis.summary
    assert sum(r.count for r in s.memcpy.by_direction) == s.memcpy.count
    assert sum(r.bytes for r in s.memcpy.by_direction) == s.memcpy.bytes
    assert sum(r.total_ns for r in s.memcpy.by_direction) == s.memcpy.total_ns
    # One definition of a blocking call: the parts are the whole.
    assert sum(a.count for a in s.sync.by_api) == s.sync.blocking_count
    assert sum(a.total_ns for a in s.sync.by_api) == s.sync.blocking_ns
    assert s.sync.count <= s.sync.blocking_count and s.sync.steady_blocking_count <= s.sync.blocking_count
    if s.kernel_categories:
        assert close(sum(c.share_pct or 0 for c in s.kernel_categories), 100.0)


def test_the_code_named_in_the_gaps_never_exceeds_their_time(diagnosis):
    """Each source of idle_code (samples, NVTX ranges, OS calls) shares out at most the gaps'
    time of its part: OS calls are the thread's own, one at a time."""
    for g in diagnosis.summary.steady_gpus:
        for part in ("cpu", "readback", "setup"):
            for source in ("python", "native", "nvtx", "osrt"):
                rows = [c for c in g.idle_code if c.part == part and c.source == source]
                assert sum(c.share_pct or 0 for c in rows) <= 100 + 1e-6, (g.device_id, part, source)


def test_the_steady_state_is_its_steady_phases(diagnosis):
    s = diagnosis.summary
    steady = [p for p in s.phases if p.steady]
    if s.steady_state is None:
        assert not steady
        return
    assert s.steady_state.window_ns == sum(p.duration_ns for p in steady)
    assert 0 <= (s.steady_state.busy_pct or 0) <= 100 + 1e-9
    assert s.steady_state.start_ns == min(p.start_ns for p in steady)
    assert s.steady_state.end_ns == max(p.end_ns for p in steady)


def test_the_step_time_is_the_step_gpus(diagnosis):
    """One GPU sets the step time (summary_steady_state.step_device_id): the summary's steps and
    step times are its, and compare reads the same GPU."""
    from nsight_doctor.compare.metrics import step_gpu

    s = diagnosis.summary
    if s.steady_state is None:
        return
    g = step_gpu(s)
    assert g is not None and g.device_id == s.steady_state.step_device_id
    # (the most steps; among equals the least waiting in collectives, then the lowest id)
    assert g is max(s.steady_gpus, key=lambda x: (x.steps or 0, -x.comm_wait_ns, -x.device_id))
    assert (g.steps, g.step_ns_median) == (s.steady_state.steps, s.steady_state.step_ns_median)


def test_findings_never_claim_more_than_their_window(diagnosis):
    s = diagnosis.summary
    per_gpu: dict[int, int] = {}
    for f in diagnosis.findings:
        assert f.impact_ns >= 0
        if f.scope == "capture":
            assert f.impact_ns == 0
        if f.window_ns:
            assert f.impact_ns <= f.window_ns, f.rule_id
        if f.scope == "steady" and not f.claims and "device_id" in f.evidence:
            per_gpu[f.evidence["device_id"]] = per_gpu.get(f.evidence["device_id"], 0) + f.impact_ns
        if f.claims:
            assert f.impact_ns <= f.evidence.get("weight_ns", f.impact_ns) + 1, f.rule_id
    # Timeline findings divide each GPU's steady-state idle time by cause: their sum never
    # exceeds that GPU's steady state.
    windows = {
        f.evidence["device_id"]: f.window_ns
        for f in diagnosis.findings
        if f.scope == "steady" and f.window_ns and "device_id" in f.evidence
    }
    for device, claimed in per_gpu.items():
        if device in windows:
            assert claimed <= windows[device], f"GPU {device}: {claimed} > {windows[device]}"
    if s.steady_state:
        assert sum(per_gpu.values()) <= s.steady_state.window_ns


def test_severity_follows_the_share_of_the_window_recovered(diagnosis):
    # The scale of docs/rules/index.md, written out here rather than read from the code.
    for f in diagnosis.findings:
        if f.scope == "capture":
            continue
        assert f.window_ns, f"{f.rule_id}: a finding about the workload has a window"
        share = 100 * f.impact_ns / f.window_ns
        floor = {"critical": 20, "high": 20, "medium": 5, "low": 0, "info": 0}[f.severity]
        assert share >= floor, f"{f.rule_id} is {f.severity} at {share:.1f}% of its window"
        if f.scope == "startup":
            assert f.severity in ("medium", "low", "info"), f"one-time {f.rule_id} is {f.severity}"


def test_text_numbers_its_findings_without_a_jump(diagnosis):
    """Findings folded under another GPU's share its number; the next one is the next number,
    and every "#n" it cites is a number shown."""
    text = render_text(diagnosis)
    numbers = [int(m) for m in re.findall(r"^(\d+)\. \[", text, flags=re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    for cited in re.findall(r"the same kernels as ((?:#\d+(?:, )?)+)", text):
        assert all(1 <= int(n) <= len(numbers) for n in re.findall(r"\d+", cited)), cited


def test_titles_shorten_long_names_and_the_evidence_keeps_them(diagnosis):
    for f in diagnosis.findings:
        for key, v in f.values.items():
            # (kernel names: one token, or a C++ signature)
            if not isinstance(v, str) or len(v) <= 60 or (" " in v and not v.startswith("void ")):
                continue
            if "{" + key in f.templates.get("title", ""):
                assert v not in f.title, f"{f.rule_id}: {key} whole in the title"
                assert f.evidence.get(key) == v, f"{f.rule_id}: {key} not whole in the evidence"


LLM_WORDS = [
    "vLLM",
    "SGLang",
    "TensorRT-LLM",
    "--enforce-eager",
    "--quantization",
    "max-num-seqs",
    "safetensors",
    "device_map",
    "attn_implementation",
]


def test_advice_fits_what_was_run(diagnosis):
    """LLM serving knobs only where an LLM framework was detected; nsys flags never for an
    nvprof capture."""
    llm = diagnosis.summary.framework.name in ("vllm", "sglang", "tensorrt-llm", "transformers")
    nvprof = any(i.get("kind") == "nvprof" for i in diagnosis.inputs)
    for f in diagnosis.findings:
        if not llm:
            assert not [w for w in LLM_WORDS if w in f.recommendation], (f.rule_id, f.recommendation[:200])
        if nvprof:  # (moving to Nsight Systems is advice; its flags as if it had been used are not)
            assert "--cudabacktrace" not in f.recommendation, f.rule_id
            assert "nsys " not in f.recommendation or "Nsight Systems" in f.recommendation, f.rule_id


def test_summary_and_findings_agree(diagnosis):
    s = diagnosis.summary
    one_gpu = len([g for g in s.gpus if g.busy_ns]) == 1
    for f in diagnosis.findings:
        if f.rule_id == "host-sync" and one_gpu:
            assert f.evidence["blocking_calls"] == s.sync.steady_blocking_count
        if f.rule_id in ("launch-bound", "host-sync", "gpu-idle") and one_gpu and s.steady_state:
            assert f.window_ns == s.steady_state.window_ns
            if s.steady_state.steps:
                assert f.evidence["steps"] == s.steady_state.steps


def test_percentages_are_percentages(diagnosis):
    j = diagnosis.summary.to_json()

    def walk(v, key=""):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif key.endswith("_pct") and isinstance(v, (int, float)):
            assert -1e-6 <= v <= 100.5, (key, v)

    walk(j)
    for n in diagnosis.summary.nvtx:
        if n.cpu_ns_per_process is not None and diagnosis.summary.capture.capture_ns:
            assert n.cpu_ns_per_process <= diagnosis.summary.capture.capture_ns
