"""The JSON contract of ``compare --format json``: the typed comparison that renderers read
(docs/json.md is generated from the field docs)."""

from __future__ import annotations

from dataclasses import dataclass

from nsight_doctor.errors import DoctorError
from nsight_doctor.model import Diagnosis
from nsight_doctor.sections import child


class CompareError(DoctorError):
    """The profiles cannot be compared as asked (a metric without a value, bad options)."""


@dataclass
class Profile:
    """One compared profile: its label, the path as given, and its diagnosis (as analyze gives it)."""

    label: str = child("the profile's label (--label, else the file's name)")
    path: str = child("the profile as given on the command line (files joined by commas)")
    diagnosis: Diagnosis = child("the diagnosis, as analyze gives it: inputs, summary, findings, notes")


@dataclass
class Row:
    """One quantity across the profiles."""

    key: str = child("a stable name for the quantity")
    label: str = child("what it is, in words")
    unit: str = child("ns, pct (0-100), count, bytes or ratio")
    better: str = child("lower, higher, or empty when neither is better")
    values: list[float | None] = child("one value per profile, in the order of profiles[] (null: not available)")
    change_pct: list[float | None] = child("each value's change from the first profile's, in % (null for the first)")


@dataclass
class PhaseRow:
    """A phase matched across profiles by GPU, name and occurrence (the second decode phase of
    GPU 0 matches the second decode phase of GPU 0)."""

    device_id: int = child("CUDA device id")
    phase: str = child("startup, warmup, prefill, decode, mixed, steady or idle (summary_phases.name)")
    occurrence: int = child("which phase of that name on that GPU, from 1")
    duration_ns: list[float | None] = child("per profile: the phase's duration, ns")
    busy_pct: list[float | None] = child("per profile: GPU busy time as % of the phase")
    steps: list[float | None] = child("per profile: steps in the phase")
    step_ns_median: list[float | None] = child("per profile: median step time, ns")
    step_ns_p90: list[float | None] = child("per profile: 90th percentile step time, ns")


@dataclass
class KernelRow:
    """A kernel (or CUDA graph) of the steady state matched across profiles."""

    name: str = child("the kernel's short name (the first profile's that has it)")
    match: str = child(
        "how it was matched: shape (same name, template arguments and launch shape), kernel (same name and "
        "template arguments, other launch shapes), or none (in one profile only)"
    )
    category: str | None = child("its kernel category (summary_steady_kernels.category)")
    shapes: list[str | None] = child("per profile: its launch shape, grid/block, or how many shapes it ran with")
    count_per_step: list[float | None] = child("per profile: executions per step (per steady state without steps)")
    mean_ns: list[float | None] = child("per profile: mean duration, ns")
    ns_per_step: list[float | None] = child("per profile: GPU time per step (per steady state without steps), ns")
    change_pct: list[float | None] = child("per profile: change of ns_per_step from the first profile's, %")


@dataclass
class NcuRow:
    """A kernel profiled by Nsight Compute in several profiles (summary.ncu.groups)."""

    kernel: str = child("the kernel's short name")
    match: str = child("launch (same name and launch configuration) or name (same name, other configurations)")
    launches: list[str | None] = child("per profile: the launch configuration, name<<<(grid),(block)>>>")
    duration_ns: list[float | None] = child("per profile: mean duration under the profiler, ns")
    achieved_occupancy_pct: list[float | None] = child("per profile: achieved occupancy, %")
    dram_pct: list[float | None] = child("per profile: DRAM throughput, % of peak")
    sm_pct: list[float | None] = child("per profile: SM throughput, % of peak")
    bottleneck: list[str | None] = child("per profile: memory-bound, compute-bound or latency-bound")
    roof: list[str | None] = child("per profile: the roof that bounds it (DRAM, L2, FP32, tensor BF16, ...)")
    regime: list[str | None] = child("per profile: memory or compute, its side of the roofline")
    roof_pct: list[float | None] = child("per profile: how close it comes to that roof, %")
    stalls: list[dict[str, float]] = child(
        "per profile: its warp-stall mix, reason -> % of its stalls (the top 4; summary_ncu_stalls)"
    )


@dataclass
class GpuRow:
    """One GPU's steady state across profiles (only when the profiles have the same GPUs)."""

    device_id: int = child("CUDA device id")
    busy_pct: list[float | None] = child("per profile: GPU busy time as % of its steady state")
    step_ns_median: list[float | None] = child("per profile: its median steady step time, ns")
    busy_per_step_ns: list[float | None] = child("per profile: GPU busy time per step, ns")
    idle_per_step_ns: list[float | None] = child("per profile: idle time per step, ns")
    comm_wait_per_step_ns: list[float | None] = child(
        "per profile: time per step its collectives waited for a slower GPU, ns"
    )
    comm_exposed_wait_per_step_ns: list[float | None] = child(
        "per profile: the part of comm_wait_per_step_ns with no other kernel running on the GPU, ns"
    )


@dataclass
class Deltas:
    """The quantities side by side. Per-step values are steady-state totals divided by steady
    steps (means); without steps in every profile they are steady-state totals (``basis``)."""

    basis: str = child("step (values per step) or steady (totals over the steady state, when a profile has no steps)")
    overview: list[Row] = child("the capture, the steady state and its step times")
    phases: list[PhaseRow] = child("each GPU's phases, matched by name and occurrence")
    step_time: list[Row] = child(
        "where a step's time goes on the GPU that sets the step time, adding up to its mean step: the GPU's busy "
        "time shared out by kernel category, CUDA graphs and copies, and the idle parts (steady_gpus.step_parts)"
    )
    kernel_categories: list[Row] = child("kernel time per step by category, over every GPU's steady state")
    kernels: list[KernelRow] = child("the top kernels matched across profiles, most time first")
    transfers: list[Row] = child("copies and blocking (synchronising) calls")
    gpus: list[GpuRow] = child("per GPU, when every profile has the same GPUs")
    ncu: list[NcuRow] = child("kernels that Nsight Compute profiled in several profiles")


@dataclass
class FindingChange:
    """A finding matched across two profiles by rule and subject."""

    rule_id: str = child("the rule")
    subject: str = child("what the finding is about: its kernels (kernel findings), its GPU (GPU N), or the capture")
    status: str = child(
        "resolved (only in the baseline), new (only in the candidate), changed, unchanged, or hidden (only in the "
        "baseline, about kernels that the candidate's CUDA graphs, traced whole, keep out of sight)"
    )
    title: str = child("the finding's title (the candidate's where it has it)")
    severity: str = child("its severity")
    baseline_impact_ns: float | None = child("its impact in the baseline, ns (null: not there)")
    candidate_impact_ns: float | None = child("its impact in the candidate, ns")
    baseline_share_pct: float | None = child("the impact as % of its window in the baseline")
    candidate_share_pct: float | None = child("the same in the candidate")
    change_pct: float | None = child("the change of the share, % (null unless both have it)")


@dataclass
class FindingsDiff:
    baseline: str = child("the baseline's label (the first profile)")
    candidate: str = child("the candidate's label")
    changes: list[FindingChange] = child("new, resolved, hidden, changed and unchanged findings, largest impact first")


@dataclass
class CompareWarning:
    code: str = child(
        "gpu-model, gpu-count, capture-length, kernel-mix, no-steady-state, no-steps, graph-trace, launch-shapes, "
        "step-work, launch, capture-settings or ncu"
    )
    message: str = child("what differs and what it means for the comparison")


@dataclass
class Cause:
    """A component of the step time whose change explains the difference."""

    role: str = child(
        "main (it moved most in the direction of the difference), also (the next, when it moved at least 30% as "
        "much), offset (it moved the other way), or wait (another GPU's waiting in collectives for this one)"
    )
    component: str = child(
        "idle:<cause> (gpu_gaps causes), wait:collectives, gpu:<kernel category>, gpu:cuda-graph, "
        "gpu:memcpy or gpu:memset"
    )
    label: str = child("the component in words")
    device_id: int | None = child("the GPU it was measured on")
    baseline_ns: float = child("per step (or over the steady state) in the baseline, ns")
    candidate_ns: float = child("the same in the candidate, ns")
    baseline_share_pct: float | None = child("as % of the baseline's steady state")
    candidate_share_pct: float | None = child("as % of the candidate's steady state")


@dataclass
class Verdict:
    text: str = child("the verdict in plain words, with the numbers behind it")
    baseline: str = child("the baseline's label")
    candidate: str = child("the candidate's label (the last profile)")
    metric: str | None = child("the metric the verdict is about (see gate), null when none applies")
    baseline_value: float | None = child("the metric in the baseline")
    candidate_value: float | None = child("the metric in the candidate")
    ratio: float | None = child("candidate / baseline")
    direction: str = child("faster, slower, same, or unknown")
    causes: list[Cause] = child(
        "the components of the step time that explain the difference, main first (none when the steps do "
        "different work and a work-normalised metric is compared)"
    )
    notes: list[str] = child("what else the reader must know: different work per step, per-token times")


@dataclass
class Gate:
    metric: str = child("the gate's metric (docs/compare.md lists them)")
    label: str = child("the metric in words")
    baseline: float | None = child("its value in the first profile")
    candidate: float | None = child("its value in the last profile")
    change_pct: float | None = child("(candidate - baseline) / baseline, %: positive is worse")
    threshold_pct: float | None = child("--fail-on-regression, null when not given")
    failed: bool = child("whether the change is worse than the threshold (exit code 1)")


@dataclass
class Comparison:
    profiles: list[Profile] = child("the profiles, baseline first")
    deltas: Deltas = child("the quantities side by side")
    findings_diff: list[FindingsDiff] = child("for each candidate, its findings against the baseline's")
    warnings: list[CompareWarning] = child("why the profiles may not be comparable")
    verdict: Verdict = child("the last profile against the first, in words")
    gate: Gate = child("the regression gate: the last profile against the first on one metric")
