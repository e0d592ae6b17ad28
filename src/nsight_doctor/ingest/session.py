"""When a capture started, in wall-clock time, where the profile records it.

- Nsight Systems exports: ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (SQLite or Parquet).
- nvprof databases: CUPTI timestamps are ns since the epoch; the earliest activity is taken.
- Nsight Compute reports record no capture time: None.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from nsight_doctor.db import literal
from nsight_doctor.errors import InputError
from nsight_doctor.ingest.detect import detect, sqlite_uri

# Plausible capture times (2005 to 2100), so that a relative clock is never taken as a date.
EARLIEST_NS = 1_104_537_600 * 10**9
LATEST_NS = 4_102_444_800 * 10**9
NVPROF_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
)


def capture_start_ns(info: dict[str, Any]) -> int | None:
    """The capture's start (ns since the epoch, UTC) for an input as the diagnosis records it
    (its path, kind and export_path), or None when the file does not say."""
    try:
        if info.get("kind") in ("nsys-rep", "nsys-sqlite", "nsys-parquet"):
            path = readable(Path(info.get("export_path") or info["path"]))
            return plausible(nsys_start(path))
        if info.get("kind") == "nvprof":
            return plausible(nvprof_start(readable(Path(info["path"]))))
    except (OSError, sqlite3.Error, InputError):
        return None
    return None


def readable(path: Path) -> Path:
    """The file itself, or its decompressed copy in the cache (made by the analysis)."""
    from nsight_doctor.ingest import cache

    det = detect(path)
    for _ in range(3):
        if det.kind not in ("xz", "gzip"):
            break
        det = detect(cache.unpack(det.path, det.kind, path))
    return det.path


def plausible(ns: Any) -> int | None:
    return int(ns) if isinstance(ns, int) and EARLIEST_NS <= ns <= LATEST_NS else None


def nsys_start(path: Path) -> int | None:
    if path.is_dir():
        f = path / "TARGET_INFO_SESSION_START_TIME.parquet"
        if not f.exists():
            return None
        import duckdb

        dcon = duckdb.connect()
        try:
            row = dcon.execute(f"SELECT min(utcEpochNs) FROM read_parquet({literal(str(f))})").fetchone()
        finally:
            dcon.close()
        return row[0] if row else None
    con = sqlite3.connect(sqlite_uri(path), uri=True)
    try:
        row = con.execute("SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return None
    finally:
        con.close()
    return row[0] if row else None


def nvprof_start(path: Path) -> int | None:
    con = sqlite3.connect(sqlite_uri(path), uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        starts = []
        for t in NVPROF_TABLES:
            if t in tables:
                row = con.execute(f'SELECT min(start) FROM "{t}" WHERE start > 0').fetchone()
                if row and row[0]:
                    starts.append(row[0])
        return min(starts) if starts else None
    finally:
        con.close()
