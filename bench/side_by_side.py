"""Benchmark: nsight-doctor against NVIDIA's own nsys stats + nsys analyze, side by side, in
alternating runs on the same SQLite exports (docs/performance.md, "Timeline model").

For each input, `--repeat` rounds of: nsight-doctor analyze FILE --format json --no-cache, then
nsys stats (kernel, CUDA API and GPU memory time and size summaries) and nsys analyze (all of
NVIDIA's rules), each nsys command on a fresh copy of the file (nsys may add tables to it).
Reports the median wall time and the largest peak resident memory of each side, the ratio of
nsight-doctor's time to nsys's, and the peak memory against the file's size.

    python bench/side_by_side.py --nsys $NSYS --repeat 2 --json out.json FILE [FILE...]
    python bench/side_by_side.py --make /tmp/bench --repeat 2   # makes the issue's three inputs

--make DIR writes into DIR the inputs of the issue that asked for this: the largest sample
(7.5 MB), a 204 MB export of about 60 k kernels and 6 M GPU-metric rows, and a 2 M-kernel export
(bench/make_large_profile.py, from the same sample's real rows), and benchmarks those.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples/decode_b1_gpumetrics/decode_b1_gpumetrics.sqlite"

# Wall time and the peak RSS of the largest process waited for (as /usr/bin/time -f "%e %M"),
# which the GPU host lacks.
TIME = """
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
with open(sys.argv[1], "w") as f:
    f.write(f"{time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {rc}")
"""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(seconds, peak MB) of one run of cmd; a failed run stops the benchmark."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        subprocess.run([sys.executable, "-c", TIME, tf.name, *cmd], check=True, env=env)
        seconds, kb, rc = tf.read().split()
    if rc not in ("0", "1"):
        raise SystemExit(f"{cmd[:3]} failed with exit code {rc}")
    return float(seconds), int(kb) / 1024


def nsys_env() -> dict[str, str]:
    """nsys runs with its own library path ($NSYS_LD_LIBRARY_PATH: the libdw it needs on the GPU
    host); nsight-doctor with the caller's."""
    env = dict(os.environ)
    if os.environ.get("NSYS_LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["NSYS_LD_LIBRARY_PATH"]
    return env


def nsys_reports(nsys: str) -> list[str]:
    out = subprocess.run([nsys, "stats", "--help-reports"], capture_output=True, text=True, env=nsys_env()).stdout
    if "cuda_gpu_kern_sum" in out:
        return ["cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum"]
    return ["gpukernsum", "cudaapisum", "gpumemtimesum", "gpumemsizesum"]


def bench(path: Path, nsys: str | None, repeat: int) -> dict:
    doctor = [sys.executable, "-m", "nsight_doctor", "analyze", str(path), "--format", "json", "-q", "--no-cache"]
    runs: dict[str, list[tuple[float, float]]] = {"doctor": [], "nsys": []}
    with tempfile.TemporaryDirectory(prefix="nd-side-") as tmp:
        for i in range(repeat):
            runs["doctor"].append(timed(doctor))
            if nsys:
                total, peak = 0.0, 0.0
                for cmd in (
                    ["stats", "-q", "-f", "csv", "-o", f"{tmp}/stats{i}", "-r", ",".join(nsys_reports(nsys))],
                    ["analyze", "-q", "-f", "csv", "-o", f"{tmp}/analyze{i}"],
                ):
                    copy = Path(tmp) / "copy.sqlite"
                    shutil.copyfile(path, copy)
                    s, mb = timed([nsys, *cmd, str(copy)], env=nsys_env())
                    total, peak = total + s, max(peak, mb)
                    copy.unlink()
                runs["nsys"].append((total, peak))
    size = path.stat().st_size / 2**20
    row = {"file": path.name, "size_mb": round(size, 1)}
    for side, rs in runs.items():
        if rs:
            row[side] = {"seconds": [s for s, _ in rs], "median_s": statistics.median(s for s, _ in rs)}
            row[side]["peak_mb"] = max(mb for _, mb in rs)
    row["memory_x_file"] = row["doctor"]["peak_mb"] / size
    if runs["nsys"]:
        row["time_x_nsys"] = row["doctor"]["median_s"] / row["nsys"]["median_s"]
    return row


def make_inputs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name, kernels, metrics in (("metrics_204mb.sqlite", 55000, 5.8e6), ("kernels_2m.sqlite", 2e6, 5.8e6)):
        out = folder / name
        if not out.exists():
            make = [sys.executable, str(REPO / "bench/make_large_profile.py"), str(SAMPLE), str(out)]
            subprocess.run([*make, "--kernels", str(kernels), "--metric-rows", str(metrics)], check=True)
        made.append(out)
    return [SAMPLE, *made]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path)
    p.add_argument("--make", type=Path, help="make the three inputs of the timeline benchmark here and use them")
    p.add_argument("--nsys", default=shutil.which("nsys"))
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    files = list(a.files) + (make_inputs(a.make) if a.make else [])
    version = None
    if a.nsys:
        version = subprocess.run([a.nsys, "--version"], capture_output=True, text=True, env=nsys_env()).stdout.strip()
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "nsys": version,
        "threads": os.environ.get("NSIGHT_DOCTOR_THREADS"),
        "runs": [],
    }
    for f in files:
        t0 = time.perf_counter()
        result["runs"].append(bench(f, a.nsys, a.repeat))
        print(f"{f.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        if a.json:
            a.json.write_text(json.dumps(result, indent=2))
    print(f"{result['machine']['cpus']} CPUs, Python {result['machine']['python']}, {version or 'no nsys'}\n")
    print("| input | nsight-doctor | peak RSS (x file) | nsys stats + analyze | peak RSS | ratio |")
    print("|---|---|---|---|---|---|")
    for r in result["runs"]:
        d, n = r["doctor"], r.get("nsys")
        runs = " / ".join(f"{s:.2f}" for s in d["seconds"])
        nsys_text = f"{' / '.join(f'{s:.2f}' for s in n['seconds'])} s | {n['peak_mb']:.0f} MB" if n else "- | -"
        ratio = f"{r['time_x_nsys']:.2f}x" if n else "-"
        print(
            f"| {r['file']} ({r['size_mb']:.0f} MB) | {runs} s | {d['peak_mb']:.0f} MB ({r['memory_x_file']:.2f}x) "
            f"| {nsys_text} | {ratio} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
