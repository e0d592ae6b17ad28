"""What every chart shares: the Chart record, the fixed colours, how a chart's Vega-Lite dict is
finished with its data inline and rounded, and the export to PNG and SVG."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsight_doctor.model import Diagnosis

WIDTH = 720


# Colours that mean the same thing in every chart. Kernel categories follow the taxonomy
# (store/kernel_categories.yaml; tests/test_report.py checks that every category is here).
CATEGORY_COLORS = {
    "gemm": "#4e79a7",
    "attention": "#f28e2b",
    "attention-unfused": "#ffbe7d",
    "norm": "#59a14f",
    "activation": "#8cd17d",
    "rotary": "#b6992d",
    "kv-cache": "#e15759",
    "communication": "#ff9d9a",
    "moe": "#79706e",
    "sampling": "#d37295",
    "embedding": "#fabfd2",
    "quantization": "#b07aa1",
    "ssm": "#d4a6c8",
    "elementwise": "#499894",
    "reduction": "#86bcb6",
    "memcpy": "#9d7660",
    "memset": "#d7b5a6",
    "cuda-graph": "#3b3b98",
    "other": "#bab0ac",
}


CPU_COLORS = {
    "launch": "#4e79a7",
    "graph_launch": "#3b3b98",
    "sync": "#e15759",
    "memcpy": "#9d7660",
    "memset": "#d7b5a6",
    "alloc": "#f28e2b",
    "other": "#bab0ac",
    "nvtx depth 0": "#76b900",
    "nvtx depth 1": "#a5d65a",
    "nvtx depth 2": "#cde8a8",
}


CAUSE_COLORS = {
    "launch": "#4e79a7",
    "sync": "#e15759",
    "cpu": "#f28e2b",
    "api": "#b07aa1",
    "queued": "#bab0ac",
}


BOTTLENECK_COLORS = {"memory-bound": "#4e79a7", "compute-bound": "#e15759", "latency-bound": "#f28e2b"}


SERIES_COLORS = {
    "busy (traced operations)": "#76b900",
    "SMs active (sampled)": "#4e79a7",
    "tensor cores active (sampled)": "#e15759",
    "DRAM read bandwidth (sampled)": "#f28e2b",
}


STALL_TOP = 8  # stall reasons drawn by name; the rest are summed as "other"


@dataclass
class Chart:
    id: str  # anchor and file name: chart-<id>, <id>.png
    section: str  # where the report shows it
    title: str
    caption: str  # how to read it (may hold NVTX text: escape it)
    spec: dict[str, Any]  # Vega-Lite, data inline
    source: str  # provenance: the SQL that gives its data, or the summary view


SECTIONS = {
    "timeline": "Timeline",
    "time": "Where the GPU time goes",
    "steps": "Steps",
    "idle": "Idle time",
    "copies": "Copies",
    "ncu": "Kernels under Nsight Compute",
}


@dataclass
class Frame:
    """A chart's data: its datasets by name, put inline in its spec ("data" unless it has several),
    what drawing it needs besides (``facts``), and the note of the dataset it was read from."""

    datasets: dict[str, list[dict[str, Any]]]
    facts: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.datasets["data"]


@dataclass(frozen=True)
class ChartSpec:
    """One chart of the report, as data. ``prepare`` turns the rows of ``dataset`` (an entry of
    Diagnosis.datasets, whose SQL is the chart's provenance) or, without one, the diagnosis'
    summary (``source`` then names what it reads) into the chart's Frame, None when the profile
    lacks them; ``draw`` gives the Altair chart of a Frame; ``caption`` says how to read it (a
    function of the Frame where it depends on the data). ``make`` builds every chart from these."""

    id: str  # anchor and file name: chart-<id>, <id>.png
    section: str  # a key of SECTIONS
    title: str
    caption: str | Callable[[Frame], str]
    prepare: Callable[[Diagnosis, list[dict[str, Any]]], Frame | None]
    draw: Callable[[Any, Frame], Any]
    dataset: str | None = None
    source: str = ""


def make(alt: Any, spec: ChartSpec, d: Diagnosis) -> Chart | None:
    """The one builder: the chart of ``spec`` for the diagnosis, None when its data is missing."""
    if spec.dataset is not None:
        ds = d.datasets.get(spec.dataset)
        if not ds or not ds.rows:
            return None
        rows, note, source = ds.rows, ds.note, ds.sql
    else:
        rows, note, source = [], "", spec.source
    frame = spec.prepare(d, rows)
    if frame is None:
        return None
    frame.note = note
    caption = spec.caption(frame) if callable(spec.caption) else spec.caption
    return Chart(
        spec.id, spec.section, spec.title, caption, finish(alt, spec.draw(alt, frame), **frame.datasets), source
    )


def finish(alt: Any, chart: Any, **datasets: list[dict[str, Any]]) -> dict[str, Any]:
    """The chart's Vega-Lite dict, with its data put in by name (Altair would wrap every row in a
    schema object, which is slow for thousands of rows)."""
    spec = chart.configure(
        font="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif",
        background="white",
        padding=6,
    ).configure_axis(labelFontSize=11, titleFontSize=12, labelLimit=380, gridColor="#eceff3", labelOverlap=True)
    spec = spec.configure_legend(labelFontSize=11, titleFontSize=12, labelLimit=260).configure_view(stroke=None)
    out: dict[str, Any] = spec.to_dict(validate=False)
    out["datasets"] = {**out.get("datasets", {}), **datasets}
    return out


def rounded(rows: list[dict[str, Any]], digits: int = 4) -> list[dict[str, Any]]:
    """Floats to `digits` significant digits: smaller reports, the same pictures."""

    def r(v: Any) -> Any:
        if isinstance(v, float) and v and math.isfinite(v):
            return round(v, max(0, digits - 1 - math.floor(math.log10(abs(v)))))
        return v

    return [{k: r(v) for k, v in row.items()} for row in rows]


def scale(colors: dict[str, str], present: set[str]) -> dict[str, Any]:
    """A colour scale of the fixed colours, listing only the values that occur."""
    domain = [k for k in colors if k in present] + sorted(present - colors.keys())
    return {"domain": domain, "range": [colors.get(k, "#bab0ac") for k in domain]}


def export(charts: list[Chart], folder: str | Path) -> list[Path]:
    """Writes each chart as <id>.svg and <id>.png (2x scale) into folder; returns the paths."""
    import vl_convert as vlc

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for c in charts:
        svg = out / f"{c.id}.svg"
        svg.write_text(vlc.vegalite_to_svg(c.spec))
        png = out / f"{c.id}.png"
        png.write_bytes(vlc.vegalite_to_png(c.spec, scale=2))
        written += [svg, png]
    return written


def to_svg(chart: Chart) -> str:
    import vl_convert as vlc

    return str(vlc.vegalite_to_svg(chart.spec))
