"""Reads an Nsight Compute report with ncu_report and writes its content as JSON lines.

It runs in a child process (``python -m nsight_doctor.ingest.ncu_reader REPORT OUTDIR``):
the report parser is native code that reads untrusted files, so a crash there must not take
the whole tool down, and its memory is returned when it exits. The parent (ingest/ncu.py)
loads the files into DuckDB.

Output files in OUTDIR:
- report.json: {"ncu_version", "ranges", "actions"};
- actions.jsonl: one object per profiled kernel (names, launch configuration, device, NVTX);
- metrics.jsonl: one object per (kernel, metric): value (numbers) or text (strings), unit;
- rules.jsonl: ncu's own rule results, with their estimated speedups.
On bad input it prints one line to stderr and exits with code 3.
"""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path

from nsight_doctor import yamlio

MSG_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
SPEEDUP_TYPES = {1: "local", 2: "global"}
VERSION_RE = re.compile(rb"(20\d\d\.\d+\.\d+)(?:\.\d+)? \(build \d+\)")
# ncu messages link to sections, URLs and SASS with @kind:target:text@; keep the text.
MARKUP_RE = re.compile(r"@(?:section|url|sass|source|metric):[^:@]*:([^@]*)@")


def launch_metrics() -> dict[str, str]:
    """base_ncu_actions columns read from a metric, and the metric (ncu_columns.yaml)."""
    spec = yamlio.load(resources.files("nsight_doctor.ingest").joinpath("ncu_columns.yaml").read_text())
    cols = spec["tables"]["base_ncu_actions"]["columns"]
    return {c: s["first"][0] for c, s in cols.items() if isinstance(s, dict)}


class BadReport(Exception):
    pass


# The file-format number after the magic "NVR\0": 2 in every report of Nsight Compute 2023.1
# to 2025.3 (the corpus and the samples). The version string inside a report is not checked
# by the reader: a report that names a newer ncu is read like any other.
KNOWN_FORMATS = {2}


def report_format(path: Path) -> int | None:
    with open(path, "rb") as f:
        head = f.read(8)
    return int.from_bytes(head[4:8], "little") if len(head) == 8 else None


def reader_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ncu-report")
    except PackageNotFoundError:
        return "unknown"


def ncu_version(path: Path) -> str | None:
    """The version of the ncu that wrote the report: only the file's bytes hold it."""
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            found = VERSION_RE.search(tail + chunk)
            if found:
                return found.group(1).decode()
            tail = chunk[-64:]  # a match may straddle two chunks
    return None


def metric_value(m):
    """(number, text) of a metric; (None, None) when it has no value."""
    try:
        v = m.value()
    except Exception:
        return None, None
    if v is None:
        return None, None
    if isinstance(v, str):
        return None, v
    try:
        return float(v), None
    except (TypeError, ValueError):
        return None, str(v)


def nvtx_text(action) -> str | None:
    try:
        state = action.nvtx_state()
    except Exception:
        return None
    if state is None:
        return None
    names = []
    for dom_id in state.domains():
        dom = state.domain_by_id(dom_id)
        ranges = list(dom.push_pop_ranges()) + list(dom.start_end_ranges())
        if ranges:
            prefix = "" if dom.name() in ("", "<default domain>") else f"{dom.name()}:"
            names.append(prefix + "/".join(ranges))
    return "; ".join(names) or None


def read(path: Path, out: Path) -> None:
    import ncu_report

    launch = launch_metrics()
    ctx = ncu_report.load_report(str(path))
    n_ranges = len(ctx)
    actions = [(ri, ai, rng[ai]) for ri, rng in enumerate(ctx) for ai in range(len(rng))]
    if not actions:
        fmt = report_format(path)
        if fmt is not None and fmt not in KNOWN_FORMATS:
            raise BadReport(
                f"'{path}' is in report format {fmt}, which the installed Nsight Compute reader "
                f"(ncu_report {reader_version()}) cannot read: it was probably written by a newer "
                "Nsight Compute; upgrade it (pip install -U ncu-report)"
            )
        raise BadReport(
            f"'{path}' holds no profiled kernels: it is empty, truncated or corrupt "
            "(Nsight Compute's reader found nothing in it)"
        )
    for n, (_, _, a) in enumerate(actions):
        if a.name() is None or not a.metric_names():
            raise BadReport(
                f"'{path}' is truncated: kernel {n + 1} of {len(actions)} is incomplete; copy the report again"
            )
    with (
        open(out / "actions.jsonl", "w") as fa,
        open(out / "metrics.jsonl", "w") as fm,
        open(out / "rules.jsonl", "w") as fr,
    ):
        for action_id, (ri, ai, a) in enumerate(actions):
            names = [n for n in a.metric_names() if ":" not in n]
            row = {
                "action_id": action_id,
                "range_idx": ri,
                "action_idx": ai,
                "name": a.name(ncu_report.IAction.NameBase_FUNCTION),
                "demangled_name": a.name(ncu_report.IAction.NameBase_DEMANGLED),
                "mangled_name": a.name(ncu_report.IAction.NameBase_MANGLED),
                "nvtx": nvtx_text(a),
                "sections": ",".join(sorted(sec.identifier() for sec in a.sections())),
            }
            values = {}
            for name in names:
                m = a.metric_by_name(name)
                if m is None:
                    continue
                num, text = metric_value(m)
                if num is None and text is None:
                    continue
                values[name] = num if num is not None else text
                fm.write(
                    json.dumps(
                        {"action_id": action_id, "metric": name, "value": num, "text": text, "unit": m.unit() or None}
                    )
                    + "\n"
                )
            for col, metric in launch.items():
                v = values.get(metric)
                if col == "device_name":
                    row[col] = v if isinstance(v, str) else None
                else:
                    row[col] = int(v) if isinstance(v, float) and col != "duration_ns" else v
            fa.write(json.dumps(row) + "\n")
            for r in a.rule_results_as_dicts():
                msg = r.get("rule_message") or {}
                sp = r.get("speedup_estimation") or {}
                fr.write(
                    json.dumps(
                        {
                            "action_id": action_id,
                            "rule_id": r.get("rule_identifier"),
                            "rule_name": r.get("name"),
                            "section": r.get("section_identifier"),
                            "message_type": MSG_TYPES.get(msg.get("type", -1), str(msg.get("type"))),
                            "title": MARKUP_RE.sub(r"\1", msg.get("title") or "") or None,
                            "message": MARKUP_RE.sub(r"\1", msg.get("message") or "") or None,
                            "speedup_pct": sp.get("speedup"),
                            "speedup_type": SPEEDUP_TYPES.get(sp.get("type", -1)),
                            "focus_metrics": json.dumps(r.get("focus_metrics") or []),
                        }
                    )
                    + "\n"
                )
    (out / "report.json").write_text(
        json.dumps({"ncu_version": ncu_version(path), "ranges": n_ranges, "actions": len(actions)})
    )


def main(argv: list[str]) -> int:
    path, out = Path(argv[0]), Path(argv[1])
    try:
        read(path, out)
    except BadReport as e:
        print(str(e), file=sys.stderr)
        return 3
    except Exception as e:
        print(
            f"'{path}' could not be read by Nsight Compute's reader: {type(e).__name__}: {' '.join(str(e).split())}",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
