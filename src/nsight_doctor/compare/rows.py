"""The deltas: each quantity side by side across the profiles (overview, phases, where a step's
time goes, kernel categories, kernels matched across profiles, copies and syncs, GPUs, and the
kernels Nsight Compute profiled)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nsight_doctor.compare.metrics import METRICS, all_steps, change, decode_kind, per_step, step_gpu, token_time
from nsight_doctor.compare.model import GpuRow, KernelRow, NcuRow, PhaseRow, Profile, Row
from nsight_doctor.compare.warnings import has_timeline
from nsight_doctor.sections import SteadyGpu, Summary

# Kernel categories that are one part of the step's time in a verdict.
ATTENTION_PARTS = {"attention-unfused": "attention"}


def make_row(key: str, label: str, unit: str, values: list[float | None], better: str = "lower") -> Row:
    first = values[0] if values else None
    return Row(key, label, unit, better, values, [None, *(change(first, v) for v in values[1:])])


def present(rows: list[Row]) -> list[Row]:
    """Rows with a value in at least one profile."""
    return [r for r in rows if any(v is not None for v in r.values)]


CAUSE_LABELS = {
    "idle:launch": "waiting for kernel launches",
    "idle:sync": "idle with the CPU still in a blocking call",
    "idle:cpu": "waiting for the CPU (work outside CUDA)",
    "idle:api": "waiting in other CUDA calls",
    "idle:queued": "gaps with work already queued",
    "idle:setup": "one-time setup",
    "wait:collectives": "exposed waiting for a slower GPU",
    "gpu:cuda-graph": "CUDA graph execution",
    "gpu:memcpy": "copies",
    "gpu:memset": "memsets",
    "gpu:gemm": "GEMM kernels",
    "gpu:busy": "GPU busy",
    "gpu:communication": "collective transfers",
}


def component_label(key: str) -> str:
    if key in CAUSE_LABELS:
        return CAUSE_LABELS[key]
    kind, _, name = key.partition(":")
    return f"{name} kernels" if kind == "gpu" else f"idle ({name})"


def components(g: SteadyGpu, basis: str = "step") -> dict[str, float]:
    """Where a GPU's steady time went, in totals (ns) that add up to the time they divide: per
    step, the steps' own split (summary_step_parts: the idle parts, and the GPU busy time with
    the launching thread free or blocked); without steps, the steady state's busy time and idle
    parts. Collectives' waiting for a slower GPU with nothing else running is its own part (its
    share of the steady busy time); the rest of the busy time is shared out among the work that
    ran (kernel categories, CUDA graphs, copies, memsets; collectives by their transfer) by its
    summed durations, which exceed the busy time where streams overlap."""
    parts = g.step_parts if basis == "step" else None
    if parts is not None and parts.steps:
        n = parts.steps
        busy = (parts.gpu_ns + parts.blocked_ns) * n
        idle = {p: getattr(parts, f"{p}_ns") * n for p in IDLE_PARTS}
    else:
        busy = float(g.busy_ns)
        idle = {}
        for i in g.idle:
            idle[i.cause] = idle.get(i.cause, 0) + i.total_ns
    work: dict[str, float] = {}
    for c in g.kernel_categories:
        # Attention in every form is one component: fused kernels or the unfused chain.
        key = f"gpu:{ATTENTION_PARTS.get(c.category or 'other', c.category or 'other')}"
        work[key] = work.get(key, 0) + c.total_ns
    # Waiting in collectives took the GPU's time only where no other kernel ran beside it
    # (exposed_wait_ns); waiting beside other kernels is their time.
    waited = 0.0
    if g.comm_wait_ns and "gpu:communication" in work:
        work["gpu:communication"] -= g.comm_wait_ns
        waited = busy * min(exposed_wait_ns(g) / g.busy_ns, 1.0) if g.busy_ns else 0.0
    for key, ns in (("gpu:cuda-graph", g.graph_ns), ("gpu:memcpy", g.memcpy_ns), ("gpu:memset", g.memset_ns)):
        if ns:
            work[key] = ns
    rest = busy - waited
    summed = sum(v for v in work.values() if v > 0)
    out = {k: rest * v / summed for k, v in work.items() if v > 0} if summed > 0 else {}
    if rest > 0 and not out:
        out["gpu:busy"] = rest
    if waited > 0:
        out["wait:collectives"] = waited
    for p, ns in idle.items():
        if ns:
            out[f"idle:{p}"] = out.get(f"idle:{p}", 0) + ns
    return out


def exposed_wait_ns(g: SteadyGpu) -> float:
    """A GPU's waiting in collectives while no other kernel ran on it (comm_exposed_wait_ns,
    the figure of rank-imbalance and communication-exposed); a fleet row from before that
    column has only the total waiting."""
    return g.comm_wait_ns if g.comm_exposed_wait_ns is None else g.comm_exposed_wait_ns


IDLE_PARTS = ("launch", "queued", "sync", "cpu", "api", "setup")


def divisor(g: SteadyGpu | None, basis: str) -> float | None:
    if g is None:
        return None
    if basis == "step":
        steps = g.step_parts.steps if g.step_parts is not None else g.steps
        return float(steps) if steps else None
    return 1.0


def kernel_key_name(launch: str) -> str:
    return launch.split("<<<", 1)[0]


# The overview of Nsight Compute reports alone: (key, label, unit, field of summary.ncu).
NCU_OVERVIEW = [
    ("ncu_kernels", "Kernels profiled", "count", "kernels_profiled"),
    ("ncu_launches", "Launch configurations", "count", "launch_configs"),
    ("ncu_profiled_ns", "Profiled kernel time", "ns", "profiled_ns"),
    ("ncu_memory_bound", "Memory-bound kernels", "count", "memory_bound"),
    ("ncu_compute_bound", "Compute-bound kernels", "count", "compute_bound"),
    ("ncu_latency_bound", "Latency-bound kernels", "count", "latency_bound"),
]


def ncu_overview_rows(sums: Sequence[Summary]) -> list[Row]:
    """What Nsight Compute reports alone profiled, and how it is bound."""
    rows = []
    for key, label, unit, field in NCU_OVERVIEW:
        values = [float(getattr(s.ncu, field)) if s.ncu and getattr(s.ncu, field) is not None else None for s in sums]
        rows.append(make_row(key, label, unit, values, "" if unit == "count" else "lower"))
    return present(rows)


def overview_rows(profiles: Sequence[Profile], tokens: Sequence[float | None]) -> list[Row]:
    sums = [p.diagnosis.summary for p in profiles]
    if not any(has_timeline(p.diagnosis) for p in profiles):
        return ncu_overview_rows(sums)
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
        rows.append(make_row("token_ns", "Time per token", "ns", [token_time(s, t) for s, t in zip(sums, tokens)]))
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
    """Where the time goes on the GPU that sets each profile's step time: rows that add up to its
    mean step (per steady state without steps)."""
    gpus = [step_gpu(p.diagnosis.summary) for p in profiles]
    comps = [components(g, basis) if g else {} for g in gpus]
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
        steps = all_steps(s)
        divs.append((float(steps) if steps else None) if basis == "step" else (1.0 if s.steady_gpus else None))
    keys = sorted({k for t in totals for k in t}, key=lambda k: -max(t.get(k, 0) for t in totals))
    return [
        make_row(f"category:{k}", k, "ns", [t.get(k, 0) / d if d else None for t, d in zip(totals, divs)]) for k in keys
    ]


def transfer_rows(profiles: Sequence[Profile], basis: str) -> list[Row]:
    sums = [p.diagnosis.summary for p in profiles]
    if not any(has_timeline(p.diagnosis) for p in profiles):
        return []  # (no copy or call is traced without a timeline: zeros would say none ran)
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
                f(exposed_wait_ns),
            )
        )
    return out


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
        steps = all_steps(s)
        divs.append((float(steps) if steps else None) if basis == "step" else 1.0)
    left: list[list[_K]] = [list(ks) for ks in lists]
    groups: list[tuple[str, list[list[_K]]]] = []
    keyfns: list[tuple[str, Callable[[_K], tuple]]] = [
        # (a CUDA graph traced whole is known by its id, which does not say what it runs: two
        # captures' "graph 1" match by name at most, never as the same work)
        ("shape", lambda k: (k.name, k.demangled, k.shape) if k.category != "cuda-graph" else (id(k),)),
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
                roof=[m.roof if m else None for m in members],
                regime=[m.regime if m else None for m in members],
                roof_pct=[m.roof_pct if m else None for m in members],
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
