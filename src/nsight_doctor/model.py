"""The data that flows out of the pipeline: rules, findings and the finished diagnosis.

Renderers import only this module: they turn a Diagnosis into text and never query a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEVERITIES = ["info", "low", "medium", "high", "critical"]

# The fixed tag vocabulary (docs/tags.md explains each one).
TAGS = [
    "launch-bound", "cpu-bound", "host-sync", "idle-gaps", "memcpy", "pageable-memory",
    "memory-bound", "compute-bound", "latency-bound", "low-occupancy", "small-grid",
    "attention", "kv-cache", "communication", "tensor-cores", "profile-health",
]


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def fmt_ns(ns: float) -> str:
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
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


@dataclass
class Skipped:
    rule_id: str
    reason: str


@dataclass
class Diagnosis:
    tool: dict[str, str]
    command: str
    inputs: list[dict[str, Any]]
    summary: dict[str, Any]
    findings: list[Finding]
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
