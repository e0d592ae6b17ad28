"""The terminal report: the summary first, then the ranked findings, concise."""

from __future__ import annotations

import re
import textwrap

from nsight_doctor.model import Diagnosis
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
    rows = [(sanitize(label), value) for label, value in summary_rows(d)]  # labels hold GPU names
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        out.extend(wrap(sanitize(value), f"  {label.ljust(width)}  ", " " * (width + 4)))
    out.append("")
    window = d.summary.capture.gpu_window_ns
    work = [f for f in d.findings if f.impact_ns]
    notes = [f for f in d.findings if not f.impact_ns]
    if work:
        out.append(bold("Findings, ranked by the time a fix would recover"))
        for i, f in enumerate(work, 1):
            out.append("")
            out.extend(wrap(sanitize(f"{i}. [{f.severity}] {f.title}"), "", "   "))
            out.append(f"   {impact_text(f.impact_ns, window)}; rule {f.rule_id}")
            out.extend(wrap(sanitize(f.message), "   ", "   "))
            out.extend(wrap(sanitize(f.recommendation), "   -> ", "      "))
    else:
        out.append(bold("No performance findings."))
    if notes:
        out.append("")
        out.append(bold("Profile notes"))
        for f in notes:
            out.extend(wrap(sanitize(f"[{f.severity}] {f.title}: {f.message}"), "  - ", "    "))
            out.extend(wrap(sanitize(f.recommendation), "    -> ", "       "))
    if d.skipped and verbose:
        out.append("")
        out.append(sanitize("Rules not applicable: " + ", ".join(f"{s.rule_id} ({s.reason})" for s in d.skipped)))
    if d.notes and verbose:
        out.append("")
        out.extend(f"note: {sanitize(n)}" for n in d.notes)
    return "\n".join(out) + "\n"


def wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


# Terminal escape sequences: CSI (colours, cursor moves), OSC (window titles, hyperlinks),
# DCS/PM/APC/SOS strings, and two-character escapes; the 8-bit C1 forms of CSI and OSC too.
ANSI_RE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]P^_X]|[\x9d\x90\x9e\x9f\x98])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)


def sanitize(text: str) -> str:
    """Removes terminal escape sequences and replaces other control characters with '?':
    kernel names, NVTX text, file names and messages quoted from files are untrusted, and
    could otherwise recolour, retitle or rewrite the user's terminal."""
    text = ANSI_RE.sub("", text)
    return "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in text)
