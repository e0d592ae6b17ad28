"""What the text and Markdown renderers show of a summary, as (label, value) rows."""

from __future__ import annotations

from typing import Any

from nsight_doctor.model import Diagnosis, fmt_bytes, fmt_ns


def pct(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def count(v: Any) -> str:
    return "n/a" if v is None else f"{int(round(v)):,}"


def input_line(inp: dict[str, Any]) -> str:
    bits = [inp["kind"]]
    if inp.get("producer_version"):
        bits.append(f"{inp['producer']} {inp['producer_version']}")
    if inp.get("export_schema_version"):
        bits.append(f"export schema {inp['export_schema_version']}")
    return f"{inp['path']} ({', '.join(bits)})"


def summary_rows(d: Diagnosis) -> list[tuple[str, str]]:
    """Label/value pairs; values hold kernel names and NVTX text as they are (unescaped)."""
    s = d.summary
    rows: list[tuple[str, str]] = []
    cap = s.get("capture_ns")
    win = s.get("gpu_window_ns")
    rows.append(("Capture", fmt_ns(cap) if cap is not None else "n/a"))
    if win:
        rows.append(("GPU activity window",
                     f"{fmt_ns(win)} ({fmt_ns(s['gpu_start_ns'])} to {fmt_ns(s['gpu_end_ns'])})"))
    for g in s.get("gpus", []):
        if not g.get("busy_ns") and not g.get("name"):
            continue
        parts = [f"busy {pct(g.get('busy_pct'))}"]
        for key, label in (("kernel_ns", "kernels"), ("graph_ns", "CUDA graphs"),
                           ("memcpy_ns", "memcpy"), ("memset_ns", "memset")):
            if g.get(key):
                parts.append(f"{label} {fmt_ns(g[key])}")
        rows.append((f"GPU {g['device_id']} {g.get('name') or ''}".strip(), ", ".join(parts)))
    if s.get("kernel_count"):
        rows.append(("Kernels", (
            f"{count(s['kernel_count'])} ({count(s.get('launch_rate_per_s'))}/s, "
            f"median {fmt_ns(s['kernel_median_ns'])}, {pct(s.get('tiny_kernel_pct'))} under "
            f"{fmt_ns(s['tiny_kernel_threshold_ns'])}); {count(s.get('kernels_in_graphs'))} inside CUDA graphs")))
    if s.get("graph_launch_count"):
        rows.append(("CUDA graph launches", f"{count(s['graph_launch_count'])}, {fmt_ns(s['graph_ns'])}"))
    for i, k in enumerate(s.get("top_kernels", [])[:5]):
        rows.append(("Top kernels" if i == 0 else "", (
            f"{pct(k['share_pct'])}  {k['name']}  ({count(k['count'])}x, mean {fmt_ns(k['mean_ns'])})")))
    m = s.get("memcpy") or {}
    if m.get("count"):
        dirs = "; ".join(f"{r['direction']} {r['host_kind']} {count(r['count'])}x {fmt_bytes(r['bytes'])} "
                         f"{fmt_ns(r['total_ns'])}" for r in m.get("by_direction", [])[:4])
        rows.append(("Memcpy", f"{count(m['count'])} copies, {fmt_bytes(m['bytes'])}, {fmt_ns(m['total_ns'])}: {dirs}"))
    ms = s.get("memset") or {}
    if ms.get("count"):
        rows.append(("Memset", f"{count(ms['count'])}, {fmt_bytes(ms['bytes'])}, {fmt_ns(ms['total_ns'])}"))
    sy = s.get("sync") or {}
    if sy.get("count") or sy.get("by_api"):
        apis = ", ".join(f"{r['name']} {count(r['count'])}x" for r in sy.get("by_api", [])[:3])
        rows.append(("Blocking calls", f"{count(sy.get('count'))} synchronize calls, {fmt_ns(sy.get('total_ns') or 0)}"
                     + (f" ({apis})" if apis else "")))
    la = s.get("launch") or {}
    if la.get("api_count"):
        lat = ""
        if la.get("latency_median_ns") is not None:
            lat = (f"; launch to start median {fmt_ns(la['latency_median_ns'])}, "
                   f"p90 {fmt_ns(la['latency_p90_ns'])}")
        rows.append(("Launch calls", f"{count(la['api_count'])}, {fmt_ns(la['api_ns'])} "
                     f"(mean {fmt_ns(la['api_mean_ns'])}){lat}"))
    idle = s.get("idle") or {}
    if idle.get("gap_count"):
        causes = ", ".join(f"{r['cause']} {pct(100 * r['total_ns'] / idle['idle_ns'])}"
                           for r in idle.get("by_cause", []) if idle["idle_ns"])
        rows.append(("Idle gaps", f"{count(idle['gap_count'])}, {fmt_ns(idle['idle_ns'])} ({causes})"))
        hist = ", ".join(f"{h['bucket']} {count(h['count'])}" for h in idle.get("histogram", []) if h["count"])
        rows.append(("", f"by length: {hist}"))
        for i, g in enumerate(idle.get("largest", [])[:3]):
            calls = ", ".join(c["name"] for c in g.get("api_calls", [])[:3]) or "no CUDA call"
            rows.append(("Largest gaps" if i == 0 else "", (
                f"{fmt_ns(g['duration'])} on GPU {g['device_id']} at {fmt_ns(g['start'])} ({g['cause']}; "
                f"CPU in: {calls}; then {g.get('next_op') or '?'})")))
    for i, n in enumerate(s.get("nvtx", [])[:5]):
        rows.append(("NVTX ranges" if i == 0 else "", (
            f"{n['text'] or '(unnamed)'} x{count(n['count'])}: CPU {fmt_ns(n['cpu_ns'] or 0)}, "
            f"GPU {fmt_ns(n['gpu_ns'] or 0)} in {count(n['gpu_ops'])} ops")))
    for dev, metrics in (s.get("gpu_metrics") or {}).items():
        parts = [f"{k.replace('_', ' ')} {pct(v['avg_busy'])}" for k, v in metrics.items()]
        rows.append((f"GPU {dev} metrics while busy", ", ".join(parts)))
    if s.get("profiler_overhead_ns"):
        rows.append(("Profiler overhead", fmt_ns(s["profiler_overhead_ns"])))
    for i, c in enumerate(s.get("communication") or []):
        rows.append(("Communication" if i == 0 else "", (
            f"GPU {c['device_id']}: {count(c['collectives'])} collectives on {count(c['ranks'])} GPUs, "
            f"{fmt_ns(c['comm_ns'])} ({pct(c['comm_pct'])} of its window): transfer {fmt_ns(c['transfer_ns'])}, "
            f"waiting {fmt_ns(c['wait_ns'])}, exposed {fmt_ns(c['exposed_ns'])}; arrived last {count(c['last_arrivals'])}x")))
    n = s.get("ncu")
    if n:
        versions = ", ".join(sorted({r["ncu_version"] or "?" for r in n["reports"]}))
        cov = f", covering {pct(n['coverage_pct'])} of the timeline's kernel time" if n.get("coverage_pct") is not None else ""
        rows.append(("Nsight Compute", (
            f"{count(n['kernels_profiled'])} kernels profiled (ncu {versions}) in {count(n['launch_configs'])} "
            f"launch configurations{cov}: {count(n['memory_bound'])} memory-bound, "
            f"{count(n['compute_bound'])} compute-bound, {count(n['latency_bound'])} latency-bound")))
        missing = [label for key, label in (("with_stall_reasons", "stall reasons"),
                                            ("with_cache_metrics", "cache hit rates"),
                                            ("with_roofline_metrics", "roofline counters"))
                   if not n.get(key)]
        if missing:
            rows.append(("", f"not in the report: {', '.join(missing)} (capture with --set full)"))
        for i, g in enumerate(n["groups"][:6]):
            rows.append(("Profiled kernels" if i == 0 else "", (
                f"{pct(g['share_pct'])} {g['launch']}: {g['bottleneck'] or '?'}; SM {pct(g['sm_pct'])}, "
                f"memory {pct(g['mem_pct'])}, DRAM {pct(g['dram_pct'])}, occupancy {pct(g['achieved_occupancy_pct'])}"
                + (f", top stall {g['top_stall']}" if g.get("top_stall") else ""))))
    return rows


def impact_text(impact_ns: int, window_ns: int | None) -> str:
    if not impact_ns:
        return "no recoverable time (profile note)"
    share = f", {pct(100 * impact_ns / window_ns)} of the GPU window" if window_ns else ""
    return f"recovers up to {fmt_ns(impact_ns)}{share}"
