"""An independent oracle for the store's idle-gap causes, written from their documentation
(docs/schema.md, gpu_gaps) in plain Python over SQLite reads of the raw export: no DuckDB, no
view of ours. Tests compare the tool's numbers with these.

It handles single-GPU, single-process exports (the samples).
"""

from __future__ import annotations

import bisect
import itertools
import re
import sqlite3
from dataclasses import dataclass

LAUNCH_GAP_MAX_NS = 100_000  # a gap under 100 us is a launch gap unless something else explains it
GPU_SIDE_MAX_NS = 20_000  # a queued gap under 20 us is the GPU's own cost between operations
SYNC_GAP_MAX_NS = 10_000_000  # a sync bubble is shorter than 10 ms
FIRST_LAUNCH_MIN_NS = 1_000_000

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


@dataclass
class Gap:
    start: int
    end: int
    cause: str
    launch_side: str | None
    blocking_reason: str | None
    next_kind: str

    @property
    def duration(self) -> int:
        return self.end - self.start


def open_export(path) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("ATTACH DATABASE ? AS x", (f"file:{path}?mode=ro&immutable=1",))
    return con


def tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM x.sqlite_master WHERE type = 'table'")}


def gaps(con: sqlite3.Connection) -> list[Gap]:
    have = tables(con)
    ops = [
        (s, e, c, "kernel", n)
        for s, e, c, n in con.execute(
            "SELECT k.start, k.end, k.correlationId, s.value FROM x.CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN x.StringIds s ON s.id = k.shortName"
        )
    ]
    ops += [
        (s, e, c, "memcpy", None)
        for s, e, c in con.execute("SELECT start, end, correlationId FROM x.CUPTI_ACTIVITY_KIND_MEMCPY")
    ]
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        ops += [
            (s, e, c, "memset", None)
            for s, e, c in con.execute("SELECT start, end, correlationId FROM x.CUPTI_ACTIVITY_KIND_MEMSET")
        ]
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in have:
        ops += [
            (s, e, c, "graph", None)
            for s, e, c in con.execute("SELECT start, end, correlationId FROM x.CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
        ]
    ops.sort(key=lambda o: (o[0], o[1]))
    first_of_name: dict[str, int] = {}
    for s, _, _, kind, name in ops:
        if kind == "kernel":
            first_of_name.setdefault(name, s)

    calls = [
        (s, e, c, base(n))
        for s, e, c, n in con.execute(
            "SELECT r.start, r.end, r.correlationId, s.value FROM x.CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN x.StringIds s ON s.id = r.nameId"
        )
    ]
    by_corr = {c: (s, e) for s, e, c, n in calls}
    by_name = {c: n for s, e, c, n in calls}
    copies = {
        c: (kind, dst)
        for c, kind, dst in con.execute("SELECT correlationId, copyKind, dstKind FROM x.CUPTI_ACTIVITY_KIND_MEMCPY")
    }
    memsets = {}
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        memsets = {c: k for c, k in con.execute("SELECT correlationId, memKind FROM x.CUPTI_ACTIVITY_KIND_MEMSET")}

    def blocking(s, e, c, n) -> str | None:
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

    blocked = sorted((e, reason) for s, e, c, n in calls if (reason := blocking(s, e, c, n)))
    blocked_ends = [e for e, _ in blocked]
    blocking_keys = {(s, e) for s, e, c, n in calls if blocking(s, e, c, n)}
    other = sorted(
        (s, e, n) for s, e, c, n in calls if not LAUNCH.match(n) and not SYNC.match(n) and (s, e) not in blocking_keys
    )
    other_starts = [s for s, _, _ in other]
    longest = max((e - s for s, e, _ in other), default=0)

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
        dur = ge - gs
        ls, le = by_corr.get(first[2], (None, None))
        first_launch = first[3] == "kernel" and first_of_name.get(first[4]) == ge
        i = bisect.bisect_right(blocked_ends, gs + dur // 2) - 1
        reason = blocked[i][1] if i >= 0 and blocked_ends[i] >= gs else None
        one_time = alloc = copy = rest = 0
        if dur >= LAUNCH_GAP_MAX_NS:
            lo = bisect.bisect_left(other_starts, gs - longest)
            for s, e, n in other[lo : bisect.bisect_left(other_starts, ge)]:
                if e > gs:
                    t = min(e, ge) - max(s, gs)
                    if ONE_TIME.match(n):
                        one_time += t
                    elif ALLOC.match(n):
                        alloc += t
                    elif COPY.match(n):
                        copy += t
                    else:
                        rest += t
        queued = le is not None and le <= gs
        is_launch = bool(LAUNCH.match(by_name.get(first[2], "")))
        in_launch = le is not None and is_launch and 2 * (le - max(ls, gs)) >= dur
        if queued and dur < GPU_SIDE_MAX_NS:
            cause, side = "launch", "gpu"
        elif queued:
            cause, side = "queued", None
        elif dur >= LAUNCH_GAP_MAX_NS and 2 * one_time >= dur:
            cause, side = "setup", None
        elif dur >= FIRST_LAUNCH_MIN_NS and first_launch and (one_time > 0 or 2 * (le - ls) >= dur):
            cause, side = "setup", None
        elif in_launch:
            cause, side = "launch", "cpu"
        elif dur >= LAUNCH_GAP_MAX_NS and 2 * (alloc + copy + rest) >= dur:
            cause, side = "api", None
        elif reason and dur < SYNC_GAP_MAX_NS:
            cause, side = "sync", None
        elif dur < LAUNCH_GAP_MAX_NS:
            cause, side = "launch", "cpu"
        else:
            cause, side = "cpu", None
        out.append(Gap(gs, ge, cause, side, reason if cause == "sync" else None, first[3]))
    return out


def totals(gs: list[Gap], **where) -> tuple[int, int]:
    """(count, total ns) of the gaps whose attributes equal the keyword arguments."""
    sel = [g for g in gs if all(getattr(g, k) == v for k, v in where.items())]
    return len(sel), sum(g.duration for g in sel)


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


def anchor_step_times(con: sqlite3.Connection, name: str, grid: tuple[int, int, int]) -> list[int]:
    """The time between consecutive ends of a kernel launched once per step (the vocabulary
    projection of a transformer, given by name and grid): every step's time but the first's."""
    ends = [
        e
        for (e,) in con.execute(
            """SELECT k.end FROM x.CUPTI_ACTIVITY_KIND_KERNEL k JOIN x.StringIds s ON s.id = k.shortName
               WHERE s.value = ? AND k.gridX = ? AND k.gridY = ? AND k.gridZ = ? ORDER BY k.start""",
            (name, *grid),
        )
    ]
    return [b - a for a, b in itertools.pairwise(ends)]
