"""Peak memory and wall time of `analyze` on one profile under several DuckDB settings, each in a
fresh process: the measurements behind the defaults of store.store_config (docs/performance.md).

    python bench/memory_probe.py PROFILE.sqlite [--threads 16] [--multiples 0.5,1.5] [--json out.json]

Each configuration sets DuckDB's memory limit as a multiple of the input's size (None: the
tool's default, with its retry) or keeps the order of inserted rows (preserve_insertion_order,
which the tool turns off), runs the whole analysis (no cache), and reports the child's peak
resident memory (ru_maxrss) against the input's size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(profile: str, extra: dict) -> None:
    """Runs one analysis with `extra` DuckDB settings added to the tool's own."""
    sys.path.insert(0, str(REPO / "src"))
    from nsight_doctor.runtime import configure_allocator, configure_polars

    configure_allocator()  # as the command does, before DuckDB and Polars load
    configure_polars()
    import nsight_doctor.store as store
    from nsight_doctor.engine import AnalyzeOptions, analyze

    base = store.store_config

    def patched(paths, spill_dir, memory_limit=None):
        config = base(paths, spill_dir, memory_limit)
        config.update(extra.get("duckdb", {}))
        return config

    store.store_config = patched
    d = analyze([profile], AnalyzeOptions(memory_limit=extra.get("memory_limit")))
    retried = any("was not enough" in n for n in d.notes)
    top = d.findings[0].rule_id if d.findings else None
    print(json.dumps({"findings": len(d.findings), "top": top, "retried": retried}))


def run(profile: str, threads: int, extra: dict) -> dict:
    """One analysis in a child process: its wall time and its own peak memory (wait4)."""
    threads = extra.get("threads", threads)
    env = dict(os.environ, NSIGHT_DOCTOR_THREADS=str(threads), NSIGHT_DOCTOR_NO_CACHE="1")
    cmd = [sys.executable, __file__, "--child", profile, json.dumps(extra)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        result, error = out.read().strip(), err.read().strip()
    return {
        **extra,
        "threads": threads,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "rc": p.returncode,
        "result": result[-200:],
        "error": error.splitlines()[-1][:300] if p.returncode and error else "",
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], json.loads(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--multiples", help="only these limits: multiples of the input's size or 'default', comma-separated"
    )
    ap.add_argument("--json")
    a = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from nsight_doctor.store import input_bytes

    size_mb = input_bytes([a.profile]) / (1 << 20)  # a Parquet folder: its files together
    if a.multiples:
        configs = [
            {"memory_limit": None if x == "default" else f"{int(float(x) * size_mb)}MB"} for x in a.multiples.split(",")
        ]
    else:
        configs = [{"memory_limit": None}]
        configs += [{"memory_limit": f"{int(x * size_mb)}MB"} for x in (1.0, 1.5, 2.0, 3.0, 4.0)]
        configs += [{"memory_limit": f"{int(1.5 * size_mb)}MB", "duckdb": {"preserve_insertion_order": True}}]
    rows = []
    for extra in configs:
        row = run(a.profile, a.threads, extra)
        row["file_mb"] = round(size_mb)
        row["rss_per_file"] = round(row["peak_rss_mb"] / size_mb, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
