"""The data that flows out of the pipeline: rules, findings and the finished diagnosis.

Renderers import only this module: they turn a Diagnosis into text and never query a database.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the summary's 70 dataclasses cost 25 ms to import; `rules list` needs none
    from nsight_doctor.sections import Summary

SEVERITIES = ["info", "low", "medium", "high", "critical"]

# What a finding is about, in rank order: the steady state of the workload, one-time start-up
# and warm-up, or the capture itself (profile notes).
SCOPES = {
    "steady": "the workload's steady state; impact is time in it",
    "startup": "one-time start-up and warm-up; ranked after every steady-state finding",
    "capture": "the profile itself rather than the workload (a profile note; impact is 0)",
}

# The fixed tag vocabulary, with what each tag means (docs/tags.md is generated from it).
TAGS = {
    "launch-bound": "The GPU waits for the CPU to launch many small kernels one by one.",
    "cpu-bound": "The GPU waits while the CPU runs code outside CUDA.",
    "host-sync": "The CPU blocks on the GPU (synchronize calls, blocking copies), draining the GPU's queue.",
    "idle-gaps": "Time with no work on a GPU.",
    "gpu-bound": "The GPU is busy nearly all the time: its kernels, not the CPU, set the pace.",
    "memcpy": "Memory copies between host and device or between devices.",
    "pageable-memory": "Copies through pageable (not page-locked) host memory.",
    "memory-bound": "Kernels limited by DRAM or cache bandwidth.",
    "compute-bound": "Kernels limited by an SM pipe (FMA, tensor cores, ...).",
    "latency-bound": "Kernels limited by neither: too little parallel work, long dependency chains.",
    "low-occupancy": "Few warps resident per SM (registers, shared memory, block size).",
    "small-grid": "Grids too small to fill every SM, or a tail effect.",
    "attention": "Attention kernels (FlashAttention, paged attention, SDPA).",
    "kv-cache": "Reading and writing the KV cache.",
    "communication": "Collective communication (NCCL, custom all-reduce).",
    "tensor-cores": "Use of the tensor cores.",
    "profile-health": "Problems with the capture itself rather than the workload.",
}


# Longest name shown in a title, message or summary line; the store, the JSON evidence and
# --db keep strings whole (C++ template kernel names reach tens of KB). Prose that a rule
# composes (sentences: it holds ". " or ends with ".") may be longer.
DISPLAY_MAX = 200
PROSE_MAX = 2000
DISPLAY_TAIL = 40
# A name in a finding's title: the title stays one readable line; the message and the
# evidence name it in full.
TITLE_NAME_MAX = 60


def clip(text: Any, limit: int = DISPLAY_MAX) -> str:
    """A string shortened for display, keeping its start and its end (where template
    arguments close): "void f<...long...>(int)" -> "void f<...… 12,345 characters …>(int)"."""
    text = str(text)
    if len(text) <= limit:
        return text
    marker = f" … {len(text):,} characters … "
    head = max(0, limit - DISPLAY_TAIL - len(marker))
    return text[:head] + marker + text[-DISPLAY_TAIL:]


def is_name(text: str) -> bool:
    """Whether a value reads as a name (a kernel, a launch configuration, a range) rather than
    words a rule composed: no space outside its brackets, but for a C++ return type."""
    depth = 0
    outside = []
    for ch in text.removeprefix("void "):
        if ch in "<([":
            depth += 1
        elif ch in ">)]" and depth:
            depth -= 1
        elif depth == 0:
            outside.append(ch)
    return " " not in "".join(outside).strip()


def short_name(text: str, limit: int = TITLE_NAME_MAX) -> str:
    """A name cut to `limit` characters for a title, keeping its start (the function) and a
    little of its end: "cudnn_generated_fort_native_sdpa_sm80_flas…x1_cga1x1x1_kernel0_0"."""
    if len(text) <= limit:
        return text
    tail = limit // 3
    return text[: limit - tail - 1] + "…" + text[-tail:]


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


# The severity scale, one for every rule: the share of the finding's window (its GPU's steady
# state; for start-up findings, the activity window) that a fix would recover, at least this
# many percent. A rule's own severity is the most its findings can be; one-time start-up costs
# are at most medium, and notes on the capture keep the rule's own (they recover no time).
SEVERITY_SCALE = (("high", 20.0), ("medium", 5.0), ("low", 0.0))
STARTUP_CEILING = "medium"


def severity_for(share_pct: float | None, ceiling: str, scope: str) -> str:
    """A finding's severity from the share of its window it recovers (None: unknown, the
    rule's own)."""
    if scope == "capture" or share_pct is None:
        return ceiling
    graded = next(sev for sev, pct in SEVERITY_SCALE if share_pct >= pct)
    if scope == "startup":
        ceiling = min(ceiling, STARTUP_CEILING, key=severity_rank)
    return min(graded, ceiling, key=severity_rank)


def scope_rank(scope: str) -> int:
    return list(SCOPES).index(scope)


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "n/a"  # unknown (a damaged input's missing value), never a crash in a renderer
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


@dataclass
class Threshold:
    name: str
    default: Any
    doc: str
    value: Any = None

    @property
    def effective(self) -> Any:
        return self.default if self.value is None else self.value


@dataclass
class Rule:
    id: str
    name: str
    title: str
    severity: str
    tags: list[str]
    requires: list[str]
    thresholds: dict[str, Threshold]
    query: str
    message: str
    recommendation: str
    impact: str
    explanation: dict[str, str]
    references: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)
    scope: str = "steady"
    path: Path | None = None
    test_path: Path | None = None


@dataclass
class Finding:
    rule_id: str
    title: str
    severity: str
    tags: list[str]
    impact_ns: int
    message: str
    recommendation: str
    evidence: dict[str, Any]
    references: list[dict[str, str]] = field(default_factory=list)
    scope: str = "steady"
    # The time the impact is a share of: the GPU's steady state (or, for start-up findings,
    # its activity window), from the finding's own window_ns where the rule gives one.
    window_ns: int | None = None
    # What the finding counts as its impact, where findings may share it: the kernels (ncu
    # launch configurations) of a kernel finding. Findings that share a claim overlap: their
    # impacts are not additive (ranking numbers them in `overlaps`).
    claims: list[str] = field(default_factory=list)
    overlaps: list[int] = field(default_factory=list)
    # The rule's templates and the row that filled them, so that a renderer can fill them
    # again with the values escaped for its format (kernel names and NVTX text are
    # untrusted; the rule's own text is not).
    templates: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    # Provenance: the SQL that produced the evidence, runnable as it is against the store
    # (--db): "query" is the rule's query with its thresholds written in as literals, and each
    # detail table's query also has the finding's own row values written in.
    queries: dict[str, str] = field(default_factory=dict)

    def render(self, name: str, escape: Callable[[str], str] | None = None) -> str:
        if name not in self.templates:
            return getattr(self, name)
        return fill(self.templates[name], self.values, escape, TITLE_NAME_MAX if name == "title" else None)


@dataclass
class Skipped:
    rule_id: str
    reason: str


@dataclass
class Dataset:
    """A small table for a report's chart, read from the documented views (report_data.py).
    ``sql`` has every value written in: it gives these rows again on the kept store."""

    sql: str
    rows: list[dict[str, Any]]
    note: str = ""  # how the rows were chosen or bounded (a window, a sample, bins)


@dataclass
class Diagnosis:
    tool: dict[str, str]
    command: str
    inputs: list[dict[str, Any]]
    summary: Summary
    findings: list[Finding]
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Only when a report with charts was asked for (AnalyzeOptions.report_data), by name.
    datasets: dict[str, Dataset] = field(default_factory=dict)
    store_path: str | None = None  # the DuckDB store, when it was kept (--db)


class TemplateFormatter(string.Formatter):
    """str.format with units: {x:ns} durations, {x:us} microseconds, {x:pct} percentages
    (0-100), {x:bytes} sizes, {x:int} counts with thousands separators, and {x:int copy/copies}
    a count with its noun, singular for 1. Each filled value passes through `escape`, so that
    renderers can make untrusted strings safe."""

    def __init__(self, escape: Callable[[str], str] | None = None, name_max: int | None = None):
        self.escape = escape or (lambda s: s)
        self.name_max = name_max  # names (not prose) shortened further, as in a title

    def format_field(self, value: Any, spec: str) -> str:
        return self.escape(self.plain(value, spec))

    def plain(self, value: Any, spec: str) -> str:
        if value is None:
            return "n/a"
        if spec == "ns":
            return fmt_ns(value)
        if spec == "us":
            return f"{value / 1e3:,.1f} µs"
        if spec == "pct":
            return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"
        if spec == "bytes":
            return fmt_bytes(value)
        if spec == "int":
            return f"{round(value):,}"
        if spec.startswith("int ") and "/" in spec:
            one, many = spec[4:].split("/", 1)
            return f"{round(value):,} {one if round(value) == 1 else many}"
        text = super().format_field(value, spec)
        if not isinstance(value, str):
            return text
        prose = ". " in text or text.rstrip().endswith(".")
        if self.name_max and is_name(text):
            return short_name(text, self.name_max)
        return clip(text, PROSE_MAX if prose else DISPLAY_MAX)


def fill(
    template: str, values: dict[str, Any], escape: Callable[[str], str] | None = None, name_max: int | None = None
) -> str:
    return TemplateFormatter(escape, name_max).vformat(template, (), values)
