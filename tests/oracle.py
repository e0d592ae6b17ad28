"""An independent oracle for the store's idle gaps and their parts, written from their
documentation (docs/schema.md, gpu_gaps) in plain Python over SQLite reads of the raw export:
no DuckDB, no Polars, no code of ours. Where the tool integrates each thread's state over many
windows at once, this walks each gap's window call by call. Tests compare the tool's numbers
with these.

It handles single-GPU, single-process exports (the samples).
"""

from __future__ import annotations

import bisect
import itertools
import re
import sqlite3
import statistics
from dataclasses import dataclass, field

SHORT_CPU_NS = 100_000  # code between two CUDA calls shorter than this is per-operation overhead
LATENCY_NS = 20_000  # from a launch call's return to the operation's start
COMPILE_GAP_NS = 1_000_000
PARTS = ("launch", "queued", "sync", "cpu", "api", "setup")

ONE_TIME = re.compile(
    r"^(cuModuleLoad|cuLibraryLoad|cuLink|cuModuleGetFunction|cuLibraryGetKernel|cuLibraryGetModule|"
    r"cuKernelGetFunction|cudaGetFuncBySymbol|cuGetProcAddress|cudaGetDriverEntryPoint|cuModuleUnload|"
    r"cuLibraryUnload|cudaStreamBeginCapture|cudaStreamEndCapture|cuStreamBeginCapture|cuStreamEndCapture|"
    r"cudaGraphInstantiate|cuGraphInstantiate|cudaGraphCreate|cuGraphCreate|cudaGraphAdd|cuGraphAdd|"
    r"cudaGraphExecUpdate|cuGraphExecUpdate|cudaGraphUpload|cuGraphUpload|cudaThreadExchangeStreamCaptureMode|"
    r"cudaGraphDestroy|cuGraphDestroy|cudaGraphExecDestroy|cuGraphExecDestroy|cudaHostAlloc|cudaMallocHost|"
    r"cuMemHostAlloc|cuMemAllocHost|cudaHostRegister|cuMemHostRegister|cudaFreeHost|cuMemFreeHost|"
    r"cudaHostUnregister|cuMemHostUnregister|cuInit|cuCtxCreate|cuCtxDestroy|cuDevicePrimaryCtx|cudaSetDevice|"
    r"cudaDeviceReset|cudaStreamCreate|cuStreamCreate|cudaStreamDestroy|cuStreamDestroy|cudaEventCreate|"
    r"cuEventCreate|cudaEventDestroy|cuEventDestroy|cudaGetDeviceProperties|cudaFuncGetAttributes|"
    r"cudaFuncSetAttribute|cuFuncSetAttribute|cuKernelSetAttribute|cudaProfilerStart|cudaProfilerStop|"
    r"cuProfilerStart|cuProfilerStop)"
)
ALLOC = re.compile(
    r"^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|cuMemCreate|cuMemMap|cuMemUnmap|cuMemRelease|cuMemAddress|cuMemSetAccess)"
)
LAUNCH = re.compile(r"^(cudaLaunch|cuLaunch|cudaGraphLaunch|cuGraphLaunch)")
SYNC = re.compile(
    r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaThreadSynchronize|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize)"
)
COPY = re.compile(r"^(cuda|cu)Mem(cpy|set)")


def base(name: str) -> str:
    return re.sub(r"(_ptsz|_ptds)?(_v[0-9]+)?$", "", name)


MODULE = re.compile(
    r"^(cuModuleLoad|cuLibraryLoad|cuLink|cuModuleGetFunction|cuLibraryGetKernel|cuLibraryGetModule|"
    r"cuKernelGetFunction|cudaGetFuncBySymbol|cuGetProcAddress|cudaGetDriverEntryPoint|cuModuleUnload|"
    r"cuLibraryUnload)"
)


@dataclass
class Gap:
    start: int
    end: int
    next_kind: str
    # launch, queued, sync, cpu, api, setup (adding up to the duration), and the sub-parts
    # sync_copy (of sync), alloc, copy, other (of api)
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def cause(self) -> str:
        return max(PARTS, key=lambda p: (self.parts.get(p, 0), -PARTS.index(p)))


def open_export(path) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("ATTACH DATABASE ? AS x", (f"file:{path}?mode=ro&immutable=1",))
    return con


def tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM x.sqlite_master WHERE type = 'table'")}


def gaps(con: sqlite3.Connection) -> list[Gap]:
    have = tables(con)
    # (an operation's launch call by process and correlation id: each process numbers its own)
    pid = "(globalPid >> 24) & 16777215"
    ops = [
        (s, e, (p, c), "kernel", n)
        for s, e, p, c, n in con.execute(
            f"SELECT k.start, k.end, {pid.replace('globalPid', 'k.globalPid')}, k.correlationId, s.value "
            "FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName"
        )
    ]
    for table, kind in (("MEMCPY", "memcpy"), ("MEMSET", "memset"), ("GRAPH_TRACE", "graph")):
        if f"CUPTI_ACTIVITY_KIND_{table}" in have:  # (tables are created lazily)
            ops += [
                (s, e, (p, c), kind, None)
                for s, e, p, c in con.execute(
                    f"SELECT start, end, {pid}, correlationId FROM x.CUPTI_ACTIVITY_KIND_{table}"
                )
            ]
    ops.sort(key=lambda o: (o[0], o[1]))
    first_of_name: dict[str, int] = {}
    for s, _, _, kind, name in ops:
        if kind == "kernel":
            first_of_name.setdefault(name, s)

    calls = [
        (s, e, (p, c), base(n), tid)
        for s, e, p, c, n, tid in con.execute(
            "SELECT r.start, r.end, (r.globalTid >> 24) & 16777215, r.correlationId, s.value, r.globalTid "
            "FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId"
        )
    ]
    by_corr = {c: (s, e, tid) for s, e, c, n, tid in calls}
    copies = {}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        copies = {
            (p, c): (kind, dst)
            for p, c, kind, dst in con.execute(
                f"SELECT {pid}, correlationId, copyKind, dstKind FROM x.CUPTI_ACTIVITY_KIND_MEMCPY"
            )
        }
    memsets = {}
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        memsets = {
            (p, c): k
            for p, c, k in con.execute(f"SELECT {pid}, correlationId, memKind FROM x.CUPTI_ACTIVITY_KIND_MEMSET")
        }

    def blocking(c, n) -> str | None:
        if SYNC.match(n):
            return "sync"
        if re.match(r"^(cuda|cu)Memcpy", n):
            kind, dst = copies.get(c, (None, None))
            if "Async" not in n:
                return None if kind in (8, 10, 5, 6, 7) else "sync_copy"  # DtoD, PtoP, array copies
            return "pageable_copy" if kind == 2 and dst == 0 else None
        if re.match(r"^(cuda|cu)Memset", n) and "Async" not in n:
            return "sync_memset" if memsets.get(c) in (1, 4) else None  # pinned, managed
        return None

    def state(c, n) -> str:
        why = blocking(c, n)
        if why in ("sync_copy", "sync_memset"):
            return "sync_copy"
        if why:
            return "sync"
        if LAUNCH.match(n):
            return "launch"
        if MODULE.match(n) or ONE_TIME.match(n):
            return "setup"
        if ALLOC.match(n):
            return "alloc"
        if COPY.match(n):
            return "copy"
        return "other"

    # Each thread's outermost calls, in order: (start, end, state).
    threads: dict[int, list[tuple[int, int, str]]] = {}
    for s, e, c, n, tid in sorted(calls, key=lambda x: (x[4], x[0], -x[1])):
        mine = threads.setdefault(tid, [])
        if mine and s < max(m[1] for m in mine[-1:]):
            continue  # inside the previous outer call
        mine.append((s, e, state(c, n)))
    ends = {tid: [e for _, e, _ in v] for tid, v in threads.items()}
    # (code loaded by any thread of the gap's own process: another program's loads do not hold it)
    modules: dict[int, list[tuple[int, int]]] = {}
    for s, e, c, n, _ in sorted(calls):
        if MODULE.match(n):
            modules.setdefault(c[0], []).append((s, e))
    launchers = [by_corr[o[2]][2] for o in ops if o[2] in by_corr]
    main = max(set(launchers), key=launchers.count) if launchers else None

    def walk(tid: int, w0: int, w1: int, parts: dict[str, int]) -> None:
        """Adds the thread's time in [w0, w1) by state, call by call."""
        mine = threads.get(tid, [])
        i = bisect.bisect_right(ends.get(tid, []), w0)
        t = w0
        while t < w1:
            if i < len(mine) and mine[i][0] <= t:
                _, e, st = mine[i]
                stop = min(e, w1)
                parts[st] = parts.get(st, 0) + stop - t
                t, i = stop, i + 1
            else:
                prev_end = mine[i - 1][1] if i > 0 else None
                next_start = mine[i][0] if i < len(mine) else None
                short = prev_end is not None and next_start is not None and next_start - prev_end < SHORT_CPU_NS
                stop = w1 if next_start is None else min(next_start, w1)
                key = "launch_short" if short else "cpu"
                parts[key] = parts.get(key, 0) + stop - t
                t = stop

    # Busy islands, then the gaps between them.
    islands: list[list] = []
    for op in ops:
        if islands and op[0] <= islands[-1][1]:
            islands[-1][1] = max(islands[-1][1], op[1])
        else:
            islands.append([op[0], op[1], op])
    out = []
    for prev, nxt in itertools.pairwise(islands):
        gs, ge, first = prev[1], nxt[0], nxt[2]
        ls, le, tid = by_corr.get(first[2], (None, None, main))
        raw: dict[str, int] = {}
        queued = after = 0
        if le is not None and le <= gs:
            queued = ge - gs  # issued before the gap began
        else:
            w1 = ge if le is None else min(ge, le)
            if tid is not None:
                walk(tid, gs, w1, raw)
            else:  # no API trace: a short gap is launch overhead
                raw["launch_short" if ge - gs < SHORT_CPU_NS else "cpu"] = w1 - gs
            if le is not None and le < ge:
                if ge - max(gs, le) < LATENCY_NS:
                    after = ge - max(gs, le)
                else:
                    queued = ge - max(gs, le)
        launch = raw.get("launch", 0) + raw.get("launch_short", 0) + after
        cpu = raw.get("cpu", 0)
        setup = raw.get("setup", 0)
        mods = modules.get((tid >> 24) & 0xFFFFFF, []) if tid is not None else []
        loaded = any(min(e, ge) > max(s, gs) for s, e in mods[: bisect.bisect_left(mods, (ge, 0))][-200:])
        first_launch = first[3] == "kernel" and first_of_name.get(first[4]) == ge
        if ge - gs >= COMPILE_GAP_NS and (loaded or (first_launch and ls is not None and le - ls >= COMPILE_GAP_NS)):
            setup, launch, cpu = setup + launch + cpu, 0, 0
        parts = {
            "launch": launch,
            "queued": queued,
            "sync": raw.get("sync", 0) + raw.get("sync_copy", 0),
            "sync_copy": raw.get("sync_copy", 0),
            "cpu": cpu,
            "api": raw.get("alloc", 0) + raw.get("copy", 0) + raw.get("other", 0),
            "alloc": raw.get("alloc", 0),
            "copy": raw.get("copy", 0),
            "other": raw.get("other", 0),
            "setup": setup,
        }
        out.append(Gap(gs, ge, first[3], parts))
    return out


def totals(gs: list[Gap], part: str) -> tuple[int, int]:
    """(gaps with time in the part, the part's total ns)."""
    return sum(1 for g in gs if g.parts.get(part, 0) > 0), sum(g.parts.get(part, 0) for g in gs)


# Step times ------------------------------------------------------------------------------------


def nvtx_step_times(con: sqlite3.Connection, text: str) -> dict[int, list[int]]:
    """Each GPU's step times from the NVTX push/pop ranges named `text`, as docs/schema.md
    defines steps: a range's GPU span runs from the start of the first GPU operation that a CUDA
    call made inside it (on the same thread) issued, to the end of the last; a step lasts from its
    span's start to the next step's start, or to its own span's end when that is later."""
    have = tables(con)
    ops: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    op_tables = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"]
    for table in [*op_tables, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"]:
        if table in have:
            for dev, s, e, corr, gpid in con.execute(
                f"SELECT deviceId, start, end, correlationId, globalPid FROM x.{table}"
            ):
                ops.setdefault((gpid >> 24, corr), []).append((dev, s, e))
    calls: dict[int, list[tuple[int, int]]] = {}
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in have:
            for s, corr, tid in con.execute(f"SELECT start, correlationId, globalTid FROM x.{table}"):
                calls.setdefault(tid, []).append((s, corr))
    for v in calls.values():
        v.sort()
    spans: dict[int, list[tuple[int, int]]] = {}
    for rs, re_, tid in con.execute(
        "SELECT start, end, globalTid FROM x.NVTX_EVENTS WHERE eventType = 59 AND text = ?", (text,)
    ):
        mine = calls.get(tid, [])
        lo = bisect.bisect_left(mine, (rs, -1))
        hi = bisect.bisect_right(mine, (re_, 1 << 62))
        by_dev: dict[int, list[tuple[int, int]]] = {}
        for _, corr in mine[lo:hi]:
            for dev, s, e in ops.get((tid >> 24, corr), []):
                by_dev.setdefault(dev, []).append((s, e))
        for dev, se in by_dev.items():
            spans.setdefault(dev, []).append((min(s for s, _ in se), max(e for _, e in se)))
    out = {}
    for dev, ss in spans.items():
        ss.sort()
        out[dev] = [max(nxt[0], e) - s for (s, e), nxt in itertools.pairwise(ss)] + [ss[-1][1] - ss[-1][0]]
    return out


def pacing_gpu(con: sqlite3.Connection) -> int:
    """The GPU the others wait for in a job whose ranks step together through NCCL collectives:
    the one whose collective kernels (NCCL's, by name) ran least in all, since a collective
    kernel runs from its launch until every rank has joined it. (The lowest id among equals.)"""
    rows = con.execute(
        """SELECT k.deviceId, sum(k.end - k.start) FROM x.CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN x.StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%' GROUP BY k.deviceId"""
    ).fetchall()
    return min(rows, key=lambda r: (r[1], r[0]))[0]


def anchor_steps(con: sqlite3.Connection, name: str, grid: tuple[int, int, int]) -> list[tuple[int, int]]:
    """(start, end) of the steps of a single-GPU export whose step kernel is given (by name and
    grid: a kernel launched once per forward pass), as docs/schema.md defines anchor steps,
    counted in kernels and graph executions: a step begins at the same place in every period
    between two anchors, the operation (counted on from the previous anchor or back from the
    next) before which the GPU waited longest in all; where nine periods in ten hold a round
    trip to the host, only the first operations after one count. Steps 2 onwards (the first
    one's start is a guess the tests do not check)."""
    have = tables(con)
    rows = [
        (s, e, n, gx, gy, gz)
        for s, e, n, gx, gy, gz in con.execute(
            """SELECT k.start, k.end, s.value, k.gridX, k.gridY, k.gridZ
               FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName"""
        )
    ]
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in have:
        rows += [
            (s, e, None, 0, 0, 0) for s, e in con.execute("SELECT start, end FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
        ]
    rows.sort(key=lambda r: (r[0], r[1]))
    starts = [r[0] for r in rows]
    idle, busy_until = [], None
    for s, e, *_ in rows:
        idle.append(0 if busy_until is None else max(0, s - busy_until))
        busy_until = e if busy_until is None else max(busy_until, e)
    anchors = [i for i, r in enumerate(rows) if r[2] == name and tuple(r[3:]) == grid]

    trips = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        trips = [e for (e,) in con.execute("SELECT end FROM x.CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2")]
        copies = {
            c: (k, d)
            for c, k, d in con.execute("SELECT correlationId, copyKind, dstKind FROM x.CUPTI_ACTIVITY_KIND_MEMCPY")
        }
    else:
        copies = {}
    for e, n, c in con.execute(
        "SELECT r.end, s.value, r.correlationId "
        "FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r JOIN x.StringIds s ON s.id = r.nameId"
    ):
        n = base(n)
        kind, dst = copies.get(c, (None, None))
        if re.match(r"^(cuda|cu)Memcpy", n):
            blocks = kind == 2 and dst == 0 if "Async" in n else kind not in (8, 10, 5, 6, 7)
        else:
            blocks = bool(SYNC.match(n))
        if blocks:
            trips.append(e)
    after_trip = {bisect.bisect_left(starts, t) for t in trips}

    periods = list(itertools.pairwise(anchors))
    tripped = sum(1 for a, b in periods if any(j in after_trip for j in range(a + 1, b + 1)))
    only_after_trips = bool(periods) and tripped >= 0.9 * len(periods)
    fwd: dict[int, int] = {}
    back: dict[int, int] = {}
    for a, b in periods:
        for j in range(a + 1, b + 1):
            if only_after_trips and j not in after_trip:
                continue
            fwd[j - a] = fwd.get(j - a, 0) + idle[j]
            back[b - j] = back.get(b - j, 0) + idle[j]
    scored = [(v, 1, -o, o) for o, v in back.items()] + [(v, 0, -o, o) for o, v in fwd.items()]
    _, is_back, _, off = max(scored) if scored else (0, 1, 0, 0)
    med = int(statistics.median(b - a for a, b in periods)) if periods else 1

    def boundary(prev: int, nxt: int) -> int:
        return max(0, max(nxt - off, prev + 1) if is_back else min(prev + off, nxt))

    bounds = [boundary(a, b) for a, b in periods] + [boundary(anchors[-1], anchors[-1] + med)]
    out = []
    for b0, b1 in itertools.pairwise(bounds):
        end = starts[b1] if b1 < len(rows) else max(r[1] for r in rows[b0:])
        out.append((starts[b0], end))
    return out


def anchor_step_times(con: sqlite3.Connection, name: str, grid: tuple[int, int, int]) -> list[int]:
    """anchor_steps' durations: every step's time but the first's."""
    return [e - s for s, e in anchor_steps(con, name, grid)]
