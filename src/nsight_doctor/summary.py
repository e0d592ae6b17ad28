"""Summary metrics of a profile, computed with SQL over the store's views.

The result is a plain dict (documented in docs/json.md) that every renderer shows first.
"""

from __future__ import annotations

from typing import Any

import duckdb

from nsight_doctor.db import plain

TINY_KERNEL_NS = 10_000  # a kernel shorter than 10 us is "tiny" in the summary
TOP_KERNELS = 10
GAP_BUCKETS = [  # (label, lower bound ns)
    ("<10us", 0), ("10-100us", 10_000), ("100us-1ms", 100_000), ("1-10ms", 1_000_000),
    ("10-100ms", 10_000_000), (">=100ms", 100_000_000),
]
# Sampled GPU metrics worth averaging, by name prefix (names vary a little by nsys version).
KEY_METRICS = {
    "sm_active": ("SMs Active", "SM Active"),
    "sm_issue": ("SM Issue",),
    "tensor_active": ("Tensor Active",),
    "dram_read": ("DRAM Read Bandwidth", "DRAM Read Throughput"),
    "dram_write": ("DRAM Write Bandwidth", "DRAM Write Throughput"),
}


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, map(plain, r))) for r in cur.fetchall()]


def one(con, sql: str, params: list | None = None) -> dict[str, Any]:
    r = rows(con, sql, params)
    return r[0] if r else {}


def summarize(con: duckdb.DuckDBPyConnection, largest_gaps: int = 10) -> dict[str, Any]:
    s: dict[str, Any] = {}
    cap = one(con, "SELECT * FROM capture")
    s["capture_ns"] = cap.get("duration")
    s["gpu_start_ns"] = cap.get("gpu_start")
    s["gpu_end_ns"] = cap.get("gpu_end")
    s["gpu_window_ns"] = cap.get("gpu_window")
    s["has_cuda_trace"] = cap.get("has_cuda_trace")
    s["gpus"] = gpus(con)
    busy = [g for g in s["gpus"] if g["busy_ns"]]
    s["gpu_busy_pct"] = (sum(g["busy_pct"] for g in busy) / len(busy)) if busy else None
    s.update(kernel_stats(con, s["gpu_window_ns"]))
    s["top_kernels"] = top_kernels(con)
    s["memcpy"] = memcpy(con)
    s["memset"] = one(con, "SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes, "
                           "coalesce(sum(duration), 0) AS total_ns FROM memset")
    s["sync"] = sync(con)
    s["launch"] = launch(con)
    s["idle"] = idle(con, largest_gaps)
    s["nvtx"] = nvtx(con)
    metrics = gpu_metrics(con)
    if metrics:
        s["gpu_metrics"] = metrics
    s["profiler_overhead_ns"] = one(con, "SELECT coalesce(sum(duration), 0) AS ns FROM profiler_overhead")["ns"]
    comm = communication(con)
    if comm:
        s["communication"] = comm
    kernels = ncu(con)
    if kernels:
        s["ncu"] = kernels
    return s


def communication(con) -> list[dict[str, Any]]:
    """Per GPU: collective kernels, their share of the GPU window, transfer and waiting time."""
    return rows(con, """
        WITH w AS (SELECT device_id, max("end") - min(start) AS window_ns FROM gpu_busy GROUP BY device_id)
        SELECT c.device_id, any_value(c.pid) AS pid, count(*) AS collectives, max(c.ranks) AS ranks,
               sum(c.duration) AS comm_ns, 100.0 * sum(c.duration) / any_value(w.window_ns) AS comm_pct,
               sum(c.transfer_ns) AS transfer_ns, sum(c.wait_ns) AS wait_ns, sum(c.exposed_ns) AS exposed_ns,
               count(*) FILTER (WHERE c.last_to_arrive) AS last_arrivals
        FROM comm_kernels c JOIN w USING (device_id) GROUP BY c.device_id ORDER BY c.device_id
    """)


def gpus(con) -> list[dict[str, Any]]:
    return rows(con, """
        WITH busy AS (
            SELECT device_id, sum(duration) AS busy_ns, min(start) AS s, max("end") AS e
            FROM gpu_busy GROUP BY device_id
        ), ops AS (
            SELECT device_id,
                   sum(duration) FILTER (WHERE kind = 'kernel') AS kernel_ns,
                   sum(duration) FILTER (WHERE kind = 'graph') AS graph_ns,
                   sum(duration) FILTER (WHERE kind = 'memcpy') AS memcpy_ns,
                   sum(duration) FILTER (WHERE kind = 'memset') AS memset_ns
            FROM gpu_ops GROUP BY device_id
        ), win AS (SELECT gpu_start, gpu_window FROM capture)
        SELECT coalesce(b.device_id, g.device_id) AS device_id, g.name, g.sm_count,
               g.memory_bandwidth_bytes_per_s,
               coalesce(b.busy_ns, 0) AS busy_ns,
               CASE WHEN win.gpu_window > 0 THEN 100.0 * coalesce(b.busy_ns, 0) / win.gpu_window END AS busy_pct,
               b.s AS first_op_ns, b.e AS last_op_ns,
               coalesce(o.kernel_ns, 0) AS kernel_ns, coalesce(o.graph_ns, 0) AS graph_ns,
               coalesce(o.memcpy_ns, 0) AS memcpy_ns, coalesce(o.memset_ns, 0) AS memset_ns
        FROM busy b FULL JOIN gpus g ON g.device_id = b.device_id
        LEFT JOIN ops o ON o.device_id = coalesce(b.device_id, g.device_id), win
        ORDER BY 1
    """)


def kernel_stats(con, window_ns) -> dict[str, Any]:
    k = one(con, f"""
        SELECT count(*) AS kernel_count,
               count(*) FILTER (WHERE in_graph) AS kernels_in_graphs,
               coalesce(sum(duration), 0) AS kernel_ns,
               median(duration) AS kernel_median_ns,
               avg(duration) AS kernel_mean_ns,
               100.0 * count(*) FILTER (WHERE duration < {TINY_KERNEL_NS}) / nullif(count(*), 0) AS tiny_kernel_pct
        FROM kernels
    """)
    g = one(con, "SELECT count(*) AS graph_launch_count, coalesce(sum(duration), 0) AS graph_ns FROM graph_launches")
    k.update(g)
    k["tiny_kernel_threshold_ns"] = TINY_KERNEL_NS
    k["launch_rate_per_s"] = (k["kernel_count"] / (window_ns / 1e9)) if window_ns else None
    return k


def top_kernels(con) -> list[dict[str, Any]]:
    return rows(con, f"""
        WITH t AS (SELECT coalesce(sum(duration), 0) AS total FROM gpu_ops WHERE kind IN ('kernel', 'graph'))
        SELECT name, kind, count(*) AS count, sum(duration) AS total_ns,
               100.0 * sum(duration) / nullif(any_value(t.total), 0) AS share_pct,
               avg(duration) AS mean_ns, median(duration) AS median_ns
        FROM gpu_ops, t WHERE kind IN ('kernel', 'graph')
        GROUP BY name, kind ORDER BY total_ns DESC LIMIT {TOP_KERNELS}
    """)


def memcpy(con) -> dict[str, Any]:
    m = one(con, "SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes, "
                 "coalesce(sum(duration), 0) AS total_ns FROM memcpy")
    m["by_direction"] = rows(con, """
        SELECT direction, coalesce(host_kind, '-') AS host_kind, count(*) AS count,
               sum(bytes) AS bytes, sum(duration) AS total_ns,
               sum(bytes) / nullif(sum(duration), 0) AS bandwidth_gbs
        FROM memcpy GROUP BY ALL ORDER BY total_ns DESC
    """)
    return m


def sync(con) -> dict[str, Any]:
    d = one(con, "SELECT count(*) AS count, coalesce(sum(duration), 0) AS total_ns FROM api_calls WHERE category = 'sync'")
    d["by_api"] = rows(con, """
        SELECT name, count(*) AS count, sum(duration) AS total_ns FROM blocking_calls
        GROUP BY name ORDER BY total_ns DESC
    """)
    return d


def launch(con) -> dict[str, Any]:
    d = one(con, """
        SELECT count(*) AS api_count, coalesce(sum(duration), 0) AS api_ns,
               avg(duration) AS api_mean_ns
        FROM api_calls WHERE category IN ('launch', 'graph_launch')
    """)
    d.update(one(con, """
        WITH l AS (
            SELECT o.start - a.start AS latency
            FROM gpu_ops o JOIN api_calls a ON a.correlation_id = o.correlation_id AND a.pid = o.pid
            WHERE o.kind IN ('kernel', 'graph') AND a.category IN ('launch', 'graph_launch')
        )
        SELECT median(latency) AS latency_median_ns, quantile_cont(latency, 0.9) AS latency_p90_ns
        FROM l
    """))
    return d


def idle(con, largest: int) -> dict[str, Any]:
    d = one(con, "SELECT count(*) AS gap_count, coalesce(sum(duration), 0) AS idle_ns FROM gpu_gaps")
    d["by_cause"] = rows(con, """
        SELECT cause, count(*) AS count, sum(duration) AS total_ns FROM gpu_gaps
        GROUP BY cause ORDER BY total_ns DESC
    """)
    cases = " ".join(f"WHEN duration >= {lo} THEN '{label}'" for label, lo in reversed(GAP_BUCKETS))
    hist = {r["bucket"]: r for r in rows(con, f"""
        SELECT CASE {cases} END AS bucket, count(*) AS count, sum(duration) AS total_ns
        FROM gpu_gaps GROUP BY 1
    """)}
    d["histogram"] = [hist.get(label, {"bucket": label, "count": 0, "total_ns": 0}) for label, _ in GAP_BUCKETS]
    top = rows(con, f"""
        SELECT device_id, start, "end", duration, cause, pid, next_op, launch_name, blocking_name
        FROM gpu_gaps ORDER BY duration DESC, start LIMIT {int(largest)}
    """)
    for gap in top:
        gap["api_calls"] = rows(con, """
            SELECT name, count(*) AS count,
                   sum(least("end", $2) - greatest(start, $1)) AS overlap_ns
            FROM api_calls
            WHERE start < $2 AND "end" > $1 AND ($3::BIGINT IS NULL OR pid = $3)
            GROUP BY name ORDER BY overlap_ns DESC LIMIT 5
        """, [gap["start"], gap["end"], gap["pid"]])
    d["largest"] = top
    return d


def nvtx(con) -> list[dict[str, Any]]:
    return rows(con, """
        SELECT text, domain, count(*) AS count, sum(duration) AS cpu_ns,
               sum(gpu_time) AS gpu_ns, sum(gpu_ops) AS gpu_ops,
               median(gpu_end - gpu_start) AS median_gpu_span_ns
        FROM nvtx_gpu GROUP BY text, domain ORDER BY gpu_ns DESC NULLS LAST, cpu_ns DESC LIMIT 20
    """)


def gpu_metrics(con) -> dict[str, Any]:
    if not con.execute("SELECT EXISTS (SELECT 1 FROM gpu_metrics)").fetchone()[0]:
        return {}
    out: dict[str, Any] = {}
    names = [r["metric"] for r in rows(con, "SELECT DISTINCT metric FROM gpu_metrics")]
    for key, prefixes in KEY_METRICS.items():
        metric = next((n for p in prefixes for n in names if n.startswith(p)), None)
        if metric is None:
            continue
        for r in rows(con, """
            SELECT device_id, samples, avg, avg_busy FROM gpu_metric_averages
            WHERE metric = $1 ORDER BY device_id
        """, [metric]):
            out.setdefault(str(r["device_id"]), {})[key] = {
                "metric": metric, "avg": r["avg"], "avg_busy": r["avg_busy"], "samples": r["samples"]}
    return out


def ncu(con) -> dict[str, Any]:
    """Nsight Compute data: the reports, what they cover, and each kernel group's class."""
    if not con.execute("SELECT EXISTS (SELECT 1 FROM ncu_kernels)").fetchone()[0]:
        return {}
    d: dict[str, Any] = {
        "reports": rows(con, "SELECT path, ncu_version, actions AS kernels FROM base_ncu_reports ORDER BY report_id"),
    }
    d.update(one(con, """
        SELECT count(*) AS kernels_profiled, count(DISTINCT launch) AS launch_configs,
               count(*) FILTER (WHERE bottleneck = 'memory-bound') AS memory_bound,
               count(*) FILTER (WHERE bottleneck = 'compute-bound') AS compute_bound,
               count(*) FILTER (WHERE bottleneck = 'latency-bound') AS latency_bound,
               count(*) FILTER (WHERE top_stall IS NOT NULL) AS with_stall_reasons,
               count(*) FILTER (WHERE l2_hit_pct IS NOT NULL) AS with_cache_metrics,
               count(*) FILTER (WHERE flops IS NOT NULL) AS with_roofline_metrics
        FROM ncu_kernels
    """))
    cov = one(con, """
        SELECT 100.0 * sum(nsys_total_ns) FILTER (WHERE nsys_match = 'config')
               / nullif((SELECT sum(duration) FROM kernels), 0) AS coverage_pct
        FROM ncu_groups
    """)
    d["coverage_pct"] = cov.get("coverage_pct")
    d["groups"] = rows(con, """
        SELECT launch, family, profiled, bottleneck, share_pct, time_basis, weight_ns,
               duration_ns, sm_pct, mem_pct, dram_pct, achieved_occupancy_pct, waves_per_sm,
               tensor_pct, top_stall
        FROM ncu_groups ORDER BY weight_ns DESC LIMIT 15
    """)
    return d
