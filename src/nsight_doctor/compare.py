"""Comparing profiles of the same workload run in different configurations: side by side, per
phase, with a verdict that names the main cause of the difference, and a regression gate.

``compare(profiles)`` takes finished diagnoses (one per profile, from ``engine.analyze``) and
returns a typed ``Comparison``. Every number in it is a field of one profile's summary
(sections.py), or a sum, ratio or difference of such fields: nothing is measured again, so that
``compare`` shows for each profile exactly what ``analyze`` shows for it.

Per-step values divide a steady-state total (summary_steady_gpus and its children) by the
steady steps of the same GPU: they are means over the steady state, whereas step times
(``step_ns_median``) are medians. The first profile is the baseline; every other one is a
candidate compared with it, and the gate compares the last one with the first.

The dataclasses below are the JSON contract of ``compare --format json`` (docs/json.md is
generated from their field docs). Renderers read them and never query a store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from nsight_doctor.errors import DoctorError
from nsight_doctor.model import Diagnosis, Finding, fmt_ns
from nsight_doctor.sections import SteadyGpu, Summary, child

# A difference smaller than this (in %) is reported as no difference.
SAME_PCT = 3.0
# A finding whose impact (as a share of its window) moved less than this (relative %) is unchanged.
FINDING_CHANGE_PCT = 10.0
# Comparability bounds.
CAPTURE_RATIO_WARN = 4.0  # GPU activity windows this many times apart
KERNEL_MIX_WARN_PCT = 50.0  # less than this share of kernel time in kernel names both profiles ran
SHAPE_CHANGE_WARN_PCT = 50.0  # at least this share of matched kernel time runs with other launch shapes


class CompareError(DoctorError):
    """The profiles cannot be compared as asked (a metric without a value, bad options)."""


# ---------------------------------------------------------------------------------------------
# The JSON contract


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


@dataclass
class Deltas:
    """The quantities side by side. Per-step values are steady-state totals divided by steady
    steps (means); without steps in every profile they are steady-state totals (``basis``)."""

    basis: str = child("step (values per step) or steady (totals over the steady state, when a profile has no steps)")
    overview: list[Row] = child("the capture, the steady state and its step times")
    phases: list[PhaseRow] = child("each GPU's phases, matched by name and occurrence")
    step_time: list[Row] = child(
        "where a step's time goes on the GPU that sets the step time: GPU work by kernel category, CUDA "
        "graphs, copies, and idle time by gap cause, per step"
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
    status: str = child("resolved (only in the baseline), new (only in the candidate), changed or unchanged")
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
    changes: list[FindingChange] = child("resolved, new, changed and unchanged findings, largest impact first")


@dataclass
class CompareWarning:
    code: str = child(
        "gpu-model, gpu-count, capture-length, kernel-mix, no-steady-state, no-steps, graph-trace, launch-shapes or ncu"
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
    causes: list[Cause] = child("the components of the step time that explain the difference, main first")
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


# ---------------------------------------------------------------------------------------------
# Metrics: each a value of one profile's summary (ns; lower is better)


def step_gpu(s: Summary) -> SteadyGpu | None:
    """The GPU whose steps give the profile's step time (summary_steady_state: the GPU with the
    most steps)."""
    st = s.steady_state
    if not s.steady_gpus:
        return None
    if st is not None:
        for g in s.steady_gpus:
            if g.steps == st.steps and g.step_ns_median == st.step_ns_median:
                return g
    return max(s.steady_gpus, key=lambda g: (g.steps or 0, -g.device_id))


def decode_kind(g: SteadyGpu | None):
    return next((k for k in g.step_kinds if k.kind == "decode"), None) if g else None


def per_step(g: SteadyGpu | None, ns: float | None) -> float | None:
    if g is None or ns is None or not g.steps:
        return None
    return ns / g.steps


@dataclass(frozen=True)
class Metric:
    name: str
    label: str  # "median decode step time"
    per: str  # how the verdict says it: "per decode step"
    doc: str
    value: Callable[[Summary, float | None], float | None]  # (summary, tokens per step)
    missing: str  # why a profile may lack it


def _token(s: Summary, tokens: float | None) -> float | None:
    g = step_gpu(s)
    k = decode_kind(g)
    step = k.step_ns_median if k else (s.steady_state.step_ns_median if s.steady_state else None)
    return step / tokens if step is not None and tokens else None


def _decode(s: Summary) -> float | None:
    k = decode_kind(step_gpu(s))
    return k.step_ns_median if k else None


def _per_step(s: Summary, column: str) -> float | None:
    g = step_gpu(s)
    return per_step(g, getattr(g, column)) if g else None


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "decode_step",
            "median decode step time",
            "per decode step",
            "the median time of the steady decode steps (summary_step_kinds, kind decode, of the GPU that "
            "sets the step time): the time per output token of one sequence",
            lambda s, _: _decode(s),
            "no decode steps were found",
        ),
        Metric(
            "step",
            "median step time",
            "per step",
            "the median steady-state step time (summary_steady_state.step_ns_median)",
            lambda s, _: s.steady_state.step_ns_median if s.steady_state else None,
            "no steps were found in the steady state",
        ),
        Metric(
            "step_p90",
            "90th percentile step time",
            "at the 90th percentile step",
            "the 90th percentile of the steady-state step time (summary_steady_state.step_ns_p90)",
            lambda s, _: s.steady_state.step_ns_p90 if s.steady_state else None,
            "no steps were found in the steady state",
        ),
        Metric(
            "token",
            "time per token",
            "per token",
            "the median decode step time (the median step time without decode steps) divided by --tokens-per-step",
            _token,
            "it needs --tokens-per-step and steps",
        ),
        Metric(
            "busy_per_step",
            "GPU busy time per step",
            "in GPU busy time per step",
            "the GPU's busy time in its steady state per step (summary_steady_gpus.busy_ns / steps): the GPU "
            "work of a step, without its idle time",
            lambda s, _: _per_step(s, "busy_ns"),
            "no steps were found in the steady state",
        ),
        Metric(
            "idle_per_step",
            "GPU idle time per step",
            "in GPU idle time per step",
            "the GPU's idle time in its steady state per step (summary_steady_gpus.idle_ns / steps)",
            lambda s, _: _per_step(s, "idle_ns"),
            "no steps were found in the steady state",
        ),
        Metric(
            "gpu_window",
            "GPU activity window",
            "over the GPU activity window",
            "the time from the first to the last GPU operation (summary.gpu_window_ns): comparable only "
            "when the profiles ran the same work",
            lambda s, _: s.capture.gpu_window_ns or None,
            "it has no GPU activity",
        ),
    )
}
DEFAULT_METRICS = ("token", "decode_step", "step", "gpu_window")


def metric_values(m: Metric, profiles: Sequence[Profile], tokens: Sequence[float | None]) -> list[float | None]:
    return [m.value(p.diagnosis.summary, t) for p, t in zip(profiles, tokens)]


def choose_metric(profiles: Sequence[Profile], tokens: Sequence[float | None], name: str | None) -> Metric | None:
    """The asked metric, or the first default that every profile has."""
    if name is not None:
        if name not in METRICS:
            raise CompareError(f"no metric '{name}' (choose one of: {', '.join(METRICS)})")
        return METRICS[name]
    for n in DEFAULT_METRICS:
        if all(v is not None for v in metric_values(METRICS[n], profiles, tokens)):
            return METRICS[n]
    return None


# ---------------------------------------------------------------------------------------------
# Small helpers


def change(base: float | None, value: float | None) -> float | None:
    if base is None or value is None or base == 0:
        return None
    return 100.0 * (value - base) / abs(base)


def make_row(key: str, label: str, unit: str, values: list[float | None], better: str = "lower") -> Row:
    first = values[0] if values else None
    return Row(key, label, unit, better, values, [None, *(change(first, v) for v in values[1:])])


def present(rows: list[Row]) -> list[Row]:
    """Rows with a value in at least one profile."""
    return [r for r in rows if any(v is not None for v in r.values)]


def pct_text(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"


CAUSE_LABELS = {
    "idle:launch": "waiting for kernel launches",
    "idle:sync": "idle time after host synchronisation",
    "idle:cpu": "waiting for the CPU (work outside CUDA)",
    "idle:api": "waiting in other CUDA calls",
    "idle:queued": "gaps with work already queued",
    "idle:setup": "one-time setup",
    "wait:collectives": "waiting in collectives for a slower GPU",
    "gpu:cuda-graph": "CUDA graph execution",
    "gpu:memcpy": "copies",
    "gpu:memset": "memsets",
    "gpu:gemm": "GEMM kernels",
    "gpu:communication": "collective transfers",
}


def component_label(key: str) -> str:
    if key in CAUSE_LABELS:
        return CAUSE_LABELS[key]
    kind, _, name = key.partition(":")
    return f"{name} kernels" if kind == "gpu" else f"idle ({name})"


def components(g: SteadyGpu) -> dict[str, float]:
    """Where a GPU's steady-state time went: its GPU work (summed durations, by kernel category,
    CUDA graphs, copies, memsets; collectives split into transfer and waiting) and its idle time
    by gap cause. Totals over the steady state, ns."""
    out: dict[str, float] = {}
    for c in g.kernel_categories:
        key = f"gpu:{c.category or 'other'}"
        out[key] = out.get(key, 0) + c.total_ns
    if g.comm_wait_ns and "gpu:communication" in out:
        out["gpu:communication"] -= g.comm_wait_ns
        out["wait:collectives"] = g.comm_wait_ns
    for key, ns in (("gpu:cuda-graph", g.graph_ns), ("gpu:memcpy", g.memcpy_ns), ("gpu:memset", g.memset_ns)):
        if ns:
            out[key] = ns
    for i in g.idle:
        out[f"idle:{i.cause}"] = out.get(f"idle:{i.cause}", 0) + i.total_ns
    return out


def divisor(g: SteadyGpu | None, basis: str) -> float | None:
    if g is None:
        return None
    if basis == "step":
        return float(g.steps) if g.steps else None
    return 1.0


def kernel_key_name(launch: str) -> str:
    return launch.split("<<<", 1)[0]


# ---------------------------------------------------------------------------------------------
# Deltas


def overview_rows(profiles: Sequence[Profile], tokens: Sequence[float | None]) -> list[Row]:
    sums = [p.diagnosis.summary for p in profiles]
    gpus = [step_gpu(s) for s in sums]
    kinds = [decode_kind(g) for g in gpus]

    def by_gpu(f: Callable[[SteadyGpu], float | None]) -> list[float | None]:
        return [per_step(g, f(g)) if g else None for g in gpus]

    rows = [
        make_row("capture_ns", "Capture", "ns", [s.capture.capture_ns for s in sums], ""),
        make_row("gpu_window_ns", "GPU activity window", "ns", [s.capture.gpu_window_ns for s in sums], ""),
        make_row("gpu_busy_pct", "GPU busy (activity window)", "pct", [s.capture.gpu_busy_pct for s in sums], "higher"),
        make_row(
            "steady_share_pct",
            "Steady state (% of the window)",
            "pct",
            [s.steady_state.share_pct if s.steady_state else None for s in sums],
            "",
        ),
        make_row(
            "steady_busy_pct",
            "GPU busy (steady state)",
            "pct",
            [s.steady_state.busy_pct if s.steady_state else None for s in sums],
            "higher",
        ),
        make_row(
            "steps",
            "Steady steps",
            "count",
            [float(s.steady_state.steps) if s.steady_state and s.steady_state.steps else None for s in sums],
            "",
        ),
        make_row("step_ns_median", "Step time, median", "ns", [METRICS["step"].value(s, None) for s in sums]),
        make_row("step_ns_p90", "Step time, p90", "ns", [METRICS["step_p90"].value(s, None) for s in sums]),
    ]
    decode = [
        make_row("decode_steps", "Decode steps", "count", [float(k.steps) if k else None for k in kinds], ""),
        make_row(
            "decode_step_ns_median", "Decode step, median", "ns", [k.step_ns_median if k else None for k in kinds]
        ),
        make_row("decode_step_ns_p90", "Decode step, p90", "ns", [k.step_ns_p90 if k else None for k in kinds]),
    ]
    # Only when the decode steps are not all the steady steps.
    if [r.values for r in decode] != [r.values for r in rows[-3:]]:
        rows += decode
    if any(tokens):
        rows.append(make_row("tokens_per_step", "Tokens per step (given)", "count", list(tokens), ""))
        rows.append(make_row("token_ns", "Time per token", "ns", [_token(s, t) for s, t in zip(sums, tokens)]))
    rows += [
        make_row("busy_per_step_ns", "GPU busy per step", "ns", by_gpu(lambda g: g.busy_ns)),
        make_row("idle_per_step_ns", "GPU idle per step", "ns", by_gpu(lambda g: g.idle_ns)),
        make_row("kernels_per_step", "Kernels per step", "count", by_gpu(lambda g: g.kernels)),
        make_row("graphs_per_step", "CUDA graph launches per step", "count", by_gpu(lambda g: g.graphs or None), ""),
        make_row(
            "kernel_ns_per_step", "Kernel + graph time per step", "ns", by_gpu(lambda g: g.kernel_ns + g.graph_ns)
        ),
    ]
    return present(rows)


def phase_rows(profiles: Sequence[Profile]) -> list[PhaseRow]:
    n = len(profiles)
    table: dict[tuple[int, str, int], PhaseRow] = {}
    order: list[tuple[int, str, int]] = []
    for i, p in enumerate(profiles):
        seen: dict[tuple[int, str], int] = {}
        for ph in p.diagnosis.summary.phases:
            occ = seen[(ph.device_id, ph.name)] = seen.get((ph.device_id, ph.name), 0) + 1
            key = (ph.device_id, ph.name, occ)
            if key not in table:
                table[key] = PhaseRow(
                    ph.device_id, ph.name, occ, [None] * n, [None] * n, [None] * n, [None] * n, [None] * n
                )
                order.append(key)
            r = table[key]
            r.duration_ns[i] = ph.duration_ns
            r.busy_pct[i] = ph.busy_pct
            r.steps[i] = ph.steps
            r.step_ns_median[i] = ph.step_ns_median
            r.step_ns_p90[i] = ph.step_ns_p90
    # GPU, then the order the phases have in the first profile that has them.
    return [table[k] for k in sorted(order, key=lambda k: (k[0], order.index(k)))]


def basis_of(profiles: Sequence[Profile]) -> str:
    gpus = [step_gpu(p.diagnosis.summary) for p in profiles]
    return "step" if all(g is not None and g.steps for g in gpus) else "steady"


def step_time_rows(profiles: Sequence[Profile], basis: str) -> list[Row]:
    gpus = [step_gpu(p.diagnosis.summary) for p in profiles]
    comps = [components(g) if g else {} for g in gpus]
    keys = sorted({k for c in comps for k in c}, key=lambda k: -max(c.get(k, 0) for c in comps))
    rows = []
    for key in keys:
        vals = []
        for g, c in zip(gpus, comps):
            d = divisor(g, basis)
            vals.append(c.get(key, 0) / d if d else None)
        rows.append(make_row(key, component_label(key), "ns", vals))
    return rows


def category_rows(profiles: Sequence[Profile], basis: str) -> list[Row]:
    totals: list[dict[str, float]] = []
    divs: list[float | None] = []
    for p in profiles:
        s = p.diagnosis.summary
        t: dict[str, float] = {}
        for g in s.steady_gpus:
            for c in g.kernel_categories:
                t[c.category or "other"] = t.get(c.category or "other", 0) + c.total_ns
            if g.graph_ns:
                t["cuda-graph"] = t.get("cuda-graph", 0) + g.graph_ns
        totals.append(t)
        steps = sum(g.steps or 0 for g in s.steady_gpus)
        divs.append((float(steps) if steps else None) if basis == "step" else (1.0 if s.steady_gpus else None))
    keys = sorted({k for t in totals for k in t}, key=lambda k: -max(t.get(k, 0) for t in totals))
    return [
        make_row(f"category:{k}", k, "ns", [t.get(k, 0) / d if d else None for t, d in zip(totals, divs)]) for k in keys
    ]


def transfer_rows(profiles: Sequence[Profile], basis: str) -> list[Row]:
    sums = [p.diagnosis.summary for p in profiles]
    gpus = [step_gpu(s) for s in sums]
    per = "per step" if basis == "step" else "in the steady state"

    def steady(f: Callable[[SteadyGpu], float]) -> list[float | None]:
        out: list[float | None] = []
        for g in gpus:
            d = divisor(g, basis)
            out.append(f(g) / d if g is not None and d else None)
        return out

    rows = [
        make_row("memcpy_count", "Copies (capture)", "count", [s.memcpy.count for s in sums]),
        make_row("memcpy_bytes", "Bytes copied (capture)", "bytes", [s.memcpy.bytes for s in sums]),
        make_row("memcpy_ns", "Copy time (capture)", "ns", [s.memcpy.total_ns for s in sums]),
        make_row("steady_memcpy_count", f"Copies {per}", "count", steady(lambda g: g.memcpy_count)),
        make_row("steady_memcpy_ns", f"Copy time {per}", "ns", steady(lambda g: g.memcpy_ns)),
        make_row("blocking_count", "Blocking calls (capture)", "count", [s.sync.blocking_count for s in sums]),
        make_row("blocking_ns", "Time in blocking calls (capture)", "ns", [s.sync.blocking_ns for s in sums]),
        make_row("steady_blocking_count", f"Blocking calls {per}", "count", steady(lambda g: g.blocking_calls)),
        make_row("steady_sync_idle_ns", f"Idle after syncs {per}", "ns", steady(idle_of("sync"))),
        make_row("launch_calls", "Launch calls (capture)", "count", [s.launch.api_count for s in sums]),
        make_row("launch_mean_ns", "Launch call, mean", "ns", [s.launch.api_mean_ns for s in sums]),
    ]
    return present(rows)


def idle_of(cause: str) -> Callable[[SteadyGpu], float]:
    return lambda g: float(sum(i.total_ns for i in g.idle if i.cause == cause))


def gpu_rows(profiles: Sequence[Profile], basis: str) -> list[GpuRow]:
    sets = [{g.device_id for g in p.diagnosis.summary.steady_gpus} for p in profiles]
    if len(sets[0]) < 2 or any(s != sets[0] for s in sets):
        return []
    out = []
    for dev in sorted(sets[0]):
        gs = [next(g for g in p.diagnosis.summary.steady_gpus if g.device_id == dev) for p in profiles]

        def f(fn: Callable[[SteadyGpu], float], gs: list[SteadyGpu] = gs) -> list[float | None]:
            return [fn(g) / d if (d := divisor(g, basis)) else None for g in gs]

        out.append(
            GpuRow(
                dev,
                [g.busy_pct for g in gs],
                [g.step_ns_median for g in gs],
                f(lambda g: g.busy_ns),
                f(lambda g: g.idle_ns),
                f(lambda g: g.comm_wait_ns),
            )
        )
    return out


# Kernels ---------------------------------------------------------------------------------------


@dataclass
class _K:
    name: str
    demangled: str | None
    shape: str | None
    category: str | None
    count: float
    total_ns: float


def steady_kernels(s: Summary) -> list[_K]:
    return [
        _K(
            k.name or "?",
            k.demangled_name,
            f"{k.grid}/{k.block}" if k.grid else None,
            k.category,
            k.count,
            k.total_ns,
        )
        for k in s.steady_kernels
    ]


KERNELS_SHOWN = 15


def kernel_rows(profiles: Sequence[Profile], basis: str) -> list[KernelRow]:
    """Kernels matched by the most specific key that the profiles share: name, template
    arguments and launch shape; then name and template arguments (other shapes: another batch
    size or sequence length). A short name alone (elementwise_kernel) says too little."""
    n = len(profiles)
    lists = [steady_kernels(p.diagnosis.summary) for p in profiles]
    divs: list[float | None] = []
    for p in profiles:
        s = p.diagnosis.summary
        steps = sum(g.steps or 0 for g in s.steady_gpus)
        divs.append((float(steps) if steps else None) if basis == "step" else 1.0)
    left: list[list[_K]] = [list(ks) for ks in lists]
    groups: list[tuple[str, list[list[_K]]]] = []
    keyfns: list[tuple[str, Callable[[_K], tuple]]] = [
        ("shape", lambda k: (k.name, k.demangled, k.shape)),
        ("kernel", lambda k: (k.name, k.demangled)),
    ]
    for how, keyf in keyfns:
        index: list[dict[tuple, list[_K]]] = []
        for ks in left:
            d: dict[tuple, list[_K]] = {}
            for k in ks:
                d.setdefault(keyf(k), []).append(k)
            index.append(d)
        # A key that two or more profiles share is a match for them; the others show none.
        keys = {key for d in index for key in d if sum(key in e for e in index) >= 2}
        for key in sorted(keys, key=lambda k: -max(sum(x.total_ns for x in d.get(k, [])) for d in index)):
            members = [d.get(key, []) for d in index]
            groups.append((how, members))
            for i, ms in enumerate(members):
                for m in ms:
                    left[i].remove(m)
    for i, ks in enumerate(left):
        for k in ks:
            members = [[] for _ in range(n)]
            members[i] = [k]
            groups.append(("none", members))

    rows = []
    for how, members in groups:
        first = next(ms[0] for ms in members if ms)
        totals = [sum(m.total_ns for m in ms) if ms else None for ms in members]
        counts = [sum(m.count for m in ms) if ms else None for ms in members]
        shapes: list[str | None] = []
        for ms in members:
            distinct = sorted({m.shape for m in ms if m.shape})
            shapes.append(None if not distinct else distinct[0] if len(distinct) == 1 else f"{len(distinct)} shapes")
        per = [t / d if t is not None and d else None for t, d in zip(totals, divs)]
        rows.append(
            KernelRow(
                name=first.name,
                match=how,
                category=first.category,
                shapes=shapes,
                count_per_step=[c / d if c is not None and d else None for c, d in zip(counts, divs)],
                mean_ns=[t / c if t is not None and c else None for t, c in zip(totals, counts)],
                ns_per_step=per,
                change_pct=[None, *(change(per[0], v) for v in per[1:])],
            )
        )
    rows.sort(key=lambda r: -max(v or 0 for v in r.ns_per_step))
    return rows


# Nsight Compute --------------------------------------------------------------------------------


def ncu_rows(profiles: Sequence[Profile]) -> list[NcuRow]:
    groups = [p.diagnosis.summary.ncu.groups if p.diagnosis.summary.ncu else [] for p in profiles]
    if sum(bool(g) for g in groups) < 2:
        return []
    rows: list[NcuRow] = []
    used: list[set[str]] = [set() for _ in profiles]

    def add(how: str, members: list) -> None:
        first = next(m for m in members if m is not None)
        for i, m in enumerate(members):
            if m is not None:
                used[i].add(m.launch)
        rows.append(
            NcuRow(
                kernel=kernel_key_name(first.launch or "?"),
                match=how,
                launches=[m.launch if m else None for m in members],
                duration_ns=[m.duration_ns if m else None for m in members],
                achieved_occupancy_pct=[m.achieved_occupancy_pct if m else None for m in members],
                dram_pct=[m.dram_pct if m else None for m in members],
                sm_pct=[m.sm_pct if m else None for m in members],
                bottleneck=[m.bottleneck if m else None for m in members],
                stalls=[{s.reason: s.share_pct or 0.0 for s in m.stalls[:4]} if m else {} for m in members],
            )
        )

    by_launch = [{g.launch: g for g in gs} for gs in groups]
    for g in groups[0] or next(gs for gs in groups if gs):
        members = [d.get(g.launch) for d in by_launch]
        if sum(m is not None for m in members) >= 2:
            add("launch", members)
    # The rest by name, in the order of their time.
    for gs0 in groups:
        for g in gs0:
            name = kernel_key_name(g.launch or "")
            members = []
            for i, gs in enumerate(groups):
                members.append(
                    next((x for x in gs if x.launch not in used[i] and kernel_key_name(x.launch or "") == name), None)
                )
            if sum(m is not None for m in members) >= 2:
                add("name", members)
    return rows


# Findings --------------------------------------------------------------------------------------


def subject(f: Finding) -> str:
    if f.claims:
        return ", ".join(sorted({kernel_key_name(c) for c in f.claims}))
    dev = f.evidence.get("device_id")
    if isinstance(dev, int) and not isinstance(dev, bool):
        return f"GPU {dev}"
    return "the capture"


def share(f: Finding, d: Diagnosis) -> float | None:
    if f.scope == "capture":
        return None
    steady = d.summary.steady_state
    window = f.window_ns or (steady.window_ns if steady else d.summary.capture.gpu_window_ns)
    return 100.0 * f.impact_ns / window if window else None


def findings_diff(base: Profile, cand: Profile) -> FindingsDiff:
    def keyed(d: Diagnosis) -> dict[tuple[str, str], list[Finding]]:
        out: dict[tuple[str, str], list[Finding]] = {}
        for f in d.findings:
            out.setdefault((f.rule_id, subject(f)), []).append(f)
        return out

    b, c = keyed(base.diagnosis), keyed(cand.diagnosis)
    changes = []
    for key in [*b, *(k for k in c if k not in b)]:
        bs, cs = b.get(key, []), c.get(key, [])
        for i in range(max(len(bs), len(cs))):
            fb = bs[i] if i < len(bs) else None
            fc = cs[i] if i < len(cs) else None
            sb = share(fb, base.diagnosis) if fb else None
            sc = share(fc, cand.diagnosis) if fc else None
            if fb and fc:
                ch = change(sb, sc) if sb else (None if not sc else math.inf)
                moved = ch is not None and abs(ch) >= FINDING_CHANGE_PCT and abs((sc or 0) - (sb or 0)) >= 0.5
                status = "changed" if moved else "unchanged"
                if ch == math.inf:
                    ch = None
            else:
                ch, status = None, "resolved" if fb else "new"
            f = fc or fb
            assert f is not None
            changes.append(
                FindingChange(
                    rule_id=key[0],
                    subject=key[1],
                    status=status,
                    title=f.title,
                    severity=f.severity,
                    baseline_impact_ns=fb.impact_ns if fb else None,
                    candidate_impact_ns=fc.impact_ns if fc else None,
                    baseline_share_pct=sb,
                    candidate_share_pct=sc,
                    change_pct=ch,
                )
            )
    order = {"new": 0, "resolved": 1, "changed": 2, "unchanged": 3}
    changes.sort(
        key=lambda x: (order[x.status], -max(x.baseline_impact_ns or 0, x.candidate_impact_ns or 0), x.rule_id)
    )
    return FindingsDiff(base.label, cand.label, changes)


# Comparability ---------------------------------------------------------------------------------


def has_timeline(d: Diagnosis) -> bool:
    return any(i["kind"] in ("nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof") for i in d.inputs)


def graph_traced(s: Summary) -> bool:
    """CUDA graphs traced as a whole: their kernels are not in the profile one by one."""
    return s.kernels.graph_launch_count > 0


# Kernels whose names encode the problem's shape (GEMM tiles, attention kernel variants): they
# count by category in the kernel mix, so that another batch size is not another workload.
SHAPED_CATEGORIES = {"gemm", "attention", "attention-unfused", "communication"}


def mix_key(name: str | None, category: str | None) -> str:
    return f"[{category}]" if category in SHAPED_CATEGORIES else name or "?"


def name_overlap_pct(a: Summary, b: Summary) -> float | None:
    """The share of a's steady kernel time (its listed kernels) in kernels that b also ran:
    the same name, or for GEMM, attention and communication kernels the same category."""
    keys_b = {mix_key(k.name, k.category) for k in b.steady_kernels if k.kind == "kernel"}
    ks = [k for k in a.steady_kernels if k.kind == "kernel"]
    total = sum(k.total_ns for k in ks)
    if not total or not keys_b:
        return None
    return 100.0 * sum(k.total_ns for k in ks if mix_key(k.name, k.category) in keys_b) / total


def warnings_for(profiles: Sequence[Profile], rows: list[KernelRow]) -> list[CompareWarning]:
    out: list[CompareWarning] = []
    sums = [p.diagnosis.summary for p in profiles]
    labels = [p.label for p in profiles]
    timelines = [has_timeline(p.diagnosis) for p in profiles]

    def listing(values: list[str]) -> str:
        return ", ".join(f"{lab}: {v}" for lab, v in zip(labels, values))

    if not all(timelines):
        without = [lab for lab, t in zip(labels, timelines) if not t]
        out.append(
            CompareWarning(
                "ncu",
                f"{', '.join(without)} {'has' if len(without) == 1 else 'have'} no timeline (Nsight Compute "
                "only): step times and the timeline's numbers cannot be compared, only the profiled kernels",
            )
        )
    models = [", ".join(sorted({g.name or "?" for g in s.gpus if g.busy_ns})) or "none" for s in sums]
    tl = [m for m, t in zip(models, timelines) if t]
    if len(set(tl)) > 1:
        out.append(
            CompareWarning(
                "gpu-model",
                f"different GPU models ({listing(models)}): the difference includes the hardware's",
            )
        )
    counts = [sum(1 for g in s.gpus if g.busy_ns) for s in sums]
    tc = [c for c, t in zip(counts, timelines) if t]
    if len(set(tc)) > 1:
        out.append(
            CompareWarning(
                "gpu-count",
                f"different numbers of GPUs with work ({listing([str(c) for c in counts])}): the GPUs are "
                "compared through the one that sets the step time",
            )
        )
    windows = [s.capture.gpu_window_ns for s, t in zip(sums, timelines) if t and s.capture.gpu_window_ns]
    if len(windows) > 1 and max(windows) >= CAPTURE_RATIO_WARN * min(windows):
        out.append(
            CompareWarning(
                "capture-length",
                "very different capture lengths (GPU activity window "
                + listing([fmt_ns(s.capture.gpu_window_ns or 0) for s in sums])
                + "): totals over the capture are not comparable; per-step values and step times are",
            )
        )
    for p, s, t in zip(profiles, sums, timelines):
        if t and s.capture.gpu_window_ns and s.steady_state is None:
            out.append(
                CompareWarning(
                    "no-steady-state",
                    f"{p.label} has no steady state (only start-up and warm-up): its numbers are not "
                    "those of the workload running",
                )
            )
        elif t and s.steady_state is not None and not s.steady_state.steps:
            out.append(
                CompareWarning(
                    "no-steps",
                    f"{p.label} has no steps (no NVTX step ranges, no operation that recurs once per step): "
                    "values are totals over the steady state, not per step",
                )
            )
    graphs = [lab for lab, s, t in zip(labels, sums, timelines) if t and graph_traced(s)]
    if graphs and len(graphs) < sum(timelines):
        out.append(
            CompareWarning(
                "graph-trace",
                f"{', '.join(graphs)} traced CUDA graphs as a whole (--cuda-graph-trace=graph): the kernels "
                "inside them are not in the profile one by one, so kernel categories and kernels are compared "
                "only outside graphs; capture with --cuda-graph-trace=node to compare them",
            )
        )
    else:
        base = sums[0]
        for p, s, t in zip(profiles[1:], sums[1:], timelines[1:]):
            if not (t and timelines[0]):
                continue
            a, b = name_overlap_pct(base, s), name_overlap_pct(s, base)
            if a is not None and b is not None and min(a, b) < KERNEL_MIX_WARN_PCT:
                out.append(
                    CompareWarning(
                        "kernel-mix",
                        f"different kernel mix: only {pct_text(a)} of {profiles[0].label}'s steady kernel time "
                        f"is in kernels that {p.label} also ran, and {pct_text(b)} the other way round: probably "
                        "a different workload (another model, or training against inference)",
                    )
                )
    for i, p in enumerate(profiles[1:], 1):
        shapes = shape_change(rows, i)
        if shapes is not None and shapes[0] >= SHAPE_CHANGE_WARN_PCT:
            out.append(
                CompareWarning(
                    "launch-shapes",
                    f"{p.label} runs the same kernels as {profiles[0].label} with other launch shapes "
                    f"({pct_text(shapes[0])} of their time, e.g. {shapes[1]}): the steps do different work "
                    "(another batch size or sequence length); compare per token (--tokens-per-step) rather "
                    "than per step",
                )
            )
    return out


def shape_change(rows: list[KernelRow], i: int) -> tuple[float, str] | None:
    """The share of the baseline's time, in kernels that both it and profile i ran (the same name
    and template arguments), whose launch shape differs in profile i; and the largest example."""
    both = [r for r in rows if r.match in ("shape", "kernel") and r.ns_per_step[0] and r.ns_per_step[i]]
    total = sum(r.ns_per_step[0] or 0 for r in both)
    if not total:
        return None
    moved = [r for r in both if r.shapes[0] != r.shapes[i]]
    if not moved:
        return 0.0, ""
    top = moved[0]
    example = f"{short_name(top.name)} {shape_text(top.shapes[0], top.shapes[i])}"
    return 100.0 * sum(r.ns_per_step[0] or 0 for r in moved) / total, example


# Verdict ---------------------------------------------------------------------------------------


def gpu_pairs(base: Summary, cand: Summary) -> list[tuple[SteadyGpu, SteadyGpu]]:
    """The GPUs to compare: each by its device id when both have the same ones, else the GPUs that
    set the step time."""
    bd = {g.device_id: g for g in base.steady_gpus}
    cd = {g.device_id: g for g in cand.steady_gpus}
    if bd and set(bd) == set(cd):
        return [(bd[k], cd[k]) for k in sorted(bd)]
    b, c = step_gpu(base), step_gpu(cand)
    return [(b, c)] if b and c else []


def gpu_causes(gb: SteadyGpu, gc: SteadyGpu, basis: str, device_id: int | None) -> list[Cause]:
    """Every component of one GPU's steady state in both profiles, per step."""
    db, dc = divisor(gb, basis), divisor(gc, basis)
    if not db or not dc:
        return []
    cb, cc = components(gb), components(gc)
    mb, mc = gb.window_ns / db, gc.window_ns / dc
    out = []
    for key in sorted(set(cb) | set(cc)):
        vb, vc = cb.get(key, 0) / db, cc.get(key, 0) / dc
        out.append(
            Cause(
                role="",
                component=key,
                label=component_label(key),
                device_id=device_id,
                baseline_ns=vb,
                candidate_ns=vc,
                baseline_share_pct=100 * vb / mb if mb else None,
                candidate_share_pct=100 * vc / mc if mc else None,
            )
        )
    return out


def explain(base: Summary, cand: Summary, basis: str, sign: int) -> list[Cause]:
    """The components that explain a change in the direction ``sign`` (-1 faster, 1 slower):
    the one that moved most that way (main), the next when it moved at least 30% as much
    (also), the one that moved most the other way when it is as large (offset). With several
    GPUs in lockstep through collectives, a GPU's waiting in them is the effect of another
    being slower: the change is explained on the GPU that waits least (the one the others wait
    for), and the others' waiting is given as such (wait)."""
    pairs = gpu_pairs(base, cand)
    multi = len(pairs) > 1
    per_gpu = [gpu_causes(gb, gc, basis, gc.device_id if multi else None) for gb, gc in pairs]
    if not any(per_gpu):
        return []
    waits = [next((c for c in cs if c.component == "wait:collectives"), None) for cs in per_gpu]
    waiting: list[Cause] = []
    if multi and any(w is not None for w in waits):
        # The GPU the others wait for: the one that waits least in the candidate.
        i = min(range(len(pairs)), key=lambda j: w.candidate_ns if (w := waits[j]) is not None else 0.0)
        pool = [c for c in per_gpu[i] if c.component != "wait:collectives"]
        waiting = [
            w for j, w in enumerate(waits) if j != i and w is not None and sign * (w.candidate_ns - w.baseline_ns) > 0
        ]
    else:
        pool = [c for cs in per_gpu for c in cs]
    ranked = sorted(pool, key=lambda c: -sign * (c.candidate_ns - c.baseline_ns))
    main = ranked[0]
    moved = main.candidate_ns - main.baseline_ns
    if sign * moved <= 0:
        return []
    out = [replace(main, role="main")]
    if len(ranked) > 1:
        nxt = ranked[1]
        if sign * (nxt.candidate_ns - nxt.baseline_ns) >= 0.3 * abs(moved):
            out.append(replace(nxt, role="also"))
        last = ranked[-1]
        if -sign * (last.candidate_ns - last.baseline_ns) >= 0.3 * abs(moved):
            out.append(replace(last, role="offset"))
    out += [replace(w, role="wait") for w in waiting]
    return out


def cause_text(c: Cause, basis: str, first: bool = True) -> str:
    verb = "fell" if c.candidate_ns < c.baseline_ns else "rose"
    unit = " per step" if basis == "step" else ""
    share = " of the time" if first else ""
    return (
        f"{c.label} {verb} from {fmt_ns(c.baseline_ns)}{unit} ({pct_text(c.baseline_share_pct)}{share}) "
        f"to {fmt_ns(c.candidate_ns)} ({pct_text(c.candidate_share_pct)})"
    )


def launch_context(gb: SteadyGpu | None, gc: SteadyGpu | None) -> str:
    """What the CPU launched per step, when that changed by 5% or more: why launch waiting moved."""
    if gb is None or gc is None or not gb.steps or not gc.steps:
        return ""

    def launches(g: SteadyGpu) -> str:
        steps = g.steps or 1
        k, gr = g.kernels / steps, g.graphs / steps
        parts = []
        if gr:
            parts.append(f"{gr:,.0f} CUDA graph{'s' if round(gr) != 1 else ''}")
        if k or not gr:
            parts.append(f"{k:,.0f} kernel{'s' if round(k) != 1 else ''}")
        return " and ".join(parts)

    nb = (gb.kernels + gb.graphs) / gb.steps
    nc = (gc.kernels + gc.graphs) / gc.steps
    if gb.graphs == gc.graphs == 0 and abs(nc - nb) < 0.05 * max(nb, 1):
        return ""
    return f", with {launches(gb)} → {launches(gc)} launched per step"


def ratio_text(ratio: float) -> str:
    """'8.0x faster', '20% slower'."""
    if ratio <= 0.5:
        return f"{times(1 / ratio)} faster"
    if ratio >= 2:
        return f"{times(ratio)} slower"
    return f"{abs(100 * (ratio - 1)):.0f}% {'faster' if ratio < 1 else 'slower'}"


def run_name(label: str) -> str:
    return f"the {label} run"


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def verdict_for(
    profiles: Sequence[Profile],
    metric: Metric | None,
    tokens: Sequence[float | None],
    basis: str,
    rows: list[KernelRow],
) -> Verdict:
    base, cand = profiles[0], profiles[-1]
    sb, sc = base.diagnosis.summary, cand.diagnosis.summary
    v = Verdict(
        text="",
        baseline=base.label,
        candidate=cand.label,
        metric=metric.name if metric else None,
        baseline_value=None,
        candidate_value=None,
        ratio=None,
        direction="unknown",
        causes=[],
        notes=[],
    )
    if metric is None:
        v.text = no_metric_text(profiles)
        return v
    vb, vc = metric.value(sb, tokens[0]), metric.value(sc, tokens[-1])
    v.baseline_value, v.candidate_value = vb, vc
    if vb is None or vc is None or vb <= 0:
        missing = base.label if vb is None else cand.label
        v.text = f"No {metric.label} to compare: {missing} has none ({metric.missing})."
        return v
    v.ratio = vc / vb
    v.direction = direction(v.ratio)
    b, c = run_name(base.label), run_name(cand.label)
    if v.direction == "same":
        ch = 100 * (v.ratio - 1)
        head = f"{c} takes about as long {metric.per} as {b} ({fmt_ns(vb)} → {fmt_ns(vc)}, {ch:+.1f}%)"
    else:
        head = f"{c} is {ratio_text(v.ratio)} {metric.per} than {b} ({fmt_ns(vb)} → {fmt_ns(vc)})"
    sentences = [cap(head)]
    # What changed within the step: for a per-token verdict, the step itself.
    step_dir = v.direction
    if metric.name == "token":
        step = METRICS["decode_step"] if _decode(sb) and _decode(sc) else METRICS["step"]
        pb, pc = step.value(sb, None), step.value(sc, None)
        if pb and pc:
            step_dir = direction(pc / pb)
            took = (
                f"takes about as long ({fmt_ns(pb)} → {fmt_ns(pc)} {step.per})"
                if step_dir == "same"
                else f"is {ratio_text(pc / pb).replace('faster', 'shorter').replace('slower', 'longer')} "
                f"({fmt_ns(pb)} → {fmt_ns(pc)} {step.per})"
            )
            sentences.append(f"Each step yields {tokens[-1]:g} tokens instead of {tokens[0]:g} (as given) and {took}")
    if step_dir in ("faster", "slower"):
        v.causes = explain(sb, sc, basis, -1 if step_dir == "faster" else 1)
    sentences += cause_sentences(v.causes, sb, sc, basis, sentences)
    v.notes = work_notes(profiles, tokens, rows)
    v.text = ". ".join(sentences) + "." + "".join(f" {n}" for n in v.notes)
    return v


def direction(ratio: float) -> str:
    if abs(100 * (ratio - 1)) < SAME_PCT:
        return "same"
    return "faster" if ratio < 1 else "slower"


def cause_sentences(causes: list[Cause], sb: Summary, sc: Summary, basis: str, sentences: list[str]) -> list[str]:
    """The causes in words: the main one (and the next) appended to the last sentence, the
    offset and the other GPUs' waiting as sentences of their own (returned)."""
    gpus = {g.device_id: g for g in sb.steady_gpus}, {g.device_id: g for g in sc.steady_gpus}
    said_launches = False
    more = []
    unit = " per step" if basis == "step" else ""
    for cause in causes:
        dev = cause.device_id
        gb = gpus[0].get(dev) if dev is not None else step_gpu(sb)
        gc = gpus[1].get(dev) if dev is not None else step_gpu(sc)
        extra = ""
        if cause.component in ("idle:launch", "idle:cpu") and not said_launches:
            extra = launch_context(gb, gc)
            said_launches = bool(extra)
        on = f"on GPU {dev}, " if dev is not None else ""
        if cause.role == "main":
            if dev is not None and any(x.role == "wait" for x in causes):
                on = f"on GPU {dev} (the GPU the others wait for), "
            sentences[-1] += f": {on}{cause_text(cause, basis)}{extra}"
        elif cause.role == "also":
            sentences[-1] += f", and {cause_text(cause, basis, first=False)}{extra}"
        elif cause.role == "offset":
            more.append(f"Partly offset: {on}{cause_text(cause, basis, first=False)}{extra}")
        elif cause.role == "wait":
            more.append(
                f"GPU {dev} waits for it in collectives: {fmt_ns(cause.baseline_ns)}{unit} "
                f"({pct_text(cause.baseline_share_pct)}) → {fmt_ns(cause.candidate_ns)} "
                f"({pct_text(cause.candidate_share_pct)})"
            )
    return more


def short_name(name: str, n: int = 40) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def shape_text(a: str | None, b: str | None) -> str:
    """'grid 1,16,1 → 1,16,512' (and the blocks when they differ)."""
    if not a or not b or "/" not in a or "/" not in b:
        return f"{a} → {b}"
    (ga, ba), (gb, bb) = a.split("/", 1), b.split("/", 1)
    text = f"grid ({ga}) → ({gb})"
    return text + (f", block ({ba}) → ({bb})" if ba != bb else "")


def work_notes(profiles: Sequence[Profile], tokens: Sequence[float | None], rows: list[KernelRow]) -> list[str]:
    """What a per-step verdict does not say: the steps may do different work."""
    if tokens[0] and tokens[-1]:
        return []  # the verdict is per token
    base, cand = profiles[0], profiles[-1]
    shapes = shape_change(rows, len(profiles) - 1)
    gb, gc = step_gpu(base.diagnosis.summary), step_gpu(cand.diagnosis.summary)
    busy_b, busy_c = per_step(gb, gb.busy_ns if gb else None), per_step(gc, gc.busy_ns if gc else None)
    if shapes is not None and shapes[0] >= SHAPE_CHANGE_WARN_PCT and busy_b and busy_c:
        return [
            f"The steps do different work: the same kernels run with other launch shapes ({shapes[1]}), and the "
            f"GPU is busy {fmt_ns(busy_b)} → {fmt_ns(busy_c)} per step. If the {cand.label} run has a larger "
            "batch, its time per token is what matters: give --tokens-per-step for each profile to compare per "
            "token."
        ]
    return []


def no_metric_text(profiles: Sequence[Profile]) -> str:
    if not any(has_timeline(p.diagnosis) for p in profiles):
        return (
            "No timeline: these are Nsight Compute reports only, so there is no step time to compare; "
            "see the profiled kernels' deltas."
        )
    return "No metric that every profile has (step times or a GPU activity window); see the tables."


def gate_for(
    profiles: Sequence[Profile], metric: Metric | None, tokens: Sequence[float | None], threshold: float | None
) -> Gate:
    if metric is None:
        if threshold is not None:
            raise CompareError(
                "the regression gate has no metric that every profile has (no steps and no GPU activity); "
                "choose one with --metric"
            )
        return Gate("none", "no metric", None, None, None, None, False)
    vb = metric.value(profiles[0].diagnosis.summary, tokens[0])
    vc = metric.value(profiles[-1].diagnosis.summary, tokens[-1])
    if threshold is not None and (vb is None or vc is None):
        missing = profiles[0].label if vb is None else profiles[-1].label
        raise CompareError(f"the gate's metric '{metric.name}' has no value for {missing}: {metric.missing}")
    ch = change(vb, vc)
    failed = threshold is not None and ch is not None and ch > threshold
    return Gate(metric.name, metric.label, vb, vc, ch, threshold, failed)


# ---------------------------------------------------------------------------------------------


@dataclass
class CompareOptions:
    metric: str | None = None  # the gate's and the verdict's metric; None: the default chain
    tokens_per_step: Sequence[float | None] = field(default_factory=list)  # per profile, or empty
    fail_on_regression: float | None = None  # the gate's threshold, %


def compare(profiles: Sequence[Profile], options: CompareOptions | None = None) -> Comparison:
    """The comparison of the profiles, the first being the baseline."""
    opts = options or CompareOptions()
    if len(profiles) < 2:
        raise CompareError("compare needs at least two profiles")
    tokens = list(opts.tokens_per_step) or [None] * len(profiles)
    if len(tokens) != len(profiles):
        raise CompareError(f"--tokens-per-step was given {len(tokens)} times for {len(profiles)} profiles")
    metric = choose_metric(profiles, tokens, opts.metric)
    if metric is not None and metric.name == "token" and not all(tokens):
        raise CompareError("the metric 'token' needs --tokens-per-step for every profile")
    basis = basis_of(profiles)
    kernels = kernel_rows(profiles, basis)
    deltas = Deltas(
        basis=basis,
        overview=overview_rows(profiles, tokens),
        phases=phase_rows(profiles),
        step_time=step_time_rows(profiles, basis),
        kernel_categories=category_rows(profiles, basis),
        kernels=kernels[:KERNELS_SHOWN],
        transfers=transfer_rows(profiles, basis),
        gpus=gpu_rows(profiles, basis),
        ncu=ncu_rows(profiles),
    )
    warnings = warnings_for(profiles, kernels)
    verdict = verdict_for(profiles, metric, tokens, basis, kernels)
    serious = [CAUTIONS[w.code] for w in warnings if w.code in CAUTIONS]
    if serious and verdict.metric is not None:
        note = f"Caution: {', and '.join(dict.fromkeys(serious))}: the difference is not only the configuration's."
        verdict.notes.append(note)
        verdict.text += " " + note
    return Comparison(
        profiles=list(profiles),
        deltas=deltas,
        findings_diff=[findings_diff(profiles[0], p) for p in profiles[1:]],
        warnings=warnings,
        verdict=verdict,
        gate=gate_for(profiles, metric, tokens, opts.fail_on_regression),
    )


# Warnings that make the verdict's difference something else than the configuration's.
CAUTIONS = {
    "gpu-model": "the GPUs differ",
    "kernel-mix": "the kernels differ (another workload?)",
    "no-steady-state": "a profile has no steady state",
}


LABEL_OK = re.compile(r"^[^\x00-\x1f\x7f]{1,64}$")


def labels_for(paths: Sequence[str], labels: Sequence[str], stem: Callable[[str], str]) -> list[str]:
    """--label values, or each profile's file name without its suffixes (made unique)."""
    if labels and len(labels) != len(paths):
        raise CompareError(f"--label was given {len(labels)} times for {len(paths)} profiles")
    out = list(labels) or [stem(p.split(",")[0]) for p in paths]
    for lab in out:
        if not LABEL_OK.match(lab):
            raise CompareError(f"bad label {lab!r}: 1 to 64 printable characters")
    if not labels:
        seen: dict[str, int] = {}
        for i, lab in enumerate(out):
            seen[lab] = seen.get(lab, 0) + 1
            if seen[lab] > 1:
                out[i] = f"{lab}#{seen[lab]}"
    elif len(set(out)) != len(out):
        raise CompareError("the labels must differ from each other")
    return out


def profile_files(arg: str) -> list[str]:
    """The files of one profile argument: a path as it is when it exists, else files joined by
    commas (a timeline and its Nsight Compute reports: run.sqlite,kernels.ncu-rep)."""
    from pathlib import Path

    if Path(arg).exists() or "," not in arg:
        return [arg]
    return [p for p in (x.strip() for x in arg.split(",")) if p]


def analyze_profiles(
    args: Sequence[str],
    labels: Sequence[str],
    options_for: Callable[[str], object],
) -> list[Profile]:
    """Runs the analysis of each profile argument (engine.analyze), with the options that
    ``options_for(label)`` gives (an AnalyzeOptions)."""
    from nsight_doctor import engine
    from nsight_doctor.reports import profile_stem

    names = labels_for(args, labels, profile_stem)
    out = []
    for arg, label in zip(args, names):
        opts = options_for(label)
        assert isinstance(opts, engine.AnalyzeOptions)
        out.append(Profile(label, arg, engine.analyze(profile_files(arg), opts)))
    return out
