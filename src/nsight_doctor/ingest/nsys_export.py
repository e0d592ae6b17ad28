"""Reads an Nsight Systems export (SQLite file or Parquet folder) into the store's base tables.

The export is attached read-only as the DuckDB catalog/schema ``src``; every base table is
then built from the versioned column map (nsys_columns.yaml) by ingest/tables.py. Nothing
else in the code knows export names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from nsight_doctor.db import first_line, literal, quote, text_expr
from nsight_doctor.errors import InputError
from nsight_doctor.ingest.tables import Export, load_tables

Progress = Callable[[str], None]


@dataclass
class ExportSource(Export):
    """An attached export: its tables with their columns, and its version metadata."""

    form: str = "sqlite"  # "sqlite" or "parquet"
    product_version: str | None = None
    meta: dict[str, str] = field(default_factory=dict)


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
    con.execute(f"LOAD {literal(str(ext))}")


def attach(con: duckdb.DuckDBPyConnection, path: Path, form: str) -> ExportSource:
    """Makes the export's tables visible as src.<table>, read-only."""
    if form == "sqlite":
        load_sqlite_extension(con)
        try:
            con.execute(f"ATTACH {literal(str(path.resolve()))} AS src (TYPE sqlite, READ_ONLY)")
            rows = con.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_catalog = 'src'"
            ).fetchall()
        except duckdb.Error as e:
            raise InputError(f"'{path}' could not be opened as SQLite: {first_line(e)}") from None
    else:
        con.execute("CREATE SCHEMA IF NOT EXISTS src")
        for f in sorted(path.glob("*.parquet")):
            try:
                con.execute(
                    f"CREATE VIEW src.{quote(f.stem)} AS SELECT * FROM read_parquet({literal(str(f.resolve()))})"
                )
            except duckdb.Error as e:
                raise InputError(f"'{f}' is not a readable Parquet file: {first_line(e)}") from None
        rows = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'src'"
        ).fetchall()
    tables: dict[str, set[str]] = {}
    for t, c in rows:
        tables.setdefault(t, set()).add(c)
    src = ExportSource(path=path, form=form, tables=tables)
    read_meta(con, src)
    return src


def read_meta(con: duckdb.DuckDBPyConnection, src: ExportSource) -> None:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= src.tables.get(table, set()):
            sql = f"SELECT {text_expr('CAST(name AS VARCHAR)')}, {text_expr('CAST(value AS VARCHAR)')}"
            rows = con.execute(f"{sql} FROM src.{quote(table)}").fetchall()
            src.meta = {str(k): str(v) for k, v in rows}
            break
    src.product_version = src.meta.get("EXPORT_PRODUCT_VERSION")
    src.schema_version = src.meta.get("EXPORT_SCHEMA_VERSION")


def load_base_tables(
    con: duckdb.DuckDBPyConnection, src: ExportSource, progress: Progress | None = None, notes: list[str] | None = None
) -> dict[str, int]:
    """Fills the base tables from the attached export; returns their row counts."""
    return load_tables(con, src, "nsys_columns.yaml", progress, notes=notes)
