"""The late base tables (base_tables.yaml: GPU metric samples, millions of rows), loaded on a
cursor of their own in a thread while the store's other views and the timeline are built;
the views that read them wait for them (store.create_views). On 2 cores the 204 MB export
with 6.2 M metric samples took 2.35 s instead of 2.15 s with them loaded first.

The thread runs SQL only (SQLite or Parquet into DuckDB): it never needs the interpreter
while DuckDB holds a lock, so it cannot deadlock with the timeline's writer (frames.write
keeps no Python object in DuckDB's catalog for a commit to free).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import duckdb

from nsight_doctor.db import first_line
from nsight_doctor.errors import DoctorError, InputError
from nsight_doctor.ingest.tables import contract, create_table


class Later:
    """At most one job at a time: the late tables of one input, then the export detached."""

    def __init__(self) -> None:
        self.names: set[str] = set()  # the tables being loaded, until wait() returns
        self._thread: threading.Thread | None = None
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._error: BaseException | None = None
        self._renames: list[Callable[[str], str]] = []

    def start(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Any,
        tables: dict[str, str | None],
        counts: dict[str, int],
        notes: list[str],
        detach: str,
    ) -> None:
        """Creates the tables (name: SELECT over src, or None) from the export `path` in a
        thread, putting their row counts in counts and their notes in notes, then runs
        `detach` (the export is attached as src until then)."""
        self.wait()
        self.names = set(tables)
        self._cursor = con.cursor()
        self._error = None
        cursor = self._cursor

        def job() -> None:
            try:
                for name, sql in tables.items():
                    counts[name] = create_table(cursor, path, contract()[name], sql, notes)
            except (duckdb.Error, sqlite3.Error, UnicodeError, OSError, ValueError) as e:
                # (as ingest.load words what its own checks did not foresee in a damaged file)
                self._error = InputError(
                    f"'{path}' could not be read ({first_line(e)}); the file may be truncated or corrupt"
                )
            except BaseException as e:  # (kept for wait(): raised in the thread that waits)
                self._error = e
            finally:
                try:
                    cursor.execute(detach)
                except duckdb.Error:
                    pass  # (only after an error, which is the one to tell)

        self._thread = threading.Thread(target=job, name="late-tables", daemon=True)
        self._thread.start()

    def rename(self, how: Callable[[str], str]) -> None:
        """Rewrites the job's error message, as load() does for the tables it makes at once
        (naming the user's file, not its decompressed or cached copy)."""
        if self._thread is not None:
            self._renames.append(how)

    def wait(self) -> None:
        """Waits for the job; raises its error, as loading those tables at once would have."""
        if self._thread is None:
            return
        self._thread.join()
        error, renames = self._error, self._renames
        self._close()
        if error is None:
            return
        if isinstance(error, DoctorError):
            message = str(error)
            for how in renames:
                message = how(message)
            raise type(error)(message) from None
        raise error

    def cancel(self) -> None:
        """Stops the job, if any, and waits for it (on the way out of a failed build)."""
        if self._thread is None:
            return
        if self._cursor is not None:
            try:
                self._cursor.interrupt()
            except duckdb.Error:
                pass
        self._thread.join()
        self._close()

    def _close(self) -> None:
        if self._cursor is not None:
            try:
                self._cursor.close()
            except duckdb.Error:
                pass
        self._thread = self._cursor = self._error = None
        self._renames = []
        self.names = set()
