"""The archive: ingest into a fleet database, query, report, export, Dask, and the cache.

Runs on a few real samples (a report with its export, a compressed export, a Nsight Compute
report), a corrupt report, a copy of a profile under another name and a file that is not a
profile. The corpus tests use a handful of the corpus' files by default and all of them with
NSIGHT_DOCTOR_FULL_CORPUS=1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS, REPO, SAMPLES, requires_corpus, run_cli, sample
from nsight_doctor import AnalyzeOptions, analyze
from nsight_doctor.archive import schema
from nsight_doctor.archive.discover import discover
from nsight_doctor.archive.ingest import exclusive
from nsight_doctor.docgen import pages as docgen

FULL_CORPUS = bool(os.environ.get("NSIGHT_DOCTOR_FULL_CORPUS"))


def one_error_line(r: subprocess.CompletedProcess, needle: str, code: int = 2) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def q(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """A folder of profiles as teams keep them: pairs, copies, junk and a broken report."""
    root = tmp_path_factory.mktemp("archive")
    for name in ("decode_b1_graphs", "hf_sdpa"):
        shutil.copytree(SAMPLES / name, root / name, ignore=shutil.ignore_patterns("README.md"))
    (root / "tp2").mkdir()
    shutil.copy(SAMPLES / "tp2_overlap" / "tp2_overlap.sqlite.xz", root / "tp2")  # an export alone, compressed
    (root / "ncu").mkdir()
    shutil.copy(SAMPLES / "ncu" / "ncu_decode_b1_basic.ncu-rep.xz", root / "ncu")
    (root / "copies").mkdir()
    shutil.copy(sample("decode_b1_graphs"), root / "copies" / "renamed.sqlite")  # same content, another name
    (root / "copies" / "broken.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report 0@0@0@0 truncated")
    (root / "copies" / "notes.txt").write_text("not a profile")
    return root


@pytest.fixture(scope="module")
def fleet(archive, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    db = tmp_path_factory.mktemp("fleet") / "fleet.duckdb"
    r = run_cli("ingest", str(archive), "--db", str(db), "-j", "2", "--label", "team=serving")
    return db, r


def test_ingest_finds_pairs_copies_and_failures(fleet, archive):
    db, r = fleet
    assert r.returncode == 1, r.stderr  # the broken report failed; the batch went on
    assert "failed: " in r.stderr and "broken.nsys-rep" in r.stderr
    kinds = dict(q(db, "SELECT path, kind FROM profiles"))
    graphs_rep = str(archive / "decode_b1_graphs" / "decode_b1_graphs.nsys-rep")
    # A report and its export beside it are one profile; the export is what was read.
    assert kinds[graphs_rep] == "nsys-rep"
    assert len(kinds) == 4  # decode_b1_graphs (+ its renamed copy), hf_sdpa, tp2 export, ncu
    [(paths, analysed, labels)] = q(
        db, f"SELECT paths, analysed_path, labels FROM profiles WHERE path = '{graphs_rep}'"
    )
    assert analysed.endswith("decode_b1_graphs.sqlite")
    assert str(archive / "copies" / "renamed.sqlite") in paths  # the same content under another name
    assert labels == {"team": "serving"}
    [(path, error, error_type)] = q(db, "SELECT path, error, error_type FROM failures")
    assert path.endswith("broken.nsys-rep") and "\n" not in error and error_type
    roles = dict(q(db, "SELECT path, role FROM files"))
    assert roles[graphs_rep] == "report" and roles[str(archive / "copies" / "renamed.sqlite")] == "profile"
    assert not any(p.endswith("notes.txt") for p in roles)


def test_ingest_counts_each_profile_once(fleet):
    """The closing line counts profiles one way: analysed + already in + failed = profiles."""
    db, r = fleet
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith(f"{db}: ")]
    assert f"{db}: 5 profiles: 4 analysed, 0 already in, 1 failed; 1 duplicate path;" in line


def test_unreadable_files_count_as_profiles_that_failed(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    shutil.copy(sample("decode_b1"), root / "ok.sqlite")
    (root / "cut.sqlite").write_bytes(sample("decode_b1").read_bytes()[:1000])  # truncated
    (root / "junk.nsys-rep").write_bytes(b"x")
    db = tmp_path / "fleet.duckdb"
    r = run_cli("ingest", str(root), "--db", str(db), "-j", "1")
    assert r.returncode == 1
    assert f"{db}: 3 profiles: 1 analysed, 0 already in, 2 failed (2 could not be read);" in r.stdout
    assert len(q(db, "SELECT * FROM failures")) == 2


def test_ingest_of_a_folder_without_profiles_is_one_line_and_no_database(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a profile")
    db = tmp_path / "fleet.duckdb"
    r = run_cli("ingest", str(tmp_path / "empty"), "--db", str(db))
    one_error_line(r, "no profiles found in")
    assert "(1 file of another kind)" in r.stderr
    assert not db.exists() and not Path(str(db) + ".wal").exists()


def test_fleet_report_keeps_the_start_of_an_error(fleet):
    db, _ = fleet
    r = run_cli("report", "--db", str(db))
    assert r.returncode == 0, r.stderr
    [row] = [ln for ln in r.stdout.splitlines() if "broken.nsys-rep" in ln and "Error" in ln]
    [(error,)] = q(db, "SELECT error FROM failures")
    assert " ".join(error.split())[:40] in row


def test_fleet_rows_agree_with_analyze(fleet, archive):
    db, _ = fleet
    d = analyze([archive / "hf_sdpa" / "hf_sdpa.sqlite"])
    pid = q(db, "SELECT profile_id FROM profiles WHERE path LIKE '%hf_sdpa.nsys-rep'")[0][0]
    rows = q(db, f"SELECT rule_id, impact_ns, severity FROM findings WHERE profile_id = '{pid}' ORDER BY rank")
    assert rows == [(f.rule_id, f.impact_ns, f.severity) for f in d.findings]
    s = d.summary.to_json()
    [(kernel_ns, count, busy, summary)] = q(
        db, f"SELECT kernel_ns, kernel_count, gpu_busy_pct, summary FROM summaries WHERE profile_id = '{pid}'"
    )
    assert (kernel_ns, count) == (s["kernel_ns"], s["kernel_count"])
    assert busy == pytest.approx(s["gpu_busy_pct"])
    assert json.loads(summary)["kernel_count"] == s["kernel_count"]
    # Per-kernel and per-category totals add up to the summary's kernel time.
    assert q(db, f"SELECT sum(total_ns) FROM kernels WHERE profile_id = '{pid}'")[0][0] == kernel_ns
    assert q(db, f"SELECT sum(total_ns) FROM kernel_categories WHERE profile_id = '{pid}'")[0][0] == kernel_ns
    assert q(db, f"SELECT count(*) FROM summary_top_kernels WHERE profile_id = '{pid}'")[0][0] == len(s["top_kernels"])
    [(gpus, start)] = q(db, f"SELECT gpu_names, capture_start FROM profiles WHERE profile_id = '{pid}'")
    assert gpus == ["NVIDIA H200"] and start.year >= 2025


def test_analyze_with_a_fleet_database_reads_its_diagnosis(fleet, archive):
    db, _ = fleet
    report = archive / "hf_sdpa" / "hf_sdpa.nsys-rep"
    r = run_cli("analyze", str(report), "--db", str(db), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "reused the fleet database" in out["notes"][-1]
    fresh = analyze([archive / "hf_sdpa" / "hf_sdpa.sqlite"])
    assert [f["title"] for f in out["findings"]] == [f.title for f in fresh.findings]
    # Content it does not hold is analysed now, and the fleet is not written.
    before = q(db, "SELECT count(*) FROM profiles")
    r = run_cli("analyze", str(sample("decode_b512")), "--db", str(db), "--format", "json")
    assert r.returncode == 0 and "this content is not in it" in json.loads(r.stdout)["notes"][-1]
    assert q(db, "SELECT count(*) FROM profiles") == before


def test_ncu_profile_fills_ncu_kernels(fleet):
    db, _ = fleet
    [(pid, tool, gpus)] = q(db, "SELECT profile_id, tool, gpu_names FROM profiles WHERE kind = 'ncu-rep'")
    assert tool == "Nsight Compute" and gpus == ["NVIDIA H200"]
    n = q(db, f"SELECT count(*), count(sm_pct) FROM ncu_kernels WHERE profile_id = '{pid}'")[0]
    assert n[0] > 0 and n[1] == n[0]


def test_rerun_skips_everything_and_still_reports_the_failure(fleet, archive):
    db, _ = fleet
    before = q(db, "SELECT profile_id, ingested_at FROM profiles ORDER BY 1")
    r = run_cli("ingest", str(archive), "--db", str(db), "-j", "2")
    assert r.returncode == 1
    assert "0 analysed, 4 already in" in r.stdout and "were not retried" in r.stdout
    assert q(db, "SELECT profile_id, ingested_at FROM profiles ORDER BY 1") == before


def test_fleet_tables_are_documented(fleet):
    db, _ = fleet
    doc = (REPO / "docs" / "fleet-schema.md").read_text()
    tables = [t for (t,) in q(db, "SELECT table_name FROM duckdb_tables() ORDER BY 1")]
    documented = {t.name: [c.name for c in t.columns] for t in schema.all_tables()}
    assert set(tables) == set(documented)
    for t in tables:
        assert f"## `{t}`" in doc, t
        actual = [c for (c,) in q(db, f"SELECT column_name FROM duckdb_columns() WHERE table_name = '{t}'")]
        assert actual == documented[t], t


def test_summary_tables_follow_the_summary():
    """Every scalar of the summary's JSON is a summaries column; every list is a table."""
    d = analyze([sample("decode_b1_gpumetrics")])
    summaries, children = schema.summary_layout()
    cols = {c.name for c in summaries.columns}
    tables = {".".join(t.path) for t in children}
    for key, value in d.summary.to_json().items():
        if isinstance(value, dict) and key != "gpu_metrics":
            for sub, v in value.items():
                if not isinstance(v, (list, dict)):
                    assert schema.column_name(key, sub) in cols, (key, sub)
                else:
                    assert f"{key}.{sub}" in tables, (key, sub)
        elif isinstance(value, (list, dict)):
            assert key in tables, key
        else:
            assert key in cols, key
    rows = schema.summary_rows("x", d.summary)
    assert len(rows["summary_gpu_metrics"]) > 0 and rows["summaries"][0]["memcpy_count"] is not None


# --- query ------------------------------------------------------------------------------------


def test_query_formats(fleet):
    db, _ = fleet
    sql = "SELECT rule_id, count(*) AS n FROM findings GROUP BY 1 ORDER BY 2 DESC, 1"
    table = run_cli("query", "--db", str(db), sql)
    assert table.returncode == 0 and table.stdout.splitlines()[0].split() == ["rule_id", "n"]
    csv_out = run_cli("query", "--db", str(db), sql, "--format", "csv")
    assert csv_out.stdout.splitlines()[0] == "rule_id,n"
    rows = json.loads(run_cli("query", "--db", str(db), sql, "--format", "json").stdout)
    assert rows and set(rows[0]) == {"rule_id", "n"}
    assert len(rows) == len(csv_out.stdout.splitlines()) - 1
    lists = json.loads(
        run_cli("query", "--db", str(db), "SELECT paths, labels FROM profiles", "--format", "json").stdout
    )
    assert isinstance(lists[0]["paths"], list) and isinstance(lists[0]["labels"], dict)


@pytest.mark.parametrize(
    "sql, needle",
    [
        ("SELEC 1", "SQL error"),
        ("SELECT * FROM no_such_table", "SQL error"),
        ("DELETE FROM profiles", "read-only"),
        ("SELECT * FROM read_csv('/etc/passwd')", "SQL error"),
        ("SET enable_external_access = true", "SQL error"),
    ],
)
def test_query_is_read_only_and_errors_are_one_line(fleet, sql, needle):
    db, _ = fleet
    one_error_line(run_cli("query", "--db", str(db), sql), needle)


def test_query_on_a_single_profile_store(tmp_path):
    db = tmp_path / "run.duckdb"
    assert run_cli("analyze", str(sample("decode_b1")), "--db", str(db), "-q").returncode == 0
    r = run_cli("query", "--db", str(db), "SELECT count(*) AS n FROM kernels", "--format", "csv")
    assert r.returncode == 0 and r.stdout == "n\n15808\n"
    one_error_line(run_cli("query", "--db", str(tmp_path / "nope.duckdb"), "SELECT 1"), "no such database")


# --- one writer ---------------------------------------------------------------------------------


def test_a_second_ingest_is_refused(tmp_path, archive):
    db = tmp_path / "fleet.duckdb"
    with exclusive(db):
        r = run_cli("ingest", str(archive / "tp2"), "--db", str(db))
    one_error_line(r, "is being written by another ingest (pid ")
    assert str(os.getpid()) in r.stderr


def test_query_while_the_database_is_written(tmp_path):
    db = tmp_path / "fleet.duckdb"
    con = duckdb.connect(str(db))  # this process holds the write lock, as an ingest does
    try:
        one_error_line(run_cli("query", "--db", str(db), "SELECT 1"), "is being written by another process")
        one_error_line(run_cli("ingest", str(SAMPLES / "ncu"), "--db", str(db)), "is open for writing in another")
    finally:
        con.close()


def test_ingest_refuses_a_single_profile_store(tmp_path):
    db = tmp_path / "run.duckdb"
    assert run_cli("analyze", str(sample("decode_b1_graphs")), "--db", str(db), "-q").returncode == 0
    one_error_line(run_cli("ingest", str(SAMPLES / "ncu"), "--db", str(db)), "not a fleet database")


def test_timeouts_kill_the_worker_and_the_batch_goes_on(tmp_path, archive):
    db = tmp_path / "fleet.duckdb"
    r = run_cli("ingest", str(archive / "hf_sdpa"), str(archive / "tp2"), "--db", str(db), "--timeout", "0.01", "-q")
    assert r.returncode == 1
    assert q(db, "SELECT DISTINCT error_type FROM failures") == [("Timeout",)]
    assert q(db, "SELECT count(*) FROM failures")[0][0] == 2
    # Retried later with time enough, both succeed and leave failures.
    r = run_cli("ingest", str(archive / "hf_sdpa"), str(archive / "tp2"), "--db", str(db), "--retry-failed", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert q(db, "SELECT count(*) FROM failures")[0][0] == 0


def start_ingest(inputs: list[str], db: Path, jobs: int, env: dict | None = None, stderr=subprocess.DEVNULL):
    """The real ingest command in a process of its own, to be stopped midway."""
    return subprocess.Popen(
        [sys.executable, "-m", "nsight_doctor", "ingest", *inputs, "--db", str(db), "-j", str(jobs), "-q"],
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def assert_partial_and_whole(db: Path, inputs: int) -> None:
    """A stopped ingest's database opens, holds fewer profiles than it was given, and each
    profile in it is whole."""
    assert q(db, "SELECT count(*) FROM profiles")[0][0] < inputs
    assert q(db, "SELECT count(*) FROM profiles WHERE profile_id NOT IN (SELECT profile_id FROM summaries)") == [(0,)]


def test_kill_9_mid_ingest_then_rerun_completes(tmp_path, archive):
    db = tmp_path / "fleet.duckdb"
    parts = Path(str(db) + ".parts")
    inputs = [str(archive / n) for n in ("decode_b1_graphs", "hf_sdpa", "tp2", "ncu")]
    p = start_ingest(inputs, db, jobs=1)
    deadline = time.monotonic() + 120
    # Kill it once the first profile's part has been written and, most likely, merged.
    while time.monotonic() < deadline and p.poll() is None:
        if parts.is_dir() and any(parts.iterdir()):
            time.sleep(0.3)
            break
        time.sleep(0.02)
    assert p.poll() is None, "the ingest ended before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert_partial_and_whole(db, 4)
    r = run_cli("ingest", *inputs, "--db", str(db), "-j", "2", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert q(db, "SELECT count(*) FROM profiles")[0][0] == 4
    assert q(db, "SELECT count(*) FROM (SELECT profile_id FROM summaries GROUP BY 1 HAVING count(*) > 1)") == [(0,)]
    assert not parts.exists()


def test_sigterm_mid_ingest_stops_the_workers_and_leaves_no_temporary_files(tmp_path, archive):
    """The workers are killed when the ingest stops: their scratch and spill folders, which they
    cannot remove themselves, go with the pool's temporary folder (two were left per run)."""
    db = tmp_path / "fleet.duckdb"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    inputs = [str(archive / n) for n in ("hf_sdpa", "tp2", "decode_b1_graphs", "ncu")]
    p = start_ingest(inputs, db, jobs=2, env={"TMPDIR": str(tmp)}, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    # Stopped while a worker analyses a file: its scratch folder is in the pool's.
    scratch = "nsight-doctor-workers-*/nsight-doctor-ingest-*"
    while time.monotonic() < deadline and p.poll() is None and not any(tmp.glob(scratch)):
        time.sleep(0.01)
    assert p.poll() is None, "the ingest ended before it could be stopped"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.decode().strip().splitlines()[-1] == "nsight-doctor: terminated"
    assert list(tmp.iterdir()) == []
    assert_partial_and_whole(db, 4)


# --- archives, report, export, Dask --------------------------------------------------------------


def test_tar_and_zip_archives_hold_the_same_profiles(tmp_path, archive):
    with tarfile.open(tmp_path / "runs.tar.gz", "w:gz") as tf:
        tf.add(archive / "tp2", arcname="tp2")
    with zipfile.ZipFile(tmp_path / "more.zip", "w") as zf:
        zf.write(archive / "ncu" / "ncu_decode_b1_basic.ncu-rep.xz", "ncu/basic.ncu-rep.xz")
    found = discover([tmp_path])
    assert sorted(u.primary.path for u in found.units) == [
        f"{tmp_path}/more.zip!ncu/basic.ncu-rep.xz",
        f"{tmp_path}/runs.tar.gz!tp2/tp2_overlap.sqlite.xz",
    ]
    db = tmp_path / "fleet.duckdb"
    assert run_cli("ingest", str(tmp_path / "runs.tar.gz"), str(archive / "tp2"), "--db", str(db)).returncode == 0
    [(paths,)] = q(db, "SELECT paths FROM profiles")
    assert len(paths) == 2 and any("!tp2/" in p for p in paths)


def test_report_formats(fleet):
    db, _ = fleet
    text = run_cli("report", "--db", str(db))
    assert text.returncode == 0, text.stderr
    for title in ("Lowest GPU utilisation", "Most frequent findings", "Findings by GPU", "Findings by label team"):
        assert title in text.stdout
    data = json.loads(run_cli("report", "--db", str(db), "--format", "json").stdout)
    ids = [t["id"] for t in data["tables"]]
    assert {"worst_utilisation", "frequent_findings", "gpu", "tool_version", "trend", "failures"} <= set(ids)
    worst = next(t for t in data["tables"] if t["id"] == "worst_utilisation")
    busy = [row[2] for row in worst["rows"]]
    assert busy == sorted(busy)
    md = run_cli("report", "--db", str(db), "--format", "markdown", "--trend", "label:team", "--label", "team=serving")
    assert md.returncode == 0 and "## Trend by label team" in md.stdout and "| serving |" in md.stdout
    none = json.loads(run_cli("report", "--db", str(db), "--format", "json", "--label", "team=nobody").stdout)
    assert dict(map(tuple, none["overview"]))["profiles"] == 0


def test_export_parquet_reads_back(fleet, tmp_path):
    db, _ = fleet
    out = tmp_path / "pq"
    r = run_cli("export", "--db", str(db), "--parquet", str(out))
    assert r.returncode == 0, r.stderr
    assert list((out / "findings").glob("ingest_date=*/*.parquet"))
    n = q(db, "SELECT count(*) FROM findings")[0][0]
    con = duckdb.connect()
    got = con.execute(
        f"SELECT count(*), count(DISTINCT ingest_date) FROM read_parquet('{out}/findings/**/*.parquet', "
        "hive_partitioning = true)"
    ).fetchone()
    assert got == (n, 1)
    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(f"{out}/profiles/**/*.parquet", hive_partitioning=True)
    assert frame.height == q(db, "SELECT count(*) FROM profiles")[0][0] and "ingest_date" in frame.columns
    one_error_line(run_cli("export", "--db", str(db), "--parquet", str(out)), "is not empty")
    r = run_cli("export", "--db", str(db), "--parquet", str(out), "--partition-by", "label:team", "--overwrite")
    assert r.returncode == 0 and (out / "profiles" / "label_team=serving").is_dir()


def test_dask_local_cluster_gives_the_same_rows(tmp_path, archive):
    distributed = pytest.importorskip("distributed")
    inputs = [str(archive / "hf_sdpa"), str(archive / "tp2")]
    local = tmp_path / "local.duckdb"
    assert run_cli("ingest", *inputs, "--db", str(local), "-q").returncode == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        db = tmp_path / "dask.duckdb"
        parts = tmp_path / "shared-parts"
        r = run_cli("ingest", *inputs, "--db", str(db), "--scheduler", cluster.scheduler_address, "--parts", str(parts))
        assert r.returncode == 0, r.stdout + r.stderr
    sql = "SELECT profile_id, rule_id, impact_ns FROM findings ORDER BY ALL"
    assert q(db, sql) == q(local, sql) and len(q(db, sql)) > 0
    assert not parts.exists()  # every part was merged


# --- cached re-analysis ----------------------------------------------------------------------------


def test_cached_reanalysis_skips_ingest(tmp_path, monkeypatch):
    monkeypatch.delenv("NSIGHT_DOCTOR_NO_CACHE")
    src = tmp_path / "run.sqlite"
    shutil.copy(sample("decode_b1_gpumetrics"), src)
    opts = AnalyzeOptions(cache=True)
    first = analyze([src], opts)
    t0 = time.monotonic()
    again = analyze([src], opts)
    assert time.monotonic() - t0 < 0.5
    assert "reused the cached analysis" in again.notes[-1]
    assert again.summary == first.summary and again.findings == first.findings
    # Other options are another analysis; so is another content.
    other = analyze([src], AnalyzeOptions(cache=True, thresholds={"launch-bound.min_launch_idle_pct": "90"}))
    assert not any("cached" in n for n in other.notes)
    with open(src, "ab") as f:  # new content (SQLite ignores what follows its last page)
        f.write(b"\0" * 4096)
    changed = analyze([src], opts)
    assert not any("cached" in n for n in changed.notes)
    # On the command line, the cached diagnosis renders as the fresh one does.
    fresh = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "markdown", "--no-cache")
    run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "markdown")
    cached = run_cli("analyze", str(sample("decode_b1_graphs")), "--format", "markdown")
    strip = lambda s: [ln for ln in s.splitlines() if "nsight-doctor analyze" not in ln and "cached" not in ln]  # noqa: E731
    assert strip(cached.stdout) == strip(fresh.stdout)
    # A copy under another name reuses it too, and the report names the copy.
    copy = tmp_path / "copy.sqlite"
    shutil.copy(sample("decode_b1_graphs"), copy)
    renamed = run_cli("analyze", str(copy), "--format", "json")
    assert json.loads(renamed.stdout)["inputs"][0]["path"] == str(copy)
    assert "reused the cached analysis" in renamed.stdout


# --- the corpus ------------------------------------------------------------------------------------

SUBSET = [
    "teektonik__reports/report2.nsys-rep",  # a 2022.4 report with its export beside it
    "teektonik__reports/report2.export-nsys2022.4.sqlite",
    "HalfEmptyDrum__cs336_assignment2/myrun.nsys-rep",  # 2026.1: too new for nsys 2022.4, no export
    "panjd123__cutlass/report-s4.ncu-rep",
    "m-goldstein__GPU_ML/timeline.nvvp",
    "CO18326__uvmTorch/report1.sqlite",
    "Mlightsnow__DD2360-llm.c/report1.nsys-rep",  # captured by nsys 2023.4, exported by 2025.3
    "Mlightsnow__DD2360-llm.c/report1.export-nsys2025.3.sqlite",
]


@requires_corpus
def test_corpus_ingest(tmp_path):
    if FULL_CORPUS:
        inputs = [str(CORPUS)]
    else:
        for rel in SUBSET:
            (tmp_path / "c" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "c" / rel).symlink_to(CORPUS / rel)
        inputs = [str(tmp_path / "c")]
    db = tmp_path / "corpus.duckdb"
    r = run_cli("ingest", *inputs, "--db", str(db), "-j", "2", "-q")
    assert r.returncode == 1  # reports newer than Debian's nsys 2022.4
    failures = q(db, "SELECT path, error_type, error FROM failures")
    assert failures and all(t == "ReportVersionError" for _, t, _ in failures), failures
    assert all("cannot read it" in e for _, _, e in failures)
    kinds = dict(q(db, "SELECT kind, count(*) FROM profiles GROUP BY 1"))
    assert {"nsys-rep", "ncu-rep", "nvprof", "nsys-sqlite"} <= set(kinds)
    if not FULL_CORPUS:
        assert sum(kinds.values()) == 5 and len(failures) == 1
    # A report with its export: the nsys that captured it (the report's), as analyze shows it,
    # not the one that exported it.
    [(tool_version, exporter)] = q(
        db, "SELECT tool_version, exporter_version FROM profiles WHERE path LIKE '%Mlightsnow%report1.nsys-rep'"
    )
    assert tool_version.startswith("2023.4") and exporter.startswith("2025.3"), (tool_version, exporter)
    # Every profile is whole: summary row, and findings numbered from 1.
    assert q(db, "SELECT count(*) FROM profiles WHERE profile_id NOT IN (SELECT profile_id FROM summaries)") == [(0,)]
    assert q(db, "SELECT count(*) FROM findings WHERE rank < 1") == [(0,)]


def test_generated_fleet_schema_is_current():
    assert (REPO / "docs" / "fleet-schema.md").read_text() == docgen.fleet_schema_page()


def test_group_folder_analyses_a_timeline_with_its_ncu_reports(tmp_path):
    run = tmp_path / "b512"
    run.mkdir()
    shutil.copy(sample("decode_b512"), run)
    shutil.copy(SAMPLES / "ncu" / "ncu_decode_b512_full.ncu-rep.xz", run)
    db = tmp_path / "fleet.duckdb"
    assert run_cli("ingest", str(run), "--db", str(db), "--group", "folder", "-q").returncode == 0
    [(pid, kind, n_paths)] = q(db, "SELECT profile_id, kind, len(paths) FROM profiles")
    assert kind == "group" and n_paths == 2
    d = analyze([run / "decode_b512.sqlite", run / "ncu_decode_b512_full.ncu-rep.xz"])
    assert q(db, "SELECT rule_id, impact_ns FROM findings ORDER BY rank") == [
        (f.rule_id, f.impact_ns) for f in d.findings
    ]
    assert q(db, f"SELECT count(*) > 0 FROM ncu_kernels WHERE profile_id = '{pid}'") == [(True,)]
    # Without grouping, the same files are two profiles.
    other = tmp_path / "separate.duckdb"
    assert run_cli("ingest", str(run), "--db", str(other), "-q").returncode == 0
    assert sorted(k for (k,) in q(other, "SELECT kind FROM profiles")) == ["ncu-rep", "nsys-sqlite"]


def test_reanalyze_redoes_profiles_of_other_rules(tmp_path, archive):
    db = tmp_path / "fleet.duckdb"
    assert run_cli("ingest", str(archive / "tp2"), "--db", str(db), "-q").returncode == 0
    [(digest,)] = q(db, "SELECT analysis_digest FROM profiles")
    changed = ["--threshold", "launch-bound.min_launch_idle_pct=90"]
    r = run_cli("ingest", str(archive / "tp2"), "--db", str(db), *changed)
    assert "0 analysed, 1 already in" in r.stdout
    r = run_cli("ingest", str(archive / "tp2"), "--db", str(db), *changed, "--reanalyze")
    assert "1 analysed" in r.stdout, r.stdout
    [(new_digest, n)] = q(db, "SELECT analysis_digest, count(*) OVER () FROM profiles")
    assert new_digest != digest and n == 1
