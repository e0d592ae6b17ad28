"""Moving tables between the store and Polars, and the timeline tables' declared columns.

Data leaves DuckDB through the Arrow C stream interface (no pyarrow needed) and comes back
the same way: each table the timeline writes is declared in tables.yaml, with a type and a doc
line per column, and is written with exactly those columns and types.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import lru_cache
from importlib import resources
from typing import Any

import duckdb
import polars as pl

from nsight_doctor import yamlio
from nsight_doctor.db import quiet, quote, scalar
from nsight_doctor.ingest.tables import Column, Table  # the same declared-table shape as the base tables


@lru_cache(maxsize=1)
def spec() -> dict[str, Any]:
    """tables.yaml, read once."""
    return yamlio.load(resources.files("nsight_doctor.store.timeline").joinpath("tables.yaml").read_text())


@lru_cache(maxsize=1)
def tables() -> dict[str, Table]:
    """The tables the timeline writes, in the order of tables.yaml."""
    data = spec()
    return {
        name: Table(
            name,
            " ".join(t["doc"].split()),
            tuple(Column(c, s["type"], " ".join(s["doc"].split())) for c, s in t["columns"].items()),
        )
        for name, t in data["tables"].items()
    }


@lru_cache(maxsize=1)
def inputs() -> list[str]:
    """The views and tables of the store that the timeline reads."""
    return list(spec()["inputs"])


def read(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """A query's result as a Polars frame (through the Arrow C stream interface)."""
    return pl.DataFrame(con.sql(sql))


def write(con: duckdb.DuckDBPyConnection, name: str, df: pl.DataFrame, append: bool = False) -> None:
    """Creates table `name` from df with the columns and types tables.yaml declares (columns
    df lacks are NULL), or appends df's rows to it."""
    table = tables()[name]
    # Only the declared columns cross over: a stream's columns are all converted, read or not.
    df = df.select(c.name for c in table.columns if c.name in df.columns)
    cols = ", ".join(
        (f"CAST({quote(c.name)} AS {c.type})" if c.name in df.columns else f"NULL::{c.type}") + f" AS {quote(c.name)}"
        for c in table.columns
    )
    # DuckDB gets the Arrow stream's capsule, not the frame: handed an object, it would import
    # pandas and pyarrow to see whether it is one of theirs (a second on the GPU host), and
    # read it through pyarrow. It is read through a relation, not a view in the catalog: a
    # dropped view over a Python object is freed by whichever connection's commit cleans it up
    # next, which then waits for the interpreter's lock while holding the commit lock (a
    # deadlock when this thread, holding the interpreter's lock, commits too).
    rel = con.from_arrow(df.__arrow_c_stream__()).project(cols)
    if append:
        rel.insert_into(quote(name))
    else:
        rel.create(quote(name))


class Writer:
    """Writes the timeline's tables in a thread of its own, in the order given, while the pass
    goes on (DuckDB and Polars both release the interpreter while they work): at 2 M kernels,
    writing gpu_busy and gpu_gaps into a store in a file takes 4 to 7 s on 2 cores. The thread
    writes through a cursor of the store's connection (a connection of its own to the same
    database). Leaving the `with` block waits for every write and raises the first error; on
    an error in the pass, or Ctrl-C while it waits, the writes not begun are dropped and the
    one under way is interrupted."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.cursor = con.cursor()
        # (a store being sandboxed for rule tests is locked, and its builder never quiet)
        if not scalar(self.cursor, "SELECT current_setting('lock_configuration')"):
            quiet(self.cursor)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timeline-writer")
        self.pending: list[Future] = []
        self.written: set[str] = set()

    def write(self, name: str, df: pl.DataFrame) -> None:
        """Creates table name from df; a second write of the same name appends to it."""
        self.pending.append(self.pool.submit(write, self.cursor, name, df, name in self.written))
        self.written.add(name)

    def drain(self, leave: int = 0) -> None:
        """Waits until at most `leave` writes are still to do (each holds its frame)."""
        for f in self.pending[: max(len(self.pending) - leave, 0)]:
            f.result()

    def read(self, sql: str) -> pl.DataFrame:
        """A query's result, read in the writer's thread once the writes before it are done.
        (Read in another thread while the writer writes, a query may wait forever: the
        writer's scan of the frame takes the interpreter's lock inside DuckDB, and the reading
        thread holds that lock while DuckDB runs its query.)"""
        return self.pool.submit(read, self.cursor, sql).result()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            if kind is not None:
                self.stop()
                return
            try:
                wait(self.pending)
            except BaseException:  # Ctrl-C while the last writes run
                self.stop()
                raise
            for f in self.pending:
                f.result()
        finally:
            self.pool.shutdown(wait=True)  # (its thread is idle by now)
            self.cursor.close()

    def stop(self) -> None:
        """Drops the writes not begun, interrupts the one under way and waits until it has
        stopped, however often Ctrl-C comes meanwhile: the caller is about to remove the store,
        and a write that outlived that would leave a write-ahead log behind (CI saw one). It
        waits on the writes, not on the thread: Python 3.11 takes an interrupted join of a
        live thread for its end, and later joins return at once."""
        for f in self.pending:
            f.cancel()
        self.cursor.interrupt()
        while True:
            try:
                wait(self.pending)
                return
            except KeyboardInterrupt:
                continue
