"""Loads Nsight Compute reports into the store's base_ncu_* tables.

The report is parsed by ncu_reader.py in a child process (see there why); its JSON lines are
then read by DuckDB. Several reports can be loaded into one store: action ids stay unique.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from nsight_doctor.cachedir import scratch_dir
from nsight_doctor.db import execute, literal, quote, scalar, table_names
from nsight_doctor.errors import InputError, ResourceError
from nsight_doctor.ingest.tables import column_map, contract

NCU_TABLES = (
    "base_ncu_reports",
    "base_ncu_actions",
    "base_ncu_metrics",
    "base_ncu_rules",
    "base_ncu_kernel_metrics",
    "base_ncu_stalls",
)
# Files the reader writes, and the base table each one appends to.
READER_FILES = (("base_ncu_actions", "actions"), ("base_ncu_metrics", "metrics"), ("base_ncu_rules", "rules"))


def create_empty(con: duckdb.DuckDBPyConnection) -> None:
    existing = table_names(con)
    for name in NCU_TABLES:
        if name not in existing:
            con.execute(contract()[name].ddl())


def metric_expr(spec: dict) -> str:
    """The aggregate over base_ncu_metrics that gives one neutral column."""
    if "first" in spec:
        picks = [f"max(value) FILTER (WHERE metric = {literal(m)})" for m in spec["first"]]
        return picks[0] if len(picks) == 1 else f"coalesce({', '.join(picks)})"
    names = ", ".join(literal(m) for m in spec["sum"])
    return f"sum(value) FILTER (WHERE metric IN ({names}))"


FINITE = "(value IS NULL OR isfinite(value))"


def derive_tables(con: duckdb.DuckDBPyConnection, first_action: int) -> tuple[int, int]:
    """Fills base_ncu_kernel_metrics and base_ncu_stalls for the actions from first_action on,
    from the metrics' ncu names (ncu_columns.yaml). A value that is not a number (NaN,
    infinite: a report can hold them for a kernel the profiler could not measure) is left out,
    so that it cannot turn every total it enters into NaN; returns (such values, kernels)."""
    spec = column_map("ncu_columns.yaml")["tables"]
    table = contract()["base_ncu_kernel_metrics"]
    exprs = [
        metric_expr(spec["base_ncu_kernel_metrics"]["columns"][c]) + f" AS {quote(c)}"
        for c in table.column_names
        if c != "action_id"
    ]
    con.execute(
        f"INSERT INTO base_ncu_kernel_metrics SELECT action_id, {', '.join(exprs)} "
        f"FROM base_ncu_metrics WHERE action_id >= {int(first_action)} AND {FINITE} GROUP BY action_id",
    )
    pattern = literal(spec["base_ncu_stalls"]["pattern"])
    con.execute(
        f"INSERT INTO base_ncu_stalls SELECT action_id, regexp_extract(metric, {pattern}, 1), value "
        f"FROM base_ncu_metrics WHERE action_id >= {int(first_action)} AND regexp_matches(metric, {pattern}) "
        f"AND {FINITE}",
    )
    bad = con.execute(
        "SELECT count(*), count(DISTINCT action_id) FROM base_ncu_metrics "
        f"WHERE action_id >= {int(first_action)} AND NOT isfinite(value)"
    ).fetchone()
    return (bad[0], bad[1]) if bad else (0, 0)


def load_ncu(con: duckdb.DuckDBPyConnection, path: Path, progress=None, timeout: float | None = None) -> dict:
    """Reads the report in a child process (stopped after timeout seconds, or on Ctrl-C) and
    appends it to the base tables."""
    create_empty(con)
    if progress:
        progress("reading the Nsight Compute report")
    with scratch_dir("nsight-doctor-ncu-") as out:
        # The reader's own temporary files go inside this folder: on Ctrl-C it is killed,
        # and cannot remove them itself.
        (out / "tmp").mkdir()
        env = {**os.environ, **{name: str(out / "tmp") for name in ("TMPDIR", "TEMP", "TMP")}}
        try:
            run = subprocess.run(
                [sys.executable, "-m", "nsight_doctor.ingest.ncu_reader", str(path), str(out)],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise ResourceError(
                f"Nsight Compute's reader did not finish reading '{path}' within {timeout:g} s and was "
                "stopped; allow longer with --export-timeout SECONDS"
            ) from None
        if run.returncode != 0:
            lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
            if run.returncode < 0:
                raise InputError(
                    f"'{path}': Nsight Compute's reader crashed on it (signal {-run.returncode}); "
                    "the report is probably corrupt"
                )
            raise InputError(lines[-1] if lines else f"'{path}' could not be read (exit {run.returncode})")
        meta = json.loads((out / "report.json").read_text())
        report_id = scalar(con, "SELECT coalesce(max(report_id) + 1, 0) FROM base_ncu_reports")
        offset = scalar(con, "SELECT coalesce(max(action_id) + 1, 0) FROM base_ncu_actions")
        execute(
            con,
            "INSERT INTO base_ncu_reports (report_id, path, ncu_version, actions) "
            "VALUES ($report_id, $path, $ncu_version, $actions)",
            {
                "report_id": report_id,
                "path": str(path),
                "ncu_version": meta.get("ncu_version"),
                "actions": meta.get("actions"),
            },
        )
        for table, name in READER_FILES:
            cols = contract()[table].columns
            f = out / f"{name}.jsonl"
            if f.stat().st_size == 0:
                continue
            spec = ", ".join(f"'{c.name}': '{c.type}'" for c in cols if c.name != "report_id")
            select = ", ".join(
                (
                    f"action_id + {offset}"
                    if c.name == "action_id"
                    else f"{report_id}"
                    if c.name == "report_id"
                    # (a launch's own numbers, such as its duration, may be NaN too; the metrics
                    # are filtered, and counted, when derive_tables reads them)
                    else f"CASE WHEN isfinite({quote(c.name)}) THEN {quote(c.name)} END"
                    if c.type == "DOUBLE" and table != "base_ncu_metrics"
                    else quote(c.name)
                )
                + f" AS {quote(c.name)}"
                for c in cols
            )
            con.execute(
                f"INSERT INTO {table} SELECT {select} FROM read_json({literal(str(f))}, "
                f"format='newline_delimited', columns={{{spec}}})"
            )
        meta["bad_values"], meta["bad_kernels"] = derive_tables(con, offset)
    return meta
