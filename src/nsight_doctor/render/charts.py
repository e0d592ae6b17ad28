"""The report's charts: Vega-Lite specifications built with Altair from a finished Diagnosis.

The charts are a table of declarative specs (CHARTS, chart_base.ChartSpec) and one builder
(chart_base.make): each spec says where its chart goes and what it says, how it prepares one
dataset of ``Diagnosis.datasets`` (read by report_data.py) or a part of the summary, and how it
draws it; a chart whose data the profile lacks is left out. Specs carry their data inline,
rounded, so that a report is one file. Kernel names and NVTX text reach Vega only as data
values, which Vega draws as text (never as markup or expressions); tooltips go through
vega-tooltip's HTML escaping. ``export`` writes each chart as PNG and SVG through vl-convert.
"""

from __future__ import annotations

from typing import Any

from nsight_doctor.model import Diagnosis, fmt_ns
from nsight_doctor.render.chart_base import (
    BOTTLENECK_COLORS,
    CATEGORY_COLORS,
    CAUSE_COLORS,
    CPU_COLORS,
    SECTIONS,
    SERIES_COLORS,
    STALL_TOP,
    WIDTH,
    Chart,
    ChartSpec,
    Frame,
    export,
    make,
    rounded,
    scale,
    to_svg,
)
from nsight_doctor.render.ncu_charts import NCU_CHARTS

__all__ = [
    "BOTTLENECK_COLORS",
    "CATEGORY_COLORS",
    "CAUSE_COLORS",
    "CHARTS",
    "CPU_COLORS",
    "SECTIONS",
    "SERIES_COLORS",
    "STALL_TOP",
    "WIDTH",
    "Chart",
    "build",
    "export",
    "to_svg",
]


def build(d: Diagnosis) -> list[Chart]:
    """Every chart that the diagnosis has data for, in report order."""
    import altair as alt  # only reports with charts pay for the import

    return [c for spec in CHARTS if (c := make(alt, spec, d)) is not None]


# --- GPU utilisation over time -------------------------------------------------------------------


def utilisation_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    data = rounded([{k: r[k] for k in ("device_id", "start_ms", "series", "pct")} for r in rows], 3)
    return Frame({"data": data})


def utilisation_draw(alt: Any, f: Frame) -> Any:
    devices = sorted({r["device_id"] for r in f.rows})
    series = {r["series"] for r in f.rows}
    color = alt.Color("series:N", title=None, scale=alt.Scale(**scale(SERIES_COLORS, series)))
    x = alt.X("start_ms:Q", title="time since capture start (ms)")
    y = alt.Y("pct:Q", title="% of bin", scale=alt.Scale(domain=[0, 100]))
    tooltip = [
        alt.Tooltip("device_id:N", title="GPU"),
        alt.Tooltip("series:N"),
        alt.Tooltip("start_ms:Q", title="bin start (ms)", format=",.2f"),
        alt.Tooltip("pct:Q", title="%", format=".1f"),
    ]
    busy = (
        alt.Chart()
        .mark_area(interpolate="step-after", opacity=0.45, line={"strokeWidth": 1})
        .encode(x=x, y=y, color=color, tooltip=tooltip)
        .transform_filter(alt.datum.series == "busy (traced operations)")
    )
    lines = (
        alt.Chart()
        .mark_line(interpolate="step-after", strokeWidth=1.4)
        .encode(x=x, y=y, color=color, tooltip=tooltip)
        .transform_filter(alt.datum.series != "busy (traced operations)")
    )
    layered = alt.layer(busy, lines, data=alt.Data(name="data")).properties(width=WIDTH, height=150)
    return layered.facet(row=alt.Row("device_id:N", title="GPU")) if len(devices) > 1 else layered


def utilisation_caption(f: Frame) -> str:
    sampled = "; lines are the GPU metrics that nsys sampled" if len({r["series"] for r in f.rows}) > 1 else ""
    return f"Share of each bin in which the GPU ran at least one operation ({f.note}){sampled}."


# --- the timeline of a representative window -----------------------------------------------------

TIMELINE_VIEW_OPS = 80  # GPU operations in the timeline's first view


def timeline_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    t0 = min(r["start"] for r in rows)
    data = rounded(
        [
            {
                "lane": r["lane"],
                "side": r["side"],
                "category": r["category"],
                "name": r["name"],
                "x0": (r["start"] - t0) / 1e6,
                "x1": (r["end"] - t0) / 1e6,
                "us": r["duration"] / 1e3,
            }
            for r in rows
        ],
        6,
    )
    # The first view: the window's first TIMELINE_VIEW_OPS GPU operations, wide enough to read
    # each one; the rest is a drag away.
    gpu_ends = sorted(r["x1"] for r in data if r["side"] == "gpu")
    view = gpu_ends[TIMELINE_VIEW_OPS - 1] if len(gpu_ends) > TIMELINE_VIEW_OPS else None
    return Frame({"data": data}, {"t0": t0, "view": view, "ops": len(gpu_ends)})


def timeline_draw(alt: Any, f: Frame) -> Any:
    data = f.rows
    order = {"nvtx": 0, "cpu": 1, "gpu": 2}
    lanes = sorted({(order[r["side"]], r["lane"]) for r in data})
    lane_names = [name for _, name in lanes]
    y = alt.Y("lane:N", title=None, sort=lane_names, axis=alt.Axis(labelLimit=200))
    view = f.facts.get("view")
    x = alt.X(
        "x0:Q",
        title=f"ms from {fmt_ns(f.facts['t0'])} (drag to pan, scroll to zoom)",
        scale=alt.Scale(domain=[0, view]) if view else alt.Undefined,
        axis=alt.Axis(labelOverlap="greedy"),
    )
    tooltip = [
        alt.Tooltip("name:N"),
        alt.Tooltip("category:N"),
        alt.Tooltip("us:Q", title="duration (µs)", format=",.1f"),
        alt.Tooltip("x0:Q", title="start (ms)", format=",.4f"),
        alt.Tooltip("lane:N"),
    ]
    gpu_cats = {r["category"] for r in data if r["side"] == "gpu"}
    cpu_cats = {r["category"] for r in data if r["side"] != "gpu"}
    gpu_scale = alt.Scale(**scale(CATEGORY_COLORS, gpu_cats))
    cpu_scale = alt.Scale(**scale(CPU_COLORS, cpu_cats))
    # A thin stroke in the fill colour keeps microsecond kernels visible at this zoom.
    gpu = (
        alt.Chart()
        .mark_bar(strokeWidth=0.6, height={"band": 0.7}, clip=True)
        .encode(
            x=x,
            x2="x1:Q",
            y=y,
            color=alt.Color(
                "category:N", title="GPU work", scale=gpu_scale, legend=alt.Legend(orient="bottom", columns=6)
            ),
            stroke=alt.Stroke(
                "category:N", title="GPU work", scale=gpu_scale, legend=alt.Legend(orient="bottom", columns=6)
            ),
            tooltip=tooltip,
        )
        .transform_filter(alt.datum.side == "gpu")
    )
    cpu = (
        alt.Chart()
        .mark_bar(strokeWidth=0.6, height={"band": 0.7}, clip=True)
        .encode(
            x=x,
            x2="x1:Q",
            y=y,
            color=alt.Color(
                "category:N", title="CPU calls and NVTX", scale=cpu_scale, legend=alt.Legend(orient="bottom", columns=6)
            ),
            stroke=alt.Stroke(
                "category:N", title="CPU calls and NVTX", scale=cpu_scale, legend=alt.Legend(orient="bottom", columns=6)
            ),
            tooltip=tooltip,
        )
        .transform_filter(alt.datum.side != "gpu")
    )
    return (
        alt.layer(cpu, gpu, data=alt.Data(name="data"))
        .resolve_scale(color="independent", stroke="independent")
        .properties(width=WIDTH, height=max(120, 30 * len(lane_names)))
        .interactive(bind_y=False)
    )


# --- where the GPU time goes ---------------------------------------------------------------------


def categories_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    return Frame({"data": [dict(r, ms=r["total_ns"] / 1e6) for r in rounded(rows)]})


def categories_draw(alt: Any, f: Frame) -> Any:
    data = f.rows
    cats = {r["category"] for r in data}
    base = alt.Chart(alt.Data(name="data")).encode(
        y=alt.Y("category:N", title=None, sort=[r["category"] for r in data]),
        x=alt.X("ms:Q", title="GPU time (ms)"),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("category:N", legend=None, scale=alt.Scale(**scale(CATEGORY_COLORS, cats))),
        tooltip=[
            alt.Tooltip("category:N"),
            alt.Tooltip("ms:Q", title="GPU time (ms)", format=",.2f"),
            alt.Tooltip("share_pct:Q", title="share (%)", format=".1f"),
            alt.Tooltip("count:Q", title="kernels", format=","),
        ],
    )
    labels = base.mark_text(align="left", dx=4, fontSize=11).encode(
        text=alt.Text("share_pct:Q", format=".1f"),
    )
    return (bars + labels).properties(width=WIDTH - 200, height=22 * len(data))


def top_kernels_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    data = [
        dict(r, ms=r["total_ns"] / 1e6, median_us=r["median_ns"] / 1e3, label=f"{i}. {r['name']}")
        for i, r in enumerate(rounded(rows), 1)
    ]
    return Frame({"data": data})


def top_kernels_draw(alt: Any, f: Frame) -> Any:
    data = f.rows
    cats = {r["category"] for r in data}
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=[r["label"] for r in data], axis=alt.Axis(labelLimit=420)),
            x=alt.X("ms:Q", title="GPU time (ms)"),
            color=alt.Color("category:N", title="category", scale=alt.Scale(**scale(CATEGORY_COLORS, cats))),
            tooltip=[
                alt.Tooltip("name:N"),
                alt.Tooltip("category:N"),
                alt.Tooltip("ms:Q", title="GPU time (ms)", format=",.2f"),
                alt.Tooltip("share_pct:Q", title="share (%)", format=".1f"),
                alt.Tooltip("count:Q", title="executions", format=","),
                alt.Tooltip("median_us:Q", title="median (µs)", format=",.1f"),
            ],
        )
        .properties(width=WIDTH - 420, height=22 * len(data))
    )


def nvtx_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame | None:
    ranges = [n for n in d.summary.nvtx if n.count][:15]
    if not ranges:
        return None
    data = []
    for i, n in enumerate(ranges, 1):
        label = f"{i}. {n.text or '(unnamed)'}"
        for measure, ns in (("CPU time", n.cpu_ns), ("GPU time of its work", n.gpu_ns)):
            data.append(
                {"label": label, "text": n.text, "count": n.count, "measure": measure, "ms": round((ns or 0) / 1e6, 4)}
            )
    return Frame({"data": data})


def nvtx_draw(alt: Any, f: Frame) -> Any:
    labels = list(dict.fromkeys(r["label"] for r in f.rows))  # one per range, in rank order
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=labels),
            yOffset=alt.YOffset("measure:N"),
            x=alt.X("ms:Q", title="total time (ms)"),
            color=alt.Color(
                "measure:N",
                title=None,
                scale=alt.Scale(domain=["CPU time", "GPU time of its work"], range=["#76b900", "#4e79a7"]),
            ),
            tooltip=[
                alt.Tooltip("text:N", title="range"),
                alt.Tooltip("count:Q", title="ranges", format=","),
                alt.Tooltip("measure:N"),
                alt.Tooltip("ms:Q", title="ms", format=",.2f"),
            ],
        )
        .properties(width=WIDTH - 360, height=34 * len(labels))
    )


# --- steps ---------------------------------------------------------------------------------------


def phases_frame(d: Diagnosis, _: list[dict[str, Any]]) -> Frame | None:
    """Step time per phase, when the summary has phases (prefill, decode, ...)."""
    rows = []
    all_phases = getattr(d.summary, "phases", None) or []
    devices = {getattr(p, "device_id", None) for p in all_phases}
    for p in all_phases:
        med, p90 = getattr(p, "step_ns_median", None), getattr(p, "step_ns_p90", None)
        if med is None:
            continue
        name = str(getattr(p, "name", "?"))
        if len(devices) > 1:
            name = f"GPU {getattr(p, 'device_id', '?')}: {name}"
        rows.append({"phase": name, "stat": "median", "ms": round(med / 1e6, 4), "steps": getattr(p, "steps", None)})
        if p90 is not None:
            rows.append({"phase": name, "stat": "p90", "ms": round(p90 / 1e6, 4), "steps": getattr(p, "steps", None)})
    return Frame({"data": rows}) if rows else None


def phases_draw(alt: Any, f: Frame) -> Any:
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("phase:N", title=None, sort=None),
            yOffset="stat:N",
            x=alt.X("ms:Q", title="time per step (ms)"),
            color=alt.Color("stat:N", title=None, scale=alt.Scale(range=["#4e79a7", "#a0cbe8"])),
            tooltip=["phase:N", "stat:N", alt.Tooltip("ms:Q", format=",.3f"), alt.Tooltip("steps:Q", format=",")],
        )
        .properties(width=WIDTH - 300, height=40 * len({r["phase"] for r in f.rows}))
    )


def step_times_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    data = [
        {
            "text": r["text"],
            "step": r["step"],
            "start_ms": r["start_ms"],
            "cpu_ms": r["cpu_ns"] / 1e6,
            "gpu_span_ms": r["gpu_span_ns"] / 1e6 if r["gpu_span_ns"] is not None else None,
            "gpu_busy_ms": r["gpu_ns"] / 1e6 if r["gpu_ns"] is not None else None,
        }
        for r in rounded(rows)
    ]
    return Frame({"data": data})


def step_times_draw(alt: Any, f: Frame) -> Any:
    color = alt.Color("text:N", title="NVTX range", scale=alt.Scale(scheme="tableau10"))
    tooltip = [
        alt.Tooltip("text:N", title="range"),
        alt.Tooltip("step:Q", title="step"),
        alt.Tooltip("gpu_span_ms:Q", title="GPU span (ms)", format=",.3f"),
        alt.Tooltip("cpu_ms:Q", title="CPU time (ms)", format=",.3f"),
        alt.Tooltip("gpu_busy_ms:Q", title="GPU busy (ms)", format=",.3f"),
    ]
    base = alt.Chart()
    over_time = (
        base.mark_point(filled=True, size=28, opacity=0.8)
        .encode(
            x=alt.X(
                "start_ms:Q",
                title="step start (ms since capture start)",
                scale=alt.Scale(zero=False),
                axis=alt.Axis(labelOverlap="greedy", tickCount=5, format=",.0f"),
            ),
            y=alt.Y("gpu_span_ms:Q", title="step time on the GPU (ms)", scale=alt.Scale(zero=True)),
            color=color,
            tooltip=tooltip,
        )
        .properties(width=WIDTH // 2 - 40, height=220)
    )
    hist = (
        base.mark_bar(opacity=0.85)
        .encode(
            x=alt.X(
                "gpu_span_ms:Q",
                bin=alt.Bin(maxbins=40),
                title="step time on the GPU (ms)",
                axis=alt.Axis(labelOverlap="greedy", tickCount=5),
            ),
            y=alt.Y("count():Q", title="steps", stack=None, axis=alt.Axis(tickMinStep=1, format="d")),
            color=color,
        )
        .properties(width=WIDTH // 2 - 40, height=220)
    )
    return alt.hconcat(over_time, hist, data=alt.Data(name="data"))


def idle_gaps_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    # Stacked by hand: Vega-Lite does not stack bars that have both x and x2.
    order = cause_order(rows)
    data: list[dict[str, Any]] = []
    tops: dict[float, float] = {}
    for r in sorted(rows, key=lambda r: (r["lo_us"], order.index(r["cause"]))):
        y0 = tops.get(r["lo_us"], 0.0)
        y1 = y0 + r["total_ns"] / 1e6
        tops[r["lo_us"]] = y1
        data.append(dict(r, ms=r["total_ns"] / 1e6, y0=y0, y1=y1))
    return Frame({"data": rounded(data)})


def cause_order(rows: list[dict[str, Any]]) -> list[str]:
    causes = {r["cause"] for r in rows}
    return [c for c in CAUSE_COLORS if c in causes] + sorted(causes - CAUSE_COLORS.keys())


def idle_gaps_draw(alt: Any, f: Frame) -> Any:
    causes = {r["cause"] for r in f.rows}
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_rect(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("lo_us:Q", title="gap length (µs, log scale)", scale=alt.Scale(type="log")),
            x2="hi_us:Q",
            y=alt.Y("y0:Q", title="idle time (ms)"),
            y2="y1:Q",
            color=alt.Color(
                "cause:N", title="cause", sort=cause_order(f.rows), scale=alt.Scale(**scale(CAUSE_COLORS, causes))
            ),
            tooltip=[
                alt.Tooltip("cause:N"),
                alt.Tooltip("lo_us:Q", title="from (µs)", format=",.3~f"),
                alt.Tooltip("hi_us:Q", title="to (µs)", format=",.3~f"),
                alt.Tooltip("gaps:Q", format=","),
                alt.Tooltip("ms:Q", title="idle (ms)", format=",.3f"),
            ],
        )
        .properties(width=WIDTH - 160, height=240)
    )


# --- copies --------------------------------------------------------------------------------------

HOST_COLORS = {"pageable": "#e15759", "pinned": "#59a14f", "no host side": "#4e79a7"}


def memcpy_frame(d: Diagnosis, _: list[dict[str, Any]]) -> Frame | None:
    dirs = d.summary.memcpy.by_direction
    if not dirs:
        return None
    data = [
        {
            "direction": r.direction,
            "host_kind": "no host side" if r.host_kind == "-" else r.host_kind,
            "count": r.count,
            "mb": round(r.bytes / 1e6, 4),
            "ms": round(r.total_ns / 1e6, 4),
            "gbs": None if r.bandwidth_gbs is None else round(r.bandwidth_gbs, 2),
        }
        for r in dirs
    ]
    return Frame({"data": data})


def memcpy_draw(alt: Any, f: Frame) -> Any:
    data = f.rows
    kinds = {str(r["host_kind"]) for r in data}
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("direction:N", title=None),
            x=alt.X("ms:Q", title="copy time (ms)", stack="zero"),
            color=alt.Color("host_kind:N", title="host memory", scale=alt.Scale(**scale(HOST_COLORS, kinds))),
            tooltip=[
                "direction:N",
                alt.Tooltip("host_kind:N", title="host memory"),
                alt.Tooltip("count:Q", title="copies", format=","),
                alt.Tooltip("mb:Q", title="MB", format=",.3f"),
                alt.Tooltip("ms:Q", title="ms", format=",.3f"),
                alt.Tooltip("gbs:Q", title="GB/s", format=",.1f"),
            ],
        )
        .properties(width=WIDTH - 260, height=34 * len({r["direction"] for r in data}))
    )


# --- the table: every chart, in report order -------------------------------------------------------

CHARTS: list[ChartSpec] = [
    ChartSpec(
        "gpu-utilisation",
        "timeline",
        "GPU utilisation over time",
        utilisation_caption,
        utilisation_frame,
        utilisation_draw,
        dataset="utilisation",
    ),
    ChartSpec(
        "timeline",
        "timeline",
        "Timeline of a representative window",
        lambda f: (
            f"{f.note}. GPU operations per stream, coloured by kernel category, under the CUDA calls and "
            "NVTX ranges of the threads that issued them. Gaps in a GPU row are idle GPU time."
            + (
                f" It opens on the first {TIMELINE_VIEW_OPS} of its {f.facts['ops']:,} GPU operations; "
                "drag for the rest."
                if f.facts.get("view")
                else ""
            )
        ),
        timeline_frame,
        timeline_draw,
        dataset="timeline",
    ),
    ChartSpec(
        "kernel-categories",
        "time",
        "Kernel time by category",
        "GPU time of kernels by category (the kernel taxonomy of docs/schema.md), labelled with its share (%).",
        categories_frame,
        categories_draw,
        dataset="kernel_categories",
    ),
    ChartSpec(
        "top-kernels",
        "time",
        "Top kernels",
        lambda f: f"The {len(f.rows)} kernels (and whole CUDA graphs) with the most GPU time; hover for full names.",
        top_kernels_frame,
        top_kernels_draw,
        dataset="top_kernels",
    ),
    ChartSpec(
        "nvtx",
        "time",
        "NVTX ranges",
        "Time on the CPU inside each NVTX range, and GPU time of the operations issued inside it "
        "(summed over its instances; nested ranges each count their work).",
        nvtx_frame,
        nvtx_draw,
        source="SELECT * FROM summary_nvtx LIMIT 20\n",
    ),
    ChartSpec(
        "phases",
        "steps",
        "Step time per phase",
        "Median and 90th-percentile step time of each phase of the run.",
        phases_frame,
        phases_draw,
        source="the summary's phases\n",
    ),
    ChartSpec(
        "step-times",
        "steps",
        "Step times",
        lambda f: (
            "Each instance of the most repeated outermost NVTX ranges (the steps of the loop): the span from its "
            "first GPU operation's start to its last one's end, over the run and as a histogram"
            f"{f' ({f.note})' if f.note else ''}. Warm-up steps and phase changes stand out on the left."
        ),
        step_times_frame,
        step_times_draw,
        dataset="step_times",
    ),
    ChartSpec(
        "idle-gaps",
        "idle",
        "Idle gaps by length and cause",
        "Total GPU idle time in gaps of each length, by what the CPU was doing (launch: waiting for the next "
        "launch; sync: after a blocking call; cpu: code outside CUDA; api: other CUDA calls; queued: work "
        "already issued).",
        idle_gaps_frame,
        idle_gaps_draw,
        dataset="idle_gaps",
    ),
    ChartSpec(
        "memcpy",
        "copies",
        "Copies by direction",
        "Time of memory copies by direction and host memory kind; pageable host memory makes copies slow "
        "and synchronous.",
        memcpy_frame,
        memcpy_draw,
        source="SELECT * FROM summary_memcpy_directions\n",
    ),
    *NCU_CHARTS,
]
