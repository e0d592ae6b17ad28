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

Tables are the base tables of the contract (ingest/base_tables.yaml) without their ``base_``
prefix, with their neutral values (``direction: DtoH``, ``src_kind: pinned``, ``kind:
push_pop``). Conveniences, so that cases read like the views: ``name`` (and
``demangled_name``) becomes a string id; missing columns take defaults (process 1000,
thread 1000, device 0, stream 7, a 1x1x1 grid, a unique correlation id); Python and CPU sample
frames take ``function``/``file`` and ``symbol``/``module`` as text. The ``ncu`` table
takes one profiled kernel per row, with its metrics by their neutral names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from nsight_doctor import rules as rules_mod
from nsight_doctor import store, yamlio
from nsight_doctor.db import quote, sandbox
from nsight_doctor.errors import RuleError
from nsight_doctor.ingest import contract, create_missing
from nsight_doctor.model import Finding, Rule

DEFAULT_PID = 1000
DEFAULT_TID = 1000
# Text columns and the id columns they fill.
STRING_COLUMNS = {
    "base_kernels": {"name": "short_name_id", "demangled_name": "demangled_name_id"},
    "base_api_calls": {"name": "name_id"},
    "base_threads": {"name": "name_id"},
    "base_profiler_overhead": {"name": "name_id"},
    "base_python_frames": {"function": "function_id", "file": "file_id"},
    "base_cpu_frames": {"symbol": "symbol_id", "module": "module_id"},
    "base_os_calls": {"name": "name_id"},
}
DEFAULTS = {
    "device_id": 0,
    "stream_id": 7,
    "context_id": 1,
    "grid_x": 1,
    "grid_y": 1,
    "grid_z": 1,
    "block_x": 1,
    "block_y": 1,
    "block_z": 1,
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
        create_missing(con)

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
        (columns of base_ncu_kernel_metrics, or `stall_<reason>` ratios) and an optional
        `rules` list of ncu rule results."""
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
            stalls = {k[6:]: v for k, v in metrics.items() if k.startswith("stall_")}
            values = {k: v for k, v in metrics.items() if not k.startswith("stall_")}
            self.add("ncu_kernel_metrics", [{"action_id": row["action_id"], **values}])
            for reason, ratio in stalls.items():
                self.add("ncu_stalls", [{"action_id": row["action_id"], "reason": reason, "ratio": ratio}])
            for r in rules:
                self.add("ncu_rules", [{"action_id": row["action_id"], **r}])

    def add(self, table: str, spec: Any) -> None:
        if table == "ncu":
            return self.add_ncu(spec)
        base = f"base_{table}"
        if base not in contract():
            known = ", ".join(t.removeprefix("base_") for t in contract())
            raise RuleError(f"unknown test table '{table}' (known: ncu, {known})")
        columns = contract()[base].column_names
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
        for col, value in (("pid", DEFAULT_PID), ("tid", DEFAULT_TID)):
            if col in columns:
                row.setdefault(col, value)
        if "correlation_id" in columns and row.get("correlation_id") is None and base != "base_nvtx":
            self.next_corr += 1
            row["correlation_id"] = self.next_corr
        for col, value in DEFAULTS.items():
            if col in columns and col not in row:
                row[col] = value
        return row


def load_cases(path: Path) -> dict[str, Any]:
    data = yamlio.load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise RuleError(f"{path}: expected 'rule:' and a non-empty 'cases:' list")
    return data


def build_case_store(tables: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    # A case's SQL and the rule's queries come from rule files, which may be someone
    # else's: they reach this in-memory store and nothing else (no files, no extensions).
    sandbox(con)
    builder = StoreBuilder(con)
    for table, spec in (tables or {}).items():
        builder.add(table, spec)
    store.create_views(con)
    return con


def run_case(rule: Rule, case: dict[str, Any]) -> CaseResult:
    """Runs one case. A case marked `xfail: reason` is a known miss: it passes when the check
    fails, and fails when the check unexpectedly passes (as pytest's strict xfail)."""
    result = check_case(rule, case)
    if not case.get("xfail"):
        return result
    if result.ok:
        return CaseResult(result.name, False, f"passed, but is marked xfail ({case['xfail']})", result.findings)
    return CaseResult(result.name, True, f"known miss: {case['xfail']} ({result.detail})", result.findings)


def check_case(rule: Rule, case: dict[str, Any]) -> CaseResult:
    name = case.get("name", "?")
    overrides = {f"{rule.id}.{k}": v for k, v in (case.get("thresholds") or {}).items()}
    [rule] = rules_mod.with_overrides([rule], overrides)
    con = build_case_store(case.get("tables", {}))
    try:
        findings = rules_mod.evaluate_rule(con, rule)
    finally:
        con.close()
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
        elif (field := key.removesuffix("_lacks")) in ("title", "message", "recommendation"):
            # (the strings the text must hold, or with _lacks must not)
            text = getattr(findings[0], field)
            absent = key != field
            wrong = [w for w in (want if isinstance(want, list) else [want]) if (w in text) == absent]
            if wrong:
                return CaseResult(name, False, f"{field} {'has' if absent else 'lacks'} {wrong}: {text!r}", findings)
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
