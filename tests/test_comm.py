"""Communication rules on real 2-GPU tensor-parallel captures (samples/tp2_*) and on the 4-GPU
NCCL run of the corpus (nvprof), checked with SQL on the exports."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import CORPUS, SAMPLES, requires_corpus, unxz
from nsight_doctor import analyze


@pytest.fixture(scope="module")
def tp(tmp_path_factory):
    d = tmp_path_factory.mktemp("tp")
    out = {}
    for v in ("exposed", "overlap", "straggler"):
        p = unxz(SAMPLES / f"tp2_{v}" / f"tp2_{v}.sqlite.xz", d)
        out[v] = (p, analyze([p]))
    return out


def nccl(path, device):
    """Durations of the NCCL kernels of one GPU, in launch order."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    return [
        r[0]
        for r in con.execute(
            """SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'ncclDevKernel%' AND k.deviceId = ?
        ORDER BY k.start""",
            (device,),
        )
    ]


def finding(d, rule, device=None):
    return next(
        f for f in d.findings if f.rule_id == rule and (device is None or f.evidence.get("device_id") == device)
    )


def test_exposed_transfer_and_waits_match_sql(tp):
    path, d = tp["exposed"]
    g0, g1 = nccl(path, 0), nccl(path, 1)
    assert len(g0) == len(g1) == 512  # 16 steps x 16 layers x 2 all-reduces
    transfer = sum(min(a, b) for a, b in zip(g0, g1))
    wait0 = sum(a - min(a, b) for a, b in zip(g0, g1))
    f0 = finding(d, "communication-exposed", 0)
    assert f0.evidence["transfer_ns"] == transfer
    assert f0.evidence["wait_ns"] == wait0
    assert f0.evidence["on_compute_stream"] is True and f0.evidence["overlapped_pct"] == 0
    assert f0.impact_ns == transfer  # all of it exposed
    assert f0.evidence["step_range"] == "decode_step" and f0.evidence["collectives_per_step"] == 32
    imb = finding(d, "rank-imbalance")
    assert imb.evidence["straggler"] == 1 and imb.evidence["device_id"] == 0
    assert imb.impact_ns == wait0
    assert "CPU side" in imb.message


def test_overlap_variant_overlaps_part_of_the_communication(tp):
    _, d = tp["overlap"]
    f = finding(d, "communication-exposed", 0)
    assert 15 < f.evidence["overlapped_pct"] < 40
    assert f.evidence["on_compute_stream"] is False
    # The cause first: GPU 1's launches (447 ms), then GPU 0's exposed waiting for it (414 ms).
    assert [(f.rule_id, f.evidence.get("device_id")) for f in d.findings[:2]] == [
        ("launch-bound", 1),
        ("rank-imbalance", 0),
    ]


def other_kernel_overlap(path, device) -> tuple[int, int]:
    """(NCCL kernel time, the part of it during which another kernel ran) on one GPU."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = con.execute(
        """SELECT k.start, k.end, s.value LIKE 'ncclDevKernel%' FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName WHERE k.deviceId = ? ORDER BY k.start""",
        (device,),
    ).fetchall()
    islands: list[list[int]] = []
    for a, b, is_nccl in rows:
        if is_nccl:
            continue
        if islands and a <= islands[-1][1]:
            islands[-1][1] = max(islands[-1][1], b)
        else:
            islands.append([a, b])
    total = overlap = 0
    for a, b, is_nccl in rows:
        if is_nccl:
            total += b - a
            overlap += sum(max(0, min(b, e) - max(a, s)) for s, e in islands if s < b and e > a)
    return total, overlap


def test_per_step_split_into_overlapped_and_exposed_matches_sql(tp):
    """Per step: communication = overlapped with compute + exposed transfer + exposed waiting."""
    path, d = tp["overlap"]
    f = finding(d, "communication-exposed", 0)
    comm, overlapped = other_kernel_overlap(path, 0)
    steps = f.evidence["steps"]
    assert steps == d.summary.steady_state.steps == 16
    assert f.evidence["comm_per_step_ns"] == pytest.approx(comm / steps)
    assert f.evidence["overlapped_per_step_ns"] == pytest.approx(overlapped / steps)
    parts = ("overlapped_per_step_ns", "exposed_transfer_per_step_ns", "exposed_wait_per_step_ns")
    assert sum(f.evidence[k] for k in parts) == pytest.approx(f.evidence["comm_per_step_ns"])
    assert f.impact_ns == pytest.approx(f.evidence["exposed_transfer_per_step_ns"] * steps, abs=1)
    assert "overlapped with compute" in f.message


def test_straggler_variant_names_the_extra_work(tp):
    path, d = tp["straggler"]
    imb = finding(d, "rank-imbalance")
    assert imb.evidence["straggler"] == 1
    assert imb.evidence["straggler_kernels"] > imb.evidence["waiter_kernels"]
    assert "more GPU work" in imb.message
    g0, g1 = nccl(path, 0), nccl(path, 1)
    last1 = sum(1 for a, b in zip(g0, g1) if a > b)  # GPU 0 waited longer: GPU 1 came last
    assert imb.evidence["late_pct"] == pytest.approx(100 * last1 / 512, abs=2)


def compute_ns(path, device, t0, t1):
    """GPU time of one GPU's kernels other than NCCL's inside [t0, t1]."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    return con.execute(
        """SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        WHERE s.value NOT LIKE 'ncclDevKernel%' AND k.deviceId = ? AND k.start >= ? AND k.end <= ?""",
        (device, t0, t1),
    ).fetchone()[0]


def test_overlap_straggler_with_less_work_is_late_from_its_cpu(tp):
    """In tp2_overlap the straggler (GPU 1) runs less GPU work than GPU 0 between collectives yet
    arrives last: the message says so (it once said "-14% more GPU work")."""
    path, d = tp["overlap"]
    imb = finding(d, "rank-imbalance")
    e = imb.evidence
    assert e["straggler"] == 1 and e["device_id"] == 0
    t = {p.device_id: (p.start_ns, p.end_ns) for p in d.summary.phases if p.steady}
    assert set(t) == {0, 1}  # (one steady phase per GPU)
    assert e["straggler_compute_ns"] == compute_ns(path, 1, *t[1])
    assert e["waiter_compute_ns"] == compute_ns(path, 0, *t[0])
    less = round(100 * (e["waiter_compute_ns"] - e["straggler_compute_ns"]) / e["waiter_compute_ns"])
    assert less > 5
    assert f"GPU 1 ran {less}% less GPU work than GPU 0 between collectives and still arrived last" in imb.message
    assert "-" not in imb.message.split("GPU 1 ran")[-1]


def exposed_waits(path, t0, t1) -> dict[int, float]:
    """Per GPU, independently of the tool: each NCCL kernel in [t0, t1] (the k-th launch on each
    GPU is one collective) waits its duration minus the collective's shortest duration; the
    exposed waiting is that share of the part of it with no other kernel of its GPU running."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = con.execute(
        """SELECT k.deviceId, k.start, k.end, s.value LIKE 'ncclDevKernel%' FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName ORDER BY k.deviceId, k.start"""
    ).fetchall()
    per: dict[int, list[tuple[int, int]]] = {}
    islands: dict[int, list[list[int]]] = {}
    for dev, a, b, is_nccl in rows:
        if is_nccl:
            per.setdefault(dev, []).append((a, b))
        elif islands.get(dev) and a <= islands[dev][-1][1]:
            islands[dev][-1][1] = max(islands[dev][-1][1], b)
        else:
            islands.setdefault(dev, []).append([a, b])
    out = {}
    for dev, ks in per.items():
        total = 0.0
        for k, (a, b) in enumerate(ks):
            if not (t0 <= a and b <= t1):
                continue
            transfer = min(p[k][1] - p[k][0] for p in per.values())
            covered = sum(max(0, min(b, e) - max(a, s)) for s, e in islands.get(dev, []) if s < b and e > a)
            total += (b - a - covered) * (b - a - transfer) / (b - a)
        out[dev] = total
    return out


@pytest.mark.parametrize("variant", ["overlap", "exposed"])
def test_exposed_waiting_is_one_number_everywhere(tp, variant):
    """GPU 0's waiting for GPU 1 with nothing else running: rank-imbalance's impact, the
    communication-exposed split per step, the summary, and compare's "where the time goes" all
    give the oracle's figure. (The overlap variant's collectives wait beside the other
    micro-batch's kernels: 545 ms of waiting, 414 ms of it exposed.)"""
    from nsight_doctor.compare.rows import components

    path, d = tp[variant]
    t = {p.device_id: (p.start_ns, p.end_ns) for p in d.summary.phases if p.steady}
    oracle = exposed_waits(path, *t[0])[0]
    g0 = next(g for g in d.summary.steady_gpus if g.device_id == 0)
    assert g0.comm_exposed_wait_ns == pytest.approx(oracle, rel=1e-9)
    imb = finding(d, "rank-imbalance")
    assert imb.evidence["device_id"] == 0 and imb.impact_ns == pytest.approx(oracle, abs=1)
    comm = finding(d, "communication-exposed", 0)
    steps = comm.evidence["steps"]
    assert comm.evidence["exposed_wait_per_step_ns"] * steps == pytest.approx(oracle, rel=1e-9)
    # compare's split shares the steps' busy time: its waiting is the same share of it.
    parts = g0.step_parts
    busy = (parts.gpu_ns + parts.blocked_ns) * parts.steps
    assert components(g0)["wait:collectives"] == pytest.approx(busy * oracle / g0.busy_ns, rel=1e-9)
    if variant == "overlap":
        assert oracle < 0.8 * g0.comm_wait_ns  # (the case the total would overstate)
    else:
        assert oracle == pytest.approx(g0.comm_wait_ns)  # (on the compute stream: all exposed)


def test_summary_reports_the_nccl_share_per_gpu(tp):
    _, d = tp["exposed"]
    comm = {c["device_id"]: c for c in d.summary.to_json()["communication"]}
    assert set(comm) == {0, 1} and comm[0]["collectives"] == 512 and comm[0]["ranks"] == 2
    assert comm[0]["comm_ns"] == comm[0]["transfer_ns"] + comm[0]["wait_ns"]


@requires_corpus
def test_four_gpu_nccl_run_recorded_by_nvprof():
    d = analyze([CORPUS / "UCBerkeley-Spring2022-CS267-project__blinkplus-nccl-base" / "output.nvvp"])
    comm = d.summary.to_json()["communication"]
    # 12 tree all-reduces and 12 ring broadcasts (MANIFEST.tsv) over 4 V100s.
    assert len(comm) == 4 and sum(c["collectives"] for c in comm) == 24
    assert all(c["comm_ns"] == c["transfer_ns"] + c["wait_ns"] for c in comm)
    # Communication is 1.5% of a 10 s window dominated by start-up ...
    assert all(c["comm_pct"] < 2 for c in comm)
    # ... but the findings judge the steady state, which is the collectives themselves (a
    # bandwidth test): all of it exposed, nothing overlapped.
    exposed = [f for f in d.findings if f.rule_id == "communication-exposed"]
    assert {f.evidence["device_id"] for f in exposed} == {0, 1, 2, 3}
    for f in exposed:
        assert f.evidence["overlapped_pct"] == 0 and f.evidence["collectives"] in (4, 8)
        assert f.impact_ns == pytest.approx(f.evidence["transfer_ns"], abs=1)
