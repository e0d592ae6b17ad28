"""Why the profiles may not be comparable: other GPUs, another workload, no steady state, steps
that do different work."""

from __future__ import annotations

import re
from collections.abc import Sequence

from nsight_doctor.compare.metrics import all_steps, pct_text, same_work, step_gpu, times, work_scale
from nsight_doctor.compare.model import CompareWarning, KernelRow, Profile
from nsight_doctor.model import Diagnosis, fmt_ns
from nsight_doctor.sections import Summary

# Comparability bounds.
CAPTURE_RATIO_WARN = 4.0  # GPU activity windows this many times apart


KERNEL_MIX_WARN_PCT = 50.0  # less than this share of kernel time in kernel names both profiles ran
KERNEL_SUBSET_PCT = 90.0  # ... while at least this share of the other's is: one holds the other's kernels


SHAPE_CHANGE_WARN_PCT = 50.0  # at least this share of matched kernel time runs with other launch shapes


def has_timeline(d: Diagnosis) -> bool:
    return any(i["kind"] in ("nsys-rep", "nsys-sqlite", "nsys-parquet", "nvprof") for i in d.inputs)


def graph_traced(s: Summary) -> bool:
    """CUDA graphs traced as a whole: their kernels are not in the profile one by one."""
    return s.kernels.graph_launch_count > 0


# Kernels whose names encode the problem's shape (GEMM tiles, attention kernel variants): they
# count by category in the kernel mix, so that another batch size is not another workload.
SHAPED_CATEGORIES = {"gemm", "attention", "attention-unfused", "communication"}


def mix_key(name: str | None, category: str | None) -> str:
    """Attention in every form (fused kernels, or GEMMs and a softmax unfused) is one key: a
    new attention backend is not another workload."""
    if category == "attention-unfused":
        category = "attention"
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
                mix = (
                    f"different kernel mix: only {pct_text(a)} of {profiles[0].label}'s steady kernel time "
                    f"is in kernels that {p.label} also ran, and {pct_text(b)} the other way round"
                )
                if max(a, b) >= KERNEL_SUBSET_PCT:
                    # (one side's kernels are nearly all the other's: the same program doing more)
                    more = profiles[0].label if a < b else p.label
                    mix += (
                        f": {more}'s steady state holds work that the other's lacks (prompts beside "
                        "decodes, another phase, or kernels that the other ran inside CUDA graphs)"
                    )
                else:
                    mix += ": probably a different workload (another model, or training against inference)"
                out.append(CompareWarning("kernel-mix", mix))
    for i, p in enumerate(profiles[1:], 1):
        why = step_work(profiles, i)
        shapes = shape_change(rows, i)
        steps = bool(step_gpu(sums[0]) and step_gpu(sums[i]) and all_steps(sums[0]) and all_steps(sums[i]))
        if shapes is not None and shapes[0] >= SHAPE_CHANGE_WARN_PCT and (why is not None or not steps):
            out.append(
                CompareWarning(
                    "launch-shapes",
                    f"{p.label} runs the same kernels as {profiles[0].label} with other launch shapes "
                    f"({pct_text(shapes[0])} of their time, e.g. {shapes[1]}): the steps do different work "
                    "(another batch size or sequence length); compare per token (--tokens-per-step) rather "
                    "than per step",
                )
            )
        elif why is not None:
            out.append(
                CompareWarning(
                    "step-work",
                    f"{p.label}'s steps and {profiles[0].label}'s may do different work: {why}; per-step figures "
                    "compare unlike steps",
                )
            )
    for p, s in zip(profiles, sums):
        distorting = [x for x in s.settings if x.kind == "distorts"]
        if distorting:
            out.append(
                CompareWarning(
                    "capture-settings",
                    f"{p.label} ran with "
                    + "; ".join(f"{x.name}={x.value} ({x.effect})" for x in distorting)
                    + ": its numbers are not those of a normal run",
                )
            )
    for p, s in zip(profiles[1:], sums[1:]):
        diff = launch_diff(sums[0], s, profiles[0].label, p.label)
        if diff:
            shown = diff[:LAUNCH_DIFF_SHOWN] + (
                [f"{len(diff) - LAUNCH_DIFF_SHOWN} more"] if len(diff) > LAUNCH_DIFF_SHOWN else []
            )
            out.append(
                CompareWarning(
                    "launch",
                    f"the recorded launches differ in {len(diff)} setting{'' if len(diff) == 1 else 's'} "
                    f"({profiles[0].label} → {p.label}): {'; '.join(shown)}"
                    + (
                        ": where more than one of them changes the work, the difference is not one setting's"
                        if len(diff) > 1
                        else ""
                    ),
                )
            )
    return out


LAUNCH_DIFF_SHOWN = 6  # differences named in the launch warning; the rest are counted

# Options that say where a program writes its results (--json a.json, --output-dir runs/b,
# --result-filename x): another value there changes no work, so it is no launch difference.
# (--output-len, --log-level and the like are settings, and stay.)
OUTPUT_OPTION = re.compile(r"--(out|output|json|log|save|result|results|dump)([-_](file|filename|path|dir|json))?")


# Options that set how much work a step does: the rows of a batch, a step's token budget, the
# tokens of a prompt (--batch, --batch-size, vLLM's --max-num-seqs and --max-num-batched-tokens,
# SGLang's --max-running-requests and --chunked-prefill-size, TensorRT-LLM's --max_batch_size and
# --max_num_tokens, --prompt-len, --input-len, --seq-len). The model's context length
# (--max-model-len) and the output length change no step's work.
STEP_WORK_OPTION = re.compile(
    r"--(?:[a-z0-9]+[-_])*(?:batch(?:[-_](?:size|tokens))?|batched[-_]tokens|num[-_]seqs|num[-_]tokens"
    r"|running[-_]requests|prefill[-_](?:size|tokens)|prompt[-_]len(?:gth)?|input[-_]len(?:gth)?"
    r"|seq(?:uence)?[-_]len(?:gth)?)",
    re.I,
)


def step_work_options(a: Summary, b: Summary) -> list[str]:
    """The recorded options of STEP_WORK_OPTION whose values differ between two profiles
    ("--batch 16 → 4"); empty when either recorded no launch."""
    if not launched(a, b):
        return []
    oa, ob = option_values(a), option_values(b)
    out = []
    for name in differing(oa, ob):
        if STEP_WORK_OPTION.fullmatch(name):
            va, vb = (values_text(v) if v else "(not given)" for v in (oa.get(name), ob.get(name)))
            out.append(f"{name} {va} → {vb}")
    return out


def launched(a: Summary, b: Summary) -> bool:
    """Whether both profiles recorded the launch of a command (not an attached process, an old
    export, nvprof or Nsight Compute): only then can their launches be compared."""
    return bool(a.recorded and b.recorded and any(r.command for r in a.recorded + b.recorded))


def differing(oa: dict[str, tuple[str | None, ...]], ob: dict[str, tuple[str | None, ...]]) -> list[str]:
    """The names whose values differ (or that one side lacks), in the order they appear."""
    return [n for n in dict.fromkeys([*oa, *ob]) if oa.get(n) != ob.get(n)]


def option_values(s: Summary) -> dict[str, tuple[str | None, ...]]:
    """Each recorded long option's values, in the order recorded."""
    out: dict[str, tuple[str | None, ...]] = {}
    for o in s.options:
        out[o.option] = (*out.get(o.option, ()), o.value)
    return out


def values_text(values: tuple[str | None, ...]) -> str:
    return ", ".join(v if v is not None else "(set)" for v in values)


def launch_diff(a: Summary, b: Summary, label_a: str, label_b: str) -> list[str]:
    """What differs between two profiles' recorded launches, in the order it appears: the long
    options of the command lines (recorded_options: "--max-num-seqs 256 → 512",
    "--enforce-eager only in A"; not those naming an output, OUTPUT_OPTION), then the
    environment variables worth showing
    (recorded_settings: "CUDA_LAUNCH_BLOCKING=1 only in B"). Empty when either profile recorded
    no launch (an attached process, an old export, nvprof or Nsight Compute): nothing to
    compare."""
    if not launched(a, b):
        return []

    def options(s: Summary) -> dict[str, tuple[str | None, ...]]:
        out = {k: v for k, v in option_values(s).items() if not OUTPUT_OPTION.fullmatch(k)}
        for e in s.settings:
            out[e.name] = (*out.get(e.name, ()), e.value)
        return out

    oa, ob = options(a), options(b)
    diff = []
    for name in differing(oa, ob):
        if name not in ob or name not in oa:
            values, label = (oa[name], label_a) if name in oa else (ob[name], label_b)
            shown = values_text(tuple(v for v in values if v is not None))
            sep = " " if name.startswith("-") else "="  # (an option's value, or a variable's)
            diff.append(f"{name}{sep + shown if shown else ''} only in {label}")
        else:
            diff.append(f"{name} {values_text(oa[name])} → {values_text(ob[name])}")
    return diff


def step_work(profiles: Sequence[Profile], i: int) -> str | None:
    """Why profile i's steps and the baseline's do not do the same work, as far as the captures
    show (None: they do, or there are no steps to compare): a step signature found with low
    confidence, steps of which one profile's are rounds of speculative decoding (or rounds of
    other sizes), or kernels that both ran launching other numbers of threads per step
    (metrics.work_scale: calls x grid x block, whatever the split into launches). Kernels
    hidden in CUDA graphs traced whole give no evidence either way; where the kernels tell
    nothing, recorded command lines that set a batch or prompt size differently do."""
    sb, sc = profiles[0].diagnosis.summary, profiles[i].diagnosis.summary
    gb, gc = step_gpu(sb), step_gpu(sc)
    if not (gb and gc and gb.steps and gc.steps):
        return None
    for p, g in ((profiles[0], gb), (profiles[i], gc)):
        src = g.step_source
        if src is not None and src.confidence == "low":
            return f"{p.label}'s steps were found with low confidence ({src.marker}: {src.evidence})"
    rounds = [g.step_source.round_passes if g.step_source else None for g in (gb, gc)]
    if rounds[0] != rounds[1] and (rounds[0] is None or rounds[1] is None or abs(rounds[0] - rounds[1]) >= 0.5):
        # (a round yields a token and each accepted proposal, which no capture shows)
        held = " → ".join("passes" if r is None else f"rounds of {r:.1f} draft passes and a target's" for r in rounds)
        return f"the steps are {held} (speculative decoding): compare per token"
    ws = None if graph_traced(sb) or graph_traced(sc) else work_scale(profiles, i)
    if ws is None:
        # The kernels tell nothing: the recorded command lines may.
        changed = step_work_options(sb, sc)
        return f"the recorded launches set {'; '.join(changed)}" if changed else None
    if same_work(ws):
        return None
    example = f"{short_name(ws.kernel)}: {ws.threads[0]:,.0f} → {ws.threads[1]:,.0f}"
    if ws.ratio is None:
        return f"the kernels both ran launch other numbers of threads per step, by no common factor (e.g. {example})"
    return f"the kernels both ran launch {times_text(ws.ratio)} the threads per step (e.g. {example})"


def times_text(ratio: float) -> str:
    return f"{times(ratio)}" if ratio >= 1 else f"1/{times(1 / ratio)}"


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


def short_name(name: str, n: int = 40) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def shape_text(a: str | None, b: str | None) -> str:
    """'grid 1,16,1 → 1,16,512' (and the blocks when they differ)."""
    if not a or not b or "/" not in a or "/" not in b:
        return f"{a} → {b}"
    (ga, ba), (gb, bb) = a.split("/", 1), b.split("/", 1)
    text = f"grid ({ga}) → ({gb})"
    return text + (f", block ({ba}) → ({bb})" if ba != bb else "")


# Warnings that make the verdict's difference something else than the configuration's.
CAUTIONS = {
    "gpu-model": "the GPUs differ",
    "kernel-mix": "the kernels differ",
    "no-steady-state": "a profile has no steady state",
    "capture-settings": "a capture ran with a setting that distorts it",
}
