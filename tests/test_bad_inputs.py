"""The bad-input corpus, as a table: each row builds one damaged, hostile or odd input from a
real file, runs the real command line on it, and says what must come out. Exit 2 is always
one line on stderr that names the input and says what is wrong with it; exit 0 means the
input was analysed despite the damage (and the output says what was missing). The input is
never modified (hashed before and after).

Every mutation class of the fuzzer (tests/fuzz.py) has a fixed case here; the fuzzer then
varies them at random.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest

import fuzz
from conftest import CORPUS, REPO, SAMPLES, requires_nsys, run_cli, sample, sha256
from nsight_doctor.render.json_out import report_schema

GRAPHS = sample("decode_b1_graphs")  # a small real nsys 2025.3 export with NVTX and CUDA graphs
METRICS = sample("decode_b1_gpumetrics")  # one with GPU metric samples (millions in a large capture)
NVPROF = CORPUS / "m-goldstein__GPU_ML" / "timeline.nvvp"  # a real nvprof file (schema 12)
NCU = CORPUS / "AveryClapp__ESMM-Research" / "8fce6633__profile.ncu-rep"


def copy(src: Path, tmp: Path, name: str | None = None) -> Path:
    dst = tmp / (name or src.name)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def edit(path: Path, *statements: str, params: tuple = ()) -> Path:
    con = fuzz.sqlite_con(path)
    for sql in statements:
        con.execute(sql, params if "?" in sql else ())
    con.close()
    return path


def non_utf8_kernel_names(tmp: Path) -> Path:
    p = copy(GRAPHS, tmp, "latin1.sqlite")
    return edit(
        p,
        "UPDATE StringIds SET value = CAST(X'6361665F6B65726E656CE9' AS TEXT) "  # caf_kernel\xe9
        "WHERE id IN (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL)",
        "UPDATE META_DATA_EXPORT SET value = CAST(X'DFFF' AS TEXT) || value WHERE name = 'EXPORT_PRODUCT_NAME'",
    )


def flipped_string_bytes(tmp: Path) -> Path:
    """Bit flips inside the string table's values only (the case that raised
    UnicodeDecodeError): the file stays a valid SQLite database."""
    p = copy(GRAPHS, tmp, "flipped_strings.sqlite")
    con = fuzz.sqlite_con(p)
    rows = con.execute("SELECT id, CAST(value AS BLOB) FROM StringIds").fetchall()
    rng = random.Random(7)
    for i, raw in rows:
        b = bytearray(raw)
        for _ in range(3):
            if b:
                b[rng.randrange(len(b))] ^= 0x80 | (1 << rng.randrange(7))
        con.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id = ?", (bytes(b), i))
    con.close()
    return p


def schema_not_text(tmp: Path) -> Path:
    """A flipped byte in a table's name in the schema, as 2,000 scattered bit flips left one
    (it ended in 'internal error: UnicodeDecodeError'): the name is no longer UTF-8."""
    p = copy(GRAPHS, tmp, "badschema.sqlite")
    con = fuzz.sqlite_con(p)
    con.execute("PRAGMA writable_schema = ON")
    con.execute("UPDATE sqlite_master SET name = CAST(X'4F5352A85F415049' AS TEXT) WHERE name = 'OSRT_API'")
    con.close()
    return p


def without_string_ids(tmp: Path) -> Path:
    return edit(copy(GRAPHS, tmp, "nostrings.sqlite"), "DROP TABLE StringIds")


def zero_root_page(p: Path, table: str) -> Path:
    """Zeroes the first page of a table's B-tree (a damaged sector where its rows start)."""
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    page = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    con.close()
    data = bytearray(p.read_bytes())
    data[(page - 1) * page_size : page * page_size] = bytes(page_size)
    p.write_bytes(bytes(data))
    return p


def zeroed_nvprof_page(tmp: Path) -> Path:
    """One page of an nvprof database zeroed (it was 'database disk image is malformed' as
    an internal error): the first page of its kernel rows."""
    return zero_root_page(copy(NVPROF, tmp, "zeroed.nvvp"), "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")


def huge_names(tmp: Path) -> Path:
    """Kernel names of 60,000 characters (C++ templates reach tens of KB), on every kernel."""
    p = copy(sample("decode_b1"), tmp, "huge.sqlite")
    return edit(
        p,
        "UPDATE StringIds SET value = value || '<' || printf('%.*c', 60000, 'T') || '>' "
        "WHERE id IN (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    )


def open_nvtx_ranges(tmp: Path) -> Path:
    return edit(copy(GRAPHS, tmp, "open_nvtx.sqlite"), 'UPDATE NVTX_EVENTS SET "end" = NULL WHERE rowid % 2 = 0')


def missing_string_rows(tmp: Path) -> Path:
    return edit(copy(GRAPHS, tmp, "holes.sqlite"), "DELETE FROM StringIds WHERE id % 2 = 0")


def renamed_kernel_table(tmp: Path) -> Path:
    p = copy(GRAPHS, tmp, "renamed.sqlite")
    return edit(p, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO CUPTI_ACTIVITY_KIND_KERNEL_V2")


def dropped_required_column(tmp: Path) -> Path:
    p = copy(GRAPHS, tmp, "nostart.sqlite")
    return edit(p, 'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "start"')


def nulled_kernel_ends(tmp: Path) -> Path:
    p = copy(GRAPHS, tmp, "nullends.sqlite")
    fuzz.without_constraints(fuzz.sqlite_con(p), "CUPTI_ACTIVITY_KIND_KERNEL")
    return edit(p, 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = NULL WHERE rowid % 3 = 0')


def nvprof_calls_without_ends(tmp: Path) -> Path:
    """Half the API calls of an nvprof file without an end (found by the fuzzer: a summary
    total became null, against the JSON schema)."""
    p = copy(NVPROF, tmp, "noends.nvvp")
    fuzz.without_constraints(fuzz.sqlite_con(p), "CUPTI_ACTIVITY_KIND_RUNTIME")
    return edit(p, 'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = NULL WHERE rowid % 2 = 0')


def nvprof_copies_without_sizes(tmp: Path) -> Path:
    """Every copy's byte count NULL (found by the fuzzer: the text report crashed formatting
    a null total)."""
    p = copy(NVPROF, tmp, "nosizes.nvvp")
    fuzz.without_constraints(fuzz.sqlite_con(p), "CUPTI_ACTIVITY_KIND_MEMCPY")
    return edit(p, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = NULL")


def text_in_integer_column(tmp: Path) -> Path:
    p = copy(GRAPHS, tmp, "text_times.sqlite")
    return edit(p, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 5")


def text_in_a_gpu_metric(tmp: Path) -> Path:
    """A value that is not a number in the GPU metric samples: the error names the file and the table."""
    return edit(copy(METRICS, tmp, "text_metric.sqlite"), "UPDATE GPU_METRICS SET value = 'busy' WHERE rowid = 7")


def text_in_a_gpu_metric_in_gzip(tmp: Path) -> Path:
    inner = text_in_a_gpu_metric(tmp)
    p = tmp / "metric.sqlite.gz"
    p.write_bytes(gzip.compress(inner.read_bytes()))
    inner.unlink()
    return p


def truncated_new_report(tmp: Path) -> Path:
    """Half of a 2025.3 report: truncated, which is said before blaming the nsys version."""
    data = sample("decode_b1", ".nsys-rep").read_bytes()
    p = tmp / "half.nsys-rep"
    p.write_bytes(data[: len(data) // 2])
    return p


def report_missing_its_last_bytes(tmp: Path) -> Path:
    data = sample("decode_b1_graphs", ".nsys-rep").read_bytes()
    p = tmp / "short.nsys-rep"
    p.write_bytes(data[:-4096])
    return p


def truncated_report_in_xz(tmp: Path) -> Path:
    data = sample("decode_b1_graphs", ".nsys-rep").read_bytes()
    p = tmp / "half.nsys-rep.xz"
    p.write_bytes(lzma.compress(data[: len(data) // 2], preset=0))
    return p


def junk_in_gzip(tmp: Path) -> Path:
    p = tmp / "junk.sqlite.gz"
    p.write_bytes(gzip.compress(b"not a profile\n"))
    return p


def corrupt_page_in_gzip(tmp: Path) -> Path:
    inner = zero_root_page(copy(GRAPHS, tmp, "inner.sqlite"), "CUPTI_ACTIVITY_KIND_KERNEL")
    p = tmp / "paged.sqlite.gz"
    p.write_bytes(gzip.compress(inner.read_bytes()))
    inner.unlink()
    return p


def newer_ncu_format(tmp: Path) -> Path:
    """The file-format number after NVR\\0 raised, as a future Nsight Compute might."""
    data = bytearray(NCU.read_bytes())
    data[4] = 9
    p = tmp / "future.ncu-rep"
    p.write_bytes(bytes(data))
    return p


def newer_ncu_version_string(tmp: Path) -> Path:
    """Only the version string names a future ncu: the reader does not check it."""
    p = tmp / "named_future.ncu-rep"
    p.write_bytes(NCU.read_bytes().replace(b"2023.1.1.0 (build", b"2099.9.9.0 (build"))
    return p


def symlink_loop(tmp: Path) -> Path:
    (tmp / "a.nsys-rep").symlink_to(tmp / "b.nsys-rep")
    (tmp / "b.nsys-rep").symlink_to(tmp / "a.nsys-rep")
    return tmp / "a.nsys-rep"


def broken_symlink(tmp: Path) -> Path:
    (tmp / "run.sqlite").symlink_to(tmp / "gone.sqlite")
    return tmp / "run.sqlite"


def named_pipe(tmp: Path) -> Path:
    p = tmp / "run.sqlite"
    os.mkfifo(p)
    return p


def folder_of_empty_files(tmp: Path) -> Path:
    d = tmp / "archive"
    d.mkdir()
    for i in range(10_000):
        (d / f"run{i}.nsys-rep").touch()
    return d


def parquet_folder_without_strings(tmp: Path) -> Path:
    d = copy(SAMPLES / "decode_b1" / "decode_b1_pqtdir", tmp, "run_pqtdir")
    (d / "StringIds.parquet").unlink()
    return d


def parquet_file_replaced(tmp: Path) -> Path:
    d = copy(SAMPLES / "decode_b1" / "decode_b1_pqtdir", tmp, "run_pqtdir")
    (d / "CUPTI_ACTIVITY_KIND_RUNTIME.parquet").write_text("not parquet\n" * 100)
    return d


def hostile_file_name(tmp: Path) -> Path:
    """A name with an escape sequence, quotes and SQL: it reaches messages and the
    statements that attach the file, and must stay inert in both."""
    p = tmp / "x\x1b[31m'; DROP TABLE t; --\".sqlite"
    p.write_text("not a profile")
    return p


def sql_in_name_of_a_good_export(tmp: Path) -> Path:
    return copy(GRAPHS, tmp, 'it\'s "quoted"; SELECT 1.sqlite')


@dataclass
class Case:
    id: str
    build: Callable[[Path], Path]
    exit: int
    needles: list[str] = field(default_factory=list)  # in the error line (exit 2) or stdout (exit 0)
    format: str = "text"
    needs: list[Path] = field(default_factory=list)  # real files the case is built from
    nsys: bool = False  # needs Debian's nsys
    env: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None  # must answer within
    max_line: int | None = None  # longest line of the output


NO_NSYS = {"PATH": "/nonexistent", "NSYS": ""}

CASES = [
    # The failures reported in issue 14, each now a clear outcome.
    Case("non-utf8 kernel names are shown escaped", non_utf8_kernel_names, 0, ["caf_kernel\\xE9"], needs=[GRAPHS]),
    Case("flipped bytes in strings", flipped_string_bytes, 0, ["Summary"], needs=[GRAPHS]),
    Case("a table name that is not text", schema_not_text, 2, ["badschema.sqlite", "corrupt"], needs=[GRAPHS]),
    Case("no StringIds table", without_string_ids, 0, ["no string table (StringIds)"], "json", needs=[GRAPHS]),
    Case("nvprof with a zeroed page", zeroed_nvprof_page, 2, ["zeroed.nvvp", "malformed"], needs=[NVPROF]),
    Case("60,000-character names", huge_names, 0, ["vectorized_elementwise_kernel"], max_line=300),
    # Damaged tables.
    Case("NVTX ranges with NULL ends", open_nvtx_ranges, 0, ["Summary"], needs=[GRAPHS]),
    Case("name ids without strings", missing_string_rows, 0, ["Summary"], needs=[GRAPHS]),
    Case("kernel table renamed _V2", renamed_kernel_table, 0, ['"kernel_count": 0'], "json", needs=[GRAPHS]),
    Case(
        "required column dropped", dropped_required_column, 2, ["nostart.sqlite", "base_kernels.start"], needs=[GRAPHS]
    ),
    Case(
        "kernel ends NULL",
        nulled_kernel_ends,
        0,
        ["kernels: left out", "rows without start or end"],
        "json",
        needs=[GRAPHS],
    ),
    Case(
        "nvprof API calls without ends",
        nvprof_calls_without_ends,
        0,
        ["api calls: left out", "rows without start or end"],
        "json",
        needs=[NVPROF],
    ),
    Case("nvprof copies without sizes", nvprof_copies_without_sizes, 0, ["memcpy: left out"], "json", needs=[NVPROF]),
    Case("nvprof copies without sizes, text", nvprof_copies_without_sizes, 0, ["Summary"], needs=[NVPROF]),
    Case("text in an integer column", text_in_integer_column, 2, ["text_times.sqlite", "soon"], needs=[GRAPHS]),
    Case(
        "text in a GPU metric",
        text_in_a_gpu_metric,
        2,
        ["text_metric.sqlite", "base_gpu_metrics", "busy"],
        needs=[METRICS],
    ),
    Case(
        "text in a GPU metric inside .gz",
        text_in_a_gpu_metric_in_gzip,
        2,
        ["metric.sqlite.gz' (decompressed)", "base_gpu_metrics", "busy"],
        needs=[METRICS],
    ),
    # Reports: truncation before the version check, errors naming the user's file.
    Case("truncated 2025.3 report", truncated_new_report, 2, ["half.nsys-rep", "is truncated"], nsys=True),
    Case("report without its last 4 KiB", report_missing_its_last_bytes, 2, ["is truncated"], env=NO_NSYS),
    Case("truncated report inside .xz", truncated_report_in_xz, 2, ["half.nsys-rep.xz' (decompressed)", "truncated"]),
    Case("junk inside .gz", junk_in_gzip, 2, ["junk.sqlite.gz' (decompressed)", "not a valid .sqlite"]),
    Case("zeroed page inside .gz", corrupt_page_in_gzip, 2, ["paged.sqlite.gz"], needs=[GRAPHS]),
    # Newer tools.
    Case(
        "ncu report in a newer format", newer_ncu_format, 2, ["future.ncu-rep", "report format 9", "newer"], needs=[NCU]
    ),
    Case("ncu report naming a newer ncu", newer_ncu_version_string, 0, ["2099.9.9"], "json", needs=[NCU]),
    # Not files.
    Case("symlink loop", symlink_loop, 2, ["a.nsys-rep", "loops"]),
    Case("broken symlink", broken_symlink, 2, ["run.sqlite", "broken symbolic link"]),
    Case("named pipe", named_pipe, 2, ["run.sqlite", "not a regular file"], seconds=20),
    Case("folder of 10,000 empty files", folder_of_empty_files, 2, ["archive", "is a directory"], seconds=20),
    Case("Parquet folder without StringIds", parquet_folder_without_strings, 0, ["no string table"], "json"),
    Case("Parquet file replaced by text", parquet_file_replaced, 2, ["CUPTI_ACTIVITY_KIND_RUNTIME.parquet"]),
    # Names that are not what they seem.
    Case("escape sequence and SQL in a file name", hostile_file_name, 2, ["DROP TABLE t", "not a valid .sqlite"]),
    Case("quotes and SQL in a good export's name", sql_in_name_of_a_good_export, 0, ["Summary"], needs=[GRAPHS]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path):
    missing = [p for p in case.needs if not p.exists()]
    if missing:
        pytest.skip(f"needs {missing[0]} (the corpus is absent)")
    if case.nsys and not shutil.which("nsys"):
        pytest.skip("nsys is not installed (Debian package nsight-systems)")
    inp = case.build(tmp_path)
    before = sha256(inp) if inp.is_file() or inp.is_dir() else None
    t0 = time.monotonic()
    r = run_cli("analyze", str(inp), "--format", case.format, env=case.env)
    seconds = time.monotonic() - t0
    assert "\x1b" not in r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.returncode == case.exit, (r.returncode, r.stderr[-2000:])
    if case.exit == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("nsight-doctor: error: ")
        for needle in case.needles:
            assert needle in lines[0], lines[0]
    else:
        if case.format == "json":
            jsonschema.validate(json.loads(r.stdout), report_schema())
        for needle in case.needles:
            assert needle in r.stdout, r.stdout[:3000]
        if case.max_line is not None:
            assert max(map(len, r.stdout.splitlines())) <= case.max_line
    if before is not None:
        assert sha256(inp) == before, "the input was modified"
    if case.seconds is not None:
        assert seconds < case.seconds


# --- checks that need more than one run or another user --------------------------------


def test_every_fuzz_class_has_a_fixed_case():
    """The fixed cases above cover the fuzzer's classes by kind of damage."""
    covered = {
        "flip_bits": flipped_string_bytes,
        "zero_page": zeroed_nvprof_page,
        "truncate": truncated_new_report,
        "drop_table": without_string_ids,
        "rename_table": renamed_kernel_table,
        "drop_column": dropped_required_column,
        "null_column": nulled_kernel_ends,
        "wrong_type": text_in_integer_column,
        "bad_times": None,  # varied only by the fuzzer: any order of times is analysed
        "huge_strings": huge_names,
        "non_utf8": non_utf8_kernel_names,
        "hostile_strings": None,  # tests/test_untrusted.py
        "missing_strings": missing_string_rows,
        "nvtx_open_ranges": open_nvtx_ranges,
        "empty_table": None,  # test_cli.py: test_cpu_only_export_is_not_an_error
        "garbage_file": parquet_file_replaced,
    }
    assert set(covered) == set(fuzz.CLASSES)


def test_huge_names_stay_whole_in_the_store_and_the_json_evidence(tmp_path):
    inp = huge_names(tmp_path)
    db = tmp_path / "store.duckdb"
    r = run_cli("analyze", str(inp), "--db", str(db), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for f in d["findings"]:
        assert len(f["title"]) < 3000 and len(f["message"]) < 6000
    import duckdb

    con = duckdb.connect(str(db), read_only=True)

    def value(sql: str):
        row = con.execute(sql).fetchone()
        assert row is not None
        return row[0]

    assert value("SELECT max(length(demangled_name)) FROM kernels") > 60_000  # whole in the store
    # The views carry a bounded copy of each long short name; the original stays in base_strings.
    assert value("SELECT max(length(name)) FROM kernels") <= 1024
    assert value("SELECT count(*) FROM base_strings WHERE length(value) > 60000") > 0


def test_unreadable_file_is_one_line(tmp_path):
    """chmod 000 stops everyone but root; as root the command runs without the capabilities
    that let root read anything (setpriv), so that the file's mode applies to it too."""
    p = tmp_path / "secret.sqlite"
    shutil.copyfile(GRAPHS, p)
    p.chmod(0)
    cmd = [sys.executable, "-m", "nsight_doctor", "analyze", str(p)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            pytest.skip("running as root without setpriv (util-linux) to drop the file-access capabilities")
        caps = "-dac_override,-dac_read_search"
        cmd = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"nsight-doctor: error: '{p}': permission denied"


@requires_nsys
def test_newer_nsys_report_gives_the_version_message():
    rep = CORPUS / "HalfEmptyDrum__cs336_assignment2" / "myrun.nsys-rep"  # nsys 2026.1
    if not rep.exists():
        pytest.skip("the corpus is absent")
    r = run_cli("analyze", str(rep))
    assert r.returncode == 2
    assert "written by Nsight Systems 2026.1" in r.stderr and "cannot read it" in r.stderr


def test_unknown_values_are_shown_as_unknown():
    """A value a damaged input left unknown reaches a renderer as None: shown, not a crash."""
    from nsight_doctor.model import fmt_bytes, fmt_ns

    assert fmt_ns(None) == "n/a" and fmt_bytes(None) == "n/a"
