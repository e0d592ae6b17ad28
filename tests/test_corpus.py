"""Compatibility over other people's real profiles in ../shared/corpus (many nsys versions).

Every SQLite export there, and every report, either analyses without error or, for a report
that the installed nsys is too old to export, gives the one-line version message.
Skipped with a reason when the corpus folder is absent (e.g. on a user's machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS, requires_corpus, requires_nsys, run_cli, sha256
from nsight_doctor import analyze, store
from nsight_doctor.errors import ReportVersionError
from nsight_doctor.ingest.detect import detect


def corpus_files(*suffixes: str) -> list:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.glob("*/*") if p.name.endswith(suffixes))


def ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


SQLITE = [p for p in corpus_files(".sqlite") if detect(p).kind == "nsys-sqlite"]
REPORTS = corpus_files(".nsys-rep", ".qdrep")


@requires_corpus
@pytest.mark.parametrize("path", SQLITE, ids=ids(SQLITE))
def test_every_sqlite_export_analyses(path):
    before = sha256(path)
    d = analyze([path])
    assert d.summary.to_json()["capture_ns"] is not None
    no_gpu_work = d.summary.to_json()["gpu_window_ns"] is None
    assert no_gpu_work == ("no-gpu-activity" in [f.rule_id for f in d.findings])
    assert sha256(path) == before


@requires_corpus
@requires_nsys
@pytest.mark.parametrize("path", REPORTS, ids=ids(REPORTS))
def test_every_report_analyses_or_gives_the_version_message(path, private_cache):
    before = sha256(path)
    listing = sorted(q.name for q in path.parent.iterdir())
    export: Path | None = None
    try:
        d = analyze([path])
    except ReportVersionError as e:
        msg = str(e)
        assert "cannot read it" in msg and "nsys export --type sqlite" in msg
        assert "was written by Nsight Systems 20" in msg  # the report's own version is named
    else:
        assert d.inputs[0]["kind"] == "nsys-rep"
        # An export beside the report (the author's own, or one made here and labelled
        # with its nsys) is reused; one made now goes beside the report when the folder is
        # writable (a copy of the corpus), else to the cache (the corpus itself is read-only).
        export = Path(d.inputs[0]["export_path"])
        assert export.is_relative_to(private_cache) or export.parent == path.parent
    assert sha256(path) == before
    # Nothing else changes in the folder: at most the export that the tool reported appears.
    after = sorted(q.name for q in path.parent.iterdir())
    added = set(after) - set(listing)
    assert set(listing) <= set(after)
    assert not added or (export is not None and added == {export.name}), added


@requires_corpus
@requires_nsys
def test_too_new_report_message_on_the_command_line():
    path = next(p for p in REPORTS if "HalfEmptyDrum" in str(p))  # nsys 2026.1
    r = run_cli("analyze", str(path))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Nsight Systems 2026.1.2.63" in r.stderr and "2022.4" in r.stderr
    assert "nsys export --type sqlite myrun.nsys-rep" in r.stderr


@requires_corpus
def test_gpu_metrics_of_a_2022_4_export_are_read_from_generic_events():
    """nsys 2022.4 exports keep GPU metric samples as JSON in GENERIC_EVENTS."""
    path = CORPUS / "als244__ResourceEstimation" / "reports__report2.export-nsys2022.4.sqlite"
    d = analyze([path])
    metrics = d.summary.to_json()["gpu_metrics"]["0"]
    assert metrics["sm_active"]["metric"] == "SM Active"
    assert metrics["dram_read"]["metric"] == "DRAM Read Throughput"
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    n = con.execute("SELECT count(*) FROM GENERIC_EVENTS").fetchone()[0]
    avg = con.execute("SELECT avg(CAST(json_extract(data, '$.\"SM Active\"') AS REAL)) FROM GENERIC_EVENTS").fetchone()[
        0
    ]
    assert metrics["sm_active"]["samples"] == n
    assert metrics["sm_active"]["avg"] == pytest.approx(avg)
    # The samples show SMs busy while this process's 4 kernels were not: the busy-time
    # estimate is withheld rather than capped, and low-sm-activity does not fire.
    assert metrics["sm_active"]["avg_busy"] is None
    assert "low-sm-activity" not in [f.rule_id for f in d.findings]


@requires_corpus
def test_a_first_pass_that_compiles_is_warm_up_not_steady_state():
    """SGLang's first request (one A100 of eight): 16 ms of work, then 511 ms compiling its
    Triton attention kernel (cuModuleLoadData before the first `_fwd_kernel`), then that one
    kernel. The work before the compile is the first pass: with the compile, one warm-up
    phase; what is left is too short to judge."""
    d = analyze([CORPUS / "flyinglandlord__sglang" / "baseline-report.export-nsys2025.3.sqlite"])
    names = [p.name for p in d.summary.phases if p.device_id == 0]
    assert names == ["startup", "warmup", "steady"]
    warmup = next(p for p in d.summary.phases if p.name == "warmup")
    assert warmup.duration_ns > 16e6 + 511e6 and warmup.busy_pct is not None and warmup.busy_pct < 1
    assert d.summary.steady_state is not None and d.summary.steady_state.window_ns < 1e6
    assert not [f for f in d.findings if f.scope == "steady"]
    short = [f for f in d.findings if f.rule_id == "short-capture"]
    assert short and "steady state holds only 1 GPU operation over" in short[0].title
    assert [f.rule_id for f in d.findings if f.scope == "startup"] == ["startup"]


@requires_corpus
def test_triton_compiles_between_benchmark_loops_are_steady_state_cost():
    """FlagGems' operator benchmark (one A100): each new shape synchronises, then Triton
    compiles for over a second (cuModuleLoadData at the end of it) before the next loop. Those
    gaps are set-up, not host code, though a blocking call returned in them. They recur all
    through the sweep, so they are the steady state's cost (steady-compile), not start-up; and
    the loops cut apart by the compiles each count their own steps."""
    path = CORPUS / "FlagOpen__FlagGems" / "report1.export-nsys2025.3.sqlite"
    d = analyze([path])
    largest = [g for g in d.summary.idle.largest if g.duration >= 1e9]
    assert len(largest) >= 3 and {g.cause for g in largest} == {"setup"}
    top = d.findings[0]
    assert top.rule_id == "steady-compile" and top.evidence["gaps"] >= 15
    assert "compiling on the CPU outside CUDA" in top.message
    assert not [f for f in d.findings if f.rule_id == "startup" and f.impact_ns > 0.1 * top.impact_ns]

    built = store.build([path])
    try:
        con = built.connect()
        steps = dict(con.execute("SELECT device_id, count(*) FROM steps GROUP BY ALL").fetchall())
        per_phase = dict(con.execute("SELECT device_id, sum(steps) FROM phases GROUP BY ALL").fetchall())
        pieces = con.execute("SELECT count(*) FROM phases WHERE steady AND steps IS NULL").fetchall()[0][0]
        con.close()
    finally:
        built.close()
    # Every step in exactly one phase: the pieces do not repeat the whole phase's count.
    assert steps == {k: v for k, v in per_phase.items() if v is not None} and steps[0] > 1000
    assert pieces > 0


@requires_corpus
def test_jax_first_calls_that_only_compile_are_warm_up_not_a_steady_state():
    """Alpa's JAX example (one RTX 3090): 14 kernels in 950 ms, the GPU idle while XLA compiles
    and links each new fusion (cuLinkCreate, cuModuleLoadFatBinary). No step recurs, and the GPU
    waited for new code most of the time: warm-up, which the start-up finding reports; there is
    no steady state to judge, so no steady-state finding (steady-compile said 478 ms before)."""
    path = CORPUS / "Yu-gyoung-Yun__alpa" / "examples__jax_profile_mem.export-nsys2022.4.sqlite"
    d = analyze([path])
    assert {p.name for p in d.summary.phases} == {"startup", "warmup"}
    assert not [f for f in d.findings if f.scope == "steady"]
    [startup] = [f for f in d.findings if f.rule_id == "startup"]
    assert "no steady state" in startup.title
    assert "idle while kernel code was built and loaded" in startup.message


@requires_corpus
def test_random_numbers_then_a_gemm_then_a_softmax_is_not_attention():
    """A loop of randn, randn, sgemm, softmax, 16 times (one GEMM per iteration): the GEMM
    after a softmax is the next iteration's, the same kernel at the same launch, and the
    kernels between are random-number generators, not a scale and a mask."""
    d = analyze([CORPUS / "Sh1mwww__llama3-inference" / "demo.sqlite"])
    assert "unfused-attention" not in [f.rule_id for f in d.findings]
    assert "attention-unfused" not in [c.category for c in d.summary.kernel_categories]


@requires_corpus
def test_a_kernel_with_nan_metrics_leaves_the_others_intact():
    """An Nsight Compute report in which one kernel's metrics are NaN (it was not measured):
    a note says so, and every other kernel keeps its share of the profiled time."""
    d = analyze([CORPUS / "AveryClapp__ESMM-Research" / "8fce6633__profile.ncu-rep"])
    assert any("not a number (NaN or infinite)" in n for n in d.notes)
    assert d.summary.ncu is not None
    measured = [g for g in d.summary.ncu.groups if g.duration_ns is not None]
    shares = [g.share_pct for g in measured if g.share_pct is not None]
    assert len(measured) == 3 and len(shares) == 3
    assert sum(shares) == pytest.approx(100)
    for f in d.findings:
        assert "n/a of GPU time" not in f.title + f.message, f.rule_id


@requires_corpus
def test_nvfuser_kernels_name_nvfuser_not_pytorch():
    """A capture whose hot kernel is nvFuser's generated CudaCodeGen::kernel1."""
    d = analyze([CORPUS / "Young768__profiling_" / "fusion.export-nsys2025.3.sqlite"])
    assert d.summary.framework.name == "nvfuser"
    assert "CudaCodeGen" in (d.summary.framework.evidence or "")


@requires_corpus
def test_a_busy_cnn_is_gpu_bound_with_its_layout_conversions_named():
    """A CNN in fp16 on a TITAN RTX, its GPU busy 98% of the steady state: the top finding is
    that its kernels set the pace, not a 112-byte pageable copy. cuDNN converts between NCHW
    and NHWC around its convolutions; the time counted matches plain SQL over the export, and
    the advice names a CNN's kernels (channels_last, normalisation, activation)."""
    import sqlite3

    path = CORPUS / "Raphael-Hao__Abacus" / "report2.export-nsys2022.4.sqlite"
    d = analyze([path])
    f = d.findings[0]
    assert f.rule_id == "gpu-bound", [x.rule_id for x in d.findings]
    st = d.summary.steady_state
    assert st is not None
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    (layout,) = con.execute(
        """SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        WHERE (s.value LIKE 'nchwToNhwc%' OR s.value LIKE 'nhwcToNchw%') AND k.start >= ? AND k.end <= ?""",
        (st.start_ns, st.end_ns),
    ).fetchone()
    assert layout > 0.1 * st.window_ns
    assert f.evidence["layout_ns"] == layout
    assert "channels_last" in f.recommendation
    assert "normalisation and activation kernels" in f.recommendation
