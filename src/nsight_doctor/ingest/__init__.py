"""Ingest: the only stage that knows profiler file formats and binaries.

``load(con, path)`` detects what a path holds, turns reports into exports where needed,
and fills the store's base tables (``base_*``) on the DuckDB connection ``con``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from nsight_doctor.db import first_line, insert_rows, scalar, table_exists
from nsight_doctor.errors import DoctorError, InputError
from nsight_doctor.ingest import cache, ncu, nsys_export, nsys_rep, nvprof
from nsight_doctor.ingest.demangle import short_name
from nsight_doctor.ingest.detect import Detected, detect
from nsight_doctor.ingest.tables import contract, create_missing
from nsight_doctor.redact import redact_capture_meta

__all__ = ["InputInfo", "contract", "create_missing", "detect", "finish", "load"]

MAX_NESTED_COMPRESSION = 3
# Kernel short names and API names are identifiers, a few dozen characters in real profiles;
# one longer than this (a damaged or hostile file) gets a shortened copy for the views to
# carry, and the string itself stays whole in base_strings (see finish()).
MAX_IDENTIFIER = 1024
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
    export_timeout: float | None = None,
) -> InputInfo:
    """Fills the base tables from one input. Every failure that the file causes is an
    InputError (or another DoctorError) whose message names the user's file, also when the
    work was done on a decompressed copy in the cache folder."""
    original = Path(path)
    det = detect(original)
    for _ in range(MAX_NESTED_COMPRESSION):
        if det.kind not in ("xz", "gzip"):
            break
        inner = cache.unpack(det.path, det.kind, original)
        try:
            det = detect(inner)
        except InputError as e:
            raise InputError(name_original(str(e), inner, original)) from None
    else:
        raise InputError(f"'{original}' is compressed more than {MAX_NESTED_COMPRESSION} times over")
    try:
        info = load_detected(con, original, det, nsys_path, progress, export_timeout)
    except DoctorError as e:
        if det.path == original:
            raise
        raise type(e)(name_original(str(e), det.path, original)) from e
    except (duckdb.Error, sqlite3.Error, UnicodeError, OSError, ValueError) as e:
        # What the specific checks did not foresee in a damaged file; an interrupt or an
        # exhausted memory limit keeps its cause (errors.is_interrupt, is_out_of_memory).
        raise InputError(
            f"'{original}' could not be read ({first_line(e)}); the file may be truncated or corrupt"
        ) from e
    note = cache.take_fallback_note()
    if note and note not in info.notes:
        info.notes.append(note)
    return info


def name_original(message: str, copy: Path, original: Path) -> str:
    """An error message about a decompressed copy, naming the user's file instead."""
    return message.replace(f"'{copy}'", f"'{original}' (decompressed)").replace(str(copy), str(original))


def load_detected(
    con: duckdb.DuckDBPyConnection,
    original: Path,
    det: Detected,
    nsys_path: str | None,
    progress: Callable[[str], None] | None,
    export_timeout: float | None,
) -> InputInfo:
    if det.kind in ("nsys-rep", "nsys-sqlite", "nsys-parquet"):
        if table_exists(con, "base_kernels"):
            raise InputError(SECOND_TIMELINE.format(path=original))
        return load_nsys(con, original, det, nsys_path, progress, export_timeout)
    if det.kind == "ncu-rep":
        meta = ncu.load_ncu(con, det.path, progress, export_timeout)
        info = InputInfo(
            path=str(original),
            kind="ncu-rep",
            producer="Nsight Compute",
            producer_version=meta.get("ncu_version"),
            row_counts={"kernels": meta.get("actions", 0)},
        )
        if meta.get("bad_values"):
            n, k = meta["bad_values"], meta["bad_kernels"]
            info.notes.append(
                f"'{original}' holds {n:,} metric value{'s' if n != 1 else ''} that {'are' if n != 1 else 'is'} "
                f"not a number (NaN or infinite) for {k:,} kernel{'s' if k != 1 else ''}: left out, so those "
                "kernels' figures are missing and the others' stand"
            )
        return info
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


def load_nsys(con, original: Path, det: Detected, nsys_path, progress, export_timeout=None) -> InputInfo:
    info = InputInfo(path=str(original), kind=det.kind, producer="Nsight Systems")
    if det.kind == "nsys-rep":
        nsys_rep.check_complete(det.path)
        info.producer_version = nsys_rep.report_version(det.path)
        export, nsys = nsys_rep.export_report(det.path, nsys_path, progress, export_timeout)
        info.export_path, info.export_form = str(export.shown), export.form
        if export.reused or nsys is None:
            info.notes.append(f"reused the existing export {export.shown}")
        else:
            info.notes.append(f"exported with nsys {nsys.version} ({nsys.path}) to {export.path}")
        if export.found:
            # Errors name the compressed export beside the report, not its copy in the cache.
            try:
                return load_export(con, info, det, export.path, export.form, progress)
            except DoctorError as e:
                raise type(e)(name_original(str(e), export.path, export.found)) from e
        return load_export(con, info, det, export.path, export.form, progress)
    form = "parquet" if det.kind == "nsys-parquet" else "sqlite"
    info.export_form = form
    return load_export(con, info, det, det.path, form, progress)


def load_export(con, info: InputInfo, det: Detected, path: Path, form: str, progress) -> InputInfo:
    src = nsys_export.attach(con, path, form)
    info.export_schema_version = src.schema_version
    info.exporter = src.product_version
    if info.producer_version is None:
        # An export records the nsys that wrote it, not the one that captured the report.
        info.producer_version = src.product_version
    if det.kind != "nsys-rep" and not (src.tables.keys() & {"META_DATA_EXPORT", "EXPORT_META_DATA"}):
        info.notes.append("the export has no metadata table: it may be incomplete")
    if "StringIds" not in src.tables:
        info.notes.append("the export has no string table (StringIds): kernel, API and NVTX names are missing")
    info.row_counts = nsys_export.load_base_tables(con, src, progress, info.notes)
    con.execute("DETACH src" if src.form == "sqlite" else "DROP SCHEMA src CASCADE")
    return info


def finish(con: duckdb.DuckDBPyConnection) -> None:
    """Completes the base tables once every input is loaded: creates the tables that no input
    filled, hides the secrets in the recorded launch, and bounds the length of the names that
    the views carry on every row."""
    create_missing(con)
    redact_launch(con)
    bound_identifiers(con)


def redact_launch(con: duckdb.DuckDBPyConnection) -> None:
    """Hides secrets (API keys, tokens, passwords) in what the capture recorded of the processes
    it launched, their command lines and environments (base_capture_meta), before anything
    reads them: no view, report or kept store holds them (nsight_doctor.redact)."""
    rows = con.execute("SELECT name, value FROM base_capture_meta").fetchall()
    if not rows:
        return

    def order(row: tuple[str, str]) -> tuple[str, int]:
        # A secret-named option hides the argument after it: arguments in their order.
        head, sep, index = row[0].rpartition(":ARGUMENT_")
        return (head, int(index)) if sep and index.isdigit() else (row[0], -1)

    rows.sort(key=order)
    hidden = redact_capture_meta(rows)
    changed = [name for (name, value), (_, old) in zip(hidden, rows) if value != (old or "")]
    if not changed:
        return
    con.execute("DELETE FROM base_capture_meta")
    insert_rows(con, "base_capture_meta", hidden)


def bound_identifiers(con: duckdb.DuckDBPyConnection) -> None:
    """Points kernel short names and API names longer than MAX_IDENTIFIER characters at a
    shortened copy (the bare function name of a C++ name, clipped), so that views which join
    a name to each of millions of rows stay within memory; the original strings remain in
    base_strings, and the kernels' demangled_name_id still points at them."""
    if not scalar(con, f"SELECT count(*) FROM base_strings WHERE length(value) > {MAX_IDENTIFIER}"):
        return  # the usual case: no long string at all, and no need to scan the calls
    long = con.execute(
        f"""SELECT id, any_value(value) FROM base_strings
           WHERE length(value) > {MAX_IDENTIFIER} AND id IN (SELECT short_name_id FROM base_kernels
                                              UNION ALL SELECT name_id FROM base_api_calls)
           GROUP BY id""",
    ).fetchall()
    if not long:
        return
    next_id = (scalar(con, "SELECT coalesce(max(id), 0) FROM base_strings") or 0) + 1
    mapping = []
    for n, (old, value) in enumerate(long):
        short = short_name(value) if "(" in value or "<" in value else value
        if len(short) > MAX_IDENTIFIER:
            short = short[: MAX_IDENTIFIER - 1] + "…"
        mapping.append((old, next_id + n, short))
    insert_rows(con, "base_strings", [(new, text) for _, new, text in mapping])
    con.execute("CREATE TEMP TABLE nd_short_names (old BIGINT, new BIGINT)")
    insert_rows(con, "nd_short_names", [(old, new) for old, new, _ in mapping])
    con.execute("UPDATE base_kernels SET short_name_id = m.new FROM nd_short_names m WHERE short_name_id = m.old")
    con.execute("UPDATE base_api_calls SET name_id = m.new FROM nd_short_names m WHERE name_id = m.old")
    con.execute("DROP TABLE nd_short_names")
