"""Benchmark: nsight-doctor analyze against NVIDIA's own nsys stats + nsys analyze, side by side.

For each profile it runs, in the same process environment and on the same SQLite file:
  - nsight-doctor analyze FILE --format json (ingest, views, summary, every rule);
  - nsys stats (kernel, CUDA API and GPU memory summaries) and nsys analyze (all of NVIDIA's
    expert rules), each on its own copy of the file, because nsys may add tables to it.
It records wall time and peak resident memory (of the largest process in the tree, as
/usr/bin/time reports it) and prints a Markdown table for docs/performance.md; --json writes
the raw numbers.

    python bench/run_bench.py                         # the largest sample + a 2 M-kernel profile
    python bench/run_bench.py --large /tmp/large.sqlite --keep
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LARGEST_SAMPLE = REPO / "samples/decode_b1_gpumetrics/decode_b1_gpumetrics.sqlite"


# Runs a command and prints its wall seconds and the peak resident memory of its process tree
# (the largest of the processes waited for), like /usr/bin/time -f "%e %M", which GPU hosts lack.
TIME = """
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(f"{time.perf_counter() - t:.2f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
sys.exit(rc)
"""


def timed(cmd: list[str], cwd: Path | None = None) -> dict:
    """Runs cmd; returns wall seconds and peak RSS in MB."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        run = subprocess.run([sys.executable, "-c", TIME, tf.name, *cmd], capture_output=True, text=True, cwd=cwd)
        wall, rss_kb = tf.read().split()[-2:]
    if run.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({run.returncode}): {run.stderr[-2000:]}")
    return {"seconds": float(wall), "peak_mb": int(rss_kb) / 1024, "stdout": run.stdout}


def nsys_reports(nsys: str) -> list[str]:
    out = subprocess.run([nsys, "stats", "--help-reports"], capture_output=True, text=True).stdout
    if "cuda_gpu_kern_sum" in out:
        return ["cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum"]
    return ["gpukernsum", "cudaapisum", "gpumemtimesum", "gpumemsizesum"]


def bench_file(path: Path, nsys: str | None, doctor: list[str]) -> dict:
    size_mb = path.stat().st_size / 2**20
    row: dict = {"file": str(path), "size_mb": size_mb}
    with tempfile.TemporaryDirectory(prefix="nd-bench-") as tmp:
        out = timed([*doctor, "analyze", str(path), "--format", "json", "-q"], cwd=Path(tmp))
        report = json.loads(out["stdout"])
        row["doctor"] = {
            "seconds": out["seconds"],
            "peak_mb": out["peak_mb"],
            "kernels": report["summary"]["kernel_count"],
            "findings": [f["rule_id"] for f in report["findings"]],
        }
        if nsys:
            copy = Path(tmp) / "stats.sqlite"
            shutil.copy(path, copy)
            stats = timed(
                [
                    nsys,
                    "stats",
                    "-q",
                    "-f",
                    "csv",
                    "-o",
                    str(Path(tmp) / "stats"),
                    "-r",
                    ",".join(nsys_reports(nsys)),
                    str(copy),
                ]
            )
            copy.unlink()
            shutil.copy(path, copy)
            analyze = timed([nsys, "analyze", "-q", "-f", "csv", "-o", str(Path(tmp) / "analyze"), str(copy)])
            row["nsys_stats"] = {k: stats[k] for k in ("seconds", "peak_mb")}
            row["nsys_analyze"] = {k: analyze[k] for k in ("seconds", "peak_mb")}
            both = stats["seconds"] + analyze["seconds"]
            row["nsys_total_seconds"] = both
            row["speed_ratio"] = both / row["doctor"]["seconds"]
    row["memory_ratio"] = row["doctor"]["peak_mb"] / size_mb
    return row


def bench_forms(sqlite: Path, parquet: Path, doctor: list[str]) -> dict:
    """The same profile read from its SQLite export and from its Parquet export."""
    return {
        form: timed([*doctor, "analyze", str(p), "--format", "json", "-q"])["seconds"]
        for form, p in (("sqlite", sqlite), ("parquet", parquet))
    }


def bench_ncu(doctor: list[str], work: Path) -> dict:
    """Ingest and analysis of a 71 MB --set detailed report of 30 kernels."""
    import lzma

    report = work / "ncu_decode_b1_detailed30.ncu-rep"
    report.write_bytes(lzma.decompress((REPO / "bench/data/ncu_decode_b1_detailed30.ncu-rep.xz").read_bytes()))
    out = timed([*doctor, "analyze", str(report), "--format", "json", "-q"])
    return {
        "size_mb": report.stat().st_size / 2**20,
        "seconds": out["seconds"],
        "peak_mb": out["peak_mb"],
        "kernels": json.loads(out["stdout"])["summary"]["ncu"]["kernels_profiled"],
    }


def bench_startup(doctor: list[str], runs: int = 5) -> dict:
    """Median wall time of `--help`, `rules list` and a cached re-analysis of the largest sample
    (its diagnosis kept in a private cache by a first run), the issue's start-up targets."""
    cache = Path(tempfile.mkdtemp(prefix="nd-bench-cache-"))
    env = {k: v for k, v in os.environ.items() if k != "NSIGHT_DOCTOR_NO_CACHE"}
    env["NSIGHT_DOCTOR_CACHE"] = str(cache)

    def median(args: list[str]) -> float:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([*doctor, *args], env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
        return round(sorted(times)[runs // 2], 3)

    cached = ["analyze", str(LARGEST_SAMPLE), "-q", "--format", "json"]
    subprocess.run([*doctor, *cached], env=env, capture_output=True, check=True)  # fills the cache
    out = {"help_s": median(["--help"]), "rules_list_s": median(["rules", "list"]), "cached_analyze_s": median(cached)}
    shutil.rmtree(cache, ignore_errors=True)
    return out


def parquet_copy(sqlite: Path, dest: Path) -> Path:
    """Writes every table of an export as Parquet (the layout of nsys export --type parquetdir)."""
    import duckdb

    from nsight_doctor.ingest.nsys_export import load_sqlite_extension

    dest.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    load_sqlite_extension(con)
    con.execute(f"ATTACH '{sqlite}' AS s (TYPE sqlite, READ_ONLY)")
    for (t,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_catalog = 's'").fetchall():
        con.execute(f"COPY (SELECT * FROM s.\"{t}\") TO '{dest / (t + '.parquet')}' (FORMAT parquet)")
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--large", type=Path, help="a scaled profile; made with make_large_profile.py if absent")
    p.add_argument("--kernels", type=float, default=2e6)
    p.add_argument("--metric-rows", type=float, default=5e6)
    p.add_argument("--nsys", default=shutil.which("nsys"))
    p.add_argument("--json", type=Path, help="write the raw numbers here")
    p.add_argument("--keep", action="store_true", help="keep the generated large profile")
    a = p.parse_args(argv)
    # Every run analyses its input afresh: the cached diagnosis of a file seen before is not reused.
    os.environ["NSIGHT_DOCTOR_NO_CACHE"] = "1"

    doctor = [sys.executable, "-m", "nsight_doctor"]
    work = Path(tempfile.mkdtemp(prefix="nd-bench-data-"))
    large = a.large or work / "large.sqlite"
    if not large.exists():
        subprocess.run(
            [
                sys.executable,
                str(REPO / "bench/make_large_profile.py"),
                str(LARGEST_SAMPLE),
                str(large),
                "--kernels",
                str(a.kernels),
                "--metric-rows",
                str(a.metric_rows),
            ],
            check=True,
        )
    nsys_version = None
    if a.nsys:
        nsys_version = subprocess.run([a.nsys, "--version"], capture_output=True, text=True).stdout.strip()
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "nsys": nsys_version,
        "runs": [bench_file(f, a.nsys, doctor) for f in (LARGEST_SAMPLE, large)],
        "forms_decode_b1": bench_forms(
            REPO / "samples/decode_b1/decode_b1.sqlite", REPO / "samples/decode_b1/decode_b1_pqtdir", doctor
        ),
        "forms_large": bench_forms(large, parquet_copy(large, work / "large_pqtdir"), doctor),
        "startup": bench_startup(doctor),
    }
    try:
        results["ncu"] = bench_ncu(doctor, work)
    except SystemExit as e:  # e.g. an ncu_report older than the one nsight-doctor needs
        results["ncu"] = {"error": str(e).strip().splitlines()[-1]}
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    print(f"nsys: {nsys_version}; {results['machine']['cpus']} CPUs; Python {results['machine']['python']}\n")
    print(
        "| Profile | SQLite size | Kernels | nsight-doctor | peak memory (x size) | nsys stats | nsys analyze "
        "| nsys total | speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results["runs"]:
        d = r["doctor"]
        ns = r.get("nsys_stats", {})
        na = r.get("nsys_analyze", {})
        print(
            f"| {Path(r['file']).name} | {r['size_mb']:.0f} MB | {d['kernels']:,} | {d['seconds']:.1f} s | "
            f"{d['peak_mb']:.0f} MB ({r['memory_ratio']:.2f}x) | "
            f"{ns.get('seconds', float('nan')):.1f} s, {ns.get('peak_mb', 0):.0f} MB | "
            f"{na.get('seconds', float('nan')):.1f} s, {na.get('peak_mb', 0):.0f} MB | "
            f"{r.get('nsys_total_seconds', float('nan')):.1f} s | "
            f"{r.get('speed_ratio', float('nan')):.2f}x |"
        )
    for key in ("forms_decode_b1", "forms_large"):
        f = results[key]
        print(f"\n{key}: SQLite {f['sqlite']:.2f} s, Parquet {f['parquet']:.2f} s")
    n = results["ncu"]
    if "error" in n:
        print(f"\nncu report: not measured ({n['error']})")
    else:
        print(
            f"\nncu report {n['size_mb']:.0f} MB, {n['kernels']} kernels: {n['seconds']:.1f} s, "
            f"peak {n['peak_mb']:.0f} MB "
            "(the reader runs in a child process; the larger of the two is reported)"
        )
    st = results["startup"]
    print(
        f"\nstart-up (median of 5): --help {st['help_s']:.2f} s, rules list {st['rules_list_s']:.2f} s, "
        f"cached re-analysis of {LARGEST_SAMPLE.name} {st['cached_analyze_s']:.2f} s"
    )
    if not a.keep and not a.large:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
