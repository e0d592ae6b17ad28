"""The summary's Nsight Compute sections: the reports, and per launch configuration its
metrics and warp-stall mix (summary_ncu*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nsight_doctor.sections.base import Section, child


@dataclass
class NcuReport(Section):
    VIEW: ClassVar[str] = "summary_ncu_reports"
    path: str
    ncu_version: str | None
    kernels: int | None


@dataclass
class NcuStall(Section):
    """One stall reason of a launch configuration; the view's launch places it."""

    VIEW: ClassVar[str] = "summary_ncu_stalls"
    reason: str
    ratio: float
    share_pct: float | None

    @classmethod
    def columns(cls) -> list[str]:
        return ["launch", *super().columns()]


@dataclass
class NcuGroup(Section):
    VIEW: ClassVar[str] = "summary_ncu_groups"
    LIMIT: ClassVar[int | None] = 15
    launch: str | None
    name: str | None
    family: str | None
    profiled: int
    bottleneck: str | None
    share_pct: float | None
    time_basis: str
    weight_ns: float | None
    duration_ns: float | None
    sm_pct: float | None
    mem_pct: float | None
    dram_pct: float | None
    achieved_occupancy_pct: float | None
    waves_per_sm: float | None
    tensor_pct: float | None
    top_stall: str | None
    arithmetic_intensity: float | None
    roof: str | None
    regime: str | None
    roof_pct: float | None
    owner: str | None
    stalls: list[NcuStall] = child("its warp-stall mix, most stalls first (summary_ncu_stalls)", [])


@dataclass
class Ncu(Section):
    VIEW: ClassVar[str] = "summary_ncu"
    reports: list[NcuReport] = child("the reports (summary_ncu_reports)")
    kernels_profiled: int = 0
    launch_configs: int = 0
    memory_bound: int = 0
    compute_bound: int = 0
    latency_bound: int = 0
    with_stall_reasons: int = 0
    with_cache_metrics: int = 0
    with_roofline_metrics: int = 0
    profiled_ns: float | None = None
    coverage_pct: float | None = None
    groups: list[NcuGroup] = child("per launch configuration, most GPU time first (summary_ncu_groups)", [])
