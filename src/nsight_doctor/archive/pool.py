"""Worker processes for ingest: N long-lived processes, one task each at a time.

Unlike a ProcessPoolExecutor, the parent always knows which file each worker holds, so a
worker that dies (a crash in a reader, the kernel's OOM killer) or runs past --timeout costs
only that file: it is recorded as a failure and a fresh worker takes its place. Workers are
started with 'spawn' (the parent holds an open DuckDB database and must not be forked), ignore
Ctrl-C (the parent stops them), and die with the parent on Linux. Their temporary folder
($TMPDIR) is one the pool makes and removes when it closes: a worker killed (stopped by Ctrl-C
or SIGTERM, past --timeout, by the OOM killer) cannot remove its own scratch and spill
folders. Each gets its share of the cores for DuckDB's threads, at most
runtime.MAX_DEFAULT_THREADS (``$NSIGHT_DOCTOR_THREADS``, when not already set), as many Polars
threads, and the allocator setting for that many (runtime.environment_for_children).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from nsight_doctor.archive.worker import Task, run_task
from nsight_doctor.cachedir import private_dir
from nsight_doctor.runtime import MAX_DEFAULT_THREADS, environment_for_children


def worker_main(conn: Connection, parts_root: str, threads: int) -> None:
    # (a SIGTERM to the process group, as `timeout` or a scheduler sends, stops the parent,
    # which stops the workers: one that died of it first would be recorded as a failure)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent()
    # The workers share the cores: each analysis' DuckDB gets its share, not all of them.
    os.environ.setdefault("NSIGHT_DOCTOR_THREADS", str(threads))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(run_task(task, parts_root))


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel kills this worker when the ingest process dies (kill -9)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


@dataclass
class Slot:
    process: Any
    conn: Connection
    tasks: list[Task] = field(default_factory=list)  # sent, in order; the first is running
    started: float = 0.0


class Pool:
    def __init__(self, jobs: int, parts_root: str, timeout: float | None = None):
        self.ctx = mp.get_context("spawn")
        self.jobs = max(1, jobs)
        self.parts_root = parts_root
        self.timeout = timeout
        self.slots: list[Slot] = []
        self.tmp = private_dir("nsight-doctor-workers-")  # (made by run, removed by close)

    def start_slot(self) -> Slot:
        parent, child = self.ctx.Pipe()
        threads = max(1, min((os.cpu_count() or 1) // self.jobs, MAX_DEFAULT_THREADS))
        p = self.ctx.Process(target=worker_main, args=(child, self.parts_root, threads), daemon=True)
        # (the worker imports DuckDB and Polars before its own code runs: their settings are chosen here)
        with environment_for_children(threads, str(self.tmp)):
            p.start()
        child.close()
        return Slot(p, parent)

    def run(
        self,
        tasks: Iterable[Task],
        on_result: Callable[[Task, dict[str, Any]], None],
        on_start: Callable[[Task], None] | None = None,
        tick: Callable[[], None] | None = None,
    ) -> None:
        """Runs every task; on_result(task, result) is called in this process as each ends.

        Each worker is sent its next task while it still runs one (while enough are left), so
        that it never waits for this process to merge a result."""
        queue = list(tasks)
        queue.reverse()
        try:
            self.tmp.mkdir(mode=0o700)
            self.slots = [self.start_slot() for _ in range(min(self.jobs, len(queue)))]
            while queue or any(s.tasks for s in self.slots):
                for s in self.slots:
                    depth = 2 if len(queue) > len(self.slots) else 1
                    while queue and len(s.tasks) < depth:
                        task = queue.pop()
                        if not s.tasks:
                            s.started = time.monotonic()
                            if on_start:
                                on_start(task)
                        s.tasks.append(task)
                        s.conn.send(task)
                busy = [s for s in self.slots if s.tasks]
                ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=0.5)
                for i, s in enumerate(self.slots):
                    if not s.tasks:
                        continue
                    if s.conn in ready:
                        try:
                            result = s.conn.recv()
                        except (EOFError, OSError):
                            result = None
                        if result is not None:
                            task = s.tasks.pop(0)
                            s.started = time.monotonic()
                            if s.tasks and on_start:
                                on_start(s.tasks[0])
                            on_result(task, result)
                            continue
                    lost: dict[str, Any] | None = None
                    if s.process.sentinel in ready or not s.process.is_alive():
                        s.process.join(1)
                        lost = died(s.tasks[0], s.process.exitcode)
                    elif self.timeout and time.monotonic() - s.started > self.timeout:
                        s.process.kill()
                        s.process.join(5)
                        lost = failure(s.tasks[0], "Timeout", f"analysis took longer than {self.timeout:g} s")
                    if lost is not None:
                        task, waiting = s.tasks[0], s.tasks[1:]
                        queue.extend(reversed(waiting))  # sent but not started: run them elsewhere
                        self.slots[i] = self.restart(s)
                        on_result(task, lost)
                if tick:
                    tick()
        finally:
            self.close()

    def restart(self, s: Slot) -> Slot:
        try:
            s.conn.close()
        except OSError:
            pass
        return self.start_slot()

    def close(self) -> None:
        try:
            for s in self.slots:
                try:
                    if not s.tasks:
                        s.conn.send(None)
                except OSError:
                    pass
            deadline = time.monotonic() + 2
            for s in self.slots:
                if s.tasks:
                    s.process.kill()
                s.process.join(max(0.0, deadline - time.monotonic()))
                if s.process.is_alive():
                    s.process.kill()
                    s.process.join(1)
                s.conn.close()
        finally:
            # (also when a second Ctrl-C cut the joins short)
            for s in self.slots:
                if s.process.is_alive():
                    s.process.kill()
            self.slots = []
            shutil.rmtree(self.tmp, ignore_errors=True)  # (the workers are gone: what they left)


def failure(task: Task, error_type: str, error: str) -> dict[str, Any]:
    return {"profile_id": task.profile_id, "ok": False, "error": error, "error_type": error_type, "seconds": 0.0}


def died(task: Task, code: int | None) -> dict[str, Any]:
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    hint = " (killed: out of memory?)" if code == -signal.SIGKILL else ""
    return failure(task, "WorkerDied", f"the worker process died ({how}){hint} while analysing this file")
