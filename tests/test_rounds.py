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


# Per step i (100 of them, 100 us apart): graph 1 (20 us), graph 2 (12 us) right after it, then
# the step's token read back (a 4-byte copy to the host, the step's one round trip). With
# stop_check, graph 2 runs only every 5th step (a check, not part of a pass).
CYCLE = """SELECT row_number() OVER (ORDER BY i, r) - 1 AS k, i * 100000 + r * 22000 AS t,
                  CASE WHEN r = 0 THEN 20000 ELSE 12000 END AS dur, r + 1 AS gid, i
           FROM range(100) a(i), range(2) b(r) WHERE r = 0 OR NOT {stop_check} OR i % 5 = 4"""


def cycle_store(stop_check: bool, steps: int = 100, cut: bool = False):
    """CYCLE over `steps` steps; cut: the capture ends before the last step's second graph
    (and its read)."""
    c = CYCLE.replace("range(100)", f"range({steps})").format(stop_check=str(stop_check).lower())
    if cut:
        c = f"SELECT * FROM ({c}) WHERE NOT (i = {steps - 1} AND gid = 2)"
    reads = steps - 1 if cut else steps
    return build_case_store(
        {
            "graph_launches": {
                "sql": f"""SELECT t AS start, t + dur AS "end", 0 AS device_id, 7 AS stream_id,
                                  1000 + k AS correlation_id, gid AS graph_id, gid AS graph_exec_id FROM ({c})"""
            },
            "memcpy": {
                "sql": f"""SELECT i * 100000 + 40000 AS start, i * 100000 + 41000 AS "end", 0 AS device_id,
                                  7 AS stream_id, 100000 + i AS correlation_id, 4 AS bytes, 'DtoH' AS direction,
                                  'device' AS src_kind, 'pageable' AS dst_kind
                           FROM range({reads}) a(i)"""
            },
            "api_calls": {
                "sql": f"""SELECT t - 3000 AS start, t - 1000 AS "end", 1000 + k AS correlation_id,
                                  'cudaGraphLaunch_v10000' AS name FROM ({c})
                           UNION ALL SELECT i * 100000 + 39000, i * 100000 + 42000, 100000 + i, 'cudaMemcpyAsync_v3020'
                           FROM range({reads}) a(i)
                           UNION ALL SELECT i * 100000 + 42000, i * 100000 + 42500, 200000 + i,
                                            'cudaStreamSynchronize_v3020' FROM range({reads}) a(i)"""
            },
        }
    )


def test_a_pass_in_two_graphs_replayed_in_turn_is_one_step():
    con = cycle_store(stop_check=False)
    assert con.execute("SELECT count(*) FROM steps").fetchone() == (100,)
    # (each step holds both replays)
    per_step = con.execute(
        """SELECT count(*) FROM steps s JOIN base_graph_launches g
             ON g.start >= s.start AND g.start < s."end" GROUP BY s.step ORDER BY 1"""
    ).fetchall()
    assert {n for (n,) in per_step} == {2}


def test_a_graph_that_runs_every_few_passes_is_no_part_of_a_pass():
    con = cycle_store(stop_check=True)
    assert con.execute("SELECT count(*) FROM steps").fetchone() == (120,)


def test_graphs_in_turn_cut_by_the_capture_are_still_one_step_a_turn():
    """The cycle of 30 steps, the capture cut before the last step's second graph: the two
    graphs recur 30 and 29 times (two levels), and still each turn is a step, hedged as one."""
    con = cycle_store(stop_check=False, steps=30, cut=True)
    assert con.execute("SELECT graph_id, count(*) FROM base_graph_launches GROUP BY 1 ORDER BY 1").fetchall() == [
        (1, 30),
        (2, 29),
    ]
    assert con.execute("SELECT count(*), any_value(confidence) FROM steps").fetchone() == (30, "medium")
    chosen = con.execute("SELECT evidence FROM step_sources WHERE chosen").fetchall()
    assert len(chosen) == 1 and "2 CUDA graphs replayed in turn" in chosen[0][0]


@pytest.mark.parametrize("combine", [False, True])
def test_a_gather_once_a_layer_is_no_token_lookup(combine):
    """60 eager decode passes of 8 layers, each layer [GEMM, PyTorch's vectorized gather (a paged
    cache's blocks), attention (one kernel, or split-KV and its combine), GEMM], then the head
    and an argmax, the token read back: the argmax marks the 60 steps, not the gather's 480."""
    names = ["nvjet_a", "vectorized_gather_kernel", "flash_fwd_splitkv_kernel"]
    names += ["flash_fwd_splitkv_combine_kernel"] if combine else []
    names += ["nvjet_b"]
    w, end = len(names), 8 * len(names) * 3000
    arr = "[" + ", ".join(f"'{n}'" for n in names) + "]"
    k = f"""SELECT i * 200000 + j * 3000 AS s, i * 1000 + j AS c,
                   CASE WHEN j < {8 * w} THEN {arr}[1 + j % {w}] WHEN j = {8 * w} THEN 'nvjet_head'
                        ELSE 'argmax_kernel' END AS name
            FROM range(60) a(i), range({8 * w + 2}) b(j)"""
    con = build_case_store(
        {
            "kernels": {"sql": f"""SELECT s AS start, s + 2000 AS "end", c AS correlation_id, name FROM ({k})"""},
            "memcpy": {
                "sql": f"""SELECT i * 200000 + {end} + 6000 AS start, i * 200000 + {end} + 7000 AS "end",
                                  0 AS device_id, 7 AS stream_id, 900000 + i AS correlation_id, 4 AS bytes,
                                  'DtoH' AS direction, 'device' AS src_kind, 'pageable' AS dst_kind
                           FROM range(60) a(i)"""
            },
            "api_calls": {
                "sql": f"""SELECT s - 1500 AS start, s - 500 AS "end", c AS correlation_id, 'cudaLaunchKernel' AS name
                           FROM ({k})
                           UNION ALL SELECT i * 200000 + {end} + 5500, i * 200000 + {end} + 7500, 900000 + i,
                                            'cudaMemcpyAsync_v3020' FROM range(60) a(i)"""
            },
        }
    )
    assert con.execute("SELECT count(*) FROM steps").fetchall() == [(60,)]
    assert con.execute("SELECT marks FROM step_sources WHERE chosen").fetchone() == ("sampling",)


def test_a_decode_loop_sampling_on_the_host_whose_attention_grows_is_not_all_prefill():
    """40 eager decode steps, each a token lookup, GEMMs and norms of the same grids every step,
    and an attention kernel whose grid grows with the KV cache (44% of the step's kernel time),
    then the logits read back (64 KiB) and sampled on the host: no sampling kernel. Every step
    is different (its attention is new), but only attention's shapes change: these are not
    prompts of their own, as an encoder's padded batches are (a reviewer's case)."""
    con = build_case_store(
        {
            "kernels": {
                "sql": """SELECT i * 1000000 + j * 20000 AS start,
                                 i * 1000000 + j * 20000
                                 + CASE WHEN j = 0 THEN 5000 WHEN j = 7 THEN 60000 ELSE 10000 END AS "end",
                                 1 + i * 100 + j AS correlation_id,
                                 CASE WHEN j = 0 THEN 'indexSelectSmallIndex' WHEN j = 7 THEN 'flash_fwd_splitkv_kernel'
                                      WHEN j % 2 = 1 OR j = 8 THEN 'nvjet_sm90_tst_128x8_64x12_4x1_v_bz_TNT'
                                      ELSE 'rms_norm_kernel' END AS name,
                                 CASE WHEN j = 7 THEN 1 + i WHEN j = 8 THEN 16 ELSE 4 END AS grid_x
                          FROM range(40) a(i), range(9) b(j)"""
            },
            "memcpy": {
                "sql": """SELECT i * 1000000 + 300000 AS start, i * 1000000 + 310000 AS "end",
                                 5000 + i AS correlation_id, 65536 AS bytes, 'DtoH' AS direction,
                                 'device' AS src_kind, 'pageable' AS dst_kind
                          FROM range(40) a(i)"""
            },
            "api_calls": {
                "sql": """SELECT i * 1000000 + j * 20000 - 1500 AS start, i * 1000000 + j * 20000 - 500 AS "end",
                                 1 + i * 100 + j AS correlation_id, 'cudaLaunchKernel' AS name
                          FROM range(40) a(i), range(9) b(j)
                          UNION ALL SELECT i * 1000000 + 200000, i * 1000000 + 311000, 5000 + i, 'cudaMemcpyAsync_v3020'
                          FROM range(40) a(i)"""
            },
        }
    )
    assert con.execute("SELECT count(*) FROM steps").fetchone() == (40,)
    kinds = dict(
        con.execute(
            """SELECT p.name, count(*) FROM steps s JOIN phases p
                 ON p.device_id = s.device_id AND s.start >= p.start AND s.start < p."end" GROUP BY 1"""
        ).fetchall()
    )
    assert kinds.get("prefill", 0) <= 1, kinds
