"""The store on its own: read-only for rules, quiet on stdout, atomic --db files."""

from __future__ import annotations

import duckdb
import pytest

from conftest import sample
from nsight_doctor import store
from nsight_doctor.db import scalar
from nsight_doctor.errors import InputError


@pytest.mark.parametrize("where", ["in-memory", "temporary-file", "db-file"])
def test_rules_connection_is_closed_to_files_and_settings(where, tmp_path, monkeypatch):
    """Small inputs are analysed in memory, larger ones in a temporary file, both read through
    the sandboxed connection that built them; --db stores in a file, reopened read-only. Either
    way a rule's connection reads the store and nothing else (through the building connection,
    read by the built-in rules only, the one SELECT that rules.check_select parsed runs), and
    close() removes what a temporary store left."""
    if where == "temporary-file":
        monkeypatch.setattr(store, "IN_MEMORY_MAX_MB", 0)
    db = tmp_path / "run.duckdb" if where == "db-file" else None
    built = store.build([sample("decode_b1_graphs")], db=db)
    assert (built.builder is None) == (where == "db-file")
    assert (built.path is None) == (where == "in-memory")
    try:
        assert built.path is None or built.path.exists()
        con = built.connect()
        if where == "db-file":
            with pytest.raises(duckdb.Error):
                con.execute("CREATE TABLE x (a INTEGER)")
            with pytest.raises(duckdb.Error):
                con.execute("DELETE FROM base_kernels")
        with pytest.raises(duckdb.Error):
            con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error):
            con.execute(f"ATTACH '{tmp_path / 'x.duckdb'}' AS x")
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        # DuckDB's progress bar would write to stdout and corrupt JSON output.
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
        assert con.execute("SELECT count(*) > 0 FROM kernels").fetchall() == [(True,)]
    finally:
        built.close()
    assert built.builder is None and built.spill is None
    if where == "db-file":
        assert db is not None and db.exists()
    else:
        with pytest.raises(duckdb.Error):
            con.execute("SELECT 1")  # a store read through its builder ends with close()
    if where == "temporary-file":
        assert built.path is not None and not built.path.exists() and not built.path.parent.exists()


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


def test_the_timeline_writer_raises_a_failed_write_and_an_error_of_the_pass():
    import polars as pl

    from nsight_doctor.store.timeline.frames import Writer

    con = duckdb.connect()
    steps = pl.DataFrame({"device_id": [0], "step": [1], "start": [0], "end": [10]})
    # A failed write (here: a table tables.yaml does not declare) is raised when the block ends.
    with pytest.raises(KeyError), Writer(con) as out:
        out.write("steps", steps)
        out.write("not_a_timeline_table", steps)
    assert con.execute("SELECT step, duration, busy_ns FROM steps").fetchall() == [(1, None, None)]
    # An error in the pass itself comes through, after the write under way.
    with pytest.raises(ZeroDivisionError), Writer(con) as out:
        out.write("phases", pl.DataFrame({"device_id": [0]}))
        _ = 1 / 0
    views = "SELECT count(*) FROM duckdb_views() WHERE starts_with(view_name, '_timeline')"
    assert con.execute(views).fetchone() == (0,)


def test_ctrl_c_while_the_timeline_writer_finishes_stops_its_write_before_going_on():
    """The pass ends by waiting for the writer; Ctrl-C then must not leave the write running
    while the caller removes the store (it would write a new write-ahead log there)."""
    import os
    import signal
    import threading
    import time

    import polars as pl

    from nsight_doctor.store.timeline.frames import Writer, read

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    con = duckdb.connect()
    before = signal.signal(signal.SIGUSR1, interrupt)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), Writer(con) as out:
            # A write that would take minutes (any query through the writer's cursor will do),
            # and one not begun.
            out.pending.append(out.pool.submit(read, out.cursor, "SELECT sum(hash(range)) FROM range(10_000_000_000)"))
            out.write("steps", pl.DataFrame({"device_id": [0], "step": [1], "start": [0], "end": [10]}))
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1)).start()
    finally:
        signal.signal(signal.SIGUSR1, before)
    assert time.monotonic() - t0 < 30
    assert all(f.done() for f in out.pending)
    time.sleep(0.2)
    assert [t.name for t in threading.enumerate() if t.name.startswith("timeline-writer")] == []
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'steps'").fetchone() == (0,)


def test_timeline_enum_columns_sort_as_text_and_refuse_words_they_do_not_list():
    import polars as pl

    from nsight_doctor.store.timeline.frames import tables, write
    from nsight_doctor.store.timeline.gaps import PARTS
    from nsight_doctor.store.timeline.load import KIND_NAMES

    enums = {(t.name, c.name): c.type for t in tables().values() for c in t.columns if c.type.startswith("ENUM")}
    assert ("gpu_gaps", "cause") in enums
    con = duckdb.connect()
    # The words the pass makes, from the constants it makes them with (a word that only a rare
    # gap would carry must not wait for such a gap to fail the write).
    made = {"cause": set(PARTS), "next_kind": set(KIND_NAMES.values()), "first_kind": set(KIND_NAMES.values())}
    for (table, column), sql_type in enums.items():
        words = scalar(con, f"SELECT enum_range(NULL::{sql_type})")
        # (min, max, ORDER BY and arg_min follow an ENUM's order: the same as text's only if sorted)
        assert words == sorted(words), (table, column)
        if column in made:
            assert set(words) == made[column], (table, column)
    # A word the pass makes that tables.yaml does not list fails the write, not the reader.
    write(con, "gpu_gaps", pl.DataFrame({"device_id": [0], "cause": ["cpu"]}))
    assert con.execute("SELECT cause FROM gpu_gaps WHERE cause = 'cpu'").fetchall() == [("cpu",)]
    # A rule reads them as text, words they do not list included.
    as_text = """SELECT cause = 'nope', cause IN ('cpu', 'nope'), cause LIKE 'c%', cause || '!',
                        coalesce(CASE WHEN false THEN cause END, 'none') FROM gpu_gaps"""
    assert con.execute(as_text).fetchall() == [(False, True, True, "cpu!", "none")]
    with pytest.raises(duckdb.ConversionException):
        write(con, "gpu_gaps", pl.DataFrame({"device_id": [0], "cause": ["gpu"]}), append=True)


def test_the_rules_duration_macro_prints_as_the_reports_do():
    """fmt_ns, the store's macro for durations in a rule's own evidence text, reads as the
    renderers' {x:ns} (model.fmt_ns) at every scale and on the boundaries between units."""
    from nsight_doctor.model import fmt_ns

    con = duckdb.connect()
    con.execute(store.view_files()["_fmt_ns"])
    values = [None, 0, 1, 999, 999.4, 1000, 1049, 401834, 999_949, 1_000_000, 2_109_609, 999_994_999, 1e9, 2.1e10]
    for v in values:
        assert scalar(con, "SELECT fmt_ns(?)", [v]) == fmt_ns(v), v
    assert fmt_ns(401834) == "401.8 µs"


def test_the_rules_size_macro_prints_as_the_reports_do():
    """fmt_bytes, the macro for sizes in a rule's own evidence text, reads as {x:bytes}
    (model.fmt_bytes) at every scale and on the boundaries between units."""
    from nsight_doctor.model import fmt_bytes

    con = duckdb.connect()
    con.execute(store.view_files()["_fmt_bytes"])
    values = [None, 0, 1, 999, 999.6, 1000, 999_949, 999_960, 1_000_000, 377_520_128, 12_080_644_128, 3.2e12, -5000]
    for v in values:
        assert scalar(con, "SELECT fmt_bytes(?)", [v]) == fmt_bytes(v), v
    assert fmt_bytes(377_520_128) == "377.5 MB"


def test_operator_ranges_are_named_alike_in_the_nvtx_summary_and_the_idle_code():
    """summary_nvtx (SQL) and the code named in the idle gaps (timeline/code.py) strip the same
    suffix from PyTorch's operator ranges."""
    from nsight_doctor.store.timeline.code import TORCH_OP_ARGS

    assert f"regexp_replace(text, '{TORCH_OP_ARGS}', '')" in store.view_files()["summary_nvtx"]


def test_a_wait_for_the_gil_is_one_pattern_in_the_idle_code_gpu_idle_and_the_summary():
    """The other threads' Python is sampled in the launching thread's condition waits
    (timeline/code.py), and gpu-idle and the summary line name it where the top wait is one:
    the same pattern in all three."""
    import inspect

    from nsight_doctor import rules
    from nsight_doctor.render import common
    from nsight_doctor.store.timeline.code import COND_WAIT

    rule = rules.load_rule(rules.builtin_rules_dir() / "gpu-idle.yaml")
    assert f"regexp_matches(arg_max(name, ns), '{COND_WAIT}') AS gil" in rule.query
    assert "re.match(COND_WAIT, " in inspect.getsource(common)


def test_the_rules_percentage_macro_prints_as_the_reports_do():
    """fmt_pct, the macro for shares in a rule's own evidence text, reads as {x:pct}
    (model.TemplateFormatter) on both sides of its switch from one decimal to none."""
    from nsight_doctor.model import fill

    con = duckdb.connect()
    con.execute(store.view_files()["_fmt_pct"])
    for v in [None, 0, 0.04, 7.25, 9.94, 9.96, 10, 41.5, 99.5, 100, -3.2]:
        assert scalar(con, "SELECT fmt_pct(?)", [v]) == fill("{x:pct}", {"x": v}), v
