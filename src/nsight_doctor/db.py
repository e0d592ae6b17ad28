"""Small DuckDB helpers shared by every stage; nothing here knows a profiler format."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotations here: importing DuckDB costs 70 ms (`rules list` skips it)
    import duckdb


def quote(ident: str) -> str:
    """A SQL identifier, double-quoted."""
    return '"' + ident.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A SQL string literal (for the few statements, like ATTACH, that take no parameters)."""
    return "'" + text.replace("'", "''") + "'"


def text_expr(expr: str) -> str:
    """A VARCHAR expression that is valid UTF-8 whatever the source held: a value that is not
    (Latin-1 text, a damaged file) is shown with its bytes escaped (caf\\xE9), rather than
    failing the query or the Python code that fetches it. The SQLite reader passes text
    through unchecked; DuckDB checks it only when it stores or returns it."""
    return (
        f"CASE WHEN ({expr}) IS NULL OR try(decode(encode({expr}))) IS NOT NULL "
        f"THEN ({expr}) ELSE CAST(encode({expr}) AS VARCHAR) END"
    )


def sandbox(con: duckdb.DuckDBPyConnection) -> None:
    """Lets the connection read its own database and nothing else: no files, no network, no
    extensions to install or load, and no way to change these settings back. User rule files
    and their test cases run under it."""
    for setting in (
        "enable_external_access",
        "autoinstall_known_extensions",
        "autoload_known_extensions",
        "allow_community_extensions",
    ):
        con.execute(f"SET {setting} = false")
    con.execute("SET lock_configuration = true")


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Every table's name: one listing for checks of many (each is about 0.7 ms)."""
    return {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return name in table_names(con)


def quiet(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB's own progress bar writes to stdout, which would corrupt JSON output."""
    con.execute("SET enable_progress_bar = false")


def first_line(e: BaseException) -> str:
    """The first non-empty line of an error message (DuckDB's carry context lines)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def plain(v: Any) -> Any:
    """A value as a JSON-friendly Python type (DuckDB gives Decimal for some aggregates)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    try:
        f = float(v)
        return int(f) if f.is_integer() and "Decimal" not in type(v).__name__ else f
    except (TypeError, ValueError):
        return str(v)


def sql_value(v: Any) -> str | None:
    """A value as a SQL literal, or None when it has none that is safe (NUL in text, NaN)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, str) and "\x00" not in v:
        return literal(v)
    return None


def execute(
    con: duckdb.DuckDBPyConnection, sql: str | duckdb.Statement, params: list | tuple | dict | None = None
) -> duckdb.DuckDBPyConnection:
    """con.execute(sql, params), with named parameters ($name) written into the query as
    literals of the types binding gives them (bind_sql): binding a Python value makes DuckDB
    import pandas, NumPy and pyarrow where they are installed, a second of the command's
    start-up on the GPU host. Positional parameters, and a value without a safe literal (text
    with NUL), are bound as usual."""
    if not params:
        return con.execute(sql)
    if isinstance(params, dict) and all(safe_literal(v) for v in params.values()):
        return con.execute(bind_sql(sql if isinstance(sql, str) else sql.query, params))
    return con.execute(sql, params)


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    """Inserts rows (tuples in the table's column order) in one statement: executemany costs a
    statement per row. Values go in as literals, which bind ten times faster than parameters
    (the data tables of every store); a value without a safe literal goes as a parameter."""
    if not rows:
        return
    flat = [v for row in rows for v in row]
    texts = [sql_value(v) or "?" for v in flat]
    width = len(rows[0])
    values = ", ".join("(" + ", ".join(texts[i : i + width]) + ")" for i in range(0, len(texts), width))
    con.execute(f"INSERT INTO {quote(table)} VALUES {values}", [v for v, t in zip(flat, texts) if t == "?"])


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> list[dict[str, Any]]:
    """The result of a query as a list of dicts of plain values."""
    cur = execute(con, sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, map(plain, r))) for r in cur.fetchall()]


def one(con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> dict[str, Any]:
    """The first row of a query as a dict ({} when there is none)."""
    r = rows(con, sql, params)
    return r[0] if r else {}


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> Any:
    row = execute(con, sql, params).fetchone()
    return row[0] if row else None


# What bind_sql must not touch: string literals, quoted identifiers and comments; and the
# $parameters it replaces.
SQL_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\$([a-z_][a-z0-9_]*)", re.S)


def sql_literal(v: Any) -> str:
    """A value as a DuckDB literal of the type that binding it as a parameter gives."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v!r}::DOUBLE" if math.isfinite(v) else f"'{v}'::DOUBLE"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(sql_literal(x) for x in v) + "]"
    return literal(str(v))


def safe_literal(v: Any) -> bool:
    """Whether sql_literal writes v exactly: text without NUL, numbers, lists of them."""
    if isinstance(v, (list, tuple)):
        return all(safe_literal(x) for x in v)
    return v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and "\x00" not in v)


def bind_sql(sql: str, params: dict[str, Any]) -> str:
    """The query with its $parameters replaced by literal values: the same query, runnable on
    its own (in the duckdb shell, or the report's notebook) against the store."""

    def sub(m: re.Match) -> str:
        name = m.group(1)
        return sql_literal(params[name]) if name is not None and name in params else m.group(0)

    return SQL_TOKENS.sub(sub, sql).strip() + "\n"


def in_parallel(con: duckdb.DuckDBPyConnection, jobs: list, fn: Callable[[Any, Any], Any], workers: int) -> list:
    """fn(cursor, job) for each job, `workers` at a time, each worker through a cursor of its
    own (a connection to con's database); the results in the jobs' order. The first error in
    that order (or Ctrl-C) interrupts the queries under way, and is raised once they stop. fn
    must not call back into Python from DuckDB (a Python object to scan): that would wait for
    the interpreter's lock while another worker holds it."""
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()
    cursors: list = []
    lock = threading.Lock()

    def one(job: Any) -> Any:
        if not hasattr(local, "cursor"):
            local.cursor = con.cursor()
            with lock:
                cursors.append(local.cursor)
        return fn(local.cursor, job)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, job) for job in jobs]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                with lock:
                    for c in cursors:
                        c.interrupt()
                raise
    finally:
        for c in cursors:
            c.close()
