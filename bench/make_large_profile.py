"""Scale a real nsys SQLite export up to a large profile, for benchmarks.

The large profile is made of real rows: every activity table of the input is copied N
times, each copy shifted in time by the capture span (so copies follow one another, as
the steps of a long serving run do) and with correlation ids shifted so that each kernel
still links to its own launch call. GPU metric rows are copied only as often as needed
to reach --metric-rows.

    python bench/make_large_profile.py samples/decode_b1_gpumetrics/decode_b1_gpumetrics.sqlite \
        /tmp/large.sqlite --kernels 2000000 --metric-rows 5000000

With fewer kernel copies than the metric rows need (a short capture with GPU metrics sampled
fast, as a 3 s capture at 10 kHz or more gives), the metrics are sampled denser instead: each
extra copy of the samples is shifted by a fraction of the sampling period.

    python bench/make_large_profile.py samples/decode_b1_gpumetrics/decode_b1_gpumetrics.sqlite \
        /tmp/metrics.sqlite --kernels 55000 --metric-rows 5800000
"""

import argparse
import itertools
import math
import shutil
import sqlite3
import sys

# Tables whose rows are events on the timeline: (table, time columns, id columns to shift).
EVENT_TABLES = [
    ("CUPTI_ACTIVITY_KIND_KERNEL", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMSET", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ("start", "end"), ("correlationId",)),
    ("NVTX_EVENTS", ("start", "end"), ()),
    ("OSRT_API", ("start", "end"), ()),
]
METRICS = ("GPU_METRICS", ("timestamp", "rawTimestamp"), ())


def tables(con):
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(con, table):
    return [r[1] for r in con.execute(f"PRAGMA table_info([{table}])")]


def replicate(con, table, time_cols, id_cols, copies, span, id_span):
    cols = columns(con, table)
    sel = []
    for c in cols:
        if c in time_cols:
            sel.append(f"[{c}] + :k * {span}")
        elif c in id_cols:
            sel.append(f"[{c}] + :k * {id_span}")
        else:
            sel.append(f"[{c}]")
    # Copy from a frozen snapshot of the original rows (rowid <= n). Rows timed before the
    # capture (NVTX domain registrations) are not events of a step and are copied once.
    n = con.execute(f"SELECT max(rowid) FROM [{table}]").fetchone()[0] or 0
    sql = (
        f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in cols)}) "
        f"SELECT {', '.join(sel)} FROM [{table}] WHERE rowid <= {n} AND [{time_cols[0]}] >= 0"
    )
    for k in range(1, copies):
        con.execute(sql, {"k": k})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("dest")
    p.add_argument("--kernels", type=float, default=2e6)
    p.add_argument("--metric-rows", type=float, default=5e6)
    a = p.parse_args(argv)

    shutil.copyfile(a.source, a.dest)
    con = sqlite3.connect(a.dest)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    have = tables(con)
    n_k = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = math.ceil(a.kernels / n_k)
    # The span of one copy: from the first to the last CUDA event, plus a gap.
    lo, hi = None, None
    for t, tc, _ in EVENT_TABLES:
        if t in have and t.startswith("CUPTI"):
            mn, mx = con.execute(
                f"SELECT min([{tc[0]}]), max(coalesce([{tc[1]}], [{tc[0]}])) FROM [{t}] WHERE [{tc[0]}] >= 0"
            ).fetchone()
            if mn is not None:
                lo = mn if lo is None else min(lo, mn)
                hi = mx if hi is None else max(hi, mx)
    span = (hi - lo) + 1_000_000
    id_span = 1
    for t, _, ids in EVENT_TABLES:
        if t in have and ids:
            id_span = max(id_span, con.execute(f"SELECT max(correlationId) FROM [{t}]").fetchone()[0] or 0)
    id_span += 1
    for t, tc, ids in EVENT_TABLES:
        if t in have:
            print(f"{t}: x{copies}", file=sys.stderr)
            replicate(con, t, tc, ids, copies, span, id_span)
            con.commit()
    if METRICS[0] in have:
        n_m = con.execute("SELECT count(*) FROM GPU_METRICS").fetchone()[0]
        m_copies = min(copies, math.ceil(a.metric_rows / max(n_m, 1)))
        print(f"GPU_METRICS: x{m_copies}", file=sys.stderr)
        replicate(con, METRICS[0], METRICS[1], (), m_copies, span, 0)
        # Fewer kernels than metric rows ask for (a short capture sampled fast): sample denser
        # instead, each extra copy shifted by a fraction of the sampling period.
        n_m = con.execute("SELECT count(*) FROM GPU_METRICS").fetchone()[0]
        if n_m and a.metric_rows > 1.05 * n_m:
            stamps = [r[0] for r in con.execute("SELECT DISTINCT timestamp FROM GPU_METRICS ORDER BY 1")]
            period = sorted(y - x for x, y in itertools.pairwise(stamps))[len(stamps) // 2]
            dense = math.ceil(a.metric_rows / n_m)
            print(f"GPU_METRICS: {dense} samples per period of {period} ns", file=sys.stderr)
            replicate(con, METRICS[0], METRICS[1], (), dense, int(period) // dense, 0)
    # The capture now lasts `copies` spans.
    if "ANALYSIS_DETAILS" in have:
        con.execute(
            f"UPDATE ANALYSIS_DETAILS SET duration = duration + {(copies - 1) * span}, "
            f"stopTime = stopTime + {(copies - 1) * span}"
        )
    con.commit()
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "GPU_METRICS"):
        if t in have:
            print(t, con.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0], file=sys.stderr)
    con.close()


if __name__ == "__main__":
    main()
