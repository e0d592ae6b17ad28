"""End to end on every sample: the diagnosis itself, with its numbers checked by hand-written
SQL run by SQLite directly on the export (an engine and a query path independent of ours).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

import oracle
from conftest import SAMPLES, run_cli, sample, sha256
from nsight_doctor import analyze


def export(path) -> sqlite3.Connection:
    """An in-memory SQLite database with the export attached read-only as x."""
    con = sqlite3.connect(":memory:")
    con.execute("ATTACH DATABASE ? AS x", (f"file:{path}?mode=ro&immutable=1",))
    return con


@pytest.fixture(scope="module")
def diagnoses():
    names = ["decode_b1", "decode_b512", "decode_b1_gpumetrics", "decode_b1_graphs", "decode_b1_graphs_node"]
    return {n: analyze([sample(n)]) for n in names}


def sql_ops(con: sqlite3.Connection, with_graphs: bool = True) -> str:
    """Every GPU operation: kernels, copies, memsets and (optionally) graph executions."""
    parts = [
        "SELECT start, end, correlationId, 'kernel' AS kind FROM x.CUPTI_ACTIVITY_KIND_KERNEL",
        "SELECT start, end, correlationId, 'memcpy' FROM x.CUPTI_ACTIVITY_KIND_MEMCPY",
    ]
    if has_table(con, "CUPTI_ACTIVITY_KIND_MEMSET"):
        parts.append("SELECT start, end, correlationId, 'memset' FROM x.CUPTI_ACTIVITY_KIND_MEMSET")
    if with_graphs and has_table(con, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        parts.append("SELECT start, end, correlationId, 'graph' FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    return " UNION ALL ".join(parts)


def has_table(con, name) -> bool:
    return con.execute("SELECT count(*) FROM x.sqlite_master WHERE name = ?", (name,)).fetchone()[0] > 0


def busy_union(con) -> tuple[int, int]:
    """(busy ns, activity window ns) of device 0, by merging intervals in SQLite."""
    graphs = has_table(con, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    row = con.execute(f"""
        WITH ops AS ({sql_ops(con, graphs)}),
        o AS (SELECT start, end,
                     MAX(end) OVER (ORDER BY start, end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
              FROM ops),
        g AS (SELECT start, end, SUM(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
                     OVER (ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island FROM o),
        i AS (SELECT MIN(start) AS s, MAX(end) AS e FROM g GROUP BY island)
        SELECT SUM(e - s), MAX(e) - MIN(s) FROM i
    """).fetchone()
    return row[0], row[1]


def steady_gaps(d, con) -> list[oracle.Gap]:
    """The oracle's gaps inside the tool's steady state (the phases are the tool's; each gap's
    parts are the oracle's own)."""
    st = d.summary.steady_state
    assert st is not None
    return [g for g in oracle.gaps(con) if g.start >= st.start_ns and g.end <= st.end_ns]


def finding(d, rule_id):
    found = [f for f in d.findings if f.rule_id == rule_id]
    return found[0] if found else None


def test_b1_top_finding_is_launch_bound_with_numbers_from_sql(diagnoses):
    d = diagnoses["decode_b1"]
    con = export(sample("decode_b1"))
    assert d.findings[0].rule_id == "launch-bound"
    top = d.findings[0]
    kernels = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert top.evidence["kernels"] == kernels == 15808
    # The whole capture is the decode loop: its steady state is the whole activity window.
    _, window = busy_union(con)
    assert top.window_ns == window
    n, total = oracle.totals(steady_gaps(d, con), "launch")
    assert top.evidence["launch_gaps"] == n
    assert top.impact_ns == total
    # Not counted: the GPU's own cost between operations already queued (gaps under 20 us).
    gpu_side = sum(g.duration for g in steady_gaps(d, con) if g.parts["queued"] == g.duration < 20_000)
    assert top.evidence["gpu_side_ns"] == gpu_side
    assert top.evidence["launch_idle_pct"] > 80
    assert top.evidence["tiny_pct"] > 90
    assert top.evidence["steps"] == 32 and top.evidence["kernels_per_step"] == kernels / 32
    launch_calls = con.execute(
        """SELECT count(*), avg(r.end - r.start) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r
           JOIN x.StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%'"""
    ).fetchone()
    assert top.evidence["launch_calls"] == launch_calls[0]
    assert top.evidence["mean_launch_call_ns"] == pytest.approx(launch_calls[1])
    # A PyTorch loop (no serving engine): CUDA graphs in PyTorch's terms.
    assert d.summary.framework.name == "pytorch"
    assert "torch.cuda.CUDAGraph" in top.recommendation and "--enforce-eager" not in top.recommendation


def test_b1_busy_pct_is_the_union_of_gpu_work(diagnoses):
    d = diagnoses["decode_b1"]
    busy, window = busy_union(export(sample("decode_b1")))
    assert d.summary.to_json()["gpus"][0]["busy_ns"] == busy
    assert d.summary.to_json()["gpu_window_ns"] == window
    assert d.summary.to_json()["gpu_busy_pct"] == pytest.approx(100 * busy / window)
    assert d.summary.to_json()["gpu_busy_pct"] < 15


def test_b1_per_step_syncs_are_counted_but_cost_only_their_own_wait(diagnoses):
    """Two blocking calls per step (the pageable position copy and the `.item()`), each
    returning microseconds after the GPU drained: the GPU waits for the CPU's next launches,
    not for the calls, so host-sync claims only the wait inside them and stays quiet."""
    d = diagnoses["decode_b1"]
    con = export(sample("decode_b1"))
    st = d.summary.steady_state
    assert st is not None
    syncs = con.execute(
        """SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
        WHERE (s.value LIKE 'cudaStreamSynchronize%' OR s.value LIKE 'cudaDeviceSynchronize%')
          AND r.start >= ? AND r.start <= ?""",
        (st.start_ns, st.end_ns),
    ).fetchone()[0]
    assert syncs == 64  # 2 per step
    # The summary counts every blocking call of the capture, and how many fall in the steady state.
    assert d.summary.sync.blocking_count == 65 and d.summary.sync.steady_blocking_count == 64
    _, inside = oracle.totals(steady_gaps(d, con), "sync")
    assert 0 < inside < 0.01 * st.window_ns
    assert finding(d, "host-sync") is None
    parts = d.summary.steady_gpus[0].step_parts
    assert parts is not None and parts.steps == 32
    assert parts.sync_ns * parts.steps == pytest.approx(inside)


def test_b1_pageable_copies_match_sql(diagnoses):
    f = finding(diagnoses["decode_b1"], "pageable-memcpy")
    con = export(sample("decode_b1"))
    n, nbytes = con.execute(
        "SELECT count(*), sum(bytes) FROM x.CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 OR dstKind = 0"
    ).fetchone()
    assert (f.evidence["copies"], f.evidence["bytes"]) == (n, nbytes) == (32, 256)
    assert f.evidence["directions"] == "HtoD"
    # Its impact is the GPU's idle time inside those copies' calls, not inside every copy or
    # memset call (each step also copies device to device and sets memory): the calls' overlap
    # with the oracle's gaps of the steady state, and never more than the calls' own time.
    calls = con.execute(
        """SELECT r.start, r."end" FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN x.CUPTI_ACTIVITY_KIND_MEMCPY m ON m.correlationId = r.correlationId
        WHERE m.srcKind = 0 OR m.dstKind = 0"""
    ).fetchall()
    inside = [
        (g, sum(max(0, min(g.end, e) - max(g.start, s)) for s, e in calls))
        for g in steady_gaps(diagnoses["decode_b1"], con)
    ]
    hit = [(g, t) for g, t in inside if t > 0]
    assert f.evidence["copy_gaps"] == len(hit) == 32
    assert f.impact_ns == sum(min(t, g.parts["copy"]) for g, t in hit)
    assert 0 < f.impact_ns <= f.evidence["api_ns"]


def test_b1_idle_breakdown_partitions_the_idle_time(diagnoses):
    d = diagnoses["decode_b1"]
    con = export(sample("decode_b1"))
    idle = d.summary.to_json()["idle"]
    busy, window = busy_union(con)
    assert idle["idle_ns"] == window - busy
    assert sum(c["total_ns"] for c in idle["by_cause"]) == idle["idle_ns"]
    assert sum(h["count"] for h in idle["histogram"]) == idle["gap_count"]
    by_cause = {c["cause"]: (c["count"], c["total_ns"]) for c in idle["by_cause"]}
    gaps = oracle.gaps(con)
    for part in oracle.PARTS:
        assert oracle.totals(gaps, part) == by_cause.get(part, (0, 0)), part
    # The idle findings never count the same gap twice.
    claimed = sum(f.impact_ns for f in d.findings if f.scope == "steady")
    assert claimed <= idle["idle_ns"]


def test_b512_is_still_launch_bound_but_busier(diagnoses):
    d1, d512 = diagnoses["decode_b1"], diagnoses["decode_b512"]
    assert d512.findings[0].rule_id == "launch-bound"
    busy, window = busy_union(export(sample("decode_b512")))
    assert d512.summary.to_json()["gpu_busy_pct"] == pytest.approx(100 * busy / window)
    assert d512.summary.to_json()["gpu_busy_pct"] > 3 * d1.summary.to_json()["gpu_busy_pct"]
    # At batch 512 the attention kernel dominates GPU time.
    top = d512.summary.to_json()["top_kernels"][0]
    assert "sdpa" in top["name"] or "attention" in top["name"].lower() or "fmha" in top["name"]


def test_gpumetrics_sample_reports_low_sm_activity_from_sql(diagnoses):
    d = diagnoses["decode_b1_gpumetrics"]
    f = finding(d, "low-sm-activity")
    assert f is not None
    con = export(sample("decode_b1_gpumetrics"))
    busy, window = busy_union(con)
    first, last = con.execute(f"WITH ops AS ({sql_ops(con, False)}) SELECT min(start), max(end) FROM ops").fetchone()
    avg = con.execute(
        """SELECT avg(g.value) FROM x.GPU_METRICS g JOIN x.TARGET_INFO_GPU_METRICS n
        ON n.typeId = g.typeId AND n.metricId = g.metricId
        WHERE n.metricName = 'SMs Active [Throughput %]' AND g.timestamp BETWEEN ? AND ?""",
        (first, last),
    ).fetchone()[0]
    assert f.evidence["sm_active_busy"] == pytest.approx(avg / (busy / window))
    assert f.evidence["sm_active_busy"] < 50
    sm = d.summary.to_json()["gpu_metrics"]["0"]["sm_active"]
    assert sm["avg_busy"] == pytest.approx(f.evidence["sm_active_busy"])
    assert d.findings[0].rule_id == "launch-bound"


def test_graph_sample_counts_graph_time_as_busy_and_does_not_blame_launches(diagnoses):
    d = diagnoses["decode_b1_graphs"]
    con = export(sample("decode_b1_graphs"))
    graphs = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone()[0]
    assert d.summary.to_json()["graph_launch_count"] == graphs == 32
    busy, window = busy_union(con)
    assert d.summary.to_json()["gpu_busy_pct"] == pytest.approx(100 * busy / window)
    assert d.summary.to_json()["gpu_busy_pct"] > 80  # the graph replays are work, not idle time
    ids = [f.rule_id for f in d.findings]
    # The CPU's time inside cudaGraphLaunch is launch cost, not host code; and the per-step
    # `.item()` returns microseconds after the graph ends: a healthy loop, with no steady
    # finding. The step's split says where its 12% of idle time goes: mostly waiting for the
    # next replay to be issued after the sync.
    assert "launch-bound" not in ids and "gpu-idle" not in ids and "host-sync" not in ids
    assert not [f for f in d.findings if f.scope == "steady"]
    assert d.summary.steady_state.steps == 32
    parts = d.summary.steady_gpus[0].step_parts
    assert parts is not None and parts.blocked_ns > 0.8 * parts.step_ns_mean
    assert 0.05 * parts.step_ns_mean < parts.launch_ns < 0.1 * parts.step_ns_mean


def test_node_traced_graphs_are_not_called_launch_bound(diagnoses):
    d = diagnoses["decode_b1_graphs_node"]
    con = export(sample("decode_b1_graphs_node"))
    in_graph = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId <> 0").fetchone()[0]
    assert d.summary.to_json()["kernels_in_graphs"] == in_graph
    assert "launch-bound" not in [f.rule_id for f in d.findings]


def test_parquet_export_gives_the_same_diagnosis_as_sqlite(diagnoses):
    via_parquet = analyze([SAMPLES / "decode_b1" / "decode_b1_pqtdir"])
    via_sqlite = diagnoses["decode_b1"]
    assert [(f.rule_id, f.impact_ns) for f in via_parquet.findings] == [
        (f.rule_id, f.impact_ns) for f in via_sqlite.findings
    ]
    assert via_parquet.summary.to_json()["kernel_count"] == via_sqlite.summary.to_json()["kernel_count"]


def test_report_with_sibling_export_needs_no_nsys_and_is_not_modified(tmp_path):
    rep = sample("decode_b1", ".nsys-rep")
    before = {p: sha256(p) for p in (rep, sample("decode_b1"), SAMPLES / "decode_b1" / "decode_b1_pqtdir")}
    r = run_cli("analyze", str(rep), "--format", "json", env={"PATH": "/nonexistent", "NSYS": ""})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["inputs"][0]["kind"] == "nsys-rep"
    assert out["inputs"][0]["export_path"].endswith("decode_b1_pqtdir")
    assert out["findings"][0]["rule_id"] == "launch-bound"
    assert {p: sha256(p) for p in before} == before


def test_transformers_generate_is_launch_bound_with_per_token_syncs():
    d = analyze([sample("hf_generate")])
    con = export(sample("hf_generate"))
    st = d.summary.steady_state
    assert st is not None
    kernels = con.execute(
        "SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ?", (st.start_ns,)
    ).fetchone()[0]
    assert d.findings[0].rule_id == "launch-bound"
    assert d.findings[0].evidence["kernels"] == kernels
    assert d.summary.to_json()["gpu_busy_pct"] < 10
    syncs = con.execute(
        """SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
        WHERE (s.value LIKE 'cudaStreamSynchronize%' OR s.value LIKE 'cudaDeviceSynchronize%')
          AND r.start >= ? AND r.start <= ?""",
        (st.start_ns, st.end_ns),
    ).fetchone()[0]
    assert 1.5 <= syncs / st.steps <= 2.5  # about two per generated token
    # Each returns microseconds after the GPU drains: the time that follows is the CPU's code
    # (gpu-idle) and its launches (launch-bound), not the syncs'.
    _, inside = oracle.totals(steady_gaps(d, con), "sync")
    assert inside < 0.01 * st.window_ns and finding(d, "host-sync") is None
    g = finding(d, "gpu-idle")
    _, total = oracle.totals(steady_gaps(d, con), "cpu")
    assert g.evidence["cpu_ns"] == total
    # No CPU or Python samples in this capture: the finding says how to record them.
    assert "--python-sampling=true" in g.message
