"""Runs a rule's test cases (rules/<id>.test.yaml) against stores built from their rows.

A case gives rows for the store's base tables, by view-like names, either as a list of rows
or as an SQL SELECT that generates them (run in DuckDB). The store is then built with the
real view files, and the rule is evaluated by the real engine. A case says whether the rule
must fire or stay quiet, may override thresholds, and may check evidence values.

    rule: launch-bound
    cases:
      - name: tiny kernels launched one by one
        expect: fire
        thresholds: {min_launch_idle_pct: 10}
        tables:
          kernels: {sql: "SELECT i * 20000 AS start, i * 20000 + 3000 AS end FROM range(1000) t(i)"}
          api_calls: [{start: 0, end: 5000, name: cudaLaunchKernel, correlation_id: 1}]
        evidence: {kernels: 1000}

Conveniences (so cases read like the views): ``name`` (and ``demangled_name``, ``text``)
becomes a StringIds id; ``pid`` and ``tid`` become nsys's global ids; missing columns take
defaults (device 0, stream 7, a 1x1x1 grid, a unique correlation id).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import yaml

from nsight_doctor import rules as rules_mod
from nsight_doctor import store
from nsight_doctor.errors import RuleError
from nsight_doctor.ingest import base_table_columns, create_missing_base_tables
from nsight_doctor.ingest.nsys_export import quote
from nsight_doctor.model import Finding, Rule

# Test table name -> base table.
TABLES = {
    "kernels": "base_kernels", "graph_launches": "base_graph_launches", "memcpy": "base_memcpy",
    "memset": "base_memset", "api_calls": "base_api_calls", "syncs": "base_syncs",
    "nvtx": "base_nvtx", "gpus": "base_gpus", "gpu_metrics": "base_gpu_metrics",
    "gpu_metric_names": "base_gpu_metric_names", "processes": "base_processes",
    "threads": "base_threads", "capture": "base_capture",
    "profiler_overhead": "base_profiler_overhead", "capture_meta": "base_capture_meta",
    "ncu_actions": "base_ncu_actions", "ncu_metrics": "base_ncu_metrics", "ncu_rules": "base_ncu_rules",
    "ncu_reports": "base_ncu_reports",
}
# Short metric names for the `ncu` convenience table (any full ncu metric name works too).
NCU_SHORT = {
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "occ_limit_registers": "launch__occupancy_limit_registers",
    "occ_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "occ_limit_warps": "launch__occupancy_limit_warps",
    "occ_limit_blocks": "launch__occupancy_limit_blocks",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "issue_active": "smsp__issue_active.avg.per_cycle_active",
    "tensor_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "spill_requests": "derived__local_spilling_requests",
    "global_ld_bytes_per_sector": "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
    "smem_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "dram_bytes": "dram__bytes_read.sum",
}
DEFAULT_PID = 1000
DEFAULT_TID = 1000
# Text columns and the id columns they fill.
STRING_COLUMNS = {
    "base_kernels": {"name": "short_name_id", "demangled_name": "demangled_name_id"},
    "base_api_calls": {"name": "name_id"},
    "base_nvtx": {"text_value": "text_id"},
    "base_threads": {"name": "name_id"},
    "base_profiler_overhead": {"name": "name_id"},
}
DEFAULTS = {
    "device_id": 0, "stream_id": 7, "context_id": 1, "grid_x": 1, "grid_y": 1, "grid_z": 1,
    "block_x": 1, "block_y": 1, "block_z": 1,
}


@dataclass
class CaseResult:
    name: str
    ok: bool
    detail: str
    findings: list[Finding]


class StoreBuilder:
    """Fills base tables from case rows, then creates the views."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.strings: dict[str, int] = {}
        self.next_corr = 1_000_000
        create_missing_base_tables(con)

    def string_id(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
            self.con.execute("INSERT INTO base_strings VALUES (?, ?)", [self.strings[value], value])
        return self.strings[value]

    def rows(self, spec: Any) -> list[dict[str, Any]]:
        if isinstance(spec, dict) and "sql" in spec:
            cur = self.con.execute(spec["sql"])
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]
        if isinstance(spec, list):
            return [dict(r) for r in spec]
        raise RuleError(f"table rows must be a list or {{sql: ...}}, not {spec!r}")

    def add_ncu(self, spec: Any) -> None:
        """`ncu` rows: a profiled kernel each, with its launch columns and a `metrics` map
        (short names from NCU_SHORT, full ncu names, or `stall_<reason>` ratios) and an
        optional `rules` list of ncu rule results."""
        for i, row in enumerate(self.rows(spec)):
            row = dict(row)
            metrics = row.pop("metrics", {}) or {}
            rules = row.pop("rules", []) or []
            row.setdefault("action_id", i)
            row.setdefault("report_id", 0)
            for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
                row.setdefault(col, 1)
            row.setdefault("grid_size", row["grid_x"] * row["grid_y"] * row["grid_z"])
            row.setdefault("block_size", row["block_x"] * row["block_y"] * row["block_z"])
            row.setdefault("sm_count", 132)
            self.add("ncu_actions", [row])
            for name, value in metrics.items():
                if name.startswith("stall_"):
                    name = f"smsp__average_warps_issue_stalled_{name[6:]}_per_issue_active.ratio"
                name = NCU_SHORT.get(name, name)
                self.add("ncu_metrics", [{"action_id": row["action_id"], "metric": name, "value": value}])
            for r in rules:
                self.add("ncu_rules", [{"action_id": row["action_id"], **r}])

    def add(self, table: str, spec: Any) -> None:
        if table == "ncu":
            return self.add_ncu(spec)
        base = TABLES.get(table)
        if base is None:
            raise RuleError(f"unknown test table '{table}' (known: {', '.join(TABLES)})")
        columns = base_table_columns()[base]
        for row in self.rows(spec):
            row = self.fill(base, row, columns)
            unknown = set(row) - set(columns)
            if unknown:
                raise RuleError(f"{table}: unknown columns {sorted(unknown)} (base columns: {columns})")
            names = list(row)
            self.con.execute(
                f"INSERT INTO {base} ({', '.join(quote(n) for n in names)}) VALUES ({', '.join('?' * len(names))})",
                [row[n] for n in names],
            )

    def fill(self, base: str, row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
        for text_col, id_col in STRING_COLUMNS.get(base, {}).items():
            if text_col in row:
                value = row.pop(text_col)
                row[id_col] = None if value is None else self.string_id(str(value))
        if base == "base_kernels" and "short_name_id" in row and "demangled_name_id" not in row:
            row["demangled_name_id"] = row["short_name_id"]
        pid, tid = row.pop("pid", DEFAULT_PID), row.pop("tid", DEFAULT_TID)
        if "global_pid" in columns and "global_pid" not in row:
            row["global_pid"] = pid << 24
        if "global_tid" in columns and "global_tid" not in row:
            row["global_tid"] = (pid << 24) | tid
        if "correlation_id" in columns and row.get("correlation_id") is None and base != "base_nvtx":
            self.next_corr += 1
            row["correlation_id"] = self.next_corr
        for col, value in DEFAULTS.items():
            if col in columns and col not in row:
                row[col] = value
        return row


def load_cases(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise RuleError(f"{path}: expected 'rule:' and a non-empty 'cases:' list")
    return data


def build_case_store(tables: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    builder = StoreBuilder(con)
    for table, spec in (tables or {}).items():
        builder.add(table, spec)
    store.create_views(con)
    return con


def run_case(rule: Rule, case: dict[str, Any]) -> CaseResult:
    name = case.get("name", "?")
    for t in rule.thresholds.values():
        t.value = None
    rules_mod.apply_overrides([rule], {f"{rule.id}.{k}": v for k, v in (case.get("thresholds") or {}).items()})
    con = build_case_store(case.get("tables", {}))
    try:
        findings = rules_mod.evaluate_rule(con, rule)
    finally:
        con.close()
        for t in rule.thresholds.values():
            t.value = None
    expect = case.get("expect")
    if expect not in ("fire", "quiet"):
        return CaseResult(name, False, f"expect must be 'fire' or 'quiet', not {expect!r}", findings)
    if expect == "quiet":
        ok = not findings
        return CaseResult(name, ok, "" if ok else f"fired: {findings[0].title}", findings)
    if not findings:
        return CaseResult(name, False, "did not fire", findings)
    count = case.get("findings")
    if count is not None and len(findings) != count:
        return CaseResult(name, False, f"expected {count} findings, got {len(findings)}", findings)
    for key, want in (case.get("evidence") or {}).items():
        if key == "impact_ns":
            got = findings[0].impact_ns
        elif key in ("title", "message", "recommendation"):
            text = getattr(findings[0], key)
            missing = [w for w in (want if isinstance(want, list) else [want]) if w not in text]
            if missing:
                return CaseResult(name, False, f"{key} lacks {missing}: {text!r}", findings)
            continue
        else:
            got = findings[0].evidence.get(key, "<missing>")
        if not matches(got, want):
            return CaseResult(name, False, f"evidence {key}: expected {want!r}, got {got!r}", findings)
    return CaseResult(name, True, "", findings)


def matches(got: Any, want: Any) -> bool:
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(want, bool):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
    return got == want


def run_file(rule: Rule, path: Path) -> list[CaseResult]:
    data = load_cases(path)
    if data.get("rule") != rule.id:
        raise RuleError(f"{path}: 'rule:' says {data.get('rule')!r}, expected {rule.id!r}")
    return [run_case(rule, case) for case in data["cases"]]
