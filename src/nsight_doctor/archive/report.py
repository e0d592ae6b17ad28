"""``nsight-doctor report``: what a fleet database says about many profiles at once.

``build_report`` reads the database (read-only) into a ``FleetReport``: plain tables of rows,
each with its title, columns and a note. Renderers turn that into text, Markdown or JSON and
never query the database; a renderer with charts (HTML) takes the same ``FleetReport`` (or
its ``to_dict()``) and registers itself in ``RENDERERS``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb

from nsight_doctor.archive.query import connect_readonly, jsonable
from nsight_doctor.db import quote, table_exists
from nsight_doctor.errors import DoctorError
from nsight_doctor.model import fmt_ns

REPORT_VERSION = 1


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    # How each column is shown: ns (duration), pct, int, float, text.
    units: list[str] = field(default_factory=list)


@dataclass
class FleetReport:
    db: str
    filters: dict[str, str]
    overview: list[tuple[str, Any]]
    tables: list[Table]

    def to_dict(self) -> dict[str, Any]:
        return {"report_version": REPORT_VERSION, **jsonable(asdict(self))}


class Reader:
    def __init__(self, con: duckdb.DuckDBPyConnection, where: dict[str, str]):
        self.con = con
        conds = ["TRUE"]
        self.params: list[Any] = []
        for k, v in where.items():
            conds.append("labels[?] = ?")
            self.params += [k, v]
        self.cte = f"p AS (SELECT * FROM profiles WHERE {' AND '.join(conds)})"

    def rows(self, sql: str, params: list[Any] | None = None) -> list[list[Any]]:
        full = f"WITH {self.cte}, f AS (SELECT * FROM findings WHERE profile_id IN (SELECT profile_id FROM p)) {sql}"
        return [list(r) for r in self.con.execute(full, self.params + (params or [])).fetchall()]

    def one(self, sql: str, params: list[Any] | None = None) -> list[Any]:
        r = self.rows(sql, params)
        return r[0] if r else []

    def summary_columns(self) -> dict[str, str]:
        rows = self.con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'summaries'"
        ).fetchall()
        return {r[0]: r[1] for r in rows}


def build_report(db: str, top: int = 10, by_labels: list[str] | None = None, trend: str = "capture", where=None):
    con = connect_readonly(db)
    try:
        if not table_exists(con, "profiles"):
            raise DoctorError(f"'{db}' is not a fleet database (no profiles table); make one with nsight-doctor ingest")
        r = Reader(con, where or {})
        return FleetReport(
            db=str(db),
            filters=dict(where or {}),
            overview=overview(r),
            tables=[t for t in tables(r, top, by_labels or [], trend) if t is not None],
        )
    finally:
        con.close()


def overview(r: Reader) -> list[tuple[str, Any]]:
    n, gpus, first, last = r.one(
        "SELECT count(*), count(DISTINCT g), min(capture_start), max(capture_start) "
        "FROM p LEFT JOIN (SELECT profile_id, unnest(gpu_names) AS g FROM p) USING (profile_id)"
    )
    kinds = r.rows("SELECT kind, count(*) FROM p GROUP BY 1 ORDER BY 2 DESC, 1")
    failures = r.con.execute("SELECT count(*) FROM failures").fetchone()
    with_findings = r.one("SELECT count(DISTINCT profile_id) FROM f")[0]
    out: list[tuple[str, Any]] = [
        ("profiles", n),
        ("by kind", ", ".join(f"{k} {c}" for k, c in kinds) or "none"),
        ("distinct GPUs", gpus),
        ("profiles with findings", with_findings),
        ("captures from", f"{first:%Y-%m-%d} to {last:%Y-%m-%d}" if first and last else "unknown"),
        ("failed files", failures[0] if failures else 0),
    ]
    return out


def tables(r: Reader, top: int, by_labels: list[str], trend: str) -> list[Table | None]:
    cols = r.summary_columns()
    label_keys = (
        by_labels or [k for (k,) in r.rows("SELECT DISTINCT unnest(map_keys(labels)) AS k FROM p ORDER BY 1")][:5]
    )
    out: list[Table | None] = [
        worst_utilisation(r, top),
        slowest_steps(r, top, cols),
        frequent_findings(r, top),
        breakdown(r, "gpu", "Findings by GPU", "(SELECT profile_id, unnest(gpu_names) AS value FROM p)"),
        breakdown(
            r,
            "tool_version",
            "Findings by tool version",
            "(SELECT profile_id, coalesce(tool, '?') || ' ' || coalesce(tool_version, '?') AS value FROM p)",
        ),
    ]
    fw = framework_column(cols)
    if fw:
        out.append(
            breakdown(
                r,
                "framework",
                "Findings by framework",
                f"(SELECT profile_id, {quote(fw)} AS value FROM summaries "
                "WHERE profile_id IN (SELECT profile_id FROM p))",
            )
        )
    for key in label_keys:
        out.append(
            breakdown(
                r,
                f"label:{key}",
                f"Findings by label {key}",
                "(SELECT profile_id, labels[?] AS value FROM p)",
                [key],
            )
        )
    out.append(trend_table(r, trend))
    out.append(failures(r, top))
    return out


def worst_utilisation(r: Reader, top: int) -> Table:
    rows = r.rows(
        """SELECT p.path, array_to_string(p.gpu_names, ', '), p.gpu_busy_pct, s.gpu_window_ns,
                  s.kernel_count, p.top_rule_id, p.top_impact_ns
           FROM p JOIN summaries s ON s.profile_id = p.profile_id
           WHERE p.gpu_busy_pct IS NOT NULL
           ORDER BY p.gpu_busy_pct, p.path LIMIT ?""",
        [top],
    )
    return Table(
        "worst_utilisation",
        "Lowest GPU utilisation",
        ["profile", "GPUs", "busy", "GPU window", "kernels", "top finding", "its impact"],
        rows,
        "GPU busy share of each profile's activity window (mean over its GPUs); lowest first.",
        ["text", "text", "pct", "ns", "int", "text", "ns"],
    )


def step_column(cols: dict[str, str]) -> str | None:
    steps = [c for c in cols if "step" in c and "_ns" in c and cols[c] in ("BIGINT", "DOUBLE", "INTEGER")]
    for pref in ("median", "mean", "p50"):
        for c in steps:
            if pref in c:
                return c
    return steps[0] if steps else None


def framework_column(cols: dict[str, str]) -> str | None:
    names = [c for c in cols if c.startswith("framework") and cols[c] == "VARCHAR"]
    for c in ("framework", "framework_name"):
        if c in names:
            return c
    return names[0] if names else None


def slowest_steps(r: Reader, top: int, cols: dict[str, str]) -> Table:
    col = step_column(cols)
    if col is None:
        return Table(
            "slowest_steps",
            "Slowest steps",
            [],
            [],
            "Not available: this database's summaries have no step time yet (it comes with the summary's "
            "steps, when the analysis finds them).",
        )
    rows = r.rows(
        f"""SELECT p.path, array_to_string(p.gpu_names, ', '), s.{quote(col)}, p.gpu_busy_pct, p.top_rule_id
            FROM p JOIN summaries s ON s.profile_id = p.profile_id WHERE s.{quote(col)} IS NOT NULL
            ORDER BY s.{quote(col)} DESC LIMIT ?""",
        [top],
    )
    return Table(
        "slowest_steps",
        "Slowest steps",
        ["profile", "GPUs", "step time", "busy", "top finding"],
        rows,
        f"summaries.{col}, longest first.",
        ["text", "text", "ns", "pct", "text"],
    )


def frequent_findings(r: Reader, top: int) -> Table:
    rows = r.rows(
        """SELECT rule_id, count(DISTINCT profile_id) AS profiles,
                  100.0 * count(DISTINCT profile_id) / nullif((SELECT count(*) FROM p), 0),
                  count(*), sum(impact_ns), median(impact_ns), median(impact_pct),
                  arg_max(severity, severity_rank)
           FROM f GROUP BY rule_id ORDER BY profiles DESC, sum(impact_ns) DESC LIMIT ?""",
        [top],
    )
    return Table(
        "frequent_findings",
        "Most frequent findings",
        [
            "rule",
            "profiles",
            "of all",
            "findings",
            "total impact (GPU time)",
            "median impact",
            "median % of window",
            "severity",
        ],
        rows,
        "How many profiles each rule fired on, and the time a fix would recover, summed over them and over the GPUs "
        "of each (GPU time: with several GPUs it can exceed a capture's length); the median share is per finding, "
        "of its own GPU's window.",
        ["text", "int", "pct", "int", "ns", "ns", "pct", "text"],
    )


def breakdown(r: Reader, id_: str, title: str, dim_sql: str, params: list[Any] | None = None) -> Table:
    rows = r.rows(
        f"""
        , d AS (SELECT DISTINCT profile_id, value FROM {dim_sql} WHERE value IS NOT NULL),
        per AS (SELECT d.value, count(DISTINCT d.profile_id) AS profiles, median(p.gpu_busy_pct) AS busy
                FROM d JOIN p USING (profile_id) GROUP BY 1),
        fr AS (SELECT d.value, f.rule_id, count(DISTINCT f.profile_id) AS n, sum(f.impact_ns) AS impact
               FROM d JOIN f USING (profile_id) GROUP BY 1, 2),
        tops AS (SELECT value,
                        first(rule_id || ' (' || n || ')' ORDER BY n DESC, impact DESC NULLS LAST, rule_id) AS top_rule,
                        sum(impact) AS impact FROM fr GROUP BY 1),
        counts AS (SELECT d.value, count(*) AS findings FROM d JOIN f USING (profile_id) GROUP BY 1)
        SELECT per.value, per.profiles, per.busy, coalesce(counts.findings, 0) / per.profiles,
               tops.top_rule, tops.impact
        FROM per LEFT JOIN tops USING (value) LEFT JOIN counts USING (value)
        ORDER BY per.profiles DESC, per.value""",
        params,
    )
    return Table(
        id_,
        title,
        ["value", "profiles", "median busy", "findings per profile", "most frequent rule (profiles)", "total impact"],
        rows,
        "",
        ["text", "int", "pct", "float", "text", "ns"],
    )


def trend_table(r: Reader, trend: str) -> Table:
    params: list[Any] = []
    if trend == "capture":
        period, title = "strftime(capture_start, '%Y-%m')", "Trend by capture month"
        note = "Profiles without a capture time (Nsight Compute reports) are left out."
    elif trend == "ingest":
        period, title, note = "strftime(ingested_at, '%Y-%m-%d')", "Trend by ingest day", ""
    else:
        key = trend.split(":", 1)[1]
        period, title, note = "labels[?]", f"Trend by label {key}", "In the order of the label's values."
        params = [key]
    rows = r.rows(
        f"""
        , d AS (SELECT profile_id, {period} AS period FROM p),
        per AS (SELECT period, count(*) AS profiles, median(gpu_busy_pct) AS busy,
                       median(top_impact_ns) AS top_impact FROM d JOIN p USING (profile_id)
                WHERE period IS NOT NULL GROUP BY 1),
        fr AS (SELECT period, rule_id, count(DISTINCT f.profile_id) AS n, sum(impact_ns) AS impact
               FROM d JOIN f USING (profile_id) GROUP BY 1, 2),
        tops AS (SELECT period,
                        first(rule_id || ' (' || n || ')' ORDER BY n DESC, impact DESC NULLS LAST, rule_id) AS top_rule
                 FROM fr GROUP BY 1),
        counts AS (SELECT period, count(*) AS findings FROM d JOIN f USING (profile_id) GROUP BY 1)
        SELECT per.period, per.profiles, per.busy, coalesce(counts.findings, 0) / per.profiles, per.top_impact,
               tops.top_rule
        FROM per LEFT JOIN tops USING (period) LEFT JOIN counts USING (period) ORDER BY per.period""",
        params,
    )
    return Table(
        "trend",
        title,
        ["period", "profiles", "median busy", "findings per profile", "median top impact", "most frequent rule"],
        rows,
        note,
        ["text", "int", "pct", "float", "ns", "text"],
    )


def failures(r: Reader, top: int) -> Table:
    rows = [
        list(x)
        for x in r.con.execute(
            "SELECT error_type, count(*), min(path), arg_min(error, path) FROM failures "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?",
            [top],
        ).fetchall()
    ]
    return Table(
        "failures",
        "Files that could not be analysed",
        ["error type", "files", "example", "its error"],
        rows,
        'All of them: nsight-doctor query --db DB "SELECT path, error FROM failures"',
        ["text", "int", "text", "text"],
    )


# --- renderers ------------------------------------------------------------------------------


def cell(v: Any, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "pct":
        return f"{v:.1f}%"
    if unit == "int":
        return f"{round(v):,}"
    if unit == "float":
        return f"{v:.1f}"
    return " ".join(str(v).split())


def shorten(s: str, n: int = 70) -> str:
    """A cell cut to n characters: a path keeps its end (the file's name), anything else (an
    error message, a kernel name) its start, where it says what it is."""
    if len(s) <= n:
        return s
    if os.sep in s and " " not in s:
        return "…" + s[-(n - 1) :]
    return s[: n - 1] + "…"


def render_text(rep: FleetReport) -> str:
    out = [f"Fleet report: {rep.db}"]
    if rep.filters:
        out[0] += " (" + ", ".join(f"{k}={v}" for k, v in rep.filters.items()) + ")"
    out.append("")
    width = max(len(k) for k, _ in rep.overview)
    out += [f"  {k.ljust(width)}  {v}" for k, v in rep.overview]
    for t in rep.tables:
        out += ["", t.title, "-" * len(t.title)]
        if not t.rows:
            out.append(t.note if not t.columns else "(none)")
            continue
        cells = [[shorten(cell(v, u)) for v, u in zip(row, t.units)] for row in t.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(t.columns)]
        right = [u in ("ns", "pct", "int", "float") for u in t.units]

        def line(vals: list[str], widths: list[int] = widths, right: list[bool] = right) -> str:
            return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(vals, widths, right)).rstrip()

        out += [line(t.columns), "  ".join("-" * w for w in widths)] + [line(r) for r in cells]
        if t.note:
            out.append(t.note)
    return "\n".join(out) + "\n"


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*").replace("_", "\\_")


def render_markdown(rep: FleetReport) -> str:
    out = [f"# Fleet report: `{rep.db}`", ""]
    if rep.filters:
        out += ["Only profiles with " + ", ".join(f"`{k}={v}`" for k, v in rep.filters.items()) + ".", ""]
    out += ["| | |", "|---|---|"] + [f"| {k} | {md_escape(str(v))} |" for k, v in rep.overview] + [""]
    for t in rep.tables:
        out += [f"## {t.title}", ""]
        if not t.rows:
            out += [t.note if not t.columns else "None.", ""]
            continue
        out.append("| " + " | ".join(t.columns) + " |")
        out.append("|" + "|".join("---:" if u in ("ns", "pct", "int", "float") else "---" for u in t.units) + "|")
        out += ["| " + " | ".join(md_escape(cell(v, u)) for v, u in zip(row, t.units)) + " |" for row in t.rows]
        out += ["", t.note, ""] if t.note else [""]
    return "\n".join(out)


def render_json(rep: FleetReport) -> str:
    return json.dumps(rep.to_dict(), indent=1, ensure_ascii=False) + "\n"


#: Output formats. An HTML renderer with charts (the reports work) adds itself here.
RENDERERS: dict[str, Callable[[FleetReport], str]] = {
    "text": render_text,
    "markdown": render_markdown,
    "json": render_json,
}


def render_report(rep: FleetReport, fmt: str) -> str:
    if fmt not in RENDERERS:
        raise DoctorError(f"no '{fmt}' renderer for fleet reports (have: {', '.join(RENDERERS)})")
    return RENDERERS[fmt](rep)
