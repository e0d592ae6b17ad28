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
