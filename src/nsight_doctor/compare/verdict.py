"""The verdict, the last profile against the first in words with the numbers behind it (the
components of the step time that explain the difference), and the regression gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nsight_doctor.compare.metrics import (
    METRICS,
    Metric,
    change,
    decode_step_time,
    metric_values,
    pct_text,
    step_gpu,
    times,
    token_ratio,
)
from nsight_doctor.compare.model import Cause, CompareError, Gate, KernelRow, Profile, Verdict
from nsight_doctor.compare.rows import component_label, components, divisor
from nsight_doctor.compare.warnings import has_timeline
from nsight_doctor.model import fmt_ns
from nsight_doctor.sections import SteadyGpu, Summary

# A difference smaller than this (in %) is reported as no difference.
SAME_PCT = 3.0


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
    cb, cc = components(gb, basis), components(gc, basis)
    # Shares of the mean step (of the steady state without steps): the components add up to it.
    mb, mc = sum(cb.values()) / db, sum(cc.values()) / dc
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

    nb, nc = (gb.kernels + gb.graphs) / gb.steps, (gc.kernels + gc.graphs) / gc.steps
    graphs_b, graphs_c = gb.graphs / gb.steps, gc.graphs / gc.steps
    # (unchanged: the same launches, and as many of them CUDA graphs)
    if abs(nc - nb) < 0.05 * max(nb, 1) and abs(graphs_c - graphs_b) < 0.05 * max(graphs_b, 1):
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
    unlike: str | None = None,
) -> Verdict:
    """unlike: why the last profile's steps and the first's do different work (warnings.step_work)."""
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
    values = metric_values(metric, profiles, tokens, rows)
    vb, vc = values[0], values[-1]
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
    if unlike is not None and not metric.per_step and metric.name != "token":
        # Why a work-normalised figure and not the step time.
        why = f"The steps do different work: {unlike}"
        r = token_ratio(profiles, len(profiles) - 1) if metric.name == "token_inferred" else None
        if r:
            why += (
                f", so each step of the {cand.label} run likely holds {r:,.3g} times the tokens (give "
                "--tokens-per-step to be exact)"
            )
        sentences.insert(0, why)
    # What changed within the step: for a per-token verdict, the step itself.
    step_dir = v.direction
    if metric.name == "token":
        step = METRICS["decode_step"] if decode_step_time(sb) and decode_step_time(sc) else METRICS["step"]
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
    # A work-normalised verdict has no step to explain; a per-step one does, with a note.
    if step_dir in ("faster", "slower") and (unlike is None or metric.per_step or metric.name == "token"):
        v.causes = explain(sb, sc, basis, -1 if step_dir == "faster" else 1)
    sentences += cause_sentences(v.causes, sb, sc, basis, sentences)
    v.notes = work_notes(profiles, tokens, metric, unlike)
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
        if cause.component == "idle:launch" and not said_launches:  # (what explains launch waiting)
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


def work_notes(
    profiles: Sequence[Profile], tokens: Sequence[float | None], metric: Metric, unlike: str | None
) -> list[str]:
    """What a per-step verdict does not say: the steps may do different work."""
    if unlike is None or not metric.per_step or (tokens[0] and tokens[-1]):
        return []
    gb, gc = step_gpu(profiles[0].diagnosis.summary), step_gpu(profiles[-1].diagnosis.summary)
    busy = ""
    if gb and gc and gb.steps and gc.steps:
        busy = f", and the GPU is busy {fmt_ns(gb.busy_ns / gb.steps)} → {fmt_ns(gc.busy_ns / gc.steps)} per step"
    return [
        f"The steps do different work ({unlike}){busy}. If the {profiles[-1].label} run has a larger batch, its "
        "time per token is what matters: give --tokens-per-step for each profile to compare per token."
    ]


def no_metric_text(profiles: Sequence[Profile]) -> str:
    if not any(has_timeline(p.diagnosis) for p in profiles):
        return (
            "No timeline: these are Nsight Compute reports only, so there is no step time to compare; "
            "see the profiled kernels' deltas."
        )
    return "No metric that every profile has (step times or a GPU activity window); see the tables."


def gate_for(
    profiles: Sequence[Profile],
    metric: Metric | None,
    tokens: Sequence[float | None],
    threshold: float | None,
    rows: list[KernelRow],
) -> Gate:
    if metric is None:
        if threshold is not None:
            raise CompareError(
                "the regression gate has no metric that every profile has (no steps and no GPU activity); "
                "choose one with --metric"
            )
        return Gate("none", "no metric", None, None, None, None, False)
    values = metric_values(metric, profiles, tokens, rows)
    vb, vc = values[0], values[-1]
    if threshold is not None and (vb is None or vc is None):
        missing = profiles[0].label if vb is None else profiles[-1].label
        raise CompareError(f"the gate's metric '{metric.name}' has no value for {missing}: {metric.missing}")
    ch = change(vb, vc)
    failed = threshold is not None and ch is not None and ch > threshold
    return Gate(metric.name, metric.label, vb, vc, ch, threshold, failed)
