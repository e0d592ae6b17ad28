"""The metrics of the verdict and the gate, each a value of one profile's summary (ns; lower is
better), the GPU whose steps give a profile's step time, and how a change is computed and said."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nsight_doctor.compare.model import CompareError, KernelRow, Profile
from nsight_doctor.sections import SteadyGpu, Summary


def step_gpu(s: Summary) -> SteadyGpu | None:
    """The GPU whose steps give the profile's step time: summary_steady_state's step_device_id."""
    if s.steady_state is None:
        return None
    return next((g for g in s.steady_gpus if g.device_id == s.steady_state.step_device_id), None)


def all_steps(s: Summary) -> int:
    """The steady steps of every GPU of a profile: what its all-GPU totals are divided by."""
    return sum(g.steps or 0 for g in s.steady_gpus)


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
    per_step: bool = False  # a step's time: comparable only between steps that do the same work
    # Metrics that weigh one profile against the baseline: (kernel rows, profile index, profiles).
    relative: Callable[[list[KernelRow], int, Sequence[Profile]], float | None] | None = None


def token_time(s: Summary, tokens: float | None) -> float | None:
    g = step_gpu(s)
    k = decode_kind(g)
    step = k.step_ns_median if k else (s.steady_state.step_ns_median if s.steady_state else None)
    return step / tokens if step is not None and tokens else None


def decode_step_time(s: Summary) -> float | None:
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
            lambda s, _: decode_step_time(s),
            "no decode steps were found",
            per_step=True,
        ),
        Metric(
            "step",
            "median step time",
            "per step",
            "the median steady-state step time (summary_steady_state.step_ns_median)",
            lambda s, _: s.steady_state.step_ns_median if s.steady_state else None,
            "no steps were found in the steady state",
            per_step=True,
        ),
        Metric(
            "step_p90",
            "90th percentile step time",
            "at the 90th percentile step",
            "the 90th percentile of the steady-state step time (summary_steady_state.step_ns_p90)",
            lambda s, _: s.steady_state.step_ns_p90 if s.steady_state else None,
            "no steps were found in the steady state",
            per_step=True,
        ),
        Metric(
            "token",
            "time per token",
            "per token",
            "the median decode step time (the median step time without decode steps) divided by --tokens-per-step",
            token_time,
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
            per_step=True,
        ),
        Metric(
            "idle_per_step",
            "GPU idle time per step",
            "in GPU idle time per step",
            "the GPU's idle time in its steady state per step (summary_steady_gpus.idle_ns / steps)",
            lambda s, _: _per_step(s, "idle_ns"),
            "no steps were found in the steady state",
            per_step=True,
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


# Work-normalised metrics, for steps that do different work (warnings.step_work).
SAME_KERNELS_MIN_PCT = 30.0  # of the baseline's kernel time per step, in kernels the profiles both ran
WORK_AGREE = 0.15  # kernels whose threads per step scaled by the same factor, within this
WORK_SAME = 0.20  # a common factor within this of 1: the steps do the same work
TOKENS_MIN_RATIO = 1.5  # a smaller factor says nothing about tokens


@dataclass(frozen=True)
class WorkScale:
    """How much work profile i's steps do against the baseline's, read from the kernels both ran
    (same name and template arguments): the threads they launch per step (calls x grid x block),
    which follow the rows (tokens) of a step whatever the launch shapes. A loop split into two
    micro-batches launches half the grid twice: the same work."""

    ratio: float | None  # the factor that most of their time agrees on; None when they disagree
    agree_pct: float  # the share of their baseline time within WORK_AGREE of that factor
    kernel: str  # the kernel both ran with the most baseline time
    threads: tuple[float, float]  # its threads per step, baseline and profile i


def threads_per_step(s: Summary) -> dict[tuple[str | None, str | None], tuple[float, float]]:
    """Per kernel (name, template arguments) of the steady state: threads launched and GPU time
    per step, summed over its launch shapes and every GPU's steps (as kernel rows are).
    Collectives are left out: their grid is the channels, whatever the size of the message."""
    steps = all_steps(s)
    out: dict[tuple[str | None, str | None], tuple[float, float]] = {}
    if not steps:
        return out
    for k in s.steady_kernels:
        if k.kind != "kernel" or not k.grid or not k.block or k.category == "communication":
            continue
        try:
            threads = math.prod(int(x) for x in k.grid.split(",")) * math.prod(int(x) for x in k.block.split(","))
        except ValueError:
            continue
        t, ns = out.get((k.name, k.demangled_name), (0.0, 0.0))
        out[(k.name, k.demangled_name)] = (t + k.count * threads / steps, ns + k.total_ns / steps)
    return out


def work_scale(profiles: Sequence[Profile], i: int) -> WorkScale | None:
    """None when too little of the baseline's kernel time is in kernels both ran to tell."""
    sb, si = profiles[0].diagnosis.summary, profiles[i].diagnosis.summary
    a, b = threads_per_step(sb), threads_per_step(si)
    steps = all_steps(sb)
    kernel_ns = sum(k.total_ns for k in sb.steady_kernels) / steps if steps else 0
    pairs = sorted(
        ((b[key][0] / ta, ns, key) for key, (ta, ns) in a.items() if ta > 0 and key in b and b[key][0] > 0),
        key=lambda p: -p[1],
    )
    total = sum(ns for _, ns, _ in pairs)
    if not total or total < SAME_KERNELS_MIN_PCT / 100 * kernel_ns:
        return None
    tol = math.log1p(WORK_AGREE)
    best, weight = max(
        ((x, sum(ns for y, ns, _ in pairs if abs(math.log(y / x)) <= tol)) for x, _, _ in pairs),
        key=lambda c: c[1],
    )
    top = pairs[0][2]
    ratio = best if weight >= 0.5 * total else None
    return WorkScale(ratio, 100.0 * weight / total, top[0] or "?", (a[top][0], b[top][0]))


def same_work(ws: WorkScale | None) -> bool:
    return ws is not None and ws.ratio is not None and abs(math.log(ws.ratio)) <= math.log1p(WORK_SAME)


def token_ratio(profiles: Sequence[Profile], i: int) -> float | None:
    """How many times the baseline's tokens profile i's steps hold, inferred from the work scale
    (threads per step are rows per step: tokens); None when the kernels do not agree or the
    factor is too small to say."""
    ws = work_scale(profiles, i)
    if ws is None or ws.ratio is None or 1 / TOKENS_MIN_RATIO < ws.ratio < TOKENS_MIN_RATIO:
        return None
    return ws.ratio


def inferred_token_time(rows: list[KernelRow], i: int, profiles: Sequence[Profile]) -> float | None:
    step = METRICS["decode_step"] if all(decode_step_time(p.diagnosis.summary) for p in profiles) else METRICS["step"]
    r = 1.0 if i == 0 else token_ratio(profiles, i)
    value = step.value(profiles[i].diagnosis.summary, None)
    return value / r if value is not None and r else None


def same_kernels_time(rows: list[KernelRow], i: int, profiles: Sequence[Profile]) -> float | None:
    """The GPU time per step of the kernels that every profile ran with the same launch shape,
    at the baseline's calls per step: each profile's time per call weighted by the same calls."""
    alike = [
        r
        for r in rows
        if r.match == "shape" and all(r.mean_ns[j] and r.count_per_step[j] for j in range(len(profiles)))
    ]
    kernel_ns = sum(r.ns_per_step[0] or 0 for r in rows)
    if not alike or sum(r.ns_per_step[0] or 0 for r in alike) < SAME_KERNELS_MIN_PCT / 100 * kernel_ns:
        return None
    return sum((r.mean_ns[i] or 0) * (r.count_per_step[0] or 0) for r in alike)


METRICS["token_inferred"] = Metric(
    "token_inferred",
    "time per token (tokens per step inferred from the kernels' launches)",
    "per token (tokens per step inferred from the kernels' launches)",
    "the median decode step time (the median step time without decode steps) divided by the tokens per step "
    "relative to the first profile, inferred where the kernels both ran launch threads per step (calls x grid x "
    "block) scaled by one factor",
    lambda s, _: None,
    "the kernels' launches do not say how many tokens a step holds",
    relative=inferred_token_time,
)
METRICS["same_kernels"] = Metric(
    "same_kernels",
    "GPU time of the kernels both ran alike, per step",
    "in the kernels both ran alike",
    "the GPU time per step of the kernels every profile ran with the same name, template arguments and launch "
    "shape, each profile's time per call weighted by the first profile's calls per step",
    lambda s, _: None,
    "too little of the kernel time is in kernels every profile ran with the same launch shape",
    relative=same_kernels_time,
)

DEFAULT_METRICS = ("token", "decode_step", "step", "gpu_window")
# When the steps do different work (warnings.step_work): work-normalised figures first.
UNLIKE_STEP_METRICS = ("token", "token_inferred", "same_kernels", "decode_step", "step", "gpu_window")


def metric_values(
    m: Metric, profiles: Sequence[Profile], tokens: Sequence[float | None], rows: list[KernelRow]
) -> list[float | None]:
    if m.relative is not None:
        return [m.relative(rows, i, profiles) for i in range(len(profiles))]
    return [m.value(p.diagnosis.summary, t) for p, t in zip(profiles, tokens)]


def choose_metric(
    profiles: Sequence[Profile],
    tokens: Sequence[float | None],
    name: str | None,
    rows: list[KernelRow],
    steps_alike: bool = True,
) -> Metric | None:
    """The asked metric, or the first default that every profile has (work-normalised ones
    first when the steps do different work)."""
    if name is not None:
        if name not in METRICS:
            raise CompareError(f"no metric '{name}' (choose one of: {', '.join(METRICS)})")
        return METRICS[name]
    for n in DEFAULT_METRICS if steps_alike else UNLIKE_STEP_METRICS:
        if all(v is not None for v in metric_values(METRICS[n], profiles, tokens, rows)):
            return METRICS[n]
    return None


def change(base: float | None, value: float | None) -> float | None:
    if base is None or value is None or base == 0:
        return None
    return 100.0 * (value - base) / abs(base)


def pct_text(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"
