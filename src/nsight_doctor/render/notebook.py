"""The notebook report: a Jupyter notebook (nbformat 4) with the same content as the HTML one.

Its cells reopen the kept DuckDB store, re-run each finding's SQL and each chart's data query,
and leave the reader at a prompt to continue with SQL and polars. The charts are PNG
attachments of markdown cells, drawn by vl-convert, so that the notebook shows them before it
runs, and in viewers that run nothing. Text from the profile goes through the Markdown
renderer's escaping; SQL goes into code cells as Python string literals that hold it exactly.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from nsight_doctor.model import Diagnosis
from nsight_doctor.render import charts as charts_mod
from nsight_doctor.render.common import impact_text, input_line, summary_rows
from nsight_doctor.render.html import anchor
from nsight_doctor.render.markdown import escape, evidence_block


def render(d: Diagnosis, store: str | None = None, charts: list[charts_mod.Chart] | None = None) -> str:
    """The notebook as JSON text. ``store`` is the DuckDB file's path as the notebook should
    open it (relative to the notebook's folder); by default d.store_path."""
    import vl_convert as vlc

    if charts is None:
        charts = charts_mod.build(d)
    store = store or d.store_path
    cells: list[dict[str, Any]] = []

    def md(text: str, attachments: dict[str, Any] | None = None) -> None:
        cell: dict[str, Any] = {"cell_type": "markdown", "id": f"c{len(cells)}", "metadata": {}, "source": text}
        if attachments:
            cell["attachments"] = attachments
        cells.append(cell)

    def code(text: str) -> None:
        cells.append(
            {
                "cell_type": "code",
                "id": f"c{len(cells)}",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": text,
            }
        )

    names = ", ".join(escape(i["path"].rsplit("/", 1)[-1]) for i in d.inputs)
    intro = [f"# nsight-doctor diagnosis: {names}", ""]
    work = [f for f in d.findings if f.impact_ns and f.scope == "steady"]
    if work:
        intro.append(f"**Top finding:** {work[0].render('title', escape)} ({escape(impact_text(work[0], d))}).")
        intro.append("")
    intro.append(
        "Every number below comes from SQL over the DuckDB store of this analysis; the code cells run that SQL "
        "again, so that you can check a figure and keep exploring (run all cells: *Run > Run All Cells*)."
    )
    md("\n".join(intro))
    code(setup_cell(store))
    md(summary_md(d))

    md("## Findings\n\nRanked by the time a fix would recover." if d.findings else "## Findings\n\nNo findings.")
    for rank, f in enumerate(d.findings, 1):
        lines = [
            f'<a id="{anchor(rank, f)}"></a>',
            f"### {rank}. {f.render('title', escape)}",
            "",
            f"*Severity:* {f.severity} · *Scope:* {f.scope} · *Impact:* {escape(impact_text(f, d))} · "
            f"*Rule:* `{f.rule_id}` · *Tags:* {', '.join(f.tags)}",
            "",
            f.render("message", escape),
            "",
            f"**What to do.** {f.render('recommendation', escape)}",
            "",
            *evidence_block(f.evidence),
        ]
        md("\n".join(lines))
        for name, sql in f.queries.items():
            what = (
                "The rule's query, with the thresholds of this run: one of its rows is this finding."
                if name == "query"
                else f"The evidence table {name}."
            )
            code(f"# {what}\nq({py_str(sql)})")

    current = None
    for c in charts:
        if c.section != current:
            current = c.section
            md(f"## {charts_mod.SECTIONS[c.section]}")
        png = vlc.vegalite_to_png(c.spec, scale=1.5)
        name = f"{c.id}.png"
        md(
            f"### {escape(c.title)}\n\n![{escape(c.title)}](attachment:{name})\n\n{escape(c.caption)}",
            {name: {"image/png": base64.b64encode(png).decode()}},
        )
        code(f"# The data of this chart.\nq({py_str(c.source)})" if is_sql(c.source) else f"# {c.source.strip()}")

    md(
        "## Your own SQL\n\nThe store's views are documented in docs/schema.md of nsight-doctor. "
        "`q(sql)` returns a polars DataFrame when polars is installed, else a DuckDB relation."
    )
    code('q("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name")')
    code(
        q_call(
            "SELECT name, count(*) AS count, sum(duration) / 1e6 AS total_ms, median(duration) / 1e3 AS median_us\n"
            "FROM kernels GROUP BY name ORDER BY total_ms DESC LIMIT 20\n"
        )
    )
    md(provenance_md(d, store))
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
            "nsight_doctor": {"version": d.tool["version"], "store": store},
        },
        "cells": cells,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def is_sql(source: str) -> bool:
    return source.lstrip().upper().startswith(("SELECT", "WITH", "--"))


def py_str(text: str) -> str:
    """A Python literal for text: a triple-quoted string where that holds it exactly, else repr."""
    if '"""' not in text and "\\" not in text and not text.endswith('"'):
        return '"""\n' + text + '"""'
    return repr(text)


def q_call(sql: str) -> str:
    return f"q({py_str(sql)})"


def setup_cell(store: str | None) -> str:
    path = repr(store) if store else "'report.duckdb'  # the store kept with --db"
    return f"""# Reopen the analysis' DuckDB store (read-only) and define q(sql) for the cells below.
import duckdb

try:
    import polars as pl
except ImportError:
    pl = None

STORE = {path}
con = duckdb.connect(STORE, read_only=True)


def q(sql):
    \"\"\"Runs SQL on the store: a polars DataFrame when polars is installed, else a DuckDB relation.\"\"\"
    if pl is None:
        return con.sql(sql)
    cur = con.execute(sql)
    cols = [c[0] for c in cur.description]
    return pl.DataFrame(cur.fetchall(), schema=cols, orient="row", infer_schema_length=None)


q("SELECT * FROM summary_capture")"""


def summary_md(d: Diagnosis) -> str:
    out = ["## Summary", "", "| Metric | Value |", "|---|---|"]
    out += [f"| {escape(label)} | {escape(value)} |" for label, value in summary_rows(d)]
    return "\n".join(out)


def provenance_md(d: Diagnosis, store: str | None) -> str:
    out = ["## How this was made", ""]
    if d.command:
        out += ["```", d.command.replace("```", "'''"), "```", ""]
    out.append(f"- Tool: nsight-doctor {escape(d.tool['version'])}")
    out += [f"- Input: {escape(input_line(i))}" for i in d.inputs]
    if store:
        out.append(f"- Store: `{os.path.basename(store).replace('`', '')}` (DuckDB), opened by the first code cell")
    out += [f"- Note: {escape(n)}" for n in d.notes]
    return "\n".join(out)
