"""Loads nvprof databases (--export-profile: .nvvp, .prof) into the same base tables as an
Nsight Systems export, through nvprof_columns.yaml, so that every rule runs on them.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import duckdb

from nsight_doctor.db import execute, insert_rows, scalar, text_expr
from nsight_doctor.ingest import nsys_export
from nsight_doctor.ingest.demangle import demangle, short_name
from nsight_doctor.ingest.tables import contract, load_tables

MAP = "nvprof_columns.yaml"
# Activity tables whose earliest timestamp is the capture's start.
ACTIVITY = [
    "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
]
RUNTIME_NAME_BASE = 1_000_000_000
DRIVER_NAME_BASE = 2_000_000_000


def load_nvprof(con: duckdb.DuckDBPyConnection, path: Path, progress=None) -> dict:
    src = nsys_export.attach(con, path, "sqlite")
    version = (
        scalar(con, "SELECT max(TRY_CAST(version AS BIGINT)) FROM src.Version")
        if "version" in src.tables.get("Version", ())
        else None
    )
    # Activity tables with both times (a damaged file may lack a column).
    present = [t for t in ACTIVITY if {"start", "end"} <= src.tables.get(t, set())]
    t0 = (
        scalar(
            con,
            " UNION ALL ".join(f'SELECT min(TRY_CAST(start AS BIGINT)) AS s FROM src."{t}"' for t in present).join(
                ["SELECT coalesce(min(s), 0) FROM (", ")"]
            ),
        )
        if present
        else 0
    )
    t_end = (
        scalar(
            con,
            " UNION ALL ".join(f'SELECT max(TRY_CAST("end" AS BIGINT)) AS e FROM src."{t}"' for t in present).join(
                ["SELECT max(e) FROM (", ")"]
            ),
        )
        if present
        else None
    )
    pid = 0
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if "processId" in src.tables.get(t, ()):
            pid = scalar(con, f'SELECT coalesce(mode(TRY_CAST(processId AS BIGINT)), 0) FROM src."{t}"') or pid
            if pid:
                break
    params = {"t0": int(t0 or 0), "pid": int(pid), "runtime_names": RUNTIME_NAME_BASE, "driver_names": DRIVER_NAME_BASE}
    notes: list[str] = []
    counts = load_tables(con, src, MAP, progress, params, notes)
    add_api_names(con)
    demangle_kernel_names(con)
    # nvprof has no capture or process table: the contract's tables, filled here.
    for base in ("base_capture", "base_processes"):
        con.execute(contract()[base].ddl())
    duration = None if t_end is None else int(t_end - (t0 or 0))
    execute(con, "INSERT INTO base_capture (duration) VALUES ($duration)", {"duration": duration})
    process_name = None
    if {"name", "objectKind"} <= src.tables.get("CUPTI_ACTIVITY_KIND_NAME", set()) and {
        "_id_",
        "value",
    } <= src.tables.get("StringTable", set()):
        process_name = scalar(
            con,
            f"""SELECT {text_expr("s.value")} FROM src.CUPTI_ACTIVITY_KIND_NAME n
            JOIN src.StringTable s ON s._id_ = n.name WHERE n.objectKind = 1 LIMIT 1""",
        )
    if t_end is not None:
        execute(
            con, "INSERT INTO base_processes (pid, name) VALUES ($pid, $name)", {"pid": int(pid), "name": process_name}
        )
    for table, what in (
        ("CUPTI_ACTIVITY_KIND_METRIC", "per-kernel metrics (--metrics)"),
        ("CUPTI_ACTIVITY_KIND_EVENT", "per-kernel events (--events)"),
        ("CUPTI_ACTIVITY_KIND_MARKER", "NVTX markers and ranges"),
    ):
        if table in src.tables and scalar(con, f'SELECT count(*) FROM src."{table}"'):
            notes.append(f"this nvprof file has {what}, which nsight-doctor does not read yet")
    con.execute("DETACH src")
    return {"version": version, "counts": counts, "notes": notes, "empty": t_end is None}


def add_api_names(con) -> None:
    """String ids for CUDA API callback ids (see cupti_cbids.csv)."""
    text = resources.files("nsight_doctor.ingest").joinpath("cupti_cbids.csv").read_text()
    rows = [
        (RUNTIME_NAME_BASE + int(r["cbid"]) if r["api"] == "runtime" else DRIVER_NAME_BASE + int(r["cbid"]), r["name"])
        for r in csv.DictReader(text.splitlines())
    ]
    insert_rows(con, "base_strings", rows)


def demangle_kernel_names(con) -> None:
    """nvprof stores kernel names mangled: give each kernel a demangled and a short name."""
    ids = con.execute("""SELECT DISTINCT k.short_name_id, s.value FROM base_kernels k
                         JOIN base_strings s ON s.id = k.short_name_id""").fetchall()
    next_id = scalar(con, f"SELECT coalesce(max(id), 0) FROM base_strings WHERE id < {RUNTIME_NAME_BASE}") + 1
    for old_id, mangled in ids:
        full = demangle(mangled)
        short = short_name(full)
        insert_rows(con, "base_strings", [(next_id, short), (next_id + 1, full)])
        execute(
            con,
            "UPDATE base_kernels SET short_name_id = $short, demangled_name_id = $full WHERE short_name_id = $old",
            {"short": next_id, "full": next_id + 1, "old": old_id},
        )
        next_id += 2
