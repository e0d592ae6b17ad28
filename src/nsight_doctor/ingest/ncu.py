"""Loads Nsight Compute reports into the store's base_ncu_* tables.

The report is parsed by ncu_reader.py in a child process (see there why); its JSON lines are
then read by DuckDB. Several reports can be loaded into one store: action ids stay unique.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

from nsight_doctor.errors import InputError

# The base tables, with their columns and types (docs: the ncu_* views in docs/schema.md).
TABLES = {
    "base_ncu_reports": {
        "report_id": "INTEGER", "path": "VARCHAR", "ncu_version": "VARCHAR", "actions": "INTEGER",
    },
    "base_ncu_actions": {
        "action_id": "INTEGER", "report_id": "INTEGER", "range_idx": "INTEGER", "action_idx": "INTEGER",
        "name": "VARCHAR", "demangled_name": "VARCHAR", "mangled_name": "VARCHAR", "nvtx": "VARCHAR",
        "sections": "VARCHAR",
        "grid_x": "BIGINT", "grid_y": "BIGINT", "grid_z": "BIGINT",
        "block_x": "BIGINT", "block_y": "BIGINT", "block_z": "BIGINT",
        "grid_size": "BIGINT", "block_size": "BIGINT", "registers_per_thread": "INTEGER",
        "static_smem_bytes": "BIGINT", "dynamic_smem_bytes": "BIGINT", "duration_ns": "DOUBLE",
        "sm_count": "INTEGER", "cc_major": "INTEGER", "cc_minor": "INTEGER", "device_name": "VARCHAR",
    },
    "base_ncu_metrics": {
        "action_id": "INTEGER", "metric": "VARCHAR", "value": "DOUBLE", "text": "VARCHAR", "unit": "VARCHAR",
    },
    "base_ncu_rules": {
        "action_id": "INTEGER", "rule_id": "VARCHAR", "rule_name": "VARCHAR", "section": "VARCHAR",
        "message_type": "VARCHAR", "title": "VARCHAR", "message": "VARCHAR", "speedup_pct": "DOUBLE",
        "speedup_type": "VARCHAR", "focus_metrics": "VARCHAR",
    },
}


def create_empty(con: duckdb.DuckDBPyConnection) -> None:
    for table, cols in TABLES.items():
        ddl = ", ".join(f'"{c}" {t}' for c, t in cols.items())
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({ddl})")


def load_ncu(con: duckdb.DuckDBPyConnection, path: Path, progress=None) -> dict:
    """Reads the report in a child process and appends it to the base tables."""
    create_empty(con)
    if progress:
        progress("reading the Nsight Compute report")
    with tempfile.TemporaryDirectory(prefix="nsight-doctor-ncu-") as tmp:
        out = Path(tmp)
        run = subprocess.run([sys.executable, "-m", "nsight_doctor.ingest.ncu_reader", str(path), str(out)],
                             capture_output=True, text=True, errors="replace")
        if run.returncode != 0:
            lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
            if run.returncode < 0:
                raise InputError(f"'{path}': Nsight Compute's reader crashed on it (signal {-run.returncode}); "
                                 "the report is probably corrupt")
            raise InputError(lines[-1] if lines else f"'{path}' could not be read (exit {run.returncode})")
        meta = json.loads((out / "report.json").read_text())
        report_id = con.execute("SELECT coalesce(max(report_id) + 1, 0) FROM base_ncu_reports").fetchone()[0]
        offset = con.execute("SELECT coalesce(max(action_id) + 1, 0) FROM base_ncu_actions").fetchone()[0]
        con.execute("INSERT INTO base_ncu_reports VALUES (?, ?, ?, ?)",
                    [report_id, str(path), meta.get("ncu_version"), meta.get("actions")])
        for table, name in (("base_ncu_actions", "actions"), ("base_ncu_metrics", "metrics"),
                            ("base_ncu_rules", "rules")):
            cols = TABLES[table]
            f = out / f"{name}.jsonl"
            if f.stat().st_size == 0:
                continue
            spec = ", ".join(f"'{c}': '{t}'" for c, t in cols.items() if c != "report_id")
            select = ", ".join(
                (f"action_id + {offset}" if c == "action_id" else
                 f"{report_id}" if c == "report_id" else f'"{c}"') + f' AS "{c}"'
                for c in cols)
            con.execute(f"INSERT INTO {table} SELECT {select} FROM read_json('{f}', format='newline_delimited', "
                        f"columns={{{spec}}})")
    return meta
