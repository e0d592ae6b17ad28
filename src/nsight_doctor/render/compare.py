"""The comparison report (nsight-doctor compare) as text, Markdown and JSON.

``tables(c)`` turns a Comparison into plain-text tables (cells unescaped) that every format
shows: text lays them out to fit a terminal of 100 columns, Markdown escapes every cell (labels,
kernel names and paths come from the profiles and are untrusted), HTML (compare_html.py)
escapes them too. The JSON form has the numbers themselves.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from nsight_doctor.compare import Comparison, KernelRow, NcuRow, PhaseRow, Row
from nsight_doctor.model import fmt_bytes, fmt_ns
from nsight_doctor.render.common import input_line, pct
from nsight_doctor.render.json_out import SCHEMA_VERSION
from nsight_doctor.render.json_out import to_dict as diagnosis_dict
from nsight_doctor.render.markdown import cell, escape
from nsight_doctor.render.text import sanitize

WIDTH = 100
FIRST_MAX = 48  # the first column (labels, kernel names) of a text table
COMPARE_SCHEMA_VERSION = 1


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    wide: set[int] = field(default_factory=set)  # columns shown only where there is room (Markdown, HTML)
    left: set[int] = field(default_factory=lambda: {0})  # text columns, aligned left (numbers go right)


def value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "pct":
        return pct(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "count":
        return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.1f}"
    return f"{v:,.2f}"


def change_text(base: float | None, v: float | None, ch: float | None, unit: str) -> str:
    if base is None or v is None:
        return ""
    if unit == "pct":
        d = v - base
        return "" if abs(d) < 0.05 else f"{d:+.1f} pts"
    if ch is None or abs(ch) < 0.05:
        return ""
    if ch >= 100:
        return f"{v / base:.1f}x" if v / base < 10 else f"{v / base:.0f}x"
    return f"{ch:+.1f}%" if abs(ch) < 10 else f"{ch:+.0f}%"


def cells(values: list[float | None], changes: list[float | None], unit: str) -> list[str]:
    out = []
    for i, (v, ch) in enumerate(zip(values, changes)):
        text = value(v, unit)
        delta = change_text(values[0], v, ch, unit) if i else ""
        out.append(f"{text} ({delta})" if delta else text)
    return out


def row_table(id: str, title: str, labels: list[str], rows: list[Row], note: str = "") -> Table:
    return Table(id, title, ["", *labels], [[r.label, *cells(r.values, r.change_pct, r.unit)] for r in rows], note)


def phase_table(labels: list[str], phases: list[PhaseRow]) -> Table:
    multi = len({p.device_id for p in phases}) > 1
    counts: dict[tuple[int, str], int] = {}
    for p in phases:
        counts[(p.device_id, p.phase)] = counts.get((p.device_id, p.phase), 0) + 1
    rows = []
    for p in phases:
        name = f"GPU {p.device_id} " if multi else ""
        name += p.phase + (f" #{p.occurrence}" if counts[(p.device_id, p.phase)] > 1 else "")
        for label, vals, unit in (
            ("duration", p.duration_ns, "ns"),
            ("busy", p.busy_pct, "pct"),
            ("steps", p.steps, "count"),
            ("step median", p.step_ns_median, "ns"),
            ("step p90", p.step_ns_p90, "ns"),
        ):
            if all(v is None for v in vals):
                continue
            if label.startswith("step ") and all((n or 0) <= 1 for n in p.steps):
                continue  # one step: its time is the phase's duration
            base = vals[0]
            chs = [None, *((100 * (v - base) / base) if v is not None and base else None for v in vals[1:])]
            rows.append([f"{name}: {label}", *cells(vals, chs, unit)])
    return Table("phases", "Phases", ["", *labels], rows, "each GPU's phases, matched by name and order")


MATCH_WORDS = {"shape": "same shape", "kernel": "other shape", "none": "one only"}


def kernel_table(labels: list[str], kernels: list[KernelRow], per: str) -> Table:
    rows = []
    for k in kernels:
        shapes = ", ".join(s or "-" for s in k.shapes) if k.match != "shape" else (k.shapes[0] or "-")
        means = ", ".join(fmt_ns(m) if m is not None else "-" for m in k.mean_ns)
        counts = ", ".join(value(c, "count") if c is not None else "-" for c in k.count_per_step)
        rows.append(
            [
                k.name,
                *cells(k.ns_per_step, k.change_pct, "ns"),
                MATCH_WORDS.get(k.match, k.match),
                k.category or "",
                shapes,
                means,
                counts,
            ]
        )
    n = len(labels)
    return Table(
        "kernels",
        "Top kernels (GPU time " + per + ")",
        ["Kernel", *labels, "Match", "Category", "Grid/block", "Mean", "Count " + per],
        rows,
        "matched by name, template arguments and launch shape, else by name and template arguments "
        "(other shape: another batch size or sequence length)",
        wide={n + 2, n + 3, n + 4, n + 5},
        left={0, n + 1, n + 2, n + 3},
    )


def ncu_table(labels: list[str], rows_in: list[NcuRow]) -> Table:
    rows = []
    blank = [""] * len(labels)
    for r in rows_in:
        base = r.duration_ns[0]
        chs = [None, *((100 * (v - base) / base) if v is not None and base else None for v in r.duration_ns[1:])]
        launch = next((x for x in r.launches if x), r.kernel)
        rows.append([launch if r.match == "launch" else r.kernel, *blank])
        rows.append(["  duration", *cells(r.duration_ns, chs, "ns")])
        for label, vals in (
            ("achieved occupancy", r.achieved_occupancy_pct),
            ("DRAM throughput", r.dram_pct),
            ("SM throughput", r.sm_pct),
        ):
            rows.append([f"  {label}", *cells(vals, [None] * len(vals), "pct")])
        rows.append(["  bottleneck", *(b or "-" for b in r.bottleneck)])
        rows.append(
            [
                "  roofline",
                *(
                    f"{pct(p)} of its {roof} roof"
                    if roof and p is not None
                    else f"{g} regime, {pct(p)} of its roof"
                    if g and p is not None
                    else "-"
                    for roof, g, p in zip(r.roof, r.regime, r.roof_pct)
                ),
            ]
        )
        for k in range(2):
            rows.append(
                [
                    f"  stall #{k + 1}",
                    *(f"{list(s)[k]} {pct(list(s.values())[k])}" if len(s) > k else "-" for s in r.stalls),
                ]
            )
    return Table(
        "ncu",
        "Nsight Compute: kernels profiled in several profiles",
        ["", *labels],
        rows,
        "matched by name and launch configuration, else by name (other configurations); stalls: the top reasons "
        "and their shares of the kernel's stalls",
    )


def findings_table(c: Comparison) -> list[Table]:
    out: list[Table] = []
    for fd in c.findings_diff:
        rows = []
        for ch in fd.changes:
            rows.append(
                [
                    ch.status,
                    f"{ch.rule_id} ({ch.subject})",
                    share_text(ch.baseline_share_pct, ch.baseline_impact_ns),
                    share_text(ch.candidate_share_pct, ch.candidate_impact_ns),
                    ch.severity,
                ]
            )
        out.append(
            Table(
                f"findings-{len(out) + 1}",
                f"Findings: {fd.candidate} against {fd.baseline}",
                ["Status", "Finding (rule, subject)", fd.baseline, fd.candidate, "Severity"],
                rows,
                "impact as a share of the finding's window (its GPU's steady state); matched by rule and subject",
                left={0, 1, 4},
            )
        )
    return out


def share_text(share: float | None, impact: float | None) -> str:
    if impact is None:
        return "-"
    if share is None:
        return "note" if not impact else fmt_ns(impact)
    return f"{pct(share)} ({fmt_ns(impact)})" if impact else "0"


def tables(c: Comparison) -> list[Table]:
    labels = [p.label for p in c.profiles]
    d = c.deltas
    per = "per step" if d.basis == "step" else "over the steady state"
    out = [row_table("overview", "Overview", labels, d.overview)] if d.overview else []
    if d.phases:
        out.append(phase_table(labels, d.phases))
    if d.step_time:
        out.append(
            row_table(
                "step-time",
                f"Where the time goes ({per}, on the GPU that sets the step time)",
                labels,
                d.step_time,
                "GPU work by kind (summed durations) and idle time by cause; per-step values are means over "
                "the steady state",
            )
        )
    if d.kernel_categories:
        out.append(row_table("categories", f"Kernel time by category ({per}, all GPUs)", labels, d.kernel_categories))
    if d.kernels:
        out.append(kernel_table(labels, d.kernels, per))
    if d.transfers:
        out.append(row_table("transfers", "Copies and synchronisation", labels, d.transfers))
    if d.gpus:
        rows = []
        for g in d.gpus:
            for label, vals, unit in (
                ("busy", g.busy_pct, "pct"),
                ("step median", g.step_ns_median, "ns"),
                ("busy " + per, g.busy_per_step_ns, "ns"),
                ("idle " + per, g.idle_per_step_ns, "ns"),
                ("collectives waiting " + per, g.comm_wait_per_step_ns, "ns"),
                ("  of it exposed (nothing else running)", g.comm_exposed_wait_per_step_ns, "ns"),
            ):
                base = vals[0]
                chs = [None, *((100 * (v - base) / base) if v is not None and base else None for v in vals[1:])]
                rows.append([f"GPU {g.device_id}: {label}", *cells(vals, chs, unit)])
        out.append(Table("gpus", "Per GPU (steady state)", ["", *labels], rows))
    if d.ncu:
        out.append(ncu_table(labels, d.ncu))
    out += findings_table(c)
    return out


def gate_line(c: Comparison) -> str:
    g = c.gate
    if g.metric == "none":
        return "Gate: no metric that every profile has"
    base, cand = c.profiles[0].label, c.profiles[-1].label
    vals = f"{fmt_ns(g.baseline) if g.baseline is not None else 'n/a'} ({base}) → " + (
        f"{fmt_ns(g.candidate) if g.candidate is not None else 'n/a'} ({cand})"
    )
    ch = f", {g.change_pct:+.1f}%" if g.change_pct is not None else ""
    if g.threshold_pct is None:
        result = "no threshold (--fail-on-regression PCT fails when it is PCT% worse)"
    elif g.failed:
        result = f"FAILED: more than {g.threshold_pct:g}% worse"
    else:
        result = f"passed (fails when more than {g.threshold_pct:g}% worse)"
    return f"Gate: {g.label} ({g.metric}) {vals}{ch}: {result}"


# Text ------------------------------------------------------------------------------------------


def render_text(c: Comparison, color: bool = False, verbose: bool = False) -> str:
    def bold(s: str) -> str:
        return f"\x1b[1m{s}\x1b[0m" if color else s

    tool = c.profiles[0].diagnosis.tool
    n = len(c.profiles)
    out = [bold(f"nsight-doctor {tool['version']}: comparison of {n} profiles (the first is the baseline)")]
    width = min(24, max(len(p.label) for p in c.profiles))
    for p in c.profiles:
        for i, inp in enumerate(p.diagnosis.inputs):
            head = p.label.ljust(width) if i == 0 else " " * width
            out.extend(wrap(sanitize(f"{head}  {input_line(inp)}"), "  ", " " * (width + 4)))
    out += ["", bold("Verdict")]
    out.extend(wrap(sanitize(c.verdict.text), "  ", "  "))
    out += ["", bold("Gate")]
    out.extend(wrap(sanitize(gate_line(c).removeprefix("Gate: ")), "  ", "  "))
    if c.warnings:
        out += ["", bold("Comparability")]
        for w in c.warnings:
            out.extend(wrap(sanitize(f"{w.message} [{w.code}]"), "  - ", "    "))
    for t in tables(c):
        out += ["", bold(sanitize(t.title))]
        out.extend(text_table(t))
        if t.note and verbose:
            out.extend(wrap(sanitize(f"({t.note})"), "  ", "   "))
    if verbose:
        for p in c.profiles:
            for note in p.diagnosis.notes:
                out.extend(wrap(sanitize(f"note ({p.label}): {note}"), "", "  "))
    return "\n".join(out) + "\n"


UNIT = re.compile(r"(\d) (ns|µs|ms|s|B|KB|MB|GB|TB|pts)\b")


def wrap(text: str, first: str, rest: str) -> list[str]:
    """Wrapped to WIDTH, never between a number and its unit."""
    lines = textwrap.wrap(
        UNIT.sub("\\1\u00a0\\2", text),
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    )
    return [ln.replace("\u00a0", " ") for ln in lines] or [first.rstrip()]


def clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(1, n - 1)] + "…"


def text_table(t: Table) -> list[str]:
    """The table laid out in at most WIDTH columns: wide-only columns dropped, then the change
    in parentheses dropped, then the first column and the headers clipped."""
    keep = [i for i in range(len(t.columns)) if i not in t.wide]
    cols = [sanitize(t.columns[i]) for i in keep]
    rows = [[sanitize(r[i]) for i in keep] for r in t.rows]

    def widths(rows: list[list[str]], cols: list[str]) -> list[int]:
        return [max([len(cols[i]) if i else 0, *(len(r[i]) for r in rows)]) for i in range(len(cols))]

    left = {keep.index(i) for i in t.left if i in keep}
    # A row with only its first cell is a heading of the rows below it: it spans the table.
    spans = {j for j, r in enumerate(rows) if not any(r[1:])}
    body = [r for j, r in enumerate(rows) if j not in spans]
    w = widths(body, cols)
    if 2 + sum(w) + 2 * (len(w) - 1) > WIDTH:
        rows = [[x.split(" (")[0] if i and i not in left else x for i, x in enumerate(r)] for r in rows]
        body = [r for j, r in enumerate(rows) if j not in spans]
        w = widths(body, cols)
    w[0] = min(w[0], FIRST_MAX)
    # Still too wide: the widest text column gives way (down to 12 characters).
    while 2 + sum(w) + 2 * (len(w) - 1) > WIDTH:
        i = max(left, key=lambda k: w[k])
        over = 2 + sum(w) + 2 * (len(w) - 1) - WIDTH
        if w[i] <= 12:
            break
        w[i] = max(12, w[i] - over)

    def line(j: int, r: list[str]) -> str:
        if j in spans:
            return "  " + clip(r[0], WIDTH - 2)
        parts = [clip(x, w[i]).ljust(w[i]) if i in left else clip(x, w[i]).rjust(w[i]) for i, x in enumerate(r)]
        return ("  " + "  ".join(parts)).rstrip()

    return [line(-1, cols), *(line(j, r) for j, r in enumerate(rows))]


# Markdown --------------------------------------------------------------------------------------


def render_markdown(c: Comparison) -> str:
    labels = ", ".join(escape(p.label) for p in c.profiles)
    out = [f"# nsight-doctor comparison: {labels}", ""]
    out += [f"**Verdict.** {escape(c.verdict.text)}", ""]
    out += [f"**{escape(gate_line(c))}**", ""]
    if c.warnings:
        out += ["**Comparability.**", ""]
        out += [f"- {escape(w.message)} (`{w.code}`)" for w in c.warnings]
        out.append("")
    out += ["## Profiles", "", "| Label | Profile | Inputs |", "|---|---|---|"]
    for p in c.profiles:
        inputs = "; ".join(input_line(i) for i in p.diagnosis.inputs)
        out.append(f"| {cell(p.label)} | {cell(p.path)} | {cell(inputs)} |")
    out.append("")
    for t in tables(c):
        out += [f"## {escape(t.title)}", ""]
        if t.note:
            out += [f"*{escape(t.note)}*", ""]
        out.append("| " + " | ".join(cell(x) for x in t.columns) + " |")
        out.append("|" + "|".join("---" if i in t.left else "--:" for i in range(len(t.columns))) + "|")
        for r in t.rows:
            out.append("| " + " | ".join(cell(x) for x in r) + " |")
        out.append("")
    tool = c.profiles[0].diagnosis.tool
    out += ["## How this was produced", ""]
    command = c.profiles[0].diagnosis.command
    if command:
        out += ["```", command.replace("```", "'''"), "```", ""]
    out.append(f"- Tool: nsight-doctor {escape(tool['version'])}")
    for p in c.profiles:
        for n in p.diagnosis.notes:
            out.append(f"- Note ({escape(p.label)}): {escape(n)}")
    out.append("")
    return "\n".join(out)


# JSON ------------------------------------------------------------------------------------------


def plain(obj: Any) -> Any:
    """A comparison's dataclasses as JSON values (non-finite numbers as null)."""
    import dataclasses
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, list):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    return obj


def to_dict(c: Comparison) -> dict[str, Any]:
    first = c.profiles[0].diagnosis
    profiles = []
    for p in c.profiles:
        d = diagnosis_dict(p.diagnosis)
        profiles.append(
            {
                "label": p.label,
                "path": p.path,
                "inputs": d["inputs"],
                "summary": d["summary"],
                "findings": d["findings"],
                "skipped_rules": d["skipped_rules"],
                "notes": d["notes"],
            }
        )
    return {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "report_schema_version": SCHEMA_VERSION,
        "kind": "comparison",
        "tool": first.tool,
        "command": first.command,
        "profiles": profiles,
        "deltas": plain(c.deltas),
        "findings_diff": plain(c.findings_diff),
        "warnings": plain(c.warnings),
        "verdict": plain(c.verdict),
        "gate": plain(c.gate),
    }


def render_json(c: Comparison) -> str:
    return json.dumps(to_dict(c), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def compare_schema() -> dict[str, Any]:
    """The JSON Schema of compare's JSON output (render/compare_schema.json is generated from it)."""
    from nsight_doctor.compare import CompareWarning, Deltas, FindingsDiff, Gate, Verdict
    from nsight_doctor.render.json_out import report_schema
    from nsight_doctor.render.json_schema import json_schema

    report = report_schema()["properties"]
    profile = {
        "type": "object",
        "required": ["label", "path", "inputs", "summary", "findings", "skipped_rules", "notes"],
        "properties": {
            "label": {"type": "string"},
            "path": {"type": "string"},
            "inputs": report["inputs"],
            "summary": report["summary"],
            "findings": report["findings"],
            "skipped_rules": report["skipped_rules"],
            "notes": report["notes"],
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"nsight-doctor comparison, schema_version {COMPARE_SCHEMA_VERSION}",
        "type": "object",
        "required": [
            "schema_version",
            "report_schema_version",
            "kind",
            "tool",
            "command",
            "profiles",
            "deltas",
            "findings_diff",
            "warnings",
            "verdict",
            "gate",
        ],
        "properties": {
            "schema_version": {"const": COMPARE_SCHEMA_VERSION},
            "report_schema_version": {"const": SCHEMA_VERSION},
            "kind": {"const": "comparison"},
            "tool": report["tool"],
            "command": {"type": "string"},
            "profiles": {"type": "array", "minItems": 2, "items": profile},
            "deltas": json_schema(Deltas),
            "findings_diff": {"type": "array", "items": json_schema(FindingsDiff)},
            "warnings": {"type": "array", "items": json_schema(CompareWarning)},
            "verdict": json_schema(Verdict),
            "gate": json_schema(Gate),
        },
    }
