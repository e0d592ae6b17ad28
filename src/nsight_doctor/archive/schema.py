"""The fleet database's tables: the fixed ones declared in tables/*.sql (whose header
comments document them, as the store's views do), and the ones derived from the typed summary
(sections.Summary), so that a field added to the summary becomes a column or a table here
without any change to this package.

- ``summaries``: one row per profile; every scalar of the summary, with the names of the JSON
  output (fields of nested objects prefixed with the object's name: ``memcpy_count``,
  ``sync_total_ns``), plus the whole summary as JSON.
- ``summary_<view>``: one table per list in the summary (GPUs, top kernels, NVTX ranges, idle
  causes, ...), named after the store view that fills it, with ``profile_id`` and ``ord``.
- ``ncu_kernels``: the store's ``ncu_kernels`` view for every profile, with ``profile_id``.

An older database gets the tables and columns it lacks when it is next opened for writing.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Union

import duckdb

from nsight_doctor.db import plain, quote
from nsight_doctor.sections import Section, Summary

SCHEMA_VERSION = 1

#: The fixed tables, in the order the docs list them.
FIXED_TABLES = [
    "profiles",
    "summaries",
    "findings",
    "kernels",
    "kernel_categories",
    "ncu_kernels",
    "files",
    "failures",
    "diagnoses",
]


@dataclass
class Column:
    name: str
    type: str
    doc: str = ""


@dataclass
class Table:
    name: str
    doc: str
    columns: list[Column]
    # Where a derived table's rows come from: attribute path in Summary, and dict key names.
    path: tuple[str, ...] = ()
    item: type | None = None
    keys: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def ddl_files() -> dict[str, str]:
    folder = resources.files("nsight_doctor.archive").joinpath("tables")
    return {f.name[:-4]: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


def fixed_docs() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """(description, [(column, doc)]) of each fixed table, from its header comment."""
    from nsight_doctor.store.docs import header_docs

    return {name: header_docs(name, sql) for name, sql in ddl_files().items()}


# --- tables derived from the summary ----------------------------------------------------------

SCALARS = {int: "BIGINT", float: "DOUBLE", str: "VARCHAR", bool: "BOOLEAN"}


def unwrap(tp: Any) -> Any:
    """X from X | None."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner[0] if len(inner) == 1 else tp
    return tp


def is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def sql_type(tp: Any) -> str:
    tp = unwrap(tp)
    if tp in SCALARS:
        return SCALARS[tp]
    if typing.get_origin(tp) is list and typing.get_args(tp)[0] in SCALARS:
        return SCALARS[typing.get_args(tp)[0]] + "[]"
    return "JSON"


def column_name(prefix: str, name: str) -> str:
    if not prefix or name.startswith(prefix + "_") or name == prefix:
        return name
    return f"{prefix}_{name}"


def dict_depth(tp: Any) -> tuple[int, Any]:
    """How many dict levels wrap a section type (dict[str, dict[str, X]] -> 2, X)."""
    depth = 0
    tp = unwrap(tp)
    while typing.get_origin(tp) is dict:
        depth += 1
        tp = unwrap(typing.get_args(tp)[1])
    return depth, tp


def child_table_name(item: type, path: tuple[str, ...]) -> str:
    view = getattr(item, "VIEW", "")
    return view if view.startswith("summary_") else "summary_" + "_".join(path)


def view_column_docs() -> dict[str, dict[str, str]]:
    from nsight_doctor.store.docs import column_docs

    return column_docs()


@lru_cache(maxsize=1)
def summary_layout() -> tuple[Table, tuple[Table, ...]]:
    """The summaries table and the child tables, from the Summary dataclass."""
    docs = view_column_docs()
    columns = [Column("profile_id", "VARCHAR", "the profile (profiles.profile_id).")]
    children: list[Table] = []

    def walk(cls: Any, prefix: str, path: tuple[str, ...]) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = unwrap(hints[f.name])
            doc = f.metadata.get("doc") or docs.get(getattr(cls, "VIEW", ""), {}).get(f.name, "")
            if is_section(tp):
                walk(tp, prefix if f.metadata.get("flatten") else column_name(prefix, f.name), (*path, f.name))
                continue
            depth, inner = dict_depth(tp)
            if typing.get_origin(tp) is list and is_section(unwrap(typing.get_args(tp)[0])):
                children.append(child_table(unwrap(typing.get_args(tp)[0]), (*path, f.name), 0, doc, docs))
            elif depth and is_section(inner):
                children.append(child_table(inner, (*path, f.name), depth, doc, docs))
            else:
                columns.append(Column(column_name(prefix, f.name), sql_type(tp), doc))

    walk(Summary, "", ())
    columns.append(Column("summary", "JSON", "the whole summary, as in the JSON output (docs/json.md)."))
    summaries = Table(
        "summaries",
        "one row per profile: every number of its summary (docs/json.md), fields of nested objects "
        "prefixed with the object's name, and the whole summary as JSON. Columns are derived from "
        "the summary: a field added to it appears here.",
        columns,
    )
    return summaries, tuple(children)


def child_table(item: type, path: tuple[str, ...], depth: int, doc: str, docs: dict) -> Table:
    name = child_table_name(item, path)
    view_docs = docs.get(getattr(item, "VIEW", ""), {})
    cols = [
        Column("profile_id", "VARCHAR", "the profile (profiles.profile_id)."),
        Column("ord", "INTEGER", "position in the summary's list (0 first)."),
    ]
    own = [f.name for f in dataclasses.fields(item)]
    declared = item.columns() if isinstance(item, type) and issubclass(item, Section) else own
    extra = [c for c in declared if c not in own]
    keys = [*extra, "key", "subkey", "subsubkey"][:depth]
    cols += [Column(k, "VARCHAR", view_docs.get(k, "the key of the object in the summary's JSON.")) for k in keys]
    hints = typing.get_type_hints(item)
    for f in dataclasses.fields(item):
        fdoc = f.metadata.get("doc") or view_docs.get(f.name, "")
        cols.append(Column(f.name, sql_type(hints[f.name]), fdoc))
    where = ".".join(path)
    return Table(name, f"the summary's `{where}` ({doc}), one row each, for every profile.", cols, path, item, keys)


def summary_rows(profile_id: str, summary: Summary) -> dict[str, list[dict[str, Any]]]:
    """The summaries row and the child tables' rows of one profile."""
    table, children = summary_layout()
    row: dict[str, Any] = {"profile_id": profile_id}

    def walk(obj: Any, cls: Any, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = unwrap(hints[f.name])
            value = getattr(obj, f.name, None) if obj is not None else None
            if is_section(tp):
                walk(value, tp, prefix if f.metadata.get("flatten") else column_name(prefix, f.name))
            elif column_name(prefix, f.name) in names:
                row[column_name(prefix, f.name)] = cell(value, sql_type(tp))

    names = {c.name for c in table.columns}
    walk(summary, Summary, "")
    row["summary"] = json.dumps(summary.to_json(), allow_nan=False, default=str)
    out: dict[str, list[dict[str, Any]]] = {"summaries": [row]}
    for child in children:
        out[child.name] = list(child_rows(profile_id, summary, child))
    return out


def child_rows(profile_id: str, summary: Summary, table: Table):
    obj: Any = summary
    for name in table.path:
        obj = getattr(obj, name, None)
        if obj is None:
            return
    assert table.item is not None
    hints = typing.get_type_hints(table.item)
    items: list[tuple[list[str], Any]] = []

    def collect(value: Any, keys: list[str]) -> None:
        if len(keys) == len(table.keys):
            items.append((keys, value))
        else:
            for k, v in (value or {}).items():
                collect(v, [*keys, str(k)])

    if table.keys:
        collect(obj, [])
    else:
        items = [([], x) for x in obj]
    for n, (keys, item) in enumerate(items):
        row: dict[str, Any] = {"profile_id": profile_id, "ord": n, **dict(zip(table.keys, keys))}
        for f in dataclasses.fields(item):
            row[f.name] = cell(getattr(item, f.name), sql_type(hints[f.name]))
        yield row


def cell(value: Any, kind: str) -> Any:
    if kind == "JSON":
        from nsight_doctor.sections import to_json

        return None if value is None else json.dumps(to_json(value), allow_nan=False, default=str)
    return plain(value)


# --- creating and upgrading a database --------------------------------------------------------


def derived_tables() -> list[Table]:
    summaries, children = summary_layout()
    return [summaries, *children]


def create_sql(table: Table) -> str:
    cols = ",\n    ".join(f"{quote(c.name)} {c.type}" for c in table.columns)
    return f"CREATE TABLE IF NOT EXISTS {quote(table.name)} (\n    {cols}\n)"


def existing_columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main'",
        [table],
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def add_missing_columns(con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]]) -> None:
    have = existing_columns(con, table)
    for name, kind in columns:
        if name not in have:
            con.execute(f"ALTER TABLE {quote(table)} ADD COLUMN {quote(name)} {kind}")


@lru_cache(maxsize=1)
def ncu_kernel_columns() -> tuple[tuple[str, str], ...]:
    """The columns of the store's ncu_kernels view, from an empty store."""
    from nsight_doctor import store

    built = store.build([])
    try:
        con = built.connect()
        try:
            return tuple((r[0], r[1]) for r in con.execute("DESCRIBE ncu_kernels").fetchall())
        finally:
            con.close()
    finally:
        built.close()


def ncu_kernels_table() -> Table:
    docs = view_column_docs().get("ncu_kernels", {})
    cols = [Column("profile_id", "VARCHAR", "the profile (profiles.profile_id).")]
    cols += [Column(n, t, docs.get(n, "")) for n, t in ncu_kernel_columns()]
    return Table(
        "ncu_kernels",
        "every kernel profiled by Nsight Compute, in every profile: the store's `ncu_kernels` view "
        "(docs/schema.md) with `profile_id`.",
        cols,
    )


@lru_cache(maxsize=1)
def declared_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """(column, type) of every table the worker fills from Python rows."""
    out = {
        name: tuple((c, t.replace(" PRIMARY KEY", "")) for c, t in re_columns(sql)) for name, sql in ddl_files().items()
    }
    for t in derived_tables():
        out[t.name] = tuple((c.name, c.type) for c in t.columns)
    return out


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Creates the tables a database lacks and adds the columns it lacks (never drops any)."""
    for name, sql in ddl_files().items():
        con.execute(sql)
        add_missing_columns(con, name, [(c, t.replace(" PRIMARY KEY", "")) for c, t in re_columns(sql)])
    derived = derived_tables()
    if not existing_columns(con, "ncu_kernels"):
        # Its columns come from an empty store (0.5 s): only when the table is new. Parts add
        # the columns that later versions of the view have.
        derived.append(ncu_kernels_table())
    for table in derived:
        con.execute(create_sql(table))
        add_missing_columns(con, table.name, [(c.name, c.type) for c in table.columns])
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if version is None:
        from nsight_doctor import __version__

        con.execute(
            "INSERT INTO meta VALUES ('schema_version', ?), ('created_at', CAST(now() AS VARCHAR)), ('created_by', ?)",
            [str(SCHEMA_VERSION), f"nsight-doctor {__version__}"],
        )


def all_tables() -> list[Table]:
    """Every table of a fleet database, documented (docs/fleet-schema.md)."""
    docs = fixed_docs()

    def fixed(name: str) -> Table:
        desc, cols = docs[name]
        types_ = dict(re_columns(ddl_files()[name]))
        return Table(name, desc, [Column(c, types_.get(c, ""), d) for c, d in cols])

    summaries, children = summary_layout()
    out = []
    for name in FIXED_TABLES:
        if name == "summaries":
            out.append(summaries)
        elif name == "ncu_kernels":
            out.append(ncu_kernels_table())
        else:
            out.append(fixed(name))
    out += list(children)
    out.append(fixed("meta"))
    return out


def re_columns(sql: str) -> list[tuple[str, str]]:
    import re

    body = sql.split("(", 1)[1].rsplit(")", 1)[0]
    out = []
    for line in body.splitlines():
        m = re.match(r"\s*(\w+)\s+([A-Z][A-Z0-9_(), \[\]]*?)(?:\s+PRIMARY KEY)?,?\s*$", line)
        if m:
            out.append((m.group(1), m.group(2).strip()))
    return out
