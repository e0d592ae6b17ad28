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
