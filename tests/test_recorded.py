"""What was run, as the capture recorded it: the launched processes' command lines and the
environment variables that matter, shown in every format with secrets hidden before anything
reads them. The oracle reads META_DATA_CAPTURE from the raw export with plain sqlite3."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS, REPO, requires_corpus, run_cli, sample, sha256

B1 = sample("decode_b1")

# Secrets planted in a copy of a real export's META_DATA_CAPTURE, beside its real rows.
SECRETS = {
    "hf_token": "hf_" + "A1b2C3d4E5f6G7h8I9j0KlMnOpQr",
    "api_key": "s3cr3t-V4lue-0f-the-0pt10n",
    "url_password": "hunter2pass",
    "aws": "wJalrXUtnFEMI-K7MDENG-bPxRfiCY",
}
PLANTED = [
    ("PROCESS_0:ENVIRONMENT_VARIABLE", f'HF_TOKEN="{SECRETS["hf_token"]}"'),
    ("PROCESS_0:ENVIRONMENT_VARIABLE", f'AWS_SECRET_ACCESS_KEY="{SECRETS["aws"]}"'),
    ("PROCESS_0:ENVIRONMENT_VARIABLE", 'CUDA_LAUNCH_BLOCKING="1"'),
    ("PROCESS_0:ARGUMENT_3", "--api-key"),
    ("PROCESS_0:ARGUMENT_4", SECRETS["api_key"]),
    ("PROCESS_0:ARGUMENT_5", f"--db=postgres://me:{SECRETS['url_password']}@db.local/x"),
]


def raw_command(path: Path, process: int = 0) -> str | None:
    """The oracle: PROCESS_n:COMMAND and its ARGUMENT_i in order, read with sqlite3."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE ?", [f"PROCESS_{process}:%"]
        ).fetchall()
    except sqlite3.OperationalError:
        rows = []  # exports before 2024.x have no such table
    con.close()
    command = [v for n, v in rows if n.endswith(":COMMAND")]
    args = sorted((int(n.rsplit("_", 1)[1]), v) for n, v in rows if ":ARGUMENT_" in n)
    if not command:
        return None
    return " ".join([command[0], *(v for _, v in args)])


@pytest.mark.slow
def test_the_recorded_command_reaches_every_format(tmp_path):
    expected = raw_command(B1)
    assert expected == "python3 samples/workloads/decode.py --batch 1"
    outputs = {}
    for fmt in ("text", "markdown", "json", "html"):
        out = tmp_path / f"report.{fmt}"
        r = run_cli("analyze", str(B1), "--format", fmt, "-o", str(out))
        assert r.returncode == 0, r.stderr
        outputs[fmt] = out.read_text()
    for fmt, text in outputs.items():
        text = text.replace("\\", "")  # Markdown escapes underscores
        assert expected in text, fmt
        assert fmt == "json" or "CUDA_VISIBLE_DEVICES=0" in text, fmt
    summary = json.loads(outputs["json"])["summary"]
    assert summary["recorded"] == [{"process": 0, "command": expected, "working_dir": "/work/main", "environment": 88}]
    assert [(x["name"], x["value"], x["kind"]) for x in summary["settings"]] == [("CUDA_VISIBLE_DEVICES", "0", "knob")]


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """A copy of decode_b1's export with secrets in its recorded launch."""
    path = tmp_path_factory.mktemp("planted") / "planted.sqlite"
    shutil.copyfile(B1, path)
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", PLANTED)
    con.commit()
    con.close()
    return path


@pytest.mark.slow
def test_secrets_reach_neither_the_store_nor_any_report(planted, tmp_path):
    before = sha256(planted)
    db = tmp_path / "kept.duckdb"
    reports = {}
    for i, fmt in enumerate(("text", "markdown", "json", "html")):
        out = tmp_path / f"r.{fmt}"
        args = ["analyze", str(planted), "--format", fmt, "-o", str(out), "--no-cache"]
        r = run_cli(*args, *(["--db", str(db)] if i == 0 else []))
        assert r.returncode == 0, r.stderr
        reports[fmt] = out.read_text()
    assert sha256(planted) == before  # the input is never modified
    for fmt, text in reports.items():
        text = text.replace("\\", "")  # Markdown escapes underscores
        for secret in SECRETS.values():
            assert secret not in text, (fmt, secret)
        assert "REDACTED" in text and "--api-key REDACTED" in text, fmt
    # Nowhere in the kept store: every text column of every table.
    con = duckdb.connect(str(db), read_only=True)
    cols = con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE data_type = 'VARCHAR' AND NOT internal"
    ).fetchall()
    for table, column in cols:
        for secret in SECRETS.values():
            hits = con.execute(f'SELECT count(*) FROM "{table}" WHERE contains("{column}", ?)', [secret]).fetchone()
            assert hits == (0,), (table, column, secret)
    env = dict(con.execute("SELECT name, value FROM recorded_env").fetchall())
    assert env["HF_TOKEN"] == env["AWS_SECRET_ACCESS_KEY"] == "REDACTED"
    con.close()
    # The debugging setting among them is flagged, in its own words.
    d = json.loads(reports["json"])
    [f] = [f for f in d["findings"] if f["rule_id"] == "capture-settings"]
    assert f["evidence"]["settings_text"] == "CUDA_LAUNCH_BLOCKING=1" and f["scope"] == "capture"
    assert "Command (recorded)" in reports["text"]
    assert "CUDA_LAUNCH_BLOCKING=1 (distorts the capture)" in reports["text"]


@pytest.mark.slow
def test_a_capture_made_with_cuda_launch_blocking_says_so_first(tmp_path):
    """samples/decode_b1_launch_blocking: a real capture with CUDA_LAUNCH_BLOCKING=1 in the
    profiled process's environment."""
    import lzma

    from nsight_doctor import analyze

    path = tmp_path / "lb.sqlite"
    path.write_bytes(lzma.decompress(sample("decode_b1_launch_blocking", ".sqlite.xz").read_bytes()))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    env = [
        v for (v,) in con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'")
    ]
    con.close()
    assert 'CUDA_LAUNCH_BLOCKING="1"' in env
    d = analyze([path])
    notes = [f for f in d.findings if f.scope == "capture"]
    assert notes[0].rule_id == "capture-settings" and notes[0].severity == "high"
    assert notes[0].evidence["settings_text"] == "CUDA_LAUNCH_BLOCKING=1"
    assert [(s.name, s.value, s.kind) for s in d.summary.settings if s.kind == "distorts"] == [
        ("CUDA_LAUNCH_BLOCKING", "1", "distorts")
    ]
    # decode_b1, the same workload without it, gets no such note.
    assert "capture-settings" not in {f.rule_id for f in analyze([B1]).findings}


@pytest.mark.corpus
@requires_corpus
def test_recorded_commands_of_the_corpus_match_the_export():
    """Every corpus export that recorded its launch: the command shown is the raw one (no
    argument there needs quoting or hiding), and the store keeps no secret-named value."""
    from nsight_doctor import store

    checked = 0
    for path in sorted(CORPUS.glob("*/*.sqlite")):
        expected = raw_command(path)
        if expected is None:
            continue
        built = store.build([path])
        try:
            con = built.connect()
            [(command,)] = con.execute("SELECT command FROM recorded_processes WHERE process = 0").fetchall()
            secret_named = con.execute(
                "SELECT count(*) FROM recorded_env WHERE value NOT IN ('REDACTED', '') "
                "AND regexp_matches(upper(name), '(^|_)(TOKEN|SECRET|PASSWORD)(_|$)')"
            ).fetchone()
            con.close()
        finally:
            built.close()
        assert command == expected, path
        assert secret_named == (0,), path
        checked += 1
    assert checked >= 10


def test_the_capture_settings_are_documented_with_references():
    """Each setting names its documentation; the rule's page is generated (docgen)."""
    from nsight_doctor import yamlio

    data = yamlio.load((REPO / "src/nsight_doctor/store/launch_settings.yaml").read_text())
    for s in data["settings"]:
        assert s["kind"] in ("distorts", "distorts-startup", "knob") and s["reference"].startswith("https://"), s
    assert (REPO / "docs/rules/capture-settings.md").exists()


@pytest.mark.slow
def test_recorded_options_follow_the_command_line(tmp_path):
    """tp2_straggler's recorded command (`tp_decode.py --world 2 --variant straggler ...`): each
    long option with its value, read independently from META_DATA_CAPTURE."""
    from conftest import unxz
    from nsight_doctor import store

    path = unxz(sample("tp2_straggler", ".sqlite.xz"), tmp_path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchall()
    con.close()
    args = [v for _, v in sorted((int(n.rsplit("_", 1)[1]), v) for n, v in rows)]
    expected = {
        (
            a.split("=", 1)[0],
            a.split("=", 1)[1] if "=" in a else (b if b is not None and not b.startswith("-") else None),
        )
        for a, b in zip(args, [*args[1:], None])
        if a.startswith("--")
    }
    assert ("--world", "2") in expected
    built = store.build([path])
    try:
        c = built.connect()
        got = set(c.execute("SELECT option, value FROM recorded_options WHERE process = 0").fetchall())
        c.close()
    finally:
        built.close()
    assert got == expected
