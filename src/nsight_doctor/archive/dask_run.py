"""Ingest on Dask distributed: the same tasks as the local worker processes, run by Dask
workers on any number of machines (``ingest --scheduler tcp://HOST:PORT``).

Each Dask worker runs ``worker.run_task``: it analyses one profile and writes its part (Parquet
files) into the parts folder, which must be a path every worker and this client can reach (a
shared filesystem, like the profiles themselves). This process, the Dask client, is still the
only writer of the database: it merges each part as its task completes. A worker that dies is
Dask's to retry; a task that still fails is recorded in ``failures``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nsight_doctor.archive.worker import Task, run_task
from nsight_doctor.errors import DoctorError


def run_dask(
    tasks: list[Task],
    scheduler: str,
    parts_root: str,
    on_result: Callable[[Task, dict[str, Any]], None],
    on_start: Callable[[Task], None] | None = None,  # Dask schedules: no per-task start
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise DoctorError(
            "--scheduler needs Dask distributed: pip install 'nsight-doctor[dask]' (or 'dask[distributed]')"
        ) from None
    try:
        client = Client(scheduler, timeout="30s")
    except (OSError, TimeoutError) as e:
        raise DoctorError(f"could not reach the Dask scheduler at {scheduler}: {e}") from None
    try:
        by_key = {}
        futures = []
        for task in tasks:
            fut = client.submit(run_task, task, parts_root, key=f"nsight-doctor-{task.profile_id}", pure=False)
            by_key[fut.key] = task
            futures.append(fut)
        for fut in as_completed(futures):
            task = by_key[fut.key]
            try:
                result = fut.result()
            except Exception as e:  # the worker died (KilledWorker) or the task raised
                result = {
                    "profile_id": task.profile_id,
                    "ok": False,
                    "error": f"the Dask task failed: {type(e).__name__}: {' '.join(str(e).split())}",
                    "error_type": "WorkerDied",
                    "seconds": 0.0,
                }
            on_result(task, result)
    finally:
        client.close()
