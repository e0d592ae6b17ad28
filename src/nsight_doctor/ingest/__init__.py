"""Ingest: the only stage that knows profiler file formats and binaries.

``load(con, path)`` detects what a path holds, turns reports into exports where needed,
and fills the store's base tables (``base_*``) on the DuckDB connection ``con``.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from nsight_doctor.db import table_exists
from nsight_doctor.errors import InputError
from nsight_doctor.ingest import cache, ncu, nsys_export, nsys_rep, nvprof
from nsight_doctor.ingest.detect import Detected, detect
from nsight_doctor.ingest.tables import contract, create_missing

__all__ = ["InputInfo", "contract", "create_missing", "detect", "load"]

MAX_NESTED_COMPRESSION = 3
PRODUCERS = {
    "nsys-rep": "Nsight Systems",
    "nsys-sqlite": "Nsight Systems",
    "nsys-parquet": "Nsight Systems",
    "ncu-rep": "Nsight Compute",
    "nvprof": "nvprof",
}


@dataclass
class InputInfo:
    """What was read: reported in every output so that a diagnosis can be reproduced."""

    path: str
    kind: str
    producer: str
    producer_version: str | None = None
    export_path: str | None = None
    export_form: str | None = None
    export_schema_version: str | None = None
    exporter: str | None = None
    row_counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


SECOND_TIMELINE = (
    "'{path}' is a second timeline: an analysis reads one timeline (Nsight Systems or nvprof) and any "
    "Nsight Compute reports; to compare profiles, run: nsight-doctor compare A B"
)


def load(
    con: duckdb.DuckDBPyConnection,
    path: str | os.PathLike,
    nsys_path: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> InputInfo:
    original = Path(path)
    det = detect(original)
    for _ in range(MAX_NESTED_COMPRESSION):
        if det.kind not in ("xz", "gzip"):
            break
        inner = unpack(det, original)
        try:
            det = detect(inner)
        except InputError as e:
            # Name the user's file, not the copy in the cache folder.
            raise InputError(str(e).replace(f"'{inner}'", f"'{original}' (decompressed)")) from None
    else:
        raise InputError(f"'{original}' is compressed more than {MAX_NESTED_COMPRESSION} times over")
    if det.kind in ("nsys-rep", "nsys-sqlite", "nsys-parquet"):
        if table_exists(con, "base_kernels"):
            raise InputError(SECOND_TIMELINE.format(path=original))
        return load_nsys(con, original, det, nsys_path, progress)
    if det.kind == "ncu-rep":
        meta = ncu.load_ncu(con, det.path, progress)
        return InputInfo(
            path=str(original),
            kind="ncu-rep",
            producer="Nsight Compute",
            producer_version=meta.get("ncu_version"),
            row_counts={"kernels": meta.get("actions", 0)},
        )
    if det.kind == "nvprof":
        if table_exists(con, "base_kernels"):
            raise InputError(SECOND_TIMELINE.format(path=original))
        meta = nvprof.load_nvprof(con, det.path, progress)
        info = InputInfo(
            path=str(original),
            kind="nvprof",
            producer="nvprof",
            producer_version=f"database schema {meta['version']}" if meta["version"] else None,
            row_counts=meta["counts"],
            notes=list(meta["notes"]),
        )
        if meta["empty"]:
            info.notes.append("the nvprof database holds no activity: nothing was profiled")
        return info
    raise InputError(f"'{original}': {PRODUCERS[det.kind]} files are not supported yet")


def load_nsys(con, original: Path, det: Detected, nsys_path, progress) -> InputInfo:
    info = InputInfo(path=str(original), kind=det.kind, producer="Nsight Systems")
    if det.kind == "nsys-rep":
        info.producer_version = nsys_rep.report_version(det.path)
        export, nsys = nsys_rep.export_report(det.path, nsys_path, progress)
        info.export_path, info.export_form = str(export.path), export.form
        if export.reused or nsys is None:
            info.notes.append(f"reused the existing export {export.path}")
        else:
            info.notes.append(f"exported with nsys {nsys.version} ({nsys.path}) to {export.path}")
        src = nsys_export.attach(con, export.path, export.form)
    else:
        form = "parquet" if det.kind == "nsys-parquet" else "sqlite"
        src = nsys_export.attach(con, det.path, form)
        info.export_form = form
    info.export_schema_version = src.schema_version
    info.exporter = src.product_version
    if info.producer_version is None:
        # An export records the nsys that wrote it, not the one that captured the report.
        info.producer_version = src.product_version
    if det.kind != "nsys-rep" and not (src.tables.keys() & {"META_DATA_EXPORT", "EXPORT_META_DATA"}):
        info.notes.append("the export has no metadata table: it may be incomplete")
    info.row_counts = nsys_export.load_base_tables(con, src, progress)
    con.execute("DETACH src" if src.form == "sqlite" else "DROP SCHEMA src CASCADE")
    return info


def unpack(det: Detected, original: Path) -> Path:
    """Decompresses into the cache folder (never beside the input) and returns the copy;
    errors name the user's file, original."""
    st = det.path.stat()
    key = hashlib.sha256(f"{det.path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:20]
    name = det.path.name.rsplit(".", 1)[0] or "unpacked"
    dest = cache.unpacked_dir() / key / name
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    opener = lzma.open if det.kind == "xz" else gzip.open
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out, opener(det.path, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
        os.replace(tmp, dest)
    except (OSError, EOFError, lzma.LZMAError) as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"'{original}' could not be decompressed ({e}): truncated or corrupt") from None
    return dest
