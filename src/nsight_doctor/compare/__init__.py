"""Comparing profiles of the same workload run in different configurations: side by side, per
phase, with a verdict that names the main cause of the difference, and a regression gate.

``compare(profiles)`` takes finished diagnoses (one per profile, from ``engine.analyze``) and
returns a typed ``Comparison``. Every number in it is a field of one profile's summary
(sections/), or a sum, ratio or difference of such fields: nothing is measured again, so that
``compare`` shows for each profile exactly what ``analyze`` shows for it.

Per-step values divide a steady-state total (summary_steady_gpus and its children) by the
steady steps of the same GPU: they are means over the steady state, whereas step times
(``step_ns_median``) are medians. The first profile is the baseline; every other one is a
candidate compared with it, and the gate compares the last one with the first.

The package, one file per role: ``model`` (the dataclasses: the JSON contract of ``compare
--format json``, docs/json.md is generated from their field docs; renderers read them and never
query a store), ``metrics`` (the verdict's and the gate's metrics), ``rows`` (the deltas),
``findings`` (the findings diff), ``warnings`` (comparability) and ``verdict`` (the verdict and
the gate). ``compare()`` below puts them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nsight_doctor.compare.findings import findings_diff
from nsight_doctor.compare.metrics import METRICS, Metric, choose_metric, step_gpu
from nsight_doctor.compare.model import (
    Cause,
    CompareError,
    CompareWarning,
    Comparison,
    Deltas,
    FindingChange,
    FindingsDiff,
    Gate,
    GpuRow,
    KernelRow,
    NcuRow,
    PhaseRow,
    Profile,
    Row,
    Verdict,
)
from nsight_doctor.compare.rows import (
    KERNELS_SHOWN,
    basis_of,
    category_rows,
    gpu_rows,
    kernel_rows,
    ncu_rows,
    overview_rows,
    phase_rows,
    step_time_rows,
    transfer_rows,
)
from nsight_doctor.compare.verdict import gate_for, verdict_for
from nsight_doctor.compare.warnings import CAUTIONS, step_work, warnings_for

__all__ = [
    "METRICS",
    "Cause",
    "CompareError",
    "CompareOptions",
    "CompareWarning",
    "Comparison",
    "Deltas",
    "FindingChange",
    "FindingsDiff",
    "Gate",
    "GpuRow",
    "KernelRow",
    "Metric",
    "NcuRow",
    "PhaseRow",
    "Profile",
    "Row",
    "Verdict",
    "compare",
    "step_gpu",
]


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
    basis = basis_of(profiles)
    kernels = kernel_rows(profiles, basis)
    unlike = step_work(profiles, len(profiles) - 1)
    metric = choose_metric(profiles, tokens, opts.metric, kernels, steps_alike=unlike is None)
    if metric is not None and metric.name == "token" and not all(tokens):
        raise CompareError("the metric 'token' needs --tokens-per-step for every profile")
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
    verdict = verdict_for(profiles, metric, tokens, basis, kernels, unlike)
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
        gate=gate_for(profiles, metric, tokens, opts.fail_on_regression, kernels),
    )
