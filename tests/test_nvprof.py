"""Legacy nvprof databases (.nvvp, .prof) through the same analysis, on the real files of
../shared/corpus: schema versions 11, 12 and 16, a full profile, empty ones, and a 4-GPU NCCL
run. Numbers are checked with SQL on the nvprof tables themselves."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from conftest import CORPUS, requires_corpus, run_cli, sha256
from nsight_doctor import analyze
from nsight_doctor.ingest.detect import detect

ABACUS = CORPUS / "Raphael-Hao__Abacus" / "op_profile__tune.prof"
NCCL = CORPUS / "UCBerkeley-Spring2022-CS267-project__blinkplus-nccl-base" / "output.nvvp"
EMPTY = CORPUS / "SwatikSahoo__profile" / "profile.nvvp"
SMALL = CORPUS / "dipsankarb__csl7520" / "profile.nvvp"

pytestmark = requires_corpus


def raw(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def test_full_profile_maps_into_the_views():
    before = sha256(ABACUS)
    d = analyze([ABACUS])
    con = raw(ABACUS)
    n, total = con.execute("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL").fetchone()
    assert d.summary.to_json()["kernel_count"] == n == 8432
    assert d.summary.to_json()["gpus"][0]["kernel_ns"] == total
    assert d.inputs[0]["kind"] == "nvprof" and d.inputs[0]["producer_version"] == "database schema 12"
    # Names are demangled to the short form nsys uses.
    names = [k["name"] for k in d.summary.to_json()["top_kernels"]]
    assert "volta_scudnn_128x64_relu_interior_nn_v1" in names and "implicit_convolve_sgemm" in names
    # API calls are named from their CUPTI callback ids.
    launches = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE cbid = 211").fetchone()[0]
    assert d.summary.to_json()["launch"]["api_count"] == launches
    # One definition of a blocking call: the synchronize calls and the 10 synchronous
    # host-to-device copies; the summary's total is the sum of its parts, and the finding counts
    # those of the steady state.
    syncs = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE cbid IN (131, 137, 165)").fetchone()[0]
    copies = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE cbid = 31").fetchone()[0]
    assert d.summary.sync.blocking_count == syncs + copies == 146
    assert sum(a.count for a in d.summary.sync.by_api) == d.summary.sync.blocking_count
    f = next(f for f in d.findings if f.rule_id == "host-sync")
    assert f.evidence["blocking_calls"] == d.summary.sync.steady_blocking_count > 0
    assert any("no GPU time per NVTX range" in n for n in d.notes)
    assert sha256(ABACUS) == before


def test_device_table_names_the_gpus_of_a_4_gpu_nccl_run():
    d = analyze([NCCL])
    con = raw(NCCL)
    devices = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_DEVICE").fetchone()[0]
    assert len(d.summary.to_json()["gpus"]) == devices == 8
    assert {g["name"] for g in d.summary.to_json()["gpus"]} == {"Tesla V100-SXM2-32GB"}
    busy = [g for g in d.summary.to_json()["gpus"] if g["busy_ns"]]
    assert len(busy) == 4
    assert d.summary.to_json()["top_kernels"][0]["name"] == "ncclAllReduceTreeLLKernel_sum_i32"
    assert d.summary.to_json()["gpus"][0]["sm_count"] == 80


def test_empty_database_is_analysed_and_says_so():
    d = analyze([EMPTY])
    assert d.summary.to_json()["kernel_count"] == 0
    assert [f.rule_id for f in d.findings] == ["no-gpu-activity"]
    assert any("holds no activity" in n for n in d.notes)


def test_content_detection_ignores_the_extension(tmp_path):
    p = tmp_path / "renamed.sqlite"
    shutil.copy(SMALL, p)
    assert detect(p).kind == "nvprof"
    r = run_cli("analyze", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"][0]["kind"] == "nvprof"
    assert d["summary"]["top_kernels"][0]["name"] == "squareMatrixGpu"


def test_truncated_nvprof_database(tmp_path):
    p = tmp_path / "half.nvvp"
    data = ABACUS.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    r = run_cli("analyze", str(p))
    assert r.returncode == 2 and "truncated" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "path",
    sorted(CORPUS.glob("*/*.nvvp")) + sorted(CORPUS.glob("*/*.prof")) if CORPUS.is_dir() else [],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_corpus_nvprof_file_analyses(path):
    d = analyze([path])
    assert d.inputs[0]["kind"] == "nvprof"
