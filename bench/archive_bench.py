"""Ingest throughput: `nsight-doctor ingest` of the same files with 1 and 2 (or more) worker
processes, each into a new database with an empty cache folder, so that every run does the
same work (hashing, nsys exports that fail, analyses, parts, merges).

    .venv/bin/python bench/archive_bench.py                    # ../shared/corpus, else samples/
    .venv/bin/python bench/archive_bench.py --jobs 1 2 4 --repeat 2 --json results.json

Prints one Markdown row per run: wall time, CPU time of the ingest and its workers, profiles
analysed and failed, profiles per second, the database's size, and the speed-up over the first
--jobs value. The machine's load average is printed too: other work on the cores slows the
runs unevenly, so compare runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("NSIGHT_DOCTOR_CORPUS", REPO.parent / "shared" / "corpus"))


def run(inputs: list[str], jobs: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="nsight-doctor-bench-"))
    try:
        db = work / "fleet.duckdb"
        env = {**os.environ, "NSIGHT_DOCTOR_CACHE": str(work / "cache")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        # The command line, run by a wrapper that also reports the CPU time of the ingest process
        # itself (discovery, hashing, merging: the serial part) apart from its workers'.
        wrapper = (
            "import resource, sys, json\n"
            "from nsight_doctor.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print(json.dumps({'parent_cpu_s': u.ru_utime + u.ru_stime}), file=sys.stderr)\n"
            "sys.exit(code)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", wrapper, "ingest", *inputs, "--db", str(db), "-j", str(jobs), "-q"],
            capture_output=True,
            text=True,
            env=env,
        )
        parent = json.loads(r.stderr.strip().splitlines()[-1])["parent_cpu_s"]
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        m = re.search(r"(\d+) profiles, (\d+) analysed.*?; (\d+) failed", r.stdout)
        if r.returncode not in (0, 1) or not m:
            raise SystemExit(f"ingest failed ({r.returncode}): {r.stdout} {r.stderr}")
        return {
            "jobs": jobs,
            "wall_s": round(wall, 2),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "parent_cpu_s": round(parent, 2),
            "profiles": int(m.group(1)),
            "analysed": int(m.group(2)),
            "failed": int(m.group(3)),
            "db_bytes": db.stat().st_size,
            "load_before": round(load, 2),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", help="folders or files (default: the corpus, else samples/)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each --jobs value, interleaved")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    inputs = args.inputs or [str(CORPUS if CORPUS.is_dir() else REPO / "samples")]
    results = []
    print(f"inputs: {', '.join(inputs)}; {os.cpu_count()} CPU cores")
    print("| jobs | wall | CPU (of it, the writer's) | analysed | failed | profiles/s | DB size | load | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for _ in range(args.repeat):
        for jobs in args.jobs:
            res = run(inputs, jobs)
            results.append(res)
            base = [r["wall_s"] for r in results if r["jobs"] == args.jobs[0]]
            speedup = (sum(base) / len(base)) / res["wall_s"]
            print(
                f"| {jobs} | {res['wall_s']:.1f} s | {res['cpu_s']:.1f} s ({res['parent_cpu_s']:.1f} s) "
                f"| {res['analysed']} | {res['failed']} "
                f"| {res['analysed'] / res['wall_s']:.2f} | {res['db_bytes'] / 1e6:.1f} MB | {res['load_before']} "
                f"| {speedup:.2f}x |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
