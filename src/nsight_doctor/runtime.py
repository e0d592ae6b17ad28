"""How many threads DuckDB and Polars get, and how DuckDB's allocator returns memory; neither is
imported here, because both read these settings from the environment when first loaded
(``__main__.run``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# At most this many DuckDB threads unless $NSIGHT_DOCTOR_THREADS says otherwise: on the 16-core
# GPU host the 2 M-kernel profile took 16.0 s with 8 threads and 15.6 s with 16, but peaked at
# 757 MB instead of 899 MB (each thread keeps its own buffers; docs/performance.md).
MAX_DEFAULT_THREADS = 8

# Polars gets as many threads as DuckDB. On the 16-core GPU host, 8 instead of 16 for the 2 M-kernel
# profile: 14.8 / 15.8 s and 1,542-1,586 MB against 17.3 / 14.7 s and 1,793-1,855 MB; the 195 MiB
# metrics export 2.94 / 2.69 / 2.97 s against 3.52 / 3.09 / 2.78 s (docs/performance.md).
POLARS_THREADS_ENV = "POLARS_MAX_THREADS"

# DuckDB's allocator (its own jemalloc) keeps freed pages for a second before returning them;
# with several threads that is hundreds of MB above DuckDB's memory limit. Returned at once:
# 899 MB instead of 1,274-1,318 MB with 16 threads, 757 MB instead of 973 MB with 8, at most 7%
# slower. With 2 threads it saved 130 MB for 25-30% more time, so it starts at this many.
EAGER_PURGE_THREADS = 4
ALLOCATOR_ENV = "DUCKDB_JE_MALLOC_CONF"
EAGER_PURGE = "dirty_decay_ms:0,muzzy_decay_ms:0"


def threads_setting() -> int | None:
    """$NSIGHT_DOCTOR_THREADS when it is a positive number, else None."""
    threads = os.environ.get("NSIGHT_DOCTOR_THREADS", "")
    return int(threads) if threads.isdigit() and int(threads) > 0 else None


def duckdb_threads() -> int:
    """$NSIGHT_DOCTOR_THREADS, else the cores up to MAX_DEFAULT_THREADS."""
    return threads_setting() or min(os.cpu_count() or 1, MAX_DEFAULT_THREADS)


# The variables that configure_allocator and configure_polars set (rather than the user).
_set_here: set[str] = set()


def _users(name: str) -> bool:
    """Whether the user set environment variable `name` (not this module)."""
    return name in os.environ and name not in _set_here


def configure_allocator() -> None:
    """Asks DuckDB's allocator to return freed memory at once when DuckDB will run on several
    threads, unless the environment already configures it. Only effective before DuckDB is
    imported: the command calls it first (``__main__.run``); a program that imports
    nsight_doctor as a library keeps its own setting."""
    if ALLOCATOR_ENV not in os.environ and duckdb_threads() >= EAGER_PURGE_THREADS:
        os.environ[ALLOCATOR_ENV] = EAGER_PURGE
        _set_here.add(ALLOCATOR_ENV)


def configure_polars() -> None:
    """Gives Polars duckdb_threads() threads (its default is every core), unless the
    environment already sets them. Only effective before Polars is imported."""
    if POLARS_THREADS_ENV not in os.environ:
        os.environ[POLARS_THREADS_ENV] = str(duckdb_threads())
        _set_here.add(POLARS_THREADS_ENV)


@contextmanager
def environment_for_children(threads: int, tmpdir: str | None = None) -> Iterator[None]:
    """Around the start of child processes that will run DuckDB and Polars on this many threads
    (archive workers): the allocator setting that suits them, unless the user set one, as many
    Polars threads, unless the user set them, and their temporary folder ($TMPDIR), when given."""
    before = {k: os.environ.get(k) for k in (ALLOCATOR_ENV, POLARS_THREADS_ENV, "TMPDIR")}
    if tmpdir is not None:
        os.environ["TMPDIR"] = tmpdir
    if not _users(ALLOCATOR_ENV):
        if threads >= EAGER_PURGE_THREADS:
            os.environ[ALLOCATOR_ENV] = EAGER_PURGE
        else:
            os.environ.pop(ALLOCATOR_ENV, None)
    if not _users(POLARS_THREADS_ENV):
        os.environ[POLARS_THREADS_ENV] = str(threads)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
