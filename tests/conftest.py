"""Shared paths and helpers for the test suite.

Tests use real files only: the samples in samples/ (our own H200 captures) and, when the
folder exists, other people's profiles in ../shared/corpus (or $NSIGHT_DOCTOR_CORPUS).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
CORPUS = Path(os.environ.get("NSIGHT_DOCTOR_CORPUS", REPO.parent / "shared" / "corpus"))


def sample(name: str, ext: str = ".sqlite") -> Path:
    return SAMPLES / name / f"{name}{ext}"


def unxz(src: Path, dest_dir: Path) -> Path:
    """Decompresses an xz-compressed sample (samples ship large exports and reports that way)."""
    import lzma

    dest = dest_dir / src.name.removesuffix(".xz")
    dest.write_bytes(lzma.decompress(src.read_bytes()))
    return dest


def cropped(path, tmp_path, t0: int, t1: int):
    """A copy of the export holding only what lies within [t0, t1], as a capture started and
    stopped there (nsys --delay, --duration) records it: every row with a start and end, or a
    timestamp, outside the window is gone."""
    out = tmp_path / f"cropped-{t0}-{t1}.sqlite"
    shutil.copy(path, out)
    con = sqlite3.connect(out)
    try:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            cols = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
            if {"start", "end"} <= cols:
                con.execute(f'DELETE FROM "{table}" WHERE start < ? OR coalesce("end", start) > ?', (t0, t1))
            elif "timestamp" in cols:
                con.execute(f'DELETE FROM "{table}" WHERE timestamp < ? OR timestamp > ?', (t0, t1))
        con.commit()
    finally:
        con.close()
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.is_file():
                h.update(f.name.encode())
                h.update(f.read_bytes())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the real command line in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "nsight_doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or REPO,
        timeout=600,
    )


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Each test session exports reports into its own cache folder, never the user's. Cached
    diagnoses are off (a test that analyses a copy expects it to be analysed); the tests of
    the cache turn them on."""
    cache = tmp_path_factory.getbasetemp() / "nsight-doctor-cache"
    monkeypatch.setenv("NSIGHT_DOCTOR_CACHE", str(cache))
    monkeypatch.setenv("NSIGHT_DOCTOR_NO_CACHE", "1")
    return cache


def nsys_available() -> bool:
    return shutil.which("nsys") is not None


requires_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")

# The test tiers (CONTRIBUTING.md, markers declared in pyproject.toml). The default run
# (`pytest -n auto`) is the fast tier: units, rule cases, renderer snapshots, the CLI. The others
# run with `pytest -m "" -n auto` (.ci/run): `slow`, end to end over the samples; `corpus`, other
# people's profiles; `fuzz`, the mutation fuzzer; `browser`, Chromium and poppler. Mark a test
# with @pytest.mark.slow (or another tier), or a whole file here.
FILE_TIERS = {
    "test_archive.py": "slow",
    "test_bad_inputs.py": "slow",
    "test_comm.py": "slow",
    "test_corpus.py": "corpus",
    "test_fuzz.py": "fuzz",
    "test_invariants.py": "slow",
    "test_llm_samples.py": "slow",
    "test_ncu.py": "slow",
    "test_nsys_export.py": "slow",
    "test_nvprof.py": "slow",
    "test_provenance.py": "slow",
    "test_resources.py": "slow",
    "test_samples.py": "slow",
    "test_timeline.py": "slow",
}
TIERS = ("slow", "corpus", "fuzz", "browser")


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = FILE_TIERS.get(item.path.name)
        if tier and not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(getattr(pytest.mark, tier))
        # A test that needs the corpus is in its tier wherever it is.
        for mark in item.iter_markers("skipif"):
            if "corpus not found" in str(mark.kwargs.get("reason", "")):
                item.add_marker(pytest.mark.corpus)


requires_nsys = pytest.mark.skipif(not nsys_available(), reason="nsys is not installed (Debian package nsight-systems)")
