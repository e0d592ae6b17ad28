"""The store on its own: read-only for rules, quiet on stdout, atomic --db files."""

from __future__ import annotations

import duckdb
import pytest

from conftest import sample
from nsight_doctor import store
from nsight_doctor.errors import InputError


def test_rules_connection_is_read_only_and_closed_to_files():
    built = store.build([sample("decode_b1_graphs")])
    try:
        con = built.connect()
        with pytest.raises(duckdb.Error):
            con.execute("CREATE TABLE x (a INTEGER)")
        with pytest.raises(duckdb.Error):
            con.execute("DELETE FROM base_kernels")
        with pytest.raises(duckdb.Error):
            con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        # DuckDB's progress bar would write to stdout and corrupt JSON output.
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
    finally:
        built.close()
    assert not built.path.exists()


def test_db_file_is_written_atomically(tmp_path):
    db = tmp_path / "run.duckdb"
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(sample("decode_b1_graphs").read_bytes()[:200000])
    with pytest.raises(InputError):
        store.build([bad], db=db)
    assert list(tmp_path.iterdir()) == [bad]  # no half-written database left behind
    built = store.build([sample("decode_b1_graphs")], db=db)
    assert db.exists() and built.temporary is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sqlite", "run.duckdb"]


@pytest.mark.parametrize(
    ("name", "first_kinds"),
    [
        ("decode_b1", {"kernel"}),
        ("decode_b1_graphs", {"kernel", "graph"}),
        ("hf_cb_graphs", {"kernel", "memcpy", "memset"}),
    ],
)
def test_busy_intervals_name_their_first_operation_as_gpu_ops_does(name, first_kinds):
    """gpu_busy spells out its first operation's name and kind itself (it carries them as
    numbers through its windows); they must be gpu_ops' name and kind for that operation, and
    the intervals must tile gpu_ops exactly (every operation in one interval)."""
    built = store.build([sample(name)])
    try:
        con = built.connect()
        kinds = dict(con.execute("SELECT first_kind, count(*) FROM gpu_busy GROUP BY ALL").fetchall())
        [(unmatched,)] = con.execute(
            """SELECT count(*) FROM gpu_busy b WHERE NOT EXISTS (
                   SELECT 1 FROM gpu_ops o WHERE o.device_id = b.device_id AND o.start = b.start
                     AND o.correlation_id = b.first_correlation_id AND o.pid IS NOT DISTINCT FROM b.first_pid
                     AND o.name = b.first_name AND o.kind = b.first_kind)"""
        ).fetchall()
        [ops] = con.execute("SELECT (SELECT count(*) FROM gpu_ops), (SELECT sum(ops) FROM gpu_busy)").fetchall()
        con.close()
    finally:
        built.close()
    assert unmatched == 0
    assert ops[0] == ops[1]
    assert first_kinds <= set(kinds), kinds
