"""A DuckDB instance that never loaded the SQLite reader, for a store held in memory.

Ingest reads SQLite exports (and nvprof databases) through DuckDB's SQLite reader, an extension
that stays loaded in its instance for good, with table functions that open any SQLite file
(sqlite_scan, sqlite_attach, sqlite_query) whatever ``enable_external_access`` says. The
summary, the report's data and the rules (SQL from other people: --rules) read the store, so
the store they read must not be in that instance. A store in a file is reopened read-only in an
instance of its own; a store in memory is moved, once ingest has filled its base tables and
before any view exists, into a fresh instance: each table re-created from its own definition
and its rows streamed through Arrow, in order, then dropped from the reader, which is closed.
On 2 cores this costs about 0.1 s for the 7.5 MB sample (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import duckdb

from nsight_doctor.db import quiet, quote

# Settings of the fresh instance on top of the store's: it never loads an extension by itself.
NO_EXTENSIONS = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}


class Stream:
    """A table's rows as one Arrow C stream, which DuckDB scans without pyarrow (it asks for the
    stream several times while it binds and scans: the query runs once)."""

    def __init__(self, rel: duckdb.DuckDBPyRelation):
        self.capsule = rel.__arrow_c_stream__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.capsule


def move(reader: duckdb.DuckDBPyConnection, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """A connection to a new in-memory instance (with the store's settings) holding every table
    of the reader's database, in the same row order; the reader is closed."""
    fresh = duckdb.connect(":memory:", config={**config, **NO_EXTENSIONS})
    try:
        quiet(fresh)
        tables = reader.execute(
            "SELECT table_name, sql FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = 'main' AND NOT temporary "
            "ORDER BY table_oid"
        ).fetchall()
        counts = dict(
            reader.execute(
                " UNION ALL ".join(f"SELECT {i}, count(*) FROM {quote(name)}" for i, (name, _) in enumerate(tables))
            ).fetchall()
            if tables
            else []
        )
        # Rows keep the order they have in the reader: the views then see the same tables.
        reader.execute("SET preserve_insertion_order = true")
        fresh.execute("SET preserve_insertion_order = true")
        for i, (name, ddl) in enumerate(tables):
            fresh.execute(ddl)
            if counts.get(i):
                fresh.from_arrow(Stream(reader.table(quote(name)))).insert_into(quote(name))
            reader.execute(f"DROP TABLE {quote(name)}")  # its memory goes back at once
        fresh.execute(f"SET preserve_insertion_order = {str(config.get('preserve_insertion_order', True)).lower()}")
    except BaseException:
        fresh.close()
        raise
    finally:
        reader.close()
    return fresh
