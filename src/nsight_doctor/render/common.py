"""What the text and Markdown renderers show of a summary, as (label, value) rows."""

from __future__ import annotations

import re
from typing import Any

from nsight_doctor.model import Diagnosis, Finding, fmt_bytes, fmt_ns
from nsight_doctor.sections import Idle, IdleCode, Nvtx, Summary


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
        recorded_rows(s),
        steady_rows(s),
        step_rows(s),
        phase_rows(s),
        gpu_rows(s),
        kernel_rows(s),
        category_rows(s),
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


COMMAND_SHOWN = 600  # characters of a recorded command line (the JSON keeps it whole)


def recorded_rows(s: Summary) -> Rows:
    """What was run, as the capture recorded it (secrets hidden at ingest): each launched
    process's command line, and the environment variables that distort the capture or set a
    knob of the run."""
    rows: Rows = []
    for p in s.recorded:
        label = "Command (recorded)" if len(s.recorded) == 1 else f"Command {p.process} (recorded)"
        where = f" (in {p.working_dir})" if p.working_dir else ""
        rows.append((label, clip(p.command or "", COMMAND_SHOWN) + where))
    seen = dict.fromkeys((x.name, x.value, x.kind) for x in s.settings)
    shown = [f"{n}={v}" + (" (distorts the capture)" if k.startswith("distorts") else "") for n, v, k in seen]
    if shown:
        rows.append(("Environment (recorded)", ", ".join(shown)))
    return rows


def steady_rows(s: Summary) -> Rows:
    rows = []
    if s.framework.name != "unknown":
        rows.append(("Framework", f"{s.framework.name} ({s.framework.evidence})"))
    st = s.steady_state
    if st is None:
        if s.capture.gpu_window_ns:
            rows.append(("Steady state", "none found: the capture holds only start-up and warm-up"))
        return rows
    steps = ""
    if st.steps:
        steps = (
            f", {count(st.steps)} steps of median {fmt_ns(st.step_ns_median or 0)} (p90 {fmt_ns(st.step_ns_p90 or 0)})"
        )
    gpus = f" on {st.gpus} GPUs" if st.gpus > 1 else ""
    # Name every kind of steady work it holds (a generate() call is one prefill, then decode).
    kinds = list(dict.fromkeys(p.name for p in s.phases if p.steady))
    kind = " + ".join(kinds) if len(kinds) > 1 else st.kind
    rows.append(
        (
            "Steady state",
            (
                f"{kind}{steps}; {fmt_ns(st.window_ns)}{gpus} ({pct(st.share_pct)} of the activity window), "
                f"GPU busy {pct(st.busy_pct)}"
            ),
        )
    )
    return rows


# The parts of a step (steps, summary_step_parts), in the order they are shown.
STEP_PARTS = [
    ("gpu_ns", "GPU busy"),
    ("blocked_ns", "GPU busy while the CPU waited for it"),
    ("launch_ns", "waiting for launches"),
    ("queued_ns", "GPU waiting with work queued"),
    ("sync_ns", "CPU still in a blocking call"),
    ("cpu_ns", "CPU outside CUDA"),
    ("api_ns", "other CUDA calls"),
    ("setup_ns", "one-time work"),
]


def _top_code(rows: list[IdleCode]) -> str:
    """The two rows with the most time of the first source (Python frames first) among those
    with 5% of the time or more, as gpu-idle and host-sampling name them."""
    rows = [c for c in rows if (c.share_pct or 0) >= 5]
    top = [c for c in rows if c.source == rows[0].source][:2] if rows else []
    return "; ".join(
        f"{pct(c.share_pct)} {clip(c.name or '?')}"
        + (f" ({c.location})" if c.location and c.source != "nvtx" else "")
        # (the library call it was in, where that is not the frame itself)
        + (f" in {clip(c.entry)}" if c.entry and not c.entry.startswith(f"{c.name} (") else "")
        + (" (NVTX range)" if c.source == "nvtx" else "")
        for c in top
    )


def step_rows(s: Summary) -> Rows:
    """Per GPU with steps: what the steps were found from, where a step's time goes, and the
    code that held the CPU while the GPU waited (one line each; several GPUs prefix theirs)."""
    found: list[str] = []
    split: list[str] = []
    code: list[str] = []
    after_readback: list[str] = []
    blocked: list[str] = []
    held: list[str] = []
    gpus = [g for g in s.steady_gpus if g.step_source is not None]
    for g in gpus:
        label = f"GPU {g.device_id}: " if len(gpus) > 1 else ""
        src = g.step_source
        assert src is not None
        what = src.marker if src.source == "nvtx" else (src.marker or src.source)
        how = "NVTX ranges" if src.source == "nvtx" else (src.evidence or "")
        agree = f"; {src.agreement}" if src.agreement else ""
        found.append(f"{label}{what} ({how}); {src.confidence} confidence{agree}")
        if g.step_parts and g.step_parts.step_ns_mean:
            sp = g.step_parts
            shares = [
                f"{name} {pct(100 * getattr(sp, key) / sp.step_ns_mean)}"
                for key, name in STEP_PARTS
                if getattr(sp, key) >= 0.0005 * sp.step_ns_mean
            ]
            split.append(f"{label}mean {fmt_ns(sp.step_ns_mean)}: " + ", ".join(shares))
        # (the code in the gaps after a large read-back is host-sampling's, the rest gpu-idle's)
        for part, lines in (("cpu", code), ("readback", after_readback)):
            named = _top_code([c for c in g.idle_code if c.part == part and c.source not in ("osrt", "threads")])
            if named:
                lines.append(f"{label}{named}")
        waits = [c for c in g.idle_code if c.part == "cpu" and c.source == "osrt" and (c.share_pct or 0) >= 5][:2]
        if waits:
            blocked.append(f"{label}" + "; ".join(f"{pct(c.share_pct)} {clip(c.name or '?')}" for c in waits))
        others = [c for c in g.idle_code if c.part == "cpu" and c.source == "threads" and (c.share_pct or 0) >= 5][:2]
        if waits and others:
            # (imported here: the store's module loads Polars, which the command's start-up does
            # not; rendering a cached analysis needs it only for such rows)
            from nsight_doctor.store.timeline.code import COND_WAIT

            # (as gpu-idle says it: where the launching thread's top wait is a condition wait)
            if re.match(COND_WAIT, waits[0].name or ""):
                held.append(
                    label
                    + "; ".join(
                        f"{pct(c.share_pct)} {clip(c.name or '?')}" + (f" ({c.location})" if c.location else "")
                        for c in others
                    )
                )
    return (
        labelled("Steps found from", found)
        + labelled("Where a step goes", split)
        + labelled("CPU code while idle", code)
        + labelled("CPU code after read-backs", after_readback)
        + labelled("OS calls while idle", blocked)
        + labelled("Other threads' Python", held)
    )


PHASES_SHOWN = 8


def phase_rows(s: Summary) -> Rows:
    """One line per GPU: its phases in order (the JSON output has every one)."""
    rows = []
    by_gpu: dict[int, list] = {}
    for p in s.phases:
        by_gpu.setdefault(p.device_id, []).append(p)
    for i, (dev, phases) in enumerate(by_gpu.items()):
        parts = []
        for p in phases[:PHASES_SHOWN]:
            steps = ""
            if p.steps and p.step_ns_median:
                steps = f", {count(p.steps)} step{'s' if p.steps > 1 else ''} of {fmt_ns(p.step_ns_median)}"
            parts.append(f"{p.name} {fmt_ns(p.duration_ns)} (busy {pct(p.busy_pct)}{steps})")
        more = f" ... and {len(phases) - PHASES_SHOWN} more" if len(phases) > PHASES_SHOWN else ""
        label = f"GPU {dev}: " if len(by_gpu) > 1 else ""
        rows.append(("Phases" if i == 0 else "", label + " -> ".join(parts) + more))
    return rows


def category_rows(s: Summary) -> Rows:
    cats = [c for c in s.kernel_categories if c.total_ns]
    if not cats:
        return []
    where = "steady state" if cats[0].scope == "steady" else "whole capture"
    shown = ", ".join(f"{c.category} {pct(c.share_pct)}" for c in cats[:7])
    return [(f"Kernel time ({where})", shown)]


def gpu_rows(s: Summary) -> Rows:
    rows = []
    dormant = [g for g in s.gpus if not g.busy_ns and g.name]
    for g in s.gpus:
        if not g.busy_ns:
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
    if dormant:
        ids = ", ".join(str(g.device_id) for g in dormant)
        names = ", ".join(sorted({g.name or "?" for g in dormant}))
        rows.append((f"GPU{'s' if len(dormant) > 1 else ''} {ids}", f"{names}: no GPU work"))
    return rows


NAME_SHOWN = 64


def clip(name: str, limit: int = NAME_SHOWN) -> str:
    """A long kernel name shortened in its middle for a summary row (JSON keeps it whole)."""
    if len(name) <= limit:
        return name
    tail = limit // 3
    return f"{name[: limit - tail - 1]}…{name[-tail:]}"


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
    if not sy.blocking_count:
        return []
    shown = sy.by_api[:4] if len(sy.by_api) == 4 else sy.by_api[:3]  # never "in 1 other API"
    apis = ", ".join(f"{clip(r.name or '?')} {count(r.count)}x" for r in shown)
    if len(sy.by_api) > len(shown):
        rest = sum(r.count for r in sy.by_api[len(shown) :])
        apis += f", {count(rest)} in {len(sy.by_api) - len(shown)} other APIs"
    syncs = f", {count(sy.count)} of them synchronize calls" if sy.count != sy.blocking_count else ""
    value = (
        f"{count(sy.blocking_count)}, {fmt_ns(sy.blocking_ns)} ({apis}{syncs}); "
        f"{count(sy.steady_blocking_count)} in the steady state"
    )
    return [("Blocking calls", value)]


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
    rows = [("Idle gaps", f"{count(idle.gap_count)}, {idle_total(idle)} ({causes})"), ("", f"by length: {hist}")]
    gaps = []
    for g in idle.largest:  # as many as --gaps asked for
        calls = ", ".join(clip(c.name or "?") for c in g.api_calls[:3]) or "no CUDA call"
        gaps.append(
            f"{fmt_ns(g.duration)} on GPU {g.device_id} at {fmt_ns(g.start)} ({g.cause}; "
            f"CPU in: {calls}; then {clip(g.next_op or '?')})"
        )
    return rows + labelled("Largest gaps", gaps)


def idle_total(idle: Idle) -> str:
    """The idle time in all, said to be summed over GPUs when there are several (it can then
    exceed the activity window)."""
    if idle.gpus > 1:
        return f"{fmt_ns(idle.idle_ns)} summed over {idle.gpus} GPUs, {fmt_ns(idle.idle_ns / idle.gpus)} per GPU"
    return fmt_ns(idle.idle_ns)


def nvtx_rows(s: Summary) -> Rows:
    return labelled(
        "NVTX ranges",
        [nvtx_line(n) for n in s.nvtx[:5]],
    )


def nvtx_line(n: Nvtx) -> str:
    if n.processes > 1:
        return (
            f"{clip(n.text or '(unnamed)')} x{count(n.count)} in {n.processes} processes: CPU "
            f"{fmt_ns(n.cpu_ns_per_process or 0)} per process, GPU {fmt_ns(n.gpu_ns or 0)} in {count(n.gpu_ops)} ops"
        )
    return (
        f"{clip(n.text or '(unnamed)')} x{count(n.count)}: CPU {fmt_ns(n.cpu_ns or 0)}, "
        f"GPU {fmt_ns(n.gpu_ns or 0)} in {count(n.gpu_ops)} ops"
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
            f"{pct(g.share_pct)} {clip(g.launch or g.name or '?')}: {bound_text(g)}; SM {pct(g.sm_pct)}, "
            f"memory {pct(g.mem_pct)}, DRAM {pct(g.dram_pct)}, occupancy {pct(g.achieved_occupancy_pct)}"
            + (f", top stall {clip(g.top_stall)}" if g.top_stall else "")
            for g in n.groups[:6]
        ],
    )


def bound_text(g: Any) -> str:
    """A profiled kernel's bottleneck with its place on the roofline, as the findings say it
    ("compute-bound, at 68% of its tensor BF16 roof (450 FLOP/byte)"; "latency-bound, at 50% of
    its DRAM roof (0.67 waves: ...)": a small grid far from a memory roof)."""
    text = g.bottleneck or "not measured"
    notes = []
    if g.roof and g.roof_pct is not None:
        # Bound below every roof: by a unit the roofline does not count (see ncu_kernels.bottleneck).
        if g.bottleneck == "compute-bound" and g.roof_pct < 60 and g.sm_pct is not None:
            text += f" on SM pipes other than FLOPs (SM {pct(g.sm_pct)})"
        elif g.bottleneck == "memory-bound" and g.roof_pct < 40 and g.mem_pct is not None:
            text += f" on L1 or shared memory (memory {pct(g.mem_pct)})"
        text += f", at {g.roof_pct:.0f}% of its {g.roof} roof"
        if g.arithmetic_intensity:
            notes.append(f"{g.arithmetic_intensity:.3g} FLOP/byte")
    elif g.regime and g.roof_pct is not None and g.bottleneck == "latency-bound":
        text += f", {g.regime} regime at {g.roof_pct:.0f}% of its roof"
    if g.waves_per_sm is not None and g.waves_per_sm < 1:
        notes.append(f"{g.waves_per_sm:.2g} waves: the grid cannot fill the GPU")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def window_of(f: Finding, d: Diagnosis) -> int | None:
    """The time a finding's impact is a share of (see impact_text): set by rules.grade."""
    return f.window_ns or d.summary.impact_window()[0]


def impact_text(f: Finding, d: Diagnosis, numbers: dict[int, int] | None = None) -> str:
    """The finding's impact as a share of its own window: its GPU's steady state (one-time
    start-up findings: its activity window), else the steady state over all GPUs."""
    if f.scope == "capture":
        return "a note on the capture itself"
    window = window_of(f, d)
    where = "of " + (d.summary.impact_window()[1] if f.scope == "steady" else "the activity window")
    share = f", {pct(100 * f.impact_ns / window)} {where}" if window else ""
    if f.scope == "startup":
        return f"one-time: {fmt_ns(f.impact_ns)} idle{share}"
    if not f.impact_ns:
        return "no GPU time of its own to recover (see its evidence)"
    overlap = ""
    if f.overlaps:
        # (numbers: the rank shown for each finding's rank, where a format folds some)
        shown = sorted({(numbers or {}).get(n, n) for n in f.overlaps})
        which = ", ".join(f"#{n}" for n in shown)
        overlap = f"; the same kernels as {which}, so not in addition to {'it' if len(shown) == 1 else 'them'}"
    return f"recovers up to {fmt_ns(f.impact_ns)}{share}{overlap}"
