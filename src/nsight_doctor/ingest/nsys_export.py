"""Reads an Nsight Systems export (SQLite file or Parquet folder) into the store's base tables.

The export is attached read-only as the DuckDB catalog/schema ``src``; every base table is
then built with one ``CREATE TABLE ... AS SELECT`` whose column list comes from the
versioned column map (nsys_columns.yaml). Nothing else in the code knows export names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable

import duckdb
import yaml

from nsight_doctor.errors import InputError

Progress = Callable[[str], None]


@dataclass
class ExportSource:
    """An attached export: its tables with their columns, and its version metadata."""

    path: Path
    form: str  # "sqlite" or "parquet"
    tables: dict[str, set[str]]
    product_version: str | None = None
    schema_version: str | None = None
    meta: dict[str, str] = field(default_factory=dict)


@lru_cache(maxsize=None)
def column_map(name: str = "nsys_columns.yaml") -> dict:
    text = resources.files("nsight_doctor.ingest").joinpath(name).read_text()
    return yaml.safe_load(text)


def quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def load_sqlite_extension(con: duckdb.DuckDBPyConnection) -> None:
    """Loads DuckDB's SQLite reader from the duckdb-extension-sqlite-scanner package.

    The extension cannot be downloaded at run time on machines without network, so the
    package that ships it is a dependency, pinned to DuckDB's own version.
    """
    try:
        import duckdb_extension_sqlite_scanner as pkg
    except ImportError:
        raise InputError(
            "reading SQLite needs the package duckdb-extension-sqlite-scanner "
            f"=={duckdb.__version__}; install it with pip"
        ) from None
    base = Path(pkg.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    ext = base / "sqlite_scanner.duckdb_extension"
    if not ext.exists():
        raise InputError(
            f"duckdb-extension-sqlite-scanner does not match DuckDB {duckdb.__version__}; "
            f"install duckdb-extension-sqlite-scanner=={duckdb.__version__}"
        )
    con.execute(f"LOAD '{ext}'")


def attach(con: duckdb.DuckDBPyConnection, path: Path, form: str) -> ExportSource:
    """Makes the export's tables visible as src.<table>, read-only."""
    if form == "sqlite":
        load_sqlite_extension(con)
        lit = str(path.resolve()).replace("'", "''")
        try:
            con.execute(f"ATTACH '{lit}' AS src (TYPE sqlite, READ_ONLY)")
            rows = con.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_catalog = 'src'"
            ).fetchall()
        except duckdb.Error as e:
            raise InputError(f"'{path}' could not be opened as SQLite: {first_line(e)}") from None
    else:
        con.execute("CREATE SCHEMA IF NOT EXISTS src")
        for f in sorted(path.glob("*.parquet")):
            lit = str(f.resolve()).replace("'", "''")
            try:
                con.execute(
                    f"CREATE VIEW src.{quote(f.stem)} AS SELECT * FROM read_parquet('{lit}')"
                )
            except duckdb.Error as e:
                raise InputError(f"'{f}' is not a readable Parquet file: {first_line(e)}") from None
        rows = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'src'"
        ).fetchall()
    tables: dict[str, set[str]] = {}
    for t, c in rows:
        tables.setdefault(t, set()).add(c)
    src = ExportSource(path=path, form=form, tables=tables)
    read_meta(con, src)
    return src


def read_meta(con: duckdb.DuckDBPyConnection, src: ExportSource) -> None:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in src.tables:
            rows = con.execute(f"SELECT name, value FROM src.{quote(table)}").fetchall()
            src.meta = {str(k): str(v) for k, v in rows}
            break
    src.product_version = src.meta.get("EXPORT_PRODUCT_VERSION")
    src.schema_version = src.meta.get("EXPORT_SCHEMA_VERSION")


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchone()[0] > 0


def column_expr(base: str, name: str, col: dict, columns: set[str], src: ExportSource,
                params: dict | None = None) -> str:
    for item in col["from"]:
        item = {"column": item} if isinstance(item, str) else item
        if "column" in item and item["column"] in columns:
            return quote(item["column"])
        if "expr" in item and set(item.get("needs", [])) <= columns:
            return item["expr"].format(**(params or {}))
    if "default" in col:
        d = col["default"]
        return "NULL" if d is None else repr(d)
    raise InputError(
        f"'{src.path}': export schema {src.schema_version or 'unknown'} has no column for "
        f"{base}.{name} (looked for {col['from']}); this export version is not supported"
    )


def build_select(base: str, spec: dict, src: ExportSource, params: dict | None = None) -> str | None:
    """The SELECT that fills one base table, or None when the export lacks its table.

    params fill {placeholders} in expressions and SQL (the nvprof map's time origin)."""
    for source in spec.get("sources", [spec]):
        table = source["table"]
        if table not in src.tables or not set(source.get("requires", [])) <= set(src.tables):
            continue
        if "sql" in source:
            return source["sql"].format(**(params or {}))
        cols = src.tables[table]
        exprs = [
            f"CAST({column_expr(base, name, col, cols, src, params)} AS {col['type']}) AS {quote(name)}"
            for name, col in source["columns"].items()
        ]
        alias = f" AS {spec['alias']}" if "alias" in spec else ""
        return f"SELECT {', '.join(exprs)} FROM src.{quote(table)}{alias}"
    return None


def empty_table_ddl(base: str, spec: dict) -> str:
    source = spec.get("sources", [spec])[0]
    cols = ", ".join(f"{quote(n)} {c['type']}" for n, c in source["columns"].items())
    return f"CREATE TABLE {base} ({cols})"


def load_base_tables(con: duckdb.DuckDBPyConnection, src: ExportSource,
                     progress: Progress | None = None, map_name: str = "nsys_columns.yaml",
                     params: dict | None = None) -> dict[str, int]:
    """Creates every base table of the column map; returns their row counts."""
    counts = {}
    for base, spec in column_map(map_name).items():
        sql = build_select(base, spec, src, params)
        if progress:
            progress(base)
        try:
            if sql is None:
                con.execute(empty_table_ddl(base, spec))
            else:
                con.execute(f"CREATE TABLE {base} AS {sql}")
        except duckdb.Error as e:
            raise InputError(
                f"'{src.path}' could not be read ({base}: {first_line(e)}); "
                "the file may be truncated or corrupt"
            ) from None
        counts[base] = con.execute(f"SELECT count(*) FROM {base}").fetchone()[0]
    return counts


def first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
