"""What a worker does with one profile: run the same ``analyze`` as the command line, then
write the profile's rows as a part: a folder of Parquet files, one per table, that the single
writer (the ingest process, or the Dask client) merges into the fleet database in one
transaction. Nothing here opens the fleet database.

A part folder is written under a temporary name and renamed when complete, with
``part.json`` (the task's result) inside, so a part that exists is whole.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from nsight_doctor import __version__, analysis_cache
from nsight_doctor.archive import schema
from nsight_doctor.cachedir import private_dir, scratch_dir
from nsight_doctor.db import first_line, literal, plain, quiet, scalar
from nsight_doctor.errors import DoctorError
from nsight_doctor.model import Diagnosis, severity_rank

#: Evidence keys that say what a finding is about, in order of preference.
SUBJECT_KEYS = ("launch", "kernel", "kernel_name", "name", "top_call", "api", "range", "step_range")


@dataclass
class Task:
    """One profile to analyse: picklable, so it travels to worker processes and Dask."""

    profile_id: str
    kind: str
    candidates: list[list[str]]  # lists of local paths to try, in order
    shown: dict[str, str]  # local path -> the path the user knows
    paths: list[str]  # every shown path of this content
    primary: str  # the shown path that identifies it (failures are recorded under it)
    size_bytes: int
    labels: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # AnalyzeOptions fields
    digest: str = ""


def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def run_task(task: Task, parts_root: str) -> dict[str, Any]:
    """Analyses one profile and writes its part; returns the result (never raises for a bad
    profile: the error is in the result)."""
    from nsight_doctor.engine import AnalyzeOptions, analyze

    t0 = time.monotonic()
    errors: list[tuple[str, str]] = []
    with scratch_dir("nsight-doctor-ingest-") as work:
        for inputs in task.candidates:
            db = work / f"store-{len(errors)}.duckdb"
            opts = AnalyzeOptions(db=str(db), command="nsight-doctor ingest", **task.options)
            try:
                diagnosis = analyze(inputs, opts)
            except DoctorError as e:
                errors.append((type(e).__name__, shown_text(str(e), task.shown)))
                continue
            except Exception as e:
                errors.append((type(e).__name__, shown_text(f"internal error: {first_line(e)}", task.shown)))
                if os.environ.get("NSIGHT_DOCTOR_DEBUG"):
                    traceback.print_exc()
                continue
            seconds = time.monotonic() - t0
            try:
                part = write_part(task, inputs, diagnosis, db, parts_root, seconds)
            except (duckdb.Error, OSError, ValueError, TypeError) as e:
                errors.append((type(e).__name__, f"internal error writing its rows: {first_line(e)}"))
                break
            return {"profile_id": task.profile_id, "ok": True, "part": str(part), "seconds": seconds}
    # The report's own error says most (e.g. too new for this nsys) when every input failed.
    error_type, error = errors[-1] if errors else ("InputError", "nothing to analyse")
    if len(errors) > 1:
        error = f"{error} (and {len(errors) - 1} export(s) beside it failed: {errors[0][1]})"
    return {
        "profile_id": task.profile_id,
        "ok": False,
        "error": " ".join(error.split()),
        "error_type": error_type,
        "seconds": time.monotonic() - t0,
    }


def shown_text(text: str, shown: dict[str, str]) -> str:
    for local, path in shown.items():
        if local != path:
            text = text.replace(local, path)
    return text


def write_part(task: Task, inputs: list[str], d: Diagnosis, db: Path, parts_root: str, seconds: float) -> Path:
    root = Path(parts_root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = private_dir(f".{task.profile_id}.", root)
    try:
        tmp.mkdir(mode=0o700)
        store = duckdb.connect(str(db), read_only=True)
        quiet(store)
        try:
            facts = store_facts(store)
            tables = copy_store_tables(store, task.profile_id, tmp)
        finally:
            store.close()
        rows = diagnosis_rows(task, inputs, d, facts, seconds)
        tables.update(write_rows(rows, tmp))
        (tmp / "part.json").write_text(
            json.dumps({"profile_id": task.profile_id, "task": asdict(task), "tables": tables})
        )
        final = root / task.profile_id
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for p in (db, Path(str(db) + ".wal")):
            p.unlink(missing_ok=True)


def store_facts(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """GPU names and counts, from the store's documented views."""
    names = {
        r[0]
        for r in con.execute(
            "SELECT name FROM gpus WHERE name IS NOT NULL UNION SELECT device_name FROM ncu_kernels "
            "WHERE device_name IS NOT NULL"
        ).fetchall()
    }
    count = con.execute("SELECT count(DISTINCT device_id) FROM gpus").fetchone()
    ncu_count = con.execute("SELECT count(DISTINCT device_name) FROM ncu_kernels").fetchone()
    active = con.execute("SELECT count(DISTINCT device_id) FROM gpu_ops").fetchone()
    return {
        "gpu_names": sorted(names),
        "gpu_count": (count[0] if count else 0) or (ncu_count[0] if ncu_count else 0),
        "active_gpus": active[0] if active else 0,
    }


def copy_store_tables(con: duckdb.DuckDBPyConnection, profile_id: str, out: Path) -> dict[str, list[tuple[str, str]]]:
    """kernels, kernel_categories and ncu_kernels, straight from the store into Parquet (the
    tables with rows only); returns each written table's columns."""
    from nsight_doctor.store.taxonomy import case_sql

    pid = literal(profile_id)
    category = case_sql("name", "demangled_name")
    # Names are classified once each, after grouping, not once per kernel execution.
    per_name = f"""
        WITH per AS (
            SELECT device_id, name, any_value(demangled_name) AS demangled_name, count(*) AS count,
                   sum(duration) AS total_ns, avg(duration) AS mean_ns, median(duration) AS median_ns,
                   min(duration) AS min_ns, max(duration) AS max_ns, count(*) FILTER (WHERE in_graph) AS in_graph
            FROM kernels GROUP BY device_id, name
        )
        SELECT *, {category} AS category FROM per"""
    queries = {
        "kernels": f"""
            SELECT {pid} AS profile_id, CAST(device_id AS INTEGER) AS device_id, name, demangled_name, category,
                   count, CAST(total_ns AS BIGINT) AS total_ns, mean_ns, CAST(median_ns AS DOUBLE) AS median_ns,
                   CAST(min_ns AS BIGINT) AS min_ns, CAST(max_ns AS BIGINT) AS max_ns, in_graph,
                   100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY device_id), 0) AS share_pct
            FROM ({per_name}) ORDER BY device_id, total_ns DESC""",
        "kernel_categories": f"""
            SELECT {pid} AS profile_id, category, count(DISTINCT name) AS kernel_names, sum(count) AS count,
                   CAST(sum(total_ns) AS BIGINT) AS total_ns,
                   100.0 * sum(total_ns) / nullif(sum(sum(total_ns)) OVER (), 0) AS share_pct
            FROM ({per_name}) GROUP BY category ORDER BY total_ns DESC""",
        "ncu_kernels": f"SELECT {pid} AS profile_id, * FROM ncu_kernels",
    }
    counts = {
        "kernels": scalar(con, "SELECT count(*) FROM kernels"),
        "ncu_kernels": scalar(con, "SELECT count(*) FROM ncu_kernels"),
    }
    counts["kernel_categories"] = counts["kernels"]
    written = {}
    for table, sql in queries.items():
        if not counts[table]:
            continue
        con.execute(f"COPY ({sql}) TO {literal(str(out / (table + '.parquet')))} (FORMAT parquet)")
        written[table] = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {sql}").fetchall()]
    return written


def captured_with(task: Task) -> str | None:
    """The nsys that captured a profile whose report was found beside the export analysed (an
    export records only the nsys that wrote it): what analyze of the report shows."""
    from nsight_doctor.ingest.nsys_rep import report_version

    for path in (p for c in task.candidates for p in c):
        if path.endswith((".nsys-rep", ".qdrep")) and os.path.isfile(path):
            try:
                return report_version(Path(path))
            except OSError:
                return None
    return None


def diagnosis_rows(
    task: Task, inputs: list[str], d: Diagnosis, facts: dict[str, Any], seconds: float
) -> dict[str, list[dict[str, Any]]]:
    summary = d.summary.to_json()
    window = summary.get("gpu_window_ns") or 0
    analysed = task.shown.get(inputs[0], inputs[0])
    first = d.inputs[0] if d.inputs else {}
    start = capture_start(d)
    top = d.findings[0] if d.findings else None
    profile = {
        "profile_id": task.profile_id,
        "path": task.primary,
        "kind": task.kind,
        "paths": sorted(set(task.paths)),
        "analysed_path": analysed,
        "inputs": json.dumps(
            [{**{k: i.get(k) for k in INPUT_FIELDS}, "path": task.shown.get(i["path"], i["path"])} for i in d.inputs]
        ),
        "tool": first.get("producer"),
        "tool_version": captured_with(task) or first.get("producer_version"),
        "exporter_version": first.get("exporter"),
        "gpu_names": facts["gpu_names"],
        "gpu_count": facts["gpu_count"],
        "active_gpus": facts["active_gpus"],
        "capture_start": start,
        "capture_ns": summary.get("capture_ns"),
        "gpu_busy_pct": summary.get("gpu_busy_pct"),
        "findings": len(d.findings),
        "top_rule_id": top.rule_id if top else None,
        "top_impact_ns": top.impact_ns if top else None,
        "size_bytes": task.size_bytes,
        "labels": task.labels,
        "notes": [shown_text(n, task.shown) for n in d.notes if not n.startswith("the DuckDB store was kept")],
        "doctor_version": __version__,
        "analysis_digest": task.digest,
        "analysis_s": round(seconds, 3),
        "ingested_at": now_utc(),
    }
    whole = analysis_cache.diagnosis_to_json(d)
    whole["inputs"] = [{**i, "path": task.shown.get(i["path"], i["path"])} for i in whole["inputs"]]
    whole["notes"] = profile["notes"]
    rows: dict[str, list[dict[str, Any]]] = {
        "profiles": [profile],
        "diagnoses": [{"profile_id": task.profile_id, "analysis_digest": task.digest, "diagnosis": whole}],
    }
    rows.update(schema.summary_rows(task.profile_id, d.summary))
    rows["findings"] = [
        {
            "profile_id": task.profile_id,
            "rank": n,
            "rule_id": f.rule_id,
            "severity": f.severity,
            "severity_rank": severity_rank(f.severity),
            "tags": list(f.tags),
            "impact_ns": f.impact_ns,
            "impact_pct": 100.0 * f.impact_ns / window if window else None,
            "device_id": f.evidence.get("device_id") if isinstance(f.evidence.get("device_id"), int) else None,
            "subject": subject(f.evidence),
            "title": f.title,
            "message": f.message,
            "recommendation": f.recommendation,
            "evidence": plain(f.evidence),
        }
        for n, f in enumerate(d.findings, 1)
    ]
    return rows


INPUT_FIELDS = ("path", "kind", "producer", "producer_version", "export_path", "export_schema_version")


def subject(evidence: dict[str, Any]) -> str | None:
    for key in SUBJECT_KEYS:
        v = evidence.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def capture_start(d: Diagnosis) -> datetime | None:
    from nsight_doctor.ingest.session import capture_start_ns

    for info in d.inputs:
        ns = capture_start_ns(info)
        if ns:
            return datetime.fromtimestamp(ns / 1e9, timezone.utc).replace(tzinfo=None)
    return None


def write_rows(rows: dict[str, list[dict[str, Any]]], out: Path) -> dict[str, list[tuple[str, str]]]:
    """Python rows into Parquet files (tables with rows only), typed by the fleet tables'
    declarations; returns each written table's columns. The rows go through a JSON file that
    DuckDB reads with the declared types: one statement per table, not one per row."""
    declared = schema.declared_columns()
    written: dict[str, list[tuple[str, str]]] = {}
    con = duckdb.connect()
    quiet(con)
    try:
        for name, table_rows in rows.items():
            if not table_rows:
                continue
            cols = list(declared[name])
            data = [{c: json_cell(r.get(c), t) for c, t in cols} for r in table_rows]
            src = out / f".{name}.json"
            src.write_text(json.dumps(data, default=str, allow_nan=False))
            types = ", ".join(f"{literal(c)}: {literal(t)}" for c, t in cols)
            con.execute(
                f"COPY (SELECT * FROM read_json({literal(str(src))}, format = 'array', columns = {{{types}}})) "
                f"TO {literal(str(out / (name + '.parquet')))} (FORMAT parquet)"
            )
            src.unlink()
            written[name] = cols
    finally:
        con.close()
    return written


def json_cell(v: Any, kind: str) -> Any:
    """A value as read_json reads it into a column of that type: JSON columns as nested JSON
    (not a string of JSON), NaN as null."""
    if kind == "JSON" and isinstance(v, str):
        v = json.loads(v)
    if isinstance(v, datetime):
        return v.isoformat(sep=" ")
    return plain(v)
