"""The HTML report: one self-contained file that works offline, to attach to a ticket.

It holds the summary, the ranked findings with their evidence and the SQL that produced it
(each with an anchor, #finding-<rank>-<rule-id>), the charts, and how the report was made.
Charts are Vega-Lite specs drawn in the page by the Vega, Vega-Lite and vega-embed scripts that
vl-convert ships (inlined, no CDN), or, with ``static=True`` (for the PDF), inline SVG images
drawn by vl-convert, with no script at all.

Kernel names and NVTX text come from the profiled program and are untrusted: every value
passes through html.escape, chart specs are embedded as JSON with <, > and & escaped, and
links are written only for http(s) URLs.
"""

from __future__ import annotations

import base64
import html
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from nsight_doctor.model import TITLE_NAME_MAX, Diagnosis, Finding, fill, fmt_ns
from nsight_doctor.render import charts as charts_mod
from nsight_doctor.render.common import impact_text, input_line, pct, summary_rows, window_of
from nsight_doctor.render.markdown import show

SEVERITY_COLORS = {
    "critical": "#a50f15",
    "high": "#d94841",
    "medium": "#e8890c",
    "low": "#4e79a7",
    "info": "#7a7a7a",
}


def esc(v: Any) -> str:
    """Text for HTML: control characters dropped, markup and quotes entity-encoded."""
    s = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in str(v))
    return html.escape(s, quote=True)


def esc_value(v: Any) -> str:
    """A value filled into a rule's text: escaped, and its backticks made inert so that only the
    rule's own `code` spans become <code>."""
    return esc(v).replace("`", "&#96;")


CODE = re.compile(r"`([^`]+)`")


def rule_text(f: Finding, name: str) -> str:
    """A finding's title, message or recommendation as HTML: the rule's (trusted) template,
    escaped, filled with escaped values, with `code` spans."""
    if name in f.templates:
        text = fill(esc(f.templates[name]), f.values, esc_value, TITLE_NAME_MAX if name == "title" else None)
    else:
        text = esc_value(getattr(f, name))
    return CODE.sub(r"<code>\1</code>", text)


def anchor(rank: int, f: Finding) -> str:
    return f"finding-{rank}-{re.sub(r'[^a-z0-9-]', '-', f.rule_id.lower())}"


@lru_cache(maxsize=1)
def css() -> str:
    return resources.files("nsight_doctor.render").joinpath("report.css").read_text()


def json_script(value: Any) -> str:
    """JSON that is safe inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(d: Diagnosis, static: bool = False, charts: list[charts_mod.Chart] | None = None) -> str:
    """The report as one HTML document. ``static`` draws the charts as inline SVG images
    (no scripts), for printing; otherwise they are interactive (tooltips, zoom, export)."""
    if charts is None:
        charts = charts_mod.build(d)
    names = ", ".join(i["path"].rsplit("/", 1)[-1] for i in d.inputs)
    body = [
        header(d, names),
        nav(d, charts),
        overview(d),
        findings(d, static),
        *chart_sections(charts, static),
        summary_section(d),
        about(d),
    ]
    scripts = "" if static or not charts else chart_scripts(charts)
    return PAGE.format(
        title=esc(f"nsight-doctor: {names}"),
        css=css(),
        body="\n".join(b for b in body if b),
        scripts=scripts,
        mode="static" if static else "interactive",
    )


PAGE = """<!DOCTYPE html>
<html lang="en" data-mode="{mode}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nsight-doctor">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<main>
{body}
</main>
{scripts}
</body>
</html>
"""


def header(d: Diagnosis, names: str) -> str:
    return (
        '<header class="top"><div class="brand">nsight-doctor</div>'
        f"<h1>{esc(names)}</h1>"
        f'<p class="sub">Diagnosis by nsight-doctor {esc(d.tool["version"])}: findings ranked by the GPU time a fix '
        "would recover, with the evidence and the SQL behind each.</p></header>"
    )


def nav(d: Diagnosis, charts: list[charts_mod.Chart]) -> str:
    items = [("overview", "Overview"), ("findings", f"Findings ({len(d.findings)})")]
    for key, title in charts_mod.SECTIONS.items():
        if any(c.section == key for c in charts):
            items.append((f"section-{key}", title))
    items += [("summary", "Summary"), ("about", "How this was made")]
    links = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in items)
    return f'<nav class="toc">{links}</nav>'


def shorten(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def card(label: str, value: str, detail: str = "", tone: str = "") -> str:
    cls = f"card {tone}".strip()
    label = shorten(label)
    return (
        f'<div class="{cls}"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div>'
        + (f'<div class="detail">{esc(detail)}</div>' if detail else "")
        + "</div>"
    )


def overview(d: Diagnosis) -> str:
    s = d.summary
    cards = []
    if s.capture.gpu_window_ns:
        busy = s.capture.gpu_busy_pct
        tone = "bad" if busy is not None and busy < 50 else "warn" if busy is not None and busy < 80 else "good"
        cards.append(card("GPU busy", pct(busy), f"of a {fmt_ns(s.capture.gpu_window_ns)} activity window", tone))
    if s.kernels.kernel_count:
        k = s.kernels
        cards.append(
            card(
                "Kernels",
                f"{k.kernel_count:,}",
                f"median {fmt_ns(k.kernel_median_ns or 0)}, {pct(k.tiny_kernel_pct)} under "
                f"{fmt_ns(k.tiny_kernel_threshold_ns)}",
            )
        )
    if s.idle.gap_count:
        if s.idle.gpus > 1:
            per_gpu = fmt_ns(s.idle.idle_ns / s.idle.gpus)
            cards.append(card("GPU idle", per_gpu, f"per GPU, {s.idle.gpus} GPUs, {s.idle.gap_count:,} gaps in all"))
        else:
            cards.append(card("GPU idle", fmt_ns(s.idle.idle_ns), f"in {s.idle.gap_count:,} gaps"))
    steady = getattr(s, "steady_state", None)
    if steady is not None and steady.steps and steady.step_ns_median is not None:
        # The summary's own step time (one definition: the steady steps' median), as the text says.
        cards.append(
            card("Step", fmt_ns(steady.step_ns_median), f"median of {steady.steps:,} steady steps ({steady.kind})")
        )
    if steady is not None and getattr(steady, "window_ns", None):
        cards.append(
            card(
                "Steady state",
                pct(getattr(steady, "busy_pct", None)) + " busy",
                f"over {fmt_ns(steady.window_ns)} ({getattr(steady, 'kind', '')})",
            )
        )
    framework = getattr(s, "framework", None)
    if framework:
        cards.append(card("Framework", str(getattr(framework, "name", framework))))
    if s.ncu:
        cards.append(
            card(
                "Nsight Compute",
                f"{s.ncu.kernels_profiled:,} kernels",
                f"{s.ncu.memory_bound} memory-, {s.ncu.compute_bound} compute-, {s.ncu.latency_bound} latency-bound",
            )
        )
    work = [f for f in d.findings if f.impact_ns and f.scope == "steady"]
    if work:
        top = work[0]
        cards.append(
            card("Top finding", fmt_ns(top.impact_ns), f"recoverable: {top.rule_id}", "bad" if top.impact_ns else "")
        )
    return f'<section id="overview"><div class="cards">{"".join(cards)}</div></section>'


def findings(d: Diagnosis, static: bool) -> str:
    out = ['<section id="findings"><h2>Findings</h2>']
    if not d.findings:
        out.append('<p class="empty">No findings: no rule fired on this profile.</p>')
    elif static:
        out.append(
            '<p class="hint">Ranked by the time a fix would recover. The SQL that produced each finding\'s evidence '
            "is in the HTML, notebook and JSON reports, and runs as it is against the store kept with "
            "<code>--db</code>.</p>"
        )
    else:
        out.append(
            '<p class="hint">Ranked by the time a fix would recover. Each finding links to itself; its evidence '
            "comes from the SQL shown with it, which runs as it is against the store kept with "
            "<code>--db</code>.</p>"
        )
    for rank, f in enumerate(d.findings, 1):
        out.append(finding(rank, f, d, static))
    out.append("</section>")
    return "\n".join(out)


def finding(rank: int, f: Finding, d: Diagnosis, static: bool) -> str:
    aid = anchor(rank, f)
    window, store = window_of(f, d), d.store_path
    share = 100 * f.impact_ns / window if window and f.impact_ns and f.scope != "capture" else 0
    color = SEVERITY_COLORS.get(f.severity, "#777")
    tags = "".join(f'<span class="tag">{esc(t)}</span>' for t in f.tags)
    parts = [
        f'<article class="finding" id="{aid}" style="--sev:{color}">',
        f'<h3><a class="rank" href="#{aid}">{rank}</a> {rule_text(f, "title")}</h3>',
        f'<div class="meta"><span class="sev">{esc(f.severity)}</span>'
        f'<span class="impact">{esc(impact_text(f, d))}</span>'
        f'<span class="rule">rule <code>{esc(f.rule_id)}</code></span>{tags}</div>',
    ]
    if share:
        width = f"{min(100.0, share):.1f}%"
        parts.append(f'<div class="bar" title="share of its window"><span style="width:{width}"></span></div>')
    parts.append(f'<p class="message">{rule_text(f, "message")}</p>')
    parts.append(f'<p class="todo"><strong>What to do.</strong> {rule_text(f, "recommendation")}</p>')
    opened = " open" if static else ""
    parts.append(f"<details{opened}><summary>Evidence</summary>{evidence(f.evidence)}</details>")
    if f.queries:
        where = f"<code>duckdb {esc(store)}</code>" if store else "the store kept with <code>--db FILE</code>"
        sql = "".join(
            f'<div class="sql"><div class="sql-name">{esc(name)}</div><pre><code>{esc(q)}</code></pre></div>'
            for name, q in f.queries.items()
        )
        parts.append(
            '<details class="sql-details"><summary>SQL (provenance)</summary>'
            f'<p class="hint">Run in {where}: <code>query</code> returns this finding among its rows; each other '
            f"query returns one evidence table.</p>{sql}</details>"
        )
    if f.references:
        refs = []
        for r in f.references:
            url = str(r.get("url", ""))
            title = esc(r.get("title", url))
            refs.append(f'<a href="{esc(url)}">{title}</a>' if re.match(r"https?://", url) else title)
        parts.append(f'<p class="refs">References: {" · ".join(refs)}</p>')
    parts.append("</article>")
    return "\n".join(parts)


def evidence(ev: dict[str, Any]) -> str:
    scalars = {k: v for k, v in ev.items() if not isinstance(v, list)}
    tables = {k: v for k, v in ev.items() if isinstance(v, list)}
    out = []
    if scalars:
        kv = "".join(f"<tr><th>{esc(k)}</th><td>{esc(show(k, v))}</td></tr>" for k, v in scalars.items())
        out.append(f'<table class="kv">{kv}</table>')
    for name, rows in tables.items():
        out.append(f'<div class="table-name">{esc(name)}</div>')
        out.append(table(rows) if rows else '<p class="empty">(none)</p>')
    return "".join(out)


def heading(key: str) -> str:
    """A column's heading when its values carry their unit (show): "duration_ns" shows
    "7.2 ms", so its heading is "duration", not a unit the cell does not use."""
    for suffix in ("_ns", "_pct"):
        key = key.removesuffix(suffix)
    return key.replace("_", " ")


def table(rows: list[dict[str, Any]], cls: str = "grid", headings: bool = False) -> str:
    """An HTML table of rows; headings: plain words for the columns rather than their keys
    (the summary's tables; the evidence keeps the keys of the JSON)."""
    cols = list(rows[0].keys())
    head = "".join(f"<th>{esc(heading(c) if headings else c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f'<td class="{cell_class(r.get(c))}">{esc(show(c, r.get(c)))}</td>' for c in cols) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def cell_class(v: Any) -> str:
    return "num" if isinstance(v, (int, float)) and not isinstance(v, bool) else "txt"


def chart_sections(charts: list[charts_mod.Chart], static: bool) -> list[str]:
    out = []
    for key, title in charts_mod.SECTIONS.items():
        mine = [c for c in charts if c.section == key]
        if not mine:
            continue
        figs = "\n".join(figure(c, static) for c in mine)
        out.append(f'<section id="section-{key}" class="charts"><h2>{esc(title)}</h2>{figs}</section>')
    return out


def figure(c: charts_mod.Chart, static: bool) -> str:
    if static:
        svg = charts_mod.to_svg(c)
        data = base64.b64encode(svg.encode()).decode()
        vis = f'<img class="static-chart" alt="{esc(c.title)}" src="data:image/svg+xml;base64,{data}">'
    else:
        vis = f'<script type="application/json" data-chart="vis-{c.id}">{json_script(c.spec)}</script>'
    return (
        f'<figure class="chart" id="chart-{c.id}"><h3><a href="#chart-{c.id}">{esc(c.title)}</a></h3>'
        f'<div class="vis" id="vis-{c.id}">{vis if static else ""}</div>'
        f"{'' if static else vis}"
        f"<figcaption>{esc(c.caption)}</figcaption>"
        f'<details class="data-sql"><summary>Data (SQL)</summary><pre><code>{esc(c.source)}</code></pre></details>'
        "</figure>"
    )


def chart_scripts(charts: list[charts_mod.Chart]) -> str:
    import vl_convert as vlc

    bundle = vlc.javascript_bundle("window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;")
    # Nothing in the bundle may end the script element early.
    bundle = re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.I).replace("<!--", "<\\!--")
    return f"<script>{bundle}</script>\n<script>{EMBED_JS}</script>"


EMBED_JS = """
(function () {
  var opts = {renderer: 'svg', actions: {export: true, source: false, compiled: false, editor: false},
              downloadFileName: 'nsight-doctor-chart'};
  document.querySelectorAll('script[data-chart]').forEach(function (el) {
    var target = document.getElementById(el.getAttribute('data-chart'));
    vegaEmbed(target, JSON.parse(el.textContent), opts).then(function (result) {
      (window.nsightDoctorCharts = window.nsightDoctorCharts || []).push(result);
      target.setAttribute('data-rendered', 'true');
    }).catch(function (err) {
      target.setAttribute('data-rendered', 'error');
      target.textContent = 'This chart could not be drawn: ' + err;
      console.error(err);
    });
  });
})();
"""


def summary_section(d: Diagnosis) -> str:
    rows = "".join(
        f"<tr><th>{esc(label)}</th><td>{esc(value)}</td></tr>" for label, value in summary_rows(d) if label or value
    )
    out = [f'<section id="summary"><h2>Summary</h2><table class="kv summary">{rows}</table>']
    phases = getattr(d.summary, "phases", None) or []
    if phases:
        out.append("<h3>Phases</h3>")
        out.append(
            table(
                [
                    {
                        "device_id": getattr(p, "device_id", None),
                        "phase": getattr(p, "name", None),
                        "source": getattr(p, "source", None),
                        "start_ns": getattr(p, "start_ns", None),
                        "end_ns": getattr(p, "end_ns", None),
                        "busy_pct": getattr(p, "busy_pct", None),
                        "steps": getattr(p, "steps", None),
                        "step_ns_median": getattr(p, "step_ns_median", None),
                        "step_ns_p90": getattr(p, "step_ns_p90", None),
                    }
                    for p in phases
                ],
                headings=True,
            )
        )
    if d.summary.idle.largest:
        out.append("<h3>Largest idle gaps</h3>")
        out.append(
            table(
                [
                    {
                        "device_id": g.device_id,
                        "start_ns": g.start,
                        "duration_ns": g.duration,
                        "cause": g.cause,
                        "CPU in": ", ".join(c.name or "?" for c in g.api_calls[:3]) or "no CUDA call",
                        "next_op": g.next_op,
                    }
                    for g in d.summary.idle.largest
                ],
                headings=True,
            )
        )
    if d.summary.ncu and d.summary.ncu.groups:
        out.append("<h3>Nsight Compute: profiled kernels by launch configuration</h3>")
        out.append(
            table(
                [
                    {
                        "launch": g.launch or g.name,
                        "share_pct": g.share_pct,
                        "bottleneck": g.bottleneck,
                        "duration_ns": g.duration_ns,
                        "sm_pct": g.sm_pct,
                        "mem_pct": g.mem_pct,
                        "dram_pct": g.dram_pct,
                        "achieved_occupancy_pct": g.achieved_occupancy_pct,
                        "tensor_pct": g.tensor_pct,
                        "top_stall": g.top_stall,
                    }
                    for g in d.summary.ncu.groups
                ],
                headings=True,
            )
        )
    out.append("</section>")
    return "\n".join(out)


def about(d: Diagnosis) -> str:
    out = ['<section id="about"><h2>How this was made</h2><ul>']
    if d.command:
        out.append(f"<li>Command: <code>{esc(d.command)}</code></li>")
    out.append(f"<li>Tool: nsight-doctor {esc(d.tool['version'])}</li>")
    for inp in d.inputs:
        out.append(f"<li>Input: {esc(input_line(inp))}</li>")
    if d.store_path:
        out.append(
            f"<li>Store: <code>{esc(d.store_path)}</code>, a DuckDB database with the documented views: every SQL "
            "query in this report runs against it.</li>"
        )
    for n in d.notes:
        out.append(f"<li>Note: {esc(n)}</li>")
    if d.skipped:
        skipped = ", ".join(f"{esc(s.rule_id)} ({esc(s.reason)})" for s in d.skipped)
        out.append(f"<li>Rules that did not apply: {skipped}</li>")
    out.append(
        "<li>This file is self-contained: it loads nothing from the network. Charts are drawn with Vega-Lite; "
        "their menu exports each as SVG or PNG.</li>"
    )
    out.append("</ul></section>")
    return "\n".join(out)
