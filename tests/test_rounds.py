"""Rounds of two models (store/timeline/rounds.py) on the GPUs of one job, on stores built from
case tables: a GPU whose steps are rounds keeps them beside GPUs whose steps are passes, and the
job's GPUs agree on the step count."""

from __future__ import annotations

import pytest

from nsight_doctor.rule_tests import build_case_store

# Per GPU d, 100 rounds 100 us apart, graphs traced whole: the GPU with the draft model replays
# a 6 us graph (id 1) 4 times, then a 30 us graph (id 2) once; the other replays only the 30 us
# graph. A tiny kernel, launched on its own, follows each replay.
REPLAYS = """SELECT d, row_number() OVER (ORDER BY d, i, r) - 1 AS k, i * 100000 + r * 12000 AS t,
                    CASE WHEN r = 4 THEN 30000 ELSE 6000 END AS dur, CASE WHEN r = 4 THEN 2 ELSE 1 END AS gid
             FROM range(2) c(d), range(100) a(i), range(5) b(r) WHERE d = {draft} OR r = 4"""


@pytest.mark.parametrize("draft", [0, 1])
def test_a_gpu_whose_steps_are_rounds_keeps_them_and_the_job_agrees(draft):
    p = REPLAYS.format(draft=draft)
    con = build_case_store(
        {
            "graph_launches": {
                "sql": f"""SELECT t AS start, t + dur AS "end", d AS device_id, 7 AS stream_id,
                                  1000 + k AS correlation_id, gid AS graph_id, gid AS graph_exec_id FROM ({p})"""
            },
            "kernels": {
                "sql": f"""SELECT t + dur + 3000 AS start, t + dur + 4000 AS "end", d AS device_id,
                                  100000 + k AS correlation_id, 'FillFunctor' AS name FROM ({p})"""
            },
            "api_calls": {
                "sql": f"""SELECT t - 3000 AS start, t - 1000 AS "end", 1000 + k AS correlation_id,
                                  'cudaGraphLaunch_v10000' AS name FROM ({p})
                           UNION ALL SELECT t + dur + 1000, t + dur + 2000, 100000 + k, 'cudaLaunchKernel' FROM ({p})"""
            },
        }
    )
    steps = con.execute("SELECT device_id, count(*) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
    assert steps == [(0, 100), (1, 100)]
    chosen = con.execute(
        "SELECT device_id, marker, round_passes, agreement FROM step_sources WHERE chosen ORDER BY 1"
    ).fetchall()
    assert [(d, m, rp) for d, m, rp, _ in chosen] == [
        (d, "the longer graphs' launch", 4.0) if d == draft else (d, "graph launch", None) for d in (0, 1)
    ]
    assert {a for *_, a in chosen} == {"GPUs 0, 1 of one job: 100 steps"}


def test_one_models_two_picks_a_pass_are_no_round():
    """An eager decode of 40 kernels a pass whose sampler runs an argmax twice a pass, on two row
    groups (greedy rows, then random rows), of other grids: one model, 200 passes, no round."""
    con = build_case_store(
        {
            "kernels": {
                "sql": """SELECT i * 200000 + j * 4000 AS start, i * 200000 + j * 4000 + 2000 AS "end",
                                 1 + i * 100 + j AS correlation_id,
                                 CASE WHEN j IN (30, 34) THEN 'argmax_kernel' WHEN j % 3 = 0 THEN 'gemv_kernel'
                                      ELSE 'elementwise_kernel' END AS name,
                                 CASE WHEN j = 30 THEN 2 WHEN j = 34 THEN 6 ELSE 1 + j % 4 END AS grid_x
                          FROM range(200) a(i), range(40) b(j)"""
            },
            "api_calls": {
                "sql": """SELECT i * 200000 + j * 4000 - 1500 AS start, i * 200000 + j * 4000 - 500 AS "end",
                                 1 + i * 100 + j AS correlation_id, 'cudaLaunchKernel' AS name
                          FROM range(200) a(i), range(40) b(j)"""
            },
        }
    )
    chosen = con.execute("SELECT occurrences, round_passes, evidence FROM step_sources WHERE chosen").fetchall()
    assert [(n, rp) for n, rp, _ in chosen] == [(200, None)]
    assert "two models" not in chosen[0][2]
