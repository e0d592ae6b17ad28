"""The charts of the kernels under Nsight Compute: warp stalls, occupancy, roofline, throughput."""

from __future__ import annotations

from typing import Any

from nsight_doctor.model import Diagnosis
from nsight_doctor.render.chart_base import BOTTLENECK_COLORS, STALL_TOP, WIDTH, ChartSpec, Frame, rounded, scale


def short_launch(launch: str, n: int = 70) -> str:
    return launch if len(launch) <= n else launch[: n - 1] + "…"


def ncu_labels(rows: list[dict[str, Any]]) -> dict[str, str]:
    """A short, unique label per launch configuration, by rank of GPU time."""
    order: list[str] = []
    for r in rows:
        if r["launch"] not in order:
            order.append(r["launch"])
    return {launch: f"{i}. {short_launch(launch)}" for i, launch in enumerate(order, 1)}


def stalls_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["reason"]] = totals.get(r["reason"], 0) + r["ratio"]
    top = sorted(totals, key=lambda k: -totals[k])[:STALL_TOP]
    labels = ncu_labels(rows)
    merged: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (r["launch"], r["reason"] if r["reason"] in top else "other")
        merged[key] = merged.get(key, 0) + r["ratio"]
    share = {r["launch"]: r["share_pct"] for r in rows}
    data = [
        {
            "label": labels[launch],
            "launch": launch,
            "reason": reason,
            "ratio": round(v, 3),
            "share_pct": None if share[launch] is None else round(share[launch], 2),
        }
        for (launch, reason), v in merged.items()
    ]
    reasons = [*top, "other"] if any(r["reason"] == "other" for r in data) else top
    return Frame({"data": data}, {"labels": labels, "reasons": reasons})


def stalls_draw(alt: Any, f: Frame) -> Any:
    labels, reasons = f.facts["labels"], f.facts["reasons"]
    return (
        alt.Chart(alt.Data(name="data"))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=list(labels.values())),
            x=alt.X("ratio:Q", title="warps stalled per issued instruction", stack="zero"),
            color=alt.Color("reason:N", title="stall reason", sort=reasons, scale=alt.Scale(scheme="tableau10")),
            order=alt.Order("ratio:Q", sort="descending"),
            tooltip=[
                alt.Tooltip("launch:N", title="kernel"),
                alt.Tooltip("reason:N"),
                alt.Tooltip("ratio:Q", format=".2f"),
                alt.Tooltip("share_pct:Q", title="share of GPU time (%)", format=".1f"),
            ],
        )
        .properties(width=340, height=26 * len(labels))
    )


def occupancy_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    labels = ncu_labels(rows)
    data = [dict(r, label=labels[r["launch"]]) for r in rounded(rows)]
    return Frame({"data": data}, {"labels": labels})


def occupancy_draw(alt: Any, f: Frame) -> Any:
    labels = f.facts["labels"]
    y = alt.Y("label:N", title=None, sort=list(labels.values()))
    tooltip = [
        alt.Tooltip("launch:N", title="kernel"),
        alt.Tooltip("achieved_occupancy_pct:Q", title="achieved (%)", format=".1f"),
        alt.Tooltip("theoretical_occupancy_pct:Q", title="theoretical (%)", format=".1f"),
        alt.Tooltip("occupancy_limiter:N", title="limited by"),
        alt.Tooltip("registers_per_thread:Q", title="registers/thread"),
        alt.Tooltip("block_size:Q", title="threads/block"),
        alt.Tooltip("waves_per_sm:Q", title="waves/SM", format=".2f"),
    ]
    base = alt.Chart().encode(y=y, tooltip=tooltip)
    achieved = base.mark_bar(color="#4e79a7", height={"band": 0.6}).encode(
        x=alt.X("achieved_occupancy_pct:Q", title="occupancy (% of max warps per SM)", scale=alt.Scale(domain=[0, 100]))
    )
    theoretical = base.mark_tick(color="#e15759", thickness=3, size=18).encode(x="theoretical_occupancy_pct:Q")
    return alt.layer(achieved, theoretical, data=alt.Data(name="data")).properties(width=340, height=26 * len(labels))


def roofline_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    labels = ncu_labels(rows)
    points = [
        dict(r, label=labels[r["launch"]], tops=r["ops_per_s"] / 1e12, share_pct=r["share_pct"] or 0)
        for r in rounded(rows)
    ]
    lo = min(0.01, min(r["arithmetic_intensity"] for r in points) / 2)
    hi = max(1000.0, max(r["arithmetic_intensity"] for r in points) * 2)
    # One roof per GPU and compute roof the kernels used: DRAM's slope up to that roof's peak.
    roofs = []
    for dev, name in sorted({(r["device_name"] or "GPU", r["compute_roof"] or "?") for r in rows}):
        peaks = [r for r in rows if (r["device_name"] or "GPU") == dev and (r["compute_roof"] or "?") == name]
        ops = sorted(r["peak_ops_per_s"] for r in peaks)[len(peaks) // 2]
        bw = sorted(r["peak_dram_bytes_per_s"] for r in peaks)[len(peaks) // 2]
        ridge = ops / bw
        for ai in (lo, ridge, hi):
            roofs.append(
                {"roof": f"{name} ({dev})", "ai": ai, "tops": min(ops, ai * bw) / 1e12, "ridge": round(ridge, 2)}
            )
    return Frame({"roofs": rounded(roofs), "points": points})


def roofline_draw(alt: Any, f: Frame) -> Any:
    points = f.datasets["points"]
    x = alt.X("ai:Q", title="arithmetic intensity (operations per DRAM byte, log)", scale=alt.Scale(type="log"))
    y = alt.Y("tops:Q", title="tera-operations per second (FLOP and tensor ops, log)", scale=alt.Scale(type="log"))
    roof = (
        alt.Chart(alt.Data(name="roofs"))
        .mark_line(color="#333", strokeWidth=1.5)
        .encode(
            x=x,
            y=y,
            detail="roof:N",
            tooltip=[
                alt.Tooltip("roof:N", title="roof"),
                alt.Tooltip("ridge:Q", title="ridge (operations/byte)"),
                alt.Tooltip("tops:Q", title="roof (T/s)", format=".3g"),
            ],
        )
    )
    ends = (
        alt.Chart(alt.Data(name="roofs"))
        .transform_filter(alt.datum.ai >= alt.datum.ridge * 10)
        .mark_text(align="right", dy=-6, fontSize=10, color="#333")
        .encode(x=x, y=y, text="roof:N")
    )
    dots = (
        alt.Chart(alt.Data(name="points"))
        .mark_circle(opacity=0.8, stroke="#333", strokeWidth=0.5)
        .encode(
            x=alt.X("arithmetic_intensity:Q", scale=alt.Scale(type="log")),
            y=alt.Y("tops:Q", scale=alt.Scale(type="log")),
            size=alt.Size("share_pct:Q", title="share of GPU time (%)", scale=alt.Scale(range=[30, 600])),
            color=alt.Color(
                "bottleneck:N",
                scale=alt.Scale(**scale(BOTTLENECK_COLORS, {r["bottleneck"] for r in points if r["bottleneck"]})),
            ),
            tooltip=[
                alt.Tooltip("launch:N", title="kernel"),
                alt.Tooltip("arithmetic_intensity:Q", title="operations/byte", format=".3g"),
                alt.Tooltip("tops:Q", title="T/s", format=".3g"),
                alt.Tooltip("roof:N", title="bound by"),
                alt.Tooltip("roof_pct:Q", title="% of that roof", format=".0f"),
                alt.Tooltip("share_pct:Q", title="share of GPU time (%)", format=".1f"),
                alt.Tooltip("bottleneck:N"),
            ],
        )
    )
    return alt.layer(roof, ends, dots).properties(width=WIDTH - 260, height=320)


def throughput_frame(d: Diagnosis, rows: list[dict[str, Any]]) -> Frame:
    labels = ncu_labels(rows)
    data = [dict(r, label=labels[r["launch"]], share_pct=r["share_pct"] or 0) for r in rounded(rows)]
    return Frame({"data": data})


def throughput_draw(alt: Any, f: Frame) -> Any:
    guide = (
        alt.Chart(alt.Data(values=[{"v": 0}, {"v": 100}]))
        .mark_line(color="#999", strokeDash=[4, 4])
        .encode(x=alt.X("v:Q"), y=alt.Y("v:Q"))
    )
    dots = (
        alt.Chart(alt.Data(name="data"))
        .mark_circle(opacity=0.8, stroke="#333", strokeWidth=0.5)
        .encode(
            x=alt.X("mem_pct:Q", title="memory throughput (% of peak)", scale=alt.Scale(domain=[0, 100])),
            y=alt.Y("sm_pct:Q", title="compute (SM) throughput (% of peak)", scale=alt.Scale(domain=[0, 100])),
            size=alt.Size("share_pct:Q", title="share of GPU time (%)", scale=alt.Scale(range=[30, 600])),
            color=alt.Color(
                "bottleneck:N",
                scale=alt.Scale(**scale(BOTTLENECK_COLORS, {r["bottleneck"] for r in f.rows if r["bottleneck"]})),
            ),
            tooltip=[
                alt.Tooltip("launch:N", title="kernel"),
                alt.Tooltip("sm_pct:Q", title="SM (%)", format=".1f"),
                alt.Tooltip("mem_pct:Q", title="memory (%)", format=".1f"),
                alt.Tooltip("dram_pct:Q", title="DRAM (%)", format=".1f"),
                alt.Tooltip("tensor_pct:Q", title="tensor pipe (%)", format=".1f"),
                alt.Tooltip("share_pct:Q", title="share of GPU time (%)", format=".1f"),
                alt.Tooltip("bottleneck:N"),
            ],
        )
    )
    return alt.layer(guide, dots).properties(width=360, height=360)


NCU_CHARTS: list[ChartSpec] = [
    ChartSpec(
        "ncu-stalls",
        "ncu",
        "Warp-stall reasons of the hottest kernels",
        (
            "Why warps were not issuing, per profiled kernel (most GPU time first): long_scoreboard is waiting for "
            "global or local memory, barrier for __syncthreads, math_pipe_throttle for a busy pipe."
        ),
        stalls_frame,
        stalls_draw,
        dataset="ncu_stalls",
    ),
    ChartSpec(
        "ncu-occupancy",
        "ncu",
        "Achieved against theoretical occupancy",
        (
            "Bars: achieved occupancy; red ticks: the theoretical limit from registers, shared memory and block "
            "size (hover for the limiter). A bar far below its tick means tail effects or imbalance."
        ),
        occupancy_frame,
        occupancy_draw,
        dataset="ncu_occupancy",
    ),
    ChartSpec(
        "ncu-roofline",
        "ncu",
        "Roofline",
        lambda f: (
            "Each profiled kernel's operation rate (FLOPs and tensor-core operations) against its operations "
            "per DRAM byte, under the roofs it used on its GPU: the sloped roof is DRAM bandwidth, each flat one "
            "a compute peak (FP32, or the tensor cores for the kernel's data type) at the clock the kernel ran "
            "at, meeting at the ridge. A kernel's distance below its roof is the speed it leaves unused."
            + (f" {f.note}." if f.note else "")
        ),
        roofline_frame,
        roofline_draw,
        dataset="ncu_roofline",
    ),
    ChartSpec(
        "ncu-throughput",
        "ncu",
        "Compute against memory throughput",
        (
            "Each profiled kernel's SM and memory throughput as % of peak, sized by its share of GPU time. Kernels "
            "near neither axis' peak are latency-bound: too little parallel work or long dependency chains."
        ),
        throughput_frame,
        throughput_draw,
        dataset="ncu_throughput",
    ),
]
