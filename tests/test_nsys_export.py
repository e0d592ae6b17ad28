"""The .nsys-rep path for real: Debian's nsys 2022.4 captures a CPU-side program, and
nsight-doctor exports and analyses the report through the same nsys."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import requires_nsys, run_cli, sample, sha256

IMPORTER = "/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter"


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    """A real 2022.4 report of a Python program that sleeps inside NVTX-free loops."""
    if not shutil.which("nsys"):
        pytest.skip("nsys is not installed (Debian package nsight-systems)")
    d = tmp_path_factory.mktemp("capture")
    cmd = [
        "nsys",
        "profile",
        "-t",
        "osrt",
        "--sample=none",
        "--cpuctxsw=none",
        "-f",
        "true",
        "-o",
        str(d / "cpu_only"),
        sys.executable,
        "-c",
        "import time\nfor _ in range(20): time.sleep(0.005)",
    ]
    subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=d)
    rep = d / "cpu_only.nsys-rep"
    qdstrm = d / "cpu_only.qdstrm"
    if not rep.exists() and qdstrm.exists() and os.path.exists(IMPORTER):
        # Debian installs the importer where nsys does not look (see ../shared/CAPTURE.md).
        subprocess.run([IMPORTER, "-i", str(qdstrm)], capture_output=True, timeout=300, cwd=d)
    if not rep.exists():
        pytest.fail(f"nsys did not produce a report in {d}: {sorted(os.listdir(d))}")
    qdstrm.unlink(missing_ok=True)
    return rep


@requires_nsys
def test_report_is_exported_beside_it_and_analysed(cpu_report, tmp_path):
    rep = tmp_path / "run.nsys-rep"
    shutil.copy(cpu_report, rep)
    before = sha256(rep)
    r = run_cli("analyze", str(rep), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"][0]["kind"] == "nsys-rep"
    assert d["inputs"][0]["producer_version"].startswith("2022.4")
    assert [f["rule_id"] for f in d["findings"]] == ["no-gpu-activity"]
    assert (tmp_path / "run.sqlite").exists()  # beside the report, as nsys stats does
    assert sha256(rep) == before
    # A second run reuses that export.
    r = run_cli("analyze", str(rep), "--format", "json", "-v")
    assert json.loads(r.stdout)["notes"][0].startswith("reused the existing export")


@requires_nsys
def test_read_only_report_is_exported_to_the_cache(cpu_report, tmp_path, private_cache):
    folder = tmp_path / "archive"
    folder.mkdir()
    rep = folder / "run.nsys-rep"
    shutil.copy(cpu_report, rep)
    rep.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        r = run_cli("analyze", str(rep), "--format", "json")
        assert r.returncode == 0, r.stderr
        export = json.loads(r.stdout)["inputs"][0]["export_path"]
        assert export.startswith(str(private_cache))
        assert sorted(p.name for p in folder.iterdir()) == ["run.nsys-rep"]
    finally:
        folder.chmod(0o755)


@requires_nsys
def test_too_new_report_names_both_versions(tmp_path):
    rep = tmp_path / "decode_b1.nsys-rep"  # alone: no export beside it
    shutil.copy(sample("decode_b1", ".nsys-rep"), rep)
    r = run_cli("analyze", str(rep))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "Nsight Systems 2025.3.1" in line and "2022.4.2" in line
    assert "nsys export --type sqlite decode_b1.nsys-rep" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decode_b1.nsys-rep"]  # no partial export


def test_missing_nsys_is_one_clear_line(tmp_path):
    rep = tmp_path / "decode_b1.nsys-rep"
    shutil.copy(sample("decode_b1", ".nsys-rep"), rep)
    r = run_cli("analyze", str(rep), env={"PATH": "/nonexistent", "NSYS": ""})
    assert r.returncode == 2
    assert "nsys, which was not found" in r.stderr and "2025.3.1" in r.stderr


def test_explicit_nsys_path_must_exist(tmp_path):
    rep = tmp_path / "decode_b1.nsys-rep"
    shutil.copy(sample("decode_b1", ".nsys-rep"), rep)
    r = run_cli("analyze", str(rep), "--nsys", "/no/such/nsys")
    assert r.returncode == 2 and "nsys not found at '/no/such/nsys'" in r.stderr


@pytest.mark.parametrize("name", ["tp2_straggler", "tp2_exposed"])
def test_bundled_report_reuses_its_compressed_export(name):
    """The samples ship their exports as .sqlite.xz beside the report: reused (decompressed
    into the cache), without nsys, and nothing is written beside the report."""
    rep = sample(name, ".nsys-rep")
    listing = sorted(p.name for p in rep.parent.iterdir())
    r = run_cli("analyze", str(rep), "--format", "json", env={"PATH": "/nonexistent", "NSYS": ""})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"][0]["export_path"] == str(sample(name, ".sqlite.xz"))
    assert f"reused the existing export {sample(name, '.sqlite.xz')}" in d["notes"]
    assert d["summary"]["communication"]
    assert sorted(p.name for p in rep.parent.iterdir()) == listing
