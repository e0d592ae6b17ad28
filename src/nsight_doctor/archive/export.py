"""``nsight-doctor export --parquet DIR``: every table of a fleet database as Hive-partitioned
Parquet, one folder per table (``DIR/findings/ingest_date=2026-11-30/data_0.parquet``), for
Spark, Trino, Polars or DuckDB (``read_parquet('DIR/findings/**/*.parquet',
hive_partitioning = true)``).

The partition column is the day each profile was ingested (``ingest_date``) or a label's value
(``--partition-by label:team`` gives ``label_team=serving``; profiles without it go to
``label_team=none``). Tables that are not per profile (``meta``) are written unpartitioned.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from nsight_doctor.archive.query import connect_readonly
from nsight_doctor.db import literal, quote, table_exists
from nsight_doctor.errors import DoctorError


def export_parquet(db: str, out: str, partition_by: str = "ingest_date", overwrite: bool = False) -> dict[str, int]:
    dest = Path(out)
    if dest.exists() and any(dest.iterdir()):
        if not overwrite:
            raise DoctorError(f"'{dest}' is not empty; choose an empty folder or add --overwrite")
        shutil.rmtree(dest)
    con = connect_readonly(db, external_access=True)
    try:
        if not table_exists(con, "profiles"):
            raise DoctorError(f"'{db}' is not a fleet database (no profiles table)")
        if partition_by == "ingest_date":
            col = "ingest_date"
            per_profile = "strftime(p.ingested_at, '%Y-%m-%d')"
            failures = "strftime(t.failed_at, '%Y-%m-%d')"
        else:
            key = partition_by.split(":", 1)[1]
            col = "label_" + re.sub(r"\W", "_", key)
            per_profile = f"coalesce(p.labels[{literal(key)}], 'none')"
            failures = "'none'"
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_name"
            ).fetchall()
        ]
        dest.mkdir(parents=True, exist_ok=True)
        counts = {}
        for table in tables:
            cols = {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main'", [table]
                ).fetchall()
            }
            if "profile_id" in cols and table != "failures":
                sql = (
                    f"SELECT t.*, {per_profile} AS {quote(col)} FROM {quote(table)} t "
                    f"LEFT JOIN profiles p ON p.profile_id = t.profile_id"
                )
                part = True
            elif table == "failures":
                sql, part = f"SELECT t.*, {failures} AS {quote(col)} FROM failures t", True
            else:
                sql, part = f"SELECT * FROM {quote(table)}", False
            n = con.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()
            counts[table] = n[0] if n else 0
            target = dest / table
            if part and counts[table]:
                con.execute(
                    f"COPY ({sql}) TO {literal(str(target))} "
                    f"(FORMAT parquet, PARTITION_BY ({quote(col)}), OVERWRITE_OR_IGNORE true)"
                )
            else:
                target.mkdir(parents=True, exist_ok=True)
                con.execute(f"COPY ({sql}) TO {literal(str(target / 'data_0.parquet'))} (FORMAT parquet)")
        return counts
    finally:
        con.close()
