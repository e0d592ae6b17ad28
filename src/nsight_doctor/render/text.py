"""The terminal report: the summary first, then the ranked findings, concise."""

from __future__ import annotations

import textwrap

from nsight_doctor.model import Diagnosis, Finding
from nsight_doctor.render.common import impact_text, input_line, summary_rows

WIDTH = 100


def render(d: Diagnosis, color: bool = False, verbose: bool = False) -> str:
    def bold(s: str) -> str:
        return f"\x1b[1m{s}\x1b[0m" if color else s

    out = [bold(f"nsight-doctor {d.tool['version']}")]
    for inp in d.inputs:
        out.append(f"  {sanitize(input_line(inp))}")
    out.append("")
    out.append(bold("Summary"))
    rows = summary_rows(d)
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        out.extend(wrap(sanitize(value), f"  {label.ljust(width)}  ", " " * (width + 4)))
    out.append("")
    work = [f for f in d.findings if f.scope == "steady"]
    onetime = [f for f in d.findings if f.scope == "startup"]
    notes = [f for f in d.findings if f.scope == "capture"]
    if work:
        out.append(bold("Findings about the steady state, ranked by the time a fix would recover"))
    else:
        out.append(bold("No findings about the steady state."))
    for i, f in enumerate(work, 1):
        out.extend(finding_lines(d, f, i))
    if onetime:
        out.append("")
        out.append(bold("Start-up and warm-up (one-time)"))
        for i, f in enumerate(onetime, len(work) + 1):
            out.extend(finding_lines(d, f, i))
    if notes:
        out.append("")
        out.append(bold("Profile notes"))
        for f in notes:
            out.extend(wrap(sanitize(f"[{f.severity}] {f.title}: {f.message}"), "  - ", "    "))
            out.extend(wrap(sanitize(f.recommendation), "    -> ", "       "))
    if d.skipped and verbose:
        out.append("")
        out.append("Rules not applicable: " + ", ".join(f"{s.rule_id} ({s.reason})" for s in d.skipped))
    if d.notes and verbose:
        out.append("")
        out.extend(f"note: {sanitize(n)}" for n in d.notes)
    return "\n".join(out) + "\n"


def finding_lines(d: Diagnosis, f: Finding, i: int) -> list[str]:
    return [
        "",
        *wrap(sanitize(f"{i}. [{f.severity}] {f.title}"), "", "   "),
        f"   {impact_text(f, d)}; rule {f.rule_id}",
        *wrap(sanitize(f.message), "   ", "   "),
        *wrap(sanitize(f.recommendation), "   -> ", "      "),
    ]


def wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


def sanitize(text: str) -> str:
    """Drops control characters (escape sequences in kernel names or NVTX text could drive
    the terminal)."""
    return "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in text)
