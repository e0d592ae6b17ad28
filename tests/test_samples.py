"""End to end on every sample: the diagnosis itself, with its numbers checked by hand-written
SQL run by SQLite directly on the export (an engine and a query path independent of ours).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import SAMPLES, run_cli, sample, sha256
from nsight_doctor import analyze

LAUNCH_GAP_MAX_NS = 100_000  # the gpu_gaps "launch" bound, restated independently


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


def gaps_by_cause(con) -> dict[str, tuple[int, int]]:
    """Idle gaps of device 0 classified as docs/schema.md (gpu_gaps) says, in plain SQLite:
    queued when the next operation's launch call returned before the gap; sync when a
    synchronize call, a synchronous copy, or an async copy into pageable memory returned in
    the gap; launch when shorter than 100 us; otherwise cpu or api."""
    con.execute("""CREATE TEMP TABLE calls AS
        SELECT r.start, r.end, r.correlationId, s.value AS name FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN x.StringIds s ON s.id = r.nameId""")
    con.execute("CREATE INDEX calls_corr ON calls (correlationId)")
    con.execute("""CREATE TEMP TABLE blocking AS
        SELECT c.end FROM calls c WHERE c.name LIKE 'cudaStreamSynchronize%' OR c.name LIKE 'cudaDeviceSynchronize%'
            OR c.name LIKE 'cudaEventSynchronize%' OR (c.name LIKE 'cudaMemcpy%' AND c.name NOT LIKE '%Async%')
        UNION ALL
        SELECT c.end FROM calls c JOIN x.CUPTI_ACTIVITY_KIND_MEMCPY m ON m.correlationId = c.correlationId
        WHERE m.copyKind = 2 AND m.dstKind = 0""")
    graphs = has_table(con, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    rows = con.execute(f"""
        WITH ops AS ({sql_ops(con, graphs)}),
        o AS (SELECT start, end, correlationId, kind,
                     MAX(end) OVER (ORDER BY start, end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
              FROM ops),
        g AS (SELECT *, SUM(CASE WHEN prev_end IS NULL OR start > prev_end THEN 1 ELSE 0 END)
                     OVER (ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island FROM o),
        i AS (SELECT island, MIN(start) AS s, MAX(end) AS e FROM g GROUP BY island),
        first AS (SELECT g.island, g.correlationId, g.kind FROM g JOIN i ON i.island = g.island AND g.start = i.s
                  GROUP BY g.island),
        gaps AS (SELECT e AS gs, LEAD(s) OVER (ORDER BY s) AS ge, LEAD(island) OVER (ORDER BY s) AS next FROM i)
        SELECT gaps.gs, gaps.ge,
               CASE WHEN c.end IS NOT NULL AND c.end <= gaps.gs THEN 'queued'
                    WHEN EXISTS (SELECT 1 FROM blocking b WHERE b.end BETWEEN gaps.gs AND gaps.ge) THEN 'sync'
                    WHEN gaps.ge - gaps.gs < {LAUNCH_GAP_MAX_NS} THEN 'launch'
                    ELSE 'long' END AS cause, first.kind
        FROM gaps JOIN first ON first.island = gaps.next
        LEFT JOIN calls c ON c.correlationId = first.correlationId
        WHERE gaps.ge IS NOT NULL
    """).fetchall()
    out: dict[str, tuple[int, int]] = {}
    for gs, ge, cause, kind in rows:
        for key in (cause, f"{cause} before {kind}"):
            n, total = out.get(key, (0, 0))
            out[key] = (n + 1, total + ge - gs)
    return out


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
    causes = gaps_by_cause(con)
    n, total = causes["launch before kernel"]
    assert top.evidence["launch_gaps"] == n
    assert top.impact_ns == total
    assert top.evidence["launch_idle_pct"] > 80
    assert top.evidence["tiny_pct"] > 90
    launch_calls = con.execute(
        """SELECT count(*), avg(r.end - r.start) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r
           JOIN x.StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%'"""
    ).fetchone()
    assert top.evidence["launch_calls"] == launch_calls[0]
    assert top.evidence["mean_launch_call_ns"] == pytest.approx(launch_calls[1])
    assert "CUDA graph" in top.recommendation and "--enforce-eager" in top.recommendation


def test_b1_busy_pct_is_the_union_of_gpu_work(diagnoses):
    d = diagnoses["decode_b1"]
    busy, window = busy_union(export(sample("decode_b1")))
    assert d.summary.to_json()["gpus"][0]["busy_ns"] == busy
    assert d.summary.to_json()["gpu_window_ns"] == window
    assert d.summary.to_json()["gpu_busy_pct"] == pytest.approx(100 * busy / window)
    assert d.summary.to_json()["gpu_busy_pct"] < 15


def test_b1_host_sync_counts_the_per_step_syncs(diagnoses):
    d = diagnoses["decode_b1"]
    f = finding(d, "host-sync")
    con = export(sample("decode_b1"))
    syncs = con.execute("""SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cudaStreamSynchronize%' OR s.value LIKE 'cudaDeviceSynchronize%'""").fetchone()[0]
    steps = con.execute("SELECT count(*) FROM x.NVTX_EVENTS WHERE eventType = 59 AND text = 'decode_step'").fetchone()[
        0
    ]
    assert f.evidence["blocking_calls"] == syncs == 65
    assert f.evidence["top_call"] == "cudaStreamSynchronize"
    assert f.evidence["steps"] == steps == 32
    n, total = gaps_by_cause(con)["sync"]
    assert (f.evidence["sync_gaps"], f.impact_ns) == (n, total)


def test_b1_pageable_copies_match_sql(diagnoses):
    f = finding(diagnoses["decode_b1"], "pageable-memcpy")
    con = export(sample("decode_b1"))
    n, nbytes = con.execute(
        "SELECT count(*), sum(bytes) FROM x.CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 OR dstKind = 0"
    ).fetchone()
    assert (f.evidence["copies"], f.evidence["bytes"]) == (n, nbytes) == (32, 256)
    assert f.evidence["directions"] == "HtoD"


def test_b1_idle_breakdown_partitions_the_idle_time(diagnoses):
    d = diagnoses["decode_b1"]
    idle = d.summary.to_json()["idle"]
    busy, window = busy_union(export(sample("decode_b1")))
    assert idle["idle_ns"] == window - busy
    assert sum(c["total_ns"] for c in idle["by_cause"]) == idle["idle_ns"]
    assert sum(h["count"] for h in idle["histogram"]) == idle["gap_count"]
    f = finding(d, "gpu-idle")
    assert "waiting for the CPU to issue the next operation" in f.title
    # The three idle findings never count the same gap twice.
    claimed = sum(finding(d, r).impact_ns for r in ("launch-bound", "host-sync", "gpu-idle"))
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
    assert "launch-bound" not in ids and "gpu-idle" not in ids
    assert d.findings[0].rule_id == "host-sync"


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
    kernels = con.execute("SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert d.findings[0].rule_id == "launch-bound"
    assert d.findings[0].evidence["kernels"] == kernels
    assert d.summary.to_json()["gpu_busy_pct"] < 10
    f = finding(d, "host-sync")
    syncs = con.execute("""SELECT count(*) FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cudaStreamSynchronize%' OR s.value LIKE 'cudaDeviceSynchronize%'""").fetchone()[0]
    assert f.evidence["blocking_calls"] == syncs
    assert 1.5 <= syncs / 32 <= 2.5  # about two per generated token
