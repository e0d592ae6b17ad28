"""The comparison report as one self-contained HTML file: the verdict, the gate, the
comparability warnings, the side-by-side tables, and each profile's charts (those of the
analyze report, render/charts.py) side by side, one column per profile.

Labels, paths, kernel names and NVTX text come from the profiles and are untrusted: every value
passes through html.esc, and chart specs are embedded as escaped JSON (render/html.py).
"""

from __future__ import annotations

import dataclasses
import re

from nsight_doctor.compare import Comparison
from nsight_doctor.render import charts as charts_mod
from nsight_doctor.render.common import input_line, summary_rows
from nsight_doctor.render.compare import Table, gate_line, tables
from nsight_doctor.render.html import PAGE, card, chart_scripts, css, esc, figure

CSS = """
.verdict { background:var(--card); border:1px solid var(--line); border-left:5px solid var(--accent);
  border-radius:8px; padding:12px 18px; font-size:15px; overflow-wrap:anywhere; }
.gate { margin:10px 0; font-weight:600; overflow-wrap:anywhere; }
.gate.failed { color:#a50f15; } .gate.passed { color:#2d7d32; }
ul.warnings li { overflow-wrap:anywhere; }
.side { display:grid; gap:12px; align-items:start; }
.side > div { min-width:0; }
.side figure.chart { margin:0; }
.side .label { font-weight:700; margin-bottom:4px; overflow-wrap:anywhere; }
main { max-width:1640px; }
.side .vis { overflow:hidden; }
.side .vis svg, .side .vis canvas { max-width:100%; height:auto; }
.side .vega-embed { display:block; max-width:100%; }
table.grid td.first { text-align:left; white-space:normal; min-width:12em; overflow-wrap:anywhere; }
"""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"


def render(c: Comparison, static: bool = False, charts: list[list[charts_mod.Chart]] | None = None) -> str:
    """The comparison as one HTML document. ``charts``: each profile's charts (charts.build),
    built here when not given; ``static`` draws them as inline SVG (no scripts)."""
    if charts is None:
        charts = [charts_mod.build(p.diagnosis) for p in c.profiles]
    # Chart ids are anchors: unique per profile in one page.
    charts = [[dataclasses.replace(ch, id=f"p{i + 1}-{ch.id}") for ch in cs] for i, cs in enumerate(charts)]
    labels = [p.label for p in c.profiles]
    names = " vs ".join(labels)
    ts = tables(c)
    body = [
        '<header class="top"><div class="brand">nsight-doctor</div>'
        f"<h1>{esc(names)}</h1>"
        f'<p class="sub">Comparison by nsight-doctor {esc(c.profiles[0].diagnosis.tool["version"])}: '
        f"{len(c.profiles)} profiles, the first ({esc(labels[0])}) is the baseline.</p></header>",
        nav(ts, charts),
        overview(c),
        *(table_section(t) for t in ts),
        chart_sections(labels, charts, static),
        summaries(c),
        about(c),
    ]
    flat = [ch for cs in charts for ch in cs]
    scripts = "" if static or not flat else chart_scripts(flat)
    return PAGE.format(
        title=esc(f"nsight-doctor: {names}"),
        css=css() + CSS,
        body="\n".join(b for b in body if b),
        scripts=scripts,
        mode="static" if static else "interactive",
    )


def nav(ts: list[Table], charts: list[list[charts_mod.Chart]]) -> str:
    items = [("verdict", "Verdict")]
    items += [(f"table-{slug(t.id)}", t.title.split(" (")[0]) for t in ts]
    if any(charts):
        items.append(("charts", "Charts"))
    items += [("summaries", "Summaries"), ("about", "How this was made")]
    return '<nav class="toc">' + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in items) + "</nav>"


def overview(c: Comparison) -> str:
    v, g = c.verdict, c.gate
    out = ['<section id="verdict"><h2>Verdict</h2>', f'<div class="verdict">{esc(v.text)}</div>']
    state = "failed" if g.failed else "passed" if g.threshold_pct is not None else ""
    out.append(f'<p class="gate {state}">{esc(gate_line(c))}</p>')
    cards = []
    if v.ratio:
        tone = "good" if v.direction == "faster" else "bad" if v.direction == "slower" else ""
        cards.append(card(f"{v.candidate} against {v.baseline}", f"{v.ratio:.2f}x", f"{g.label}", tone))
    for cause in v.causes[:2]:
        cards.append(
            card(
                cause.label,
                f"{cause.baseline_share_pct or 0:.0f}% → {cause.candidate_share_pct or 0:.0f}%",
                "of the time" + (f" on GPU {cause.device_id}" if cause.device_id is not None else ""),
            )
        )
    if cards:
        out.append(f'<div class="cards">{"".join(cards)}</div>')
    if c.warnings:
        out.append("<h3>Comparability</h3>")
        items = "".join(f"<li>{esc(w.message)} <code>{esc(w.code)}</code></li>" for w in c.warnings)
        out.append(f'<ul class="warnings">{items}</ul>')
    out.append("</section>")
    return "\n".join(out)


def table_section(t: Table) -> str:
    head = "".join(f"<th>{esc(x)}</th>" for x in t.columns)
    body = []
    for r in t.rows:
        tds = []
        for i, x in enumerate(r):
            cls = "first" if i == 0 else "txt" if i in t.left else "num"
            tds.append(f'<td class="{cls}">{esc(x)}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    note = f'<p class="hint">{esc(t.note)}</p>' if t.note else ""
    return (
        f'<section id="table-{slug(t.id)}"><h2>{esc(t.title)}</h2>{note}<div class="scroll"><table class="grid">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div></section>"
    )


def chart_sections(labels: list[str], charts: list[list[charts_mod.Chart]], static: bool) -> str:
    if not any(charts):
        return ""
    n = len(labels)
    out = [
        '<section id="charts" class="charts"><h2>Charts side by side</h2>'
        '<p class="hint">The charts of each profile\'s own report (nsight-doctor analyze --format html), one '
        "column per profile.</p>"
    ]
    # Charts by their id in the analyze report, in that report's order.
    order: list[str] = []
    for cs in charts:
        for ch in cs:
            key = ch.id.split("-", 1)[1]
            if key not in order:
                order.append(key)
    for key in order:
        cols = []
        title = ""
        for label, cs in zip(labels, charts):
            found = next((x for x in cs if x.id.split("-", 1)[1] == key), None)
            head = f'<div class="label">{esc(label)}</div>'
            if found is None:
                cols.append(f'<div>{head}<p class="empty">No data for this chart.</p></div>')
            else:
                title = title or found.title
                cols.append(f"<div>{head}{figure(found, static)}</div>")
        out.append(
            f"<h3>{esc(title)}</h3>"
            f'<div class="side" style="grid-template-columns:repeat({n},minmax(0,1fr))">{"".join(cols)}</div>'
        )
    out.append("</section>")
    return "\n".join(out)


def summaries(c: Comparison) -> str:
    cols = []
    for p in c.profiles:
        rows = "".join(
            f"<tr><th>{esc(label)}</th><td>{esc(value)}</td></tr>"
            for label, value in summary_rows(p.diagnosis)
            if label or value
        )
        cols.append(f'<div><div class="label">{esc(p.label)}</div><table class="kv summary">{rows}</table></div>')
    n = len(c.profiles)
    return (
        '<section id="summaries"><h2>Summaries</h2><p class="hint">Each profile\'s summary, as analyze gives it.</p>'
        f'<div class="side" style="grid-template-columns:repeat({n},minmax(0,1fr))">{"".join(cols)}</div></section>'
    )


def about(c: Comparison) -> str:
    out = ['<section id="about"><h2>How this was made</h2><ul>']
    command = c.profiles[0].diagnosis.command
    if command:
        out.append(f"<li>Command: <code>{esc(command)}</code></li>")
    out.append(f"<li>Tool: nsight-doctor {esc(c.profiles[0].diagnosis.tool['version'])}</li>")
    for p in c.profiles:
        for inp in p.diagnosis.inputs:
            out.append(f"<li>{esc(p.label)}: {esc(input_line(inp))}</li>")
        for n in p.diagnosis.notes:
            out.append(f"<li>Note ({esc(p.label)}): {esc(n)}</li>")
    out.append(
        "<li>This file is self-contained: it loads nothing from the network. Charts are drawn with Vega-Lite.</li>"
    )
    out.append("</ul></section>")
    return "\n".join(out)
