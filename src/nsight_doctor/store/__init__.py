"""Store: a DuckDB database holding the base tables and the documented views.

Building a store runs ingest for each input, then every file in views/, each after the files
whose objects it uses (view_order), and the timeline pass (store/timeline: busy intervals,
gaps, steps, phases, computed in Polars) once its inputs exist. Files whose names start with
'_' hold helpers (macros, materialized tables behind a view); every other file defines one
documented view or table, described in its header comment, and timeline/tables.yaml declares
the timeline's tables; docs/schema.md is generated from both. Rules and reports read only
these.

Where the database lives:
- with --db, in that file: written under a temporary name, renamed when complete, then
  reopened read-only for the rules;
- when rules from --rules will read it (``reopen=True``), in a temporary file, reopened
  read-only like --db's;
- otherwise the summary and the built-in rules read it through the connection that built it,
  sandboxed: in memory for inputs of up to IN_MEMORY_MAX_MB of data, else in a temporary file
  (its large tables are written compressed as they are made, so they do not stay in memory).

A store in a file is read in a DuckDB instance of its own, which never loaded the SQLite reader
that ingest uses: an extension whose table functions open any SQLite file whatever the sandbox
says, and that stays loaded in the instance that read the export. A rule that anyone can pass
with --rules runs only there (engine.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from nsight_doctor import __version__, yamlio
from nsight_doctor.cachedir import private_dir
from nsight_doctor.db import first_line, insert_rows, one, quiet, quote, sandbox, scalar, table_exists
from nsight_doctor.errors import DoctorError, InputError
from nsight_doctor.ingest import InputInfo, finish, load
from nsight_doctor.runtime import duckdb_threads
from nsight_doctor.store import taxonomy, timeline

CREATES = re.compile(r"^CREATE (?:OR REPLACE )?(?:VIEW|TABLE|MACRO)\s+(\w+)", re.I | re.M)
WORD = re.compile(r"\b\w+\b")


@lru_cache(maxsize=1)
def view_files() -> dict[str, str]:
    """Every view file's name (without .sql) and SQL."""
    folder = resources.files("nsight_doctor.store").joinpath("views")
    return {f.name[:-4]: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


def strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


LITERAL = re.compile(r"'(?:[^']|'')*'")


def names_used(sql: str) -> list[str]:
    """The words of a view file's SQL, comments and string literals left out."""
    return WORD.findall(LITERAL.sub("''", strip_comments(sql)))


# The timeline pass, placed in view_order among the view files: it creates the tables that
# timeline/tables.yaml declares and reads the objects it lists as inputs.
TIMELINE = "(timeline)"


@lru_cache(maxsize=1)
def view_order() -> list[str]:
    """The view files (and TIMELINE) in an order that creates each object before the files that
    use it: a file depends on every other file that creates a name its SQL mentions, the
    timeline on the creators of its inputs. Ties go by name."""
    files = view_files()
    creator = {obj.lower(): name for name, sql in files.items() for obj in CREATES.findall(sql)}
    creator.update({t.lower(): TIMELINE for t in timeline.tables()})
    mentions = {name: names_used(sql) for name, sql in files.items()}
    mentions[TIMELINE] = timeline.inputs()
    deps = {
        name: {creator[w.lower()] for w in words if w.lower() in creator and creator[w.lower()] != name}
        for name, words in mentions.items()
    }
    files = {**files, TIMELINE: ""}
    order: list[str] = []
    while len(order) < len(files):
        ready = sorted(n for n in files if n not in order and deps[n] <= set(order))
        if not ready:
            raise DoctorError(
                f"internal error: the view files depend on each other in a cycle: {sorted(set(files) - set(order))}"
            )
        order.extend(ready)
    return order


def view_sql(name: str) -> str:
    """A view file's SQL ("" for a table of the timeline pass)."""
    return view_files().get(name, "")


def documented_views() -> list[str]:
    """Every documented view and table, in the order they are created."""
    out: list[str] = []
    for n in view_order():
        if n == TIMELINE:
            out.extend(timeline.tables())
        elif not n.startswith("_"):
            out.append(n)
    return out


@lru_cache(maxsize=1)
def advice_rows() -> list[tuple[str, str, str]]:
    """(topic, framework, text) from advice.yaml."""
    data = yamlio.load(resources.files("nsight_doctor.store").joinpath("advice.yaml").read_text())
    return [
        (topic, fw, " ".join(text.split())) for topic, by_fw in data["topics"].items() for fw, text in by_fw.items()
    ]


@lru_cache(maxsize=1)
def launch_settings_rows() -> list[tuple[str, str, str, str, str]]:
    """(name, value pattern, kind, effect, reference) from launch_settings.yaml."""
    data = yamlio.load(resources.files("nsight_doctor.store").joinpath("launch_settings.yaml").read_text())
    return [(s["name"], s["value"], s["kind"], " ".join(s["effect"].split()), s["reference"]) for s in data["settings"]]


@lru_cache(maxsize=1)
def gpu_peak_rows() -> list[tuple[str, str, str, str, str, float]]:
    """(arch, compute capability, name pattern, reference, roof, per SM per cycle) from gpu_peaks.yaml."""
    data = yamlio.load(resources.files("nsight_doctor.store").joinpath("gpu_peaks.yaml").read_text())
    return [
        (a["arch"], a["compute_capability"], a["names"], a["reference"], roof, float(rate))
        for a in data["architectures"]
        for roof, rate in a["per_sm_per_cycle"].items()
    ]


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    # Data the views use, kept as files: the kernel taxonomy (its macro is generated from
    # kernel_categories.yaml), the advice in each framework's terms (advice.yaml) and the
    # environment variables worth showing (launch_settings.yaml), the compute roofs of each GPU
    # architecture (gpu_peaks.yaml).
    con.execute(f"CREATE MACRO kernel_category(name, demangled) AS {taxonomy.case_sql('name', 'demangled')}")
    # The inputs (build fills it first; a store made otherwise has none): the advice on how to
    # capture follows the profiler that made them.
    con.execute("CREATE TABLE IF NOT EXISTS nsight_doctor_inputs (info JSON)")
    con.execute("CREATE TABLE advice_t (topic VARCHAR, framework VARCHAR, text VARCHAR)")
    insert_rows(con, "advice_t", advice_rows())
    con.execute(
        "CREATE TABLE launch_settings_t (name VARCHAR, value VARCHAR, kind VARCHAR, effect VARCHAR, reference VARCHAR)"
    )
    insert_rows(con, "launch_settings_t", launch_settings_rows())
    con.execute(
        "CREATE TABLE gpu_peaks_t (arch VARCHAR, compute_capability VARCHAR, names VARCHAR, reference VARCHAR,"
        " roof VARCHAR, per_sm_per_cycle DOUBLE)"
    )
    insert_rows(con, "gpu_peaks_t", gpu_peak_rows())
    files = view_files()
    for name in view_order():
        try:
            if name == TIMELINE:
                timeline.build(con)
            else:
                con.execute(files[name])
        except duckdb.Error as e:
            raise DoctorError(f"internal error building the view '{name}': {e}") from None


class Store:
    """A built store: in a file (``path``), or in memory (``path`` None), read either through
    the connection that built it (``builder``) or, without one, in a fresh read-only instance.
    ``connect()`` gives a sandboxed connection that reads it; ``close()`` ends the builder and
    removes what the store left (a temporary file, the spill folder)."""

    def __init__(
        self,
        path: Path | None,
        inputs: list[InputInfo],
        temporary: bool,
        config: dict | None = None,
        builder: duckdb.DuckDBPyConnection | None = None,
        spill: Path | None = None,
    ):
        self.path = path
        self.inputs = inputs
        self.temporary = temporary
        self.config = {
            k: v for k, v in (config or {}).items() if k in ("memory_limit", "threads", "asof_loop_join_threshold")
        }
        self.builder = builder
        self.spill = spill

    def connect(self) -> duckdb.DuckDBPyConnection:
        if self.builder is not None:
            # Sandboxed when built: the settings are the database's, and locked.
            return self.builder.cursor()
        assert self.path is not None
        # Queries that outgrow the memory limit spill to a private folder (DuckDB's default,
        # <store>.tmp, would put it beside a --db file), removed by close().
        if self.spill is None:
            self.spill = private_dir("nsight-doctor-spill-")
            self.spill.mkdir(mode=0o700)
        con = duckdb.connect(str(self.path), read_only=True, config={**self.config, "temp_directory": str(self.spill)})
        quiet(con)
        # Rules are data from users: they may read the store, nothing else.
        sandbox(con)
        return con

    def close(self) -> None:
        if self.builder is not None:
            self.builder.close()
            self.builder = None
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)
            self.spill = None
        if self.temporary and self.path is not None:
            remove_db(self.path, with_folder=True)


# Inputs of up to this much data (data_bytes) are analysed in an in-memory store: nothing is
# written to disk. Larger ones go to a temporary file, still read through the building
# connection: its large tables are compressed as they are written and leave memory (a 204 MB
# export with 6.2 M GPU metric samples peaks 130-145 MB lower, at the same speed on 2 cores and
# 10-15% slower on 16; 125 MB of kernels 60-120 MB lower: docs/performance.md, sixteenth run).
IN_MEMORY_MAX_MB = 64


def build(
    inputs: Sequence[str | os.PathLike],
    db: str | os.PathLike | None = None,
    nsys_path: str | None = None,
    progress: Callable[[str], None] | None = None,
    meta: dict[str, str] | None = None,
    memory_limit: str | None = None,
    export_timeout: float | None = None,
    on_memory_limit: Callable[[str], None] | None = None,
    reopen: bool = False,
) -> Store:
    """Ingests the inputs into a new DuckDB database (the module's docstring says where) and
    creates the views.

    ``meta`` adds columns to the nsight_doctor_meta table (what the store was built from, for
    reopen()); memory_limit is DuckDB's (e.g. "2GB"; default: store_config's estimate, raised
    after reading by rows_memory_limit); on_memory_limit hears the limit in force, first and
    when it is raised; export_timeout bounds each nsys export, in seconds (None: no bound);
    reopen=True writes even a small input's store to a (temporary) file and reads it in a fresh
    instance, as --db does."""
    final: Path | None  # where the store ends up; None: in memory
    tmp: Path | None  # where it is written
    keep = db is None and not reopen  # read through the building connection
    if db is not None:
        final = Path(db)
        if final.exists():
            raise InputError(f"'{final}' already exists; --db writes a new database, choose another name")
        if not final.parent.exists():
            raise InputError(f"'{final.parent}' does not exist (from --db)")
        tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
        temporary = False
    elif keep and data_bytes(inputs) <= IN_MEMORY_MAX_MB << 20:
        final = tmp = None
        temporary = True
    else:
        final = tmp = private_dir("nsight-doctor-") / "store.duckdb"
        temporary = True
    infos: list[InputInfo] = []
    spill = private_dir("nsight-doctor-spill-")
    con = None
    try:
        if tmp is not None and temporary:
            tmp.parent.mkdir(mode=0o700)
        spill.mkdir(mode=0o700)
        config = store_config(inputs, spill, memory_limit)
        if on_memory_limit:
            on_memory_limit(config["memory_limit"])
        con = duckdb.connect(":memory:" if tmp is None else str(tmp), config=config)
        quiet(con)
        for path in inputs:
            infos.append(load(con, path, nsys_path=nsys_path, progress=progress, export_timeout=export_timeout))
        finish(con)
        if memory_limit is None:
            # The default follows the file's size; the views need memory by operations.
            need = rows_memory_limit(con)
            if need > megabytes(config["memory_limit"]):
                config["memory_limit"] = capped(need)
                con.execute(f"SET memory_limit = '{config['memory_limit']}'")
                if on_memory_limit:
                    on_memory_limit(config["memory_limit"])
        if progress:
            progress("views")
        con.execute("CREATE TABLE nsight_doctor_inputs (info JSON)")
        insert_rows(con, "nsight_doctor_inputs", [(json.dumps(asdict(info)),) for info in infos])
        create_views(con)
        extra = {"tool_version": __version__, **(meta or {})}
        con.execute(f"CREATE TABLE nsight_doctor_meta ({', '.join(f'{quote(k)} VARCHAR' for k in extra)})")
        insert_rows(con, "nsight_doctor_meta", [tuple(extra.values())])
        if keep:
            if tmp is not None:
                # (the file is removed on close: a checkpoint into it first is wasted, 0.6 s
                # at 2 M kernels on 2 cores)
                con.execute("PRAGMA disable_checkpoint_on_shutdown")
            # Rules are data from users: they may read the store, nothing else.
            sandbox(con)
            return Store(tmp, infos, temporary, config, builder=con, spill=spill)
        con.close()
        assert tmp is not None and final is not None  # (a store not kept is a file)
        if tmp != final:
            os.replace(tmp, final)
    except BaseException:
        if con is not None:
            con.close()
        if tmp is not None:
            remove_db(tmp, with_folder=temporary)
        shutil.rmtree(spill, ignore_errors=True)
        raise
    shutil.rmtree(spill, ignore_errors=True)
    return Store(final, infos, temporary, config)


def reopen(path: str | os.PathLike) -> tuple[Store, dict[str, Any]]:
    """A store kept by an earlier build (analyze --db), with its nsight_doctor_meta row; the
    caller decides whether it fits (reopen never modifies it)."""
    p = Path(path)
    try:
        con = duckdb.connect(str(p), read_only=True)
    except duckdb.Error as e:
        raise InputError(f"'{p}' is not a DuckDB database nsight-doctor can open ({first_line(e)})") from None
    try:
        if not (table_exists(con, "nsight_doctor_meta") and table_exists(con, "nsight_doctor_inputs")):
            raise InputError(f"'{p}' already exists and is not a store kept by nsight-doctor analyze --db")
        meta = one(con, "SELECT * FROM nsight_doctor_meta")
        infos = [InputInfo(**json.loads(r[0])) for r in con.execute("SELECT info FROM nsight_doctor_inputs").fetchall()]
    finally:
        con.close()
    return Store(p, infos, temporary=False, config=read_settings()), meta


def remove_db(path: Path, with_folder: bool) -> None:
    """Deletes a DuckDB file, its write-ahead log and its spill folder (and the private
    temporary folder it was made in)."""
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)
    shutil.rmtree(Path(str(path) + ".tmp"), ignore_errors=True)
    if with_folder:
        shutil.rmtree(path.parent, ignore_errors=True)


def input_bytes(paths: Sequence[str | os.PathLike]) -> int:
    """The inputs' size on disk (a folder's files, one level deep); what cannot be read
    counts as nothing here, and is reported when it is read."""
    total = 0
    for p in map(Path, paths):
        try:
            if p.is_dir():
                for f in p.glob("*"):
                    with contextlib.suppress(OSError):
                        total += f.stat().st_size if f.is_file() else 0
            elif p.exists():
                total += p.stat().st_size
        except OSError:
            pass
    return total


# The default memory limit: a share of the input's data plus some per DuckDB thread. The
# process's peak runs above DuckDB's limit (the interpreter, and pages the allocator has not
# returned yet: about 0.25 GB with 2 or 8 threads, see runtime.py), so the limit is below the
# data to keep the peak near 1.5 times it. On the 496 MB export (bench/memory_probe.py,
# docs/performance.md), 2 cores: a limit of 1.5x gave 25 s and a peak of 1.09 GB, 0.75x 26-29 s
# and 0.62-0.71 GB; 0.5x ran out of memory in gpu_busy's windows, which hold all of one GPU's
# operations at once. rows_memory_limit raises the limit for those after reading; when it is
# still not enough, the analysis runs once more with retry_memory_limit (engine.py).
INPUT_MULTIPLE = 0.7
MIN_MB = 256
# Per DuckDB thread, in the default limit: each thread keeps its own sort and hash buffers (with
# 16 threads gpu_gaps ran out of memory at 371 MB and not at 495 MB).
DEFAULT_MB_PER_THREAD = 16
# The memory of the windows over one GPU's operations (gpu_busy, gpu_gaps, steps), per operation:
# with 2 M operations on one GPU the analysis ran out of memory at 250 MB and not at 300 MB with
# 2 threads, and at 371 MB and not at 495 MB with 16.
BYTES_PER_OP = 128
# The retry's memory per DuckDB thread, at least.
MB_PER_THREAD = 256


def default_memory_limit(paths: Sequence[str | os.PathLike]) -> str:
    """0.7 times the input's data and 16 MB per DuckDB thread, at least 256 MB, at most 80% of
    the machine's memory."""
    mb = INPUT_MULTIPLE * data_bytes(paths) / (1 << 20) + DEFAULT_MB_PER_THREAD * duckdb_threads()
    return capped(max(MIN_MB, int(mb)))


def rows_memory_limit(con: duckdb.DuckDBPyConnection) -> int:
    """The limit, in MB, that the views need for the operations read: the busiest GPU's
    operations at BYTES_PER_OP, DEFAULT_MB_PER_THREAD per thread and 32 MB."""
    ops = scalar(
        con,
        """SELECT coalesce(max(n), 0) FROM (
               SELECT device_id, sum(n) AS n FROM (
                   SELECT device_id, count(*) AS n FROM base_kernels GROUP BY ALL
                   UNION ALL SELECT device_id, count(*) FROM base_graph_launches GROUP BY ALL
                   UNION ALL SELECT device_id, count(*) FROM base_memcpy GROUP BY ALL
                   UNION ALL SELECT device_id, count(*) FROM base_memset GROUP BY ALL)
               GROUP BY ALL)""",
    )
    return 32 + int(ops * BYTES_PER_OP / (1 << 20)) + DEFAULT_MB_PER_THREAD * duckdb_threads()


def retry_memory_limit(paths: Sequence[str | os.PathLike]) -> str:
    """The second try's limit: 4 times the input's data, and MB_PER_THREAD per DuckDB thread."""
    return capped(max(2048, MB_PER_THREAD * duckdb_threads(), int(4 * data_bytes(paths) / (1 << 20))))


# How much larger than a compressed input its data is, as an SQLite export: an .nsys-rep is
# 2.3 to 4.7 times smaller than its export (the samples), .xz 5 to 8 times, and nsys' Parquet
# folder 2 to 5 times (the 2 M-kernel profile: 107 MB against 496 MB; with 16 threads its
# analysis ran out of memory at 426 MB, 4 times the folder).
COMPRESSED_RATIO = {".nsys-rep": 4, ".qdrep": 4, ".xz": 8, ".gz": 8}
PARQUET_RATIO = 5


def data_bytes(paths: Sequence[str | os.PathLike]) -> int:
    """The inputs' data size as an SQLite export would hold it: a file's size, and a compressed
    input's (report, .xz, .gz, Parquet folder) times its usual ratio."""
    total = 0
    for p in map(Path, paths):
        ratio = PARQUET_RATIO if p.is_dir() else next((r for s, r in COMPRESSED_RATIO.items() if p.name.endswith(s)), 1)
        total += ratio * input_bytes([p])
    return total


def megabytes(limit: str) -> int:
    """The MB of a limit this module wrote (capped's "<n>MB")."""
    return int(limit.removesuffix("MB"))


def capped(mb: int) -> str:
    return f"{min(mb, max(512, int(0.8 * physical_mb())))}MB"


def read_settings() -> dict:
    """The settings of every connection to a store, built or reopened by a later analyze --db."""
    return {
        # ASOF joins always as ASOF joins: below this estimated number of left rows DuckDB
        # rewrites them as a loop that re-reads the right side per row, and a wrong estimate (a
        # filtered CTE) made one rule take minutes on 2 M kernels.
        "asof_loop_join_threshold": 0,
        # The cores, up to runtime.MAX_DEFAULT_THREADS; archive workers share them out.
        "threads": duckdb_threads(),
    }


def store_config(paths: Sequence[str | os.PathLike], spill_dir: Path, memory_limit: str | None = None) -> dict:
    """DuckDB settings for building: memory capped near the input's size (or at
    memory_limit), spilling to disk.

    DuckDB stays within the limit by spilling sorts and joins to the store's folder; the
    default is default_memory_limit.
    """
    config: dict = {"temp_directory": str(spill_dir), **read_settings()}
    # Tables need not keep the order of the rows inserted (every reader orders what it needs):
    # copying the export and building the tables then streams instead of buffering per thread,
    # 16.5 s instead of 23 s on the 496 MB export with 16 threads.
    config["preserve_insertion_order"] = False
    # The SQLite reader ships in a pip package pinned to DuckDB's version, trusted as DuckDB's
    # own library is; checking its signature hashes its 35 MB on every load (0.16 s on 2 cores).
    # Rules never load anything: their connections are sandboxed (db.sandbox).
    config["allow_unsigned_extensions"] = True
    config["memory_limit"] = memory_limit or default_memory_limit(paths)
    return config


def physical_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return 1 << 20  # unknown: no cap
