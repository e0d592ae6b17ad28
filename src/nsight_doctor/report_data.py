"""The data behind the report's charts: small, aggregated tables read from the documented views.

The engine calls ``collect`` when a report with charts is asked for (HTML, notebook, PDF,
--charts) and puts the result in ``Diagnosis.datasets``; renderers draw from there and never
query the store. Every dataset keeps its SQL with every value written in, so that the notebook
and a doubting reader can run it again against the kept store (--db) and get the same rows.

Each query reads documented views only (docs/schema.md) and bounds its output: time series
are binned, the timeline is one window with a capped number of bars, per-kernel tables keep
the hottest rows. A profile with millions of kernels gives charts of the same size as a small
one.
"""

from __future__ import annotations

from typing import Any

import duckdb

from nsight_doctor.db import bind_sql, one, rows, scalar
from nsight_doctor.model import Dataset
from nsight_doctor.sections import Summary
from nsight_doctor.store.taxonomy import case_sql

# Bounds on what goes into a report.
UTILISATION_BINS = 240  # per GPU
TIMELINE_MAX_OPS = 1500  # GPU operations in the timeline window
# The utilisation chart bins the steady state alone when it is less than this share (%) of the
# activity window.
STEADY_ZOOM_PCT = 50
TIMELINE_MAX_CPU = 1500  # CPU-side calls and ranges in it
STEP_SAMPLE = 2000  # step durations drawn
TOP_KERNELS = 15
NCU_KERNELS = 12  # launch configurations in the stall and occupancy charts
NCU_POINTS = 60  # in the roofline and throughput scatter plots

# The sampled GPU metrics drawn over the busy time (keys of gpu_metric_averages).
METRIC_SERIES = {
    "sm_active": "SMs active (sampled)",
    "tensor_active": "tensor cores active (sampled)",
    "dram_read": "DRAM read bandwidth (sampled)",
}


def kernel_category(name: str = "name", demangled: str = "demangled_name") -> str:
    return case_sql(name, demangled).replace("\n", "\n        ")


def dataset(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None, note: str = "") -> Dataset:
    bound = bind_sql(sql, params or {})
    return Dataset(sql=bound, rows=rows(con, bound), note=note)


def has_rows(con: duckdb.DuckDBPyConnection, view: str) -> bool:
    return bool(scalar(con, f"SELECT EXISTS (SELECT 1 FROM {view})"))


def collect(con: duckdb.DuckDBPyConnection, summary: Summary) -> dict[str, Dataset]:
    """Every dataset that the profile has data for."""
    out: dict[str, Dataset] = {}
    window = summary.capture
    if window.gpu_window_ns and window.gpu_start_ns is not None:
        steady = summary.steady_state
        if steady is not None and steady.share_pct is not None and steady.share_pct < STEADY_ZOOM_PCT:
            # A long start-up would flatten the steady state into a spike: bin the steady state.
            span = steady.end_ns - steady.start_ns
            out["utilisation"] = utilisation(con, steady.start_ns, span, "the steady state")
            out["utilisation"].note += f" ({steady.share_pct:.0f}% of the activity window; start-up left out)"
        else:
            out["utilisation"] = utilisation(con, window.gpu_start_ns, window.gpu_window_ns)
        timeline = timeline_window(con)
        if timeline:
            out["timeline"] = timeline
        if summary.idle.gap_count:
            out["idle_gaps"] = idle_gaps(con)
    if summary.kernels.kernel_count or summary.kernels.graph_launch_count:
        out["kernel_categories"] = kernel_categories(con)
        out["top_kernels"] = top_kernels(con)
    steps = step_times(con)
    if steps.rows:
        out["step_times"] = steps
    if has_rows(con, "ncu_groups"):
        for name, fn in (
            ("ncu_stalls", ncu_stalls),
            ("ncu_occupancy", ncu_occupancy),
            ("ncu_roofline", ncu_roofline),
            ("ncu_throughput", ncu_throughput),
        ):
            ds = fn(con)
            if ds.rows:
                out[name] = ds
    return out


UTILISATION_SQL = """
-- GPU utilisation over time: busy share of each bin per GPU (from gpu_busy), and the
-- sampled GPU metrics averaged over the same bins (from gpu_metrics).
WITH p AS (
    SELECT CAST($t0 AS BIGINT) AS t0, CAST($bin_ns AS BIGINT) AS w, CAST($bins AS BIGINT) AS n
), bins AS (
    SELECT d.device_id, b.bin, p.t0 + b.bin * p.w AS bin_start
    FROM (SELECT DISTINCT device_id FROM gpu_activity) d, p, range(p.n) AS b(bin)
), busy AS (
    SELECT device_id, bin, sum(least("end", t0 + (bin + 1) * w) - greatest(start, t0 + bin * w)) AS ns
    FROM (
        SELECT g.device_id, g.start, g."end", p.t0, p.w, p.n,
               unnest(range((g.start - p.t0) // p.w, (g."end" - p.t0) // p.w + 1)) AS bin
        FROM gpu_busy g, p
    )
    WHERE bin BETWEEN 0 AND n - 1
    GROUP BY device_id, bin
), metric_keys AS (
    SELECT device_id, metric, key FROM gpu_metric_averages WHERE key IN ($metric_keys)
), metrics AS (
    SELECT m.device_id, k.key, (m.timestamp - p.t0) // p.w AS bin, avg(m.value) AS pct
    FROM gpu_metrics m JOIN metric_keys k USING (device_id, metric), p
    WHERE m.timestamp >= p.t0 AND m.timestamp < p.t0 + p.n * p.w
    GROUP BY ALL
)
SELECT bins.device_id, bins.bin_start / 1e6 AS start_ms, p.w / 1e6 AS bin_ms,
       'busy (traced operations)' AS series, least(100.0, 100.0 * coalesce(busy.ns, 0) / p.w) AS pct
FROM bins LEFT JOIN busy USING (device_id, bin), p
UNION ALL
SELECT bins.device_id, bins.bin_start / 1e6, p.w / 1e6, metrics.key, metrics.pct
FROM bins JOIN metrics USING (device_id, bin), p
ORDER BY 1, 4, 2
"""


def utilisation(
    con: duckdb.DuckDBPyConnection, t0: int, window_ns: int, over: str = "the GPU activity window"
) -> Dataset:
    bin_ns = max(1, -(-window_ns // UTILISATION_BINS))
    keys = ", ".join(f"'{k}'" for k in METRIC_SERIES)
    sql = UTILISATION_SQL.replace("$metric_keys", keys)
    ds = dataset(
        con,
        sql,
        {"t0": t0, "bin_ns": bin_ns, "bins": UTILISATION_BINS},
        note=f"{UTILISATION_BINS} bins of {bin_ns / 1e6:.3g} ms over {over}",
    )
    for r in ds.rows:
        r["series"] = METRIC_SERIES.get(r["series"], r["series"])
    return ds


def timeline_window(con: duckdb.DuckDBPyConnection) -> Dataset | None:
    """One representative window of the run: the NVTX step range of median length when the
    loop is marked (the most repeated outermost range), else a slice around the middle
    operation of the busiest GPU; capped at TIMELINE_MAX_OPS GPU operations."""
    step = one(
        con,
        """
        WITH top AS (
            SELECT text, count(*) AS n FROM nvtx_gpu WHERE depth = 0 AND gpu_ops > 0
            GROUP BY text HAVING count(*) >= 3 ORDER BY n DESC, text LIMIT 1
        ), r AS (
            SELECT g.*, row_number() OVER (ORDER BY g.gpu_end - least(g.start, g.gpu_start), g.start) AS k,
                   count(*) OVER () AS n
            FROM nvtx_gpu g JOIN top USING (text) WHERE g.depth = 0 AND g.gpu_ops > 0
        )
        SELECT text, n, least(start, gpu_start) AS t0, greatest("end", gpu_end) AS t1 FROM r WHERE k = (n + 1) // 2
        """,
    )
    if step:
        t0, t1 = step["t0"], step["t1"]
        how = f'the "{step["text"]}" NVTX range of median length (of {step["n"]:,})'
    else:
        mid = one(
            con,
            """
            WITH dev AS (SELECT device_id FROM gpu_activity ORDER BY busy_ns DESC, device_id LIMIT 1),
            ops AS (SELECT start, "end", row_number() OVER (ORDER BY start) AS k, count(*) OVER () AS n
                    FROM gpu_ops JOIN dev USING (device_id))
            SELECT min(start) FILTER (WHERE k = greatest(1, n // 2 - 150)) AS t0,
                   max("end") FILTER (WHERE k = least(n, n // 2 + 150)) AS t1
            FROM ops
            """,
        )
        if not mid or mid["t0"] is None:
            return None
        t0, t1 = mid["t0"], mid["t1"]
        how = "300 operations around the middle of the busiest GPU's activity (no repeated NVTX range)"
    # Cap the window at TIMELINE_MAX_OPS GPU operations.
    cut = scalar(
        con,
        'SELECT start FROM gpu_ops WHERE "end" > ? AND start < ? ORDER BY start LIMIT 1 OFFSET ?',
        [t0, t1, TIMELINE_MAX_OPS],
    )
    if cut is not None:
        how += f", cut at its first {TIMELINE_MAX_OPS:,} GPU operations"
        t1 = cut
    return dataset(
        con,
        TIMELINE_SQL.replace("$kernel_category", kernel_category("k.name", "k.demangled_name")),
        {"t0": t0, "t1": t1, "max_ops": TIMELINE_MAX_OPS, "max_cpu": TIMELINE_MAX_CPU},
        note=f"{fmt_ms(t0)} to {fmt_ms(t1)}: {how}",
    )


def fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


TIMELINE_SQL = """
-- One window of the timeline: GPU operations per stream (kernels coloured by category), and
-- above them the CUDA calls and NVTX ranges of the threads that issued them.
WITH ops AS (
    SELECT o.device_id, o.stream_id, o.kind, o.name, o.start, o."end", o.duration, o.correlation_id, o.pid,
           CASE o.kind WHEN 'kernel' THEN $kernel_category
                       WHEN 'graph' THEN 'cuda-graph' ELSE o.kind END AS category
    FROM gpu_ops o
    LEFT JOIN (SELECT * FROM kernels WHERE "end" > $t0 AND start < $t1) k
         ON o.kind = 'kernel' AND k.device_id = o.device_id
         AND k.correlation_id = o.correlation_id AND k.start = o.start
    WHERE o."end" > $t0 AND o.start < $t1
    ORDER BY o.start LIMIT $max_ops
), names AS (
    SELECT pid, tid, any_value(name) AS name FROM threads GROUP BY ALL
), issuers AS (
    -- The threads that issued them (their calls began at most a second before the window).
    SELECT DISTINCT a.pid, a.tid
    FROM (SELECT * FROM api_calls WHERE start < $t1 AND "end" > $t0 - 1000000000) a JOIN ops USING (pid, correlation_id)
), cpu AS (
    SELECT 'CUDA calls, thread ' || a.tid || coalesce(' (' || t.name || ')', '') AS lane, 'cpu' AS side,
           a.category AS category, a.name,
           a.start, a."end", a.duration
    FROM api_calls a JOIN issuers USING (pid, tid) LEFT JOIN names t USING (pid, tid)
    WHERE a."end" > $t0 AND a.start < $t1
    UNION ALL
    SELECT 'NVTX ranges, thread ' || r.tid || coalesce(' (' || t.name || ')', ''), 'nvtx', 'nvtx depth ' || r.depth,
           r.text, r.start, r."end", r.duration
    FROM nvtx_ranges r JOIN issuers USING (pid, tid) LEFT JOIN names t USING (pid, tid)
    WHERE r."end" > $t0 AND r.start < $t1
)
SELECT * FROM (
    SELECT 'GPU ' || device_id || ' stream ' || stream_id AS lane, 'gpu' AS side, category, name,
           start, "end", duration
    FROM ops
    UNION ALL
    (SELECT * FROM cpu ORDER BY duration DESC LIMIT $max_cpu)
)
ORDER BY side, lane, start
"""


IDLE_GAPS_SQL = """
-- Idle gaps by length (four bins per decade) and cause (gpu_gaps).
SELECT power(10, floor(log10(duration) * 4) / 4) / 1e3 AS lo_us,
       power(10, (floor(log10(duration) * 4) + 1) / 4) / 1e3 AS hi_us,
       cause, count(*) AS gaps, sum(duration) AS total_ns
FROM gpu_gaps WHERE duration > 0
GROUP BY ALL ORDER BY lo_us, cause
"""


def idle_gaps(con: duckdb.DuckDBPyConnection) -> Dataset:
    return dataset(con, IDLE_GAPS_SQL)


CATEGORIES_SQL = """
-- Kernel time by category (the kernel taxonomy, store/kernel_categories.yaml), with CUDA
-- graphs traced as a whole as their own category.
WITH names AS (
    SELECT name, demangled_name, count(*) AS n, sum(duration) AS ns FROM kernels GROUP BY ALL
), c AS (
    SELECT $kernel_category AS category, n, ns FROM names
    UNION ALL
    SELECT 'cuda-graph', 1, duration FROM gpu_ops WHERE kind = 'graph'
)
SELECT category, sum(n) AS count, sum(ns) AS total_ns,
       100.0 * sum(ns) / sum(sum(ns)) OVER () AS share_pct
FROM c GROUP BY category ORDER BY total_ns DESC
"""


def kernel_categories(con: duckdb.DuckDBPyConnection) -> Dataset:
    return dataset(con, CATEGORIES_SQL.replace("$kernel_category", kernel_category()))


TOP_KERNELS_SQL = """
-- The kernels (and whole CUDA graphs) with the most GPU time, with their category.
WITH k AS (
    SELECT name, any_value(demangled_name) AS demangled_name, count(*) AS count, sum(duration) AS total_ns,
           median(duration) AS median_ns
    FROM kernels GROUP BY name
    UNION ALL
    SELECT 'graph ' || name, NULL, count(*), sum(duration), median(duration)
    FROM gpu_ops WHERE kind = 'graph' GROUP BY name
)
SELECT name, $kernel_category AS category, count, total_ns, median_ns,
       100.0 * total_ns / sum(total_ns) OVER () AS share_pct
FROM k ORDER BY total_ns DESC, name LIMIT $limit
"""


def top_kernels(con: duckdb.DuckDBPyConnection) -> Dataset:
    sql = TOP_KERNELS_SQL.replace("$kernel_category", kernel_category())
    # share_pct is computed before the LIMIT (window functions run first).
    return dataset(con, sql, {"limit": TOP_KERNELS})


STEP_TIMES_SQL = """
-- Step times: each instance of the most repeated outermost NVTX ranges (the steps of a loop,
-- e.g. decode_step), its length on the CPU and the span of its work on the GPU.
WITH top AS (
    SELECT text, count(*) AS n FROM nvtx_gpu WHERE depth = 0 AND gpu_ops > 0
    GROUP BY text HAVING count(*) >= 5 ORDER BY n DESC, text LIMIT 3
), s AS (
    SELECT g.text, g.start, g.duration AS cpu_ns, g.gpu_end - g.gpu_start AS gpu_span_ns, g.gpu_time AS gpu_ns,
           row_number() OVER (PARTITION BY g.text ORDER BY g.start) AS step
    FROM nvtx_gpu g JOIN top USING (text) WHERE g.depth = 0 AND g.gpu_ops > 0
)
SELECT text, step, start / 1e6 AS start_ms, cpu_ns, gpu_span_ns, gpu_ns FROM s
WHERE hash(text, step) % greatest(1, (SELECT sum(n) FROM top) // $sample) = 0
ORDER BY text, step
"""


def step_times(con: duckdb.DuckDBPyConnection) -> Dataset:
    total = scalar(
        con,
        """SELECT sum(n) FROM (SELECT count(*) AS n FROM nvtx_gpu WHERE depth = 0 AND gpu_ops > 0
           GROUP BY text HAVING count(*) >= 5 ORDER BY n DESC, text LIMIT 3)""",
    )
    note = f"a deterministic sample of {STEP_SAMPLE:,}-odd of {total:,} steps" if (total or 0) > 2 * STEP_SAMPLE else ""
    return dataset(con, STEP_TIMES_SQL, {"sample": STEP_SAMPLE}, note=note)


NCU_STALLS_SQL = """
-- Warp-stall reasons of the hottest profiled kernels: their stall mix (summary_ncu_stalls).
WITH g AS (
    SELECT launch, share_pct FROM ncu_groups ORDER BY weight_ns DESC NULLS LAST, launch LIMIT $limit
)
SELECT g.launch, g.share_pct, s.reason, s.ratio
FROM g JOIN summary_ncu_stalls s USING (launch)
ORDER BY share_pct DESC, launch, ratio DESC
"""


def ncu_stalls(con: duckdb.DuckDBPyConnection) -> Dataset:
    return dataset(con, NCU_STALLS_SQL, {"limit": NCU_KERNELS})


NCU_OCCUPANCY_SQL = """
-- Achieved against theoretical occupancy of the hottest profiled kernels (ncu_groups).
SELECT launch, share_pct, achieved_occupancy_pct, theoretical_occupancy_pct, occupancy_limiter,
       registers_per_thread, block_size, waves_per_sm
FROM ncu_groups
WHERE achieved_occupancy_pct IS NOT NULL OR theoretical_occupancy_pct IS NOT NULL
ORDER BY weight_ns DESC NULLS LAST, launch LIMIT $limit
"""


def ncu_occupancy(con: duckdb.DuckDBPyConnection) -> Dataset:
    return dataset(con, NCU_OCCUPANCY_SQL, {"limit": NCU_KERNELS})


NCU_ROOFLINE_SQL = """
-- The roofline: each launch configuration's achieved operations per second (tensor and
-- non-tensor, ncu_roofline) against its operations per DRAM byte, with the peaks of its compute
-- roof (FP32, tensor BF16, ...) and of DRAM on its GPU.
WITH k AS (
    SELECT launch, device_name, compute_roof, sum(ops) AS ops, sum(dram_bytes) AS dram_bytes,
           sum(duration_ns) AS ns, median(peak_ops_per_s) AS peak_ops,
           median(peak_dram_bytes_per_s) AS peak_bw
    FROM ncu_kernels
    WHERE roof_basis = 'roofline' AND ops > 0 AND dram_bytes > 0 AND duration_ns > 0 AND peak_dram_bytes_per_s > 0
    GROUP BY launch, device_name, compute_roof
)
SELECT k.launch, k.device_name, k.compute_roof, k.ops / k.dram_bytes AS arithmetic_intensity,
       k.ops / (k.ns / 1e9) AS ops_per_s, k.peak_ops AS peak_ops_per_s,
       k.peak_bw AS peak_dram_bytes_per_s, g.share_pct, g.bottleneck, g.roof, g.roof_pct
FROM k JOIN ncu_groups g USING (launch)
ORDER BY g.weight_ns DESC NULLS LAST, k.launch LIMIT $limit
"""


def ncu_roofline(con: duckdb.DuckDBPyConnection) -> Dataset:
    ds = dataset(con, NCU_ROOFLINE_SQL, {"limit": NCU_POINTS})
    without = scalar(
        con,
        "SELECT count(DISTINCT launch) FROM ncu_kernels"
        " WHERE roof_basis IS DISTINCT FROM 'roofline' OR coalesce(ops, 0) = 0 OR coalesce(dram_bytes, 0) = 0",
    )
    if without:
        ds.note = (
            f"{without} launch configurations are not drawn: no floating-point or tensor operations"
            " (copies), no DRAM traffic, or no roofline counters in the report (--set full collects them)"
        )
    return ds


NCU_THROUGHPUT_SQL = """
-- Compute (SM) against memory throughput, % of peak, per launch configuration (ncu_groups).
SELECT launch, share_pct, sm_pct, mem_pct, dram_pct, tensor_pct, bottleneck
FROM ncu_groups WHERE sm_pct IS NOT NULL AND mem_pct IS NOT NULL
ORDER BY weight_ns DESC NULLS LAST, launch LIMIT $limit
"""


def ncu_throughput(con: duckdb.DuckDBPyConnection) -> Dataset:
    return dataset(con, NCU_THROUGHPUT_SQL, {"limit": NCU_POINTS})
