"""The metrics of the verdict and the gate, each a value of one profile's summary (ns; lower is
better), the GPU whose steps give a profile's step time, and how a change is computed and said."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nsight_doctor.compare.model import CompareError, Profile
from nsight_doctor.sections import SteadyGpu, Summary


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
