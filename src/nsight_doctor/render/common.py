"""What the text and Markdown renderers show of a summary, as (label, value) rows."""

from __future__ import annotations

from typing import Any

from nsight_doctor.model import Diagnosis, clip, fmt_bytes, fmt_ns
from nsight_doctor.sections import Summary


def pct(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def count(v: Any) -> str:
    return "n/a" if v is None else f"{round(v):,}"


def input_line(inp: dict[str, Any]) -> str:
    bits = [inp["kind"]]
    if inp.get("producer_version"):
        bits.append(f"{inp['producer']} {inp['producer_version']}")
    if inp.get("export_schema_version"):
        bits.append(f"export schema {inp['export_schema_version']}")
    return f"{inp['path']} ({', '.join(bits)})"


Rows = list[tuple[str, str]]


def summary_rows(d: Diagnosis) -> Rows:
    """Label/value pairs, one group per section; values hold kernel names and NVTX text as
    they are (unescaped)."""
    s = d.summary
    rows: Rows = []
    for section in (
        capture_rows(s),
        gpu_rows(s),
        kernel_rows(s),
        memcpy_rows(s),
        memset_rows(s),
        blocking_rows(s),
        launch_rows(s),
        idle_rows(s),
        nvtx_rows(s),
        metric_rows(s),
        overhead_rows(s),
        communication_rows(s),
        ncu_rows(s),
    ):
        rows.extend(section)
    return rows


def labelled(label: str, values: list[str]) -> Rows:
    """The label on the first row only."""
    return [(label if i == 0 else "", v) for i, v in enumerate(values)]


def capture_rows(s: Summary) -> Rows:
    c = s.capture
    rows = [("Capture", fmt_ns(c.capture_ns) if c.capture_ns is not None else "n/a")]
    if c.gpu_window_ns:
        rows.append(
            (
                "GPU activity window",
                f"{fmt_ns(c.gpu_window_ns)} ({fmt_ns(c.gpu_start_ns or 0)} to {fmt_ns(c.gpu_end_ns or 0)})",
            )
        )
    return rows


def gpu_rows(s: Summary) -> Rows:
    rows = []
    for g in s.gpus:
        if not g.busy_ns and not g.name:
            continue
        parts = [f"busy {pct(g.busy_pct)}"]
        for ns, label in (
            (g.kernel_ns, "kernels"),
            (g.graph_ns, "CUDA graphs"),
            (g.memcpy_ns, "memcpy"),
            (g.memset_ns, "memset"),
        ):
            if ns:
                parts.append(f"{label} {fmt_ns(ns)}")
        rows.append((clip(f"GPU {g.device_id} {g.name or ''}".strip()), ", ".join(parts)))
    return rows


def kernel_rows(s: Summary) -> Rows:
    k = s.kernels
    rows = []
    if k.kernel_count:
        rows.append(
            (
                "Kernels",
                (
                    f"{count(k.kernel_count)} ({count(k.launch_rate_per_s)}/s, "
                    f"median {fmt_ns(k.kernel_median_ns or 0)}, {pct(k.tiny_kernel_pct)} under "
                    f"{fmt_ns(k.tiny_kernel_threshold_ns)}); {count(k.kernels_in_graphs)} inside CUDA graphs"
                ),
            )
        )
    if k.graph_launch_count:
        rows.append(("CUDA graph launches", f"{count(k.graph_launch_count)}, {fmt_ns(k.graph_ns)}"))
    rows += labelled(
        "Top kernels",
        [
            f"{pct(t.share_pct)}  {clip(t.name or '?')}  ({count(t.count)}x, mean {fmt_ns(t.mean_ns)})"
            for t in s.top_kernels[:5]
        ],
    )
    return rows


def memcpy_rows(s: Summary) -> Rows:
    m = s.memcpy
    if not m.count:
        return []
    dirs = "; ".join(
        f"{r.direction} {r.host_kind} {count(r.count)}x {fmt_bytes(r.bytes)} {fmt_ns(r.total_ns)}"
        for r in m.by_direction[:4]
    )
    return [("Memcpy", f"{count(m.count)} copies, {fmt_bytes(m.bytes)}, {fmt_ns(m.total_ns)}: {dirs}")]


def memset_rows(s: Summary) -> Rows:
    m = s.memset
    return [("Memset", f"{count(m.count)}, {fmt_bytes(m.bytes)}, {fmt_ns(m.total_ns)}")] if m.count else []


def blocking_rows(s: Summary) -> Rows:
    sy = s.sync
    if not (sy.count or sy.by_api):
        return []
    apis = ", ".join(f"{clip(r.name)} {count(r.count)}x" for r in sy.by_api[:3])
    return [
        (
            "Blocking calls",
            f"{count(sy.count)} synchronize calls, {fmt_ns(sy.total_ns)}" + (f" ({apis})" if apis else ""),
        )
    ]


def launch_rows(s: Summary) -> Rows:
    la = s.launch
    if not la.api_count:
        return []
    lat = ""
    if la.latency_median_ns is not None:
        lat = f"; launch to start median {fmt_ns(la.latency_median_ns)}, p90 {fmt_ns(la.latency_p90_ns or 0)}"
    return [("Launch calls", f"{count(la.api_count)}, {fmt_ns(la.api_ns)} (mean {fmt_ns(la.api_mean_ns or 0)}){lat}")]


def idle_rows(s: Summary) -> Rows:
    idle = s.idle
    if not idle.gap_count:
        return []
    causes = ", ".join(f"{r.cause} {pct(100 * r.total_ns / idle.idle_ns)}" for r in idle.by_cause if idle.idle_ns)
    hist = ", ".join(f"{h.bucket} {count(h.count)}" for h in idle.histogram if h.count)
    rows = [("Idle gaps", f"{count(idle.gap_count)}, {fmt_ns(idle.idle_ns)} ({causes})"), ("", f"by length: {hist}")]
    gaps = []
    for g in idle.largest:  # as many as --gaps asked for
        calls = ", ".join(clip(c.name or "?") for c in g.api_calls[:3]) or "no CUDA call"
        gaps.append(
            f"{fmt_ns(g.duration)} on GPU {g.device_id} at {fmt_ns(g.start)} ({g.cause}; "
            f"CPU in: {calls}; then {clip(g.next_op or '?')})"
        )
    return rows + labelled("Largest gaps", gaps)


def nvtx_rows(s: Summary) -> Rows:
    return labelled(
        "NVTX ranges",
        [
            f"{clip(n.text or '(unnamed)')} x{count(n.count)}: CPU {fmt_ns(n.cpu_ns or 0)}, "
            f"GPU {fmt_ns(n.gpu_ns or 0)} in {count(n.gpu_ops)} ops"
            for n in s.nvtx[:5]
        ],
    )


def metric_rows(s: Summary) -> Rows:
    return [
        (
            f"GPU {dev} metrics while busy",
            ", ".join(f"{key.replace('_', ' ')} {pct(m.avg_busy)}" for key, m in metrics.items()),
        )
        for dev, metrics in (s.gpu_metrics or {}).items()
    ]


def overhead_rows(s: Summary) -> Rows:
    ns = s.capture.profiler_overhead_ns
    return [("Profiler overhead", fmt_ns(ns))] if ns else []


def communication_rows(s: Summary) -> Rows:
    return labelled(
        "Communication",
        [
            f"GPU {c.device_id}: {count(c.collectives)} collectives on {count(c.ranks)} GPUs, "
            f"{fmt_ns(c.comm_ns)} ({pct(c.comm_pct)} of its window): transfer {fmt_ns(c.transfer_ns)}, "
            f"waiting {fmt_ns(c.wait_ns)}, exposed {fmt_ns(c.exposed_ns)}; arrived last {count(c.last_arrivals)}x"
            for c in s.communication or []
        ],
    )


def ncu_rows(s: Summary) -> Rows:
    n = s.ncu
    if not n:
        return []
    versions = ", ".join(sorted({r.ncu_version or "?" for r in n.reports}))
    cov = f", covering {pct(n.coverage_pct)} of the timeline's kernel time" if n.coverage_pct is not None else ""
    rows = [
        (
            "Nsight Compute",
            (
                f"{count(n.kernels_profiled)} kernels profiled (ncu {versions}) in {count(n.launch_configs)} "
                f"launch configurations{cov}: {count(n.memory_bound)} memory-bound, "
                f"{count(n.compute_bound)} compute-bound, {count(n.latency_bound)} latency-bound"
            ),
        )
    ]
    missing = [
        label
        for have, label in (
            (n.with_stall_reasons, "stall reasons"),
            (n.with_cache_metrics, "cache hit rates"),
            (n.with_roofline_metrics, "roofline counters"),
        )
        if not have
    ]
    if missing:
        rows.append(("", f"not in the report: {', '.join(missing)} (capture with --set full)"))
    return rows + labelled(
        "Profiled kernels",
        [
            f"{pct(g.share_pct)} {clip(g.launch)}: {g.bottleneck or '?'}; SM {pct(g.sm_pct)}, "
            f"memory {pct(g.mem_pct)}, DRAM {pct(g.dram_pct)}, occupancy {pct(g.achieved_occupancy_pct)}"
            + (f", top stall {clip(g.top_stall)}" if g.top_stall else "")
            for g in n.groups[:6]
        ],
    )


def impact_text(impact_ns: int, window_ns: int | None) -> str:
    if not impact_ns:
        return "no recoverable time (profile note)"
    share = f", {pct(100 * impact_ns / window_ns)} of the GPU window" if window_ns else ""
    return f"recovers up to {fmt_ns(impact_ns)}{share}"
