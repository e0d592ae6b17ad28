"""``nsight-doctor ingest``: a batch driver over the same ``analyze``, writing each profile's
tables into one fleet database.

One process writes the database: this one (or the Dask client). Workers analyse and write
parts (worker.py); each part is merged in ONE transaction, so a profile is in the database
whole or not at all, and ``kill -9`` at any moment leaves a database that opens (DuckDB's
write-ahead log) and a rerun that completes it:

- a profile whose rows committed is skipped on the rerun (by content hash);
- a part that was written but not merged is merged at the start of the rerun;
- a part being written when the process died has a temporary name and is removed.

A second ingest into the same database is refused: the lock file ``<db>.lock`` holds an
exclusive ``flock`` (released by the kernel when its process dies, however it dies) and says
who holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from nsight_doctor import __version__
from nsight_doctor.archive import schema
from nsight_doctor.archive.discover import Unit, discover, identify
from nsight_doctor.archive.worker import Task, now_utc
from nsight_doctor.db import first_line, literal, quiet, quote, table_exists
from nsight_doctor.errors import DoctorError

#: Tables with a profile_id column whose rows a part replaces.
PER_PROFILE = ["profiles", "findings", "kernels", "kernel_categories", "ncu_kernels"]


@dataclass
class IngestOptions:
    jobs: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    group: str = "none"  # or "folder"
    analyze: dict[str, Any] = field(default_factory=dict)  # AnalyzeOptions fields for workers
    retry_failed: bool = False
    reanalyze: bool = False
    scheduler: str | None = None
    parts_dir: str | None = None
    timeout: float | None = None
    progress: Callable[[dict[str, Any]], None] | None = None  # called with the counters


@dataclass
class IngestResult:
    found: int = 0  # profiles found (distinct content)
    analysed: int = 0
    already: int = 0  # in the database already
    duplicates: int = 0  # extra paths of content seen in this run
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, error), this run
    failed_before: list[tuple[str, str]] = field(default_factory=list)  # skipped known failures
    skipped_files: int = 0  # files that are not profiles
    unreadable: int = 0  # profiles whose files could not be read or identified (in failed)
    merged_leftovers: int = 0
    seconds: float = 0.0


# --- the single writer ------------------------------------------------------------------------


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


@contextmanager
def exclusive(db: Path) -> Iterator[None]:
    """The ingest lock: refused with who holds it, released when this process ends."""
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise DoctorError(f"cannot write beside '{db}' ({e.strerror}): ingest needs its folder writable") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 500, 0).decode(errors="replace").strip() or "another process"
            raise DoctorError(
                f"'{db}' is being written by another ingest ({holder}); wait for it to finish "
                "(a database has one writer at a time)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(
            fd, f"pid {os.getpid()} on {socket.gethostname()}, since {now_utc():%Y-%m-%d %H:%M:%S} UTC".encode(), 0
        )
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def open_error(db: Path, e: duckdb.Error) -> DoctorError:
    """DuckDB's errors on opening a database, as one line that says what to do."""
    msg = first_line(e)
    if "lock" in msg.lower():
        import re

        pid = re.search(r"PID (\d+)", str(e))
        who = f" (pid {pid.group(1)})" if pid else ""
        return DoctorError(
            f"'{db}' is open for writing in another process{who}, e.g. an ingest; try again when it has finished"
        )
    return DoctorError(f"'{db}' could not be opened: {msg}")


def connect_writer(db: Path) -> duckdb.DuckDBPyConnection:
    if db.exists():
        check_is_fleet(db)
    try:
        con = duckdb.connect(str(db))
    except duckdb.Error as e:
        raise open_error(db, e) from None
    quiet(con)
    schema.ensure_schema(con)
    return con


def check_is_fleet(db: Path) -> None:
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as e:
        raise open_error(db, e) from None
    try:
        if table_exists(con, "nsight_doctor_meta") and not table_exists(con, "profiles"):
            raise DoctorError(
                f"'{db}' is the store of one analysis (analyze --db), not a fleet database; "
                "give ingest a new file or a fleet database"
            )
    finally:
        con.close()


# --- merging parts --------------------------------------------------------------------------


class Columns:
    """The database's tables and columns, read once and kept current as parts add to them."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.tables: dict[str, dict[str, str]] = {}
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main'"
        ).fetchall()
        for t, c, kind in rows:
            self.tables.setdefault(t, {})[c] = kind

    def ensure(self, table: str, cols: list[tuple[str, str]]) -> None:
        have = self.tables.get(table)
        if have is None:
            defs = ", ".join(f"{quote(c)} {t}" for c, t in cols)
            self.con.execute(f"CREATE TABLE {quote(table)} ({defs})")
            self.tables[table] = dict(cols)
            return
        for c, t in cols:
            if c not in have:
                self.con.execute(f"ALTER TABLE {quote(table)} ADD COLUMN {quote(c)} {t}")
                have[c] = t

    def per_profile(self) -> list[str]:
        return sorted(t for t, cols in self.tables.items() if "profile_id" in cols and t not in ("files", "failures"))


def merge_part(
    con: duckdb.DuckDBPyConnection,
    part: Path,
    unit: Unit | None,
    labels: dict[str, str],
    columns: Columns | None = None,
) -> str:
    """One profile's part into the database, in one transaction; returns its profile_id."""
    manifest = json.loads((part / "part.json").read_text())
    pid = manifest["profile_id"]
    columns = columns or Columns(con)
    con.execute("BEGIN TRANSACTION")
    try:
        old = con.execute("SELECT paths, labels FROM profiles WHERE profile_id = ?", [pid]).fetchone()
        if old or unit is None:
            for table in columns.per_profile():
                con.execute(f"DELETE FROM {quote(table)} WHERE profile_id = ?", [pid])
        for table, cols in manifest["tables"].items():
            columns.ensure(table, [tuple(c) for c in cols])
            names = ", ".join(quote(c) for c, _ in cols)
            src = literal(str(part / f"{table}.parquet"))
            con.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM read_parquet({src})")
        if old:
            con.execute(
                "UPDATE profiles SET paths = list_sort(list_distinct(list_concat(paths, ?))), "
                "labels = map_concat(?, labels) WHERE profile_id = ?",
                [old[0] or [], old[1] or {}, pid],
            )
        if labels:
            set_labels(con, pid, labels)
        if unit is not None:
            record_files(con, unit)
            con.execute(
                "DELETE FROM failures WHERE path IN (SELECT unnest(?::VARCHAR[]))", [[m.path for m in unit.members]]
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    shutil.rmtree(part, ignore_errors=True)
    return pid


def set_labels(con: duckdb.DuckDBPyConnection, pid: str, labels: dict[str, str]) -> None:
    con.execute(
        "UPDATE profiles SET labels = map_concat(coalesce(labels, MAP()::MAP(VARCHAR, VARCHAR)), "
        "MAP(?::VARCHAR[], ?::VARCHAR[])) WHERE profile_id = ?",
        [list(labels), list(labels.values()), pid],
    )


def record_files(con: duckdb.DuckDBPyConnection, unit: Unit) -> None:
    seen = now_utc()
    for m in unit.members:
        con.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
            [m.path, unit.profile_id, m.role, m.size, m.mtime_ns, m.sha, seen],
        )


def record_failure(con: duckdb.DuckDBPyConnection, unit: Unit, error: str, error_type: str, digest: str) -> None:
    con.execute(
        "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [unit.primary.path, unit.profile_id, unit.kind, error, error_type, now_utc(), __version__, digest],
    )


def merge_leftovers(con: duckdb.DuckDBPyConnection, parts_root: Path) -> int:
    """Parts that an interrupted ingest wrote but did not merge; half-written ones go."""
    if not parts_root.is_dir():
        return 0
    columns = Columns(con)
    n = 0
    for part in sorted(parts_root.iterdir()):
        if part.name.startswith(".") or not (part / "part.json").exists():
            shutil.rmtree(part, ignore_errors=True)
            continue
        try:
            merge_part(con, part, None, {}, columns)
            n += 1
        except (duckdb.Error, OSError, ValueError, KeyError):
            shutil.rmtree(part, ignore_errors=True)
    return n


# --- the batch ------------------------------------------------------------------------------


def parts_root_for(db: Path, given: str | None) -> Path:
    return Path(given).absolute() if given else db.absolute().with_name(db.name + ".parts")


def ingest(paths: Sequence[str | os.PathLike], db: str | os.PathLike, opts: IngestOptions) -> IngestResult:
    t0 = time.monotonic()
    db = Path(db)
    if not db.parent.exists():
        raise DoctorError(f"'{db.parent}' does not exist (from --db)")
    res = IngestResult()
    digest = current_digest(opts.analyze)
    parts_root = parts_root_for(db, opts.parts_dir)

    def stage(text: str) -> None:
        if opts.progress:
            opts.progress({"stage": text})

    with exclusive(db):
        con = connect_writer(db)
        try:
            res.merged_leftovers = merge_leftovers(con, parts_root)
            columns = Columns(con)
            skip = [db, Path(str(db) + ".wal"), lock_path(db), parts_root]
            stage("finding profiles")
            found = discover(paths, opts.group, skip=skip)
            stage(f"identifying {sum(len(u.members) for u in found.units)} files by content")
            res.skipped_files = found.skipped
            known = {
                r[0]: (r[1], r[2], r[3])
                for r in con.execute("SELECT path, size_bytes, mtime_ns, content_sha256 FROM files").fetchall()
            }
            identify(found.units, known, jobs=max(2, opts.jobs))
            tasks, units_by_id = plan(con, found.units, opts, digest, res)
            total = len(tasks)
            counters: dict[str, Any] = {
                "total": total,
                "done": 0,
                "failed": 0,
                "started": time.monotonic(),
                "running": [],
            }

            def on_result(task: Task, result: dict[str, Any]) -> None:
                unit = units_by_id[task.profile_id]
                if task.primary in counters["running"]:
                    counters["running"].remove(task.primary)
                if result.get("ok"):
                    try:
                        merge_part(con, Path(result["part"]), unit, opts.labels, columns)
                        res.analysed += 1
                    except (duckdb.Error, OSError, ValueError, KeyError) as e:
                        fail(unit, f"could not merge its rows: {first_line(e)}", "MergeError")
                else:
                    fail(unit, result["error"], result["error_type"])
                counters["done"] += 1
                if opts.progress:
                    opts.progress(counters)

            def fail(unit: Unit, error: str, error_type: str) -> None:
                record_failure(con, unit, error, error_type, digest)
                res.failed.append((unit.primary.path, error))
                counters["failed"] += 1
                if opts.progress:
                    opts.progress({**counters, "failure": (unit.primary.path, error)})

            def on_start(task: Task) -> None:
                counters["running"].append(task.primary)
                if opts.progress:
                    opts.progress(counters)

            for unit in found.units:
                if unit.error is not None:
                    res.unreadable += 1
                    fail(unit, unit.error, unit.error_type or "InputError")
            if tasks:
                if opts.scheduler:
                    from nsight_doctor.archive.dask_run import run_dask

                    run_dask(tasks, opts.scheduler, str(parts_root), on_result, on_start)
                else:
                    from nsight_doctor.archive.pool import Pool

                    Pool(opts.jobs, str(parts_root), opts.timeout).run(
                        tasks, on_result, on_start, tick=lambda: opts.progress(counters) if opts.progress else None
                    )
            con.execute(
                "INSERT OR REPLACE INTO meta VALUES ('last_ingest_at', CAST(now() AS VARCHAR)), ('last_ingest_by', ?)",
                [f"nsight-doctor {__version__}"],
            )
            con.execute("CHECKPOINT")
        finally:
            con.close()
        if parts_root.is_dir() and not any(parts_root.iterdir()):
            parts_root.rmdir()
    res.seconds = time.monotonic() - t0
    return res


def current_digest(analyze_opts: dict[str, Any]) -> str:
    """The analysis digest the workers will have (analysis_cache.analysis_digest), from the
    same AnalyzeOptions they will build, defaults included."""
    from nsight_doctor import analysis_cache, rules
    from nsight_doctor.engine import AnalyzeOptions

    opts = AnalyzeOptions(**analyze_opts)
    all_rules, _ = rules.load_rules(opts.rules_dirs)
    chosen = rules.with_overrides(rules.select_rules(all_rules, opts.select, opts.ignore), opts.thresholds)
    return analysis_cache.analysis_digest(chosen, opts.largest_gaps)


def join_known_profiles(con: duckdb.DuckDBPyConnection, units: list[Unit]) -> None:
    """A file whose content is already part of a profile joins it: an export found alone is
    the profile of the report it was found beside before, and a report found later with an
    export that was ingested alone joins that export's profile."""
    owner = dict(
        con.execute("SELECT content_sha256, profile_id FROM files WHERE content_sha256 IS NOT NULL").fetchall()
    )
    owner.update({pid: pid for (pid,) in con.execute("SELECT profile_id FROM profiles").fetchall()})
    # Reports with their exports first, so that an export found alone joins its report.
    for u in sorted(units, key=lambda u: -len(u.members)):
        if u.error is not None or u.kind == "group" or not u.profile_id:
            continue
        known = next((owner[m.sha] for m in u.members if m.sha in owner), None)
        if known:
            u.profile_id = known
        for m in u.members:
            if m.sha:
                owner.setdefault(m.sha, u.profile_id)


def plan(
    con: duckdb.DuckDBPyConnection, units: list[Unit], opts: IngestOptions, digest: str, res: IngestResult
) -> tuple[list[Task], dict[str, Unit]]:
    """Which profiles to analyse: new content, and (with --reanalyze) content analysed by
    other code or rules; copies of known content only add their paths."""
    have = dict(con.execute("SELECT profile_id, analysis_digest FROM profiles").fetchall())
    join_known_profiles(con, units)
    failed = {
        r[0]: (r[1], r[2], r[3])
        for r in con.execute("SELECT path, profile_id, analysis_digest, error FROM failures").fetchall()
    }
    by_id: dict[str, list[Unit]] = {}
    for u in units:
        if u.error is None and u.profile_id:
            by_id.setdefault(u.profile_id, []).append(u)
    tasks: list[Task] = []
    first: dict[str, Unit] = {}
    con.execute("BEGIN TRANSACTION")
    for pid, group in by_id.items():
        group.sort(key=lambda u: -len(u.members))  # a report with its exports names the profile
        unit = group[0]
        first[pid] = unit
        res.found += 1
        res.duplicates += len(group) - 1
        paths = sorted({p for u in group for p in u.paths if p})
        if pid in have and not (opts.reanalyze and have[pid] != digest):
            res.already += 1
            con.execute(
                "UPDATE profiles SET paths = list_sort(list_distinct(list_concat(paths, ?))) WHERE profile_id = ?",
                [paths, pid],
            )
            if opts.labels:
                set_labels(con, pid, opts.labels)
            for u in group:
                record_files(con, u)
            continue
        before = failed.get(unit.primary.path)
        if before and before[0] == pid and before[1] == digest and not opts.retry_failed:
            res.failed_before.append((unit.primary.path, before[2]))
            continue
        # Absolute paths: Dask workers on other machines do not share this working directory.
        shown = {os.path.abspath(m.local): m.path for u in group for m in u.members}
        tasks.append(
            Task(
                profile_id=pid,
                kind=unit.kind,
                candidates=[[os.path.abspath(m.local) for m in c] for c in unit.candidates],
                shown=shown,
                paths=paths,
                primary=unit.primary.path,
                size_bytes=sum(m.size for m in unit.members),
                labels=dict(opts.labels),
                options=dict(opts.analyze),
                digest=digest,
            )
        )
        # Every copy's files are recorded when the first copy's rows are merged.
        unit.members = [m for u in group for m in u.members]
    con.execute("COMMIT")
    # Largest first: the batch ends sooner when the long ones start early.
    tasks.sort(key=lambda t: -t.size_bytes)
    return tasks, first
