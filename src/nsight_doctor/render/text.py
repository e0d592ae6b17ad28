"""The terminal report: the summary first, then the ranked findings, concise."""

from __future__ import annotations

import re
import textwrap

from nsight_doctor.model import Diagnosis, Finding, fmt_ns
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
    work = [f for f in d.findings if f.scope == "steady"]
    onetime = [f for f in d.findings if f.scope == "startup"]
    notes = [f for f in d.findings if f.scope == "capture"]
    if work:
        out.append(bold("Findings about the steady state, ranked by the time a fix would recover"))
    else:
        out.append(bold("No findings about the steady state."))
    # Findings folded under another GPU's take its number: the numbers run on without a jump.
    shown = fold_per_gpu(work) + fold_per_gpu(onetime)
    rank_of = {id(f): i for i, f in enumerate(d.findings, 1)}
    numbers = {rank_of[id(g)]: i for i, (f, same) in enumerate(shown, 1) for g in (f, *same)}
    for i, (f, same) in enumerate(shown, 1):
        if f.scope == "startup" and (i == 1 or shown[i - 2][0].scope != "startup"):
            out.append("")
            out.append(bold("Start-up and warm-up (one-time)"))
        out.extend(finding_lines(d, f, i, same, numbers))
    if notes:
        out.append("")
        out.append(bold("Profile notes"))
        for f in notes:
            out.extend(wrap(sanitize(f"[{f.severity}] {f.title}: {f.message}"), "  - ", "    "))
            out.extend(wrap(sanitize(f.recommendation), "    -> ", "       "))
    if d.skipped and verbose:
        out.append("")
        out.append(sanitize("Rules not applicable: " + ", ".join(f"{s.rule_id} ({s.reason})" for s in d.skipped)))
    if d.notes:
        # What the capture lacks or how it was read: said in every format, not only with -v.
        out.append("")
        for n in d.notes:
            out.extend(wrap(sanitize(f"note: {n}"), "", "      "))
    return "\n".join(out) + "\n"


FOLD_AT = 3  # findings of one rule on this many GPUs or more print once, the others as one line


def fold_per_gpu(findings: list[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """Each finding with the same rule's findings on other GPUs folded under the first (the
    largest), when the rule fired on FOLD_AT GPUs or more: a 4- or 8-GPU run otherwise prints
    the same paragraph once per GPU. The JSON and Markdown outputs keep every finding."""
    per_rule: dict[str, int] = {}
    for f in findings:
        if "device_id" in f.evidence:
            per_rule[f.rule_id] = per_rule.get(f.rule_id, 0) + 1
    out: list[tuple[Finding, list[Finding]]] = []
    heads: dict[str, list[Finding]] = {}
    for f in findings:
        if per_rule.get(f.rule_id, 0) >= FOLD_AT and "device_id" in f.evidence:
            if f.rule_id in heads:
                heads[f.rule_id].append(f)
                continue
            heads[f.rule_id] = []
            out.append((f, heads[f.rule_id]))
        else:
            out.append((f, []))
    return out


def finding_lines(
    d: Diagnosis, f: Finding, i: int, same: list[Finding] | None = None, numbers: dict[int, int] | None = None
) -> list[str]:
    lines = [
        "",
        *wrap(sanitize(f"{i}. [{f.severity}] {f.title}"), "", "   "),
        f"   {impact_text(f, d, numbers)}; rule {f.rule_id}",
        *wrap(sanitize(f.message), "   ", "   "),
        *wrap(sanitize(f.recommendation), "   -> ", "      "),
    ]
    if same:
        gpus = [(g.evidence["device_id"], g.impact_ns) for g in same]
        others = ", ".join(f"GPU {dev} ({fmt_ns(ns)})" if ns else f"GPU {dev}" for dev, ns in gpus)
        lines.extend(wrap(f"The same on {others}; --format json or markdown gives each in full.", "   ", "   "))
    return lines


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
