"""Read-only SQL on a fleet database or on the store of one analysis, printed as a text table,
CSV or JSON. The connection is read-only, cannot reach files or the network, and its settings
are locked, as the rules' own connection is."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from nsight_doctor.db import first_line, quiet
from nsight_doctor.errors import DoctorError

MAX_CELL = 100


class QueryError(DoctorError):
    """The SQL itself failed."""


def connect_readonly(db: str | Path, external_access: bool = False) -> duckdb.DuckDBPyConnection:
    p = Path(db)
    if not p.exists():
        raise DoctorError(f"'{p}': no such database (make one with nsight-doctor ingest or analyze --db)")
    try:
        con = duckdb.connect(str(p), read_only=True)
    except duckdb.Error as e:
        msg = first_line(e)
        if "lock" in msg.lower():
            pid = re.search(r"PID (\d+)", str(e))
            who = f" (pid {pid.group(1)})" if pid else ""
            raise DoctorError(
                f"'{p}' is being written by another process{who}, e.g. an ingest; query it when that has finished"
            ) from None
        raise DoctorError(f"'{p}' is not a database nsight-doctor can read: {msg}") from None
    quiet(con)
    if not external_access:
        con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run(db: str | Path, sql: str) -> tuple[list[str], list[tuple]]:
    con = connect_readonly(db)
    try:
        try:
            cur = con.execute(sql)
        except duckdb.Error as e:
            raise QueryError(f"SQL error: {first_line(e)}") from None
        if cur.description is None:
            return [], []
        cols = [d[0] for d in cur.description]
        return cols, cur.fetchall()
    finally:
        con.close()


def jsonable(v: Any) -> Any:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, bytes):
        return v.hex()
    return v


def text_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(jsonable(v), ensure_ascii=False)
    s = str(v)
    return " ".join(s.split())


def to_table(cols: list[str], rows: list[tuple], max_cell: int = MAX_CELL) -> str:
    if not cols:
        return ""
    cells = [[text_cell(v) for v in r] for r in rows]
    cells = [[c if len(c) <= max_cell else c[: max_cell - 1] + "…" for c in r] for r in cells]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    numeric = [
        bool(rows) and all(isinstance(r[i], (int, float, Decimal)) or r[i] is None for r in rows)
        for i in range(len(cols))
    ]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(cols), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out) + "\n"


def to_csv(cols: list[str], rows: list[tuple]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow(
            [
                "" if v is None else json.dumps(jsonable(v)) if isinstance(v, (list, dict, tuple)) else jsonable(v)
                for v in r
            ]
        )
    return buf.getvalue()


def to_json(cols: list[str], rows: list[tuple]) -> str:
    return json.dumps([dict(zip(cols, map(jsonable, r))) for r in rows], indent=1, ensure_ascii=False) + "\n"


FORMATS = {"table": to_table, "csv": to_csv, "json": to_json}


def render(cols: list[str], rows: list[tuple], fmt: str) -> str:
    return FORMATS[fmt](cols, rows)
