"""The Markdown report, ready to paste into a bug ticket.

Kernel names and NVTX text come from the profiled program and are untrusted: every such
value is escaped, so that it cannot inject links, HTML or table cells.
"""

from __future__ import annotations

import re
from typing import Any

from nsight_doctor.model import Diagnosis, clip, fmt_bytes, fmt_ns
from nsight_doctor.render.common import impact_text, input_line, summary_rows
from nsight_doctor.render.text import ANSI_RE

# Characters that start emphasis, code, links, HTML, tables or strikethrough anywhere in a
# line; the characters that matter only at the start of a line are handled separately.
MD_INLINE = re.compile(r"([\\`*_\[\]|~])")
MD_LINE_START = re.compile(r"^(\s*)([#+\-](?=\s|$)|>|=+\s*$|\d{1,9}[.)](?=\s|$))")


def escape(text: Any) -> str:
    """Makes an untrusted string inert in Markdown and HTML: drops escape sequences and
    control characters,
    backslash-escapes the inline markup characters, entity-encodes &, < and >, and escapes a
    leading block marker."""
    s = ANSI_RE.sub("", str(text))  # terminal escape sequences go whole, as in the text report
    s = "".join(ch if ch.isprintable() else " " if ch in "\r\n\t" else "?" for ch in s)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = MD_INLINE.sub(r"\\\1", s)

    def block(m: re.Match) -> str:
        marker = m.group(2)
        # "1." is escaped as "1\.", a single marker character as "\#".
        return m.group(1) + (marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker)

    return MD_LINE_START.sub(block, s)


def cell(text: Any) -> str:
    return escape(text)  # escape() already turns | into \|


def render(d: Diagnosis) -> str:
    out: list[str] = []
    names = ", ".join(escape(i["path"].rsplit("/", 1)[-1]) for i in d.inputs)
    out.append(f"# nsight-doctor diagnosis: {names}")
    out.append("")
    work = [f for f in d.findings if f.scope == "steady" and f.impact_ns]
    if work:
        top = work[0]
        out.append(f"**Top finding:** {top.render('title', escape)} ({escape(impact_text(top, d))}).")
        out.append("")
    out.append("## Summary")
    out.append("")
    out.append("| Metric | Value |")
    out.append("|---|---|")
    for label, value in summary_rows(d):
        out.append(f"| {cell(label)} | {cell(value)} |")
    out.append("")
    out.append("## Findings")
    out.append("")
    if not d.findings:
        out.append("No findings.")
        out.append("")
    for i, f in enumerate(d.findings, 1):
        out.append(f"### {i}. {f.render('title', escape)}")
        out.append("")
        out.append(
            f"*Severity:* {f.severity} · *Scope:* {f.scope} · *Impact:* {escape(impact_text(f, d))} · "
            f"*Rule:* `{f.rule_id}` · *Tags:* {', '.join(f.tags)}"
        )
        out.append("")
        out.append(f.render("message", escape))
        out.append("")
        out.append(f"**What to do.** {f.render('recommendation', escape)}")
        out.append("")
        out.extend(evidence_block(f.evidence))
        if f.references:
            refs = "; ".join(f"[{escape(r['title'])}]({r['url']})" for r in f.references)
            out.append(f"References: {refs}")
            out.append("")
    if d.skipped:
        by_reason: dict[str, list[str]] = {}
        for s in d.skipped:
            by_reason.setdefault(s.reason, []).append(f"`{s.rule_id}`")
        out.append(
            "Rules not applicable: "
            + "; ".join(f"{escape(reason)}: {', '.join(ids)}" for reason, ids in by_reason.items())
        )
        out.append("")
    out.append("## How this was produced")
    out.append("")
    if d.command:
        out.append("```")
        out.append(d.command.replace("```", "'''"))
        out.append("```")
        out.append("")
    out.append(f"- Tool: nsight-doctor {escape(d.tool['version'])}")
    for inp in d.inputs:
        out.append(f"- Input: {escape(input_line(inp))}")
        if inp.get("exporter"):
            out.append(f"  - exported by Nsight Systems {escape(inp['exporter'])}")
    for n in d.notes:
        out.append(f"- Note: {escape(n)}")
    out.append("")
    return "\n".join(out)


def evidence_block(evidence: dict[str, Any]) -> list[str]:
    scalars = {k: v for k, v in evidence.items() if not isinstance(v, list)}
    tables = {k: v for k, v in evidence.items() if isinstance(v, list)}
    out = ["<details><summary>Evidence</summary>", ""]
    if scalars:
        out.append("| Field | Value |")
        out.append("|---|---|")
        for k, v in scalars.items():
            out.append(f"| {cell(k)} | {cell(show(k, v))} |")
        out.append("")
    for name, rows in tables.items():
        out.append(f"**{escape(name)}**")
        out.append("")
        if not rows:
            out.append("(none)")
            out.append("")
            continue
        cols = list(rows[0].keys())
        out.append("| " + " | ".join(cell(c) for c in cols) + " |")
        out.append("|" + "---|" * len(cols))
        for r in rows:
            out.append("| " + " | ".join(cell(show(c, r.get(c))) for c in cols) + " |")
        out.append("")
    out.append("</details>")
    out.append("")
    return out


PROSE_SHOWN = 1000


def show(key: str, v: Any) -> str:
    """Evidence values with units where the column name says what they are."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        if key.endswith("_ns") or key in ("start", "end", "duration"):
            return fmt_ns(v)
        if key.endswith("_pct"):
            return f"{v:.1f}%"
        if key == "bytes" or key.endswith("_bytes"):
            return fmt_bytes(v)
        if isinstance(v, float):
            return f"{v:,.2f}"
        return f"{v:,}"
    if key.startswith("advice") or key.endswith("_text"):
        return clip(str(v), PROSE_SHOWN)  # the rule's own sentences, which may quote a name
    return clip(str(v))  # whole in the JSON output and the store
