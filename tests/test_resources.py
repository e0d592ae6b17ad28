"""Bounded resources and clean interruption, on real runs of the command line:

- Ctrl-C (SIGINT sent to the real process) at any stage: "nsight-doctor: interrupted", exit
  130, and no partial store, export or decompressed copy left anywhere;
- --memory-limit reaches DuckDB; hitting it is one clear line; below it, work spills to a
  private folder that is removed afterwards;
- an nsys export that runs too long is killed with its whole process group, and its partial
  output removed; while it runs, a terminal shows its elapsed time;
- a cache folder that cannot be written is replaced by a temporary one, and the diagnosis
  says so.

A real nsys cannot be made to hang on demand, so the export tests run a stand-in for nsys (a
script given with --nsys) that behaves as a stuck or slow one would: it starts a child
process, writes partial output, and sleeps. Everything else is the real tool on real files.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

from conftest import REPO, SAMPLES, run_cli, sample, sha256
from nsight_doctor.runtime import duckdb_threads
from nsight_doctor.store import store_config

B1 = str(sample("decode_b1"))


def cli_process(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nsight_doctor", *args],
        env={**os.environ, **env},
        cwd=REPO,
        **kwargs,
    )


def leftovers(*folders: Path) -> list[str]:
    """Files and folders that an interrupted or failed run must not leave: anything in its
    private TMPDIR, and partial files (ours are named .partial-*, .*.partial-<pid>,
    .nsight-doctor-export-*) anywhere."""
    out = []
    for folder in folders:
        for p in folder.rglob("*"):
            if folder.name == "tmp" or "partial" in p.name or p.name.startswith(".nsight-doctor"):
                out.append(str(p))
    return out


def dead(pid: int) -> bool:
    """Whether a process is gone (a zombie that nobody reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


# --- Ctrl-C ------------------------------------------------------------------------------

INTERRUPTED = [
    # A 1.7 MB xz export of a 2-GPU capture: decompression, ingest, views, rules.
    sample("tp2_overlap", ".sqlite.xz"),
    # An Nsight Compute report: decompression, then the reader in a child process.
    SAMPLES / "ncu" / "ncu_decode_b1_basic.ncu-rep.xz",
]


@contextlib.contextmanager
def the_commands_handler():
    """The command's Ctrl-C handler, in place for the block (the test process's after it)."""
    from nsight_doctor.errors import install_interrupt_handler

    previous = signal.getsignal(signal.SIGINT)
    try:
        install_interrupt_handler()
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler)
        yield handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_polars_python_code_comes_again_outside_it():
    """Polars' Rust calls Python back (the dtype objects of a frame's schema), and Ctrl-C raised
    in such a call is a Rust panic printed with a backtrace (a run of the test below once ended
    so). The command's handler puts it off while the frame it lands in is Polars' own."""
    import polars as pl

    from nsight_doctor.errors import in_polars

    frames = []

    def profile(frame, event, arg):
        if event == "call" and in_polars(frame):
            frames.append(frame)

    sys.setprofile(profile)
    try:
        _ = pl.DataFrame({"a": [1]}).schema
    finally:
        sys.setprofile(None)
    assert frames, "Polars ran no Python code of its own"
    assert not in_polars(sys._getframe())
    with the_commands_handler() as handler:
        try:
            handler(signal.SIGINT, frames[-1])
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C was raised in Polars' frame")
        with pytest.raises(KeyboardInterrupt):
            time.sleep(2)  # and sent again, to land here
        with pytest.raises(KeyboardInterrupt):
            handler(signal.SIGINT, sys._getframe())


def test_ctrl_c_in_code_whose_exceptions_python_ignores_comes_again_outside_it(tmp_path, monkeypatch):
    """An exception raised in a finalizer or in importlib's own callbacks is printed as
    "Exception ignored in ..." with a traceback, and the run goes on (a run of the test below
    once ended so, from a module lock's weak-reference callback)."""
    from nsight_doctor.errors import put_off

    frames = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith("<frozen importlib"):
            frames.append(frame)

    (tmp_path / "nd_fresh_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.setprofile(profile)
    try:
        import nd_fresh_module  # noqa: F401
    finally:
        sys.setprofile(None)
        sys.modules.pop("nd_fresh_module", None)
    assert frames, "the import ran no code of importlib's"

    class Finalized:
        def __del__(self):
            frames.append(sys._getframe())

    Finalized()
    assert frames[-1].f_code.co_name == "__del__"
    assert all(put_off(f) for f in frames)
    assert not put_off(sys._getframe())
    with the_commands_handler() as handler:
        handler(signal.SIGINT, frames[0])  # not raised: sent again
        with pytest.raises(KeyboardInterrupt):
            time.sleep(2)


def ctrl_c_after(monkeypatch, call: str, made) -> None:
    """Sends SIGINT right after os.<call> ("open" or "mkdir") made a path for which made(path)
    holds, wherever the code calls it."""
    real = getattr(os, call)

    def then_ctrl_c(path, *args, **kwargs):
        result = real(path, *args, **kwargs)
        if made(os.fsdecode(path)):
            os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(os, call, then_ctrl_c)


def partial(path: str) -> bool:
    return os.path.basename(path).startswith(".partial-")


def test_an_interrupt_during_an_atomic_write_arrives_after_it(tmp_path, monkeypatch):
    """Ctrl-C right after the temporary file is created (where a run of the test below once
    left a .partial- file in the rules cache): the write completes, then the interrupt."""
    from nsight_doctor.cachedir import write_atomic

    target = tmp_path / "cache" / "entry.json"
    ctrl_c_after(monkeypatch, "open", partial)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "{}")
    monkeypatch.undo()
    assert target.read_text() == "{}"
    assert leftovers(tmp_path / "cache") == []


def test_an_interrupt_while_python_probes_the_temporary_folder_leaves_no_probe(tmp_path, monkeypatch):
    """Python picks the temporary folder, the first time, by writing a probe file there and
    removing it: Ctrl-C right after the probe is made arrives once it is removed (a run of the
    test below once left one in its TMPDIR)."""
    import tempfile

    from nsight_doctor.cachedir import temp_root

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # (not chosen yet)
    ctrl_c_after(monkeypatch, "open", lambda path: os.path.dirname(path) == str(folder))
    with pytest.raises(KeyboardInterrupt):
        temp_root()
    monkeypatch.undo()
    assert list(folder.iterdir()) == []


def test_an_interrupt_as_a_compressed_input_is_unpacked_leaves_no_partial_copy(tmp_path, monkeypatch):
    """Ctrl-C right after the decompressed copy's temporary file is created (a run of the test
    below once left one in the cache): it is removed on the way out."""
    from nsight_doctor.ingest import cache

    monkeypatch.setenv("NSIGHT_DOCTOR_CACHE", str(tmp_path / "cache"))
    src = sample("tp2_overlap", ".sqlite.xz")
    ctrl_c_after(monkeypatch, "open", partial)
    with pytest.raises(KeyboardInterrupt):
        cache.unpack(src, "xz", src)
    monkeypatch.undo()
    assert (tmp_path / "cache").is_dir()
    assert leftovers(tmp_path / "cache") == []


def test_an_interrupt_as_an_archive_is_unpacked_leaves_no_partial_folder(tmp_path, monkeypatch):
    """Ctrl-C right after the folder an archive is unpacked into is made: it is removed."""
    import tarfile

    from nsight_doctor.archive.discover import unpack_archive

    archive = tmp_path / "profiles.tar"
    with tarfile.open(archive, "w") as tf:
        tf.add(sample("tp2_overlap", ".sqlite.xz"), arcname="tp2_overlap.sqlite.xz")
    monkeypatch.setenv("NSIGHT_DOCTOR_CACHE", str(tmp_path / "cache"))
    ctrl_c_after(monkeypatch, "mkdir", partial)
    with pytest.raises(KeyboardInterrupt):
        unpack_archive(archive, "tar")
    monkeypatch.undo()
    assert (tmp_path / "cache" / "archives").is_dir()
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.parametrize("inp", INTERRUPTED, ids=[p.name for p in INTERRUPTED])
def test_ctrl_c_at_any_stage_exits_130_and_leaves_nothing(inp, tmp_path):
    """SIGINT at fractions of a full run's duration: every stage gets interrupted somewhere."""
    out = tmp_path / "out"
    out.mkdir()
    full = run_in(tmp_path / "full", inp, out / "full.duckdb")
    assert full[0] == 0, full[1]
    duration = full[2]
    interrupted = 0
    for fraction in (0.05, 0.15, 0.3, 0.5, 0.7, 0.9):
        work = tmp_path / f"at{fraction}"
        db = out / f"at{fraction}.duckdb"
        rc, err, _ = run_in(work, inp, db, interrupt_after=fraction * duration)
        if rc == -signal.SIGINT:
            # Arrived before the command's handler was in place (the first tens of ms on a
            # loaded machine): Python's own default action ended it before it did anything,
            # silently or, once the interpreter is up, with its KeyboardInterrupt traceback
            # from the imports that precede the handler (a few ms of them: __main__).
            assert err.strip() == "" or err.strip().splitlines()[-1] == "KeyboardInterrupt", err
            assert "nsight_doctor/cli" not in err and "nsight_doctor/store" not in err, err
            assert not db.exists()
            assert leftovers(work / "tmp", work / "cache", out) == []
            continue
        assert "Traceback" not in err and "internal error" not in err, err
        if rc == 0:
            continue  # finished before the signal arrived
        interrupted += 1
        assert rc == 130, err
        assert err.strip().splitlines()[-1] == "nsight-doctor: interrupted", err
        if db.exists():  # interrupted after the store was complete: it is kept, whole
            con = duckdb.connect(str(db), read_only=True)
            assert con.execute("SELECT count(*) FROM nsight_doctor_meta").fetchone() == (1,)
            con.close()
        assert leftovers(work / "tmp", work / "cache", out) == []
    assert interrupted >= 3


def test_sigterm_mid_run_cleans_up_as_ctrl_c_does_and_exits_143(tmp_path):
    """SIGTERM (`kill`, `timeout`, a scheduler cancelling the job) takes Ctrl-C's path: Python's
    default would end the process at once and leave the temporary store behind (a run over a
    2 M-kernel export left 158 MB in /tmp)."""
    out = tmp_path / "out"
    out.mkdir()
    inp = sample("tp2_overlap", ".sqlite.xz")
    full = run_in(tmp_path / "full", inp, out / "full.duckdb")
    assert full[0] == 0, full[1]
    stopped = 0
    for fraction in (0.3, 0.5, 0.7):
        work = tmp_path / f"at{fraction}"
        rc, err, _ = run_in(work, inp, out / f"at{fraction}.duckdb", fraction * full[2], signal.SIGTERM)
        assert leftovers(work / "tmp", work / "cache", out) == []
        if rc in (0, -signal.SIGTERM):
            # Finished first, or landed once the job was done (SIGTERM then ends the process at
            # once): nothing partial either way.
            continue
        stopped += 1
        assert rc == 143, err
        assert "Traceback" not in err and err.strip().splitlines()[-1] == "nsight-doctor: terminated", err
    assert stopped >= 1


def run_in(
    work: Path, inp: Path, db: Path, interrupt_after: float | None = None, signum: int = signal.SIGINT
) -> tuple[int, str, float]:
    """Runs analyze with a private TMPDIR and cache under work, and sends signum after
    interrupt_after seconds; returns (exit code, stderr, seconds)."""
    (work / "tmp").mkdir(parents=True)
    env = {"TMPDIR": str(work / "tmp"), "NSIGHT_DOCTOR_CACHE": str(work / "cache")}
    t0 = time.monotonic()
    p = cli_process(
        ["analyze", str(inp), "--db", str(db), "-q"], env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if interrupt_after is not None:
        time.sleep(interrupt_after)
        p.send_signal(signum)
    _, err = p.communicate(timeout=600)
    return p.returncode, err.decode(errors="replace"), time.monotonic() - t0


# --- nsys export: timeout, process group, progress ------------------------------------------

FAKE_NSYS = textwrap.dedent("""\
    #!{python}
    # Stands in for nsys: answers --version as nsys 2022.4 does; an export writes partial
    # output, starts a child process (as nsys starts helpers), records both pids, sleeps,
    # and then (if it is still alive) writes a real export.
    import os, shutil, subprocess, sys, time
    if "--version" in sys.argv:
        print("NVIDIA Nsight Systems version 2022.4.2.1-32e7b7e")
        sys.exit(0)
    out = sys.argv[sys.argv.index("--output") + 1]
    with open(out + ".tmp-part", "w") as f:
        f.write("partial")
    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["FAKE_NSYS_PIDS"], "w") as f:
        f.write(f"{{os.getpid()}} {{child.pid}}")
    time.sleep(float(os.environ["FAKE_NSYS_SECONDS"]))
    child.kill()
    os.remove(out + ".tmp-part")
    shutil.copyfile(os.environ["FAKE_NSYS_EXPORT"], out)
    """)


@pytest.fixture
def fake_nsys(tmp_path) -> Path:
    script = tmp_path / "bin" / "nsys"
    script.parent.mkdir()
    script.write_text(FAKE_NSYS.format(python=sys.executable))
    script.chmod(0o755)
    return script


def report_alone(tmp_path: Path) -> Path:
    """A complete real report, alone in its folder (so it must be exported)."""
    folder = tmp_path / "reports"
    folder.mkdir()
    rep = folder / "run.nsys-rep"
    shutil.copyfile(sample("decode_b1_graphs", ".nsys-rep"), rep)
    return rep


def nsys_env(tmp_path: Path, seconds: float) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        "FAKE_NSYS_PIDS": str(tmp_path / "pids"),
        "FAKE_NSYS_SECONDS": str(seconds),
        "FAKE_NSYS_EXPORT": str(sample("decode_b1_graphs")),
        "TMPDIR": str(tmp_path / "tmp"),
        "NSIGHT_DOCTOR_CACHE": str(tmp_path / "cache"),
    }


def test_stuck_export_is_killed_with_its_children_and_its_output_removed(tmp_path, fake_nsys):
    rep = report_alone(tmp_path)
    before = sha256(rep)
    env = nsys_env(tmp_path, 600)
    t0 = time.monotonic()
    r = run_cli("analyze", str(rep), "--nsys", str(fake_nsys), "--export-timeout", "3", env=env)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2, r.stderr
    [line] = r.stderr.strip().splitlines()
    assert "run.nsys-rep" in line and "within 3 s" in line and "--export-timeout" in line
    nsys_pid, child_pid = map(int, (tmp_path / "pids").read_text().split())
    deadline = time.monotonic() + 10
    while not (dead(nsys_pid) and dead(child_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dead(nsys_pid) and dead(child_pid), "nsys or its child survived"
    assert sorted(p.name for p in rep.parent.iterdir()) == ["run.nsys-rep"]
    assert leftovers(tmp_path / "tmp", tmp_path / "cache", rep.parent) == []
    assert sha256(rep) == before


def test_ctrl_c_during_an_export_kills_it(tmp_path, fake_nsys):
    rep = report_alone(tmp_path)
    env = nsys_env(tmp_path, 600)
    p = cli_process(["analyze", str(rep), "--nsys", str(fake_nsys)], env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "nsight-doctor: interrupted"
    nsys_pid, child_pid = map(int, (tmp_path / "pids").read_text().split())
    time.sleep(0.5)
    assert dead(nsys_pid) and dead(child_pid)
    assert sorted(q.name for q in rep.parent.iterdir()) == ["run.nsys-rep"]
    assert leftovers(tmp_path / "tmp", tmp_path / "cache", rep.parent) == []


def test_a_terminal_sees_the_export_progress(tmp_path, fake_nsys):
    """On a terminal the progress line counts the export's seconds; the export then
    completes (the stand-in writes a real export) and is analysed."""
    rep = report_alone(tmp_path)
    env = nsys_env(tmp_path, 3)
    primary, secondary = pty.openpty()
    p = cli_process(["analyze", str(rep), "--nsys", str(fake_nsys)], env, stdout=subprocess.PIPE, stderr=secondary)
    os.close(secondary)
    seen = bytearray()
    reader = threading.Thread(target=read_all, args=(primary, seen))
    reader.start()
    out, _ = p.communicate(timeout=300)
    reader.join(timeout=10)
    os.close(primary)
    assert p.returncode == 0
    progress = seen.decode(errors="replace")
    assert "nsys export --type sqlite" in progress
    assert "nsys export --type sqlite (2 s)" in progress
    assert b"CUDA graph launches" in out
    assert (rep.parent / "run.sqlite").exists()  # complete, beside the report


def read_all(fd: int, into: bytearray) -> None:
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            return
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        into.extend(chunk)


# --- memory ----------------------------------------------------------------------------


def test_memory_limit_reaches_duckdb_and_hitting_it_is_one_line(tmp_path):
    db = tmp_path / "store.duckdb"
    r = run_cli("analyze", B1, "--memory-limit", "96MB", "--db", str(db), "-q")
    assert r.returncode == 0, r.stderr
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM kernels").fetchone() == (15808,)
    con.close()
    r = run_cli("analyze", B1, "--memory-limit", "10MB")
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("nsight-doctor: error: analysing ")
    assert "decode_b1.sqlite" in line and "ran out of memory" in line and "memory limit of 10MB" in line


def test_a_default_limit_that_is_too_small_is_retried_once_with_a_larger_one(monkeypatch):
    """Without --memory-limit the analysis runs at store.default_memory_limit; when that
    runs out of memory it runs once more with a larger limit, says so, and gives the same
    diagnosis. Here the default is forced down to 10 MB (decode_b1 needs about 80 MB)."""
    import nsight_doctor.store as store
    from nsight_doctor import analyze
    from nsight_doctor.errors import ResourceError

    normal = analyze([B1])
    monkeypatch.setattr(store, "default_memory_limit", lambda paths: "10MB")
    monkeypatch.setattr(store, "retry_memory_limit", lambda paths: "256MB")
    d = analyze([B1])
    assert "the default memory limit (10MB) was not enough; analysed again with 256MB" in d.notes
    assert [(f.rule_id, f.impact_ns) for f in d.findings] == [(f.rule_id, f.impact_ns) for f in normal.findings]
    monkeypatch.setattr(store, "retry_memory_limit", lambda paths: "12MB")
    with pytest.raises(ResourceError, match="12MB, the limit of a second try after the default of 10MB"):
        analyze([B1])


def test_the_retry_names_the_limit_that_was_not_enough_after_it_was_raised(monkeypatch):
    """The default limit may be raised after reading (rows_memory_limit); when the analysis then
    runs out of memory, the note names the raised limit, and the retry gives more than it. The
    first try's shortage is DuckDB's own exception, raised once on purpose: how much memory the
    views need varies with the machine's cores and allocator (decode_b1 needed 24 MB with two
    threads and 64 MB with one here, and more than 60 MB on the CI machine)."""
    import duckdb

    import nsight_doctor.store as store
    import nsight_doctor.summary as summary
    from nsight_doctor import analyze

    monkeypatch.setattr(store, "default_memory_limit", lambda paths: "256MB")
    monkeypatch.setattr(store, "rows_memory_limit", lambda con: 300)
    monkeypatch.setattr(store, "retry_memory_limit", lambda paths: "250MB")  # below the raised limit
    real = summary.summarize
    limits: list[str] = []

    def short_once(con, *args, **kwargs):
        limits.append(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
        if len(limits) == 1:
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")
        return real(con, *args, **kwargs)

    monkeypatch.setattr(summary, "summarize", short_once)
    d = analyze([B1])
    assert "the default memory limit (300MB) was not enough; analysed again with 600MB" in d.notes
    # DuckDB had each limit (it reports MiB: 300 MB is 286.1 MiB).
    assert [float(x.split()[0]) for x in limits] == pytest.approx([300e6 / 2**20, 600e6 / 2**20], abs=0.1)


def test_the_default_limit_follows_the_data_not_the_compressed_file():
    """A report, an .xz copy or a Parquet folder holds several times less than the export the
    store reads (a 107 MB Parquet folder of a 496 MB export ran out of memory at 426 MB)."""
    from nsight_doctor import store

    b1 = SAMPLES / "decode_b1"
    sqlite, rep, pq = b1 / "decode_b1.sqlite", b1 / "decode_b1.nsys-rep", b1 / "decode_b1_pqtdir"
    assert store.data_bytes([sqlite]) == sqlite.stat().st_size
    assert store.data_bytes([rep]) == 4 * rep.stat().st_size
    assert store.data_bytes([pq]) == 5 * sum(f.stat().st_size for f in pq.iterdir())
    assert store.data_bytes([sqlite, rep]) == sqlite.stat().st_size + 4 * rep.stat().st_size
    threads = duckdb_threads()
    assert (
        store.default_memory_limit([sqlite])
        == f"{max(256, int(0.7 * sqlite.stat().st_size / (1 << 20) + 16 * threads))}MB"
    )


def test_the_views_get_the_memory_their_operations_need(monkeypatch):
    """After reading, the default limit is raised to what the busiest GPU's operations need
    (store.rows_memory_limit), and the rules' connection has it too; a limit given with
    --memory-limit is kept."""
    from nsight_doctor import store

    monkeypatch.setattr(store, "BYTES_PER_OP", 64 * 1024)  # 64 KiB each: about 1 GB
    built = store.build([B1])
    try:
        con = built.connect()
        [(gpus, ops)] = con.execute("SELECT count(DISTINCT device_id), count(*) FROM gpu_ops").fetchall()
        con.close()
        assert gpus == 1
        need = 32 + int(ops * 64 * 1024 / (1 << 20)) + 16 * duckdb_threads()
        assert built.config["memory_limit"] == store.capped(need)  # (capped at 80% of this machine)
        con = built.connect()
        [(limit,)] = con.execute("SELECT current_setting('memory_limit')").fetchall()
        con.close()
        [(expected,)] = (
            duckdb.connect(config={"memory_limit": store.capped(need)})
            .sql("SELECT current_setting('memory_limit')")
            .fetchall()
        )
        assert limit == expected
    finally:
        built.close()
    built = store.build([B1], memory_limit="300MB")
    try:
        assert built.config["memory_limit"] == "300MB"
    finally:
        built.close()


def test_work_beyond_the_limit_spills_to_the_private_folder(tmp_path):
    """The build connection's settings (store_config): a sort three times the memory limit
    completes by writing to the spill folder, and fails without one."""
    spill = tmp_path / "spill"
    spill.mkdir()
    data = "SELECT hash(i) AS a, repeat('x', 50) || i::VARCHAR AS s FROM range(3000000) r(i)"
    sort = "SELECT count(*), max(s) FROM (SELECT * FROM t ORDER BY a, s)"
    config = store_config([], spill, "64MB")
    con = duckdb.connect(config=config)
    con.execute(f"CREATE TABLE t AS {data}")
    seen: list[int] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(sum(1 for _ in spill.rglob("*")))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        row = con.execute(sort).fetchone()
        assert row is not None and row[0] == 3_000_000
    finally:
        stop.set()
        watcher.join()
    assert max(seen) > 0, "nothing was written to the spill folder"
    without = duckdb.connect(config={**config, "temp_directory": ""})
    with pytest.raises(duckdb.OutOfMemoryException):
        without.execute(f"CREATE TABLE t AS {data}")
        without.execute(sort).fetchone()


def test_no_spill_folder_or_store_is_left_after_a_run(tmp_path):
    work = tmp_path / "tmp"
    work.mkdir()
    r = run_cli("analyze", B1, "--memory-limit", "96MB", "-q", env={"TMPDIR": str(work)})
    assert r.returncode == 0, r.stderr
    assert list(work.iterdir()) == []


# --- cache and input folders -----------------------------------------------------------


def test_unwritable_cache_folder_falls_back_to_a_temporary_one(tmp_path):
    """The cache path is under a regular file, which no user (root included) can create
    folders in: the xz sample is still analysed, through a temporary folder that is
    removed at exit, and the diagnosis says why."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    work = tmp_path / "tmp"
    work.mkdir()
    env = {"NSIGHT_DOCTOR_CACHE": str(blocker / "cache"), "TMPDIR": str(work)}
    r = run_cli("analyze", str(sample("tp2_straggler", ".sqlite.xz")), "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert any("is not writable" in n and "temporary folder" in n for n in notes), notes
    assert list(work.iterdir()) == []


def test_read_only_input_folder_is_never_written(tmp_path):
    """An export, a compressed export and a report in a folder without write permission
    (mode bits, which the tool respects even as root): analysed, the folder unchanged (no
    journal or lock file beside the SQLite file either)."""
    folder = tmp_path / "archive"
    folder.mkdir()
    for src in (sample("tp2_straggler", ".sqlite.xz"), sample("tp2_straggler", ".nsys-rep"), sample("decode_b1")):
        shutil.copyfile(src, folder / src.name)
    before = {p.name: sha256(p) for p in folder.iterdir()}
    folder.chmod(0o555)
    try:
        for name in before:
            r = run_cli("analyze", str(folder / name), "-q", env={"PATH": "/nonexistent", "NSYS": ""})
            assert r.returncode == 0, r.stderr
    finally:
        folder.chmod(0o755)
    assert {p.name: sha256(p) for p in folder.iterdir()} == before


def test_threads_default_to_the_cores_up_to_eight_and_purging_starts_at_four(monkeypatch):
    """runtime: $NSIGHT_DOCTOR_THREADS wins; else the cores, at most 8. From 4 threads on,
    DuckDB's allocator is asked to return freed memory at once, unless the user configured it."""
    from nsight_doctor import runtime

    monkeypatch.setattr(runtime, "_set_here", set())
    monkeypatch.delenv("NSIGHT_DOCTOR_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert runtime.duckdb_threads() == 8
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert runtime.duckdb_threads() == 2
    monkeypatch.setenv("NSIGHT_DOCTOR_THREADS", "16")
    assert runtime.duckdb_threads() == 16
    assert store_config([], Path("/nonexistent"), "1GB")["threads"] == 16

    for threads, expected in (("2", None), ("4", runtime.EAGER_PURGE)):
        monkeypatch.setenv("NSIGHT_DOCTOR_THREADS", threads)
        monkeypatch.delenv(runtime.ALLOCATOR_ENV, raising=False)
        runtime.configure_allocator()
        assert os.environ.get(runtime.ALLOCATOR_ENV) == expected
    monkeypatch.setenv(runtime.ALLOCATOR_ENV, "narenas:1")
    runtime.configure_allocator()
    assert os.environ[runtime.ALLOCATOR_ENV] == "narenas:1"

    # Polars gets as many threads as DuckDB, unless the user chose.
    monkeypatch.delenv(runtime.POLARS_THREADS_ENV, raising=False)
    monkeypatch.delenv("NSIGHT_DOCTOR_THREADS")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    runtime.configure_polars()
    assert os.environ[runtime.POLARS_THREADS_ENV] == "8"
    monkeypatch.setenv(runtime.POLARS_THREADS_ENV, "3")
    runtime.configure_polars()
    assert os.environ[runtime.POLARS_THREADS_ENV] == "3"


def test_archive_workers_get_the_settings_for_their_own_threads(monkeypatch):
    """Workers inherit the parent's environment: around their start the allocator setting and
    Polars' threads follow their own thread count (one thread each by default: no eager
    purging), unless the user set them."""
    from nsight_doctor import runtime

    monkeypatch.delenv(runtime.ALLOCATOR_ENV, raising=False)
    monkeypatch.delenv(runtime.POLARS_THREADS_ENV, raising=False)
    monkeypatch.setenv("NSIGHT_DOCTOR_THREADS", "8")
    monkeypatch.setattr(runtime, "_set_here", set())
    runtime.configure_allocator()
    runtime.configure_polars()
    assert os.environ[runtime.ALLOCATOR_ENV] == runtime.EAGER_PURGE
    with runtime.environment_for_children(1):
        assert runtime.ALLOCATOR_ENV not in os.environ
        assert os.environ[runtime.POLARS_THREADS_ENV] == "1"
    with runtime.environment_for_children(8):
        assert os.environ[runtime.ALLOCATOR_ENV] == runtime.EAGER_PURGE
    # the parent's, restored
    assert os.environ[runtime.ALLOCATOR_ENV] == runtime.EAGER_PURGE
    assert os.environ[runtime.POLARS_THREADS_ENV] == "8"

    monkeypatch.setattr(runtime, "_set_here", set())
    monkeypatch.setenv(runtime.ALLOCATOR_ENV, "narenas:1")  # the user's: kept for everyone
    monkeypatch.setenv(runtime.POLARS_THREADS_ENV, "5")
    with runtime.environment_for_children(1):
        assert os.environ[runtime.ALLOCATOR_ENV] == "narenas:1"
        assert os.environ[runtime.POLARS_THREADS_ENV] == "5"


def test_the_command_configures_the_allocator_before_duckdb_loads():
    """The settings only work if they are in the environment when DuckDB and Polars are first
    imported: the command sets them before importing anything that imports either."""
    code = textwrap.dedent(
        """
        import os, sys
        import nsight_doctor.cli as cli  # the command's module: imports DuckDB and Polars lazily
        assert "duckdb" not in sys.modules and "polars" not in sys.modules
        from nsight_doctor import __main__ as entry
        cli.main = lambda: print(
            os.environ.get("DUCKDB_JE_MALLOC_CONF"), os.environ.get("POLARS_MAX_THREADS"),
            "duckdb" in sys.modules, "polars" in sys.modules,
        )
        entry.run()
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DUCKDB_JE_MALLOC_CONF", "POLARS_MAX_THREADS")}
    env["NSIGHT_DOCTOR_THREADS"] = "8"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert r.stdout.split() == ["dirty_decay_ms:0,muzzy_decay_ms:0", "8", "False", "False"]
