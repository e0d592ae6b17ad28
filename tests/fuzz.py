"""A mutation fuzzer over real profiles: every case must end in exit 0, 1 or 2, never in a
traceback or an "internal error", and exit 2 must be one line that names the input.

Each case copies a real file (samples/ and, when present, ../shared/corpus), damages the copy
in one way (a mutation class, below), and runs the real command line on it. What is checked
for every case:

- the exit code is 0, 1 or 2; on 2, stderr is exactly one line, ``nsight-doctor: error: ...``,
  that names the input file and is not an internal error;
- on 0 or 1, the output is complete (JSON output parses and matches the report schema);
- no ANSI escape character reaches stdout or stderr (mutations plant some in strings);
- the input is not modified (hash before and after), and nothing is left in the temporary
  folder or as a partial file in the cache.

Short fixed-seed runs are part of the test suite (tests/test_fuzz.py). A longer run:

    .venv/bin/python -m tests.fuzz --cases 2000 --seed 1

prints the outcome per mutation class and exits 1 if any case failed; ``--subprocess`` runs
each case as a separate process (slower, but survives a native crash), ``--keep DIR`` keeps
the inputs of failed cases. A case is reproduced by its seed and index: ``--seed S --only N``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import lzma
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CORPUS = Path(os.environ.get("NSIGHT_DOCTOR_CORPUS", ROOT.parent / "shared" / "corpus"))

# Small real files of every kind (large ones make each case slow without finding more).
SEEDS: dict[str, list[Path]] = {
    "nsys-sqlite": [
        SAMPLES / "decode_b1_graphs" / "decode_b1_graphs.sqlite",  # nsys 2025.3, NVTX, CUDA graphs
        CORPUS / "teektonik__reports" / "task4_1024.export-nsys2022.4.sqlite",  # export schema 3.0 (2022.4)
        CORPUS / "Newboyleo__llm-community" / "report1.export-nsys2025.3.sqlite",
        CORPUS / "sdroruganti__cuda-kernel-library" / "report2.sqlite",  # the author's own export
        CORPUS / "lighttransport__gemm" / "profile.sqlite",  # nsys 2025.1, no kernels
    ],
    "nsys-parquet": [SAMPLES / "decode_b1" / "decode_b1_pqtdir"],
    "nsys-rep": [
        SAMPLES / "decode_b1_graphs" / "decode_b1_graphs.nsys-rep",  # 2025.3: newer than Debian's nsys
        CORPUS / "teektonik__reports" / "report3.nsys-rep",  # exportable by nsys 2022.4
        CORPUS / "zasdfgbnm__misc" / "report1.qdrep",
    ],
    "ncu-rep": [CORPUS / "AveryClapp__ESMM-Research" / "8fce6633__profile.ncu-rep"],
    "nvprof": [
        CORPUS / "dipsankarb__csl7520" / "profile.nvvp",  # schema 11
        CORPUS / "m-goldstein__GPU_ML" / "timeline.nvvp",  # schema 12
    ],
}
SQLITE_KINDS = ("nsys-sqlite", "nvprof")
FILE_KINDS = ("nsys-sqlite", "nsys-rep", "ncu-rep", "nvprof")
ANY_KIND = (*FILE_KINDS, "nsys-parquet")
TABLE_KINDS = (*SQLITE_KINDS, "nsys-parquet")  # kinds made of tables

# Export tables that the column maps read, the likeliest to matter when damaged.
NSYS_TABLES = [
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
    "META_DATA_EXPORT",
    "META_DATA_CAPTURE",
    "ANALYSIS_DETAILS",
    "PROCESSES",
    "ThreadNames",
    "PROFILER_OVERHEAD",
    "GPU_METRICS",
    "TARGET_INFO_GPU_METRICS",
    "GENERIC_EVENTS",
]
NVPROF_TABLES = [
    "StringTable",
    "Version",
    "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_NAME",
    "CUPTI_ACTIVITY_KIND_DEVICE",
]
# Strings that must not drive a terminal or a Markdown/HTML page when they reach the output.
HOSTILE = ["\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "<script>alert(1)</script>", "| a | b |", "`x`", "\n# h\n"]


# --- mutations ------------------------------------------------------------------------------
# Each takes (rng, path) and damages the file or folder at path in place; it returns a short
# description of what it did, for the report.

Mutation = Callable[[random.Random, Path], str]


def pick_file(rng: random.Random, path: Path) -> Path:
    """The file to damage: path itself, or one of a Parquet folder's files."""
    if path.is_dir():
        return rng.choice(sorted(path.glob("*.parquet")))
    return path


def flip_bits(rng: random.Random, path: Path) -> str:
    f = pick_file(rng, path)
    data = bytearray(f.read_bytes())
    n = rng.choice([1, 4, 32, 256])
    # Half the time inside one 4 KiB page (a damaged sector), else anywhere.
    lo, hi = 0, len(data)
    if rng.random() < 0.5 and len(data) > 8192:
        lo = rng.randrange(1, len(data) // 4096) * 4096
        hi = min(lo + 4096, len(data))
    for _ in range(n):
        i = rng.randrange(lo, hi)
        data[i] ^= 1 << rng.randrange(8)
    f.write_bytes(bytes(data))
    return f"{n} bits in {f.name}[{lo}:{hi}]"


def zero_page(rng: random.Random, path: Path) -> str:
    f = pick_file(rng, path)
    data = bytearray(f.read_bytes())
    pages = max(1, len(data) // 4096)
    # Page 0 holds the headers that detection reads; damage it rarely.
    p = rng.randrange(pages) if rng.random() < 0.1 or pages == 1 else rng.randrange(1, pages)
    count = rng.choice([1, 1, 2, 3])
    data[p * 4096 : (p + count) * 4096] = bytes(len(data[p * 4096 : (p + count) * 4096]))
    f.write_bytes(bytes(data))
    return f"{count} page(s) from {p} of {f.name}"


def truncate(rng: random.Random, path: Path) -> str:
    f = pick_file(rng, path)
    data = f.read_bytes()
    # The last bytes (a trailer), a page boundary, or anywhere.
    choice = rng.random()
    if choice < 0.3:
        n = len(data) - rng.randint(1, 64)
    elif choice < 0.5:
        n = rng.randrange(len(data) // 4096 + 1) * 4096
    else:
        n = rng.randrange(len(data))
    f.write_bytes(data[: max(0, n)])
    return f"{f.name} cut to {max(0, n)} of {len(data)} bytes"


def sqlite_con(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")
    return con


def tables_of(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def columns_of(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def important_table(rng: random.Random, con: sqlite3.Connection) -> str:
    present = tables_of(con)
    known = [t for t in NSYS_TABLES + NVPROF_TABLES if t in present]
    return rng.choice(known if known and rng.random() < 0.85 else present)


def without_constraints(con: sqlite3.Connection, table: str) -> None:
    """Rebuilds a table without NOT NULL constraints, keeping its declared column types (the
    SQLite reader infers column types from them)."""
    cols = list(con.execute(f'PRAGMA table_info("{table}")'))
    ddl = ", ".join(f'"{c[1]}" {c[2]}' for c in cols)
    con.execute(f'CREATE TABLE "_fuzz_tmp" ({ddl})')
    con.execute(f'INSERT INTO "_fuzz_tmp" SELECT * FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "_fuzz_tmp" RENAME TO "{table}"')


def update(con: sqlite3.Connection, table: str, sql: str, params: tuple = ()) -> None:
    try:
        con.execute(sql, params)
    except sqlite3.IntegrityError:
        without_constraints(con, table)
        con.execute(sql, params)


def some_rows(rng: random.Random) -> str:
    """A WHERE clause that keeps all rows, about half, or a few."""
    return rng.choice(["1", "rowid % 2 = 0", "rowid % 7 = 3", "rowid <= 3"])


def drop_table(rng: random.Random, path: Path) -> str:
    if path.is_dir():
        f = pick_file(rng, path)
        f.unlink()
        return f"removed {f.name}"
    con = sqlite_con(path)
    t = important_table(rng, con)
    con.execute(f'DROP TABLE "{t}"')
    con.close()
    return f"dropped {t}"


def rename_table(rng: random.Random, path: Path) -> str:
    """A table renamed as a future schema might (`_V2`), so the old name is missing."""
    if path.is_dir():
        f = pick_file(rng, path)
        f.rename(f.with_name(f.stem + "_V2.parquet"))
        return f"renamed {f.name}"
    con = sqlite_con(path)
    t = important_table(rng, con)
    con.execute(f'ALTER TABLE "{t}" RENAME TO "{t}_V2"')
    con.close()
    return f"renamed {t} to {t}_V2"


def drop_column(rng: random.Random, path: Path) -> str:
    con = sqlite_con(path)
    t = important_table(rng, con)
    cols = columns_of(con, t)
    c = rng.choice(cols)
    if len(cols) == 1:
        con.execute(f'DROP TABLE "{t}"')
        return f"dropped {t} (one column)"
    without_constraints(con, t)
    con.execute(f'ALTER TABLE "{t}" DROP COLUMN "{c}"')
    con.close()
    return f"dropped column {t}.{c}"


def null_column(rng: random.Random, path: Path) -> str:
    if path.is_dir():
        return parquet_rewrite(rng, path, "NULL")
    con = sqlite_con(path)
    t = important_table(rng, con)
    c = rng.choice(columns_of(con, t))
    where = some_rows(rng)
    update(con, t, f'UPDATE "{t}" SET "{c}" = NULL WHERE {where}')
    con.close()
    return f"{t}.{c} = NULL where {where}"


def wrong_type(rng: random.Random, path: Path) -> str:
    """Text or a blob where the schema says integer, and the reverse."""
    if path.is_dir():
        return parquet_rewrite(rng, path, "'not a number'")
    con = sqlite_con(path)
    t = important_table(rng, con)
    c = rng.choice(columns_of(con, t))
    value = rng.choice(["'not a number'", "X'00ff10'", "1e308", "-1", "9223372036854775807", "''"])
    where = some_rows(rng)
    update(con, t, f'UPDATE "{t}" SET "{c}" = {value} WHERE {where}')
    con.close()
    return f"{t}.{c} = {value} where {where}"


def bad_times(rng: random.Random, path: Path) -> str:
    """Times out of order: end before start, negative, or far in the future."""
    con = sqlite_con(path)
    timed = [t for t in tables_of(con) if {"start", "end"} <= set(columns_of(con, t))]
    if not timed:
        return "no timed table"
    t = rng.choice(timed)
    expr = rng.choice(['"end" = start - 1000', "start = -start", '"end" = 4611686018427387904', "start = 0"])
    where = some_rows(rng)
    update(con, t, f'UPDATE "{t}" SET {expr} WHERE {where}')
    con.close()
    return f"{t}: {expr} where {where}"


def string_table(con: sqlite3.Connection) -> tuple[str, str, str] | None:
    present = tables_of(con)
    if "StringIds" in present:
        return "StringIds", "id", "value"
    if "StringTable" in present:
        return "StringTable", "_id_", "value"
    return None


def template_name(rng: random.Random, size: int) -> str:
    """A C++ template kernel name of about size characters, like CUTLASS or Thrust emit."""
    parts = ["void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<"]
    while sum(map(len, parts)) < size:
        parts.append(
            rng.choice(
                [
                    "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64>>, ",
                    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, ",
                    "cute::Shape<cute::_2, cute::_1, cute::_1>>, cutlass::bfloat16_t, ",
                    "thrust::cuda_cub::__transform::unary_transform_f<thrust::device_ptr<float>>, ",
                ]
            )
        )
    return "".join(parts)[:size] + ">(Params)"


def huge_strings(rng: random.Random, path: Path) -> str:
    """Very long names (real C++ template kernel names reach tens of KB)."""
    con = sqlite_con(path)
    st = string_table(con)
    if st is None:
        return "no string table"
    t, id_col, val = st
    ids = [r[0] for r in con.execute(f'SELECT "{id_col}" FROM "{t}"')]
    chosen = ids if rng.random() < 0.3 else rng.sample(ids, max(1, len(ids) // 5))
    size = rng.choice([10_000, 30_000, 65_000])
    for i in chosen:
        con.execute(f'UPDATE "{t}" SET "{val}" = ? || "{val}" WHERE "{id_col}" = ?', (template_name(rng, size), i))
    con.close()
    return f"{len(chosen)} of {len(ids)} strings made {size:,} characters long"


def non_utf8(rng: random.Random, path: Path) -> str:
    """Strings whose bytes are not UTF-8 (Latin-1 text, broken sequences, NUL bytes)."""
    con = sqlite_con(path)
    targets = []
    st = string_table(con)
    if st:
        targets.append(st[::2])
    present = tables_of(con)
    if "NVTX_EVENTS" in present:
        targets.append(("NVTX_EVENTS", "text"))
    for t in ("META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_GPU", "PROCESSES"):
        if t in present:
            cols = [c for c in columns_of(con, t) if c in ("value", "name")]
            targets += [(t, c) for c in cols]
    if not targets:
        return "no text column"
    t, c = rng.choice(targets)
    raw = rng.choice([b"caf\xe9", b"\xdf\xff\xfe", b"ok\xc3", b"nul\x00byte", b"\xed\xa0\x80surrogate"])
    where = some_rows(rng)
    update(con, t, f'UPDATE "{t}" SET "{c}" = CAST(? AS TEXT) || "{c}" WHERE {where}', (raw,))
    con.close()
    return f"{t}.{c} prefixed with {raw!r} where {where}"


def hostile_strings(rng: random.Random, path: Path) -> str:
    """Escape sequences and markup in names, which the output must neutralise."""
    con = sqlite_con(path)
    st = string_table(con)
    if st is None:
        return "no string table"
    t, _, val = st
    s = rng.choice(HOSTILE)
    con.execute(f'UPDATE "{t}" SET "{val}" = ? || "{val}" || ?', (s, s))
    if "NVTX_EVENTS" in tables_of(con):
        update(con, "NVTX_EVENTS", 'UPDATE NVTX_EVENTS SET text = ? || coalesce(text, "")', (s,))
    con.close()
    return f"every string wrapped in {s!r}"


def missing_strings(rng: random.Random, path: Path) -> str:
    """Name ids that point at no string."""
    con = sqlite_con(path)
    st = string_table(con)
    if st is None:
        return "no string table"
    t, id_col, _ = st
    where = rng.choice(["1", f'"{id_col}" % 2 = 0', f'"{id_col}" % 5 = 1'])
    con.execute(f'DELETE FROM "{t}" WHERE {where}')
    con.close()
    return f"deleted {t} rows where {where}"


def nvtx_open_ranges(rng: random.Random, path: Path) -> str:
    """NVTX ranges that never ended (NULL end) or started after they ended."""
    con = sqlite_con(path)
    if "NVTX_EVENTS" not in tables_of(con):
        return "no NVTX_EVENTS"
    expr = rng.choice(['"end" = NULL', "start = NULL", '"end" = start - 1', "textId = NULL, text = NULL"])
    where = some_rows(rng)
    update(con, "NVTX_EVENTS", f"UPDATE NVTX_EVENTS SET {expr} WHERE {where}")
    con.close()
    return f"NVTX_EVENTS: {expr} where {where}"


def empty_table(rng: random.Random, path: Path) -> str:
    con = sqlite_con(path)
    t = important_table(rng, con)
    con.execute(f'DELETE FROM "{t}"')
    con.close()
    return f"emptied {t}"


def parquet_rewrite(rng: random.Random, path: Path, value: str) -> str:
    import duckdb

    f = pick_file(rng, path)
    con = duckdb.connect()
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{f}')").fetchall()]
    c = rng.choice(cols)
    tmp = f.with_suffix(".tmp")
    con.execute(f"COPY (SELECT * REPLACE ({value} AS \"{c}\") FROM read_parquet('{f}')) TO '{tmp}' (FORMAT parquet)")
    con.close()
    tmp.replace(f)
    return f"{f.stem}.{c} = {value}"


def garbage_file(rng: random.Random, path: Path) -> str:
    """A Parquet file replaced by something else (a text file, random bytes)."""
    f = pick_file(rng, path)
    f.write_bytes(rng.choice([b"", b"not parquet\n" * 100, rng.randbytes(5000)]))
    return f"{f.name} replaced"


@dataclass(frozen=True)
class MutationClass:
    name: str
    kinds: tuple[str, ...]
    mutate: Mutation
    doc: str


CLASSES = {
    c.name: c
    for c in [
        MutationClass("flip_bits", ANY_KIND, flip_bits, "flipped bits, scattered or in one page"),
        MutationClass("zero_page", ANY_KIND, zero_page, "zeroed 4 KiB pages"),
        MutationClass("truncate", ANY_KIND, truncate, "cut short (trailer, page, anywhere)"),
        MutationClass("drop_table", TABLE_KINDS, drop_table, "a table (or Parquet file) removed"),
        MutationClass("rename_table", TABLE_KINDS, rename_table, "a table renamed with _V2"),
        MutationClass("drop_column", SQLITE_KINDS, drop_column, "a column removed"),
        MutationClass("null_column", TABLE_KINDS, null_column, "a column set to NULL"),
        MutationClass("wrong_type", TABLE_KINDS, wrong_type, "text, blobs or extremes in a column"),
        MutationClass("bad_times", SQLITE_KINDS, bad_times, "end before start, negative or huge times"),
        MutationClass("huge_strings", SQLITE_KINDS, huge_strings, "strings of 10-65 thousand characters"),
        MutationClass("non_utf8", SQLITE_KINDS, non_utf8, "strings that are not UTF-8"),
        MutationClass("hostile_strings", SQLITE_KINDS, hostile_strings, "ANSI escapes and markup in strings"),
        MutationClass("missing_strings", SQLITE_KINDS, missing_strings, "name ids with no string"),
        MutationClass("nvtx_open_ranges", ("nsys-sqlite",), nvtx_open_ranges, "NVTX ranges with NULL ends"),
        MutationClass("empty_table", SQLITE_KINDS, empty_table, "a table with no rows"),
        MutationClass("garbage_file", ("nsys-parquet",), garbage_file, "a Parquet file replaced by junk"),
    ]
}
WRAPPERS = ("none", "none", "none", "xz", "gz")


# --- cases ----------------------------------------------------------------------------------


@dataclass
class Case:
    index: int
    seed: int
    mutation: str
    source: Path
    kind: str
    wrapper: str
    fmt: str

    @property
    def label(self) -> str:
        return f"#{self.index} {self.mutation} on {self.source.name} ({self.kind}, {self.wrapper}, {self.fmt})"


@dataclass
class Outcome:
    case: Case
    rc: int | None
    stderr: str
    seconds: float
    what: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def available_seeds() -> dict[str, list[Path]]:
    return {kind: [p for p in paths if p.exists()] for kind, paths in SEEDS.items()}


def make_cases(count: int, seed: int, classes: list[str] | None = None, kinds: list[str] | None = None) -> list[Case]:
    """count cases, each reproducible from (seed, index)."""
    seeds = available_seeds()
    names = [c for c in (classes or list(CLASSES)) if any(seeds.get(k) for k in CLASSES[c].kinds)]
    out = []
    for index in range(count):
        rng = random.Random(f"{seed}:{index}")
        case = case_for(rng.choice(names), seed, index, rng, kinds)
        if case is not None:
            out.append(case)
    return out


def case_for(
    name: str, seed: int, index: int = 0, rng: random.Random | None = None, kinds: list[str] | None = None
) -> Case | None:
    """A case of one mutation class: its input kind, source file, wrapper and output format
    drawn from (seed, index); None when no seed file of a usable kind is here."""
    seeds = available_seeds()
    rng = rng or random.Random(f"{seed}:{index}:{name}")
    usable = [k for k in CLASSES[name].kinds if seeds.get(k) and (not kinds or k in kinds)]
    if not usable:
        return None
    kind = rng.choice(usable)
    source = rng.choice(seeds[kind])
    wrapper = rng.choice(WRAPPERS) if kind != "nsys-parquet" else "none"
    fmt = rng.choice(["text", "text", "markdown", "json"])
    return Case(index, seed, name, source, kind, wrapper, fmt)


def prepare(case: Case, folder: Path) -> tuple[Path, str]:
    """Copies the case's source into folder, damages it, and wraps it; returns the input."""
    rng = random.Random(f"{case.seed}:{case.index}:mutate")
    dst = folder / ("input_" + case.source.name)
    if case.source.is_dir():
        shutil.copytree(case.source, dst)
    else:
        shutil.copyfile(case.source, dst)
    what = CLASSES[case.mutation].mutate(rng, dst)
    if case.wrapper != "none" and dst.is_file():
        wrapped = dst.with_name(dst.name + (".xz" if case.wrapper == "xz" else ".gz"))
        data = dst.read_bytes()
        wrapped.write_bytes(lzma.compress(data, preset=0) if case.wrapper == "xz" else gzip.compress(data, 1))
        dst.unlink()
        dst = wrapped
    return dst, what


def tree_hash(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def run_in_process(args: list[str], env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    from nsight_doctor.cli import main

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    old_tempdir = tempfile.tempdir
    tempfile.tempdir = str(tmp)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main.main(args=args, prog_name="nsight-doctor")
                rc = 0
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        tempfile.tempdir = old_tempdir
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, out.getvalue(), err.getvalue()


def run_subprocess(args: list[str], env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    full = dict(os.environ, TMPDIR=str(tmp), **env)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "nsight_doctor", *args],
            capture_output=True,
            text=True,
            errors="replace",
            env=full,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        return -9, "", "timed out after 300 s"
    return r.returncode, r.stdout, r.stderr


def check(case: Case, inp: Path, rc: int, stdout: str, stderr: str) -> list[str]:
    problems = []
    lines = stderr.strip().splitlines()
    if rc not in (0, 1, 2):
        problems.append(f"exit code {rc}")
    if "Traceback" in stderr or "internal error" in stderr:
        problems.append("traceback or internal error")
    if "\x1b" in stdout or "\x1b" in stderr:
        problems.append("an escape character reached the output")
    if rc == 2:
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        elif not lines[0].startswith("nsight-doctor: error: "):
            problems.append("the error line lacks the 'nsight-doctor: error:' prefix")
        elif inp.name not in lines[0]:
            problems.append("the error does not name the input")
    elif rc in (0, 1):
        if not stdout.strip():
            problems.append("no output")
        elif case.fmt == "json":
            try:
                import jsonschema

                from nsight_doctor.render.json_out import report_schema

                jsonschema.validate(json.loads(stdout), report_schema())
            except Exception as e:
                problems.append(f"JSON output invalid: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return problems


def leftovers(tmp: Path, cache: Path, folder: Path) -> list[str]:
    left = [p.name for p in tmp.iterdir()]
    left += [str(p.relative_to(cache)) for p in cache.rglob("*") if "partial" in p.name]
    left += [p.name for p in folder.rglob("*") if "partial" in p.name or p.name.startswith(".nsight-doctor")]
    return left


def run_case(
    case: Case, work: Path, subprocess_mode: bool = False, export_timeout: int | None = 60, keep: Path | None = None
) -> Outcome:
    folder = work / f"case{case.index}"
    tmp = work / f"tmp{case.index}"
    cache = work / "cache"
    folder.mkdir()
    tmp.mkdir()
    try:
        inp, what = prepare(case, folder)
        before = tree_hash(inp)
        listing = {p.name for p in folder.iterdir()}
        args = ["analyze", str(inp), "--format", case.fmt, "-q"]
        if export_timeout:
            args += ["--export-timeout", str(export_timeout)]
        env = {"NSIGHT_DOCTOR_CACHE": str(cache)}
        t0 = time.monotonic()
        runner = run_subprocess if subprocess_mode else run_in_process
        rc, stdout, stderr = runner(args, env, tmp)
        seconds = time.monotonic() - t0
        problems = check(case, inp, rc, stdout, stderr)
        if inp.exists() and tree_hash(inp) != before:
            problems.append("the input was modified")
        left = leftovers(tmp, cache, folder)
        if left:
            problems.append(f"left behind: {left[:3]}")
        # Beside the input, only the export of a report may appear (nsys writes it there
        # when the folder is writable, for nsys stats and the GUI to reuse).
        stem = inp.name.split(".")[0]
        added = {p.name for p in folder.iterdir()} - listing - {f"{stem}.sqlite", f"{stem}_pqtdir"}
        if added:
            problems.append(f"written beside the input: {sorted(added)[:3]}")
        if problems and keep is not None:
            dest = keep / f"seed{case.seed}_case{case.index}"
            shutil.copytree(folder, dest, dirs_exist_ok=True)
            (dest / "case.txt").write_text(f"{case.label}\n{what}\n{problems}\n{stderr}\n")
        return Outcome(case, rc, stderr.strip(), seconds, what, problems)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


def summarize(outcomes: list[Outcome]) -> str:
    by_class: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        c = by_class[o.case.mutation]
        c["cases"] += 1
        c["failed" if not o.ok else f"exit {o.rc}"] += 1
    lines = ["| class | cases | exit 0 | exit 1 | exit 2 | failed |", "|---|---:|---:|---:|---:|---:|"]
    total: Counter = Counter()
    for name in sorted(by_class):
        c = by_class[name]
        total.update(c)
        lines.append(f"| {name} | {c['cases']} | {c['exit 0']} | {c['exit 1']} | {c['exit 2']} | {c['failed']} |")
    lines.append(
        f"| all | {total['cases']} | {total['exit 0']} | {total['exit 1']} | {total['exit 2']} | {total['failed']} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, nargs="*", help="run only these case indexes")
    ap.add_argument("--classes", nargs="*", choices=sorted(CLASSES))
    ap.add_argument("--kinds", nargs="*", choices=sorted(SEEDS))
    ap.add_argument("--subprocess", action="store_true", help="one process per case")
    ap.add_argument("--keep", type=Path, help="copy the inputs of failed cases here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    a = ap.parse_args(argv)
    cases = make_cases(a.cases, a.seed, a.classes, a.kinds)
    if a.only is not None:
        cases = [c for c in cases if c.index in a.only]
    outcomes = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nsight-doctor-fuzz-") as w:
        work = Path(w)
        for case in cases:
            o = run_case(case, work, a.subprocess, keep=a.keep)
            outcomes.append(o)
            if a.verbose or not o.ok:
                status = "ok" if o.ok else "FAILED: " + "; ".join(o.problems)
                print(f"{case.label}: {o.what}: exit {o.rc} in {o.seconds:.1f} s: {status}", flush=True)
                if not o.ok:
                    print(f"    stderr: {o.stderr[:500]}", flush=True)
    print(summarize(outcomes))
    failed = sum(not o.ok for o in outcomes)
    print(f"{len(outcomes)} cases, {failed} failed, seed {a.seed}, {time.monotonic() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
