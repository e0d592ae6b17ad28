"""The base-table contract (base_tables.yaml) and the column maps that fill it.

Every table that ingest writes is declared once, in base_tables.yaml, with its columns'
types and meaning. A column map (nsys_columns.yaml, nvprof_columns.yaml) says where each
column comes from in one kind of file; ``load_tables`` turns a map into one
``CREATE TABLE ... AS SELECT`` per base table, over an export attached as ``src``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import duckdb

from nsight_doctor import yamlio
from nsight_doctor.db import first_line, quote, scalar, table_names, text_expr
from nsight_doctor.errors import InputError


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    required: tuple[str, ...] = ()  # rows with NULL here are dropped at ingest

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def ddl(self) -> str:
        cols = ", ".join(f"{quote(c.name)} {c.type}" for c in self.columns)
        return f"CREATE TABLE {self.name} ({cols})"


def read_yaml(name: str) -> Any:
    return yamlio.load(resources.files("nsight_doctor.ingest").joinpath(name).read_text())


@lru_cache(maxsize=1)
def contract() -> dict[str, Table]:
    """Every base table, in the order of base_tables.yaml."""
    out = {}
    for name, spec in read_yaml("base_tables.yaml").items():
        cols = tuple(Column(c, s["type"], s["doc"]) for c, s in spec["columns"].items())
        out[name] = Table(name, spec["doc"], cols, tuple(spec.get("required", ())))
    return out


@cache
def column_map(name: str) -> dict[str, Any]:
    """A column map file: {"tables": {base table: spec}, "decoders": {...}}."""
    return read_yaml(name)


def create_missing(con: duckdb.DuckDBPyConnection) -> None:
    """Creates, empty, every base table that no input filled (an Nsight Compute report alone
    has no timeline, an nsys profile no kernel counters)."""
    existing = table_names(con)
    for table in contract().values():
        if table.name not in existing:
            con.execute(table.ddl())


def item_spec(item: Any) -> dict[str, Any]:
    return {"column": item} if isinstance(item, str) else item


def column_spec(spec: Any) -> dict[str, Any]:
    """A column's spec; a plain string names one export column."""
    return {"from": [spec]} if isinstance(spec, str) else spec


def decode_expr(expr: str, decoder: dict[Any, str]) -> str:
    """CASE expression turning an enumeration's codes into words."""
    whens = " ".join(f"WHEN {int(code)} THEN '{word}'" for code, word in decoder.items() if code != "else")
    other = f" ELSE '{decoder['else']}'" if "else" in decoder else ""
    return f"CASE {expr} {whens}{other} END"


@dataclass
class Export:
    """What the column maps need to know about an attached export."""

    path: Any
    tables: dict[str, set[str]]
    schema_version: str | None = None


def column_expr(
    table: str,
    column: str,
    spec: Any,
    present: set[str],
    src: Export,
    decoders: dict[str, dict],
    params: dict[str, Any],
) -> str:
    spec = column_spec(spec)
    for item in map(item_spec, spec.get("from", [])):
        expr = None
        if "column" in item and item["column"] in present:
            expr = quote(item["column"])
        elif (
            "expr" in item
            and set(item.get("needs", [])) <= present
            and set(item.get("tables", [])) <= src.tables.keys()
        ):
            expr = item["expr"].format(**params)
        if expr is not None:
            return decode_expr(expr, decoders[spec["decode"]]) if "decode" in spec else expr
    if "default" in spec:
        d = spec["default"]
        return "NULL" if d is None else repr(d)
    raise InputError(
        f"'{src.path}': export schema {src.schema_version or 'unknown'} has no column for "
        f"{table}.{column} (looked for {spec.get('from')}); this export version is not supported"
    )


def source_select(table: Table, source: dict, src: Export, decoders: dict, params: dict) -> str:
    """The SELECT of one source: the contract's columns, in order, with their types."""
    if "sql" in source:
        return source["sql"].format(**params)
    present = src.tables[source["table"]]
    raw = [
        column_expr(table.name, c.name, source["columns"][c.name], present, src, decoders, params)
        + f" AS {quote(c.name)}"
        for c in table.columns
    ]
    alias = f" AS {source['alias']}" if "alias" in source else ""
    where = f" WHERE {source['where']}" if "where" in source else ""
    # Text comes from the profiled program and may hold any bytes: made valid UTF-8 over the
    # raw columns (text_expr cannot wrap expressions with subqueries).
    typed = [
        f"CAST({text_expr(quote(c.name)) if c.type == 'VARCHAR' else quote(c.name)} AS {c.type}) AS {quote(c.name)}"
        for c in table.columns
    ]
    return f"SELECT {', '.join(typed)} FROM (SELECT {', '.join(raw)} FROM src.{quote(source['table'])}{alias}{where})"


def available(source: dict, src: Export) -> bool:
    """Whether the export has the source's table, the other tables it `requires`, and the
    columns it `requires_columns` (raw SQL sources name the columns they read)."""
    return (
        source["table"] in src.tables
        and set(source.get("requires", [])) <= set(src.tables)
        and set(source.get("requires_columns", [])) <= src.tables[source["table"]]
    )


def build_select(table: Table, spec: dict, src: Export, decoders: dict, params: dict) -> str | None:
    """The SELECT that fills one base table, or None when the export lacks its table.

    A spec names one export `table`, the first of several `sources` the export has, or a
    `union` of every source the export has."""
    if "union" in spec:
        parts = [source_select(table, s, src, decoders, params) for s in spec["union"] if available(s, src)]
        return " UNION ALL ".join(parts) or None
    for source in spec.get("sources", [spec]):
        if available(source, src):
            return source_select(table, source, src, decoders, params)
    return None


def load_tables(
    con: duckdb.DuckDBPyConnection,
    src: Export,
    map_name: str,
    progress: Callable[[str], None] | None = None,
    params: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> dict[str, int]:
    """Creates every base table that the column map fills; returns their row counts.

    params fill {placeholders} in expressions and SQL (the nvprof map's time origin). Rows
    that lack a table's required columns are dropped, with a line in notes."""
    cmap = column_map(map_name)
    decoders = cmap.get("decoders", {})
    counts = {}
    for name, spec in cmap["tables"].items():
        table = contract()[name]
        sql = build_select(table, spec, src, decoders, params or {})
        if progress:
            progress(name)
        try:
            con.execute(table.ddl() if sql is None else f"CREATE TABLE {name} AS {sql}")
        except duckdb.Error as e:
            raise InputError(
                f"'{src.path}' could not be read ({name}: {first_line(e)}); the file may be truncated or corrupt"
            ) from None
        check_shape(con, table)
        if table.required:
            dropped = drop_incomplete(con, table)
            if dropped and notes is not None:
                what = name.removeprefix("base_").replace("_", " ")
                fields = ", ".join(table.required[:-1]) + " or " + table.required[-1]
                rows = "row" if dropped == 1 else "rows"
                notes.append(f"{what}: left out {dropped:,} {rows} without {fields} (a damaged file?)")
        counts[name] = scalar(con, f"SELECT count(*) FROM {name}")
    return counts


def drop_incomplete(con: duckdb.DuckDBPyConnection, table: Table) -> int:
    """Deletes the rows of a base table that lack a required column; returns how many."""
    where = " OR ".join(f"{quote(c)} IS NULL" for c in table.required)
    n = scalar(con, f"SELECT count(*) FROM {table.name} WHERE {where}") or 0
    if n:
        con.execute(f"DELETE FROM {table.name} WHERE {where}")
    return int(n)


def check_shape(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    """A table built from a map's raw SQL must have the contract's columns and types."""
    got = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table.name}").fetchall()]
    want = [(c.name, c.type) for c in table.columns]
    if got != want:
        raise AssertionError(f"{table.name} was built as {got}, but base_tables.yaml declares {want}")
