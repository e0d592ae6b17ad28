"""The summary of a profile: the summary views (store/views/summary_*.sql) read into the typed
sections of sections/. Every number is computed by a documented view; this module only
fetches rows and nests them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import duckdb

from nsight_doctor import db
from nsight_doctor.sections import (
    BlockingApi,
    Capture,
    Communication,
    Framework,
    Gap,
    GapCall,
    Gpu,
    Idle,
    IdleBucket,
    IdleCause,
    IdleCode,
    KernelCategory,
    Kernels,
    Launch,
    Memcpy,
    MemcpyDirection,
    Memset,
    MetricAverage,
    Ncu,
    NcuGroup,
    NcuReport,
    NcuStall,
    Nvtx,
    Phase,
    PhaseKernel,
    RecordedOption,
    RecordedProcess,
    RecordedSetting,
    Section,
    SteadyCategory,
    SteadyGpu,
    SteadyIdle,
    SteadyKernel,
    SteadyState,
    StepKind,
    StepParts,
    StepRow,
    StepSource,
    Summary,
    Sync,
    TopKernel,
)

S = TypeVar("S", bound=Section)


def fetch(con: duckdb.DuckDBPyConnection, cls: type[S], limit: int | None = None) -> list[S]:
    """The rows of a section's view, in the view's order."""
    n = limit if limit is not None else cls.LIMIT
    sql = f"SELECT * FROM {cls.VIEW}" + (f" LIMIT {int(n)}" if n is not None else "")
    return [cls.from_row(r) for r in db.rows(con, sql)]


def fetch_one(con: duckdb.DuckDBPyConnection, cls: type[S], **children: Any) -> S:
    return cls.from_row(db.one(con, f"SELECT * FROM {cls.VIEW}"), **children)


def summarize(con: duckdb.DuckDBPyConnection, largest_gaps: int = 10) -> Summary:
    return Summary(
        capture=fetch_one(con, Capture),
        framework=fetch_one(con, Framework),
        phases=phases(con),
        steady_state=next(iter(fetch(con, SteadyState)), None),
        kernel_categories=fetch(con, KernelCategory),
        gpus=fetch(con, Gpu),
        kernels=fetch_one(con, Kernels),
        top_kernels=fetch(con, TopKernel),
        memcpy=fetch_one(con, Memcpy, by_direction=fetch(con, MemcpyDirection)),
        memset=fetch_one(con, Memset),
        sync=fetch_one(con, Sync, by_api=fetch(con, BlockingApi)),
        launch=fetch_one(con, Launch),
        idle=fetch_one(
            con,
            Idle,
            by_cause=fetch(con, IdleCause),
            histogram=fetch(con, IdleBucket),
            largest=largest(con, largest_gaps),
        ),
        nvtx=fetch(con, Nvtx),
        gpu_metrics=gpu_metrics(con),
        communication=fetch(con, Communication) or None,
        ncu=ncu(con),
        steady_gpus=steady_gpus(con),
        steady_kernels=fetch(con, SteadyKernel),
        steps=fetch(con, StepRow),
        recorded=fetch(con, RecordedProcess),
        options=fetch(con, RecordedOption),
        settings=fetch(con, RecordedSetting),
    )


def by_key(con: duckdb.DuckDBPyConnection, cls: type[S], key: str) -> dict[Any, list[S]]:
    """A child section's rows, grouped by the column that places them in their parent."""
    out: dict[Any, list[S]] = {}
    for r in db.rows(con, f"SELECT * FROM {cls.VIEW}"):
        out.setdefault(r.pop(key), []).append(cls.from_row(r))
    return out


def steady_gpus(con: duckdb.DuckDBPyConnection) -> list[SteadyGpu]:
    """Each GPU's steady state, with its steps by kind, idle time by cause and kernel categories."""
    kinds = by_key(con, StepKind, "device_id")
    idle = by_key(con, SteadyIdle, "device_id")
    cats = by_key(con, SteadyCategory, "device_id")
    code = by_key(con, IdleCode, "device_id")
    sources = {r.pop("device_id"): StepSource.from_row(r) for r in db.rows(con, f"SELECT * FROM {StepSource.VIEW}")}
    parts = {r.pop("device_id"): StepParts.from_row(r) for r in db.rows(con, f"SELECT * FROM {StepParts.VIEW}")}
    return [
        SteadyGpu.from_row(
            r,
            step_kinds=kinds.get(r["device_id"], []),
            idle=idle.get(r["device_id"], []),
            kernel_categories=cats.get(r["device_id"], []),
            step_source=sources.get(r["device_id"]),
            step_parts=parts.get(r["device_id"]),
            idle_code=code.get(r["device_id"], []),
        )
        for r in db.rows(con, f"SELECT * FROM {SteadyGpu.VIEW}")
    ]


def largest(con: duckdb.DuckDBPyConnection, n: int) -> list[Gap]:
    """The n largest gaps, each with the CUDA calls the CPU was in during it."""
    gaps = db.rows(con, f"SELECT * FROM {Gap.VIEW} LIMIT {int(n)}")
    return [
        Gap.from_row(
            g,
            api_calls=[
                GapCall.from_row(r)
                for r in db.rows(
                    con,
                    f"SELECT * FROM {GapCall.VIEW}($start, $end, $pid) LIMIT {GapCall.LIMIT}",
                    {"start": g["start"], "end": g["end"], "pid": g["pid"]},
                )
            ],
        )
        for g in gaps
    ]


def phases(con: duckdb.DuckDBPyConnection) -> list[Phase]:
    """Each GPU's phases, each with its top kernels."""
    top: dict[tuple[int, int], list[PhaseKernel]] = {}
    for r in db.rows(con, f"SELECT * FROM {PhaseKernel.VIEW}"):
        key = (r.pop("device_id"), r.pop("phase"))
        if len(top.setdefault(key, [])) < (PhaseKernel.LIMIT or 0):
            top[key].append(PhaseKernel.from_row(r))
    return [
        Phase.from_row(r, top_kernels=top.get((r["device_id"], r["phase"]), []))
        for r in db.rows(con, f"SELECT * FROM {Phase.VIEW}")
    ]


def gpu_metrics(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, MetricAverage]] | None:
    out: dict[str, dict[str, MetricAverage]] = {}
    for r in db.rows(con, f"SELECT * FROM {MetricAverage.VIEW}"):
        device, key = str(r.pop("device_id")), r.pop("key")
        out.setdefault(device, {})[key] = MetricAverage.from_row(r)
    return out or None


def ncu(con: duckdb.DuckDBPyConnection) -> Ncu | None:
    # (the views plan a join with the timeline even over no reports: ask the base table first)
    if not db.scalar(con, "SELECT EXISTS (SELECT 1 FROM base_ncu_actions)"):
        return None
    row = db.one(con, f"SELECT * FROM {Ncu.VIEW}")
    if not row:
        return None
    stalls = by_key(con, NcuStall, "launch")
    return Ncu.from_row(
        row,
        reports=fetch(con, NcuReport),
        groups=[NcuGroup.from_row(g, stalls=stalls.get(g["launch"], [])) for g in fetch_rows(con, NcuGroup)],
    )


def fetch_rows(con: duckdb.DuckDBPyConnection, cls: type[Section]) -> list[dict[str, Any]]:
    n = cls.LIMIT
    return db.rows(con, f"SELECT * FROM {cls.VIEW}" + (f" LIMIT {int(n)}" if n is not None else ""))
