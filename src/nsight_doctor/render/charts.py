"""The report's charts: Vega-Lite specifications built with Altair from a finished Diagnosis.

Each chart draws one dataset of ``Diagnosis.datasets`` (read by report_data.py) or a part of
the summary; a chart whose data the profile lacks is left out. Specs carry their data inline,
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
    export,
    finish,
    rounded,
    scale,
    to_svg,
)
from nsight_doctor.render.ncu_charts import ncu_occupancy, ncu_roofline, ncu_stalls, ncu_throughput

__all__ = [
    "BOTTLENECK_COLORS",
    "CATEGORY_COLORS",
    "CAUSE_COLORS",
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

    charts: list[Chart] = []
    for make in (
        utilisation,
        timeline,
        kernel_categories,
        top_kernels,
        nvtx,
        phases,
        step_times,
        idle_gaps,
        memcpy,
        ncu_stalls,
        ncu_occupancy,
        ncu_roofline,
        ncu_throughput,
    ):
        chart = make(alt, d)
        if chart is not None:
            charts.append(chart)
    return charts


def utilisation(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("utilisation")
    if not ds or not ds.rows:
        return None
    data = rounded([{k: r[k] for k in ("device_id", "start_ms", "series", "pct")} for r in ds.rows], 3)
    devices = sorted({r["device_id"] for r in data})
    series = {r["series"] for r in data}
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
    chart = layered.facet(row=alt.Row("device_id:N", title="GPU")) if len(devices) > 1 else layered
    sampled = "; lines are the GPU metrics that nsys sampled" if len(series) > 1 else ""
    return Chart(
        id="gpu-utilisation",
        section="timeline",
        title="GPU utilisation over time",
        caption=f"Share of each bin in which the GPU ran at least one operation ({ds.note}){sampled}.",
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def timeline(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("timeline")
    if not ds or not ds.rows:
        return None
    t0 = min(r["start"] for r in ds.rows)
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
            for r in ds.rows
        ],
        6,
    )
    order = {"nvtx": 0, "cpu": 1, "gpu": 2}
    lanes = sorted({(order[r["side"]], r["lane"]) for r in data})
    lane_names = [name for _, name in lanes]
    y = alt.Y("lane:N", title=None, sort=lane_names, axis=alt.Axis(labelLimit=200))
    x = alt.X("x0:Q", title=f"ms from {fmt_ns(t0)} (drag to pan, scroll to zoom)")
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
        .mark_bar(strokeWidth=0.6, height={"band": 0.7})
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
        .mark_bar(strokeWidth=0.6, height={"band": 0.7})
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
    chart = (
        alt.layer(cpu, gpu, data=alt.Data(name="data"))
        .resolve_scale(color="independent", stroke="independent")
        .properties(width=WIDTH, height=max(120, 30 * len(lane_names)))
        .interactive(bind_y=False)
    )
    return Chart(
        id="timeline",
        section="timeline",
        title="Timeline of a representative window",
        caption=(
            f"{ds.note}. GPU operations per stream, coloured by kernel category, under the CUDA calls and "
            "NVTX ranges of the threads that issued them. Gaps in a GPU row are idle GPU time."
        ),
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def kernel_categories(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("kernel_categories")
    if not ds or not ds.rows:
        return None
    data = [dict(r, ms=r["total_ns"] / 1e6) for r in rounded(ds.rows)]
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
    chart = (bars + labels).properties(width=WIDTH - 200, height=22 * len(data))
    return Chart(
        id="kernel-categories",
        section="time",
        title="Kernel time by category",
        caption="GPU time of kernels by category (the kernel taxonomy of docs/schema.md), labelled with its share (%).",
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def top_kernels(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("top_kernels")
    if not ds or not ds.rows:
        return None
    data = [
        dict(r, ms=r["total_ns"] / 1e6, median_us=r["median_ns"] / 1e3, label=f"{i}. {r['name']}")
        for i, r in enumerate(rounded(ds.rows), 1)
    ]
    cats = {r["category"] for r in data}
    chart = (
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
    return Chart(
        id="top-kernels",
        section="time",
        title="Top kernels",
        caption=f"The {len(data)} kernels (and whole CUDA graphs) with the most GPU time; hover for full names.",
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def nvtx(alt: Any, d: Diagnosis) -> Chart | None:
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
    chart = (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=[f"{i}. {n.text or '(unnamed)'}" for i, n in enumerate(ranges, 1)]),
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
        .properties(width=WIDTH - 360, height=34 * len(ranges))
    )
    return Chart(
        id="nvtx",
        section="time",
        title="NVTX ranges",
        caption=(
            "Time on the CPU inside each NVTX range, and GPU time of the operations issued inside it "
            "(summed over its instances; nested ranges each count their work)."
        ),
        spec=finish(alt, chart, data=data),
        source="SELECT * FROM summary_nvtx LIMIT 20\n",
    )


def phases(alt: Any, d: Diagnosis) -> Chart | None:
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
    if not rows:
        return None
    chart = (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("phase:N", title=None, sort=None),
            yOffset="stat:N",
            x=alt.X("ms:Q", title="time per step (ms)"),
            color=alt.Color("stat:N", title=None, scale=alt.Scale(range=["#4e79a7", "#a0cbe8"])),
            tooltip=["phase:N", "stat:N", alt.Tooltip("ms:Q", format=",.3f"), alt.Tooltip("steps:Q", format=",")],
        )
        .properties(width=WIDTH - 300, height=40 * len({r["phase"] for r in rows}))
    )
    return Chart(
        id="phases",
        section="steps",
        title="Step time per phase",
        caption="Median and 90th-percentile step time of each phase of the run.",
        spec=finish(alt, chart, data=rows),
        source="the summary's phases\n",
    )


def step_times(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("step_times")
    if not ds or not ds.rows:
        return None
    data = [
        {
            "text": r["text"],
            "step": r["step"],
            "start_ms": r["start_ms"],
            "cpu_ms": r["cpu_ns"] / 1e6,
            "gpu_span_ms": r["gpu_span_ns"] / 1e6 if r["gpu_span_ns"] is not None else None,
            "gpu_busy_ms": r["gpu_ns"] / 1e6 if r["gpu_ns"] is not None else None,
        }
        for r in rounded(ds.rows)
    ]
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
            x=alt.X("start_ms:Q", title="step start (ms since capture start)"),
            y=alt.Y("gpu_span_ms:Q", title="step time on the GPU (ms)", scale=alt.Scale(zero=True)),
            color=color,
            tooltip=tooltip,
        )
        .properties(width=WIDTH // 2 - 40, height=220)
    )
    hist = (
        base.mark_bar(opacity=0.85)
        .encode(
            x=alt.X("gpu_span_ms:Q", bin=alt.Bin(maxbins=40), title="step time on the GPU (ms)"),
            y=alt.Y("count():Q", title="steps", stack=None, axis=alt.Axis(tickMinStep=1, format="d")),
            color=color,
        )
        .properties(width=WIDTH // 2 - 40, height=220)
    )
    chart = alt.hconcat(over_time, hist, data=alt.Data(name="data"))
    note = f" ({ds.note})" if ds.note else ""
    return Chart(
        id="step-times",
        section="steps",
        title="Step times",
        caption=(
            "Each instance of the most repeated outermost NVTX ranges (the steps of the loop): the span from its "
            f"first GPU operation's start to its last one's end, over the run and as a histogram{note}. "
            "Warm-up steps and phase changes stand out on the left."
        ),
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def idle_gaps(alt: Any, d: Diagnosis) -> Chart | None:
    ds = d.datasets.get("idle_gaps")
    if not ds or not ds.rows:
        return None
    # Stacked by hand: Vega-Lite does not stack bars that have both x and x2.
    causes = {r["cause"] for r in ds.rows}
    order = [c for c in CAUSE_COLORS if c in causes] + sorted(causes - CAUSE_COLORS.keys())
    data: list[dict[str, Any]] = []
    tops: dict[float, float] = {}
    for r in sorted(ds.rows, key=lambda r: (r["lo_us"], order.index(r["cause"]))):
        y0 = tops.get(r["lo_us"], 0.0)
        y1 = y0 + r["total_ns"] / 1e6
        tops[r["lo_us"]] = y1
        data.append(dict(r, ms=r["total_ns"] / 1e6, y0=y0, y1=y1))
    data = rounded(data)
    chart = (
        alt.Chart(alt.Data(name="data"))
        .mark_rect(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("lo_us:Q", title="gap length (µs, log scale)", scale=alt.Scale(type="log")),
            x2="hi_us:Q",
            y=alt.Y("y0:Q", title="idle time (ms)"),
            y2="y1:Q",
            color=alt.Color("cause:N", title="cause", sort=order, scale=alt.Scale(**scale(CAUSE_COLORS, causes))),
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
    return Chart(
        id="idle-gaps",
        section="idle",
        title="Idle gaps by length and cause",
        caption=(
            "Total GPU idle time in gaps of each length, by what the CPU was doing (launch: waiting for the next "
            "launch; sync: after a blocking call; cpu: code outside CUDA; api: other CUDA calls; queued: work "
            "already issued)."
        ),
        spec=finish(alt, chart, data=data),
        source=ds.sql,
    )


def memcpy(alt: Any, d: Diagnosis) -> Chart | None:
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
    kinds = {str(r["host_kind"]) for r in data}
    colors = {"pageable": "#e15759", "pinned": "#59a14f", "no host side": "#4e79a7"}
    chart = (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("direction:N", title=None),
            x=alt.X("ms:Q", title="copy time (ms)", stack="zero"),
            color=alt.Color("host_kind:N", title="host memory", scale=alt.Scale(**scale(colors, kinds))),
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
    return Chart(
        id="memcpy",
        section="copies",
        title="Copies by direction",
        caption="Time of memory copies by direction and host memory kind; pageable host memory makes copies slow "
        "and synchronous.",
        spec=finish(alt, chart, data=data),
        source="SELECT * FROM summary_memcpy_directions\n",
    )
