"""The command line as a user runs it: exit codes, formats, options, and bad input, which
always gets one line on stderr and exit code 2, never a traceback, and never a change to
the input file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from conftest import SAMPLES, run_cli, sample, sha256, unxz

B1 = str(sample("decode_b1"))


def one_error_line(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert lines[0].startswith("nsight-doctor: error: ")
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_version_and_help():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("nsight-doctor, version ")
    for cmd in (
        ["--help"],
        ["analyze", "--help"],
        ["rules", "--help"],
        ["rules", "list", "--help"],
        ["rules", "explain", "--help"],
        ["rules", "test", "--help"],
        ["rules", "docs", "--help"],
    ):
        r = run_cli(*cmd)
        assert r.returncode == 0 and "Usage:" in r.stdout, cmd
        if cmd != ["--help"] and cmd != ["rules", "--help"]:
            assert "Example" in r.stdout, cmd


def test_analyze_text_default():
    r = run_cli("analyze", B1)
    assert r.returncode == 0, r.stderr
    heading = "Findings about the steady state, ranked by the time a fix would recover"
    assert "Summary" in r.stdout and heading in r.stdout
    after = r.stdout.split(heading)[1]
    assert after.strip().splitlines()[0].startswith("1. [high] Launch-bound")
    assert r.stderr == ""  # no progress bar when stderr is not a terminal


def test_analyze_json_is_versioned_and_ranked():
    r = run_cli("analyze", B1, "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema_version"] == 2
    assert d["tool"]["name"] == "nsight-doctor"
    assert d["inputs"][0]["kind"] == "nsys-sqlite" and d["inputs"][0]["producer_version"].startswith("2025.3")
    assert d["summary"]["kernel_count"] == 15808
    impacts = [f["impact_ns"] for f in d["findings"]]
    assert impacts == sorted(impacts, reverse=True)
    for f in d["findings"]:
        assert {
            "rule_id",
            "title",
            "severity",
            "tags",
            "impact_ns",
            "message",
            "recommendation",
            "evidence",
        } <= f.keys()


def test_analyze_markdown_has_summary_findings_and_provenance():
    r = run_cli("analyze", B1, "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert md.startswith("# nsight-doctor diagnosis: decode\\_b1.sqlite")
    assert "| Metric | Value |" in md and "## Findings" in md and "### 1. Launch-bound" in md
    assert "## How this was produced" in md and "nsight-doctor analyze" in md
    assert "Nsight Systems 2025.3" in md


@pytest.mark.slow
def test_fail_on_sets_exit_code_1():
    assert run_cli("analyze", B1, "--fail-on", "high").returncode == 1
    assert run_cli("analyze", B1, "--fail-on", "critical").returncode == 0


@pytest.mark.slow
def test_select_ignore_and_threshold_override():
    r = run_cli("analyze", B1, "--format", "json", "--select", "small-batch-decode,pageable-memcpy")
    assert [f["rule_id"] for f in json.loads(r.stdout)["findings"]] == ["pageable-memcpy", "small-batch-decode"]
    r = run_cli("analyze", B1, "--format", "json", "--ignore", "launch-bound")
    assert "launch-bound" not in [f["rule_id"] for f in json.loads(r.stdout)["findings"]]
    r = run_cli("analyze", B1, "--format", "json", "--threshold", "launch-bound.min_launch_idle_pct=99")
    assert "launch-bound" not in [f["rule_id"] for f in json.loads(r.stdout)["findings"]]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--threshold", "launch-bound.nope=1"], "has no threshold 'nope'"),
        (["--threshold", "bad"], "RULE.NAME=VALUE"),
        (["--select", "no-such-rule"], "unknown rule id or tag"),
        (["--rules", "/no/such/dir"], "does not exist"),
        (["--format", "yaml"], "yaml"),
        # (the folder of -o is never made: a typo would otherwise scatter reports)
        (["-o", "/nonexistent/dir/x.md", "--format", "markdown"], "the folder '/nonexistent/dir' does not exist"),
        (["-o", "/proc/x.txt"], "cannot write the report to '/proc/x.txt'"),
    ],
)
def test_bad_options_get_one_line(args, needle):
    one_error_line(run_cli("analyze", B1, *args), needle)


@pytest.mark.slow
def test_db_keeps_a_queryable_store(tmp_path):
    db = tmp_path / "store.duckdb"
    r = run_cli("analyze", B1, "--db", str(db), "-q")
    assert r.returncode == 0, r.stderr
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM kernels").fetchall() == [(15808,)]
    con.close()
    # The same profile again: the store is reused (ingest skipped), with the same findings.
    again = run_cli("analyze", B1, "--db", str(db), "-q", "-v")
    assert again.returncode == 0, again.stderr
    assert "reused the store" in again.stdout
    # Another profile: refused, the store is never overwritten.
    other = str(sample("decode_b1_graphs"))
    one_error_line(run_cli("analyze", other, "--db", str(db)), "already exists and holds the analysis of other inputs")


@pytest.mark.parametrize("args", [[], ["rules"]], ids=["nsight-doctor", "nsight-doctor rules"])
def test_a_group_without_a_command_shows_its_help(args):
    """The help as --help shows it (exit 0), not an error line with the help flattened in."""
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == run_cli(*args, "--help").stdout
    assert r.stdout.startswith("Usage: ") and "Commands:" in r.stdout and len(r.stdout.splitlines()) > 5


@pytest.mark.slow
def test_gaps_option_sets_how_many_gaps_text_and_markdown_show():
    for n in (1, 8):
        text = run_cli("analyze", B1, "--gaps", str(n)).stdout
        assert text.count(" on GPU 0 at ") == n
        md = run_cli("analyze", B1, "--gaps", str(n), "--format", "markdown").stdout
        assert md.count(" on GPU 0 at ") == n
        js = json.loads(run_cli("analyze", B1, "--gaps", str(n), "--format", "json").stdout)
        assert len(js["summary"]["idle"]["largest"]) == n


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--memory-limit", "lots"], "is not a size such as 512MB"),
        (["--memory-limit", "2 parsecs"], "is not a size"),
        (["--export-timeout", "0"], "--export-timeout"),
        (["--export-timeout", "soon"], "--export-timeout"),
    ],
)
def test_resource_options_are_checked(args, needle):
    one_error_line(run_cli("analyze", B1, *args), needle)


def test_rules_list_and_explain():
    r = run_cli("rules", "list")
    assert r.returncode == 0 and "launch-bound" in r.stdout and "host-sync" in r.stdout
    r = run_cli("rules", "explain", "launch-bound")
    assert r.returncode == 0
    for heading in ("## What it detects", "## Why it matters", "## Evidence", "## What to do"):
        assert heading in r.stdout
    # No markup meant for the docs pages: the generated comment, or placeholders as <tags>.
    r = run_cli("rules", "explain", "small-grid")
    assert r.returncode == 0 and "<!--" not in r.stdout and "<advice>" not in r.stdout
    assert "`{advice}` is the advice in the terms of the detected framework" in r.stdout
    one_error_line(run_cli("rules", "explain", "nope"), "no rule 'nope'")


@pytest.mark.slow
def test_rules_test_runs_every_case():
    r = run_cli("rules", "test")
    assert r.returncode == 0, r.stdout
    assert "FAIL" not in r.stdout and r.stdout.count(": ok") >= 40


# --- bad input -------------------------------------------------------------------------


def truncate(src, dst, fraction=0.5):
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


def flip_bytes(src, dst, offset_fraction=0.5, count=4096):
    data = bytearray(src.read_bytes())
    start = int(len(data) * offset_fraction)
    for i in range(start, min(start + count, len(data))):
        data[i] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst


def test_missing_path():
    one_error_line(run_cli("analyze", "/no/such/run.nsys-rep"), "no such file")


def test_directory(tmp_path):
    one_error_line(run_cli("analyze", str(tmp_path)), "is a directory")


def test_unknown_extension(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    one_error_line(run_cli("analyze", str(p)), "unknown kind of file")


def test_empty_file(tmp_path):
    p = tmp_path / "run.nsys-rep"
    p.write_bytes(b"")
    one_error_line(run_cli("analyze", str(p)), "is empty")


def test_text_file_named_like_a_report(tmp_path):
    p = tmp_path / "run.nsys-rep"
    p.write_text("not a report\n" * 100)
    one_error_line(run_cli("analyze", str(p)), "not a valid .nsys-rep")


def test_truncated_sqlite_export(tmp_path):
    p = truncate(sample("decode_b1"), tmp_path / "half.sqlite")
    one_error_line(run_cli("analyze", str(p)), "truncated")


def test_corrupted_sqlite_export(tmp_path):
    p = flip_bytes(sample("decode_b1"), tmp_path / "flipped.sqlite")
    before = sha256(p)
    one_error_line(run_cli("analyze", str(p)), "flipped.sqlite")
    assert sha256(p) == before


def test_corrupted_sqlite_header(tmp_path):
    p = flip_bytes(sample("decode_b1"), tmp_path / "badheader.sqlite", 0.0, 64)
    one_error_line(run_cli("analyze", str(p)), "badheader.sqlite")


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    one_error_line(run_cli("analyze", str(p)), "not an Nsight Systems export")


def test_truncated_report_without_nsys(tmp_path):
    """Truncation is found before nsys is looked for (or its version blamed)."""
    p = truncate(sample("decode_b1", ".nsys-rep"), tmp_path / "half.nsys-rep")
    one_error_line(run_cli("analyze", str(p), env={"PATH": "/nonexistent", "NSYS": ""}), "half.nsys-rep", "truncated")


def test_truncated_parquet_export(tmp_path):
    dst = tmp_path / "run_pqtdir"
    shutil.copytree(SAMPLES / "decode_b1" / "decode_b1_pqtdir", dst)
    truncate(dst / "CUPTI_ACTIVITY_KIND_KERNEL.parquet", dst / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")
    one_error_line(run_cli("analyze", str(dst)), "CUPTI_ACTIVITY_KIND_KERNEL.parquet")


def test_truncated_xz(tmp_path):
    import lzma

    p = tmp_path / "run.sqlite.xz"
    p.write_bytes(lzma.compress(sample("decode_b1_graphs").read_bytes())[:5000])
    one_error_line(run_cli("analyze", str(p)), "could not be decompressed")


def test_compressed_export_is_analysed(tmp_path):
    import gzip

    p = tmp_path / "run.sqlite.gz"
    p.write_bytes(gzip.compress(sample("decode_b1_graphs").read_bytes()))
    r = run_cli("analyze", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["graph_launch_count"] == 32
    assert sorted(q.name for q in tmp_path.iterdir()) == ["run.sqlite.gz"]  # nothing written beside


@pytest.mark.slow
def test_samples_are_never_modified():
    paths = [p for n in ("decode_b1", "decode_b512", "decode_b1_graphs") for p in (sample(n), sample(n, ".nsys-rep"))]
    before = {p: sha256(p) for p in paths}
    for n in ("decode_b1", "decode_b512", "decode_b1_graphs"):
        assert run_cli("analyze", str(sample(n)), "-q").returncode == 0
        assert (
            run_cli("analyze", str(sample(n, ".nsys-rep")), "-q", env={"PATH": "/nonexistent", "NSYS": ""}).returncode
            == 0
        )
    assert {p: sha256(p) for p in paths} == before


def test_cpu_only_export_is_not_an_error(tmp_path):
    """A capture without CUDA (the corpus has real ones; here we build the minimal case
    from a real export by dropping its CUDA tables) is analysed and says so."""
    p = tmp_path / "cpu.sqlite"
    shutil.copy(sample("decode_b1_graphs"), p)
    con = sqlite3.connect(p)
    for t in [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE name LIKE 'CUPTI_ACTIVITY_KIND_%'")]:
        con.execute(f"DROP TABLE {t}")
    con.commit()
    con.close()
    r = run_cli("analyze", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["summary"]["kernel_count"] == 0
    assert [f["rule_id"] for f in d["findings"]] == ["no-gpu-activity"]


def test_nothing_but_the_report_when_pyarrow_is_installed():
    """Where pyarrow is installed (common beside PyTorch), nothing but the report: DuckDB read
    the timeline's frames through Arrow's Acero, which printed a warning per unaligned buffer on
    stderr (it now gets Arrow stream capsules and never loads pyarrow)."""
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    r = run_cli("analyze", str(sample("decode_b1")), "-q", "--no-cache", "--format", "json")
    assert r.returncode == 0 and r.stderr == "", r.stderr[:500]


def test_no_pandas_numpy_or_pyarrow_imported(tmp_path):
    """Handed a Python value as a parameter, or a frame, DuckDB imports pandas, NumPy and
    pyarrow where they are installed (a second of start-up on the GPU host). Stand-ins for
    the three note each import and refuse it: an analysis of an export (through the timeline)
    or of an Nsight Compute report makes none; one bound parameter does."""
    fakes = tmp_path / "fakes"
    for name in ("pandas", "numpy", "pyarrow"):
        (fakes / name).mkdir(parents=True)
        (fakes / name / "__init__.py").write_text(
            f"import pathlib\npathlib.Path({str(tmp_path / 'imported')!r}).touch()\nraise ImportError('stand-in')\n"
        )
    env = {"PYTHONPATH": str(fakes)}
    probe = "import duckdb; duckdb.connect().execute('SELECT ?', [1])"
    subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env}, check=True)
    assert (tmp_path / "imported").exists(), "the stand-ins are not seen: the test cannot fail"
    (tmp_path / "imported").unlink()
    for path in (sample("decode_b1"), SAMPLES / "ncu/ncu_decode_b1_basic.ncu-rep.xz"):
        r = run_cli("analyze", str(path), "-q", "--no-cache", "--format", "json", env=env)
        assert r.returncode == 0, r.stderr
        assert not (tmp_path / "imported").exists(), f"{path.name}: DuckDB imported pandas, NumPy or pyarrow"


@pytest.mark.slow
def test_every_note_reaches_every_format(tmp_path):
    """An export without its string table: the note that says so (and why every name is '?')
    is in the text, Markdown, HTML and JSON reports alike, not only in JSON."""
    path = tmp_path / "nostrings.sqlite"
    shutil.copyfile(sample("decode_b1"), path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE StringIds")
    con.commit()
    con.close()
    note = "the export has no string table (StringIds)"
    reports = {}
    for fmt in ("text", "markdown", "html", "json"):
        out = tmp_path / f"r.{fmt}"
        r = run_cli("analyze", str(path), "--format", fmt, "-o", str(out), "--no-cache")
        assert r.returncode == 0, r.stderr
        reports[fmt] = out.read_text()
    assert note in " ".join(json.loads(reports["json"])["notes"])
    for fmt, text in reports.items():
        assert note in " ".join(text.replace("\\", "").split()), fmt


@pytest.mark.slow
def test_idle_time_over_several_gpus_says_so_in_every_format(tmp_path):
    """Two GPUs idle in the same wall-clock time: their idle time summed can exceed the
    activity window, so the text, Markdown and HTML say it is summed and give it per GPU."""
    path = unxz(sample("tp2_straggler", ".sqlite.xz"), tmp_path)
    reports = {}
    for fmt in ("text", "markdown", "html", "json"):
        out = tmp_path / f"r.{fmt}"
        r = run_cli("analyze", str(path), "--format", fmt, "-o", str(out), "--no-cache")
        assert r.returncode == 0, r.stderr
        reports[fmt] = " ".join(out.read_text().split())
    idle = json.loads(reports.pop("json"))["summary"]["idle"]
    assert idle["gpus"] == 2
    con = sqlite3.connect(path)
    devices = {d for (d,) in con.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    con.close()
    assert len(devices) == 2
    assert "summed over 2 GPUs" in reports["text"] and "summed over 2 GPUs" in reports["markdown"]
    assert "per GPU, 2 GPUs" in reports["html"]
