"""Tells what kind of profile a path holds, from its content rather than its name.

Kinds:
- ``nsys-rep``: an Nsight Systems report (.nsys-rep, or .qdrep before 2021);
- ``nsys-sqlite``: an Nsight Systems SQLite export;
- ``nsys-parquet``: a folder of Nsight Systems Parquet files (``nsys export --type parquetdir``);
- ``ncu-rep``: an Nsight Compute report;
- ``nvprof``: an nvprof ``--export-profile`` database (.nvvp, .prof);
- ``xz`` / ``gzip``: a compressed file, whose content is detected again once unpacked.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from nsight_doctor.errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_MAGIC = b"NVIDIA Tegra Profiler Report "
NCU_MAGIC = b"NVR\x00"
XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"

# Tables that only an Nsight Systems export has (one of them is enough).
NSYS_MARKER_TABLES = {"StringIds", "META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME"}
# nvprof databases keep names in StringTable and activities in CUPTI_ACTIVITY_KIND_* tables.
NVPROF_MARKER_TABLES = {"StringTable"}

KNOWN_SUFFIXES = {".nsys-rep", ".qdrep", ".sqlite", ".db", ".ncu-rep", ".nvvp", ".prof", ".xz", ".gz"}


@dataclass(frozen=True)
class Detected:
    path: Path
    kind: str


def describe(path: Path) -> str:
    return f"'{path}'"


def detect(path: str | os.PathLike) -> Detected:
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise InputError(missing_message(p, e)) from None
    if stat.S_ISDIR(st.st_mode):
        if is_nsys_parquet_dir(p):
            return Detected(p, "nsys-parquet")
        raise InputError(
            f"{describe(p)} is a directory, not a profile; pass a report file or a folder "
            "written by 'nsys export --type parquetdir'"
        )
    if not stat.S_ISREG(st.st_mode):
        # A pipe or a device would block or never end; profiles are files.
        raise InputError(f"{describe(p)} is not a regular file (a pipe, socket or device); pass a profile file")
    if st.st_size == 0:
        raise InputError(f"{describe(p)} is empty (0 bytes); the capture or the copy did not finish")
    size = st.st_size
    try:
        with open(p, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise InputError(missing_message(p, e)) from None
    if head.startswith(SQLITE_MAGIC):
        return Detected(p, sqlite_kind(p, head, size))
    if head.startswith(NSYS_MAGIC):
        return Detected(p, "nsys-rep")
    if head.startswith(NCU_MAGIC):
        return Detected(p, "ncu-rep")
    if head.startswith(XZ_MAGIC):
        return Detected(p, "xz")
    if head.startswith(GZIP_MAGIC):
        return Detected(p, "gzip")
    suffix = "".join(p.suffixes[-1:]).lower()
    if suffix in KNOWN_SUFFIXES:
        raise InputError(
            f"{describe(p)} is not a valid {suffix} file: its header matches no Nsight Systems, "
            "Nsight Compute, nvprof or SQLite format (is it corrupt, or something else renamed?)"
        )
    raise InputError(
        f"{describe(p)}: unknown kind of file; expected an Nsight Systems report (.nsys-rep, "
        ".qdrep) or export (.sqlite, Parquet folder), an Nsight Compute report (.ncu-rep) or an "
        "nvprof database (.nvvp, .prof)"
    )


def missing_message(p: Path, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return f"{describe(p)} is a symbolic link that loops (it points, in the end, back to itself)"
    if p.is_symlink():
        return f"{describe(p)} is a broken symbolic link (to '{os.readlink(p)}', which does not exist)"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"{describe(p)}: permission denied"
    if e.errno == errno.ENOENT:
        return f"{describe(p)}: no such file or directory"
    return f"{describe(p)} cannot be read: {e.strerror or e}"


def is_nsys_parquet_dir(p: Path) -> bool:
    """Whether a folder is a Parquet export (StringIds.parquet or a CUPTI activity table),
    from one pass over its names (no file is opened, so a folder of many thousands of
    files, or one with unreadable entries, is answered at once)."""
    try:
        with os.scandir(p) as entries:
            for e in entries:
                if e.name == "StringIds.parquet" or (
                    e.name.startswith("CUPTI_ACTIVITY_KIND_") and e.name.endswith(".parquet")
                ):
                    return True
    except OSError:
        return False
    return False


def sqlite_kind(p: Path, head: bytes, size: int) -> str:
    check_sqlite_size(p, head, size)
    tables = sqlite_tables(p)
    if tables & NSYS_MARKER_TABLES:
        return "nsys-sqlite"
    if tables & NVPROF_MARKER_TABLES and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables):
        return "nvprof"
    raise InputError(
        f"{describe(p)} is an SQLite database but not an Nsight Systems export or nvprof "
        "profile (it has no StringIds, META_DATA_EXPORT or CUPTI activity tables)"
    )


def check_sqlite_size(p: Path, head: bytes, size: int) -> None:
    """A truncated SQLite file is shorter than the page count its header declares."""
    if len(head) < 32:
        raise InputError(f"{describe(p)} is truncated: shorter than an SQLite header")
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    (pages,) = struct.unpack(">I", head[28:32])
    if pages and size < pages * page_size:
        raise InputError(
            f"{describe(p)} is truncated: {size:,} bytes, but its header declares "
            f"{pages * page_size:,}; copy or export it again"
        )


def sqlite_uri(p: Path) -> str:
    # immutable=1: SQLite takes no locks and writes nothing, not even a journal.
    return f"file:{quote(str(p.resolve()))}?mode=ro&immutable=1"


def sqlite_tables(p: Path) -> set[str]:
    try:
        con = sqlite3.connect(sqlite_uri(p), uri=True)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise InputError(f"{describe(p)} is a corrupt SQLite database ({e})") from None
    except UnicodeDecodeError:
        # A damaged schema: its table names are no longer text.
        raise InputError(f"{describe(p)} is a corrupt SQLite database (its schema is not valid text)") from None
