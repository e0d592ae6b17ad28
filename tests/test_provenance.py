"""Provenance: each finding carries the SQL that produced its evidence, and running that SQL on
the kept store (--db) gives the evidence back, with the thresholds as the run had them."""

from __future__ import annotations

import math

import duckdb
import pytest

from conftest import SAMPLES, sample
from nsight_doctor import AnalyzeOptions, analyze
from nsight_doctor.db import SQL_TOKENS, bind_sql, plain


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def query_rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, map(plain, r))) for r in cur.fetchall()]


@pytest.mark.parametrize(
    "inputs,thresholds",
    [
        ([sample("decode_b1")], {}),
        ([sample("hf_cb_graphs")], {"gpu-idle.min_idle_pct": "1"}),
        ([sample("decode_b512"), SAMPLES / "ncu" / "ncu_decode_b512_full.ncu-rep.xz"], {}),
    ],
    ids=["decode_b1", "hf_cb_graphs-threshold", "decode_b512-ncu"],
)
def test_finding_sql_reproduces_its_evidence(tmp_path, inputs, thresholds):
    db = tmp_path / "store.duckdb"
    d = analyze(inputs, AnalyzeOptions(db=str(db), thresholds=thresholds))
    assert d.findings
    con = duckdb.connect(str(db), read_only=True)
    for f in d.findings:
        for sql in f.queries.values():  # every parameter is bound
            assert not [m for m in SQL_TOKENS.finditer(sql) if m.group(1)], f.rule_id
        rows = query_rows(con, f.queries["query"])
        scalars = {k: v for k, v in f.evidence.items() if not isinstance(v, list)}
        match = [r for r in rows if same(r["impact_ns"], f.impact_ns) or round(r["impact_ns"] or 0) == f.impact_ns]
        match = [r for r in match if all(same(r[k], v) for k, v in scalars.items())]
        assert match, f"{f.rule_id}: no row of its SQL equals its evidence"
        for name, value in f.evidence.items():
            if isinstance(value, list):
                got = query_rows(con, f.queries[name])
                assert len(got) == len(value), f"{f.rule_id}.{name}"
                for g, e in zip(got, value):
                    assert g.keys() == e.keys() and all(same(g[k], e[k]) for k in e), f"{f.rule_id}.{name}"
    con.close()


def test_bind_sql_leaves_strings_and_comments_alone():
    sql = "SELECT '$x' AS a, $x AS b, \"$x\" -- $x\nFROM t WHERE s = $name AND f > $f AND b = $flag /* $x */"
    out = bind_sql(sql, {"x": 3, "name": "it's", "f": 0.5, "flag": True})
    assert out == (
        "SELECT '$x' AS a, 3 AS b, \"$x\" -- $x\nFROM t WHERE s = 'it''s' AND f > 0.5::DOUBLE AND b = true /* $x */\n"
    )
