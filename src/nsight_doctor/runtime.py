"""How many threads DuckDB gets, and how its allocator returns memory; no DuckDB import here,
because the allocator reads its settings when DuckDB is first imported (``__main__.run``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# At most this many DuckDB threads unless $NSIGHT_DOCTOR_THREADS says otherwise: on the 16-core
# GPU host the 2 M-kernel profile took 16.0 s with 8 threads and 15.6 s with 16, but peaked at
# 757 MB instead of 899 MB (each thread keeps its own buffers; docs/performance.md).
MAX_DEFAULT_THREADS = 8

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


# Whether configure_allocator set ALLOCATOR_ENV (rather than the user).
_set_here = False


def configure_allocator() -> None:
    """Asks DuckDB's allocator to return freed memory at once when DuckDB will run on several
    threads, unless the environment already configures it. Only effective before DuckDB is
    imported: the command calls it first (``__main__.run``); a program that imports
    nsight_doctor as a library keeps its own setting."""
    global _set_here
    if ALLOCATOR_ENV not in os.environ and duckdb_threads() >= EAGER_PURGE_THREADS:
        os.environ[ALLOCATOR_ENV] = EAGER_PURGE
        _set_here = True


@contextmanager
def allocator_for_children(threads: int) -> Iterator[None]:
    """Around the start of child processes that will run DuckDB on this many threads (archive
    workers): the allocator setting that suits them, unless the user set one."""
    if ALLOCATOR_ENV in os.environ and not _set_here:
        yield
        return
    before = os.environ.get(ALLOCATOR_ENV)
    if threads >= EAGER_PURGE_THREADS:
        os.environ[ALLOCATOR_ENV] = EAGER_PURGE
    else:
        os.environ.pop(ALLOCATOR_ENV, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOCATOR_ENV, None)
        else:
            os.environ[ALLOCATOR_ENV] = before
